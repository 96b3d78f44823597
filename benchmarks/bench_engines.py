"""Compare synth's engines on adult: error and time of PMW (practical and theory variants),
MWEM and BLR (uniform sampled net, and the net drawn from a released model) at each epsilon.

The adult configuration: 7 columns (workclass, education-num, marital-status, relationship,
race, sex, income>50K; 120,960 cells), W = all 35 three-way marginals as cell queries
(``Workload.marginals(schema, 3)``), n = 48,842 rows, public. Error: the mean over the 35
marginals of the L1 distance between the normalized true table and the released one
(``_data.mean_l1``); for PMW both its online answers (``run.answers``) and its release
(``run.final``), for MWEM and BLR the released distribution. Each figure is the median over
seeds (range in brackets), and the median wall time of the library call; each engine's first
call (JIT cache loads) is timed apart, on the 5-column subset, before the grid.

Usage: ``python benchmarks/bench_engines.py [--quick] [--seed S] [--seeds K] [--epsilon E ...]
[--no-write]``
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numba
import numpy as np
from _data import FIVE, SEVEN, Marginals
from _harness import session
from _report import markdown_table, seconds_text, seeds_text
from _timing import FirstRun, first_run, over_seeds, with_time

from synth.engines.blr import blr
from synth.errors import SynthError
from synth.engines.mwem import mwem
from synth.engines.pmw import run_pmw

SECTION = "bench_engines"
EPSILONS = (0.3, 1.0, 3.0)
QUICK_EPSILONS = (1.0,)
#: The released-net BLR (``synth generate --mechanism blr --prior mwem``): the first of these
#: (module, function) found is used, else its row says "not available".
RELEASED_NET = (("synth.engines.blr_prior", "blr_prior"),)


@dataclass(frozen=True)
class Engine:
    """One engine: its name, the library call (for the report), the outputs it is scored on,
    and ``run(case, eps, seed)`` -> the error of each output (and other named figures)."""

    name: str
    call: str
    outputs: tuple[str, ...]
    run: Callable[[Marginals, float, int], dict[str, float]]


def pmw_engine(variant: str) -> Engine:
    def run(case: Marginals, eps: float, seed: int) -> dict[str, float]:
        result = run_pmw(case.codes, case.schema, case.workload, eps, rows=case.rows, rng=seed,
                         variant=variant)
        return {"online answers": case.answers_error(result.answers),
                "release": case.answers_error(result.final), "updates": result.pmw.updates,
                "L": result.plan.updates}

    return Engine(f"PMW, {variant}", f'run_pmw(codes, schema, W, eps, rows=n, rng=seed, variant="{variant}")',
                  ("online answers", "release"), run)


def mwem_run(case: Marginals, eps: float, seed: int) -> dict[str, float]:
    result = mwem(case.codes, case.schema, case.workload, eps, rows=case.rows, rng=seed)
    return {"release": case.error(result.distribution), "fit passes": result.parameters["final_passes_run"]}


def blr_run(case: Marginals, eps: float, seed: int) -> dict[str, float]:
    result = blr(case.codes, case.schema, case.workload, eps, net="sampled", rows=case.rows, rng=seed)
    return {"release": case.error(result.distribution), "m": result.parameters["net_size"],
            "K": result.parameters["candidates"]}


def released_net() -> Callable | None:
    """The library's BLR over a net drawn from a released model, if it exists yet."""
    for module_name, name in RELEASED_NET:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if callable(fn := getattr(module, name, None)):
            return fn
    return None


def released_net_engine(fn: Callable) -> Engine:
    options = {"prior": "mwem"} if "prior" in inspect.signature(fn).parameters else {}

    def run(case: Marginals, eps: float, seed: int) -> dict[str, float]:
        result = fn(case.codes, case.schema, case.workload, eps, rows=case.rows, rng=seed, **options)
        p = result.parameters
        figures = {"release": case.error(result.distribution), "m": p["net_size"], "K": p["candidates"]}
        if isinstance(p.get("prior"), dict) and "share" in p["prior"]:
            figures["prior share"] = p["prior"]["share"]
        return figures

    extra = "".join(f", {k}={v!r}" for k, v in options.items())
    call = f"{fn.__module__}.{fn.__name__}(codes, schema, W, eps, rows=n, rng=seed{extra})"
    return Engine("BLR, released net", call, ("release",), run)


def engines() -> tuple[list[Engine], str]:
    """The engines to run, and how the released-net row was resolved (for the report)."""
    found = [
        pmw_engine("practical"),
        pmw_engine("theory"),
        Engine("MWEM", "mwem(codes, schema, W, eps, rows=n, rng=seed)", ("release",), mwem_run),
        Engine("BLR, uniform net", 'blr(codes, schema, W, eps, net="sampled", rows=n, rng=seed)',
               ("release",), blr_run),
    ]
    fn = released_net()
    if fn is None:
        names = ", ".join(f"`{m}.{f}`" for m, f in RELEASED_NET)
        return found, f"not available: no {names} in the library when this ran"
    engine = released_net_engine(fn)
    found.append(engine)
    return found, f"`{engine.call}`, everything else at its default"


# -- report ----------------------------------------------------------------------------------


def cell(figures: dict, output: str) -> tuple[str, str]:
    """The error and time cells of one engine, output and eps ("refused" when it refused to run)."""
    if output not in figures:
        return "refused (below)", "-"
    return figures[output].text(), seconds_text(figures["seconds"].median)


def results_table(found: Sequence[Engine], grid: dict, epsilons: Sequence[float], missing: bool) -> str:
    columns = [("engine", "---"), ("scored on", "---")]
    columns += [(f"{what}, eps = {e:g}", "---:") for what in ("error", "time") for e in epsilons]
    rows = []
    for engine in found:
        for output in engine.outputs:
            figures = [grid[(engine.name, e)] for e in epsilons]
            cells = [cell(f, output) for f in figures]
            rows.append([engine.name, output] + [e for e, _ in cells] + [t for _, t in cells])
    if missing:
        rows.append(["BLR, released net", "release"] + ["not available"] * (2 * len(epsilons)))
    return markdown_table(columns, rows)


def choices(found: Sequence[Engine], grid: dict, epsilons: Sequence[float]) -> str:
    """What the runs chose (medians): PMW's updates used / L, MWEM's fit passes, BLR's m and K."""
    lines = []
    for engine in found:
        parts = []
        for e in epsilons:
            f = grid[(engine.name, e)]
            if "updates" in f:
                parts.append(f"eps {e:g}: {f['updates'].median:g} of L = {f['L'].median:g} updates")
            elif "fit passes" in f:
                parts.append(f"eps {e:g}: {f['fit passes'].median:g} final-fit passes")
            elif "m" in f:
                k = f", K = {f['K'].median:,.0f}" if "K" in f else ""
                share = (f", MWEM prior on {f['prior share'].median:g} of eps" if "prior share" in f else "")
                parts.append(f"eps {e:g}: m = {f['m'].median:,.0f}{k}{share}")
        if parts:
            lines.append(f"- {engine.name}: " + "; ".join(parts))
    return "\n".join(lines)


def render(found, resolved, firsts: Sequence[FirstRun], case: Marginals, uniform: float, grid: dict,
           refusals: dict, epsilons: Sequence[float], seeds: Sequence[int], header: list[str]) -> str:
    missing = not any(e.name == "BLR, released net" for e in found)
    return "\n".join([
        *header,
        f"Adult, {case.describe()}, public. Columns: {', '.join(case.schema.names)}. Error: the mean over "
        f"the {case.marginals} marginals of the L1 distance between the normalized true table and the "
        "released one (`_data.mean_l1`; PMW's answers divided by n); median over seeds "
        f"{', '.join(map(str, seeds))}, range in brackets. Time: median wall time of the whole library call "
        f"(first calls excluded, below). The uniform distribution scores {uniform:.3f}.",
        "",
        "Calls (W = `Workload.marginals(schema, 3)`, everything else at its default):",
        "",
        *[f"- {e.name}: `{e.call}`" for e in found],
        *([f"- BLR, released net: {resolved}"] if missing else []),
        "",
        results_table(found, grid, epsilons, missing),
        "",
        *[f"- {name} at eps = {eps:g} refused to run: {message}"
          for (name, eps), message in refusals.items()],
        *([""] if refusals else []),
        "What the runs chose (medians over seeds):",
        "",
        choices(found, grid, epsilons),
        "",
        "First calls in this process (eps = 1, the 5-column subset, seed 0; not in the table above):",
        "",
        *[f"- {f.text()}" for f in firsts],
        "",
        "The machine is shared (2 cores; see the load averages): times can move by tens of percent between "
        "runs. PMW's theory variant at these epsilons plans for the worst case and barely moves from uniform "
        "(expected; `bench_pmw` section 6 shows its plans).",
        "",
    ])


# -- main ------------------------------------------------------------------------------------


def add_options(parser) -> None:
    parser.add_argument("--epsilon", type=float, action="append", default=None,
                        help=f"an epsilon to run (repeat the option for several; default "
                             f"{', '.join(map(str, EPSILONS))}; 1 with --quick)")


def main(argv: Sequence[str] | None = None) -> int:
    run = session(__doc__, "1 seed at eps = 1 (a smoke run)", argv, add_options, seeds=(5, 1))
    seeds, epsilons = run.seeds, tuple(run.args.epsilon or run.pick(EPSILONS, QUICK_EPSILONS))
    adult = run.adult()
    case, small = Marginals.of(adult, SEVEN), Marginals.of(adult, FIVE)
    found, resolved = engines()
    firsts = [first_run(e.name, lambda e=e: e.run(small, 1.0, 0)) for e in found]

    refusals: dict[tuple[str, float], str] = {}

    def one(key, seed: int) -> dict[str, float]:
        name, eps = key
        engine = next(e for e in found if e.name == name)
        try:
            figures, seconds = with_time(lambda: engine.run(case, eps, seed))
        except SynthError as exc:  # e.g. a plan that cannot be made at this epsilon: say so in the table
            refusals[key] = str(exc).splitlines()[0]
            run.say(f"  {name}, eps {eps:g}, seed {seed}: refused: {refusals[key]}")
            return {}
        run.say(f"  {name}, eps {eps:g}, seed {seed}: {seconds:.1f} s, "
                + ", ".join(f"{o} {figures[o]:.3f}" for o in engine.outputs))
        return {**figures, "seconds": seconds}

    with run.stage(f"{len(found)} engines x {len(epsilons)} eps x {len(seeds)} seeds"):
        grid = over_seeds([(e.name, eps) for eps in epsilons for e in found], seeds, one)
    header = run.header("synth engines on adult: error and time", (np, numba),
                        f"- seeds {seeds_text(seeds)}; eps {', '.join(f'{e:g}' for e in epsilons)}",
                        repeats=False)
    report = render(found, resolved, firsts, case, case.uniform_error(), grid, refusals, epsilons, seeds,
                    header)
    run.publish(SECTION, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
