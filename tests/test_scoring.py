import numpy as np
import pytest

from cir_core.errors import InputError
from cir_core.search import (
    DEFAULT_LAMBDA,
    Index,
    Queries,
    ScoreOpts,
    Searcher,
    chord_scores,
    cosine_scores,
    gallery_norms,
    rank,
)


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _naive_chord(q, qe, vr, g, lam, variant, eps=1e-6):
    """Definition, materialising (B, N, D) differences in float64."""
    q, qe, vr, g = (_unit(np.asarray(x, np.float64)) for x in (q, qe, vr, g))
    d = q - (qe if variant == "empty" else vr)  # (B, D)
    diff = g[None, :, :] - vr[:, None, :]  # (B, N, D)
    dist = np.linalg.norm(diff, axis=2)
    dn = np.linalg.norm(d, axis=1)[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        cos_dir = np.einsum("bnd,bd->bn", diff, d) / (dist * dn)
    cos_dir[(dist < eps) | (dn < eps)] = 0.0
    return q @ g.T + lam * cos_dir


@pytest.fixture
def world():
    rng = np.random.default_rng(0)
    g = _unit(rng.standard_normal((60, 16))).astype(np.float32)
    q = _unit(rng.standard_normal((4, 16))).astype(np.float32)
    qe = _unit(rng.standard_normal((4, 16))).astype(np.float32)
    ref = np.array([3, 10, 20, 59])
    return q, qe, g[ref], g, ref


def test_cosine_scores_not_assuming_unit_norm():
    g = np.array([[2.0, 0.0], [0.0, 0.5], [1.0, 1.0]], np.float32)
    q = np.array([[3.0, 0.0]], np.float32)
    # cos with (1,0)=1, with (0,1)=0, with (1,1)=1/sqrt(2)
    np.testing.assert_allclose(cosine_scores(q, g), [[1.0, 0.0, 2**-0.5]], atol=1e-6)


@pytest.mark.parametrize("variant", ["empty", "reference"])
def test_chord_matches_definition(world, variant):
    q, qe, vr, g, _ = world
    got = chord_scores(q, qe, vr, g, lam=0.5, variant=variant)
    assert got.shape == (4, 60) and got.dtype == np.float32
    np.testing.assert_allclose(got, _naive_chord(q, qe, vr, g, 0.5, variant), atol=1e-5)


def test_chord_guards_reference_and_empty_direction(world):
    q, qe, vr, g, ref = world
    s = chord_scores(q, qe, vr, g)
    assert np.isfinite(s).all()
    # The reference itself: v_c - v_r = 0, so only the cosine term remains.
    np.testing.assert_allclose(s[np.arange(4), ref], (q @ g.T)[np.arange(4), ref], atol=1e-6)
    # q == q_empty: d = 0, Chord reduces to cosine everywhere.
    np.testing.assert_allclose(chord_scores(q, q, vr, g), q @ g.T, atol=1e-6)


def test_chord_near_duplicate_of_reference_is_accurate():
    rng = np.random.default_rng(1)
    vr = _unit(rng.standard_normal(32))
    near = _unit(vr + 1e-4 * rng.standard_normal(32))  # 2 - 2cos ~ 1e-8: float32 cancels it
    g = np.stack([vr, near, _unit(rng.standard_normal(32))]).astype(np.float32)
    q, qe = _unit(rng.standard_normal((2, 32))).astype(np.float32)
    got = chord_scores(q, qe, vr.astype(np.float32), g)
    want = _naive_chord(q[None], qe[None], vr[None], g, DEFAULT_LAMBDA, "empty")
    np.testing.assert_allclose(got, want, atol=1e-4)


def test_chord_scale_invariant_in_gallery_rows(world):
    q, qe, vr, g, _ = world
    scaled = g * np.linspace(0.5, 2.0, len(g), dtype=np.float32)[:, None]
    np.testing.assert_allclose(chord_scores(q, qe, vr, scaled), chord_scores(q, qe, vr, g), atol=1e-5)


def test_chord_broadcasts_one_reference(world):
    q, qe, vr, g, _ = world
    one = chord_scores(q, qe[0], vr[0], g)
    np.testing.assert_allclose(one[2], chord_scores(q[2], qe[0], vr[0], g)[0], atol=1e-6)


def exact(g):
    return Searcher.exact(g)


def ivf(g, shortlist):
    """An approximate searcher whose IVF probes every list: its shortlist is the true cosine top."""
    return Searcher(g, gallery_norms(g), index=Index.build(g, kind="ivf-flat", nlist=4, nprobe=4),
                    shortlist=shortlist)


def chord(lam=DEFAULT_LAMBDA):
    return ScoreOpts("chord", lam)


def test_rank_exact_excludes_reference(world):
    q, qe, vr, g, ref = world
    for opts in (ScoreOpts("cosine"), chord()):
        s, ids = rank(Queries(q, qe, vr), exact(g), opts, k=5, exclude=ref)
        assert s.shape == ids.shape == (4, 5) and ids.dtype == np.int64
        assert not (ids == ref[:, None]).any()
        full = cosine_scores(q, g) if opts.scoring == "cosine" else chord_scores(q, qe, vr, g)
        full[np.arange(4), ref] = -np.inf
        np.testing.assert_array_equal(ids, np.argsort(-full, axis=1, kind="stable")[:, :5])
        assert (np.diff(s, axis=1) <= 0).all()


def test_rank_k_clipped_with_exclusion():
    g = np.eye(3, dtype=np.float32)
    s, ids = rank(Queries(g[:1]), exact(g), ScoreOpts(), k=10, exclude=np.array([0]))
    assert ids.shape == (1, 2) and 0 not in ids and np.isfinite(s).all()


@pytest.mark.parametrize("scoring", ["cosine", "chord"])
def test_rank_shortlist_equals_exact_when_shortlist_covers_gallery(world, scoring):
    q, qe, vr, g, ref = world
    opts = ScoreOpts(scoring, DEFAULT_LAMBDA if scoring == "chord" else None)
    want = rank(Queries(q, qe, vr), exact(g), opts, k=7, exclude=ref)
    short = rank(Queries(q, qe, vr), ivf(g, 59), opts, k=7, exclude=ref)
    np.testing.assert_array_equal(short.ids, want.ids)
    np.testing.assert_allclose(short.scores, want.scores, atol=1e-5)


def test_rank_small_shortlist_keeps_reference_out(world):
    q, qe, vr, g, ref = world
    # The reference is usually the cosine top-1 of its own query's neighbourhood; use q = v_r.
    s, ids = rank(Queries(vr, qe, vr), ivf(g, 3), chord(), k=3, exclude=ref)
    assert ids.shape == (4, 3) and not (ids == ref[:, None]).any() and np.isfinite(s).all()


def test_a_short_approximate_shortlist_never_returns_the_reference(world):
    """An approximate index may return fewer rows than asked (HNSW pads with -1): with k or
    fewer, the reference must be dropped, not ranked last at -inf."""
    q, qe, vr, g, ref = world

    class Short:  # what an HNSW index answers when its graph yields only 3 rows
        kind, ntotal, dim = "hnsw", len(g), g.shape[1]

        def search(self, x, size):
            rows = np.full((len(x), size), -1)
            rows[:, :3] = np.stack([ref, (ref + 1) % len(g), (ref + 2) % len(g)], 1)
            return None, rows

    for opts in (ScoreOpts("cosine"), chord()):
        s, ids = rank(Queries(q, qe, vr), Searcher(g, gallery_norms(g), index=Short()), opts, k=3, exclude=ref)
        assert not (ids == ref[:, None]).any(), ids
        assert (ids[:, 2] == -1).all() and np.isneginf(s[:, 2]).all()  # ran short: padding
        assert np.isfinite(s[:, :2]).all()


def test_rank_validation(world):
    q, qe, vr, g, ref = world
    with pytest.raises(InputError, match="dim"):
        rank(Queries(q[:, :8], qe, vr), exact(g), ScoreOpts(), k=1)
    with pytest.raises(InputError):
        ScoreOpts("dot")
    with pytest.raises(InputError):
        rank(Queries(q, qe, vr), exact(g), ScoreOpts(), k=1, exclude=np.array([0, 1]))
    with pytest.raises(InputError):
        rank(Queries(q, qe, vr), exact(g), ScoreOpts(), k=1, exclude=np.array([0, 1, 2, 60]))
    with pytest.raises(InputError, match="resolved λ"):  # "each method's own" must be resolved first
        rank(Queries(q, qe, vr), exact(g), ScoreOpts("chord"), k=1)
    with pytest.raises(InputError, match="3 λs for 4 queries"):
        rank(Queries(q, qe, vr), exact(g), ScoreOpts("chord", (0.1, 0.2, 0.3)), k=1)
    with pytest.raises(InputError, match="approximate one over this gallery"):
        Searcher(g, gallery_norms(g), index=Index.build(g[:10], kind="hnsw", hnsw_m=8))
    with pytest.raises(InputError, match="approximate one"):
        Searcher(g, gallery_norms(g), index=Index.build(g, kind="flat"))  # exact search needs no copy
    with pytest.raises(InputError):
        chord_scores(q, qe, vr, g, variant="other")
    with pytest.raises(InputError):
        chord_scores(q, None, vr, g, variant="empty")
    with pytest.raises(InputError):
        chord_scores(q, qe, vr[:2], g)


def test_rank_with_a_lambda_per_query_equals_one_call_per_query(world):
    """The app ranks every method's query in one call, each with its own q_∅ and λ."""
    q, qe, vr, g, ref = world
    lams = (0.0, 0.2, 0.5, 1.0)
    both = rank(Queries(q, qe, vr[:1]), exact(g), ScoreOpts("chord").per_query(lams), k=5, exclude=np.full(4, ref[0]))
    for i in range(4):
        one = rank(Queries(q[i], qe[i], vr[0]), exact(g), chord(lams[i]), k=5, exclude=np.array([ref[0]]))
        np.testing.assert_array_equal(both.ids[i], one.ids[0])
        np.testing.assert_allclose(both.scores[i], one.scores[0], atol=1e-6)


def test_rank_returns_the_scores_of_chosen_columns(world):
    q, qe, vr, g, ref = world
    cols = np.array([[0, 5, -1], [7, 8, 9], [1, -1, -1], [59, 58, 57]])
    got = rank(Queries(q, qe, vr), exact(g), chord(0.3), k=3, exclude=ref, cols=cols)
    full = chord_scores(q, qe, vr, g, lam=0.3)
    want = np.where(cols >= 0, np.take_along_axis(full, np.maximum(cols, 0), 1), -np.inf)
    np.testing.assert_allclose(got.at_cols, want, atol=1e-6)


def test_score_opts_resolve_lambda_once():
    class M:
        chord_lambda = 0.7
    assert ScoreOpts("chord").for_method(M()).lam == 0.7 and ScoreOpts("chord", 0.2).for_method(M()).lam == 0.2
    assert ScoreOpts("cosine", 0.2).for_method(M()).lam is None  # cosine reads no λ
    assert ScoreOpts("cosine").per_query([0.1, 0.2]).lam is None
    assert ScoreOpts("chord").per_query([0.1, 0.2]).describe() == "chord (per-query λ)"
    with pytest.raises(InputError, match="finite"):
        ScoreOpts("chord", (0.1, float("nan")))


def test_large_batches_keep_numpys_product_in_every_block(monkeypatch):
    """An evaluation's blocks, its last short one included, score with numpy's BLAS as the
    published tables did; only a request of 2-64 queries takes torch's (`_product`)."""
    import cir_core.search.scoring as scoring

    rng = np.random.default_rng(0)
    g = rng.standard_normal((500, 16)).astype(np.float32)
    calls = []
    real = scoring._product
    monkeypatch.setattr(scoring, "_product", lambda q, gg: calls.append(len(q)) or real(q, gg))
    import cir_core.search.searcher as searcher
    monkeypatch.setattr(searcher, "_BLOCK_ENTRIES", 70 * 500)  # blocks of 70 queries: the last has 60
    searcher.rank(Queries(rng.standard_normal((200, 16))), exact(g), ScoreOpts(), 5)
    assert calls == []
    searcher.rank(Queries(rng.standard_normal((7, 16))), exact(g), ScoreOpts(), 5)
    assert calls == [7]
