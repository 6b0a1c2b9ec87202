"""What the textual-inversion methods (Pic2Word, SEARLE, LinCIR) share.

A mapper φ turns the reference embedding into one pseudo-word token; the token stands at the
placeholder of the method's published prompt, and the backbone's own text tower, frozen as in
the papers (no LoRA, no copy), reads the prompt. Only φ is trained, so a checkpoint is φ's
state dict, under the key names of the authors' module definitions, plus `config.json`.

What φ reads is recorded in the checkpoint's `arch`. The authors' φ reads the raw CLIP image
feature f_I(x) (never L2-normalised): a converted release has `raw_input`, and φ reads
‖f_I(x)‖ · v_r with each reference's own raw norm (`Refs.norms`, recorded with every
embedding). The world-trained peers read `input_scale · v_r`, one scale standing in for the raw
norm (the mean raw image-feature norm of the backbone they were trained on), and train on it
(see docs/METHODS.md).
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Sequence

import numpy as np
import torch
from torch import nn

from cir_core.config import DictConfig, git_commit
from cir_core.errors import BackboneError
from cir_core.text_tower import encode_tokens, supports_token_embeddings, trim

from .base import WEIGHTS, Method, check_fit, checkpoint_config, normalise, read_weights, write_checkpoint
from .refs import RefInput, Refs

log = logging.getLogger(__name__)
FORMAT_VERSION = 1


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


# -- the text side ------------------------------------------------------------------------------
def token_id(tokenizer: Any, word: str) -> int:
    """The one token id the tokenizer gives a space-separated `word`; BackboneError otherwise."""
    ids = [int(t) for t in tokenizer([f" {word} "])[0] if int(t) != 0]
    if len(ids) != 3:  # start, the word, end
        raise BackboneError(f"the tokenizer splits the placeholder {word!r} into {len(ids) - 2} tokens; "
                            "a pseudo-word needs exactly one")
    return ids[1]


def token_width(backbone: Any) -> int:
    if not supports_token_embeddings(backbone.model):
        raise BackboneError(f"{type(backbone.model).__name__} has no open_clip CLIP text tower with "
                            "injectable token embeddings (needed for a pseudo-word)")
    return int(backbone.model.token_embedding.weight.shape[1])


class PseudoWordPrompts:
    """The backbone's own frozen text tower reading prompts with a pseudo-word at the placeholder.
    `replace="first"`: only the first placeholder token takes it (SEARLE's
    `encode_with_pseudo_tokens`, Pic2Word's `encode_text_img_retrieval`); `"all"`: every one does
    (LinCIR's `encode_with_pseudo_tokens_HF`, `torch.where(text == 259, ...)`)."""

    def __init__(self, backbone: Any, placeholder: str, replace: str = "first"):
        if replace not in ("first", "all"):
            raise ValueError(f"replace must be 'first' or 'all', got {replace!r}")
        self.model, self.tokenizer = backbone.model, backbone.tokenizer
        self.width = token_width(backbone)
        self.placeholder, self.replace = placeholder, replace
        self.id = token_id(self.tokenizer, placeholder)

    def tokenize(self, prompts: Sequence[str]) -> torch.Tensor:
        """(B, L) tokens, trailing padding trimmed; BackboneError naming the row without a placeholder."""
        tokens = trim(self.tokenizer(list(prompts)))
        missing = ~(tokens == self.id).any(1)
        if bool(missing.any()):
            row = int(missing.nonzero()[0, 0])
            raise BackboneError(f"placeholder {self.placeholder!r} (token {self.id}) not in prompt "
                                f"{row} {list(prompts)[row]!r} (truncated at the context length?)")
        return tokens

    def mask(self, tokens: torch.Tensor) -> torch.Tensor:
        """(B, L) bool: where the pseudo-word goes."""
        hit = tokens == self.id
        if self.replace == "all":
            return hit
        first = hit.int().argmax(1)
        return torch.arange(tokens.shape[1], device=tokens.device)[None] == first[:, None]

    def encode(self, tokens: torch.Tensor, pseudo: torch.Tensor) -> torch.Tensor:
        """Unnormalised text features of `tokens` with the (B, W) `pseudo` embeddings at the
        placeholder (gradients flow to `pseudo` only: the tower is frozen)."""
        tokens = tokens.to(pseudo.device)
        emb = self.model.token_embedding(tokens)
        emb = torch.where(self.mask(tokens)[..., None], pseudo[:, None, :].to(emb.dtype), emb)
        return encode_tokens(self.model, tokens, emb)

    def encode_plain(self, tokens: torch.Tensor) -> torch.Tensor:
        """Unnormalised text features of plain tokens (no pseudo-word)."""
        return encode_tokens(self.model, tokens.to(next(self.model.parameters()).device))


def fill(template: str, edit: str) -> str:
    """`template.format(edit=...)` with the edit's whitespace collapsed (the tokenizer lower-cases)."""
    return template.format(edit=" ".join(str(edit).split()))


# -- the method ---------------------------------------------------------------------------------
class TextInversionMethod(Method):
    """A registered textual-inversion method: q = f_T(prompt with φ(x) at the placeholder), x the
    raw feature or s·v_r (`phi_input`),
    q_∅ = f_T(empty_prompt with the same token). Subclasses set the prompt, the placeholder,
    how many placeholders take the token, φ's architecture and where the authors' checkpoint
    keeps φ's state dict (`source_key`)."""

    needs_checkpoint = True
    app_role = "optional"
    prompt: ClassVar[str]
    empty_prompt: ClassVar[str]
    placeholder: ClassVar[str] = "$"
    replace: ClassVar[str] = "first"
    source_key: ClassVar[str] = "Phi"  # the key of φ's state dict in the authors' torch.save dict
    source_file: ClassVar[str] = ""  # where that layout comes from (docs and error messages)
    batch_size = 256

    def __init__(self, backbone: Any, config: dict | None = None, mapper: nn.Module | None = None):
        super().__init__(backbone, config)
        self.arch = self.config_cls.from_dict(self.config.get("arch", {}))  # type: ignore[union-attr]
        self.text = PseudoWordPrompts(backbone, self.placeholder, self.replace)
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
    def save(self, folder: str | os.PathLike, metrics: dict | None = None, **extra: Any) -> Path:
        """Write `config.json` + `model.safetensors` (φ only, the authors' key names)."""
        folder = Path(folder)  # write_checkpoint creates it
        state = {k: v.detach().float().cpu().contiguous() for k, v in self.mapper.state_dict().items()}
        fresh = {"method": self.name, "format_version": FORMAT_VERSION, "backbone": self.backbone.id,
                 "embed_dim": self.backbone.dim, "token_width": self.text.width, "prompt": self.prompt,
                 "empty_prompt": self.empty_prompt, "placeholder": self.placeholder, "replace": self.replace,
                 "arch": self.arch.to_dict(), "chord_lambda": self.chord_lambda,
                 "metrics": dict(metrics if metrics is not None else self.config.get("metrics", {})),
                 "git_commit": git_commit()}
        config = {**{k: v for k, v in self.config.items() if k not in fresh}, **fresh, **extra}
        write_checkpoint(folder, state, config, self.name)
        self.config.update(config)
        return folder

    @classmethod
    def check_state(cls, shapes: dict[str, tuple], expected: dict[str, tuple], where: str) -> None:
        """CheckpointError naming the file, the key and both shapes of every mismatch."""
        check_fit(shapes, expected, where, f"{cls.name}'s φ")

    @classmethod
    def from_checkpoint(cls, backbone: Any, folder: str | os.PathLike) -> "TextInversionMethod":
        """Load a checkpoint folder; CheckpointError (one line) if it is for another method, another
        embedding dimension or token width, or its tensors do not fit (file, key and shapes named)."""

        folder = Path(folder)
        cfg = checkpoint_config(folder, (cls.name,), backbone,
                                {"embed_dim": backbone.dim, "token_width": token_width(backbone)})
        method = cls(backbone, cfg)
        path = folder / WEIGHTS
        expected = {k: tuple(v.shape) for k, v in method.mapper.state_dict().items()}
        state = read_weights(path, lambda shapes: cls.check_state(shapes, expected, str(path)))
        method.mapper.load_state_dict(state, strict=True)
        return method


class PhiMethod(TextInversionMethod):
    """SEARLE's φ (`Phi`, which LinCIR copies) in SEARLE's prompt: what SEARLE and LinCIR share;
    they differ in training and in how many `$` take the token."""

    config_cls = PhiConfig
    prompt = "a photo of $ that {edit}"
    empty_prompt = "a photo of $"
    placeholder = "$"
    source_key = "Phi"

    @classmethod
    def build_mapper(cls, dim: int, width: int, arch: PhiConfig) -> nn.Module:
        return build_phi(dim, width, arch)

    @classmethod
    def arch_from_state(cls, shapes: dict[str, tuple], arch: Any) -> PhiConfig:
        return phi_arch_from_state(shapes, arch)
