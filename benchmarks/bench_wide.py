"""Wide tables (issue 29): synth's MWEM against MST and independent marginals, all computed here,
on all two-way marginals of three wide tables: error, time and peak memory.

Tables (``_wide``): adult-raw finely binned (32,561 rows, 15 columns; pairs up to 9,900 cells), a
trip-like Bayesian network (226,000 rows, 10 columns, four of 78..101 values) and a census-like one
(170,000 rows, 35 columns, sizes 2..181). Workload: every 2-way marginal. epsilon = 1, delta =
1e-9, n a noisy count (synth buys it; the baselines estimate it from their noisy tables).

Methods: ``independent`` and ``MST`` (``_mst``: our NumPy reimplementation, rho-zCDP with rho =
``zcdp_rho_limit(1, 1e-9)``, continuous Gaussian noise); synth's ``mwem(..., selection=S)``
for S = ``auto`` (the library's default), ``classic`` and ``adaptive``, each with synth's own
estimate of its time (``MWEMEngine.estimate``, made before any data is read) printed before it runs.

Error: the mean over the pairs of the L1 distance between the normalized true table and the
model's table (the released distribution's marginals, not a sample). Each method runs in a
fresh process (``_isolate``: multiprocessing 'spawn'); time: the method's call in that process
(synth's includes loading its cached Numba kernels); memory: the process's peak resident set
(``ru_maxrss``, taken right after the call), next to its mark before the call (interpreter,
libraries, data; the peak is reset to it at the call's start, ``_isolate``). A call past
``--limit`` seconds is stopped and reported so, and not rerun for later seeds. Where ``auto``
chose classic (or adaptive) rounds for a seed, the ``classic`` (``adaptive``) figure of that seed
is that same run (same seed, same draws), not run again. Figures: medians over seeds [range].
Each table is its own section of RESULTS.md (``bench_wide.<table>``), so tables can be run
apart (``--tables``).

Usage: ``python benchmarks/bench_wide.py [--quick] [--seed S] [--seeds K]
[--tables adult-fine,trip10,census35] [--methods ...] [--limit SECONDS] [--no-write]``
"""

from __future__ import annotations

import itertools
import math
import time

import numpy as np
import scipy
from _harness import session
from _isolate import Stopped, isolated, peak_mb
from _report import seeds_text, table
from _timing import Spread
from _wide import TABLES, build

SECTION = "bench_wide"
EPSILON, DELTA = 1.0, 1e-9
METHODS = ("independent", "MST", "synth auto", "synth adaptive", "synth classic")
QUICK_TABLES = ("adult-fine", "trip10")
LIMIT_S = 900.0


def measure(name: str, data_dir, method: str, seed: int, started) -> dict:
    """One method on one table and seed, in its own process (``_isolate``): error, seconds, peak MB."""
    import _mst
    from synth.data.tables import marginal
    from synth.data.workload import Workload
    from synth.engines.mwem import mwem
    from synth.models.distribution import as_distribution
    from synth.privacy.composition import zcdp_rho_limit

    schema, codes = build(name, data_dir)
    workload = Workload.marginals(schema, 2)
    rho = zcdp_rho_limit(EPSILON, DELTA)
    started()
    start = time.perf_counter()
    if method.startswith("synth"):
        result = mwem(codes, schema, workload, EPSILON, delta=DELTA, rng=seed, selection=method.split()[1])
        seconds, peak = time.perf_counter() - start, peak_mb()
        model = as_distribution(result.distribution, schema)
        found = dict(zip(workload.subsets, model.marginals(list(workload.subsets))))
        p = result.parameters
        extra = {"selection": p["selection"], "rounds": p["rounds"], "model_cells": p["model_cells"]}
    else:
        fit = _mst.mst if method == "MST" else _mst.Independent.fit
        model = fit(codes, schema.shape, rho, np.random.default_rng(seed))
        seconds, peak = time.perf_counter() - start, peak_mb()
        found = {s: model.pair(schema.index(s[0]), schema.index(s[1])) for s in workload.subsets}
        extra = {}
    n = len(codes)
    error = np.mean([np.abs(found[s] - marginal(codes, schema, s) / n).sum() for s in workload.subsets])
    return {"error": float(error), "seconds": seconds, "peak_mb": peak, **extra}


def estimates(schema, workload) -> dict[str, object]:
    """synth's own time estimate per synth method (an ``Estimate`` or None)."""
    from synth.engines.mwem import MWEMConfig, MWEMEngine
    from synth.privacy.accounting import Budget

    budget = Budget(EPSILON, DELTA)
    return {m: MWEMEngine(MWEMConfig(selection=m.split()[1]), schema, workload).estimate(budget)
            for m in METHODS if m.startswith("synth")}


def describe(name: str, schema, codes) -> str:
    sizes = schema.shape
    cells = sorted((a * b for a, b in itertools.combinations(sizes, 2)), reverse=True)
    return (f"{TABLES[name][0]}: {len(codes):,} rows, {len(sizes)} columns, "
            f"sizes {', '.join(map(str, sizes))}; "
            f"{len(cells)} pairs, the largest {', '.join(f'{c:,}' for c in cells[:3])} cells; universe "
            f"10^{math.log10(schema.universe_size):.1f} cells.")


def add_options(parser) -> None:
    parser.add_argument("--tables", default=None,
                        help=f"comma-separated, from {', '.join(TABLES)} (default all; with --quick "
                             f"{', '.join(QUICK_TABLES)})")
    parser.add_argument("--methods", default=",".join(METHODS),
                        help=f"comma-separated, from: {', '.join(METHODS)}")
    parser.add_argument("--limit", type=float, default=LIMIT_S,
                        help=f"seconds before a method's call is stopped (default {LIMIT_S:g})")


def main(argv=None) -> None:
    bench = session(__doc__, "one seed, the adult-fine and trip10 tables only", argv, add_options,
                    seeds=(3, 1))
    names = bench.args.tables.split(",") if bench.args.tables else list(bench.pick(TABLES, QUICK_TABLES))
    methods = bench.args.methods.split(",")
    for bad in [n for n in names if n not in TABLES] + [m for m in methods if m not in METHODS]:
        raise SystemExit(f"bench_wide: unknown table or method {bad!r}")
    from synth.data.workload import Workload

    for name in names:
        schema, codes = build(name, bench.args.data_dir)
        bench.say(describe(name, schema, codes))
        guesses = estimates(schema, Workload.marginals(schema, 2))
        for method, guess in guesses.items():
            bench.say(f"  {method}: synth's estimate: {estimate_text(guess)}")
        runs: dict[str, list] = {m: [] for m in methods}
        for seed in bench.seeds:
            for method in methods:
                if any(isinstance(r, Stopped) for r in runs[method]):
                    continue  # stopped once: not rerun
                auto = runs.get("synth auto", [])[-1:] if method.endswith(("adaptive", "classic")) else []
                if auto and not isinstance(auto[0], Stopped) and method.endswith(auto[0]["selection"]):
                    runs[method].append({**auto[0], "reused": True})  # the same seeded run: not repeated
                    continue
                with bench.stage(f"{name}, {method}, seed {seed}"):
                    run = isolated(measure, (name, bench.args.data_dir, method, seed), bench.args.limit)
                runs[method].append(run)
                bench.say("  " + progress_text(run))
        bench.publish(f"{SECTION}.{name}", report(bench, name, schema, codes, runs, guesses))


def estimate_text(guess, method: str = "synth") -> str:
    if not method.startswith("synth"):
        return ""
    return guess.describe() if guess else "none"


def progress_text(run) -> str:
    if isinstance(run, Stopped):
        return f"stopped after {run.seconds:.0f} s"
    text = f"L1 {run['error']:.4f}, {run['seconds']:.1f} s, {run['peak_mb']:.0f} MB"
    return text + (f", {run['selection']}, {run['rounds']} rounds" if "rounds" in run else "")


def row(method: str, runs: list, guess) -> list[str]:
    done = [r for r in runs if not isinstance(r, Stopped)]
    stopped = [r for r in runs if isinstance(r, Stopped)]
    if not done:
        r = stopped[0]
        return [method, "", f"stopped after {r.seconds:.0f} s", "", "", f"{r.start_mb:.0f} MB",
                estimate_text(guess, method), ""]
    spread = {key: Spread.of(r[key] for r in done) for key in ("error", "seconds", "peak_mb", "start_mb")}
    how = ""
    if "rounds" in done[0]:
        how = "/".join(sorted({r["selection"] for r in done})) + ", " + Spread.of(
            r["rounds"] for r in done).shown("{:.0f}") + " rounds, " + Spread.of(
            r["model_cells"] for r in done).shown("{:,.0f}") + " model cells"
        reused = sum(bool(r.get("reused")) for r in done)
        how += f" (auto's run on {reused} of {len(done)} seeds)" if reused else ""
    ratio = f"{guess.seconds / spread['seconds'].median:.2g}" if guess else ""
    note = f"; stopped after {stopped[0].seconds:.0f} s on a later seed" if stopped else ""
    seconds = spread["seconds"].shown("{:.2f} s" if spread["seconds"].high < 10 else "{:.0f} s")
    return [method, how, spread["error"].text(4) + note, seconds, spread["peak_mb"].shown("{:,.0f} MB"),
            spread["start_mb"].shown("{:,.0f} MB"), estimate_text(guess, method), ratio]


def report(bench, name, schema, codes, runs, guesses) -> str:
    lines = bench.header(f"Wide tables: synth vs MST and independent, {name} (bench_wide)", [np, scipy],
                         repeats=False)
    lines += [describe(name, schema, codes), "",
              f"All 2-way marginals; epsilon = {EPSILON:g}, delta = {DELTA:g}, n noisy; seeds "
              f"{seeds_text(bench.seeds)}, each figure the median over the seeds [range]. MST and "
              "independent: `benchmarks/_mst.py` (our reimplementation, own tree estimator; rho-zCDP, "
              "Gaussian noise). Each method in a fresh process: time is its call; peak memory is the "
              "process's resident high-water mark during the call, 'at start' its resident set when the call "
              "began (interpreter, libraries, data). synth's estimate: `MWEMEngine.estimate`, made "
              f"before any data is read. Limit per call: {bench.args.limit:.0f} s. Where auto chose a mode, that "
              "mode's row of the seed is auto's run (the same seeded computation), not a second one.", ""]
    rows = [row(m, r, guesses.get(m)) for m, r in runs.items() if r]
    titles = "@method|@what it ran|mean L1|time|peak memory|at start|@synth's estimate|estimate / time"
    lines.append(table(titles, rows))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
