"""The one evaluation loop: a benchmark's galleries embedded once (`embed_benchmark`), then per
method its queries composed once and scored under each scoring option (`score_method`). What the
eval command line (`evaluate`: every method x scoring, the JSON report, the ranking dump, the
table), the trainers' validation and λ search (`training.heads.ValBench`) and the studies that
analyse an evaluation (`studies.chord_analysis`, `studies.progression_failures`) all run.

    bench = load_benchmark("world", split="test")        # or ("cirr", "/data/cirr", "val")
    report, raw = evaluate(bench, backbone, ["sum", "pact"], ("cosine", "chord"))
    print(format_table(report))
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import IO, Sequence

import numpy as np

from ..benchmarks.common import Benchmark, BenchmarkError, BenchmarkResult, Embedded
from ..encoder import Encoder
from ..gallery import EmbeddingCache, Gallery
from ..gallery_spec import OpenedGallery
from ..methods import Method
from ..paths import cache_dir
from ..search.scoring import SCORINGS, ScoreOpts
from ..search.searcher import StoreArray


def embed(gallery: Gallery, backbone: Encoder, cache: Path | None = None, progress: bool = True) -> np.ndarray:
    """The gallery's embeddings under `backbone`, read from / written to the embedding cache."""
    return EmbeddingCache(cache or cache_dir()).embed(gallery, backbone, progress=progress)


def embed_benchmark(bench: Benchmark, backbone: Encoder, cache: Path | None = None,
                    progress: bool = True, remote: OpenedGallery | None = None) -> Embedded:
    """Every gallery of `bench` embedded (with raw feature norms) through the embedding cache; or,
    with `remote` (a gallery whose vectors stay in a store: `milvus:COLLECTION@URI`), the
    benchmark's one gallery read from there (`StoreArray`) once its rows are shown to be the
    benchmark's, row for row."""
    if remote is not None:
        return stored_benchmark(bench, remote)
    store = EmbeddingCache(cache or cache_dir())
    both = {k: store.embed(g, backbone, progress=progress, with_norms=True) for k, g in bench.galleries().items()}
    return Embedded({k: e for k, (e, _) in both.items()}, {k: n for k, (_, n) in both.items()})


def stored_benchmark(bench: Benchmark, remote: OpenedGallery) -> Embedded:
    """`bench`'s gallery as the store's rows: BenchmarkError unless it has one gallery whose items
    and fingerprints are the store's, in the same order."""
    galleries = bench.galleries()
    if len(galleries) != 1 or remote.store is None:
        raise BenchmarkError(f"{bench.name} has {len(galleries)} galleries ({', '.join(galleries)}); a gallery in "
                             "Milvus stands for a benchmark with one gallery")
    (name, gallery), = galleries.items()
    held = remote.gallery
    if len(held) != len(gallery):
        raise BenchmarkError(f"{bench.name}'s gallery has {len(gallery)} items, the collection {held.name!r} "
                             f"{len(held)}: build it from the benchmark's gallery (python -m cir_core.index build)")
    for i, item in enumerate(held.items):
        if item.id != gallery.items[i].id or item.meta.get("fingerprint") != gallery.fingerprint(i):
            raise BenchmarkError(f"the collection {held.name!r} differs from {bench.name}'s gallery at row {i} "
                                 f"({item.id!r} vs {gallery.items[i].id!r}, or its pixels): build it from the same "
                                 "gallery and backbone image size")
    return Embedded({name: StoreArray(remote.store)}, {name: StoreArray(remote.store, raw_norms=True)})


def score_method(bench: Benchmark, method: Method, data: Embedded,
                 opts: Sequence[ScoreOpts]) -> tuple[list[BenchmarkResult], dict[str, float]]:
    """`method` on `bench` under each of `opts`, its queries composed once: (results in `opts`'
    order, seconds spent composing and scoring)."""
    t0 = time.perf_counter()
    composed = bench.compose(method, data)
    seconds, results = {"compose": round(time.perf_counter() - t0, 3)}, []
    for o in opts:
        t0 = time.perf_counter()
        results.append(bench.score(method, composed, data, o))
        seconds[o.describe()] = round(time.perf_counter() - t0, 3)
    return results, seconds


def evaluate(bench: Benchmark, backbone: Encoder, methods: Sequence[str], scorings: Sequence[str] = SCORINGS,
             lam: float | None = None, variant: str = "empty", cache: Path | None = None,
             progress: bool = True, checkpoints: dict[str, str] | None = None,
             dump: IO[str] | None = None, remote: OpenedGallery | None = None,
             ) -> tuple[dict, dict[tuple[str, str], BenchmarkResult]]:
    """Every method × scoring on `bench`: (JSON report, the raw results for submissions).
    A method that cannot be built is skipped loudly (`skipped` in the report, stderr). `remote`:
    search the benchmark's gallery in that store (`embed_benchmark`)."""
    from ..methods.base import get_method_class
    from ..methods.factory import create_methods

    opts = {sc: ScoreOpts(sc, lam, variant) for sc in scorings}  # validates scorings and λ up front
    data = embed_benchmark(bench, backbone, cache, progress, remote)
    results: dict = {}
    extra: dict = {}
    skipped: dict[str, str] = {}
    timing: dict = {}
    raw: dict[tuple[str, str], BenchmarkResult] = {}
    for name, m in create_methods(methods, backbone, checkpoints, skipped):
        scored, timing[name] = score_method(bench, m, data, list(opts.values()))
        for sc, res in zip(opts, scored):
            raw[(name, sc)] = res
            results.setdefault(name, {})[sc] = {k: round(float(v), 4) for k, v in res.metrics.items()}
            if res.extra:
                extra.setdefault(name, {})[sc] = res.extra
            if dump is not None:
                write_dump(dump, bench.name, name, sc, res)
    report = {"benchmark": bench.name, "split": bench.split, "labelled": bench.labelled,
              "protocol": protocol_line(bench), "scoring": {sc: o.describe() for sc, o in opts.items()},
              "results": results, "extra": extra, "skipped": skipped, "seconds": timing,
              "backbone": backbone.id, "n_queries": bench.n_queries(),
              # which weights each trained method's numbers are of (a seed table reads it back)
              "checkpoints": {n: str((checkpoints or {}).get(n, "shipped")) for n in results
                              if get_method_class(n).needs_checkpoint},
              "gallery_size": {k: len(g) for k, g in bench.galleries().items()}}
    if remote is not None:
        s = remote.store
        assert s is not None  # `stored_benchmark` refused a gallery without a store
        report["search"] = f"{s.kind} collection {remote.gallery.name!r}: each query's {s.shortlist_size}-row " \
                           "cosine shortlist re-scored exactly"
    overflow = text_overflow(bench, backbone)
    if overflow:
        report["text_context"] = overflow
    return report, raw


def protocol_line(bench: Benchmark) -> str:
    """The benchmark's protocol choices, with how its images were preprocessed (real ones)."""
    from ..benchmarks import images_protocol

    return "; ".join(p for p in (bench.protocol, images_protocol(bench)) if p)


def text_overflow(bench: Benchmark, backbone: Encoder) -> dict | None:
    """How many query texts are longer than the text tower's context (whole-text encodings see
    their beginning only; a per-sentence accumulator reads all). None when the benchmark lists no
    texts or the tokenizer cannot count."""
    texts = getattr(bench, "query_texts", None)
    # the tokenizer's count and the text tower's window: an open_clip `Backbone` has both, an
    # `Encoder` need not
    count, context = getattr(backbone, "token_count", None), getattr(backbone, "context_length", None)
    if texts is None or count is None or context is None:
        return None
    ctx = int(context)
    lengths = [count(t) for t in texts()]
    if not lengths or any(n is None for n in lengths):
        return None
    over = sum(n > ctx for n in lengths)
    return {"context": ctx, "over": over, "of": len(lengths), "longest": max(lengths)}


def write_dump(dump: IO[str], benchmark: str, method: str, scoring: str, res: BenchmarkResult) -> None:
    """One JSON line per query: its best-first ranking (external ids), and its ground truth
    where the benchmark gives one (`res.aux["gt"]`)."""
    gt = res.aux.get("gt", {})
    for qid, top in res.top.items():
        row = {"benchmark": benchmark, "method": method, "scoring": scoring, "query_id": qid, "top": top}
        row.update(gt.get(qid, {}))
        dump.write(json.dumps(row) + "\n")


def format_table(report: dict) -> str:
    """The report's metrics as an aligned text table (values in %; counts as they are)."""
    n_gallery = sum(report["gallery_size"].values())
    head = (f"benchmark={report['benchmark']}  split={report['split']}  queries={report['n_queries']}"
            f"  gallery={n_gallery}  backbone={report['backbone']}")
    if report.get("protocol"):
        head += f"\nprotocol: {report['protocol']}"
    if report.get("search"):
        head += f"\nsearch: {report['search']}"
    tc = report.get("text_context")
    if tc and tc["over"]:
        head += (f"\ntext context: {tc['over']} of {tc['of']} query texts are longer than the text tower's "
                 f"{tc['context']} tokens (longest {tc['longest']}): whole-text encodings see their beginning "
                 "only; per-sentence steps read every sentence")
    rows = [(m, sc, v) for m, by in report["results"].items() for sc, v in by.items()]
    if not rows or not rows[0][2]:
        why = "" if report["labelled"] else " (no ground truth in this split: use --submission)"
        return head + f"\nno metrics{why}"
    keys = list(rows[0][2])
    cols = ["method", "scoring", *keys]
    body = [[m, sc, *(f"{v[k]:.0f}" if k.endswith("@n") else f"{100 * v[k]:.1f}" for k in keys)]
            for m, sc, v in rows]
    widths = [max(len(str(r[i])) for r in [cols, *body]) for i in range(len(cols))]

    def line(r: list) -> str:
        return "  ".join(str(c).rjust(w) if i > 1 else str(c).ljust(w) for i, (c, w) in enumerate(zip(r, widths)))

    return "\n".join([head + "  (values in %)", line(cols), line(["-" * w for w in widths]), *map(line, body)])


def format_progressions(report: dict) -> list[str]:
    """One line per (method, scoring[, protocol]) whose benchmark measured a per-sentence
    progression (a benchmark may report several protocols, each a dict of its own)."""
    lines = []
    for name, by in report["extra"].items():
        for sc, extra in by.items():
            prog = extra.get("progression") or {}
            parts = prog.items() if prog and all(isinstance(v, dict) for v in prog.values()) else [(None, prog)]
            for protocol, values in parts:
                if values:
                    tag = f"{name}/{sc}" + (f" [{protocol}]" if protocol else "")
                    lines.append(f"progression {tag}: " + ", ".join(f"{k}={v}" for k, v in values.items()))
    return lines
