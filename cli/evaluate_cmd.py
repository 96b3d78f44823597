"""``synth evaluate``: compare a release with the exact answers on DATA (a NON-PRIVATE report)."""

from __future__ import annotations

import click

from ._common import (
    load_workload,
    bad_rows_option,
    columns_option,
    load_schema,
    note,
    output_folder_exists,
    progress,
    quiet_option,
    schema_option,
    warn,
)


@click.command()
@click.argument("data", type=click.Path(exists=True, dir_okay=True))
@schema_option
@click.option("--workload", "workload_file", type=click.Path(exists=True, dir_okay=False),
              help="Workload JSON: the queries to compare (default: every 3-way marginal, as generate's default).")
@click.option("--model", "model_file", type=click.Path(exists=True, dir_okay=False),
              help="A released model (.npz from synth generate/answer): alone, evaluate its distribution; beside "
                   "--synthetic or --answers, the release's privacy record (mechanism, epsilon, delta, n, seeding).")
@click.option("--synthetic", "synthetic_file", type=click.Path(exists=True, dir_okay=False),
              help="Evaluate a synthetic table (CSV read under --schema).")
@click.option("--answers", "answers_file", type=click.Path(exists=True, dir_okay=False),
              help="Evaluate an answers CSV from synth answer (columns query_id and answer).")
@click.option("--monitor", "monitor_file", type=click.Path(exists=True, dir_okay=False),
              help="Add plots of PMW's KL monitor CSV (synth answer --monitor).")
@click.option("--target", metavar="COLUMN",
              help="With --synthetic: machine-learning utility, predicting COLUMN from the others (gradient "
                   "boosting and logistic regression trained on the synthetic table and on real rows, tested on real "
                   "rows). Needs scikit-learn: pip install 'synth[eval]'.")
@click.option("--test", "test_file", type=click.Path(exists=True, dir_okay=False),
              help="With --target: a held-out real table (CSV) to test on; without it DATA is split 70/30 with a "
                   "fixed seed (train on 70%, test on 30%).")
@bad_rows_option
@columns_option
@quiet_option
@click.option("-o", "--output", required=True, type=click.Path(file_okay=False), callback=output_folder_exists,
              help="Report folder to create (an empty folder or a previous report is replaced; "
                   "anything else is refused).")
def evaluate(data, schema_file, workload_file, model_file, synthetic_file, answers_file, monitor_file, target,
             test_file, bad_rows, columns, quiet, output) -> None:
    """Compare a release with the exact answers on DATA and write a report folder.

    The release is one of: a model (--model), a synthetic table (--synthetic) or an answers
    CSV (--answers). A CSV carries no privacy record: pass the model it came from with --model
    beside it (the table or answers are evaluated; the model supplies the mechanism, the epsilon
    and delta spent, whether n is public or a noisy count, and whether the run was seeded).
    Without it the report says the record is not recorded.

    The folder holds answers.csv (true, released and errors per query), summary.json (the
    release's record; max and mean absolute error as fractions of n, L1 error per marginal
    and its mean), PNG plots and index.html showing them all. Each measure is shown beside
    two baselines: the product of the true 1-way marginals (knowing only each column alone)
    and uniform (knowing nothing).

    With --synthetic the report also compares each column (summary.json's column_fidelity):
    total-variation distance for categorical and coded columns (missing counted as a value),
    Wasserstein-1 distance over the schema's range and the Kolmogorov-Smirnov statistic for
    numeric columns (on the raw values), the missing shares, and a histogram per column
    (column_histograms.png). --target adds machine-learning utility (ml_utility): train on
    synthetic, test on real, beside train on real as the ceiling.

    Errors compare fractions: true counts over n, released answers over the row count the
    release is scaled to (the model's rows, the synthetic table's row count; n for an
    answers CSV). The folder appears only when complete.

    When the schema declares constraints, summary.json's constraints gives, per constraint,
    the share of the release's rows that break it (a model's mass on them; an answers CSV has
    none to give) and, for reference, of the real rows (NON-PRIVATE).

    NON-PRIVATE: the report READS THE PRIVATE DATA (it computes the exact answers and the
    baselines). It is for the data owner only; never release it.

    \b
    Examples:
      synth evaluate adult.csv --schema adult-domain.json --workload w3.json \\
          --model mwem.npz -o report/
      synth evaluate adult.csv --schema adult-domain.json --workload w3.json \\
          --synthetic synthetic.csv --model mwem.npz -o report-synthetic/
      synth evaluate d.csv --schema s.json --workload w.json --answers pmw.csv \\
          --model pmw.npz --monitor kl.csv -o report-pmw/
      synth evaluate adult.csv --schema adult-domain.json --workload w3.json \\
          --synthetic synthetic.csv --target income -o report-utility/
    """
    from synth.errors import SynthError

    tables = [name for name, value in (("--synthetic", synthetic_file), ("--answers", answers_file)) if value]
    if len(tables) > 1:
        raise click.UsageError("choose one release to evaluate: --synthetic or --answers (got --synthetic, "
                               "--answers); --model may go beside either to give its privacy record")
    if not tables and not model_file:
        raise click.UsageError("choose one release to evaluate: --model, --synthetic or --answers")
    if target and not synthetic_file:
        raise click.UsageError("--target needs a synthetic table to train on: pass --synthetic")
    if test_file and not target:
        raise click.UsageError("--test is the real table to test --target's classifiers on: pass --target too")
    try:
        if target:
            from synth.report.utility import require_sklearn

            require_sklearn()  # before any work
        _evaluate(data, schema_file, workload_file, model_file, synthetic_file, answers_file, monitor_file, columns,
                  quiet, output, bad_rows, target, test_file)
    except SynthError as exc:
        raise click.ClickException(str(exc)) from None


def _evaluate(data, schema_file, workload_file, model_file, synthetic_file, answers_file, monitor_file, columns,
              quiet, output, bad_rows, target=None, test_file=None) -> None:
    from synth.data.constraints import constraint_subsets
    from synth.data.reading import scan
    from synth.report.evaluate import (
        add_model_record,
        baselines_text,
        constraints_text,
        evaluate,
        read_answers,
        read_synthetic,
        release_text,
        released_from_model,
    )
    from synth.report.numbers import COUNT, fmt
    from synth.report.html import check_report_folder, read_monitor, write_report

    check_report_folder(output)  # before any work
    full, selected = load_schema(schema_file, columns)
    if target and target not in selected.names:
        raise click.UsageError(f"--target ({target!r}) must be one of the evaluated columns: "
                               f"{', '.join(selected.names)}")
    queries = load_workload(workload_file, selected)
    monitor = read_monitor(monitor_file) if monitor_file else None
    if monitor is not None and len(monitor) and int(monitor.query_id.max()) >= len(queries):
        warn(f"{monitor_file}: updates name query ids up to {int(monitor.query_id.max())} but the workload has "
             f"{fmt(len(queries), COUNT)} queries: is it from a run on another workload?")
    model = None
    if model_file:
        from synth.models.model import Model

        model = Model.load(model_file)
    if synthetic_file:
        with progress(f"reading {synthetic_file}", quiet, "rows") as update:
            released = read_synthetic(synthetic_file, full, queries, columns=columns, progress=update)
    elif answers_file:
        released = read_answers(answers_file, queries)
    else:
        released = released_from_model(model, queries, source=model_file)
        released.info["path"] = model_file
    if model is not None and released.kind != "model":
        add_model_record(released, model, queries, source=model_file)
    elif model is None:
        note(f"{synthetic_file or answers_file} carries no privacy record (mechanism, epsilon, delta, n): pass "
             "--model with the model it came from to show it in the report")
    if model is not None and model.seeded:
        warn(f"{model_file} comes from a seeded run: for testing, not for release")
    if monitor is not None and model is not None and model.mechanism == "pmw":
        planned = model.parameters.get("updates")
        if monitor.updates_allowed is None and planned is not None:
            monitor.updates_allowed = int(planned)  # an older monitor file without its plan line
        elif planned is not None and monitor.updates_allowed != planned:
            warn(f"{monitor_file} is from a run with L={fmt(monitor.updates_allowed, COUNT)} but {model_file} has "
                 f"L={fmt(planned, COUNT)}: are they from the same run?")
    with progress(f"reading {data}", quiet, "rows") as update:
        truth = scan(data, full, [*queries.subsets, *constraint_subsets(selected)], columns=columns, progress=update,
                     bad_rows=bad_rows)
    for name, count in truth.clipped.items():
        note(f"column {name!r}: {fmt(count, COUNT)} rows of {data} outside the bin edges were clipped into the "
             "edge bins")
    if truth.dropped:
        note(f"{fmt(truth.dropped, COUNT)} rows of {data} outside the schema were left out (--bad-rows drop) "
             "[NON-PRIVATE]")
    evaluation = evaluate(truth.tables, queries, released, n=truth.n_rows)
    context = {"data": data, "schema": schema_file, "workload": workload_file}
    if monitor_file:
        context["monitor"] = {"path": monitor_file}
    fidelity = histograms = utility = None
    if synthetic_file:
        fidelity, histograms, utility = _columns(data, full, columns, synthetic_file, bad_rows, target, test_file,
                                                 quiet)
        context["synthetic"] = synthetic_file
    write_report(output, evaluation, monitor=monitor, context=context, columns=fidelity, histograms=histograms,
                 utility=utility)
    summary = evaluation.summary()
    note(f"{released.kind}: {release_text(summary)}")
    note(baselines_text(summary))
    for line in constraints_text(evaluation):
        note(line)
    if fidelity is not None:
        from synth.report.columns import fidelity_text

        note(f"{fidelity_text(fidelity)} [NON-PRIVATE: computed from the true data]")
    if utility is not None:
        from synth.report.utility import utility_text

        note(f"{utility_text(utility)} [NON-PRIVATE: computed from the true data]")
    note(f"wrote the report to {output} (open {output.rstrip('/')}/index.html)")
    warn(f"the report in {output} READS THE PRIVATE DATA: it is NON-PRIVATE, for the data owner only; "
         "never release it")


def _columns(data, full, columns, synthetic_file, bad_rows, target, test_file, quiet):
    """Per-column fidelity, histograms and (with ``target``) ML utility of the synthetic table
    against DATA, both read whole under the schema (NON-PRIVATE)."""
    from synth.report.columns import column_fidelity, column_histograms, read_table

    real = read_table(data, full, columns=columns, bad_rows=bad_rows)
    synthetic = read_table(synthetic_file, full, columns=columns)
    fidelity = column_fidelity(real, synthetic)
    histograms = column_histograms(real, synthetic)
    utility = None
    if target:
        from synth.report.utility import SPLIT_SEED, TRAIN_SHARE, ml_utility, split

        if test_file:
            train, test = real, read_table(test_file, full, columns=columns, bad_rows=bad_rows)
            note_text = f"the held-out real table {test_file}"
        else:
            rows_train, rows_test = split(real.n_rows)
            train, test = real.take(rows_train), real.take(rows_test)
            note_text = (f"a {round(100 * (1 - TRAIN_SHARE))}% split of {data} (seed {SPLIT_SEED}; the other "
                         f"{round(100 * TRAIN_SHARE)}% trains the real ceiling)")
            note(f"--target without --test: {data} is split {round(100 * TRAIN_SHARE)}/"
                 f"{round(100 * (1 - TRAIN_SHARE))} with seed {SPLIT_SEED}; the classifiers are tested on the "
                 f"{round(100 * (1 - TRAIN_SHARE))}%")
        utility = ml_utility(train, test, synthetic, target, split_note=note_text)
    return fidelity, histograms, utility
