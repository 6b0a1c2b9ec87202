"""What every real-benchmark evaluator shares: reading annotation files with errors that name the
file and key, embedding galleries through the project's cache, the compose-and-rank step, and
the loop over methods × scorings that produces the JSON report.
"""
from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from cir_core.config import cache_dir
from cir_core.errors import InputError
from cir_core.gallery import EmbeddingCache, Gallery
from cir_core.scoring import chord_scores, cosine_scores

from .metrics import topk_ranking

SCORINGS = ("cosine", "chord")
TOP = 50
BLOCK = 128  # queries scored at once: ~0.5 GB of temporaries per block at N ~ 123k (CIRCO)


class BenchmarkError(InputError):
    """A benchmark file is missing or malformed; the message names the file and the key."""


def read_json(path: Path) -> Any:
    """Parsed JSON of `path`, or BenchmarkError naming the file."""
    if not path.is_file():
        raise BenchmarkError(f"{path}: file not found")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise BenchmarkError(f"{path}: not valid JSON ({e})") from None


def read_jsonl(path: Path) -> list[dict]:
    """Rows of a JSON-lines file (blank lines skipped), each a JSON object."""
    if not path.is_file():
        raise BenchmarkError(f"{path}: file not found")
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as e:
            raise BenchmarkError(f"{path} line {n}: not valid JSON ({e})") from None
        if not isinstance(row, dict):
            raise BenchmarkError(f"{path} line {n}: expected a JSON object")
        rows.append(row)
    return rows


def need(entry: Any, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    """entry[key], checked to be of `kind`; BenchmarkError naming `where` and the key otherwise."""
    if not isinstance(entry, dict):
        raise BenchmarkError(f"{where}: expected a JSON object, got {type(entry).__name__}")
    if key not in entry:
        raise BenchmarkError(f"{where}: missing key {key!r}")
    v = entry[key]
    if isinstance(v, bool) or not isinstance(v, kind):
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise BenchmarkError(f"{where}: key {key!r} should be {names}, got {type(v).__name__}")
    return v


def check_files(paths: Iterable[str], what: str) -> None:
    """BenchmarkError listing the first missing image files, if any."""
    missing = [p for p in paths if not Path(p).is_file()]
    if missing:
        shown = ", ".join(missing[:3]) + (f" (+{len(missing) - 3} more)" if len(missing) > 3 else "")
        raise BenchmarkError(f"{what}: {len(missing)} image file(s) not found: {shown}")


@dataclass
class ScoreOpts:
    scoring: str = "cosine"
    lam: float | None = None  # None: the method's own Chord λ
    variant: str = "empty"


@dataclass
class MethodResult:
    """One method × scoring on one benchmark: metrics, breakdowns, and per-query rankings."""

    metrics: dict[str, float]
    extra: dict[str, Any] = field(default_factory=dict)
    top: dict[str, list] = field(default_factory=dict)  # query id -> best-first external ids
    aux: dict[str, Any] = field(default_factory=dict)  # more rankings a submission needs


class Benchmark(Protocol):
    name: str
    split: str
    labelled: bool  # False for test splits whose ground truth is on a server

    def galleries(self) -> dict[str, Gallery]: ...
    def n_queries(self) -> int: ...
    def evaluate_method(self, method, emb: dict[str, np.ndarray], opts: ScoreOpts) -> MethodResult: ...


def compose(method, refs: np.ndarray, texts: Sequence[Sequence[str]]) -> tuple[np.ndarray, np.ndarray]:
    """(q, q_∅): each query's text variants are composed separately and their queries averaged,
    then normalised (FashionIQ's two caption orders); one variant is plain composition."""
    counts = np.array([len(t) for t in texts])
    if len(texts) != len(refs) or (counts < 1).any():
        raise InputError("every query needs a reference and at least one text")
    flat = [t for ts in texts for t in ts]
    q = method.compose(np.repeat(refs, counts, 0), flat)
    q = np.add.reduceat(q, np.r_[0, np.cumsum(counts)[:-1]], axis=0)
    q /= np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-12)
    return q.astype(np.float32), method.compose_empty(refs)


def score_block(method, q: np.ndarray, q0: np.ndarray, refs: np.ndarray, gallery: np.ndarray,
                opts: ScoreOpts) -> np.ndarray:
    """Exact (B, N) scores of B composed queries against a gallery, cosine or Chord."""
    if opts.scoring == "cosine":
        return cosine_scores(q, gallery)
    lam = method.chord_lambda if opts.lam is None else opts.lam
    return chord_scores(q, q0, refs, gallery, lam=lam, variant=opts.variant)


def rank_gallery(method, q: np.ndarray, q0: np.ndarray, refs: np.ndarray, gallery: np.ndarray,
                 opts: ScoreOpts, exclude: np.ndarray | None = None, k: int = TOP,
                 cols: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """Top-k rows (Q, k) with each query's `exclude` row (-1: none) removed, and the scores at
    `cols` (Q, S) gallery rows (-1: padding, scored -inf) for subset protocols."""
    ranked, picked = [], []
    for s in range(0, len(q), BLOCK):
        sl = slice(s, s + BLOCK)
        sc = score_block(method, q[sl], q0[sl], refs[sl], gallery, opts)
        ranked.append(topk_ranking(sc, k, None if exclude is None else exclude[sl]))
        if cols is not None:
            c = cols[sl]
            picked.append(np.where(c >= 0, np.take_along_axis(sc, np.maximum(c, 0), 1), -np.inf))
    return np.concatenate(ranked), (np.concatenate(picked) if cols is not None else None)


def score_candidates(method, q: np.ndarray, q0: np.ndarray, refs: np.ndarray, emb: np.ndarray,
                     cands: Sequence[np.ndarray], opts: ScoreOpts) -> list[np.ndarray]:
    """Per-query galleries (GeneCIS): scores of query i against rows `cands[i]` of `emb`."""
    return [score_block(method, q[i:i + 1], q0[i:i + 1], refs[i:i + 1], emb[c], opts)[0]
            for i, c in enumerate(cands)]


def embed(gallery: Gallery, backbone, cache: Path | None, progress: bool) -> np.ndarray:
    return EmbeddingCache(cache or cache_dir()).embed(gallery, backbone, progress=progress)


def run(bench: Benchmark, backbone, methods: Sequence[str], scorings: Sequence[str] = SCORINGS,
        lam: float | None = None, variant: str = "empty", cache: Path | None = None,
        progress: bool = True, checkpoints: dict[str, str] | None = None,
        dump=None) -> tuple[dict, dict[tuple[str, str], MethodResult]]:
    """Every method × scoring on `bench`: (JSON report, the raw results for submissions)."""
    from cir_core.methods.factory import create_methods

    emb = {k: embed(g, backbone, cache, progress) for k, g in bench.galleries().items()}
    results, extra, skipped, timing, raw = {}, {}, {}, {}, {}
    for name, m in create_methods(methods, backbone, checkpoints, skipped):
        for sc in scorings:
            t0 = time.perf_counter()
            res = bench.evaluate_method(m, emb, ScoreOpts(sc, lam, variant))
            timing.setdefault(name, {})[sc] = round(time.perf_counter() - t0, 3)
            raw[(name, sc)] = res
            results.setdefault(name, {})[sc] = {k: round(float(v), 4) for k, v in res.metrics.items()}
            if res.extra:
                extra.setdefault(name, {})[sc] = res.extra
            if dump is not None:
                for qid, top in res.top.items():
                    dump.write(json.dumps({"benchmark": bench.name, "method": name, "scoring": sc,
                                           "query_id": qid, "top": top}) + "\n")
    report = {"benchmark": bench.name, "split": bench.split, "labelled": bench.labelled,
              "results": results, "extra": extra, "skipped": skipped, "seconds": timing,
              "backbone": backbone.id, "n_queries": bench.n_queries(),
              "gallery_size": {k: len(g) for k, g in bench.galleries().items()}}
    return report, raw


def format_table(report: dict) -> str:
    """The report's metrics as an aligned text table (values in %)."""
    head = (f"benchmark={report['benchmark']}  split={report['split']}  queries={report['n_queries']}"
            f"  gallery={sum(report['gallery_size'].values())}  backbone={report['backbone']}")
    rows = [(m, sc, v) for m, by in report["results"].items() for sc, v in by.items()]
    if not rows or not rows[0][2]:
        why = "" if report["labelled"] else " (no ground truth in this split: use --submission)"
        return head + f"\nno metrics{why}"
    keys = list(rows[0][2])
    cols = ["method", "scoring", *keys]
    body = [[m, sc, *(f"{v[k]:.0f}" if k.endswith("@n") else f"{100 * v[k]:.1f}" for k in keys)]
            for m, sc, v in rows]
    widths = [max(len(str(r[i])) for r in [cols, *body]) for i in range(len(cols))]
    line = lambda r: "  ".join(str(c).rjust(w) if i > 1 else str(c).ljust(w)  # noqa: E731
                               for i, (c, w) in enumerate(zip(r, widths)))
    return "\n".join([head + "  (values in %)", line(cols), line(["-" * w for w in widths]),
                      *map(line, body)])
