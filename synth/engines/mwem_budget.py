"""MWEM's per-round budget, pure epsilon-DP or rho-zCDP, and the noise each round adds.

Pure (delta = 0): each of T rounds gets epsilon / T (after the row count), split into the
exponential mechanism's selection and a discrete Laplace measurement, composed by basic
composition.

zCDP (delta > 0): the budget is rho = the largest rho-zCDP that converts to (epsilon, delta)
(``zcdp_rho_limit``), less the row count's (a discrete Gaussian count's rho_count, or a pure
count's epsilon_count^2 / 2); each round gets rho / T,
split into a selection and a discrete Gaussian measurement (a marginal's L2 sensitivity is 1,
so sigma^2 = 1 / (2 rho_measure)). The exponential mechanism with epsilon_select is
epsilon_select^2 / 8-zCDP (it is epsilon-bounded-range; Cesar and Rogers 2021), so a selection
share of rho buys epsilon_select = sqrt(8 rho_select), four times the rho a generic
epsilon-DP charge would cost; it is charged to the accountant as that rho. The plan is checked
against a fresh accountant before any data is touched, and shrunk by a hair until it fits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from synth.errors import SynthError
from synth.privacy.accounting import Accountant, split_epsilon, subtract_epsilon
from synth.privacy.composition import zcdp_rho_limit
from synth.privacy.mechanisms import discrete_gaussian, discrete_laplace, exponential, mean_abs_noise

__all__ = ["RoundBudget", "count_rho", "plan_rounds", "rounds_total"]


@dataclass(frozen=True)
class RoundBudget:
    """What one MWEM round spends: on selection (epsilon_select, charged as rho_select under
    zCDP) and on its measurement (epsilon_measure, or rho_measure under zCDP)."""

    composition: str  # "basic" (pure epsilon) or "zCDP"
    epsilon_select: float
    epsilon_measure: float = 0.0
    rho_select: float = 0.0
    rho_measure: float = 0.0

    @classmethod
    def zcdp(cls, rho: float, select_share: float) -> RoundBudget:
        """A round of ``rho`` under zCDP: ``select_share`` of it selects (the exponential
        mechanism with epsilon = sqrt(8 rho_select), being epsilon-bounded-range), the rest measures."""
        return cls("zCDP", math.sqrt(8 * rho * select_share), 0.0, rho * select_share, rho * (1 - select_share))

    def measuring_only(self) -> RoundBudget:
        """The same round with its whole budget on the measurement (a round that selects nothing)."""
        if self.composition == "zCDP":
            return RoundBudget("zCDP", 0.0, 0.0, 0.0, self.rho_select + self.rho_measure)
        return RoundBudget("basic", 0.0, self.epsilon_select + self.epsilon_measure)

    @property
    def noise(self) -> str:
        return "discrete Gaussian" if self.rho_measure else "discrete Laplace"

    @property
    def mean_abs_noise(self) -> float:
        """E|noise| of one measured cell (``synth.privacy.mechanisms.mean_abs_noise``)."""
        return mean_abs_noise(self.epsilon_measure, self.rho_measure)

    def select(self, scores: np.ndarray, rng: np.random.Generator, accountant: Accountant, note: str,
               sensitivity: float = 1.0) -> int:
        """The exponential mechanism on ``scores`` (of the given sensitivity), charged as planned."""
        if not self.rho_select:
            return exponential(scores, self.epsilon_select, sensitivity, rng, accountant=accountant, note=note)
        accountant.check(rho=self.rho_select)
        pick = exponential(scores, self.epsilon_select, sensitivity, rng)
        accountant.spend(rho=self.rho_select, mechanism="exponential (bounded range, eps^2/8-zCDP)", note=note)
        return pick

    def measure(self, values, rng: np.random.Generator, accountant: Accountant, note: str):
        """Integer counts plus the round's noise (sensitivity 1), charged."""
        if self.rho_measure:
            return discrete_gaussian(values, self.rho_measure, 1, rng, accountant=accountant, note=note)
        return discrete_laplace(values, self.epsilon_measure, 1, rng, accountant=accountant, note=note)

    def as_dict(self) -> dict:
        return {"composition": self.composition, "epsilon_select": self.epsilon_select,
                "epsilon_measure": self.epsilon_measure, "rho_select": self.rho_select,
                "rho_measure": self.rho_measure, "noise": self.noise}


def count_rho(epsilon: float, delta: float, count_share: float) -> float:
    """Under zCDP, the rho of a noisy row count: ``count_share`` of the whole rho budget."""
    return count_share * zcdp_rho_limit(epsilon, delta)


def plan_rounds(epsilon: float, delta: float, epsilon_count: float, rounds: int, select_share: float,
                select: bool, rho_count: float = 0.0) -> RoundBudget:
    """The budget of each of ``rounds`` rounds after the row count (``epsilon_count``, pure,
    or ``rho_count`` under zCDP); ``SynthError`` when a share would be too small to use."""
    if delta > 0:
        budget = _plan_zcdp(epsilon, delta, epsilon_count, rounds, select_share if select else 0.0, rho_count)
        unit, per_round, selecting = "rho", budget.rho_select + budget.rho_measure, budget.rho_select
    else:
        per_round = split_epsilon(subtract_epsilon(epsilon, epsilon_count), rounds)
        eps_select = per_round * select_share if select else 0.0
        budget = RoundBudget("basic", eps_select, subtract_epsilon(per_round, eps_select))
        unit, selecting = "epsilon", eps_select
    measuring = budget.rho_measure or budget.epsilon_measure
    if (select and not budget.epsilon_select > 0) or not measuring >= 2.0**-40:  # what the samplers resolve
        raise SynthError(f"each round's {unit} ({per_round:.3g}) split by select_share={select_share!r} leaves "
                         f"{selecting:.3g} to select and {measuring:.3g} to measure: selecting needs more than 0 "
                         "and measuring at least 2^-40; choose a share further from 0 and 1 (--select-share), fewer "
                         "rounds (--rounds) or more epsilon")
    return budget


def rounds_total(epsilon: float, delta: float, epsilon_count: float, rho_count: float = 0.0) -> float:
    """What all the rounds together may spend after the row count: rho under zCDP (delta > 0),
    else epsilon; checked, as one charge, against a fresh accountant."""
    if delta <= 0:
        return subtract_epsilon(epsilon, epsilon_count)
    return _plan_zcdp(epsilon, delta, epsilon_count, 1, 0.0, rho_count).rho_measure


def _plan_zcdp(epsilon: float, delta: float, epsilon_count: float, rounds: int, share: float,
               rho_count: float) -> RoundBudget:
    rho = zcdp_rho_limit(epsilon, delta) - epsilon_count**2 / 2 - rho_count
    if not rho > 0:
        raise SynthError(f"the row count leaves no zCDP budget within epsilon={epsilon:g}, delta={delta:g}: "
                         "give n (--rows) or a smaller --count-epsilon")
    per_round = rho / rounds
    for _ in range(1000):  # shrink by a hair until the whole plan fits a fresh accountant
        budget = RoundBudget.zcdp(per_round, share)
        if _fits(epsilon, delta, epsilon_count, rho_count, rounds, budget):
            return budget
        per_round *= 1 - 1e-6
    raise SynthError("could not fit MWEM's zCDP plan into the budget")  # pragma: no cover - not reached


def _fits(epsilon: float, delta: float, epsilon_count: float, rho_count: float, rounds: int,
          budget: RoundBudget) -> bool:
    accountant = Accountant(epsilon, delta)
    try:
        if epsilon_count:
            accountant.spend(epsilon_count)
        if rho_count:
            accountant.spend(rho=rho_count)
        for _ in range(rounds):
            if budget.rho_select:
                accountant.spend(rho=budget.rho_select)
            accountant.spend(rho=budget.rho_measure)
    except SynthError:
        return False
    return True
