"""A gallery as a Hub dataset repo: the file layout `push gallery` writes and the app reads.

    README.md                    dataset card: the frames load with `datasets.load_dataset(repo)`
    gallery.json                 what the repo holds: name, frames, thumbnails, one entry per backbone
    frames/metadata.jsonl        the imagefolder convention: `file_name` (relative to frames/) + the
                                 gallery's own columns (id, character/film ids, boxes, captions, ...)
    frames/<file_name>           the full frames, as pushed (fetched one by one, when opened)
    thumbs/offsets.npy           (N, 2) int64: each frame's thumbnail bytes [start, stop) in its shard
    thumbs/shard-NNNNN.npy       uint8: JPEG thumbnails of frames [s*per_shard, (s+1)*per_shard)
    index/<slug>/...             a prebuilt index folder (cir_core.index.prebuilt, format 2) per
                                 backbone: build.json, gallery.jsonl (paths are frames/<file_name>,
                                 `cir_frame` the row of metadata.jsonl),
                                 embeddings.npy, norms.npy, index.faiss (approximate ones only),
                                 skipped.jsonl
    cir_manifest.json            sha256 of every file (cir_core.storage.manifest)

Thumbnails are packed into a few shards (a Hub repo should stay under ~100k files and 10k per
folder); they and one backbone's index are what the app downloads at start-up.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from cir_core.fileio import loads_json

from ...gallery import safe_name
from ...index.prebuilt import BUILD_FILE, EMB_FILE, GALLERY_FILE, INDEX_FILE, NORMS_FILE, SKIPPED_FILE
from ...storage import StorageError, is_plain_path

FORMAT = "cir-gallery/1"
GALLERY_JSON, CARD = "gallery.json", "README.md"
FRAMES, METADATA = "frames", "frames/metadata.jsonl"
THUMBS, OFFSETS = "thumbs", "thumbs/offsets.npy"
FRAME_KEY = "cir_frame"  # in each index row: its frame's position in metadata.jsonl (and the thumbnails)
INDEX_FILES = (BUILD_FILE, GALLERY_FILE, EMB_FILE, NORMS_FILE, SKIPPED_FILE)  # + INDEX_FILE if approximate


def backbone_slug(backbone_id: str) -> str:
    """The folder name under index/ of a backbone's embeddings."""
    return safe_name(backbone_id)


def thumb_shard(s: int) -> str:
    return f"{THUMBS}/shard-{s:05d}.npy"


def index_files(slug: str, kind: str) -> list[str]:
    """The files of one backbone's index folder in the repo (index.faiss only when approximate:
    an exact folder is searched from its embeddings)."""
    names = list(INDEX_FILES) + ([INDEX_FILE] if kind != "flat" else [])
    return [f"index/{slug}/{n}" for n in names]


def thumbnail_files(info: dict[str, Any]) -> list[str]:
    """The packed thumbnails: their offsets and shards."""
    return [OFFSETS, *(thumb_shard(s) for s in range(int(info["thumb_shards"])))]


def startup_files(info: dict[str, Any], slug: str) -> list[str]:
    """What the app downloads before it answers: the thumbnails and one backbone's index folder."""
    return [*thumbnail_files(info), *index_files(slug, info["backbones"][slug]["kind"])]


def parse_info(text: str, where: str) -> dict[str, Any]:
    """gallery.json's content, checked; StorageError naming the key that is wrong."""
    try:
        info = loads_json(text)
    except ValueError as exc:
        raise StorageError(f"{where}: {GALLERY_JSON} is not valid JSON ({exc})") from None
    if not isinstance(info, dict) or info.get("format") != FORMAT:
        raise StorageError(f"{where}: {GALLERY_JSON} is not a {FORMAT} file")
    for key, typ in (("name", str), ("frames", int), ("thumb_size", int), ("thumb_shards", int),
                     ("per_shard", int), ("backbones", dict)):
        if not isinstance(info.get(key), typ):
            raise StorageError(f"{where}: {GALLERY_JSON} key {key!r} must be a {typ.__name__}")
    for slug, entry in info["backbones"].items():
        if not is_plain_path(slug) or "/" in slug or not isinstance(entry, dict) or \
                not isinstance(entry.get("backbone"), str) or entry.get("kind") not in ("flat", "hnsw", "ivf-flat"):
            raise StorageError(f"{where}: {GALLERY_JSON} backbone entry {slug!r} needs 'backbone' and a "
                               "'kind' of flat, hnsw or ivf-flat")
    return info


def check_gallery_layout(folder: Path, files: list[str], where: str) -> None:
    """What `push gallery` writes, present and consistent (files relative to `folder`)."""
    have = set(files)
    if GALLERY_JSON not in have:
        raise StorageError(f"{where}: no {GALLERY_JSON} (publish galleries with `python -m cir_core.hub push gallery`)")
    info = parse_info((folder / GALLERY_JSON).read_text(encoding="utf-8"), where)
    if not info["backbones"]:
        raise StorageError(f"{where}: {GALLERY_JSON} lists no backbone: nothing to search with")
    images = [f for f in files if f.lower().endswith((".jpg", ".jpeg", ".png", ".webp", ".bmp"))]
    stray = [f for f in images if not f.startswith(f"{FRAMES}/")]
    if stray:
        raise StorageError(f"{where}: image file(s) outside {FRAMES}/: {', '.join(stray[:5])}")
    for slug in info["backbones"]:
        missing = [f for f in [METADATA, *startup_files(info, slug)] if f not in have]
        if missing:
            raise StorageError(f"{where}: missing {', '.join(missing[:5])}")
