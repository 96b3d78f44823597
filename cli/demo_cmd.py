"""``synth demo``: the whole pipeline on the bundled demo table, offline, in well under a minute."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import click

from ._common import EPSILON, note, progress, quiet_option, seed_option, warn

MARKER = "DEMO.txt"


@click.command()
@click.option("-o", "--output", default="synth-demo", show_default=True, type=click.Path(file_okay=False),
              help="Folder for everything the demo writes (made if missing; a previous demo's is replaced).")
@click.option("--epsilon", type=EPSILON, default=1.0, show_default=True,
              help="Privacy budget of EACH engine's run (two runs: 2 x epsilon if both were released).")
@seed_option
@quiet_option
def demo(output, epsilon, seed, quiet) -> None:
    """Run the whole pipeline on the bundled demo table and say where everything is.

    schema (public, bundled) -> workload (all 2- and 3-way marginals) -> MWEM and PMW, each
    its own run spending --epsilon (so 2 x epsilon in all, were both released; n is not
    public: each buys a noisy count) -> models and synthetic CSVs -> an evaluation report per
    engine (NON-PRIVATE: it reads the data, as the data owner would). The demo table and its
    schema are copied into the folder (demo.csv, demo-schema.json) for trying the other
    commands on. The table is synthetic: no real people.

    \b
    Examples:
      synth demo
      synth demo -o /tmp/demo --seed 1
    """
    from synth.data.bundled import bundled

    folder = Path(output)
    _check_folder(folder)
    table = bundled("demo")
    started = time.perf_counter()
    import numpy as np

    from synth.data.reading import read
    from synth.report.evaluate import (
        NON_PRIVATE_TAG, add_model_record, baselines_text, evaluate, read_synthetic,
    )
    from synth.report.numbers import COUNT, PRIVACY, fmt
    from synth.engines.mwem import MWEMConfig, MWEMEngine
    from synth.engines.pmw import PMWConfig, PMWEngine
    from synth.privacy.accounting import Budget
    from synth.report.html import write_report
    from synth.models.synthetic import write_synthetic
    from synth.data.schema import Schema
    from synth.data.tables import marginal
    from synth.data.workload import Workload

    folder.mkdir(parents=True, exist_ok=True)
    (folder / MARKER).write_text("Written by `synth demo`; the folder is replaced by the next demo run.\n")
    data, schema_file = folder / "demo.csv", folder / "demo-schema.json"
    shutil.copyfile(table.data, data)
    shutil.copyfile(table.schema, schema_file)
    schema = Schema.load(schema_file)
    workload = Workload(schema, Workload.marginals(schema, 2).queries + Workload.marginals(schema, 3).queries,
                        description="all 2- and 3-way marginals of the demo table")
    workload.save(folder / "workload.json")
    with progress(f"reading {data.name}", quiet, "rows", private=True) as update:
        codes = read(data, schema, progress=update).codes
    tables = {subset: marginal(codes, schema, subset) for subset in workload.subsets}
    rng = np.random.default_rng(seed)  # one generator: the two runs draw independent noise
    noise_rng = rng if seed is not None else None  # unseeded: each engine seeds its own from the OS
    lines = []
    for name in ("mwem", "pmw"):
        with progress(name, quiet) as update:
            if name == "mwem":
                engine = MWEMEngine(MWEMConfig(), schema, workload)
                model, monitor = engine.run(codes, Budget(epsilon), noise_rng, update).model, None
            else:
                release = PMWEngine(PMWConfig(monitor=True), schema, workload).run(codes, Budget(epsilon, 1e-6), noise_rng)
                run = release.record
                model, monitor = release.model, run.monitor
                warm = len(run.plan.warm_subsets)
                chosen = (f"{fmt(run.pmw.selected, COUNT)} rounds measuring the marginals it fit worst (chosen by "
                          "the exponential mechanism), " if run.pmw.selected else "")
                ways = " or ".join(str(k) for k in sorted({len(s) for s in run.plan.warm_subsets}))
                lines.append(f"pmw (practical variant, online): a warm start on {warm} {ways}-way marginals, "
                             f"{chosen}then {fmt(run.pmw.updates, COUNT)} updates of L={fmt(run.plan.updates, COUNT)} while "
                             f"answering {fmt(len(workload), COUNT)} queries one at a time (pmw-monitor.csv: the "
                             "KL potential at each, its Pythagorean bound and the epsilon spent; NON-PRIVATE)")
        model.save(folder / f"{name}-model.npz")
        synthetic = folder / f"{name}-synthetic.csv"
        with progress(f"writing {synthetic.name}", quiet, "rows") as update:
            write_synthetic(synthetic, model.distribution, schema, round(model.rows), rng=rng, progress=update)
        monitor_log = None
        if monitor is not None:
            from synth._io import atomic_write
            from synth.report.html import read_monitor

            with atomic_write(folder / "pmw-monitor.csv", encoding="utf-8", newline="") as handle:
                monitor.write_csv(handle)
            monitor_log = read_monitor(folder / "pmw-monitor.csv")
        released = read_synthetic(synthetic, schema, workload)
        add_model_record(released, model, workload, source=folder / f"{name}-model.npz")
        evaluation = evaluate(tables, workload, released, n=len(codes))
        write_report(folder / f"{name}-report", evaluation, monitor=monitor_log,
                     context={"data": str(data), "schema": str(schema_file), "workload": str(folder / "workload.json")})
        summary = evaluation.summary()
        lines.append(f"{name}: spent epsilon={fmt(model.privacy['spent']['epsilon'], PRIVACY)} (its own run); "
                     f"synthetic table's max absolute error {fmt(summary['max_absolute_error'])} of n, mean L1 "
                     f"per marginal {fmt(summary['mean_marginal_l1'])} {NON_PRIVATE_TAG}")
    lines.append(baselines_text(summary))  # the same data and workload for both engines
    elapsed = time.perf_counter() - started
    for line in lines:
        note(line)
    note(f"each engine had a budget of epsilon={fmt(epsilon, PRIVACY)} in its own run: releasing both would spend "
         f"up to {fmt(2 * epsilon, PRIVACY)}")
    click.echo(f"demo finished in {elapsed:.0f} s; everything is in {folder}{os.sep}:")
    for path in sorted(folder.iterdir()):
        if path.name != MARKER:
            click.echo(f"  {path}{os.sep if path.is_dir() else ''}")
    click.echo(f"open {folder / 'mwem-report' / 'index.html'} to see how good the synthetic table is")
    warn("the reports read the private data (NON-PRIVATE): they are for the data owner, never for release")


def _check_folder(folder: Path) -> None:
    """Refuse a folder that holds something other than a previous demo (nothing is overwritten)."""
    if folder.exists() and any(folder.iterdir()) and not (folder / MARKER).exists():
        raise click.BadParameter(f"{folder} exists and is not a previous demo's folder: choose another -o",
                                 param_hint="-o")

