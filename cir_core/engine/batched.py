"""`BatchedMethod`: a method whose work for concurrent requests runs on the engine's `BatchQueue`.

`compose` and `compose_empty` calls that arrive together become one call over all their rows (a
method's query for row i depends on reference i and text i only: the contract every method's
`_compose` keeps, and what the evaluation's batches already rely on), so 16 requests share one
forward of PACT's LoRA text tower instead of making 16. `compose_with_steps` and `progression`
run on the same worker, one call at a time, so all the methods' tower work stays on one thread.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..batching import BatchQueue
from ..methods import Method
from ..methods.refs import RefInput, Refs, as_refs


def stack_refs(parts: Sequence[Refs]) -> Refs:
    """One `Refs` of every part's rows, in order (unknown raw norms as NaN)."""
    emb = np.concatenate([p.emb for p in parts])
    if all(p.norms is None for p in parts):
        return Refs(emb)
    norms = [p.norms if p.norms is not None else np.full(len(p), np.nan, np.float32) for p in parts]
    return Refs(emb, np.concatenate(norms).astype(np.float32))


class BatchedMethod:
    """`method`, its compositions batched across requests on `queue`; every other attribute is
    the method's own."""

    def __init__(self, method: Method, queue: BatchQueue):
        self._method, self._queue = method, queue

    def __getattr__(self, name: str) -> Any:
        return getattr(self._method, name)

    def __repr__(self) -> str:
        return f"BatchedMethod({self._method!r})"

    def _refs(self, ref: RefInput) -> Refs:
        m = self._method
        return as_refs(ref, int(m.backbone.dim), m.name, m.backbone.id)

    def compose(self, ref: RefInput, texts: Sequence[str]) -> np.ndarray:
        refs, texts = self._refs(ref), list(texts)
        if len(texts) != len(refs) or not texts:
            return self._method.compose(refs, texts)  # its own error or its empty answer
        rows = [(refs.take(slice(i, i + 1)), t) for i, t in enumerate(texts)]
        return np.concatenate(self._queue.run(("compose", self._method.name), self._compose_rows, rows))

    def _compose_rows(self, rows: list[tuple[Refs, str]]) -> list[np.ndarray]:
        q = self._method.compose(stack_refs([r for r, _ in rows]), [t for _, t in rows])
        return [q[i:i + 1] for i in range(len(rows))]

    def compose_empty(self, ref: RefInput) -> np.ndarray:
        refs = self._refs(ref)
        if not len(refs):
            return self._method.compose_empty(refs)
        rows = [refs.take(slice(i, i + 1)) for i in range(len(refs))]
        return np.concatenate(self._queue.run(("empty", self._method.name), self._empty_rows, rows))

    def _empty_rows(self, rows: list[Refs]) -> list[np.ndarray]:
        q = self._method.compose_empty(stack_refs(rows))
        return [q[i:i + 1] for i in range(len(rows))]

    def compose_pair(self, ref: RefInput, text: str) -> tuple[np.ndarray, np.ndarray]:
        # Two batched calls: each merges with the other requests' rows, which beats one forward
        # of this request's two rows as soon as two requests overlap.
        one = self._refs(ref).take(slice(0, 1))
        return self.compose(one, [text]), self.compose_empty(one)

    def compose_with_steps(self, ref: RefInput, text: str,
                           sentences: Sequence[str]) -> tuple[np.ndarray, list[np.ndarray]]:
        return self._queue.run(("steps", self._method.name), self._each("compose_with_steps"),
                               [(ref, text, list(sentences))])[0]

    def progression(self, ref: RefInput, sentences: Sequence[str]) -> list[np.ndarray]:
        return self._queue.run(("progression", self._method.name), self._each("progression"),
                               [(ref, list(sentences))])[0]

    def _each(self, name: str):
        fn = getattr(self._method, name)
        return lambda calls: [fn(*args) for args in calls]
