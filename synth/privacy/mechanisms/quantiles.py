"""Differentially private quantiles inside public bounds, and private bounds when none are public.

* ``dp_quantiles``: each quantile by the exponential mechanism over a fixed grid of candidate
  points in [lower, upper] (every integer, for integer columns of up to 10^6 values), epsilon
  split evenly over the quantiles.
* ``private_bounds``: a noisy histogram of the values over fixed log-scale magnitude buckets
  ({0}, +-[2^k, 2^(k+1))), and the outermost buckets whose noisy count reaches a threshold.

Both read the data only through their noise, charge an accountant when given one (checked
before sampling, charged at release), and take ``rng`` as every mechanism does.
"""

from __future__ import annotations

import math
from fractions import Fraction
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from synth.privacy.accounting import split_epsilon
from synth.privacy.mechanisms.discrete import discrete_gaussian_noise, discrete_laplace_noise
from synth.privacy.mechanisms.exponential import exponential
from synth.privacy.mechanisms.partition import gaussian_partition_threshold, partition_threshold
from synth.privacy.rng import make_rng
from synth.privacy.validation import check_epsilon, check_real

if TYPE_CHECKING:
    from synth.privacy.accounting import Accountant

__all__ = ["dp_quantiles", "private_bounds", "private_bounds_zcdp", "noisy_magnitudes", "bounds_from_magnitudes",
           "bucket_index", "magnitude_threshold", "passing_buckets", "BOUNDS_BETA", "bucket_edges"]

#: Candidate points: every integer of [lower, upper] up to this many, else a grid of about as many.
INTEGER_CANDIDATES = 1_000_000
#: Candidate points for real columns: an evenly spaced grid of this many intervals (plus 1 points).
REAL_INTERVALS = 10_000
#: Integer bounds beyond this cannot be held by the int64 results.
_INTEGER_LIMIT = 2**62

#: The magnitude buckets of ``private_bounds``: +-[2^k, 2^(k+1)) for k in this range, and one
#: bucket for |v| < 2^k_min (0 itself for integers). Fixed in advance, never from the data.
REAL_EXPONENTS = (-20, 62)
INTEGER_EXPONENTS = (0, 61)
#: ``private_bounds``' default threshold: every bucket holding at most one row passes with
#: probability at most BOUNDS_BETA / (number of buckets), so none does with probability
#: 1 - BOUNDS_BETA or more (union bound).
BOUNDS_BETA = 1e-3


# -- validation --------------------------------------------------------------------------------


def _check_values(values: object, name: str = "values") -> np.ndarray:
    array = np.asarray(values)
    numeric = np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)
    if array.dtype == bool or not numeric:
        raise TypeError(f"{name} must be numbers, got dtype {array.dtype}")
    if array.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array, got shape {array.shape}")
    array = array.astype(np.float64)
    if np.isnan(array).any():  # the caller's contract (missing values are its to handle), like a dtype
        raise ValueError(f"{name} must not hold NaN: drop missing values first")
    return array


def _check_bool(value: object, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} ({value!r}) must be True or False, not {type(value).__name__}")
    return bool(value)


def _check_bound(value: object, name: str, integer: bool) -> float:
    number = check_real(value, name)
    if not math.isfinite(number):
        raise ValueError(f"{name} ({value!r}) must be finite")
    if integer:
        if not number.is_integer():
            raise ValueError(f"{name} ({value!r}) must be a whole number for an integer column")
        if abs(number) > _INTEGER_LIMIT:
            raise ValueError(f"{name} ({value!r}) must be within +-2^62 for an integer column")
    return number


def _check_quantiles(quantiles: object) -> list[float]:
    if isinstance(quantiles, (str, bytes)) or not isinstance(quantiles, (Sequence, np.ndarray)):
        raise TypeError(f"quantiles must be a sequence of numbers in [0, 1], not {type(quantiles).__name__}")
    out = []
    for i, q in enumerate(quantiles):
        number = check_real(q, f"quantiles[{i}]")
        if not 0 <= number <= 1:
            raise ValueError(f"quantiles[{i}] ({q!r}) must be in [0, 1]")
        out.append(number)
    if not out:
        raise ValueError("quantiles must not be empty")
    return out


# -- quantiles ----------------------------------------------------------------------------------


def _candidates(lower: float, upper: float, integer: bool) -> np.ndarray:
    """The fixed, public candidate points (sorted, float64): depend on the bounds only."""
    if integer:
        lo, hi = int(lower), int(upper)
        if hi - lo + 1 <= INTEGER_CANDIDATES:
            return np.arange(lo, hi + 1, dtype=np.float64)
        grid = np.round(np.linspace(lower, upper, INTEGER_CANDIDATES))
    else:
        grid = np.linspace(lower, upper, REAL_INTERVALS + 1)
    extra = [lower, upper] + ([0.0] if lower < 0 < upper else [])  # 0: where spikes usually are
    return np.union1d(grid, np.array(extra))


def _sensitivity(q: float) -> float:
    """The sensitivity of the utility of quantile q under adding or removing one row (see
    ``dp_quantiles``): max(q, 1 - q), at most 1."""
    return max(q, 1.0 - q)


def _scores(below: np.ndarray, at_or_below: np.ndarray, n: int, q: float) -> np.ndarray:
    """u(c) = -max(0, #{v < c} - q n, q n - #{v <= c}): minus the distance from q n to the
    interval of ranks that c takes, [#{v < c}, #{v <= c}]."""
    target = q * n
    return -np.maximum(0.0, np.maximum(below - target, target - at_or_below))


def dp_quantiles(
    values: np.ndarray,
    quantiles: Sequence[float],
    lower: float,
    upper: float,
    epsilon: float,
    *,
    integer: bool = False,
    rng: np.random.Generator | int | None = None,
    accountant: Accountant | None = None,
    note: str = "",
) -> np.ndarray:
    """The ``quantiles`` of ``values`` inside the public bounds [lower, upper], epsilon-DP.

    Values outside the bounds (infinities too) are clipped to them first (the bounds are
    public; clipping is a row-by-row map, so it changes nothing in the argument below). NaN is
    refused: drop missing values before. Each quantile q is chosen by
    the exponential mechanism (``exponential``, Gumbel-max) with epsilon / len(quantiles)
    (basic composition; the accountant is charged epsilon once) over fixed candidate points:

    * ``integer=True``: every integer in [lower, upper] when there are at most 10^6 of them,
      else about 10^6 evenly spaced integers; the bounds must be whole numbers and the result
      is an int64 array;
    * otherwise an evenly spaced grid of 10^4 intervals (10,001 points, ``lower`` and
      ``upper`` among them); a float64 array.

    Either way 0 is added when it lies strictly inside the bounds (a common spike). All of
    this depends on the bounds only, never on the data.

    The utility of a candidate c for quantile q, with n rows, L = #{v < c} and
    R = #{v <= c} (the ranks that c takes):

        u(c) = -max(0, L - q n, q n - R),

    minus the distance from q n to [L, R]: 0 when c is a q-quantile in the usual sense
    (F(c-) <= q <= F(c)). On discrete data this matters: with 90% of the rows at 0, c = 0 has
    u = 0 for every q <= 0.9, so every such quantile is 0 (repeated values in the result are
    meaningful), where -|L - q n| would move most of them to the next candidate above 0.
    n is not public, but u needs no public n; in terms of L, E = #{v = c} and
    G = #{v > c} (n = L + E + G):

        L - q n = (1 - q) L - q E - q G,     q n - R = -(1 - q) L - (1 - q) E + q G.

    Adding one row changes exactly one of L, E, G by 1, so each of the two terms moves by q or
    by 1 - q, and so does their maximum with 0 (the maximum of functions that each move by at
    most s moves by at most s). Removing a row is the same, reversed. The sensitivity is
    therefore max(q, 1 - q) <= 1 (1/2 for the median), and the exponential mechanism with that
    sensitivity, P(c) ~ exp(epsilon_q u(c) / (2 max(q, 1 - q))), is epsilon_q-DP.

    The candidates are all scored with ``np.searchsorted`` on the sorted values (one pass for
    L, one for R, shared by every quantile). The chosen points are returned sorted
    (non-decreasing).
    """
    array = _check_values(values)
    qs = _check_quantiles(quantiles)
    integer = _check_bool(integer, "integer")
    lower = _check_bound(lower, "lower", integer)
    upper = _check_bound(upper, "upper", integer)
    if lower > upper:
        raise ValueError(f"lower ({lower!r}) must be <= upper ({upper!r})")
    epsilon = check_epsilon(epsilon)
    share = split_epsilon(epsilon, len(qs))
    check_epsilon(share, "epsilon / len(quantiles)")
    if accountant is not None:
        accountant.check(epsilon, mechanism="dp_quantiles", note=note)
    generator = make_rng(rng)
    candidates = _candidates(lower, upper, integer)
    ordered = np.sort(np.clip(array, lower, upper))
    below = np.searchsorted(ordered, candidates, side="left").astype(np.float64)
    at_or_below = np.searchsorted(ordered, candidates, side="right").astype(np.float64)
    n = ordered.size
    chosen = np.array([
        candidates[exponential(_scores(below, at_or_below, n, q), share, _sensitivity(q), generator)]
        for q in qs
    ])
    if accountant is not None:
        accountant.spend(epsilon, mechanism="dp_quantiles", note=note)
    chosen.sort()
    return np.rint(chosen).astype(np.int64) if integer else chosen


# -- bounds -------------------------------------------------------------------------------------


def _exponents(integer: bool) -> tuple[int, int]:
    return INTEGER_EXPONENTS if integer else REAL_EXPONENTS


def _bucket_count(integer: bool) -> int:
    k_min, k_max = _exponents(integer)
    return 2 * (k_max - k_min + 1) + 1


def _buckets(values: np.ndarray, integer: bool) -> np.ndarray:
    """Each value's bucket index; buckets run from the most negative to the most positive:
    -[2^k_max, 2^(k_max+1)), ..., -[2^k_min, 2^(k_min+1)), the zero bucket, +[2^k_min, ...), ...

    A value's magnitude bucket comes from ``np.frexp`` (exact: |v| = m 2^e with 1/2 <= m < 1,
    so |v| is in [2^(e-1), 2^e)); magnitudes past the top bucket (infinities too) go into it."""
    k_min, k_max = _exponents(integer)
    m = k_max - k_min + 1  # buckets per sign
    magnitude = np.abs(values)
    _, e = np.frexp(magnitude)
    k = np.where(np.isinf(magnitude), k_max, np.clip(e.astype(np.int64) - 1, k_min, k_max))
    index = np.where(values > 0, m + 1 + (k - k_min), k_max - k)
    return np.where(magnitude < math.ldexp(1.0, k_min), m, index)


def bucket_edges(index: int, integer: bool = False) -> tuple[float, float]:
    """The edges (lo, hi) of bucket ``index`` of ``private_bounds``: every value in it lies in
    [lo, hi]. The zero bucket is (0, 0) (for real columns it holds |v| < 2^-20)."""
    k_min, k_max = _exponents(integer)
    m = k_max - k_min + 1
    index = int(index)
    if index < m:
        k = k_max - index
        lo, hi = -math.ldexp(1.0, k + 1), -math.ldexp(1.0, k)
    elif index == m:
        lo, hi = 0.0, 0.0
    else:
        k = index - m - 1 + k_min
        lo, hi = math.ldexp(1.0, k), math.ldexp(1.0, k + 1)
    return (int(lo), int(hi)) if integer else (lo, hi)


def private_bounds(
    values: np.ndarray,
    epsilon: float,
    *,
    integer: bool = False,
    rng: np.random.Generator | int | None = None,
    accountant: Accountant | None = None,
    note: str = "",
    threshold: float | None = None,
) -> tuple[float, float] | None:
    """Public bounds (lower, upper) for a column that has none, epsilon-DP (pure).

    A histogram of the values over fixed magnitude buckets, each count plus exact discrete
    Laplace noise (parameter epsilon, sensitivity 1); the buckets are {|v| < 2^k_min} (the zero
    bucket), +[2^k, 2^(k+1)) and -[2^k, 2^(k+1)) for k in k_min..k_max: -20..62 for real
    columns (167 buckets), 0..61 for integer columns (125 buckets: |v| < 1 counts as 0, so the
    values had better be whole numbers, but nothing fails if a few are not). Magnitudes past
    the top bucket (infinities too) count in it. NaN is refused (drop missing values before);
    nothing else in the data makes it fail.

    The result is (the lower edge of the lowest bucket whose noisy count is at least
    ``threshold``, the upper edge of the highest such bucket): a closed interval holding every
    value of those buckets (the zero bucket's edges are 0 and 0: its values are within 2^k_min
    of them), integers for ``integer=True``; None when no bucket reaches the threshold (a
    column too small, or too spread, for this epsilon). Values outside it (buckets that did not
    pass, or magnitudes past the top bucket) are for the caller to clip, and to say so.

    Privacy: pure epsilon-DP, charged as (epsilon, 0). The buckets are fixed in advance (they
    depend on ``integer`` only), so every bucket always has a noisy count, whatever the data:
    no bucket's presence is released without noise, unlike partition selection over values
    taken from the data. One row lies in exactly one bucket, so adding or removing it moves the
    histogram by 1 in L1, and the noisy histogram is epsilon-DP; the bounds are a function of
    it and of public constants (post-processing). The threshold is therefore free to choose for
    utility; it costs no delta.

    Default threshold: ``partition_threshold(epsilon, BOUNDS_BETA / B)`` with B the number of
    buckets and BOUNDS_BETA = 1e-3: a bucket holding at most one row passes with probability
    at most 1e-3 / B, so with probability at least 0.999 no such bucket does (union bound),
    and the bounds are neither stretched to an empty bucket (which could lie anywhere up to
    2^63: an absurd range) nor to a single outlier. The price: a tail of fewer than about
    ln(B / 1e-3) / epsilon rows (12 at epsilon = 1, 120 at 0.1) is likely left outside, and
    clipped by whoever uses the bounds.
    """
    array = _check_values(values)
    integer = _check_bool(integer, "integer")
    epsilon = check_epsilon(epsilon)
    buckets = _bucket_count(integer)
    threshold = _threshold(threshold) if threshold is not None else partition_threshold(epsilon, BOUNDS_BETA / buckets)
    if accountant is not None:
        accountant.check(epsilon, mechanism="private_bounds", note=note)
    noisy = _bucket_counts(array, integer) + discrete_laplace_noise(buckets, epsilon, 1, make_rng(rng))
    if accountant is not None:
        accountant.spend(epsilon, mechanism="private_bounds", note=note)
    return _passing_bounds(noisy, threshold, integer)


def private_bounds_zcdp(
    values: np.ndarray,
    rho: float,
    *,
    integer: bool = False,
    rng: np.random.Generator | int | None = None,
    accountant: Accountant | None = None,
    note: str = "",
    threshold: float | None = None,
) -> tuple[float, float] | None:
    """``private_bounds`` with exact discrete Gaussian noise (sigma2 = 1 / (2 rho)) instead of
    Laplace: rho-zCDP, charged as rho. The same fixed buckets, so every bucket has a noisy count
    whatever the data; one row lies in one bucket, so the histogram moves by 1 in L2 (and the
    bounds are post-processing). Over many columns the rhos add, so each column's noise grows
    with the square root of their number, not linearly. Threshold: the least count a bucket
    holding one row passes with probability at most ``BOUNDS_BETA`` / B
    (``gaussian_partition_threshold``), as for the Laplace form (``threshold`` sets another:
    it costs nothing, every bucket being noised)."""
    noisy = noisy_magnitudes(values, rho, integer=integer, rng=rng, accountant=accountant, note=note)
    return bounds_from_magnitudes(noisy, rho, integer=integer, threshold=threshold)


def noisy_magnitudes(
    values: np.ndarray,
    rho: float,
    *,
    integer: bool = False,
    rng: np.random.Generator | int | None = None,
    accountant: Accountant | None = None,
    note: str = "",
) -> np.ndarray:
    """The values' counts over the fixed magnitude buckets (``bucket_index``) plus exact
    discrete Gaussian noise with sigma2 = 1 / (2 rho): rho-zCDP, charged as
    ``private_bounds_zcdp`` (one row lies in one bucket)."""
    array = _check_values(values)
    integer = _check_bool(integer, "integer")
    rho = check_epsilon(rho, "rho")
    if accountant is not None:
        accountant.check(rho=rho, mechanism="private_bounds_zcdp", note=note)
    noisy = _bucket_counts(array, integer) + discrete_gaussian_noise(_bucket_count(integer), _sigma2(rho),
                                                                     make_rng(rng))
    if accountant is not None:
        accountant.spend(rho=rho, mechanism="private_bounds_zcdp", note=note)
    return noisy


def bounds_from_magnitudes(noisy: np.ndarray, rho: float, *, integer: bool = False,
                           threshold: float | None = None) -> tuple[float, float] | None:
    """The bounds ``private_bounds_zcdp`` reads off a noisy magnitude histogram released at
    ``rho`` (post-processing): the outer edges of the outermost buckets that reach the
    threshold, None when none does."""
    threshold = magnitude_threshold(rho, integer) if threshold is None else _threshold(threshold)
    return _passing_bounds(np.asarray(noisy), threshold, integer)


def magnitude_threshold(rho: float, integer: bool = False) -> int:
    """The least noisy count at which a bucket of ``noisy_magnitudes`` released at ``rho``
    passes: one holding a single row passes with probability at most ``BOUNDS_BETA`` / B."""
    return gaussian_partition_threshold(_sigma2(rho), BOUNDS_BETA / _bucket_count(bool(integer)))


def bucket_index(values: np.ndarray, integer: bool = False) -> np.ndarray:
    """Each value's magnitude bucket (the index into ``noisy_magnitudes``' histogram)."""
    return _buckets(np.asarray(values, dtype=np.float64), bool(integer))


def _sigma2(rho: float) -> Fraction:
    return Fraction(1) / (2 * Fraction(rho))


def _threshold(threshold: object) -> float:
    """A caller's threshold for the bounds: a finite number."""
    value = check_real(threshold, "threshold")
    if not math.isfinite(value):
        raise ValueError(f"threshold ({threshold!r}) must be finite")
    return value


def _bucket_counts(values: np.ndarray, integer: bool) -> np.ndarray:
    """How many values fall in each of the fixed magnitude buckets."""
    return np.bincount(_buckets(values, integer), minlength=_bucket_count(integer))


def passing_buckets(noisy: np.ndarray, threshold: float) -> tuple[int, int] | None:
    """The lowest and highest buckets of a noisy magnitude histogram whose noisy count reaches
    ``threshold`` (indices, as ``bucket_edges`` takes them), or None when none does
    (post-processing of the noisy histogram)."""
    passing = np.flatnonzero(np.asarray(noisy) >= threshold)
    if passing.size == 0:
        return None
    return int(passing[0]), int(passing[-1])


def _passing_bounds(noisy: np.ndarray, threshold: float, integer: bool) -> tuple[float, float] | None:
    """The outer edges of ``passing_buckets``, or None when no bucket passes."""
    found = passing_buckets(noisy, threshold)
    if found is None:
        return None
    return bucket_edges(found[0], integer)[0], bucket_edges(found[1], integer)[1]