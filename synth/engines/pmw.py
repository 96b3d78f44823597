"""Private Multiplicative Weights (Hardt and Rothblum 2010; Dwork and Roth 2014, Section 4.2).

PMW keeps a public distribution D_t over the universe (dense float64, uniform or a public
prior) and answers counting queries one at a time. Each epoch is one AboveThreshold run on
the error |f(x) - f(D_t)|, measured in rows (sensitivity 1):

* below the noisy threshold: a **lazy** round, answered from D_t (nothing more is spent);
* above: an **update** round: a fresh discrete Laplace measurement of f(x) is released and
  answered, D_t is multiplied by exp(eta * sign * f(u)) on the query's cells (eta = T/4) and
  renormalized, and the next epoch starts with a fresh noisy threshold;
* after L updates PMW **halts**: later answers come from D_L (post-processing, free) and carry
  no accuracy guarantee.

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

from synth.privacy.accounting import Accountant
from synth.privacy.mechanisms import AboveThreshold, discrete_laplace
from synth.engines.monitor import KLMonitor
from synth.engines.pmw_base import CAPPED, HALTED, LAZY, UPDATE, PMWAnswer, StoredDistribution
from synth.engines.pmw_plan import PlanError, PMWPlan, plan_pmw
from synth.engines.monitor import PracticalMonitor
from synth.engines.pmw_practical import (DEFAULT_TEST_SHARE, PracticalPlan, PracticalPMW, default_updates,
                                         plan_practical, warm_start_subsets)
from synth.privacy.row_count import DEFAULT_COUNT_SHARE, row_count
from synth.privacy.rng import make_rng
from synth.data.schema import Schema
from synth.models.distribution import as_distribution, choose_representation
from synth.errors import SynthError
from synth.models.factored import DEFAULT_MAX_MODEL_CELLS
from synth.data.counts import Data, data_marginal, data_rows
from synth.data.tables import DEFAULT_MAX_CELLS
from synth.privacy.validation import check_budget_epsilon
from synth.data.workload import Query, Workload, parse_query
from synth.models.model import Model


__all__ = ["OpenPMW", "PMW", "PMWAnswer", "PMWRun", "open_pmw", "run_pmw", "LAZY", "UPDATE", "HALTED", "VARIANTS"]

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
        if self.halted:
            self.rounds[HALTED] += 1
            return PMWAnswer(model_count, HALTED, self.updates)
        if not self._dist.fits(query.columns):  # an update would grow the factored D past its cap
            self.capped += 1
            self.rounds[LAZY] += 1
            return PMWAnswer(model_count, CAPPED, self.updates)
        if self._epoch is None:
            self._epoch = AboveThreshold(
                self.plan.threshold_count, self.plan.epsilon_test, 1, self._rng,
                accountant=self.accountant, note=f"PMW epoch {self.updates + 1}",
            )
        true_count = int(round(self._true_count(query)))
        if not self._epoch.test(abs(true_count - model_count)):
            self.rounds[LAZY] += 1
            return PMWAnswer(model_count, LAZY, self.updates)
        measured = discrete_laplace(true_count, self.plan.epsilon_measure, 1, self._rng,
                                    accountant=self.accountant, note=f"PMW update {self.updates + 1}")
        sign = int(np.sign(measured - model_count))
        self._update(query, sign, query_id, label, true_count, model_count)
        self.updates_log.append(_Update(self.updates, label, int(measured), sign))
        self._epoch = None
        self.rounds[UPDATE] += 1
        return PMWAnswer(float(measured), UPDATE, self.updates)

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
                                      sign=sign)

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


VARIANTS = ("practical", "theory")
#: Most passes of a workload through the practical variant (each pass after the first is nearly all lazy).
MAX_PRACTICAL_PASSES = 100


@dataclass
class OpenPMW:
    """A PMW ready for its first query: the engine, its plan, accountant, monitor and notes."""

    pmw: "PMW | PracticalPMW"
    plan: "PMWPlan | PracticalPlan"
    accountant: Accountant
    monitor: "KLMonitor | PracticalMonitor | None"
    notes: list[str]


def open_pmw(
    data: Data,
    schema: Schema,
    epsilon: float,
    delta: float = 0.0,
    beta: float = 0.05,
    *,
    subsets: Sequence[Sequence[str]] = (),
    queries: int | None = None,
    rows: int | None = None,
    rng: np.random.Generator | int | None = None,
    count_share: float = DEFAULT_COUNT_SHARE,
    updates: int | None = None,
    alpha: float | None = None,
    monitor: bool = False,
    prior: np.ndarray | None = None,
    variant: str = "practical",
    test: str = "auto",
    test_share: float | None = None,
    warm: bool = True,
    representation: str = "auto",
    max_model_cells: int = DEFAULT_MAX_MODEL_CELLS,
) -> OpenPMW:
    """Plan PMW and start it, before any query is read (the warm start, if any, runs here).

    ``subsets``: the column subsets the queries will be on, when declared (a workload): the
    practical variant's warm start measures their shared 2-way marginals (3-way and wider
    workloads) and L defaults to ``pmw_practical.default_updates``; with none declared (an
    interactive stream) there is no warm start and L defaults to the number of 2-way subsets
    of the schema's columns (at least the number of columns: one epoch per pair an analyst
    may ask about; each planned epoch holds back its share). ``queries``: the stream's length,
    which the theory variant's plan needs. n is public when ``rows`` is given (or the schema has ``rows``); otherwise a noisy count
    is bought with ``count_share * epsilon`` and charged to the accountant. ``representation``
    keeps D dense or factored (``synth.models.distribution``); a factored D answers lazily, labelled
    ``CAPPED``, a query whose update would grow it past ``max_model_cells``.
    """
    epsilon = check_budget_epsilon(epsilon)
    if monitor and choose_representation(schema, representation) != "dense":
        raise SynthError("the KL monitor needs the dense distribution: leave out --monitor, or keep the universe "
                         "under the dense cap (--representation dense)")
    kept = {"representation": representation, "max_model_cells": max_model_cells}
    if variant not in VARIANTS:
        raise ValueError(f"variant ({variant!r}) must be one of: {', '.join(VARIANTS)}")
    if variant == "theory" and (test != "auto" or test_share is not None or not warm):
        raise ValueError("test, test_share and warm apply to the practical variant only")
    generator = make_rng(rng)
    accountant = Accountant(epsilon, delta)
    notes: list[str] = []
    count = row_count(data_rows(data), rows if rows is not None else schema.rows, accountant, generator, count_share)
    if not count.public:
        notes.append(count.describe())
    n, count_epsilon = count.rows, count.epsilon
    if variant == "practical":
        warm_subsets = warm_start_subsets(subsets) if warm else ()
        if not updates:
            updates = default_updates(subsets, warm_subsets) if subsets else max(len(schema), math.comb(len(schema), 2))
        plan = plan_practical(epsilon, delta, n, schema.universe_size, updates, beta=beta,
                              rows_public=count.public, epsilon_count=count_epsilon, alpha=alpha, test=test,
                              test_share=DEFAULT_TEST_SHARE if test_share is None else test_share,
                              warm_subsets=warm_subsets)
        watcher = None
        if monitor:
            watcher = PracticalMonitor(data_marginal(data, schema, None), plan.threshold, plan.updates)
        pmw = PracticalPMW(data, schema, plan, generator, accountant=accountant, prior=prior, monitor=watcher, **kept)
    else:
        if queries is None:
            raise ValueError("the theory variant plans from the number of queries: give queries=")
        plan = plan_pmw(epsilon, delta, n, schema.universe_size, queries, beta,
                        rows_public=count.public, epsilon_count=count_epsilon, updates=updates, alpha=alpha)
        watcher = KLMonitor(data_marginal(data, schema, None), plan.threshold, plan.updates) if monitor else None
        pmw = PMW(data, schema, plan, generator, accountant=accountant, prior=prior, monitor=watcher, **kept)
    return OpenPMW(pmw, plan, accountant, watcher, notes)


def run_pmw(
    data: Data,
    schema: Schema,
    workload: Workload,
    epsilon: float,
    delta: float = 0.0,
    beta: float = 0.05,
    *,
    rows: int | None = None,
    rng: np.random.Generator | int | None = None,
    passes: int = 1,
    count_share: float = DEFAULT_COUNT_SHARE,
    updates: int | None = None,
    alpha: float | None = None,
    monitor: bool = False,
    prior: np.ndarray | None = None,
    progress=None,
    variant: str = "practical",
    test: str = "auto",
    test_share: float | None = None,
    warm: bool = True,
    representation: str = "auto",
    max_model_cells: int = DEFAULT_MAX_MODEL_CELLS,
) -> PMWRun:
    """Answer ``workload`` with PMW, feeding it as a stream (``passes`` times).

    ``variant="practical"`` (the default, ``synth.engines.pmw_practical``) warm-starts on the
    workload's shared 2-way marginals, tests whole marginals, measures whole marginals and
    refits every measurement; L defaults to ``pmw_practical.default_updates``. ``"theory"`` is
    the textbook PMW of this module with its worst-case plan. See ``open_pmw`` for n.
    """
    if variant == "practical" and passes > MAX_PRACTICAL_PASSES:
        raise PlanError(f"passes ({passes:,}) must be at most {MAX_PRACTICAL_PASSES} for the practical variant: after "
                         "the first pass every subset is measured or tested, so more passes only repeat answers")
    opened = open_pmw(data, schema, epsilon, delta, beta, subsets=workload.subsets, queries=len(workload) * passes,
                      rows=rows, rng=rng, count_share=count_share, updates=updates, alpha=alpha, monitor=monitor,
                      prior=prior, variant=variant, test=test, test_share=test_share, warm=warm,
                      representation=representation, max_model_cells=max_model_cells)
    pmw, plan, accountant, watcher, notes = (opened.pmw, opened.plan, opened.accountant, opened.monitor,
                                             opened.notes)
    answers = np.zeros(len(workload))
    rounds = [""] * len(workload)
    total, every = len(workload) * passes, max(1, len(workload) * passes // 100)
    for p in range(passes):
        for i, query in enumerate(workload):
            result = pmw.answer(query, query_id=i, label=workload.describe(i))
            answers[i] = result.value
            rounds[i] = result.round
            done = p * len(workload) + i + 1
            if progress is not None and (done % every == 0 or done == total):
                progress(done, done / total)
    if variant == "practical":
        released = pmw.release()
        final = plan.rows * as_distribution(released, schema).answer_workload(workload)
    else:
        final = plan.rows * pmw.model_fractions(workload)
    return PMWRun(answers, rounds, final, plan, pmw, accountant, watcher, notes)
