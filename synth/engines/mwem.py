"""MWEM (Hardt, Ligett and McSherry 2012) for an offline workload of counting queries.

T rounds over a distribution A over the universe (uniform, or a public prior), kept dense or
factored (``synth.models.distribution``; the factored one for universes past the dense cap):

1. **select** with the exponential mechanism (budget eps_select per round) the workload item
   with the largest error on A: a whole marginal (``measure="marginal"``: the L1 distance
   between its true and estimated tables less the expected L1 noise of measuring it, AIM's
   rule, sensitivity 1; the workload's one-way marginals are candidates too) or one query
   (``measure="query"``: its absolute error, sensitivity 1); items already measured, and on a
   factored A those that would grow it past its cap, are excluded;
2. **measure** it with exact discrete Laplace noise (budget eps_measure; a marginal's table has
   L1 sensitivity 1, so one eps_measure covers all its cells), or with ``delta`` > 0 exact
   discrete Gaussian noise under rho-zCDP (its L2 sensitivity is 1; ``synth.engines.mwem_budget``)
   when that plan adds less noise than the pure one (``plan_noise``: with few measurements a
   delta > 0 run keeps pure epsilon and Laplace noise, which is also (epsilon, delta)-DP);
3. **multiplicative weights** over every measurement so far: for a measured marginal S,
   A[u] *= exp((y_S[s(u)] - n A_S[s(u)]) / (2n)); repeated for ``passes`` passes, or until a
   pass changes nothing (every factor within 1e-9 of 1).

When the T rounds measure every candidate anyway, selection could only reorder them, so by
default it is skipped and the whole budget measures (in workload order). When a factored
model cannot hold every candidate under its cap, the data choose which (``synth.engines.mwem_tree``):
the one-way marginals, a spanning tree of the workload's pairs chosen by the exponential
mechanism, then as many rounds again as columns selecting among the rest. After the rounds,
a **final fit** runs more passes (``final_passes`` at most; by default 1,000, or for a
factored model ``FIT_WORK`` over its cells, up to 5,000) until the measurements' total
absolute residual falls to ``FIT_TOLERANCE`` times the noise's expected total: fitting
further would fit the noise (on adult the error rises again past that point). When selection
left workload marginals unmeasured, its first 1,000 passes run whatever the residual, to carry
the measured structure to them. The fit reads only
the noisy measurements, so it is post-processing. T defaults to ``default_rounds``.

That is classic MWEM (``selection="classic"``). ``selection="adaptive"`` runs AIM-style rounds
instead (``synth.engines.mwem_adaptive``: sub-marginal candidates, one-way marginals first, an annealed
budget, rounds until it is spent), and ``"auto"`` (the default) picks adaptive where measuring
every workload marginal would bury the median one under more than ``ADAPTIVE_RATIO`` n of noise
(small tables), classic otherwise, and notes which and why.

The release is A_T (``output="last"``) or the average of A_1..A_T (``"average"``, no final
fit). Budget: eps_round = (epsilon - eps_count) / T (under zCDP rho_round = (rho - rho_count) /
T, the count a discrete Gaussian with ``count_share`` of rho), split by ``select_share``; every
charge goes through the accountant. n is public (``rows``) or a noisy count bought with
``count_share * epsilon`` (under zCDP, ``count_share`` of rho).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from synth.data.counts import Data, data_marginal, data_rows
from synth.data.schema import Schema
from synth.data.tables import DEFAULT_MAX_CELLS
from synth.data.workload import Workload
from synth.engines.estimate import ADAPTIVE_SCORE_SECONDS, Estimate, factored_mwem_estimate, mwem_estimate
from synth.engines.mwem_adaptive import (
    ADAPTIVE_RATIO, SELECT_SHARE, AnnealingBudget, adaptive_rounds, first_round_budget, noise_ratio,
)
from synth.engines.mwem_budget import RoundBudget, count_rho, plan_rounds, rounds_total
from synth.engines.mwem_noise import NoiseChoice, check_noise, choose_noise
from synth.engines.mwem_tree import choose_tree, independence_scores, spanning_edges, tree_columns, tree_pairs
from synth.engines.release import Progress, Release, describe_representation, report_phase
from synth.errors import SynthError
from synth.models.distribution import choose_representation, make_distribution
from synth.models.factored import DEFAULT_MAX_MODEL_CELLS, ModelSizeError, FactoredModel
from synth.models.fit import FIT_TOLERANCE, expected_noise
from synth.models.model import Model
from synth.privacy.accounting import Accountant, Budget
from synth.privacy.mechanisms import mean_abs_noise
from synth.privacy.rng import is_seeded, make_rng
from synth.privacy.row_count import DEFAULT_COUNT_SHARE, RowCount, row_count
from synth.privacy.validation import check_budget_epsilon, check_delta, check_positive_int, check_probability

__all__ = ["MWEMConfig", "MWEMEngine", "MWEMResult", "mwem", "plan_noise", "DEFAULT_ROUNDS", "DEFAULT_PASSES",
           "DEFAULT_FINAL_PASSES", "DEFAULT_SELECT_SHARE", "FIT_TOLERANCE", "expected_noise"]

#: How rounds are chosen: ``adaptive`` (``synth.engines.mwem_adaptive``), ``classic`` (a fixed number
#: of rounds over the workload's marginals, or every one of them), or ``auto``.
SELECTIONS = ("auto", "adaptive", "classic")
DEFAULT_ROUNDS = 50
#: Rounds per column (and their cap) when a selecting run accounts in zCDP (``default_rounds``).
ZCDP_ROUNDS_PER_COLUMN = 5
ZCDP_MAX_ROUNDS = 64
DEFAULT_PASSES = 10  # per round when selecting: fewer leave the estimate near uniform, and selection repeats itself
DEFAULT_FINAL_PASSES = 1000
#: A factored model's final fit may walk this many model cells in all (passes x the model's cells,
#: from 1,000 to ``MAX_FINAL_PASSES`` passes), so its time is bounded (about 30-50 s on 2 cores)
#: and a smaller model gets the passes a big sparse one needs: on a 10-column trip table (226,000
#: rows, pairs of 6,700-7,800 cells; eps = 1, delta = 1e-9; a 2.9M-cell model) 1,000 passes left
#: mean L1 0.070, 2,076 (this budget) 0.059, 5,000 0.053. A small model's pass is mostly fixed
#: cost (about 2.5 ms), hence the ceiling: its fit stays within about 15 s.
FIT_WORK = 6e9
MAX_FINAL_PASSES = 5_000
#: The time estimate's model size where the run's choices decide it: this share of the cap (the
#: wide benchmark tables' selecting runs grew 1.35M-2.9M cells under 10^7), and adaptive runs'
#: typical size and rounds (8,000-20,000 cells; 26-54 rounds over 10-35 columns).
TYPICAL_MODEL_SHARE = 0.2
ADAPTIVE_TYPICAL_CELLS = 20_000
ADAPTIVE_ROUNDS_PER_COLUMN = 1.5
#: Share of a round's epsilon for selection when selection is needed (AIM's choice, about 0.1).
DEFAULT_SELECT_SHARE = 0.1


@dataclass
class MWEMResult:
    """The released distribution and how it was made (all public)."""

    distribution: np.ndarray | FactoredModel  # flat and summing to 1, or a factored model
    rows: float
    rows_public: bool
    accountant: Accountant
    measurements: list[dict] = field(default_factory=list)  # round log: what was measured, noisy values
    parameters: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # what the run could not do as asked

    def to_model(self, schema: Schema, *, seeded: bool = False):
        log = [{k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in m.items()} for m in self.measurements]
        return Model(schema=schema, mechanism="mwem", distribution=self.distribution, rows=self.rows,
                     rows_public=self.rows_public, parameters=self.parameters, privacy=self.accountant.to_dict(),
                     round_log=log, seeded=seeded)


@dataclass(frozen=True)
class MWEMConfig:
    """MWEM's public options, checked when made (before any data is read).

    ``selection``: ``adaptive`` (``synth.engines.mwem_adaptive``), ``classic`` or ``auto``;
    ``rounds``, ``measure`` (``marginal`` or ``query``), ``select_share`` and ``output``
    (``last`` or ``average``) are classic MWEM's. ``passes``: multiplicative-weights passes
    per round when selecting; ``final_passes``: the final fit's most (None: 1,000, or a factored
    model's work budget, ``FIT_WORK``). ``noise``: ``auto``,
    ``laplace`` or ``gaussian`` (``synth.engines.mwem_noise``). ``rows``: n, when public;
    otherwise a noisy count is bought with ``count_share`` of the budget. ``representation``,
    ``max_cells`` and ``max_model_cells`` size the model (``synth.models.distribution``).
    """

    selection: str = "auto"
    rounds: int | None = None
    measure: str = "marginal"
    select_share: float | None = None
    passes: int = DEFAULT_PASSES
    final_passes: int | None = None
    output: str = "last"
    noise: str = "auto"
    rows: int | None = None
    count_share: float = DEFAULT_COUNT_SHARE
    representation: str = "auto"
    max_cells: int = DEFAULT_MAX_CELLS
    max_model_cells: int = DEFAULT_MAX_MODEL_CELLS

    def __post_init__(self) -> None:
        if self.rounds is not None:
            check_positive_int(self.rounds, "rounds")
        check_positive_int(self.passes, "passes")
        if self.final_passes is not None and (isinstance(self.final_passes, bool)
                                              or not isinstance(self.final_passes, int) or self.final_passes < 0):
            raise ValueError(f"final_passes ({self.final_passes!r}) must be an integer >= 0 (or None: from FIT_WORK)")
        if self.select_share is not None:
            object.__setattr__(self, "select_share", check_probability(self.select_share, "select_share"))
        if self.selection not in SELECTIONS:
            raise ValueError(f"selection ({self.selection!r}) must be one of: {', '.join(SELECTIONS)}")
        if self.selection == "adaptive" and (self.rounds is not None or self.measure != "marginal"
                                            or self.output != "last" or self.select_share is not None):
            raise ValueError("rounds, measure='query', output='average' and select_share apply to "
                             "selection='classic' (adaptive rounds follow from the budget)")
        if self.measure not in ("marginal", "query"):
            raise ValueError(f"measure ({self.measure!r}) must be 'marginal' or 'query'")
        if self.output not in ("last", "average"):
            raise ValueError(f"output ({self.output!r}) must be 'last' or 'average'")
        check_noise(self.noise, 1.0)  # its name; whether it fits delta is the budget's question
        if self.rows is not None:
            check_positive_int(self.rows, "rows")


class MWEMEngine:
    """MWEM for one schema and workload: ``plan`` (public facts only), then ``run`` on the
    scan's counts: count n, measure round by round, fit, release."""

    name = "mwem"

    def __init__(self, config: MWEMConfig, schema: Schema, workload: Workload, *, prior: np.ndarray | None = None):
        if config.selection == "adaptive" and not any(workload.subsets):
            raise ValueError("adaptive rounds need a workload with a marginal on at least one column")
        if (config.output == "average" and config.representation != "dense"
                and schema.universe_size > config.max_cells):
            raise SynthError("output='average' needs a dense distribution: the universe is too large for one")
        self.config, self.schema, self.workload, self.prior = config, schema, workload, prior

    def plan(self, budget: Budget) -> NoiseChoice:
        """Pure epsilon (discrete Laplace) or rho-zCDP (discrete Gaussian) for this budget, and
        why: chosen before the data is touched, from public facts only (``plan_noise``)."""
        c = self.config
        check_budget_epsilon(budget.epsilon)
        check_noise(c.noise, budget.delta)
        return plan_noise(self.workload, self.schema, budget.epsilon, budget.delta, noise=c.noise,
                          selection=c.selection, rounds=c.rounds, measure=c.measure, select_share=c.select_share,
                          output=c.output, rows=c.rows, count_share=c.count_share)

    def estimate(self, budget: Budget) -> Estimate:
        """The run's time from its size and plan (``synth.engines.estimate``), before any data
        is read: from the universe for a dense model; for a factored one from the model's size
        where every candidate is measured, else from a typical size for its cap."""
        c, workload = self.config, self.workload
        if choose_representation(self.schema, c.representation, c.max_cells) == "factored":
            return self._factored_estimate(budget)
        candidates = len(workload.subsets) if c.measure == "marginal" else len(workload)
        rounds = min(c.rounds or default_rounds(workload, candidates, c.measure, zcdp=self.plan(budget).zcdp),
                     candidates)
        final_passes = DEFAULT_FINAL_PASSES if c.final_passes is None else c.final_passes
        return mwem_estimate(self.schema.universe_size, candidates, rounds, c.passes, final_passes,
                             c.select_share is not None or rounds < candidates)

    def _factored_estimate(self, budget: Budget) -> Estimate:
        c, schema, workload = self.config, self.schema, self.workload
        choice = self.plan(budget)
        public = c.rows if c.rows is not None else schema.rows
        mode = c.selection
        if mode == "auto":  # the noisy count decides where n is not public: most such tables are classic's
            mode = "classic" if public is None else _selection_mode(
                mode, c.rounds, c.measure, c.output, c.select_share, schema, workload, float(public), budget.epsilon,
                budget.delta if choice.zcdp else 0.0, RowCount(int(public), True, 0.0))[0]
        columns = len({name for s in workload.subsets for name in s})
        typical = max(1, int(TYPICAL_MODEL_SHARE * c.max_model_cells))
        if mode == "adaptive":
            cells = ADAPTIVE_TYPICAL_CELLS
            return factored_mwem_estimate(cells, DEFAULT_FINAL_PASSES if c.final_passes is None else c.final_passes,
                                          int(ADAPTIVE_ROUNDS_PER_COLUMN * columns) + 10, len(workload.subsets) + columns,
                                          c.passes, True, False, ADAPTIVE_SCORE_SECONDS)
        # classic MWEM's own plan (the budget's split does not matter here: n is a placeholder
        # where it is not public)
        dist = FactoredModel(schema, max_cells=c.max_model_cells)
        count = RowCount(int(public) if public is not None else 1, public is not None, 0.0)
        plan = _plan_classic(c, schema, workload, dist, count, budget.epsilon, budget.delta if choice.zcdp else 0.0,
                             choice.zcdp)
        if not plan.select:  # every candidate measured: the model is known
            subset_of = _subset_of(c.measure, workload)
            for key in plan.candidates:
                dist.add_subset(subset_of(key))
            return factored_mwem_estimate(dist.cells, final_pass_budget(c.final_passes, "factored", dist.cells),
                                          plan.rounds, len(plan.candidates), c.passes, False, True)
        passes = final_pass_budget(c.final_passes, "factored", typical)
        if not plan.tree_pairs:  # the tree start's big sparse pairs take them all
            passes = _passes_at_least(passes, len(workload.subsets), plan.rounds, True)
        return factored_mwem_estimate(typical, passes, plan.rounds, len(plan.candidates), c.passes, True, False)

    def run(self, counts: Data, budget: Budget, rng: np.random.Generator | int | None = None,
            progress: Progress | None = None) -> Release:
        """Plan, count n, measure, fit: the release (epsilon-DP, or (epsilon, delta)-DP through
        rho-zCDP when the plan chose the Gaussian)."""
        result = self.record(counts, budget, rng, progress)
        return Release(result.to_model(self.schema, seeded=is_seeded(rng)), result.accountant,
                       _summary(result, self.schema), (), result)

    def record(self, counts: Data, budget: Budget, rng: np.random.Generator | int | None = None,
               progress: Progress | None = None) -> MWEMResult:
        """``run``'s work, as the engine's own record (no model built)."""
        c, schema, workload = self.config, self.schema, self.workload
        choice = self.plan(budget)
        plan_delta = budget.delta if choice.zcdp else 0.0  # the delta the plan accounts with: 0 is pure epsilon
        dist = make_distribution(schema, "dense" if c.output == "average" else c.representation, prior=self.prior,
                                 max_cells=c.max_cells, max_model_cells=c.max_model_cells)
        generator = make_rng(rng)
        accountant = Accountant(budget.epsilon, budget.delta)
        count = row_count(data_rows(counts), c.rows if c.rows is not None else schema.rows, accountant, generator,
                          c.count_share,
                          rho=count_rho(budget.epsilon, budget.delta, c.count_share) if choice.zcdp else None)
        mode, why = _selection_mode(c.selection, c.rounds, c.measure, c.output, c.select_share, schema, workload,
                                    float(count.rows), budget.epsilon, plan_delta, count)
        lead = [text for text in (choice.reason, why) if text]  # the run's notes: which noise, which rounds, why
        if mode == "adaptive":
            result = _adaptive(counts, schema, workload, dist, float(count.rows), count, accountant, generator,
                               c.passes, c.final_passes, progress, lead, plan_delta, c.noise)
        else:
            result = _classic(counts, schema, workload, dist, c, count, accountant, generator, plan_delta,
                              progress, lead)
        return result


def mwem(data: Data, schema: Schema, workload: Workload, epsilon: float, *, delta: float = 0.0,
         rng: np.random.Generator | int | None = None, prior: np.ndarray | None = None, progress=None,
         **options) -> MWEMResult:
    """Run MWEM on ``data`` (the encoded rows, or a planned scan's ``synth.data.counts.Counts``)
    for ``workload`` with ``MWEMConfig(**options)``: epsilon-DP in total, or with ``delta`` > 0
    (epsilon, delta)-DP, through rho-zCDP with discrete Gaussian measurements when that plan
    adds less noise (``plan_noise``). The engine's record of the run (``MWEMEngine.run``
    releases it with a model)."""
    engine = MWEMEngine(MWEMConfig(**options), schema, workload, prior=prior)
    return engine.record(data, Budget(check_budget_epsilon(epsilon), check_delta(delta)), rng, progress)


def _summary(result: MWEMResult, schema: Schema) -> tuple[str, ...]:
    """What the run did, in lines for its summary (all public)."""
    p = result.parameters
    if p["selection"] == "adaptive":
        how = (f"adaptive: one-way marginals first, then chosen by the exponential mechanism; the round budget "
               f"grew {p['annealed']} times")
    else:
        how = "chosen by the exponential mechanism" if p["epsilon_select"] else "every one, so no selection"
    lines = [f"mwem: {p['rounds']} rounds measuring {p['measure']}s ({how}) with {p['noise']} noise "
             f"({'rho-zCDP' if p['composition'] == 'zCDP' else 'pure epsilon-DP'}); final fit: "
             f"{p['final_passes_run']} passes (stopped: {p['final_fit_stop']})",
             describe_representation(p["representation"], p["model_cells"], schema.universe_size)]
    return tuple(lines + [f"mwem: {text}" for text in result.notes])


@dataclass
class _ClassicPlan:
    """Classic MWEM's rounds, from public facts and n: the candidates (workload marginals, or
    single queries), how many rounds, whether they select, and each round's budget."""

    candidates: list
    rounds: int
    select: bool
    select_share: float
    budget: RoundBudget
    notes: list[str]
    tree_pairs: list = field(default_factory=list)  # the pairs a tree start may use (none: no tree start)
    tree_columns: list = field(default_factory=list)  # the one-way marginals it measures first


def _plan_classic(c: MWEMConfig, schema: Schema, workload: Workload, dist, count: RowCount, epsilon: float,
                  delta: float, zcdp: bool) -> _ClassicPlan:
    """The rounds and their budget (structure only, no data): every candidate in workload order
    when the rounds cover them all (those a factored model can hold), else a selected few."""
    candidates = workload.subsets if c.measure == "marginal" else list(range(len(workload)))
    subset_of = _subset_of(c.measure, workload)
    rounds = min(c.rounds or default_rounds(workload, len(candidates), c.measure, zcdp=zcdp), len(candidates))
    select = c.select_share is not None or rounds < len(candidates)
    notes = []
    if c.rounds is not None and c.rounds > len(candidates):
        notes.append(f"asked for {c.rounds:,} rounds; used {len(candidates):,}, one per {c.measure} of the workload: "
                     f"a round measures a {c.measure} not measured before")
    capped = False
    if not select:
        fitting = _fitting_in_order(dist, candidates, subset_of, schema)
        if not fitting:
            raise _nothing_fits(c.max_model_cells)
        capped = len(fitting) < len(candidates)
    pairs = tree_pairs(workload, schema) if capped and c.measure == "marginal" else []
    columns = tree_columns(pairs, schema)
    if pairs:  # the model cannot hold every candidate: a tree start, then rounds selecting among the rest
        start = len(columns) + spanning_edges(pairs, columns)
        rest = min(len(columns), len(candidates)) if c.rounds is None else max(rounds - start, 0)
        rounds, select = start + rest, True
        notes.append(f"the model cannot hold all {len(candidates)} {c.measure}s within its cap of "
                     f"{c.max_model_cells:,} cells (--max-model-cells), so the data choose which: {len(columns)} "
                     f"one-way marginals, a spanning tree of the workload's pairs chosen by the exponential "
                     f"mechanism ({start - len(columns)} edges), then {rest} rounds selecting among the rest")
    elif capped:
        notes.append(f"measured {len(fitting)} of the {len(candidates)} {c.measure}s, the smallest first: the "
                     f"others would grow the model past its cap of {c.max_model_cells:,} cells "
                     "(--max-model-cells); they are answered from the model")
        candidates, rounds = fitting, len(fitting)
    share = c.select_share if c.select_share is not None else (DEFAULT_SELECT_SHARE if select else 0.0)
    budget = plan_rounds(epsilon, delta, count.epsilon, rounds, share, select, count.rho)
    if select and c.measure == "marginal":  # one-way marginals too: cheap to measure, and what D needs first
        present = set(candidates)
        candidates = list(candidates) + [(col,) for col in schema.names
                                         if (col,) not in present and any(col in s for s in workload.subsets)]
    return _ClassicPlan(list(candidates), rounds, select, share, budget, notes, pairs, columns)


def _subset_of(measure: str, workload: Workload):
    return (lambda key: key) if measure == "marginal" else (lambda key: workload[key].columns)


def _classic(data: Data, schema: Schema, workload: Workload, dist, c: MWEMConfig, count: RowCount,
             accountant: Accountant, generator: np.random.Generator, delta: float, progress,
             lead: list[str]) -> MWEMResult:
    """Classic MWEM: plan the rounds, measure them (selecting where they do not cover every
    candidate), then the final fit. ``delta`` is the plan's (0: pure epsilon)."""
    n = float(count.rows)
    plan = _plan_classic(c, schema, workload, dist, count, accountant.budget.epsilon, delta, delta > 0)
    average = c.output == "average"
    final_fit = not average and c.final_passes != 0
    work = _Work(plan.rounds, c.passes if (plan.select or average) else 0, DEFAULT_FINAL_PASSES if final_fit else 0)
    rounds = _classic_rounds(data, schema, workload, dist, c, plan, n, accountant, generator, work, progress)
    final_passes = final_pass_budget(c.final_passes, dist.representation, dist.cells) if final_fit else 0
    # The fit stops at the noise level when the measurements are the workload (fitting closer
    # fits their noise). When selection left marginals unmeasured it runs DEFAULT_FINAL_PASSES
    # passes whatever the residual: the closer fit carries the measured structure to them (full
    # adult, 91 pairs, eps = 1: mean L1 0.085-0.087 against 0.091-0.093 stopped at the noise
    # level), and more only while the residual is still above the noise level (big sparse
    # pairs, which MW fits slowly: a trip-like table's 0.070 at 1,000 passes, 0.059 at 2,076);
    # beyond that the fit drifts into the noise (a finely binned adult: 0.086 at 1,000 passes,
    # 0.088 at 3,000).
    noise = expected_noise(rounds.measured, plan.budget.epsilon_measure, plan.budget.rho_measure)
    target = FIT_TOLERANCE * noise
    report_phase(progress, "final fit")
    fit = _final_fit(dist, rounds.measured, n, final_passes, target, workload,
                     lambda done: progress(plan.rounds, work.during_fit(done / final_passes)) if progress else None,
                     at_least=_passes_at_least(final_passes, len(workload.subsets), len(rounds.measured), plan.select))
    if progress is not None and final_fit:
        progress(plan.rounds + 1, 1.0)
    if average:
        distribution = rounds.average / max(rounds.done, 1)
    else:
        distribution = dist.normalized() if dist.representation == "dense" else dist
    parameters = {"selection": "classic", "rounds": rounds.done, "representation": dist.representation,
                  "model_cells": dist.cells, "measure": c.measure, "select_share": plan.select_share,
                  "passes": c.passes, "final_passes": final_passes, **fit, "output": c.output,
                  **plan.budget.as_dict(), "noise_asked": c.noise, "epsilon_count": count.epsilon,
                  "rho_count": count.rho}
    return MWEMResult(distribution, n, count.public, accountant, rounds.log, parameters,
                      lead + plan.notes + rounds.notes)


@dataclass
class _Rounds:
    """What classic MWEM's rounds measured: (kind, key, noisy values), the round log, the
    running sum of the estimates (``output="average"``), rounds done and why they stopped early."""

    measured: list = field(default_factory=list)
    log: list = field(default_factory=list)
    average: np.ndarray | None = None
    done: int = 0
    notes: list = field(default_factory=list)


def _classic_rounds(data: Data, schema: Schema, workload: Workload, dist, c: MWEMConfig, plan: _ClassicPlan,
                    n: float, accountant: Accountant, generator: np.random.Generator, work: _Work,
                    progress) -> _Rounds:
    """Each round: select a candidate not measured yet (the exponential mechanism on AIM's
    noise-aware score, or the next in workload order when the rounds cover them all), measure
    it, and refit when the next selection or the average needs the estimate."""
    candidates, subset_of = plan.candidates, _subset_of(c.measure, workload)
    true_tables = {s: data_marginal(data, schema, s)
                   for s in (candidates if c.measure == "marginal" else workload.subsets)}
    true_answers = workload.answer(true_tables) if c.measure == "query" else None
    out = _Rounds(average=np.zeros(schema.universe_size) if c.output == "average" else None)
    chosen: set = set()
    if plan.tree_pairs:
        _tree_start(data, schema, dist, plan, n, accountant, generator, out, chosen, work, progress, true_tables)
    for t in range(out.done, plan.rounds):
        open_ = [i for i, key in enumerate(candidates)
                 if _canonical(key, schema, c.measure) not in chosen and dist.fits(subset_of(key))]
        if not open_ and t == 0:
            raise _nothing_fits(c.max_model_cells)
        if not open_:
            out.notes.append(f"stopped after {t} of {plan.rounds} rounds: every candidate left would grow the model "
                             f"past its cap of {c.max_model_cells:,} cells (--max-model-cells); the rest of epsilon "
                             "is unspent")
            break
        if plan.select:
            report_phase(progress, "selecting")
            scores = _scores(dist, c.measure, candidates, workload, true_tables, true_answers, n,
                             plan.budget.mean_abs_noise)
            masked = np.full(len(candidates), -np.inf)
            masked[open_] = scores[open_]
            pick = plan.budget.select(masked, generator, accountant, note=f"MWEM round {t + 1} select")
        else:
            pick = open_[0]  # every candidate is measured: in workload order, no selection
        key = candidates[pick]
        chosen.add(_canonical(key, schema, c.measure))
        report_phase(progress, "measuring")
        dist.add_subset(subset_of(key))  # a factored D makes room now: later candidates must fit beside it
        if c.measure == "marginal":
            noisy = plan.budget.measure(true_tables[key], generator, accountant,
                                        note=f"MWEM round {t + 1} measure {','.join(key)}")
            out.measured.append(("marginal", key, np.asarray(noisy, dtype=np.float64)))
            out.log.append({"round": t + 1, "marginal": list(key), "noisy": noisy})
        else:
            noisy = plan.budget.measure(int(true_answers[key]), generator, accountant,
                                        note=f"MWEM round {t + 1} measure query {key}")
            out.measured.append(("query", key, float(noisy)))
            out.log.append({"round": t + 1, "query_id": int(key), "query": workload.describe(key),
                            "noisy": int(noisy)})
        if plan.select or out.average is not None:  # needed now: by the next selection or the average
            report_phase(progress, "fitting")
            dist.fit(out.measured, n, c.passes, workload=workload)
        if out.average is not None:
            out.average += dist.normalized()
        out.done = t + 1
        if progress is not None:
            progress(t + 1, work.after_round(t))
    return out


def _canonical(key, schema: Schema, measure: str):
    """A candidate as the rounds compare them: a marginal's columns in schema order (the tree
    start names its pairs so), a query by its index."""
    return tuple(sorted(key, key=schema.index)) if measure == "marginal" else key


def _tree_start(data: Data, schema: Schema, dist, plan: _ClassicPlan, n: float, accountant: Accountant,
                generator: np.random.Generator, out: _Rounds, chosen: set, work: _Work, progress,
                true_tables: dict) -> None:
    """The one-way marginals (each a whole round's budget, nothing to select), then a spanning
    tree of pairs chosen edge by edge by the exponential mechanism (``synth.engines.mwem_tree``),
    each edge measured at once; recorded in ``out`` like any round. ``true_tables`` holds the
    candidates' tables already counted (a pair that is a workload marginal is not counted again)."""
    def record(key: tuple, noisy) -> None:
        out.measured.append(("marginal", key, np.asarray(noisy, dtype=np.float64)))
        out.log.append({"round": out.done + 1, "marginal": list(key), "noisy": noisy})
        chosen.add(key)
        out.done += 1
        if progress is not None:
            progress(out.done, work.after_round(out.done - 1))

    report_phase(progress, "measuring one-way marginals")
    whole = plan.budget.measuring_only()
    ones = {}
    for column in plan.tree_columns:
        dist.add_subset((column,))
        table = true_tables[(column,)] if (column,) in true_tables else data_marginal(data, schema, (column,))
        ones[column] = whole.measure(table, generator, accountant,
                                     note=f"MWEM round {out.done + 1} measure {column} (tree start)")
        record((column,), ones[column])
    report_phase(progress, "selecting a tree")
    pairs = plan.tree_pairs
    true_pairs = {pair: true_tables[pair] if pair in true_tables else data_marginal(data, schema, pair)
                  for pair in pairs}
    scores = independence_scores(pairs, true_pairs, ones, n)
    dense = dist.representation == "dense"

    def room(pair) -> bool:  # a forest's model is its pair tables: adding one grows it by at most that
        return dense or dist.cells + schema[pair[0]].size * schema[pair[1]].size <= dist.max_cells

    def select(masked: np.ndarray, note: str) -> int:
        pick = plan.budget.select(masked, generator, accountant, note=f"MWEM round {out.done + 1} select {note}")
        pair = pairs[pick]
        dist.add_subset(pair)
        noisy = plan.budget.measure(true_pairs[pair], generator, accountant,
                                    note=f"MWEM round {out.done + 1} measure {','.join(pair)} (tree edge)")
        record(pair, noisy)
        return pick

    choose_tree(pairs, plan.tree_columns, scores, select, room)


def _scores(dist, measure: str, candidates: list, workload: Workload, true_tables: dict, true_answers, n: float,
            noise_per_cell: float) -> np.ndarray:
    """AIM's selection rule: a candidate's score is its error on the estimate less the noise
    measuring it would add (data-independent, so the score's sensitivity stays 1)."""
    estimate = _Estimate(dist, candidates if measure == "marginal" else workload.subsets, n)
    if measure == "marginal":
        return np.array([float(np.abs(true_tables[s] - estimate.table(s)).sum()) - noise_per_cell * true_tables[s].size
                         for s in candidates])
    return np.abs(true_answers - workload.answer(estimate.table))


def _passes_at_least(budget: int, marginals: int, measured: int, select: bool) -> int:
    """The final fit's passes whatever the residual, when selection left workload marginals
    unmeasured: ``DEFAULT_FINAL_PASSES`` for each whole multiple of the measurements that the
    workload's marginals are (within the pass budget). The longer fit carries the measured
    structure to the unmeasured marginals, and pays where they are many: a 35-column table
    (595 pairs, 64 measured) 0.0326 at 1,000 passes, 0.0307 at 4,431; on adult's 91 pairs
    (64 measured) 2,705 passes changed nothing, and on a finely binned adult (105 pairs)
    3,000 raised 0.086 to 0.088. Counts only: public."""
    if not select:
        return 0
    return min(budget, DEFAULT_FINAL_PASSES * max(1, marginals // max(measured, 1)))


def _final_fit(dist, measured: list[tuple], n: float, passes: int, target: float, workload, on_pass,
               at_least: int = 0) -> dict:
    """Fit every measurement (at most ``passes`` passes, to ``target`` residual, but the first
    ``at_least`` of them whatever the residual); how it went."""
    if not passes:
        return {"final_passes_run": 0, "final_fit_stop": "none", "fit_target_residual": target}
    done, residual = 0, math.inf
    if at_least:
        done, residual = dist.fit(measured, n, min(at_least, passes), workload=workload, on_pass=on_pass)
    if done < passes and residual > target:
        more, residual = dist.fit(measured, n, passes - done, workload=workload, stop_residual=target,
                                  on_pass=(lambda k: on_pass(done + k)) if on_pass is not None else None)
        done += more
    stop = "noise level" if residual <= target else "passes" if done >= passes else "converged"
    return {"final_passes_run": done, "final_fit_stop": stop, "fit_target_residual": target}


def _selection_mode(selection: str, rounds: int | None, measure: str, output: str, select_share: float | None,
                    schema: Schema, workload: Workload, n: float, epsilon: float, delta: float,
                    count) -> tuple[str, str]:
    """``adaptive`` or ``classic``, and why (for ``auto``; empty otherwise). ``auto`` is classic
    when an option only classic MWEM has was asked for (rounds, single queries, the average, a
    selection share); else adaptive when classic MWEM's measurements would each carry more than
    ``ADAPTIVE_RATIO`` times n in expected L1 noise (``synth.engines.mwem_adaptive.noise_ratio``). It
    reads the row count (public, or the noisy count already released), never the data."""
    if selection != "auto":
        return selection, ""
    if (rounds is not None or measure != "marginal" or output != "last" or select_share is not None
            or not any(workload.subsets)):
        return "classic", ""
    subsets = workload.subsets
    measurements = min(default_rounds(workload, len(subsets), zcdp=delta > 0), len(subsets))
    share = rounds_total(epsilon, delta, count.epsilon, count.rho) / measurements
    per_cell = mean_abs_noise(0.0, share) if delta > 0 else mean_abs_noise(share)
    sizes = dict(zip(schema.names, schema.shape))
    cells = [math.prod(sizes[c] for c in s) for s in subsets]
    ratio = noise_ratio(cells, n, per_cell)
    if ratio > ADAPTIVE_RATIO:
        return "adaptive", (f"adaptive rounds: {measurements} classic measurements at an equal share of the budget "
                            f"would add {ratio:.2g} n of expected L1 noise to the workload's median marginal (over "
                            f"{ADAPTIVE_RATIO:g})")
    return "classic", (f"classic rounds: {measurements} measurements at an equal share of the budget add {ratio:.2g} n "
                       f"of expected L1 noise to the workload's median marginal (at most {ADAPTIVE_RATIO:g}; "
                       "--selection adaptive to override)")


def plan_noise(workload: Workload, schema: Schema, epsilon: float, delta: float, *, noise: str = "auto",
               selection: str = "auto", rounds: int | None = None, measure: str = "marginal",
               select_share: float | None = None, output: str = "last", rows: int | None = None,
               count_share: float = DEFAULT_COUNT_SHARE) -> NoiseChoice:
    """The noise and accounting of an MWEM run with these options (``synth.engines.mwem_noise``): with
    ``noise="auto"`` and delta > 0, pure epsilon with discrete Laplace or rho-zCDP with discrete
    Gaussian, whichever plan adds less expected |noise| to a measured cell at the pure plan's
    number of measurements. That number is its classic rounds (``default_rounds``), or under
    ``selection="adaptive"`` (or ``auto`` choosing it, which is known beforehand only when n is
    public) the rounds its first round's budget would allow. Reads only public facts: epsilon,
    delta, the options, the workload and schema, and n when it is public (``rows`` or the schema's)."""
    if noise != "auto" or not delta > 0:  # nothing to choose
        return choose_noise(noise, epsilon, delta, 1, 0.0, None)
    public = rows if rows is not None else schema.rows
    count_share_used = None if public is not None else count_share
    mode = "classic" if selection == "auto" else selection
    if selection == "auto" and public is not None:
        mode, _ = _selection_mode(selection, rounds, measure, output, select_share, schema, workload, float(public),
                                  epsilon, 0.0, RowCount(int(public), True, 0.0))
    zcdp_rounds = None
    if mode == "adaptive" and any(workload.subsets):
        total = rounds_total(epsilon, 0.0, 0.0 if public is not None else count_share * epsilon)
        start = _annealing_budget(total, False, schema, workload, public).first_round
        measurements, share = max(1, round(total / start)), SELECT_SHARE
    else:
        candidates = len(workload.subsets) if measure == "marginal" else len(workload)
        measurements = max(1, min(rounds or default_rounds(workload, candidates, measure), candidates))
        zcdp_rounds = max(1, min(rounds or default_rounds(workload, candidates, measure, zcdp=True), candidates))
        select = select_share is not None or measurements < candidates
        share = select_share if select_share is not None else (DEFAULT_SELECT_SHARE if select else 0.0)
    return choose_noise(noise, epsilon, delta, measurements, share, count_share_used, zcdp_rounds)


def _annealing_budget(total: float, zcdp: bool, schema: Schema, workload: Workload,
                      n: float | None) -> AnnealingBudget:
    """Adaptive MWEM's budget over the workload's columns, its first round sized from n (the
    annealing's default first round where n is not known yet)."""
    columns = [c for c in schema.names if any(c in s for s in workload.subsets)]
    sizes = dict(zip(schema.names, schema.shape))
    first = None if n is None else first_round_budget(total, zcdp, [sizes[c] for c in columns], n)
    return AnnealingBudget(total, zcdp, len(columns), first)


def _adaptive(data, schema, workload, dist, n, count, accountant, generator, passes, final_passes,
              progress, lead: list[str], delta: float, noise: str) -> MWEMResult:
    """Adaptive MWEM (``synth.engines.mwem_adaptive``) and its final fit, to convergence; ``delta`` is the
    plan's (0: pure epsilon, discrete Laplace), ``lead`` the run's first notes."""
    total = rounds_total(accountant.budget.epsilon, delta, count.epsilon, count.rho)
    budget = _annealing_budget(total, delta > 0, schema, workload, n)
    report = (lambda share: progress(0, 0.5 * share)) if progress is not None else None
    report_phase(progress, "selecting and measuring")
    run = adaptive_rounds(data, schema, workload, dist, n, budget, accountant, generator, passes, report)
    final_passes = DEFAULT_FINAL_PASSES if final_passes is None else final_passes  # to convergence, as before
    report_phase(progress, "final fit")
    fit = _final_fit(dist, run.measured, n, final_passes, 0.0, workload,
                     lambda done: progress(0, min(1.0, 0.5 + 0.5 * done / final_passes)) if progress else None)
    if progress is not None:
        progress(run.rounds, 1.0)
    distribution = dist.normalized() if dist.representation == "dense" else dist
    parameters = {"selection": "adaptive", "rounds": run.rounds, "annealed": run.annealed,
                  "representation": dist.representation, "model_cells": dist.cells, "measure": "marginal",
                  "select_share": SELECT_SHARE, "passes": passes, "final_passes": final_passes, **fit,
                  "output": "last", "composition": "zCDP" if delta > 0 else "basic",
                  "noise": "discrete Gaussian" if delta > 0 else "discrete Laplace",
                  "noise_asked": noise, "budget_total": total, "first_round_budget": budget.first_round,
                  "epsilon_count": count.epsilon, "rho_count": count.rho}
    notes = list(lead)
    unheld = [s for s in workload.subsets if not dist.fits(s)]
    if unheld:
        notes.append(f"{len(unheld)} of the workload's {len(workload.subsets)} marginals would grow the model past its "
                     f"cap of {dist.max_cells:,} cells (--max-model-cells); they are answered from the model")
    return MWEMResult(distribution, n, count.public, accountant, run.log, parameters, notes)


def _nothing_fits(max_model_cells: int) -> ModelSizeError:
    return ModelSizeError(f"no marginal of the workload fits a factored model of at most {max_model_cells:,} cells: "
                          "raise --max-model-cells or ask for smaller marginals")


def _fitting_in_order(dist, candidates: list, subset_of, schema: Schema | None = None) -> list:
    """The candidates a model can hold (all of them for a dense D, or when all fit). When the
    cap does not hold them all, the smallest are taken first (by cells, then workload order),
    each beside those before it that fit: a small marginal costs the model little and is
    measured with less noise per row than a large one, and taking them in workload order let
    the pairs of the two largest columns fill the cap and drop the small, strongly related
    ones (a 10-column trip table: 22 of 45 pairs dropped, fare x total among them). Depends on
    the subsets' sizes alone, never on the data."""
    if dist.representation == "dense":
        return list(candidates)

    def fitting(order: list) -> list:
        scratch, kept = dist.copy(), []
        for key in order:
            if scratch.fits(subset_of(key)):
                scratch.add_subset(subset_of(key))
                kept.append(key)
        return kept

    every = fitting(list(candidates))
    if len(every) == len(candidates) or schema is None:
        return every
    size = {key: int(np.prod([schema[name].size for name in subset_of(key)])) for key in candidates}
    smallest = fitting(sorted(candidates, key=lambda key: size[key]))  # sorted() is stable: ties keep their order
    return [key for key in candidates if key in set(smallest)]  # measured in workload order


def default_rounds(workload: Workload | Sequence[Sequence[str]], candidates: int, measure: str = "marginal",
                   zcdp: bool = False) -> int:
    """Rounds when none are given: every candidate when there are at most ``DEFAULT_ROUNDS``;
    otherwise a few per column the workload touches, capped. Under pure epsilon two per column
    (a one-way marginal and about one pair each, as a tree of pairs needs), at most
    ``DEFAULT_ROUNDS``: a round's noise grows linearly with the rounds, and on full adult's 91
    pairs at eps = 1, 28-40 rounds give mean L1 0.085-0.087 and 50 rounds 0.093. Under zCDP
    (``zcdp``) ``ZCDP_ROUNDS_PER_COLUMN`` per column, at most ``ZCDP_MAX_ROUNDS``: Gaussian noise
    grows only with the square root of the rounds, and at eps = 1, delta = 1e-9 the model's
    median over seeds goes from 0.074 (28 rounds) to 0.067 (64 or 70; 78 rounds grew a model
    whose fit took 6x as long). Single queries (``measure="query"``): 50."""
    if candidates <= DEFAULT_ROUNDS or measure != "marginal":
        return min(candidates, DEFAULT_ROUNDS)
    subsets = workload.subsets if isinstance(workload, Workload) else workload
    columns = {c for s in subsets for c in s}
    per_column, cap = (ZCDP_ROUNDS_PER_COLUMN, ZCDP_MAX_ROUNDS) if zcdp else (2, DEFAULT_ROUNDS)
    return max(1, min(cap, per_column * len(columns)))


def final_pass_budget(asked: int | None, representation: str, cells: int) -> int:
    """The final fit's most passes: as asked, else ``DEFAULT_FINAL_PASSES`` for a dense model and
    ``FIT_WORK`` / the model's cells (within 1,000..``MAX_FINAL_PASSES``) for a factored one.
    Reads the model's size only (public: the model is released)."""
    if asked is not None:
        return asked
    if representation != "factored":
        return DEFAULT_FINAL_PASSES
    return int(min(MAX_FINAL_PASSES, max(DEFAULT_FINAL_PASSES, FIT_WORK // max(cells, 1))))


class _Work:
    """Progress as a share of the walks of the universe a run makes at most: round t fits t
    measurements ``passes`` times; the final fit (planned at ``final_passes``, whatever the
    number it then runs) all of them."""

    def __init__(self, rounds: int, passes: int, final_passes: int):
        self.rounds, self.passes = rounds, passes
        self.fit = final_passes * rounds
        self.total = passes * rounds * (rounds + 1) / 2 + rounds + self.fit

    def after_round(self, t: int) -> float:
        return (self.passes * (t + 1) * (t + 2) / 2 + t + 1) / self.total

    def during_fit(self, share_done: float) -> float:
        """Progress once ``share_done`` of the final fit's passes are run."""
        return min(1.0, self.after_round(self.rounds - 1) + share_done * self.fit / self.total)


class _Estimate:
    """The current distribution's marginal tables (in rows) on every workload subset, from one
    fused walk over the universe."""

    def __init__(self, dist, subsets, n):
        self._tables = {s: t * n for s, t in zip(subsets, dist.marginals(subsets))}

    def table(self, subset):
        return self._tables[subset]
