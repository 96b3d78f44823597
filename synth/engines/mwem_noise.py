"""MWEM's noise under a budget with delta > 0: discrete Laplace under pure epsilon, or discrete
Gaussian under rho-zCDP, whichever adds less noise to a measured cell.

A pure epsilon-DP run is also (epsilon, delta)-DP for every delta, so a delta > 0 budget may
always run MWEM's pure plan. Which plan is better follows from the number of measurements T:
a cell's discrete Laplace noise grows like T / epsilon, the discrete Gaussian's like
sqrt(T / rho), rho (the largest that converts to (epsilon, delta)) being far below epsilon^2
(at epsilon = 1, delta = 1e-9: 0.015). With few measurements Laplace adds less.

``choose_noise`` compares the expected |noise| of one measured cell (``mean_abs_noise``: a
measured marginal's expected L1 error is that times its cells) under each plan's actual
budget split, through ``plan_rounds``: the noisy row count when n is not public (a share of
epsilon, or of rho), the selection share, the exponential mechanism's eps^2/8 under zCDP.
Both are compared at the same T, the measurements of the pure plan (``default_rounds`` gives
zCDP more rounds when MWEM selects, as its noise grows more slowly: when the Gaussian is
better at the pure plan's T it is better still at the rounds it was tuned for). On adult and
titanic subsets (all 3-way marginals, eps 0.3-3, n a noisy count) this puts the change at
about 20 measurements, where the two differ by a few percent either way; expected |noise|
rather than the variance, which would change over near 16 measurements (6% worse than pure
epsilon on 6 adult columns, 20 triples, eps = 3). The choice reads only public facts (epsilon,
delta, T, the shares), never the data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from synth.engines.mwem_budget import count_rho, plan_rounds
from synth.errors import SynthError

__all__ = ["NOISES", "NoiseChoice", "check_noise", "choose_noise"]

#: ``auto`` (``choose_noise``), ``laplace`` (pure epsilon-DP) or ``gaussian`` (rho-zCDP, delta > 0).
NOISES = ("auto", "laplace", "gaussian")


@dataclass(frozen=True)
class NoiseChoice:
    """The accounting a run uses (``zcdp``) and why: ``reason`` is empty unless it was chosen
    (``auto`` with delta > 0); ``laplace`` and ``gaussian`` are each plan's expected |noise| of
    one measured cell at ``measurements`` (inf where that plan cannot run)."""

    zcdp: bool
    reason: str = ""
    laplace: float = math.nan
    gaussian: float = math.nan
    measurements: int = 0

    @property
    def noise(self) -> str:
        return "discrete Gaussian" if self.zcdp else "discrete Laplace"


def check_noise(noise: str, delta: float) -> str:
    """``noise`` if it is one of ``NOISES`` and fits delta (``gaussian`` needs delta > 0)."""
    if noise not in NOISES:
        raise ValueError(f"noise ({noise!r}) must be one of: {', '.join(NOISES)}")
    if noise == "gaussian" and not delta > 0:
        raise ValueError("noise='gaussian' accounts in rho-zCDP and needs delta > 0")
    return noise


def choose_noise(noise: str, epsilon: float, delta: float, measurements: int, select_share: float,
                 count_share: float | None, zcdp_measurements: int | None = None) -> NoiseChoice:
    """The noise of an MWEM run of ``measurements`` equal rounds, each spending ``select_share``
    on selection (0: no selection), after a noisy row count of ``count_share`` of the budget
    (None: n is public). ``laplace`` and ``gaussian`` are kept; ``auto`` is Laplace at
    delta = 0 and otherwise the plan with the smaller expected |noise| per measured cell
    (``zcdp_measurements``: the rounds the zCDP plan would run, when more, for the reason)."""
    check_noise(noise, delta)
    if noise != "auto" or not delta > 0:
        return NoiseChoice(noise == "gaussian")
    select = select_share > 0
    eps_count = 0.0 if count_share is None else count_share * epsilon
    rho_count = 0.0 if count_share is None else count_rho(epsilon, delta, count_share)
    laplace = _per_cell(lambda: plan_rounds(epsilon, 0.0, eps_count, measurements, select_share, select))
    gaussian = _per_cell(lambda: plan_rounds(epsilon, delta, 0.0, measurements, select_share, select, rho_count))
    zcdp = gaussian < laplace
    counted = f"{measurements:,} measurement{'s' if measurements != 1 else ''}"
    if zcdp_measurements is not None and zcdp_measurements > measurements:
        counted += f" (the zCDP plan then makes {zcdp_measurements:,})"
    if zcdp:
        reason = (f"noise: discrete Gaussian, rho-zCDP at delta={delta:g} (expected |noise| per cell "
                  f"{_text(gaussian)} against {_text(laplace)} with the discrete Laplace under pure epsilon, at "
                  f"{counted}; --noise laplace to override)")
    else:
        reason = (f"noise: discrete Laplace, pure epsilon-DP, which is also (epsilon, delta)-DP (expected |noise| "
                  f"per cell {_text(laplace)} against {_text(gaussian)} with the discrete Gaussian under zCDP at "
                  f"delta={delta:g}, at {counted}; --noise gaussian to override)")
    return NoiseChoice(zcdp, reason, laplace, gaussian, measurements)


def _per_cell(plan) -> float:
    """A plan's expected |noise| per measured cell, inf when it cannot be made."""
    try:
        return plan().mean_abs_noise
    except SynthError:
        return math.inf


def _text(value: float) -> str:
    return "none (the plan does not fit)" if math.isinf(value) else f"{value:.3g}"
