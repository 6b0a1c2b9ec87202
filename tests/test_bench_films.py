"""`--benchmark films`: metrics by hand, brute force from the dumped rankings, the progression."""
from __future__ import annotations

import json

import numpy as np
import pytest

from cir_core.benchmarks import BenchmarkError, load_benchmark
from cir_core.errors import InputError
from cir_core.eval.loop import evaluate
from cir_core.metrics import set_ranks, set_recall_at_k


@pytest.fixture(scope="module")
def films():
    return load_benchmark("films", split="val", n_queries=24, n_films=2, progression=True)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("films-cache")  # one embedding of the ~2k keyframes


def test_set_recall_by_hand():
    ranked = np.array([[5, 1, 2], [7, 8, 9], [3, 4, 0]])
    got = set_recall_at_k(ranked, [{1, 2}, {0}, {3}], (1, 2, 3))
    assert got == {"R@1": pytest.approx(1 / 3), "R@2": pytest.approx(2 / 3), "R@3": pytest.approx(2 / 3)}
    assert set_recall_at_k(ranked, [{5}, {9}, {4}], (1,), name="edit") == {"edit@1": pytest.approx(1 / 3)}
    with pytest.raises(InputError, match="one per query"):
        set_recall_at_k(ranked, [{1}], (1,))


def test_set_ranks_by_hand():
    scores = np.array([[0.1, 0.9, 0.5, 0.5], [0.3, 0.2, 0.1, 0.0]])
    # row 0: best of {2, 3} is 2 (tie -> lower column); 0.9 beats it: rank 1
    # row 1: best of {1, 3} is 1; column 0 excluded, so it is first
    assert set_ranks(scores, [{2, 3}, {1, 3}], np.array([-1, 0])).tolist() == [1, 0]
    with pytest.raises(InputError, match="non-empty"):
        set_ranks(scores, [{1}, set()])


def test_errors_name_the_option():
    with pytest.raises(BenchmarkError, match="no --root"):
        load_benchmark("films", "/tmp")
    with pytest.raises(BenchmarkError, match="splits"):
        load_benchmark("films", split="train")
    with pytest.raises(BenchmarkError, match=">= 1"):
        load_benchmark("films", split="val", n_films=0)


def test_metrics_match_bruteforce(tiny_backbone, films, cache, tmp_path):
    dump = tmp_path / "rk.jsonl"
    with open(dump, "w") as f:
        rep, _ = evaluate(films, tiny_backbone, ["sum", "image-only"], scorings=("cosine",),
                          cache=cache, dump=f, progress=False)
    rows = [json.loads(x) for x in dump.read_text().splitlines() if '"sum"' in x]
    assert len(rows) == films.n_queries()
    m = rep["results"]["sum"]["cosine"]
    for k in (1, 10, 50):
        assert m[f"R@{k}"] == pytest.approx(np.mean([bool(set(r["top"][:k]) & set(r["gt_ids"])) for r in rows]), abs=1e-4)
    items = {it.item_id: it for it in films.films.items}
    chars = {q.query_id: q.character for q in films.films.queries}
    for k in (1, 5):
        want = np.mean([any(chars[r["query_id"]] in items[x].keyframe.state.credited() for x in r["top"][:k])
                        for r in rows])
        assert m[f"identity@{k}"] == pytest.approx(want, abs=1e-4)
    # a keyframe's shot-mates show its character: image-only always finds it first
    assert rep["results"]["image-only"]["cosine"]["identity@1"] == 1.0
    assert all(r["reference_id"] not in r["top"] for r in rows)
    assert set(m) >= {"R@1", "R@10", "Rs@1", "mAP@10", "identity@1", "edit@1", "edit@10"}


def test_progression_ranks_the_best_ground_truth(tiny_backbone, films, cache):
    from cir_core.methods import create_method

    rep, raw = evaluate(films, tiny_backbone, ["sum"], scorings=("cosine",), cache=cache, progress=False)
    ranks, n = raw[("sum", "cosine")].aux["progression_ranks"]["prefix"]
    multi = [q for q in films.films.queries if len(q.sentences) > 1]
    assert ranks.shape[0] == len(multi) == len(n) and ranks.shape[1] == n.max()
    # the last step of a query ranks its full text: the rank of its best ground truth
    from cir_core.eval.loop import embed

    g = embed(films.gallery(64), tiny_backbone, cache, progress=False)
    m = create_method("sum", tiny_backbone)
    t = films.truth
    i = next(k for k, q in enumerate(films.films.queries) if len(q.sentences) > 1)
    q = m.compose(g[t["ref"][i]][None], [films.films.queries[i].text])
    sc = q @ g.T
    assert ranks[0, n[0] - 1] == set_ranks(sc, [t["gt"][i]], np.array([t["ref"][i]]))[0]
