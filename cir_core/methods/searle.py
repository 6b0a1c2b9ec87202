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

from .base import register_method
from .textinv import PhiMethod


@register_method
class SEARLE(PhiMethod):
    name = "searle"
    label = "SEARLE"
    order = 22
    description = "φ(v_r) (distilled from OTI) as $ in 'a photo of $ that {edit}', frozen text tower"
    replace = "first"
    authors_protocols = {"fashioniq": "both-orders"}  # src/validate.py: fiq_generate_val_predictions
    source_file = "miccunifi/SEARLE src/train_phi.py (save_phi), src/phi.py (Phi), hubconf.py"

