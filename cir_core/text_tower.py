"""A text-tower forward for open_clip's CLIP models that (a) trims padding and (b) accepts token
embeddings, so a pseudo-word (PACT's φ(v_r)) can stand at a placeholder's position.

Trimming is exact: the tower is causal, so tokens after the end-of-text token never reach it,
and dropping trailing padding changes nothing but the cost (context 64, captions ~40 tokens).
"""
from __future__ import annotations

from typing import Any

import torch
from open_clip.transformer import text_global_pool


def supports_token_embeddings(model: object) -> bool:
    """True for open_clip's `CLIP` class (built-in text transformer with a causal mask)."""
    return all(hasattr(model, a) for a in ("token_embedding", "positional_embedding", "transformer",
                                           "ln_final", "attn_mask"))


def trim(tokens: torch.Tensor) -> torch.Tensor:
    """Drop the all-padding columns at the end of a token batch (padding id is 0)."""
    used = int((tokens != 0).any(0).nonzero().max().item()) + 1 if tokens.numel() else 1
    return tokens[:, :max(used, 1)]


def encode_tokens(model: Any, tokens: torch.Tensor,
                  embeds: torch.Tensor | None = None) -> torch.Tensor:
    """Unnormalised text features. `embeds` (B, L, W), if given, replaces the token embeddings
    of `tokens` (same B, L); pooling still finds the end-of-text token from `tokens`. `model`: an
    open_clip CLIP (untyped) or its text parts laid out alike (PACT's `TextTower`, RTD's
    `TunedTower`, the merged LoRA tower), read by name."""
    if not supports_token_embeddings(model):
        if embeds is not None:
            raise NotImplementedError(f"{type(model).__name__} has no injectable text tower")
        return model.encode_text(tokens)
    if embeds is None:
        tokens = trim(tokens)
    L = tokens.shape[1]
    cast = model.transformer.get_cast_dtype()
    x = model.token_embedding(tokens).to(cast) if embeds is None else embeds.to(cast)
    x = x + model.positional_embedding[:L].to(cast)
    mask = model.attn_mask[:L, :L] if model.attn_mask is not None else None
    x = model.transformer(x, attn_mask=mask)
    x = model.ln_final(x)
    x = text_global_pool(x, tokens, model.text_pool_type, eos_token_id=getattr(model, "text_eos_id", None))
    if model.text_projection is not None:
        x = model.text_projection(x) if isinstance(model.text_projection, torch.nn.Linear) \
            else x @ model.text_projection
    return x
