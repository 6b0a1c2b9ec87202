"""cir_core.search.topk: the one top-k, exact, ties to the lower row."""
import numpy as np
import pytest

from cir_core.errors import InputError
from cir_core.search import topk


def test_topk_excludes_and_breaks_ties_by_row():
    s = np.array([[0.1, 0.9, 0.5, 0.5, 0.3],
                  [0.2, 0.2, 0.2, 0.2, 0.8]])
    assert topk(s, 3)[1].tolist() == [[1, 2, 3], [4, 0, 1]]
    assert topk(s, 3, np.array([1, -1]))[1].tolist() == [[2, 3, 4], [4, 0, 1]]
    assert topk(s, 50, np.array([0, 4]))[1].shape == (2, 4)  # clipped to the rankable rows


def test_topk_equals_a_full_stable_sort_with_ties_at_the_cut():
    rng = np.random.default_rng(0)
    for _ in range(50):
        s = rng.integers(0, 3, size=(4, 40)).astype(float)
        ex = rng.integers(-1, 40, size=4)
        k = int(rng.integers(1, 39))
        full = s.copy()
        rows = np.nonzero(ex >= 0)[0]
        full[rows, ex[rows]] = -np.inf
        assert (topk(s, k, ex)[1] == np.argsort(-full, 1, kind="stable")[:, :k]).all()


def test_topk_returns_the_scores_of_the_rows_it_picks():
    s = np.array([[0.1, 0.9, 0.5], [0.7, 0.2, 0.4]], np.float32)
    scores, rows = topk(s, 2)
    assert rows.tolist() == [[1, 2], [0, 2]] and scores.dtype == np.float32
    np.testing.assert_array_equal(scores, np.take_along_axis(s, rows, 1))
    assert topk(s, 2, np.array([1, -1]))[1].tolist() == [[2, 0], [0, 2]]


def test_an_excluded_row_never_joins_the_ties_at_minus_inf():
    s = np.array([[0.0, 1.0, -np.inf, -np.inf]])
    assert topk(s, 3, np.array([0]))[1].tolist() == [[1, 2, 3]]
    s = np.full((2, 700), -np.inf)  # the partition path's exact selection too
    s[:, :5] = np.arange(5)
    assert topk(s, 8, np.array([600, 2]))[1].tolist() == [[4, 3, 2, 1, 0, 5, 6, 7], [4, 3, 1, 0, 5, 6, 7, 8]]


def test_topk_bad_input_is_an_input_error():
    with pytest.raises(InputError):
        topk(np.zeros((2, 3)), 2, np.array([0]))
    with pytest.raises(InputError):
        topk(np.array([[np.nan, 1.0]]), 1)
    with pytest.raises(InputError):
        topk(np.zeros((1, 1)), 1, np.array([0]))  # nothing left once the reference is excluded


def test_topk_fast_path_equals_a_full_stable_sort_on_floats_and_ties():
    """The partition path (k + 2 < N) and the short single row sorted whole (N <= 512) against
    the definition, with exclusions and planted ties."""
    rng = np.random.default_rng(1)
    for _ in range(200):
        q, n = int(rng.integers(1, 5)), int(rng.integers(5, 1200))
        s = rng.standard_normal((q, n)).astype(np.float32)
        if rng.random() < 0.5:  # plant ties around the cut
            s[:, rng.integers(0, n, size=n // 3)] = s[0, 0]
        if rng.random() < 0.3:  # and -inf scores, which an excluded row must not join
            s[:, rng.integers(0, n, size=n // 2)] = -np.inf
        ex = rng.integers(-1, n, size=q) if rng.random() < 0.6 else np.full(q, -1)  # or none
        k = int(rng.integers(1, n))
        k_ = min(k, n - int((ex >= 0).any()))
        before = s.copy()
        # the definition: a stable sort by descending score of the rows that are not excluded
        order = np.argsort(-s.astype(np.float64), 1, kind="stable")
        want = np.array([[j for j in o if j != e][:k_] for o, e in zip(order, ex)])
        got_s, got_i = topk(s, k, ex)
        np.testing.assert_array_equal(got_i, want)
        np.testing.assert_array_equal(got_s, np.take_along_axis(s, want, 1))
        np.testing.assert_array_equal(s, before)  # the input is never modified
