"""Images into model batches, overlapped with the forward: what the app's gallery embedding
(`gallery.EmbeddingCache`) and `python -m cir_core.index build` share.

`Rows` turns a row into a preprocessed tensor (or an error message): decode through
`imageio.load_image` with JPEG draft decoding at the model's input size (a large JPEG is decoded
at a reduced DCT scale that still covers the target, about 4x less work at 2x), then the
backbone's own preprocessing. `batches` runs it ahead of the consumer: in worker processes (a
`torch` DataLoader; the rows must be picklable: files) or in threads (any gallery, generated ones
included; PIL decodes with the GIL released), so decoding the next batch overlaps the current
forward instead of waiting for it.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch

from .imageio import load_image

# (rows, their stacked tensors, or their decoded images when the rows have no preprocessing, or
# None when no row loaded, errors)
Batch = tuple[list[int], "torch.Tensor | list[Any] | None", list[tuple[int, str]]]


class FileRows(torch.utils.data.Dataset):
    """Row i -> (i, preprocessed tensor or None, error message) for image files (picklable: it
    runs in DataLoader worker processes). Without `preprocess` a row is the decoded image."""

    def __init__(self, paths: Sequence[str | None], preprocess: Callable[[Any], torch.Tensor] | None,
                 draft: int | None = None):
        self.paths, self.preprocess, self.draft = list(paths), preprocess, draft

    def __len__(self) -> int:
        return len(self.paths)

    def load(self, i: int) -> Any:
        path = self.paths[i]
        if path is None:
            raise ValueError("item has no file path")
        return load_image(path, draft=self.draft)

    def __getitem__(self, i: int) -> tuple[int, Any, str]:
        try:
            img = self.load(i)
            return i, (img if self.preprocess is None else self.preprocess(img)), ""
        except Exception as exc:  # any undecodable file is skipped and reported, never fatal
            return i, None, f"{type(exc).__name__}: {exc}".splitlines()[0]


class GalleryRows(FileRows):
    """The same for any `Gallery` (generated images included); threads only (not picklable)."""

    def __init__(self, gallery: Any, preprocess: Callable[[Any], torch.Tensor] | None,
                 draft: int | None = None):
        super().__init__([it.path for it in gallery.items], preprocess, draft)
        self.gallery = gallery

    def load(self, i: int) -> Any:
        return self.gallery.decode(i, self.draft)  # a benchmark gallery decodes as its official loader


def collate(batch: list[tuple[int, Any, str]]) -> Batch:
    """(rows that loaded, their stacked tensors (or their images, unpreprocessed) or None,
    [(row, error)])."""
    ok = [(i, t) for i, t, e in batch if not e]
    errors = [(i, e) for i, t, e in batch if e]
    if not ok:
        return [], None, errors
    items = [t for _, t in ok]
    return [i for i, _ in ok], (torch.stack(items) if all(isinstance(t, torch.Tensor) for t in items) else items), errors


def batches(rows: FileRows, batch_rows: Sequence[list[int]], workers: int = 0, processes: bool = False,
            pin_memory: bool = False) -> Iterator[Batch]:
    """The batches `batch_rows`, in order, prepared ahead of the consumer: by `workers` worker
    processes (`processes`) or threads (at least one, so the next batch decodes while the caller
    runs the model on this one)."""
    if not batch_rows:
        return iter(())
    if processes and workers > 0:
        return iter(torch.utils.data.DataLoader(
            rows, batch_sampler=list(batch_rows), num_workers=workers, collate_fn=collate,
            worker_init_fn=_one_thread, pin_memory=pin_memory, persistent_workers=False))
    return _threaded(rows, batch_rows, max(1, workers))


def _threaded(rows: FileRows, batch_rows: Sequence[list[int]], threads: int) -> Iterator[Batch]:
    with ThreadPoolExecutor(threads, thread_name_prefix="ingest") as pool:
        def prepare(ids: list[int]) -> Batch:
            return collate([rows[i] for i in ids])

        ahead = threads + 1  # one batch per thread in flight, plus the one being consumed
        pending = {n: pool.submit(prepare, batch_rows[n]) for n in range(min(ahead, len(batch_rows)))}
        for n in range(len(batch_rows)):
            out = pending.pop(n).result()
            if n + ahead < len(batch_rows):
                pending[n + ahead] = pool.submit(prepare, batch_rows[n + ahead])
            yield out


def _one_thread(_: int) -> None:
    # Workers only decode and resize; torch's default thread pool per worker would oversubscribe.
    torch.set_num_threads(1)
