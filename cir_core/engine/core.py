"""`Engine`: the backbone, the gallery (its view and searcher) and the methods, built lazily;
`load_engine` builds one from the app's settings, `open_gallery` opens a gallery by name."""
from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterable, Sequence

import numpy as np
from PIL import Image

from .. import timing
from ..batching import Admission, BatchedEncoder, BatchQueue
from ..checkpoint_source import CheckpointSource, resolve_checkpoints
from ..encoder import Encoder
from ..errors import GalleryError, InputError
from ..gallery import EmbeddingCache, Gallery, GalleryItem
from ..gallery_spec import GalleryContext, open_gallery_spec, parse_gallery_spec
from ..memo import TextMemo
from ..methods import extra_methods, shown_methods
from ..paths import DEFAULT_BACKBONE, DEFAULT_BACKBONE_DIR, DEFAULT_CHECKPOINTS
from ..search.index import Index
from ..search.searcher import RemoteSearcher, Searcher, VectorStore
from ..settings import MAX_REQUESTS, EngineConfig
from ..world.store import SHOWCASE  # noqa: F401  (re-exported: pooling skips the world's demo queries)
from . import pipeline
from .common import MAX_STEPS
from .gallery_view import GalleryView
from .method_set import MethodSet
from .pipeline import check_edit
from .request import NO_REFERENCE, Admitted
from .results import CompareResult, Reference

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
    """(gallery, its benchmark or None) for any gallery spec without a backbone to check
    (`cir_core.gallery_spec`: 'world' / 'world:val' (the world benchmark), 'world:films' /
    'world:films-val' (the film world's keyframes and its film benchmark), 'movienet:ROOT', an
    image folder, a manifest, an index folder). A world split is read from `cache` or the shipped
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
            opened.gallery, backbone, progress=True, progress_cb=progress_cb, with_norms=True)
    names = shown_methods(cfg.methods)
    # the optional methods' folders too: the app may add their columns (a repo without them
    # costs only those columns)
    ckpts = resolve_checkpoints(cfg.checkpoints, names + extra_methods(cfg.methods), overrides=cfg.method_checkpoints)
    if ckpts.error:
        notes.append(ckpts.error)
    if ckpts.note:  # e.g. "offline: using the cached snapshot of org/name ..."
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
            emb = self.view.embeddings
            assert emb is not None, "without a store the view holds the embeddings"
            if index is not None and (index.ntotal, index.dim) != emb.shape:
                raise GalleryError(f"prebuilt index ({index.ntotal} x {index.dim}) does not match the "
                                   f"embeddings {emb.shape} of gallery {gallery.name!r}")
            self.searcher = Searcher.for_gallery(emb, index=index, kind=index_kind,
                                                 prefilter=not filter_in_background)
        if filter_in_background and isinstance(self.searcher, Searcher) and self.searcher.index is None:
            # 5-10 s for 100k x 768 rows on 2 cores: built after the start, not before the first
            # answer; until then the exact float32 search answers (the same ids).
            threading.Thread(target=self._build_filter, name="cir-int8-filter", daemon=True).start()
        self.methods = MethodSet(memo, checkpoints or CheckpointSource(None, DEFAULT_CHECKPOINTS),
                                 shown_methods(methods), self.batch)
        self.notes = list(notes)

    def _build_filter(self) -> None:
        searcher = self.searcher
        if not isinstance(searcher, Searcher):  # a store's searcher: the store filters, not an int8 filter
            return
        try:
            self.searcher = searcher.with_prefilter()  # one assignment: a request sees either
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
                progression: bool = True, variant: str = "empty", explained: bool = True) -> CompareResult:
        """Every method's top-k for (reference, edit) and the per-sentence progression
        (`pipeline.compare`). `lam`: Chord's λ for every method; None: each method's own.
        `explained`: each hit's score terms and ranks under both scorings, and the map of the
        neighbourhood. Raises `Busy` when `max_requests` are in flight already."""
        with self.admit():
            return pipeline.compare(self.view, self.methods, self.searcher, reference, edit, k, scoring, lam,
                                    methods, progression, variant, explained)

    # -- what a caller (the app, a notebook) reads of the gallery, without reaching into `view` ----
    @property
    def gallery(self) -> Gallery:
        """The gallery searched (its items, name, images)."""
        return self.view.gallery

    @property
    def world(self) -> Any:
        """The generated world's benchmark behind the gallery (queries, ground truth), or None."""
        return self.view.bench

    @property
    def benchmark(self) -> Any:
        """The benchmark whose queries the gallery answers (the world's or the film world's), or None."""
        return self.view.queries

    def reference(self, item: str | int | os.PathLike | Image.Image | bytes) -> Reference:
        """The reference of a request: a gallery item by id (str) or row (int), or an image — a
        `pathlib.Path` (a str is always an id, never a file: a request's text must not open one),
        a PIL image or bytes — encoded once. `InputError` / `ImageLoadError` otherwise."""
        if isinstance(item, bool):
            raise InputError("a reference is an item id, a gallery row or an image")
        if isinstance(item, int):
            return self.view.reference_from_row(item)
        if isinstance(item, str):
            return self.view.reference_from_id(item)
        return self.view.reference_from_upload(item)

    def item_id(self, row: int) -> str:
        """The id of gallery row `row`."""
        return self.view.item_id(row)

    @property
    def domain(self) -> str:
        """What the gallery shows, for the page's words ('world', 'films' or 'images')."""
        return self.view.domain

    def query(self, query_id: str) -> tuple[Any, int]:
        """(the world's query, its reference row) for `query_id`; `InputError` off the world."""
        return self.view.query(query_id)

    def query_character(self, reference: Reference, edit: str) -> Any:
        """Whom a world or film query follows (its character), or None."""
        return self.view.query_character(reference, edit)

    def reference_thumbnail(self, item: str | int, size: int = 160) -> Image.Image:
        """A thumbnail of a reference with its character marked (a MovieNet box), as Compare shows it."""
        return self.view.reference_thumbnail(self._row(item), size)

    def row(self, item_id: str) -> int:
        """The gallery row of `item_id` (`InputError` when it is not in the gallery)."""
        return self.view.row_of(item_id)

    def image(self, item: str | int, size: int | None = None) -> Image.Image:
        """A gallery item's picture (by id or row), at `size` when given."""
        return self.view.image(self._row(item), size)

    def thumbnail(self, item: str | int, size: int = 160) -> Image.Image:
        """A display thumbnail of an item (cached; copy it before drawing on it)."""
        return self.view.thumbnail(self._row(item), size)

    def caption(self, item: str | int) -> str:
        """An item's caption (the world's generated one, a manifest's column, or '')."""
        return self.view.caption(self._row(item))

    def prefetch(self, rows: Sequence[int]) -> None:
        """Read these rows' items at once (a vector store's gallery: one call for a page, not one a row)."""
        self.view.prefetch(rows)

    def search_gallery(self, words: str) -> Sequence[int]:
        """Rows of the items whose id, caption or character contain every word (any case). A
        sequence: a store's gallery searched for no words gives a `range`, not a list of every row."""
        return self.view.search(words)

    def examples(self, n: int | None = None) -> list[Any]:
        """A handful of the world's queries, one per kind of edit ([] off the world)."""
        return self.view.example_queries(n)

    def _row(self, item: str | int) -> int:
        if isinstance(item, bool) or not isinstance(item, (str, int)):
            raise InputError(f"an item is an id or a gallery row, not {type(item).__name__}")
        return item if isinstance(item, int) else self.view.row_of(item)

    def run(self, req: Admitted) -> CompareResult:
        """Answer an admitted request (`request.admit`): an empty edit refused before anything is
        encoded, busy said at once, the reference resolved (an upload wins over the id), then
        `compare`; the result's notes say what admission changed and what the gallery could not
        give (a k it could not fill, progression rows not shown)."""
        check_edit(req.edit)
        with self.admit(), timing.account():  # an upload's wait for the encoder is a wait, not its encode
            if req.upload:
                ref = self.view.reference_from_upload(req.upload)
            elif req.reference_id:
                ref = self.view.reference_from_id(req.reference_id)
            else:
                raise InputError(NO_REFERENCE)
            res = self.compare(ref, req.edit, k=req.k, scoring=req.scoring, lam=req.lam,
                               methods=list(req.methods) if req.methods else None)
        res.notes.extend(req.notes)
        if res.k < req.k:
            res.notes.append(f"k = {req.k}: the gallery holds only {res.k} other images, so top-{res.k} is shown.")
        prog = res.progression
        if prog is not None and prog.total_sentences > MAX_STEPS:
            res.notes.append(f"The edit has {prog.total_sentences} sentences; the progression shows the first "
                             f"{MAX_STEPS} (every method's own result reads them all).")
        return res

    def warm_up(self) -> None:
        """Answer one request and discard it, so the first visitor does not pay for what is built
        on first use: the methods, PACT's merged LoRA tower (seconds for ViT-L-14), cold kernels."""
        if len(self.view) > 1:
            self.compare(self.view.reference_from_row(0), "Make it blue.", k=1)

    def admit(self) -> ContextManager[None]:
        """Count the caller as a request in flight (re-entrant), or raise `Busy`: what a server
        wraps around a request's upload encode and `compare` together."""
        return self.admission.enter()
