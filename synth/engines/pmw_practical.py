"""Practical PMW: the default variant (DESIGN.md, "Practical PMW").

Online like the textbook PMW (``synth.engines.pmw``): one query at a time, each answered before the
next is read; lazy, update and halted rounds; a fresh AboveThreshold per epoch; at most L
updates; every charge on the accountant. What changes, so that it learns at n ~ 10^4-10^5:

1. **The test.** A query on columns S is tested on its whole marginal table,
   g_S = ||M_S(x) - n M_S(D_t)||_1 (sensitivity 1: one row moves one cell by one), or on its
   own error when S's table is large (``test="query"``, or ``"auto"`` past ``max_test_cells``).
2. **The measurement.** An update releases the whole marginal M_S(x) (L1 and L2 sensitivity
   1) with exact discrete Laplace noise, or the single query's count in query mode.
3. **How D moves.** D_{t+1} is the multiplicative-weights fit (``synth.models.fit.mw_fit``, MWEM's
   own) to every measurement so far, stopped at the noise level. Post-processing: free.
4. **Budget and threshold.** L defaults to ``default_updates`` (the declared subsets the warm
   start does not inform, at least a third of them) or is given. Every measurement gets the
   same budget m (epsilon, or rho under zCDP when delta > 0, with discrete Gaussian noise),
   each epoch's test ``test_share`` of its epoch: count + (warm marginals) m + L m / (1 -
   test_share) = budget. Equal noise lets the fit weigh every measurement alike. A subset (or,
   in query mode, a query) already measured is part of every later fit, so it is answered
   lazily without a test: only what the release has never measured is tested. Within an
   epoch a subset tested lazy is not tested again until D moves (its test value could not
   change). The threshold is T = alpha n plus the mean size of the test's noise, so an error
   at the noise level is measured about half the time: a needless measurement still adds
   information to the fit, a missed one loses a subset.
5. **Warm start.** Before the first query, the 2-way marginals that the declared subsets
   (3-way and wider) share are measured once, non-adaptively (their choice reads only the
   public workload), and D_0 is fit to them: early queries are then answered from a model
   that already knows the pairs, instead of from the uniform distribution. On adult (7
   columns, 3-way marginals, epsilon 1) this took the online answers from 0.12 to about 0.045.
   When L by default would update every declared subset anyway (``measures_all``), the warm
   start measures all of them instead and no epoch is planned: the online answers are then
   the release's, as good as MWEM's (which measures every candidate in that case too).
6. **Selected rounds.** When the declared subsets are more than L by default, ``SELECTED_SHARE``
   of L's epochs are spent first as MWEM's rounds (``_select_rounds``): the exponential
   mechanism picks the declared subset D_t fits worst, it is measured, D_t is refit. The
   epochs after them share the rest and test what the rounds left. A test's threshold at
   epsilon 1 is hundreds of rows, and a subset whose error lies below it is never measured,
   where a selection still measures the largest. The warm start is then the one-way
   marginals only, unless a factored D too small for every declared subset needs the shared
   pairs' tree (under zCDP: ``PMWEngine.practical_plan``).

Online answers come from D_t; the release (``release()``) is the last D_t fit once more to
every measurement jointly, or a refit from the prior where D_t has fit the noise.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from fractions import Fraction

import numpy as np

from synth.data.counts import Data
from synth.data.schema import Schema
from synth.data.tables import DEFAULT_MAX_CELLS
from synth.data.workload import Query, parse_query
from synth.engines.monitor import PracticalMonitor
from synth.engines.pmw_base import (CAPPED, HALTED, LAZY, UPDATE, PMWAnswer, StoredDistribution, query_fraction,
                                    query_value)
from synth.engines.pmw_bounds import noise_sum_bound, range_bound, below_bound
from synth.engines.mwem import DEFAULT_PASSES as MWEM_PASSES, default_rounds
from synth.engines.mwem_budget import RoundBudget
from synth.engines.pmw_plan import MAX_UPDATES
from synth.errors import SynthError
from synth.models.factored import DEFAULT_MAX_MODEL_CELLS
from synth.models.fit import ALONE_TOLERANCE, CONVERGED, FIT_TOLERANCE, ONLINE_PASSES
from synth.models.model import Model
from synth.privacy.accounting import Accountant, BudgetExceeded, Charge, split_epsilon, subtract_epsilon
from synth.privacy.composition import zcdp_rho_limit
from synth.privacy.mechanisms import (AboveThreshold, discrete_gaussian, discrete_laplace, mean_abs_noise,
                                      noise_variance)
from synth.privacy.validation import check_positive_int, check_probability, check_real

__all__ = ["DEFAULT_MAX_TEST_CELLS", "DEFAULT_REPLAY_PASSES", "DEFAULT_TEST_SHARE", "TESTS",
           "PracticalPMW", "PracticalPlan", "default_updates", "measures_all", "plan_practical", "selected_rounds",
           "warm_start_ones", "warm_start_subsets"]

TESTS = ("auto", "marginal", "query")
#: Share of each epoch's budget for the test (the rest measures). On adult (7 columns, 3-way
#: marginals, epsilon 1) 0.2 measured every subset; 0.1 missed a third of them.
DEFAULT_TEST_SHARE = 0.2
#: ``test="auto"`` tests and measures whole marginals up to this many cells, single queries past
#: it (a table of a million noisy counts is 8 MB; MWEM measures such marginals whole too). At
#: 10,000 a payroll-like table's 15,552-cell triples were measured a cell at a time: mean L1 0.97
#: online where whole marginals give 0.25 (MWEM 0.11).
DEFAULT_MAX_TEST_CELLS = 2**20
#: The release refits from the prior where D_t's residual is below this share of the noise's
#: expected total: under where every fit stops (``FIT_TOLERANCE``, 0.97), by more than a last
#: pass overshoots it (online fits end at 0.96-0.99 where D_t was the better release, 0.93 on
#: adult's triples, where it had fit the noise).
OVERFIT_RESIDUAL = 0.95
#: A declared workload's open epoch gives way to a fresh one once a fresh one would get this
#: many times its budget (``PracticalPMW._outgrown``).
REOPEN_GAIN = 2.0
#: Share of the default L run as selected rounds before the first query, for a declared
#: workload L does not cover (``selected_rounds``). At epsilon 1 a test over tens of epochs has a
#: threshold of hundreds of rows, so subsets whose error lies below it are never measured, where
#: MWEM's selection still measures the largest. Online mean L1 against MWEM's, medians of 3 seeds
#: (no rounds / 0.5 / 0.75 / 0.9 of L): 16 binary columns' 120 pairs 1.67 / 1.25 / 1.25 / 1.13x,
#: their 560 triples 1.44 / 1.21 / 1.14 / 1.08x; 12 binary columns' 66 pairs 1.33 / 0.93 / 0.79 /
#: 0.83x; a 9-column table's 84 triples 1.00 / 0.92 / 0.95 / 0.94x (then with the shared-pair
#: warm start and a refit to the noise level after each round). The epochs after the rounds
#: still update what they find (41-55 updates on the 560 triples).
SELECTED_SHARE = 0.9
#: Multiplicative-weights passes after each selected round but the last (MWEM's per round:
#: the next selection needs a rough estimate, the first answers a fit one). On 16 binary
#: columns' 560 triples the rounds' refits to the noise level took 60 s of a 100 s run.
SELECT_PASSES = MWEM_PASSES
#: Most multiplicative-weights passes after an update (the fit stops at the noise level first).
DEFAULT_REPLAY_PASSES = 1000


class PracticalPlanError(SynthError):
    """The practical plan cannot be made (e.g. the budget is too small for L epochs)."""


@dataclass(frozen=True)
class PracticalPlan:
    """Budget, update bound and threshold of practical PMW. Public: it never reads the data."""

    epsilon: float
    delta: float
    beta: float
    rows: float  # n (public, or a noisy count)
    rows_public: bool
    universe_size: int
    updates: int  # L
    test_share: float
    epsilon_count: float
    epsilon_test: float  # per epoch (pure)
    epsilon_measure: float  # per update, discrete Laplace (0 under zCDP)
    rho_measure: float  # per update, discrete Gaussian (0 when pure)
    composition: str  # "basic" (pure epsilon) or "zCDP"
    alpha: float  # the user's target, a fraction of n, added to the threshold
    test: str
    max_test_cells: int
    warm_subsets: tuple[tuple[str, ...], ...] = ()  # measured once before the first query
    warm_share: float = 0.0
    epsilon_warm: float = 0.0  # per warm-start marginal, discrete Laplace (0 under zCDP)
    rho_warm: float = 0.0  # per warm-start marginal, discrete Gaussian (0 when pure)
    warm_scales: tuple[float, ...] = ()  # each warm marginal's budget / epsilon_warm or rho_warm (1 if absent)
    selected: int = 0  # rounds before the first query that select a declared subset and measure it
    budgeted_epochs: int = 0  # epochs whose budget is set aside (0: L of them)
    variant: str = "practical"

    @property
    def noise_allowance(self) -> float:
        """Mean |threshold noise| + mean |test noise| (rows) of the plan's first epoch."""
        return noise_allowance(self.epsilon_test)

    @property
    def threshold_count(self) -> float:
        """T in rows of the plan's first epoch: the test's value must exceed it (plus noise) for
        an update (later epochs' T follows their own test budget: ``epoch_threshold``)."""
        return self.epoch_threshold(self.epsilon_test)

    def epoch_threshold(self, epsilon_test: float) -> float:
        """T in rows for an epoch whose test has ``epsilon_test``: alpha n + the mean noise."""
        return self.alpha * self.rows + noise_allowance(epsilon_test)

    @property
    def threshold(self) -> float:
        """T as a fraction of n (what the monitor and the report show)."""
        return self.threshold_count / self.rows

    @property
    def noise(self) -> str:
        return "discrete Gaussian" if self.rho_measure else "discrete Laplace"

    def mean_abs_noise(self) -> float:
        """E|noise| of one value measured on an update (rows)."""
        return mean_abs_noise(self.epsilon_measure, self.rho_measure)

    def mean_abs_warm_noise(self) -> float:
        """E|noise| of one value measured by the warm start at its full budget (rows)."""
        return mean_abs_noise(self.epsilon_warm, self.rho_warm)

    def warm_budget(self, index: int) -> tuple[float, float]:
        """(epsilon, rho) of the ``index``-th warm-start marginal."""
        scale = self.warm_scales[index] if self.warm_scales else 1.0
        return self.epsilon_warm * scale, self.rho_warm * scale

    def cost(self, epsilon_test: float, epsilon_measure: float, rho_measure: float) -> float:
        """What an epoch of these budgets (its test and its measurement) costs in the budget's
        currency: rho under zCDP (a test of eps costs eps^2/2), epsilon under basic composition."""
        if self.rho_measure:
            return rho_measure + epsilon_test**2 / 2
        return epsilon_test + epsilon_measure

    @property
    def epoch_cost(self) -> float:
        """What the first epoch, and each selected round (its selection and its measurement),
        costs (``cost``)."""
        return self.cost(self.epsilon_test, self.epsilon_measure, self.rho_measure)

    @property
    def epochs_budget(self) -> float:
        """What the plan sets aside for its epochs (tests and measurements): ``budgeted_epochs``
        of them, or L; the filter (``PracticalPMW._open_epoch``) shares it out."""
        return (self.budgeted_epochs or self.updates) * self.epoch_cost

    def selection_budget(self) -> RoundBudget:
        """One selected round's budget: the first epoch's, the test's share selecting (the
        exponential mechanism, charged under zCDP as rho = eps_test^2 / 2, which buys it
        epsilon = 2 eps_test: it is eps^2/8-zCDP), the rest measuring."""
        if self.rho_measure:
            rho_select = self.epsilon_test**2 / 2
            return RoundBudget("zCDP", math.sqrt(8 * rho_select), 0.0, rho_select, self.rho_measure)
        return RoundBudget("basic", self.epsilon_test, self.epsilon_measure)

    def epoch_split(self, budget: float) -> tuple[float, float, float]:
        """One epoch of ``budget`` (``epochs_budget``'s currency) split as the plan splits its
        epochs: (eps_test, eps_measure, rho_measure)."""
        if self.rho_measure:
            ratio = self.epsilon_test**2 / 2 / self.rho_measure  # a test's rho per rho measured
            rho = budget / (1 + ratio)
            return math.sqrt(2 * ratio * rho), 0.0, rho
        e_test = budget * self.epsilon_test / (self.epsilon_test + self.epsilon_measure)
        return e_test, subtract_epsilon(budget, e_test), 0.0

    def test_kind(self, cells: int) -> str:
        if self.test != "auto":
            return self.test
        return "marginal" if cells <= self.max_test_cells else "query"

    def to_dict(self) -> dict:
        out = {**asdict(self), "threshold": self.threshold}
        out["warm_subsets"] = [list(subset) for subset in self.warm_subsets]
        return out

    def describe(self) -> str:
        n_text = f"{self.rows:,.0f} ({'public' if self.rows_public else 'noisy count'})"
        measure = (f"rho_measure={self.rho_measure:.6g} (discrete Gaussian)" if self.rho_measure
                   else f"eps_measure={self.epsilon_measure:.6g} (discrete Laplace)")
        lines = [
            "PMW plan, practical variant (public: computed without reading the data)",
            f"  budget                epsilon={self.epsilon:g} delta={self.delta:g}",
            f"  rows n                {n_text}",
            f"  universe |U|          {self.universe_size:,} cells",
            f"  update bound          L={self.updates:,} epochs ({self.composition} composition)",
            f"  first epoch           eps_test={self.epsilon_test:.6g}, {measure} (each later epoch: the budget "
            "left over the epochs ahead, split alike)",
            f"  test                  {self.test} (auto: whole marginals up to {self.max_test_cells:,} cells)",
            f"  threshold T           {self.threshold_count:,.1f} rows = alpha n ({self.alpha:g}) + mean test "
            f"noise ({self.noise_allowance:,.1f})",
        ]
        if not self.updates:  # ``measures_all``: no epoch, so no test or threshold
            lines[4] = (f"  update bound          L=0 epochs ({self.composition} composition): every declared "
                        "subset is measured before the first query; a query on another subset is halted")
            del lines[5:8]
        if self.selected:
            lines.insert(5, f"  selected rounds       {self.selected:,} before the first query, each an epoch's budget: the "
                            "exponential mechanism picks the declared subset D fits worst, and it is measured; then "
                            f"the L epochs share {self.budgeted_epochs or self.updates:,} epochs' budget")
        if self.warm_subsets:
            warm = (f"rho={self.rho_warm:.6g} (discrete Gaussian)" if self.rho_warm
                    else f"eps={self.epsilon_warm:.6g} (discrete Laplace)")
            lines.insert(5, f"  warm start            {len(self.warm_subsets)} marginals of "
                            f"{_ways(self.warm_subsets)} columns, {self.warm_share:.3g} of the budget, {warm} "
                            + ("at most each (smaller marginals less)" if self.warm_scales else "each"))
        if self.epsilon_count:
            lines.append(f"  noisy row count       eps_count={self.epsilon_count:g}")
        return "\n".join(lines)


def noise_allowance(epsilon_test: float) -> float:
    """Mean |threshold noise| + mean |test noise| (rows) of a test with ``epsilon_test``:
    discrete Laplace of scales 2/eps and 4/eps."""
    return mean_abs_noise(epsilon_test / 2) + mean_abs_noise(epsilon_test / 4)


def _ways(subsets) -> str:
    sizes = sorted({len(subset) for subset in subsets})
    return " or ".join(str(k) for k in sizes)


def warm_start_subsets(subsets: Sequence[Sequence[str]]) -> tuple[tuple[str, ...], ...]:
    """The marginals the warm start measures: for a workload with subsets of 3 or more columns,
    the 2-way sub-marginals that at least two of its subsets share (each informs several of
    them, at a fraction of their cells; AIM measures low orders first for the same reason),
    when they are fewer than those subsets.
    None for 1- and 2-way workloads (on adult's 2-way marginals a 1-way warm start changed
    nothing online and cost the release a fifth of its accuracy) or for an undeclared stream."""
    shared: dict[tuple[str, ...], int] = {}
    wide = {tuple(subset) for subset in subsets if len(subset) >= 3}
    for subset in subsets:
        if len(subset) >= 3:
            for pair in itertools.combinations(tuple(subset), 2):
                shared[pair] = shared.get(pair, 0) + 1
    pairs = tuple(pair for pair, uses in shared.items() if uses >= 2)
    # worth it only when the pairs are fewer than the subsets they inform (adult's 7 columns: 21
    # pairs for 35 triples; 4 columns: 6 pairs for 4 triples, where it made early answers worse)
    return pairs if len(pairs) < len(wide) else ()


def warm_start_ones(subsets: Sequence[Sequence[str]]) -> tuple[tuple[str, ...], ...]:
    """The one-way marginals the warm start also measures: every column the declared subsets
    of 2 or more columns touch (in their order), chosen from the public workload only; the
    engine measures them when no pair is shared (``warm_start_subsets``: on adult's 35 triples,
    one-ways beside the shared pairs made the online answers worse). Each
    costs little at its budget (``_warm_scales``: a few cells need little), and every early
    answer then comes from a model that knows the columns' shares: on a 5-column trip-like
    table's 10 triples the online answers went from 0.083 to 0.070 mean L1, on a payroll-like
    table's 10 pairs from 0.058 to 0.048, with releases as good or better."""
    return tuple((column,) for column in dict.fromkeys(c for subset in subsets if len(subset) >= 2 for c in subset))


def measures_all(subsets: Sequence[Sequence[str]], zcdp: bool = False) -> bool:
    """Whether L by default (``default_updates``) is one update for every declared subset: then
    the tests could only delay the measurements and cost budget, so the warm start measures
    every declared subset before the first answer (as MWEM measures every candidate when its
    rounds cover them all) and no epoch is planned. On adult's 7 columns (21 pairs, 35 triples),
    a 5-column trip-like table's 10 triples and titanic's 35 triples, tests and updates left the
    online answers 1.2-1.6x MWEM's error, from the first subsets answered before the later ones
    were measured."""
    unique = len({tuple(subset) for subset in subsets})
    return unique > 0 and default_updates(subsets, zcdp) >= unique


def default_updates(subsets: Sequence[Sequence[str]], zcdp: bool = False) -> int:
    """L when not given, for a declared workload: one update per declared subset (each is
    measured at most once), and no more than MWEM would measure of them
    (``mwem.default_rounds``: past that, each measurement's noise outgrows what it adds; on a
    16-column binary table's 560 triples, L = 560 gave a release 1.7x MWEM's error, L = 64 1.5x).
    Epochs do not cost their share whether or not they are used: each epoch's budget is what
    is left over the epochs still ahead (``PracticalPMW``). (With fixed shares, L had to be
    kept near the updates a run makes; on adult's 35 triples L = 14 halted 3,700 of 8,453
    answers.)"""
    unique = max(len({tuple(subset) for subset in subsets}), 1)
    return min(unique, default_rounds(subsets, unique, zcdp=zcdp))


def selected_rounds(subsets: Sequence[Sequence[str]], zcdp: bool = False) -> int:
    """Selected rounds before the first query (``PracticalPMW._select_rounds``) for a declared
    workload that L by default does not cover (else ``measures_all``): ``SELECTED_SHARE`` of
    ``default_updates``. The epochs after them share the rest of that budget and may update
    every declared subset the rounds left (the filter gives each what is left over those
    ahead)."""
    if not subsets or measures_all(subsets, zcdp):
        return 0
    updates = default_updates(subsets, zcdp)
    return min(round(SELECTED_SHARE * updates), updates - 1)  # at least one epoch's budget is left


def plan_practical(
    epsilon: float,
    delta: float,
    rows: float,
    universe_size: int,
    updates: int,
    *,
    beta: float = 0.05,
    rows_public: bool = True,
    epsilon_count: float = 0.0,
    test_share: float = DEFAULT_TEST_SHARE,
    alpha: float | None = None,
    test: str = "auto",
    max_test_cells: int = DEFAULT_MAX_TEST_CELLS,
    warm_subsets: Sequence[Sequence[str]] = (),
    warm_sizes: Sequence[float] = (),
    selected: int = 0,
    budgeted_epochs: int = 0,
    composition: str = "auto",
) -> PracticalPlan:
    """Split the budget (pure epsilon, or zCDP when ``delta`` > 0 and its measurements are the
    less noisy: ``composition="auto"``, as MWEM chooses) so an accountant of
    (epsilon, delta) accepts the row count, the warm start (one measurement per subset of
    ``warm_subsets``), ``selected`` selected rounds and every charge of ``budgeted_epochs``
    epochs (0: ``updates``; the filter shares their budget over up to ``updates`` epochs). Every
    measurement gets the same budget (so the fit weighs them alike), each epoch's test (and each
    round's selection) ``test_share`` of its epoch."""
    if composition == "auto" and delta > 0:
        options = dict(beta=beta, rows_public=rows_public, epsilon_count=epsilon_count, test_share=test_share,
                       alpha=alpha, test=test, max_test_cells=max_test_cells, warm_subsets=warm_subsets,
                       warm_sizes=warm_sizes, selected=selected, budgeted_epochs=budgeted_epochs)
        zcdp = plan_practical(epsilon, delta, rows, universe_size, updates, composition="zCDP", **options)
        pure = plan_practical(epsilon, delta, rows, universe_size, updates, composition="basic", **options)
        # few measurements (10 triples, say): pure epsilon's Laplace adds less noise than zCDP's Gaussian
        return min((zcdp, pure), key=lambda plan: plan.mean_abs_noise())
    if updates != 0 or not warm_subsets:  # L = 0: the warm start measures everything (``measures_all``)
        updates = check_positive_int(updates, "updates")
    if updates > MAX_UPDATES:
        raise PracticalPlanError(f"updates L ({updates:,}) must be at most {MAX_UPDATES:,}: ask for fewer (--updates)")
    selected = check_positive_int(selected, "selected") if selected else 0
    budgeted = check_positive_int(budgeted_epochs, "budgeted_epochs") if budgeted_epochs else updates
    if budgeted > max(updates, 1):
        raise ValueError(f"budgeted_epochs ({budgeted:,}) must be at most updates L ({updates:,})")
    test_share = check_probability(test_share, "test_share")
    beta = check_probability(beta, "beta")
    alpha = 0.0 if alpha is None else check_real(alpha, "alpha")
    if not 0 <= alpha < 1:
        raise PracticalPlanError(f"alpha ({alpha:g}) must be in [0, 1): the target accuracy is a fraction of n")
    if test not in TESTS:
        raise ValueError(f"test ({test!r}) must be one of: {', '.join(TESTS)}")
    max_test_cells = check_positive_int(max_test_cells, "max_test_cells")
    warm_subsets = tuple(tuple(subset) for subset in warm_subsets)
    warms = len(warm_subsets)
    if composition not in ("auto", "zCDP", "basic"):
        raise ValueError(f"composition ({composition!r}) must be auto, zCDP or basic")
    zcdp = delta > 0 and composition != "basic"
    scales = _warm_scales(warm_sizes, warms, zcdp)
    # every update's measurement gets the same budget m, each epoch's test (each selected round's
    # selection) test_share / (1 - test_share) of it, a warm marginal m times its scale:
    # count + sum(scales) m + (selected + budgeted) m / (1 - test_share) = budget
    epochs = selected + budgeted
    units = sum(scales) + epochs / (1 - test_share)
    available = subtract_epsilon(epsilon, epsilon_count)
    e_warm = rho_warm = 0.0
    if zcdp:
        rho = zcdp_rho_limit(epsilon, delta) - epsilon_count**2 / 2
        if not rho > 0:
            raise PracticalPlanError(f"epsilon={epsilon:g} leaves no budget after the row count")
        rho_measure = rho / units
        e_test, e_measure, composition = math.sqrt(2 * rho_measure * test_share / (1 - test_share)), 0.0, "zCDP"
        for _ in range(200):  # the accountant composes with its own safety margins: shrink until it accepts
            if _accepted(epsilon, delta, epsilon_count, [(0.0, rho_measure * f) for f in scales], budgeted, e_test, 0.0,
                         rho_measure, selected):
                break
            e_test, rho_measure = e_test * (1 - 1e-4), rho_measure * (1 - 2e-4)
        else:
            raise PracticalPlanError(f"no zCDP split of epsilon={epsilon:g}, delta={delta:g} over {epochs} epochs")
        rho_warm = rho_measure if warms else 0.0
    else:
        # (min: without a warm start the ratio is 1, but in floats it can round above the budget)
        if epochs:
            per_epoch = split_epsilon(min(available, available * epochs / (1 - test_share) / units), epochs)
        else:  # no epochs: what one would get, so that the plan's test and threshold still read sensibly
            per_epoch = available / units / (1 - test_share)
        e_test = per_epoch * test_share
        e_measure, rho_measure, composition = subtract_epsilon(per_epoch, e_test), 0.0, "basic"
        if warms:
            rest = available - per_epoch * epochs
            while Fraction(rest) + Fraction(per_epoch) * epochs > Fraction(available):
                rest = math.nextafter(rest, 0.0)
            e_warm = min(rest / sum(scales), e_measure)
            while sum(Fraction(e_warm * f) for f in scales) > Fraction(rest):
                e_warm = math.nextafter(e_warm, 0.0)
    warm_share = (sum(scales) / units) if warms else 0.0
    warm_budget = (e_warm or rho_warm) * min(scales) if warms else 1.0  # a warm start with no budget is refused too
    if min(e_test, e_measure or rho_measure, warm_budget) < 2.0**-40:
        raise PracticalPlanError(f"epsilon={epsilon:g} over L={updates:,} epochs leaves {e_test:.3g} per test, below "
                                 "what exact discrete noise resolves (2^-40): ask for fewer updates (--updates)")
    return PracticalPlan(epsilon, delta, beta, float(rows), rows_public, int(universe_size), updates, test_share,
                         epsilon_count, e_test, e_measure, rho_measure, composition, alpha, test, max_test_cells,
                         warm_subsets, warm_share, e_warm, rho_warm,
                         tuple(scales) if any(f != 1.0 for f in scales) else (), selected,
                         budgeted if budgeted != updates else 0)


def _warm_scales(sizes: Sequence[float], warms: int, zcdp: bool) -> list[float]:
    """Each warm marginal's budget against an update's, from its cells relative to the mean
    declared subset's (``sizes``; all 1 when not given): the L1 error of a marginal is its cells
    times its noise, so the budget that minimises the summed L1 error grows as cells^(2/3)
    under zCDP (rho) and cells^(1/2) under pure epsilon; a small marginal needs little. At
    most 1. On a 5-column trip-like table's 10 triples, one-way marginals at these budgets took
    the online answers from 0.083 to 0.070 and the release from 0.054 to 0.053."""
    if not sizes:
        return [1.0] * warms
    power = 2 / 3 if zcdp else 1 / 2
    return [min(1.0, float(size) ** power) for size in sizes]


def _accepted(epsilon, delta, epsilon_count, warm_budgets, updates, e_test, e_measure, rho_measure,
              selected: int = 0) -> bool:
    """Whether an accountant of (epsilon, delta) takes every charge the plan makes, as the run
    makes them: the count, the warm start, the selected rounds and ``updates`` epochs."""
    accountant = Accountant(epsilon, delta)
    try:
        if epsilon_count:
            accountant.spend(epsilon_count)
        for e_warm, rho_warm in warm_budgets:
            if rho_warm:
                accountant.spend(rho=rho_warm)
            else:
                accountant.spend(e_warm)
        for _ in range(selected):  # as RoundBudget charges them: the selection at the test's rho
            if rho_measure:
                accountant.spend(rho=e_test**2 / 2)
                accountant.spend(rho=rho_measure)
            else:
                accountant.spend(e_test)
                accountant.spend(e_measure)
        for _ in range(updates):
            accountant.spend(e_test)
            if rho_measure:
                accountant.spend(rho=rho_measure)
            else:
                accountant.spend(e_measure)
    except ValueError:
        return False
    return True


@dataclass
class _Measurement:
    """What one update released (all public)."""

    update: int
    query: str
    columns: tuple[str, ...]
    kind: str  # "marginal" or "query"
    noisy: list  # the noisy table (nested lists) or count
    epsilon: float = 0.0  # its discrete Laplace budget (0 under zCDP)
    rho: float = 0.0  # its discrete Gaussian budget (0 when pure)


class PracticalPMW(StoredDistribution):
    """The practical PMW state and its answering loop over ``data``: the encoded private rows, or a planned scan's counts."""

    def __init__(
        self,
        data: Data,
        schema: Schema,
        plan: PracticalPlan,
        rng: np.random.Generator | int | None = None,
        *,
        accountant: Accountant | None = None,
        prior: np.ndarray | None = None,
        monitor: PracticalMonitor | None = None,
        replay_passes: int = DEFAULT_REPLAY_PASSES,
        max_cells: int = DEFAULT_MAX_CELLS,
        representation: str = "auto",
        max_model_cells: int = DEFAULT_MAX_MODEL_CELLS,
        declared: Sequence[Sequence[str]] = (),
    ):
        self._open(data, schema, plan, rng, accountant, prior, monitor, max_cells, representation, max_model_cells)
        self._start = self._dist.copy()  # the release refits from here where D_t has fit noise
        self._declared = tuple(dict.fromkeys(tuple(subset) for subset in declared))
        self._seen: set = set()  # declared subsets whose queries came in this pass
        self._tests = 0  # subsets (or queries) tested so far
        self._left = plan.epochs_budget  # what the epochs still have (rho, or epsilon)
        self.epoch_budget = (plan.epsilon_test, plan.epsilon_measure, plan.rho_measure)  # the open epoch's
        self.epoch_threshold = plan.threshold_count  # the open epoch's T (rows)
        self._variances: list[float] = []  # each measured value's noise variance, for the fit's weights
        self._budgets: list[tuple[float, float]] = []  # each measurement's (epsilon, rho)
        self._projections: dict = {}  # (measurement, columns) -> its noisy table on those columns
        self.replay_passes = check_positive_int(replay_passes, "replay_passes")
        self._measured: list[tuple] = []  # ("marginal", subset, table) or ("query", index, count), for mw_fit
        self._noise_total = 0.0  # E[sum of |noise|] over every measured value: where a fit stops
        self._newest_noise = 0.0  # E[sum of |noise|] over the newest measurement's values
        self._converged_at = -1  # measurements count at which an online joint fit last stopped by convergence
        self._measured_queries: list[Query] = []  # what ("query", i, ...) refers to
        self._done: set = set()  # measured subsets, and measured queries' keys
        self._tested_lazy: set = set()  # subsets tested lazy since D last moved
        self.fit_passes: list[int] = []  # MW passes run after each update
        self.log: list[_Measurement] = []
        self.released = None  # the release (a flat array, or a factored model), once made
        self._released_measurements = -1
        if plan.warm_subsets:
            self._warm_start()
        if plan.selected:
            self._select_rounds()

    def _warm_start(self) -> None:
        """Measure the plan's warm-start marginals (chosen from the public workload, never from
        the data) and fit D_0 to them, before the first query."""
        for index, subset in enumerate(self.plan.warm_subsets):
            epsilon, rho = self.plan.warm_budget(index)
            self._measure_marginal(subset, epsilon, rho, f"PMW warm start {', '.join(subset)}")
            self._done.add(subset)  # in every fit from now on: its queries are answered without a test
            self.log.append(_Measurement(0, "warm start", subset, "marginal", self._measured[-1][2].tolist(),
                                         epsilon, rho))
        self.fit_passes.append(self._fit(self._dist))

    def _select_rounds(self) -> None:
        """Before the first query, ``plan.selected`` rounds as MWEM runs them: the exponential
        mechanism picks the declared subset (not yet measured, one D can hold, and one an update
        would measure whole: ``PracticalPlan.test_kind``) whose L1
        error on D_t most exceeds the noise its measurement would add (AIM's score, sensitivity
        1), it is measured at an update's budget, and D_t is refit for ``SELECT_PASSES`` passes;
        after the last round, to the noise level (``_fit_online``). Each round costs what an
        epoch does. Then the online epochs test what the rounds left: the largest errors of the
        workload are measured first, where tests at epsilon 1 over tens of epochs have
        thresholds of hundreds of rows and measure only what exceeds them (``SELECTED_SHARE``)."""
        budget = self.plan.selection_budget()
        noise = budget.mean_abs_noise
        cells = {s: _cells(self.schema, s) for s in self._declared}
        whole = [s for s in self._declared if self.plan.test_kind(cells[s]) == "marginal"]  # as an update measures
        for round_ in range(1, self.plan.selected + 1):
            candidates = [s for s in whole if s not in self._done and self._dist.fits(s)]
            if not candidates:
                break
            scores = np.array([float(np.abs(self._data_table(s) - self.plan.rows * self.model_table(s)).sum())
                               - noise * cells[s] for s in candidates])
            pick = budget.select(scores, self._rng, self.accountant, note=f"PMW selected round {round_}: select")
            subset = candidates[pick]
            self._measure_marginal(subset, budget.epsilon_measure, budget.rho_measure,
                                   f"PMW selected round {round_}: measure {', '.join(subset)}")
            self._done.add(subset)
            self.selected += 1
            self.log.append(_Measurement(0, f"selected round {round_}", subset, "marginal",
                                         self._measured[-1][2].tolist(), budget.epsilon_measure, budget.rho_measure))
            self.fit_passes.append(self._fit(self._dist, passes=SELECT_PASSES))
            self._model_tables.clear()
        if self.selected:
            self.fit_passes.append(self._fit_online())  # the first answers come from here: to the noise level
            self._model_tables.clear()

    def _fit(self, dist, stop_share: float = 1.0, passes: int | None = None) -> int:
        """Fit ``dist`` to every measurement so far (MWEM's fit), to ``stop_share`` of the noise level.

        A factored D_t refit online (after an update) takes a few calibrations of its junction
        tree (each 40-60 ms at 10^7 cells), not up to ``replay_passes``: the newest measurement
        is fit alone on its own marginal (``FactoredModel.fit_one``, no calibration per pass),
        then every measurement jointly for at most ``ONLINE_PASSES`` passes from the last fit's
        step, stopping once a pass gains less than ``CONVERGED`` of the loss (as the dense fit
        does), then the newest alone again, so that it ends at its own noise level
        (``ALONE_TOLERANCE``). A joint fit that stopped by convergence is not run again for the
        same measurements (a tighter stop would end it after a pass or two). The release's fit
        (``release``) runs every measurement jointly, up to ``replay_passes`` (or ``passes``, on a
        dense D: a selected round's refit)."""
        stop = FIT_TOLERANCE * self._noise_total * stop_share
        if dist is not self._dist or dist.representation != "factored" or not (self.updates or self.selected):
            done, _ = dist.fit(self._measured, self.plan.rows, passes or self.replay_passes,
                               workload=self._measured_queries, stop_residual=stop)
            return done
        newest, n, queries = self._measured[-1], self.plan.rows, self._measured_queries
        alone = {"workload": queries, "stop_residual": ALONE_TOLERANCE * self._newest_noise, "converged": CONVERGED}
        dist.fit_one(newest, n, self.replay_passes, **alone)
        passes = 0
        if self._converged_at != len(self._measured):  # else: a refit asked again, converged
            passes, residual = dist.fit(self._measured, n, ONLINE_PASSES, workload=queries, stop_residual=stop,
                                        converged=CONVERGED, step=dist.last_step)
            if passes < ONLINE_PASSES and residual > stop:  # stopped by convergence: a tighter stop changes nothing
                self._converged_at = len(self._measured)
        dist.fit_one(newest, n, self.replay_passes, **alone)
        return passes

    def _fit_online(self) -> int:
        """Fit D_t after an update until the new measurement, too, sits at its own noise level.
        The fit's stop is the total residual of every measurement, which a newly measured
        subset far from D can hide in: on adult's 21 pairs its online answers were then 2.4x
        the release's error; fitting on until the newest is at its noise level took them to
        the release's. At most four tightenings (each halves the total's stop)."""
        passes, share = 0, 1.0
        for _ in range(5):
            passes += self._fit(self._dist, share)
            if self._newest_residual() <= FIT_TOLERANCE * self._newest_noise:
                break
            share /= 2
        return passes

    def _newest_residual(self) -> float:
        """|noisy - n D_t| summed over the newest measurement's values (rows)."""
        self._model_tables.clear()  # D_t has just moved
        return self._residual(self._dist, self._measured[-1])

    def _residual(self, dist, measurement: tuple) -> float:
        """|noisy - n D| summed over one measurement's values (rows)."""
        kind, key, noisy = measurement[:3]
        if kind == "marginal":
            return float(np.abs(noisy - self.plan.rows * dist.marginal(key)).sum())
        return abs(noisy - self.plan.rows * query_fraction(dist, self._measured_queries[key]))

    def _measure_marginal(self, subset: tuple[str, ...], epsilon: float, rho: float, note: str) -> None:
        truth = self._data_table(subset)
        if rho:
            noisy = discrete_gaussian(truth, rho, 1, self._rng, accountant=self.accountant, note=note)
        else:
            noisy = discrete_laplace(truth, epsilon, 1, self._rng, accountant=self.accountant, note=note)
        self._add_measurement(("marginal", subset, np.asarray(noisy, dtype=np.float64)), epsilon, rho, truth.size)

    def _add_measurement(self, measurement: tuple, epsilon: float, rho: float, values: int) -> None:
        """Keep a measurement for every later fit, each weighted by its precision against the
        least noisy (epochs differ in budget: ``_open_epoch``), as adaptive MWEM weighs its own."""
        self._variances.append(noise_variance(epsilon, rho))
        self._budgets.append((epsilon, rho))
        self._newest_noise = mean_abs_noise(epsilon, rho) * values
        least = min(self._variances)
        self._measured = [m[:3] + (least / v,) for m, v in zip(self._measured + [measurement], self._variances)]
        self._noise_total += mean_abs_noise(epsilon, rho) * values

    def start_pass(self) -> None:
        """A workload's pass begins: every declared subset not yet measured is ahead again
        (``_epochs_ahead``)."""
        self._seen.clear()

    @property
    def halted(self) -> bool:
        """After L updates, or once the epochs' budget is spent (a declared workload's last
        epochs may take all of it)."""
        return self.updates >= self.plan.updates or self._left <= 1e-9 * self.plan.epochs_budget

    def _epochs_ahead(self) -> int:
        """Epochs the budget left must still pay for, the open one included. For a declared
        workload: the declared subsets neither measured nor yet seen in this pass, times the
        share of tested subsets that needed an update so far (1 before any test: each may take
        one update), plus one spare so the last subsets are not left without budget; for an
        undeclared stream, the updates left of L. Public: the workload, its order and every
        test's outcome are."""
        left = self.plan.updates - self.updates
        if self._declared:
            unseen = sum(1 for s in self._declared if s not in self._done and s not in self._seen)
            rate = (self.updates + 1) / (self._tests + 1)
            left = min(left, math.ceil(unseen * min(rate, 1.0)) + 1)
        return max(left, 1)

    def _open_epoch(self) -> AboveThreshold | None:
        """A fresh AboveThreshold whose epoch gets the budget left over the epochs ahead, split
        as the plan splits (a privacy filter: each epoch's budget depends only on earlier
        public outcomes, and their total never passes the plan's, so the composition holds
        for these adaptively chosen budgets as for fixed ones). An epoch that ends without an
        update (the test found nothing before the stream ended) leaves its measurement unspent;
        one that was planned but never needed leaves all of it to the epochs after it."""
        share = self._left / self._epochs_ahead()
        for _ in range(60):  # the accountant composes with safety margins: shrink until it accepts
            e_test, e_measure, rho = self.plan.epoch_split(share)
            try:
                self.accountant.check_all([Charge("above_threshold", e_test),
                                           Charge("measure", None if rho else e_measure, 0.0, rho or None)])
                break
            except BudgetExceeded:
                share *= 1 - 1e-6
        else:  # what is left is below what the accountant's margins let through: PMW halts
            self._left = 0.0
            return None
        self.epoch_budget = (e_test, e_measure, rho)
        self.epoch_threshold = self.plan.epoch_threshold(e_test)
        self._left -= e_test**2 / 2 if self.plan.rho_measure else e_test
        return AboveThreshold(0.0, e_test, 1, self._rng, accountant=self.accountant,
                              note=f"PMW epoch {self.updates + 1}")

    def _outgrown(self) -> bool:
        """Whether the open epoch (no update yet) has at most ``1 / REOPEN_GAIN`` of what a
        fresh one would get now: the budget the epochs ahead must share has shrunk less than
        their number (a declared workload's last subsets), so a fresh epoch, with a lower
        threshold and a larger measurement, is worth its test's cost. Ending an
        AboveThreshold after any number of "below" answers costs its test budget only, and
        the decision reads public outcomes alone (the filter stays a filter)."""
        if not self._declared:
            return False
        return self._left / self._epochs_ahead() >= REOPEN_GAIN * self.plan.cost(*self.epoch_budget)

    # -- answering -----------------------------------------------------------------------
    def answer(self, query: Query | dict, *, query_id: int = -1, label: str = "") -> PMWAnswer:
        """Answer one counting query (in rows), spending budget only on tests and updates."""
        if isinstance(query, dict):  # the workload file's form, e.g. {"where": {"sex": "Male"}}
            query = parse_query(query, self.schema, index=max(query_id, 0))
        subset = query.columns
        kind = self.plan.test_kind(_cells(self.schema, subset))
        key = subset if kind == "marginal" else _query_key(query)
        if key in self._done or key in self._tested_lazy:  # measured (in every fit), or tested since D moved
            self._seen.add(subset)
            self.rounds[LAZY] += 1
            return self._answer(query, LAZY, tested=key in self._tested_lazy)
        if self.halted:
            self.rounds[HALTED] += 1
            return self._answer(query, HALTED)
        if not self._dist.fits(subset):  # an update would grow the factored D past its cap: no test
            self._seen.add(subset)
            self.capped += 1
            self.rounds[LAZY] += 1
            return self._answer(query, CAPPED)
        if self._epoch is not None and self._outgrown():
            # its test is paid; a richer epoch takes over (below), and what it found below its
            # threshold is tested again against the new one (a lazy answer's bound is its epoch's)
            self._epoch = None
            self._tested_lazy.clear()
        if self._epoch is None:
            self._epoch = self._open_epoch()  # this subset, if declared and unseen, is among those ahead
            if self._epoch is None:
                self.rounds[HALTED] += 1
                return self._answer(query, HALTED)
        self._seen.add(subset)
        error = self._test_value(query, kind)
        self._tests += 1
        if not self._epoch.test(error - self.epoch_threshold):
            self._tested_lazy.add(key)
            self.rounds[LAZY] += 1
            return self._answer(query, LAZY, tested=True)
        self._update(query, kind, key, error, query_id, label)
        self.rounds[UPDATE] += 1
        return self._answer(query, UPDATE)

    def _answer(self, query: Query, kind: str, *, tested: bool = False) -> PMWAnswer:
        """D_t's answer to ``query`` with its error bound (``synth.engines.pmw_bounds``): from
        the covering measurement with the least noise when there is one, else from this epoch's
        "below" test (``tested``), else the range [0, n]."""
        value = self.model_answer(query)
        beta = self.plan.beta
        cover = self._cover(query)
        if cover is not None:
            noisy, cells, epsilon, rho = cover
            bound = abs(value - noisy) + noise_sum_bound(cells, beta, epsilon=epsilon, rho=rho)
        elif tested:
            bound = below_bound(self.epoch_threshold, self.epoch_budget[0], beta)
        else:
            bound = range_bound(value, self.plan.rows, beta, epsilon_count=self.plan.epsilon_count)
        return PMWAnswer(value, kind, self.updates, bound)

    def _cover(self, query: Query) -> tuple[float, int, float, float] | None:
        """The measurement that covers ``query`` with the least noise on it (its own marginal,
        a wider one, or the query itself), chosen from public facts only (which subsets were
        measured, at what budget): the noisy count summed over the query's cells, how many
        cells that sums, and the measurement's (epsilon, rho). None when nothing covers it."""
        columns = set(query.columns)
        best, best_variance = None, math.inf
        for position, measurement in enumerate(self._measured):
            kind, key = measurement[0], measurement[1]
            if kind == "marginal" and columns <= set(key):
                cells = math.prod(self.schema[c].size for c in key if c not in columns)
                cells *= math.prod(len(allowed) for allowed in query.allowed) if query.columns else 1
            elif kind == "query" and _query_key(self._measured_queries[key]) == _query_key(query):
                cells = 1
            else:
                continue
            if cells * self._variances[position] < best_variance:
                best, best_variance = (position, cells), cells * self._variances[position]
        if best is None:
            return None
        position, cells = best
        kind, key, noisy = self._measured[position][:3]
        if kind == "query":
            total = float(noisy)
        else:
            table = self._projections.get((position, query.columns))
            if table is None:  # the noisy table summed onto the query's columns, kept for the next query on them
                other = tuple(i for i, c in enumerate(key) if c not in columns)
                kept = [c for c in key if c in columns]
                table = np.transpose(noisy.sum(axis=other), [kept.index(c) for c in query.columns])
                self._projections[(position, query.columns)] = table
            total = query_value(table, query)
        return total, cells, *self._budgets[position]

    def _test_value(self, query: Query, kind: str) -> float:
        """g in rows: the marginal's L1 error, or the query's absolute error."""
        if kind == "marginal":
            truth = self._data_table(query.columns)
            return float(np.abs(truth - self.plan.rows * self.model_table(query.columns)).sum())
        return abs(self._true_count(query) - self.model_answer(query))

    def _update(self, query: Query, kind: str, key, error: float, query_id: int, label: str) -> None:
        note = f"PMW update {self.updates + 1}"
        _, epsilon, rho = self.epoch_budget
        if kind == "marginal":
            self._measure_marginal(query.columns, epsilon, rho, note)
        else:
            truth = int(round(self._true_count(query)))
            if rho:
                noisy = discrete_gaussian(truth, rho, 1, self._rng, accountant=self.accountant, note=note)
            else:
                noisy = discrete_laplace(truth, epsilon, 1, self._rng, accountant=self.accountant, note=note)
            self._measured_queries.append(query)
            self._add_measurement(("query", len(self._measured_queries) - 1, float(noisy)), epsilon, rho, 1)
        self._left -= rho or epsilon
        self._done.add(key)
        self.updates += 1
        self.log.append(_Measurement(self.updates, label, query.columns, kind, np.asarray(self._measured[-1][2]).tolist(),
                                     epsilon, rho))
        self._epoch = None
        before = self._dist.normalized() if self.monitor is not None else None
        self.fit_passes.append(self._fit_online())
        self._model_tables.clear()
        self._tested_lazy.clear()
        if self.monitor is not None:
            self.monitor.record(before, self._dist.normalized(), query_id=query_id, query=label,
                                columns=query.columns, tested_error=error, test=kind, accountant=self.accountant,
                                threshold=self.epoch_threshold / self.plan.rows)


    # -- the release ---------------------------------------------------------------------
    def release(self):
        """The released distribution: D_t fit once more to every measurement jointly, or, where
        D_t's residual is well below the fit's target (``OVERFIT_RESIDUAL``: it has fit noise),
        every measurement refit from the starting distribution to that target; the prior when
        nothing was measured. Post-processing of the noisy tables and the tests' public outcomes.

        Each online fit runs until the newest measurement, too, sits at its noise level
        (``_fit_online``), where a refit from the prior stops once the total residual does,
        which a few subsets far from the fit can hide in: with tests, on 16 binary columns' 120
        pairs D_t's mean L1 was 0.0036 where the refit's was 0.0055, on 12 binary columns'
        pairs 0.0093 against 0.0147, on a 9-column table's 84 triples 0.0111 against 0.0126.
        But where the online fits went below the target (adult's 35 triples after a pair warm
        start: residual 0.93 of the noise's expected total), D_t had fit the noise: 0.040
        against the refit's 0.033. A workload measured whole up front (``measures_all``) has
        one fit either way. After selected rounds (``_select_rounds``) D_t is kept whatever its
        residual: a refit from the prior stops before it carries the measured structure to the
        many unmeasured subsets (16 binary columns' 120 pairs, 3 seeds: 0.0035-0.0064 against
        D_t's 0.0032-0.0036)."""
        if self.released is not None and len(self._measured) == self._released_measurements:
            return self.released
        self._released_measurements = len(self._measured)
        dist = self._dist.copy()
        if self._measured:
            if not self.selected and self._total_residual(dist) < OVERFIT_RESIDUAL * self._noise_total:
                dist = self._start.copy()
            self._fit(dist)
        self.released = dist.normalized() if dist.representation == "dense" else dist
        return self.released

    def _total_residual(self, dist) -> float:
        """|noisy - n D| summed over every measured value (rows)."""
        return sum(self._residual(dist, measurement) for measurement in self._measured)

    def to_model(self, *, seeded: bool = False, distribution: np.ndarray | None = None):
        """The release as a ``Model``: the refit distribution, the plan, the privacy spent and
        every measurement (all public)."""
        return Model(
            schema=self.schema, mechanism="pmw",
            distribution=self.release() if distribution is None else distribution, rows=self.plan.rows,
            rows_public=self.plan.rows_public, parameters=self.plan.to_dict(), privacy=self.accountant.to_dict(),
            round_log=[asdict(m) for m in self.log], seeded=seeded,
        )


def _cells(schema: Schema, subset: Sequence[str]) -> int:
    return math.prod(schema[name].size for name in subset)


def _query_key(query: Query) -> tuple:
    return (query.columns, tuple(tuple(int(v) for v in a) for a in query.allowed))
