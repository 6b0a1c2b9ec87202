"""SEARLE (Baldrati et al., ICCV 2023; miccunifi/SEARLE) as a registered method, an optional column.

φ is the authors' `Phi` (`src/phi.py`: Linear-GELU-Dropout-Linear-GELU-Dropout-Linear, hidden
4 × the image-feature dimension, dropout 0.5; SEARLE is ViT-B/32 512→2048→512, SEARLE-XL is
ViT-L/14 768→3072→768, `hubconf.py`), distilled from optimisation-based textual inversion
(`src/oti_inversion.py`, `src/train_phi.py`; our trainer: training/train_searle.py). Their
checkpoints are `torch.save({'epoch': ..., 'Phi': phi.state_dict()})` (`save_phi`); the released
`SEARLE_ViT{B32,L14}.pt` are read the same way (`hubconf.py`: `...['Phi']`). The query is
`"a photo of $ that {edit}"` (`src/validate.py`) with φ(v_r) at the first `$`
(`src/encode_with_pseudo_tokens.py`); q_∅ is `"a photo of $"`.
"""
from __future__ import annotations

from typing import Any

from torch import nn

from .base import register_method
from .textinv import PhiConfig, TextInversionMethod, build_phi, phi_arch_from_state


@register_method
class SEARLE(TextInversionMethod):
    name = "searle"
    label = "SEARLE"
    description = "φ(v_r) (distilled from OTI) as $ in 'a photo of $ that {edit}', frozen text tower"
    config_cls = PhiConfig
    prompt = "a photo of $ that {edit}"
    empty_prompt = "a photo of $"
    placeholder = "$"
    replace = "first"
    source_key = "Phi"
    source_file = "miccunifi/SEARLE src/train_phi.py (save_phi), src/phi.py (Phi), hubconf.py"

    @classmethod
    def build_mapper(cls, dim: int, width: int, arch: PhiConfig) -> nn.Module:
        return build_phi(dim, width, arch)

    @classmethod
    def arch_from_state(cls, shapes: dict[str, tuple], arch: Any) -> PhiConfig:
        return phi_arch_from_state(shapes, arch)
