"""`gpu`: Hugging Face ZeroGPU's `@spaces.GPU` where the `spaces` package is importable (on a
Space), the identity elsewhere — so the library never depends on `spaces`.

`spaces.GPU` is itself effect-free outside ZeroGPU hardware; the fallback only spares every other
install the package. It is applied once, at import, to the backbone's encode entry points
(`Backbone.encode_images`, `Backbone.encode_texts`): every forward pass of the app goes through
them, and nothing else needs a GPU. See docs/SPACES.md for what ZeroGPU does with the call.
"""
from __future__ import annotations

import importlib
from typing import Any, Callable, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

MARK = "__cir_gpu__"  # set on every function passed through gpu(), so tests can see where it applies


def spaces_module() -> Any | None:
    """The `spaces` module, or None when it is not installed (or a test blocked it)."""
    try:
        return importlib.import_module("spaces")
    except ImportError:
        return None


def gpu(fn: F | None = None, *, duration: int | None = None) -> Any:
    """`@gpu` or `@gpu(duration=120)`: `spaces.GPU` when importable, else `fn` unchanged."""
    if fn is None:
        return lambda f: gpu(f, duration=duration)
    spaces = spaces_module()
    if spaces is None:
        out = fn
    else:
        out = spaces.GPU(fn, duration=duration) if duration is not None else spaces.GPU(fn)
    try:
        setattr(out, MARK, spaces is not None)
    except (AttributeError, TypeError):  # a wrapper type that takes no attributes
        pass
    return out
