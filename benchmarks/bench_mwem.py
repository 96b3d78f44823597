"""Benchmark MWEM (``synth.mwem``) on adult: error and time against epsilon and rounds, the final
fit and the selection step, the speed of its steps against NumPy, and its first-call (JIT) cost.

1. error against epsilon and rounds: ``mwem(codes, schema, W, eps, rounds=T, rows=n, rng=seed)``
   with W all 3-way marginals of 7 adult columns (120,960 cells) and of 5 columns (840 cells);
   error = mean over the marginals of the L1 distance between the normalized true table and the
   model's table (the AIM paper's metric); medians over seeds, and the median run time. When T
   covers every marginal mwem skips selection (the default: rounds=50, capped at the number of
   marginals). Next to them: the uniform distribution's error (measured), reference figures quoted
   from the project brief (smartnoise-synth MWEM, AIM, independent 1-way marginals; not measured
   here), and the issue's targets (error and speed against smartnoise-synth) as ratios;
1b. the final fit (MW passes over every measurement after the rounds): none, mwem's default (stop
   at ``FIT_TOLERANCE`` x the noise's expected total residual), and fixed pass counts without the
   stop (the error curve, and its lowest point); then selection forced at T = every marginal, a T
   below the marginal count (selection and per-round passes on), and the MW passes a round at a
   small T (they matter only when selecting);
2. MWEM's steps against NumPy, on the 7-column universe and the 8-column one (+ age,
   10,281,600 cells): the multiplicative-weights update ``multiply_by_marginal`` vs NumPy
   broadcasting in place, and the marginal ``marginal_from_dense`` vs ``reshape(...).sum(axis)``;
   then whole MWEM rounds (timed inside ``mwem`` through its ``progress`` callback) vs NumPy
   rounds doing the same work, at a T below the marginal count (selection and per-round passes)
   and at T = every marginal (measurement only), and the final fit's passes vs NumPy passes;
0. first calls (JIT): the two table kernels, then a whole first ``mwem`` call on a tiny input.

Every timing figure is a median of several repeats after a warm-up, synth and NumPy sampled in
turn. Prints a markdown report and writes it to its own section of ``benchmarks/RESULTS.md``
(``_results.write_section``; other sections are kept).

Usage: ``python benchmarks/bench_mwem.py [--repeats N] [--quick] [--seed S] [--data-dir DIR]``
"""

from __future__ import annotations

import argparse
import gc
import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numba
import numpy as np
from _data import DEFAULT_DATA_DIR, load_adult, project_codes
from _harness import (  # benchmarks/ is on sys.path when run as a script
    Comparison,
    FirstCall,
    Samples,
    Timed,
    cache_status,
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
    repeats_note,
    report_header,
    round_robin,
    timed,
)

import synth.mwem as mwem_module
from synth import _kernels
from synth.mwem import (
    DEFAULT_FINAL_PASSES,
    DEFAULT_PASSES,
    DEFAULT_ROUNDS,
    DEFAULT_SELECT_SHARE,
    mwem,
)
from synth.schema import Schema
from synth.tables import marginal, marginal_from_dense, marginals_from_dense, multiply_by_marginal
from synth.workload import Workload

SECTION = "bench_mwem"

#: The 7-column set of the error grid (120,960 cells) and a smaller 5-column one (840 cells).
SEVEN = ("workclass", "education-num", "marital-status", "relationship", "race", "sex", "income>50K")
FIVE = ("marital-status", "relationship", "race", "sex", "income>50K")
ERROR_SETS = (("7 columns", SEVEN), ("5 columns", FIVE))
#: The ~10^7-cell universe of the step timings: age in front of the 7 columns (10,281,600 cells).
EIGHT = ("age",) + SEVEN

EPSILONS = (0.25, 0.5, 1.0, 2.0, 4.0)
#: 35 = every 3-way marginal of the 7 columns (what the default rounds=50 runs there).
ROUNDS = (10, 20, 35)
QUICK_EPSILONS = (1.0, 4.0)
QUICK_ROUNDS = (20, 35)
#: The epsilon of the reference figures and of the round timings.
REFERENCE_EPS = 1.0

#: Reference figures quoted from the project brief (NOT measured here): eps = 1, the 7 columns
#: above, all 3-way marginals, the same error metric. (label, error, time).
QUOTED = (
    ("smartnoise-synth MWEM", 0.083, "about 800 s"),
    ("AIM", 0.037, "200-300 s"),
    ("independent 1-way marginals", 0.44, "-"),
)
#: smartnoise-synth MWEM's quoted time in seconds (another machine), for the speed target.
QUOTED_SMARTNOISE_S = 800.0
#: The issue's targets against smartnoise-synth MWEM at eps = 1 on all 3-way marginals of a
#: 6-8 column adult subset: error at most this fraction of its error, at least this much faster.
TARGET_ERROR_FRACTION = 0.5
TARGET_SPEEDUP = 20.0

#: The final-fit section: (column set, columns, a T below its marginal count: selection on, and
#: the T of the per-round passes rows).
FIT_CASES = (("5 columns", FIVE, 6, 3), ("7 columns", SEVEN, 20, 10))
QUICK_FIT_CASES = (("5 columns", FIVE, 6, 3),)
FIT_EPSILONS = (0.25, 1.0, 4.0)
QUICK_FIT_EPSILONS = (1.0, 4.0)
#: MW passes a round in the per-round passes rows (they only run when mwem selects).
PER_ROUND_PASSES = (DEFAULT_PASSES, 10, 30)
#: Fixed final-fit pass counts, run with the stop off (FIT_TOLERANCE = 0).
FIXED_PASSES = (100, 300, 1000)
#: The error curve is evaluated every this many passes (its lowest point: "best on the curve").
CURVE_STEP = 10
#: Seeds of the final-fit section (the first of the run's seeds): each costs a 1000-pass fit.
FIT_SEEDS = 3
#: select_share of the "selection forced" rows (mwem's share when it selects).
FORCED_SHARE = DEFAULT_SELECT_SHARE

#: Column subsets of the step timings (MWEM measures 3-way marginals here), per universe: the
#: leading and the trailing columns, then kept columns spread out with a 2-code column last or
#: just after the last kept one; and every 3-way marginal in turn (the per-subset cost varies).
STEP_SUBSETS = {
    "7 columns": (
        ("workclass", "education-num", "marital-status"),
        ("race", "sex", "income>50K"),
        ("workclass", "marital-status", "income>50K"),
        ("workclass", "relationship", "sex"),
        ("income>50K", "race", "education-num"),
    ),
    "8 columns (+ age)": (
        ("age", "workclass", "education-num"),
        ("race", "sex", "income>50K"),
        ("age", "marital-status", "income>50K"),
        ("workclass", "relationship", "sex"),
    ),
}
QUICK_STEP_SUBSETS = 2  # subsets per universe with --quick
#: Universes also timed on every 3-way marginal in turn (the 8-column one: about 7 s a sample).
EVERY_MARGINAL = ("7 columns", "8 columns (+ age)")
QUICK_EVERY_MARGINAL = ("7 columns",)

#: The whole-rounds timings (7 columns, REFERENCE_EPS): a T below the 35 marginals (selection and
#: per-round passes run) and T = every marginal (the default: measurement only), with the rounds
#: reported of each (those <= T).
ROUND_RUNS = (20, 35)
ROUND_POINTS = (1, 10, 20, 35)
#: Passes of the final-fit timing (synth's fit function vs NumPy, same start and measurements).
FIT_TIMING_PASSES = 10
#: Half-width of the log of the update factors in the step timings.
FACTOR_SPREAD = 0.01


@dataclass(frozen=True)
class Settings:
    repeats: int
    seeds: tuple[int, ...]
    epsilons: tuple[float, ...]
    rounds: tuple[int, ...]
    step_subsets: dict[str, tuple[tuple[str, ...], ...]]
    every_marginal: tuple[str, ...]  # universes timed on every 3-way marginal in turn too
    fit_cases: tuple[tuple[str, tuple[str, ...], int, int], ...]
    fit_epsilons: tuple[float, ...]
    seed: int
    data_dir: Path


# -- data ------------------------------------------------------------------------------------


@dataclass
class Case:
    """One column set of adult: its schema, codes, workload and normalized true tables, and a
    cache of mwem runs (``run``) shared by the sections."""

    label: str
    schema: Schema
    codes: np.ndarray
    workload: Workload
    truth: dict[tuple[str, ...], np.ndarray]
    runs: dict[tuple, Run] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        return len(self.codes)

    @property
    def marginals(self) -> int:
        return len(self.workload.subsets)

    def error(self, distribution: np.ndarray) -> float:
        """Mean over the marginals of the L1 distance between normalized true and model tables."""
        tables = marginals_from_dense(distribution, self.schema, self.workload.subsets)
        return mean_l1(dict(zip(self.workload.subsets, tables)).__getitem__, self.truth)

    def call(self, eps: float, seed: int, **options) -> mwem_module.MWEMResult:
        return mwem(self.codes, self.schema, self.workload, eps, rows=self.rows, rng=seed, **options)

    def run(self, eps: float, seed: int, *, rounds: int = DEFAULT_ROUNDS, **options) -> Run:
        """A timed ``mwem`` run (error, seconds, parameters), computed once per setting: mwem is
        deterministic given its seed, and ``rounds`` acts only through min(rounds, marginals)."""
        key = (eps, seed, min(rounds, self.marginals), tuple(sorted(options.items())))
        if key not in self.runs:
            started = time.perf_counter()
            result = self.call(eps, seed, rounds=rounds, **options)
            seconds = time.perf_counter() - started
            self.runs[key] = Run(self.error(result.distribution), seconds, dict(result.parameters))
        return self.runs[key]


@dataclass(frozen=True)
class Run:
    error: float
    seconds: float
    parameters: dict


def mean_l1(
    model: Callable[[tuple[str, ...]], np.ndarray], truth: dict[tuple[str, ...], np.ndarray]
) -> float:
    """Mean over the marginals of the L1 distance between normalized true and model tables."""
    return float(np.mean([np.abs(model(s) - t).sum() for s, t in truth.items()]))


def make_case(adult: tuple[Schema, np.ndarray], label: str, columns: Sequence[str]) -> Case:
    schema, codes = adult
    sub, sub_codes = project_codes(schema, codes, columns)
    workload = Workload.marginals(sub, 3)
    truth = {s: marginal(sub_codes, sub, s) / len(sub_codes) for s in workload.subsets}
    return Case(label, sub, sub_codes, workload, truth)


def fit_measurements(result: mwem_module.MWEMResult) -> list[tuple]:
    """A marginal-measuring run's measurements as mwem's fit takes them: (kind, key, noisy)."""
    return [
        ("marginal", tuple(m["marginal"]), np.asarray(m["noisy"], dtype=np.float64))
        for m in result.measurements
    ]


def fit_passes(case: Case, weights: np.ndarray, total: float, measured, passes: int) -> tuple[float, float]:
    """``passes`` passes of mwem's final fit with the stop off (its own function, ``_fit``), on
    ``weights`` in place; returns the new total and the last pass's total absolute residual."""
    total, _, residual = mwem_module._fit(
        weights, total, case.schema, case.workload, measured, float(case.rows), passes, {}, 0.0
    )
    return total, residual


# -- NumPy implementations of MWEM's steps ---------------------------------------------------


class NumpySubset:
    """NumPy's way to marginalize onto, and multiply by a table over, one column subset."""

    def __init__(self, schema: Schema, columns: Sequence[str]):
        self.shape = schema.shape
        positions = [schema.index(c) for c in columns]
        in_order = sorted(positions)
        self.other = tuple(j for j in range(len(self.shape)) if j not in positions)
        self.to_subset = [in_order.index(p) for p in positions]  # schema order -> subset order
        self.to_schema = [positions.index(p) for p in in_order]  # subset order -> schema order
        self.broadcast = tuple(self.shape[j] if j in positions else 1 for j in range(len(self.shape)))

    def marginal(self, x: np.ndarray) -> np.ndarray:
        """``x.reshape(shape).sum(axis=other)``, axes put in the subset's order."""
        return x.reshape(self.shape).sum(axis=self.other).transpose(self.to_subset)

    def multiply(self, x: np.ndarray, factors: np.ndarray) -> None:
        """``x.reshape(shape) *= factors`` broadcast over the other axes, in place."""
        view = x.reshape(self.shape)
        view *= factors.transpose(self.to_schema).reshape(self.broadcast)

    def multiply_total(self, x: np.ndarray, factors: np.ndarray) -> float:
        """The update as MWEM uses it: multiply in place, then the new total."""
        self.multiply(x, factors)
        return float(x.sum())


def numpy_passes(
    x: np.ndarray,
    ops: dict[tuple[str, ...], NumpySubset],
    measured: Sequence[tuple[tuple[str, ...], np.ndarray]],
    n: float,
    passes: int,
    stop_residual: float = 0.0,
) -> int:
    """MW passes over ``measured`` on ``x`` in place, with mwem's stopping rules (a pass that
    changes nothing, or a total absolute residual at most ``stop_residual``); the passes run."""
    total = float(x.sum())
    runs = 0
    for _ in range(passes):
        runs += 1
        largest = residual = 0.0
        for key, noisy in measured:
            exponent = (noisy - ops[key].marginal(x) * (n / total)) / (2 * n)
            largest = max(largest, float(np.abs(exponent).max()))
            residual += float(np.abs(exponent).sum()) * 2 * n
            total = ops[key].multiply_total(x, np.exp(exponent))
        if largest < 1e-9 or residual <= stop_residual:
            break
    return runs


def numpy_round(
    x: np.ndarray,
    ops: dict[tuple[str, ...], NumpySubset],
    true_tables: dict[tuple[str, ...], np.ndarray],
    measured: Sequence[tuple[tuple[str, ...], np.ndarray]],
    n: float,
    select: bool,
    eps_select: float,
    eps_measure: float,
    passes: int,
    rng: np.random.Generator,
) -> int:
    """One MWEM round in NumPy, on ``x`` in place (floating-point noise, no accounting).

    With ``select`` (the library run selected: its ``epsilon_select`` > 0): scores every marginal
    not among ``measured[:-1]`` (L1 error of its table), picks one by the Gumbel-max exponential
    mechanism, draws Laplace noise for it (the work of a measurement; the round then uses
    ``measured[-1]``, the library run's measurement, so both do the same passes), then ``passes``
    MW passes over ``measured`` with mwem's stopping rule. Without: as mwem when its rounds cover
    every marginal, takes the next marginal in workload order, draws its noise, and runs no
    passes. Returns the passes run.
    """
    candidates = list(true_tables)
    if select:
        total = float(x.sum())
        chosen = {key for key, _ in measured[:-1]}
        scores = np.array(
            [
                -np.inf
                if s in chosen
                else float(np.abs(true_tables[s] - ops[s].marginal(x) * (n / total)).sum())
                for s in candidates
            ]
        )
        pick = int(np.argmax(scores * (eps_select / 2) + rng.gumbel(size=len(scores))))
    else:
        pick = len(measured) - 1
        if candidates[pick] != measured[-1][0]:
            raise AssertionError(
                f"round {len(measured)}: mwem measured {measured[-1][0]}, not {candidates[pick]}"
            )
    key = candidates[pick]
    _ = true_tables[key] + rng.laplace(0.0, 1.0 / eps_measure, true_tables[key].shape)
    return numpy_passes(x, ops, measured, n, passes) if select else 0


# -- 0. first calls --------------------------------------------------------------------------


@dataclass(frozen=True)
class FirstMWEM:
    """A whole first mwem call on a tiny input, the same call again, and what the first loaded."""

    first_s: float
    second_s: float
    loaded: list[tuple[str, str]]  # kernel name, cache status
    cells: int
    marginals: int
    rounds: int
    first_kernel: bool  # multiply_by_marginal was the process's first synth kernel call


def compiled_kernels() -> dict[str, object]:
    """synth's Numba kernels (dispatchers) by name."""
    return {name: obj for name in dir(_kernels) if hasattr(obj := getattr(_kernels, name), "py_func")}


def bench_first_calls(schema: Schema, codes: np.ndarray, seed: int) -> tuple[list[FirstCall], FirstMWEM]:
    """First calls of the two table kernels through the library, then of a whole mwem call.

    Must run before any other use of the kernels (the data are read before: ``read`` may load
    kernels of its own).
    """
    sub, sub_codes = project_codes(schema, codes, FIVE)  # 7 x 6 x 5 x 2 x 2 = 840 cells
    columns = ("marital-status", "sex")
    x = np.full(sub.universe_size, 1.0 / sub.universe_size)
    factors = np.exp(np.random.default_rng(seed).uniform(-FACTOR_SPREAD, FACTOR_SPREAD, (7, 2)))
    earlier = [name for name, k in compiled_kernels().items() if k.signatures]
    first_multiply = timed(lambda: multiply_by_marginal(x, sub, columns, factors))
    first_marginal = timed(lambda: marginal_from_dense(x, sub, columns))
    # The kernels' arguments for the cold compiles: axes merged so neighbours differ in keep.
    dims = np.array([7, 6 * 5, 2, 2], dtype=np.int64)
    keep = np.array([True, False, True, False])
    out_strides = np.array([2, 0, 1, 0], dtype=np.int64)
    calls = [
        first_call(
            "multiply_by_marginal (MW update, float64)",
            first_multiply,
            _kernels.multiply_by_marginal,
            (x.copy(), dims, keep, out_strides, factors.reshape(-1).copy()),
        ),
        first_call(
            "marginalize (marginal_from_dense, float64)",
            first_marginal,
            _kernels.marginalize,
            (x, dims, keep, out_strides, np.zeros(14)),
        ),
    ]
    kernels = compiled_kernels()
    before = {name for name, k in kernels.items() if k.signatures}
    workload = Workload.marginals(sub, 3)
    rounds = 3

    def run() -> object:
        return mwem(sub_codes, sub, workload, 1.0, rounds=rounds, rows=len(sub_codes), rng=seed)

    first = timed(run)
    second = timed(run)
    loaded = [
        (name, cache_status(k)) for name, k in sorted(kernels.items()) if k.signatures and name not in before
    ]
    return calls, FirstMWEM(
        first, second, loaded, sub.universe_size, len(workload.subsets), rounds, not earlier
    )


# -- 1. error against epsilon and rounds -----------------------------------------------------


@dataclass(frozen=True)
class ErrorCell:
    """One (column set, eps, rounds) setting: medians over seeds."""

    columns: str
    eps: float
    rounds: int  # requested
    rounds_run: int
    selection: bool  # mwem selected (epsilon_select > 0): rounds_run below the marginal count
    error: float  # median over seeds
    error_min: float
    error_max: float
    seconds: float  # median run time
    seconds_min: float
    fit_passes: float  # median final-fit passes run
    fit_capped: int  # seeds whose fit stopped at final_passes (the stop did not fire)
    seeds: int


@dataclass(frozen=True)
class ColumnSet:
    label: str
    cells: int
    marginals: int
    rows: int
    uniform: float  # error of the uniform distribution
    independent: float  # error of the product of the exact (non-private) 1-way marginals


def bench_error(cases: Sequence[Case], settings: Settings) -> tuple[list[ColumnSet], list[ErrorCell]]:
    """mwem on all 3-way marginals of each column set, per eps, rounds and seed."""
    sets, cells = [], []
    for case in cases:
        ones = {c: marginal(case.codes, case.schema, (c,)) / case.rows for c in case.schema.names}

        def product(s: tuple[str, ...]) -> np.ndarray:
            table = np.ones(())
            for c in s:
                table = np.multiply.outer(table, ones[c])
            return table

        truth = case.truth
        uniform = mean_l1(lambda s: np.full(truth[s].shape, 1.0 / truth[s].size), truth)
        sets.append(
            ColumnSet(
                case.label,
                case.schema.universe_size,
                case.marginals,
                case.rows,
                uniform,
                mean_l1(product, truth),
            )
        )
        # Requested rounds beyond the number of marginals run as many rounds as there are marginals.
        runs: dict[int, int] = {}
        for t in settings.rounds:
            runs.setdefault(min(t, case.marginals), t)
        results: dict[tuple[float, int], list[Run]] = {}
        began = time.perf_counter()
        for seed in settings.seeds:  # seeds outermost: load changes hit every setting alike
            for eps in settings.epsilons:
                for rounds_run, rounds in runs.items():
                    run = case.run(eps, seed, rounds=rounds)
                    if run.parameters["rounds"] != rounds_run:
                        raise AssertionError(
                            f"mwem ran {run.parameters['rounds']} rounds, expected {rounds_run}"
                        )
                    if (run.parameters["epsilon_select"] > 0) != (rounds_run < case.marginals):
                        raise AssertionError(
                            f"mwem at T={rounds_run} selected: {run.parameters['epsilon_select']}"
                        )
                    results.setdefault((eps, rounds), []).append(run)
        print(f"error grid, {case.label}: {time.perf_counter() - began:.0f} s", file=sys.stderr)
        for (eps, rounds), values in results.items():
            errors = [r.error for r in values]
            times = [r.seconds for r in values]
            passes = [r.parameters["final_passes_run"] for r in values]
            cells.append(
                ErrorCell(
                    case.label,
                    eps,
                    rounds,
                    min(rounds, case.marginals),
                    values[0].parameters["epsilon_select"] > 0,
                    statistics.median(errors),
                    min(errors),
                    max(errors),
                    statistics.median(times),
                    min(times),
                    statistics.median(passes),
                    sum(r.parameters["final_passes_run"] >= r.parameters["final_passes"] for r in values),
                    len(values),
                )
            )
    return sets, cells


# -- 1b. the final fit and the selection step ------------------------------------------------


@dataclass(frozen=True)
class FitRow:
    """One final-fit or selection setting on one column set at one eps: medians over seeds."""

    columns: str
    eps: float
    kind: str  # "none", "fixed", "default", "best", "forced", "select", "passes"
    setting: str  # the row's description
    rounds: int
    selection: bool
    passes: float  # median final-fit passes (run, or fixed)
    passes_min: int
    passes_max: int
    error: float
    error_min: float
    error_max: float
    seconds: float  # median time of the run (curve rows: rounds + the passes up to that point)
    residual: float  # median total absolute residual / the noise's expected total (nan: n/a)
    seeds: int
    capped: int = 0  # default rows: seeds whose fit ran final_passes passes (the stop did not fire)
    round_passes: int = 0  # "passes" rows: MW passes a round


@dataclass(frozen=True)
class Curve:
    """One seed's final fit, pass by pass, with the stop off: from mwem(final_passes=0)."""

    rounds_s: float  # mwem(final_passes=0): the rounds alone
    errors: dict[int, float]  # passes -> error, every CURVE_STEP passes and at FIXED_PASSES
    seconds: dict[int, float]  # passes -> cumulative fit seconds (evaluations excluded)
    residuals: dict[int, float]  # passes -> the pass's residual / expected noise (every pass)
    stop_pass: int | None  # the first pass whose residual is at most mwem's target (None: none)


def error_curve(case: Case, eps: float, seed: int, check_at: int | None) -> Curve:
    """The final fit of ``mwem(case, eps, seed)`` (defaults) continued pass by pass with mwem's own
    fit function, the stop off, up to max(FIXED_PASSES); the error every CURVE_STEP passes.

    Continuing the fit of ``mwem(..., final_passes=0)`` one pass at a time is the same
    computation as ``mwem(..., final_passes=k)`` with FIT_TOLERANCE = 0 for every k; with
    ``check_at`` that is checked: such a run (FIT_TOLERANCE patched to 0) must give the curve's
    distribution after ``check_at`` passes.
    """
    started = time.perf_counter()
    start = case.call(eps, seed, final_passes=0)
    rounds_s = time.perf_counter() - started
    measured = fit_measurements(start)
    target = start.parameters["fit_target_residual"]
    expected = target / mwem_module.FIT_TOLERANCE
    weights = start.distribution.copy()
    total = float(weights.sum())
    points = set(range(CURVE_STEP, max(FIXED_PASSES) + 1, CURVE_STEP)) | set(FIXED_PASSES)
    errors, seconds, residuals = {0: case.error(start.distribution)}, {0: 0.0}, {}
    stop_pass, fit_s, checked = None, 0.0, None
    for k in range(1, max(FIXED_PASSES) + 1):
        began = time.perf_counter()
        total, residual = fit_passes(case, weights, total, measured, 1)
        fit_s += time.perf_counter() - began
        if stop_pass is None and residual <= target:
            stop_pass = k
        residuals[k] = residual / expected
        if k in points:
            errors[k] = case.error(weights / total)
            seconds[k] = fit_s
        if k == check_at:
            checked = weights / total
    if check_at is not None:
        saved = mwem_module.FIT_TOLERANCE
        mwem_module.FIT_TOLERANCE = 0.0
        try:
            fixed = case.call(eps, seed, final_passes=check_at)
        finally:
            mwem_module.FIT_TOLERANCE = saved
        if fixed.parameters["final_passes_run"] != check_at or not np.allclose(
            fixed.distribution, checked, rtol=1e-9, atol=0
        ):
            raise AssertionError(
                f"{case.label}, eps {eps}: the curve differs from mwem(final_passes={check_at})"
            )
    return Curve(rounds_s, errors, seconds, residuals, stop_pass)


def bench_fit(cases: dict[str, Case], settings: Settings) -> tuple[list[FitRow], list[str]]:
    """Per case and eps, over the first FIT_SEEDS seeds: no final fit, fixed pass counts (the
    curve), mwem's default stop and the curve's lowest point; then selection forced at T = every
    marginal, a T below the marginal count, and per-round passes at a small T. Also returns the
    mismatches between the default run's stop and the curve's (expected: none)."""
    seeds = settings.seeds[:FIT_SEEDS]
    rows: list[FitRow] = []
    mismatches: list[str] = []
    for label, _, select_rounds, passes_rounds in settings.fit_cases:
        case = cases[label]
        began = time.perf_counter()
        for eps in settings.fit_epsilons:
            curves, defaults, forced, selected = [], [], [], []
            per_round: dict[int, list[Run]] = {p: [] for p in PER_ROUND_PASSES}
            for i, seed in enumerate(seeds):
                curve = error_curve(
                    case, eps, seed, FIXED_PASSES[0] if i == 0 and eps == settings.fit_epsilons[0] else None
                )
                default = case.run(eps, seed)
                expected = min(curve.stop_pass or math.inf, default.parameters["final_passes"])
                if default.parameters["final_passes_run"] != expected:
                    mismatches.append(
                        f"{label}, eps {fmt_eps(eps)}, seed {seed}: mwem's fit ran "
                        f"{default.parameters['final_passes_run']} passes, the curve reaches the target at "
                        f"{curve.stop_pass}"
                    )
                curves.append(curve)
                defaults.append(default)
                forced.append(case.run(eps, seed, select_share=FORCED_SHARE))
                selected.append(case.run(eps, seed, rounds=select_rounds))
                for passes in PER_ROUND_PASSES:
                    per_round[passes].append(case.run(eps, seed, rounds=passes_rounds, passes=passes))
            rows += fit_rows(case, eps, curves, defaults, forced, selected, select_rounds)
            rows += passes_rows(case, eps, per_round, passes_rounds)
        print(f"final fit, {label}: {time.perf_counter() - began:.0f} s", file=sys.stderr)
    return rows, mismatches


def fit_rows(case, eps, curves, defaults, forced, selected, select_rounds) -> list[FitRow]:
    """The rows of one case and eps from its seeds' curves and runs."""

    def row(kind, setting, rounds, selection, passes, errors, seconds, residuals, capped=0) -> FitRow:
        finite = [r for r in residuals if not math.isnan(r)]
        return FitRow(
            case.label,
            eps,
            kind,
            setting,
            rounds,
            selection,
            statistics.median(passes),
            min(passes),
            max(passes),
            statistics.median(errors),
            min(errors),
            max(errors),
            statistics.median(seconds),
            statistics.median(finite) if finite else math.nan,
            len(errors),
            capped,
        )

    every = case.marginals
    out = [
        row(
            "none",
            "final_passes=0 (no final fit)",
            every,
            False,
            [0] * len(curves),
            [c.errors[0] for c in curves],
            [c.rounds_s for c in curves],
            [math.nan],
        ),
    ]
    for k in FIXED_PASSES:
        out.append(
            row(
                "fixed",
                f"final_passes={k}, stop off (FIT_TOLERANCE=0)",
                every,
                False,
                [k] * len(curves),
                [c.errors[k] for c in curves],
                [c.rounds_s + c.seconds[k] for c in curves],
                [c.residuals[k] for c in curves],
            )
        )
    out.append(
        row(
            "default",
            f"default: stop at {mwem_module.FIT_TOLERANCE:g} x expected noise, "
            f"final_passes={DEFAULT_FINAL_PASSES}",
            every,
            False,
            [d.parameters["final_passes_run"] for d in defaults],
            [d.error for d in defaults],
            [d.seconds for d in defaults],
            [residual_at(c, d.parameters["final_passes_run"]) for c, d in zip(curves, defaults)],
            sum(d.parameters["final_passes_run"] >= d.parameters["final_passes"] for d in defaults),
        )
    )
    best = [min((e, k) for k, e in c.errors.items() if k % CURVE_STEP == 0) for c in curves]
    out.append(
        row(
            "best",
            f"lowest point of the curve (every {CURVE_STEP} passes; chosen with the true data)",
            every,
            False,
            [k for _, k in best],
            [e for e, _ in best],
            [c.rounds_s + c.seconds[k] for c, (_, k) in zip(curves, best)],
            [c.residuals.get(k, math.nan) for c, (_, k) in zip(curves, best)],
        )
    )
    out.append(
        row(
            "forced",
            f"selection forced: select_share={FORCED_SHARE:g}, T={every}",
            every,
            True,
            [r.parameters["final_passes_run"] for r in forced],
            [r.error for r in forced],
            [r.seconds for r in forced],
            [math.nan],
            sum(r.parameters["final_passes_run"] >= r.parameters["final_passes"] for r in forced),
        )
    )
    out.append(
        row(
            "select",
            f"T={select_rounds} (selection on, share {selected[0].parameters['select_share']:g}; "
            f"{selected[0].parameters['passes']} passes a round)",
            select_rounds,
            True,
            [r.parameters["final_passes_run"] for r in selected],
            [r.error for r in selected],
            [r.seconds for r in selected],
            [math.nan],
            sum(r.parameters["final_passes_run"] >= r.parameters["final_passes"] for r in selected),
        )
    )
    return out


def passes_rows(case: Case, eps: float, per_round: dict[int, list[Run]], rounds: int) -> list[FitRow]:
    """Rows of mwem at ``rounds`` (selection on) per MW passes a round, default fit after."""
    out = []
    for passes, runs in per_round.items():
        errors = [r.error for r in runs]
        fit = [r.parameters["final_passes_run"] for r in runs]
        out.append(
            FitRow(
                case.label,
                eps,
                "passes",
                f"T={rounds}, passes={passes} a round" + (" (default)" if passes == DEFAULT_PASSES else ""),
                rounds,
                True,
                statistics.median(fit),
                min(fit),
                max(fit),
                statistics.median(errors),
                min(errors),
                max(errors),
                statistics.median([r.seconds for r in runs]),
                math.nan,
                len(runs),
                sum(r.parameters["final_passes_run"] >= r.parameters["final_passes"] for r in runs),
                passes,
            )
        )
    return out


def residual_at(curve: Curve, passes: int) -> float:
    """The curve's residual ratio after ``passes`` passes, where the curve recorded it."""
    return curve.residuals.get(passes, math.nan)


# -- 2. steps --------------------------------------------------------------------------------


@dataclass(frozen=True)
class StepRow:
    universe: str
    cells: int
    case: str  # the column subset, or every 3-way marginal in turn
    table_cells: str
    multiply: Comparison  # multiply_by_marginal vs NumPy multiply + x.sum()
    multiply_only_s: float  # NumPy multiply alone (median)
    marginal: Comparison  # marginal_from_dense vs reshape + sum
    aggregate: bool = False  # a row of every 3-way marginal in turn (seconds per marginal)


def alternating(step: Callable[[bool], object]) -> Callable[[], object]:
    """A call of ``step(False)``, then ``step(True)`` (inverse factors), and so on, so the weights
    stay bounded however many calls a sample makes."""
    state = [True]

    def call() -> object:
        state[0] = not state[0]
        return step(state[0])

    return call


def bench_steps(schema: Schema, codes: np.ndarray, settings: Settings) -> list[StepRow]:
    """multiply_by_marginal and marginal_from_dense vs NumPy on each universe: on a few column
    subsets, and on every 3-way marginal in turn (what MWEM's rounds go through)."""
    rng = np.random.default_rng(settings.seed)
    rows = []
    for label, columns in (("7 columns", SEVEN), ("8 columns (+ age)", EIGHT)):
        rows += bench_steps_on(schema.select(list(columns)), label, settings, rng)
        gc.collect()
    return rows


def bench_steps_on(sub: Schema, label: str, settings: Settings, rng: np.random.Generator) -> list[StepRow]:
    """The step timings on one universe (its arrays are freed on return)."""
    rows = []
    size = sub.universe_size
    x_synth = rng.random(size)
    x_synth /= x_synth.sum()
    x_numpy, x_only, x_marg = x_synth.copy(), x_synth.copy(), x_synth.copy()
    subsets = settings.step_subsets[label]
    every = label in settings.every_marginal
    all_subsets = Workload.marginals(sub, 3).subsets if every else []
    ops, factors = {}, {}
    for subset in dict.fromkeys([*subsets, *all_subsets]):
        ops[subset] = o = NumpySubset(sub, subset)
        f = np.exp(rng.uniform(-FACTOR_SPREAD, FACTOR_SPREAD, [sub[c].size for c in subset]))
        factors[subset] = (f, 1.0 / f)
        a = multiply_by_marginal(x_synth, sub, subset, f)  # checks: same weights, totals, tables
        b = o.multiply_total(x_numpy, f)
        o.multiply(x_only, f)
        if not (
            np.array_equal(x_synth, x_numpy)
            and np.array_equal(x_synth, x_only)
            and math.isclose(a, b, rel_tol=1e-9)
        ):
            raise AssertionError(f"multiply over {subset} on {label}: synth and NumPy disagree")
        if not np.allclose(marginal_from_dense(x_marg, sub, subset), o.marginal(x_marg), rtol=1e-9, atol=0):
            raise AssertionError(f"marginal over {subset} on {label}: synth and NumPy disagree")

    def steps(group: Sequence[tuple[str, ...]]) -> dict[str, Callable[[], object]]:
        def mul_synth(inverse: bool) -> None:
            for s in group:
                multiply_by_marginal(x_synth, sub, s, factors[s][inverse])

        def mul_numpy(inverse: bool) -> None:
            for s in group:
                ops[s].multiply_total(x_numpy, factors[s][inverse])

        def mul_only(inverse: bool) -> None:
            for s in group:
                ops[s].multiply(x_only, factors[s][inverse])

        def marg_synth() -> None:
            for s in group:
                marginal_from_dense(x_marg, sub, s)

        def marg_numpy() -> None:
            for s in group:
                ops[s].marginal(x_marg)

        return {
            "mul-synth": alternating(mul_synth),
            "mul-numpy": alternating(mul_numpy),
            "mul-only": alternating(mul_only),
            "marg-synth": marg_synth,
            "marg-numpy": marg_numpy,
        }

    cases = [(", ".join(s), [s], f"{math.prod(sub[c].size for c in s):,}", False) for s in subsets]
    if every:
        cases.append(
            (f"all {len(all_subsets)} 3-way marginals in turn (time per marginal)", all_subsets, "all", True)
        )
    entries = [
        Timed(f"{kind}/{case}", fn) for case, group, _, _ in cases for kind, fn in steps(group).items()
    ]
    began = time.perf_counter()
    times = round_robin(entries, settings.repeats)
    print(f"steps, {label}: {time.perf_counter() - began:.0f} s", file=sys.stderr)
    for case, group, table_cells, aggregate in cases:
        per = {
            kind: Samples(
                [t / len(group) for t in times[f"{kind}/{case}"].seconds], times[f"{kind}/{case}"].cpu
            )
            for kind in ("mul-synth", "mul-numpy", "mul-only", "marg-synth", "marg-numpy")
        }
        rows.append(
            StepRow(
                label,
                size,
                case,
                table_cells,
                Comparison.of(case, size, "cells", per["mul-synth"], per["mul-numpy"]),
                statistics.median(per["mul-only"].seconds),
                Comparison.of(case, size, "cells", per["marg-synth"], per["marg-numpy"]),
                aggregate,
            )
        )
    return rows


# -- 3. whole rounds -------------------------------------------------------------------------


@dataclass(frozen=True)
class RoundRow:
    round: int  # t: the round's MW passes (if any) run over t measurements
    synth_s: float  # median duration of round t inside mwem
    synth_min_s: float
    numpy_s: float
    numpy_min_s: float
    synth_passes: int
    numpy_passes: int
    candidates: int  # marginals scored (0: no selection)


@dataclass(frozen=True)
class RoundRun:
    rows: list[RoundRow]
    rounds: int
    selection: bool  # the library run selected (epsilon_select > 0)
    run_s: float  # median whole mwem run (eps = REFERENCE_EPS, `rounds` rounds), final fit included
    rounds_s: float  # median time of all the rounds (to the last progress call)
    fit_s: float  # median time of the final fit (from the last round's progress call to the return)
    fit_passes_run: int  # final-fit passes mwem ran
    fit: Comparison  # FIT_TIMING_PASSES passes of mwem's fit function vs NumPy, same start
    fit_numpy_passes: int
    cells: int
    marginals: int
    samples: int


def count_passes(case: Case, rounds: int, seed: int) -> list[int]:
    """MW passes per round of one mwem run, counted by wrapping the module's update function
    (an untimed run; ``mwem`` is deterministic given its seed)."""
    original = mwem_module.multiply_by_marginal
    count = [0]
    marks: list[int] = []

    def counted(*args, **kwargs):
        count[0] += 1
        return original(*args, **kwargs)

    mwem_module.multiply_by_marginal = counted
    try:
        case.call(
            REFERENCE_EPS,
            seed,
            rounds=rounds,
            progress=lambda t, _: marks.append(count[0]) if t <= rounds else None,  # rounds, not the fit
        )
    finally:
        mwem_module.multiply_by_marginal = original
    calls = np.diff([0, *marks])
    return [int(c) // (t + 1) for t, c in enumerate(calls)]  # round t+1 updates t+1 marginals per pass


def bench_rounds(case: Case, rounds: int, settings: Settings) -> RoundRun:
    """Rounds of mwem (eps = 1) timed through ``progress`` vs NumPy rounds doing the same work,
    and its final fit's passes vs NumPy passes from the same start."""
    rounds = min(rounds, case.marginals)
    points = [t for t in ROUND_POINTS if t <= rounds]
    seed = settings.seed
    n = float(case.rows)
    start = case.call(REFERENCE_EPS, seed, rounds=rounds, final_passes=0)  # the state before the fit
    measured = [(key, noisy) for _, key, noisy in fit_measurements(start)]
    params = start.parameters
    select = params["epsilon_select"] > 0
    synth_passes = count_passes(case, rounds, seed)
    true_tables = {s: marginal(case.codes, case.schema, s).astype(np.float64) for s in case.workload.subsets}
    ops = {s: NumpySubset(case.schema, s) for s in case.workload.subsets}

    durations: list[list[float]] = []  # per synth run: seconds of each round
    whole: list[tuple[float, float, float]] = []  # per synth run: whole, rounds, fit
    results: list[mwem_module.MWEMResult] = []

    def synth_run() -> None:
        # progress(t, ...) after each round t <= rounds; mwem also reports the end of its final fit
        # (t = rounds + 1), which is not a round: the fit is timed from the last round to the return.
        stamps = [time.perf_counter()]

        def stamp(t: int, _: float) -> None:
            if t <= rounds:
                stamps.append(time.perf_counter())

        result = case.call(REFERENCE_EPS, seed, rounds=rounds, progress=stamp)
        end = time.perf_counter()
        if len(stamps) != rounds + 1:
            raise AssertionError(f"mwem reported {len(stamps) - 1} rounds, expected {rounds}")
        durations.append(list(np.diff(stamps)))
        whole.append((end - stamps[0], stamps[-1] - stamps[0], end - stamps[-1]))
        results.append(result)

    x = np.empty(case.schema.universe_size)
    numpy_passes_run: dict[str, int] = {}
    np_rng = np.random.default_rng(seed)

    def reset() -> None:  # outside the timing: each NumPy round starts from the uniform distribution
        x.fill(1.0 / x.size)

    def numpy_at(t: int) -> Callable[[], None]:
        def call() -> None:
            numpy_passes_run[f"round {t}"] = numpy_round(
                x,
                ops,
                true_tables,
                measured[:t],
                n,
                select,
                params["epsilon_select"],
                params["epsilon_measure"],
                params["passes"],
                np_rng,
            )

        return call

    # The final fit from the same start: mwem's own fit function vs NumPy, FIT_TIMING_PASSES passes.
    fit_measured = fit_measurements(start)
    w_synth, w_numpy = np.empty_like(start.distribution), np.empty_like(start.distribution)

    def fit_synth() -> None:
        fit_passes(case, w_synth, float(w_synth.sum()), fit_measured, FIT_TIMING_PASSES)

    def fit_numpy() -> None:
        numpy_passes_run["fit"] = numpy_passes(w_numpy, ops, measured, n, FIT_TIMING_PASSES)

    entries = [Timed("synth", synth_run, None)]
    entries += [Timed(f"numpy/{t}", numpy_at(t), reset) for t in points]
    entries += [
        Timed("fit-synth", fit_synth, lambda: np.copyto(w_synth, start.distribution)),
        Timed("fit-numpy", fit_numpy, lambda: np.copyto(w_numpy, start.distribution)),
    ]
    began = time.perf_counter()
    times: dict[str, Samples] = round_robin(entries, settings.repeats, min_sample_s=0)
    print(f"rounds, T={rounds}: {time.perf_counter() - began:.0f} s", file=sys.stderr)
    if not np.allclose(w_synth, w_numpy, rtol=1e-9, atol=0):
        raise AssertionError(f"T={rounds}: the final fit's passes differ between synth and NumPy")
    timed_runs = durations[1:]  # the first run was round_robin's warm-up
    rows = []
    for t in points:
        synth = [d[t - 1] for d in timed_runs]
        base = times[f"numpy/{t}"].seconds
        rows.append(
            RoundRow(
                t,
                statistics.median(synth),
                min(synth),
                statistics.median(base),
                min(base),
                synth_passes[t - 1],
                numpy_passes_run[f"round {t}"],
                case.marginals - (t - 1) if select else 0,
            )
        )
    return RoundRun(
        rows,
        rounds,
        select,
        statistics.median(w for w, _, _ in whole[1:]),
        statistics.median(r for _, r, _ in whole[1:]),
        statistics.median(f for _, _, f in whole[1:]),
        results[-1].parameters["final_passes_run"],
        Comparison.of("fit", FIT_TIMING_PASSES, "passes", times["fit-synth"], times["fit-numpy"]),
        numpy_passes_run["fit"],
        case.schema.universe_size,
        case.marginals,
        len(timed_runs),
    )


# -- report ----------------------------------------------------------------------------------


def fmt_eps(eps: float) -> str:
    return f"{eps:g}"


def seconds_text(s: float) -> str:
    return f"{s:.2f} s" if s < 10 else f"{s:.1f} s"


def passes_text(passes: float) -> str:
    return f"{passes:g}"


def error_tables(sets: Sequence[ColumnSet], cells: Sequence[ErrorCell]) -> list[str]:
    """Per column set: error, time and final-fit passes per eps (rows) and rounds (columns)."""
    out = []
    for cs in sets:
        mine = [c for c in cells if c.columns == cs.label]
        rounds = sorted({c.rounds for c in mine})
        eps_values = sorted({c.eps for c in mine})
        by = {(c.eps, c.rounds): c for c in mine}

        def head(t: int) -> str:
            cell = by[(eps_values[0], t)]
            if cell.rounds_run == cs.marginals:
                every = "every marginal, no selection"
                return (
                    f"T={t} ({every})" if cell.rounds_run == t else f"T={t} (runs {cell.rounds_run}: {every})"
                )
            return f"T={t}"

        columns = [("eps", "---:")]
        columns += [(f"error, {head(t)}", "---:") for t in rounds]
        columns += [(f"time, {head(t)}", "---:") for t in rounds]
        columns += [(f"fit passes, {head(t)}", "---:") for t in rounds]
        columns += [("best T (error)", "---:")]
        table_rows = []
        for eps in eps_values:
            best = min(rounds, key=lambda t: by[(eps, t)].error)
            row = [fmt_eps(eps)]
            row += [
                (
                    f"**{by[(eps, t)].error:.3f}**"
                    if t == best and len(rounds) > 1
                    else f"{by[(eps, t)].error:.3f}"
                )
                + f" ({by[(eps, t)].error_min:.3f}-{by[(eps, t)].error_max:.3f})"
                for t in rounds
            ]
            row += [seconds_text(by[(eps, t)].seconds) for t in rounds]
            row += [
                passes_text(by[(eps, t)].fit_passes)
                + (
                    f" ({by[(eps, t)].fit_capped}/{by[(eps, t)].seeds} capped)"
                    if by[(eps, t)].fit_capped
                    else ""
                )
                for t in rounds
            ]
            row += [str(best)]
            table_rows.append(row)
        out += [
            f"### {cs.label}: {cs.cells:,} cells, {cs.marginals} 3-way marginals, n = {cs.rows:,}",
            "",
            markdown_table(columns, table_rows),
            "",
            (
                f"Measured here: the uniform distribution {cs.uniform:.3f}; the product of the exact "
                f"(non-private) 1-way marginals {cs.independent:.3f} (a floor for any model of independent "
                "columns)."
            ),
            "",
        ]
    return out


@dataclass(frozen=True)
class Headline:
    """synth's figures at REFERENCE_EPS on the 7 columns: the default setting and the lowest
    median error of every setting tried (grid and final-fit section)."""

    default_label: str
    default_error: float
    default_s: float
    default_seeds: int
    best_label: str
    best_error: float
    best_s: float
    best_seeds: int


def headline(sets, cells, fits) -> Headline | None:
    seven = sets[0]
    grid = [c for c in cells if c.columns == seven.label and c.eps == REFERENCE_EPS]
    default = [c for c in grid if c.rounds_run == min(DEFAULT_ROUNDS, seven.marginals)]
    if not default:
        return None
    d = default[0]
    tried = [
        (c.error, f"T = {c.rounds}" + (" (the default)" if c is d else ""), c.seconds, c.seeds) for c in grid
    ]
    tried += [
        (r.error, r.setting, r.seconds, r.seeds)
        for r in fits
        if r.columns == seven.label
        and r.eps == REFERENCE_EPS
        and r.kind in ("fixed", "forced", "select", "passes")
    ]
    best = min(tried, key=lambda t: t[0])
    return Headline(
        f"defaults (rounds={DEFAULT_ROUNDS} -> {d.rounds_run}: every marginal, no selection; final fit to "
        f"the noise level, median {passes_text(d.fit_passes)} passes)",
        d.error,
        d.seconds,
        d.seeds,
        best[1],
        best[0],
        best[2],
        best[3],
    )


def reference_table(sets: Sequence[ColumnSet], head: Headline | None) -> str:
    seven = sets[0]
    rows = []
    if head is not None:
        rows.append(
            [
                f"synth `mwem`, {head.default_label}",
                f"{head.default_error:.3f}",
                seconds_text(head.default_s),
                f"measured here (median of {head.default_seeds} seeds)",
            ]
        )
        rows.append(
            [
                f"synth `mwem`, lowest median error of the settings tried here: {head.best_label}",
                f"{head.best_error:.3f}",
                seconds_text(head.best_s),
                (
                    f"measured here (median of {head.best_seeds} seeds; chosen by looking at the true error, "
                    "so not a private choice)"
                ),
            ]
        )
    rows += [
        [label, f"{error:.3f}", t, "quoted from the project brief, **not measured here**"]
        for label, error, t in QUOTED
    ]
    rows.append(["uniform distribution", f"{seven.uniform:.3f}", "-", "measured here"])
    rows.append(
        ["product of exact 1-way marginals (non-private)", f"{seven.independent:.3f}", "-", "measured here"]
    )
    return markdown_table([("method", "---"), ("error", "---:"), ("time", "---:"), ("source", "---")], rows)


def targets_table(head: Headline | None) -> str:
    if head is None:
        return "(no run at the reference setting: the targets are not assessed)"
    quoted = {label: error for label, error, _ in QUOTED}
    base = quoted["smartnoise-synth MWEM"]
    rows = []
    for label, error, seconds in (
        ("defaults", head.default_error, head.default_s),
        (f"best tried: {head.best_label}", head.best_error, head.best_s),
    ):
        rows.append(
            [
                label,
                f"{error / base:.2f}x ({error:.3f} / {base})",
                met(error <= TARGET_ERROR_FRACTION * base),
                (
                    f"{QUOTED_SMARTNOISE_S / seconds:.0f}x ({QUOTED_SMARTNOISE_S:.0f} s / "
                    f"{seconds_text(seconds)})"
                ),
                met(QUOTED_SMARTNOISE_S / seconds >= TARGET_SPEEDUP),
            ]
        )
    return markdown_table(
        [
            ("synth `mwem`", "---"),
            (f"error / smartnoise-synth's (target <= {TARGET_ERROR_FRACTION:g})", "---:"),
            ("error target", "---"),
            (f"speed-up over smartnoise-synth's quoted time (target >= {TARGET_SPEEDUP:g}x)", "---:"),
            ("speed target", "---"),
        ],
        rows,
    )


def fit_table(rows: Sequence[FitRow]) -> str:
    columns = [
        ("columns", "---"),
        ("eps", "---:"),
        ("setting", "---"),
        ("T", "---:"),
        ("fit passes", "---:"),
        ("error", "---:"),
        ("time", "---:"),
        ("residual / expected noise", "---:"),
    ]

    def passes(r: FitRow) -> str:
        if r.kind in ("none", "fixed"):
            return passes_text(r.passes)
        spread = f" ({r.passes_min}-{r.passes_max})" if r.passes_min != r.passes_max else ""
        capped = f", {r.capped}/{r.seeds} capped" if r.capped else ""
        return f"{passes_text(r.passes)}{spread}{capped}"

    return markdown_table(
        columns,
        (
            [
                r.columns,
                fmt_eps(r.eps),
                f"**{r.setting}**" if r.kind == "default" else r.setting,
                str(r.rounds),
                passes(r),
                f"{r.error:.3f} ({r.error_min:.3f}-{r.error_max:.3f})",
                seconds_text(r.seconds),
                "-" if math.isnan(r.residual) else f"{r.residual:.3f}",
            ]
            for r in rows
        ),
    )


def fit_lines(rows: Sequence[FitRow], mismatches: Sequence[str]) -> str:
    """Per case and eps: where the default stop lands against the curve, and what selection does."""
    lines = []
    for label in dict.fromkeys(r.columns for r in rows):
        for eps in dict.fromkeys(r.eps for r in rows if r.columns == label):
            mine = {
                r.kind: r
                for r in rows
                if r.columns == label and r.eps == eps and r.kind not in ("fixed", "passes")
            }
            fixed = [r for r in rows if r.columns == label and r.eps == eps and r.kind == "fixed"]
            d, b, none = mine["default"], mine["best"], mine["none"]
            text = (
                f"- {label}, eps {fmt_eps(eps)}: no final fit {none.error:.3f}; fixed passes "
                + ", ".join(f"{passes_text(r.passes)}: {r.error:.3f}" for r in fixed)
                + f"; the default stop ran {passes_text(d.passes)} passes (median"
                + (f"; {d.passes_min}-{d.passes_max} over seeds" if d.passes_min != d.passes_max else "")
                + f") for {d.error:.3f}, "
                f"{d.error / b.error:.2f}x the curve's lowest point ({b.error:.3f} at a median "
                f"{passes_text(b.passes)} passes)"
            )
            if d.capped:
                last = fixed[-1] if fixed else None
                text += (
                    f"; on {d.capped} of {d.seeds} seeds the stop did not fire within {DEFAULT_FINAL_PASSES} "
                    "passes"
                    + (
                        f" (residual still {last.residual:.3f} x the expected noise at "
                        f"{passes_text(last.passes)})"
                        if last is not None and last.passes == DEFAULT_FINAL_PASSES
                        else ""
                    )
                )
            text += "."
            if "forced" in mine:
                f = mine["forced"]
                text += (
                    f" Selection forced at T = {f.rounds}: {f.error:.3f} ({f.error / d.error:.2f}x the "
                    f"default's error, {f.seconds / d.seconds:.2f}x its time)."
                )
            if "select" in mine:
                s = mine["select"]
                text += (
                    f" T = {s.rounds} (selection on): {s.error:.3f} ({s.error / d.error:.2f}x the default's)."
                )
            per_round = [r for r in rows if r.columns == label and r.eps == eps and r.kind == "passes"]
            if per_round:
                text += (
                    f" T = {per_round[0].rounds}, by MW passes a round: "
                    + ", ".join(
                        f"{r.round_passes}: {r.error:.3f} ({r.error_min:.3f}-{r.error_max:.3f})"
                        for r in per_round
                    )
                    + "."
                )
            lines.append(text)
    lines += [f"- Mismatch between mwem's stop and the curve's: {m}." for m in mismatches]
    return "\n".join(lines)


def step_table(rows: Sequence[StepRow]) -> str:
    columns = [
        ("universe: columns", "---"),
        ("table cells", "---:"),
        ("`multiply_by_marginal`", "---:"),
        ("NumPy multiply + sum", "---:"),
        ("ratio", "---:"),
        ("ratio, best", "---:"),
        ("NumPy multiply alone", "---:"),
        ("`marginal_from_dense`", "---:"),
        ("NumPy reshape + sum", "---:"),
        ("ratio", "---:"),
        ("ratio, best", "---:"),
    ]
    return markdown_table(
        columns,
        (
            [
                f"{r.universe} ({r.cells:,}): " + (f"**{r.case}**" if r.aggregate else r.case),
                r.table_cells,
                duration(r.multiply.synth_s),
                duration(r.multiply.base_s),
                f"{r.multiply.ratio:.2f}x",
                f"{r.multiply.best_ratio:.2f}x",
                duration(r.multiply_only_s),
                duration(r.marginal.synth_s),
                duration(r.marginal.base_s),
                f"{r.marginal.ratio:.2f}x",
                f"{r.marginal.best_ratio:.2f}x",
            ]
            for r in rows
        ),
    )


def step_rates(rows: Sequence[StepRow]) -> str:
    """ns per universe cell of each step, per universe: the range over the single subsets, and
    every 3-way marginal in turn where timed."""
    lines = []
    for universe in dict.fromkeys(r.universe for r in rows):
        mine = [r for r in rows if r.universe == universe]
        single = [r for r in mine if not r.aggregate]
        every = [r for r in mine if r.aggregate]

        def ns(seconds: float) -> str:
            return f"{seconds / mine[0].cells * 1e9:.2f}"

        def spread(values: list[float]) -> str:
            return f"{ns(min(values))}-{ns(max(values))}" if len(values) > 1 else ns(values[0])

        text = (
            f"- {universe}, ns per universe cell over the single subsets above: `multiply_by_marginal` "
            f"{spread([r.multiply.synth_s for r in single])}, NumPy multiply + sum "
            f"{spread([r.multiply.base_s for r in single])}, NumPy multiply alone "
            f"{spread([r.multiply_only_s for r in single])}; `marginal_from_dense` "
            f"{spread([r.marginal.synth_s for r in single])}, NumPy reshape + sum "
            f"{spread([r.marginal.base_s for r in single])}."
        )
        for r in every:
            text += (
                f" {r.case.split(' (')[0].capitalize()}, per marginal: `multiply_by_marginal` "
                f"{ns(r.multiply.synth_s)}, NumPy multiply + sum {ns(r.multiply.base_s)}; "
                f"`marginal_from_dense` {ns(r.marginal.synth_s)}, NumPy reshape + sum "
                f"{ns(r.marginal.base_s)}."
            )
        lines.append(text)
    return "\n".join(lines)


def round_table(run: RoundRun) -> str:
    columns = [
        ("round t", "---:"),
        ("marginals scored", "---:"),
        ("MW passes (synth / NumPy)", "---:"),
        ("marginal updates", "---:"),
        ("synth round (in `mwem`)", "---:"),
        ("NumPy round", "---:"),
        ("speed ratio", "---:"),
        ("speed ratio, best", "---:"),
    ]
    return markdown_table(
        columns,
        (
            [
                str(r.round),
                str(r.candidates) if r.candidates else "0 (no selection)",
                f"{r.synth_passes} / {r.numpy_passes}",
                f"{r.synth_passes * r.round}",
                duration(r.synth_s),
                duration(r.numpy_s),
                f"{r.numpy_s / r.synth_s:.2f}x",
                f"{r.numpy_min_s / r.synth_min_s:.2f}x",
            ]
            for r in run.rows
        ),
    )


def round_lines(run: RoundRun) -> str:
    fit = run.fit
    per_pass = run.fit_s / run.fit_passes_run if run.fit_passes_run else math.nan
    return (
        f"Whole `mwem` run: {seconds_text(run.run_s)} median, of which the {run.rounds} rounds "
        f"{seconds_text(run.rounds_s)} and the final fit {seconds_text(run.fit_s)} ({run.fit_passes_run} "
        f"passes over {run.rounds} measurements, {duration(per_pass)} a pass). Final fit, "
        f"{FIT_TIMING_PASSES} passes from the same start (synth / NumPy passes run: {FIT_TIMING_PASSES} / "
        f"{run.fit_numpy_passes}): mwem's fit function {duration(fit.synth_s)}, NumPy "
        f"{duration(fit.base_s)}: speed ratio {fit.ratio:.2f}x ({fit.best_ratio:.2f}x on the fastest "
        "samples)."
    )


def mwem_first_lines(first: FirstMWEM) -> str:
    loaded = ", ".join(f"`{name}` ({status})" for name, status in first.loaded) or "none"
    return (
        f"First whole `mwem` call (after the two kernels above; {first.cells:,} cells, {first.marginals} "
        f"3-way marginals, {first.rounds} rounds, eps = 1): {duration(first.first_s)}; the same call again: "
        f"{duration(first.second_s)}, so the one-off cost was about "
        f"{duration(first.first_s - first.second_s)}. Kernels the first call loaded or compiled: {loaded}."
        + (
            " No synth kernel had been called in this process before the `multiply_by_marginal` row, so its "
            "first call also holds Numba's one-off start-up."
            if first.first_kernel
            else ""
        )
    )


def notes(
    sets,
    cells,
    fits: Sequence[FitRow],
    head: Headline | None,
    steps: Sequence[StepRow],
    runs: Sequence[RoundRun],
    first: FirstMWEM,
) -> str:
    """Observations computed from this run's figures."""
    lines = ["## Notes (from this run's figures)", ""]
    if head is not None:
        quoted = {label: (error, t) for label, error, t in QUOTED}
        mw_err, mw_time = quoted["smartnoise-synth MWEM"]
        aim_err, _ = quoted["AIM"]
        lines.append(
            f"- At eps = {fmt_eps(REFERENCE_EPS)} on the 7 columns, mwem's defaults give a median error of "
            f"{head.default_error:.3f} in {seconds_text(head.default_s)} (median run time): "
            f"{head.default_error / mw_err:.2f}x the quoted smartnoise-synth MWEM figure ({mw_err}, "
            f"{mw_time}) and {head.default_error / aim_err:.2f}x the quoted AIM figure ({aim_err}). The "
            f"lowest median error of the settings tried is {head.best_error:.3f} ({head.best_label}; "
            f"{head.best_error / aim_err:.2f}x AIM's). Issue targets: error "
            f"{head.default_error / mw_err:.2f}x smartnoise-synth's (target <= {TARGET_ERROR_FRACTION:g}: "
            f"{met(head.default_error <= TARGET_ERROR_FRACTION * mw_err)}), "
            f"{QUOTED_SMARTNOISE_S / head.default_s:.0f}x faster than its quoted time (target >= "
            f"{TARGET_SPEEDUP:g}x: {met(QUOTED_SMARTNOISE_S / head.default_s >= TARGET_SPEEDUP)}); the "
            "quoted times come from another machine, so the speed ratio is indicative only."
        )
    for cs in sets:
        mine = [c for c in cells if c.columns == cs.label]
        trend = []
        for eps in sorted({c.eps for c in mine}):
            row = sorted((c for c in mine if c.eps == eps), key=lambda c: c.rounds)
            if len(row) > 1:
                trend.append(
                    f"eps {fmt_eps(eps)}: " + " -> ".join(f"T={c.rounds} {c.error:.3f}" for c in row)
                )
        if trend:
            lines.append(f"- {cs.label}, median error against rounds: " + "; ".join(trend) + ".")
        for t in sorted({c.rounds for c in mine}):
            row = sorted((c for c in mine if c.rounds == t), key=lambda c: c.eps)
            rises = [
                (c, min(row[:i], key=lambda x: x.error))
                for i, c in enumerate(row)
                if i and c.error > 1.1 * min(x.error for x in row[:i])
            ]
            if rises:
                lines.append(
                    f"- {cs.label}, T={t}: the median error is not monotone in eps: "
                    + "; ".join(
                        f"eps {fmt_eps(c.eps)} {c.error:.3f} ({c.error_min:.3f}-{c.error_max:.3f} over "
                        f"seeds) against eps {fmt_eps(b.eps)} {b.error:.3f}"
                        for c, b in rises
                    )
                    + ". With selection on, the result hangs on which marginals are picked; see the "
                    "per-round passes rows of section 1b."
                )
        most = max(c.rounds for c in mine)
        by_eps = sorted((c for c in mine if c.rounds == most), key=lambda c: c.eps)
        if len(by_eps) > 1:
            lines.append(
                f"- {cs.label}, median error against eps at T={most}: "
                + ", ".join(f"eps {fmt_eps(c.eps)}: {c.error:.3f}" for c in by_eps)
                + " (largest / smallest: "
                f"{max(c.error for c in by_eps) / min(c.error for c in by_eps):.2f}x); final-fit passes "
                "(median): "
                + ", ".join(
                    f"eps {fmt_eps(c.eps)}: {passes_text(c.fit_passes)}"
                    + (
                        f" ({c.fit_capped}/{c.seeds} capped at {DEFAULT_FINAL_PASSES})"
                        if c.fit_capped
                        else ""
                    )
                    for c in by_eps
                )
                + "."
            )
        for eps in sorted({c.eps for c in mine}):
            times = sorted((c.rounds, c.seconds, c.fit_passes) for c in mine if c.eps == eps)
            if len(times) > 1 and eps == REFERENCE_EPS:
                lines.append(
                    f"- {cs.label}, run time against rounds (eps {fmt_eps(eps)}): "
                    + ", ".join(
                        f"T={t}: {seconds_text(s)} ({passes_text(p)} fit passes)" for t, s, p in times
                    )
                    + "; the final fit, not the rounds, sets the time."
                )
    worse = [r for r in fits if r.kind == "forced"]
    if worse:
        pairs = []
        for r in worse:
            d = next(x for x in fits if x.columns == r.columns and x.eps == r.eps and x.kind == "default")
            pairs.append(f"{r.columns}, eps {fmt_eps(r.eps)}: {r.error / d.error:.2f}x")
        lines.append(
            f"- Selection forced (select_share={FORCED_SHARE:g}) at T = every marginal, error against the "
            "default (no selection): " + "; ".join(pairs) + " (> 1: skipping selection is better)."
        )
    per_round = [r for r in fits if r.kind == "passes"]
    if per_round:
        parts = []
        for label in dict.fromkeys(r.columns for r in per_round):
            for eps in dict.fromkeys(r.eps for r in per_round if r.columns == label):
                mine = [r for r in per_round if r.columns == label and r.eps == eps]
                base = next((r for r in mine if r.round_passes == DEFAULT_PASSES), None)
                best = min(mine, key=lambda r: r.error)
                if base is not None:
                    parts.append(
                        f"{label}, T={base.rounds}, eps {fmt_eps(eps)}: {base.error:.3f} with "
                        f"{DEFAULT_PASSES}, {best.error:.3f} with {best.round_passes} "
                        f"({base.error / best.error:.2f}x)"
                    )
        lines.append(
            f"- With selection on, the default {DEFAULT_PASSES} MW passes a round against the best of "
            f"{', '.join(map(str, PER_ROUND_PASSES))} (median error): " + "; ".join(parts) + "."
        )
    best_gap = [
        (r, next(x for x in fits if x.columns == r.columns and x.eps == r.eps and x.kind == "best"))
        for r in fits
        if r.kind == "default"
    ]
    if best_gap:
        lines.append(
            "- The default stop against the curve's lowest point (error ratio, passes run / passes at the "
            "lowest point): "
            + "; ".join(
                f"{d.columns}, eps {fmt_eps(d.eps)}: {d.error / b.error:.2f}x, {passes_text(d.passes)} / "
                f"{passes_text(b.passes)}" + (" (cap reached)" if d.capped else "")
                for d, b in best_gap
            )
            + "."
        )
    slow_mul = [r for r in steps if r.multiply.ratio < 1.0]
    slow_marg = [r for r in steps if r.marginal.ratio < 1.0]
    lines.append(
        "- `multiply_by_marginal` is "
        + (
            "slower than NumPy multiply + sum in: "
            + "; ".join(f"{r.universe}: {r.case} ({r.multiply.ratio:.2f}x)" for r in slow_mul)
            if slow_mul
            else "at least as fast as NumPy multiply + sum in every case"
        )
        + "; against NumPy's multiply alone (no total) its time is "
        + ", ".join(f"{r.multiply.synth_s / r.multiply_only_s:.2f}x" for r in steps)
        + " (same order as the table)."
    )
    lines.append(
        "- `marginal_from_dense` is "
        + (
            "slower than NumPy reshape + sum in: "
            + "; ".join(f"{r.universe}: {r.case} ({r.marginal.ratio:.2f}x)" for r in slow_marg)
            if slow_marg
            else "at least as fast as NumPy reshape + sum in every case"
        )
        + "."
    )
    for run in runs:
        same = [r for r in steps if r.cells == run.cells]
        every = [r for r in same if r.aggregate]
        steps_alone = (
            every[0].marginal.synth_s + every[0].multiply.synth_s
            if every
            else statistics.median([r.marginal.synth_s + r.multiply.synth_s for r in same])
        )
        source = "mean over every 3-way marginal" if every else "median over its subsets"
        updating = [r for r in run.rows if r.synth_passes]
        if updating:
            last = updating[-1]
            lines.append(
                f"- T={run.rounds}: round {last.round} makes {last.synth_passes * last.round} marginal "
                f"updates (each a `marginal_from_dense` and a `multiply_by_marginal` over {run.cells:,} "
                f"cells): about {duration(last.synth_s / (last.synth_passes * last.round))} per update in "
                f"the round's time, against {duration(steps_alone)} for the two steps alone in section 2 "
                f"({source})."
            )
        if run.fit_passes_run:
            per_update = run.fit_s / (run.fit_passes_run * run.rounds)
            lines.append(
                f"- T={run.rounds}: the final fit makes {run.fit_passes_run * run.rounds:,} marginal updates "
                f"({run.fit_passes_run} passes x {run.rounds}): {duration(per_update)} per update, against "
                f"{duration(steps_alone)} for the two steps alone ({source}); it is "
                f"{run.fit_s / run.run_s:.0%} of the whole run."
            )
    lines.append(
        f"- The first `mwem` call in a process costs about {duration(first.first_s - first.second_s)} more "
        "than later ones (section 0)."
    )
    lines.append(
        "- The machine is shared and noisy (other work ran on its 2 cores during this run; see the load "
        "averages): figures are medians, of alternating synth / NumPy samples where compared; ratios can "
        "move by tens of percent between runs, and the best-sample ratios are a cross-check."
    )
    return "\n".join(lines)


def render(
    settings: Settings,
    calls: Sequence[FirstCall],
    first: FirstMWEM,
    sets: Sequence[ColumnSet],
    cells: Sequence[ErrorCell],
    fits: Sequence[FitRow],
    mismatches: Sequence[str],
    steps: Sequence[StepRow],
    runs: Sequence[RoundRun],
    total_s: float,
    loads: tuple[str, str],
) -> str:
    machine = (
        f"{machine_info(np, numba)}\n- load average (1, 5, 15 min) at start: {loads[0]}; at end: {loads[1]} "
        "(the cores are shared)"
    )
    seeds = ", ".join(map(str, settings.seeds))
    fit_seeds = ", ".join(map(str, settings.seeds[:FIT_SEEDS]))
    head = headline(sets, cells, fits)
    tolerance = mwem_module.FIT_TOLERANCE
    round_sections = []
    for run in runs:
        what = (
            "selection on: each round scores every marginal not yet measured, selects (exponential "
            f"mechanism), measures (discrete Laplace), then runs {DEFAULT_PASSES} MW passes over its t "
            "measurements"
            if run.selection
            else "every marginal is measured, so there is no selection and no per-round pass: each round "
            "measures the next marginal in workload order (discrete Laplace) and nothing else"
        )
        numpy_what = (
            "the scores by reshape + sum (only of the marginals not yet measured, where synth's fused "
            "`marginals_from_dense` sums all of them: NumPy does less work), Gumbel-max selection, "
            "`rng.laplace` noise, then MW passes with mwem's stopping rule, each update a reshape + sum "
            "marginal and a broadcast multiply + `x.sum()` (no accounting, floating-point noise)"
            if run.selection
            else "the next marginal in workload order (checked to be the one synth measured), `rng.laplace` "
            "noise, no passes. Not the same work: synth's round draws exact discrete Laplace noise and "
            "charges the accountant, NumPy's is one float draw, so these rows size the rounds (next to the "
            "fit) rather than compare speed"
        )
        round_sections += [
            f"### Whole rounds ({run.cells:,} cells, {run.marginals} 3-way marginals, eps = "
            f"{fmt_eps(REFERENCE_EPS)}, T = {run.rounds}: "
            + ("selection on" if run.selection else "every marginal, the default")
            + ")",
            "",
            (
                f"synth: the duration of round t inside `mwem(..., rounds={run.rounds}, "
                f"rng={settings.seed})`, from the timestamps of its `progress` callback (round 1 also holds "
                f"the run's set-up: true marginals from the rows); median over {run.samples} runs. Here "
                f"{what}. NumPy: the same round in NumPy from the uniform distribution (reset outside the "
                f"timing) with that run's first t measurements: {numpy_what}. Passes per round for synth "
                "counted in an untimed run of the same seed. Then the final fit: its time inside `mwem` "
                f"(from the last round's `progress` call to the return), and {FIT_TIMING_PASSES} passes of "
                "mwem's fit function (`synth.mwem._fit`, stop off) vs the same passes in NumPy "
                "(`numpy_passes`), both from the run's state before its fit (`mwem(..., final_passes=0)`) "
                "over its measurements; checked to agree within 1e-9."
            ),
            "",
            round_table(run),
            "",
            round_lines(run),
            "",
        ]
    return "\n".join(
        [
            *report_header("synth MWEM: benchmark results", machine, total_s),
            f"{repeats_note(settings.repeats)}; seed {settings.seed}",
            "",
            "## 0. First calls (JIT)",
            "",
            (
                "First call through the library on a tiny input (a Numba cache load when the on-disk cache "
                "is valid, else a compile), and a from-scratch compile of the same kernel with caching off. "
                "Not in any figure below."
            ),
            "",
            first_call_table(calls),
            "",
            mwem_first_lines(first),
            "",
            "## 1. Error against epsilon and rounds on adult",
            "",
            (
                "`mwem(codes, schema, W, eps, rounds=T, rows=n, rng=seed)`, defaults otherwise: "
                f"measure='marginal', select_share=None (auto: {DEFAULT_SELECT_SHARE:g} of each round when T "
                f"is below the number of marginals, else no selection), {DEFAULT_PASSES} MW passes a round "
                f"(only when selecting), final_passes={DEFAULT_FINAL_PASSES} (the final fit stops once the "
                f"measurements' total absolute residual is at most {tolerance:g} x the noise's expected "
                "total), output='last'. W = `Workload.marginals(schema.select(columns), 3)`, n public. "
                f"Seeds {seeds}. Error: mean over W's marginals of the L1 distance between the normalized "
                "true table and the model's (`marginals_from_dense(distribution, schema, W.subsets)`), the "
                "AIM paper's metric; the median over seeds, the range over seeds in brackets, the lowest "
                "median per row in bold. Time: the median wall time of the whole `mwem` call. Fit passes: "
                "the median final-fit passes run (`final_passes_run`; 'capped': seeds that ran all "
                f"{DEFAULT_FINAL_PASSES}). MWEM measures each marginal at most once, so a T above the number "
                f"of marginals runs one round per marginal; the default rounds={DEFAULT_ROUNDS} runs every "
                "marginal of both column sets."
            ),
            "",
            *error_tables(sets, cells),
            f"### At eps = {fmt_eps(REFERENCE_EPS)}, 7 columns, next to reference figures",
            "",
            reference_table(sets, head),
            "",
            (
                f"Issue targets, at eps = {fmt_eps(REFERENCE_EPS)} on all 3-way marginals of a 6-8 column "
                f"adult subset (these 7 columns): error at most {TARGET_ERROR_FRACTION:g}x smartnoise-synth "
                f"MWEM's, and at least {TARGET_SPEEDUP:g}x faster. smartnoise-synth's "
                f"{QUOTED_SMARTNOISE_S:.0f} s is quoted from another machine (not measured here); this "
                "machine has 2 shared cores, so the speed ratio is indicative only."
            ),
            "",
            targets_table(head),
            "",
            "## 1b. The final fit and the selection step",
            "",
            (
                f"The same runs (eps {', '.join(map(fmt_eps, settings.fit_epsilons))}, seeds {fit_seeds}; "
                "medians, range in brackets) with: no final fit (`final_passes=0`); fixed pass counts with "
                "the stop off (`synth.mwem.FIT_TOLERANCE = 0`: exactly `final_passes` passes); mwem's "
                "default stop (`final_passes_run` reported; 'capped': seeds that ran all "
                f"{DEFAULT_FINAL_PASSES}); and the lowest point of the error curve, evaluated every "
                f"{CURVE_STEP} passes (chosen with the true data: a yardstick, not a private setting). The "
                "fixed counts and the curve come from one fit per seed continued pass by pass with mwem's "
                "own fit function from `mwem(..., final_passes=0)` (the same computation; checked once per "
                f"column set against `mwem(..., final_passes={FIXED_PASSES[0]})` with the stop off); their "
                "time is that run's plus the fit passes' (error evaluations excluded). Residual / expected "
                "noise: the fit's total absolute residual over the measurements in its last pass, over the "
                f"noise's expected total (the default stops at {tolerance:g}). Then selection forced "
                f"(`select_share={FORCED_SHARE:g}`) at T = every marginal, and a T below the marginal count "
                f"(selection and {DEFAULT_PASSES} passes a round on, then the default fit). Last, at a small "
                f"T, the MW passes a round (`passes`, default {DEFAULT_PASSES}; passes "
                f"{', '.join(map(str, PER_ROUND_PASSES))}): they run only when mwem selects, and decide how "
                "closely the estimate that selection scores follows the measurements so far."
            ),
            "",
            fit_table(fits),
            "",
            fit_lines(fits, mismatches),
            "",
            "## 2. MWEM's steps vs NumPy",
            "",
            (
                "On a random float64 distribution over each universe. Update: `multiply_by_marginal(x, "
                "schema, cols, factors)` (in place, returns the new total) vs NumPy `x.reshape(shape) *= "
                "factors` transposed to schema order and broadcast over the other axes, then `x.sum()` (the "
                f"total MWEM needs); also NumPy's multiply alone. Factors exp(U(-{FACTOR_SPREAD:g}, "
                f"{FACTOR_SPREAD:g})), alternately inverted. Marginal: `marginal_from_dense(x, schema, "
                "cols)` vs `x.reshape(shape).sum(axis=others)` (then a transpose view). Checked: identical "
                "weights, totals within 1e-9, marginals within 1e-9. Speed ratio = NumPy time / synth time "
                "on the medians (> 1: synth faster); 'best' on the fastest samples."
            ),
            "",
            step_table(steps),
            "",
            step_rates(steps),
            "",
            (
                f"Two whole-round timings: T = {ROUND_RUNS[0]} (below the marginal count: selection and "
                "per-round passes run, so rounds do real work) and T = every marginal (mwem's default: "
                "rounds only measure, and the final fit is nearly all of the time)."
            ),
            "",
            *round_sections,
            notes(sets, cells, fits, head, steps, runs, first),
            "",
        ]
    )


# -- main ------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = option_parser(
        __doc__,
        quick_help=f"eps {', '.join(map(fmt_eps, QUICK_EPSILONS))}, rounds "
        f"{', '.join(map(str, QUICK_ROUNDS))}, 2 seeds, the final fit on 5 columns only, "
        f"{QUICK_STEP_SUBSETS} subsets per universe and 3 repeats (a smoke run)",
    )
    parser.add_argument(
        "--data-dir", type=Path, default=DEFAULT_DATA_DIR, help="folder with adult.csv and adult-domain.json"
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="first seed of the runs (seeds S..S+4) and of the data"
    )
    args = parse_options(parser, argv)
    if args.seed < 0:
        parser.error("--seed must be >= 0")
    return args


def settings_from(args: argparse.Namespace) -> Settings:
    quick = args.quick
    return Settings(
        repeats=args.repeats,
        seeds=tuple(args.seed + i for i in range(2 if quick else 5)),
        epsilons=QUICK_EPSILONS if quick else EPSILONS,
        rounds=QUICK_ROUNDS if quick else ROUNDS,
        step_subsets={k: v[:QUICK_STEP_SUBSETS] if quick else v for k, v in STEP_SUBSETS.items()},
        every_marginal=QUICK_EVERY_MARGINAL if quick else EVERY_MARGINAL,
        fit_cases=QUICK_FIT_CASES if quick else FIT_CASES,
        fit_epsilons=QUICK_FIT_EPSILONS if quick else FIT_EPSILONS,
        seed=args.seed,
        data_dir=args.data_dir,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    settings = settings_from(args)
    adult = load_adult(settings.data_dir)  # fail early on a missing dataset
    started = time.perf_counter()
    load_start = load_average()
    calls, first = bench_first_calls(*adult, settings.seed)
    steps = bench_steps(*adult, settings)
    gc.collect()
    cases = {label: make_case(adult, label, columns) for label, columns in ERROR_SETS}
    runs = [bench_rounds(cases["7 columns"], t, settings) for t in ROUND_RUNS]
    sets, cells = bench_error(list(cases.values()), settings)
    fits, mismatches = bench_fit(cases, settings)
    total_s = time.perf_counter() - started
    report = render(
        settings,
        calls,
        first,
        sets,
        cells,
        fits,
        mismatches,
        steps,
        runs,
        total_s,
        (load_start, load_average()),
    )
    publish(SECTION, report, total_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
