"""An exact cosine top-k through an int8 filter: a quarter of the memory traffic, same answer.

One query against a 100k x 512 float32 gallery reads 205 MB; at this CPU's memory bandwidth that
product alone takes longer than a full sort of its result, so no float32 scan can be much faster
than the naive peer. The filter reads int8 codes instead and keeps the search exact with a bound:

- gallery rows are quantised as unit rows, g_j ≈ ĝ_j = s_j c_j (c_j int8, one scale per row), with
  the residual norm r_j = ||g_j/||g_j|| - ĝ_j|| kept in float64;
- a unit query q is quantised on a grid of our choosing (q̂ = scale (u - zp), u in 0..127, the
  whole batch on one grid) with its residual norm e_q = ||q - q̂||; fbgemm then computes q̂ · ĝ_j
  with exact int32 accumulation (`linear_with_input_q_dq_qweight_dq_output_fp32`);
- Cauchy-Schwarz: |q · g_j/||g_j|| - q̂ · ĝ_j| <= r_j + e_q (1 + r_j) =: eps_j (plus float
  slack), a bound on every row's distance from its filter score.

`Int8Filter.search` scores exactly the best row of each of the k+1 best blocks of BLOCK rows; the
k-th best of those exact scores is a floor t under the true k-th best, and every row whose upper
bound (filter score + eps_j) reaches t is scored exactly too (a few hundred of 100k on random unit
vectors). `scoring.rank` runs the one top-k over them, ties to the lower row as everywhere. The
filter only chooses which rows are scored exactly; it never decides an order.

Where the int8 kernel is missing (another torch, another CPU), or the kernel does not reproduce
the integer arithmetic on a probe at build time, `Int8Filter.build` returns None and the search
stays on the float32 path. Which path is faster for a (gallery size, batch) is `use_filter`'s rule,
calibrated by `bench/bench_topk.py --calibrate`.
"""
from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InputError

log = logging.getLogger(__name__)

# The calibrated rule: (rows, most queries) pairs, the filter taken from `rows` rows up to `most
# queries` per call. From `bench/bench_topk.py --calibrate` (2026-12-01 14:55, 2 cores, load 0.7;
# the raw lines are in docs/results/bench.jsonl): the float32 product wins below 16k rows; the
# filter's edge shrinks as the batch grows, because one BLAS product amortises the gallery read
# over more queries (float32 / filter at 32k: 1.2x at 16 queries, 0.9x at 32; at 65k: 1.2x at
# 64, 0.9x at 128; at 100k: 2.6x at 1 query, 2.1x at 16, 1.4x at 64; at 200k still 1.5x at 128).
# Re-run twice on the cheaper single-query search (17:23): the rule took the faster path in 42
# and 44 of 48 cells, the rest within 8-19 % (docs/BENCHMARKS.md, "When it is taken").
FILTER_RULE = ((16_384, 4), (32_768, 16), (65_536, 64), (200_000, 128))
_QMAX = 127  # the query grid: 7 bits, so fbgemm's u8 x s8 pair sums cannot saturate int16
BLOCK = 64  # rows per block of filter scores: one max each, so only candidate blocks are read
_SLACK = 1e-5  # float rounding of the kernel's output (~1e-8) and of the exact re-score (~1e-6)


def use_filter(n: int, b: int) -> bool:
    """The calibrated rule: is the int8 filter faster than the float32 product for `b` queries
    against `n` rows?"""
    return any(n >= rows and b <= most for rows, most in FILTER_RULE)


def filter_for(gallery: np.ndarray, norms: np.ndarray) -> "Int8Filter | None":
    """The filter for a fixed gallery large enough for the rule ever to pick it, else None (a
    smaller one would never be used, and building costs ~4 s per 100k x 512 rows)."""
    if not use_filter(len(gallery), 1):  # one query is the rule's easiest case
        return None
    return Int8Filter.build(gallery, norms)


@dataclass
class Int8Filter:
    """A gallery's unit rows as int8 codes packed for fbgemm, with their residual norms."""

    n: int
    dim: int
    packed: Any  # fbgemm's packed weight
    r: np.ndarray  # (N,) float32 residual norms, rounded up

    def __post_init__(self) -> None:
        self.r_max = float(self.r.max())

    @classmethod
    def build(cls, gallery: np.ndarray, norms: np.ndarray) -> "Int8Filter | None":
        """The filter for `gallery` (N, D) float32, or None where this torch/CPU has no int8 kernel
        that reproduces the integer arithmetic. `norms`: the rows' `scoring.gallery_norms`, the
        ones the search will divide by (required: a norm of other arithmetic here would be a
        second definition of the unit rows the bound is about)."""
        g = np.asarray(gallery, dtype=np.float32)
        if g.ndim != 2 or g.shape[0] == 0:
            raise InputError(f"gallery must have shape (N, D) with N >= 1, got {g.shape}")
        if not np.isfinite(g).all():
            raise InputError("gallery contains NaN or inf")
        gn = np.asarray(norms, np.float32)
        if gn.shape != (len(g),):
            raise InputError(f"norms must have shape ({len(g)},), got {gn.shape}")
        codes, scales, r = _quantise_rows(g, gn)
        order = _order(len(codes))  # zero rows pad the last block (past the end of `codes`)
        codes = np.concatenate([codes, np.zeros((len(order) - len(codes), codes.shape[1]), np.int8)])
        scales = np.concatenate([scales, np.ones(len(order) - len(scales), np.float32)])
        packed = _pack(codes[order], scales[order])
        if packed is None:
            return None
        f = cls(int(g.shape[0]), int(g.shape[1]), packed, np.nextafter(r.astype(np.float32), np.float32(1)))
        return f if f._probe(codes, scales) else None

    def bounds(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(filter scores (B, N), bounds (B, N)) for unit query rows `q`: each row's exact cosine
        lies within its bound of its filter score (what `search` relies on; for tests)."""
        s, e_q = self._scores(q)
        s = s.transpose(0, 2, 1).reshape(len(s), -1)[:, :self.n]  # back to row order
        return s, _eps(self.r[None, :], e_q[:, None])

    def search(self, q: np.ndarray, g: np.ndarray, gn: np.ndarray, k: int,
               exclude: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Candidates for each unit query row: (rows (B, C), their exact float32 cosines (B, C)),
        each row's candidates ascending, padded with row -1 and score -inf, holding the exact
        top-k (and every row tied with its k-th) once `exclude[i]` (-1: none) is dropped.
        `g`, `gn`: the gallery this filter was built over and its norms.

        Two stages on blocks of BLOCK rows (one max per block is the only full pass over the
        filter scores): a floor t under the true k-th best (`_floor`), then every row whose
        upper bound (filter score + eps_j) reaches t, scored exactly with the same arithmetic
        for every row, so rows that tie exactly still tie."""
        s, e_q = self._scores(q)
        best = s.max(axis=1)  # (B, nb): contiguous slices, see `_order`
        t = self._floor(s, best, q, g, gn, k, np.asarray(exclude).reshape(-1, 1))
        loose = t - _eps(self.r_max, e_q)  # no row below this can reach t
        qb, blk = np.nonzero(best >= loose[:, None])  # the blocks that may hold one
        sv = s[qb, :, blk]  # (P, BLOCK)
        pi, ii = np.nonzero(sv >= loose[qb, None])  # by block, then row within it
        qb, rows, sv = qb[pi], blk[pi] * BLOCK + ii, sv[pi, ii]
        keep = sv + _eps(self.r[rows], e_q[qb]) >= t[qb]  # the per-row bound
        qb, rows = qb[keep], rows[keep]  # by query, then ascending rows
        return _pad(qb, rows, _exact(g, gn, q, qb, rows), len(s))

    def _scores(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(filter scores (B, BLOCK, nb): [b, i, j] is row j * BLOCK + i, -inf past the last row;
        the queries' residual norms)."""
        q = np.asarray(q, dtype=np.float32)
        if q.ndim != 2 or q.shape[1] != self.dim:
            raise InputError(f"queries must have shape (B, {self.dim}), got {q.shape}")
        u, zp, scale = _query_grid(q)
        grid = (u - zp) * scale  # the query the kernel computes with
        d = q.astype(np.float64) - grid
        e_q = np.sqrt(np.add.reduce(d * d, axis=1)).astype(np.float32)  # np.linalg.norm's sum
        s = _kernel(grid, scale, zp, self.packed).reshape(len(q), BLOCK, -1)  # in `_order`
        s[:, self.n - (s.shape[2] - 1) * BLOCK:, -1] = -np.inf  # the zero rows of the last block
        return s, e_q

    def _floor(self, s: np.ndarray, best: np.ndarray, q: np.ndarray, g: np.ndarray,
               gn: np.ndarray, k: int, exclude: np.ndarray) -> np.ndarray:
        """(B,) t with at least k non-excluded rows scoring >= t exactly: the k-th best exact
        score of k+1 rows the filter ranks high (the best of each of the k+1 best blocks)."""
        b, nb = best.shape
        m = min(int(k) + 1, self.n)
        if m <= nb:
            top = np.argpartition(best, nb - m, axis=1)[:, nb - m:]
            first = top * BLOCK + s[np.arange(b)[:, None], :, top].argmax(axis=2)
        else:  # fewer blocks than k+1: the k+1 best rows
            flat = s.reshape(b, -1)
            pos = np.argpartition(flat, flat.shape[1] - m, axis=1)[:, flat.shape[1] - m:]
            first = (pos % nb) * BLOCK + pos // nb
        exact = _exact(g, gn, q, np.repeat(np.arange(b), m), first.reshape(-1)).reshape(b, m)
        exact[first == exclude] = -np.inf
        kk = min(int(k), m)
        return np.partition(exact, m - kk, axis=1)[:, m - kk]

    def _probe(self, codes: np.ndarray, scales: np.ndarray) -> bool:
        """Does the kernel compute the integer model (our grid, our codes) on a random query?"""
        rows = np.arange(min(self.n, 64))
        q = np.random.default_rng(0).standard_normal((2, self.dim)).astype(np.float32)
        q /= np.linalg.norm(q, axis=1, keepdims=True)
        u, zp, scale = _query_grid(q)
        want = ((u - zp) @ codes[rows].T.astype(np.float64)) * scale * scales[rows]
        got = _kernel((u - zp) * scale, scale, zp, self.packed).reshape(2, BLOCK, -1)[:, rows % BLOCK, rows // BLOCK]
        ok = bool(np.abs(got - want).max() <= _SLACK / 10)
        if not ok:
            log.warning("int8 kernel does not reproduce the integer model; exact search stays float32")
        return ok


def _quantise_rows(g: np.ndarray, gn: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Unit rows as int8 codes with one float32 scale each, and the residual norms (float64),
    in blocks: a float64 copy of a 1M-row gallery would be 4 GB."""
    codes = np.empty(g.shape, np.int8)
    scales = np.empty(len(g), np.float32)
    r = np.empty(len(g))
    for s in range(0, len(g), 32_768):
        b = slice(s, s + 32_768)
        unit = g[b] / gn[b, None]
        sc = (np.abs(unit).max(axis=1) / 127).astype(np.float32)
        sc[sc == 0] = 1.0  # a zero row: codes 0, residual 0
        codes[b] = np.clip(np.rint(unit / sc[:, None]), -127, 127)
        scales[b] = sc
        r[b] = np.linalg.norm(unit.astype(np.float64) - codes[b] * sc[:, None].astype(np.float64), axis=1)
    return codes, scales, r


def _exact(g: np.ndarray, gn: np.ndarray, q: np.ndarray, qi: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Exact float32 cosines of pairs (query qi[i], gallery row rows[i]), `qi` ascending: one
    row-wise product-sum (not BLAS) per pair, each query's rows against its own vector, so equal
    rows score equal whatever the batch. Not a numpy product either: that would wake OpenBLAS's
    pool, whose spinning threads slow the next kernel call on a small machine (measured: 2x on
    2 cores). Per query rather than one product-sum over all pairs: replicating the queries'
    rows for it cost ~4x the arithmetic (16 queries x ~300 rows x 512, measured)."""
    if len(q) == 1:
        return np.einsum("ij,j->i", g[rows], q[0]) / gn[rows]
    out = np.empty(len(rows), np.float32)
    cut = np.searchsorted(qi, np.arange(len(q) + 1))
    for b, (lo, hi) in enumerate(zip(cut[:-1].tolist(), cut[1:].tolist())):
        r = rows[lo:hi]
        out[lo:hi] = np.einsum("ij,j->i", g[r], q[b]) / gn[r]
    return out


def _order(n: int) -> np.ndarray:
    """The packed order of the rows (padded to whole blocks): position i * nb + j holds row
    j * BLOCK + i, so the kernel's output reshapes to (B, BLOCK, nb) and a block's max is an
    elementwise max over BLOCK contiguous slices (numpy's reduction over a short last axis is
    ~15x slower: 3.4 ms for 16 x 100k scores, measured)."""
    nb = -(-n // BLOCK)
    return (np.arange(BLOCK)[:, None] + BLOCK * np.arange(nb)[None, :]).reshape(-1)


def _pad(qb: np.ndarray, rows: np.ndarray, sc: np.ndarray, b: int) -> tuple[np.ndarray, np.ndarray]:
    """Pairs (query, row, score), grouped by query, as (B, C) arrays padded with -1 / -inf."""
    if b == 1:
        return rows[None, :], sc[None, :].astype(np.float32, copy=False)
    counts = np.bincount(qb, minlength=b)
    col = np.arange(len(qb)) - np.repeat(np.cumsum(counts) - counts, counts)
    out_r = np.full((b, int(counts.max())), -1, np.int64)
    out_s = np.full(out_r.shape, -np.inf, np.float32)
    out_r[qb, col], out_s[qb, col] = rows, sc
    return out_r, out_s


def _eps(r: Any, e_q: Any) -> Any:
    """The bound on |exact cosine - filter score| for rows of residual norm r and queries of
    residual norm e_q (broadcast): Cauchy-Schwarz, with ||ĝ_j|| <= 1 + r_j, plus float slack."""
    return r * (1 + e_q) + e_q + _SLACK


def _query_grid(q: np.ndarray) -> tuple[np.ndarray, int, float]:
    """The batch's 7-bit affine grid: (u (B, D) float64 integers in 0..127, zero point, scale)."""
    lo, hi = min(float(q.min()), 0.0), max(float(q.max()), 0.0)
    scale = (hi - lo) / _QMAX or 1.0
    zp = min(max(round(-lo / scale), 0), _QMAX)  # in Python: np.clip on a scalar costs tens of us
    u = np.clip(np.rint(q / scale) + zp, 0, _QMAX).astype(np.float64)
    return u, zp, scale


def _pack(codes: np.ndarray, scales: np.ndarray) -> Any:
    """fbgemm's packed weight for the codes, or None where the kernel is not available."""
    try:
        import torch

        with warnings.catch_warnings():  # quantized tensors are deprecated in torch, still shipped
            warnings.simplefilter("ignore")
            w = torch._make_per_channel_quantized_tensor(
                torch.from_numpy(codes), torch.from_numpy(scales.astype(np.float64)),
                torch.zeros(len(codes), dtype=torch.long), 0)
            return torch.ops.quantized.linear_prepack(w, None)
    except (AttributeError, RuntimeError, NotImplementedError) as exc:
        log.info("no int8 kernel (%s); exact search stays float32", exc)
        return None


def _kernel(grid: np.ndarray, scale: float, zp: int, packed: Any) -> np.ndarray:
    """(B, N) float32: fbgemm's int8 product of the grid query with the codes, scaled back. It is
    given the grid points themselves, so its own quantisation of them is lossless."""
    import torch

    with torch.no_grad():
        out = torch.ops.quantized.linear_with_input_q_dq_qweight_dq_output_fp32(
            torch.from_numpy(grid.astype(np.float32)), float(scale), int(zp), packed)
    return out.numpy()
