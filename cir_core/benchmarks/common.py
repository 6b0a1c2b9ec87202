"""What every benchmark evaluator shares: the file checks that name the file and key (the
formats', `cir_core.formats.common`), the `Benchmark` protocol and its `BenchmarkResult`, and the
compose-and-rank steps (all scoring goes through `cir_core.search.rank` / `score_matrix`, λ through
`ScoreOpts.for_method`). The loop over methods × scorings and the result tables are `cir_core.eval.loop`'s.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from PIL import Image

from cir_core.errors import InputError
from cir_core.formats.common import FormatError, check_files, need, read_json, read_jsonl  # noqa: F401  (re-exported)
from cir_core.gallery import Gallery
from cir_core.imageio import open_as_stored, rgb_as_official
from cir_core.methods import Method
from cir_core.methods.refs import RefInput, Refs
from cir_core.metrics import set_ranks, target_ranks
from cir_core.search.scoring import Queries, ScoreOpts, score_matrix
from cir_core.search.searcher import Ranking, StoreArray, rank, searcher_for

TOP = 50


# A benchmark's bad files and bad options are one error; the file readers are the formats'
# (`cir_core.formats`), whose checks the benchmark modules here (and MovieNet's) share.
BenchmarkError = FormatError


TARGET_RATIO = 1.25  # SEARLE's (and CLIP4Cir's) targetpad ratio
PREPROCESS = {
    "backbone": "images: the backbone's own preprocessing (resize, centre crop)",
    "targetpad": f"images: targetpad {TARGET_RATIO} (black padding to that aspect ratio, SEARLE "
                 "src/data_utils.py), then the backbone's preprocessing",
}


def target_pad(img: Image.Image, ratio: float = TARGET_RATIO) -> Image.Image:
    """SEARLE's `TargetPad` (`src/data_utils.py`, from CLIP4Cir): an image wider or taller than
    `ratio` is padded with zeros, evenly on both sides, to that aspect ratio; others unchanged.
    Applied to the image as stored, before its RGB conversion, as in their Compose."""
    import torchvision.transforms.functional as FT

    w, h = img.size
    if max(w, h) / min(w, h) < ratio:
        return img
    scaled = max(w, h) / ratio
    hp, vp = max(int((scaled - w) / 2), 0), max(int((scaled - h) / 2), 0)
    return FT.pad(img, [hp, vp, hp, vp], 0, "constant")


class StoredGallery(Gallery):
    """A benchmark's gallery of files, decoded as the official loaders decode them (pixels as
    stored, no EXIF transposition, no draft decoding, PIL's `convert("RGB")`), with SEARLE's
    targetpad before it when `preprocess` is "targetpad". Its fingerprints say both, so
    embeddings cached under another decoding are not reused."""

    DECODE = "as-stored"
    preprocess = "backbone"  # or "targetpad" (`cir_core.benchmarks.load_benchmark(preprocess=)`)

    def decode(self, i: int, draft: int | None = None) -> Image.Image:
        item = self.items[i]
        if self.image_fn is not None or item.path is None:
            return super().decode(i, draft)
        img = open_as_stored(item.path)
        try:
            out = rgb_as_official(target_pad(img) if self.preprocess == "targetpad" else img)
        finally:
            img.close()
        return out

    def load_image(self, i: int, size: int | None = None) -> Image.Image:
        img = self.decode(i)
        if size is not None:
            img.thumbnail((size, size))
        return img

    def fingerprint(self, i: int) -> str:
        pad = f"|targetpad{TARGET_RATIO:g}" if self.preprocess == "targetpad" else ""
        return f"{super().fingerprint(i)}|{self.DECODE}{pad}"


def pick(value: str | None, choices: Sequence[str], what: str, default: str) -> str:
    """A named protocol choice: `value` (None: `default`) checked against `choices`."""
    value = default if value is None else value
    if value not in choices:
        raise BenchmarkError(f"{what} must be one of {', '.join(choices)}, got {value!r}")
    return value


def parse_subset(subset: str | Sequence[str] | None, known: Sequence[str], what: str) -> tuple[str, ...] | None:
    """`subset` ('a,b' or a sequence) as a tuple in `known`'s order; None when not given.
    BenchmarkError on an unknown or empty choice."""
    if subset is None:
        return None
    names = [s.strip() for s in (subset.split(",") if isinstance(subset, str) else subset) if s.strip()]
    if not names:
        raise BenchmarkError(f"--subset names no {what}; choose from {', '.join(known)}")
    bad = [n for n in names if n not in known]
    if bad:
        raise BenchmarkError(f"--subset: unknown {what} {bad[0]!r}; choose from {', '.join(known)}")
    return tuple(k for k in known if k in names)


@dataclass
class BenchmarkResult:
    """One method × scoring on one benchmark: metrics, breakdowns, and per-query rankings."""

    metrics: dict[str, float]
    extra: dict[str, Any] = field(default_factory=dict)
    top: dict[str, list] = field(default_factory=dict)  # query id -> best-first external ids
    aux: dict[str, Any] = field(default_factory=dict)  # more rankings a submission needs


@dataclass(frozen=True)
class Embedded:
    """A benchmark's galleries embedded, by gallery name: rows (N, D) and, where recorded, each
    row's raw feature norm (N,); a gallery held in a vector store is its `StoreArray`s (rows read
    when indexed: `cir_core.eval.loop.stored_benchmark`)."""

    emb: dict[str, np.ndarray | StoreArray]
    norms: dict[str, np.ndarray | StoreArray] = field(default_factory=dict)

    def refs(self, name: str, rows: np.ndarray | slice) -> Refs:
        """The references at `rows` of gallery `name`, with their raw norms when recorded."""
        return refs_at(self.emb[name], self.norms.get(name), rows)


class Benchmark(Protocol):
    """What `cir_core.eval.loop` runs: galleries to embed, then per method its queries composed
    once (`compose`) and scored under each scoring option (`score`)."""

    name: str
    split: str
    labelled: bool  # False for test splits whose ground truth is on a server
    protocol: str  # the protocol choices the numbers depend on, printed with every result

    def galleries(self) -> dict[str, Gallery]: ...
    def n_queries(self) -> int: ...
    def compose(self, method: Method, data: Embedded) -> Any: ...
    def score(self, method: Method, composed: Any, data: Embedded, opts: ScoreOpts) -> BenchmarkResult: ...


def refs_at(emb: np.ndarray | StoreArray, norms: np.ndarray | StoreArray | None, rows: np.ndarray | slice) -> Refs:
    """The references at `rows` of a gallery's embeddings (in process or a store's), with their
    raw feature norms when the gallery's are known (`norms`, aligned with `emb`)."""
    return Refs(emb[rows], None if norms is None else norms[rows])


@dataclass
class Composed:
    """One method's composed queries on a benchmark's queries (kept for a λ sweep): q and q_∅."""

    q: np.ndarray
    q_empty: np.ndarray


def compose_queries(method: Method, refs: RefInput, texts: Sequence[Sequence[str]]) -> Composed:
    """(q, q_∅): each query's text variants are composed separately and their queries averaged,
    then normalised (FashionIQ's two caption orders); one variant is plain composition."""
    refs = refs if isinstance(refs, Refs) else Refs(np.asarray(refs))
    counts = np.array([len(t) for t in texts])
    if len(texts) != len(refs) or (counts < 1).any():
        raise InputError("every query needs a reference and at least one text")
    flat = [t for ts in texts for t in ts]
    q = method.compose(refs.repeat(counts), flat)
    q = np.add.reduceat(q, np.r_[0, np.cumsum(counts)[:-1]], axis=0)
    q /= np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-12)
    return Composed(q.astype(np.float32), method.compose_empty(refs))


def rank_queries(method: Method, q: np.ndarray, q0: np.ndarray, refs: np.ndarray, gallery: np.ndarray | StoreArray,
                 opts: ScoreOpts, exclude: np.ndarray | None = None, k: int = TOP,
                 cols: np.ndarray | None = None) -> Ranking:
    """`search.rank` of composed queries over the whole gallery (exact, as the benchmarks' own
    code ranks; a gallery in a store: its shortlist re-scored exactly) under `opts`, with the
    method's λ (`opts.for_method`)."""
    return rank(Queries(q, q0, refs), searcher_for(gallery), opts.for_method(method), k, exclude, cols)


def score_candidates(method: Method, q: np.ndarray, q0: np.ndarray, refs: np.ndarray, emb: np.ndarray | StoreArray,
                     cands: Sequence[np.ndarray], opts: ScoreOpts) -> list[np.ndarray]:
    """Per-query galleries (GeneCIS): scores of query i against rows `cands[i]` of `emb`."""
    opts = opts.for_method(method)
    return [score_matrix(Queries(q[i:i + 1], q0[i:i + 1], refs[i:i + 1]), emb[c], opts)[0]
            for i, c in enumerate(cands)]


def prefix_ranks(steps: Callable[[int], np.ndarray], method: Method, gallery: np.ndarray | StoreArray,
                 ref_rows: np.ndarray, target_rows: np.ndarray | Sequence[set[int]], opts: ScoreOpts,
                 width: int, norms: np.ndarray | StoreArray | None = None) -> np.ndarray:
    """(Q, width) 0-based target ranks (reference removed, ties to the lower row) after each
    step of each query's progression: `steps(i)` gives query i's step queries (n_i, D); a query
    with fewer than `width` steps repeats its last rank. A target given as a set of rows (the
    films' ground-truth sets) ranks its best-ranked member."""
    if isinstance(gallery, StoreArray):
        raise BenchmarkError("the per-sentence progression ranks the targets in the whole gallery, which a "
                             "gallery in Milvus does not answer (it returns a shortlist): evaluate it without "
                             "--gallery milvus:...")
    opts = opts.for_method(method)
    out = np.zeros((len(ref_rows), width), np.int64)
    for i, (r, t) in enumerate(zip(ref_rows, target_rows)):
        qs, ref = steps(i), gallery[r][None]
        q0 = method.compose_empty(refs_at(gallery, norms, slice(r, r + 1)))
        sc = score_matrix(Queries(qs, np.repeat(q0, len(qs), 0), np.repeat(ref, len(qs), 0)), gallery, opts)
        ex = np.full(len(qs), r)
        ranks = (set_ranks(sc, [t] * len(qs), ex) if isinstance(t, (set, frozenset))
                 else target_ranks(sc, np.full(len(qs), t), ex))
        out[i] = [ranks[min(j, len(ranks) - 1)] for j in range(width)]
    return out
