import numpy as np
import pytest

from cir_core.errors import InputError
from cir_core.metrics import (
    candidate_recall,
    edit_at_1,
    identity_at_1,
    identity_at_k,
    map_at_k,
    prefix_recall,
    recall_at_k,
    subset_ranking,
    subset_recall,
    target_ranks,
)


def test_recall_at_k_hand_computed():
    ranked = np.array(
        [
            [7, 3, 9, 1, 4],  # target 7 at rank 1
            [2, 8, 5, 6, 0],  # target 5 at rank 3
            [1, 2, 3, 4, 6],  # target 9 absent from top-5
            [4, 4, 4, 4, 4],  # a constant row (ties are never consulted); target 4 at rank 1
        ]
    )
    target = np.array([7, 5, 9, 4])
    # R@1: queries 0 and 3 -> 2/4; R@3: + query 1 -> 3/4; R@5: query 2 never hits -> 3/4
    assert recall_at_k(ranked, target, ks=(1, 3, 5)) == {"R@1": 0.5, "R@3": 0.75, "R@5": 0.75}


def test_recall_rejects_k_beyond_ranking_and_bad_shapes():
    with pytest.raises(InputError, match="1 <= k <= 2"):
        recall_at_k(np.zeros((1, 2), int), np.array([0]), ks=(1, 5))
    with pytest.raises(InputError):
        recall_at_k(np.zeros((2, 2), int), np.array([0]), ks=(1,))
    with pytest.raises(InputError):
        recall_at_k(np.zeros((2, 2)), np.array([0, 0]), ks=(1,))


def test_map_at_k_hand_computed():
    ranked = np.array(
        [
            [1, 9, 2, 8, 3],  # GT {1, 2, 3}
            [9, 8, 7, 6, 5],  # GT {0}: nothing relevant retrieved
            [0, 1, 2, 3, 4],  # GT {0..9}: more GT items than K
        ]
    )
    gt = [{1, 2, 3}, np.array([0]), set(range(10))]
    # q0 rel = 1 0 1 0 1; P(k) at hits: P1 = 1, P3 = 2/3, P5 = 3/5
    #   AP@1 = 1 / min(3, 1) = 1;  AP@3 = (1 + 2/3) / 3 = 5/9;  AP@5 = (1 + 2/3 + 3/5) / 3 = 34/45
    # q1 AP = 0 everywhere
    # q2 all relevant, P = 1 at each k; AP@k = k / min(10, k) = 1
    got = map_at_k(ranked, gt, ks=(1, 3, 5))
    assert got == pytest.approx({"mAP@1": 2 / 3, "mAP@3": (5 / 9 + 1) / 3, "mAP@5": (34 / 45 + 1) / 3})


def test_map_rejects_empty_gt_and_wrong_count():
    with pytest.raises(InputError, match="empty"):
        map_at_k(np.array([[1, 2]]), [set()], ks=(1,))
    with pytest.raises(InputError):
        map_at_k(np.array([[1, 2]]), [{1}, {2}], ks=(1,))


def test_identity_at_1():
    # matches at queries 0 and 2 -> 2/4
    assert identity_at_1(np.array([3, 1, 2, 0]), np.array([3, 2, 2, 1])) == 0.5
    with pytest.raises(InputError):
        identity_at_1(np.array([1, 2]), np.array([1]))


def test_edit_at_1():
    ranked = np.array([[5, 1], [2, 5], [7, 7]])
    # top-1 ids 5, 2, 7; ok sets: 5 in {5, 6} yes, 2 in {5} no, 7 in {7} yes -> 2/3
    assert edit_at_1(ranked, [{5, 6}, {5}, np.array([7])]) == pytest.approx(2 / 3)


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
        subset_ranking(np.zeros((1, 3)), np.zeros((1, 2), int))


def test_prefix_recall_and_target_ranks_hand_made():
    assert prefix_recall(np.array([[10, 1, 0], [0, 0, 0], [12, 12, 9]]), 10) == [1 / 3, 2 / 3, 1.0]
    # row 2 excluded; ties before the target's column count against it, ties after do not
    s = np.array([[0.5, 0.9, 0.99, 0.5, 0.1], [0.5, 0.9, 0.99, 0.5, 0.1]])
    assert target_ranks(s, np.array([3, 0]), np.array([2, -1])).tolist() == [2, 2]


def test_progression_summary_hand_computed():
    from cir_core.metrics import progression_summary

    # query 0: ranks 12 -> 4 -> 4 (3 steps); query 1: 3 -> 7, then padding repeats 7 (2 steps)
    ranks = np.array([[12, 4, 4], [3, 7, 7]])
    got = progression_summary(ranks, np.array([3, 2]))
    assert got["queries"] == 2 and got["R@10_first_step"] == 0.5 and got["R@10_last_step"] == 1.0
    assert got["rank_improved"] == 0.5 and got["rank_improved_or_held"] == 0.5
    assert got["step_improved_or_held"] == round(2 / 3, 4)  # transitions 12->4, 4->4 held; 3->7 not
    assert got["every_step_improved_or_held"] == 0.5
    assert got["median_rank_first"] == 7.5 and got["median_rank_last"] == 5.5
    with pytest.raises(InputError):
        progression_summary(ranks, np.array([3]))


def test_recall_from_positions_is_the_one_rule():
    from cir_core.metrics import recall_from_ranks, target_position

    ranked = np.array([[5, 3, 9], [1, 2, 4], [7, 8, 6]])
    pos = target_position(ranked, np.array([3, 1, 0]))
    assert pos.tolist() == [1, 0, 3]  # 3 = not ranked
    assert recall_from_ranks(pos, (1, 2)) == {"R@1": 1 / 3, "R@2": 2 / 3} == recall_at_k(ranked, [3, 1, 0], (1, 2))
    with pytest.raises(InputError):
        recall_from_ranks(np.array([]), (1,))
