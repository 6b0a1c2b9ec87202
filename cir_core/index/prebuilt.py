"""A prebuilt index folder (written by `python -m cir_core.index build`): the app opens it as a
gallery without re-encoding or re-indexing anything.

Layout of the folder:

- `build.json`: what was built (backbone id, dim, rows, index kind and parameters, a digest of the
  source's fingerprints). Written last and removed first on a rebuild: the folder is complete
  exactly when it exists.
- `gallery.jsonl`: one row per embedded image, in embedding order: `id`, `path`, `fingerprint`
  and the manifest's other columns.
- `embeddings.npy`: (N, D) float32, L2-normalised; opened memory-mapped.
- `norms.npy`: (N,) float32, each image's raw feature norm before normalisation (what the zero-shot
  peers' released φ reads; format 2 on).
- `index.faiss`: `cir_core.search.Index.save` over those rows (opened only when approximate: an exact
  folder is searched from `embeddings.npy`, and its flat index is not loaded).
- `skipped.jsonl`: images that could not be read (`id`, `path`, `error`); not in the gallery.
- `shards/`: the embedding work in progress, kept so a rerun after adding images is cheap.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cir_core.fileio import loads_json

from ..encoder import Encoder
from ..errors import GalleryError
from ..gallery import Gallery, GalleryItem
from ..gallery_spec import BUILD_FILE, GalleryContext, GallerySpec, OpenedGallery, register_opener
from ..search.index import Index

FORMAT = 2  # 2: norms.npy; a format-1 folder opens without raw norms
READS = (1, 2)
GALLERY_FILE, EMB_FILE, INDEX_FILE, SKIPPED_FILE, NORMS_FILE = (
    "gallery.jsonl", "embeddings.npy", "index.faiss", "skipped.jsonl", "norms.npy")


@dataclass
class Prebuilt:
    """An opened index folder: its gallery, embeddings (memory-mapped), index and build record."""

    folder: Path
    meta: dict[str, Any]
    gallery: Gallery
    embeddings: np.ndarray
    index: Index | None  # the approximate index; None for an exact folder (searched from the embeddings)
    norms: np.ndarray | None = None  # raw feature norms (N,); None in a format-1 folder

    def check_backbone(self, backbone: Encoder) -> None:
        """GalleryError unless `backbone` is the one the folder was embedded with."""
        if self.meta.get("backbone") != backbone.id or int(self.meta.get("dim", -1)) != int(backbone.dim):
            raise GalleryError(
                f"index folder {str(self.folder)!r} was embedded with backbone {self.meta.get('backbone')!r} "
                f"(dim {self.meta.get('dim')}), but the app runs {backbone.id!r} (dim {backbone.dim}): "
                "start the app with the same --backbone/--pretrained, or rebuild the index")


@register_opener("index")
def open_index_folder(spec: GallerySpec, ctx: GalleryContext) -> OpenedGallery:
    """An index folder: its embeddings memory-mapped, its index as saved, nothing encoded; the
    backbone, when given, must be the one it was embedded with."""
    pre = open_prebuilt(spec.path)
    if ctx.backbone is not None:
        pre.check_backbone(ctx.backbone)
    return OpenedGallery(pre.gallery, embeddings=pre.embeddings, norms=pre.norms, index=pre.index)


def is_prebuilt(path: str | os.PathLike) -> bool:
    """Whether `path` is a (complete) index folder."""
    return (Path(path).expanduser() / BUILD_FILE).is_file()


def read_meta(folder: str | os.PathLike) -> dict[str, Any] | None:
    """The folder's build record, or None when it has none (not built, or a build in progress)."""
    try:
        meta = loads_json((Path(folder).expanduser() / BUILD_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


def open_prebuilt(folder: str | os.PathLike) -> Prebuilt:
    """Open an index folder; GalleryError naming the folder if it is incomplete or inconsistent."""
    folder = Path(folder).expanduser()
    meta = read_meta(folder)
    if meta is None:
        raise GalleryError(f"{str(folder)!r} is not a finished index folder (no readable {BUILD_FILE}); "
                           "build it with `python -m cir_core.index build`")
    if meta.get("format") not in READS:
        raise GalleryError(f"index folder {str(folder)!r} has format {meta.get('format')!r}; "
                           f"this version reads formats {', '.join(map(str, READS))}: rebuild it")
    try:
        emb = np.load(folder / EMB_FILE, mmap_mode="c")  # copy-on-write: writable for torch, never written back
        # an exact folder's flat index.faiss is a second copy of the embeddings: not loaded
        index = None if meta.get("kind") == "flat" else Index.load(folder / INDEX_FILE)
        rows = [loads_json(line) for line in
                (folder / GALLERY_FILE).read_text(encoding="utf-8").splitlines() if line.strip()]
        norms = np.load(folder / NORMS_FILE) if meta["format"] >= 2 else None  # a format READS holds
    except (OSError, ValueError, RuntimeError) as exc:
        raise GalleryError(f"index folder {str(folder)!r} is damaged: {type(exc).__name__}: {exc}"
                           .splitlines()[0]) from None
    n, dim = int(meta.get("n", -1)), int(meta.get("dim", -1))
    held = (n, dim) if index is None else (index.ntotal, index.dim)
    if emb.dtype != np.float32 or emb.shape != (n, dim) or len(rows) != n or held != (n, dim):
        raise GalleryError(
            f"index folder {str(folder)!r} is inconsistent: {BUILD_FILE} says {n} x {dim}, "
            f"{EMB_FILE} is {emb.shape} {emb.dtype}, {GALLERY_FILE} has {len(rows)} rows, "
            f"{INDEX_FILE} holds {held[0]} x {held[1]}: rebuild it")
    if norms is not None and norms.shape != (n,):
        raise GalleryError(f"index folder {str(folder)!r} is inconsistent: {NORMS_FILE} is {norms.shape}, "
                           f"{BUILD_FILE} says {n} rows: rebuild it")
    items = [GalleryItem(str(r["id"]), r.get("path"), {k: v for k, v in r.items() if k not in ("id", "path")})
             for r in rows]
    gallery = Gallery(str(meta.get("name") or folder.name), items)
    return Prebuilt(folder, meta, gallery, emb, index, None if norms is None else norms.astype(np.float32))
