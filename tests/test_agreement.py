"""Agreement coefficients against hand-computed / published worked examples."""
from __future__ import annotations

import math

import numpy as np
import pytest

from cir_core.errors import InputError
from db.agreement import (
    cohen_kappa,
    encode,
    equal_count_units,
    fleiss_kappa,
    fleiss_kappa_counts,
    krippendorff_alpha_nominal,
)

# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C: 4 observers,
# 12 units, values 1..5, missing marked None. Published nominal alpha = 0.743.
KRIPP = [[1, 1, None, 1], [2, 2, 3, 2], [3, 3, 3, 3], [3, 3, 3, 3], [2, 2, 2, 2], [1, 2, 3, 4],
         [4, 4, 4, 4], [1, 1, 2, 1], [2, 2, 2, 2], [None, 5, 5, 5], [None, None, 1, 1],
         [None, 3, None, None]]

# Wikipedia "Fleiss' kappa" worked example: 10 subjects x 5 categories, 14 raters each.
# Published: P-bar = 0.378, P_e = 0.213, kappa = 0.210.
FLEISS = [[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
          [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]]


def _cohen_table() -> np.ndarray:
    # 50 units, 2 raters, yes/no. Contingency (rows A, cols B):
    #            B yes  B no
    #   A yes     20      5     A yes = 25/50 = 0.5
    #   A no      10     15     B yes = 30/50 = 0.6
    # p_o = (20 + 15) / 50 = 0.7
    # p_e = 0.5 * 0.6 + 0.5 * 0.4 = 0.5
    # kappa = (0.7 - 0.5) / (1 - 0.5) = 0.4
    rows = [("yes", "yes")] * 20 + [("yes", "no")] * 5 + [("no", "yes")] * 10 + [("no", "no")] * 15
    return np.array(rows, dtype=object)


def test_krippendorff_worked_example_with_missing() -> None:
    obj = np.array(KRIPP, dtype=object)
    assert krippendorff_alpha_nominal(obj, missing=None) == pytest.approx(0.743, abs=5e-4)
    # Same data as floats with NaN, and as strings with a string marker: same alpha.
    as_float = np.array([[np.nan if v is None else v for v in r] for r in KRIPP], dtype=float)
    assert krippendorff_alpha_nominal(as_float, missing=None) == pytest.approx(0.743421, abs=1e-6)
    as_str = np.array([["-" if v is None else f"c{v}" for v in r] for r in KRIPP])
    assert krippendorff_alpha_nominal(as_str, missing="-") == pytest.approx(0.743421, abs=1e-6)


def test_fleiss_wikipedia_example() -> None:
    assert fleiss_kappa_counts(np.array(FLEISS)) == pytest.approx(0.210, abs=5e-4)
    # The same data as a label matrix: 14 raters per subject (different people per row is fine).
    rng = np.random.default_rng(0)
    labels = np.array([rng.permutation(np.repeat(np.arange(5), row)) for row in FLEISS])
    assert fleiss_kappa(labels) == pytest.approx(fleiss_kappa_counts(np.array(FLEISS)))


def test_cohen_hand_example_and_missing_rows_dropped() -> None:
    table = _cohen_table()
    assert cohen_kappa(table, missing=None) == pytest.approx(0.4)
    # Units only one rater labelled carry no pair: adding them changes nothing.
    extra = np.array([("yes", None), (None, "no"), (None, None)], dtype=object)
    assert cohen_kappa(np.vstack([table, extra]), missing=None) == pytest.approx(0.4)


def test_two_raters_cross_check_scott_pi_and_alpha() -> None:
    # Pooled marginals of the Cohen table: yes = (25 + 30) / 100 = 0.55, no = 0.45.
    # Scott's pi = Fleiss with 2 raters: p_e = 0.55^2 + 0.45^2 = 0.505,
    #   pi = (0.7 - 0.505) / (1 - 0.505) = 0.195 / 0.495 = 0.393939...
    # Krippendorff, n = 100 values: alpha = 1 - (n-1)/n * (1 - p_o)/(1 - p_e)
    #   = 1 - 0.99 * 0.3 / 0.495 = 1 - 0.6 = 0.4
    table = _cohen_table()
    assert fleiss_kappa(table, missing=None) == pytest.approx(0.195 / 0.495)
    assert krippendorff_alpha_nominal(table, missing=None) == pytest.approx(0.4)


def test_perfect_agreement_is_one() -> None:
    labels = np.array([[0, 0, 0], [1, 1, 1], [2, 2, -1], [1, 1, 1]])
    assert krippendorff_alpha_nominal(labels) == pytest.approx(1.0)
    assert cohen_kappa(labels[:, :2]) == pytest.approx(1.0)
    assert fleiss_kappa(labels[[0, 1, 3]]) == pytest.approx(1.0)


def test_one_category_only_is_nan_not_a_crash() -> None:
    same = np.array([["yes", "yes"], ["yes", "yes"], ["yes", "-"]])
    assert math.isnan(cohen_kappa(same, missing="-"))
    assert math.isnan(fleiss_kappa(same[:2], missing="-"))
    assert math.isnan(krippendorff_alpha_nominal(same, missing="-"))


def test_no_pairable_unit_is_nan() -> None:
    lonely = np.array([[1, -1], [-1, 2], [-1, -1]])
    assert math.isnan(cohen_kappa(lonely))
    assert math.isnan(krippendorff_alpha_nominal(lonely))
    assert math.isnan(fleiss_kappa_counts(np.zeros((0, 3))))


def test_systematic_disagreement_is_negative() -> None:
    # Raters always disagree on a balanced yes/no: p_o = 0, p_e = 0.5 -> kappa = -1.
    labels = np.array([[0, 1], [1, 0]] * 5)
    assert cohen_kappa(labels) == pytest.approx(-1.0)
    assert krippendorff_alpha_nominal(labels) < 0


def test_fleiss_rejects_unequal_rater_counts_and_selector_picks_modal() -> None:
    ragged = np.array([[0, 0, -1], [1, 1, 1], [0, 1, 1], [1, -1, -1]])
    with pytest.raises(InputError, match="same number"):
        fleiss_kappa(ragged)
    mask, m = equal_count_units(ragged)
    assert m == 3 and mask.tolist() == [False, True, True, False]
    # Ties between counts go to the larger m; units with 1 rating never count.
    mask2, m2 = equal_count_units(ragged[[0, 1, 3]])
    assert m2 == 3 and mask2.tolist() == [False, True, False]
    assert equal_count_units(np.array([[1, -1]]))[1] == 0


def test_bad_shapes_raise() -> None:
    with pytest.raises(InputError, match="2-D"):
        krippendorff_alpha_nominal(np.array([1, 2, 3]))
    with pytest.raises(InputError, match="exactly 2 raters"):
        cohen_kappa(np.zeros((4, 3), dtype=int))


def test_encode_sorted_codes() -> None:
    codes, n = encode(np.array([["no", "yes"], ["cant_tell", None]], dtype=object), missing=None)
    assert n == 3 and codes.tolist() == [[1, 2], [0, -1]]


def test_equal_labels_of_different_types_are_one_category() -> None:
    """Object arrays: 1 and 1.0 (and numpy's 1) are equal, so one category; '1' is another."""
    mixed = np.array([[1, 1.0], [2, np.int64(2)], [1, 2.0], [2, 2]], dtype=object)
    same = np.array([[1, 1], [2, 2], [1, 2], [2, 2]])
    codes, n = encode(mixed, missing=None)
    assert n == 2 and (codes == encode(same, missing=None)[0]).all()
    assert cohen_kappa(mixed, missing=None) == pytest.approx(cohen_kappa(same))
    assert krippendorff_alpha_nominal(mixed, missing=None) == pytest.approx(krippendorff_alpha_nominal(same))
    assert encode(np.array([[1, "1"]], dtype=object), missing=None)[1] == 2
    assert encode(np.array([["a", 1, None]], dtype=object), missing=None)[1] == 2  # unsortable: ok
    lists = np.empty((1, 2), dtype=object)
    lists[0, 0], lists[0, 1] = [1], [2]
    with pytest.raises(InputError, match="hashable"):
        encode(lists, missing=None)
