"""Benchmark Private Multiplicative Weights (``synth.pmw``): speed and memory against the
universe size, and error against epsilon on adult.

Measured against plain NumPy in the same run, on synthetic schemas of ``Coded`` columns of 10
codes each (universes of 10^3 to 10^8 cells; 10^6 with ``--quick``) and seeded random rows:

1. update step: ``SelectedCells(schema, query).scale(w, factor)`` on a prebuilt selection (the
   in-place multiplicative update as PMW makes it) vs a NumPy boolean-mask update, and vs the
   memory-bandwidth baseline ``a *= b`` on arrays of the universe's size (target: within 2x of
   ``a *= b``); the one-shot ``scale_query_cells`` (set-up included) at the smallest universe;
2. update round end to end: ``PMW.answer`` when every test is above threshold (model marginal,
   test, measurement, accounting, update) vs a plain NumPy round, and the time spent inside the
   accountant during such rounds;
3. lazy rounds: ``PMW.answer`` on queries whose marginal is cached vs a NumPy round that
   evaluates the query on the full distribution (target: independent of the universe size);
   and the first (uncached) evaluation of a subset, ``marginal_from_dense``;
4. the accountant: ``spend`` per charge as the ledger grows, and the one-off ``spent()``;
5. peak memory of ``run_pmw`` (``tracemalloc``) in universe-sized float64 arrays (target <= 3);
6. error against epsilon on adult column subsets (``run_pmw``, 5 seeds, median).

Every figure is the median of several repeats after a warm-up; the first (JIT) call of the
update kernel is reported separately. Prints a markdown report and writes it to its own
section of ``benchmarks/RESULTS.md`` (``_results.write_section``; other sections are kept).

Usage: ``python benchmarks/bench_pmw.py [--repeats N] [--quick] [--seed S] [--data-dir DIR]``
"""

from __future__ import annotations

import argparse
import copy
import gc
import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numba
import numpy as np
from _data import DEFAULT_DATA_DIR, load_adult, numpy_marginal
from _harness import (  # benchmarks/ is on sys.path when run as a script
    Comparison,
    FirstCall,
    Samples,
    Timed,
    duration,
    first_call,
    first_call_table,
    load_average,
    machine_info,
    markdown_table,
    met,
    option_parser,
    parse_options,
    publish,
    rate,
    repeats_note,
    report_header,
    round_robin,
    timed,
    traced_peaks,
)

from synth import _kernels
from synth.accounting import Accountant, Charge, compose
from synth.data import code_dtype
from synth.mechanisms import AboveThreshold
from synth.pmw import LAZY, PMW, UPDATE, run_pmw
from synth.pmw_plan import PMWPlan, plan_pmw
from synth.schema import Coded, Schema
from synth.tables import SelectedCells, marginal, marginal_from_dense, scale_query_cells
from synth.workload import Query, Workload

SECTION = "bench_pmw"

#: Codes per synthetic column: a universe of 10^k cells has k columns.
CODES = 10
#: Rows of synthetic data: codes drawn with P(v) proportional to 1 / (v + 1) per column.
ROWS = 100_000
#: Update factor of the update-step timings (alternately FACTOR and 1 / FACTOR, so the
#: weights stay bounded however many calls a sample makes).
FACTOR = math.exp(0.01)
#: Targets.
UPDATE_TARGET = 2.0  # update pass time / NumPy a *= b time
LAZY_SPREAD_TARGET = 1.5  # slowest / fastest lazy round over universe sizes (noise allowance)
MEMORY_TARGET = 3.0  # peak bytes / (8 |U|)
#: The memory target is judged where universe-sized arrays dominate the fixed overheads.
MEMORY_JUDGED_FROM = 10**6

#: Error against epsilon on adult.
ERROR_DELTA = 1e-6
ERROR_EPSILONS = (0.5, 1.0, 2.0, 4.0)
ADULT_SETS = (
    (
        "7 columns",
        ("workclass", "education-num", "marital-status", "relationship", "race", "sex", "income>50K"),
    ),
    ("5 columns", ("marital-status", "relationship", "race", "sex", "income>50K")),
)
#: (label, run_pmw keyword arguments): the theoretical plan, and a tuned one.
TUNED_ALPHA, TUNED_UPDATES = 0.05, 200
ERROR_PLANS: tuple[tuple[str, dict], ...] = (
    ("theory (plan_pmw's T and L)", {}),
    (
        f"TUNED: alpha={TUNED_ALPHA:g}, L={TUNED_UPDATES} fixed",
        {"alpha": TUNED_ALPHA, "updates": TUNED_UPDATES},
    ),
)

#: Accountant ledger lengths for the per-charge cost; the ledger alternates these charges.
LEDGER_LENGTHS = (1, 1000, 6000)
LEDGER_CHARGES = (0.02, 0.01)
#: Consecutive spends timed per sample (on a fresh copy of the ledger), and the budget as a
#: multiple of the composed total of the longest ledger plus those spends.
SPENDS_PER_SAMPLE = 100
LEDGER_BUDGET_FACTOR = 1.25


@dataclass(frozen=True)
class Settings:
    """Sizes and repeat counts of one run."""

    repeats: int
    exponents: tuple[int, ...]
    rows: int
    error_seeds: tuple[int, ...]
    seed: int
    data_dir: Path


# -- synthetic schemas and queries -----------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """A typical query on a synthetic schema: its label and its (axis, allowed codes) pairs."""

    label: str
    query: Query
    constraints: tuple[tuple[int, np.ndarray], ...]


def synthetic_schema(exponent: int) -> Schema:
    """``exponent`` Coded columns of 10 codes: a universe of 10^exponent cells."""
    return Schema(tuple(Coded(f"c{i}", CODES) for i in range(exponent)))


def synthetic_codes(schema: Schema, rows: int, seed: int) -> np.ndarray:
    """Seeded skewed rows (P(v) ~ 1/(v+1) per column, independent columns), uint8 codes."""
    p = 1.0 / np.arange(1, CODES + 1)
    p /= p.sum()
    rng = np.random.default_rng(seed)
    return rng.choice(CODES, size=(rows, len(schema)), p=p).astype(code_dtype(schema))


def make_case(schema: Schema, label: str, constraints: Sequence[tuple[int, Sequence[int]]]) -> Case:
    pairs = tuple(sorted((axis, np.asarray(codes, dtype=np.int64)) for axis, codes in constraints))
    query = Query(tuple(schema.names[a] for a, _ in pairs), tuple(c for _, c in pairs))
    return Case(label, query, pairs)


def typical_cases(schema: Schema) -> list[Case]:
    """The four typical queries (first, middle, last column: c0, c_mid, c_last)."""
    k = len(schema)
    mid, last = k // 2, k - 1
    half = range(CODES // 2)
    return [
        make_case(schema, "2-way cell (c0=0, c_last=0)", [(0, [0]), (last, [0])]),
        make_case(schema, "3-way cell (c0=0, c_mid=1, c_last=0)", [(0, [0]), (mid, [1]), (last, [0])]),
        make_case(schema, "1-way range, half of c_mid", [(mid, half)]),
        make_case(schema, "1-way range, half of c_last", [(last, half)]),
    ]


def all_cells_case(schema: Schema) -> Case:
    return Case("all cells, Query((), ()): full pass", Query((), ()), ())


def numpy_mask(shape: tuple[int, ...], case: Case) -> np.ndarray:
    """The boolean mask of the query's cells, by broadcasting one mask per constrained column."""
    mask = np.ones(shape, dtype=bool)
    for axis, allowed in case.constraints:
        column = np.zeros(shape[axis], dtype=bool)
        column[allowed] = True
        mask &= column.reshape([-1 if j == axis else 1 for j in range(len(shape))])
    return mask


def numpy_scale(w: np.ndarray, shape: tuple[int, ...], case: Case, factor: float) -> float:
    """The NumPy update step: build the mask, then scale the selected cells (and sum them first)."""
    mask = numpy_mask(shape, case)
    view = w.reshape(shape)
    selected = view[mask]
    before = float(selected.sum())
    view[mask] = selected * factor
    return before


def selected_cells(schema: Schema, case: Case) -> int:
    fixed = {axis: len(allowed) for axis, allowed in case.constraints}
    return math.prod(fixed.get(j, size) for j, size in enumerate(schema.shape))


def toggled(step: Callable[[float], object]) -> Callable[[], object]:
    """A call of ``step`` with FACTOR, then 1 / FACTOR, and so on (the weights stay bounded)."""
    state = [FACTOR]

    def call() -> object:
        factor = state[0]
        state[0] = 1.0 / factor
        return step(factor)

    return call


def true_count(codes: np.ndarray, schema: Schema, query: Query) -> int:
    table = marginal(codes, schema, query.columns)
    return int(table[np.ix_(*query.allowed)].sum())


def forced_update_plan(schema: Schema, rows: int, delta: float) -> PMWPlan:
    """A plan whose threshold is below any error, so every round is an update (never halts).

    Per-epoch budgets of 0.01 each (the order of plan_pmw's at eps = 1 on adult), eta = 0.01.
    """
    return PMWPlan(
        epsilon=1e6,
        delta=delta,
        beta=0.05,
        rows=float(rows),
        rows_public=True,
        universe_size=schema.universe_size,
        queries=1,
        threshold=-10.0,
        updates=10**12,
        eta=0.01,
        epsilon_test=0.01,
        epsilon_measure=0.01,
        epsilon_count=0.0,
        alpha=math.nan,
        failure_bound=1.0,
        composition="basic",
    )


# -- 0. first call ---------------------------------------------------------------------------


def kernel_args(w: np.ndarray, selection: SelectedCells, factor: float) -> tuple:
    """The kernel's arguments, as a ``SelectedCells`` holds them (its public attributes)."""
    s = selection
    return (w, s.start, s.strides, s.allowed, s.offsets, s.counts, s.run, float(factor))


def bench_first_call() -> FirstCall:
    """First-call cost of scale_selected through SelectedCells.scale. Must run first."""
    schema = synthetic_schema(3)
    w = np.full(schema.universe_size, 1.0 / schema.universe_size)
    selection = SelectedCells(schema, typical_cases(schema)[0].query)
    first = timed(lambda: selection.scale(w, FACTOR))
    return first_call(
        "scale_selected (SelectedCells.scale, 2-way cell, 10^3 cells)",
        first,
        _kernels.scale_selected,
        kernel_args(w, selection, FACTOR),
    )


# -- fixed per-call costs ---------------------------------------------------------------------


@dataclass(frozen=True)
class Overheads:
    """Medians (seconds per call) at the smallest universe, where fixed costs dominate."""

    size: int
    scale_call: dict[str, float]  # query label -> one-shot scale_query_cells (set-up included)
    scale_prebuilt: dict[str, float]  # query label -> SelectedCells.scale, selection prebuilt
    scale_kernel: dict[str, float]  # query label -> the kernel alone, arguments prebuilt
    lazy: dict[str, float]  # piece of a lazy round -> seconds


#: Keys of the lazy-round pieces (``Overheads.lazy``) that the report's prose refers to.
PIECE_ROUND = "`PMW.answer`, a lazy round (3-way cell, marginal cached)"
PIECE_TEST = "`AboveThreshold.test(error)` alone"
PIECE_DRAW = "one draw of that test's private noise helper, `test._noise.draw(4)`, alone"
PIECE_MODEL = "`PMW.model_answer(query)` alone (cached marginal)"


def lazy_plan(rows: int, size: int) -> PMWPlan:
    """The plan of the lazy-round timings: its threshold is above every query's error."""
    return plan_pmw(1.0, 0.0, rows, size, 10**6, alpha=1.4)


def bench_overheads(repeats: int, rows: int, seed: int) -> Overheads:
    """The fixed costs: scale_query_cells (one-shot), SelectedCells.scale (prebuilt) and the
    kernel alone; the pieces of a lazy round."""
    schema = synthetic_schema(3)
    size = schema.universe_size
    w = np.full(size, 1.0 / size)
    cases = [typical_cases(schema)[0], all_cells_case(schema)]
    entries = []
    for case in cases:
        selection = SelectedCells(schema, case.query)
        args = kernel_args(w, selection, FACTOR)[:-1]
        entries.append(
            Timed(f"call/{case.label}", toggled(lambda f, q=case.query: scale_query_cells(w, schema, q, f)))
        )
        entries.append(Timed(f"prebuilt/{case.label}", toggled(lambda f, s=selection: s.scale(w, f))))
        entries.append(
            Timed(f"kernel/{case.label}", toggled(lambda f, a=args: _kernels.scale_selected(*a, f)))
        )
    times = round_robin(entries, repeats)
    median = {key: statistics.median(t.seconds) for key, t in times.items()}

    codes = synthetic_codes(schema, rows, seed)
    plan = lazy_plan(rows, size)
    pmw = PMW(codes, schema, plan, np.random.default_rng(seed))
    query = typical_cases(schema)[1].query
    pmw.answer(query)
    test = AboveThreshold(plan.threshold_count, plan.epsilon_test, 1, np.random.default_rng(seed))
    error = abs(true_count(codes, schema, query) - pmw.model_answer(query))
    pieces = {
        PIECE_ROUND: lambda: pmw.answer(query),
        PIECE_TEST: lambda: test.test(error),
        PIECE_MODEL: lambda: pmw.model_answer(query),
    }
    # A private helper, timed only while it exists (the row is left out otherwise).
    draw = getattr(getattr(test, "_noise", None), "draw", None)
    if callable(draw):
        pieces[PIECE_DRAW] = lambda: draw(4)
    times = round_robin([Timed(k, fn) for k, fn in pieces.items()], repeats)
    if pmw.rounds[LAZY] != sum(pmw.rounds.values()) or test.halted:
        raise AssertionError("the lazy-round pieces made an above-threshold test")
    return Overheads(
        size,
        {c.label: median[f"call/{c.label}"] for c in cases},
        {c.label: median[f"prebuilt/{c.label}"] for c in cases},
        {c.label: median[f"kernel/{c.label}"] for c in cases},
        {k: statistics.median(times[k].seconds) for k in (PIECE_ROUND, PIECE_TEST, PIECE_DRAW, PIECE_MODEL)
         if k in times},
    )


# -- 1. update step --------------------------------------------------------------------------


@dataclass(frozen=True)
class StepRow:
    size: int
    case: str
    selected: int
    vs_numpy: Comparison
    vs_bandwidth: Comparison


def bench_update_step(schema: Schema, repeats: int) -> list[StepRow]:
    """SelectedCells.scale (prebuilt, as PMW calls it) vs the NumPy mask update vs a *= b, each
    query in turn."""
    size, shape = schema.universe_size, schema.shape
    cases = typical_cases(schema) + [all_cells_case(schema)]
    selections = {case.label: SelectedCells(schema, case.query) for case in cases}
    w_synth = np.full(size, 1.0 / size)
    w_numpy = w_synth.copy()
    w_oneshot = w_synth.copy()
    for case in cases:  # check: the same sum before scaling, and (at the end) identical weights
        a = selections[case.label].scale(w_synth, FACTOR)
        b = numpy_scale(w_numpy, shape, case, FACTOR)
        c = scale_query_cells(w_oneshot, schema, case.query, FACTOR)
        if not (math.isclose(a, b, rel_tol=1e-9) and a == c):
            raise AssertionError(f"update step {case.label}, |U|={size:,}: sums before scaling disagree")
    if not (np.array_equal(w_synth, w_numpy) and np.array_equal(w_synth, w_oneshot)):
        raise AssertionError(f"update step, |U|={size:,}: synth and NumPy weights differ")
    del w_oneshot
    a_arr, b_arr = np.ones(size), np.ones(size)

    def bandwidth() -> None:
        nonlocal a_arr
        a_arr *= b_arr

    entries: list[Timed] = []
    for case in cases:
        entries.append(
            Timed(f"synth/{case.label}", toggled(lambda f, s=selections[case.label]: s.scale(w_synth, f)))
        )
        entries.append(
            Timed(f"numpy/{case.label}", toggled(lambda f, c=case: numpy_scale(w_numpy, shape, c, f)))
        )
    entries.append(Timed("bandwidth", bandwidth))
    times = round_robin(entries, repeats)
    rows = []
    for case in cases:
        cells = selected_cells(schema, case)
        synth = times[f"synth/{case.label}"]
        rows.append(
            StepRow(
                size,
                case.label,
                cells,
                Comparison.of(case.label, cells, "cells", synth, times[f"numpy/{case.label}"]),
                Comparison.of(case.label, size, "cells", synth, times["bandwidth"]),
            )
        )
    return rows


# -- 2. update round -------------------------------------------------------------------------


class TimedAccountant(Accountant):
    """An ``Accountant`` that counts its public ``check`` and ``spend`` calls and adds up the
    time spent inside them (outermost calls only: a ``check`` made by ``spend`` is its own)."""

    def __init__(self, epsilon: float, delta: float = 0.0):
        super().__init__(epsilon, delta)
        self.bench_seconds = 0.0
        self.bench_calls = {"check": 0, "spend": 0}
        self._bench_inside = False

    def _bench_timed(self, name: str, method: Callable, args: tuple, kwargs: dict):
        if self._bench_inside:
            return method(*args, **kwargs)
        self.bench_calls[name] += 1
        self._bench_inside = True
        start = time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            self.bench_seconds += time.perf_counter() - start
            self._bench_inside = False

    def check(self, *args, **kwargs):
        return self._bench_timed("check", super().check, args, kwargs)

    def spend(self, *args, **kwargs):
        return self._bench_timed("spend", super().spend, args, kwargs)


@dataclass(frozen=True)
class AccountingShare:
    """The accountant's part of forced update rounds, from one extra instrumented run."""

    updates: int
    round_s: float  # wall seconds per update of that run
    accountant_s: float  # seconds per update inside check / spend
    checks: float  # calls per update
    spends: float
    method: str  # the composition spent() reports for the run's ledger

    @property
    def share(self) -> float:
        return self.accountant_s / self.round_s


@dataclass(frozen=True)
class RoundRow:
    size: int
    approx: Comparison  # delta = ERROR_DELTA
    pure: Comparison  # delta = 0
    accounting: dict[float, AccountingShare]  # delta -> the instrumented run


def numpy_update_round(
    d: np.ndarray,
    shape: tuple[int, ...],
    case: Case,
    true: int,
    rows: int,
    eta: float,
    epsilon_measure: float,
    rng: np.random.Generator,
) -> float:
    """A plain NumPy PMW update: f(D) through the mask, a noisy measurement, the multiplicative
    update of the selected cells and a renormalization."""
    mask = numpy_mask(shape, case)
    view = d.reshape(shape)
    selected = view[mask]
    model = rows * float(selected.sum())
    measured = true + rng.laplace(0.0, 1.0 / epsilon_measure)
    view[mask] = selected * math.exp(eta * float(np.sign(measured - model)))
    d /= d.sum()
    return measured


def bench_update_round(schema: Schema, codes: np.ndarray, repeats: int, seed: int) -> RoundRow:
    """PMW.answer with every round an update (4 queries in turn; delta = 1e-6 and delta = 0) vs
    the plain NumPy round."""
    size, shape, rows = schema.universe_size, schema.shape, len(codes)
    cases = typical_cases(schema)
    pmws = {
        delta: PMW(codes, schema, forced_update_plan(schema, rows, delta), np.random.default_rng(seed))
        for delta in (ERROR_DELTA, 0.0)
    }
    trues = [true_count(codes, schema, c.query) for c in cases]
    d = np.full(size, 1.0 / size)
    rng = np.random.default_rng(seed + 1)
    plan = pmws[0.0].plan

    def synth_entry(delta: float) -> Timed:
        pmw = pmws[delta]

        def fresh_ledger() -> None:  # outside the timing: each sample starts from an empty ledger
            pmw.accountant = Accountant(pmw.plan.epsilon, pmw.plan.delta)

        def synth_round() -> None:
            for case in cases:
                pmw.answer(case.query)

        return Timed(f"synth/{delta}", synth_round, setup=fresh_ledger)

    def numpy_round() -> None:
        for case, true in zip(cases, trues):
            numpy_update_round(d, shape, case, true, rows, plan.eta, plan.epsilon_measure, rng)

    entries = [
        synth_entry(ERROR_DELTA),
        Timed("numpy", numpy_round),
        synth_entry(0.0),
        Timed("numpy", numpy_round),
    ]
    times = round_robin(entries, repeats, min_sample_s=0)  # one call (4 updates) per sample
    accounting = {}
    for delta, pmw in pmws.items():  # an extra run, outside the medians: time inside the accountant
        calls = max(1, min(50, int(0.1 / statistics.median(times[f"synth/{delta}"].seconds))))
        accountant = pmw.accountant = TimedAccountant(pmw.plan.epsilon, pmw.plan.delta)
        started = time.perf_counter()
        for _ in range(calls):
            for case in cases:
                pmw.answer(case.query)
        wall = time.perf_counter() - started
        updates = calls * len(cases)
        accounting[delta] = AccountingShare(
            updates,
            wall / updates,
            accountant.bench_seconds / updates,
            accountant.bench_calls["check"] / updates,
            accountant.bench_calls["spend"] / updates,
            accountant.spent().method,
        )
    for pmw in pmws.values():
        if pmw.rounds[UPDATE] != sum(pmw.rounds.values()):
            raise AssertionError(f"forced-update PMW made non-update rounds: {pmw.rounds}")
    case = f"|U| = {size:,}"
    return RoundRow(
        size,
        Comparison.of(case, len(cases), "updates", times[f"synth/{ERROR_DELTA}"], times["numpy"]),
        Comparison.of(case, len(cases), "updates", times["synth/0.0"], times["numpy"]),
        accounting,
    )


# -- 3. lazy rounds --------------------------------------------------------------------------


@dataclass(frozen=True)
class LazyRow:
    size: int
    lazy: Comparison  # one call = 4 answers
    cold: Comparison  # one marginal_from_dense of a 3-way subset vs NumPy reshape + sum
    threshold: float  # the plan's threshold T, a fraction of n


def bench_lazy(schema: Schema, codes: np.ndarray, repeats: int, seed: int) -> LazyRow:
    """PMW.answer on cached marginals (a huge threshold: every round lazy) vs a NumPy lazy round."""
    size, shape, rows = schema.universe_size, schema.shape, len(codes)
    cases = typical_cases(schema)
    pmw, _ = lazy_pmw(schema, codes, seed)  # caches filled (and the epoch's test charged)
    plan = pmw.plan
    masks = [numpy_mask(shape, c).reshape(-1) for c in cases]  # precomputed: NumPy's best case
    trues = [true_count(codes, schema, c.query) for c in cases]
    d = np.full(size, 1.0 / size)
    rng = np.random.default_rng(seed + 1)
    threshold = plan.threshold_count + rng.laplace(0.0, 2.0 / plan.epsilon_test)
    test_scale = 4.0 / plan.epsilon_test

    def synth_round() -> None:
        for case in cases:
            pmw.answer(case.query)

    def numpy_round() -> None:
        for mask, true in zip(masks, trues):
            model = rows * float((d * mask).sum())
            _ = abs(true - model) + rng.laplace(0.0, test_scale) >= threshold

    times = round_robin([Timed("synth", synth_round), Timed("numpy", numpy_round)], repeats)
    if pmw.rounds[LAZY] != sum(pmw.rounds.values()):
        raise AssertionError(f"lazy PMW made non-lazy rounds: {pmw.rounds}")
    lazy = Comparison.of(f"|U| = {size:,}", len(cases), "answers", times["synth"], times["numpy"])
    masks.clear()  # free the universe-sized masks before the next timings
    subset = cases[1].query.columns  # the 3-way subset (c0, c_mid, c_last)
    positions = [schema.index(c) for c in subset]
    w = pmw.distribution()
    if not np.allclose(marginal_from_dense(w, schema, subset), numpy_marginal(w, shape, positions)):
        raise AssertionError(f"marginal over {subset}: synth and NumPy disagree")
    times = round_robin(
        [
            Timed("synth", lambda: marginal_from_dense(w, schema, subset)),
            Timed("numpy", lambda: numpy_marginal(w, shape, positions)),
        ],
        repeats,
    )
    cold = Comparison.of(f"|U| = {size:,}", size, "cells", times["synth"], times["numpy"])
    return LazyRow(size, lazy, cold, plan.threshold)


def lazy_pmw(schema: Schema, codes: np.ndarray, seed: int) -> tuple[PMW, list[Query]]:
    """A PMW whose rounds are all lazy, its 4 typical queries' marginals cached."""
    plan = lazy_plan(len(codes), schema.universe_size)
    pmw = PMW(codes, schema, plan, np.random.default_rng(seed))
    queries = [c.query for c in typical_cases(schema)]
    for query in queries:
        pmw.answer(query)
    return pmw, queries


def bench_lazy_interleaved(
    exponents: Sequence[int], rows: int, repeats: int, seed: int
) -> dict[int, Samples]:
    """Lazy rounds (4 queries per call) of every universe size, sampled in turn in one run, so
    machine noise hits every size alike (the universe-size independence check)."""
    pmws = {}
    for exponent in exponents:
        schema = synthetic_schema(exponent)
        pmws[schema.universe_size] = lazy_pmw(schema, synthetic_codes(schema, rows, seed), seed)

    def round_of(pmw: PMW, queries: list[Query]) -> Callable[[], None]:
        def call() -> None:
            for query in queries:
                pmw.answer(query)

        return call

    times = round_robin([Timed(str(size), round_of(*pq)) for size, pq in pmws.items()], repeats)
    for pmw, _ in pmws.values():
        if pmw.rounds[LAZY] != sum(pmw.rounds.values()):
            raise AssertionError(f"lazy PMW made non-lazy rounds: {pmw.rounds}")
    return {size: times[str(size)] for size in pmws}


# -- 4. accounting ---------------------------------------------------------------------------


@dataclass(frozen=True)
class LedgerRow:
    delta: float
    budget: float  # the accountant's epsilon budget
    spend_s: dict[int, float]  # ledger length -> median seconds per spend (the next SPENDS_PER_SAMPLE)
    spent_s: dict[int, float]  # ledger length -> median seconds of one spent()
    methods: dict[int, str]  # ledger length -> the composition spent() reports
    fill_s: float  # seconds to build the longest ledger one spend at a time, from empty
    slowest_s: float  # the slowest single spend of that build
    slowest_at: int  # the ledger length that spend produced


def ledger_charge(index: int) -> float:
    return LEDGER_CHARGES[index % len(LEDGER_CHARGES)]


def bench_accounting(repeats: int) -> list[LedgerRow]:
    """Accountant.spend per charge at several ledger lengths, and spent(), per delta."""
    longest = max(LEDGER_LENGTHS)
    rows = []
    for delta in (0.0, ERROR_DELTA):
        planned = [Charge("ledger", ledger_charge(i)) for i in range(longest + SPENDS_PER_SAMPLE)]
        budget = LEDGER_BUDGET_FACTOR * compose(planned, delta).epsilon
        accountant = Accountant(budget, delta)
        snapshots: dict[int, Accountant] = {}
        each = []
        for i in range(longest):  # the real path: every charge spent, so checked, one by one
            started = time.perf_counter()
            accountant.spend(ledger_charge(i), mechanism="ledger")
            each.append(time.perf_counter() - started)
            if i + 1 in LEDGER_LENGTHS:
                snapshots[i + 1] = copy.deepcopy(accountant)
        slowest = int(np.argmax(each))
        current: dict[int, Accountant] = {}

        def fresh(n: int) -> None:  # outside the timing: a copy of the ledger of n charges
            current[n] = copy.deepcopy(snapshots[n])

        def spends(n: int) -> None:
            accountant = current[n]
            for i in range(n, n + SPENDS_PER_SAMPLE):
                accountant.spend(ledger_charge(i), mechanism="ledger")

        spend_times = round_robin(
            [Timed(str(n), lambda n=n: spends(n), setup=lambda n=n: fresh(n)) for n in LEDGER_LENGTHS],
            repeats,
            min_sample_s=0,  # one call (SPENDS_PER_SAMPLE spends) per sample, each on a fresh copy
        )
        spent_times = round_robin([Timed(str(n), snapshots[n].spent) for n in LEDGER_LENGTHS], repeats)
        rows.append(
            LedgerRow(
                delta,
                budget,
                {
                    n: statistics.median(spend_times[str(n)].seconds) / SPENDS_PER_SAMPLE
                    for n in LEDGER_LENGTHS
                },
                {n: statistics.median(spent_times[str(n)].seconds) for n in LEDGER_LENGTHS},
                {n: snapshots[n].spent().method for n in LEDGER_LENGTHS},
                sum(each),
                each[slowest],
                slowest + 1,
            )
        )
    return rows


# -- 5. peak memory --------------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryRow:
    size: int
    case: str
    peak: int
    updates: str

    @property
    def arrays(self) -> float:
        return self.peak / (8 * self.size)


def bench_memory(schema: Schema, codes: np.ndarray, seed: int) -> list[MemoryRow]:
    """Peak traced bytes of run_pmw (3 passes of the 4 queries, alpha=0.05, L=8), then of
    distribution(); and of run_pmw with the KL monitor."""
    size, rows = schema.universe_size, len(codes)
    workload = Workload(schema, [c.query for c in typical_cases(schema)])
    options = {"rows": rows, "passes": 3, "alpha": 0.05, "updates": 8}
    held: dict[str, object] = {}

    def run() -> None:
        held["run"] = run_pmw(codes, schema, workload, 1.0, ERROR_DELTA, rng=seed, **options)

    def distribution() -> None:
        held["d"] = held["run"].pmw.distribution()

    peak_run, peak_dist = traced_peaks(run, distribution)
    used = f"{held['run'].pmw.updates} / 8"
    held.clear()
    gc.collect()
    (peak_monitor,) = traced_peaks(
        lambda: held.setdefault(
            "run", run_pmw(codes, schema, workload, 1.0, ERROR_DELTA, rng=seed, monitor=True, **options)
        )
    )
    used_monitor = f"{held['run'].pmw.updates} / 8"
    held.clear()
    return [
        MemoryRow(size, "run_pmw", peak_run, used),
        MemoryRow(size, "run_pmw, then run.pmw.distribution() (a normalized copy)", peak_dist, used),
        MemoryRow(
            size,
            "run_pmw(monitor=True) (with the KL monitor of the dense true histogram)",
            peak_monitor,
            used_monitor,
        ),
    ]


# -- 6. error against epsilon ----------------------------------------------------------------


@dataclass(frozen=True)
class ErrorRow:
    columns: str
    cells: int
    queries: int
    plan: str
    epsilon: float
    alpha: float
    updates_allowed: int
    updates_used: float  # medians over seeds from here on
    halted: float
    released_l1: float
    released_max: float
    final_l1: float
    run_s: float
    rows: int  # n
    failure_bound: float  # the plan's
    plan_s: float  # plan_pmw alone, the same plan as the runs' (nan if it could not be matched)


def mean_marginal_l1(answers: np.ndarray, truth: np.ndarray, groups: dict, rows: int) -> float:
    """Mean over the marginals (column subsets) of sum |answer - truth| / n over their cells."""
    return float(np.mean([np.abs(answers[ids] - truth[ids]).sum() / rows for ids in groups.values()]))


def bench_error(
    adult: tuple[Schema, np.ndarray], seeds: Sequence[int]
) -> tuple[list[ErrorRow], dict[str, float]]:
    """run_pmw on all 3-way marginals of adult column subsets, per epsilon, plan and seed."""
    schema, codes = adult
    rows_out, uniform = [], {}
    for label, columns in ADULT_SETS:
        sub = schema.select(columns)
        sub_codes = np.ascontiguousarray(codes[:, [schema.index(c) for c in columns]], dtype=code_dtype(sub))
        n = len(sub_codes)
        workload = Workload.marginals(sub, 3)
        groups = workload.groups()
        truth = workload.answer({s: marginal(sub_codes, sub, s) for s in workload.subsets}).astype(np.float64)
        prior = workload.answer(
            lambda s: np.full([sub[c].size for c in s], n / math.prod(sub[c].size for c in s))
        )
        uniform[label] = mean_marginal_l1(prior, truth, groups, n)
        for plan_label, options in ERROR_PLANS:
            for eps in ERROR_EPSILONS:
                per_seed = []
                for seed in seeds:
                    started = time.perf_counter()
                    run = run_pmw(sub_codes, sub, workload, eps, ERROR_DELTA, rows=n, rng=seed, **options)
                    per_seed.append(
                        (
                            run.pmw.updates,
                            run.rounds.count("halted"),
                            mean_marginal_l1(run.answers, truth, groups, n),
                            float(np.abs(run.answers - truth).max()) / n,
                            mean_marginal_l1(run.final, truth, groups, n),
                            time.perf_counter() - started,
                            run.plan,
                        )
                    )
                plan = per_seed[0][-1]
                med = [statistics.median(x[i] for x in per_seed) for i in range(6)]
                started = time.perf_counter()
                alone = plan_pmw(eps, ERROR_DELTA, n, sub.universe_size, len(workload), **options)
                plan_s = time.perf_counter() - started if alone == plan else math.nan
                rows_out.append(
                    ErrorRow(
                        f"{label}",
                        sub.universe_size,
                        len(workload),
                        plan_label,
                        eps,
                        plan.alpha,
                        plan.updates,
                        *med,
                        n,
                        plan.failure_bound,
                        plan_s,
                    )
                )
    return rows_out, uniform


# -- report ----------------------------------------------------------------------------------


def fine(seconds: float) -> str:
    """``duration`` with two decimals below 10 microseconds."""
    return f"{seconds * 1e6:.2f} us" if seconds < 1e-5 else duration(seconds)


def per_cell(seconds: float, cells: int) -> str:
    ns = seconds / cells * 1e9
    return f"{ns:.2f}" if ns < 100 else f"{ns:,.0f}"


def size_text(size: int) -> str:
    exponent = round(math.log10(size))
    return f"10^{exponent}" if 10**exponent == size else f"{size:,}"


def step_table(rows: Sequence[StepRow]) -> str:
    columns = [
        ("|U|", "---:"),
        ("query", "---"),
        ("cells selected", "---:"),
        ("synth median", "---:"),
        ("NumPy mask median", "---:"),
        ("`a *= b` median (GB/s)", "---:"),
        ("speed ratio vs NumPy mask", "---:"),
        ("synth / `a *= b` time", "---:"),
        ("same, best samples", "---:"),
        ("synth ns / selected cell", "---:"),
        (f"<= {UPDATE_TARGET:g}x `a *= b`?", ":---:"),
    ]
    body = []
    for r in rows:
        bw = r.vs_bandwidth
        body.append(
            [
                size_text(r.size),
                r.case,
                f"{r.selected:,}",
                fine(r.vs_numpy.synth_s),
                fine(r.vs_numpy.base_s),
                f"{fine(bw.base_s)} ({24 * r.size / bw.base_s / 1e9:.1f})",
                f"{r.vs_numpy.ratio:.1f}x",
                f"{bw.factor:.2f}x",
                f"{bw.best_factor:.2f}x",
                per_cell(r.vs_numpy.synth_s, r.selected),
                "yes" if bw.factor <= UPDATE_TARGET else "no",
            ]
        )
    return markdown_table(columns, body)


def round_table(rows: Sequence[RoundRow]) -> str:
    columns = [
        ("|U|", "---:"),
        (f"synth per update, delta={ERROR_DELTA:g}", "---:"),
        ("synth per update, delta=0", "---:"),
        ("NumPy per update", "---:"),
        (f"speed ratio, delta={ERROR_DELTA:g}", "---:"),
        ("same, best samples", "---:"),
        ("speed ratio, delta=0", "---:"),
        ("same, best samples", "---:"),
    ]
    body = [
        [
            size_text(r.size),
            duration(r.approx.synth_s / r.approx.work),
            duration(r.pure.synth_s / r.pure.work),
            duration(r.approx.base_s / r.approx.work),
            f"{r.approx.ratio:.3g}x",
            f"{r.approx.best_ratio:.3g}x",
            f"{r.pure.ratio:.3g}x",
            f"{r.pure.best_ratio:.3g}x",
        ]
        for r in rows
    ]
    return markdown_table(columns, body)


def lazy_table(rows: Sequence[LazyRow], interleaved: dict[int, Samples]) -> str:
    columns = [
        ("|U|", "---:"),
        ("synth per lazy round", "---:"),
        ("synth rate", "---:"),
        ("NumPy per lazy round", "---:"),
        ("NumPy rate", "---:"),
        ("speed ratio", "---:"),
        ("synth, all sizes interleaved (best)", "---:"),
        ("first evaluation of a 3-way subset: synth", "---:"),
        ("NumPy reshape + sum", "---:"),
        ("speed ratio", "---:"),
    ]
    body = []
    for r in rows:
        lz, cd, il = r.lazy, r.cold, interleaved[r.size]
        body.append(
            [
                size_text(r.size),
                fine(lz.synth_s / lz.work),
                rate(lz.work, lz.synth_s, "answers"),
                fine(lz.base_s / lz.work),
                rate(lz.work, lz.base_s, "answers"),
                f"{lz.ratio:.3g}x",
                f"{fine(statistics.median(il.seconds) / lz.work)} ({fine(min(il.seconds) / lz.work)})",
                fine(cd.synth_s),
                fine(cd.base_s),
                f"{cd.ratio:.2f}x",
            ]
        )
    return markdown_table(columns, body)


def overhead_lines(o: Overheads) -> str:
    return "\n".join(
        f"- {label}: one-shot `scale_query_cells` {fine(o.scale_call[label])}, prebuilt "
        f"`SelectedCells.scale` {fine(o.scale_prebuilt[label])}, the kernel alone "
        f"{fine(o.scale_kernel[label])}: {fine(o.scale_call[label] - o.scale_prebuilt[label])} of set-up "
        f"per one-shot call, {fine(o.scale_prebuilt[label] - o.scale_kernel[label])} in the Python method "
        "around the kernel"
        for label in o.scale_call
    )


def lazy_pieces_table(o: Overheads) -> str:
    return markdown_table(
        [("piece", "---"), ("median", "---:")], ([label, fine(t)] for label, t in o.lazy.items())
    )


def accounting_table(rows: Sequence[LedgerRow]) -> str:
    lengths = sorted({n for r in rows for n in r.spend_s})
    longest = lengths[-1]
    columns = (
        [("delta", "---:"), ("budget epsilon", "---:")]
        + [(f"`spend` per charge, ledger of {n:,}", "---:") for n in lengths]
        + [
            (f"building the {longest:,}-charge ledger one `spend` at a time", "---:"),
            ("slowest single `spend` of that build (ledger length after it)", "---:"),
        ]
        + [(f"`spent()`, ledger of {n:,} (method)", "---:") for n in lengths]
    )
    body = [
        [f"{r.delta:g}", f"{r.budget:.4g}"]
        + [fine(r.spend_s[n]) for n in lengths]
        + [duration(r.fill_s), f"{fine(r.slowest_s)} ({r.slowest_at:,})"]
        + [f"{fine(r.spent_s[n])} ({r.methods[n]})" for n in lengths]
        for r in rows
    ]
    return markdown_table(columns, body)


def accountant_lines(rounds: Sequence[RoundRow]) -> str:
    """Per size: the accountant's time per update in the instrumented run, per delta."""
    deltas = (ERROR_DELTA, 0.0)
    return "\n".join(
        f"- {size_text(r.size)}: "
        + "; ".join(
            f"delta = {d:g}: {fine(a.accountant_s)} of {duration(a.round_s)} per update ({a.share:.0%}; "
            f"{a.checks:g} `check` + {a.spends:g} `spend` calls per update; `spent()` of the ledger: "
            f"{a.method} composition)"
            for d in deltas
            for a in [r.accounting[d]]
        )
        for r in rounds
    )


def failure_range(rows: Sequence[ErrorRow]) -> str:
    bounds = [r.failure_bound for r in rows]
    if not bounds:
        return "none"
    low, high = min(bounds), max(bounds)
    return f"{low:.3g}" if low == high else f"{low:.3g} to {high:.3g}"


def plan_note(errors: Sequence[ErrorRow]) -> str:
    """``plan_pmw``'s own time per row group, where it was matched to the runs' plan."""
    parts = []
    for label, _ in ADULT_SETS:
        for plan_label, _ in ERROR_PLANS:
            rows = [r for r in errors if r.columns == label and r.plan == plan_label]
            if not rows:
                continue
            times = ", ".join(
                f"eps {r.epsilon:g}: {duration(r.plan_s)} of {duration(r.run_s)}"
                if math.isfinite(r.plan_s)
                else f"eps {r.epsilon:g} (not matched)"
                for r in rows
            )
            parts.append(f"{label}, {plan_label.split(':')[0].split(' (')[0]}: {times}")
    return "; ".join(parts)


def memory_table(rows: Sequence[MemoryRow]) -> str:
    columns = [
        ("|U|", "---:"),
        ("what is traced", "---"),
        ("updates used / L", "---:"),
        ("peak traced", "---:"),
        ("peak / (8 |U|)", "---:"),
        (f"<= {MEMORY_TARGET:g}?", ":---:"),
    ]
    body = []
    for r in rows:
        judged = r.size >= MEMORY_JUDGED_FROM and "monitor" not in r.case
        verdict = ("yes" if r.arrays <= MEMORY_TARGET else "no") if judged else "-"
        body.append(
            [size_text(r.size), r.case, r.updates, f"{r.peak / 2**20:,.1f} MiB", f"{r.arrays:.2f}", verdict]
        )
    return markdown_table(columns, body)


def error_table(rows: Sequence[ErrorRow]) -> str:
    columns = [
        ("columns (cells, queries)", "---"),
        ("plan", "---"),
        ("eps", "---:"),
        ("predicted alpha", "---:"),
        ("updates used / L", "---:"),
        ("halted rounds", "---:"),
        ("released: mean L1 per marginal", "---:"),
        ("released: max query error / n", "---:"),
        ("final model: mean L1 per marginal", "---:"),
        ("run time", "---:"),
    ]
    body = [
        [
            f"{r.columns} ({r.cells:,}, {r.queries:,})",
            r.plan,
            f"{r.epsilon:g}",
            f"{r.alpha:.3f}",
            f"{r.updates_used:g} / {r.updates_allowed:,}",
            f"{r.halted:g}",
            f"{r.released_l1:.3f}",
            f"{r.released_max:.3f}",
            f"{r.final_l1:.3f}",
            duration(r.run_s),
        ]
        for r in rows
    ]
    return markdown_table(columns, body)


def targets_note(
    overheads: Overheads,
    steps: Sequence[StepRow],
    lazy: Sequence[LazyRow],
    interleaved: dict[int, Samples],
    memory: Sequence[MemoryRow],
    rounds: Sequence[RoundRow],
    ledger: Sequence[LedgerRow],
    errors: Sequence[ErrorRow],
) -> str:
    full = [r for r in steps if r.case.startswith("all cells")]
    typical = [r for r in steps if not r.case.startswith("all cells")]
    full_ok = [size_text(r.size) for r in full if r.vs_bandwidth.factor <= UPDATE_TARGET]
    full_no = [size_text(r.size) for r in full if r.vs_bandwidth.factor > UPDATE_TARGET]
    lines = [
        "## Targets (judged on the medians)",
        "",
        f"- Update pass within {UPDATE_TARGET:g}x of NumPy `a *= b` over an array of the universe's size, "
        "judged on "
        f"the full pass (`Query((), ())`, every cell): {met(not full_no)}"
        + (f" (met at {', '.join(full_ok)}; not at {', '.join(full_no)})" if full_ok and full_no else "")
        + ": "
        + "; ".join(
            f"{size_text(r.size)} {r.vs_bandwidth.factor:.2f}x (best {r.vs_bandwidth.best_factor:.2f}x, "
            f"{per_cell(r.vs_numpy.synth_s, r.selected)} ns/cell "
            f"vs {per_cell(r.vs_bandwidth.base_s, r.size)})"
            for r in full
        )
        + ".",
    ]
    by_case: dict[str, list[StepRow]] = {}
    for r in typical:
        if r.vs_bandwidth.factor > UPDATE_TARGET:
            by_case.setdefault(r.case, []).append(r)
    if by_case:
        lines.append(
            f"- Typical queries whose update pass takes over {UPDATE_TARGET:g}x one `a *= b` pass (although "
            "they visit "
            "fewer cells): "
            + "; ".join(
                f"{case} at " + ", ".join(f"{size_text(r.size)} ({r.vs_bandwidth.factor:.2f}x)" for r in rows)
                for case, rows in by_case.items()
            )
            + "."
        )
    else:
        lines.append(
            f"- Every typical query's update pass is within {UPDATE_TARGET:g}x of `a *= b` at every size."
        )
    small = min(full, key=lambda r: r.size)
    full_label = small.case
    from_size = 10**5
    large_full = [r for r in full if r.size >= from_size]
    last_range = [r for r in typical if r.case.endswith("half of c_last") and r.size >= from_size]
    lines.append(
        "- Where the update pass's time goes (this run's figures): (1) fixed cost per call: at |U| = "
        f"{size_text(overheads.size)} the prebuilt `SelectedCells.scale` takes "
        f"{fine(overheads.scale_prebuilt[full_label])} on the full pass, of which the kernel alone "
        f"{fine(overheads.scale_kernel[full_label])}, against {fine(small.vs_bandwidth.base_s)} for "
        f"`a *= b` on {small.size:,} cells (the one-shot `scale_query_cells` adds "
        f"{fine(overheads.scale_call[full_label] - overheads.scale_prebuilt[full_label])} of set-up)"
        + (
            "; (2) per cell, from |U| = "
            f"{size_text(from_size)} up, the full pass takes "
            + ", ".join(per_cell(r.vs_numpy.synth_s, r.selected) for r in large_full)
            + " ns against `a *= b`'s "
            + ", ".join(per_cell(r.vs_bandwidth.base_s, r.size) for r in large_full)
            + " ns"
            if large_full
            else ""
        )
        + (
            "; (3) the half-range on c_last, whose selected cells are runs of one contiguous cell in the "
            "row-major layout, takes "
            + ", ".join(f"{size_text(r.size)} {per_cell(r.vs_numpy.synth_s, r.selected)}" for r in last_range)
            + " ns per selected cell"
            if last_range
            else ""
        )
        + "."
    )
    sizes = sorted(interleaved)
    per_answer = [statistics.median(interleaved[n].seconds) / 4 for n in sizes]
    best = [min(interleaved[n].seconds) / 4 for n in sizes]
    spread, best_spread = max(per_answer) / min(per_answer), max(best) / min(best)
    separate = [r.lazy.synth_s / r.lazy.work for r in lazy]
    pieces = overheads.lazy
    round_s = pieces[PIECE_ROUND]
    draw_text = (
        f" (one draw of its private noise helper {fine(pieces[PIECE_DRAW])})" if PIECE_DRAW in pieces else ""
    )
    lines.append(
        f"- Lazy round independent of the universe size (slowest / fastest median over "
        f"{size_text(sizes[0])} to {size_text(sizes[-1])}, all sizes sampled in turn in one run, <= "
        f"{LAZY_SPREAD_TARGET:g}): {met(spread <= LAZY_SPREAD_TARGET)} ({spread:.2f}x; best samples "
        f"{best_spread:.2f}x: "
        + ", ".join(f"{size_text(n)} {fine(t)}" for n, t in zip(sizes, per_answer))
        + f"). Measured size by size, next to the NumPy round: {max(separate) / min(separate):.2f}x. "
        "The NumPy lazy round grows with |U| (it reads the whole distribution). Of synth's lazy round "
        f"at |U| = {size_text(overheads.size)} ({fine(round_s)}, the pieces above), `AboveThreshold.test` "
        f"alone takes {fine(pieces[PIECE_TEST])} ({pieces[PIECE_TEST] / round_s:.0%}){draw_text} and "
        f"`PMW.model_answer` {fine(pieces[PIECE_MODEL])} ({pieces[PIECE_MODEL] / round_s:.0%})."
    )
    judged = [r for r in memory if r.size >= MEMORY_JUDGED_FROM and "monitor" not in r.case]
    if judged:
        worst = max(judged, key=lambda r: r.arrays)
        lines.append(
            f"- Peak memory <= {MEMORY_TARGET:g} universe-sized float64 arrays (run_pmw, with and without "
            f"distribution(); judged from |U| = {size_text(MEMORY_JUDGED_FROM)}, where universe arrays "
            "dominate the fixed "
            f"overheads): {met(all(r.arrays <= MEMORY_TARGET for r in judged))} (worst {worst.arrays:.2f} at "
            f"{size_text(worst.size)}, {worst.case})."
        )
    monitor = [r for r in memory if "monitor" in r.case and r.size >= MEMORY_JUDGED_FROM]
    if monitor:
        lines.append(
            "- Not a target: with `monitor=True` the peak is "
            + ", ".join(f"{r.arrays:.2f}" for r in monitor)
            + " arrays (the NON-PRIVATE KL monitor is built from the dense true histogram)."
        )
    biggest, smallest = rounds[-1], rounds[0]
    theory_l = max((r.updates_allowed for r in errors if r.plan.startswith("theory")), default=0)
    faster = [size_text(r.size) for r in rounds if r.approx.ratio >= 1]
    faster_pure = [size_text(r.size) for r in rounds if r.pure.ratio >= 1]
    share = smallest.accounting[ERROR_DELTA]
    per_update = statistics.median(r.accounting[ERROR_DELTA].accountant_s for r in rounds)
    smallest_steps = [r for r in typical if r.size == smallest.size]
    approx_ledger = next((r for r in ledger if r.delta == ERROR_DELTA), None)
    lengths = sorted(approx_ledger.spend_s) if approx_ledger else []
    lines.append(
        f"- Update rounds (no target): at |U| = {size_text(biggest.size)} synth takes "
        f"{duration(biggest.approx.synth_s / biggest.approx.work)} per update with delta = {ERROR_DELTA:g} "
        f"({duration(biggest.pure.synth_s / biggest.pure.work)} with delta = 0) vs "
        f"{duration(biggest.approx.base_s / biggest.approx.work)} for plain NumPy (speed ratio "
        f"{biggest.approx.ratio:.2f}x). "
        f"Synth is faster than NumPy from |U| = {faster[0] if faster else '(none in this run)'} with delta = "
        f"{ERROR_DELTA:g}, from |U| = {faster_pure[0] if faster_pure else '(none in this run)'} with delta "
        f"= 0. At |U| = {size_text(smallest.size)} an update takes "
        f"{duration(smallest.approx.synth_s / smallest.approx.work)} (delta = {ERROR_DELTA:g}); in the "
        f"instrumented run {fine(share.accountant_s)} of {duration(share.round_s)} per update "
        f"({share.share:.0%}) was spent inside the accountant, and the update pass itself takes "
        + (
            f"{fine(min(r.vs_numpy.synth_s for r in smallest_steps))} to "
            f"{fine(max(r.vs_numpy.synth_s for r in smallest_steps))} at that size (section 1)"
            if smallest_steps
            else "(not measured)"
        )
        + "."
        + (
            f" At the median {fine(per_update)} per update inside the accountant (over the sizes above), "
            f"a run that used all L = {theory_l:,} updates of the largest theoretical plan above would spend "
            f"about {theory_l * per_update:.2g} s in it"
            + (
                f"; section 4's `spend` costs {fine(approx_ledger.spend_s[lengths[-1]])} per charge on a "
                f"{lengths[-1]:,}-charge ledger against {fine(approx_ledger.spend_s[lengths[0]])} on a "
                f"{lengths[0]:,}-charge one (delta = {ERROR_DELTA:g})"
                if approx_ledger
                else ""
            )
            + "."
            if theory_l
            else ""
        )
    )
    lines.append(
        "- The machine is shared and noisy: figures are medians of alternating synth / baseline samples, and "
        "ratios can move by tens of percent between runs; the best-sample columns are a cross-check."
    )
    return "\n".join(lines)


def render(
    settings: Settings,
    call: FirstCall,
    overheads: Overheads,
    steps: Sequence[StepRow],
    rounds: Sequence[RoundRow],
    lazy: Sequence[LazyRow],
    interleaved: dict[int, Samples],
    ledger: Sequence[LedgerRow],
    memory: Sequence[MemoryRow],
    errors: Sequence[ErrorRow],
    uniform: dict[str, float],
    total_s: float,
    loads: tuple[str, str],
) -> str:
    sizes = ", ".join(size_text(10**k) for k in settings.exponents)
    machine = (
        f"{machine_info(np, numba)}\n- load average (1, 5, 15 min) at start: {loads[0]}; at end: {loads[1]} "
        "(the cores are shared)"
    )
    seeds = ", ".join(map(str, settings.error_seeds))
    return "\n".join(
        [
            *report_header("synth PMW: benchmark results", machine, total_s),
            f"{repeats_note(settings.repeats)}; seed {settings.seed}",
            "",
            f"Synthetic universes: {sizes} cells, k `Coded` columns `c0..c{{k-1}}` of {CODES} codes each; "
            f"{settings.rows:,} "
            "rows drawn from a seeded Generator with P(v) ~ 1/(v+1) per column. Typical queries: a 2-way "
            "cell on the "
            "first and last columns, a 3-way cell on the first, middle (`c_mid` = c{k//2}) and last, and "
            "1-way ranges "
            "selecting half the codes of the middle or of the last column. In the row-major layout, cells "
            "that differ only in columns after the query's last constrained column are contiguous runs: a "
            "query on `c_last` selects runs of one cell, one on leading columns long runs (compare their ns "
            "per selected cell in section 1).",
            "",
            "## First call (JIT)",
            "",
            "First call of `SelectedCells.scale` on a small input (a Numba cache load when the on-disk "
            "cache is valid, else a compile), and a from-scratch compile of the kernel with caching off. Not "
            "in any figure below.",
            "",
            first_call_table([call]),
            "",
            "## 1. Update step: `SelectedCells.scale` vs NumPy",
            "",
            "synth: `sel.scale(w, factor)` with `sel = SelectedCells(schema, query)` built once before the "
            "timing, as PMW does (it keeps one per query); a Numba kernel that scales the selected cells in "
            "place and returns their sum before scaling. NumPy mask: one boolean mask per constrained column "
            "broadcast into a "
            "universe-sized mask, then `sel = w[mask]; before = sel.sum(); w[mask] = sel * factor`. "
            "Bandwidth: `a *= b` "
            "on two float64 arrays of |U| cells (GB/s counts 24 bytes per cell: two reads and a write); "
            "one shared "
            "sample per repeat. Factors alternate exp(0.01) and its inverse. Checked: same sum and same "
            "weights as NumPy and as the one-shot `scale_query_cells`. **synth / `a *= b` time** compares "
            "the query's update pass with one bandwidth pass over the whole "
            "universe (the target); the last-but-one column is synth's time per *selected* cell.",
            "",
            step_table(steps),
            "",
            f"Fixed cost per call, at |U| = {size_text(overheads.size)}: the one-shot "
            "`scale_query_cells(w, schema, query, factor)` (set-up included, every call), the prebuilt "
            "`SelectedCells.scale` of the table above, and the kernel called directly with the selection's "
            "arguments:",
            "",
            overhead_lines(overheads),
            "",
            "## 2. Update round end to end: `PMW.answer` vs a plain NumPy round",
            "",
            "synth: `PMW.answer` with a `PMWPlan` built directly with a negative threshold, so every test "
            "is above "
            "and every round is an update (per-epoch eps_test = eps_measure = 0.01, eta = 0.01, delta = "
            f"{ERROR_DELTA:g} "
            "as in section 6): the model marginal of the query's subset (recomputed by "
            "`marginal_from_dense`, the "
            "previous update cleared the cache), the AboveThreshold test, the discrete Laplace "
            "measurement, the "
            "accountant's checks and charges, and the update pass; one sample is the 4 typical queries "
            "in turn, "
            "and the accountant's ledger is emptied before each sample (outside the timing; section 4 "
            "gives the cost "
            "of a longer ledger). NumPy: per query, build the mask, f(D) = n D[mask].sum(), a float Laplace "
            "measurement, D[mask] *= exp(eta sign), D /= D.sum() (no accounting, floating-point noise).",
            "",
            round_table(rounds),
            "",
            "Time inside the accountant: after the timed samples, one more run of these rounds (the 4 "
            "queries repeated for about 0.1 s, at least once and at most 50 times) with a fresh accountant "
            "(the same budget) whose `check` and `spend` count their calls and time themselves (outermost "
            "calls only; not in the medians above):",
            "",
            accountant_lines(rounds),
            "",
            "## 3. Lazy rounds, and the first evaluation of a subset",
            "",
            "synth: `PMW.answer` on the 4 typical queries in turn, their marginals cached (a PMW from "
            "`plan_pmw(1, 0, n, |U|, 10^6, alpha=1.4)`: a threshold of "
            + "/".join(sorted({f"{r.threshold:.2f}" for r in lazy}))
            + " n, so every round is lazy; checked). "
            "NumPy: `n * (D * mask).sum()` on the full distribution with the query's universe-sized mask "
            "precomputed "
            "(NumPy's best case), then the noisy comparison with `rng.laplace` noise. First evaluation: "
            "`marginal_from_dense(D, schema, (c0, c_mid, c_last))`, what a round pays for a subset that is "
            "not cached "
            "(every subset after an update), vs `D.reshape(shape).sum(axis=others)`. The interleaved "
            "column times the "
            "same synth lazy round again with every universe size sampled in turn in one round-robin "
            "(after the "
            "per-size sections), so load changes on the shared machine hit all sizes alike: the "
            "independence target "
            "is judged on it.",
            "",
            lazy_table(lazy, interleaved),
            "",
            f"Where a lazy round's time goes (|U| = {size_text(overheads.size)}, the same plan; medians of "
            "each piece "
            "timed on its own):",
            "",
            lazy_pieces_table(overheads),
            "",
            "## 4. Accounting cost per charge",
            "",
            "A ledger of alternating "
            + " / ".join(f"{c:g}" for c in LEDGER_CHARGES)
            + " charges is built from empty with `Accountant.spend` (each charge checked against the "
            "budget, then recorded), one charge at a time (the build's total and its slowest single spend "
            f"are reported). `spend` per charge: the mean of {SPENDS_PER_SAMPLE} further spends on a fresh "
            "copy of the ledger of that length, median over the samples. `spent()` (the total of the "
            "whole ledger by the tightest composition, a one-off call for a report) on the ledger of that "
            "length, with the composition it chose. The budget is "
            f"{LEDGER_BUDGET_FACTOR:g}x the composed total (`compose`) of the longest ledger plus those "
            f"spends (that total is {1 / LEDGER_BUDGET_FACTOR:.0%} of the budget). No target. Section 2 "
            "counts the calls a PMW update makes.",
            "",
            accounting_table(ledger),
            "",
            "## 5. Peak memory",
            "",
            "`tracemalloc` peak (NumPy array buffers are traced; the rows' codes exist before tracing "
            "starts) of "
            "`run_pmw(codes, schema, W, 1, 1e-6, rows=n, passes=3, alpha=0.05, updates=8)` with W the 4 "
            "typical "
            "queries, then of `run.pmw.distribution()` while the run is still held, and of the same run with "
            "`monitor=True`, in units of one universe-sized float64 array (8 |U| bytes). At small |U| the "
            "fixed "
            "overheads (plan, marginal tables, Python objects) dominate, so the target is judged from "
            f"|U| = {size_text(MEMORY_JUDGED_FROM)}.",
            "",
            memory_table(memory),
            "",
            "## 6. Error against epsilon on adult",
            "",
            f"`run_pmw(codes, schema, W, eps, {ERROR_DELTA:g}, rows=n, rng=seed)` with W all 3-way "
            "marginals (cell queries) "
            "of the column subset, n = "
            + "/".join(sorted({f"{r.rows:,}" for r in errors}))
            + f" public; medians over seeds {seeds}. L1 per marginal: "
            "sum over the marginal's cells of |answer - true| / n (normalized tables), averaged over the "
            "marginals; "
            "released = the answers PMW released in the stream (after a halt: from the final model, no "
            "guarantee), "
            "final model = the marginals of D_final. Max query error / n is what alpha bounds (before the "
            "halt). "
            "Reference, the uniform distribution (PMW's starting point): mean L1 per marginal "
            + ", ".join(f"{k} {v:.3f}" for k, v in uniform.items())
            + ". "
            f"**TUNED rows** fix alpha = {TUNED_ALPHA:g} and L = {TUNED_UPDATES} (`run_pmw(..., "
            f"alpha={TUNED_ALPHA:g}, "
            f"updates={TUNED_UPDATES})`): their alpha is a user choice, not a guarantee at this eps (the "
            "plans' failure bounds in this run: "
            + failure_range([r for r in errors if r.plan.startswith("TUNED")])
            + "), shown so readers see what tuning does. Columns: "
            + "; ".join(f"{k}: {', '.join(v)}" for k, v in ADULT_SETS)
            + ".",
            "",
            error_table(errors),
            "",
            "Of each run time above, `plan_pmw` alone (called with the same arguments once per row, its "
            "plan checked equal to the runs'): "
            + plan_note(errors)
            + ".",
            "",
            targets_note(overheads, steps, lazy, interleaved, memory, rounds, ledger, errors),
            "",
        ]
    )


# -- main ------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = option_parser(
        __doc__, quick_help="universes up to 10^6, 2 error seeds and 3 repeats (a smoke run)"
    )
    parser.add_argument(
        "--data-dir", type=Path, default=DEFAULT_DATA_DIR, help="folder with adult.csv and adult-domain.json"
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of the synthetic rows and of every generator"
    )
    args = parse_options(parser, argv)
    if args.seed < 0:
        parser.error("--seed must be >= 0")
    return args


def settings_from(args: argparse.Namespace) -> Settings:
    return Settings(
        repeats=args.repeats,
        exponents=tuple(range(3, 7 if args.quick else 9)),
        rows=ROWS,
        error_seeds=tuple(args.seed + i for i in range(2 if args.quick else 5)),
        seed=args.seed,
        data_dir=args.data_dir,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    settings = settings_from(args)
    adult = load_adult(settings.data_dir)  # fail early on a missing dataset
    started = time.perf_counter()
    load_start = load_average()
    call = bench_first_call()
    overheads = bench_overheads(settings.repeats, settings.rows, settings.seed)
    ledger = bench_accounting(settings.repeats)
    steps: list[StepRow] = []
    rounds: list[RoundRow] = []
    lazy: list[LazyRow] = []
    memory: list[MemoryRow] = []
    for exponent in settings.exponents:
        schema = synthetic_schema(exponent)
        codes = synthetic_codes(schema, settings.rows, settings.seed)
        began = time.perf_counter()
        memory += bench_memory(schema, codes, settings.seed)
        gc.collect()
        steps += bench_update_step(schema, settings.repeats)
        gc.collect()
        rounds.append(bench_update_round(schema, codes, settings.repeats, settings.seed))
        gc.collect()
        lazy.append(bench_lazy(schema, codes, settings.repeats, settings.seed))
        gc.collect()
        print(f"|U| = 10^{exponent}: {time.perf_counter() - began:.0f} s", file=sys.stderr)
    interleaved = bench_lazy_interleaved(settings.exponents, settings.rows, settings.repeats, settings.seed)
    gc.collect()
    began = time.perf_counter()
    errors, uniform = bench_error(adult, settings.error_seeds)
    print(f"error against eps: {time.perf_counter() - began:.0f} s", file=sys.stderr)
    total_s = time.perf_counter() - started
    report = render(
        settings,
        call,
        overheads,
        steps,
        rounds,
        lazy,
        interleaved,
        ledger,
        memory,
        errors,
        uniform,
        total_s,
        (load_start, load_average()),
    )
    publish(SECTION, report, total_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
