"""LinCIR (Gu et al., CVPR 2024; navervision/lincir) as a registered method, an optional column.

φ is LinCIR's `Phi` (`models.py`, a copy of SEARLE's: hidden 4 × projection_dim, dropout 0.5),
trained on text alone (self-masking projection, training/train_lincir.py). Their checkpoints are
`torch.save({'epoch': ..., 'Phi': phi.state_dict()})` (`train_phi.py: save_phi`; the released
`lincir_large.pt` is read as `state_dict['Phi']` in `demo.py`). The query is
`"a photo of $ that {edit}"` (`validate.py`) and *every* `$` token takes φ(v_r)
(`encode_with_pseudo_tokens.py: encode_with_pseudo_tokens_HF`, `torch.where(text == 259, ...)`);
q_∅ is `"a photo of $"`, the prompt LinCIR's loader falls back to when a caption has no keyword.
"""
from __future__ import annotations

from .base import register_method
from .textinv import PhiMethod


@register_method
class LinCIR(PhiMethod):
    name = "lincir"
    label = "LinCIR"
    order = 20
    description = "φ(v_r) (language-only training) as $ in 'a photo of $ that {edit}', frozen text tower"
    replace = "all"
    authors_protocols = {"fashioniq": "both-orders"}  # validate.py: fiq_generate_val_predictions
    source_file = "navervision/lincir train_phi.py (save_phi), models.py (Phi), demo.py"

