"""`Engine`: the backbone, the gallery with its embeddings and index, and the methods, built
lazily; `load_engine` builds one from the app's settings."""
from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np
from PIL import Image

from ..errors import CheckpointError, CIRError, GalleryError
from ..gallery import EmbeddingCache, Gallery, GalleryItem
from ..index import Index
from ..methods import get_method_class, list_methods, method_label, split_baseline
from ..prefilter import filter_for
from ..scoring import gallery_norms
from ..settings import DEFAULT_BACKBONE, DEFAULT_BACKBONE_DIR, DEFAULT_CHECKPOINTS, EngineConfig
from ..index.prebuilt import is_prebuilt, open_prebuilt
from .browse import GalleryMixin
from .checkpoints import CheckpointSource, resolve_checkpoints
from .common import normalise_text
from .compare import CompareMixin
from .results import Reference
from .textmemo import TextMemo

log = logging.getLogger(__name__)


SHOWCASE = 6  # demo queries (cir_core.world.data.showcase_queries) in the app's world gallery


def open_gallery(spec: str, world_queries: int, image_size: int,
                 cache: Path | None = None) -> tuple[Gallery, Any]:
    """(gallery, world benchmark or None) for 'world' / 'world:val', 'world:films' (the film
    world's keyframes), an image folder or a manifest.
    A world split is read from `cache` or the shipped assets when there (else generated, and
    written to `cache` when given)."""
    if spec in ("world", "world:test", "world:val"):
        from ..config import ASSETS_DIR
        from ..world.store import load_or_build

        split = spec.partition(":")[2] or "test"
        # The demo queries put the README's edit, with a ground truth, on the first page.
        mine = None if cache is None else cache / "world"
        bench = load_or_build(split, world_queries, SHOWCASE if split == "test" else 0,
                              [f for f in (mine, ASSETS_DIR / "world") if f is not None], cache=mine)
        return bench.gallery(image_size), bench
    if spec in ("world:films", "world:films-val"):
        from ..world.films.benchmark import film_gallery

        # every keyframe of the test (or val) films: ~103k (24k); embedded once, then cached
        return film_gallery("val" if spec.endswith("-val") else "test", image_size), None
    if spec.startswith("movienet:"):
        from ..benchmarks import load_movienet_queryset

        # A MovieNet identity set's frames (the annotation tab pools its queries).
        return load_movienet_queryset(spec.partition(":")[2])[1], None
    path = Path(spec).expanduser()
    if path.is_dir():
        return Gallery.from_folder(path), None
    if path.is_file():
        return Gallery.from_manifest(path), None
    raise GalleryError(f"gallery {spec!r} is neither 'world', 'world:films', 'movienet:ROOT', an image "
                       "folder nor a manifest file")


def load_engine(cfg: EngineConfig, progress_cb: Callable[[int, int], None] | None = None) -> "Engine":
    """Build the engine the app runs on. `progress_cb(done, total)` follows the gallery embedding
    (only items not in the cache are encoded: a restart encodes nothing). An index folder from
    `python -m cir_core.index build` as the gallery is used as it is: nothing encoded or indexed."""
    from ..backbone import load_backbone
    from ..config import ASSETS_DIR, cache_dir

    notes = []
    spec = cfg.backbone
    if spec is None:
        if (DEFAULT_BACKBONE_DIR / "open_clip_config.json").is_file():
            spec = DEFAULT_BACKBONE
        else:
            spec = "cir-tiny-vit"
            notes.append("The shipped backbone (assets/backbone/cir-tiny-vit) is not built yet, so the "
                         "tiny architecture runs with **random weights**: rankings are meaningless. "
                         "Build it with `python -m training.build_assets --only backbone`.")
    backbone = load_backbone(spec, cfg.pretrained, cfg.device)
    index = None
    if is_prebuilt(cfg.gallery):  # `python -m cir_core.index build`'s folder: nothing to encode
        pre = open_prebuilt(cfg.gallery)
        pre.check_backbone(backbone)
        gallery, bench, emb, index, norms = pre.gallery, None, pre.embeddings, pre.index, pre.norms
    else:
        root = Path(cfg.cache_dir).expanduser() if cfg.cache_dir else cache_dir()
        gallery, bench = open_gallery(cfg.gallery, cfg.world_queries, backbone.image_size, root)
        # The shipped embeddings of the default world gallery: a clean clone's first start
        # encodes nothing (they are used only where the backbone and every fingerprint match).
        emb, norms = EmbeddingCache(root, shipped=ASSETS_DIR / "embeddings").embed(
            gallery, backbone, progress_cb=progress_cb, with_norms=True)
    names = cfg.method_names()
    # the optional methods' folders too: the app may add their columns (a repo without them
    # costs only those columns)
    ckpts = resolve_checkpoints(cfg.checkpoints, names + cfg.optional_names(), overrides=cfg.method_checkpoints)
    if ckpts.error:
        notes.append(ckpts.error)
    if getattr(ckpts, "note", None):  # e.g. "offline: using the cached snapshot of org/name ..."
        notes.append(ckpts.note)
    return Engine(backbone, gallery, emb, bench=bench, checkpoints=ckpts, methods=names,
                  notes=notes, n_examples=cfg.examples, index=index, feature_norms=norms)


class Engine(GalleryMixin, CompareMixin):
    """Holds the backbone, the gallery, its embeddings and index, and the methods (built lazily,
    each once; a failure is remembered and reported, not retried on every request).
    The gallery, world-query and reference methods are `GalleryMixin`'s; `compare` and its
    helpers are `CompareMixin`'s. All the state is set here."""

    def __init__(self, backbone: Any, gallery: Gallery, embeddings: np.ndarray, *, bench: Any = None,
                 checkpoints: CheckpointSource | None = None, methods: Sequence[str] | None = None,
                 notes: Iterable[str] = (),
                 n_examples: int = 6, index_kind: str = "auto", index: Index | None = None,
                 feature_norms: np.ndarray | None = None):
        emb = np.ascontiguousarray(embeddings, dtype=np.float32)
        if emb.shape != (len(gallery), int(backbone.dim)):
            raise GalleryError(f"embeddings {emb.shape} do not match gallery {gallery.name!r} "
                               f"({len(gallery)} items) x backbone dim {backbone.dim}")
        self.backbone = backbone
        self.text_memo = TextMemo(backbone)
        self.gallery, self.embeddings, self.bench = gallery, emb, bench
        if index is not None and (index.ntotal, index.dim) != emb.shape:
            raise GalleryError(f"prebuilt index ({index.ntotal} x {index.dim}) does not match the "
                               f"embeddings {emb.shape} of gallery {gallery.name!r}")
        self.index = index if index is not None else Index.build(emb, index_kind)
        self.norms = gallery_norms(emb)  # once: every request's exact scoring reuses them
        if feature_norms is not None and np.shape(feature_norms) != (len(gallery),):
            raise GalleryError(f"raw norms {np.shape(feature_norms)} do not match gallery {gallery.name!r} "
                               f"({len(gallery)} items)")
        # each row's raw image-feature norm (NaN: not recorded), for methods that read raw features
        self.feature_norms = None if feature_norms is None else np.asarray(feature_norms, np.float32)
        # the int8 filter, for exact search over 16k+ rows (an approximate index does its own)
        self.prefilter = filter_for(emb, self.norms) if self.index.kind == "flat" else None
        self.checkpoints = checkpoints or CheckpointSource(None, DEFAULT_CHECKPOINTS)
        names = list(methods) if methods is not None else EngineConfig().method_names()
        columns, self.baseline = split_baseline(names)
        self.columns = tuple(columns)
        self.notes = list(notes)
        self.n_examples = n_examples
        self._methods: dict[str, Any] = {}
        self._method_lock = threading.Lock()
        self._uploads: OrderedDict[tuple, Reference] = OrderedDict()
        self._thumbs: OrderedDict[tuple[int, int], Image.Image] = OrderedDict()
        self._thumb_lock = threading.Lock()
        self._q_empty_cache: OrderedDict[tuple, np.ndarray] = OrderedDict()
        self._q_lock = threading.Lock()
        self.thumb_cache_size = 1024
        self._search_text: list[str] | None = None
        self._captions: list[str] | None = None
        self._queries_by_key: dict[tuple[int, str], int] = {}
        self._query_pos: dict[str, int] = {}
        self._gt: list[set[int]] = []
        if bench is not None:
            self._gt = bench.gt_sets()
            for qi, (q, r) in enumerate(zip(bench.queries, bench.reference_idx)):
                self._queries_by_key.setdefault((r, normalise_text(q.text)), qi)
                self._query_pos[q.query_id] = qi

    @classmethod
    def from_embeddings(cls, backbone: Any, embeddings: np.ndarray, name: str = "vectors",
                        ids: Sequence[str] | None = None, **kw: Any) -> "Engine":
        """An engine over bare vectors (no images), e.g. a synthetic gallery for benchmarks."""
        ids = list(ids) if ids is not None else [f"{i:07d}" for i in range(len(embeddings))]
        return cls(backbone, Gallery.from_items(name, [GalleryItem(i) for i in ids]), embeddings, **kw)

    def __repr__(self) -> str:
        return (f"Engine(backbone={self.backbone.id!r}, gallery={self.gallery.name!r} "
                f"({len(self.gallery)} items), columns={self.columns})")

    # -- methods ---------------------------------------------------------------------------------
    def default_methods(self) -> list[str]:
        return list(self.columns) + ([self.baseline] if self.baseline else [])

    def method(self, name: str) -> Any:
        """The built method `name`; raises the `CIRError` that explains why it is unavailable."""
        from ..methods import create_method

        with self._method_lock:
            if name not in self._methods:
                try:
                    if name not in list_methods():
                        raise CheckpointError(f"{method_label(name)} is not available: no method "
                                              f"'{name}' is registered in this build")
                    cls = get_method_class(name)
                    ckpt = self.checkpoints.folder_for(name) if cls.needs_checkpoint else None
                    if ckpt is not None and not ckpt.exists():
                        raise CheckpointError(f"{method_label(name)}: no checkpoint at {ckpt}")
                    self._methods[name] = create_method(name, self.text_memo, ckpt)
                except CIRError as exc:
                    self._methods[name] = exc
                except Exception as exc:  # a broken checkpoint or method must not take the app down
                    log.exception("method %s failed to load", name)
                    self._methods[name] = CheckpointError(
                        f"{method_label(name)} failed to load: {type(exc).__name__}: {exc}".splitlines()[0])
            found = self._methods[name]
        if isinstance(found, Exception):
            raise found
        return found

    def use_method(self, name: str, method: Any) -> None:
        """Install an already built method under `name` (e.g. one at random init, for benchmarks).
        Build it on `self.text_memo` so it shares the request's text encodes."""
        with self._method_lock:
            self._methods[name] = method

    def method_status(self, names: Sequence[str] | None = None) -> dict[str, str | None]:
        """name -> None when it works, else the message saying why not."""
        out = {}
        for n in names if names is not None else self.default_methods():
            try:
                self.method(n)
                out[n] = None
            except CIRError as exc:
                out[n] = str(exc)
        return out

    def available_methods(self) -> list[str]:
        """Every registered method that can be built here, the app's columns first."""
        order = list(dict.fromkeys([*self.default_methods(), *list_methods()]))
        return [n for n, err in self.method_status(order).items() if err is None]

