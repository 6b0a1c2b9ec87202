import numpy as np
import pytest

from cir_core.errors import InputError
from cir_core.metrics import edit_at_1, identity_at_1, map_at_k, recall_at_k, subset_recall_at_k


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


def test_subset_recall_hand_computed_reference_dropped_by_ranking():
    # Full rankings over a 8-item gallery with the reference already excluded by `rank`.
    ranked = np.array(
        [
            [5, 0, 6, 1, 2, 3, 7],  # ref 4 excluded
            [3, 6, 7, 1, 0, 5, 4],  # ref 2 excluded
            [0, 1, 2, 3, 4, 5, 6],  # ref 7 excluded
        ]
    )
    subsets = np.array([[4, 1, 2, 3], [2, 4, 5, 6], [7, 0, 1, 5]])  # CIRR-style: holds the ref
    target = np.array([2, 5, 0])
    # q0: members in ranking order 1, 2, 3 -> target 2 is 2nd
    # q1: members 6, 5, 4 -> target 5 is 2nd
    # q2: members 0, 1, 5 -> target 0 is 1st
    # Rs@1 = 1/3, Rs@2 = 3/3, Rs@3 = 3/3
    got = subset_recall_at_k(ranked, subsets, target, ks=(1, 2, 3))
    assert got == pytest.approx({"Rs@1": 1 / 3, "Rs@2": 1.0, "Rs@3": 1.0})


def test_subset_recall_with_explicit_exclude_and_truncated_ranking():
    ranked = np.array([[4, 3, 1, 2, 0]])  # full ranking that still holds the ref 4
    subsets = np.array([[4, 2, 3]])
    # ref 4 dropped: members 3, 2 -> target 2 is 2nd: Rs@1 = 0, Rs@2 = 1
    assert subset_recall_at_k(ranked, subsets, [2], ks=(1, 2), exclude=[4]) == {"Rs@1": 0.0, "Rs@2": 1.0}
    # Without exclude the ref counts as a member: 4, 3, 2 -> target 3rd
    assert subset_recall_at_k(ranked, subsets, [2], ks=(3,)) == {"Rs@3": 1.0}
    assert subset_recall_at_k(ranked, subsets, [2], ks=(2,)) == {"Rs@2": 0.0}
    # A truncated ranking missing two members is refused rather than overstating the rank.
    with pytest.raises(InputError, match="full ranking"):
        subset_recall_at_k(np.array([[0, 1]]), subsets, [2], ks=(1,))


def test_subset_recall_target_absent_is_a_miss():
    # Target 9 not in ranking (and not in subset): miss at every k.
    assert subset_recall_at_k(np.array([[1, 2, 3]]), np.array([[1, 2, 9]]), [9], ks=(1, 3)) == {
        "Rs@1": 0.0,
        "Rs@3": 0.0,
    }


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
