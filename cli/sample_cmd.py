"""``synth sample``: a synthetic table from a released model (post-processing: no data, no budget)."""

from __future__ import annotations

import sys

import click

from ._common import flush_stdout, note, output_folder_exists, progress, quiet_option, seed_option, warn
from ._outputs import check_outputs, force_option


@click.command()
@click.option("--model", "model_file", required=True, type=click.Path(exists=True, dir_okay=False),
              help="A released model (from synth generate or synth answer --model ...).")
@click.option("--rows", type=click.IntRange(0, 2**63 - 1), help="Rows to write (default: the n the model scales to).")
@click.option("--rounding", type=click.Choice(["round", "multinomial"]), default="round", show_default=True,
              help="Controlled rounding (largest remainder, lower error) or multinomial sampling.")
@click.option("--numeric", type=click.Choice(["uniform", "midpoint"]), default="uniform", show_default=True,
              help="Numeric columns: a value drawn uniformly inside the bin, or the bin's midpoint.")
@seed_option
@quiet_option
@force_option
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, writable=True, allow_dash=True),
              callback=output_folder_exists,
              help="Synthetic table to write (.csv, or .parquet with pyarrow; '-' writes CSV to stdout).")
def sample(model_file, rows, rounding, numeric, seed, quiet, force, output) -> None:
    """Write a synthetic table drawn from a released model.

    Sampling is post-processing of the release: it reads no data and spends no privacy. The
    table has the model's schema columns and values; rows come in random order.

    \b
    Examples:
      synth sample --model mwem.npz -o synthetic.csv
      synth sample --model mwem.npz --rows 1000000 --rounding multinomial -o big.csv
      synth sample --model mwem.npz --rows 10 -o -
    """
    check_outputs({"--model": model_file}, {"-o": output}, force)
    from synth.models.model import Model
    from synth.models.synthetic import check_output_format, write_synthetic

    from .generate_cmd import check_table_size

    check_output_format(output)
    model = Model.load(model_file)
    count = round(model.rows) if rows is None else rows
    if rows is None:
        check_table_size(model.schema, count, "the model's n", option="--rows")
    target = sys.stdout if output == "-" else output
    with progress(f"writing {output}", quiet, "rows") as update:
        written = write_synthetic(target, model.distribution, model.schema, count, method=rounding,
                                  numeric=numeric, rng=seed, progress=update)
    if output == "-":
        flush_stdout(target)
    where = "stdout" if output == "-" else output
    note(f"wrote {written:,} synthetic rows from {model_file} ({model.mechanism}) to {where}")
    if model.seeded:
        warn(f"{model_file} comes from a seeded run: for testing only, not for release")
