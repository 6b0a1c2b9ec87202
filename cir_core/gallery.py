"""Galleries (a folder, a manifest, generated items, or rows read from a store) and their
on-disk embedding cache.

`EmbeddingCache` keys every row by the item's fingerprint, so a restart re-encodes only what is
new or changed, and a different backbone gets its own folder.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, overload

import numpy as np
import torch
from PIL import Image

from .encoder import Encoder, tensor_encoder
from .errors import GalleryError, ImageLoadError
from .fileio import atomic_write, loads_json, read_table
from .imageio import load_image
from .ingest import GalleryRows, batches
from .memo import LRU

IMAGE_EXTS = (".jpg", ".jpeg", ".png", ".webp", ".bmp")
ImageFn = Callable[["GalleryItem", "int | None"], Image.Image]


@dataclass(frozen=True)
class GalleryItem:
    """One gallery entry: a file (`path`) or a generated item described by `meta`."""

    id: str
    path: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)


class Gallery:
    """An ordered list of items; row i of its embeddings is `items[i]`."""

    def __init__(self, name: str, items: Sequence[GalleryItem], image_fn: ImageFn | None = None):
        self.name = name
        self.items: Sequence[GalleryItem] = list(items)
        self.image_fn = image_fn
        self._pos: dict[str, int] = {}
        for i, it in enumerate(self.items):
            if it.id in self._pos:
                raise GalleryError(f"gallery {name!r}: duplicate item id {it.id!r}")
            self._pos[it.id] = i

    def __len__(self) -> int:
        return len(self.items)

    def __repr__(self) -> str:
        return f"Gallery(name={self.name!r}, items={len(self)})"

    @property
    def ids(self) -> list[str]:
        return [it.id for it in self.items]

    def index_of(self, id: str) -> int:
        """Row of item `id`; GalleryError if the gallery has no such item."""
        try:
            return self._pos[id]
        except KeyError:
            raise GalleryError(f"gallery {self.name!r} has no item {id!r}") from None

    def load_image(self, i: int, size: int | None = None) -> Image.Image:
        """RGB image of item i. `size`: generated items render at it; files shrink to fit in it."""
        item = self.items[i]
        if self.image_fn is not None:
            return self.image_fn(item, size)
        if item.path is None:
            raise GalleryError(f"gallery {self.name!r} item {item.id!r} has no path and no image_fn")
        img = load_image(item.path)
        if size is not None:
            img.thumbnail((size, size))  # keeps aspect, never upscales
        return img

    def decode(self, i: int, draft: int | None = None) -> Image.Image:
        """Item i's pixels as the embedding path reads them (`cir_core.ingest.GalleryRows`):
        generated ones rendered, files through `load_image` (EXIF applied; `draft`: JPEG draft
        decoding at that input size). Benchmark galleries decode as their official loaders do."""
        item = self.items[i]
        if self.image_fn is not None:
            return self.image_fn(item, None)
        if item.path is None:
            raise GalleryError(f"gallery {self.name!r} item {item.id!r} has no path and no image_fn")
        return load_image(item.path, draft=draft)

    def fingerprint(self, i: int) -> str:
        """What identifies item i's pixels: meta['fingerprint'], else path|size|mtime_ns."""
        item = self.items[i]
        if "fingerprint" in item.meta:
            return str(item.meta["fingerprint"])
        if item.path is not None:
            path = os.path.abspath(item.path)
            try:
                st = os.stat(path)
            except OSError:
                raise ImageLoadError(f"cannot load image {path!r}: file not found") from None
            return f"{path}|{st.st_size}|{st.st_mtime_ns}"
        # A generated item without an explicit fingerprint: its spec (meta) determines its pixels.
        spec = json.dumps(item.meta, sort_keys=True, default=str)
        return f"{item.id}|" + hashlib.sha1(spec.encode()).hexdigest()

    @classmethod
    def from_items(cls, name: str, items: Sequence[GalleryItem], image_fn: ImageFn | None = None) -> "Gallery":
        return cls(name, items, image_fn)

    @classmethod
    def from_folder(
        cls,
        path: str | os.PathLike,
        recursive: bool = True,
        exts: Sequence[str] = IMAGE_EXTS,
        name: str | None = None,
    ) -> "Gallery":
        """Every image under `path` (ids = relative POSIX paths, sorted). Hidden files are skipped."""
        root = Path(path).expanduser()
        if not root.is_dir():
            raise GalleryError(f"gallery folder {str(root)!r} does not exist or is not a folder")
        wanted = {e.lower() for e in exts}
        found = []
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".")) if recursive else []
            for f in filenames:
                # '._x.jpg' (macOS resource forks) and other dotfiles are never images.
                if not f.startswith(".") and os.path.splitext(f)[1].lower() in wanted:
                    found.append(Path(dirpath, f))
        if not found:
            raise GalleryError(f"gallery folder {str(root)!r} has no images ({', '.join(sorted(wanted))})")
        rel = sorted((p.relative_to(root).as_posix(), p) for p in found)
        items = [GalleryItem(r, str(p), {}) for r, p in rel]
        return cls(name or root.resolve().name or str(root), items)

    @classmethod
    def from_manifest(cls, path: str | os.PathLike, name: str | None = None) -> "Gallery":
        """JSONL or CSV rows with `path` (relative to the manifest's folder), optional `id`, rest → meta."""
        mpath = Path(path).expanduser()
        if not mpath.is_file():
            raise GalleryError(f"gallery manifest {str(mpath)!r} not found")
        rows = _read_manifest(mpath)
        items = []
        seen: set[str] = set()
        for line, row in rows:
            where = f"manifest {str(mpath)!r} line {line}"
            if not row.get("path"):
                raise GalleryError(f"{where}: no 'path'")
            p = Path(str(row["path"])).expanduser()
            p = p if p.is_absolute() else mpath.parent / p
            if not p.is_file():
                raise GalleryError(f"{where}: file {str(p)!r} not found")
            id_ = str(row.get("id") or row["path"])
            if id_ in seen:
                raise GalleryError(f"{where}: duplicate id {id_!r}")
            seen.add(id_)
            meta = {k: v for k, v in row.items() if k not in ("id", "path")}
            items.append(GalleryItem(id_, str(p), meta))
        if not items:
            raise GalleryError(f"gallery manifest {str(mpath)!r} lists no images")
        return cls(name or mpath.stem, items)


class RowSource(Protocol):
    """Where a `RemoteGallery`'s rows live (a Milvus collection): rows 0..len-1 read by number,
    an item found by id, rows found by words."""

    def __len__(self) -> int: ...

    def items(self, rows: Sequence[int]) -> list[GalleryItem]:
        """The items at `rows`, in that order."""
        ...

    def row_of(self, item_id: str) -> int | None:
        """The row of item `item_id`, None when there is none."""
        ...

    def find(self, words: Sequence[str], limit: int) -> list[int]:
        """At most `limit` rows, ascending, whose id, caption or character contain every word
        (lower case)."""
        ...


class _Rows(Sequence[GalleryItem]):
    """`RemoteGallery.items`: the source's rows, read when asked and remembered (`LRU`)."""

    def __init__(self, source: RowSource, keep: int):
        self.source, self.cache = source, LRU[int, GalleryItem](keep)

    def __len__(self) -> int:
        return len(self.source)

    @overload
    def __getitem__(self, i: int) -> GalleryItem: ...
    @overload
    def __getitem__(self, i: slice) -> list[GalleryItem]: ...

    def __getitem__(self, i: int | slice) -> GalleryItem | list[GalleryItem]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        i = int(i) + (len(self) if int(i) < 0 else 0)
        if not 0 <= i < len(self):
            raise IndexError(f"row {i} is outside 0..{len(self) - 1}")
        hit = self.cache.get(i)
        return hit if hit is not None else self._read([i])[0]

    def __iter__(self) -> Iterator[GalleryItem]:
        for a in range(0, len(self), 1000):  # a scan: in pages
            rows = list(range(a, min(a + 1000, len(self))))
            yield from self.source.items(rows)

    def prefetch(self, rows: Sequence[int]) -> None:
        """Read the rows not remembered yet, in one call."""
        missing = sorted({int(r) for r in rows if int(r) not in self.cache})
        if missing:
            self._read(missing)

    def _read(self, rows: list[int]) -> list[GalleryItem]:
        """The items at `rows` from the source, remembered; GalleryError when it gives another count."""
        got = self.source.items(rows)
        if len(got) != len(rows):
            raise GalleryError(f"the gallery's source gave {len(got)} items for {len(rows)} rows "
                               f"({rows[0]}..{rows[-1]})")
        for r, item in zip(rows, got):
            self.cache.put(r, item)
        return got


class RemoteGallery(Gallery):
    """A gallery whose rows stay in a `RowSource` (a Milvus collection): items are read when a
    request needs them (`prefetch` reads a page or a ranking's rows in one call) and at most
    `keep` are remembered, so the process holds no copy of the gallery. `image_fn` as `Gallery`'s
    (None: each item's `path`). `ids` and iterating `items` scan the whole source."""

    def __init__(self, name: str, source: RowSource, image_fn: ImageFn | None = None, keep: int = 50_000):
        self.name, self.source, self.image_fn = name, source, image_fn
        self._rows = _Rows(source, keep)
        self.items = self._rows

    def __len__(self) -> int:
        return len(self.source)

    def index_of(self, id: str) -> int:
        row = self.source.row_of(id)
        if row is None:
            raise GalleryError(f"gallery {self.name!r} has no item {id!r}")
        return row

    def prefetch(self, rows: Sequence[int]) -> None:
        self._rows.prefetch(rows)

    def find(self, words: Sequence[str], limit: int = 10_000) -> list[int]:
        return self.source.find([w.lower() for w in words], limit)


def _read_manifest(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(line number, row) pairs; JSONL if the first non-blank character is '{', else CSV."""
    rows, cols = read_table(path, GalleryError)
    if cols is not None and "path" not in cols:
        raise GalleryError(f"manifest {str(path)!r} line 1: CSV header has no 'path' column")
    return rows


def safe_name(name: str) -> str:
    """A file-system-safe, collision-free name for `name` (sanitised, plus a hash of the original)."""
    # Sanitising can merge names ('a/b', 'a_b'); the hash suffix keeps their caches apart.
    clean = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._")[:60] or "gallery"
    return f"{clean}-{hashlib.sha1(name.encode()).hexdigest()[:8]}"


class EmbeddingCache:
    """Per-(backbone, gallery) embeddings on disk under `root`, keyed by item fingerprints."""

    # Intermediate saves while encoding, so a killed ingest resumes: at least this many seconds
    # apart, and at least 10x the last save's duration apart (<= ~10% overhead on huge galleries).
    checkpoint_s = 60.0
    threads = 1  # decoding threads running ahead of the forward (cir_core.ingest)

    def __init__(self, root: str | os.PathLike, shipped: str | os.PathLike | None = None):
        """`root`: the cache; `shipped`: a folder of read-only `<gallery>.npz` embeddings shipped
        with the code (`write_shipped`), a head start for a cold cache (the app's first start)."""
        self.root = Path(root).expanduser()
        self.shipped = Path(shipped) if shipped else None

    def folder(self, gallery: Gallery, backbone: Encoder) -> Path:
        return self.root / hashlib.sha1(backbone.id.encode()).hexdigest()[:16] / safe_name(gallery.name)

    def embed(
        self,
        gallery: Gallery,
        backbone: Encoder,
        batch_size: int = 64,
        progress: bool = False,
        progress_cb: Callable[[int, int], None] | None = None,
        with_norms: bool = False,
    ) -> Any:
        """Embeddings (N, D) float32 aligned with `gallery.items`; encodes only new/changed items.
        With `with_norms`, `(embeddings, raw feature norms (N,))`: each image's norm before L2
        normalisation, recorded beside its row (a row cached without one is encoded again).

        `progress_cb(done, total)` counts items actually encoded. Unreadable images raise
        `ImageLoadError` naming the file.
        """
        folder = self.folder(gallery, backbone)
        keys = [gallery.fingerprint(i) for i in range(len(gallery))]
        old = self._load(folder, backbone)
        if self.shipped is not None and not set(keys) <= old.keys():
            old = {**read_shipped(self.shipped / shipped_name(gallery), backbone), **old}
        out = np.zeros((len(keys), int(backbone.dim)), np.float32)
        norms = np.full(len(keys), np.nan, np.float32)
        done = np.zeros(len(keys), bool)
        for i, k in enumerate(keys):
            if k in old:
                (out[i], norms[i]), done[i] = old[k], True
        todo = np.nonzero(~done)[0]
        if len(todo) == 0 and old.keys() == set(keys):  # nothing new, nothing removed: no write
            return (out, norms) if with_norms else out
        folder.mkdir(parents=True, exist_ok=True)
        ident = {"id": backbone.id, "dim": int(backbone.dim)}
        atomic_write(folder / "backbone.json", lambda f: json.dump(ident, f), False)

        from .progress import tracked

        with tracked(f"embedding {gallery.name}", total=len(todo), unit="image", log=progress) as task:
            self._encode(gallery, backbone, folder, keys, todo, out, norms, done, batch_size, task, progress_cb)
        self._save(folder, keys, out, norms)
        return (out, norms) if with_norms else out

    def _encode(self, gallery: Gallery, backbone: Encoder, folder: Path, keys: list[str], todo: np.ndarray,
                out: np.ndarray, norms: np.ndarray, done: np.ndarray, batch_size: int, task: Any,
                progress_cb: Callable[[int, int], None] | None) -> None:
        """Encode rows `todo` into `out` / `norms` (marking `done`), saving now and then."""
        if progress_cb:
            progress_cb(0, len(todo))
        last_save, save_cost, n_done = time.monotonic(), 0.0, 0
        chunks = [[int(i) for i in todo[s : s + batch_size]] for s in range(0, len(todo), batch_size)]
        # A backbone that takes preprocessed batches gets them, prepared ahead with the decoding;
        # any other (a test's stand-in) gets the decoded images through encode_images.
        tensors = tensor_encoder(backbone)
        rows = GalleryRows(gallery, tensors.preprocess if tensors is not None else None,
                           draft=getattr(backbone, "image_size", None))
        for chunk, x, errors in batches(rows, chunks, workers=self.threads):  # decoding runs ahead
            if errors:
                i, msg = errors[0]
                raise ImageLoadError(f"gallery {gallery.name!r} item {gallery.items[i].id!r}: {msg}")
            if tensors is not None:
                assert isinstance(x, torch.Tensor)  # no error: every row loaded, preprocessed and stacked
                out[chunk], norms[chunk] = tensors.encode_image_batch(x, with_norms=True)
            else:
                assert isinstance(x, list)  # no error: every row loaded, a decoded image each
                out[chunk], norms[chunk] = backbone.encode_images(x, batch_size=batch_size, progress=False,
                                                                  with_norms=True)
            done[chunk] = True
            n_done += len(chunk)
            task.update(len(chunk))
            if progress_cb:
                progress_cb(n_done, len(todo))
            if n_done < len(todo) and time.monotonic() - last_save > max(self.checkpoint_s, 10 * save_cost):
                t0 = time.monotonic()
                self._save(folder, [k for k, d in zip(keys, done) if d], out[done], norms[done])
                last_save, save_cost = time.monotonic(), time.monotonic() - t0

    @staticmethod
    def _save(folder: Path, keys: list[str], emb: np.ndarray, norms: np.ndarray) -> None:
        # keys.json is the commit point: removed first, written last. A kill in between leaves no
        # keys.json, so the next run re-encodes rather than pairing old keys with new rows.
        (folder / "keys.json").unlink(missing_ok=True)
        atomic_write(folder / "embeddings.npy", lambda f: np.save(f, np.ascontiguousarray(emb)), True)
        atomic_write(folder / "norms.npy", lambda f: np.save(f, np.ascontiguousarray(norms)), True)
        atomic_write(folder / "keys.json", lambda f: json.dump(keys, f), False)

    @staticmethod
    def _load(folder: Path, backbone: Encoder) -> dict[str, tuple[np.ndarray, float]]:
        """fingerprint -> (row, raw norm) of a previous run, or {} when there is none or it is
        unusable; rows without a recorded raw norm (an older cache) are left out, to be encoded."""
        try:
            meta = loads_json((folder / "backbone.json").read_text(encoding="utf-8"))
            keys = loads_json((folder / "keys.json").read_text(encoding="utf-8"))
            emb = np.load(folder / "embeddings.npy")
            norms = np.load(folder / "norms.npy")
        except (OSError, ValueError, EOFError):
            return {}
        if (
            meta.get("id") != backbone.id
            or not isinstance(keys, list)
            or emb.ndim != 2
            or emb.shape != (len(keys), int(backbone.dim))
            or norms.shape != (len(keys),)
        ):
            return {}
        return {k: (e, float(n)) for k, e, n in zip(keys, emb.astype(np.float32, copy=False), norms)
                if np.isfinite(n)}


def shipped_name(gallery: Gallery) -> str:
    """The file name a gallery's shipped embeddings go under."""
    return f"{safe_name(gallery.name)}.npz"


def write_shipped(path: str | os.PathLike, keys: Sequence[str], emb: np.ndarray, norms: np.ndarray,
                  backbone: Encoder) -> Path:
    """Embeddings to ship with the code: float16 rows and float32 raw norms keyed by item
    fingerprints, with the backbone's id (which includes its weights' hash), so a mismatch is
    detected, not used."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda f: np.savez_compressed(
        f, keys=np.asarray(list(keys)), emb=np.asarray(emb, np.float16),
        norms=np.asarray(norms, np.float32), backbone=np.asarray(str(backbone.id))), True)
    return path


def read_shipped(path: Path, backbone: Encoder) -> dict[str, tuple[np.ndarray, float]]:
    """fingerprint -> (row, raw norm) of a shipped file, or {} when it is absent, unreadable, for
    another backbone or without raw norms (its rows are then encoded as usual)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            if (str(z["backbone"]) != backbone.id or z["emb"].shape[1:] != (int(backbone.dim),)
                    or z["norms"].shape != z["emb"].shape[:1]):
                return {}
            return {k: (e, float(n)) for k, e, n in zip(z["keys"].tolist(), z["emb"].astype(np.float32), z["norms"])}
    except (OSError, ValueError, KeyError, EOFError):
        return {}
