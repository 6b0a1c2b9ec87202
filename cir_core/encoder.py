"""What the library needs of a backbone: the `Encoder` protocol, and two richer ones for the code
that runs a backbone's towers itself (`TensorEncoder`: preprocessed batches; `Towers`: the open_clip
model and tokenizer). `cir_core.backbone.Backbone` is the open_clip one and is all three;
`cir_core.memo.TextMemo` and `cir_core.batching.BatchedEncoder` wrap any (their other attributes
are the wrapped backbone's); tests and benchmarks pass stand-ins with the same attributes. The
protocols are for the type checker: nothing checks them at run time (`as_towers` checks what a
method needs, by name)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence, cast, runtime_checkable

import numpy as np

from .errors import BackboneError

if TYPE_CHECKING:
    import torch
    from PIL import Image


@runtime_checkable
class Encoder(Protocol):
    """Frozen image and text towers: L2-normalised float32 embeddings of one width."""

    id: str  # identifies the weights and activation (cir_core.backbone_id)
    dim: int
    image_size: int  # the side, in pixels, its image tower reads (the world's pictures are drawn at it)

    def encode_images(self, images: Sequence[Any], batch_size: int = 64, progress: bool = False,
                      with_norms: bool = False) -> Any:
        """(N, dim) embeddings; with `with_norms`, also (N,) raw feature norms."""

    def encode_texts(self, texts: Sequence[str], batch_size: int = 256, progress: bool = False) -> np.ndarray:
        """(N, dim) embeddings."""


@runtime_checkable
class TensorEncoder(Encoder, Protocol):
    """An `Encoder` that also takes pixels already preprocessed: the gallery embedder and the index
    builder decode and preprocess in workers, ahead of the forward."""

    device: str  # where the towers run ("cpu", "cuda", "cuda:1")
    preprocess: Callable[[Image.Image], torch.Tensor]  # one image -> (3, H, W), the eval transform

    def image_tensor(self, images: Sequence[Any]) -> torch.Tensor:
        """A preprocessed batch (N, 3, H, W) on `device` (images or paths)."""

    def encode_image_batch(self, x: torch.Tensor, with_norms: bool = False) -> Any:
        """`encode_images` of a preprocessed batch: (N, dim) embeddings (and (N,) raw norms)."""


@runtime_checkable
class Towers(TensorEncoder, Protocol):
    """A backbone whose text tower a method runs itself (PACT's LoRA copy, the peers' pseudo-word
    in the prompt): the open_clip model and its tokenizer. open_clip ships no types, so both are
    Any to the type checker."""

    model: Any  # an open_clip CLIP: `token_embedding`, `transformer`, `encode_image`, ...
    tokenizer: Any  # open_clip's tokenizer (texts -> token ids)


def tensor_encoder(backbone: Encoder) -> TensorEncoder | None:
    """`backbone` as a `TensorEncoder` when it has that protocol's attributes (looked up by name,
    so a wrapper that forwards them counts), else None (a test's stand-in: it is given decoded
    images through `encode_images`)."""
    if all(hasattr(backbone, a) for a in ("device", "preprocess", "image_tensor", "encode_image_batch")):
        return cast(TensorEncoder, backbone)
    return None


def as_towers(backbone: Encoder, who: str) -> Towers:
    """`backbone` for `who` (a method, a trainer) that runs its towers itself; a BackboneError
    naming `who` when it has no open_clip model and tokenizer (a test's stand-in, a bare encoder)."""
    missing = [a for a in ("model", "tokenizer") if not hasattr(backbone, a)]
    if missing:
        raise BackboneError(f"{who} runs the backbone's towers itself, but {backbone!r} has no "
                            f"{' or '.join(missing)} (it needs an open_clip backbone: cir_core.backbone)")
    return cast(Towers, backbone)
