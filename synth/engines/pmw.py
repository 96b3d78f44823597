"""Private Multiplicative Weights (Hardt and Rothblum 2010; Dwork and Roth 2014, Section 4.2).

PMW keeps a public distribution D_t over the universe (dense float64, uniform or a public
prior) and answers counting queries one at a time. Each epoch is one AboveThreshold run on
the error |f(x) - f(D_t)|, measured in rows (sensitivity 1):

* below the noisy threshold: a **lazy** round, answered from D_t (nothing more is spent);
* above: an **update** round: a fresh discrete Laplace measurement of f(x) is released and
  answered, D_t is multiplied by exp(eta * sign * f(u)) on the query's cells (eta = T/4) and
  renormalized, and the next epoch starts with a fresh noisy threshold;
* after L updates PMW **halts**: later answers come from D_L (post-processing, free); their
  bound is only the range [0, n] (``synth.engines.pmw_bounds``: every answer states one).

Each epoch charges eps_test (at its first test) and eps_measure (at its update) to the
accountant; the plan (``synth.engines.pmw_plan``) sizes them so that all L epochs fit the budget.
Queries are answered from marginal tables of D_t, cached per column subset until the next
update, so a lazy round costs the size of a marginal, not of the universe.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from synth.data.counts import Data, data_marginal, data_rows
from synth.data.schema import Schema
from synth.data.tables import DEFAULT_MAX_CELLS
from synth.data.workload import Query, Workload, parse_query
from synth.engines.estimate import Estimate, pmw_estimate, practical_pmw_estimate
from synth.engines.monitor import KLMonitor
from synth.engines.monitor import PracticalMonitor
from synth.engines.pmw_base import CAPPED, HALTED, LAZY, UPDATE, PMWAnswer, StoredDistribution
from synth.engines.pmw_bounds import noise_sum_bound, range_bound, below_bound
from synth.engines.pmw_plan import PlanError, PMWPlan, plan_pmw
from synth.engines.pmw_practical import (DEFAULT_TEST_SHARE, PracticalPlan, PracticalPMW, default_updates,
                                         measures_all, plan_practical, selected_rounds, warm_start_ones,
                                         warm_start_subsets)
from synth.engines.release import Progress, Release, describe_representation
from synth.errors import SynthError
from synth.models.distribution import as_distribution, choose_representation
from synth.models.factored import DEFAULT_MAX_MODEL_CELLS, FactoredModel
from synth.models.model import Model
from synth.privacy.accounting import Accountant, Budget
from synth.privacy.mechanisms import AboveThreshold, discrete_laplace
from synth.privacy.rng import is_seeded, make_rng
from synth.privacy.row_count import DEFAULT_COUNT_SHARE, row_count
from synth.privacy.validation import check_budget_epsilon, check_delta, check_positive_int, check_probability


__all__ = ["OpenPMW", "PMW", "PMWConfig", "PMWEngine", "PMWAnswer", "PMWRun", "open_pmw", "run_pmw", "LAZY", "UPDATE", "HALTED", "VARIANTS"]

_RENORMALIZE_OUTSIDE = (1e-100, 1e100)


@dataclass
class _Update:
    epoch: int
    query: str
    measured: int
    sign: int


class PMW(StoredDistribution):
    """The PMW state and its answering loop, over ``data``: the encoded private rows, or a planned scan's counts."""

    def __init__(
        self,
        data: Data,
        schema: Schema,
        plan: PMWPlan,
        rng: np.random.Generator | int | None = None,
        *,
        accountant: Accountant | None = None,
        prior: np.ndarray | None = None,
        monitor: KLMonitor | None = None,
        max_cells: int = DEFAULT_MAX_CELLS,
        representation: str = "auto",
        max_model_cells: int = DEFAULT_MAX_MODEL_CELLS,
    ):
        self._open(data, schema, plan, rng, accountant, prior, monitor, max_cells, representation, max_model_cells)
        self.updates_log: list[_Update] = []

    # -- answering -----------------------------------------------------------------------
    def answer(self, query: Query | dict, *, query_id: int = -1, label: str = "") -> PMWAnswer:
        """Answer one counting query (in rows), spending budget only on updates."""
        if isinstance(query, dict):  # the workload file's form, e.g. {"where": {"sex": "Male"}}
            query = parse_query(query, self.schema, index=max(query_id, 0))
        model_count = self.model_answer(query)
        plan = self.plan
        if self.halted or not self._dist.fits(query.columns):  # halted, or an update would grow D past its cap
            bound = range_bound(model_count, plan.rows, plan.beta, epsilon_count=plan.epsilon_count)
            if self.halted:
                self.rounds[HALTED] += 1
                return PMWAnswer(model_count, HALTED, self.updates, bound)
            self.capped += 1
            self.rounds[LAZY] += 1
            return PMWAnswer(model_count, CAPPED, self.updates, bound)
        if self._epoch is None:
            self._epoch = AboveThreshold(
                self.plan.threshold_count, self.plan.epsilon_test, 1, self._rng,
                accountant=self.accountant, note=f"PMW epoch {self.updates + 1}",
            )
        true_count = int(round(self._true_count(query)))
        if not self._epoch.test(abs(true_count - model_count)):
            self.rounds[LAZY] += 1
            return PMWAnswer(model_count, LAZY, self.updates, below_bound(plan.threshold_count, plan.epsilon_test,
                                                                          plan.beta))
        measured = discrete_laplace(true_count, self.plan.epsilon_measure, 1, self._rng,
                                    accountant=self.accountant, note=f"PMW update {self.updates + 1}")
        sign = int(np.sign(measured - model_count))
        self._update(query, sign, query_id, label, true_count, model_count)
        self.updates_log.append(_Update(self.updates, label, int(measured), sign))
        self._epoch = None
        self.rounds[UPDATE] += 1
        return PMWAnswer(float(measured), UPDATE, self.updates,
                         noise_sum_bound(1, plan.beta, epsilon=plan.epsilon_measure))

    def _update(self, query: Query, sign: int, query_id: int, label: str, true_count: int, model_count: float) -> None:
        if self.monitor is not None:
            self.monitor.before_update(self._read_only(), self._dist.total)
        self._dist.scale_query(query, math.exp(self.plan.eta * sign))
        self.updates += 1
        dist = self._dist
        if dist.representation == "dense" and (not _RENORMALIZE_OUTSIDE[0] < dist.total < _RENORMALIZE_OUTSIDE[1]
                                               or self.updates % 32 == 0):
            dist.total = float(dist.weights.sum())  # refresh the running total (and its rounding)
            if not _RENORMALIZE_OUTSIDE[0] < dist.total < _RENORMALIZE_OUTSIDE[1]:
                dist.weights /= dist.total
                dist.total = 1.0
        self._model_tables.clear()
        if self.monitor is not None:
            n = self.monitor.n
            self.monitor.after_update(self._read_only(), self._dist.total, query_id=query_id, query=label,
                                      true_fraction=true_count / n, model_fraction=model_count / self.plan.rows,
                                      sign=sign, accountant=self.accountant)

    def to_model(self, *, seeded: bool = False):
        """The release: D_t, the plan, the privacy spent and the update log (all public)."""
        from dataclasses import asdict

        return Model(
            schema=self.schema, mechanism="pmw", distribution=self.distribution(), rows=self.plan.rows,
            rows_public=self.plan.rows_public, parameters=self.plan.to_dict(), privacy=self.accountant.to_dict(),
            round_log=[asdict(u) for u in self.updates_log], seeded=seeded,
        )

    def _read_only(self) -> np.ndarray:
        view = self._dist.weights.view()
        view.flags.writeable = False
        return view


@dataclass
class PMWRun:
    """Everything an offline PMW run produced (the released parts and the diagnostics)."""

    answers: np.ndarray  # released answers (rows), workload order, last pass
    rounds: list[str]
    final: np.ndarray  # answers from the final model D_final (rows)
    plan: PMWPlan
    pmw: PMW
    accountant: Accountant
    monitor: KLMonitor | None = None
    notes: list[str] = field(default_factory=list)
    bounds: np.ndarray = field(default_factory=lambda: np.zeros(0))  # each answer's error bound (rows), 1 - beta

    @property
    def learned(self) -> bool:
        """Whether D moved from its start: an update, a selected round, or the practical warm start's measurements."""
        return bool(self.pmw.updates or self.pmw.selected) or (isinstance(self.plan, PracticalPlan)
                                                               and bool(self.plan.warm_subsets))


VARIANTS = ("practical", "theory")
#: Most passes of a workload through the practical variant (each pass after the first is nearly all lazy).
MAX_PRACTICAL_PASSES = 100


@dataclass(frozen=True)
class PMWConfig:
    """PMW's public options, checked when made (before any data is read).

    ``variant``: ``practical`` (``synth.engines.pmw_practical``: warm start, whole-marginal
    tests and measurements, refits) or ``theory`` (the textbook PMW of this module, with its
    worst-case plan); ``test``, ``test_share`` and ``warm`` are the practical variant's.
    ``updates``: the update bound L (default: planned); ``alpha``: the accuracy to plan for;
    ``beta``: the failure probability of the stated bounds; ``passes``: times an offline
    workload is fed. ``monitor``: keep the KL-potential monitor (NON-PRIVATE, dense D only).
    ``rows``: n when public, else a noisy count bought with ``count_share`` of epsilon.
    ``representation`` keeps D dense or factored; a factored D answers lazily (``CAPPED``)
    a query whose update would grow it past ``max_model_cells``.
    """

    variant: str = "practical"
    updates: int | None = None
    alpha: float | None = None
    beta: float = 0.05
    passes: int = 1
    test: str = "auto"
    test_share: float | None = None
    warm: bool = True
    monitor: bool = False
    rows: int | None = None
    count_share: float = DEFAULT_COUNT_SHARE
    representation: str = "auto"
    max_model_cells: int = DEFAULT_MAX_MODEL_CELLS

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise ValueError(f"variant ({self.variant!r}) must be one of: {', '.join(VARIANTS)}")
        if self.variant == "theory" and (self.test != "auto" or self.test_share is not None or not self.warm):
            raise ValueError("test, test_share and warm apply to the practical variant only")
        check_positive_int(self.passes, "passes")
        if self.variant == "practical" and self.passes > MAX_PRACTICAL_PASSES:
            raise PlanError(f"passes ({self.passes:,}) must be at most {MAX_PRACTICAL_PASSES} for the practical "
                            "variant: after the first pass every subset is measured or tested, so more passes only "
                            "repeat answers")
        if self.updates is not None:
            check_positive_int(self.updates, "updates")
        if self.rows is not None:
            check_positive_int(self.rows, "rows")
        check_probability(self.beta, "beta")


@dataclass
class OpenPMW:
    """A PMW ready for its first query: the engine, its plan, accountant, monitor and notes."""

    pmw: PMW | PracticalPMW
    plan: PMWPlan | PracticalPlan
    accountant: Accountant
    monitor: KLMonitor | PracticalMonitor | None
    notes: list[str]


class PMWEngine:
    """PMW for one schema: ``open`` starts it for a stream of queries (the warm start, if any,
    runs there), and ``run`` feeds it an offline workload and releases D: plan, count n, warm
    start, answer (measuring on updates), release."""

    name = "pmw"

    def __init__(self, config: PMWConfig, schema: Schema, workload: Workload | None = None, *,
                 prior: np.ndarray | None = None):
        if config.monitor and choose_representation(schema, config.representation) != "dense":
            raise SynthError("the KL monitor needs the dense distribution: leave out --monitor, or keep the universe "
                             "under the dense cap (--representation dense)")
        self.config, self.schema, self.workload, self.prior = config, schema, workload, prior

    def plan(self, budget: Budget) -> None:
        """Check the budget before the data is read (PMW's own plan needs n, so it is made in
        ``open``, once n is counted)."""
        check_budget_epsilon(budget.epsilon)

    def estimate(self, budget: Budget) -> Estimate | None:
        """The offline run's time from its size (``synth.engines.estimate``); None for a factored
        model, and for the theory variant's plan when it needs the noisy n."""
        c, schema, workload = self.config, self.schema, self.workload
        if workload is None or choose_representation(schema, c.representation) == "factored":
            return None
        if c.variant == "practical":
            return practical_pmw_estimate(schema.universe_size, c.updates or len(workload.subsets))
        rows = c.rows if c.rows is not None else schema.rows
        if rows is None:
            return None
        try:
            plan = plan_pmw(budget.epsilon, budget.delta, rows, schema.universe_size, len(workload) * c.passes, c.beta,
                            updates=c.updates, alpha=c.alpha)
        except ValueError:
            return None  # the run itself will say why the plan fails
        return pmw_estimate(schema.universe_size, plan.updates, c.passes)

    def practical_plan(self, budget: Budget, rows: float, subsets: Sequence[Sequence[str]] = (), *,
                       rows_public: bool = True, epsilon_count: float = 0.0) -> PracticalPlan:
        """The practical variant's plan for n = ``rows`` and the declared ``subsets``: every one
        of them measured up front and no epoch when the default L would update each anyway
        (``measures_all``, and D can hold them all); else the warm start's pairs (or one-ways),
        ``selected_rounds`` of ``default_updates``' budget spent before the first query on the
        subsets D fits worst, and epochs sharing the rest that may update every subset left;
        with none declared, one epoch per pair of columns. With L given (``--updates``) every
        update is a test's. What ``open`` runs and ``synth answer --plan`` prints. Public."""
        c, schema = self.config, self.schema
        zcdp = budget.delta > 0
        selected = budgeted = 0
        holds_all = len(self._fitting(subsets)) == len(subsets)
        if c.updates is None and c.warm and measures_all(subsets, zcdp=zcdp) and holds_all:
            updates, warm, sizes = 0, tuple(dict.fromkeys(tuple(subset) for subset in subsets)), []
        else:
            updates = c.updates or (default_updates(subsets, zcdp=zcdp) if subsets
                                    else max(len(schema), math.comb(len(schema), 2)))
            if c.updates is None and c.warm:
                # rounds that select the worst declared subsets first; the epochs after them share
                # the rest of L's budget, and may update each declared subset the rounds leave
                selected = selected_rounds(subsets, zcdp=zcdp)
                if selected:
                    budgeted = updates - selected
                    updates = len(set(map(tuple, subsets))) - selected
            # with selected rounds the data choose which marginals to measure; shared pairs at an
            # update's budget each would take it from them (16 binary columns' 560 triples, pure
            # epsilon: 0.0156-0.0178 mean L1 with them, 0.0072-0.0082 without; MWEM 0.0067-0.0084).
            # But where a factored D's cap holds only some declared subsets, the pairs give it a
            # tree the rounds build on, and under zCDP they cost little (8 columns of 6-15 values,
            # 56 triples, delta 1e-9: 1.27x MWEM's error without them, 1.05x with; under pure
            # epsilon 1.1x without, 1.65x with)
            crowded = not holds_all and zcdp
            pairs = self._fitting(warm_start_subsets(subsets)) if c.warm and (not selected or crowded) else ()
            ones = warm_start_ones(subsets) if c.warm and not pairs else ()  # shared pairs hold their one-ways
            cells = [math.prod(schema[name].size for name in subset) for subset in subsets]
            mean = sum(cells) / len(cells) if cells else 1.0
            # the one-ways at budgets that grow with their cells; the shared pairs, which carry the
            # early answers of 3-way workloads, at an update's (scaled down, adult's 35 triples lost a
            # third of their online accuracy)
            warm = ones + pairs
            sizes = [schema[one[0]].size / mean for one in ones] + [1.0] * len(pairs)
        return plan_practical(budget.epsilon, budget.delta, rows, schema.universe_size, updates, beta=c.beta,
                              rows_public=rows_public, epsilon_count=epsilon_count, alpha=c.alpha, test=c.test,
                              test_share=DEFAULT_TEST_SHARE if c.test_share is None else c.test_share,
                              warm_subsets=warm, warm_sizes=sizes, selected=selected, budgeted_epochs=budgeted)

    def _fitting(self, subsets: Sequence[Sequence[str]]) -> tuple[tuple[str, ...], ...]:
        """The subsets (in order) that D can hold, each beside those before it that fit: all for
        a dense D; for a factored one, those that keep it within ``max_model_cells`` (a warm
        start past the cap could not be fit). From the schema's sizes alone."""
        subsets = tuple(tuple(subset) for subset in subsets)
        if choose_representation(self.schema, self.config.representation) != "factored":
            return subsets
        scratch, kept = FactoredModel(self.schema, max_cells=self.config.max_model_cells), []
        for subset in subsets:
            if scratch.fits(subset):
                scratch.add_subset(subset)
                kept.append(subset)
        return tuple(kept)

    def open(self, counts: Data, budget: Budget, rng: np.random.Generator | int | None = None, *,
             subsets: Sequence[Sequence[str]] = (), queries: int | None = None) -> OpenPMW:
        """Plan PMW and start it, before any query is read.

        ``subsets``: the column subsets the queries will be on, when declared (a workload): the
        practical variant's warm start measures their shared 2-way marginals (3-way and wider
        workloads) and L defaults to ``pmw_practical.default_updates``; with none declared (an
        interactive stream) there is no warm start and L defaults to the number of 2-way subsets
        of the schema's columns (at least the number of columns: one epoch per pair an analyst
        may ask about). ``queries``: the stream's length, which the theory variant's plan needs.
        """
        c, schema = self.config, self.schema
        epsilon, delta = check_budget_epsilon(budget.epsilon), budget.delta
        kept = {"representation": c.representation, "max_model_cells": c.max_model_cells}
        generator = make_rng(rng)
        accountant = Accountant(epsilon, delta)
        notes: list[str] = []
        count = row_count(data_rows(counts), c.rows if c.rows is not None else schema.rows, accountant, generator,
                          c.count_share)
        if not count.public:
            notes.append(count.describe())
        n, count_epsilon = count.rows, count.epsilon
        if c.variant == "practical":
            plan = self.practical_plan(budget, n, subsets, rows_public=count.public, epsilon_count=count_epsilon)
            watcher = (PracticalMonitor(data_marginal(counts, schema, None), plan.threshold, plan.updates)
                       if c.monitor else None)
            pmw = PracticalPMW(counts, schema, plan, generator, accountant=accountant, prior=self.prior,
                               monitor=watcher, declared=subsets, **kept)
        else:
            if queries is None:
                raise ValueError("the theory variant plans from the number of queries: give queries=")
            plan = plan_pmw(epsilon, delta, n, schema.universe_size, queries, c.beta,
                            rows_public=count.public, epsilon_count=count_epsilon, updates=c.updates, alpha=c.alpha)
            watcher = KLMonitor(data_marginal(counts, schema, None), plan.threshold, plan.updates) if c.monitor else None
            pmw = PMW(counts, schema, plan, generator, accountant=accountant, prior=self.prior, monitor=watcher, **kept)
        return OpenPMW(pmw, plan, accountant, watcher, notes)

    def run(self, counts: Data, budget: Budget, rng: np.random.Generator | int | None = None,
            progress: Progress | None = None) -> Release:
        """Answer the workload (``passes`` times, as a stream) and release D with its ledger."""
        run = self.record(counts, budget, rng, progress)
        lines = list(run.notes)
        lines.append(f"pmw ({self.config.variant}): {run.pmw.updates_text()}")
        lines.append(describe_representation(run.pmw.representation, run.pmw.model_cells, self.schema.universe_size))
        if run.pmw.capped:
            lines.append(f"pmw: {run.pmw.capped:,} queries answered lazily because their update would grow the model "
                         "past --max-model-cells")
        warnings = () if run.learned else (
            "PMW made no update: the synthetic table follows the starting distribution (see synth answer --plan)",)
        return Release(run.pmw.to_model(seeded=is_seeded(rng)), run.accountant, tuple(lines), warnings, run)

    def record(self, counts: Data, budget: Budget, rng: np.random.Generator | int | None = None,
               progress: Progress | None = None) -> PMWRun:
        """``run``'s work, as the engine's own record: every answer, its round, and the final model's."""
        if self.workload is None:
            raise ValueError("an offline PMW run needs a workload")
        workload, passes = self.workload, self.config.passes
        opened = self.open(counts, budget, rng, subsets=workload.subsets, queries=len(workload) * passes)
        pmw, plan = opened.pmw, opened.plan
        answers, bounds = np.zeros(len(workload)), np.zeros(len(workload))
        rounds = [""] * len(workload)
        total, every = len(workload) * passes, max(1, len(workload) * passes // 100)
        for p in range(passes):
            if isinstance(pmw, PracticalPMW):
                pmw.start_pass()
            for i, query in enumerate(workload):
                result = pmw.answer(query, query_id=i, label=workload.describe(i))
                answers[i], bounds[i] = result.value, result.bound
                rounds[i] = result.round
                done = p * len(workload) + i + 1
                if progress is not None and (done % every == 0 or done == total):
                    progress(done, done / total)
        if self.config.variant == "practical":
            final = plan.rows * as_distribution(pmw.release(), self.schema).answer_workload(workload)
        else:
            final = plan.rows * pmw.model_fractions(workload)
        return PMWRun(answers, rounds, final, plan, pmw, opened.accountant, opened.monitor, opened.notes, bounds)


def open_pmw(data: Data, schema: Schema, epsilon: float, delta: float = 0.0, beta: float = 0.05, *,
             subsets: Sequence[Sequence[str]] = (), queries: int | None = None,
             rng: np.random.Generator | int | None = None, prior: np.ndarray | None = None, **options) -> OpenPMW:
    """``PMWEngine(PMWConfig(beta=beta, **options), schema).open(...)``: PMW planned and
    started for a stream of queries (``PMWEngine.open``)."""
    engine = PMWEngine(PMWConfig(beta=beta, **options), schema, prior=prior)
    return engine.open(data, Budget(check_budget_epsilon(epsilon), check_delta(delta)), rng, subsets=subsets,
                       queries=queries)


def run_pmw(data: Data, schema: Schema, workload: Workload, epsilon: float, delta: float = 0.0, beta: float = 0.05,
            *, rng: np.random.Generator | int | None = None, prior: np.ndarray | None = None, progress=None,
            **options) -> PMWRun:
    """Answer ``workload`` with PMW (``PMWConfig(beta=beta, **options)``), feeding it as a
    stream ``passes`` times: the engine's record of the run (``PMWEngine.run`` releases it)."""
    engine = PMWEngine(PMWConfig(beta=beta, **options), schema, workload, prior=prior)
    return engine.record(data, Budget(check_budget_epsilon(epsilon), check_delta(delta)), rng, progress)
