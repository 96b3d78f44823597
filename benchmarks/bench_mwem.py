"""Benchmark MWEM (``synth.engines.mwem``) on adult: error and time against epsilon and rounds, the final
fit and the selection step, the speed of its steps, rounds and fit passes against NumPy, and its first-call
(JIT) cost.

Usage: ``python benchmarks/bench_mwem.py [--repeats N] [--quick] [--seed S] [--seeds K] [--no-write]``
"""

from __future__ import annotations

import gc
import math
import statistics
import sys
import time
from collections.abc import Sequence

import numba
import numpy as np
from _baselines import NumpySubset, mw_passes, mwem_round
from _data import FIVE, SEVEN, Marginals, project_codes
from _harness import Session, session
from _peers import seven_columns
from _report import SHARED_MACHINE, document, duration, first_call_table, seconds_text, seeds_text, table
from _timing import (Comparison, Samples, Spread, Stopwatch, Timed, alternating, first_call, first_run,
                     over_seeds, round_robin, timed, with_time)

import synth.engines.mwem as mwem_module
import synth.models.fit as fit_module
from synth import _kernels
from synth.data.schema import Schema
from synth.data.tables import marginal, marginal_from_dense, multiply_by_marginal
from synth.data.workload import Workload
from synth.engines.mwem import DEFAULT_FINAL_PASSES, DEFAULT_PASSES, DEFAULT_SELECT_SHARE, mwem

EIGHT = ("age",) + SEVEN
REFERENCE_EPS = 1.0
#: (full, quick) settings.
EPSILONS = ((0.25, 0.5, 1.0, 2.0, 4.0), (1.0, 4.0))
ROUNDS = ((10, 20, 35), (20, 35))
FIT_CASES = ((("5 columns", 6, 3), ("7 columns", 20, 10)), (("5 columns", 6, 3),))
FIT_EPSILONS = ((0.25, 1.0, 4.0), (1.0, 4.0))
FIT_SEEDS, CURVE_STEP, FIXED_PASSES, PER_ROUND_PASSES = 3, 10, (100, 300, 1000), (DEFAULT_PASSES, 30)
STEP_SUBSETS = {  # the first two with --quick
    "7 columns": [tuple(s.split()) for s in (
        "workclass education-num marital-status", "race sex income>50K",
        "workclass marital-status income>50K", "workclass relationship sex",
        "income>50K race education-num")],
    "8 columns (+ age)": [tuple(s.split()) for s in (
        "age workclass education-num", "race sex income>50K", "age marital-status income>50K",
        "workclass relationship sex")],
}
EVERY_MARGINAL = (("7 columns", "8 columns (+ age)"), ("7 columns",))  # also timed on every marginal in turn
ROUND_RUNS, ROUND_POINTS, FIT_TIMING_PASSES, SPREAD = (20, 35), (1, 10, 20, 35), 10, 0.01


def run_mwem(case: Marginals, eps: float, seed: int, **options) -> dict[str, float]:
    """A timed ``mwem`` run's error, seconds and parameters (rounds act through min(rounds, marginals))."""
    if "rounds" in options:
        options["rounds"] = min(options["rounds"], case.marginals)
    result, seconds = with_time(lambda: mwem(case.codes, case.schema, case.workload, eps, rows=case.rows,
                                             rng=seed, **options))
    p = result.parameters
    return {"error": case.error(result.distribution), "seconds": seconds, "rounds": p["rounds"],
            "fit passes": p["final_passes_run"], "selected": p["epsilon_select"] > 0,
            "capped": p["final_passes_run"] >= p["final_passes"]}


def fit_passes(case: Marginals, weights: np.ndarray, total: float, measured, passes: int):
    """``passes`` passes of MW's own step (``synth.models.fit._mw_pass``, step 1: what the NumPy peer
    does; mwem's fit grows the step) over ``measured``, in place: the new total and the residual."""
    for _ in range(passes):
        total, _, residual = fit_module._mw_pass(weights, total, case.schema, case.workload, measured,
                                                 float(case.rows), 1.0, {})
    return total, residual


def bench_first_calls(adult, seed: int):
    """0. The two table kernels' first calls (and cold compiles), then a whole first mwem call."""
    sub, codes = project_codes(*adult, FIVE)
    x = np.full(sub.universe_size, 1.0 / sub.universe_size)
    factors = np.exp(np.random.default_rng(seed).uniform(-SPREAD, SPREAD, (7, 2)))
    cols = ("marital-status", "sex")
    mul = timed(lambda: multiply_by_marginal(x, sub, cols, factors))
    marg = timed(lambda: marginal_from_dense(x, sub, cols))
    dims, keep = np.array([7, 30, 2, 2], dtype=np.int64), np.array([True, False, True, False])
    strides = np.array([2, 0, 1, 0], dtype=np.int64)
    calls = [first_call("multiply_by_marginal (MW update, float64)", mul, _kernels.multiply_by_marginal,
                        (x.copy(), dims, keep, strides, factors.reshape(-1).copy())),
             first_call("marginalize (marginal_from_dense, float64)", marg, _kernels.marginalize,
                        (x, dims, keep, strides, np.zeros(14)))]
    workload = Workload.marginals(sub, 3)
    whole = first_run("`mwem`, 840 cells, 10 3-way marginals, 3 rounds, eps = 1 (after the kernels above)",
                      lambda: mwem(codes, sub, workload, 1.0, rounds=3, rows=len(codes), rng=seed))
    return calls, whole


def bench_error(cases: Sequence[Marginals], epsilons, rounds, seeds):
    """1. The error grid over eps, T and seeds."""
    by_label = {c.label: c for c in cases}

    def one(key, seed):
        label, eps, t = key
        figures = run_mwem(by_label[label], eps, seed, rounds=t)
        if figures["selected"] != (figures["rounds"] < by_label[label].marginals):
            raise AssertionError(f"mwem at T={figures['rounds']}: selected = {figures['selected']}")
        return {k: float(v) for k, v in figures.items()}

    keys = [(c.label, e, t) for c in cases for e in epsilons
            for t in sorted({min(t, c.marginals) for t in rounds})]
    return over_seeds(keys, seeds, one)


def error_curve(case: Marginals, eps: float, seed: int) -> dict:
    """1b. mwem(final_passes=0) then MW passes one by one (``fit_passes``): the error every CURVE_STEP
    passes, cumulative fit seconds, and residual / expected noise."""
    start, rounds_s = with_time(lambda: mwem(case.codes, case.schema, case.workload, eps, rows=case.rows,
                                             rng=seed, final_passes=0))
    measured = [("marginal", tuple(m["marginal"]), np.asarray(m["noisy"], dtype=np.float64))
                for m in start.measurements]  # as the fit takes them
    target = start.parameters["fit_target_residual"]
    expected, weights = target / mwem_module.FIT_TOLERANCE, start.distribution.copy()
    total, fit_s = float(weights.sum()), 0.0
    curve = {"rounds_s": rounds_s, "errors": {0: case.error(start.distribution)}, "seconds": {0: 0.0},
             "residuals": {}}
    for k in range(1, max(FIXED_PASSES) + 1):
        (total, residual), seconds = with_time(lambda: fit_passes(case, weights, total, measured, 1))
        fit_s += seconds
        if k % CURVE_STEP == 0 or k in FIXED_PASSES:
            curve["errors"][k], curve["seconds"][k] = case.error(weights / total), fit_s
            curve["residuals"][k] = residual / expected
    return curve


def bench_fit(cases: dict[str, Marginals], fit_cases, epsilons, seeds) -> list[list[str]]:
    """1b. The table's rows per fit case, eps and setting, over the first seeds."""
    rows, seeds = [], seeds[:FIT_SEEDS]
    for label, select_t, passes_t in fit_cases:
        case, every = cases[label], cases[label].marginals
        for eps in epsilons:
            curves = [error_curve(case, eps, s) for s in seeds]
            defaults = [run_mwem(case, eps, s) for s in seeds]
            best = [min((e, k) for k, e in c["errors"].items() if k % CURVE_STEP == 0) for c in curves]

            def add(setting, t, passes, errors, seconds, residuals=(), capped=()):
                finite, passes = [r for r in residuals if not math.isnan(r)], Spread.of(passes)
                rows.append([label, f"{eps:g}", setting, str(t),
                             passes.text(0) + (f", {sum(capped)}/{len(capped)} capped" * any(capped)),
                             Spread.of(errors).text(), seconds_text(statistics.median(seconds)),
                             Spread.of(finite).text() if finite else "-"])

            add("final_passes=0 (no final fit)", every, [0] * len(seeds), [c["errors"][0] for c in curves],
                [c["rounds_s"] for c in curves])
            for k in FIXED_PASSES:
                add(f"MW's own step, {k} passes", every, [k] * len(seeds), [c["errors"][k] for c in curves],
                    [c["rounds_s"] + c["seconds"][k] for c in curves], [c["residuals"][k] for c in curves])
            add(f"**default: stop at {mwem_module.FIT_TOLERANCE:g} x expected noise**", every,
                [d["fit passes"] for d in defaults], [d["error"] for d in defaults],
                [d["seconds"] for d in defaults], capped=[d["capped"] for d in defaults])
            add(f"MW's own step, lowest point (every {CURVE_STEP} passes; chosen with the true data)", every,
                [k for _, k in best], [e for e, _ in best],
                [c["rounds_s"] + c["seconds"][k] for c, (_, k) in zip(curves, best)],
                [c["residuals"].get(k, math.nan) for c, (_, k) in zip(curves, best)])
            variants = [(f"selection forced: select_share={DEFAULT_SELECT_SHARE:g}", every,
                         {"select_share": DEFAULT_SELECT_SHARE}),
                        (f"T={select_t} (selection on)", select_t, {"rounds": select_t})]
            variants += [(f"T={passes_t}, passes={p} a round", passes_t, {"rounds": passes_t, "passes": p})
                         for p in PER_ROUND_PASSES]
            for setting, t, options in variants:
                runs = [run_mwem(case, eps, s, **options) for s in seeds]
                add(setting, t, [r["fit passes"] for r in runs], [r["error"] for r in runs],
                    [r["seconds"] for r in runs], capped=[r["capped"] for r in runs])
    return rows


def bench_steps(sub: Schema, label: str, subsets, every: bool, repeats: int, rng) -> list[list[str]]:
    """2. The table's rows: multiply and marginal vs NumPy (and NumPy's multiply alone) on the given
    subsets, and on every 3-way marginal in turn (seconds per marginal)."""
    x_synth = rng.random(sub.universe_size)
    x_synth /= x_synth.sum()
    x_numpy, x_only, x_marg = x_synth.copy(), x_synth.copy(), x_synth.copy()
    all_subsets = Workload.marginals(sub, 3).subsets if every else []
    ops, factors = {}, {}
    for s in dict.fromkeys([*subsets, *all_subsets]):  # checks: the same weights, totals and tables
        ops[s] = o = NumpySubset(sub, s)
        f = np.exp(rng.uniform(-SPREAD, SPREAD, [sub[c].size for c in s]))
        factors[s] = (f, 1.0 / f)
        a, b = multiply_by_marginal(x_synth, sub, s, f), o.multiply_total(x_numpy, f)
        o.multiply(x_only, f)
        if not (np.array_equal(x_synth, x_numpy) and np.array_equal(x_synth, x_only)
                and math.isclose(a, b, rel_tol=1e-9)):
            raise AssertionError(f"multiply over {s} on {label}: synth and NumPy disagree")
        if not np.allclose(marginal_from_dense(x_marg, sub, s), o.marginal(x_marg), rtol=1e-9, atol=0):
            raise AssertionError(f"marginal over {s} on {label}: synth and NumPy disagree")
    cases = [(", ".join(s), [s], f"{math.prod(sub[c].size for c in s):,}") for s in subsets]
    if every:
        cases.append((f"**all {len(all_subsets)} 3-way marginals in turn (per marginal)**", all_subsets,
                      "all"))
    alt = lambda step: alternating(step, False, True)  # noqa: E731  (factors, then their inverses, ...)
    kinds = {
        "mul-synth": lambda g: alt(lambda inv: [multiply_by_marginal(x_synth, sub, s, factors[s][inv])
                                                for s in g]),
        "mul-numpy": lambda g: alt(lambda inv: [ops[s].multiply_total(x_numpy, factors[s][inv]) for s in g]),
        "mul-only": lambda g: alt(lambda inv: [ops[s].multiply(x_only, factors[s][inv]) for s in g]),
        "marg-synth": lambda g: lambda: [marginal_from_dense(x_marg, sub, s) for s in g],
        "marg-numpy": lambda g: lambda: [ops[s].marginal(x_marg) for s in g],
    }
    times = round_robin([Timed(f"{k}/{c}", make(g)) for c, g, _ in cases for k, make in kinds.items()],
                        repeats)
    rows, size = [], sub.universe_size
    for case, group, cells in cases:
        per = {k: Samples([t / len(group) for t in times[f"{k}/{case}"].seconds], times[f"{k}/{case}"].cpu)
               for k in kinds}
        m, g = (Comparison.of(case, size, "cells", per[f"{k}-synth"], per[f"{k}-numpy"])
                for k in ("mul", "marg"))
        rows.append([f"{label} ({size:,}): {case}", cells, duration(m.synth_s), duration(m.base_s),
                     f"{m.ratio:.2f}x", f"{m.best_ratio:.2f}x",
                     duration(statistics.median(per["mul-only"].seconds)),
                     duration(g.synth_s), duration(g.base_s), f"{g.ratio:.2f}x", f"{g.best_ratio:.2f}x"])
    return rows


def count_passes(case: Marginals, rounds: int, seed: int) -> list[int]:
    """MW passes per round of one (untimed) mwem run, counting the fit's marginal updates."""
    marks = []
    with Stopwatch(fit_module, "multiply_by_marginal") as updates:
        mwem(case.codes, case.schema, case.workload, REFERENCE_EPS, rounds=rounds, rows=case.rows, rng=seed,
             progress=lambda t, _: marks.append(updates.calls["multiply_by_marginal"])
             if t == len(marks) + 1 and t <= rounds else None)
    return [int(c) // (t + 1) for t, c in enumerate(np.diff([0, *marks[:rounds]]))]


def bench_rounds(case: Marginals, rounds: int, repeats: int, seed: int) -> list:
    """2. Rounds of mwem (eps = 1) timed by ``progress`` vs NumPy rounds doing the same work, from the
    uniform distribution with the run's first t measurements; and the final fit's passes vs NumPy: the
    report's blocks."""
    rounds, n = min(rounds, case.marginals), float(case.rows)
    points = [t for t in ROUND_POINTS if t <= rounds]
    start = mwem(case.codes, case.schema, case.workload, REFERENCE_EPS, rounds=rounds, rows=case.rows,
                 rng=seed, final_passes=0)
    fit_measured = [("marginal", tuple(m["marginal"]), np.asarray(m["noisy"], dtype=np.float64))
                    for m in start.measurements]
    params = start.parameters
    measured, select = [(key, noisy) for _, key, noisy in fit_measured], params["epsilon_select"] > 0
    # the candidates: the workload's marginals, and when selecting the one-way ones too (as mwem's)
    one_ways = [(c,) for c in case.schema.names] if select else []
    candidates = list(dict.fromkeys([*case.workload.subsets, *one_ways, *(k for k, _ in measured)]))
    true_tables = {s: marginal(case.codes, case.schema, s).astype(np.float64) for s in candidates}
    ops = {s: NumpySubset(case.schema, s) for s in candidates}
    stamps_per_run, last = [], {}

    def synth_run() -> None:
        stamps = [time.perf_counter()]

        def stamp(t: int, _: float) -> None:  # progress(t) after round t; again (t >= rounds) in the fit
            if t == len(stamps) <= rounds:
                stamps.append(time.perf_counter())

        last["result"] = mwem(case.codes, case.schema, case.workload, REFERENCE_EPS, rounds=rounds,
                              rows=case.rows, rng=seed, progress=stamp)
        stamps_per_run.append((stamps, time.perf_counter()))

    x, np_rng, numpy_runs = np.empty(case.schema.universe_size), np.random.default_rng(seed), {}
    w_synth, w_numpy = np.empty_like(start.distribution), np.empty_like(start.distribution)

    def numpy_round(t: int) -> None:  # the NumPy round t, from the uniform distribution
        numpy_runs[t] = mwem_round(x, ops, true_tables, measured[:t], n, params, np_rng)

    entries = [Timed("synth", synth_run)]
    entries += [Timed(f"numpy/{t}", lambda t=t: numpy_round(t), lambda: x.fill(1.0 / x.size)) for t in points]
    entries += [Timed("fit-synth", lambda: fit_passes(case, w_synth, float(w_synth.sum()), fit_measured,
                                                      FIT_TIMING_PASSES),
                      lambda: np.copyto(w_synth, start.distribution)),
                Timed("fit-numpy", lambda: numpy_runs.__setitem__(
                    "fit", mw_passes(w_numpy, ops, measured, n, FIT_TIMING_PASSES)),
                      lambda: np.copyto(w_numpy, start.distribution))]
    times = round_robin(entries, repeats, min_sample_s=0)
    if not np.allclose(w_synth, w_numpy, rtol=1e-9, atol=0):
        raise AssertionError(f"T={rounds}: the final fit's passes differ between synth and NumPy")
    timed_runs = stamps_per_run[1:]  # the first was round_robin's warm-up
    if any(len(stamps) != rounds + 1 for stamps, _ in timed_runs):
        raise AssertionError(f"mwem did not report {rounds} rounds")
    durations, passes = [np.diff(stamps) for stamps, _ in timed_runs], count_passes(case, rounds, seed)
    med, fit = statistics.median, Comparison.of("fit", FIT_TIMING_PASSES, "passes", times["fit-synth"],
                                                times["fit-numpy"])
    rows = [[str(t), str(len(candidates) - (t - 1) if select else 0), f"{passes[t - 1]} / {numpy_runs[t]}",
             duration(med(d[t - 1] for d in durations)), duration(med(times[f"numpy/{t}"].seconds)),
             f"{med(times[f'numpy/{t}'].seconds) / med(d[t - 1] for d in durations):.2f}x",
             f"{min(times[f'numpy/{t}'].seconds) / min(d[t - 1] for d in durations):.2f}x"] for t in points]
    what = ("selection on: score, select, measure, then MW passes over the t measurements" if select else
            "every marginal measured in workload order: no selection, no passes (NumPy's one float draw "
            "against exact discrete Laplace and the accountant: these rows size the rounds rather than "
            "compare speed)")
    return [f"### Whole rounds, 7 columns, eps = {REFERENCE_EPS:g}, T = {rounds}: {what}",
            f"synth: round t inside `mwem(..., rounds={rounds}, rng={seed})` from its `progress` timestamps "
            f"(round 1 holds the set-up), median of {len(timed_runs)} runs; NumPy: the same round from the "
            "uniform distribution with the run's first t measurements.",
            table("round t|marginals scored|MW passes (synth / NumPy)|synth round|NumPy round|speed ratio|"
                  "speed ratio, best", rows),
            f"Whole run {seconds_text(med(end - s[0] for s, end in timed_runs))}: rounds "
            f"{seconds_text(med(s[-1] - s[0] for s, _ in timed_runs))}, final fit "
            f"{seconds_text(med(end - s[-1] for s, end in timed_runs))} "
            f"({last['result'].parameters['final_passes_run']} passes). {FIT_TIMING_PASSES} fit passes from "
            f"the same start (NumPy ran {numpy_runs['fit']}): `synth.models.fit._mw_pass` "
            f"{duration(fit.synth_s)}, NumPy {duration(fit.base_s)}, speed ratio {fit.ratio:.2f}x (best "
            f"{fit.best_ratio:.2f}x)."]


def error_blocks(case: Marginals, grid) -> list:
    """1. One column subset's table: error, time and fit passes against eps and T."""
    capped = lambda c: f" ({c.total:.0f}/{c.count} capped)" if c.total else ""  # noqa: E731
    ts, epss = (sorted({key[i] for key in grid if key[0] == case.label}) for i in (2, 1))
    every = " (every marginal, no selection)"
    head = lambda t: f"T={t}" + (every if t == case.marginals else "")  # noqa: E731
    body = []
    for eps in epss:
        f = {t: grid[(case.label, eps, t)] for t in ts}
        best = min(ts, key=lambda t: f[t]["error"].median)
        bold = lambda t, text: f"**{text}**" if t == best and len(ts) > 1 else text  # noqa: E731
        body.append([f"{eps:g}"] + [bold(t, f[t]["error"].text()) for t in ts]
                    + [seconds_text(f[t]["seconds"].median) for t in ts]
                    + [f"{f[t]['fit passes'].median:g}" + capped(f[t]["capped"]) for t in ts])
    return [f"### {case.describe()}",
            table("eps|" + "|".join(f"{what}, {head(t)}" for what in ("error", "time", "fit passes")
                                    for t in ts), body),
            f"Measured here: the uniform distribution {case.uniform_error():.3f}; the product of the exact "
            f"(non-private) 1-way marginals {case.independent_error():.3f}."]


def render(run: Session, calls, whole, cases, grid, fits, steps, round_runs) -> str:
    seven = cases[0]
    reference = grid[(seven.label, REFERENCE_EPS, seven.marginals)]  # every marginal, eps 1
    return document(
        run.header("synth MWEM: benchmark results", (np, numba), f"; seed {run.seed}"),
        "## 0. First calls (JIT)", first_call_table(calls), whole.text() + ".",
        "## 1. Error against epsilon and rounds on adult",
        "`mwem(codes, schema, W, eps, rounds=T, rows=n, rng=seed)`, defaults otherwise (selection share "
        f"{DEFAULT_SELECT_SHARE:g} only when T is below the number of marginals; {DEFAULT_PASSES} MW passes "
        f"a round when selecting; final fit up to {DEFAULT_FINAL_PASSES} passes, stopping at "
        f"{mwem_module.FIT_TOLERANCE:g} x the noise's expected residual). Seeds {seeds_text(run.seeds)}; "
        "error `_data.mean_l1`, median [range], lowest per row in bold; time: median wall time of the call; "
        "fit passes: median ('capped': ran them all).",
        *[block for case in cases for block in error_blocks(case, grid)],
        "### Next to reference figures",
        *seven_columns(f"synth `mwem`, defaults (T = {seven.marginals}: every marginal)",
                       reference["error"].median, reference["seconds"].median, seven.uniform_error(),
                       REFERENCE_EPS),
        "## 1b. The final fit and the selection step",
        f"Eps {', '.join(f'{e:g}' for e in run.pick(*FIT_EPSILONS))}, "
        f"seeds {seeds_text(run.seeds[:FIT_SEEDS])}. "
        "Fixed pass counts and the curve: one fit per seed continued pass by pass with MW's own step "
        "(`synth.models.fit._mw_pass`, step 1) from `mwem(..., final_passes=0)`; time = that run + the "
        "passes. The default row is mwem's own fit, which grows its step while passes lower the squared loss "
        "(fewer passes; its residual is not on the curve). Residual / expected noise: the last pass's total "
        "absolute residual over the noise's expected total.",
        table("@columns|eps|@setting|T|fit passes|error|time|residual / expected noise", fits),
        "## 2. MWEM's steps vs NumPy",
        "On a random float64 distribution. Update: `multiply_by_marginal` (in place, returns the total) vs "
        "NumPy broadcast `*=` then `x.sum()` (and the multiply alone); marginal: `marginal_from_dense` vs "
        f"reshape + sum. Factors exp(U(-{SPREAD:g}, {SPREAD:g})), alternately inverted; checked equal. Ratio "
        "= NumPy / synth time.",
        table("@universe: columns|table cells|`multiply_by_marginal`|NumPy multiply + sum|ratio|ratio, best|"
              "NumPy multiply alone|`marginal_from_dense`|NumPy reshape + sum|ratio|ratio, best", steps),
        *[block for blocks in round_runs for block in blocks],
        SHARED_MACHINE,
    )


def main(argv: Sequence[str] | None = None) -> int:
    run = session(__doc__, "eps 1 and 4, T 20 and 35, 2 seeds, the final fit on 5 columns, 2 subsets per "
                  "universe and 3 repeats (a smoke run)", argv, seeds=(5, 2))
    adult = run.adult()
    calls, whole = bench_first_calls(adult, run.seed)
    rng, steps = np.random.default_rng(run.seed), []
    for label, columns in (("7 columns", SEVEN), ("8 columns (+ age)", EIGHT)):
        with run.stage(f"steps, {label}"):
            steps += bench_steps(adult[0].select(list(columns)), label,
                                 STEP_SUBSETS[label][:run.pick(None, 2)], label in run.pick(*EVERY_MARGINAL),
                                 run.repeats, rng)
        gc.collect()
    cases = {label: Marginals.of(adult, columns, label=label) for label, columns in (("7 columns", SEVEN),
                                                                                    ("5 columns", FIVE))}
    with run.stage("whole rounds"):
        round_runs = [bench_rounds(cases["7 columns"], t, run.repeats, run.seed) for t in ROUND_RUNS]
    with run.stage("error grid"):
        grid = bench_error(list(cases.values()), run.pick(*EPSILONS), run.pick(*ROUNDS), run.seeds)
    with run.stage("final fit"):
        fits = bench_fit(cases, run.pick(*FIT_CASES), run.pick(*FIT_EPSILONS), run.seeds)
    run.publish("bench_mwem", render(run, calls, whole, list(cases.values()), grid, fits, steps, round_runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
