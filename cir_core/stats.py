"""Bootstrap confidence intervals over queries (numpy in, numbers out).

The unit of resampling is the QUERY: `values[i]` is one query's score, already averaged over its
items and annotators. Judgments of one query are correlated (same reference, same edit), so
resampling judgments would give intervals that are too narrow.

The resamples depend only on (number of queries, n_boot, seed), drawn from a fresh
`numpy.random.default_rng(seed)`: the same seed and values give the same interval whatever was
computed before, and two intervals over equally many queries use the same draws.

Two intervals: the percentile interval (default; nominal 95 % coverage from about 30 queries
on, too narrow below: about 0.91 at 12 queries) and BCa (`method="bca"`: bias-corrected and
accelerated, Efron 1987, acceleration from the jackknife), which corrects for skew and narrows
the small-sample gap (bench/bootstrap_coverage.py measures both). With fewer than
`MIN_QUERIES_TRUSTED` queries neither should be read as a 95 % interval; the report says so.

Resampled means are dot products of float counts and values, so an exact tie (a resample whose
mean difference is 0 in exact arithmetic) can come out as ±1e-17: values within the rounding
bound of the sum are snapped to 0 before they are compared or ranked.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from statistics import NormalDist

import numpy as np

from cir_core.errors import InputError
from cir_core.memo import LRU

# Draw resamples per block so n_boot x n_queries int64 indices never sit in memory at once.
_BLOCK_ELEMS = 4_000_000
_CACHE_BYTES = 64 * 2**20
_CACHE: LRU[tuple[int, int, int], np.ndarray] = LRU(_CACHE_BYTES, weight=lambda a: a.nbytes)
METHODS = ("percentile", "bca")
MIN_QUERIES_TRUSTED = 30  # below this, bootstrap intervals over queries under-cover (see above)


@dataclass(frozen=True)
class Interval:
    """A point estimate (mean over queries) and its percentile bootstrap interval."""

    mean: float
    lo: float
    hi: float
    n: int

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)


@dataclass(frozen=True)
class PairedDiff:
    """mean(a - b) over the shared queries, its interval, and P_boot(diff > 0)."""

    diff: float
    lo: float
    hi: float
    frac_positive: float
    n: int

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)


def _check(values: np.ndarray, name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise InputError(f"{name} must be 1-D (one value per query), got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise InputError(f"{name} has NaN/inf; drop queries without a value first")
    return arr


def _check_boot(n_boot: int, level: float, method: str = "percentile") -> None:
    if not isinstance(n_boot, int) or isinstance(n_boot, bool) or n_boot < 1:
        raise InputError(f"n_boot must be a positive int, got {n_boot!r}")
    if not 0.0 < level < 1.0:
        raise InputError(f"level must be in (0, 1), got {level!r}")
    if method not in METHODS:
        raise InputError(f"method must be one of {METHODS}, got {method!r}")


def _snap(samples: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Resampled means with the float noise of an exact 0 removed: |x| below the rounding bound
    of an n-term mean of `values` becomes 0.0 (a true non-zero mean of data on any grid of
    practical size is far above it)."""
    n = max(values.size, 1)
    tol = 4.0 * n * np.finfo(np.float64).eps * float(np.max(np.abs(values), initial=0.0))
    out = samples.copy()
    out[np.abs(out) <= tol] = 0.0
    return out


def _draw_counts(n: int, n_boot: int, seed: int) -> np.ndarray:
    """(n_boot, n) float64: how often each query is drawn in each resample."""
    rng = np.random.default_rng(seed)
    out = np.empty((n_boot, n), dtype=np.float64)
    step = max(1, _BLOCK_ELEMS // n)
    for start in range(0, n_boot, step):
        rows = min(n_boot, start + step) - start
        idx = rng.integers(0, n, size=(rows, n)) + (np.arange(rows) * n)[:, None]
        out[start:start + rows] = np.bincount(idx.ravel(), minlength=rows * n).reshape(rows, n)
    out.setflags(write=False)
    return out


def _resample_counts(n: int, n_boot: int, seed: int) -> np.ndarray:
    """`_draw_counts`, cached: a report asks for hundreds of intervals with the same seed over a
    few different query counts; they share the draws, and each interval is one mat-vec product.
    The cache keeps the most recent draws up to _CACHE_BYTES in total."""
    return _CACHE.get_or_make((n, n_boot, seed), lambda: _draw_counts(n, n_boot, seed))


def bootstrap_means(values: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """(n_boot,) means of `values` resampled with replacement (n draws each)."""
    arr = _check(values, "values")
    _check_boot(n_boot, 0.95)
    if arr.size == 0:
        return np.full(n_boot, np.nan)
    return _resample_counts(arr.size, n_boot, int(seed)) @ arr / arr.size


def resampled_sums(per_query: np.ndarray, n_boot: int = 2000, seed: int = 0) -> np.ndarray:
    """(n_boot, c) column sums of a (queries, c) array under the same query resamples as
    `bootstrap_ci`: for statistics that are not a mean of one value per query (a ratio of
    counts, Cohen's κ from per-query confusion counts), computed from the resampled sums."""
    arr = np.asarray(per_query, dtype=np.float64)
    if arr.ndim != 2 or not np.isfinite(arr).all():
        raise InputError(f"per_query must be a finite (queries, columns) array, got shape {arr.shape}")
    _check_boot(n_boot, 0.95)
    if arr.shape[0] == 0:
        return np.full((n_boot, arr.shape[1]), np.nan)
    return _resample_counts(arr.shape[0], n_boot, int(seed)) @ arr


def percentile_interval(samples: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """The percentile interval of bootstrap `samples`, NaNs (undefined resamples) left out."""
    s = np.asarray(samples, dtype=np.float64)
    s = s[np.isfinite(s)]
    return (float("nan"), float("nan")) if s.size == 0 else _percentiles(s, level)


def _percentiles(samples: np.ndarray, level: float) -> tuple[float, float]:
    tail = (1.0 - level) / 2.0
    lo, hi = np.quantile(samples, [tail, 1.0 - tail])
    return float(lo), float(hi)


def _bca(values: np.ndarray, samples: np.ndarray, level: float) -> tuple[float, float]:
    """The BCa interval of the mean of `values` from its bootstrap `samples`."""
    n = values.size
    theta = float(values.mean())
    if n < 2 or np.all(values == values[0]):
        return theta, theta
    nd = NormalDist()
    b = samples.size
    # Bias correction: where the estimate sits among the resamples (ties count half).
    p0 = (np.count_nonzero(samples < theta) + 0.5 * np.count_nonzero(samples == theta)) / b
    z0 = nd.inv_cdf(min(max(p0, 0.5 / b), 1.0 - 0.5 / b))
    # Acceleration: the skew of the jackknife means.
    jack = (values.sum() - values) / (n - 1)
    d = jack.mean() - jack
    denom = 6.0 * float((d ** 2).sum()) ** 1.5
    a = float((d ** 3).sum()) / denom if denom > 0 else 0.0
    tail = (1.0 - level) / 2.0
    qs = []
    for z in (nd.inv_cdf(tail), nd.inv_cdf(1.0 - tail)):
        shift = 1.0 - a * (z0 + z)
        q = nd.cdf(z0 + (z0 + z) / shift) if shift > 0 else (0.0 if z < 0 else 1.0)
        qs.append(min(max(q, 0.0), 1.0))
    lo, hi = np.quantile(samples, qs)
    return float(lo), float(hi)


def _interval(values: np.ndarray, samples: np.ndarray, level: float, method: str) -> tuple[float, float]:
    return _bca(values, samples, level) if method == "bca" else _percentiles(samples, level)


def bootstrap_ci(values: np.ndarray, n_boot: int = 2000, seed: int = 0,
                 level: float = 0.95, method: str = "percentile") -> Interval:
    """Mean of per-query `values` with a bootstrap interval, percentile or BCa (NaNs when empty)."""
    arr = _check(values, "values")
    _check_boot(n_boot, level, method)
    if arr.size == 0:
        return Interval(float("nan"), float("nan"), float("nan"), 0)
    samples = bootstrap_means(arr, n_boot, seed)
    lo, hi = _interval(arr, samples, level, method)
    return Interval(float(arr.mean()), lo, hi, int(arr.size))


def paired_bootstrap(a: np.ndarray, b: np.ndarray, n_boot: int = 2000, seed: int = 0,
                     level: float = 0.95, method: str = "percentile") -> PairedDiff:
    """Difference of two methods' means on the SAME queries (a[i], b[i] = query i).

    Queries are resampled together, so the per-query pairing (and its correlation) is kept:
    the interval is on mean(a - b), and `frac_positive` is the share of resamples whose mean
    difference is > 0 — an exact tie (0) is not positive, whatever the float rounding says.
    """
    x, y = _check(a, "a"), _check(b, "b")
    if x.shape != y.shape:
        raise InputError(f"paired values need the same queries: {x.size} vs {y.size}")
    _check_boot(n_boot, level, method)
    if x.size == 0:
        return PairedDiff(float("nan"), float("nan"), float("nan"), float("nan"), 0)
    d = x - y
    samples = _snap(bootstrap_means(d, n_boot, seed), d)
    lo, hi = _interval(d, samples, level, method)
    diff = float(_snap(np.array([d.mean()]), d)[0])
    return PairedDiff(diff, lo, hi, float((samples > 0).mean()), int(x.size))


def rate_by_group(query: np.ndarray, group: np.ndarray, ok: np.ndarray, n_groups: int,
                  n_boot: int = 2000, seed: int = 0, level: float = 0.95) -> list[dict]:
    """Per group g in 0..n_groups-1 of observations (`query[i]` the query observation i belongs
    to, `group[i]` its group, `ok[i]` its outcome): how many, the share ok and its query-level
    bootstrap percentile interval (a query's observations are resampled together, so a query
    with many observations does not narrow the interval as if they were independent)."""
    _check_boot(n_boot, level)
    qi, gi = np.asarray(query).reshape(-1), np.asarray(group).reshape(-1)
    hit = np.asarray(ok, dtype=bool).reshape(-1)
    if not (qi.shape == gi.shape == hit.shape) or (gi.size and (gi.min() < 0 or gi.max() >= n_groups)):
        raise InputError(f"query, group and ok must be equal-length with groups in [0, {n_groups}): "
                         f"{qi.shape}, {gi.shape}, {hit.shape}")
    queries, pos = np.unique(qi, return_inverse=True)
    counts = np.zeros((len(queries), 2 * n_groups))  # per query: observations, then ok, per group
    np.add.at(counts, (pos, gi), 1)
    np.add.at(counts, (pos, n_groups + gi), hit.astype(float))
    sums = resampled_sums(counts, n_boot, seed)
    with np.errstate(invalid="ignore", divide="ignore"):
        boot = sums[:, n_groups:] / sums[:, :n_groups]
    out = []
    for g in range(n_groups):
        n, k = counts[:, g].sum(), counts[:, n_groups + g].sum()
        lo, hi = percentile_interval(boot[:, g], level) if n else (np.nan, np.nan)
        out.append({"n": int(n), "rate": round(float(k / n), 4) if n else None,
                    "ci95": [round(float(lo), 4), round(float(hi), 4)] if n else None})
    return out


def wilson(correct: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson's score interval for a proportion correct / n (NaNs when n is 0): for counts that
    are independent trials (an annotator's gold answers), not for per-query means."""
    if n == 0:
        return float("nan"), float("nan")
    p = correct / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * float(np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))) / d
    return c - h, c + h


def bootstrap_median(values: np.ndarray, n_boot: int = 2000, seed: int = 0,
                     level: float = 0.95) -> Interval:
    """Median of `values` (independent observations, e.g. one annotator's times per pair) with a
    percentile bootstrap interval (NaNs when empty)."""
    arr = _check(values, "values")
    _check_boot(n_boot, level)
    if arr.size == 0:
        return Interval(float("nan"), float("nan"), float("nan"), 0)
    idx = np.random.default_rng(int(seed)).integers(0, arr.size, size=(n_boot, arr.size))
    meds = np.median(arr[idx], axis=1)
    lo, hi = _percentiles(meds, level)
    return Interval(float(np.median(arr)), lo, hi, int(arr.size))
