"""Benchmark MWEM (``synth.mwem``) on adult: error and time against epsilon and rounds, the speed
of its steps against NumPy implementations of the same steps, and its first-call (JIT) cost.

1. error against epsilon and rounds: ``mwem(codes, schema, W, eps, rounds=T, rows=n, rng=seed)``
   with W all 3-way marginals of 7 adult columns (120,960 cells) and of 5 columns (840 cells);
   error = mean over the marginals of the L1 distance between the normalized true table and the
   model's table (the AIM paper's metric); medians over seeds, and the median run time. Next to
   them: the uniform distribution's error (measured), and reference figures quoted from the
   project brief (smartnoise-synth MWEM, AIM, independent 1-way marginals; not measured here);
2. MWEM's steps against NumPy, on the 7-column universe and the 8-column one (+ age,
   10,281,600 cells): the multiplicative-weights update ``multiply_by_marginal`` vs NumPy
   broadcasting in place, and the marginal ``marginal_from_dense`` vs ``reshape(...).sum(axis)``;
   then whole MWEM rounds (timed inside ``mwem`` through its ``progress`` callback) vs a NumPy
   round doing the same work (scores of every unmeasured marginal, selection, noise, MW passes);
3. first calls (JIT): the two table kernels, then a whole first ``mwem`` call on a tiny input.

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
from dataclasses import dataclass
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
    option_parser,
    parse_options,
    publish,
    repeats_note,
    report_header,
    round_robin,
    timed,
)

from synth import _kernels
from synth.mwem import DEFAULT_PASSES, mwem
from synth.schema import Schema
from synth.tables import marginal, marginal_from_dense, multiply_by_marginal
from synth.workload import Workload

SECTION = "bench_mwem"

#: The 7-column set of the error grid (120,960 cells) and a smaller 5-column one (840 cells).
SEVEN = ("workclass", "education-num", "marital-status", "relationship", "race", "sex", "income>50K")
FIVE = ("marital-status", "relationship", "race", "sex", "income>50K")
ERROR_SETS = (("7 columns", SEVEN), ("5 columns", FIVE))
#: The ~10^7-cell universe of the step timings: age in front of the 7 columns (10,281,600 cells).
EIGHT = ("age",) + SEVEN

EPSILONS = (0.25, 0.5, 1.0, 2.0, 4.0)
ROUNDS = (10, 20, 35)
QUICK_EPSILONS = (1.0, 4.0)
QUICK_ROUNDS = (10, 20)
#: The epsilon of the reference figures and of the round timings.
REFERENCE_EPS = 1.0

#: Reference figures quoted from the project brief (NOT measured here): eps = 1, the 7 columns
#: above, all 3-way marginals, the same error metric. (label, error, time).
QUOTED = (
    ("smartnoise-synth MWEM", 0.083, "about 800 s"),
    ("AIM", 0.037, "200-300 s"),
    ("independent 1-way marginals", 0.44, "-"),
)

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

#: The MW-passes check: (column set, rounds, passes values) at PASSES_EPSILONS; the first passes
#: value of each is mwem's default (the error grid's setting).
PASSES_EPSILONS = (1.0, 4.0)
PASSES_CASES = (
    ("5 columns", FIVE, 10, (DEFAULT_PASSES, 30, 100, 300)),
    ("7 columns", SEVEN, 35, (DEFAULT_PASSES, 30)),
)
QUICK_PASSES_CASES = (("5 columns", FIVE, 10, (DEFAULT_PASSES, 100)),)

#: Rounds whose time is reported in the round section (those <= the largest rounds setting).
ROUND_POINTS = (1, 10, 20, 35)
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
    passes_cases: tuple[tuple[str, tuple[str, ...], int, tuple[int, ...]], ...]
    seed: int
    data_dir: Path


# -- data ------------------------------------------------------------------------------------


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


def numpy_round(
    x: np.ndarray,
    ops: dict[tuple[str, ...], NumpySubset],
    true_tables: dict[tuple[str, ...], np.ndarray],
    measured: Sequence[tuple[tuple[str, ...], np.ndarray]],
    n: float,
    eps_select: float,
    eps_measure: float,
    passes: int,
    rng: np.random.Generator,
) -> int:
    """One MWEM round in NumPy, on ``x`` in place (floating-point noise, no accounting).

    Scores every marginal not among ``measured[:-1]`` (L1 error of its table), picks one by the
    Gumbel-max exponential mechanism, draws Laplace noise for it (the work of a measurement; the
    round then uses ``measured[-1]``, the library run's measurement, so both do the same passes),
    then MW passes over ``measured`` with mwem's stopping rule. Returns the passes run.
    """
    total = float(x.sum())
    chosen = {key for key, _ in measured[:-1]}
    candidates = list(true_tables)
    scores = np.array(
        [
            -np.inf if s in chosen else float(np.abs(true_tables[s] - ops[s].marginal(x) * (n / total)).sum())
            for s in candidates
        ]
    )
    pick = int(np.argmax(scores * (eps_select / 2) + rng.gumbel(size=len(scores))))
    key = candidates[pick]
    _ = true_tables[key] + rng.laplace(0.0, 1.0 / eps_measure, true_tables[key].shape)
    runs = 0
    for _ in range(passes):
        runs += 1
        largest = 0.0
        for key, noisy in measured:
            exponent = (noisy - ops[key].marginal(x) * (n / total)) / (2 * n)
            largest = max(largest, float(np.abs(exponent).max()))
            total = ops[key].multiply_total(x, np.exp(exponent))
        if largest < 1e-9:
            break
    return runs


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
    error: float  # median over seeds
    error_min: float
    error_max: float
    seconds: float  # median run time
    seconds_min: float
    seeds: int


@dataclass(frozen=True)
class ColumnSet:
    label: str
    cells: int
    marginals: int
    rows: int
    uniform: float  # error of the uniform distribution
    independent: float  # error of the product of the exact (non-private) 1-way marginals


def mean_l1(
    model: Callable[[tuple[str, ...]], np.ndarray], truth: dict[tuple[str, ...], np.ndarray]
) -> float:
    """Mean over the marginals of the L1 distance between normalized true and model tables."""
    return float(np.mean([np.abs(model(s) - t).sum() for s, t in truth.items()]))


def bench_error(
    adult: tuple[Schema, np.ndarray], settings: Settings
) -> tuple[list[ColumnSet], list[ErrorCell]]:
    """mwem on all 3-way marginals of each column set, per eps, rounds and seed."""
    schema, codes = adult
    sets, cells = [], []
    for label, columns in ERROR_SETS:
        sub, sub_codes = project_codes(schema, codes, columns)
        n = len(sub_codes)
        workload = Workload.marginals(sub, 3)
        truth = {s: marginal(sub_codes, sub, s) / n for s in workload.subsets}
        ones = {c: marginal(sub_codes, sub, (c,)) / n for c in sub.names}

        def product(s: tuple[str, ...]) -> np.ndarray:
            table = np.ones(())
            for c in s:
                table = np.multiply.outer(table, ones[c])
            return table

        uniform = mean_l1(lambda s: np.full(truth[s].shape, 1.0 / truth[s].size), truth)
        sets.append(
            ColumnSet(label, sub.universe_size, len(workload.subsets), n, uniform, mean_l1(product, truth))
        )
        # Requested rounds beyond the number of marginals run as many rounds as there are marginals.
        runs: dict[int, int] = {}
        for t in settings.rounds:
            runs.setdefault(min(t, len(workload.subsets)), t)
        results: dict[tuple[float, int], list[tuple[float, float]]] = {}
        began = time.perf_counter()
        for seed in settings.seeds:  # seeds outermost: load changes hit every setting alike
            for eps in settings.epsilons:
                for rounds_run, rounds in runs.items():
                    started = time.perf_counter()
                    result = mwem(sub_codes, sub, workload, eps, rounds=rounds, rows=n, rng=seed)
                    seconds = time.perf_counter() - started
                    if result.parameters["rounds"] != rounds_run:
                        raise AssertionError(
                            f"mwem ran {result.parameters['rounds']} rounds, expected {rounds_run}"
                        )
                    dist = result.distribution
                    error = mean_l1(lambda s, d=dist: marginal_from_dense(d, sub, s), truth)
                    results.setdefault((eps, rounds), []).append((error, seconds))
        print(f"error grid, {label}: {time.perf_counter() - began:.0f} s", file=sys.stderr)
        for (eps, rounds), values in results.items():
            errors = [e for e, _ in values]
            times = [s for _, s in values]
            cells.append(
                ErrorCell(
                    label,
                    eps,
                    rounds,
                    min(rounds, len(workload.subsets)),
                    statistics.median(errors),
                    min(errors),
                    max(errors),
                    statistics.median(times),
                    min(times),
                    len(values),
                )
            )
    return sets, cells


@dataclass(frozen=True)
class PassesRow:
    columns: str
    rounds: int
    passes: int
    eps: float
    error: float  # median over seeds
    error_min: float
    error_max: float
    seconds: float  # median run time


def bench_passes(adult: tuple[Schema, np.ndarray], settings: Settings) -> list[PassesRow]:
    """mwem's error and time against its ``passes`` argument (MW passes per round)."""
    schema, codes = adult
    rows = []
    for label, columns, rounds, passes_values in settings.passes_cases:
        sub, sub_codes = project_codes(schema, codes, columns)
        n = len(sub_codes)
        workload = Workload.marginals(sub, 3)
        truth = {s: marginal(sub_codes, sub, s) / n for s in workload.subsets}
        results: dict[tuple[int, float], list[tuple[float, float]]] = {}
        began = time.perf_counter()
        for seed in settings.seeds:
            for eps in PASSES_EPSILONS:
                for passes in passes_values:
                    started = time.perf_counter()
                    result = mwem(
                        sub_codes, sub, workload, eps, rounds=rounds, rows=n, rng=seed, passes=passes
                    )
                    seconds = time.perf_counter() - started
                    dist = result.distribution
                    error = mean_l1(lambda s, d=dist: marginal_from_dense(d, sub, s), truth)
                    results.setdefault((passes, eps), []).append((error, seconds))
        print(f"passes, {label}: {time.perf_counter() - began:.0f} s", file=sys.stderr)
        for (passes, eps), values in sorted(results.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            errors = [e for e, _ in values]
            rows.append(
                PassesRow(
                    label,
                    min(rounds, len(workload.subsets)),
                    passes,
                    eps,
                    statistics.median(errors),
                    min(errors),
                    max(errors),
                    statistics.median([t for _, t in values]),
                )
            )
    return rows


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
    round: int  # t: the round's MW passes run over t measurements
    synth_s: float  # median duration of round t inside mwem
    synth_min_s: float
    numpy_s: float
    numpy_min_s: float
    synth_passes: int
    numpy_passes: int
    candidates: int  # marginals scored


@dataclass(frozen=True)
class RoundRun:
    rows: list[RoundRow]
    rounds: int
    run_s: float  # median whole mwem run (eps = REFERENCE_EPS, `rounds` rounds)
    cells: int
    marginals: int
    samples: int


def count_passes(codes, schema, workload, rounds, n, seed) -> list[int]:
    """MW passes per round of one mwem run, counted by wrapping the module's update function
    (an untimed run; ``mwem`` is deterministic given its seed)."""
    import synth.mwem as module

    original = module.multiply_by_marginal
    count = [0]
    marks: list[int] = []

    def counted(*args, **kwargs):
        count[0] += 1
        return original(*args, **kwargs)

    module.multiply_by_marginal = counted
    try:
        mwem(
            codes,
            schema,
            workload,
            REFERENCE_EPS,
            rounds=rounds,
            rows=n,
            rng=seed,
            progress=lambda t, _: marks.append(count[0]),
        )
    finally:
        module.multiply_by_marginal = original
    calls = np.diff([0, *marks])
    return [int(c) // (t + 1) for t, c in enumerate(calls)]  # round t+1 updates t+1 marginals per pass


def bench_rounds(adult: tuple[Schema, np.ndarray], settings: Settings) -> RoundRun:
    """Rounds of mwem (7 columns, eps = 1) timed through ``progress`` vs NumPy rounds."""
    schema, codes = adult
    sub, sub_codes = project_codes(schema, codes, SEVEN)
    n = len(sub_codes)
    workload = Workload.marginals(sub, 3)
    rounds = min(max(settings.rounds), len(workload.subsets))
    points = [t for t in ROUND_POINTS if t <= rounds]
    seed = settings.seed
    reference = mwem(sub_codes, sub, workload, REFERENCE_EPS, rounds=rounds, rows=n, rng=seed)
    measured = [
        (tuple(m["marginal"]), np.asarray(m["noisy"], dtype=np.float64)) for m in reference.measurements
    ]
    eps_select = reference.parameters["epsilon_select"]
    eps_measure = reference.parameters["epsilon_measure"]
    synth_passes = count_passes(sub_codes, sub, workload, rounds, n, seed)
    true_tables = {s: marginal(sub_codes, sub, s).astype(np.float64) for s in workload.subsets}
    ops = {s: NumpySubset(sub, s) for s in workload.subsets}

    durations: list[list[float]] = []  # per synth run: seconds of each round
    whole: list[float] = []

    def synth_run() -> None:
        stamps = [time.perf_counter()]
        mwem(
            sub_codes,
            sub,
            workload,
            REFERENCE_EPS,
            rounds=rounds,
            rows=n,
            rng=seed,
            progress=lambda t, _: stamps.append(time.perf_counter()),
        )
        durations.append(list(np.diff(stamps)))
        whole.append(stamps[-1] - stamps[0])

    x = np.empty(sub.universe_size)
    numpy_passes: dict[int, int] = {}
    np_rng = np.random.default_rng(seed)

    def reset() -> None:  # outside the timing: each NumPy round starts from the uniform distribution
        x.fill(1.0 / x.size)

    def numpy_at(t: int) -> Callable[[], None]:
        def call() -> None:
            numpy_passes[t] = numpy_round(
                x, ops, true_tables, measured[:t], float(n), eps_select, eps_measure, DEFAULT_PASSES, np_rng
            )

        return call

    entries = [Timed("synth", synth_run, None)] + [Timed(f"numpy/{t}", numpy_at(t), reset) for t in points]
    began = time.perf_counter()
    times: dict[str, Samples] = round_robin(entries, settings.repeats, min_sample_s=0)
    print(f"rounds: {time.perf_counter() - began:.0f} s", file=sys.stderr)
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
                numpy_passes[t],
                len(workload.subsets) - (t - 1),
            )
        )
    return RoundRun(
        rows, rounds, statistics.median(whole[1:]), sub.universe_size, len(workload.subsets), len(timed_runs)
    )


# -- report ----------------------------------------------------------------------------------


def fmt_eps(eps: float) -> str:
    return f"{eps:g}"


def seconds_text(s: float) -> str:
    return f"{s:.2f} s" if s < 10 else f"{s:.1f} s"


def error_tables(sets: Sequence[ColumnSet], cells: Sequence[ErrorCell]) -> list[str]:
    """Per column set: error and time per eps (rows) and rounds (columns)."""
    out = []
    for cs in sets:
        mine = [c for c in cells if c.columns == cs.label]
        rounds = sorted({c.rounds for c in mine})
        eps_values = sorted({c.eps for c in mine})
        by = {(c.eps, c.rounds): c for c in mine}

        def head(t: int) -> str:
            run = by[(eps_values[0], t)].rounds_run
            return f"T={t}" + (f" (runs {run}: every marginal)" if run != t else "")

        columns = [("eps", "---:")]
        columns += [(f"error, {head(t)}", "---:") for t in rounds]
        columns += [(f"time, {head(t)}", "---:") for t in rounds]
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
            row += [str(best)]
            table_rows.append(row)
        out += [
            f"### {cs.label}: {cs.cells:,} cells, {cs.marginals} 3-way marginals, n = {cs.rows:,}",
            "",
            markdown_table(columns, table_rows),
            "",
            f"Measured here: the uniform distribution {cs.uniform:.3f}; the product of the exact "
            "(non-private) "
            f"1-way marginals {cs.independent:.3f} (a floor for any model of independent columns).",
            "",
        ]
    return out


def reference_table(sets: Sequence[ColumnSet], cells: Sequence[ErrorCell]) -> str:
    seven = sets[0]
    mine = [c for c in cells if c.columns == seven.label and c.eps == REFERENCE_EPS]
    rows = []
    if mine:
        best = min(mine, key=lambda c: c.error)
        rows.append(
            [
                f"synth `mwem`, T = {best.rounds} (best of {', '.join(str(c.rounds) for c in mine)})",
                f"{best.error:.3f}",
                seconds_text(best.seconds),
                f"measured here (median of {best.seeds} seeds)",
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


def passes_table(rows: Sequence[PassesRow]) -> str:
    columns = [
        ("columns", "---"),
        ("T", "---:"),
        ("eps", "---:"),
        ("passes", "---:"),
        ("error", "---:"),
        ("time", "---:"),
    ]
    return markdown_table(
        columns,
        (
            [
                r.columns,
                str(r.rounds),
                fmt_eps(r.eps),
                f"{r.passes}" + (" (default)" if r.passes == DEFAULT_PASSES else ""),
                f"{r.error:.3f} ({r.error_min:.3f}-{r.error_max:.3f})",
                seconds_text(r.seconds),
            ]
            for r in rows
        ),
    )


def passes_lines(rows: Sequence[PassesRow]) -> str:
    lines = []
    for label in dict.fromkeys(r.columns for r in rows):
        for eps in dict.fromkeys(r.eps for r in rows if r.columns == label):
            mine = [r for r in rows if r.columns == label and r.eps == eps]
            base = next((r for r in mine if r.passes == DEFAULT_PASSES), None)
            best = min(mine, key=lambda r: r.error)
            if base is not None and best is not base:
                lines.append(
                    f"- {label}, eps {fmt_eps(eps)}: {best.passes} passes give {best.error:.3f} against "
                    f"{base.error:.3f} with the default {DEFAULT_PASSES} ({base.error / best.error:.1f}x "
                    "lower), "
                    f"in {best.seconds / base.seconds:.1f}x the time."
                )
            elif base is not None:
                lines.append(
                    f"- {label}, eps {fmt_eps(eps)}: the default {DEFAULT_PASSES} passes give the lowest "
                    f"error of those tried ({base.error:.3f})."
                )
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
                f"{ns(r.multiply.synth_s)}, "
                f"NumPy multiply + sum {ns(r.multiply.base_s)}; `marginal_from_dense` "
                f"{ns(r.marginal.synth_s)}, "
                f"NumPy reshape + sum {ns(r.marginal.base_s)}."
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
                str(r.candidates),
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


def mwem_first_lines(first: FirstMWEM) -> str:
    loaded = ", ".join(f"`{name}` ({status})" for name, status in first.loaded) or "none"
    return (
        f"First whole `mwem` call (after the two kernels above; {first.cells:,} cells, {first.marginals} "
        "3-way "
        f"marginals, {first.rounds} rounds, eps = 1): {duration(first.first_s)}; the same call again: "
        f"{duration(first.second_s)}, so the one-off cost was about "
        f"{duration(first.first_s - first.second_s)}. "
        f"Kernels the first call loaded or compiled: {loaded}."
        + (
            " No synth kernel had been called in this process before the `multiply_by_marginal` row, so its "
            "first call also holds Numba's one-off start-up."
            if first.first_kernel
            else ""
        )
    )


def notes(sets, cells, steps: Sequence[StepRow], run: RoundRun, first: FirstMWEM) -> str:
    """Observations computed from this run's figures."""
    lines = ["## Notes (from this run's figures)", ""]
    seven = sets[0]
    at_ref = [c for c in cells if c.columns == seven.label and c.eps == REFERENCE_EPS]
    if at_ref:
        best = min(at_ref, key=lambda c: c.error)
        quoted = {label: (error, t) for label, error, t in QUOTED}
        mw_err, mw_time = quoted["smartnoise-synth MWEM"]
        aim_err, _ = quoted["AIM"]
        lines.append(
            f"- At eps = {fmt_eps(REFERENCE_EPS)} on the 7 columns, the lowest median error is "
            f"{best.error:.3f} at "
            f"T = {best.rounds} ({seconds_text(best.seconds)} median run time): "
            f"{best.error / mw_err:.2f}x the quoted smartnoise-synth MWEM figure ({mw_err}, {mw_time}) and "
            f"{best.error / aim_err:.2f}x the quoted AIM figure ({aim_err}). The quoted times come from "
            "another "
            "machine and are not comparable with a ratio."
        )
    for cs in sets:
        mine = [c for c in cells if c.columns == cs.label]
        trend = []
        for eps in sorted({c.eps for c in mine}):
            row = sorted((c for c in mine if c.eps == eps), key=lambda c: c.rounds)
            if len(row) > 1:
                trend.append(
                    f"eps {fmt_eps(eps)}: T={row[0].rounds} {row[0].error:.3f} -> T={row[-1].rounds} "
                    f"{row[-1].error:.3f}"
                )
        if trend:
            lines.append(
                f"- {cs.label}, median error from the fewest to the most rounds: " + "; ".join(trend) + "."
            )
        most = max(c.rounds for c in mine)
        by_eps = sorted((c for c in mine if c.rounds == most), key=lambda c: c.eps)
        if len(by_eps) > 1:
            lines.append(
                f"- {cs.label}, median error against eps at T={most}: "
                + ", ".join(f"eps {fmt_eps(c.eps)}: {c.error:.3f}" for c in by_eps)
                + " (largest / smallest: "
                f"{max(c.error for c in by_eps) / min(c.error for c in by_eps):.2f}x)."
            )
        times = sorted({c.rounds: c.seconds for c in mine if c.eps == max(c.eps for c in mine)}.items())
        if len(times) > 1:
            lines.append(
                f"- {cs.label}, run time against rounds (eps {fmt_eps(max(c.eps for c in mine))}): "
                + ", ".join(f"T={t}: {seconds_text(s)}" for t, s in times)
                + f" (T={times[-1][0]} / T={times[0][0]}: {times[-1][1] / times[0][1]:.1f}x the time for "
                f"{times[-1][0] / times[0][0]:.1f}x the rounds)."
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
    if run.rows:
        last = run.rows[-1]
        per_update = last.synth_s / (last.synth_passes * last.round) if last.synth_passes else math.nan
        same = [r for r in steps if r.cells == run.cells]
        every = [r for r in same if r.aggregate]
        steps_alone = (
            every[0].marginal.synth_s + every[0].multiply.synth_s
            if every
            else statistics.median([r.marginal.synth_s + r.multiply.synth_s for r in same])
        )
        lines.append(
            f"- Round {last.round} of `mwem` makes {last.synth_passes * last.round} marginal updates (each a "
            f"`marginal_from_dense` and a `multiply_by_marginal` over {run.cells:,} cells): about "
            f"{duration(per_update)} per update in the round's time, against {duration(steps_alone)} for "
            "the two steps alone in section 2 ("
            + ("mean over every 3-way marginal" if every else "median over its subsets")
            + ")."
        )
    lines.append(
        f"- The first `mwem` call in a process costs about {duration(first.first_s - first.second_s)} more "
        "than "
        "later ones (section 0)."
    )
    lines.append(
        "- The machine is shared and noisy: figures are medians of alternating synth / NumPy samples; ratios "
        "can move by tens of percent between runs, and the best-sample ratios are a cross-check."
    )
    return "\n".join(lines)


def render(
    settings: Settings,
    calls: Sequence[FirstCall],
    first: FirstMWEM,
    sets: Sequence[ColumnSet],
    cells: Sequence[ErrorCell],
    passes: Sequence[PassesRow],
    steps: Sequence[StepRow],
    run: RoundRun,
    total_s: float,
    loads: tuple[str, str],
) -> str:
    machine = (
        f"{machine_info(np, numba)}\n- load average (1, 5, 15 min) at start: {loads[0]}; at end: {loads[1]} "
        "(the cores are shared)"
    )
    seeds = ", ".join(map(str, settings.seeds))
    return "\n".join(
        [
            *report_header("synth MWEM: benchmark results", machine, total_s),
            f"{repeats_note(settings.repeats)}; seed {settings.seed}",
            "",
            "## 0. First calls (JIT)",
            "",
            "First call through the library on a tiny input (a Numba cache load when the on-disk cache is "
            "valid, "
            "else a compile), and a from-scratch compile of the same kernel with caching off. Not in any "
            "figure "
            "below.",
            "",
            first_call_table(calls),
            "",
            mwem_first_lines(first),
            "",
            "## 1. Error against epsilon and rounds on adult",
            "",
            "`mwem(codes, schema, W, eps, rounds=T, rows=n, rng=seed)` (defaults otherwise: "
            "measure='marginal', "
            f"{DEFAULT_PASSES} MW passes, output='last'), W = `Workload.marginals(schema.select(columns), "
            "3)`, "
            f"n public. Seeds {seeds}. Error: mean over W's marginals of the L1 distance between the "
            "normalized true table and the model's (`marginal_from_dense(distribution, schema, s)`), the AIM "
            "paper's metric; the median over seeds, the range over seeds in brackets, the lowest median per "
            "row in bold. Time: the median wall time of the whole `mwem` call. MWEM measures each marginal "
            "at "
            "most once, so a T above the number of marginals runs one round per marginal.",
            "",
            *error_tables(sets, cells),
            f"### At eps = {fmt_eps(REFERENCE_EPS)}, 7 columns, next to reference figures",
            "",
            reference_table(sets, cells),
            "",
            "### Error against MW passes per round",
            "",
            f"The same runs with `passes=P` (mwem's default is {DEFAULT_PASSES}); medians over the same "
            "seeds, "
            "range in brackets. Each pass updates every measurement so far once.",
            "",
            passes_table(passes),
            "",
            passes_lines(passes),
            "",
            "## 2. MWEM's steps vs NumPy",
            "",
            "On a random float64 distribution over each universe. Update: `multiply_by_marginal(x, schema, "
            "cols, "
            "factors)` (in place, returns the new total) vs NumPy `x.reshape(shape) *= factors` transposed "
            "to "
            "schema order and broadcast over the other axes, then `x.sum()` (the total MWEM needs); also "
            "NumPy's "
            f"multiply alone. Factors exp(U(-{FACTOR_SPREAD:g}, {FACTOR_SPREAD:g})), alternately inverted. "
            "Marginal: `marginal_from_dense(x, schema, cols)` vs `x.reshape(shape).sum(axis=others)` (then a "
            "transpose view). Checked: identical weights, totals within 1e-9, marginals within 1e-9. Speed "
            "ratio = NumPy time / synth time on the medians (> 1: synth faster); 'best' on the fastest "
            "samples.",
            "",
            step_table(steps),
            "",
            step_rates(steps),
            "",
            f"### Whole rounds ({run.cells:,} cells, {run.marginals} 3-way marginals, eps = "
            f"{fmt_eps(REFERENCE_EPS)}, T = {run.rounds})",
            "",
            f"synth: the duration of round t inside `mwem(..., rounds={run.rounds}, rng={settings.seed})`, "
            "from "
            "the timestamps of its `progress` callback (round 1 also holds the run's set-up: true marginals "
            "from the rows); median over "
            f"{run.samples} runs. Round t scores every marginal not yet measured, selects (exponential "
            "mechanism), measures (discrete Laplace), then runs MW passes over all t measurements. NumPy: "
            "the "
            "same round in NumPy from the uniform distribution (reset outside the timing) with that run's "
            "first t measurements: the scores by reshape + sum, Gumbel-max selection, `rng.laplace` noise, "
            "then MW passes with mwem's stopping rule, each update a reshape + sum marginal and a broadcast "
            "multiply + `x.sum()` (no accounting, floating-point noise). Passes per round for synth counted "
            "in "
            "an untimed run of the same seed. Whole `mwem` run (all rounds): "
            f"{seconds_text(run.run_s)} median.",
            "",
            round_table(run),
            "",
            notes(sets, cells, steps, run, first),
            "",
        ]
    )


# -- main ------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = option_parser(
        __doc__,
        quick_help=f"eps {', '.join(map(fmt_eps, QUICK_EPSILONS))}, rounds "
        f"{', '.join(map(str, QUICK_ROUNDS))}, "
        f"2 seeds, {QUICK_STEP_SUBSETS} subsets per universe and 3 repeats (a smoke run)",
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
        passes_cases=QUICK_PASSES_CASES if quick else PASSES_CASES,
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
    run = bench_rounds(adult, settings)
    sets, cells = bench_error(adult, settings)
    passes = bench_passes(adult, settings)
    total_s = time.perf_counter() - started
    report = render(
        settings, calls, first, sets, cells, passes, steps, run, total_s, (load_start, load_average())
    )
    publish(SECTION, report, total_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
