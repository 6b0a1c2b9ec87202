"""PACT (seed 000) as a registered method (its compose-only ablation is `compose_only.py`).

A mapper φ turns v_r into a pseudo-word placed at `$` in `"a photo of $ that {edit}"`, read by a
LoRA-adapted copy of the backbone's text tower (`pact_model.py`). q_∅ is `"a photo of $"`.
Checkpoint (`cir_core.checkpoint`): `model.safetensors` holds φ + LoRA only; config.json's
`extra` records the prompts (and the trainer's objective).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from ..encoder import Encoder, Towers, as_towers
from .base import Method, normalise, register_method
from .pact_model import PACTComposer, PACTConfig
from .pseudoword import EMPTY_PROMPT, PROMPT, edit_prompt, token_width
from .refs import RefInput, Refs


@register_method
class PACT(Method):
    name = "pact"
    label = "PACT"
    description = "φ(v_r) as a pseudo-word in 'a photo of $ that {edit}', LoRA text tower (L_compose + L_preserve)"
    app_role = "column"
    order = 10
    needs_checkpoint = True
    config_cls = PACTConfig
    checkpoint_family = ("pact", "compose-only")  # checkpoints either of these trainers writes load here
    weights_label = "φ + LoRA"
    batch_size = 256

    def __init__(self, backbone: Towers, config: dict | None = None,
                 composer: PACTComposer | None = None):
        """`config["arch"]` holds PACTConfig fields; `composer` (a trainer's) is used as is."""
        super().__init__(backbone, config)
        if composer is not None:
            self.arch = composer.cfg
        self.composer = composer if composer is not None else PACTComposer(backbone, self.arch).eval()

    # -- composition --------------------------------------------------------------------------
    @torch.no_grad()
    def _queries(self, ref: np.ndarray, texts: list[str], empty: bool) -> np.ndarray:
        out = []
        dev = next(self.composer.parameters()).device
        for i in range(0, len(ref), self.batch_size):
            r = torch.from_numpy(np.ascontiguousarray(ref[i:i + self.batch_size])).to(dev)
            tokens = self.composer.tokenize(texts[i:i + self.batch_size], empty=empty).to(dev)
            out.append(self.composer(r, tokens).float().cpu().numpy())
        return np.concatenate(out)

    def _compose(self, refs: Refs, texts: list[str]) -> np.ndarray:
        return self._queries(refs.emb, texts, empty=False)

    def compose_empty(self, ref: RefInput) -> np.ndarray:
        """q_∅ = f_T("a photo of $") with φ(v_r) at `$` (not an empty edit string)."""
        ref = self._check_ref(ref).emb
        if not len(ref):
            return np.zeros((0, self.backbone.dim), np.float32)
        return normalise(self._queries(ref, [""] * len(ref), empty=True))

    @torch.no_grad()
    def compose_pair(self, ref: RefInput, text: str) -> tuple[np.ndarray, np.ndarray]:
        """q and q_∅ in one forward of the LoRA tower (two prompt rows, one reference)."""
        ref = self._check_ref(ref).emb[:1]
        dev = next(self.composer.parameters()).device
        r = torch.from_numpy(np.ascontiguousarray(np.repeat(ref, 2, 0))).to(dev)
        tokens = self.composer.tokenize_prompts([edit_prompt(text), EMPTY_PROMPT]).to(dev)
        q = normalise(self.composer(r, tokens).float().cpu().numpy())
        return q[:1], q[1:]

    # -- checkpoints --------------------------------------------------------------------------
    def weights(self) -> nn.Module:
        return self.composer  # its state dict is φ + LoRA only (pact_model)

    @classmethod
    def checkpoint_needs(cls, backbone: Encoder) -> dict[str, Any]:
        return {"embed_dim": backbone.dim, "token_width": token_width(as_towers(backbone, cls.name).model)}

    def checkpoint_extra(self) -> dict[str, Any]:
        return {"prompt": PROMPT, "empty_prompt": EMPTY_PROMPT}
