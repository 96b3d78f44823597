"""``synth answer``: answer a workload of counting queries."""

from __future__ import annotations

import csv

import click

from ._common import columns_option, load_schema, note, output_option, progress, quiet_option, schema_option, warn, write_output

NON_PRIVATE_LABEL = "exact (NON-PRIVATE)"


@click.command()
@click.argument("data", type=click.Path(exists=True, dir_okay=False))
@schema_option
@click.option("--workload", "workload_file", required=True, type=click.Path(exists=True, dir_okay=False),
              help="Workload JSON (see the README for the format).")
@click.option("--exact", is_flag=True,
              help="Exact counts from the private data: NOT differentially private, for the data owner only.")
@columns_option
@quiet_option
@output_option("Where to write the answers CSV")
def answer(data: str, schema_file: str, workload_file: str, exact: bool, columns: str | None,
           quiet: bool, output: str) -> None:
    """Answer every query of a workload on DATA.csv.

    With --exact the answers are the true counts: they are NOT differentially private and
    are for the data owner only (e.g. to compare with private answers). The CSV has one row
    per query in workload order: query_id (from 0), name, query, answer, privacy.

    \b
    Example:
      synth answer adult.csv --schema adult-domain.json --workload w.json --exact -o exact.csv
    """
    if not exact:
        raise click.UsageError(
            "no private mechanism is available yet: pass --exact for exact (NON-PRIVATE) counts"
        )
    from synth.exact import exact_answers
    from synth.workload import Workload

    full, selected = load_schema(schema_file, columns)
    queries = Workload.load(workload_file, selected)
    with progress(f"reading {data}", quiet) as update:
        result = exact_answers(data, full, queries, columns=columns, progress=update)

    def write(handle) -> None:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["query_id", "name", "query", "answer", "privacy"])
        for i, value in enumerate(result.answers.tolist()):
            name = queries[i].name or ""
            writer.writerow([i, name, queries.describe(i), value, NON_PRIVATE_LABEL])

    write_output(output, write)
    for name, count in result.clipped.items():
        note(f"column {name!r}: {count:,} rows outside the bin edges were clipped into the edge bins")
    warn(
        f"exact answers to {len(queries):,} queries over {result.n_rows:,} rows are NON-PRIVATE "
        "(not differentially private): for the data owner only; do not release them."
    )
