"""`Engine`: the backbone, the gallery (its view and searcher) and the methods, built lazily;
`load_engine` builds one from the app's settings, `open_gallery` opens a gallery by name."""
from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterable, Sequence

import numpy as np

from ..batching import Admission, BatchedEncoder, BatchQueue
from ..encoder import Encoder
from ..errors import GalleryError
from ..gallery import EmbeddingCache, Gallery, GalleryItem
from ..gallery_spec import GalleryContext, open_gallery_spec, parse_gallery_spec
from ..memo import TextMemo
from ..methods import extra_methods, shown_methods
from ..paths import DEFAULT_BACKBONE, DEFAULT_BACKBONE_DIR, DEFAULT_CHECKPOINTS
from ..search.index import Index
from ..search.searcher import RemoteSearcher, Searcher, VectorStore
from ..settings import MAX_REQUESTS, EngineConfig
from . import pipeline
from ..checkpoint_source import CheckpointSource, resolve_checkpoints
from .gallery_view import GalleryView
from .method_set import MethodSet
from .results import CompareResult, Reference
from ..world.store import SHOWCASE  # noqa: F401  (re-exported: pooling skips the world's demo queries)


log = logging.getLogger(__name__)


def load_gallery_openers() -> None:
    """Import the modules that register the gallery kinds' openers (`cir_core.gallery_spec`):
    the engine opens every kind."""
    from ..benchmarks import movienet  # noqa: F401
    from ..hub import gallery as hub_gallery  # noqa: F401
    from ..index import milvus, prebuilt  # noqa: F401
    from ..world import store  # noqa: F401
    from ..world.films import benchmark  # noqa: F401


def open_gallery(spec: str, world_queries: int, image_size: int,
                 cache: Path | None = None) -> tuple[Gallery, Any]:
    """(gallery, world benchmark or None) for any gallery spec without a backbone to check
    (`cir_core.gallery_spec`: 'world' / 'world:val', 'world:films', 'movienet:ROOT', an image
    folder, a manifest, an index folder). A world split is read from `cache` or the shipped
    assets when there (else generated, and written to `cache` when given)."""
    load_gallery_openers()
    opened = open_gallery_spec(spec, GalleryContext(image_size, world_queries, cache))
    return opened.gallery, opened.bench


def load_engine(cfg: EngineConfig, progress_cb: Callable[..., None] | None = None) -> "Engine":
    """Build the engine the app runs on. `progress_cb(done, total)` follows the gallery embedding
    (only items not in the cache are encoded: a restart encodes nothing), or `progress_cb(done,
    total, desc)` a Hub gallery's download (bytes). A gallery that holds its embeddings (an index
    folder from `python -m cir_core.index build`, a Hub gallery `hf:org/name@rev` from
    `python -m cir_core.hub push gallery`) is used as it is: nothing encoded or indexed."""
    from ..backbone import load_backbone
    from ..paths import SHIPPED_EMBEDDINGS, cache_dir

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
    gspec = parse_gallery_spec(cfg.gallery)  # a bad spec fails before the backbone loads
    backbone = load_backbone(spec, cfg.pretrained, cfg.device)
    root = Path(cfg.cache_dir).expanduser() if cfg.cache_dir else cache_dir()
    load_gallery_openers()
    opened = open_gallery_spec(gspec, GalleryContext(backbone.image_size, cfg.world_queries, root, backbone,
                                                     progress_cb))
    notes += [opened.note] if opened.note else []
    emb, norms = opened.store or opened.embeddings, opened.norms
    if emb is None:
        # The shipped embeddings of the default world gallery: a clean clone's first start
        # encodes nothing (they are used only where the backbone and every fingerprint match).
        emb, norms = EmbeddingCache(root, shipped=SHIPPED_EMBEDDINGS).embed(
            opened.gallery, backbone, progress_cb=progress_cb, with_norms=True)
    names = shown_methods(cfg.methods)
    # the optional methods' folders too: the app may add their columns (a repo without them
    # costs only those columns)
    ckpts = resolve_checkpoints(cfg.checkpoints, names + extra_methods(cfg.methods), overrides=cfg.method_checkpoints)
    if ckpts.error:
        notes.append(ckpts.error)
    if getattr(ckpts, "note", None):  # e.g. "offline: using the cached snapshot of org/name ..."
        notes.append(ckpts.note)
    return Engine(backbone, opened.gallery, emb, bench=opened.bench, checkpoints=ckpts, methods=names,
                  notes=notes, n_examples=cfg.examples, index=opened.index, feature_norms=norms,
                  batch_wait_ms=cfg.batch_wait_ms if cfg.batching else None, max_requests=cfg.max_requests,
                  filter_in_background=True)


class Engine:
    """One backbone, one gallery and the methods, in parts: `view` (the gallery, its embeddings
    and what a request reads of it), `searcher` (how it is searched, decided once), `methods` (built
    lazily on `memo`, the backbone with remembered text encodes). `compare` runs one request
    through `pipeline`, admitted by `admission` (at most `max_requests` at once, else `Busy`).

    With `batch_wait_ms` (None: off), concurrent requests share their tower work: texts, uploaded
    images and every method's compositions go through one `BatchQueue` (`batch`), which waits at
    most that long for the other requests in flight to join a batch. `filter_in_background`: the
    searcher's int8 filter is built in a thread after construction (the app's start)."""

    def __init__(self, backbone: Encoder, gallery: Gallery, embeddings: np.ndarray | VectorStore, *,
                 bench: Any = None,
                 checkpoints: CheckpointSource | None = None, methods: Sequence[str] | None = None,
                 notes: Iterable[str] = (), n_examples: int = 6, index_kind: str = "auto",
                 index: Index | None = None, feature_norms: np.ndarray | None = None,
                 batch_wait_ms: float | None = None, max_requests: int = MAX_REQUESTS,
                 filter_in_background: bool = False):
        self.backbone = backbone
        self.admission = Admission(max_requests)
        self.batch = None if batch_wait_ms is None else BatchQueue(
            batch_wait_ms / 1000, company=lambda: self.admission.active)
        memo = TextMemo(backbone if self.batch is None else BatchedEncoder(backbone, self.batch))
        self.view = GalleryView(gallery, embeddings, memo, feature_norms=feature_norms, bench=bench,
                                n_examples=n_examples)
        self.searcher: Searcher | RemoteSearcher
        if self.view.store is not None:  # the vectors stay in the store: its shortlist, re-scored here
            self.searcher = RemoteSearcher(self.view.store)
        else:
            if index is not None and (index.ntotal, index.dim) != self.view.embeddings.shape:
                raise GalleryError(f"prebuilt index ({index.ntotal} x {index.dim}) does not match the "
                                   f"embeddings {self.view.embeddings.shape} of gallery {gallery.name!r}")
            self.searcher = Searcher.for_gallery(self.view.embeddings, index=index, kind=index_kind,
                                                 prefilter=not filter_in_background)
        if filter_in_background and isinstance(self.searcher, Searcher) and self.searcher.index is None:
            # 5-10 s for 100k x 768 rows on 2 cores: built after the start, not before the first
            # answer; until then the exact float32 search answers (the same ids).
            threading.Thread(target=self._build_filter, name="cir-int8-filter", daemon=True).start()
        self.methods = MethodSet(memo, checkpoints or CheckpointSource(None, DEFAULT_CHECKPOINTS),
                                 shown_methods(methods), self.batch)
        self.notes = list(notes)

    def _build_filter(self) -> None:
        try:
            self.searcher = self.searcher.with_prefilter()  # one assignment: a request sees either
        except Exception:  # noqa: BLE001 - the exact search goes on answering
            log.exception("the int8 filter could not be built; searching without it")

    @property
    def memo(self) -> TextMemo:
        """The backbone with remembered text encodes, which the methods are built on."""
        return self.methods.memo

    @classmethod
    def from_embeddings(cls, backbone: Encoder, embeddings: np.ndarray, name: str = "vectors",
                        ids: Sequence[str] | None = None, **kw: Any) -> "Engine":
        """An engine over bare vectors (no images), e.g. a synthetic gallery for benchmarks."""
        ids = list(ids) if ids is not None else [f"{i:07d}" for i in range(len(embeddings))]
        return cls(backbone, Gallery.from_items(name, [GalleryItem(i) for i in ids]), embeddings, **kw)

    def __repr__(self) -> str:
        return (f"Engine(backbone={self.backbone.id!r}, gallery={self.view.gallery.name!r} "
                f"({len(self.view)} items), {self.searcher.kind}, columns={self.methods.columns})")

    def compare(self, reference: Reference, edit: str, k: int = 8, scoring: str = "cosine",
                lam: float | None = None, methods: Sequence[str] | None = None,
                progression: bool = True, variant: str = "empty") -> CompareResult:
        """Every method's top-k for (reference, edit) and the per-sentence progression
        (`pipeline.compare`). `lam`: Chord's λ for every method; None: each method's own.
        Raises `Busy` when `max_requests` are in flight already."""
        with self.admit():
                return pipeline.compare(self.view, self.methods, self.searcher, reference, edit, k, scoring, lam,
                                    methods, progression, variant)

    def warm_up(self) -> None:
        """Answer one request and discard it, so the first visitor does not pay for what is built
        on first use: the methods, PACT's merged LoRA tower (seconds for ViT-L-14), cold kernels."""
        if len(self.view) > 1:
            self.compare(self.view.reference_from_row(0), "Make it blue.", k=1)

    def admit(self) -> ContextManager[None]:
        """Count the caller as a request in flight (re-entrant), or raise `Busy`: what a server
        wraps around a request's upload encode and `compare` together."""
        return self.admission.enter()
