"""`TextMemo`: the backbone with a shared, remembered `encode_texts`."""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Sequence

import numpy as np


class TextMemo:
    """The backbone as the methods see it: every attribute is the real backbone's, except that
    `encode_texts` remembers (LRU, `maxsize` texts) what it encoded. Methods built on the frozen
    text tower then share one encode of each text across methods, q_∅ and the progression."""

    def __init__(self, backbone: Any, maxsize: int = 4096):
        object.__setattr__(self, "_backbone", backbone)
        object.__setattr__(self, "_cache", OrderedDict())
        object.__setattr__(self, "_maxsize", maxsize)
        object.__setattr__(self, "_lock", threading.Lock())
        object.__setattr__(self, "encoded", 0)  # texts actually sent to the model

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backbone, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._backbone, name, value)

    def __repr__(self) -> str:
        return f"TextMemo({self._backbone!r})"

    def encode_texts(self, texts: Sequence[str], batch_size: int = 256, progress: bool = False) -> np.ndarray:
        texts = [str(t) for t in texts]
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            emb = self._backbone.encode_texts(missing, batch_size=batch_size, progress=progress)
            with self._lock:
                object.__setattr__(self, "encoded", self.encoded + len(missing))
                for t, e in zip(missing, emb):
                    self._cache[t] = e
        with self._lock:
            rows = []
            for t in texts:
                e = self._cache.get(t)
                if e is None:  # evicted by a concurrent request between the two steps
                    e = self._backbone.encode_texts([t])[0]
                self._cache[t] = e
                self._cache.move_to_end(t)
                rows.append(e)
            while len(self._cache) > self._maxsize:
                self._cache.popitem(last=False)
        if not rows:
            return np.zeros((0, int(self._backbone.dim)), np.float32)
        return np.stack(rows).astype(np.float32, copy=True)

    prefetch = encode_texts

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()

