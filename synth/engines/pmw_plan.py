"""Planning Private Multiplicative Weights: threshold T, update bound L, budget split, alpha.

PMW answers queries in fractions of n. Its noise, in counts (sensitivity 1):

* each epoch's threshold noise: discrete Laplace of scale 2 / eps_test;
* each query's test noise: scale 4 / eps_test;
* each update's measurement: scale 1 / eps_measure.

If every threshold noise stays below a T n and every test noise below (1/2 - a) T n (so
together below T/2 as fractions), and every measurement below T n / 2, then an update happens
only when the true error is at least T/2, the measured sign is right, and the KL potential
drops by at least eta T/2 - eta^2 = T^2/16 with eta = T/4. The potential starts at most ln|U|,
so at most L = ceil(16 ln|U| / T^2) updates happen, and every answer before the halt is within
alpha = 3T/2 (lazy: T plus both noises; update: the measurement, below T/2). The failure
probability is bounded by the union of the exact discrete Laplace tails over the L
thresholds, the k tests and the L measurements; the plan takes the smallest T (and the best
split eps_test : eps_measure and share a) that keeps it below beta.

The L epochs get equal budgets eps_test + eps_measure such that their composition (with the
row-count purchase, if any) fits the user's (epsilon, delta), checked on a fresh accountant
(``Accountant.spend``, the checks the run itself will make).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from synth.errors import SynthError
from synth.privacy.accounting import Charge
from synth.privacy.accounting import Accountant, BudgetExceeded
from synth.privacy.composition import zcdp_rho_limit
from synth.privacy.validation import (
    check_budget_epsilon, check_delta, check_positive_int, check_probability, check_real,
)

__all__ = ["PMWPlan", "PlanError", "plan_pmw", "laplace_tail"]

_SPLITS = tuple(i / 40 for i in range(1, 40))
_SHARES = tuple(i / 16 for i in range(1, 8))  # a: the threshold noise's part of T/2
#: The most updates L a plan holds: checking that all L epochs fit the budget takes time in L
#: (about a minute for 10^6), and a larger L would only stall the run before it starts.
MAX_UPDATES = 10**6


class PlanError(SynthError):
    """No plan meets the request (e.g. epsilon too small for n, |U| and k)."""


@dataclass(frozen=True)
class PMWPlan:
    """Everything PMW needs, and what it predicts. Public: it never reads the data."""

    epsilon: float
    delta: float
    beta: float
    rows: float  # n used to scale thresholds (public, or a noisy count)
    rows_public: bool
    universe_size: int
    queries: int
    threshold: float  # T, a fraction of n
    updates: int  # L
    eta: float
    epsilon_test: float  # per epoch
    epsilon_measure: float  # per update
    epsilon_count: float  # spent on the noisy row count (0 when n is public)
    alpha: float  # predicted accuracy before the halt, a fraction of n
    failure_bound: float  # the union bound that alpha holds except with this probability
    composition: str  # the theorem that makes L epochs fit the budget
    threshold_share: float = 0.25  # a: threshold noise bound a T n, test noise bound (1/2 - a) T n

    @property
    def threshold_count(self) -> float:
        return self.threshold * self.rows

    @property
    def potential_bound(self) -> int:
        """ceil(16 ln|U| / T^2): the most updates the potential argument allows."""
        return math.ceil(16 * math.log(self.universe_size) / self.threshold**2)

    @property
    def covers_potential_bound(self) -> bool:
        """False when a user-fixed L is below the potential bound: PMW may then halt early."""
        return self.updates >= self.potential_bound

    def to_dict(self) -> dict:
        return asdict(self)

    def describe(self) -> str:
        n_text = f"{self.rows:,.0f} ({'public' if self.rows_public else 'noisy count'})"
        lines = [
            "PMW plan (public: computed without reading the data)",
            f"  budget                epsilon={self.epsilon:g} delta={self.delta:g} beta={self.beta:g}",
            f"  rows n                {n_text}",
            f"  universe |U|          {self.universe_size:,} cells (ln|U| = {math.log(self.universe_size):.2f})",
            f"  queries k             {self.queries:,}",
            f"  threshold T           {self.threshold:.5f} of n = {self.threshold_count:,.1f} rows",
            f"  update bound L        {self.updates:,} (eta = T/4 = {self.eta:.5f})",
            f"  per epoch             eps_test={self.epsilon_test:.6g} eps_measure={self.epsilon_measure:.6g}"
            f" ({self.composition} composition over L epochs)",
            f"  noise scales (rows)   threshold {2 / self.epsilon_test:,.1f}, test {4 / self.epsilon_test:,.1f},"
            f" measurement {1 / self.epsilon_measure:,.1f}",
        ]
        if self.epsilon_count:
            lines.append(f"  noisy row count       eps_count={self.epsilon_count:g}")
        if not self.covers_potential_bound:
            lines.append(
                f"  WARNING               L={self.updates:,} is below 16 ln|U| / T^2 = {self.potential_bound:,}: PMW may"
                " halt before the workload ends; answers after the halt are bounded only by the range [0, n]"
            )
        if self.alpha >= 0.25:
            lines.append(
                "  NOTE                  the worst-case threshold is large at this budget: expect few or no"
                " updates (answers stay near the starting distribution); more epsilon, or --alpha/--updates"
                " (trading the guarantee), change that"
            )
        lines.append(
            f"  predicted accuracy    alpha = 3T/2 = {self.alpha:.5f} of n"
            f" (~{self.alpha * self.rows:,.0f} rows) with probability >= {1 - self.failure_bound:.4f}"
        )
        return "\n".join(lines)


def laplace_tail(scale: float, bound: float) -> float:
    """P(|Z| >= bound) for discrete Laplace noise P(z) ~ exp(-|z|/scale)."""
    m = math.ceil(bound)
    if m <= 0:
        return 1.0
    p = math.exp(-1 / scale)
    return min(1.0, 2 * p**m / (1 + p))


def _epoch_charges(epsilon_test: float, epsilon_measure: float, updates: int, epsilon_count: float) -> list[Charge]:
    charges = [Charge("pmw test", epsilon_test), Charge("pmw measure", epsilon_measure)] * updates
    return ([Charge("row count", epsilon_count)] if epsilon_count else []) + charges


def _per_epoch(epsilon: float, delta: float, updates: int, split: float, epsilon_count: float,
               rho_max: float | None) -> tuple[float, str]:
    """The largest per-epoch epsilon (test + measure) for ``updates`` epochs, and the theorem."""
    options = [((epsilon - epsilon_count) / updates, "basic")]
    if delta > 0:
        weight = split**2 + (1 - split) ** 2
        rho_left = rho_max - epsilon_count**2 / 2
        if rho_left > 0:
            options.append((math.sqrt(2 * rho_left / (updates * weight)), "zcdp"))

        def advanced(e0: float) -> float:
            parts = [split * e0, (1 - split) * e0]
            squares = epsilon_count**2 + updates * sum(x * x for x in parts)
            drift = epsilon_count * math.expm1(epsilon_count) + updates * sum(x * math.expm1(x) for x in parts)
            return math.sqrt(2 * -math.log(delta) * squares) + drift

        low, high = 0.0, epsilon
        for _ in range(60):
            middle = (low + high) / 2
            low, high = (middle, high) if advanced(middle) <= epsilon else (low, middle)
        options.append((low, "advanced"))
    return max(options)


def _failure(threshold, updates, queries, rows, e_test, e_measure, share) -> float:
    scale = threshold * rows
    return (updates * laplace_tail(2 / e_test, share * scale) + queries * laplace_tail(4 / e_test, (0.5 - share) * scale)
            + updates * laplace_tail(1 / e_measure, scale / 2))


def plan_pmw(
    epsilon: float,
    delta: float,
    rows: float,
    universe_size: int,
    queries: int,
    beta: float = 0.05,
    *,
    rows_public: bool = True,
    epsilon_count: float = 0.0,
    updates: int | None = None,
    alpha: float | None = None,
) -> PMWPlan:
    """Choose T, L and the budget split for PMW (see the module docstring).

    ``rows`` is n (public, or a noisy count already bought with ``epsilon_count``).
    ``updates`` fixes L; ``alpha`` fixes T = 2 alpha / 3. Raises ``ValueError`` when no
    threshold below 1 gives failure probability beta.
    """
    epsilon = check_budget_epsilon(epsilon)
    delta = check_delta(delta)
    beta = check_probability(beta, "beta")
    rows = check_real(rows, "rows")
    if not rows >= 1:
        raise ValueError(f"rows ({rows!r}) must be >= 1")
    universe_size = check_positive_int(universe_size, "universe_size")
    if universe_size < 2:
        raise ValueError("universe_size must be >= 2 for PMW to learn anything")
    queries = check_positive_int(queries, "queries")
    if queries > 2**63 - 1:
        raise PlanError(f"queries k ({queries:,}: the workload's queries times the passes) is more than 2^63 - 1: "
                        "ask for fewer passes (--passes)")
    if updates is not None:
        updates = check_positive_int(updates, "updates")
        if updates > MAX_UPDATES:
            raise PlanError(f"updates L ({updates:,}) must be at most {MAX_UPDATES:,}: ask for fewer (--updates)")
    if not 0 <= epsilon_count < epsilon:
        raise PlanError(f"the row-count epsilon ({epsilon_count!r}) must be in [0, epsilon={epsilon:g})")
    rho_max = zcdp_rho_limit(epsilon, delta) if delta > 0 else None

    def evaluate(threshold: float) -> tuple[float, int, float, float, str]:
        n_updates = updates or math.ceil(16 * math.log(universe_size) / threshold**2)
        best = None
        for split in _SPLITS:
            e0, method = _per_epoch(epsilon, delta, n_updates, split, epsilon_count, rho_max)
            e_test, e_measure = split * e0, (1 - split) * e0
            for share in _SHARES:
                fail = _failure(threshold, n_updates, queries, rows, e_test, e_measure, share)
                if best is None or fail < best[0]:
                    best = (fail, n_updates, e_test, e_measure, method, share)
        return best

    if alpha is not None:
        threshold = 2 * check_real(alpha, "alpha") / 3
        if not 0 < threshold < 1:
            raise PlanError(f"alpha ({alpha!r}) must be in (0, 1.5): the target accuracy is a fraction of n")
        needed = 16 * math.log(universe_size) / threshold / threshold  # L for this T (not / T**2: it underflows)
        if updates is None and needed > MAX_UPDATES:
            raise PlanError(f"alpha ({alpha!r}) needs L = 16 ln|U| / T^2 = {needed:.3g} updates (T = 2 alpha / 3), "
                            f"more than the {MAX_UPDATES:,} a plan can hold: ask for a larger alpha, or fix L "
                            "(--updates)")
    else:
        if evaluate(1.0)[0] > beta:
            raise PlanError(
                f"epsilon={epsilon:g} is too small for n={rows:,.0f} rows, |U|={universe_size:,} and "
                f"{queries:,} queries: no threshold below 1 keeps the failure probability under beta={beta:g}"
            )
        low, high = 1e-6, 1.0
        for _ in range(60):
            middle = math.sqrt(low * high)
            low, high = (low, middle) if evaluate(middle)[0] <= beta else (middle, high)
        threshold = high
    failure, n_updates, e_test, e_measure, method, share = evaluate(threshold)
    e_test, e_measure = _fit_exactly(epsilon, delta, e_test, e_measure, n_updates, epsilon_count)
    failure = _failure(threshold, n_updates, queries, rows, e_test, e_measure, share)
    return PMWPlan(
        epsilon=epsilon, delta=delta, beta=beta, rows=float(rows), rows_public=rows_public,
        universe_size=universe_size, queries=queries, threshold=threshold, updates=n_updates,
        eta=threshold / 4, epsilon_test=e_test, epsilon_measure=e_measure, epsilon_count=epsilon_count,
        alpha=1.5 * threshold, failure_bound=min(1.0, failure), composition=method, threshold_share=share,
    )


def _fit_exactly(epsilon, delta, e_test, e_measure, updates, epsilon_count) -> tuple[float, float]:
    """Shrink the per-epoch budgets until an accountant accepts every charge of all L epochs.

    The very checks PMW's accountant will make (``Accountant.spend``), so a planned run can
    never be refused part-way.
    """
    for attempt in range(60):
        accountant = Accountant(epsilon, delta)
        try:
            for charge in _epoch_charges(e_test, e_measure, updates, epsilon_count):
                accountant.spend(charge.epsilon, mechanism=charge.mechanism)
            return e_test, e_measure
        except BudgetExceeded:
            shrink = 1 - 1e-9 * 2**attempt
            e_test, e_measure = e_test * shrink, e_measure * shrink
    raise AssertionError("could not fit the plan into the budget")  # pragma: no cover
