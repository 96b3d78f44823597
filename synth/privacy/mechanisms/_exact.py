"""Exact samplers in Python integers and fractions (Canonne, Kamath and Steinke 2020).

Slow but exact for any rational parameter: used where the Numba kernels cannot hold the
numbers (the discrete Gaussian's acceptance step, permute-and-flip, a kernel's overflow
fallback) and as the reference the kernels are tested against.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

__all__ = [
    "uniform_below",
    "bernoulli",
    "bernoulli_exp",
    "discrete_laplace_exact",
    "discrete_gaussian_exact",
]


def uniform_below(n: int, rng: np.random.Generator) -> int:
    """A uniform integer in ``[0, n)`` for any ``n >= 1`` (rejection on random bits)."""
    if n < 1:
        raise ValueError(f"n ({n}) must be >= 1")
    if n <= 2**63:
        return int(rng.integers(0, n))
    bits = n.bit_length()
    while True:
        value = int.from_bytes(rng.bytes((bits + 7) // 8), "little") >> ((8 - bits % 8) % 8)
        if value < n:
            return value


def bernoulli(p: Fraction, rng: np.random.Generator) -> bool:
    """True with probability ``p`` (a Fraction in [0, 1]), exactly."""
    return uniform_below(p.denominator, rng) < p.numerator


def _bernoulli_exp_at_most_one(gamma: Fraction, rng: np.random.Generator) -> bool:
    k = 1
    while bernoulli(gamma / k, rng):
        k += 1
    return k % 2 == 1


def bernoulli_exp(gamma: Fraction, rng: np.random.Generator) -> bool:
    """True with probability ``exp(-gamma)`` for a Fraction ``gamma >= 0``, exactly.

    exp(-gamma) = exp(-1)^floor(gamma) * exp(-frac(gamma)), stopping at the first failure.
    """
    if gamma < 0:
        raise ValueError(f"gamma ({gamma}) must be >= 0")
    whole = math.floor(gamma)
    for _ in range(whole):
        if not _bernoulli_exp_at_most_one(Fraction(1), rng):
            return False
    return _bernoulli_exp_at_most_one(gamma - whole, rng)


def discrete_laplace_exact(s: int, t: int, rng: np.random.Generator) -> int:
    """One draw with P(z) proportional to exp(-|z| s / t) (CKS Algorithm 2)."""
    while True:
        u = uniform_below(t, rng)
        if not bernoulli_exp(Fraction(u, t), rng):
            continue
        v = 0
        while bernoulli_exp(Fraction(1), rng):
            v += 1
        y = (u + t * v) // s
        negative = bool(rng.integers(0, 2))
        if negative and y == 0:
            continue
        return -y if negative else y


def discrete_gaussian_exact(sigma2: Fraction, rng: np.random.Generator, laplace_draws=None) -> int:
    """One draw with P(z) proportional to exp(-z^2 / (2 sigma2)) (CKS Algorithm 3).

    ``laplace_draws``, if given, is an iterator of discrete Laplace draws with scale
    ``floor(sqrt(sigma2)) + 1`` (so a fast kernel can supply the candidates).
    """
    t = math.isqrt(math.floor(sigma2)) + 1
    while True:
        y = next(laplace_draws) if laplace_draws is not None else discrete_laplace_exact(1, t, rng)
        gamma = (abs(y) - sigma2 / t) ** 2 / (2 * sigma2)
        if bernoulli_exp(gamma, rng):
            return y
