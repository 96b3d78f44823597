"""Benchmark the BLR net mechanism (``synth.engines.blr``): the exact-net kernel's speed against a NumPy
implementation of the same step, and the sampled net's error against the number of candidates
K on adult.

1. exact net, candidates scored per second: ``synth._kernels.net.sample_exact_net`` (every
   m-multiset of U in lexicographic order, query counts updated incrementally, streaming
   Gumbel-max) against NumPy doing the same work (``_baselines.exact_net``: the multisets from
   ``itertools.combinations_with_replacement`` in batches, their query counts as sums of rows of
   the (U x Q) indicator matrix, the scores ``-max_q |m x_q - n y_q| / m``, then Gumbel-max).
   Also ``blr(...)`` end to end (indicator, true counts, kernel, accounting) and
   ``score_exact_net`` (the same walk and scores without the Gumbel draws). Checked: NumPy's
   scores equal ``score_exact_net``'s on every multiset.
2. sampled net on adult (4 columns, 120 cells, W = all 2-way marginals, 78 queries, eps = 1, n
   public): the error of ``blr(..., net="sampled", candidates=K, net_size=m)`` for K = 10 ...
   100,000 and a few m, and with blr's own m; error ``_data.mean_l1``; medians over seeds. Next
   to it: the uniform distribution's error and the exact net's (``blr`` with its default m, the
   largest net within ``max_net``).
0. first calls (JIT) of the two kernels ``blr`` uses, reported apart.

Usage: ``python benchmarks/bench_blr.py [--repeats N] [--quick] [--seed S] [--seeds K] [--data-dir DIR]
[--no-write]``
"""

from __future__ import annotations

import math
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import numba
import numpy as np
from _baselines import NET_BATCH, exact_net
from _data import Marginals, project_codes
from _harness import Session, session
from _report import document, duration, first_call_table, rate, seeds_text, table
from _timing import Comparison, FirstCall, Spread, Timed, first_call, medians, round_robin, timed, with_time

from synth import _kernels
from synth._kernels.net import sample_exact_net, score_exact_net
from synth.data.schema import Schema
from synth.data.tables import marginal
from synth.data.workload import Workload
from synth.engines.blr import DEFAULT_MAX_NET, _QueryCounts, blr, choose_net_size, sampled_net_size
from synth.privacy.rng import kernel_state

SECTION = "bench_blr"
#: The adult columns of both sections: 5 x 2 x 2 x 6 = 120 cells.
COLUMNS = ("race", "sex", "income>50K", "relationship")
EPSILON = 1.0
#: Exact-net cases: (label, schema domain or None for the adult columns, marginal ways, m); the
#: first four with --quick.
KERNEL_CASES = (
    ("U = 10 (1 column), 1-way", {"a": 10}, (1,), 8),
    ("U = 16 (4 x 4), 1- and 2-way", {"a": 4, "b": 4}, (1, 2), 6),
    ("U = 64 (4 x 4 x 4), 1- and 2-way", {"a": 4, "b": 4, "c": 4}, (1, 2), 4),
    ("adult, U = 120, 2-way", None, (2,), 3),
    ("adult, U = 120, 2-way", None, (2,), 4),  # blr's default m here (largest net within max_net)
)
QUICK_KERNEL_CASES = 4
#: Candidates K and net sizes m of the sampled net, (full, quick).
KS = ((10, 100, 1_000, 10_000, 100_000), (10, 100, 1_000, 10_000))
NET_SIZES = ((4, 16, 64, 256), (4, 64))


def kernel_exact_net(indicator: np.ndarray, true_counts: np.ndarray, n_rows: int, m: int, scale: float,
                     state: np.ndarray) -> np.ndarray:
    """The whole net in one ``sample_exact_net`` call, from its documented start."""
    cells, counts = np.zeros(m, dtype=np.int64), m * indicator[0].copy()
    best, best_cells = np.array([-np.inf, 0.0]), np.zeros(m, dtype=np.int64)
    _, done = sample_exact_net(indicator, m * true_counts, n_rows, scale, state, cells, counts, 1 << 62, best,
                               best_cells)
    assert done
    return best_cells


# -- 0. first calls --------------------------------------------------------------------------


def bench_first_calls(seed: int) -> list[FirstCall]:
    """First ``blr`` calls (exact, then sampled) on a tiny input: the kernels' JIT cost. Must run
    before any other use of the kernels."""
    schema = Schema.from_dict({"a": 3, "b": 2})
    workload, codes = Workload.marginals(schema, 1), np.zeros((4, 2), dtype=np.int64)
    exact = timed(lambda: blr(codes, schema, workload, 1.0, net_size=2, rows=4, rng=seed))
    sampled = timed(lambda: blr(codes, schema, workload, 1.0, net="sampled", candidates=8, net_size=2, rows=4,
                                rng=seed))
    indicator = np.ascontiguousarray(_QueryCounts(schema, workload).indicator())
    state = kernel_state(np.random.default_rng(seed))
    exact_args = (indicator, 2 * np.ones(5, dtype=np.int64), 4, 0.5, state.copy(),
                  np.zeros(2, dtype=np.int64), 2 * indicator[0].copy(), 1 << 20, np.array([-np.inf, 0.0]),
                  np.zeros(2, dtype=np.int64))
    return [first_call("sample_exact_net (blr exact net)", exact, sample_exact_net, exact_args),
            first_call("gumbel_argmax (blr sampled net, whole first call)", sampled, _kernels.gumbel_argmax,
                       (np.zeros(8), 0.5, state.copy(), -np.inf, -1, 0))]


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
        schema, rng = Schema.from_dict(domain), np.random.default_rng(seed)
        codes = np.column_stack([rng.integers(0, s, size=1_000) for s in schema.shape])
    workload = Workload(schema, [q for way in ways for q in Workload.marginals(schema, way)])
    true = workload.answer({s: marginal(codes, schema, s) for s in workload.subsets}).astype(np.int64)
    return label, schema, workload, codes, true, len(codes), m


def time_case(case, adult: tuple[Schema, np.ndarray], run: Session) -> KernelRow:
    """One exact-net case: the check, then the kernel, NumPy, ``blr`` and ``score_exact_net`` in turn."""
    label, schema, workload, codes, true, n_rows, m = kernel_case(case, adult, run.seed)
    indicator = np.ascontiguousarray(_QueryCounts(schema, workload).indicator())
    size, scale = math.comb(schema.universe_size + m - 1, m), EPSILON / 2
    ours, theirs = np.empty(size), np.empty(size)  # the check: the same scores in the same order
    assert score_exact_net(indicator, m * true, n_rows, m, ours) == size
    exact_net(indicator, true, n_rows, m, scale, np.random.default_rng(0), scores_out=theirs)
    if not np.array_equal(ours, theirs):
        raise AssertionError(f"{label}, m={m}: NumPy's scores differ from score_exact_net's")
    state_rng, numpy_rng = np.random.default_rng(run.seed), np.random.default_rng(run.seed)
    times = round_robin([
        Timed("synth", lambda: kernel_exact_net(indicator, true, n_rows, m, scale, kernel_state(state_rng))),
        Timed("base", lambda: exact_net(indicator, true, n_rows, m, scale, numpy_rng)),
        Timed("blr", lambda: blr(codes, schema, workload, EPSILON, net_size=m, rows=n_rows, rng=state_rng,
                                 max_net=size)),
        Timed("score", lambda: score_exact_net(indicator, m * true, n_rows, m, ours)),
    ], run.repeats)
    cmp = Comparison.of(f"{label}, m = {m}", size, "candidates", times["synth"], times["base"])
    med = medians(times)
    row = KernelRow(label, schema.universe_size, len(workload), m, size, cmp, med["blr"], med["score"])
    run.say(f"  exact net {label}, m={m}: {rate(size, cmp.synth_s, 'cand')} vs NumPy "
            f"{rate(size, cmp.base_s, 'cand')} ({cmp.ratio:.1f}x)")
    return row


# -- 2. the sampled net's error against K ----------------------------------------------------


@dataclass(frozen=True)
class ErrorCell:
    m: int
    k: int
    error: Spread  # over seeds
    seconds: float  # median wall time of the blr call
    default: bool = False  # m was blr's own choice

    def text(self, best: float) -> str:
        e = self.error
        return (("m = {:,}: ".format(self.m) if self.default else "")
                + (f"**{e.median:.3f}**" if e.median == best else f"{e.median:.3f}")
                + f" [{e.low:.3f}, {e.high:.3f}], {duration(self.seconds)}")


def bench_error(adult: tuple[Schema, np.ndarray], run: Session) -> tuple:
    """The exact net's cell, the sampled nets' cells (per m and K, then blr's own m per K), the
    uniform distribution's error, and the case."""
    case = Marginals.of(adult, COLUMNS, way=2)
    n = case.rows

    def cell(m: int, k: int, default: bool = False, **options) -> ErrorCell:
        runs = []
        for seed in run.seeds:
            result, seconds = with_time(lambda: blr(case.codes, case.schema, case.workload, EPSILON, rows=n,
                                                    rng=seed, **options))
            if default and result.parameters["net_size"] != m:
                raise AssertionError(f"blr chose m = {result.parameters['net_size']}, expected {m}")
            runs.append((case.error(result.distribution), seconds))
        return ErrorCell(m, k, Spread.of(e for e, _ in runs), statistics.median(s for _, s in runs), default)

    universe, queries = case.schema.universe_size, len(case.workload)
    exact_m = choose_net_size(universe, queries, EPSILON, n, 0.05, DEFAULT_MAX_NET)
    exact = cell(exact_m, math.comb(universe + exact_m - 1, exact_m))
    cells = []
    for m in run.pick(*NET_SIZES):
        for k in run.pick(*KS):
            cells.append(cell(m, k, net="sampled", candidates=k, net_size=m))
            run.say(f"  sampled net m={m}, K={k:,}: error {cells[-1].error.median:.3f} "
                    f"({duration(cells[-1].seconds)})")
    for k in run.pick(*KS):  # no net_size: blr's own choice for a sampled net (sampling error 0.1 of n)
        cells.append(cell(sampled_net_size(queries, n, 0.05), k, True, net="sampled", candidates=k))
        run.say(f"  sampled net, default m={cells[-1].m:,}, K={k:,}: error {cells[-1].error.median:.3f}")
    return exact, cells, case.uniform_error(), case


# -- report ----------------------------------------------------------------------------------


def kernel_table(rows: Sequence[KernelRow]) -> str:
    return table("@case|Q|m|net size|kernel median|kernel rate|NumPy median|NumPy rate|speed ratio|"
                 "best samples|blr() end to end|score_exact_net (no Gumbel)",
                 [[r.label, str(r.queries), str(r.m), f"{r.size:,}", duration(r.cmp.synth_s),
                   rate(r.size, r.cmp.synth_s, "cand"), duration(r.cmp.base_s),
                   rate(r.size, r.cmp.base_s, "cand"),
                   f"{r.cmp.ratio:.1f}x", f"{r.cmp.best_ratio:.1f}x",
                   f"{duration(r.blr_s)} ({rate(r.size, r.blr_s, 'cand')})", rate(r.size, r.score_s, "cand")]
                  for r in rows])


def error_table(cells: Sequence[ErrorCell], run: Session) -> str:
    net_sizes, by = run.pick(*NET_SIZES), {(c.m if not c.default else "default", c.k): c for c in cells}
    lines = []
    for k in run.pick(*KS):
        row = [by.get((m, k)) for m in net_sizes] + [by.get(("default", k))]
        best = min(c.error.median for c in row if c is not None)
        lines.append([f"{k:,}"] + ["-" if c is None else c.text(best) for c in row])
    return table(["K", *(f"m = {m}" for m in net_sizes), "blr's default m"], lines)


def notes(rows: Sequence[KernelRow], exact: ErrorCell, cells: Sequence[ErrorCell], uniform: float) -> str:
    lines = []
    if rows:
        rates, ratios = [r.size / r.cmp.synth_s for r in rows], [r.cmp.ratio for r in rows]
        walk, per = [r.size / r.score_s for r in rows], [1e9 * r.cmp.synth_s / r.size for r in rows]
        lines.append(
            f"- The kernel scores {min(rates) / 1e6:.1f}-{max(rates) / 1e6:.1f} M candidates/s "
            f"({min(per):.0f}-{max(per):.0f} ns each) for {min(r.queries for r in rows)}-"
            f"{max(r.queries for r in rows)} queries, and the walk with the scores alone "
            f"(`score_exact_net`, no Gumbel draws) runs at {min(walk) / 1e6:.0f}-{max(walk) / 1e6:.0f} M/s: "
            "the cost per candidate hardly depends on Q nor on the Gumbel draw, it is a fixed cost of the "
            f"walk's steps. NumPy is {min(ratios):.1f}-{max(ratios):.1f}x slower (the itertools "
            "enumeration and the (batch, m, Q) gather)."
        )
    best = min(cells, key=lambda c: c.error.median)
    default = [c for c in cells if c.default]
    lines.append(
        "- Sampled net (uniform candidates): the lowest median error is "
        f"{best.error.median:.3f} (m = {best.m}, K = {best.k:,}), against {uniform:.3f} for the uniform "
        f"distribution and {exact.error.median:.3f} "
        f"for the exact net (m = {exact.m}, {exact.k:,} candidates, {duration(exact.seconds)}). "
        "Small databases drawn uniformly are rarely close to skewed data: more candidates help slowly, "
        "and a larger m makes each candidate closer to the uniform distribution (its error tends to the "
        "uniform one's) rather than to the data."
    )
    if default:
        lines.append(
            "- `blr`'s default m for the sampled net minimizes the exact net's bound among the nets of at "
            f"most max(K, |U|) databases (m = {min(c.m for c in default)}-{max(c.m for c in default)} here): "
            "a "
            "larger m would make every random candidate close to the uniform distribution. Its error: "
            + ", ".join(f"K = {c.k:,}: {c.error.median:.3f}" for c in default) + "."
        )
    return "\n".join(lines)


def render(run: Session, calls, rows, exact: ErrorCell, cells, uniform: float, case: Marginals) -> str:
    return document(
        run.header("synth BLR net mechanism: benchmark results", (np, numba), f"; seed {run.seed}"),
        "## 0. First calls (JIT)",
        "The first `blr` call of the process on a tiny input (exact net, then sampled net): a Numba "
        "cache load when the on-disk cache is valid, else a compile; then a from-scratch compile of "
        "the kernel with caching off. Not in any figure below.",
        first_call_table(calls),
        "## 1. Exact net: candidates scored per second",
        "Kernel: `sample_exact_net` over the whole net in one call (the walk moves one element at a "
        "time and updates the Q query counts incrementally; streaming Gumbel-max; nothing stored). "
        f"NumPy: the same step in batches of {NET_BATCH:,} multisets: "
        "`itertools.combinations_with_replacement` into an array (`np.fromiter`), counts as "
        "`indicator[cells].sum(axis=1)` over the (U x Q) 0/1 indicator, scores "
        "`-max_q |m x_q - n y_q| / m`, keys `scale * score + rng.gumbel()`, running argmax. Checked: "
        "NumPy's scores equal `score_exact_net`'s, in order, on every multiset. Speed ratio = NumPy "
        "time / kernel time on the medians ('best samples' on the fastest). The last two columns: "
        "`blr(codes, schema, W, 1.0, net_size=m, rows=n)` end to end (indicator, true counts, "
        "kernel, accounting), and the rate of `score_exact_net` (the same walk and scores, written "
        "to an array, without the Gumbel draws). Synthetic data (1,000 random rows) except the "
        f"adult rows (4 columns: {', '.join(COLUMNS)}).",
        kernel_table(rows),
        "## 2. Sampled net: error against the number of candidates K on adult",
        f"`blr(codes, schema, W, {EPSILON:g}, net='sampled', candidates=K, net_size=m, rows=n, "
        f"rng=seed)`, adult columns {', '.join(COLUMNS)} ({case.schema.universe_size} cells), W = all 2-way "
        f"marginals ({case.marginals} marginals, {len(case.workload)} queries), n = {case.rows:,} public, "
        "uniform candidates. Error: mean over W's marginals of the L1 distance between the "
        "normalized true table and the released database's (bench_mwem's metric); median over seeds "
        f"{seeds_text(run.seeds)}, range in brackets, lowest per row in bold; then the median wall time of "
        "the `blr` call.",
        error_table(cells, run),
        [f"- uniform distribution: {uniform:.3f}",
         f"- exact net (`blr` default m = {exact.m}, the largest net within max_net = {DEFAULT_MAX_NET:,}: "
         f"{exact.k:,} candidates): {exact.error.median:.3f} [{exact.error.low:.3f}, "
         f"{exact.error.high:.3f}], {duration(exact.seconds)}"],
        "## Notes (from this run's figures)",
        notes(rows, exact, cells, uniform),
    )


def main(argv: Sequence[str] | None = None) -> int:
    quick = (f"the first {QUICK_KERNEL_CASES} exact-net cases, K up to {KS[1][-1]:,}, m in "
             f"{', '.join(map(str, NET_SIZES[1]))} and blr's default, 2 seeds and 3 repeats (a smoke run)")
    run = session(__doc__, quick, argv, seeds=(3, 2))
    adult = run.adult()  # fail early on a missing dataset
    calls = bench_first_calls(run.seed)
    rows = [time_case(case, adult, run) for case in run.pick(KERNEL_CASES, KERNEL_CASES[:QUICK_KERNEL_CASES])]
    exact, cells, uniform, case = bench_error(adult, run)
    run.publish(SECTION, render(run, calls, rows, exact, cells, uniform, case))
    return 0


if __name__ == "__main__":
    sys.exit(main())
