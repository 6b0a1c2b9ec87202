"""Inter-annotator agreement on a units x raters label matrix (numpy in, float out).

Every function takes `labels` of shape (n_units, n_raters), any dtype (ints, strings, objects),
with `missing` marking "this rater did not label this unit" (NaN also counts as missing in float
arrays). Categories are nominal: only equality matters.

Degenerate case, the same in all three: when the compared data use ONE category only, observed
agreement is perfect but so is the agreement expected by chance, and every coefficient is 0/0.
We return NaN ("undefined"), not 1.0: with no variation the data cannot tell agreement from
chance (Krippendorff 2011, "Computing Krippendorff's Alpha-Reliability", treats alpha as
undefined there). NaN is also returned when no unit has two ratings to compare.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from cir_core.errors import InputError


def missing_mask(labels: np.ndarray, missing: Any = -1) -> np.ndarray:
    """Boolean (n_units, n_raters): True where the label is `missing` (or NaN)."""
    arr = np.asarray(labels)
    if arr.ndim != 2:
        raise InputError(f"labels must be a 2-D units x raters matrix, got shape {arr.shape}")
    if arr.dtype == object:
        flat = [v is missing or (missing is not None and v == missing)
                or (isinstance(v, float) and np.isnan(v)) for v in arr.ravel()]
        return np.asarray(flat, dtype=bool).reshape(arr.shape)
    mask = np.zeros(arr.shape, dtype=bool) if missing is None else (arr == missing)
    if np.issubdtype(arr.dtype, np.floating):
        mask |= np.isnan(arr)
    return np.asarray(mask, dtype=bool)


def encode(labels: np.ndarray, missing: Any = -1) -> tuple[np.ndarray, int]:
    """Integer codes 0..C-1, -1 where missing; and C.

    Categories are told apart by equality, as in Python: in an object array `1`, `1.0` and
    `np.int64(1)` are one category (they are equal), `"1"` is another. Codes follow the sorted
    category order when the categories sort, else their first appearance (codes never change a
    coefficient)."""
    arr = np.asarray(labels)
    mask = missing_mask(arr, missing)
    codes = np.full(arr.shape, -1, dtype=np.int64)
    present = arr[~mask]
    if present.size == 0:
        return codes, 0
    if arr.dtype != object:
        cats, inv = np.unique(present, return_inverse=True)
        codes[~mask] = inv.ravel()
        return codes, len(cats)
    first: dict[Any, int] = {}
    try:
        for v in present.tolist():
            first.setdefault(v, len(first))
    except TypeError:
        raise InputError("labels must be hashable values (str, int, float, ...)") from None
    keys = list(first)
    try:
        order = sorted(keys)
    except TypeError:  # mixed types that do not compare: first appearance
        order = keys
    rank = {k: i for i, k in enumerate(order)}
    codes[~mask] = np.fromiter((rank[v] for v in present.tolist()), dtype=np.int64, count=present.size)
    return codes, len(keys)


def unit_counts(labels: np.ndarray, missing: Any = -1) -> np.ndarray:
    """(n_units, n_categories) how many raters put each unit in each category."""
    codes, n_cat = encode(labels, missing)
    counts = np.zeros((codes.shape[0], n_cat), dtype=np.int64)
    rows, cols = np.nonzero(codes >= 0)
    np.add.at(counts, (rows, codes[rows, cols]), 1)
    return counts


def cohen_kappa(labels: np.ndarray, missing: Any = -1) -> float:
    """Cohen's kappa for exactly 2 raters, on the units both labelled.

    kappa = (p_o - p_e) / (1 - p_e), p_e from each rater's own marginal distribution.
    """
    codes, n_cat = encode(labels, missing)
    if codes.shape[1] != 2:
        raise InputError(f"Cohen's kappa needs exactly 2 raters (columns), got {codes.shape[1]}")
    both = (codes >= 0).all(axis=1)
    a, b = codes[both, 0], codes[both, 1]
    if a.size == 0 or len(np.union1d(a, b)) < 2:
        return float("nan")  # nothing to compare, or one category only (see module docstring)
    confusion = np.zeros((n_cat, n_cat), dtype=np.float64)
    np.add.at(confusion, (a, b), 1.0)
    confusion /= a.size
    p_o = np.trace(confusion)
    p_e = float(confusion.sum(axis=1) @ confusion.sum(axis=0))
    return float((p_o - p_e) / (1.0 - p_e))


def fleiss_kappa_counts(counts: np.ndarray) -> float:
    """Fleiss' kappa from (n_units, n_categories) counts; every row must sum to the same n >= 2."""
    counts = np.asarray(counts, dtype=np.float64)
    if counts.ndim != 2:
        raise InputError(f"counts must be units x categories, got shape {counts.shape}")
    if counts.shape[0] == 0:
        return float("nan")
    per_unit = counts.sum(axis=1)
    n = per_unit[0]
    if not np.all(per_unit == n) or n < 2:
        raise InputError("Fleiss' kappa needs the same number (>= 2) of ratings on every unit, "
                         f"got {sorted(set(per_unit.astype(int).tolist()))}")
    p_j = counts.sum(axis=0) / counts.sum()
    if np.count_nonzero(p_j) < 2:
        return float("nan")  # one category only (see module docstring)
    p_i = ((counts ** 2).sum(axis=1) - n) / (n * (n - 1))
    p_bar, p_e = float(p_i.mean()), float((p_j ** 2).sum())
    return (p_bar - p_e) / (1.0 - p_e)


def fleiss_kappa(labels: np.ndarray, missing: Any = -1) -> float:
    """Fleiss' kappa on a label matrix; each unit needs the same number of ratings (raters may
    differ between units). Use `equal_count_units` to pick such units from ragged data."""
    return fleiss_kappa_counts(unit_counts(labels, missing))


def equal_count_units(labels: np.ndarray, missing: Any = -1) -> tuple[np.ndarray, int]:
    """Units rated by the most common number m >= 2 of raters (ties: the larger m).

    Returns (boolean unit mask, m); m == 0 and an all-False mask when no unit has 2 ratings.
    """
    n_rated = (~missing_mask(labels, missing)).sum(axis=1)
    values, freq = np.unique(n_rated[n_rated >= 2], return_counts=True)
    if values.size == 0:
        return np.zeros(n_rated.shape, dtype=bool), 0
    m = int(values[freq == freq.max()].max())
    return n_rated == m, m


def krippendorff_alpha_nominal(labels: np.ndarray, missing: Any = -1) -> float:
    """Krippendorff's alpha, nominal metric, missing values allowed.

    Built from the coincidence matrix o_ck = sum_u n_uc * (n_uk - [c == k]) / (m_u - 1) over the
    units with m_u >= 2 values; alpha = 1 - (n - 1) * sum_{c!=k} o_ck / sum_{c!=k} n_c * n_k.
    """
    counts = unit_counts(labels, missing).astype(np.float64)
    m_u = counts.sum(axis=1)
    pairable = m_u >= 2
    counts, m_u = counts[pairable], m_u[pairable]
    if counts.shape[0] == 0:
        return float("nan")
    w = 1.0 / (m_u - 1.0)
    coincidence = (counts * w[:, None]).T @ counts - np.diag((counts * w[:, None]).sum(axis=0))
    n_c = coincidence.sum(axis=1)
    n = n_c.sum()
    expected_disagree = n * n - float((n_c ** 2).sum())
    if expected_disagree == 0:
        return float("nan")  # one category only (see module docstring)
    observed_disagree = float(coincidence.sum() - np.trace(coincidence))
    return 1.0 - (n - 1.0) * observed_disagree / expected_disagree


def kappa_from_table(table: np.ndarray) -> np.ndarray:
    """Cohen's κ from (..., C, C) contingency tables (rows: one rater's category, columns: the
    other's), vectorised over the leading axes (bootstrap resamples); NaN where undefined (no
    pairs, or chance agreement 1: one category only)."""
    t = np.asarray(table, dtype=np.float64)
    n = t.sum(axis=(-2, -1))
    with np.errstate(invalid="ignore", divide="ignore"):
        po = np.trace(t, axis1=-2, axis2=-1) / n
        pe = (t.sum(axis=-1) * t.sum(axis=-2)).sum(axis=-1) / n ** 2
        return np.where((n > 0) & (pe < 1), (po - pe) / (1 - pe), np.nan)
