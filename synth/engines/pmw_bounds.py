"""Error bounds for PMW's answers, from public quantities and the noise already released.

Every answer PMW gives (lazy, update or halted) states ``bound``: the true count lies within
``bound`` rows of the answer with probability at least 1 - beta (the plan's beta), over the
mechanism's noise. Three sources, each a valid bound on its own:

* **a measurement covers the query** (its marginal, or a wider one holding its columns, was
  measured by an update or the warm start; or, in query mode, the query itself): with y the
  noisy measurement summed over the query's k cells and a the answer,
  |truth - a| <= |a - y| + |noise summed over k cells|; the first term is public, the second
  has a known law (``noise_sum_bound``). Among several covering measurements the one with the
  least noise variance (k times its per-cell variance) is used: a choice made before seeing
  any noisy value, so the bound keeps its confidence.
* **a test in the current epoch said "below"**: the test's value g (the marginal's L1 error,
  or the query's own error: either is at least the query's error) then satisfies
  g < T + rho - nu, with rho the threshold's noise and nu the test's, so
  |truth - a| <= T + q(rho, beta/2) + q(-nu, beta/2) except with probability beta
  (``below_bound``): P(below and g > that) <= P(rho - nu > q + q').
* **otherwise** (halted, or capped, with no covering measurement): only that a count lies in
  [0, n]: max(a, n_upper - a), with n_upper the noisy row count's upper 1 - beta quantile
  when n is not public (``range_bound``).

Discrete Laplace tails are exact; sums of several use the Chernoff bound of their moment
generating function. Discrete Gaussian noise of variance parameter sigma^2 is sigma-sub-Gaussian
(Canonne, Kamath and Steinke 2020), so a sum of k has tail 2 exp(-t^2 / (2 k sigma^2)).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["laplace_quantile", "noise_sum_bound", "range_bound", "below_bound"]


def laplace_quantile(scale: float, gamma: float) -> float:
    """The least integer k >= 0 with P(Z >= k) <= gamma, for discrete Laplace noise
    P(z) ~ exp(-|z| / scale) (one-sided: P(Z >= k) = p^k / (1 + p), p = e^(-1/scale))."""
    p = math.exp(-1 / scale)
    if gamma >= 1 / (1 + p):
        return 0.0
    return float(max(1, math.ceil(math.log(gamma * (1 + p)) / math.log(p))))


def _laplace_sum_tail(epsilon: float, k: int, t: float) -> float:
    """Chernoff: P(S >= t) <= min over lambda of exp(-lambda t) M(lambda)^k, for S a sum of
    k discrete Laplace noises of parameter p = e^-epsilon (M: one noise's moment generating
    function, (1 - p)^2 / ((1 - p e^l)(1 - p e^-l)), finite for l < epsilon)."""
    p = math.exp(-epsilon)
    lambdas = epsilon * np.linspace(0.001, 0.999, 400)
    log_m = 2 * math.log1p(-p) - np.log1p(-p * np.exp(lambdas)) - np.log1p(-p * np.exp(-lambdas))
    return float(np.exp(np.min(-lambdas * t + k * log_m)))


def noise_sum_bound(k: int, beta: float, *, epsilon: float = 0.0, rho: float = 0.0) -> float:
    """t with P(|sum of k independent noises| > t) <= beta: discrete Gaussian of parameter
    1/(2 rho) when ``rho`` is given, else discrete Laplace of parameter e^-epsilon."""
    k = max(int(k), 1)
    if rho:
        return math.sqrt(k / rho * math.log(2 / beta))  # sigma^2 = 1 / (2 rho): t^2 = 2 k sigma^2 ln(2/beta)
    if k == 1:
        return laplace_quantile(1 / epsilon, beta / 2)
    low, high = 0.0, 1.0
    while _laplace_sum_tail(epsilon, k, high) > beta / 2:
        high *= 2
    for _ in range(50):
        middle = (low + high) / 2
        low, high = (low, middle) if _laplace_sum_tail(epsilon, k, middle) <= beta / 2 else (middle, high)
    return high


def below_bound(threshold: float, epsilon_test: float, beta: float) -> float:
    """The bound on a query's error after its test in this epoch said "below" (rows):
    T plus the upper beta/2 quantiles of the threshold's noise (scale 2/eps) and of the test's
    (scale 4/eps), as ``synth.privacy.mechanisms.AboveThreshold`` draws them."""
    return threshold + laplace_quantile(2 / epsilon_test, beta / 2) + laplace_quantile(4 / epsilon_test, beta / 2)


def range_bound(answer: float, rows: float, beta: float, *, epsilon_count: float = 0.0, rho_count: float = 0.0) -> float:
    """The bound that needs no measurement: a count lies in [0, n]. ``rows`` is n, public or a
    noisy count (then ``epsilon_count`` or ``rho_count`` says its noise, and n's upper 1 - beta
    quantile is used)."""
    upper = rows
    if rho_count:
        upper += math.sqrt(math.log(1 / beta) / rho_count)  # one-sided sub-Gaussian tail, sigma^2 = 1/(2 rho)
    elif epsilon_count:
        upper += laplace_quantile(1 / epsilon_count, beta)
    return max(answer, upper - answer, 0.0)
