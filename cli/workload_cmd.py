"""``synth workload``: build workloads of counting queries."""

from __future__ import annotations

import click

from ._common import columns_option, load_schema, note, output_option, schema_option, write_output
from ._outputs import check_outputs, force_option


@click.group()
def workload() -> None:
    """Build workloads of counting queries (JSON).

    \b
    Example:
      synth workload marginals --schema schema.json --way 2 -o w2.json
    """


@workload.command("marginals")
@schema_option
@click.option("--way", required=True, type=click.IntRange(1), help="Marginal order K (columns per marginal).")
@columns_option
@click.option("--max-queries", default=1_000_000, show_default=True, type=click.IntRange(1),
              help="Refuse to write more queries than this.")
@output_option("Where to write the workload JSON")
@force_option
def marginals(schema_file: str, way: int, columns: str | None, max_queries: int, output: str, force: bool) -> None:
    """Write all K-way marginals as cell queries.

    Marginals come in lexicographic order of column subsets (columns in schema order, or
    the --columns order), cells in row-major order of each marginal's columns.

    \b
    Example:
      synth workload marginals --schema adult-domain.json --way 3 \\
          --columns workclass,education-num,sex -o w3.json
    """
    check_outputs({"--schema": schema_file}, {"-o": output}, force)
    from synth.workload import Workload

    _, loaded = load_schema(schema_file, columns)
    built = Workload.marginals(loaded, way, max_queries=max_queries)
    write_output(output, built.write_json)
    if output != "-":
        note(f"wrote {len(built):,} queries ({len(built.subsets)} marginals of {way} columns) to {output}")
