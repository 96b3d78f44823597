"""Differentially private partition selection: which values of a column to release.

A column's values are not public: releasing the list of values that occur in the data would
tell that someone holds each of them. ``partition_selection`` releases only the values whose
count plus exact discrete Laplace noise reaches a threshold set by delta, with their noisy
counts (Korolova et al. 2009; Gopi et al. 2020; Google's DP building blocks).
``partition_threshold`` is that threshold.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Hashable, Mapping
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from synth.privacy.mechanisms.discrete import discrete_laplace_noise, laplace_ratio
from synth.privacy.rng import make_rng
from synth.privacy.validation import check_epsilon, check_real

if TYPE_CHECKING:
    from synth.privacy.accounting import Accountant

__all__ = ["partition_threshold", "partition_selection"]

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
