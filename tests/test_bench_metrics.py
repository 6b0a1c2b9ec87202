"""cir_core.benchmarks.metrics on hand-made score matrices."""
import numpy as np
import pytest

from cir_core.benchmarks.metrics import (candidate_recall, identity_at_k, map_at_k, recall_at_k,
                                         subset_ranking, subset_recall, topk_ranking)
from cir_core.errors import InputError


def test_topk_ranking_excludes_and_breaks_ties_by_row():
    s = np.array([[0.1, 0.9, 0.5, 0.5, 0.3],
                  [0.2, 0.2, 0.2, 0.2, 0.8]])
    assert topk_ranking(s, 3).tolist() == [[1, 2, 3], [4, 0, 1]]
    assert topk_ranking(s, 3, np.array([1, -1])).tolist() == [[2, 3, 4], [4, 0, 1]]
    assert topk_ranking(s, 50, np.array([0, 4])).shape == (2, 4)  # clipped to the rankable rows


def test_topk_ranking_equals_a_full_stable_sort_with_ties_at_the_cut():
    rng = np.random.default_rng(0)
    for _ in range(50):
        s = rng.integers(0, 3, size=(4, 40)).astype(float)
        ex = rng.integers(-1, 40, size=4)
        k = int(rng.integers(1, 39))
        full = s.copy()
        rows = np.nonzero(ex >= 0)[0]
        full[rows, ex[rows]] = -np.inf
        assert (topk_ranking(s, k, ex) == np.argsort(-full, 1, kind="stable")[:, :k]).all()


def test_subset_recall_hand_made():
    members = np.array([[0, 1, 2, 3], [4, 5, 6, -1]])
    scores = np.array([[0.9, 0.1, 0.5, 0.7], [0.3, 0.2, 0.1, -np.inf]])
    ranked = subset_ranking(scores, members, np.array([0, 4]))  # references 0 and 4 drop out
    assert ranked.tolist() == [[3, 2, 1, -1], [5, 6, -1, -1]]
    # targets 1 (3rd) and 5 (1st)
    assert subset_recall(ranked, np.array([1, 5])) == {"Rs@1": 0.5, "Rs@2": 0.5, "Rs@3": 1.0}


def test_recall_and_map_hand_made():
    ranked = np.array([[4, 2, 7, 1, 0], [3, 9, 8, 6, 5]])
    assert recall_at_k(ranked, np.array([7, 5]), (1, 3, 5)) == {"R@1": 0.0, "R@3": 0.5, "R@5": 1.0}
    # q0 GT {2, 0}: hits at 2 and 5 -> (1/2 + 2/5) / 2 = 0.45 at K=5; at K=2: (1/2) / 2 = 0.25
    # q1 GT {3}: hit at 1 -> 1
    m = map_at_k(ranked, [{2, 0}, {3}], (2, 5))
    assert m["mAP@2"] == pytest.approx((0.25 + 1) / 2) and m["mAP@5"] == pytest.approx((0.45 + 1) / 2)


def test_candidate_and_identity_hand_made():
    assert candidate_recall(np.array([[0.1, 0.2], [0.3, 0.2]]), (1, 2)) == {"R@1": 0.5, "R@2": 1.0}
    ids = [frozenset("A"), frozenset("AB"), frozenset(), frozenset("C")]
    ranked = np.array([[2, 1, 0], [3, 0, 1], [0, 1, 2]])
    out = identity_at_k(ranked, ids, ["A", "B", None], (1, 2, 3))
    # q0: A first at rank 1; q1: B at rank 2; q2 unscored
    assert out == {"identity@n": 2.0, "identity@1": 0.0, "identity@2": 0.5, "identity@3": 1.0}
    assert identity_at_k(ranked, ids, [None, "", None]) == {"identity@n": 0.0}


def test_bad_shapes_are_input_errors():
    with pytest.raises(InputError):
        topk_ranking(np.zeros((2, 3)), 2, np.array([0]))
    with pytest.raises(InputError):
        topk_ranking(np.array([[np.nan, 1.0]]), 1)
    with pytest.raises(InputError):
        subset_ranking(np.zeros((1, 3)), np.zeros((1, 2), int))
