"""cir_core.search.prefilter: the int8 filter's bound holds, and the search through it is exact."""
import numpy as np
import pytest

from cir_core.errors import InputError
from cir_core.search import Int8Filter, Queries, ScoreOpts, Searcher, gallery_norms, prefilter, rank, use_filter

COS = ScoreOpts("cosine")


def unit(rng, n, d):
    x = rng.standard_normal((n, d), dtype=np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def with_norms(g):
    return g, gallery_norms(g)


@pytest.fixture
def force_filter(monkeypatch):
    """The rule would send these small galleries to the float path; the tests want the filter."""
    monkeypatch.setattr(prefilter, "FILTER_RULE", ((0, 1 << 30),))


def awkward_gallery(rng, n=3000, d=48):
    """Rows of every scale, a zero row, one-hot and spiky rows, exact duplicates."""
    g = rng.standard_normal((n, d)).astype(np.float32) * rng.uniform(0.01, 50, (n, 1)).astype(np.float32)
    g[5] = 0
    g[6] = 0
    g[6, 3] = 7.0  # one-hot
    g[7] = 0.001
    g[7, 0] = 1000.0  # one huge component
    g[[100, 200, 2999]] = g[50]  # duplicates of row 50, one of them the last row
    return g


def test_the_filter_builds_on_this_torch():
    # the pinned torch ships fbgemm's int8 kernel; if this fails the search silently lost its fast path
    assert Int8Filter.build(*with_norms(unit(np.random.default_rng(0), 500, 32))) is not None


def test_the_bound_holds_for_awkward_rows_and_queries():
    rng = np.random.default_rng(1)
    g = awkward_gallery(rng)
    f = Int8Filter.build(g, gallery_norms(g))
    gu = g.astype(np.float64) / np.maximum(np.linalg.norm(g.astype(np.float64), axis=1, keepdims=True), 1e-12)
    qs = [rng.standard_normal((5, 48)), np.eye(48)[:4], np.ones((2, 48)), g[[50, 7, 6]],
          np.r_[rng.standard_normal((1, 48)) * 1e-3, 100 * np.eye(48)[:1]]]
    for q in qs:
        q = (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)
        s, eps = f.bounds(q)
        assert s.shape == eps.shape == (len(q), len(g))
        err = np.abs(q.astype(np.float64) @ gu.T - s)
        assert (err <= eps).all(), float((err / eps).max())


def test_search_through_the_filter_equals_the_float_path(force_filter):
    rng = np.random.default_rng(2)
    g = awkward_gallery(rng)
    gn = gallery_norms(g)
    f = Int8Filter.build(g, gn)
    q = rng.standard_normal((9, 48)).astype(np.float32)
    q[0], q[1] = g[50], g[6] + 0.01  # ties among the duplicates, a one-hot neighbour
    for k, exclude in [(10, None), (10, np.array([50, -1, 3, -1, -1, -1, -1, -1, 2999])),
                       (1, np.full(9, 100)), (700, None), (2999, np.full(9, 0))]:
        want = rank(Queries(q), Searcher(g, gn), COS, k, exclude)
        got = rank(Queries(q), Searcher(g, gn, prefilter=f), COS, k, exclude)
        assert got.ids.shape == want.ids.shape
        same = got.ids == want.ids
        # where ids differ, the two scores must be a float32 near-tie (BLAS vs row-wise sums)
        assert np.allclose(got.scores, want.scores, atol=1e-6), k
        assert same.mean() > 0.99, k
    top = rank(Queries(q[:1]), Searcher(g, gn, prefilter=f), COS, 4).ids[0]
    assert top.tolist() == [50, 100, 200, 2999]  # exact ties: lower row first, across the cut too
    assert rank(Queries(q[:1]), Searcher(g, gn, prefilter=f), COS, 2).ids[0].tolist() == [50, 100]


def test_search_through_the_filter_on_random_unit_rows_gives_the_same_ids(force_filter):
    rng = np.random.default_rng(3)
    g = unit(rng, 20_000, 64)
    gn = gallery_norms(g)
    f = Int8Filter.build(g, gn)
    for b in (1, 7, 16):
        q = unit(rng, b, 64)
        for ex in (rng.integers(-1, len(g), b), None):  # references to drop, and none
            want = rank(Queries(q), Searcher(g, gn), COS, 50, ex).ids
            got = rank(Queries(q), Searcher(g, gn, prefilter=f), COS, 50, ex).ids
            assert np.array_equal(got, want) and (got >= 0).all()


def test_many_identical_rows_are_all_candidates(force_filter):
    g = np.tile(unit(np.random.default_rng(4), 1, 16), (300, 1))
    g[150:] *= -1
    f = Int8Filter.build(g, gallery_norms(g))
    ids = rank(Queries(g[:1]), Searcher(g, gallery_norms(g), prefilter=f), COS, 20, np.array([3])).ids[0]
    assert ids.tolist() == [0, 1, 2] + list(range(4, 21))


def test_the_rule_and_its_inputs():
    assert not use_filter(1_000, 1)
    assert use_filter(100_000, 1) and use_filter(100_000, 16)
    assert not use_filter(100_000, 10_000)  # a benchmark's whole query set: one BLAS product wins
    g = unit(np.random.default_rng(5), 200, 8)
    f = Int8Filter.build(g, gallery_norms(g))
    with pytest.raises(InputError, match="prefilter"):
        Searcher(g[:100], gallery_norms(g[:100]), prefilter=f)
    with pytest.raises(InputError, match="queries"):
        f.bounds(np.zeros((2, 9), np.float32))
    with pytest.raises(InputError, match="norms"):
        Int8Filter.build(g, gallery_norms(g)[:-1])
    bad = g.copy()
    bad[3, 1] = np.nan
    with pytest.raises(InputError, match="NaN"):
        Int8Filter.build(bad, gallery_norms(bad))


def test_a_kernel_that_does_not_reproduce_the_integer_model_is_refused(monkeypatch):
    real = prefilter._kernel
    monkeypatch.setattr(prefilter, "_kernel", lambda *a: real(*a) * 1.001)
    assert Int8Filter.build(*with_norms(unit(np.random.default_rng(6), 300, 16))) is None


def test_chord_and_cols_stay_on_the_float_path(force_filter):
    rng = np.random.default_rng(7)
    g = unit(rng, 2000, 16)
    f = Int8Filter.build(g, gallery_norms(g))
    q, v = unit(rng, 2, 16), g[:1]
    gn = gallery_norms(g)
    chord = ScoreOpts("chord", 0.3)
    want = rank(Queries(q, q * 0.5, v), Searcher(g, gn), chord, 5)
    assert np.array_equal(rank(Queries(q, q * 0.5, v), Searcher(g, gn, prefilter=f), chord, 5).ids, want.ids)
    cols = np.array([[0, 1], [2, -1]])
    assert rank(Queries(q), Searcher(g, gn, prefilter=f), COS, 5, cols=cols).at_cols.shape == (2, 2)
