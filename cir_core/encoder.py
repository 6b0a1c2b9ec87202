"""What the library needs of a backbone: the `Encoder` protocol. `cir_core.backbone.Backbone` is
the open_clip one; `cir_core.memo.TextMemo` wraps any with remembered text encodes; tests and
benchmarks pass stand-ins with the same attributes."""
from __future__ import annotations

from typing import Any, Protocol, Sequence, runtime_checkable

import numpy as np


@runtime_checkable
class Encoder(Protocol):
    """Frozen image and text towers: L2-normalised float32 embeddings of one width."""

    id: str  # identifies the weights and activation (cir_core.backbone_id)
    dim: int

    def encode_images(self, images: Sequence[Any], batch_size: int = 64, progress: bool = False,
                      with_norms: bool = False) -> Any:
        """(N, dim) embeddings; with `with_norms`, also (N,) raw feature norms."""

    def encode_texts(self, texts: Sequence[str], batch_size: int = 256, progress: bool = False) -> np.ndarray:
        """(N, dim) embeddings."""


@runtime_checkable
class Towers(Encoder, Protocol):
    """An `Encoder` whose text tower a method runs itself (PACT's LoRA copy, the peers' pseudo-word
    in the prompt): the open_clip model and its tokenizer."""

    model: Any  # an open_clip CLIP: `token_embedding`, `transformer`, `encode_image`, ...
    tokenizer: Any  # open_clip's tokenizer (texts -> token ids)
