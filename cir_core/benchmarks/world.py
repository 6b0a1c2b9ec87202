"""The generated world as a benchmark like the others (`--benchmark world`, the eval CLI's default).

Its gallery, queries and ground truth come from `cir_core.world.build_benchmark(split, n)`; no
files are read. Metrics: R@1/5/10/50 (reference removed), CIRR-style Rs@1/2/3 over each query's
subset of six, CIRCO-style mAP@5/10/25/50 over the exact-key ground truth, identity@1 (the top-1
shows the reference's character) and edit@1 (the top-1 satisfies the edit, whoever the character
is); breakdowns of R@10 per edit type and seen/novel; optionally the per-sentence progression.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np

from cir_core.gallery import Gallery
from cir_core.methods import Method
from cir_core.metrics import (
    edit_at_1,
    identity_at_1,
    map_at_k,
    progression_summary,
    recall_at_k,
    subset_ranking,
    subset_recall,
    target_position,
)
from cir_core.search.scoring import ScoreOpts
from cir_core.search.searcher import StoreArray
from cir_core.world import WorldBenchmark, build_benchmark

from .common import (
    TOP,
    BenchmarkError,
    BenchmarkResult,
    Composed,
    Embedded,
    compose_queries,
    prefix_ranks,
    rank_queries,
    refs_at,
)
from .registry import register_benchmark

if TYPE_CHECKING:
    from cir_core.world.films.benchmark import FilmBenchmark

# what a WorldEval reads: the world's benchmark, or the film world's (`FilmBench`, benchmarks/films.py)
W = TypeVar("W", WorldBenchmark, "FilmBenchmark")

SPLITS = {"test": 1000, "val": 500}  # default number of queries per split


@dataclass
class WorldEval(Generic[W]):
    """The generated world as an evaluated benchmark (the registry's "world"): `world`, the
    `cir_core.world.WorldBenchmark` it reads (scenes, queries, ground truth), and how it is scored."""

    world: W
    image_size: int = 64
    progression: bool = False
    name: str = "world"
    labelled: bool = True
    protocol: str = "reference removed from every ranking; one target per query; mAP over exact-scene matches"
    _gallery: dict[int, Gallery] = field(default_factory=dict)

    @property
    def split(self) -> str:
        return self.world.split

    def galleries(self) -> dict[str, Gallery]:
        return {"gallery": self.gallery(self.image_size)}

    def gallery(self, size: int) -> Gallery:
        if size not in self._gallery:
            self._gallery[size] = self.world.gallery(size)
        return self._gallery[size]

    def n_queries(self) -> int:
        return len(self.world.queries)

    def query_texts(self) -> list[str]:
        """Every query's edit text (for the text-context check of `evaluation.evaluate`)."""
        return [q.text for q in self.world.queries]

    @cached_property
    def truth(self) -> dict[str, Any]:
        w = self.world
        return {"ref": np.asarray(w.reference_idx), "target": np.asarray(w.target_idx),
                "subsets": np.asarray(w.subsets), "gt": w.gt_sets(), "edit_ok": w.edit_ok_sets(),
                "identities": np.asarray(w.identities())}

    # -- one method ------------------------------------------------------------------------------
    def compose(self, method: Method, data: Embedded) -> Composed:
        return compose_queries(method, data.refs("gallery", self.truth["ref"]), [[q.text] for q in self.world.queries])

    def score(self, method: Method, c: Composed, data: Embedded, opts: ScoreOpts) -> BenchmarkResult:
        """Metrics and breakdowns of already composed queries (a λ sweep composes once), and the
        per-sentence progression when this benchmark measures it."""
        g, t = data.emb["gallery"], self.truth
        got = rank_queries(method, c.q, c.q_empty, g[t["ref"]], g, opts, t["ref"], TOP, t["subsets"])
        ranked = got.ids
        ids = [it.item_id for it in self.world.items]
        queries = self.world.queries
        gt = {q.query_id: {"reference_id": ids[r], "target_id": ids[tg], "gt_ids": sorted(ids[j] for j in gs)}
              for q, r, tg, gs in zip(queries, t["ref"], t["target"], t["gt"])}
        res = BenchmarkResult(self.metrics(got), extra={"breakdown": self.breakdown(ranked)},
                              top={q.query_id: [ids[j] for j in r] for q, r in zip(queries, ranked)},
                              aux={"gt": gt, "per_query": self.per_query(ranked), "subset_scores": got.at_cols})
        if self.progression:
            ranks = self.progression_ranks(method, g, opts, data.norms.get("gallery"))
            res.extra["progression"] = {p: progression_summary(*rn) for p, rn in ranks.items()}
            res.aux["progression_ranks"] = ranks
        return res

    def metrics(self, got: Any) -> dict[str, float]:
        """The headline metrics of a ranking (`rank_queries`' answer)."""
        t, ranked = self.truth, got.ids
        sub = subset_ranking(got.at_cols, t["subsets"], t["ref"])
        fits = lambda ks: [k for k in ks if k <= ranked.shape[1]]  # noqa: E731  (a tiny world)
        return {**recall_at_k(ranked, t["target"], fits((1, 5, 10, 50))), **subset_recall(sub, t["target"]),
                **map_at_k(ranked, t["gt"], fits((5, 10, 25, 50))),
                "identity@1": identity_at_1(t["identities"][ranked[:, 0]], t["identities"][t["ref"]]),
                "edit@1": edit_at_1(ranked, t["edit_ok"])}

    # -- breakdowns ------------------------------------------------------------------------------
    def per_query(self, ranked: np.ndarray) -> dict[str, np.ndarray]:
        """Each query's 0/1 outcome (float arrays, query order) for R@1, R@10, identity@1 and
        edit@1: what paired bootstrap intervals resample."""
        t = self.truth
        first = target_position(ranked, t["target"])
        return {"R@1": (first < 1).astype(float), "R@10": (first < 10).astype(float),
                "identity@1": (t["identities"][ranked[:, 0]] == t["identities"][t["ref"]]).astype(float),
                "edit@1": np.array([r[0] in ok for r, ok in zip(ranked, t["edit_ok"])], float)}

    def breakdown(self, ranked: np.ndarray) -> dict[str, float]:
        """R@10 per edit type and for queries with / without held-out combinations."""
        hit = target_position(ranked, self.truth["target"]) < 10
        groups: dict[str, list[bool]] = {}
        for h, q in zip(hit, self.world.queries):
            groups.setdefault(f"R@10[{q.edit_type}]", []).append(h)
            groups.setdefault("R@10[novel]" if q.novel else "R@10[seen]", []).append(h)
        return {k: round(float(np.mean(v)), 4) for k, v in sorted(groups.items())}

    def progression_ranks(self, method: Method, g: np.ndarray | StoreArray, opts: ScoreOpts,
                          norms: np.ndarray | StoreArray | None = None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Over multi-sentence queries, per protocol, (target ranks after each step (Q, W), real
        steps (Q,)): `prefix` (every method, PACE included, given only sentences 1..k: comparable
        across methods) and, for a method with its own step states, `states` (its states on the
        full text: PACE's q₀ already sees every sentence)."""
        rows = self.progression_rows()
        if not rows:
            return {}
        out = {"prefix": self._step_ranks(method, g, opts, method.prefix_queries, rows, norms)}
        if method.native_progression:
            out["states"] = self._step_ranks(method, g, opts, method.progression, rows, norms)
        return out

    def progression_rows(self) -> list[int]:
        """The queries the progression measures (row j of its ranks is query rows[j]): those with
        more than one sentence."""
        return [i for i, q in enumerate(self.world.queries) if len(q.sentences) > 1]

    def _step_ranks(self, method: Method, g: np.ndarray | StoreArray, opts: ScoreOpts, steps, rows: list[int],
                    norms: np.ndarray | StoreArray | None) -> tuple[np.ndarray, np.ndarray]:
        t, qs = self.truth, self.world.queries
        n = np.array([len(qs[i].sentences) for i in rows])
        one = lambda j: refs_at(g, norms, slice(t["ref"][rows[j]], t["ref"][rows[j]] + 1))  # noqa: E731
        ranks = prefix_ranks(lambda j: np.stack(steps(one(j), list(qs[rows[j]].sentences))),
                             method, g, t["ref"][rows], self.step_targets(rows), opts, int(n.max()), norms)
        return ranks, n

    def step_targets(self, rows: list[int]) -> np.ndarray | list[set[int]]:
        """What the progression ranks at each step for queries `rows`: the world's single target."""
        return self.truth["target"][rows]


@register_benchmark("world", "the generated world: exact ground truth, held-out combinations", generated=True)
def load(root: str | Path | None = None, split: str = "test", n_queries: int | None = None,
         image_size: int = 64, progression: bool = False) -> WorldEval[WorldBenchmark]:
    """The world's `split` ('test' or 'val') with `n_queries` queries (default 1000 / 500)."""
    if root is not None:
        raise BenchmarkError("the world benchmark is generated: it takes no --root")
    if split not in SPLITS:
        raise BenchmarkError(f"the world has splits {', '.join(SPLITS)} (train is a stream), not {split!r}")
    n = n_queries or SPLITS[split]
    if n < 1:
        raise BenchmarkError(f"--n-queries must be >= 1, got {n}")
    return WorldEval(build_benchmark(split, n), image_size, progression)
