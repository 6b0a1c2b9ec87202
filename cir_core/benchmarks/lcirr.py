"""L-CIRR: CIRR images with long, multi-sentence edit texts (this project's manifest format).

Layout under ROOT (a CIRR root in either of its layouts: its image_splits and images, see
`cirr.py`) plus::

    lcirr/{val,test1}.jsonl    one {"pairid", "reference", "target", "text"} per line
                               (ROOT/lcirr/, or beside captions/ in the SEARLE layout: ROOT/cirr/lcirr/)

`reference` and `target` are CIRR image names of that split. Metrics are CIRR's R@1/5/10/50 (split
gallery, reference removed), plus the per-sentence progression: R@10 when only sentences 1..k
are given (k = 1..MAX_STEPS; a text with fewer sentences uses all of them), computed from the
method's own progression (PACE's step states; other methods recompose each prefix).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cir_core.gallery import Gallery
from cir_core.text import split_sentences
from cir_core.metrics import prefix_recall, recall_at_k

from .cirr import SPLITS, find_layout, load_split_gallery
from .common import TOP, BenchmarkError, BenchmarkResult, ScoreOpts, compose, need, prefix_ranks, rank_queries, read_jsonl

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
    name: str = "lcirr"
    protocol: str = "CIRR split gallery, reference removed; progression = the method's own per-sentence queries"
    labelled: bool = True

    def galleries(self) -> dict[str, Gallery]:
        return {"gallery": self.gallery}

    def n_queries(self) -> int:
        return len(self.pairids)

    def progression(self, method, g: np.ndarray, opts: ScoreOpts) -> dict[str, float]:
        steps = min(MAX_STEPS, max(len(s) for s in self.sentences))
        ranks = prefix_ranks(lambda i: np.stack(method.progression(g[self.ref_rows[i]], self.sentences[i])),
                             method, g, self.ref_rows, self.target_rows, opts, steps)
        out = {f"R@10 sentences 1-{k + 1}": v for k, v in enumerate(prefix_recall(ranks, 10))}
        out["share multi-sentence"] = float(np.mean([len(s) > 1 for s in self.sentences]))
        return out

    def evaluate_method(self, method, emb: dict[str, np.ndarray], opts: ScoreOpts) -> BenchmarkResult:
        g = emb["gallery"]
        refs = g[self.ref_rows]
        q, q0 = compose(method, refs, [[t] for t in self.texts])
        ranked = rank_queries(method, q, q0, refs, g, opts, self.ref_rows, TOP).ids
        ks = [k for k in (1, 5, 10, 50) if k <= ranked.shape[1]]
        ids = self.gallery.ids
        return BenchmarkResult(recall_at_k(ranked, self.target_rows, ks),
                               extra={"progression": self.progression(method, g, opts)},
                               top={p: [ids[j] for j in r] for p, r in zip(self.pairids, ranked)})


def load(root: str | Path, split: str = "val") -> LCIRRBench:
    """L-CIRR `split` from ROOT: the CIRR image split plus lcirr/{split}.jsonl, validated."""
    root = Path(root).expanduser()
    if split not in SPLITS:
        raise BenchmarkError(f"L-CIRR has splits val and test (test1), not {split!r}")
    s = SPLITS[split]
    layout = find_layout(root, s)
    gallery = load_split_gallery(layout, s, f"cirr-{s}")
    path = next((p for p in (root / "lcirr" / f"{s}.jsonl", layout.ann / "lcirr" / f"{s}.jsonl") if p.is_file()),
                root / "lcirr" / f"{s}.jsonl")
    rows = read_jsonl(path)
    if not rows:
        raise BenchmarkError(f"{path}: no queries")
    known = {n: i for i, n in enumerate(gallery.ids)}
    pairids, texts, sents, refs, targets = [], [], [], [], []
    for n, r in enumerate(rows, 1):
        where = f"{path} query {n}"
        pid = need(r, "pairid", (int, str), where)
        text = need(r, "text", str, where).strip()
        if not split_sentences(text):
            raise BenchmarkError(f"{where}: 'text' has no sentence")
        for key, out in (("reference", refs), ("target", targets)):
            name = need(r, key, str, where)
            if name not in known:
                raise BenchmarkError(f"{where}: {key} {name!r} is not in image_splits/split.rc2.{s}.json")
            out.append(known[name])
        pairids.append(str(pid))
        texts.append(text)
        sents.append(split_sentences(text))
    if len(set(pairids)) != len(pairids):
        raise BenchmarkError(f"{path}: duplicate pairid")
    return LCIRRBench(s, gallery, pairids, texts, sents, np.array(refs, np.int64), np.array(targets, np.int64))
