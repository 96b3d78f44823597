"""Exact discrete noise for integer counts: discrete Laplace and discrete Gaussian.

These are the only noise samplers whose output synth releases. Both are exact: no floating
point enters a draw (Canonne, Kamath and Steinke 2020), so the attacks on floating-point
Laplace noise (Mironov 2012) do not apply.

The discrete Laplace is parametrized by ``epsilon / sensitivity``, represented as the
largest multiple of 2^-40 not above it: the noise is never smaller than asked for, so the
mechanism is epsilon-DP (the parameter moves by less than 2^-40 / (epsilon / sensitivity)
relatively; for epsilon = 1 and sensitivity 1 it is exact). The discrete Gaussian's sigma^2 is
likewise rounded up, to a multiple of 2^-j (j up to 32, as the kernel's 64-bit integers allow;
``gaussian_parameters``): more noise, never less, so rho-zCDP holds as charged.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from synth import _kernels
from synth.privacy.mechanisms._exact import discrete_gaussian_exact, discrete_laplace_exact
from synth.privacy.rng import make_rng
from synth.privacy.validation import check_epsilon, check_sensitivity

if TYPE_CHECKING:
    from synth.privacy.accounting import Accountant

__all__ = [
    "laplace_ratio",
    "discrete_laplace_noise",
    "discrete_laplace",
    "discrete_gaussian_noise",
    "discrete_gaussian",
    "mean_abs_noise",
]

_RATIO_BITS = 40
_BLOCK = 1 << 16  # draws per kernel state: fixed, so seeded output never depends on threads


def laplace_ratio(epsilon: float, sensitivity: float = 1) -> tuple[int, int]:
    """Integers ``(s, t)`` with ``s / t <= epsilon / sensitivity``, for P(z) ~ exp(-|z| s/t).

    ``s / t`` is the largest multiple of 2^-40 not above ``epsilon / sensitivity``, reduced.
    """
    return _laplace_ratio(check_epsilon(epsilon), check_sensitivity(sensitivity))


@functools.lru_cache(maxsize=1024)
def _laplace_ratio(epsilon: float, sensitivity: float) -> tuple[int, int]:
    """``laplace_ratio`` on checked floats, cached: a run asks for the same few ratios often."""
    ratio = Fraction(epsilon) / Fraction(sensitivity)
    s = math.floor(ratio * 2**_RATIO_BITS)
    if s < 1:
        raise ValueError(
            f"epsilon / sensitivity ({float(ratio):.3g}) must be at least 2^-40 for discrete Laplace noise"
        )
    if s >= 2**62:
        raise ValueError(f"epsilon / sensitivity ({float(ratio):.3g}) must be below 2^22")
    t = 2**_RATIO_BITS
    common = math.gcd(s, t)
    return s // common, t // common


def _laplace_draws(size: int, s: int, t: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` draws with P(z) ~ exp(-|z| s/t), in blocks of ``_BLOCK`` (each its own state);
    a draw the kernel cannot hold (probability below exp(-2^20)) is made in Python."""
    return _block_draws(size, _kernels.fill_discrete_laplace, _kernels.fill_discrete_laplace_blocks,
                        (np.uint64(s), np.uint64(t)), lambda: discrete_laplace_exact(s, t, rng), rng)


def _block_draws(size: int, fill, fill_blocks, args: tuple, exact, rng: np.random.Generator) -> np.ndarray:
    """``size`` draws from a sampling kernel in blocks of ``_BLOCK``, each block with its own
    xoshiro state drawn from ``rng``, so the output never depends on the thread count.

    ``fill(out, start, stop, *args, state)`` fills one block and returns where it stopped;
    ``fill_blocks(out, block, *args, states, stops)`` fills every block in parallel; a draw a
    block stops at is made by ``exact()`` in Python, then the kernel goes on from the next.
    """
    out = np.empty(size, dtype=np.int64)
    if size == 0:
        return out
    n_blocks = -(-size // _BLOCK)
    states = rng.integers(0, 2**64, size=(n_blocks, 4), dtype=np.uint64)
    states[~states.any(axis=1), 0] = 1  # xoshiro's one forbidden state (probability 2^-256)
    if n_blocks == 1:
        stops = np.array([fill(out, 0, size, *args, states[0])])
    else:
        stops = np.empty(n_blocks, dtype=np.int64)
        fill_blocks(out, _BLOCK, *args, states, stops)
    for b in range(n_blocks):
        end = min((b + 1) * _BLOCK, size)
        i = int(stops[b])
        while i < end:
            out[i] = exact()
            i = fill(out, i + 1, end, *args, states[b])
    return out


def discrete_laplace_noise(
    size: int | tuple[int, ...],
    epsilon: float,
    sensitivity: float = 1,
    rng: np.random.Generator | int | None = None,
) -> np.ndarray:
    """Integer noise with P(z) proportional to exp(-epsilon |z| / sensitivity), exactly.

    Adding it to integer counts whose sensitivity is ``sensitivity`` is epsilon-DP. This
    function charges nothing; ``discrete_laplace`` is the released, accounted form.
    """
    s, t = laplace_ratio(epsilon, sensitivity)
    shape = (size,) if isinstance(size, (int, np.integer)) else tuple(size)
    count = int(np.prod(shape, dtype=np.int64))
    return _laplace_draws(count, s, t, make_rng(rng)).reshape(shape)


def mean_abs_noise(epsilon: float = 0.0, rho: float = 0.0) -> float:
    """E|Z| of one noisy count: discrete Gaussian of variance 1 / (2 rho) when ``rho`` is given
    (about: the continuous value sigma sqrt(2/pi)), else discrete Laplace P(z) ~ exp(-epsilon |z|),
    exactly 2r / (1 - r^2) with r = e^-epsilon. What fits stop at and selections subtract."""
    if rho:
        return math.sqrt(1 / (2 * rho)) * math.sqrt(2 / math.pi)
    r = math.exp(-epsilon)
    return 2 * r / (1 - r * r)


def noise_variance(epsilon: float = 0.0, rho: float = 0.0) -> float:
    """Var Z of one noisy count: about 1 / (2 rho) for discrete Gaussian noise when ``rho`` is
    given, else exactly 2r / (1 - r)^2 with r = e^-epsilon for discrete Laplace. How fits weigh
    measurements of different budgets."""
    if rho:
        return 1 / (2 * rho)
    r = math.exp(-epsilon)
    return 2 * r / (1 - r) ** 2


def _integer_counts(counts) -> np.ndarray:
    array = np.asarray(counts)
    if array.dtype == bool or not (np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)):
        raise TypeError(f"counts must be integers, got dtype {array.dtype}")
    if np.issubdtype(array.dtype, np.floating):
        if not np.all(np.isfinite(array)) or np.any(array != np.round(array)):
            raise ValueError("counts must be whole numbers: discrete noise is for integer counts")
    return array.astype(np.int64)


def discrete_laplace(
    counts,
    epsilon: float,
    sensitivity: float = 1,
    rng: np.random.Generator | int | None = None,
    *,
    accountant: Accountant | None = None,
    note: str = "",
):
    """Integer counts plus exact discrete Laplace noise: epsilon-DP for counts whose L1
    sensitivity (over the whole array) is ``sensitivity``.

    Returns an int64 array of the counts' shape (an ``int`` for a scalar). With an
    ``accountant``, epsilon is checked before sampling and charged before returning.
    """
    values = _integer_counts(counts)
    epsilon = check_epsilon(epsilon)
    sensitivity = check_sensitivity(sensitivity)
    if accountant is not None:
        accountant.check(epsilon)
    noisy = values + discrete_laplace_noise(values.shape, epsilon, sensitivity, rng)
    if accountant is not None:
        accountant.spend(epsilon, mechanism="discrete_laplace", note=note)
    return int(noisy) if noisy.ndim == 0 else noisy


def _sigma2(rho: float, sensitivity: float) -> Fraction:
    rho = check_epsilon(rho, "rho")
    sensitivity = check_sensitivity(sensitivity)
    return Fraction(sensitivity) ** 2 / (2 * Fraction(rho))


def discrete_gaussian_noise(
    size: int | tuple[int, ...], sigma2: float | Fraction, rng: np.random.Generator | int | None = None
) -> np.ndarray:
    """Integer noise with P(z) proportional to exp(-z^2 / (2 sigma2')), exactly, where sigma2'
    is ``sigma2`` rounded up to a multiple of 2^-j (``gaussian_parameters``: j as large as the
    kernel's 64-bit integers allow, at most 32), so never less noise than asked for.

    Draws come from the Numba kernel (CKS Algorithm 3 in integers, millions per second), which
    finishes every candidate's acceptance test itself; every draw when sigma2 is past what its
    integers hold (about 2.1 10^9) is made in Python integers with the same sigma2' (exact,
    tens of thousands per second).
    """
    sigma2 = Fraction(sigma2)
    if not sigma2 > 0:
        raise ValueError(f"sigma2 ({float(sigma2)!r}) must be > 0")
    generator = make_rng(rng)
    shape = (size,) if isinstance(size, (int, np.integer)) else tuple(size)
    count = int(np.prod(shape, dtype=np.int64))
    parameters = gaussian_parameters(sigma2)
    if parameters is None:
        return _python_gaussian_draws(count, sigma2, generator).reshape(shape)
    return _gaussian_draws(count, *parameters, generator).reshape(shape)


#: Laplace scales the kernel's 64-bit fast path (|y| t q - p < 2^32) should reach: wider
#: candidates take its exact 128-bit path, which is slower, so the finest q that keeps 40 (else
#: 4) scales fast is chosen; past about sigma2 = 8.7 10^8 none does, and q = 1 (the widest fast
#: path) is taken.
_GAUSSIAN_REACH = 40
_GAUSSIAN_MIN_REACH = 4


def gaussian_parameters(sigma2: Fraction) -> tuple[int, int, int, int] | None:
    """``(p, q, t, y_max)`` for the kernel: sigma2' = p/q >= sigma2 with q = 2^j (j <= 32),
    Laplace scale t = floor(sqrt(sigma2')) + 1, and y_max = (2^64 - 1 - p) // (t q), the
    largest candidate whose acceptance test the kernel finishes in 128 bits (gamma is past
    2^62 beyond it). q is the largest that keeps 40 Laplace scales (else 4) on the 64-bit fast
    path, else 1; None when even q = 1 breaks 2 p q t^2 < 2^63 (sigma2 of about 2.1 10^9 or
    more)."""
    for reach, exponents in ((_GAUSSIAN_REACH, range(32, -1, -1)), (_GAUSSIAN_MIN_REACH, range(32, -1, -1)),
                             (0, (0,))):
        for j in exponents:
            q = 1 << j
            p = math.ceil(sigma2 * q)
            t = math.isqrt(p // q) + 1
            if 2 * p * q * t * t >= 2**63 or (2**32 - 1 - p) // (t * q) < reach * t:
                continue
            return p, q, t, (2**64 - 1 - p) // (t * q)
    return None


def _gaussian_draws(size: int, p: int, q: int, t: int, y_max: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` kernel draws of sigma2 = p/q, in blocks of ``_BLOCK`` (each its own state); a
    draw the kernel hands back (probability exp(-2^62)) is made in Python with the same sigma2."""
    sigma2 = Fraction(p, q)
    return _block_draws(size, _kernels.fill_discrete_gaussian, _kernels.fill_discrete_gaussian_blocks,
                        (np.uint64(p), np.uint64(q), np.uint64(t), np.uint64(y_max)),
                        lambda: discrete_gaussian_exact(sigma2, rng), rng)


def _python_gaussian_draws(count: int, sigma2: Fraction, rng: np.random.Generator) -> np.ndarray:
    """Draws in Python integers (kernel Laplace candidates, exact acceptance): any sigma2."""
    t = math.isqrt(math.floor(sigma2)) + 1

    def candidates():
        while True:
            yield from _laplace_draws(max(64, count), 1, t, rng).tolist()

    stream = candidates()
    return np.array([discrete_gaussian_exact(sigma2, rng, stream) for _ in range(count)], dtype=np.int64)


def discrete_gaussian(
    counts,
    rho: float,
    sensitivity: float = 1,
    rng: np.random.Generator | int | None = None,
    *,
    accountant: Accountant | None = None,
    note: str = "",
):
    """Integer counts plus exact discrete Gaussian noise with sigma^2 = sensitivity^2 / (2 rho)
    (rounded up, see ``discrete_gaussian_noise``): rho-zCDP for counts whose L2 sensitivity is
    ``sensitivity``."""
    values = _integer_counts(counts)
    sigma2 = _sigma2(rho, sensitivity)
    if accountant is not None:
        accountant.check(rho=rho)
    noisy = values + discrete_gaussian_noise(values.shape, sigma2, rng)
    if accountant is not None:
        accountant.spend(rho=rho, mechanism="discrete_gaussian", note=note)
    return int(noisy) if noisy.ndim == 0 else noisy
