"""PACT (seed 000) as a registered method (its compose-only ablation is `compose_only.py`).

A mapper φ turns v_r into a pseudo-word placed at `$` in `"a photo of $ that {edit}"`, read by a
LoRA-adapted copy of the backbone's text tower (`pact_model.py`). q_∅ is `"a photo of $"`.
Checkpoint = a folder with `config.json` (method, backbone id, dims, hyper-parameters,
`chord_lambda`, training metrics, git commit) and `model.safetensors` (φ + LoRA only).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from cir_core.config import git_commit

from .base import (WEIGHTS, Method, check_fit, checkpoint_config, normalise, read_weights, register_method,
                   write_checkpoint)
from .pact_model import EMPTY_PROMPT, PROMPT, PACTComposer, PACTConfig, edit_prompt
from .refs import RefInput, Refs

FORMAT_VERSION = 1


@register_method
class PACT(Method):
    name = "pact"
    label = "PACT"
    description = "φ(v_r) as a pseudo-word in 'a photo of $ that {edit}', LoRA text tower (L_compose + L_preserve)"
    app_role = "column"
    needs_checkpoint = True
    config_cls = PACTConfig
    family = ("pact", "compose-only")  # checkpoints either of these trainers writes load here
    batch_size = 256

    def __init__(self, backbone: Any, config: dict | None = None,
                 composer: PACTComposer | None = None):
        """`config["arch"]` holds PACTConfig fields; `composer` (a trainer's) is used as is."""
        super().__init__(backbone, config)
        self.arch = composer.cfg if composer is not None else PACTConfig.from_dict(self.config.get("arch", {}))
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
    def save(self, folder: str | os.PathLike, metrics: dict | None = None, **extra: Any) -> Path:
        """Write `config.json` + `model.safetensors` (trainable weights only) to `folder`."""
        folder = Path(folder)  # write_checkpoint creates it
        state = {k: v.detach().cpu().contiguous() for k, v in self.composer.state_dict().items()}
        fresh = {
            "method": self.name, "format_version": FORMAT_VERSION, "backbone": self.backbone.id,
            "embed_dim": self.composer.dim, "token_width": self.composer.width,
            "prompt": PROMPT, "empty_prompt": EMPTY_PROMPT, "arch": self.arch.to_dict(),
            "chord_lambda": self.chord_lambda, "metrics": dict(metrics or {}), "git_commit": git_commit()}
        # other keys of a loaded checkpoint (its training recipe, λ search) travel along
        config = {**{k: v for k, v in self.config.items() if k not in fresh}, **fresh, **extra}
        write_checkpoint(folder, state, config, self.name)
        return folder

    @classmethod
    def from_checkpoint(cls, backbone: Any, folder: str | os.PathLike) -> "PACT":
        """Load a checkpoint folder; CheckpointError if it was made for another embedding
        dimension / token width, or its tensors do not fit."""
        folder = Path(folder)
        width = int(backbone.model.token_embedding.weight.shape[1]) \
            if hasattr(backbone.model, "token_embedding") else None
        cfg = checkpoint_config(folder, cls.family, backbone, {"embed_dim": backbone.dim, "token_width": width})
        method = cls(backbone, cfg)
        path = folder / WEIGHTS
        expected = {k: tuple(v.shape) for k, v in method.composer.state_dict().items()}
        state = read_weights(path, lambda shapes: check_fit(shapes, expected, str(path), cls.name))
        method.composer.load_state_dict(state, strict=True)
        return method
