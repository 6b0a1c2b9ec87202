"""`--gallery hf:org/name@rev`: a gallery pushed by `push gallery`, opened from the Hub (or only
its pictures, `open_hub_images`, for a Milvus gallery of the same frames: `?images=hf:...`).

At start-up: the manifest (which resolves the revision to one commit, read file by file from then
on), gallery.json, the thumbnails and the app's backbone's index folder, each verified against the
manifest's sha256, with a progress bar. Full frames are fetched one at a time when a view larger
than a thumbnail asks for one. Offline, everything comes from the cache (and says so).
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from PIL import Image

from ... import env as environment
from ...encoder import Encoder
from ...errors import GalleryError
from ...fileio import loads_json
from ...gallery import Gallery, GalleryItem, ImageFn
from ...gallery_spec import GalleryContext, GallerySpec, OpenedGallery, register_images, register_opener
from ...imageio import load_image
from ...index.prebuilt import Prebuilt, open_prebuilt
from ...storage import NotCached, StorageError, Store, is_plain_path
from ...storage.manifest import MANIFEST, ManifestMismatch, check_policy, read_manifest, verify_file
from ...storage.repo import RepoRef, default_backend, fetch_file, parse_spec
from .layout import FRAME_KEY, GALLERY_JSON, METADATA, parse_info, startup_files, thumbnail_files
from .thumbs import ThumbPack

log = logging.getLogger(__name__)
FILE_KEY = "cir_file"  # an item's frame in the repo (frames/<file_name>): fetched when opened
PREFIX = "hf:"


def is_hub_gallery(spec: str | None) -> bool:
    """Whether `spec` names a Hub gallery (`hf:org/name[@rev]`; `cir_core.gallery_spec` decides)."""
    from ...gallery_spec import spec_kind

    return spec_kind(spec) == "hub"


@dataclass
class HubGallery:
    """An opened Hub gallery: the pinned commit, its gallery (images from the Hub) and index."""

    ref: RepoRef  # revision = the commit every file was read at
    info: dict[str, Any]
    gallery: Gallery
    prebuilt: Prebuilt
    note: str | None  # "offline: using the cached snapshot ..." when the Hub was unreachable


class _Remote:
    """Files of one commit: fetched (or, offline, found in the cache) and sha256-verified."""

    def __init__(self, backend: Store, ref: RepoRef, folder: Path, listed: dict, offline: bool, where: str):
        self.backend, self.ref, self.folder, self.listed = backend, ref, folder, listed
        self.offline, self.where = offline, where
        self.note: str | None = None  # "offline: using the cached snapshot ..." when the Hub was unreachable

    def get(self, name: str) -> Path:
        if name not in self.listed or not is_plain_path(name):
            raise ManifestMismatch(f"{self.where}: {name} is not in the manifest")
        if self.offline:
            try:
                snap = self.backend.fetch_file(self.ref.repo_id, name, repo_type="dataset",
                                               revision=self.ref.revision, local_files_only=True)
            except NotCached:
                raise StorageError(f"{self.where}: {name} is not in the local cache and the Hub is "
                                   "unreachable: connect once to download it") from None
        else:
            snap, _ = fetch_file("gallery", self.ref, name, self.backend)
        try:
            return verify_file(snap.path, name, self.listed, self.where)
        except ManifestMismatch as exc:  # a commit's files never change: only a bad download does
            raise ManifestMismatch(f"{exc} (cached at {snap.path / name}: delete it to download it again)") from None


class HubImages:
    """The gallery's `image_fn`: a thumbnail when the view is no larger than one, else the full
    frame, fetched on first use and verified; offline and uncached, the thumbnail (logged)."""

    def __init__(self, remote: _Remote, thumbs: ThumbPack, thumb_size: int):
        self.remote, self.thumbs, self.thumb_size = remote, thumbs, thumb_size
        self._verified: dict[str, Path] = {}
        self._lock = threading.Lock()

    def __call__(self, item: GalleryItem, size: int | None) -> Image.Image:
        if size is not None and size <= self.thumb_size:
            img = self.thumbs.image(int(item.meta[FRAME_KEY]))
        else:
            img = self.frame(item)
        if size is not None:
            img.thumbnail((size, size))
        return img

    def frame(self, item: GalleryItem) -> Image.Image:
        name = str(item.meta[FILE_KEY])
        path = self._verified.get(name)
        if path is None:
            try:
                path = self.remote.get(name)
            except ManifestMismatch as exc:
                raise GalleryError(str(exc)) from None  # tampered or corrupt: never shown
            except StorageError as exc:  # offline and not cached, or the Hub went away
                log.warning("%s: full frame %s unavailable (%s); showing its thumbnail", self.remote.where, name, exc)
                return self.thumbs.image(int(item.meta[FRAME_KEY]))
            with self._lock:
                self._verified[name] = path
        return load_image(path)


def _open_remote(spec: str, backend: Store | None, env: Mapping[str, str] | None) -> tuple[_Remote, dict[str, Any]]:
    """The repo's files at one commit (the revision resolved once, from the manifest) and its
    gallery.json; `spec` as `open_hub_gallery` takes it."""
    ref = parse_spec(spec[len(PREFIX):] if is_hub_gallery(spec) else spec,
                     (environment.read("CIR_GALLERY_REVISION", env=env) or "").strip() or None)
    where = f"gallery hf:{ref}"
    backend = backend or default_backend()
    snap, note = fetch_file("gallery", ref, MANIFEST, backend)  # resolves the revision once
    listed = read_manifest(snap.path / MANIFEST, "gallery", where)
    check_policy(listed, where, "gallery")  # a pickle anywhere in the repo refuses all of it
    remote = _Remote(backend, RepoRef(ref.repo_id, snap.commit), snap.path, listed, note is not None, where)
    remote.note = note
    return remote, parse_info(remote.get(GALLERY_JSON).read_text(encoding="utf-8"), where)


def open_hub_gallery(spec: str, backbone: Encoder, progress_cb: Callable[..., None] | None = None,
                     backend: Store | None = None, env: Mapping[str, str] | None = None,
                     progress: bool = True) -> HubGallery:
    """Pull what the app needs of `hf:org/name[@rev]` (revision: `@rev` > CIR_GALLERY_REVISION >
    main) for `backbone` and open it; GalleryError / StorageError naming the repo and the file."""
    remote, info = _open_remote(spec, backend, env)
    where = remote.where
    slug = pick_backbone(info, backbone, where)
    files = startup_files(info, slug)
    _download(remote, files, f"gallery {remote.ref.repo_id}: thumbnails and index", progress_cb, progress)
    pre = open_prebuilt(remote.folder / "index" / slug)
    pre.check_backbone(backbone)
    thumbs = ThumbPack(remote.folder, info["frames"], info["per_shard"], info["thumb_shards"], where)
    items = []
    for it in pre.gallery.items:
        k = it.meta.get(FRAME_KEY)
        if not isinstance(k, int) or not 0 <= k < info["frames"] or not str(it.path or "").startswith("frames/"):
            raise GalleryError(f"{where}: index row {it.id!r} has no frame position or frame file")
        items.append(GalleryItem(it.id, None, {**it.meta, FILE_KEY: it.path}))
    gallery = Gallery(info["name"], items, image_fn=HubImages(remote, thumbs, info["thumb_size"]))
    pre.gallery = gallery
    return HubGallery(remote.ref, info, gallery, pre, remote.note)


def open_hub_images(spec: str, progress_cb: Callable[..., None] | None = None, backend: Store | None = None,
                    env: Mapping[str, str] | None = None, progress: bool = True) -> ImageFn:
    """The pictures of `hf:org/name[@rev]` without its index: an image function over items
    matched by id (what a Milvus gallery built from the same frames shows on a Space). At start
    the thumbnails and frames/metadata.jsonl; each frame when opened, as `open_hub_gallery`."""
    remote, info = _open_remote(spec, backend, env)
    _download(remote, [*thumbnail_files(info), METADATA], f"gallery {remote.ref.repo_id}: thumbnails",
              progress_cb, progress)
    thumbs = ThumbPack(remote.folder, info["frames"], info["per_shard"], info["thumb_shards"], remote.where)
    frames = {}
    for k, line in enumerate(remote.get(METADATA).read_text(encoding="utf-8").splitlines()):
        row = loads_json(line)
        frames[str(row["id"])] = {FRAME_KEY: k, FILE_KEY: f"frames/{row['file_name']}"}
    images = HubImages(remote, thumbs, info["thumb_size"])

    def image_fn(item: GalleryItem, size: int | None) -> Image.Image:
        at = frames.get(item.id)
        if at is None:
            raise GalleryError(f"{remote.where} has no frame of item {item.id!r}: the collection and the Hub gallery "
                               "must be built from the same frames")
        return images(GalleryItem(item.id, None, at), size)

    return image_fn


@register_images("hub")
def hub_images(spec: GallerySpec, ctx: GalleryContext) -> ImageFn:
    """`images=hf:org/name@rev` of a Milvus gallery: that Hub gallery's thumbnails and frames."""
    return open_hub_images(spec.text, progress_cb=ctx.progress_cb)


@register_opener("hub")
def open_hub(spec: GallerySpec, ctx: GalleryContext) -> OpenedGallery:
    """`hf:org/name[@rev]`: thumbnails and the backbone's index at start-up (`open_hub_gallery`)."""
    if ctx.backbone is None:
        raise GalleryError(f"gallery {spec.text!r}: a Hub gallery is opened for a backbone (none given)")
    hub = open_hub_gallery(spec.text, ctx.backbone, progress_cb=ctx.progress_cb)
    pre = hub.prebuilt
    return OpenedGallery(hub.gallery, embeddings=pre.embeddings, norms=pre.norms, index=pre.index, note=hub.note)


def pick_backbone(info: dict[str, Any], backbone: Encoder, where: str) -> str:
    """The index folder embedded with `backbone`; GalleryError naming both when there is none."""
    for slug, entry in info["backbones"].items():
        if entry["backbone"] == backbone.id and int(entry.get("dim", -1)) == int(backbone.dim):
            return slug
    have = ", ".join(f"{e['backbone']!r} (dim {e.get('dim')})" for e in info["backbones"].values())
    raise GalleryError(f"{where} was embedded with backbone {have}, but the app runs {backbone.id!r} "
                       f"(dim {backbone.dim}): start the app with that --backbone/--pretrained, or push the "
                       "gallery again with this backbone (`python -m cir_core.hub push gallery ... --backbone`)")


def _download(remote: _Remote, files: list[str], desc: str, progress_cb: Callable[..., None] | None,
              progress: bool) -> None:
    """Fetch and verify `files`, with a console bar and `progress_cb(done, total, desc)` in bytes."""
    from ...progress import tracked

    missing = [f for f in files if f not in remote.listed]
    if missing:
        raise StorageError(f"{remote.where}: the manifest lists no {', '.join(missing[:5])}")
    total = sum(int(remote.listed[f].get("size", 0)) for f in files)
    done = 0
    with tracked(desc, total=total, unit="B", log=progress) as task:
        for f in files:
            remote.get(f)
            size = int(remote.listed[f].get("size", 0))
            done += size
            task.update(size)
            if progress_cb is not None:
                progress_cb(done, total, desc)
