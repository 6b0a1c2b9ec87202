"""The one cache type of the project: `LRU`, bounded and locked (the app serves several requests
at once), and `TextMemo`, the backbone with a remembered `encode_texts` built on it."""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable, Generic, Hashable, Sequence, TypeVar

import numpy as np

from .encoder import Encoder

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LRU(Generic[K, V]):
    """A thread-safe least-recently-used map holding at most `maxsize` weight: each entry weighs
    1, or `weight(value)` (e.g. bytes); the most recent entry stays even when it alone is heavier.
    Values are shared, not copied: treat them as read-only."""

    def __init__(self, maxsize: int, weight: Callable[[V], int] | None = None):
        if maxsize < 1:
            raise ValueError(f"maxsize must be >= 1, got {maxsize}")
        self.maxsize, self._weight = int(maxsize), weight
        self._data: OrderedDict[K, V] = OrderedDict()
        self._total = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._data

    def get(self, key: K, default: V | None = None) -> V | None:
        """The value under `key` (now the most recent), or `default`."""
        with self._lock:
            if key not in self._data:
                return default
            self._data.move_to_end(key)
            return self._data[key]

    def put(self, key: K, value: V) -> None:
        """Store `value` as the most recent; the least recent go while over `maxsize`."""
        w = self._weigh(value)
        with self._lock:
            if key in self._data:
                self._total -= self._weigh(self._data.pop(key))
            self._data[key] = value
            self._total += w
            while self._total > self.maxsize and len(self._data) > 1:
                _, old = self._data.popitem(last=False)
                self._total -= self._weigh(old)

    def get_or_make(self, key: K, make: Callable[[], V]) -> V:
        """The cached value, else `make()` (run outside the lock, so a slow make never blocks
        other keys; two threads may both make a missing value, the later one is kept)."""
        hit = self.get(key)
        if hit is not None:
            return hit
        value = make()
        self.put(key, value)
        return value

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._total = 0

    def _weigh(self, value: V) -> int:
        return 1 if self._weight is None else int(self._weight(value))


class TextMemo:
    """The backbone as the methods see it: every attribute is the real backbone's, except that
    `encode_texts` remembers (`LRU`, `maxsize` texts) what it encoded. Methods on the frozen text
    tower then share one encode of each text across methods, q_∅, the progression and requests."""

    def __init__(self, backbone: Encoder, maxsize: int = 4096):
        object.__setattr__(self, "_backbone", backbone)
        object.__setattr__(self, "_cache", LRU(maxsize))
        object.__setattr__(self, "_count_lock", threading.Lock())
        object.__setattr__(self, "encoded", 0)  # texts actually sent to the model

    @staticmethod
    def of(backbone: Encoder, maxsize: int = 4096) -> "TextMemo":
        """`backbone` itself when it is a TextMemo already, else one around it."""
        return backbone if isinstance(backbone, TextMemo) else TextMemo(backbone, maxsize)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backbone, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._backbone, name, value)

    def __repr__(self) -> str:
        return f"TextMemo({self._backbone!r})"

    def encode_texts(self, texts: Sequence[str], batch_size: int = 256, progress: bool = False) -> np.ndarray:
        """(N, D) float32 text embeddings; the texts not remembered are encoded in one batch."""
        texts = [str(t) for t in texts]
        found = {t: self._cache.get(t) for t in dict.fromkeys(texts)}
        missing = [t for t, e in found.items() if e is None]
        if missing:
            emb = self._backbone.encode_texts(missing, batch_size=batch_size, progress=progress)
            with self._count_lock:
                object.__setattr__(self, "encoded", self.encoded + len(missing))
            for t, e in zip(missing, emb):
                self._cache.put(t, e)
                found[t] = e
        if not texts:
            return np.zeros((0, int(self._backbone.dim)), np.float32)
        return np.stack([found[t] for t in texts]).astype(np.float32, copy=True)

    prefetch = encode_texts

    def clear(self) -> None:
        self._cache.clear()
