"""The film world as a benchmark (`--benchmark films`): MovieNet-shaped queries over every keyframe
of a split's generated films (`cir_core.world.films.build_film_benchmark`); no files are read.

Metrics (reference removed from every ranking): R@1/5/10/50 — a ground-truth keyframe (the query's
character in the target's situation, any of them) among the first k; CIRCO-style mAP@5/10/25/50
over those sets; Rs@1/2/3 over each query's subset of six (the target shot's middle keyframe and
five hard distractors); identity@1/5/10 (a keyframe showing the reference's character among the
first k) and edit@1/5/10 (a keyframe satisfying the edit, whoever stands in the character's
place); breakdowns of R@10 per query type and seen / novel; optionally the per-sentence
progression (the rank of the best-ranked ground truth after each sentence).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from cir_core.metrics import identity_at_k, map_at_k, set_recall_at_k, subset_ranking, subset_recall
from cir_core.world.films.benchmark import SPLIT_FILMS, SPLIT_QUERIES, FilmBenchmark, build_film_benchmark

from .common import BenchmarkError
from .registry import register_benchmark
from .world import WorldEval


@dataclass
class FilmBench(WorldEval[FilmBenchmark]):
    """`WorldEval` over a `FilmBenchmark` (in `world`): the same composing, evaluation loop and
    progression protocols; ground truth, metrics and breakdowns of its own."""

    name: str = "films"
    protocol: str = ("reference keyframe removed from every ranking; ground truth = every keyframe of the "
                     "character in the target's situation (any film); R@K = any of them in the top K")

    @property
    def films(self) -> FilmBenchmark:
        return self.world

    @cached_property
    def truth(self) -> dict[str, Any]:
        b = self.films
        return {"ref": np.asarray(b.reference_idx), "target": np.asarray(b.target_idx),
                "subsets": np.asarray(b.subsets), "gt": b.gt_sets(), "edit_ok": b.edit_ok_sets(),
                "identities": b.identities(), "character": [q.character for q in b.queries]}

    def metrics(self, got: Any) -> dict[str, float]:
        """Set recall over every ground-truth keyframe, subset recall, mAP, identity@k of the
        query's character and edit@k (the scoring and the result around them are WorldEval's)."""
        t, ranked = self.truth, got.ids
        sub = subset_ranking(got.at_cols, t["subsets"], t["ref"])
        ids_ = identity_at_k(ranked, t["identities"], t["character"], (1, 5, 10))
        ids_.pop("identity@n")
        return {**set_recall_at_k(ranked, t["gt"], (1, 5, 10, 50)), **subset_recall(sub, t["target"]),
                **map_at_k(ranked, t["gt"], (5, 10, 25, 50)), **ids_,
                **set_recall_at_k(ranked, t["edit_ok"], (1, 5, 10), name="edit")}

    # -- breakdowns ------------------------------------------------------------------------------
    def per_query(self, ranked: np.ndarray) -> dict[str, np.ndarray]:
        """Each query's 0/1 outcome for R@1, R@10, identity@1 and edit@1 (paired bootstraps)."""
        t = self.truth

        def hit(sets, k: int) -> np.ndarray:
            return np.array([any(int(x) in s for x in r[:k]) for r, s in zip(ranked, sets)], float)

        return {"R@1": hit(t["gt"], 1), "R@10": hit(t["gt"], 10),
                "identity@1": np.array([c in t["identities"][r[0]] for c, r in zip(t["character"], ranked)], float),
                "edit@1": hit(t["edit_ok"], 1)}

    def breakdown(self, ranked: np.ndarray) -> dict[str, float]:
        """R@10 per query type and for queries with / without held-out combinations."""
        gt = self.truth["gt"]
        groups: dict[str, list[bool]] = {}
        for r, s, q in zip(ranked, gt, self.films.queries):
            h = any(int(x) in s for x in r[:10])
            groups.setdefault(f"R@10[{q.edit_type}]", []).append(h)
            groups.setdefault("R@10[novel]" if q.novel else "R@10[seen]", []).append(h)
        return {k: round(float(np.mean(v)), 4) for k, v in sorted(groups.items())}

    def step_targets(self, rows: list[int]) -> list[set[int]]:
        """The progression ranks the best-ranked ground-truth keyframe after each step."""
        return [self.truth["gt"][i] for i in rows]


@register_benchmark("films", "the generated film world: MovieNet-shaped queries, ground-truth sets", generated=True)
def load(root: str | Path | None = None, split: str = "test", n_queries: int | None = None,
         image_size: int = 64, progression: bool = False, n_films: int | None = None) -> FilmBench:
    """The film world's `split` ('test': 104 films, 1000 queries; 'val': 24 films, 500)."""
    if root is not None:
        raise BenchmarkError("the film benchmark is generated: it takes no --root")
    if split not in SPLIT_FILMS:
        raise BenchmarkError(f"the films have splits {', '.join(SPLIT_FILMS)} (train is a stream), not {split!r}")
    n = n_queries or SPLIT_QUERIES[split]
    if n < 1 or (n_films is not None and n_films < 1):
        raise BenchmarkError(f"--n-queries and --n-films must be >= 1, got {n}, {n_films}")
    return FilmBench(build_film_benchmark(split, n, n_films), image_size, progression)
