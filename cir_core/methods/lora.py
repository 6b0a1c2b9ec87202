"""LoRA on an open_clip text transformer, as weight parametrizations.

open_clip's attention is `nn.MultiheadAttention`, whose `in_proj_weight` is a bare Parameter
(no Linear to wrap), so LoRA is added at the weight level: `W' = W + B @ A * alpha / rank`
through `torch.nn.utils.parametrize`. B starts at zero, so a fresh LoRA leaves the tower exactly
unchanged. Dropout, which LoRA usually applies to the input activations, is applied here to the
input features of A (shared by every token of the batch), since the delta is a weight.
"""
from __future__ import annotations

import math
from typing import Iterable, Sequence

import torch
from torch import nn
from torch.nn.utils import parametrize

from cir_core.errors import BackboneError

# target name -> (sub-module path inside a residual block, weight attribute)
TARGETS: dict[str, tuple[str, str]] = {
    "in_proj": ("attn", "in_proj_weight"),
    "out_proj": ("attn.out_proj", "weight"),
    "c_fc": ("mlp.c_fc", "weight"),
    "c_proj": ("mlp.c_proj", "weight"),
}


class LoRADelta(nn.Module):
    """Parametrization `W ↦ W + B @ dropout(A) * scale` for a (out, in) weight."""

    def __init__(self, out_features: int, in_features: int, rank: int, alpha: float,
                 dropout: float = 0.0):
        super().__init__()
        if rank < 1:
            raise ValueError(f"LoRA rank must be >= 1, got {rank}")
        self.A = nn.Parameter(torch.empty(rank, in_features))
        self.B = nn.Parameter(torch.zeros(out_features, rank))
        nn.init.kaiming_uniform_(self.A, a=math.sqrt(5))  # peft's default for A
        self.scale = float(alpha) / rank
        self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()

    def forward(self, weight: torch.Tensor) -> torch.Tensor:
        a = self.A
        if self.training and isinstance(self.dropout, nn.Dropout):
            a = self.dropout(torch.ones_like(a[:1])) * a  # drop input features of the delta
        return weight + (self.B @ a).to(weight.dtype) * self.scale


def resolve_layers(spec: str | int | Sequence[int], n_layers: int) -> list[int]:
    """`"all"`, `"last:N"`, an int N (the last N), or explicit indices (negative allowed)."""
    if spec == "all":
        return list(range(n_layers))
    if isinstance(spec, str) and spec.startswith("last:"):
        spec = int(spec[5:])
    if isinstance(spec, int):
        if not 0 <= spec <= n_layers:
            raise ValueError(f"LoRA layers: asked for the last {spec} of {n_layers}")
        return list(range(n_layers - spec, n_layers))
    if isinstance(spec, str):
        raise ValueError(f"LoRA layers must be 'all', 'last:N', N or a list of ints, got {spec!r}")
    out = sorted({int(i) % n_layers for i in spec if -n_layers <= int(i) < n_layers})
    if len(out) != len(set(spec)):
        raise ValueError(f"LoRA layers {list(spec)} out of range for {n_layers} layers")
    return out


def add_lora(transformer: nn.Module, rank: int, alpha: float, dropout: float,
             layers: str | int | Sequence[int] = "all",
             targets: Iterable[str] = ("in_proj", "out_proj", "c_fc", "c_proj")) -> list[LoRADelta]:
    """Parametrize the chosen weights of `transformer.resblocks` in place; returns the deltas.
    Call it on a private copy: the parametrization changes the module's class."""
    targets = list(targets)
    unknown = [t for t in targets if t not in TARGETS]
    if unknown:
        raise ValueError(f"unknown LoRA target(s) {unknown}; choose from {list(TARGETS)}")
    blocks = getattr(transformer, "resblocks", None)
    if blocks is None:
        raise BackboneError(f"{type(transformer).__name__} has no resblocks: cannot add LoRA")
    deltas = []
    for i in resolve_layers(layers, len(blocks)):
        for t in targets:
            path, attr = TARGETS[t]
            mod = blocks[i].get_submodule(path)
            w = getattr(mod, attr, None)
            if not isinstance(w, torch.Tensor) or w.ndim != 2:
                raise BackboneError(f"text block {i} has no 2-D {path}.{attr} for LoRA target {t!r}")
            delta = LoRADelta(w.shape[0], w.shape[1], rank, alpha, dropout).to(w.device)
            parametrize.register_parametrization(mod, attr, delta)
            deltas.append(delta)
    return deltas


def is_lora_key(name: str) -> bool:
    """True for the trainable LoRA factors in a state-dict / parameter name."""
    return ".parametrizations." in name and name.rsplit(".", 1)[-1] in ("A", "B")
