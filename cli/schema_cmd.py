"""``synth schema``: infer a schema from data (with a loud warning) or show one."""

from __future__ import annotations

import click

from ._common import (
    DELTA, EPSILON, bounds_option, columns_option, load_schema, note, output_option, seed_option, warn, write_output,
)
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
@click.argument("data", type=click.Path(exists=True, dir_okay=True))
@output_option("Where to write the schema JSON")
@click.option("--epsilon", type=EPSILON, default=None,
              help="Derive the schema under differential privacy with this budget (its cost is recorded in the "
                   "schema, and a run that uses it counts it). Without it the schema is read off the data: NOT "
                   "private.")
@click.option("--delta", type=DELTA, default=None,
              help="With --epsilon: delta of the derivation (default 1e-9). Partition selection keeps a value "
                   "held by one row with probability at most this (shared over the columns).")
@click.option("--schema", "partial", type=click.Path(exists=True, dir_okay=False),
              help="With --epsilon: a schema of the columns you can describe publicly; they are kept as they are "
                   "and cost nothing, the others are derived.")
@bounds_option("With --epsilon: public bounds of a numeric column (repeatable), e.g. age=0:120; otherwise "
                   "they are derived privately (values outside are clipped into the edge bins).")
@click.option("--max-categories", type=click.IntRange(1),
              help="Without --epsilon: numeric columns with at most this many distinct values become categorical "
                   "(default 32).")
@click.option("--bins", type=click.IntRange(1),
              help="Bins per numeric column: of similar mass from a noisy histogram with --epsilon (default 32; a "
                   "spike gets its own), "
                   "else equal-width (default 10).")
@click.option("--missing-token", "missing_tokens", multiple=True, metavar="TOKEN",
              help="A cell text that means a missing value, such as '?' (repeatable); empty cells always do. "
                   "Recorded in the schema.")
@seed_option
@columns_option
@force_option
def infer(data: str, output: str, epsilon: float | None, delta: float | None, partial: str | None,
          bounds: dict[str, tuple[float, float]], max_categories: int | None, bins: int | None,
          missing_tokens: tuple[str, ...],
          seed: int | None, columns: str | None, force: bool) -> None:
    """Build a schema from DATA: under differential privacy with --epsilon, else NOT private.

    With --epsilon (and --delta) every column you have not described (--schema, --bounds) is
    derived privately: its kind from a noisy count of its cells' kinds; a categorical column's
    values by partition selection (a value held by few rows never appears; the rest read as
    "other"); a numeric column's bounds from noisy magnitudes and its bins of similar mass
    from a noisy histogram (the share the bounds clip is stated).
    Columns whose values are almost all distinct (names, ticket numbers, ids) are left out.
    Every derived column may hold missing values. The schema records what was derived, how,
    and the cost; synth generate counts that cost in its run's total.

    Without --epsilon the categories and bin edges are read off the private data itself, so
    the schema can leak information (a rare category reveals that someone has it): review
    it, or replace it with public knowledge, before any release. It records that it was
    inferred, and every private run that uses it warns. A column with empty cells (or
    --missing-token cells) gets "missing": true.

    \b
    Examples:
      synth schema infer people.csv --epsilon 0.2 --delta 1e-9 --bounds age=0:120 -o schema.json
      synth schema infer people.csv --epsilon 0.2 --schema known-columns.json -o schema.json
      synth schema infer people.csv -o schema.json
      synth schema infer adult-raw.csv --missing-token '?' -o schema.json
    """
    check_outputs({"DATA": data, **({"--schema": partial} if partial else {})}, {"-o": output}, force)
    if epsilon is not None:
        _derive(data, output, epsilon, delta, partial, bounds, max_categories, bins, missing_tokens, seed, columns)
        return
    given = [name for name, value in (("--delta", delta), ("--schema", partial), ("--bounds", bounds or None),
                                      ("--seed", seed)) if value is not None]
    if given:
        raise click.UsageError(f"{', '.join(given)} apply to a private derivation: add --epsilon")
    from synth.data.infer import infer_schema

    result = infer_schema(data, max_categories=max_categories or 32, bins=bins or 10, columns=columns,
                          missing_tokens=missing_tokens)
    write_output(output, lambda handle: handle.write(result.to_json_text()))
    if output != "-":
        note(f"wrote the schema of {len(result)} columns to {output}")
    warn(
        "this schema was learnt from the private data and is NOT differentially private: "
        "its categories and bin edges can reveal rows. Review it or replace it with public "
        "knowledge before releasing anything built on it (--epsilon derives one privately)."
    )


#: The derivation's delta when --epsilon comes without --delta.
DEFAULT_DERIVE_DELTA = 1e-9


def _derive(data, output, epsilon, delta, partial, bounds, max_categories, bins, missing_tokens, seed, columns):
    """``schema infer --epsilon``: the schema derived under DP, with its record."""
    if max_categories is not None:
        raise click.UsageError("--max-categories applies without --epsilon (a derived column's values are those "
                               "partition selection keeps)")
    from synth.data.derive import DEFAULT_BINS, derive_schema
    from synth.data.schema import Schema

    delta = DEFAULT_DERIVE_DELTA if delta is None else delta
    public = Schema.load(partial) if partial else ()
    derived = derive_schema(data, epsilon, delta, public=public, bounds=bounds, bins=bins or DEFAULT_BINS,
                            missing_tokens=missing_tokens, columns=columns.split(",") if columns else None, rng=seed)
    write_output(output, lambda handle: handle.write(derived.schema.to_json_text()))
    for line in derived.describe():
        note(line)
    if output != "-":
        note(f"wrote the schema of {len(derived.schema)} columns to {output}: (epsilon={derived.epsilon:.3g}, "
             f"delta={derived.delta:.3g})-DP; a run that uses it adds this cost to its own")
    if seed is not None:
        warn(f"--seed {seed}: the derivation's noise is reproducible by anyone who knows the seed (for testing only)")


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
            "numeric": lambda c: f"range {c.interval(0, c.n_values - 1)}" + (f", {c.time}s" if c.time else "")
                                 + (f", {c.digits} decimal places" if c.digits is not None else ""),
            "coded": lambda c: f"codes 0..{c.n_values - 1}",
        }[column.kind](column) + (" + missing" if column.missing else "")
        click.echo(f"{column.name:<{width}}  {column.kind:<11}  {column.size:>6}  {detail}")
    click.echo(f"universe size: {loaded.universe_size:,} cells")
    if loaded.rows is not None:
        click.echo(f"rows (public): {loaded.rows:,}")
    if loaded.missing_tokens:
        click.echo(f"missing tokens: {', '.join(map(repr, loaded.missing_tokens))}")
    for constraint in loaded.constraints:
        click.echo(f"constraint: {constraint.label}")
