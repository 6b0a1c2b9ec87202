"""What a gallery spec (`--gallery`, `CIR_GALLERY`) names: the one parser, to a typed
`GallerySpec`, and the registry of openers that turn a parsed spec into a gallery.

    spec = parse_gallery_spec("world:films")          # GallerySpec(kind="films", target="test", ...)
    opened = open_gallery_spec(spec, GalleryContext(image_size=64))

Each kind's opener is registered by the module that owns the kind (`@register_opener("hub")` in
`hub/gallery/pull.py`, like the methods' `@register_method`); folders and manifests are opened
here. A consumer imports the owners of the kinds it opens (`cir_core.engine` imports them all).
A spec that fits no form is one `GalleryError` that lists every form (`FORMS`).
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl

from .errors import GalleryError

if TYPE_CHECKING:
    import numpy as np

    from .encoder import Encoder
    from .gallery import Gallery, ImageFn
    from .search.index import Index
    from .search.searcher import VectorStore

# kind -> (the forms it takes, what it is); the order is the parser's and the error's
FORMS: dict[str, tuple[str, str]] = {
    "world": ("world | world:test | world:val", "the generated world's split (default: world, the test split)"),
    "films": ("world:films | world:films-val", "the film world's keyframes (test or val films)"),
    "movienet": ("movienet:ROOT", "a MovieNet identity set (python -m cir_core.benchmarks.movienet build)"),
    "hub": ("hf:ORG/NAME[@REV]", "a Hub gallery (python -m cir_core.hub push gallery)"),
    "milvus": ("milvus:COLLECTION@URI[?shortlist=N&nprobe=N&ef=N&search_list=N&timeout=S&images=hf:ORG/NAME@REV]",
               "a Milvus collection (python -m cir_core.index build --backend milvus); URI: a Milvus Lite "
               "file (./g.db), http://host:19530, https://... (Zilliz Cloud); images=: show the rows' "
               "pictures from that Hub gallery"),
    "index": ("FOLDER with build.json", "an index folder (python -m cir_core.index build)"),
    "folder": ("FOLDER", "an image folder (recursive; ids are relative paths)"),
    "manifest": ("FILE.jsonl | FILE.csv", "a manifest with a 'path' column (other columns are kept)"),
}
KINDS = tuple(FORMS)
WORLD_SPLITS = {"world": "test", "world:test": "test", "world:val": "val",
                "world:films": "test", "world:films-val": "val"}
# Milvus's own rule for collection names: a letter or underscore, then letters, digits, underscores
COLLECTION_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,254}")
# a Milvus gallery's search options: the numbers, and `images` (a Hub gallery's spec)
MILVUS_NUMBERS: dict[str, type[int] | type[float]] = {"shortlist": int, "nprobe": int, "ef": int, "search_list": int,
                                                      "timeout": float}
MILVUS_OPTIONS = (*MILVUS_NUMBERS, "images")
BUILD_FILE = "build.json"  # what marks an index folder (cir_core.index.prebuilt writes it last)


@dataclass(frozen=True)
class GallerySpec:
    """A parsed gallery spec: `kind` (one of KINDS), `target` (the split, a root, a repo
    `org/name[@rev]`, a path or a Milvus URI), `text` (as given); for Milvus, `collection` and
    `options` (search options from the spec's `?k=v&...`)."""

    kind: str
    target: str
    text: str
    collection: str | None = None
    options: Mapping[str, int | float | str] = field(default_factory=dict)

    @property
    def path(self) -> Path:
        """`target` as a local path (folders, manifests, index folders, MovieNet roots)."""
        return Path(self.target).expanduser()


def forms_text() -> str:
    """Every form, one per line (what a bad spec's error and `--help` show)."""
    width = max(len(f) for f, _ in FORMS.values() if len(f) < 40)
    return "\n".join(f"  {form:<{width}}  {what}" if len(form) < 40 else f"  {form}\n  {'':<{width}}  {what}"
                     for form, what in FORMS.values())


def _bad(text: str, why: str) -> GalleryError:
    return GalleryError(f"gallery {text!r}: {why}. A gallery is one of:\n{forms_text()}")


def parse_gallery_spec(text: str) -> GallerySpec:
    """The `GallerySpec` of `text`; one GalleryError naming the spec, what is wrong and every form.
    Scheme forms (`world`, `movienet:`, `hf:`, `milvus:`) are read from the text alone; anything
    else is a path, told apart by what is on disk (an index folder, a folder, a file)."""
    text = str(text).strip()
    if not text:
        raise _bad(text, "empty")
    if text in WORLD_SPLITS:
        return GallerySpec("films" if "films" in text else "world", WORLD_SPLITS[text], text)
    if text.startswith("world:"):
        raise _bad(text, "no such world split")
    scheme, _, rest = text.partition(":")
    if scheme == "movienet":
        if not rest.strip():
            raise _bad(text, "movienet: needs the set's folder (movienet:ROOT)")
        return GallerySpec("movienet", rest.strip(), text)
    if scheme == "hf":
        repo = rest.partition("@")[0]
        if repo.count("/") != 1 or not all(p.strip() for p in repo.split("/")) or rest.endswith("@"):
            raise _bad(text, "a Hub gallery is hf:ORG/NAME or hf:ORG/NAME@REV")
        return GallerySpec("hub", rest, text)
    if scheme == "milvus":
        return _milvus(text, rest)
    path = Path(text).expanduser()
    if path.is_dir():
        return GallerySpec("index" if (path / BUILD_FILE).is_file() else "folder", text, text)
    if path.is_file():
        return GallerySpec("manifest", text, text)
    raise _bad(text, "no such folder or file (neither an image folder nor a manifest)")


def _milvus(text: str, rest: str) -> GallerySpec:
    """milvus:COLLECTION@URI[?k=v&...]: the collection first (its name holds no '@'), the URI
    after the first '@' (so a URI's own user:password@host stays whole), options after its '?'."""
    collection, at, uri = rest.partition("@")
    if not at or not uri.strip():
        raise _bad(text, "a Milvus gallery is milvus:COLLECTION@URI")
    if not COLLECTION_NAME.fullmatch(collection):
        raise _bad(text, f"{collection!r} is not a Milvus collection name (a letter or _, then letters, "
                         "digits, _; at most 255)")
    uri, _, query = uri.partition("?")
    options: dict[str, int | float | str] = {}
    for key, value in parse_qsl(query, keep_blank_values=True, strict_parsing=False):
        if key not in MILVUS_OPTIONS:
            raise _bad(text, f"unknown Milvus option {key!r} (known: {', '.join(MILVUS_OPTIONS)})")
        if key == "images":
            if spec_kind(value) not in IMAGE_KINDS:
                raise _bad(text, f"images={value!r}: the rows' pictures come from a Hub gallery (hf:ORG/NAME@REV)")
            options[key] = value
            continue
        try:
            number = MILVUS_NUMBERS[key](value)
        except ValueError:
            raise _bad(text, f"Milvus option {key}={value!r} is not a number") from None
        if number <= 0:
            raise _bad(text, f"Milvus option {key} must be > 0, got {value}")
        options[key] = number
    return GallerySpec("milvus", uri.strip(), text, collection, options)


def spec_kind(text: str | None) -> str | None:
    """The kind of `text`, or None when it is not a valid spec (for checks that must not raise)."""
    try:
        return parse_gallery_spec(text or "").kind
    except GalleryError:
        return None


# -- opening --------------------------------------------------------------------------------------
@dataclass
class GalleryContext:
    """What openers may need: the backbone's input size (world galleries render and fingerprint
    at it), the world's size, the cache root, the backbone (galleries with stored embeddings are
    checked against it), a progress callback (downloads), and the Milvus token."""

    image_size: int = 64
    world_queries: int = 1000
    cache: Path | None = None
    backbone: Encoder | None = None
    progress_cb: Callable[..., None] | None = None
    milvus_token: str | None = None


@dataclass
class OpenedGallery:
    """An opened gallery: its items, and what the source already holds: the world benchmark
    (`bench`), embeddings with raw norms and an approximate index (index folders, Hub
    galleries), or a `store` that keeps the vectors outside this process (Milvus). None of
    them: the caller embeds the items (`EmbeddingCache`)."""

    gallery: Gallery
    bench: Any = None
    embeddings: np.ndarray | None = None
    norms: np.ndarray | None = None
    index: Index | None = None
    store: VectorStore | None = None
    note: str | None = None


Opener = Callable[[GallerySpec, GalleryContext], OpenedGallery]
_OPENERS: dict[str, Opener] = {}
# A gallery kept elsewhere (Milvus) may show its rows' pictures from another kind's storage: an
# images opener gives an image function over items, matched by their id
ImagesOpener = Callable[[GallerySpec, GalleryContext], "ImageFn"]
_IMAGES: dict[str, ImagesOpener] = {}
IMAGE_KINDS = ("hub",)
OWNERS = {"world": "cir_core.world.store", "films": "cir_core.world.films.benchmark",
          "movienet": "cir_core.benchmarks.movienet", "hub": "cir_core.hub.gallery",
          "milvus": "cir_core.index.milvus", "index": "cir_core.index.prebuilt",
          "folder": "cir_core.gallery_spec", "manifest": "cir_core.gallery_spec"}


def registered_kinds() -> tuple[str, ...]:
    """The kinds whose opener is registered in this process (in KINDS' order)."""
    return tuple(k for k in KINDS if k in _OPENERS)


def register_opener(kind: str) -> Callable[[Opener], Opener]:
    """Decorator: `fn(spec, ctx) -> OpenedGallery` opens galleries of `kind` (one of KINDS)."""
    if kind not in FORMS:
        raise ValueError(f"unknown gallery kind {kind!r}; kinds: {', '.join(KINDS)}")

    def add(fn: Opener) -> Opener:
        if _OPENERS.get(kind, fn) is not fn:
            raise ValueError(f"gallery kind {kind!r} already has an opener")
        _OPENERS[kind] = fn
        return fn

    return add


def open_gallery_spec(spec: GallerySpec | str, ctx: GalleryContext | None = None,
                      kinds: tuple[str, ...] = KINDS) -> OpenedGallery:
    """Open `spec` (parsed here when a string) with its kind's opener; GalleryError when the kind
    is not among `kinds` (what this caller can use)."""
    spec = spec if isinstance(spec, GallerySpec) else parse_gallery_spec(spec)
    if spec.kind not in kinds:
        raise GalleryError(f"gallery {spec.text!r} is {FORMS[spec.kind][1].split(' (')[0]}; here a gallery "
                           f"must be one of: {', '.join(FORMS[k][0] for k in kinds)}")
    opener = _OPENERS.get(spec.kind)
    if opener is None:  # a programming error: the consumer did not import the kind's owner
        raise RuntimeError(f"no opener for gallery kind {spec.kind!r} is registered: import {OWNERS[spec.kind]}")
    return opener(spec, ctx or GalleryContext())


def register_images(kind: str) -> Callable[[ImagesOpener], ImagesOpener]:
    """Decorator: `fn(spec, ctx) -> image_fn` shows items (by id) from `kind`'s storage."""
    if kind not in IMAGE_KINDS:
        raise ValueError(f"gallery kind {kind!r} has no images opener; kinds: {', '.join(IMAGE_KINDS)}")

    def add(fn: ImagesOpener) -> ImagesOpener:
        _IMAGES[kind] = fn
        return fn

    return add


def open_images(spec: GallerySpec | str, ctx: GalleryContext | None = None) -> ImageFn:
    """The image function of `spec`'s storage (a Hub gallery's thumbnails and frames), for the
    rows of a gallery kept elsewhere whose ids are that gallery's."""
    spec = spec if isinstance(spec, GallerySpec) else parse_gallery_spec(spec)
    opener = _IMAGES.get(spec.kind)
    if opener is None:
        raise RuntimeError(f"no images opener for gallery kind {spec.kind!r} is registered: import {OWNERS[spec.kind]}")
    return opener(spec, ctx or GalleryContext())


@register_opener("folder")
def _open_folder(spec: GallerySpec, ctx: GalleryContext) -> OpenedGallery:
    from .gallery import Gallery

    return OpenedGallery(Gallery.from_folder(spec.path))


@register_opener("manifest")
def _open_manifest(spec: GallerySpec, ctx: GalleryContext) -> OpenedGallery:
    from .gallery import Gallery

    return OpenedGallery(Gallery.from_manifest(spec.path))
