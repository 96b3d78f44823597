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
@click.option("--cells", "as_cells", is_flag=True,
              help="Write every cell as its own query ({\"where\": ...}) instead of one {\"marginal\": [...]} "
                   "line per marginal (the same queries, in the same order).")
@click.option("--max-queries", default=1_000_000, show_default=True, type=click.IntRange(1),
              help="With --cells: refuse to write more queries than this.")
@output_option("Where to write the workload JSON")
@force_option
def marginals(schema_file: str, way: int, columns: str | None, as_cells: bool, max_queries: int, output: str,
              force: bool) -> None:
    """Write all K-way marginals: every cell of each is one counting query.

    Marginals come in lexicographic order of column subsets (columns in schema order, or
    the --columns order), cells in row-major order of each marginal's columns. Each marginal
    is one line {"marginal": [columns]}, so all 364 3-way marginals of adult's 14 columns
    (20.9 million cells) take 364 lines; --cells writes each cell as {"where": {...}}. Memory
    does not grow with the cells; more than 1,000,000 marginals, or more than 2^63 - 1 cells in
    all, are refused.

    \b
    Examples:
      synth workload marginals --schema adult-domain.json --way 3 \\
          --columns workclass,education-num,sex -o w3.json
      synth workload marginals --schema adult-domain.json --way 2 --cells -o w2-cells.json
    """
    check_outputs({"--schema": schema_file}, {"-o": output}, force)
    from synth.data.workload import Workload

    _, loaded = load_schema(schema_file, columns)
    built = Workload.marginals(loaded, way, max_queries=max_queries if as_cells else None)
    write_output(output, lambda handle: built.write_json(handle, cells=as_cells))  # a cell at a time
    if output != "-":
        note(f"wrote {len(built):,} queries ({len(built.subsets)} marginals of {way} columns) to {output}")
