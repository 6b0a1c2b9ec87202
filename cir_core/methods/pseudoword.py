"""A pseudo-word at a placeholder: what PACT and the zero-shot peers (Pic2Word, SEARLE, LinCIR)
share on the text side.

A mapper turns the reference embedding into one token embedding; it stands at the placeholder
(`$`, Pic2Word's `*`) of a prompt such as `"a photo of $ that {edit}"`, and an open_clip text
tower reads the prompt with it. `replace="first"`: only the first placeholder token takes it
(PACT; SEARLE's `encode_with_pseudo_tokens`; Pic2Word's `encode_text_img_retrieval`), so a `$`
in the edit itself stays a dollar sign; `"all"`: every one does (LinCIR's
`encode_with_pseudo_tokens_HF`, `torch.where(text == 259, ...)`).
"""
from __future__ import annotations

from typing import Any, Sequence

import torch

from cir_core.errors import BackboneError
from cir_core.text_tower import encode_tokens, supports_token_embeddings, trim

PLACEHOLDER = "$"
PROMPT = "a photo of $ that {edit}"  # PACT's, SEARLE's (`src/validate.py`) and LinCIR's (`validate.py`)
EMPTY_PROMPT = "a photo of $"  # their q_∅ prompt
REPLACE = ("first", "all")


def edit_prompt(edit: str, prompt: str = PROMPT, empty: str = EMPTY_PROMPT) -> str:
    """PACT's prompt for an edit: `prompt` filled with the edit's whitespace collapsed, its first
    letter lower-cased and one trailing period dropped; an empty edit gives `empty`."""
    e = " ".join(str(edit).split())
    e = e[:-1].rstrip() if e.endswith(".") else e
    if not e:
        return empty
    return prompt.format(edit=e[0].lower() + e[1:])


def fill(template: str, edit: str) -> str:
    """The peers' prompt: `template.format(edit=...)` with the edit's whitespace collapsed (the
    tokenizer lower-cases), as their authors' code fills it."""
    return template.format(edit=" ".join(str(edit).split()))


def token_id(tokenizer: Any, word: str = PLACEHOLDER) -> int:
    """The one token id the tokenizer gives a space-separated `word`; BackboneError otherwise."""
    ids = [int(t) for t in tokenizer([f" {word} "])[0] if int(t) != 0]
    content = ids[1:-1]  # drop start / end of text
    if len(content) != 1:
        raise BackboneError(f"the tokenizer splits the placeholder {word!r} into {len(content)} tokens; "
                            "a pseudo-word needs it to be one token")
    return content[0]


def token_width(model: Any) -> int:
    """The width of an open_clip CLIP text tower's token embeddings; BackboneError for a model
    without injectable token embeddings."""
    if not supports_token_embeddings(model):
        raise BackboneError(f"{type(model).__name__} has no open_clip CLIP text tower with injectable "
                            "token embeddings (needed for a pseudo-word)")
    return int(model.token_embedding.weight.shape[1])


class PseudoWord:
    """Prompts with a pseudo-word at `placeholder`, read by `tower` (an open_clip CLIP, or a copy
    of its text parts laid out alike: `text_tower.encode_tokens` runs on it)."""

    def __init__(self, tokenizer: Any, tower: Any, placeholder: str = PLACEHOLDER, replace: str = "first"):
        if replace not in REPLACE:
            raise ValueError(f"replace must be one of {REPLACE}, got {replace!r}")
        self.tokenizer, self.tower = tokenizer, tower
        self.width = token_width(tower)
        self.placeholder, self.replace = placeholder, replace
        self.id = token_id(tokenizer, placeholder)

    def tokenize(self, prompts: Sequence[str]) -> torch.Tensor:
        """(B, L) tokens, trailing padding trimmed; BackboneError naming the row without a placeholder."""
        tokens = trim(self.tokenizer(list(prompts)))
        missing = ~(tokens == self.id).any(1)
        if bool(missing.any()):
            row = int(missing.nonzero()[0, 0])
            raise BackboneError(f"placeholder {self.placeholder!r} (token {self.id}) not in prompt "
                                f"{row} {list(prompts)[row]!r} (truncated at the context length?)")
        return tokens

    def positions(self, tokens: torch.Tensor) -> torch.Tensor:
        """Index of the first placeholder token of each row; BackboneError if a row has none."""
        hit = tokens == self.id
        if not bool(hit.any(1).all()):
            bad = int((~hit.any(1)).nonzero()[0, 0])
            raise BackboneError(f"placeholder {self.placeholder!r} (token {self.id}) not found in "
                                f"prompt row {bad}: {tokens[bad].tolist()}")
        return hit.int().argmax(1)

    def mask(self, tokens: torch.Tensor) -> torch.Tensor:
        """(B, L) bool: where the pseudo-word goes (BackboneError for a row without a placeholder)."""
        first = self.positions(tokens)
        if self.replace == "all":
            return tokens == self.id
        return torch.arange(tokens.shape[1], device=tokens.device)[None] == first[:, None]

    def encode(self, tokens: torch.Tensor, pseudo: torch.Tensor, tower: Any = None) -> torch.Tensor:
        """Unnormalised text features of `tokens` with the (B, W) `pseudo` embeddings at the
        placeholder, read by `tower` (default: this one's)."""
        tower = self.tower if tower is None else tower
        tokens = tokens.to(pseudo.device)
        emb = tower.token_embedding(tokens)
        emb = torch.where(self.mask(tokens)[..., None], pseudo[:, None, :].to(emb.dtype), emb)
        return encode_tokens(tower, tokens, emb)

    def encode_plain(self, tokens: torch.Tensor) -> torch.Tensor:
        """Unnormalised text features of plain tokens (no pseudo-word), read by this tower."""
        return encode_tokens(self.tower, tokens.to(next(self.tower.parameters()).device))
