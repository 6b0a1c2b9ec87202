"""Pic2Word (Saito et al., CVPR 2023; google-research/composed_image_retrieval) as a registered
method, an optional column.

φ is the authors' IM2TEXT (`model/model.py`): n_layer blocks of Linear-Dropout-ReLU, then
`fc_out`, from the image embedding to one token of the text tower's width (keys
`layers.<i>.0.weight/bias`, `fc_out.weight/bias`). Their checkpoint (`src/main.py`) is a
`torch.save` dict whose `state_dict_img2text` holds it, keys prefixed `module.` under DDP.
The query is the CIRR prompt of `src/data.py`, `"a photo of * , {edit}"`, with φ(v_r) at the
first `*` (`encode_text_img_retrieval`); q_∅ is the training prompt, `"a photo of *"`
(`src/trainer.py: get_text_features`, the token appended to "a photo of").
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from cir_core.config import DictConfig

from .base import register_method
from .textinv import TextInversionMethod


@dataclass
class Pic2WordConfig(DictConfig):
    """IM2TEXT's hyper-parameters (`src/params.py`: `--middle_dim` 512, `--n-layer` 2; dropout
    0.1, IM2TEXT's default, which `main.py` does not override) and what φ reads (textinv)."""

    middle_dim: int = 512
    n_layer: int = 2
    dropout: float = 0.1
    input_scale: float = 1.0
    raw_input: bool = False  # φ reads the raw image feature (the authors' code), not input_scale · v_r


class IM2TEXT(nn.Module):
    """The authors' mapper, layer for layer (so their state-dict keys load as they are)."""

    def __init__(self, embed_dim: int = 512, middle_dim: int = 512, output_dim: int = 512,
                 n_layer: int = 2, dropout: float = 0.1):
        super().__init__()
        self.fc_out = nn.Linear(middle_dim, output_dim)
        layers, dim = [], embed_dim
        for _ in range(n_layer):
            layers.append(nn.Sequential(nn.Linear(dim, middle_dim), nn.Dropout(dropout), nn.ReLU()))
            dim = middle_dim
        self.layers = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return self.fc_out(x)


@register_method
class Pic2Word(TextInversionMethod):
    name = "pic2word"
    label = "Pic2Word"
    order = 21
    description = "IM2TEXT(v_r) as the word * in 'a photo of * , {edit}', frozen text tower (image-only training)"
    config_cls = Pic2WordConfig
    prompt = "a photo of * , {edit}"
    empty_prompt = "a photo of *"
    placeholder = "*"
    replace = "first"
    source_key = "state_dict_img2text"
    authors_protocols = {"fashioniq": "pic2word"}  # src/data.py: 'a photo of * , {cap2} and {cap1}'
    source_file = "google-research/composed_image_retrieval src/main.py (torch.save), model/model.py (IM2TEXT)"

    @classmethod
    def build_mapper(cls, dim: int, width: int, arch: Pic2WordConfig) -> nn.Module:
        return IM2TEXT(embed_dim=dim, middle_dim=arch.middle_dim, output_dim=width,
                       n_layer=arch.n_layer, dropout=arch.dropout)

    @classmethod
    def arch_from_state(cls, shapes: dict[str, tuple], arch: Any) -> Pic2WordConfig:
        n = len({k.split(".")[1] for k in shapes if k.startswith("layers.") and k.endswith(".0.weight")})
        w = shapes.get("layers.0.0.weight")
        return Pic2WordConfig(middle_dim=int(w[0]) if w else arch.middle_dim, n_layer=n or arch.n_layer,
                              dropout=arch.dropout, input_scale=arch.input_scale, raw_input=arch.raw_input)
