"""DiCE (seed 001): direct composition of the reference and edit embeddings by a gated MLP.

    x = LayerNorm([z_r; z_e]),   ẑ = W_p(GELU(W_1 x) ⊙ W_2 x),   hidden 4D, dropout 0.05

z_r is the reference image embedding at inference (training also feeds the reference caption's
embedding, see training/train_dice.py). q_∅ is Φ(v_r, f_T("")): the same module with the empty
edit, so Chord's q − q_∅ is the change the edit text causes.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from cir_core.config import DictConfig

from .base import register_method
from .refs import Refs
from .trained import GatedMLP, TrainedMethod


@dataclass
class DiCEConfig(DictConfig):
    """DiCE's architecture (seed 001): hidden width = hidden_mult × D, dropout 0.05."""

    hidden_mult: float = 4.0
    dropout: float = 0.05


class DiCENet(nn.Module):
    """Φ(z_r, z_e) → ẑ (D,), unnormalised."""

    def __init__(self, dim: int, cfg: DiCEConfig | None = None):
        super().__init__()
        cfg = cfg or DiCEConfig()
        self.mlp = GatedMLP(2 * dim, int(cfg.hidden_mult * dim), dim, cfg.dropout)

    def forward(self, z_r: torch.Tensor, z_e: torch.Tensor) -> torch.Tensor:
        return self.mlp(torch.cat([z_r, z_e], dim=-1))


@register_method
class DiCE(TrainedMethod):
    name = "dice"
    label = "DiCE"
    description = "gated MLP on [v_r; f_T(edit)] (DiCE-CIR)"
    app_role = "column"
    order = 11
    config_cls = DiCEConfig

    @classmethod
    def build_module(cls, dim: int, arch: DiCEConfig) -> nn.Module:
        return DiCENet(dim, arch)

    @torch.no_grad()
    def _compose(self, refs: Refs, texts: list[str]) -> np.ndarray:
        ref, z_e = refs.emb, self.encode_texts(texts)
        out = [self.module(self._tensor(ref[i:i + 4096]), self._tensor(z_e[i:i + 4096])).float().cpu()
               for i in range(0, len(ref), 4096)]
        return torch.cat(out).numpy()
