"""What the textual-inversion methods (Pic2Word, SEARLE, LinCIR) share.

A mapper φ turns the reference embedding into one pseudo-word token; the token stands at the
placeholder of the method's published prompt (`pseudoword.py`, shared with PACT), and the
backbone's own text tower, frozen as in the papers (no LoRA, no copy), reads the prompt. Only φ
is trained, so a checkpoint is φ's state dict, under the key names of the authors' module
definitions, plus `config.json` (`extra`: the prompts, the placeholder and how many take φ).

What φ reads is recorded in the checkpoint's `arch`. The authors' φ reads the raw CLIP image
feature f_I(x) (never L2-normalised): a converted release has `raw_input`, and φ reads
‖f_I(x)‖ · v_r with each reference's own raw norm (`Refs.norms`, recorded with every
embedding). The world-trained peers read `input_scale · v_r`, one scale standing in for the raw
norm (the mean raw image-feature norm of the backbone they were trained on), and train on it
(see docs/METHODS.md).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Sequence

import numpy as np
import torch
from torch import nn

from cir_core.checkpoint import check_fit
from cir_core.config import DictConfig
from cir_core.errors import BackboneError

from ..encoder import Encoder, Towers, as_towers
from .base import Method, normalise
from .pseudoword import EMPTY_PROMPT, PLACEHOLDER, PROMPT, PseudoWord, fill, token_width
from .refs import RefInput, Refs


# -- φ as SEARLE publishes it (LinCIR's models.Phi is a copy of it) -----------------------------
@dataclass
class PhiConfig(DictConfig):
    """SEARLE's / LinCIR's φ: Linear(D,H)-GELU-Dropout-Linear(H,H)-GELU-Dropout-Linear(H,W).
    `hidden_dim` 0 means 4 × D (`train_phi.py`: `hidden_dim=...output_dim * 4` / `projection_dim * 4`)."""

    hidden_dim: int = 0
    dropout: float = 0.5
    input_scale: float = 1.0
    raw_input: bool = False  # φ reads the raw image feature (the authors' code), not input_scale · v_r


class Phi(nn.Module):
    """SEARLE `src/phi.py` (= LinCIR `models.py: Phi`): the same layers, so the same state-dict
    keys (`layers.0`, `layers.3`, `layers.6`, each `.weight` / `.bias`)."""

    def __init__(self, input_dim: int, hidden_dim: int, output_dim: int, dropout: float):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(input_dim, hidden_dim), nn.GELU(), nn.Dropout(p=dropout),
            nn.Linear(hidden_dim, hidden_dim), nn.GELU(), nn.Dropout(p=dropout),
            nn.Linear(hidden_dim, output_dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


def build_phi(dim: int, width: int, arch: PhiConfig) -> Phi:
    return Phi(dim, arch.hidden_dim or 4 * dim, width, arch.dropout)


def phi_arch_from_state(shapes: dict[str, tuple], arch: PhiConfig) -> PhiConfig:
    """φ's hidden width as the checkpoint has it (the rest from `arch`)."""
    w = shapes.get("layers.0.weight")
    return PhiConfig(hidden_dim=int(w[0]) if w else arch.hidden_dim, dropout=arch.dropout,
                     input_scale=arch.input_scale, raw_input=arch.raw_input)


# -- the method ---------------------------------------------------------------------------------
class TextInversionMethod(Method):
    """A registered textual-inversion method: q = f_T(prompt with φ(x) at the placeholder), x the
    raw feature or s·v_r (`phi_input`),
    q_∅ = f_T(empty_prompt with the same token). Subclasses set the prompt, the placeholder,
    how many placeholders take the token, φ's architecture and where the authors' checkpoint
    keeps φ's state dict (`source_key`)."""

    needs_checkpoint = True
    app_role = "optional"
    weights_label = "φ"
    prompt: ClassVar[str]
    empty_prompt: ClassVar[str]
    placeholder: ClassVar[str] = PLACEHOLDER
    replace: ClassVar[str] = "first"
    source_key: ClassVar[str] = "Phi"  # the key of φ's state dict in the authors' torch.save dict
    source_file: ClassVar[str] = ""  # where that layout comes from (docs and error messages)
    batch_size = 256

    def __init__(self, backbone: Towers, config: dict | None = None, mapper: nn.Module | None = None):
        super().__init__(backbone, config)
        self.text = PseudoWord(backbone.tokenizer, backbone.model, self.placeholder, self.replace)
        self.mapper = mapper if mapper is not None else self.build_mapper(backbone.dim, self.text.width, self.arch)
        self.mapper.to(next(backbone.model.parameters()).device).eval()

    # -- what a subclass provides ---------------------------------------------------------------
    @classmethod
    def build_mapper(cls, dim: int, width: int, arch: Any) -> nn.Module:
        raise NotImplementedError

    @classmethod
    def arch_from_state(cls, shapes: dict[str, tuple], arch: Any) -> Any:
        """The architecture a state dict of these shapes was saved from (hidden widths)."""
        raise NotImplementedError

    # -- composition ----------------------------------------------------------------------------
    def prompts(self, edits: Sequence[str]) -> list[str]:
        """The published prompt for each edit; an empty edit gives q_∅'s prompt."""
        return [fill(self.prompt, e) if str(e).strip() else self.empty_prompt for e in edits]

    def phi_input(self, refs: Refs) -> np.ndarray:
        """(B, D) what φ reads: the raw image features (`raw_input`: the authors' convention) or
        `input_scale · v_r` (the world-trained peers')."""
        if getattr(self.arch, "raw_input", False):
            return refs.raw(f"{self.label} (a release converted from its authors' checkpoint)")
        return refs.emb * np.float32(self.arch.input_scale)

    def pseudo(self, ref: torch.Tensor) -> torch.Tensor:
        """φ(s · v_r) for unit `ref`: (B, W) pseudo-word token embeddings (the trainers' path; a
        `raw_input` φ reads raw features, which `phi_input` gives)."""
        if getattr(self.arch, "raw_input", False):
            raise BackboneError(f"{self.name}: this φ reads raw image features; use phi_input(Refs)")
        return self.mapper(ref * float(self.arch.input_scale))

    def query(self, ref: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """Unnormalised queries (differentiable in φ: the trainers call this)."""
        return self.text.encode(tokens, self.pseudo(ref))

    @torch.no_grad()
    def _queries(self, refs: Refs, prompts: list[str]) -> np.ndarray:
        x = self.phi_input(refs)
        dev = next(self.mapper.parameters()).device
        out = []
        for i in range(0, len(x), self.batch_size):
            token = self.mapper(torch.from_numpy(np.ascontiguousarray(x[i:i + self.batch_size])).to(dev))
            out.append(self.text.encode(self.text.tokenize(prompts[i:i + self.batch_size]), token).float().cpu().numpy())
        return np.concatenate(out)

    def _compose(self, refs: Refs, texts: list[str]) -> np.ndarray:
        return self._queries(refs, self.prompts(texts))

    def compose_empty(self, ref: RefInput) -> np.ndarray:
        """q_∅ = f_T(empty_prompt) with φ(v_r) at the placeholder."""
        refs = self._check_ref(ref)
        if not len(refs):
            return np.zeros((0, self.backbone.dim), np.float32)
        return normalise(self._queries(refs, [self.empty_prompt] * len(refs)))

    # -- checkpoints ----------------------------------------------------------------------------
    def weights(self) -> nn.Module:
        return self.mapper

    @classmethod
    def checkpoint_needs(cls, backbone: Encoder) -> dict[str, Any]:
        return {"embed_dim": backbone.dim, "token_width": token_width(as_towers(backbone, cls.name).model)}

    def checkpoint_extra(self) -> dict[str, Any]:
        return {"prompt": self.prompt, "empty_prompt": self.empty_prompt, "placeholder": self.placeholder,
                "replace": self.replace}

    @classmethod
    def check_state(cls, shapes: dict[str, tuple], expected: dict[str, tuple], where: str) -> None:
        """CheckpointError naming the file, the key and both shapes of every mismatch (the
        converter's check of an authors' file, before any tensor is loaded)."""
        check_fit(shapes, expected, where, f"{cls.name}'s {cls.weights_label}")


class PhiMethod(TextInversionMethod):
    """SEARLE's φ (`Phi`, which LinCIR copies) in SEARLE's prompt: what SEARLE and LinCIR share;
    they differ in training and in how many `$` take the token."""

    config_cls = PhiConfig
    prompt = PROMPT
    empty_prompt = EMPTY_PROMPT
    placeholder = PLACEHOLDER
    source_key = "Phi"

    @classmethod
    def build_mapper(cls, dim: int, width: int, arch: PhiConfig) -> nn.Module:
        return build_phi(dim, width, arch)

    @classmethod
    def arch_from_state(cls, shapes: dict[str, tuple], arch: Any) -> PhiConfig:
        return phi_arch_from_state(shapes, arch)
