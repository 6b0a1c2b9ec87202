"""FAISS index over L2-normalised embeddings: exact inner product (`flat`), `hnsw` or
`ivf-flat` (FAISS's "IVF{nlist},Flat").

Scores are inner products, i.e. cosines for normalised rows. numpy in, numpy out.
"""
from __future__ import annotations

import os
from pathlib import Path

# FAISS's OpenMP threads spin-wait by default. When another process holds a core (a training
# run beside the app), the spinning threads starve the working ones: 16-query FlatIP search at
# 100k x 512 went from 0.09 s to 2.3 s on 2 shared cores. Passive waiting costs little when the
# machine is idle. Read by libgomp when it loads, so it must precede `import faiss`; this also
# reaches torch's own libgomp if torch is imported later. A value set by the user wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import faiss  # noqa: E402
import numpy as np  # noqa: E402

from ..errors import InputError
from ..timing import one_time_build

EXACT_MAX = 200_000  # up to this many rows 'auto' is exact (flat)
ADD_BLOCK = 50_000  # vectors added to an IVF / flat index at a time (its progress steps)

# FAISS switches from its own SIMD kernel to a BLAS GEMM only at >= 128000 query rows by default,
# so an interactive batch of 1-64 queries never uses BLAS. Measured here (DESIGN.md): with the
# threshold at ~20, 64-query FlatIP search is 6-9x faster; single queries are unaffected.
faiss.cvar.distance_compute_blas_threshold = 20

KINDS = ("auto", "flat", "hnsw", "ivf-flat")
ANN_KINDS = ("hnsw", "ivf-flat")


def ivf_lists(n: int) -> int:
    """IVF list count for `n` rows: the power of two nearest 4 sqrt(n) (FAISS's guideline), but
    at most n / 39 so k-means has the >= 39 training points per list FAISS asks for."""
    target = 1 << max(0, round(np.log2(max(1.0, 4 * np.sqrt(n)))))
    return max(1, min(target, n // 39))


def _as_matrix(x: np.ndarray, name: str) -> np.ndarray:
    """Contiguous float32 2-D copy-if-needed; FAISS reads raw memory and silently misreads others."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    if x.ndim == 1:
        x = x[None, :]
    if x.ndim != 2:
        raise InputError(f"{name} must be a 2-D array (rows, dim), got shape {x.shape}")
    return x


class Index:
    """A FAISS inner-product index with a fixed `kind` ('flat', 'hnsw' or 'ivf-flat')."""

    def __init__(self, faiss_index: faiss.Index, kind: str):
        self._index = faiss_index
        self.kind = kind

    @classmethod
    def build(
        cls,
        emb: np.ndarray,
        kind: str = "auto",
        hnsw_m: int = 32,
        exact_max: int = EXACT_MAX,
        ef_search: int = 128,
        ef_construction: int = 40,
        ann: str = "ivf-flat",
        nlist: int | None = None,
        nprobe: int = 32,
    ) -> "Index":
        """Index `emb` (N, D). 'auto' is exact up to `exact_max` rows, else `ann`: 'ivf-flat'
        (default: IVF-Flat with `nlist` lists, default `ivf_lists(N)`, trained on a 40-rows-per-list
        sample, `nprobe` lists searched) or 'hnsw'. The default follows bench/bench_ann.py: at 100k
        and 1M, IVF-Flat (nprobe 32) built 4-5x faster than HNSW and kept recall@10 >= 0.999 where
        HNSW fell to 0.88 at 1M (docs/BENCHMARKS.md, on clustered synthetic vectors)."""
        if kind not in KINDS:
            raise InputError(f"unknown index kind {kind!r}; expected one of {KINDS}")
        if ann not in ANN_KINDS:
            raise InputError(f"unknown approximate index {ann!r}; expected one of {ANN_KINDS}")
        emb = _as_matrix(emb, "embeddings")
        n, d = emb.shape
        if d == 0:
            raise InputError("embeddings have dimension 0")
        if kind == "auto":
            kind = "flat" if n <= exact_max else ann
        index: faiss.Index
        if kind == "flat":
            index = faiss.IndexFlatIP(d)
        elif kind == "ivf-flat":
            lists = min(int(nlist or ivf_lists(n)), n)
            if lists < 1:
                raise InputError(f"an IVF index needs nlist >= 1 and rows to train on (nlist={nlist}, rows={n})")
            index = faiss.index_factory(d, f"IVF{lists},Flat", faiss.METRIC_INNER_PRODUCT)
            sample = np.sort(np.random.default_rng(0).choice(n, min(n, 40 * lists), replace=False))
            index.train(np.ascontiguousarray(emb[sample]))  # seeded sample: same rows, same index
            faiss.extract_index_ivf(index).nprobe = nprobe  # the factory's index is typed as a bare Index
        else:
            hnsw = faiss.IndexHNSWFlat(d, hnsw_m, faiss.METRIC_INNER_PRODUCT)
            hnsw.hnsw.efSearch = ef_search
            hnsw.hnsw.efConstruction = ef_construction
            index = hnsw
        if kind == "hnsw":  # one add: faiss orders HNSW insertions by level within a call
            with one_time_build(f"indexing {n:,} vectors (HNSW)", total=n, unit="vector") as task:
                index.add(emb)
                task.update(n)
        else:  # IVF / flat adds are per vector: in blocks, with n/N
            with one_time_build(f"indexing {n:,} vectors ({kind})", total=n, unit="vector") as task:
                for s in range(0, n, ADD_BLOCK):
                    index.add(emb[s:s + ADD_BLOCK])
                    task.update(min(ADD_BLOCK, n - s))
        return cls(index, kind)

    @property
    def ntotal(self) -> int:
        return int(self._index.ntotal)

    @property
    def dim(self) -> int:
        return int(self._index.d)

    def search(self, q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-`k` by inner product: (scores (B, k) float32, ids (B, k) int64), best first.

        `k` is clipped to `ntotal`, so every returned id is valid (no FAISS -1 padding from
        an exact index; HNSW may still pad with -1 if its graph cannot reach k items).
        """
        q = _as_matrix(q, "query")
        if q.shape[1] != self.dim:
            raise InputError(f"query dim {q.shape[1]} != index dim {self.dim}")
        if k < 1:
            raise InputError(f"k must be >= 1, got {k}")
        k = min(int(k), self.ntotal)
        if k == 0:
            b = q.shape[0]
            return np.zeros((b, 0), np.float32), np.zeros((b, 0), np.int64)
        scores, ids = self._index.search(q, k)
        return scores.astype(np.float32, copy=False), ids.astype(np.int64, copy=False)

    def save(self, path: str | Path) -> None:
        """Write the index to `path` (FAISS binary format; the kind is recoverable from it)."""
        faiss.write_index(self._index, str(path))

    @classmethod
    def load(cls, path: str | Path) -> "Index":
        """Read an index written by `save`."""
        index = faiss.read_index(str(path))
        # efSearch / nprobe are stored in the file too
        kind = "hnsw" if isinstance(index, faiss.IndexHNSW) else "ivf-flat" if isinstance(index, faiss.IndexIVF) else "flat"
        return cls(index, kind)

    def __repr__(self) -> str:
        return f"Index(kind={self.kind!r}, ntotal={self.ntotal}, dim={self.dim})"
