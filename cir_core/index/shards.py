"""Embedding a large gallery in shards: worker processes decode and preprocess, the main process
runs the model, each finished shard is written atomically, a rerun skips valid shards.

A shard is `shard_size` consecutive gallery rows. Its file records the backbone id and the rows'
fingerprints, so a shard is reused only when both still match (a changed image re-embeds its
shard, never a stale row). Unreadable images are recorded in the shard as errors and skipped.
"""
from __future__ import annotations

import io
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..encoder import TensorEncoder
from ..fileio import atomic_write, loads_json
from ..gallery import Gallery
from ..ingest import FileRows, GalleryRows, batches

log = logging.getLogger(__name__)


@dataclass
class Shard:
    """Rows [start, stop) of the gallery once embedded: `rows` are the readable ones, `emb` theirs,
    `norms` their raw feature norms (before L2 normalisation)."""

    start: int
    stop: int
    rows: np.ndarray  # (n_ok,) int64, global gallery rows
    emb: np.ndarray  # (n_ok, D) float32
    errors: list[tuple[int, str]]
    norms: np.ndarray  # (n_ok,) float32


def shard_bounds(n: int, shard_size: int) -> list[tuple[int, int]]:
    """[start, stop) of each shard of `n` rows."""
    if shard_size < 1:
        raise ValueError(f"shard_size must be >= 1, got {shard_size}")
    return [(s, min(s + shard_size, n)) for s in range(0, n, shard_size)]


def shard_path(folder: Path, s: int) -> Path:
    return folder / f"shard-{s:06d}.npz"


def write_shard(path: Path, shard: Shard, backbone_id: str, fingerprints: Sequence[str]) -> None:
    """Atomically write `shard` (temp file + rename: a kill leaves the old file or none)."""
    head = json.dumps({"backbone": backbone_id, "start": shard.start, "stop": shard.stop,
                       "fingerprints": list(fingerprints), "errors": shard.errors})
    buf = io.BytesIO()
    np.savez(buf, head=np.frombuffer(head.encode(), np.uint8), rows=shard.rows, emb=shard.emb, norms=shard.norms)
    atomic_write(path, lambda f: f.write(buf.getvalue()), True)


def read_shard(path: Path, backbone_id: str, fingerprints: Sequence[str], dim: int) -> Shard | None:
    """The shard at `path` if it is whole and matches this backbone and these fingerprints, else
    None (also for a shard written before raw norms were recorded: it is embedded again)."""
    try:
        with np.load(path) as z:
            head = loads_json(z["head"].tobytes().decode())
            rows, emb = z["rows"].astype(np.int64), z["emb"].astype(np.float32)
            norms = z["norms"].astype(np.float32)
    except (OSError, ValueError, KeyError, EOFError):  # missing, truncated or foreign file
        return None
    start, stop = int(head.get("start", -1)), int(head.get("stop", -1))
    if (head.get("backbone") != backbone_id or head.get("fingerprints") != list(fingerprints)
            or emb.shape != (len(rows), dim) or norms.shape != (len(rows),)
            or ((rows < start) | (rows >= stop)).any()):
        return None
    return Shard(start, stop, rows, emb, [(int(r), str(m)) for r, m in head.get("errors", [])], norms)


def gallery_rows(gallery: Gallery, backbone: TensorEncoder) -> tuple[FileRows, bool]:
    """(the rows to embed, whether worker processes may decode them): a gallery of plain files
    decodes in processes; a generated or benchmark gallery (its own `decode`) in threads."""
    files = (type(gallery).decode is Gallery.decode and gallery.image_fn is None
             and all(it.path for it in gallery.items))
    if files:
        return FileRows([it.path for it in gallery.items], backbone.preprocess, draft=backbone.image_size), True
    return GalleryRows(gallery, backbone.preprocess, draft=backbone.image_size), False


def embed_shards(
    backbone: TensorEncoder,
    rows: FileRows,
    todo: Sequence[tuple[int, int]],
    batch_size: int,
    workers: int,
    on_shard: Callable[[Shard], None],
    progress: bool = True,
    desc: str = "embedding",
    processes: bool = True,
) -> None:
    """Embed the shards `todo` ([start, stop) row ranges of `rows`, `gallery_rows`), calling
    `on_shard` with each finished shard in order; `processes`: decode in `workers` processes
    (else threads). Batches never straddle shards, so a shard's rows are embedded in the same
    batches whatever else is being done (a one-process and a sharded run agree)."""
    from ..progress import bar as progress_bar

    batch_rows = [list(range(b, min(b + batch_size, stop))) for start, stop in todo
                  for b in range(start, stop, batch_size)]
    if not batch_rows:
        return
    dim, device = int(backbone.dim), str(backbone.device)
    paths = rows.paths
    loader = batches(rows, batch_rows, workers, processes=processes, pin_memory=device.startswith("cuda"))
    bounds = iter(todo)
    start, stop = next(bounds)
    done_rows: list[np.ndarray] = []
    embs: list[np.ndarray] = []
    norms: list[np.ndarray] = []
    errors: list[tuple[int, str]] = []
    total = sum(stop_ - start_ for start_, stop_ in todo)
    with progress_bar(total=total, unit="image", desc=desc, disable=not progress) as bar:
        for ids, x, errs in loader:
            for row, msg in errs:
                (bar.write if progress else log.warning)(f"skipped {paths[row] or f'row {row}'!r}: {msg}")
            errors += errs
            if x is not None:
                assert isinstance(x, torch.Tensor)  # `gallery_rows` preprocess: the rows come stacked
                e, n = backbone.encode_image_batch(x, with_norms=True)
                embs.append(e)
                norms.append(n)
                done_rows.append(np.asarray(ids, np.int64))
            bar.update(len(ids) + len(errs))
            last = max(ids + [r for r, _ in errs])
            if last == stop - 1:  # batches come in order, and a shard's last batch holds its last row
                on_shard(Shard(start, stop, np.concatenate(done_rows) if done_rows else np.zeros(0, np.int64),
                               np.concatenate(embs) if embs else np.zeros((0, dim), np.float32),
                               sorted(errors), np.concatenate(norms) if norms else np.zeros(0, np.float32)))
                done_rows, embs, errors, norms = [], [], [], []
                start, stop = next(bounds, (-1, -1))
