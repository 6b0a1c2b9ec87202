"""PACT's trainable composer: a mapper φ (image embedding → pseudo-word token) and a private,
LoRA-adapted copy of the backbone's text tower that reads `"a photo of $ that {edit}"` with φ(v_r)
at the first `$` (`pseudoword.py`, what PACT shares with the zero-shot peers).

The module's state dict holds only what PACT trains (φ and the LoRA factors): the frozen tower
copy is rebuilt from the backbone, so checkpoints stay small and never duplicate the backbone.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Sequence

import torch
from torch import nn
from torch.nn.utils import parametrize

from cir_core.config import DictConfig
from cir_core.errors import BackboneError
from cir_core.text_tower import supports_token_embeddings, trim

from ..encoder import Towers
from .lora import add_lora, is_lora_key
from .pseudoword import EMPTY_PROMPT, PLACEHOLDER, PseudoWord, edit_prompt

_TOWER_PARTS = ("token_embedding", "positional_embedding", "transformer", "ln_final",
                "text_projection", "attn_mask")


@dataclass
class PACTConfig(DictConfig):
    """Architecture hyper-parameters (everything a checkpoint needs to rebuild the model)."""
    mapper_hidden: int = 512
    mapper_dropout: float = 0.1
    lora_rank: int = 8
    lora_alpha: float = 16.0
    lora_dropout: float = 0.05
    lora_layers: Any = "all"  # "all" | "last:N" | N | [indices]
    lora_targets: list = field(default_factory=lambda: ["in_proj", "out_proj", "c_fc", "c_proj"])


class Mapper(nn.Sequential):
    """φ: Linear(D,H)-GELU-Dropout-Linear(H,H)-GELU-Linear(H,W)."""

    def __init__(self, dim: int, hidden: int, width: int, dropout: float):
        super().__init__(nn.Linear(dim, hidden), nn.GELU(), nn.Dropout(dropout),
                         nn.Linear(hidden, hidden), nn.GELU(), nn.Linear(hidden, width))


class TextTower(nn.Module):
    """Deep copies of the text-tower parts of an open_clip `CLIP`, laid out like `CLIP` so that
    `encode_tokens` runs on it; the backbone itself is never touched."""

    # two of the parts copied below by name, declared for the type checker (a CLIP's own types)
    token_embedding: nn.Embedding
    transformer: nn.Module

    def __init__(self, model: nn.Module):
        super().__init__()
        if not supports_token_embeddings(model):
            raise BackboneError(f"PACT needs an open_clip CLIP text tower; {type(model).__name__} has none")
        for name in _TOWER_PARTS:
            part = getattr(model, name)
            if isinstance(part, torch.Tensor) and not isinstance(part, nn.Parameter):  # attn_mask
                self.register_buffer(name, part.detach().clone(), persistent=False)
            else:
                setattr(self, name, copy.deepcopy(part))
        self.text_pool_type = getattr(model, "text_pool_type", "argmax")
        self.text_eos_id = getattr(model, "text_eos_id", None)
        self.requires_grad_(False)

    @property
    def width(self) -> int:
        return int(self.token_embedding.weight.shape[1])


class PACTComposer(nn.Module):
    """q = f_T^LoRA(prompt with φ(v_r) at `$`), unnormalised."""

    def __init__(self, backbone: Towers, cfg: PACTConfig):
        super().__init__()
        self.cfg = cfg
        self.tokenizer = backbone.tokenizer
        self.tower = TextTower(backbone.model)
        self.dim, self.width = int(backbone.dim), self.tower.width
        self.mapper = Mapper(self.dim, cfg.mapper_hidden, self.width, cfg.mapper_dropout)
        self.lora = add_lora(self.tower.transformer, cfg.lora_rank, cfg.lora_alpha, cfg.lora_dropout,
                             cfg.lora_layers, cfg.lora_targets)
        self.word = PseudoWord(self.tokenizer, self.tower, PLACEHOLDER, "first")
        self._frozen = {n for n, _ in self.named_parameters() if not self._is_trainable(n)}
        self._frozen |= {n for n, _ in self.named_buffers()}
        self.to(next(backbone.model.parameters()).device)
        # State dict = trainables only; loading tolerates the (rebuilt) frozen keys being absent.
        self._register_state_dict_hook(_drop_frozen)
        self.register_load_state_dict_post_hook(_ignore_missing_frozen)

    @staticmethod
    def _is_trainable(name: str) -> bool:
        return name.startswith("mapper.") or is_lora_key(name)

    def mapper_parameters(self) -> list[nn.Parameter]:
        return list(self.mapper.parameters())

    def lora_parameters(self) -> list[nn.Parameter]:
        return [p for d in self.lora for p in (d.A, d.B)]

    def tokenize(self, edits: Sequence[str], empty: bool = False) -> torch.Tensor:
        """Prompt tokens (B, L) for `edits` (or q_∅'s prompt when `empty`), padding trimmed."""
        return self.tokenize_prompts([EMPTY_PROMPT] * len(edits) if empty else [edit_prompt(e) for e in edits])

    def tokenize_prompts(self, prompts: Sequence[str]) -> torch.Tensor:
        """Tokens (B, L) of finished prompts (each holding `$`), trailing padding trimmed."""
        return trim(self.tokenizer(list(prompts)))

    def encode_with_token(self, tokens: torch.Tensor, pseudo: torch.Tensor) -> torch.Tensor:
        """Text features of `tokens` with the (B, W) `pseudo` embeddings standing at the first `$`,
        read by the LoRA tower (merged for inference)."""
        inference = not self.training and not torch.is_grad_enabled()
        return self.word.encode(tokens, pseudo, self.merged_tower() if inference else self.tower)

    def merged_tower(self) -> Any:
        """The tower with every LoRA delta merged into its weight (W + B A s) and no
        parametrization left, for inference: the parametrized tower recomputes each W' and pays
        parametrize's dispatch on every forward (~3.7 of a world Compare request's ~17 ms,
        2026-12-01 profile). Rebuilt when a LoRA factor changes (a training step,
        `load_state_dict`, `.to()`); costs one copy of the text transformer."""
        key = tuple((t.data_ptr(), t._version) for d in self.lora for t in (d.A, d.B))
        cached = self.__dict__.get("_merged")
        if cached is None or cached[0] != key:
            with torch.no_grad():
                transformer = _merged_copy(self.tower.transformer)
            parts = {name: getattr(self.tower, name) for name in _TOWER_PARTS}
            tower = SimpleNamespace(**{**parts, "transformer": transformer.eval(),
                                       "text_pool_type": self.tower.text_pool_type,
                                       "text_eos_id": self.tower.text_eos_id})
            cached = (key, tower)
            self.__dict__["_merged"] = cached  # not a sub-module: no state-dict entry, no .to()
        return cached[1]

    def forward(self, ref: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """(B, D) reference embeddings + (B, L) prompt tokens → (B, D) unnormalised queries."""
        return self.encode_with_token(tokens, self.mapper(ref))


def _merged_copy(transformer: nn.Module) -> nn.Module:
    """A deep copy of a LoRA-parametrized transformer with each W' = W + B A s stored as a plain
    weight. Not `parametrize.remove_parametrizations` on the copy: the copy shares the original's
    generated Parametrized* class, and removing deletes the weight's property from that class,
    i.e. from the original too. Here only the copy's class pointer goes back to the plain one."""
    out = copy.deepcopy(transformer)
    for mod in list(out.modules()):
        if not parametrize.is_parametrized(mod):
            continue
        plans = mod.parametrizations
        assert isinstance(plans, nn.ModuleDict)  # what torch's parametrize registers
        merged = {attr: getattr(mod, attr).detach().clone() for attr in plans}
        mod.__class__ = mod.__class__.__bases__[0]  # the plain class torch parametrized
        del mod._modules["parametrizations"]
        for attr, w in merged.items():
            mod.register_parameter(attr, nn.Parameter(w, requires_grad=False))
    return out


def _drop_frozen(module: PACTComposer, state: dict, prefix: str, local_metadata: Any) -> None:
    for name in module._frozen:
        state.pop(prefix + name, None)


def _ignore_missing_frozen(module: PACTComposer, incompatible: Any) -> None:
    frozen = module._frozen
    for key in list(incompatible.missing_keys):
        # keys arrive with the parent's prefix when the composer is a sub-module
        if any(key == n or key.endswith("." + n) for n in frozen):
            incompatible.missing_keys.remove(key)
