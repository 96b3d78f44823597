"""What every command shares: error handling, common options, progress and messages."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

import click


class SynthGroup(click.Group):
    """A click group that shows library input errors as one line, with no traceback."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except click.exceptions.Exit:
            raise
        except (click.ClickException, click.Abort):
            raise
        except BrokenPipeError:
            sys.stderr.close()  # the reader went away (e.g. `| head`): stop quietly
            ctx.exit(1)
        except OSError as exc:
            name = f"{exc.filename}: " if exc.filename else ""
            raise click.ClickException(f"{name}{exc.strerror or exc}") from None
        except ValueError as exc:
            from synth.errors import SynthError

            if isinstance(exc, SynthError):
                raise click.ClickException(str(exc)) from None
            raise


class CheckedFloat(click.ParamType):
    """A float option checked by one of ``synth.validation``'s checks (its message on failure)."""

    name = "float"

    def __init__(self, check: str, label: str):
        self.check = check
        self.label = label

    def convert(self, value, param, ctx):
        from synth import validation

        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        try:
            if self.check == "check_probability":
                return validation.check_probability(number, self.label)
            return getattr(validation, self.check)(number, self.label)
        except (TypeError, ValueError) as exc:
            self.fail(str(exc), param, ctx)


EPSILON = CheckedFloat("check_epsilon", "epsilon")
DELTA = CheckedFloat("check_delta", "delta")
BETA = CheckedFloat("check_probability", "beta")


def note(message: str) -> None:
    """An informational line on stderr (stdout is kept for data)."""
    click.echo(message, err=True)


def warn(message: str) -> None:
    """A warning on stderr, highlighted when stderr is a terminal."""
    click.secho(f"WARNING: {message}", err=True, fg="yellow")


columns_option = click.option(
    "--columns",
    metavar="A,B,C",
    help="Work on these columns only (comma-separated, in this order).",
)

schema_option = click.option(
    "--schema",
    "schema_file",
    required=True,
    type=click.Path(exists=True, dir_okay=False),
    help="Schema JSON, or a private-pgm domain file {column: size}.",
)

def _announce_seed(ctx: click.Context, param: click.Parameter, value: int | None) -> int | None:
    if value is not None:
        from synth.rng import SEEDED_RUN_WARNING

        warn(f"--seed {value}: {SEEDED_RUN_WARNING}")
    return value


seed_option = click.option(
    "--seed",
    type=click.IntRange(0),
    default=None,
    callback=_announce_seed,
    help="Seed the noise for a reproducible TEST run (never for release; the output says so). "
    "Default: seeded from the OS's secure source.",
)

quiet_option = click.option("--quiet", "-q", is_flag=True, help="No progress bars.")


def output_folder_exists(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """Fail before any work is done when the output cannot be created."""
    if value is not None and value != "-":
        folder = os.path.dirname(os.path.abspath(value))
        if not os.path.isdir(folder):
            raise click.BadParameter(f"folder {folder!r} does not exist", ctx=ctx, param=param)
    return value


def output_option(help_text: str):
    return click.option(
        "-o",
        "--output",
        type=click.Path(dir_okay=False, writable=True, allow_dash=True),
        default="-",
        show_default=True,
        callback=output_folder_exists,
        help=f"{help_text} ('-' writes to stdout).",
    )


@contextlib.contextmanager
def progress(label: str, quiet: bool) -> Iterator:
    """A stderr progress bar driven by the library's ``progress(rows, fraction)`` callback.

    Shown only on a terminal: logs and pipes get no bar characters.
    """
    if quiet or not sys.stderr.isatty():
        yield None
        return
    with click.progressbar(length=1000, label=label, file=sys.stderr, show_eta=False) as bar:
        done = [0]

        def update(rows: int, fraction: float | None) -> None:
            if fraction is not None:
                target = int(fraction * 1000)
                bar.update(target - done[0])
                done[0] = target

        yield update


def write_output(output: str, write) -> None:
    """Call ``write(handle)`` on stdout (``-``) or on a file written atomically.

    A failure part-way leaves no partial file (and an existing file untouched).
    """
    if output == "-":
        write(click.get_text_stream("stdout"))
        return
    from synth._io import atomic_write

    with atomic_write(output, encoding="utf-8", newline="") as handle:
        write(handle)


def load_schema(schema_file: str, columns: str | None):
    """The schema file and its selection by ``--columns`` (errors say which one is wrong)."""
    from synth.errors import SchemaError
    from synth.schema import Schema

    full = Schema.load(schema_file)
    try:
        return full, full.select(columns)
    except SchemaError as exc:
        raise click.BadParameter(f"{exc} (in {schema_file})", param_hint="--columns") from None
