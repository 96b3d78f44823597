"""MWEM's adaptive rounds: AIM's lessons (McKenna, Mullins, Sheldon and Miklau 2022) in MWEM.

- **Candidates** are the workload's marginals and every marginal below them (the downward
  closure), each weighted by how much of the workload it covers: w_r = sum over workload
  subsets s of |r ∩ s|. A small marginal is cheap to measure well and informs every larger one
  that holds it.
- **One-way marginals first**: every column the workload touches is measured once, without
  selection, at the first rounds' budget.
- **Selection** by the exponential mechanism on w_r (||n A_r - x_r||_1 - E|noise| |r|), the
  error of the current estimate less what measuring would add (sensitivity max w_r).
- **Budget annealing** (``AnnealingBudget``): rounds start at 1/(8 d) of the budget each
  (d columns), more (up to 1/(2 d)) when n is so small that the one-way marginals would
  otherwise carry over 5% of n in noise (``first_round_budget``), and a round's budget
  grows (noise scale / sqrt 1.5, selection's epsilon x sqrt 1.5) whenever the last
  measurement moved the estimate less than its own expected noise: the estimate already
  knew what that budget could tell. When less than two rounds' worth is left, the
  last round spends exactly what remains. So the number of rounds follows from the budget.

Measurements are discrete Gaussian under rho-zCDP (``delta`` > 0) or discrete Laplace under
pure epsilon; each is charged to the accountant as it is made.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from synth.data.counts import Data, data_marginal
from synth.engines.mwem_budget import RoundBudget
from synth.privacy.accounting import Accountant
from synth.privacy.mechanisms import mean_abs_noise

__all__ = ["ADAPTIVE_RATIO", "ANNEAL_SCALE", "AnnealingBudget", "closure_candidates", "adaptive_rounds",
           "first_round_budget", "noise_ratio", "ROUNDS_PER_COLUMN"]

#: Rounds start at 1/(8 d) of the budget at least (AIM: 1/(16 d); 8 was better on 20,000 rows and wide).
ROUNDS_PER_COLUMN = 8
#: ... and at most 1/(2 d) when the data are few (``first_round_budget``).
FEWEST_ROUNDS_PER_COLUMN = 2
#: The first rounds get at least the budget that keeps the median one-way marginal's expected L1
#: noise within this share of n: on 1,300 of adult's rows (7 columns, eps = 1) the one-ways at
#: 1/(8 d) each carried 19% of n in noise, and starting at 1/(2 d) cut the mean L1 from 0.318 to
#: 0.304 (20 subsamples); on 20,000 rows the rule keeps 1/(8 d) (already under 2%).
ONE_WAY_NOISE = 0.05
#: Annealing shrinks the noise's scale by this factor (AIM halves it): halving spent adult's budget
#: in a few rounds (all 14 columns, 91 pairs, eps = 1: mean L1 0.149; 0.084-0.090 with sqrt(1.5)).
ANNEAL_SCALE = math.sqrt(1.5)
#: Share of each round's budget spent on selection (AIM's 0.1).
SELECT_SHARE = 0.1
#: The last round spends what is left times this (never more than is left, whatever the rounding).
LAST_ROUND_SHARE = 1 - 1e-9


#: Adaptive rounds are chosen when measuring every workload marginal would add more than this
#: expected L1 noise to the median one (as a share of n): on adult's 7 columns (35 triples,
#: eps = 1, delta = 1e-9) the two are level at about 3,000 rows, where the ratio is 1.5; on all
#: 14 columns' 91 pairs classic is better at eps = 0.3 (ratio 0.8-1.0; the mean pair, 3.3).
ADAPTIVE_RATIO = 1.5


def noise_ratio(cells: Sequence[int], n: float, per_cell_noise: float) -> float:
    """The expected L1 noise a measurement of the median marginal (of ``cells`` cells each)
    would carry, over n: E|noise| per cell x median cells / n."""
    return per_cell_noise * float(np.median(cells)) / max(n, 1.0)


def closure_candidates(subsets: Sequence[tuple[str, ...]]) -> list[tuple[tuple[str, ...], float]]:
    """Every non-empty marginal at or below a workload subset, with its weight sum_s |r ∩ s|,
    smallest first (in the columns' first-appearance order within each size)."""
    seen: dict[tuple[str, ...], None] = {}
    for subset in subsets:
        for size in range(1, len(subset) + 1):
            for part in itertools.combinations(subset, size):
                seen.setdefault(part, None)
    ranked = sorted(seen, key=len)
    return [(r, float(sum(len(set(r) & set(s)) for s in subsets))) for r in ranked]


def first_round_budget(total: float, zcdp: bool, one_way_cells: Sequence[int], n: float) -> float:
    """The smallest round budget (``total`` is what all rounds may spend) whose measurement
    share gives the median one-way marginal an expected L1 noise of at most ``ONE_WAY_NOISE`` n
    (``AnnealingBudget`` clamps it). Reads the row count, public or already released, never the data."""
    cells = float(np.median(one_way_cells))
    target = ONE_WAY_NOISE * max(n, 1.0)

    def noise(round_budget: float) -> float:
        share = round_budget * (1 - SELECT_SHARE)
        return cells * (mean_abs_noise(0.0, share) if zcdp else mean_abs_noise(share))

    low, high = total * 1e-9, total  # noise falls as the budget grows: bisect in log scale
    if noise(high) > target or noise(low) <= target:
        return high if noise(high) > target else low
    for _ in range(60):
        middle = math.sqrt(low * high)
        low, high = (low, middle) if noise(middle) <= target else (middle, high)
    return high


@dataclass
class AnnealingBudget:
    """The per-round budget of adaptive MWEM, in rho (zCDP) or epsilon (pure), and what is left.

    ``total`` is the budget of every round together (after the row count); each round starts
    at ``first_round`` (``first_round_budget``) kept within [total / (8 d), total / (2 d)],
    ``SELECT_SHARE`` of it for selection. ``anneal`` shrinks the noise's scale and grows
    selection's epsilon by ``ANNEAL_SCALE``: its square in cost under zCDP (rho ~ 1/sigma^2,
    epsilon^2), itself under pure epsilon. ``next_round`` gives the round's
    ``RoundBudget``, the whole remainder once less than two rounds' worth is left. Spending
    never passes ``total``.
    """

    total: float
    zcdp: bool
    columns: int
    first_round: float | None = None  # asked: None is total / (8 d); kept clamped to [total / (8 d), total / (2 d)]
    spent: float = 0.0
    finished: bool = False
    _round: float = field(init=False)

    def __post_init__(self):
        if not self.total > 0 or self.columns < 1:
            raise ValueError("an annealing budget needs a positive total and at least one column")
        low = self.total / (ROUNDS_PER_COLUMN * self.columns)
        high = self.total / (FEWEST_ROUNDS_PER_COLUMN * self.columns)
        self._round = low if self.first_round is None else min(high, max(low, self.first_round))
        self.first_round = self._round

    @property
    def remaining(self) -> float:
        return max(0.0, self.total - self.spent)

    def _spend(self, cost: float, select: bool) -> RoundBudget:
        """A round costing ``cost`` (``SELECT_SHARE`` of it selecting, if it selects), charged."""
        if self.spent + cost > self.total:
            raise AssertionError("annealing budget overspent")  # pragma: no cover - guarded by next_round
        self.spent += cost
        share = SELECT_SHARE if select else 0.0
        if self.zcdp:
            return RoundBudget.zcdp(cost, share)
        return RoundBudget("basic", cost * share, cost - cost * share)

    def first_measurement(self) -> RoundBudget:
        """A one-way marginal at the start: the first rounds' measurement share, no selection."""
        return self._spend(self._round * (1 - SELECT_SHARE), select=False)

    def next_round(self) -> RoundBudget | None:
        """The next round's budget (selection and measurement), or None when all is spent."""
        if self.finished:
            return None
        if self.remaining < 2 * self._round:  # the last round spends exactly what is left
            self.finished = True
            return self._spend(self.remaining * LAST_ROUND_SHARE, select=True)
        return self._spend(self._round, select=True)

    def anneal(self) -> None:
        """Shrink the noise's scale by ``ANNEAL_SCALE`` and grow selection's epsilon by as much,
        from the next round on."""
        self._round *= ANNEAL_SCALE**2 if self.zcdp else ANNEAL_SCALE


@dataclass
class AdaptiveRun:
    """What the adaptive rounds measured (for the fit), their log, and how the budget went."""

    measured: list[tuple] = field(default_factory=list)
    log: list[dict] = field(default_factory=list)
    rounds: int = 0
    annealed: int = 0


def adaptive_rounds(data: Data, schema, workload, dist, n: float, budget: AnnealingBudget,
                    accountant: Accountant, rng: np.random.Generator, passes: int,
                    progress: Callable[[float], None] | None = None) -> AdaptiveRun:
    """Run adaptive MWEM's rounds on ``dist`` (moved in place) until ``budget`` is spent."""
    candidates = closure_candidates(workload.subsets)
    sensitivity = max(w for _, w in candidates)
    truth: dict[tuple, np.ndarray] = {}

    def true_table(subset):
        if subset not in truth:
            truth[subset] = data_marginal(data, schema, subset)
        return truth[subset]

    run = AdaptiveRun()
    variances: list[float] = []

    def weighted() -> list[tuple]:
        """The measurements weighted by 1 / variance (the least noisy weighs 1) for the fit."""
        least = min(variances)
        return [m + (least / v,) for m, v in zip(run.measured, variances)]

    def measure(subset, round_budget: RoundBudget, note: str, chosen_by: str) -> np.ndarray:
        dist.add_subset(subset)
        noisy = np.asarray(round_budget.measure(true_table(subset), rng, accountant, note=note), dtype=np.float64)
        variances.append(noise_variance(round_budget))
        run.measured.append(("marginal", subset, noisy))
        run.log.append({"round": run.rounds, "marginal": list(subset), "noisy": noisy, "chosen_by": chosen_by,
                        "noise": round_budget.noise, "epsilon_measure": round_budget.epsilon_measure,
                        "rho_measure": round_budget.rho_measure, "epsilon_select": round_budget.epsilon_select})
        return noisy

    ones = [r for r, _ in candidates if len(r) == 1]
    for subset in ones:
        run.rounds += 1
        measure(subset, budget.first_measurement(), f"MWEM one-way {subset[0]}", "one-way first")
    dist.fit(weighted(), n, passes)
    if progress is not None:
        progress(budget.spent / budget.total)

    while (round_budget := budget.next_round()) is not None:
        run.rounds += 1
        open_ = [(r, w) for r, w in candidates if dist.fits(r)]
        subsets = [r for r, _ in open_]
        estimates = dist.marginals(subsets)
        noise = round_budget.mean_abs_noise
        scores = np.array([w * (float(np.abs(true_table(r) - n * e).sum()) - noise * e.size)
                           for (r, w), e in zip(open_, estimates)])
        pick = round_budget.select(scores, rng, accountant, note=f"MWEM round {run.rounds} select",
                                   sensitivity=sensitivity)
        subset = subsets[pick]
        before = estimates[pick]
        measure(subset, round_budget, f"MWEM round {run.rounds} measure {','.join(subset)}", "selected")
        dist.fit(weighted(), n, passes)
        moved = n * float(np.abs(dist.marginal(subset) - before).sum())
        if moved <= noise * before.size and not budget.finished:
            budget.anneal()
            run.annealed += 1
        if progress is not None:
            progress(budget.spent / budget.total)
    run.measured = weighted()
    return run


def noise_variance(budget: RoundBudget) -> float:
    """The variance of one measured cell: 1 / (2 rho) for the discrete Gaussian (at most; its
    variance is a little below sigma^2), about 2 / epsilon^2 for the discrete Laplace."""
    if budget.rho_measure:
        return 1 / (2 * budget.rho_measure)
    r = math.exp(-budget.epsilon_measure)
    return 2 * r / (1 - r) ** 2
