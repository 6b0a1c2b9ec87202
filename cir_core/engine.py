"""The workbench engine: one backbone, one gallery (cached embeddings + FAISS index), the methods,
and `compare`: a reference and an edit in, every method's top-k and a progression out.

    engine = load_engine(AppConfig(world_queries=30, backbone="cir-tiny-vit"))
    ref = engine.reference_from_id("test/000000")          # a gallery item: its cached embedding
    res = engine.compare(ref, "Make the square blue. Move the character to the left.", k=8)
    res.methods[0].hits[0].item_id, res.progression.steps[1].hits, res.timings

The reference is encoded once per request (an upload; a gallery item is never encoded: its row of
the cached gallery embeddings is used) and shared by every method. The texts are encoded once per
request too: `TextMemo` wraps the backbone the methods see, so the methods that read the frozen
text tower (the baselines, DiCE, PACE) share one batched encode of the edit, its sentences and the
empty edit. A method that cannot be built (no checkpoint, not registered in this build, a broken
file) gets its error in its own result; the others still run. No UI code here: the Gradio tabs in
`cir_core/ui/` and the figure exporter `cir_core/figures.py` both call this.
"""
from __future__ import annotations

import logging
import os
import random
import threading
import time
from collections import OrderedDict
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np
from PIL import Image

from .appconfig import (BASELINE, COLUMNS, DEFAULT_BACKBONE, DEFAULT_BACKBONE_DIR, DEFAULT_CHECKPOINTS,
                        AppConfig, is_hub_repo_id)
from .errors import CheckpointError, CIRError, GalleryError, ImageLoadError, InputError
from .gallery import EmbeddingCache, Gallery, GalleryItem
from .imageio import load_image
from .index import Index
from .scoring import DEFAULT_SHORTLIST, SCORINGS, VARIANTS, rank
from .inputs import MAX_EDIT_CHARS, check_edit_text
from .text import split_sentences

log = logging.getLogger(__name__)


def normalise_text(text: str) -> str:
    return " ".join(str(text).split())

MAX_TEXT_CHARS = MAX_EDIT_CHARS  # cir_core.inputs: shared with the CLIs
MAX_UPLOAD_PIXELS = 40_000_000  # checked from the header, before decoding (decompression bombs)
MAX_K = 50
MAX_STEPS = 10  # progression rows shown; the world's longest edits have 10 sentences
LABELS = {"pact": "PACT", "dice": "DiCE", "pace": "PACE", "compose-only": "compose-only",
          "sum": "Sum (baseline)", "text-only": "Text only", "image-only": "Image only"}


def method_label(name: str) -> str:
    return LABELS.get(name, name)


# -- checkpoints --------------------------------------------------------------------------------

@dataclass
class CheckpointSource:
    """Where `<method>/` checkpoint folders live, or why there is nowhere to look."""

    spec: str | None
    folder: Path | None
    error: str | None = None

    def folder_for(self, name: str) -> Path:
        if self.folder is None:
            raise CheckpointError(f"{method_label(name)}: {self.error}")
        return self.folder / name


def resolve_checkpoints(spec: str | None, names: Sequence[str]) -> CheckpointSource:
    """`None` → the shipped `assets/methods`; a local folder; or a Hub repo id (`org/name` or
    `hf-hub:org/name`) fetched with `huggingface_hub.snapshot_download` (only the `<method>/`
    folders named). Never raises: a failed fetch is recorded and reported per method."""
    if not spec:
        return CheckpointSource(None, DEFAULT_CHECKPOINTS)
    path = Path(spec).expanduser()
    if path.is_dir():
        return CheckpointSource(spec, path)
    if not is_hub_repo_id(spec):
        return CheckpointSource(spec, None, f"checkpoint folder {path} not found")
    repo = spec.removeprefix("hf-hub:")
    try:
        from huggingface_hub import snapshot_download

        folder = snapshot_download(repo, allow_patterns=[f"{n}/*" for n in names])
        return CheckpointSource(spec, Path(folder))
    except Exception as exc:  # offline, unknown repo, auth: all reported the same way
        from huggingface_hub import constants
        from huggingface_hub.errors import LocalEntryNotFoundError, RepositoryNotFoundError

        if constants.HF_HUB_OFFLINE:
            why = "HF_HUB_OFFLINE is set and the repo is not in the local Hugging Face cache"
        elif isinstance(exc, LocalEntryNotFoundError):
            why = "it is not in the local Hugging Face cache and the Hub could not be reached"
        elif isinstance(exc, RepositoryNotFoundError):
            why = "no such repository, or it is private (set HF_TOKEN)"
        else:
            why = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else 'no detail'}"
        return CheckpointSource(spec, None, f"could not fetch checkpoints ({', '.join(names)}) "
                                            f"from Hub repo '{repo}': {why}")


# -- the text memo ------------------------------------------------------------------------------

class TextMemo:
    """The backbone as the methods see it: every attribute is the real backbone's, except that
    `encode_texts` remembers (LRU, `maxsize` texts) what it encoded. Methods built on the frozen
    text tower then share one encode of each text across methods, q_∅ and the progression."""

    def __init__(self, backbone: Any, maxsize: int = 4096):
        object.__setattr__(self, "_backbone", backbone)
        object.__setattr__(self, "_cache", OrderedDict())
        object.__setattr__(self, "_maxsize", maxsize)
        object.__setattr__(self, "_lock", threading.Lock())
        object.__setattr__(self, "encoded", 0)  # texts actually sent to the model

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backbone, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._backbone, name, value)

    def __repr__(self) -> str:
        return f"TextMemo({self._backbone!r})"

    def encode_texts(self, texts: Sequence[str], batch_size: int = 256, progress: bool = False) -> np.ndarray:
        texts = [str(t) for t in texts]
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            emb = self._backbone.encode_texts(missing, batch_size=batch_size, progress=progress)
            with self._lock:
                object.__setattr__(self, "encoded", self.encoded + len(missing))
                for t, e in zip(missing, emb):
                    self._cache[t] = e
        with self._lock:
            rows = []
            for t in texts:
                e = self._cache.get(t)
                if e is None:  # evicted by a concurrent request between the two steps
                    e = self._backbone.encode_texts([t])[0]
                self._cache[t] = e
                self._cache.move_to_end(t)
                rows.append(e)
            while len(self._cache) > self._maxsize:
                self._cache.popitem(last=False)
        if not rows:
            return np.zeros((0, int(self._backbone.dim)), np.float32)
        return np.stack(rows).astype(np.float32, copy=True)

    prefetch = encode_texts

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()


# -- results ------------------------------------------------------------------------------------

@dataclass
class Reference:
    """The reference image of one request and its embedding (computed once)."""

    kind: str  # "gallery" | "upload"
    label: str  # the gallery id, or "upload: name.png"
    embedding: np.ndarray  # (D,)
    row: int | None = None  # gallery row (excluded from the results)
    item_id: str | None = None
    image: Image.Image | None = None  # uploads: a display copy (<= 512 px)
    character: str | None = None  # the character's name, when the gallery knows it
    encode_ms: float = 0.0  # time spent encoding it (0 for a gallery item)
    key: tuple | None = None  # identifies the pixels across requests (None: unknown, never cached)


@dataclass
class Hit:
    rank: int
    row: int
    item_id: str
    score: float
    is_target: bool | None  # None: no ground truth for this (reference, edit)
    character: str | None
    same_character: bool | None  # None: the reference's character is unknown


@dataclass
class MethodResult:
    name: str
    label: str
    hits: list[Hit] = field(default_factory=list)
    error: str | None = None
    lam: float | None = None  # the Chord λ used (None for cosine)
    compose_ms: float = 0.0
    search_ms: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class Step:
    index: int  # 1-based
    sentence: str  # the sentence this step adds
    hits: list[Hit]


@dataclass
class Progression:
    method: str
    label: str
    native: bool  # the method's own step states (PACE's accumulator) vs prefix re-composition
    note: str
    steps: list[Step]
    total_sentences: int


@dataclass
class CompareResult:
    reference: Reference
    edit: str
    sentences: list[str]
    k: int
    scoring: str
    lam: float | None  # None: each method's own λ
    variant: str
    query_id: str | None  # the world query this (reference, edit) is, when it is one
    target_rows: list[int]
    methods: list[MethodResult]
    progression: Progression | None
    timings: dict[str, float]  # ms per stage: encode, compose, search, total

    def to_dict(self) -> dict:
        ref = {k: v for k, v in asdict(self.reference).items() if k not in ("embedding", "image")}
        out = {k: v for k, v in asdict(self).items() if k != "reference"}
        out["reference"] = ref
        return out


# -- galleries ----------------------------------------------------------------------------------

def open_gallery(spec: str, world_queries: int, image_size: int) -> tuple[Gallery, Any]:
    """(gallery, world benchmark or None) for 'world' / 'world:val', an image folder or a manifest."""
    if spec in ("world", "world:test", "world:val"):
        from .world import build_benchmark

        bench = build_benchmark(spec.partition(":")[2] or "test", world_queries)
        return bench.gallery(image_size), bench
    path = Path(spec).expanduser()
    if path.is_dir():
        return Gallery.from_folder(path), None
    if path.is_file():
        return Gallery.from_manifest(path), None
    raise GalleryError(f"gallery {spec!r} is neither 'world', an image folder nor a manifest file")


def load_engine(cfg: AppConfig, progress_cb: Callable[[int, int], None] | None = None) -> "Engine":
    """Build the engine the app runs on. `progress_cb(done, total)` follows the gallery embedding
    (only items not in the cache are encoded: a restart encodes nothing)."""
    from .backbone import load_backbone
    from .config import cache_dir

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
    gallery, bench = open_gallery(cfg.gallery, cfg.world_queries, backbone.image_size)
    root = Path(cfg.cache_dir).expanduser() if cfg.cache_dir else cache_dir()
    emb = EmbeddingCache(root).embed(gallery, backbone, progress_cb=progress_cb)
    ckpts = resolve_checkpoints(cfg.checkpoints, list(cfg.columns))
    if ckpts.error:
        notes.append(ckpts.error)
    return Engine(backbone, gallery, emb, bench=bench, checkpoints=ckpts, columns=cfg.columns,
                  baseline=cfg.baseline, db=cfg.db, notes=notes, n_examples=cfg.examples)


class Engine:
    """Holds the backbone, the gallery, its embeddings and index, and the methods (built lazily,
    each once; a failure is remembered and reported, not retried on every request)."""

    def __init__(self, backbone: Any, gallery: Gallery, embeddings: np.ndarray, *, bench: Any = None,
                 checkpoints: CheckpointSource | None = None, columns: Sequence[str] = COLUMNS,
                 baseline: str | None = BASELINE, db: str | None = None, notes: Iterable[str] = (),
                 n_examples: int = 6, index_kind: str = "auto"):
        emb = np.ascontiguousarray(embeddings, dtype=np.float32)
        if emb.shape != (len(gallery), int(backbone.dim)):
            raise GalleryError(f"embeddings {emb.shape} do not match gallery {gallery.name!r} "
                               f"({len(gallery)} items) x backbone dim {backbone.dim}")
        self.backbone = backbone
        self.text_memo = TextMemo(backbone)
        self.gallery, self.embeddings, self.bench = gallery, emb, bench
        t0 = time.perf_counter()
        self.index = Index.build(emb, index_kind)
        self.index_build_s = time.perf_counter() - t0
        self.checkpoints = checkpoints or CheckpointSource(None, DEFAULT_CHECKPOINTS)
        self.columns = tuple(columns)
        self.baseline = baseline
        self.db = db
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
        from .methods import create_method, get_method_class, list_methods

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
        from .methods import list_methods

        order = list(dict.fromkeys([*self.default_methods(), *list_methods()]))
        return [n for n, err in self.method_status(order).items() if err is None]

    # -- gallery ---------------------------------------------------------------------------------
    def item_id(self, row: int) -> str:
        return self.gallery.items[row].id

    def row_of(self, item_id: str) -> int:
        try:
            return self.gallery.index_of(str(item_id).strip())
        except GalleryError:
            raise InputError(f"the gallery has no item {str(item_id).strip()!r}") from None

    def character(self, row: int) -> str | None:
        """The name of the character shown by gallery item `row`, when the gallery knows it."""
        if self.bench is not None:
            return self.bench.items[row].scene.character.name
        meta = self.gallery.items[row].meta
        for key in ("character", "identity", "person"):
            if meta.get(key) not in (None, ""):
                return str(meta[key])
        return None

    def caption(self, row: int) -> str:
        if self._captions is None:
            self._captions = self._make_captions()
        return self._captions[row]

    def _make_captions(self) -> list[str]:
        if self.bench is not None:
            from .world import caption

            return [caption(it.scene, random.Random(it.item_id)) for it in self.bench.items]
        return [str(it.meta.get("caption") or it.meta.get("text") or "") for it in self.gallery.items]

    def search(self, query: str) -> list[int]:
        """Gallery rows whose id, caption or character contain every word of `query` (any case)."""
        words = str(query).lower().split()
        if not words:
            return list(range(len(self.gallery)))
        if self._search_text is None:
            self._search_text = [f"{it.id} {self.caption(i)} {self.character(i) or ''}".lower()
                                 for i, it in enumerate(self.gallery.items)]
        return [i for i, s in enumerate(self._search_text) if all(w in s for w in words)]

    def image(self, row: int, size: int | None = None) -> Image.Image:
        """Item `row` at `size` (world items render crisp at any size; files shrink to fit)."""
        return self.gallery.load_image(row, size)

    def thumbnail(self, row: int, size: int = 160) -> Image.Image:
        """A display thumbnail, LRU-cached (treat it as read-only: copy before drawing on it)."""
        key = (int(row), int(size))
        with self._thumb_lock:
            img = self._thumbs.get(key)
            if img is not None:
                self._thumbs.move_to_end(key)
                return img
        img = self.gallery.load_image(row, size)
        with self._thumb_lock:
            self._thumbs[key] = img
            while len(self._thumbs) > self.thumb_cache_size:
                self._thumbs.popitem(last=False)
        return img

    # -- world queries ---------------------------------------------------------------------------
    def example_queries(self, n: int | None = None) -> list[Any]:
        """A handful of world queries, one per kind of edit; a 2–3 sentence one first."""
        if self.bench is None:
            return []
        n = self.n_examples if n is None else n
        qs = self.bench.queries
        picked: list[Any] = []
        wanted = [lambda q: q.edit_type == "long" and 2 <= len(q.sentences) <= 3]
        wanted += [lambda q, t=t: q.edit_type == t for t in ("two", "attribute", "spatial", "scene", "short")]
        wanted += [lambda q: q.edit_type == "long" and len(q.sentences) >= 4]
        for pred in wanted:
            hit = next((q for q in qs if pred(q) and q not in picked), None)
            if hit is not None:
                picked.append(hit)
        for q in qs:  # small benchmarks may lack a kind
            if len(picked) >= n:
                break
            if q not in picked:
                picked.append(q)
        return picked[:n]

    def query(self, query_id: str) -> tuple[Any, int]:
        """(world query, reference row) for `query_id`."""
        if self.bench is None:
            raise InputError("query ids need the world gallery (this gallery is "
                             f"{self.gallery.name!r})")
        qi = self._query_pos.get(str(query_id).strip())
        if qi is None:
            raise InputError(f"no world query {str(query_id).strip()!r} in this benchmark "
                             f"({len(self.bench.queries)} queries, e.g. {self.bench.queries[0].query_id})")
        return self.bench.queries[qi], self.bench.reference_idx[qi]

    def ground_truth(self, reference: Reference, text: str) -> tuple[str | None, set[int]]:
        """(query id, target rows) when (reference, edit) is a world query, else (None, set())."""
        if self.bench is None or reference.row is None:
            return None, set()
        qi = self._queries_by_key.get((reference.row, normalise_text(text)))
        if qi is None:
            return None, set()
        return self.bench.queries[qi].query_id, self._gt[qi]

    # -- references ------------------------------------------------------------------------------
    def reference_from_row(self, row: int) -> Reference:
        row = int(row)
        if not 0 <= row < len(self.gallery):
            raise InputError(f"gallery row {row} is outside 0..{len(self.gallery) - 1}")
        item_id = self.item_id(row)
        return Reference("gallery", item_id, self.embeddings[row], row=row, item_id=item_id,
                         character=self.character(row), key=("row", row))

    def reference_from_id(self, item_id: str) -> Reference:
        return self.reference_from_row(self.row_of(item_id))

    def reference_from_upload(self, src: str | os.PathLike | bytes | Image.Image,
                              name: str | None = None) -> Reference:
        """Load (size-checked before decoding) and encode an uploaded image; the same file uploaded
        again is not re-encoded. Raises `ImageLoadError` with a message for the user."""
        key = None
        if isinstance(src, (str, os.PathLike)):
            try:
                st = os.stat(src)
                key = (os.path.abspath(src), st.st_size, st.st_mtime_ns)
            except OSError:
                key = None
            name = name or os.path.basename(os.fspath(src))
        if key is not None and key in self._uploads:
            self._uploads.move_to_end(key)
            return replace(self._uploads[key], encode_ms=0.0)  # nothing encoded this time
        try:
            img = load_image(src, max_pixels=MAX_UPLOAD_PIXELS)
        except ImageLoadError as exc:  # name the file as the user knows it, not the server's temp path
            msg = str(exc)
            if isinstance(src, (str, os.PathLike)) and name:
                msg = msg.replace(repr(os.fspath(src)), repr(name))
            raise ImageLoadError(msg) from None
        t0 = time.perf_counter()
        emb = self.backbone.encode_images([img])[0]
        ms = (time.perf_counter() - t0) * 1000
        shown = img.copy()
        shown.thumbnail((512, 512))
        ref = Reference("upload", f"upload: {name or 'image'}", emb, image=shown, encode_ms=ms,
                        key=None if key is None else ("upload", *key))
        if key is not None:
            self._uploads[key] = ref
            while len(self._uploads) > 8:
                self._uploads.popitem(last=False)
        return ref

    # -- compare ---------------------------------------------------------------------------------
    @staticmethod
    def check_edit(edit: str | None) -> tuple[str, list[str]]:
        """(whitespace-collapsed text, sentences) or an `InputError` saying what is wrong with it.
        Sentences are split from the text as typed (blank lines and bullets end sentences)."""
        text = check_edit_text("" if edit is None else edit)
        sentences = split_sentences(edit or "")
        if not sentences:
            raise InputError("the edit has no words in it: type what should change, e.g. "
                             "'Make the square blue.'")
        return text, sentences

    def progression_method(self, names: Sequence[str]) -> tuple[str, Any, str] | None:
        """(name, method, why-not-PACE note) for the progression: PACE when it loads, else the first
        available of `names` (its default progression recomposes each prefix)."""
        try:
            return "pace", self.method("pace"), ""
        except CIRError as exc:
            why = str(exc)
        for n in names:
            try:
                return n, self.method(n), why
            except CIRError:
                continue
        return None

    def _hits(self, ids: np.ndarray, scores: np.ndarray, targets: set[int], known_gt: bool,
              ref_char: str | None) -> list[Hit]:
        out = []
        for r, (i, s) in enumerate(zip(ids.tolist(), scores.tolist()), 1):
            if i < 0:
                continue
            ch = self.character(i)
            out.append(Hit(r, i, self.item_id(i), float(s), (i in targets) if known_gt else None, ch,
                           None if ref_char is None or ch is None else ch == ref_char))
        return out

    def _q_empty(self, name: str, method: Any, reference: Reference, v_r: np.ndarray) -> np.ndarray:
        """q_∅ of `method` for this reference, remembered per (method, reference): it depends on
        the reference only, so trying several edits on one reference computes it once."""
        key = None if reference.key is None else (name, reference.key)
        with self._q_lock:
            if key is not None and key in self._q_empty_cache:
                self._q_empty_cache.move_to_end(key)
                return self._q_empty_cache[key]
        q0 = method.compose_empty(v_r)
        if key is not None:
            with self._q_lock:
                self._q_empty_cache[key] = q0
                while len(self._q_empty_cache) > 512:
                    self._q_empty_cache.popitem(last=False)
        return q0

    def _rank_all(self, jobs: list[tuple[np.ndarray, np.ndarray, float]], v_r: np.ndarray,
                  ref_row: int | None, k: int, scoring: str, variant: str
                  ) -> list[tuple[np.ndarray, np.ndarray, float]]:
        """Top-k of every (queries (n, D), q_∅, λ) job: [(scores (n, k), ids (n, k), ms)].

        Galleries up to the shortlist size are scored exactly in full. Larger ones get ONE cosine
        shortlist search for all the request's queries (one pass over the gallery instead of one
        per method and step), then `rank`'s exact cosine / Chord re-score of each query's
        shortlist, as `scoring.rank(..., index=...)` does for a single method."""
        if not jobs:
            return []
        n = len(self.gallery)
        shortlist = max(DEFAULT_SHORTLIST, k) + (ref_row is not None)
        out = []
        if n <= shortlist:
            for q, q0, lm in jobs:
                t = time.perf_counter()
                ex = np.full(len(q), -1 if ref_row is None else ref_row, np.int64)
                s, ids = rank(q, q0, v_r, self.embeddings, k, scoring, lm, variant, ex)
                out.append((s, ids, (time.perf_counter() - t) * 1000))
            return out
        t = time.perf_counter()
        allq = np.concatenate([q for q, _, _ in jobs])
        allq = allq / np.maximum(np.linalg.norm(allq, axis=1, keepdims=True), 1e-12)
        cand = self._shortlist(allq, shortlist)
        share = (time.perf_counter() - t) * 1000 / len(jobs)
        row = 0
        for q, q0, lm in jobs:
            t = time.perf_counter()
            scores = np.full((len(q), k), -np.inf, np.float32)
            ids = np.full((len(q), k), -1, np.int64)
            for i in range(len(q)):
                c = cand[row + i]
                c = c[c >= 0]
                pos = np.nonzero(c == ref_row)[0] if ref_row is not None else []
                ex = np.array([pos[0] if len(pos) else -1], np.int64)
                if len(c) - (ex[0] >= 0) < 1:
                    continue
                s, j = rank(q[i], q0, v_r, self.embeddings[c], k, scoring, lm, variant, ex)
                scores[i, :s.shape[1]], ids[i, :s.shape[1]] = s[0], c[j[0]]
            row += len(q)
            out.append((scores, ids, share + (time.perf_counter() - t) * 1000))
        return out

    def _shortlist(self, q: np.ndarray, size: int) -> np.ndarray:
        """(B, size) gallery rows with the highest cosine to each query row, unordered.

        Exact index: one (N, D) @ (D, B) product, i.e. a single pass over the gallery for the
        whole request. FAISS's flat search would scan it once per query at these batch sizes (it
        switches to BLAS only from `distance_compute_blas_threshold` queries). HNSW: its search."""
        if self.index.kind != "flat":
            return self.index.search(q, size)[1]
        sims = q @ self.embeddings.T  # (B, N): rows contiguous for the partition (~4x faster)
        return np.argpartition(-sims, size - 1, axis=1)[:, :size]

    @staticmethod
    def _progression_note(name: str, native: bool, why: str, n_sentences: int) -> str:
        if name == "pace":
            note = ("PACE's own step queries: q₀ from the whole edit, then its accumulator adds one "
                    "sentence per step" if native else "PACE, recomposing each prefix")
        else:
            note = (f"{why.rstrip('.')}. This shows {method_label(name)} "
                    + ("stepping through the sentences with its own progression" if native else
                       "recomposing sentences 1..k from scratch at each step (prefix re-composition, "
                       "not PACE's accumulator)"))
        if n_sentences > MAX_STEPS:
            note += f". Showing the first {MAX_STEPS} of {n_sentences} sentences"
        return note

    def compare(self, reference: Reference, edit: str, k: int = 8, scoring: str = "cosine",
                lam: float | None = None, methods: Sequence[str] | None = None,
                progression: bool = True, variant: str = "empty") -> CompareResult:
        """Every method's top-k for (reference, edit), and the per-sentence progression.

        `lam`: Chord's λ for every method; None uses each method's own `chord_lambda`.
        Raises `InputError` for a bad edit / k / scoring; a method that fails gets `error` set.
        """
        t_start = time.perf_counter()
        text, sentences = self.check_edit(edit)
        if scoring not in SCORINGS:
            raise InputError(f"unknown scoring {scoring!r}; expected one of {SCORINGS}")
        if variant not in VARIANTS:
            raise InputError(f"unknown Chord variant {variant!r}; expected one of {VARIANTS}")
        if not 1 <= int(k) <= MAX_K:
            raise InputError(f"k must be between 1 and {MAX_K}, got {k}")
        k = min(int(k), len(self.gallery) - (reference.row is not None))
        if k < 1:
            raise InputError("the gallery has nothing to retrieve besides the reference")
        names = list(methods) if methods is not None else self.default_methods()
        prog = self.progression_method(names) if progression else None

        # Stage 1, encode: the reference (already done for an upload, a cache read for a gallery
        # item) and every text the frozen text tower will be asked for, in one batch.
        t0 = time.perf_counter()
        texts = [text, "", *sentences]
        if prog is not None and not getattr(prog[1], "native_progression", False):
            texts += [" ".join(sentences[:i]) for i in range(1, min(len(sentences), MAX_STEPS) + 1)]
        self.text_memo.prefetch(list(dict.fromkeys(texts)))
        encode_ms = reference.encode_ms + (time.perf_counter() - t0) * 1000

        v_r = np.asarray(reference.embedding, np.float32)[None]
        query_id, targets = self.ground_truth(reference, text)
        known_gt = query_id is not None
        ref_char = reference.character

        # Stage 2, compose: every method's query and q_∅, and the progression's step queries.
        results: list[MethodResult] = []
        jobs: list[tuple[Any, np.ndarray, np.ndarray, float]] = []  # (owner, queries, q_∅, λ)
        t_compose = time.perf_counter()
        for name in names:
            res = MethodResult(name, method_label(name))
            results.append(res)
            try:
                m = self.method(name)
                t = time.perf_counter()
                q = m.compose(v_r, [text])
                q0 = self._q_empty(name, m, reference, v_r)
                res.compose_ms = (time.perf_counter() - t) * 1000
            except CIRError as exc:
                res.error = str(exc)
                continue
            except Exception as exc:  # a bug in one method must leave the other columns working
                log.exception("method %s failed", name)
                res.error = f"{res.label} failed: {type(exc).__name__}: {exc}".splitlines()[0]
                continue
            lam_m = m.chord_lambda if lam is None else float(lam)
            res.lam = lam_m if scoring == "chord" else None
            jobs.append((res, q, q0, lam_m))

        progression_out = None
        if prog is not None:
            name, m, why = prog
            shown = sentences[:MAX_STEPS]
            native = bool(getattr(m, "native_progression", False))
            progression_out = Progression(name, method_label(name), native,
                                          self._progression_note(name, native, why, len(sentences)),
                                          [], len(sentences))
            try:
                steps_q = np.stack([np.asarray(x, np.float32) for x in m.progression(v_r[0], shown)])
                q0 = self._q_empty(name, m, reference, v_r)
                jobs.append((progression_out, steps_q, q0, m.chord_lambda if lam is None else float(lam)))
            except CIRError as exc:
                progression_out.note = str(exc)
            except Exception as exc:
                log.exception("progression of %s failed", name)
                progression_out.note = f"progression failed: {type(exc).__name__}: {exc}"
        compose_ms = (time.perf_counter() - t_compose) * 1000

        # Stage 3, search: one FAISS pass for every query of the request, then the exact score.
        t_search = time.perf_counter()
        ranked = self._rank_all([(q, q0, lm) for _, q, q0, lm in jobs], v_r, reference.row, k,
                                scoring, variant)
        for (owner, _, _, _), (scores, ids, ms) in zip(jobs, ranked):
            if isinstance(owner, MethodResult):
                owner.search_ms = ms
                owner.hits = self._hits(ids[0], scores[0], targets, known_gt, ref_char)
            else:
                owner.steps = [Step(i + 1, sent, self._hits(ids[i], scores[i], targets, known_gt, ref_char))
                               for i, sent in enumerate(sentences[:len(ids)])]
        search_ms = (time.perf_counter() - t_search) * 1000

        timings = {"encode": encode_ms, "compose": compose_ms, "search": search_ms,
                   "total": reference.encode_ms + (time.perf_counter() - t_start) * 1000}
        return CompareResult(reference, text, sentences, k, scoring, lam, variant, query_id,
                             sorted(targets), results, progression_out,
                             {key: round(v, 2) for key, v in timings.items()})
