"""MWEM with delta > 0 against delta = 0: does the noise chooser keep a delta run at least as good
as the pure epsilon one, and keep zCDP where it wins?

With delta > 0 MWEM picks, from public facts only, pure epsilon-DP with discrete Laplace noise
or rho-zCDP with the discrete Gaussian (``synth.engines.mwem_noise``; ``noise="auto"``). This runs, on
narrow tables with few marginals (where Laplace should win) and on wider ones (where the
Gaussian should), each of:

- delta = 0 (pure epsilon, discrete Laplace);
- delta = 1e-9, noise auto (what a user gets);
- delta = 1e-9, noise gaussian (zCDP forced: what every delta > 0 run did before the chooser).

Tables: subsets of titanic's and adult's columns (integer-coded, ``../shared/datasets``), W =
all 3-way marginals, n a noisy count, ``selection="auto"``. Error: the mean over W's marginals
of the L1 distance between the normalized true table and the model's (``_data.mean_l1``); each
figure the median over seeds [range].

Usage: ``python benchmarks/bench_mwem_noise.py [--quick] [--seed S] [--seeds K] [--no-write]``
"""

from __future__ import annotations

import numpy as np
from _data import Marginals
from _harness import session
from _report import seeds_text, table
from _timing import Spread

from synth.engines.mwem import mwem

SECTION = "bench_mwem_noise"
EPSILONS, QUICK_EPSILONS = (0.3, 1.0, 3.0), (1.0,)
DELTA = 1e-9
#: (label, table, columns); every 3-way marginal of the columns is the workload.
CASES = (
    ("titanic, 5 columns", "titanic", ("Survived", "Pclass", "Sex", "Embarked", "Cabin")),
    ("titanic, 6 columns", "titanic", ("Survived", "Pclass", "Sex", "Embarked", "Cabin", "SibSp")),
    ("adult, 5 columns", "adult", ("workclass", "education-num", "occupation", "sex", "income>50K")),
    ("adult, 6 columns", "adult", ("workclass", "education-num", "race", "sex", "income>50K", "relationship")),
    ("adult, 7 columns", "adult",
     ("workclass", "occupation", "race", "sex", "income>50K", "relationship", "marital-status")),
)
#: (label, delta, noise) of each run.
VARIANTS = (("delta 0", 0.0, "auto"), ("delta 1e-9, auto", DELTA, "auto"), ("delta 1e-9, gaussian", DELTA, "gaussian"))


def run(case: Marginals, epsilon: float, delta: float, noise: str, seed: int) -> dict:
    result = mwem(case.codes, case.schema, case.workload, epsilon, delta=delta, noise=noise, rng=seed)
    return {"error": case.model_error(result.distribution), "zcdp": result.accountant.spent().delta > 0}


def main(argv=None) -> None:
    bench = session(__doc__, "eps = 1 only, one seed", argv, seeds=(5, 1))
    seeds = bench.seeds
    tables = {name: bench.table(name) for name in sorted({name for _, name, _ in CASES})}
    rows = []
    for label, name, columns in CASES:
        case = Marginals.of(tables[name], columns, 3, label=label)
        for epsilon in bench.pick(EPSILONS, QUICK_EPSILONS):
            with bench.stage(f"{label}, eps {epsilon:g}"):
                figures = {variant: [run(case, epsilon, delta, noise, seed) for seed in seeds]
                           for variant, delta, noise in VARIANTS}
            rows.append((case, epsilon, figures))
    bench.publish(SECTION, report(bench, rows, seeds))


def report(bench, rows, seeds) -> str:
    lines = bench.header("MWEM: delta > 0 against delta = 0, the noise chooser (bench_mwem_noise)", [np],
                         repeats=False)
    lines.append(f"Seeds {seeds_text(seeds)}; each figure the median over the seeds [range]; n a noisy "
                 "count; W all 3-way marginals. 'auto chose': the noise the delta = 1e-9 auto run used. "
                 "'auto / delta 0': the ratio of the medians (at most 1 is the target: a delta > 0 run never "
                 "worse than pure epsilon).")
    lines.append("")
    rows_text = []
    for case, epsilon, figures in rows:
        errors = {variant: Spread.of([f["error"] for f in runs]) for variant, runs in figures.items()}
        chose = "/".join(sorted({"Gaussian (zCDP)" if f["zcdp"] else "Laplace (pure)"
                                 for f in figures["delta 1e-9, auto"]}))
        ratio = errors["delta 1e-9, auto"].median / errors["delta 0"].median
        rows_text.append([case.label, f"{case.marginals}", f"{case.rows:,}", f"{epsilon:g}",
                      *(errors[variant].text(4) for variant, _, _ in VARIANTS), chose, f"{ratio:.2f}"])
    titles = ["@table", "marginals", "n", "epsilon", *(f"mean L1, {variant}" for variant, _, _ in VARIANTS),
              "@auto chose", "auto / delta 0"]
    lines.append(table(titles, rows_text))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
