"""`python -m cir_core.hub push gallery SRC org/name --backbone ViT-L-14 --pretrained openai`: a folder
of frames (or a JSONL/CSV manifest with its columns) to a Hub dataset repo in the layout of
`layout.py`, embedded with each backbone by `cir_core.index build` (resumable, in `--work`), or
from index folders already built from the same source (`--index DIR`)."""
from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from ...errors import GalleryError
from ...fileio import atomic_write, loads_json, sha256_file
from ...gallery import Gallery, GalleryItem, safe_name
from ...index.prebuilt import BUILD_FILE, EMB_FILE, GALLERY_FILE, INDEX_FILE, NORMS_FILE, SKIPPED_FILE, read_meta
from ...storage import Store, is_plain_path
from .layout import CARD, FORMAT, FRAME_KEY, FRAMES, GALLERY_JSON, METADATA, backbone_slug
from .thumbs import PER_SHARD, write_thumbs

THUMB_SIZE = 160  # the app's result thumbnails; larger views fetch the full frame
IMAGE_EXTS = (".jpg", ".jpeg", ".png", ".webp", ".bmp")


def build_indexes(src: str, backbones: Sequence[tuple[str, str | None]], work: Path,
                  progress: bool = True, **build_kw: Any) -> list[Path]:
    """An index folder of `src` per (backbone, pretrained), built (or resumed) under `work`."""
    from ...index.build import build

    out = []
    for model, pretrained in backbones:
        folder = work / safe_name(f"{model}|{pretrained or ''}")
        build(src, model, pretrained, folder, progress=progress, **build_kw)
        out.append(folder)
    return out


def file_names(items: Sequence[Any]) -> list[str]:
    """Each frame's name under frames/: its id when that is a plain relative image path (a
    folder's ids are), else a numbered name in folders of 10,000 (a Hub folder's limit)."""
    names = []
    for k, it in enumerate(items):
        ext = os.path.splitext(it.path or "")[1].lower() or ".jpg"
        ok = is_plain_path(it.id) and it.id.lower().endswith(IMAGE_EXTS) and it.id != "metadata.jsonl"
        names.append(it.id if ok else f"{k // 10_000:03d}/{k:07d}{ext}")
    if len(set(names)) != len(names):
        raise GalleryError("two frames would get the same file name under frames/: give the manifest "
                           "unique ids that are relative image paths")
    return names


def _index_rows(folder: Path, src: Gallery) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(build.json, gallery.jsonl rows) of an index folder, checked against the source."""
    meta = read_meta(folder)
    if meta is None:
        raise GalleryError(f"{str(folder)!r} is not a finished index folder (no {BUILD_FILE})")
    rows = [loads_json(line) for line in (folder / GALLERY_FILE).read_text(encoding="utf-8").splitlines()
            if line.strip()]
    for r in rows:
        try:
            i = src.index_of(str(r["id"]))
        except (GalleryError, KeyError):
            raise GalleryError(f"index folder {str(folder)!r} holds item {r.get('id')!r}, which the source "
                               f"gallery {src.name!r} does not: build it from the same source") from None
        if r.get("fingerprint") != src.fingerprint(i):
            raise GalleryError(f"index folder {str(folder)!r} is stale: item {r['id']!r} changed since it "
                               "was built; rerun `python -m cir_core.index build` (it re-embeds only that shard)")
    return meta, rows


def _file(item: GalleryItem, gallery: Gallery) -> str:
    """The file of an item of a folder or manifest gallery (each has one)."""
    if item.path is None:
        raise GalleryError(f"gallery {gallery.name!r} item {item.id!r} has no file to publish")
    return item.path


def _link(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:  # a hard link costs nothing for gigabytes of frames and vectors
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def _jsonl(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    atomic_write(path, lambda f: f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), False)


def stage(src: str, indexes: Sequence[Path], out: Path, repo: str, thumb_size: int = THUMB_SIZE,
          progress: bool = True) -> dict[str, Any]:
    """Write the repo's files into `out` (emptied first); returns gallery.json's content."""
    from ...index.build import FILE_KINDS, open_source

    gallery = open_source(src, FILE_KINDS)  # its frames are files: they are published
    built = [(Path(f), *_index_rows(Path(f), gallery)) for f in indexes]
    if not built:
        raise GalleryError("push gallery needs at least one --backbone (or --index folder) to embed it with")
    wanted = {str(r["id"]) for _, _, rows in built for r in rows}
    items = [it for it in gallery.items if it.id in wanted]  # unreadable everywhere: left out
    names = dict(zip((it.id for it in items), file_names(items)))
    position = {it.id: k for k, it in enumerate(items)}
    files = {it.id: _file(it, gallery) for it in items}
    digest = {it.id: f"sha256:{sha256_file(files[it.id])}" for it in items}
    columns_of = {it.id: {k: v for k, v in it.meta.items() if k != "fingerprint"} for it in items}
    shutil.rmtree(out, ignore_errors=True)
    (out / FRAMES).mkdir(parents=True)
    for it in items:
        _link(Path(files[it.id]), out / FRAMES / names[it.id])
    _jsonl(out / METADATA, [{"file_name": names[it.id], "id": it.id, **columns_of[it.id]} for it in items])
    shards = write_thumbs([files[it.id] for it in items], out, thumb_size, progress=progress)
    backbones = {}
    for folder, meta, rows in built:
        slug = backbone_slug(meta["backbone"])
        if slug in backbones:
            raise GalleryError(f"two index folders for backbone {meta['backbone']!r}: give each backbone once")
        dst = out / "index" / slug
        for name in (EMB_FILE, NORMS_FILE, SKIPPED_FILE) + ((INDEX_FILE,) if meta["kind"] != "flat" else ()):
            if not (folder / name).is_file():
                raise GalleryError(f"index folder {str(folder)!r} has no {name}: rebuild it (format 2 has {NORMS_FILE})")
            _link(folder / name, dst / name)
        # the pusher's local paths (in `path` and the fingerprints) stay home
        # the columns as the source has them now (the index folder may predate an edited caption)
        _jsonl(dst / GALLERY_FILE, [{"id": i, "path": f"{FRAMES}/{names[i]}", **columns_of[i], "fingerprint": digest[i],
                                     FRAME_KEY: position[i]} for i in (str(r["id"]) for r in rows)])
        atomic_write(dst / BUILD_FILE, partial(json.dump, {**meta, "source": f"hf:{repo}"}, indent=1), False)
        backbones[slug] = {"backbone": meta["backbone"], "dim": int(meta["dim"]), "n": int(meta["n"]),
                           "kind": meta["kind"]}
    columns = sorted({k for it in items for k in it.meta if k != "fingerprint"})
    info = {"format": FORMAT, "name": repo.rpartition("/")[2], "frames": len(items), "thumb_size": int(thumb_size),
            "thumb_shards": shards, "per_shard": PER_SHARD, "columns": columns, "backbones": backbones,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S")}
    atomic_write(out / GALLERY_JSON, lambda f: json.dump(info, f, indent=1), False)
    atomic_write(out / CARD, lambda f: f.write(card(repo, info, names.values())), False)
    return info


def card(repo: str, info: dict[str, Any], names: Any) -> str:
    """The dataset card: YAML that makes `datasets` load frames/ as an imagefolder, and how to open it."""
    exts = sorted({os.path.splitext(n)[1].lower() for n in names})
    paths = "\n".join(f'    - "{FRAMES}/**/*{e}"' for e in exts)
    models = "\n".join(f"- `{e['backbone']}` ({e['n']:,} x {e['dim']}, {e['kind']} index)"
                       for e in info["backbones"].values())
    return (f"---\nconfigs:\n- config_name: default\n  data_files:\n  - split: train\n    path:\n"
            f'    - "{METADATA}"\n{paths}\ntags:\n- cir-workbench\n---\n\n# {info["name"]}\n\n'
            f"A CIR Workbench gallery: {info['frames']:,} frames in `{FRAMES}/` (imagefolder, with "
            f"`{METADATA}`), {info['thumb_size']} px thumbnails in `thumbs/`, and prebuilt embeddings for\n\n"
            f"{models}\n\nOpen it in the workbench (pin the commit):\n\n"
            f"    python app.py --gallery hf:{repo}@<commit> --backbone ...\n")


def push_gallery(src: str, spec: str, *, backbones: Sequence[tuple[str, str | None]] = (),
                 indexes: Sequence[str] = (), work: str | os.PathLike | None = None,
                 thumb_size: int = THUMB_SIZE, tag: str | None = None, message: str | None = None,
                 backend: Store | None = None, progress: bool = True, **build_kw: Any):
    """Embed `src` with each backbone (or take built `indexes`), stage the repo and push it as one
    commit with its manifest (`cir_core.storage.repo.push`); returns the `Pushed` record."""
    from ...storage.repo import parse_spec, push
    from .layout import check_gallery_layout

    ref = parse_spec(spec)
    work = Path(work).expanduser() if work else Path(str(Path(src).expanduser().resolve()) + ".hub")
    folders = [Path(i).expanduser() for i in indexes]
    folders += build_indexes(src, backbones, work, progress, **build_kw)
    info = stage(src, folders, work / "repo", ref.repo_id, thumb_size, progress)
    if progress:
        print(f"staged {info['frames']:,} frames, {info['thumb_shards']} thumbnail shard(s), "
              f"{len(info['backbones'])} backbone(s) in {work / 'repo'}", file=sys.stderr)
    return push("gallery", work / "repo", spec, tag=tag, backend=backend, progress=progress,
                layout=check_gallery_layout,
                message=message or f"cir_core.hub push gallery {info['name']} ({info['frames']} frames)")
