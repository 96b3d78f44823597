"""``synth schema``: infer a schema from data (with a loud warning) or show one."""

from __future__ import annotations

import click

from ._common import columns_option, load_schema, note, output_option, warn, write_output
from ._outputs import check_outputs, force_option


@click.group()
def schema() -> None:
    """Create or inspect a schema (the public description of the columns).

    \b
    Example:
      synth schema infer people.csv -o schema.json
      synth schema show schema.json
    """


@schema.command("infer")
@click.argument("data", type=click.Path(exists=True, dir_okay=False))
@output_option("Where to write the schema JSON")
@click.option("--max-categories", default=32, show_default=True, type=click.IntRange(1),
              help="Numeric columns with at most this many distinct values become categorical.")
@click.option("--bins", default=10, show_default=True, type=click.IntRange(1),
              help="Equal-width bins for other numeric columns.")
@click.option("--missing-token", "missing_tokens", multiple=True, metavar="TOKEN",
              help="A cell text that means a missing value, such as '?' (repeatable); empty cells always do. "
                   "Recorded in the schema.")
@columns_option
@force_option
def infer(data: str, output: str, max_categories: int, bins: int, missing_tokens: tuple[str, ...],
          columns: str | None, force: bool) -> None:
    """Build a schema from DATA.csv. NOT differentially private: review it.

    The categories and bin edges are read off the private data itself, so the schema can
    leak information (a rare category reveals that someone has it). Review it, or replace
    it with public knowledge, before any release. The schema records that it was inferred,
    and every private run that uses it warns about it. A column with empty cells (or
    --missing-token cells) gets "missing": true: its missing values are a value of its own.

    \b
    Example:
      synth schema infer people.csv -o schema.json
      synth schema infer adult-raw.csv --missing-token '?' -o schema.json
    """
    check_outputs({"DATA": data}, {"-o": output}, force)
    from synth.data.infer import infer_schema

    result = infer_schema(data, max_categories=max_categories, bins=bins, columns=columns,
                          missing_tokens=missing_tokens)
    write_output(output, lambda handle: handle.write(result.to_json_text()))
    if output != "-":
        note(f"wrote the schema of {len(result)} columns to {output}")
    warn(
        "this schema was learnt from the private data and is NOT differentially private: "
        "its categories and bin edges can reveal rows. Review it or replace it with public "
        "knowledge before releasing anything built on it."
    )


@schema.command("show")
@click.argument("schema_file", metavar="SCHEMA", type=click.Path(exists=True, dir_okay=False))
@columns_option
def show(schema_file: str, columns: str | None) -> None:
    """Print the columns, their sizes and the universe size of SCHEMA.

    SCHEMA is a synth schema or a private-pgm domain file.

    \b
    Example:
      synth schema show adult-domain.json --columns sex,race
    """
    with open(schema_file, "rb") as handle:
        if handle.read(4) == b"PK\x03\x04":  # a zip archive: a model file (.npz), not a schema
            raise click.UsageError(f"{schema_file} is a model file, not a schema: synth model show {schema_file} "
                                   "shows what it holds, its schema included")
    _, loaded = load_schema(schema_file, columns)
    width = max(len(n) for n in loaded.names)
    for column in loaded:
        detail = {
            "categorical": lambda c: ", ".join(map(str, c.values[:8])) + (" ..." if c.n_values > 8 else ""),
            "numeric": lambda c: f"edges {c.edges[0]} .. {c.edges[-1]}",
            "coded": lambda c: f"codes 0..{c.n_values - 1}",
        }[column.kind](column) + (" + missing" if column.missing else "")
        click.echo(f"{column.name:<{width}}  {column.kind:<11}  {column.size:>6}  {detail}")
    click.echo(f"universe size: {loaded.universe_size:,} cells")
    if loaded.rows is not None:
        click.echo(f"rows (public): {loaded.rows:,}")
    if loaded.missing_tokens:
        click.echo(f"missing tokens: {', '.join(map(repr, loaded.missing_tokens))}")
