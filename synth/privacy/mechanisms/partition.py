"""Differentially private partition selection: which values of a column to release.

A column's values are not public: releasing the list of values that occur in the data would
tell that someone holds each of them. ``partition_selection`` releases only the values whose
count plus exact discrete Laplace noise reaches a threshold set by delta, with their noisy
counts (Korolova et al. 2009; Gopi et al. 2020; Google's DP building blocks).
``partition_threshold`` is that threshold.

``gaussian_partition_selection`` is the same with exact discrete Gaussian noise, charged as
rho-zCDP plus (0, delta): over many columns the rhos compose in the square root (one row moves
one count in each of d columns, an L2 sensitivity of sqrt(d)), so at a fixed total
(epsilon, delta) each column gets far less noise, and a lower threshold
(``gaussian_partition_threshold``), than an even split of epsilon over Laplace columns.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Hashable, Mapping
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np
from scipy.special import log_ndtr

from synth.privacy.accounting import Charge
from synth.privacy.mechanisms.discrete import (
    discrete_gaussian_noise,
    discrete_laplace_noise,
    gaussian_parameters,
    laplace_ratio,
)
from synth.privacy.rng import make_rng
from synth.privacy.validation import check_epsilon, check_real

if TYPE_CHECKING:
    from synth.privacy.accounting import Accountant

__all__ = ["partition_threshold", "partition_selection", "gaussian_partition_threshold",
           "gaussian_partition_selection"]

#: Relative room in the threshold's float comparison: a delta within rounding of a boundary
#: gets the larger threshold (more conservative), never the smaller.
_ROOM = 1e-12


def _check_partition_delta(delta: object) -> float:
    number = check_real(delta, "delta")
    if not 0 < number < 1:
        raise ValueError(f"delta ({delta!r}) must be in (0, 1): partition selection needs delta > 0 "
                         "(with delta = 0 no value could ever be released)")
    return number


def partition_threshold(epsilon: float, delta: float) -> int:
    """The integer threshold tau for partition selection with discrete Laplace noise.

    The noise X has P(X = x) proportional to exp(-e |x|), where e is the parameter the sampler
    really uses: ``laplace_ratio(epsilon)``, the largest multiple of 2^-40 not above epsilon
    (e = epsilon for epsilon = 1, 0.5, ...; e slightly below epsilon otherwise, which means
    heavier tails, so the threshold is computed with e, never with the larger epsilon).

    Derivation. With r = e^-e the normalizer is sum_x r^|x| = (1 + r) / (1 - r), so for k >= 1

        P(X >= k) = (1 - r) / (1 + r) * sum_{x >= k} r^x = r^k / (1 + r).

    A value held by exactly one row is released when 1 + X >= tau, i.e. X >= tau - 1; it must
    be released with probability at most delta:

        r^(tau - 1) / (1 + r) <= delta  <=>  tau - 1 >= (ln(1 / delta) - ln(1 + r)) / e,

    so tau = 1 + max(1, ceil((ln(1 / delta) - ln(1 + r)) / e)): the smallest integer that
    works, with tau - 1 >= 1 (a delta so large that it allows tau - 1 <= 0 is far outside any
    use; the threshold stays at 2 then, which is still within delta). The ceiling is taken on
    a float with a relative room of 1e-12, so a delta within rounding of a boundary gets the
    threshold one higher (more conservative), never one lower.

    >>> partition_threshold(1.0, 1e-6)
    15
    >>> partition_threshold(0.1, 1e-9)
    202
    """
    epsilon = check_epsilon(epsilon)
    delta = _check_partition_delta(delta)
    return _threshold(*laplace_ratio(epsilon), delta)


def _threshold(s: int, t: int, delta: float) -> int:
    """tau for noise P(x) ~ exp(-|x| s / t): see ``partition_threshold``."""
    e = float(Fraction(s, t))
    needed = (-math.log(delta) - math.log1p(math.exp(-e))) / e  # tau - 1 must be >= this
    k = max(1, math.ceil(needed * (1 + _ROOM) + _ROOM))
    return 1 + k


def _check_counts(counts: object) -> tuple[list, np.ndarray]:
    if not isinstance(counts, Mapping):
        raise TypeError(f"counts must be a mapping from value to count (a dict), not {type(counts).__name__}")
    keys = list(counts.keys())
    values = np.empty(len(keys), dtype=np.int64)
    for i, key in enumerate(keys):
        count = counts[key]
        if isinstance(count, (bool, np.bool_)) or not isinstance(count, numbers.Integral):
            raise TypeError(f"counts[{key!r}] ({count!r}) must be an integer (a number of rows), "
                            f"not {type(count).__name__}")
        if count < 0:
            raise ValueError(f"counts[{key!r}] ({count!r}) must be >= 0 (a number of rows)")
        if count >= 2**62:
            raise ValueError(f"counts[{key!r}] ({count!r}) must be below 2^62")
        values[i] = int(count)
    return keys, values


def _order_key(item: tuple[Hashable, int]) -> tuple:
    """Noisy count descending, then the key's string form (then its type and repr, for keys
    whose ``str`` coincide): never the input's order."""
    key, noisy = item
    return (-noisy, str(key), type(key).__name__, repr(key))


def partition_selection(
    counts: Mapping[Hashable, int],
    epsilon: float,
    delta: float,
    *,
    rng: np.random.Generator | int | None = None,
    accountant: Accountant | None = None,
    note: str = "",
) -> dict[Hashable, int]:
    """The values whose noisy count reaches ``partition_threshold(epsilon, delta)``, with their
    noisy counts: (epsilon, delta)-DP.

    ``counts`` maps each value of a column that the data holds to its number of rows (values
    that no row holds are simply absent; a value given with count 0 is treated like any other).
    Every row holds exactly one value, so adding or removing a row changes one count by 1
    (or adds or removes a value of count 1). Each count gets independent exact discrete
    Laplace noise X, P(X = x) ~ exp(-epsilon |x|) (sensitivity 1); the values with
    count + X >= tau are returned, with count + X, ordered by noisy count (descending), ties by
    the value's string form: the result carries nothing of the input's order.

    Why (epsilon, delta)-DP. Let D' be D plus one row holding value v (the other direction is
    the same argument reversed). If v is in both, only v's count moves, by 1: the noisy counts
    are epsilon-DP (discrete Laplace, sensitivity 1), and thresholding them is post-processing.
    If v is in D' only (count 1), the outputs agree except when v is released under D', which
    happens with probability p = P(1 + X >= tau) <= delta; so for every set of outputs E,
    P[D' in E] <= P[D in E] + delta and P[D in E] <= P[D' in E] + delta (the output on D' is
    the output on D, with v added with probability p). Both cases give
    P[M(D) in E] <= e^epsilon P[M(D') in E] + delta.

    With an ``accountant``, (epsilon, delta) is checked before sampling and charged once at
    release.

    >>> partition_selection({"a": 1000, "b": 1}, 1.0, 1e-6, rng=1)  # doctest: +ELLIPSIS
    {'a': ...}
    """
    keys, values = _check_counts(counts)
    epsilon = check_epsilon(epsilon)
    delta = _check_partition_delta(delta)
    tau = partition_threshold(epsilon, delta)
    if accountant is not None:
        accountant.check(epsilon, delta, mechanism="partition_selection", note=note)
    noisy = values + discrete_laplace_noise(len(keys), epsilon, 1, make_rng(rng))
    kept = [(key, int(value)) for key, value in zip(keys, noisy.tolist()) if value >= tau]
    kept.sort(key=_order_key)
    if accountant is not None:
        accountant.spend(epsilon, delta, mechanism="partition_selection", note=note)
    return dict(kept)


# -- discrete Gaussian noise ----------------------------------------------------------------------

#: Room, in log space, in the Gaussian threshold's comparison ln P(X >= k) <= ln delta: far above
#: the sums' float error (about 1e-13), so a delta within rounding of a boundary gets the larger
#: threshold, never the smaller.
_LOG_ROOM = 1e-10
_CHUNK = 1 << 20


def gaussian_partition_threshold(sigma2: float, delta: float) -> int:
    """The least integer threshold tau for partition selection with exact discrete Gaussian noise.

    The noise X has P(X = x) = exp(-x^2 / (2 s)) / Z, Z = sum_x exp(-x^2 / (2 s)), where s is
    the variance parameter the sampler really uses: ``sigma2`` rounded up as
    ``discrete_gaussian_noise`` rounds it (``gaussian_parameters``; heavier tails, so the
    threshold is computed with s, never with the smaller ``sigma2``). A value held by one row
    is released when 1 + X >= tau; tau is the least integer >= 2 with P(X >= tau - 1) <= delta.

    Computation (exact to float rounding, never below the true tail beyond it):

    * Z by Poisson summation, Z = sqrt(2 pi s) sum_n exp(-2 pi^2 s n^2) (n up to 3; the next
      term is below e^-300) for s >= 1, and as the direct sum over |x| <= 40 for s < 1;
    * T(k) = sum_{x >= k} exp(-x^2 / (2 s)) summed term by term, in log space relative to its
      first term (exp(-(2 k j + j^2) / (2 s)), j = 0 .. L - 1, L where the terms fall below
      e^-60), plus an upper bound on the terms left out, so the sum is never below T(k);
    * k = tau - 1 is bracketed by the bounds sqrt(2 pi s) Phi(-k / sqrt(s)) <= T(k) <=
      exp(-k^2 / (2 s)) + sqrt(2 pi s) Phi(-k / sqrt(s)) (the integral under and over the
      decreasing pmf), then found exactly by the sums: ln T(k) - ln Z <= ln delta - 1e-10
      (the room makes a delta within rounding of a boundary take the larger tau).

    The sums take O(sqrt(s)) terms (about 10 sqrt(s): a second at s = 10^12).

    >>> gaussian_partition_threshold(1.0, 1e-6)
    7
    >>> gaussian_partition_threshold(100.0, 1e-9)
    62
    """
    check_epsilon(sigma2, "sigma2")
    delta = _check_partition_delta(delta)
    sigma2 = Fraction(sigma2)
    parameters = gaussian_parameters(sigma2)
    used = Fraction(parameters[0], parameters[1]) if parameters is not None else sigma2
    return _gaussian_threshold(used.numerator, used.denominator, delta)


@functools.lru_cache(maxsize=1024)
def _gaussian_threshold(p: int, q: int, delta: float) -> int:
    """tau for noise P(x) ~ exp(-x^2 q / (2 p)): see ``gaussian_partition_threshold``."""
    s = float(Fraction(p, q))
    if Fraction(s) < Fraction(p, q):
        s = math.nextafter(s, math.inf)  # never a smaller variance than the sampler's
    log_z = _gaussian_log_normalizer(s)
    limit = math.log(delta) + log_z - _LOG_ROOM

    def lower(k: int) -> float:  # ln of the integral under T(k)
        return 0.5 * math.log(2 * math.pi * s) + float(log_ndtr(-k / math.sqrt(s)))

    def upper(k: int) -> float:  # ln of the first term plus the integral: over T(k)
        return float(np.logaddexp(-k * k / (2 * s), lower(k)))

    low = _least(lambda k: lower(k) <= limit)  # tau - 1 >= low: T >= the integral
    high = _least(lambda k: upper(k) <= limit)  # tau - 1 <= high
    k = max(1, low - 2)
    while k <= high + 2 and _gaussian_log_tail(s, k) > limit:
        k += 1
    return 1 + k


def _least(holds) -> int:
    """The least integer k >= 1 with ``holds(k)``, for a ``holds`` that stays true once true."""
    if holds(1):
        return 1
    high = 2
    while not holds(high):
        high *= 2
    low = high // 2  # holds(low) is false, holds(high) true
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if holds(middle) else (middle, high)
    return high


def _gaussian_log_normalizer(s: float) -> float:
    """ln sum_x exp(-x^2 / (2 s))."""
    if s >= 1:
        return 0.5 * math.log(2 * math.pi * s) + math.log1p(
            2 * math.fsum(math.exp(-2 * math.pi**2 * s * n * n) for n in range(1, 4)))
    return math.log(math.fsum(math.exp(-x * x / (2 * s)) for x in range(-40, 41)))


def _gaussian_log_tail(s: float, k: int) -> float:
    """ln sum_{x >= k} exp(-x^2 / (2 s)) for k >= 1, summed relative to the first term, with a
    bound on the terms past L added: never below the true value beyond float rounding."""
    rate = k / s  # the terms fall at least as exp(-rate j) and as exp(-j^2 / (2 s))
    length = math.ceil(min(60 / rate, math.sqrt(120 * s))) + 1
    parts = []
    for start in range(0, length, _CHUNK):
        j = np.arange(start, min(start + _CHUNK, length), dtype=np.float64)
        parts.append(float(np.sum(np.exp(-(2 * k * j + j * j) / (2 * s)))))
    rest = min(math.exp(-rate * length) / -math.expm1(-rate),
               math.exp(-length * length / (2 * s)) * (1 + s / length))
    return -k * k / (2 * s) + math.log(math.fsum(parts) + rest)


def gaussian_partition_selection(
    counts: Mapping[Hashable, int],
    rho: float,
    delta: float,
    *,
    rng: np.random.Generator | int | None = None,
    accountant: Accountant | None = None,
    note: str = "",
) -> dict[Hashable, int]:
    """The values whose count plus exact discrete Gaussian noise reaches
    ``gaussian_partition_threshold(1 / (2 rho), delta)``, with their noisy counts.

    ``counts`` as for ``partition_selection``: adding or removing a row changes one count by 1
    (L2 sensitivity 1 for one column), or adds or removes a value of count 1. Each count gets
    independent exact discrete Gaussian noise with sigma2 = 1 / (2 rho) (rounded up by the
    sampler; the threshold uses the rounded value); the values with count + X >= tau are
    returned with count + X, ordered by noisy count (descending), ties by the value's string
    form: nothing of the input's order.

    Guarantee. Let D' be D plus one row holding value v.

    * v in both: only v's count moves, by 1, so the noisy counts of the values present are
      rho-zCDP (discrete Gaussian, Canonne, Kamath and Steinke 2020) and thresholding them is
      post-processing;
    * v in D' only: the output on D' is the output on D with v added with probability
      P(1 + X >= tau) <= delta, a (0, delta)-DP difference in both directions.

    So the release is delta-approximately rho-zCDP (Bun and Steinke 2016, Section 8) and, for
    any delta' in (0, 1), (epsilon(rho, delta'), delta + delta')-DP with epsilon(rho, delta') =
    ``synth.privacy.composition.zcdp_epsilon``: the Gaussian thresholding of Gopi et al. 2020
    ("Differentially private set union") and Desfontaines, Voss, Gipson and Mandayam 2022
    ("Differentially private partition selection"), as in Google's DP library's Gaussian
    partition selection. Over d columns, one row moves one count (or adds one value) in each:
    the calls' rhos and deltas add up (d rho, d delta), which is the L2 sensitivity sqrt(d) of
    the d count vectors together (rho_total = d / (2 sigma2)).

    With an ``accountant``, both charges are checked together before sampling and made at
    release: ``rho`` as zCDP and (epsilon 0, ``delta``), which the accountant composes as above.

    >>> gaussian_partition_selection({"a": 1000, "b": 1}, 0.5, 1e-6, rng=1)  # doctest: +ELLIPSIS
    {'a': ...}
    """
    keys, values = _check_counts(counts)
    rho = check_epsilon(rho, "rho")
    delta = _check_partition_delta(delta)
    sigma2 = 1 / (2 * Fraction(rho))
    tau = gaussian_partition_threshold(sigma2, delta)
    mechanism = "gaussian_partition_selection"
    if accountant is not None:
        accountant.check_all([Charge(mechanism, rho=rho, note=note), Charge(mechanism, 0.0, delta, note=note)])
    noisy = values + discrete_gaussian_noise(len(keys), sigma2, make_rng(rng))
    kept = [(key, int(value)) for key, value in zip(keys, noisy.tolist()) if value >= tau]
    kept.sort(key=_order_key)
    if accountant is not None:
        accountant.spend(rho=rho, mechanism=mechanism, note=note)
        accountant.spend(0.0, delta, mechanism=mechanism, note=note)
    return dict(kept)
