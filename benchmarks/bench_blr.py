"""Benchmark the BLR net mechanism (``synth.engines.blr``): the exact-net kernel's speed against a NumPy
implementation of the same step, and the sampled net's error against the number of candidates
K on adult.

1. exact net, candidates scored per second: ``synth._kernels.net.sample_exact_net`` (every
   m-multiset of U in lexicographic order, query counts updated incrementally, streaming
   Gumbel-max) against NumPy doing the same work: the multisets from
   ``itertools.combinations_with_replacement`` in batches (``np.fromiter``), their query counts
   as sums of rows of the (U x Q) indicator matrix, the scores ``-max_q |m x_q - n y_q| / m``,
   then Gumbel-max (``rng.gumbel``). Also ``blr(...)`` end to end (indicator, true counts,
   kernel, accounting) and ``score_exact_net`` (the same walk and scores without the Gumbel
   draws). Checked: NumPy's scores equal ``score_exact_net``'s on every multiset.
2. sampled net on adult (4 columns, 120 cells, W = all 2-way marginals, 78 queries, eps = 1, n
   public): the error of ``blr(..., net="sampled", candidates=K, net_size=m)`` for K = 10 ...
   100,000 and a few m, and with blr's own m; error = mean over W's marginals of the L1 distance between the
   normalized true table and the released database's table (bench_mwem's metric); medians over
   seeds. Next to it: the uniform distribution's error and the exact net's (``blr`` with its
   default m, the largest net within ``max_net``).
0. first calls (JIT) of the two kernels ``blr`` uses, reported apart.

Every timing figure is a median of several repeats after a warm-up, synth and NumPy sampled in
turn. Prints a markdown report and writes it to its own section of ``benchmarks/RESULTS.md``
(``_results.write_section``; other sections are kept).

Usage: ``python benchmarks/bench_blr.py [--repeats N] [--quick] [--seed S] [--data-dir DIR]``
"""

from __future__ import annotations

import argparse
import itertools
import math
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numba
import numpy as np
from _data import DEFAULT_DATA_DIR, load_adult, mean_l1, project_codes
from _harness import (  # benchmarks/ is on sys.path when run as a script
    Comparison,
    FirstCall,
    Timed,
    duration,
    first_call,
    first_call_table,
    load_average,
    machine_info,
    markdown_table,
    option_parser,
    parse_options,
    publish,
    rate,
    repeats_note,
    report_header,
    round_robin,
    timed,
)

from synth import _kernels
from synth._kernels.net import sample_exact_net, score_exact_net
from synth.engines.blr import DEFAULT_MAX_NET, _QueryCounts, blr, choose_net_size, sampled_net_size
from synth.privacy.rng import kernel_state
from synth.data.schema import Schema
from synth.data.tables import marginal, marginal_from_dense
from synth.data.workload import Workload

SECTION = "bench_blr"

#: The adult columns of both sections: 5 x 2 x 2 x 6 = 120 cells.
COLUMNS = ("race", "sex", "income>50K", "relationship")
EPSILON = 1.0
NUMPY_BATCH = 1 << 14  # multisets scored per NumPy batch

#: Exact-net cases: (label, schema domain or None for the adult columns, marginal ways, m).
KERNEL_CASES = (
    ("U = 10 (1 column), 1-way", {"a": 10}, (1,), 8),
    ("U = 16 (4 x 4), 1- and 2-way", {"a": 4, "b": 4}, (1, 2), 6),
    ("U = 64 (4 x 4 x 4), 1- and 2-way", {"a": 4, "b": 4, "c": 4}, (1, 2), 4),
    ("adult, U = 120, 2-way", None, (2,), 3),
    ("adult, U = 120, 2-way", None, (2,), 4),  # blr's default m here (largest net within max_net)
)
QUICK_KERNEL_CASES = KERNEL_CASES[:4]

KS = (10, 100, 1_000, 10_000, 100_000)
QUICK_KS = (10, 100, 1_000, 10_000)
NET_SIZES = (4, 16, 64, 256)
QUICK_NET_SIZES = (4, 64)


@dataclass(frozen=True)
class Settings:
    repeats: int
    seeds: tuple[int, ...]
    kernel_cases: tuple
    ks: tuple[int, ...]
    net_sizes: tuple[int, ...]
    seed: int
    data_dir: Path


# -- the NumPy exact net ---------------------------------------------------------------------


def numpy_exact_net(
    indicator: np.ndarray,
    true_counts: np.ndarray,
    n_rows: int,
    m: int,
    scale: float,
    rng: np.random.Generator,
    scores_out: np.ndarray | None = None,
) -> np.ndarray:
    """Gumbel-max over every m-multiset of U in NumPy, batch by batch; returns the chosen cells.

    With ``scores_out`` the scores are also written there, in enumeration order (for the check).
    """
    multisets = itertools.combinations_with_replacement(range(indicator.shape[0]), m)
    true_scaled = m * true_counts
    best_key, best, done = -np.inf, None, 0
    while True:
        flat = np.fromiter(
            itertools.chain.from_iterable(itertools.islice(multisets, NUMPY_BATCH)), dtype=np.int64
        )
        if flat.size == 0:
            return best
        cells = flat.reshape(-1, m)
        counts = indicator[cells].sum(axis=1)  # (batch, Q): the rows of each multiset's cells
        scores = -np.abs(true_scaled - n_rows * counts).max(axis=1) / m
        if scores_out is not None:
            scores_out[done : done + scores.size] = scores
        keys = scale * scores + rng.gumbel(size=scores.size)
        i = int(np.argmax(keys))
        if keys[i] > best_key:
            best_key, best = keys[i], cells[i].copy()
        done += scores.size


def kernel_exact_net(
    indicator: np.ndarray, true_counts: np.ndarray, n_rows: int, m: int, scale: float, state: np.ndarray
) -> np.ndarray:
    """The whole net in one ``sample_exact_net`` call, from its documented start."""
    cells, counts = np.zeros(m, dtype=np.int64), m * indicator[0].copy()
    best, best_cells = np.array([-np.inf, 0.0]), np.zeros(m, dtype=np.int64)
    _, done = sample_exact_net(
        indicator, m * true_counts, n_rows, scale, state, cells, counts, 1 << 62, best, best_cells
    )
    assert done
    return best_cells


# -- 0. first calls --------------------------------------------------------------------------


def bench_first_calls(seed: int) -> list[FirstCall]:
    """First ``blr`` calls (exact, then sampled) on a tiny input: the kernels' JIT cost. Must run
    before any other use of the kernels."""
    schema = Schema.from_dict({"a": 3, "b": 2})
    workload = Workload.marginals(schema, 1)
    codes = np.zeros((4, 2), dtype=np.int64)
    exact = timed(lambda: blr(codes, schema, workload, 1.0, net_size=2, rows=4, rng=seed))
    sampled = timed(
        lambda: blr(codes, schema, workload, 1.0, net="sampled", candidates=8, net_size=2, rows=4, rng=seed)
    )
    indicator = np.ascontiguousarray(_QueryCounts(schema, workload).indicator())
    state = kernel_state(np.random.default_rng(seed))
    return [
        first_call(
            "sample_exact_net (blr exact net)",
            exact,
            sample_exact_net,
            (
                indicator,
                2 * np.ones(5, dtype=np.int64),
                4,
                0.5,
                state.copy(),
                np.zeros(2, dtype=np.int64),
                2 * indicator[0].copy(),
                1 << 20,
                np.array([-np.inf, 0.0]),
                np.zeros(2, dtype=np.int64),
            ),
        ),
        first_call(
            "gumbel_argmax (blr sampled net, whole first call)",
            sampled,
            _kernels.gumbel_argmax,
            (np.zeros(8), 0.5, state.copy(), -np.inf, -1, 0),
        ),
    ]


# -- 1. the exact net: candidates per second -------------------------------------------------


@dataclass(frozen=True)
class KernelRow:
    label: str
    universe: int
    queries: int
    m: int
    size: int
    cmp: Comparison
    blr_s: float  # median wall time of blr(...) end to end
    score_s: float  # median wall time of score_exact_net (the walk and the scores, no Gumbel draws)


def kernel_case(case, adult: tuple[Schema, np.ndarray], seed: int):
    """Schema, workload, true counts and public n of one exact-net case."""
    label, domain, ways, m = case
    if domain is None:
        schema, codes = project_codes(*adult, COLUMNS)
    else:
        schema = Schema.from_dict(domain)
        rng = np.random.default_rng(seed)
        codes = np.column_stack([rng.integers(0, s, size=1_000) for s in schema.shape])
    workload = Workload(schema, [q for way in ways for q in Workload.marginals(schema, way)])
    true = workload.answer({s: marginal(codes, schema, s) for s in workload.subsets}).astype(np.int64)
    return label, schema, workload, codes, true, len(codes), m


def time_case(case, adult: tuple[Schema, np.ndarray], settings: Settings) -> KernelRow:
    """One exact-net case: the check, then the kernel, NumPy, ``blr`` and ``score_exact_net`` in turn."""
    label, schema, workload, codes, true, n_rows, m = kernel_case(case, adult, settings.seed)
    indicator = np.ascontiguousarray(_QueryCounts(schema, workload).indicator())
    size = math.comb(schema.universe_size + m - 1, m)
    scale = EPSILON / 2
    # the check: the same scores in the same order
    ours, theirs = np.empty(size), np.empty(size)
    assert score_exact_net(indicator, m * true, n_rows, m, ours) == size
    numpy_exact_net(indicator, true, n_rows, m, scale, np.random.default_rng(0), scores_out=theirs)
    if not np.array_equal(ours, theirs):
        raise AssertionError(f"{label}, m={m}: NumPy's scores differ from score_exact_net's")
    state_rng = np.random.default_rng(settings.seed)
    numpy_rng = np.random.default_rng(settings.seed)
    entries = [
        Timed("synth", lambda: kernel_exact_net(indicator, true, n_rows, m, scale, kernel_state(state_rng))),
        Timed("base", lambda: numpy_exact_net(indicator, true, n_rows, m, scale, numpy_rng)),
        Timed(
            "blr",
            lambda: blr(
                codes, schema, workload, EPSILON, net_size=m, rows=n_rows, rng=state_rng, max_net=size
            ),
        ),
        Timed("score", lambda: score_exact_net(indicator, m * true, n_rows, m, ours)),
    ]
    times = round_robin(entries, settings.repeats)
    cmp = Comparison.of(f"{label}, m = {m}", size, "candidates", times["synth"], times["base"])
    return KernelRow(
        label,
        schema.universe_size,
        len(workload),
        m,
        size,
        cmp,
        statistics.median(times["blr"].seconds),
        statistics.median(times["score"].seconds),
    )


def bench_kernel(adult: tuple[Schema, np.ndarray], settings: Settings) -> list[KernelRow]:
    rows = []
    for case in settings.kernel_cases:
        row = time_case(case, adult, settings)
        rows.append(row)
        print(
            f"  exact net {row.label}, m={row.m}: {rate(row.size, row.cmp.synth_s, 'cand')} vs NumPy "
            f"{rate(row.size, row.cmp.base_s, 'cand')} ({row.cmp.ratio:.1f}x)",
            file=sys.stderr,
        )
    return rows


# -- 2. the sampled net's error against K ----------------------------------------------------


@dataclass(frozen=True)
class ErrorCell:
    m: int | str
    k: int
    error: float  # median over seeds
    error_min: float
    error_max: float
    seconds: float  # median wall time of the blr call
    default: bool = False  # m was blr's own choice


@dataclass(frozen=True)
class ErrorRun:
    rows: int
    universe: int
    queries: int
    marginals: int
    uniform: float
    exact_m: int
    exact: ErrorCell
    default_m: dict[int, int]  # blr's default m for the sampled net, per K
    cells: list[ErrorCell]


def error_of(distribution: np.ndarray, schema: Schema, truth: dict[tuple[str, ...], np.ndarray]) -> float:
    """``_data.mean_l1`` of a distribution over the universe."""
    return mean_l1(lambda s: marginal_from_dense(distribution, schema, s), truth)


def error_cell(label, k, runs, default: bool = False) -> ErrorCell:
    errors = [e for e, _ in runs]
    return ErrorCell(
        label, k, statistics.median(errors), min(errors), max(errors), statistics.median([s for _, s in runs]),
        default,
    )


def bench_error(adult: tuple[Schema, np.ndarray], settings: Settings) -> ErrorRun:
    schema, codes = project_codes(*adult, COLUMNS)
    workload = Workload.marginals(schema, 2)
    n = len(codes)
    truth = {s: marginal(codes, schema, s) / n for s in workload.subsets}
    uniform = error_of(np.full(schema.universe_size, 1 / schema.universe_size), schema, truth)

    def run(expect_m: int | None = None, **kwargs) -> tuple[float, float]:
        start = time.perf_counter()
        result = blr(codes, schema, workload, EPSILON, rows=n, **kwargs)
        seconds = time.perf_counter() - start
        if expect_m is not None and result.parameters["net_size"] != expect_m:
            raise AssertionError(f"blr chose m = {result.parameters['net_size']}, expected {expect_m}")
        return error_of(result.distribution, schema, truth), seconds

    exact_m = choose_net_size(schema.universe_size, len(workload), EPSILON, n, 0.05, DEFAULT_MAX_NET)
    exact = error_cell(
        exact_m,
        math.comb(schema.universe_size + exact_m - 1, exact_m),
        [run(rng=seed) for seed in settings.seeds],
    )
    cells = []
    for m in settings.net_sizes:
        for k in settings.ks:
            cells.append(
                error_cell(
                    m, k, [run(net="sampled", candidates=k, net_size=m, rng=seed) for seed in settings.seeds]
                )
            )
            print(
                f"  sampled net m={m}, K={k:,}: error {cells[-1].error:.3f} ({duration(cells[-1].seconds)})",
                file=sys.stderr,
            )
    default_m = {}
    for k in settings.ks:  # no net_size: blr's own choice for a sampled net (sampling error 0.1 of n)
        m = default_m[k] = sampled_net_size(len(workload), n, 0.05)
        defaults = [run(m, net="sampled", candidates=k, rng=s) for s in settings.seeds]
        cells.append(error_cell(m, k, defaults, default=True))
        print(f"  sampled net, default m={m:,}, K={k:,}: error {cells[-1].error:.3f}", file=sys.stderr)
    return ErrorRun(
        n,
        schema.universe_size,
        len(workload),
        len(workload.subsets),
        uniform,
        exact_m,
        exact,
        default_m,
        cells,
    )


# -- report ----------------------------------------------------------------------------------


def kernel_table(rows: Sequence[KernelRow]) -> str:
    columns = [
        ("case", "---"),
        ("Q", "---:"),
        ("m", "---:"),
        ("net size", "---:"),
        ("kernel median", "---:"),
        ("kernel rate", "---:"),
        ("NumPy median", "---:"),
        ("NumPy rate", "---:"),
        ("speed ratio", "---:"),
        ("best samples", "---:"),
        ("blr() end to end", "---:"),
        ("score_exact_net (no Gumbel)", "---:"),
    ]
    return markdown_table(
        columns,
        (
            [
                r.label,
                str(r.queries),
                str(r.m),
                f"{r.size:,}",
                duration(r.cmp.synth_s),
                rate(r.size, r.cmp.synth_s, "cand"),
                duration(r.cmp.base_s),
                rate(r.size, r.cmp.base_s, "cand"),
                f"{r.cmp.ratio:.1f}x",
                f"{r.cmp.best_ratio:.1f}x",
                f"{duration(r.blr_s)} ({rate(r.size, r.blr_s, 'cand')})",
                rate(r.size, r.score_s, "cand"),
            ]
            for r in rows
        ),
    )


def error_table(run: ErrorRun, settings: Settings) -> str:
    columns = [("K", "---:")] + [(f"m = {m}", "---:") for m in settings.net_sizes]
    columns.append(("blr's default m", "---:"))
    by = {(c.m, c.k, c.default): c for c in run.cells}
    lines = []
    for k in settings.ks:
        cells = [by.get((m, k, False)) for m in settings.net_sizes] + [by.get((run.default_m[k], k, True))]
        best = min(c.error for c in cells if c is not None)
        lines.append(
            [f"{k:,}"]
            + [
                "-"
                if c is None
                else ("m = {:,}: ".format(c.m) if c.default else "")
                + (f"**{c.error:.3f}**" if c.error == best else f"{c.error:.3f}")
                + f" [{c.error_min:.3f}, {c.error_max:.3f}], {duration(c.seconds)}"
                for c in cells
            ]
        )
    return markdown_table(columns, lines)


def notes(rows: Sequence[KernelRow], run: ErrorRun, settings: Settings) -> str:
    lines = []
    if rows:
        rates = [r.size / r.cmp.synth_s for r in rows]
        ratios = [r.cmp.ratio for r in rows]
        walk = [r.size / r.score_s for r in rows]
        per = [1e9 * r.cmp.synth_s / r.size for r in rows]
        lines.append(
            f"- The kernel scores {min(rates) / 1e6:.1f}-{max(rates) / 1e6:.1f} M candidates/s "
            f"({min(per):.0f}-{max(per):.0f} ns each) for {min(r.queries for r in rows)}-"
            f"{max(r.queries for r in rows)} queries, and the walk with the scores alone "
            f"(`score_exact_net`, no Gumbel draws) runs at {min(walk) / 1e6:.0f}-{max(walk) / 1e6:.0f} M/s: "
            "the cost per candidate hardly depends on Q nor on the Gumbel draw, it is a fixed cost of the "
            f"walk's steps. NumPy is {min(ratios):.1f}-{max(ratios):.1f}x slower (the itertools "
            "enumeration and the (batch, m, Q) gather)."
        )
    best = min(run.cells, key=lambda c: c.error)
    default = [c for c in run.cells if c.default]
    lines.append(
        f"- Sampled net (uniform candidates): the lowest median error is {best.error:.3f} (m = {best.m}, "
        f"K = {best.k:,}), against {run.uniform:.3f} for the uniform distribution and {run.exact.error:.3f} "
        f"for the exact net (m = {run.exact_m}, {run.exact.k:,} candidates, {duration(run.exact.seconds)}). "
        "Small databases drawn uniformly are rarely close to skewed data: more candidates help slowly, "
        "and a larger m makes each candidate closer to the uniform distribution (its error tends to the "
        "uniform one's) rather than to the data."
    )
    if default:
        lines.append(
            "- `blr`'s default m for the sampled net minimizes the exact net's bound among the nets of at most "
            f"max(K, |U|) databases (m = {min(run.default_m.values())}-{max(run.default_m.values())} here): a "
            "larger m would make every random candidate close to the uniform distribution. Its error: "
            + ", ".join(f"K = {c.k:,}: {c.error:.3f}" for c in default) + "."
        )
    return "\n".join(lines)


def render(settings: Settings, calls, rows, run: ErrorRun, total_s: float, loads: tuple[str, str]) -> str:
    machine = (
        f"{machine_info(np, numba)}\n- load average (1, 5, 15 min) at start: {loads[0]}; at end: {loads[1]} "
        "(the cores are shared)"
    )
    seeds = ", ".join(map(str, settings.seeds))
    return "\n".join(
        [
            *report_header("synth BLR net mechanism: benchmark results", machine, total_s),
            f"{repeats_note(settings.repeats)}; seed {settings.seed}",
            "",
            "## 0. First calls (JIT)",
            "",
            (
                "The first `blr` call of the process on a tiny input (exact net, then sampled net): a Numba "
                "cache load when the on-disk cache is valid, else a compile; then a from-scratch compile of "
                "the kernel with caching off. Not in any figure below."
            ),
            "",
            first_call_table(calls),
            "",
            "## 1. Exact net: candidates scored per second",
            "",
            (
                "Kernel: `sample_exact_net` over the whole net in one call (the walk moves one element at a "
                "time and updates the Q query counts incrementally; streaming Gumbel-max; nothing stored). "
                f"NumPy: the same step in batches of {NUMPY_BATCH:,} multisets: "
                "`itertools.combinations_with_replacement` into an array (`np.fromiter`), counts as "
                "`indicator[cells].sum(axis=1)` over the (U x Q) 0/1 indicator, scores "
                "`-max_q |m x_q - n y_q| / m`, keys `scale * score + rng.gumbel()`, running argmax. Checked: "
                "NumPy's scores equal `score_exact_net`'s, in order, on every multiset. Speed ratio = NumPy "
                "time / kernel time on the medians ('best samples' on the fastest). The last two columns: "
                "`blr(codes, schema, W, 1.0, net_size=m, rows=n)` end to end (indicator, true counts, "
                "kernel, accounting), and the rate of `score_exact_net` (the same walk and scores, written "
                "to an array, without the Gumbel draws). Synthetic data (1,000 random rows) except the "
                f"adult rows (4 columns: {', '.join(COLUMNS)})."
            ),
            "",
            kernel_table(rows),
            "",
            "## 2. Sampled net: error against the number of candidates K on adult",
            "",
            (
                f"`blr(codes, schema, W, {EPSILON:g}, net='sampled', candidates=K, net_size=m, rows=n, "
                f"rng=seed)`, adult columns {', '.join(COLUMNS)} ({run.universe} cells), W = all 2-way "
                f"marginals ({run.marginals} marginals, {run.queries} queries), n = {run.rows:,} public, "
                "uniform candidates. Error: mean over W's marginals of the L1 distance between the "
                "normalized true table and the released database's (bench_mwem's metric); median over seeds "
                f"{seeds}, range in brackets, lowest per row in bold; then the median wall time of the `blr` "
                "call."
            ),
            "",
            error_table(run, settings),
            "",
            f"- uniform distribution: {run.uniform:.3f}",
            (
                f"- exact net (`blr` default m = {run.exact_m}, the largest net within max_net = "
                f"{DEFAULT_MAX_NET:,}: {run.exact.k:,} candidates): {run.exact.error:.3f} "
                f"[{run.exact.error_min:.3f}, {run.exact.error_max:.3f}], {duration(run.exact.seconds)}"
            ),
            "",
            "## Notes (from this run's figures)",
            "",
            notes(rows, run, settings),
            "",
        ]
    )


# -- main ------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = option_parser(
        __doc__,
        quick_help=f"the first {len(QUICK_KERNEL_CASES)} exact-net cases, K up to {QUICK_KS[-1]:,}, m in "
        f"{', '.join(map(str, QUICK_NET_SIZES))} and blr's default, "
        "2 seeds and 3 repeats (a smoke run)",
    )
    parser.add_argument(
        "--data-dir", type=Path, default=DEFAULT_DATA_DIR, help="folder with adult.csv and adult-domain.json"
    )
    parser.add_argument("--seed", type=int, default=0, help="first seed of the runs (seeds S, S+1, ...)")
    args = parse_options(parser, argv)
    if args.seed < 0:
        parser.error("--seed must be >= 0")
    return args


def settings_from(args: argparse.Namespace) -> Settings:
    quick = args.quick
    return Settings(
        repeats=args.repeats,
        seeds=tuple(args.seed + i for i in range(2 if quick else 3)),
        kernel_cases=QUICK_KERNEL_CASES if quick else KERNEL_CASES,
        ks=QUICK_KS if quick else KS,
        net_sizes=QUICK_NET_SIZES if quick else NET_SIZES,
        seed=args.seed,
        data_dir=args.data_dir,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    settings = settings_from(args)
    adult = load_adult(settings.data_dir)  # fail early on a missing dataset
    started = time.perf_counter()
    load_start = load_average()
    calls = bench_first_calls(settings.seed)
    rows = bench_kernel(adult, settings)
    run = bench_error(adult, settings)
    total_s = time.perf_counter() - started
    publish(SECTION, render(settings, calls, rows, run, total_s, (load_start, load_average())), total_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
