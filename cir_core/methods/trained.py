"""What the trained heads on frozen towers (DiCE, PACE) share: the gated MLP block, checkpoint
folders (config.json + model.safetensors) and a memo of text embeddings.

A checkpoint folder's config.json holds: method, backbone (id), embed_dim, arch (what builds the
module), chord_lambda, hparams (the training recipe), metrics, git_commit.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from torch import nn

from cir_core.config import git_commit
from cir_core.memo import TextMemo

from .base import WEIGHTS, Method, check_fit, checkpoint_config, read_weights, write_checkpoint

log = logging.getLogger(__name__)


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
    TEXT_MEMO = 4096  # text embeddings kept (the app and validation repeat texts)

    def __init__(self, backbone: Any, config: dict | None = None, module: nn.Module | None = None):
        super().__init__(backbone, config)
        self.arch = self.config_cls.from_dict(self.config.get("arch", {}))  # type: ignore[union-attr]
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

    # -- checkpoints --------------------------------------------------------------------------
    @classmethod
    def from_checkpoint(cls, backbone: Any, folder: str | Path) -> "TrainedMethod":
        """Load a checkpoint folder; CheckpointError (one line) if it is missing, unreadable, for
        another method, or for another embedding dimension (checked before the weights)."""
        folder = Path(folder)
        cfg = checkpoint_config(folder, (cls.name,), backbone, {"embed_dim": backbone.dim})
        method = cls(backbone, cfg)
        path = folder / WEIGHTS
        expected = {k: tuple(v.shape) for k, v in method.module.state_dict().items()}
        what = f"{cls.name} with arch {method.arch}"
        method.module.load_state_dict(read_weights(path, lambda shapes: check_fit(shapes, expected, str(path), what)))
        return method

    def save(self, folder: str | Path, metrics: dict | None = None, hparams: dict | None = None) -> Path:
        """Write config.json + model.safetensors into `folder` (created; files replaced atomically)."""
        folder = Path(folder)
        config = {"method": self.name, "backbone": self.backbone.id, "embed_dim": self.backbone.dim,
                  "arch": self.arch.to_dict(), "chord_lambda": self.chord_lambda,
                  "hparams": hparams if hparams is not None else self.config.get("hparams", {}),
                  "metrics": metrics if metrics is not None else self.config.get("metrics", {}),
                  "git_commit": git_commit()}
        state = {k: v.detach().float().cpu().contiguous() for k, v in self.module.state_dict().items()}
        write_checkpoint(folder, state, config, self.name)
        self.config.update(config)
        return folder
