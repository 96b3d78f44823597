"""PMW against MWEM on the same tables and budgets (issue 30): the online answers, the release,
the budget spent, and the coverage of the answers' stated error bounds.

Tables: adult's 7 columns (48,842 rows; ``_data.SEVEN``) and all 14 (a factored model),
titanic's 7 columns (1,304 rows: Survived, Pclass, Sex, SibSp, Parch, Embarked, Cabin), and
four sampled from seeded Bayesian networks (``_wide.bayes_net``): ``trip5`` (60,000 rows; 5
columns of 5, 24, 24, 7, 3 values), ``payroll5`` (40,000 rows; 5 columns of 36, 36, 6, 3, 12
values), ``survey16`` (21,000 rows; 16 binary columns, 1-2 parents each) and ``mixed9`` (30,000
rows; 9 columns of 2-6 values, random parents). Workloads: all 2-way or 3-way marginals as
cell queries. Six cases have at most as many subsets as MWEM's default rounds (PMW then
measures them all up front: ``pmw_practical.measures_all``); survey16's pairs and triples,
mixed9's triples and adult's 91 pairs have more, so PMW selects the worst of them first
(``pmw_practical.selected_rounds``) and tests the rest one by one.
epsilon = 1, delta = 1e-9, n a noisy count.

For each case and seed: ``mwem(...)`` with its defaults (its release's error) and
``run_pmw(...)`` with its defaults (practical variant): the online answers' error (each query
answered when it came), the release's, the selected rounds and the updates made against L, the
epsilon spent, and the share of answers whose true count lies outside their stated
``error_bound`` (beta = 0.05).
Error: the mean over the marginals of the L1 distance between the normalized true table and
the released one (for online answers, the table of answers / n). Figures: medians over seeds
[range]; ratios are medians of the per-seed ratios.

Usage: ``python benchmarks/bench_pmw_accuracy.py [--quick] [--seed S] [--seeds K] [--cases ...] [--no-write]``
"""

from __future__ import annotations

import statistics
import time

import numpy as np
from _data import SEVEN, load_table, project_codes
from _harness import session
from _report import seeds_text, table
from _wide import _random_parents, bayes_net

from synth.data.reading import code_dtype
from synth.data.schema import Coded, Schema
from synth.data.tables import marginal

SECTION = "bench_pmw_accuracy"
EPSILON, DELTA, BETA = 1.0, 1e-9, 0.05
TITANIC = ("Survived", "Pclass", "Sex", "SibSp", "Parch", "Embarked", "Cabin")
#: case name -> (table, way)
CASES = {"adult7 pairs": ("adult7", 2), "adult7 triples": ("adult7", 3), "titanic triples": ("titanic", 3),
         "trip5 triples": ("trip5", 3), "payroll5 pairs": ("payroll5", 2), "payroll5 triples": ("payroll5", 3),
         "survey16 triples": ("survey16", 3), "survey16 pairs": ("survey16", 2), "mixed9 triples": ("mixed9", 3),
         "adult14 pairs": ("adult14", 2)}
QUICK_CASES = ("adult7 pairs", "trip5 triples")


def _network(sizes, parents, rows, seed) -> tuple[Schema, np.ndarray]:
    schema = Schema(tuple(Coded(f"c{i}", int(s)) for i, s in enumerate(sizes)))
    codes = bayes_net(sizes, parents, rows, np.random.default_rng(seed))
    return schema, np.ascontiguousarray(codes, dtype=code_dtype(schema))


def build(name: str, data_dir) -> tuple[Schema, np.ndarray]:
    """The table ``name`` (see the module docstring); the sampled ones are fixed by their seeds."""
    if name == "adult7":
        return project_codes(*load_table(data_dir, "adult"), SEVEN)
    if name == "adult14":
        return load_table(data_dir, "adult")
    if name == "titanic":
        return project_codes(*load_table(data_dir, "titanic"), TITANIC)
    if name == "trip5":
        return _network([5, 24, 24, 7, 3], [[], [0], [1], [0, 2], [3]], 60_000, [30, 5])
    if name == "payroll5":
        return _network([36, 36, 6, 3, 12], [[], [0], [0, 1], [1], [2, 3]], 40_000, [30, 8])
    if name == "survey16":
        return _network([2] * 16, _random_parents(16, np.random.default_rng([30, 16])), 21_000, [30, 16])
    if name == "mixed9":
        return _network([4, 3, 5, 2, 6, 3, 2, 4, 3], _random_parents(9, np.random.default_rng([30, 9])), 30_000, [30, 9])
    raise ValueError(f"unknown table {name!r}")


def mean_l1(tables: dict, truth: dict) -> float:
    return float(np.mean([np.abs(tables[s] - t).sum() for s, t in truth.items()]))


def measure(schema, codes, way: int, seed: int) -> dict:
    """MWEM and PMW on one workload and seed."""
    from synth.data.workload import Workload
    from synth.engines.mwem import mwem
    from synth.engines.pmw import run_pmw
    from synth.models.distribution import as_distribution

    workload = Workload.marginals(schema, way)
    n = len(codes)
    truth = {s: marginal(codes, schema, s) / n for s in workload.subsets}

    def model_error(distribution) -> float:
        model = as_distribution(distribution, schema)
        return mean_l1(dict(zip(truth, model.marginals(list(truth)))), truth)

    started = time.perf_counter()
    result = mwem(codes, schema, workload, EPSILON, delta=DELTA, rng=seed)
    out = {"mwem": model_error(result.distribution), "mwem_s": time.perf_counter() - started}
    started = time.perf_counter()
    run = run_pmw(codes, schema, workload, EPSILON, DELTA, beta=BETA, rng=seed)
    out["pmw_s"] = time.perf_counter() - started
    answers = {s: np.zeros_like(t) for s, t in truth.items()}
    counts = np.zeros(len(workload))
    for i, query in enumerate(workload):
        cell = tuple(int(a[0]) for a in query.allowed)
        answers[query.columns][cell] = run.answers[i] / n
        counts[i] = truth[query.columns][cell] * n
    out.update(online=mean_l1(answers, truth), release=model_error(run.pmw.release()), updates=run.pmw.updates,
               L=run.plan.updates, selected=run.pmw.selected, spent=run.accountant.spent().epsilon, halted=run.rounds.count("halted"),
               outside=float(np.mean(np.abs(counts - run.answers) > run.bounds)), answers=len(workload),
               composition=run.plan.composition)
    return out


def add_options(parser) -> None:
    parser.add_argument("--cases", default="", help=f"comma-separated, from: {', '.join(CASES)}")


def spread(values) -> str:
    return f"{statistics.median(values):.4f} [{min(values):.4f}, {max(values):.4f}]"


def main(argv=None) -> None:
    bench = session(__doc__, "one seed, two cases", argv, add_options, seeds=(3, 1))
    names = bench.args.cases.split(",") if bench.args.cases else list(bench.pick(CASES, QUICK_CASES))
    for bad in [n for n in names if n not in CASES]:
        raise SystemExit(f"bench_pmw_accuracy: unknown case {bad!r}")
    built: dict[str, tuple] = {}
    rows = []
    for name in names:
        table_name, way = CASES[name]
        if table_name not in built:
            built[table_name] = build(table_name, bench.args.data_dir)
        schema, codes = built[table_name]
        runs = []
        for seed in bench.seeds:
            with bench.stage(f"{name}, seed {seed}"):
                runs.append(measure(schema, codes, way, seed))
            r = runs[-1]
            bench.say(f"  {name} seed {seed}: MWEM {r['mwem']:.4f}, PMW online {r['online']:.4f}, release "
                      f"{r['release']:.4f}, {r['selected']} selected rounds, {r['updates']}/{r['L']} updates, "
                      f"eps {r['spent']:.3f}")
        get = lambda key: [r[key] for r in runs]  # noqa: E731
        ratio = lambda key: statistics.median(r[key] / r["mwem"] for r in runs)  # noqa: E731
        rows.append([name, f"{len(codes):,} rows, {len(schema)} columns, {runs[0]['answers']:,} queries",
                     spread(get("mwem")), spread(get("online")), f"{ratio('online'):.2f}x", spread(get("release")),
                     f"{ratio('release'):.2f}x", f"{statistics.median(get('selected')):.0f}",
                     f"{statistics.median(get('updates')):.0f} / {runs[0]['L']}",
                     f"{statistics.median(get('halted')):,.0f}", f"{statistics.median(get('spent')):.3f}",
                     f"{max(get('outside')):.4f}", runs[0]["composition"],
                     f"{statistics.median(get('mwem_s')):.1f} s / {statistics.median(get('pmw_s')):.1f} s"])
    lines = bench.header("PMW against MWEM: online answers, release, bounds (bench_pmw_accuracy)", [np],
                         repeats=False)
    lines += [f"epsilon = {EPSILON:g}, delta = {DELTA:g}, n noisy; seeds {seeds_text(bench.seeds)}; medians "
              "[range]. Error: mean L1 per marginal of the normalized tables. 'outside': the largest share, "
              f"over the seeds, of answers whose true count lies outside their stated bound (beta = {BETA:g}). "
              "Tables and methods: the module docstring.", ""]
    titles = ("@case|@size|MWEM|PMW online|online / MWEM|PMW release|release / MWEM|selected rounds|updates / L|"
              "halted answers|epsilon spent|outside bound|@PMW noise|time MWEM / PMW")
    lines.append(table(titles, rows))
    bench.publish(SECTION, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
