"""Benchmark Private Multiplicative Weights (``synth.engines.pmw``): speed and memory against the
universe size, and the theory variant's plans and error against epsilon on adult.

Against plain NumPy in the same run, on synthetic schemas of ``Coded`` columns of 10 codes
(universes of 10^3 to 10^8 cells; 10^6 with ``--quick``) and seeded skewed rows:

1. update step: ``SelectedCells.scale`` (prebuilt, as PMW keeps one per query) vs a NumPy
   boolean-mask update, and vs ``a *= b`` on arrays of the universe's size (target: within 2x);
2. update round: ``PMW.answer`` when every test is above threshold vs a plain NumPy round, and
   the time spent inside the accountant;
3. lazy rounds on cached marginals vs a NumPy round on the full distribution (target: independent
   of the universe size), and the first evaluation of a subset (``marginal_from_dense``);
4. the accountant: ``spend`` per charge as the ledger grows, and ``spent()``;
5. peak memory of ``run_pmw(variant="theory")`` in universe-sized float64 arrays (target <= 3);
6. the theory variant on adult: its plans (alpha, L) and error against epsilon (the engines
   side by side, practical variant included: ``bench_engines.py``).

Usage: ``python benchmarks/bench_pmw.py [--repeats N] [--quick] [--seed S] [--no-write]``
"""

from __future__ import annotations

import copy
import gc
import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numba
import numpy as np
from _data import FIVE, SEVEN, Marginals, numpy_marginal
from _harness import (
    Comparison,
    Timed,
    duration,
    fine,
    first_call,
    first_call_table,
    met,
    over_seeds,
    rate,
    round_robin,
    session,
    table,
    timed,
    traced_peaks,
    with_time,
)

from synth import _kernels
from synth.privacy.accounting import Accountant, Charge, compose
from synth.data.reading import code_dtype
from synth.privacy.mechanisms import AboveThreshold
from synth.engines.pmw import LAZY, PMW, UPDATE, run_pmw
from synth.engines.pmw_plan import PMWPlan, plan_pmw
from synth.data.schema import Coded, Schema
from synth.data.tables import SelectedCells, marginal, marginal_from_dense, scale_query_cells
from synth.data.workload import Query, Workload

SECTION = "bench_pmw"
CODES, ROWS = 10, 100_000  # codes per synthetic column (10^k cells: k columns); synthetic rows
FACTOR = math.exp(0.01)  # update factor, alternately FACTOR and 1 / FACTOR
UPDATE_TARGET, LAZY_SPREAD_TARGET, MEMORY_TARGET = 2.0, 1.5, 3.0
MEMORY_JUDGED_FROM = 10**6  # where universe-sized arrays dominate the fixed overheads
DELTA = 1e-6
ERROR_EPSILONS = (0.5, 1.0, 2.0, 4.0)
ADULT_SETS = (("7 columns", SEVEN), ("5 columns", FIVE))
TUNED = {"alpha": 0.05, "updates": 200}
PLANS = (("theory (plan_pmw's T and L)", {}), ("TUNED: alpha=0.05, L=200 fixed", TUNED))
LEDGER_LENGTHS, LEDGER_CHARGES = (1, 1000, 6000), (0.02, 0.01)
SPENDS_PER_SAMPLE, LEDGER_BUDGET_FACTOR = 100, 1.25


# -- synthetic schemas and queries -----------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """A query on a synthetic schema: its label and its (axis, allowed codes) pairs."""

    label: str
    query: Query
    constraints: tuple[tuple[int, np.ndarray], ...]


def synthetic_schema(exponent: int) -> Schema:
    return Schema(tuple(Coded(f"c{i}", CODES) for i in range(exponent)))


def synthetic_codes(schema: Schema, rows: int, seed: int) -> np.ndarray:
    """Seeded rows, P(v) ~ 1/(v+1) per column, independent columns."""
    p = 1.0 / np.arange(1, CODES + 1)
    rng = np.random.default_rng(seed)
    return rng.choice(CODES, size=(rows, len(schema)), p=p / p.sum()).astype(code_dtype(schema))


def make_case(schema: Schema, label: str, constraints) -> Case:
    pairs = tuple(sorted((axis, np.asarray(codes, dtype=np.int64)) for axis, codes in constraints))
    return Case(label, Query(tuple(schema.names[a] for a, _ in pairs), tuple(c for _, c in pairs)), pairs)


def typical_cases(schema: Schema) -> list[Case]:
    """2-way and 3-way cells and two 1-way half ranges (first, middle, last column)."""
    mid, last, half = len(schema) // 2, len(schema) - 1, range(CODES // 2)
    return [
        make_case(schema, "2-way cell (c0=0, c_last=0)", [(0, [0]), (last, [0])]),
        make_case(schema, "3-way cell (c0=0, c_mid=1, c_last=0)", [(0, [0]), (mid, [1]), (last, [0])]),
        make_case(schema, "1-way range, half of c_mid", [(mid, half)]),
        make_case(schema, "1-way range, half of c_last", [(last, half)]),
    ]


FULL = Case("all cells, Query((), ()): full pass", Query((), ()), ())


def numpy_mask(shape: tuple[int, ...], case: Case) -> np.ndarray:
    mask = np.ones(shape, dtype=bool)
    for axis, allowed in case.constraints:
        column = np.zeros(shape[axis], dtype=bool)
        column[allowed] = True
        mask &= column.reshape([-1 if j == axis else 1 for j in range(len(shape))])
    return mask


def numpy_scale(w: np.ndarray, shape: tuple[int, ...], case: Case, factor: float) -> float:
    """The NumPy update step: the mask, the selected cells' sum, then the scaling."""
    mask, view = numpy_mask(shape, case), w.reshape(shape)
    selected = view[mask]
    before = float(selected.sum())
    view[mask] = selected * factor
    return before


def selected_cells(schema: Schema, case: Case) -> int:
    fixed = {axis: len(allowed) for axis, allowed in case.constraints}
    return math.prod(fixed.get(j, size) for j, size in enumerate(schema.shape))


def toggled(step: Callable[[float], object]) -> Callable[[], object]:
    """``step`` with FACTOR, then 1 / FACTOR, and so on (the weights stay bounded)."""
    state = [FACTOR]

    def call() -> object:
        state[0] = 1.0 / state[0]
        return step(state[0])

    return call


def true_count(codes: np.ndarray, schema: Schema, query: Query) -> int:
    return int(marginal(codes, schema, query.columns)[np.ix_(*query.allowed)].sum())


def forced_update_plan(schema: Schema, rows: int, delta: float) -> PMWPlan:
    """Threshold below any error: every round updates (eps_test = eps_measure = eta = 0.01)."""
    return PMWPlan(epsilon=1e6, delta=delta, beta=0.05, rows=float(rows), rows_public=True,
                   universe_size=schema.universe_size, queries=1, threshold=-10.0, updates=10**12,
                   eta=0.01, epsilon_test=0.01, epsilon_measure=0.01, epsilon_count=0.0, alpha=math.nan,
                   failure_bound=1.0, composition="basic")


def lazy_pmw(schema: Schema, codes: np.ndarray, seed: int) -> PMW:
    """A PMW whose rounds are all lazy (threshold above every error), the typical queries' marginals
    cached."""
    pmw = PMW(codes, schema, plan_pmw(1.0, 0.0, len(codes), schema.universe_size, 10**6, alpha=1.4),
              np.random.default_rng(seed))
    for case in typical_cases(schema):
        pmw.answer(case.query)
    return pmw


def answering(pmw, queries: Sequence[Query]) -> Callable[[], None]:
    return lambda: [pmw.answer(q) for q in queries]


def check_rounds(pmw, kind: str) -> None:
    if pmw.rounds[kind] != sum(pmw.rounds.values()):
        raise AssertionError(f"PMW made rounds other than {kind}: {pmw.rounds}")


def kernel_args(w: np.ndarray, s: SelectedCells) -> tuple:
    return (w, s.start, s.strides, s.allowed, s.offsets, s.counts, s.run)


# -- 0 and fixed costs at 10^3 cells ---------------------------------------------------------

PIECES = ("`PMW.answer`, a lazy round (3-way cell, marginal cached)", "`AboveThreshold.test(error)` alone",
          "`PMW.model_answer(query)` alone (cached marginal)")


def bench_small(repeats: int, seed: int):
    """First call of the update kernel; fixed costs of an update (one-shot, prebuilt, kernel alone)
    and the pieces of a lazy round, at |U| = 10^3."""
    schema = synthetic_schema(3)
    w = np.full(schema.universe_size, 1.0 / schema.universe_size)
    cases = [typical_cases(schema)[0], FULL]
    selection = SelectedCells(schema, cases[0].query)
    call = first_call("scale_selected (SelectedCells.scale, 2-way cell, 10^3 cells)",
                      timed(lambda: selection.scale(w, FACTOR)), _kernels.scale_selected,
                      (*kernel_args(w, selection), FACTOR))
    entries = []
    for case in cases:
        s = SelectedCells(schema, case.query)
        args = kernel_args(w, s)
        one_shot = toggled(lambda f, q=case.query: scale_query_cells(w, schema, q, f))
        entries += [Timed(f"one-shot/{case.label}", one_shot),
                    Timed(f"prebuilt/{case.label}", toggled(lambda f, s=s: s.scale(w, f))),
                    Timed(f"kernel/{case.label}", toggled(lambda f, a=args: _kernels.scale_selected(*a, f)))]
    fixed = {k: statistics.median(t.seconds) for k, t in round_robin(entries, repeats).items()}
    codes = synthetic_codes(schema, ROWS, seed)
    pmw, query = lazy_pmw(schema, codes, seed), typical_cases(schema)[1].query
    test = AboveThreshold(pmw.plan.threshold_count, pmw.plan.epsilon_test, 1, np.random.default_rng(seed))
    error = abs(true_count(codes, schema, query) - pmw.model_answer(query))
    fns = (lambda: pmw.answer(query), lambda: test.test(error), lambda: pmw.model_answer(query))
    times = round_robin([Timed(k, f) for k, f in zip(PIECES, fns)], repeats)
    pieces = {k: statistics.median(t.seconds) for k, t in times.items()}
    check_rounds(pmw, LAZY)
    if test.halted:
        raise AssertionError("the lazy-round pieces made an above-threshold test")
    return call, [c.label for c in cases], fixed, pieces


# -- 1. update step --------------------------------------------------------------------------


def bench_update_step(schema: Schema, repeats: int) -> list[tuple[int, str, int, Comparison, Comparison]]:
    """(size, query, cells selected, vs NumPy mask, vs a *= b) per query."""
    size, shape = schema.universe_size, schema.shape
    cases = typical_cases(schema) + [FULL]
    selections = {c.label: SelectedCells(schema, c.query) for c in cases}
    w_synth = np.full(size, 1.0 / size)
    w_numpy, w_oneshot = w_synth.copy(), w_synth.copy()
    for case in cases:  # checks: the same sum before scaling, then identical weights
        a = selections[case.label].scale(w_synth, FACTOR)
        b = numpy_scale(w_numpy, shape, case, FACTOR)
        c = scale_query_cells(w_oneshot, schema, case.query, FACTOR)
        if not (math.isclose(a, b, rel_tol=1e-9) and a == c):
            raise AssertionError(f"update step {case.label}, |U|={size:,}: sums before scaling disagree")
    if not (np.array_equal(w_synth, w_numpy) and np.array_equal(w_synth, w_oneshot)):
        raise AssertionError(f"update step, |U|={size:,}: synth and NumPy weights differ")
    del w_oneshot
    a_arr, b_arr = np.ones(size), np.ones(size)
    entries = [Timed("bandwidth", lambda: a_arr.__imul__(b_arr))]
    for c in cases:
        entries += [Timed(f"synth/{c.label}", toggled(lambda f, s=selections[c.label]: s.scale(w_synth, f))),
                    Timed(f"numpy/{c.label}", toggled(lambda f, c=c: numpy_scale(w_numpy, shape, c, f)))]
    times = round_robin(entries, repeats)
    rows = []
    for c in cases:
        cells, synth = selected_cells(schema, c), times[f"synth/{c.label}"]
        rows.append((size, c.label, cells,
                     Comparison.of(c.label, cells, "cells", synth, times[f"numpy/{c.label}"]),
                     Comparison.of(c.label, size, "cells", synth, times["bandwidth"])))
    return rows


# -- 2. update round -------------------------------------------------------------------------


class TimedAccountant(Accountant):
    """Counts its outermost ``check`` / ``spend`` calls and the seconds spent inside them."""

    def __init__(self, epsilon: float, delta: float = 0.0):
        super().__init__(epsilon, delta)
        self.seconds, self.calls, self._inside = 0.0, {"check": 0, "spend": 0}, False

    def _timed(self, name, method, args, kwargs):
        if self._inside:
            return method(*args, **kwargs)
        self.calls[name] += 1
        self._inside, start = True, time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start
            self._inside = False

    def check(self, *args, **kwargs):
        return self._timed("check", super().check, args, kwargs)

    def spend(self, *args, **kwargs):
        return self._timed("spend", super().spend, args, kwargs)


def bench_update_round(schema: Schema, codes: np.ndarray, repeats: int, seed: int):
    """PMW.answer with every round an update (4 queries; delta = 1e-6 and 0) vs a NumPy round
    (mask, f(D), float Laplace measurement, multiplicative update, renormalization); then one
    instrumented run per delta: the accountant's seconds and calls per update."""
    size, shape, rows = schema.universe_size, schema.shape, len(codes)
    cases = typical_cases(schema)
    pmws = {d: PMW(codes, schema, forced_update_plan(schema, rows, d), np.random.default_rng(seed))
            for d in (DELTA, 0.0)}
    trues = [true_count(codes, schema, c.query) for c in cases]
    d_np, rng, plan = np.full(size, 1.0 / size), np.random.default_rng(seed + 1), pmws[0.0].plan

    def numpy_round() -> None:
        for case, true in zip(cases, trues):
            mask, view = numpy_mask(shape, case), d_np.reshape(shape)
            selected = view[mask]
            measured = true + rng.laplace(0.0, 1.0 / plan.epsilon_measure)
            sign = float(np.sign(measured - rows * float(selected.sum())))
            view[mask] = selected * math.exp(plan.eta * sign)
            np.divide(d_np, d_np.sum(), out=d_np)

    def fresh(pmw) -> Callable[[], None]:  # outside the timing: each sample starts from an empty ledger
        return lambda: setattr(pmw, "accountant", Accountant(pmw.plan.epsilon, pmw.plan.delta))

    queries = [c.query for c in cases]
    entries = [Timed(f"synth/{DELTA}", answering(pmws[DELTA], queries), fresh(pmws[DELTA])),
               Timed("numpy", numpy_round),
               Timed("synth/0.0", answering(pmws[0.0], queries), fresh(pmws[0.0])),
               Timed("numpy", numpy_round)]
    times = round_robin(entries, repeats, min_sample_s=0)
    shares = {}
    for delta, pmw in pmws.items():
        calls = max(1, min(50, int(0.1 / statistics.median(times[f"synth/{delta}"].seconds))))
        accountant = pmw.accountant = TimedAccountant(pmw.plan.epsilon, pmw.plan.delta)
        wall = timed(lambda: [answering(pmw, queries)() for _ in range(calls)])
        updates = calls * len(cases)
        shares[delta] = (accountant.seconds / updates, wall / updates, accountant.calls["check"] / updates,
                         accountant.calls["spend"] / updates, accountant.spent().method)
        check_rounds(pmw, UPDATE)
    case = f"|U| = {size:,}"
    return (size, Comparison.of(case, 4, "updates", times[f"synth/{DELTA}"], times["numpy"]),
            Comparison.of(case, 4, "updates", times["synth/0.0"], times["numpy"]), shares)


# -- 3. lazy rounds --------------------------------------------------------------------------


def bench_lazy(schema: Schema, codes: np.ndarray, repeats: int, seed: int):
    """Lazy PMW.answer (cached marginals) vs a NumPy lazy round (precomputed masks: NumPy's best
    case); then marginal_from_dense of the 3-way subset vs reshape + sum."""
    size, shape, rows = schema.universe_size, schema.shape, len(codes)
    cases = typical_cases(schema)
    pmw = lazy_pmw(schema, codes, seed)
    masks = [numpy_mask(shape, c).reshape(-1) for c in cases]
    trues = [true_count(codes, schema, c.query) for c in cases]
    d, rng = np.full(size, 1.0 / size), np.random.default_rng(seed + 1)
    threshold = pmw.plan.threshold_count + rng.laplace(0.0, 2.0 / pmw.plan.epsilon_test)

    def numpy_round() -> None:
        for mask, true in zip(masks, trues):
            noise = rng.laplace(0.0, 4.0 / pmw.plan.epsilon_test)
            _ = abs(true - rows * float((d * mask).sum())) + noise >= threshold

    synth = answering(pmw, [c.query for c in cases])
    times = round_robin([Timed("synth", synth), Timed("numpy", numpy_round)], repeats)
    check_rounds(pmw, LAZY)
    lazy = Comparison.of(f"|U| = {size:,}", 4, "answers", times["synth"], times["numpy"])
    masks.clear()
    subset = cases[1].query.columns
    positions, w = [schema.index(c) for c in subset], pmw.distribution()
    if not np.allclose(marginal_from_dense(w, schema, subset), numpy_marginal(w, shape, positions)):
        raise AssertionError(f"marginal over {subset}: synth and NumPy disagree")
    times = round_robin([Timed("synth", lambda: marginal_from_dense(w, schema, subset)),
                         Timed("numpy", lambda: numpy_marginal(w, shape, positions))], repeats)
    cold = Comparison.of(f"|U| = {size:,}", size, "cells", times["synth"], times["numpy"])
    return size, lazy, cold, pmw.plan.threshold


def bench_lazy_interleaved(exponents: Sequence[int], repeats: int, seed: int) -> dict[int, list[float]]:
    """Lazy rounds of every universe size sampled in turn in one run (the independence target)."""
    entries = []
    for k in exponents:
        schema = synthetic_schema(k)
        pmw = lazy_pmw(schema, synthetic_codes(schema, ROWS, seed), seed)
        entries.append(Timed(str(10**k), answering(pmw, [c.query for c in typical_cases(schema)])))
    return {int(k): t.seconds for k, t in round_robin(entries, repeats).items()}


# -- 4. accounting ---------------------------------------------------------------------------


def bench_accounting(repeats: int) -> list[tuple]:
    """Per delta: (delta, budget, spend per charge by ledger length, spent() by length and its
    composition, the build's total and slowest spend)."""
    longest, out = max(LEDGER_LENGTHS), []
    charge = lambda i: LEDGER_CHARGES[i % len(LEDGER_CHARGES)]
    for delta in (0.0, DELTA):
        planned = [Charge("ledger", charge(i)) for i in range(longest + SPENDS_PER_SAMPLE)]
        budget = LEDGER_BUDGET_FACTOR * compose(planned, delta).epsilon
        accountant, snapshots, each = Accountant(budget, delta), {}, []
        for i in range(longest):
            each.append(timed(lambda: accountant.spend(charge(i), mechanism="ledger")))
            if i + 1 in LEDGER_LENGTHS:
                snapshots[i + 1] = copy.deepcopy(accountant)
        current = {}

        def spends(n: int) -> None:
            for i in range(n, n + SPENDS_PER_SAMPLE):
                current[n].spend(charge(i), mechanism="ledger")

        def fresh(n: int) -> Callable[[], None]:  # outside the timing: a copy of the n-charge ledger
            return lambda: current.__setitem__(n, copy.deepcopy(snapshots[n]))

        spend = round_robin([Timed(str(n), lambda n=n: spends(n), fresh(n)) for n in LEDGER_LENGTHS], repeats,
                            min_sample_s=0)
        spent = round_robin([Timed(str(n), snapshots[n].spent) for n in LEDGER_LENGTHS], repeats)
        slowest = int(np.argmax(each))
        out.append((delta, budget,
                    {n: statistics.median(spend[str(n)].seconds) / SPENDS_PER_SAMPLE for n in LEDGER_LENGTHS},
                    {n: (statistics.median(spent[str(n)].seconds), snapshots[n].spent().method)
                     for n in LEDGER_LENGTHS},
                    sum(each), each[slowest], slowest + 1))
    return out


# -- 5. memory -------------------------------------------------------------------------------


def bench_memory(schema: Schema, codes: np.ndarray, seed: int) -> list[tuple[int, str, str, int]]:
    """Peak traced bytes of run_pmw(variant="theory", 3 passes of the 4 queries, alpha=0.05, L=8),
    then of distribution(); and of the same run with the KL monitor."""
    workload = Workload(schema, [c.query for c in typical_cases(schema)])
    options = {"rows": len(codes), "passes": 3, "alpha": 0.05, "updates": 8, "variant": "theory", "rng": seed}
    held: dict[str, object] = {}
    def run(**extra) -> None:
        held["run"] = run_pmw(codes, schema, workload, 1.0, DELTA, **options, **extra)

    peak_run, peak_dist = traced_peaks(run, lambda: held.__setitem__("d", held["run"].pmw.distribution()))
    used = f"{held['run'].pmw.updates} / 8"
    held.clear()
    gc.collect()
    (peak_monitor,) = traced_peaks(lambda: run(monitor=True))
    used_monitor = f"{held['run'].pmw.updates} / 8"
    held.clear()
    size = schema.universe_size
    return [(size, 'run_pmw(variant="theory")', used, peak_run),
            (size, "run_pmw, then run.pmw.distribution() (a normalized copy)", used, peak_dist),
            (size, "run_pmw(monitor=True) (the NON-PRIVATE KL monitor)", used_monitor, peak_monitor)]


# -- 6. theory variant on adult --------------------------------------------------------------


def bench_error(adult, seeds: Sequence[int]):
    """run_pmw(variant="theory") on all 3-way marginals of adult subsets, per plan, eps and seed."""
    cases = {label: Marginals.of(adult, columns, label=label) for label, columns in ADULT_SETS}

    def one(key, seed: int) -> dict[str, float]:
        case, options = cases[key[0]], dict(PLANS)[key[1]]
        run, seconds = with_time(lambda: run_pmw(case.codes, case.schema, case.workload, key[2], DELTA,
                                                 rows=case.rows, rng=seed, variant="theory", **options))
        truth = case.workload.answer({s: t * case.rows for s, t in case.truth.items()})
        return {"updates": run.pmw.updates, "halted": run.rounds.count("halted"),
                "released": case.answers_error(run.answers), "final": case.answers_error(run.final),
                "max": float(np.abs(run.answers - truth).max()) / case.rows, "seconds": seconds,
                "alpha": run.plan.alpha, "L": run.plan.updates, "failure": run.plan.failure_bound}

    keys = [(label, plan, eps) for label, _ in ADULT_SETS for plan, _ in PLANS for eps in ERROR_EPSILONS]
    grid = over_seeds(keys, seeds, one)
    for (label, plan, eps), figures in grid.items():  # plan_pmw alone, the same arguments as the runs'
        case = cases[label]
        figures["plan_s"] = timed(lambda: plan_pmw(eps, DELTA, case.rows, case.schema.universe_size,
                                                   len(case.workload), **dict(PLANS)[plan]))
    return cases, grid


# -- report ----------------------------------------------------------------------------------


def size_text(size: int) -> str:
    k = round(math.log10(size))
    return f"10^{k}" if 10**k == size else f"{size:,}"


def ns(seconds: float, cells: int) -> str:
    value = seconds / cells * 1e9
    return f"{value:.2f}" if value < 100 else f"{value:,.0f}"


def render(run, seeds, small, steps, rounds, lazy, interleaved, ledger, memory, cases, grid,
           exponents) -> str:
    call, labels, fixed, pieces = small
    full = [r for r in steps if r[1] == FULL.label]
    sizes = sorted(interleaved)
    per_answer = {n: statistics.median(interleaved[n]) / 4 for n in sizes}
    spread = max(per_answer.values()) / min(per_answer.values())
    judged = [r for r in memory if r[0] >= MEMORY_JUDGED_FROM and "monitor" not in r[1]]
    arrays = lambda r: r[3] / (8 * r[0])
    lengths = LEDGER_LENGTHS
    lines = [
        *run.header("synth PMW: benchmark results", (np, numba), f"; seed {run.seed}"),
        f"Synthetic universes: {', '.join(size_text(10**k) for k in exponents)} cells, k `Coded` columns of "
        f"{CODES} codes; {ROWS:,} rows with P(v) ~ 1/(v+1) per column. Typical queries: a 2-way cell (first, "
        "last column), a 3-way cell (first, middle, last) and 1-way ranges over half the codes of the middle "
        "or last column; a query on `c_last` selects runs of one cell in the row-major layout.",
        "",
        "## First call (JIT)",
        "",
        first_call_table([call]),
        "",
        "## 1. Update step: `SelectedCells.scale` vs NumPy",
        "",
        "synth: `sel.scale(w, factor)` with `sel = SelectedCells(schema, query)` built before the timing (as "
        "PMW keeps one per query). NumPy: a broadcast boolean mask, `sel = w[mask]; sel.sum(); w[mask] = sel "
        "* factor`. `a *= b`: two float64 arrays of |U| cells (GB/s at 24 bytes per cell). Factors alternate "
        "exp(+-0.01); checked: same sums and weights as NumPy and as the one-shot `scale_query_cells`.",
        "",
        table("\\|U\\||@query|cells selected|synth|NumPy mask|`a *= b` (GB/s)|speed ratio vs NumPy|"
              f"synth / `a *= b` time|same, best samples|synth ns / selected cell|<= {UPDATE_TARGET:g}x `a "
              "*= b`?",
              [[size_text(s), label, f"{cells:,}", fine(vn.synth_s), fine(vn.base_s),
                f"{fine(bw.base_s)} ({24 * s / bw.base_s / 1e9:.1f})", f"{vn.ratio:.1f}x",
                f"{bw.factor:.2f}x", f"{bw.best_factor:.2f}x", ns(vn.synth_s, cells),
                "yes" if bw.factor <= UPDATE_TARGET else "no"]
               for s, label, cells, vn, bw in steps]),
        "",
        "Fixed cost per call at |U| = 10^3 (one-shot `scale_query_cells` with its set-up / prebuilt "
        "`SelectedCells.scale` / the kernel alone): "
        + "; ".join(f"{label}: {fine(fixed['one-shot/' + label])} / {fine(fixed['prebuilt/' + label])} / "
                    f"{fine(fixed['kernel/' + label])}" for label in labels) + ".",
        "",
        "## 2. Update round end to end: `PMW.answer` vs a plain NumPy round",
        "",
        "synth: `PMW.answer` on the 4 typical queries with a plan whose threshold is negative (every round "
        "an update; eps_test = eps_measure = eta = 0.01 per epoch), the ledger emptied before each sample. "
        "NumPy: mask, f(D), a float Laplace measurement, D[mask] *= exp(eta sign), D /= D.sum() (no "
        "accounting).",
        "",
        table(f"\\|U\\||synth per update, delta={DELTA:g}|synth per update, delta=0|NumPy per update|"
              f"speed ratio, delta={DELTA:g}|same, best|speed ratio, delta=0|same, best",
              [[size_text(s), duration(a.synth_s / 4), duration(p.synth_s / 4), duration(a.base_s / 4),
                f"{a.ratio:.3g}x", f"{a.best_ratio:.3g}x", f"{p.ratio:.3g}x", f"{p.best_ratio:.3g}x"]
               for s, a, p, _ in rounds]),
        "",
        "Inside the accountant (one more instrumented run of about 0.1 s per size; seconds, calls per "
        "update):",
        "",
        *[f"- {size_text(s)}: " + "; ".join(
            f"delta = {d:g}: {fine(acc)} of {duration(wall)} per update ({acc / wall:.0%}; {c:g} `check` + "
            f"{sp:g} `spend`; ledger by {method} composition)"
            for d, (acc, wall, c, sp, method) in shares.items())
          for s, _, _, shares in rounds],
        "",
        "## 3. Lazy rounds, and the first evaluation of a subset",
        "",
        "synth: `PMW.answer` on the 4 typical queries, marginals cached, threshold "
        + "/".join(sorted({f"{r[3]:.2f}" for r in lazy})) + " n (every round lazy; checked). NumPy: "
        "`n * (D * mask).sum()` with precomputed masks, then the noisy comparison. First evaluation: "
        "`marginal_from_dense` of (c0, c_mid, c_last) vs reshape + sum. Interleaved: every size sampled in "
        "turn.",
        "",
        table("\\|U\\||synth per lazy round|synth rate|NumPy per lazy round|speed ratio|"
              "synth, interleaved (best)|first evaluation: synth|NumPy reshape + sum|speed ratio",
              [[size_text(s), fine(lz.synth_s / 4), rate(4, lz.synth_s, "answers"), fine(lz.base_s / 4),
                f"{lz.ratio:.3g}x", f"{fine(per_answer[s])} ({fine(min(interleaved[s]) / 4)})",
                fine(cold.synth_s), fine(cold.base_s), f"{cold.ratio:.2f}x"] for s, lz, cold, _ in lazy]),
        "",
        "Pieces of a lazy round at |U| = 10^3, each timed alone: "
        + "; ".join(f"{k} {fine(v)}" for k, v in pieces.items()) + ".",
        "",
        "## 4. Accounting cost per charge",
        "",
        f"A ledger of alternating {' / '.join(map(str, LEDGER_CHARGES))} charges built with "
        f"`Accountant.spend`; per charge: the mean of {SPENDS_PER_SAMPLE} more spends on a copy of the "
        f"ledger of that length; `spent()` with the composition it chose. Budget {LEDGER_BUDGET_FACTOR:g}x "
        "the composed total. No target.",
        "",
        table("delta|budget|" + "|".join(f"`spend`, ledger of {n:,}" for n in lengths)
              + f"|building {lengths[-1]:,} charges|slowest spend (length after)|"
              + "|".join(f"`spent()`, {n:,} (method)" for n in lengths),
              [[f"{d:g}", f"{b:.4g}", *[fine(sp[n]) for n in lengths], duration(fill),
                f"{fine(worst)} ({at:,})", *[f"{fine(st[n][0])} ({st[n][1]})" for n in lengths]]
               for d, b, sp, st, fill, worst, at in ledger]),
        "",
        "## 5. Peak memory",
        "",
        f"`tracemalloc` peak of `run_pmw(codes, schema, W, 1, {DELTA:g}, rows=n, passes=3, alpha=0.05, "
        "updates=8, "
        "variant=\"theory\")` on the 4 typical queries, then of `run.pmw.distribution()`, and with "
        "`monitor=True`, in universe-sized float64 arrays (8 |U| bytes); judged from |U| = "
        f"{size_text(MEMORY_JUDGED_FROM)}. (The practical variant, run_pmw's default, is not traced here: "
        "its fit makes it too slow at these sizes.)",
        "",
        table("\\|U\\||@what is traced|updates used / L|peak traced|peak / (8 \\|U\\|)|"
              f"<= {MEMORY_TARGET:g}?",
              [[size_text(s), what, used, f"{peak / 2**20:,.1f} MiB", f"{arrays(r):.2f}",
                ("yes" if arrays(r) <= MEMORY_TARGET else "no") if r in judged else "-"]
               for r in memory for s, what, used, peak in [r]]),
        "",
        "## 6. The theory variant on adult: plans and error against epsilon",
        "",
        f"`run_pmw(codes, schema, W, eps, {DELTA:g}, rows=n, rng=seed, variant=\"theory\")`, "
        f"W all 3-way marginals; medians over seeds {', '.join(map(str, seeds))}. Error (`_data.mean_l1`): "
        "released = the answers in the stream, final = D_final's. Max query error / n is what alpha bounds. "
        "TUNED rows fix alpha and L (a user choice, not a guarantee). Uniform distribution: "
        + ", ".join(f"{c.label} {c.uniform_error():.3f}" for c in cases.values()) + ". The practical variant "
        "(the default) is in `bench_engines`.",
        "",
        table("@columns (cells)|@plan|eps|predicted alpha|failure bound|updates used / L|halted rounds|"
              "released: error|released: max query error / n|final: error|run time|`plan_pmw` alone",
              [[f"{label} ({cases[label].schema.universe_size:,})", plan, f"{eps:g}",
                f"{f['alpha'].median:.3f}", f"{f['failure'].median:.3g}",
                f"{f['updates'].median:g} / {f['L'].median:,.0f}", f"{f['halted'].median:g}",
                f['released'].text(), f"{f['max'].median:.3f}", f['final'].text(),
                duration(f['seconds'].median),
                duration(f['plan_s'])] for (label, plan, eps), f in grid.items()]),
        "",
        "## Targets (judged on the medians)",
        "",
        f"- Full update pass within {UPDATE_TARGET:g}x of `a *= b`: "
        f"{met(all(r[4].factor <= UPDATE_TARGET for r in full))} ("
        + ", ".join(f"{size_text(r[0])} {r[4].factor:.2f}x" for r in full) + ").",
        f"- Lazy round independent of |U| (slowest / fastest interleaved median <= {LAZY_SPREAD_TARGET:g}): "
        f"{met(spread <= LAZY_SPREAD_TARGET)} ({spread:.2f}x).",
    ]
    if judged:
        worst = max(judged, key=arrays)
        lines.append(f"- Peak memory <= {MEMORY_TARGET:g} universe-sized arrays: "
                     f"{met(all(arrays(r) <= MEMORY_TARGET for r in judged))} (worst {arrays(worst):.2f} at "
                     f"{size_text(worst[0])}, {worst[1]}).")
    lines += ["- The machine is shared: figures are medians of alternating samples; ratios can move by "
              "tens of "
              "percent between runs (the best-sample columns are a cross-check).", ""]
    return "\n".join(lines)


# -- main ------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    run = session(__doc__, "universes up to 10^6, 2 error seeds and 3 repeats (a smoke run)", argv)
    exponents = tuple(range(3, 7 if run.quick else 9))
    seeds = run.seeds(5, 2)
    adult = run.adult()
    small = bench_small(run.repeats, run.seed)
    ledger = bench_accounting(run.repeats)
    steps, rounds, lazy, memory = [], [], [], []
    for k in exponents:
        schema = synthetic_schema(k)
        codes = synthetic_codes(schema, ROWS, run.seed)
        with run.stage(f"|U| = 10^{k}"):
            for bench in (lambda: memory.extend(bench_memory(schema, codes, run.seed)),
                          lambda: steps.extend(bench_update_step(schema, run.repeats)),
                          lambda: rounds.append(bench_update_round(schema, codes, run.repeats, run.seed)),
                          lambda: lazy.append(bench_lazy(schema, codes, run.repeats, run.seed))):
                bench()
                gc.collect()
    interleaved = bench_lazy_interleaved(exponents, run.repeats, run.seed)
    with run.stage("theory variant on adult"):
        cases, grid = bench_error(adult, seeds)
    report = render(run, seeds, small, steps, rounds, lazy, interleaved, ledger, memory, cases, grid,
                    exponents)
    run.publish(SECTION, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
