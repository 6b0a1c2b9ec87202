"""L-CIRR: CIRR images with long, multi-sentence edit texts (this project's format; the files and
their checks are `cir_core.formats.lcirr`'s): a CIRR root in either layout plus
lcirr/{val,test1}.jsonl, one {"pairid", "reference", "target", "text"} per line.

Metrics are CIRR's R@1/5/10/50 (split gallery, reference removed); Rs@1/2/3 when the pairs are
CIRR's own (every `pairid` is in CIRR's `captions/cap.rc2.{split}.json` with the same reference:
its `img_set` is the subset). The per-sentence progression is measured over the multi-sentence
queries under two protocols, each labelled: `prefix` (every method given only sentences 1..k,
PACE's q₀ built from the prefix too: comparable across methods) and `states` (a method's own step
states on the full text: PACE's accumulator, whose q₀ already sees every sentence); k = 1..MAX_STEPS.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cir_core.formats import cirr as cirr_format
from cir_core.formats import lcirr as lcirr_format
from cir_core.gallery import Gallery
from cir_core.metrics import prefix_recall, progression_summary, recall_at_k, subset_ranking, subset_recall
from cir_core.search.searcher import StoreArray
from cir_core.text import split_sentences

from .cirr import split_gallery
from .common import (
    TOP,
    BenchmarkError,
    BenchmarkResult,
    Composed,
    Embedded,
    ScoreOpts,
    compose_queries,
    prefix_ranks,
    rank_queries,
    refs_at,
)
from .registry import register_benchmark

MAX_STEPS = 8


@dataclass
class LCIRRBench:
    split: str
    gallery: Gallery
    pairids: list[str]
    texts: list[str]
    sentences: list[list[str]]
    ref_rows: np.ndarray
    target_rows: np.ndarray
    members: np.ndarray | None = None  # (Q, S) CIRR img_set rows, -1 padded; None: not CIRR's pairs
    subsets_note: str = ""
    name: str = "lcirr"
    labelled: bool = True

    @property
    def protocol(self) -> str:
        return ("CIRR split gallery, reference removed; "
                + ("Rs@K over CIRR's img_set members but the reference" if self.members is not None
                   else f"no Rs@K ({self.subsets_note})")
                + "; progression over multi-sentence queries: prefix (sentences 1..k only) and "
                  "states (a method's own step states on the full text)")

    def galleries(self) -> dict[str, Gallery]:
        return {"gallery": self.gallery}

    def n_queries(self) -> int:
        return len(self.pairids)

    def query_texts(self) -> list[str]:
        """Every query's long text (for the text-context check of `evaluation.evaluate`)."""
        return list(self.texts)

    def progression(self, method, g: np.ndarray | StoreArray, opts: ScoreOpts,
                    norms: np.ndarray | StoreArray | None = None) -> dict[str, dict]:
        """Per protocol: `prefix` for every method, `states` for one with its own step states."""
        out = {"prefix": self._progression(method, g, opts, method.prefix_queries, norms, "R@10 sentences 1-{k}")}
        if method.native_progression:
            out["states"] = self._progression(method, g, opts, method.progression, norms, "R@10 after step {k}")
        return out

    def _progression(self, method, g: np.ndarray | StoreArray, opts: ScoreOpts, steps,
                     norms: np.ndarray | StoreArray | None, label: str) -> dict[str, float]:
        rows = [i for i, s in enumerate(self.sentences) if len(s) > 1]
        if not rows:
            return {}
        width = min(MAX_STEPS, max(len(self.sentences[i]) for i in rows))
        one = lambda j: refs_at(g, norms, slice(self.ref_rows[rows[j]], self.ref_rows[rows[j]] + 1))  # noqa: E731
        ranks = prefix_ranks(lambda j: np.stack(steps(one(j), self.sentences[rows[j]])),
                             method, g, self.ref_rows[rows], self.target_rows[rows], opts, width, norms)
        n = np.minimum([len(self.sentences[i]) for i in rows], width)
        return {**progression_summary(ranks, n),
                **{label.format(k=k + 1): round(v, 4) for k, v in enumerate(prefix_recall(ranks, 10))}}

    def compose(self, method, data: Embedded) -> Composed:
        return compose_queries(method, data.refs("gallery", self.ref_rows), [[t] for t in self.texts])

    def score(self, method, c: Composed, data: Embedded, opts: ScoreOpts) -> BenchmarkResult:
        g, gn = data.emb["gallery"], data.norms.get("gallery")
        got = rank_queries(method, c.q, c.q_empty, g[self.ref_rows], g, opts, self.ref_rows, TOP, self.members)
        ks = [k for k in (1, 5, 10, 50) if k <= got.ids.shape[1]]
        metrics = recall_at_k(got.ids, self.target_rows, ks)
        if self.members is not None:
            assert got.at_cols is not None  # the members' scores, asked for by passing them
            metrics.update(subset_recall(subset_ranking(got.at_cols, self.members, self.ref_rows), self.target_rows))
        ids = self.gallery.ids
        share = float(np.mean([len(s) > 1 for s in self.sentences]))
        return BenchmarkResult(metrics, extra={"progression": self.progression(method, g, opts, gn),
                                               "multi_sentence_share": round(share, 4)},
                               top={p: [ids[j] for j in r] for p, r in zip(self.pairids, got.ids)})


def cirr_subsets(layout: cirr_format.Layout, split: str, gallery: Gallery, pairids: list[str],
                 ref_rows: list[int]) -> tuple[np.ndarray | None, str]:
    """(members, "") when every pair is CIRR's own (same pairid and reference in CIRR's captions of
    the split), else (None, why not)."""
    path = cirr_format.captions_file(layout.ann, split)
    if not path.is_file():
        return None, f"{path.name} absent"
    try:  # an optional file here: a bad one costs the subsets, not the evaluation
        caps, _ = cirr_format.read_captions(layout.ann, split, set(gallery.ids))
    except BenchmarkError as exc:
        return None, str(exc)
    by_id = {str(c["pairid"]): c for c in caps}
    row = gallery.index_of
    foreign = [p for p, r in zip(pairids, ref_rows) if p not in by_id or row(by_id[p]["reference"]) != r]
    if foreign:
        return None, f"{len(foreign)} of {len(pairids)} pairids are not CIRR's with the same reference, e.g. {foreign[0]}"
    width = max(len(by_id[p]["img_set"]["members"]) for p in pairids)
    members = np.full((len(pairids), width), -1, np.int64)
    for i, p in enumerate(pairids):
        m = by_id[p]["img_set"]["members"]
        members[i, : len(m)] = [row(x) for x in m]
    return members, ""


@register_benchmark("lcirr", "L-CIRR: long multi-sentence edits, R@K and the per-sentence progression")
def load(root: str | Path, split: str = "val") -> LCIRRBench:
    """L-CIRR `split` from ROOT: the CIRR image split plus lcirr/{split}.jsonl, validated."""
    files = lcirr_format.read(Path(root).expanduser(), split)
    s, qs = files.split, files.queries
    gallery = split_gallery(files.images, f"cirr-{s}")
    row = gallery.index_of
    pairids, refs = [q.pairid for q in qs], [row(q.reference) for q in qs]
    members, why = cirr_subsets(files.layout, s, gallery, pairids, refs)
    return LCIRRBench(s, gallery, pairids, [q.text for q in qs], [split_sentences(q.text) for q in qs],
                      np.array(refs, np.int64), np.array([row(q.target) for q in qs], np.int64), members, why)
