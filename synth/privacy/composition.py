"""Composition theorems: the total privacy loss of several releases.

* basic: epsilons and deltas add up;
* advanced (Dwork, Rothblum and Vadhan 2010, for heterogeneous epsilons):
  ``sqrt(2 ln(1/delta') sum eps_i^2) + sum eps_i (e^eps_i - 1)`` with an extra ``delta'``;
* zCDP (Bun and Steinke 2016): a pure eps-DP release is eps^2/2-zCDP, rhos add up, and
  rho-zCDP implies (eps, delta)-DP by the tight conversion of Canonne, Kamath and Steinke
  (2020, Corollary 13), never worse than ``rho + 2 sqrt(rho ln(1/delta))``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

from scipy.optimize import minimize_scalar

__all__ = ["advanced_epsilon", "zcdp_delta", "zcdp_epsilon", "zcdp_epsilon_standard", "zcdp_rho_limit"]


def advanced_epsilon(epsilons: Sequence[float], delta_prime: float) -> float:
    """Total epsilon of pure eps_i-DP releases under advanced composition, with delta'."""
    if not 0 < delta_prime < 1:
        raise ValueError(f"delta_prime ({delta_prime!r}) must be in (0, 1)")
    squares = math.fsum(e * e for e in epsilons)
    drift = math.fsum(e * math.expm1(e) for e in epsilons)
    return math.sqrt(2 * -math.log(delta_prime) * squares) + drift


def zcdp_epsilon_standard(rho: float, delta: float) -> float:
    """epsilon = rho + 2 sqrt(rho ln(1/delta)) (Bun and Steinke 2016, Proposition 1.3)."""
    return rho + 2 * math.sqrt(rho * -math.log(delta))


def _log_delta(alpha: float, rho: float, epsilon: float) -> float:
    return (alpha - 1) * (alpha * rho - epsilon) + alpha * math.log1p(-1 / alpha) - math.log(alpha - 1)


def zcdp_delta(rho: float, epsilon: float) -> float:
    """A delta such that rho-zCDP implies (epsilon, delta)-DP (CKS 2020, Corollary 13).

    delta = inf over alpha > 1 of exp((alpha-1)(alpha rho - epsilon)) (1 - 1/alpha)^alpha / (alpha-1);
    any alpha gives a valid bound, so an inexact minimizer only makes delta larger.
    """
    if rho == 0:
        return 0.0
    upper = (epsilon + 1) / (2 * rho) + 2
    result = minimize_scalar(lambda a: _log_delta(a, rho, epsilon), bounds=(1 + 1e-9, upper), method="bounded",
                             options={"xatol": 1e-12})
    alpha = float(result.x)
    return min(1.0, math.exp(_log_delta(alpha, rho, epsilon)))


@functools.lru_cache(maxsize=4096)  # a pure function, asked the same question by every accountant and plan
def zcdp_epsilon(rho: float, delta: float) -> float:
    """The smallest epsilon (to 1e-12, rounded up) with rho-zCDP => (epsilon, delta)-DP."""
    if not 0 < delta < 1:
        raise ValueError(f"delta ({delta!r}) must be in (0, 1)")
    if rho == 0:
        return 0.0
    high = zcdp_epsilon_standard(rho, delta)
    if zcdp_delta(rho, high) > delta:  # the optimizer missed: keep the standard bound
        return high
    low = 0.0
    while high - low > 1e-12 * max(1.0, high):
        middle = (low + high) / 2
        if zcdp_delta(rho, middle) <= delta:
            high = middle
        else:
            low = middle
    return high


@functools.lru_cache(maxsize=4096)  # 60 optimizations a call; the same budgets come back in every run
def zcdp_rho_limit(epsilon: float, delta: float) -> float:
    """The largest rho (to 1e-15 relative, rounded down) with rho-zCDP => (epsilon, delta)-DP.

    One bisection on ``zcdp_delta`` (monotone in rho), not a bisection over ``zcdp_epsilon``.
    """
    if not 0 < delta < 1:
        raise ValueError(f"delta ({delta!r}) must be in (0, 1)")
    low, high = 0.0, epsilon
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if zcdp_delta(middle, epsilon) <= delta else (low, middle)
    return low
