"""MWEM under pure epsilon-DP and under rho-zCDP (delta > 0), with n public and with n a noisy
count: error, time and rounds on adult.

Configurations (``mwem(codes, schema, W, eps, delta=delta, rows=n or None, rng=seed)`` with
the library's defaults, so ``selection="auto"``: the table says which rounds it chose):

- 7 columns (workclass, education-num, marital-status, relationship, race, sex, income>50K),
  W = all 35 three-way marginals, n = 48,842;
- all 14 columns, W = all 91 two-way marginals (a factored model);
- 1,300 rows drawn from the 7 columns (a different draw per seed), all 35 three-way marginals,
  eps = 1: the small-table case, with auto (adaptive there) and classic.

Every configuration runs with n public and with n a noisy count (the tools we compare with do
not get n for free).

Error: the mean over W's marginals of the L1 distance between the normalized true table and
the released model's (``_data.mean_l1``). Each figure is the median over seeds [range].

Usage: ``python benchmarks/bench_mwem_zcdp.py [--quick] [--seed S] [--seeds K] [--no-write]``
"""

from __future__ import annotations

import numpy as np
from _data import SEVEN, Marginals
from _harness import session
from _peers import AIM_ZCDP
from _report import seeds_text, table
from _timing import Spread, with_time

from synth.engines.mwem import mwem
from synth.data.tables import marginal
from synth.data.workload import Workload

SECTION = "bench_mwem_zcdp"
EPSILONS, QUICK_EPSILONS = (0.3, 1.0, 3.0), (1.0,)
DELTAS = (0.0, 1e-9)
SMALL_ROWS = 1300


def run(case: Marginals, epsilon: float, delta: float, public: bool, seed: int,
        selection: str = "auto") -> dict:
    result, seconds = with_time(lambda: mwem(case.codes, case.schema, case.workload, epsilon, delta=delta,
                                             selection=selection, rows=case.rows if public else None,
                                             rng=seed))
    return {"error": case.model_error(result.distribution), "seconds": seconds,
            "rounds": result.parameters["rounds"], "selection": result.parameters["selection"]}


def small_case(adult, seed: int) -> Marginals:
    """``SMALL_ROWS`` rows of the 7 columns, drawn without replacement (seeded)."""
    seven = Marginals.of(adult, SEVEN)
    rows = np.random.default_rng([seed, 1300]).choice(seven.rows, SMALL_ROWS, replace=False)
    codes = seven.codes[rows]
    truth = {s: marginal(codes, seven.schema, s) / SMALL_ROWS for s in seven.workload.subsets}
    return Marginals(f"{SMALL_ROWS:,} rows of 7 columns", seven.schema, codes, seven.workload, truth)


def main(argv=None) -> None:
    bench = session(__doc__, "eps = 1 only, one seed", argv, seeds=(5, 1))
    seeds, epsilons = bench.seeds, bench.pick(EPSILONS, QUICK_EPSILONS)
    adult = bench.adult()
    seven = Marginals.of(adult, SEVEN)
    schema, codes = adult
    wide_workload = Workload.marginals(schema, 2)
    wide = Marginals("14 columns", schema, codes, wide_workload,
                     {s: marginal(codes, schema, s) / len(codes) for s in wide_workload.subsets})
    rows = []
    for label, case in [("7 columns, 35 3-way", seven), ("14 columns, 91 2-way", wide)]:
        for epsilon in epsilons:
            for delta in DELTAS:
                for public in (True, False):
                    with bench.stage(f"{label}, eps {epsilon:g}, delta {delta:g}, n {'public' if public else 'noisy'}"):
                        figures = [run(case, epsilon, delta, public, seed) for seed in seeds]
                    rows.append((label, epsilon, delta, public, figures))
    for delta in DELTAS:
        for public in (True, False):
            for selection in ("auto", "classic"):
                with bench.stage(f"small table, delta {delta:g}, n {'public' if public else 'noisy'}, "
                                 f"selection {selection}"):
                    figures = [run(small_case(adult, seed), 1.0, delta, public, seed, selection) for seed in seeds]
                rows.append((f"{SMALL_ROWS:,} rows of 7 columns, 35 3-way", 1.0, delta, public, figures))
    bench.publish(SECTION, report(bench, rows, seeds))


def report(bench, rows, seeds) -> str:
    lines = bench.header("MWEM: pure epsilon and zCDP, n public and noisy (bench_mwem_zcdp)", [np], repeats=False)
    lines.append(f"Seeds {seeds_text(seeds)}; each figure the median over the seeds [range]. "
                 "delta = 0: pure epsilon-DP, discrete Laplace; delta = 1e-9: rho-zCDP, discrete Gaussian, "
                 "reported as (epsilon, delta). Time: the library call. "
                 "Selection: what auto chose (adaptive or classic rounds, synth.engines.mwem_adaptive).")
    lines.append("")
    rows_text = []
    for label, epsilon, delta, public, figures in rows:
        error = Spread.of([f["error"] for f in figures])
        seconds = Spread.of([f["seconds"] for f in figures])
        used = Spread.of([f["rounds"] for f in figures])
        chosen = "/".join(sorted({f["selection"] for f in figures}))
        rows_text.append([label, f"{epsilon:g}", f"{delta:g}", "public" if public else "noisy", chosen,
                      error.text(4), f"{seconds.median:.1f} s", f"{used.median:.0f}"])
    lines.append(table("@configuration|epsilon|delta|@n|@selection|mean L1|time|rounds", rows_text))
    lines.append("")
    lines.append(AIM_ZCDP)
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
