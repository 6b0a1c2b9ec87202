"""What the trained heads on frozen towers (DiCE, PACE) share: the gated MLP block, a module
built from `arch` (its state dict is the checkpoint, `Method.save` / `from_checkpoint`) and a
memo of text embeddings.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch
from torch import nn

from cir_core.memo import TextMemo

from ..encoder import Encoder
from .base import Method


class GatedMLP(nn.Module):
    """DiCE's block (seed 001 eq. 3-4): x = LayerNorm(input); W_p(GELU(W_1 x) ⊙ W_2 x).
    Dropout (on the gated hidden state) is the paper's 0.05; where it sits is not stated."""

    def __init__(self, in_dim: int, hidden: int, out_dim: int, dropout: float = 0.05,
                 zero_out: bool = False):
        super().__init__()
        self.norm = nn.LayerNorm(in_dim)
        self.w1, self.w2 = nn.Linear(in_dim, hidden), nn.Linear(in_dim, hidden)
        self.drop = nn.Dropout(dropout)
        self.wp = nn.Linear(hidden, out_dim)
        if zero_out:  # a residual branch that starts as the identity
            nn.init.zeros_(self.wp.weight)
            nn.init.zeros_(self.wp.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.norm(x)
        return self.wp(self.drop(nn.functional.gelu(self.w1(x)) * self.w2(x)))


class TrainedMethod(Method):
    """A Method backed by a small torch module over frozen embeddings."""

    needs_checkpoint = True
    weights_label = "network"
    TEXT_MEMO = 4096  # text embeddings kept (the app and validation repeat texts)

    def __init__(self, backbone: Encoder, config: dict | None = None, module: nn.Module | None = None):
        super().__init__(backbone, config)
        self.module = (module if module is not None else self.build_module(backbone.dim, self.arch))
        self.module.to(getattr(backbone, "device", "cpu")).eval()
        self._texts = TextMemo.of(backbone, self.TEXT_MEMO)  # the engine's own when it gives one

    @classmethod
    def build_module(cls, dim: int, arch: Any) -> nn.Module:
        """The network for embedding dimension `dim` and the architecture `arch` (a `config_cls`)."""
        raise NotImplementedError

    # -- text embeddings ----------------------------------------------------------------------
    def encode_texts(self, texts: Sequence[str]) -> np.ndarray:
        """f_T of each text (L2-normalised, (B, D)), memoised: only unseen texts are encoded."""
        return self._texts.encode_texts(list(texts))

    def _tensor(self, x: np.ndarray) -> torch.Tensor:
        p = next(self.module.parameters())
        return torch.as_tensor(np.asarray(x, np.float32), device=p.device)

    def weights(self) -> nn.Module:
        return self.module
