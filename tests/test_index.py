import os

import faiss
import numpy as np
import pytest

from cir_core.errors import InputError
from cir_core.search import Index


def _unit(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    x = rng.standard_normal((n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_blas_threshold_lowered_and_omp_wait_policy_set_on_import():
    assert faiss.cvar.distance_compute_blas_threshold == 20
    assert os.environ.get("OMP_WAIT_POLICY")  # PASSIVE unless the user chose otherwise


def test_flat_matches_numpy_exact():
    rng = np.random.default_rng(0)
    g, q = _unit(rng, 500, 32), _unit(rng, 7, 32)
    index = Index.build(g, kind="flat")
    scores, ids = index.search(q, 10)
    assert scores.shape == ids.shape == (7, 10)
    assert scores.dtype == np.float32 and ids.dtype == np.int64
    expected = np.argsort(-(q @ g.T), axis=1)[:, :10]
    np.testing.assert_array_equal(ids, expected)
    np.testing.assert_allclose(scores, np.take_along_axis(q @ g.T, expected, 1), atol=1e-5)


def test_auto_picks_kind_by_size():
    rng = np.random.default_rng(1)
    g = _unit(rng, 50, 8)
    assert Index.build(g).kind == "flat"
    assert Index.build(g, exact_max=10, nlist=4).kind == "ivf-flat"  # the measured default
    assert Index.build(g, exact_max=10, ann="hnsw", hnsw_m=8).kind == "hnsw"


def test_hnsw_finds_exact_neighbours_on_small_data():
    rng = np.random.default_rng(2)
    g, q = _unit(rng, 300, 16), _unit(rng, 5, 16)
    index = Index.build(g, kind="hnsw", hnsw_m=16)
    _, ids = index.search(q, 1)
    np.testing.assert_array_equal(ids[:, 0], np.argmax(q @ g.T, axis=1))


def test_k_clipped_and_1d_query_and_non_contiguous_input():
    rng = np.random.default_rng(3)
    g = np.asfortranarray(_unit(rng, 4, 8).astype(np.float64))
    index = Index.build(g)
    assert (index.ntotal, index.dim) == (4, 8)
    scores, ids = index.search(g[0], 10)
    assert ids.shape == (1, 4) and ids[0, 0] == 0
    assert sorted(ids[0].tolist()) == [0, 1, 2, 3]


def test_dim_mismatch_and_bad_input():
    index = Index.build(np.eye(4, dtype=np.float32))
    with pytest.raises(InputError, match="query dim 3 != index dim 4"):
        index.search(np.ones((2, 3), np.float32), 1)
    with pytest.raises(InputError):
        index.search(np.ones((1, 4), np.float32), 0)
    with pytest.raises(InputError):
        Index.build(np.eye(4), kind="ivf")
    with pytest.raises(InputError):
        Index.build(np.ones((2, 2, 2)))


@pytest.mark.parametrize("kind", ["flat", "hnsw"])
def test_save_load_roundtrip(tmp_path, kind):
    rng = np.random.default_rng(4)
    g, q = _unit(rng, 100, 16), _unit(rng, 3, 16)
    index = Index.build(g, kind=kind, hnsw_m=8)
    path = tmp_path / "x.faiss"
    index.save(path)
    loaded = Index.load(path)
    assert (loaded.kind, loaded.ntotal, loaded.dim) == (kind, 100, 16)
    for a, b in zip(index.search(q, 5), loaded.search(q, 5)):
        np.testing.assert_array_equal(a, b)
