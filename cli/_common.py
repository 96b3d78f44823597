"""What every command shares: error handling, common options, progress and messages."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator

import click

#: Set to 1 to see the traceback of an unexpected error instead of its one-line summary.
DEBUG_VARIABLE = "SYNTH_DEBUG"


class SectionedCommand(click.Command):
    """A command whose --help lists its options in titled sections (``sections``: title ->
    parameter names, in order); options in no section are listed last, under "Other options"."""

    def __init__(self, *args, sections: dict[str, tuple[str, ...]], **kwargs):
        super().__init__(*args, **kwargs)
        self.sections = sections

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        records = {param.name: param.get_help_record(ctx) for param in self.get_params(ctx)}
        placed = {name for names in self.sections.values() for name in names}
        unknown = placed - set(records)
        if unknown:  # a section naming a parameter the command lacks is a bug in the command's table
            raise RuntimeError(f"help sections name unknown parameters: {', '.join(sorted(unknown))}")
        groups = [*self.sections.items(), ("Other options", tuple(n for n in records if n not in placed))]
        for title, names in groups:
            rows = [records[name] for name in names if records[name] is not None]
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


class SynthGroup(click.Group):
    """A click group that shows every error as one line, with no traceback.

    Input errors (``SynthError``) and file errors (``OSError``) show their own message; an
    unexpected error says it is a bug and how to see its traceback (``SYNTH_DEBUG=1``).
    SIGTERM unwinds like Ctrl-C, so temporary files are removed on either.
    """

    def main(self, *args, **kwargs):
        try:
            previous = signal.signal(signal.SIGTERM, _terminate)
        except ValueError:  # not in the main thread: keep the default
            return super().main(*args, **kwargs)
        try:
            return super().main(*args, **kwargs)
        finally:
            signal.signal(signal.SIGTERM, previous)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except BrokenPipeError:
            sys.stderr.close()  # the reader went away (e.g. `| head`): stop quietly
            ctx.exit(1)
        except OSError as exc:
            name = f"{exc.filename}: " if exc.filename else ""
            raise click.ClickException(one_line(f"{name}{exc.strerror or exc}")) from None
        except MemoryError:
            raise click.ClickException("out of memory: ask for less (fewer columns, rows or queries)") from None
        except Exception as exc:
            from synth.errors import SynthError

            if isinstance(exc, SynthError):
                raise click.ClickException(one_line(str(exc))) from None
            if os.environ.get(DEBUG_VARIABLE):
                raise
            raise click.ClickException(one_line(
                f"unexpected {type(exc).__name__}: {exc}. This is a bug in synth: please report it with the "
                f"command you ran ({DEBUG_VARIABLE}=1 shows the traceback)")) from None


def _terminate(signum, frame) -> None:
    raise SystemExit(128 + signum)


def one_line(message: str) -> str:
    """A message folded onto one line (a multi-line message would look like a traceback)."""
    return " ".join(part.strip() for part in str(message).splitlines() if part.strip())


class CheckedFloat(click.ParamType):
    """A float option checked by one of ``synth.privacy.validation``'s checks (its message on failure)."""

    name = "float"

    def __init__(self, check: str, label: str):
        self.check = check
        self.label = label

    def convert(self, value, param, ctx):
        from synth.privacy import validation

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


EPSILON = CheckedFloat("check_budget_epsilon", "epsilon")
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
        from synth.privacy.rng import SEEDED_RUN_WARNING

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


#: A log (stderr not a terminal) gets a plain progress line only for work that lasts longer
#: than this, and then at most every 10% of the work or every LOG_EVERY seconds.
LOG_AFTER = 5.0
LOG_EVERY = 60.0
#: A log, or a terminal's bar, shows something at least this often while work goes on, even
#: when a step takes long (a big model's fit): the phase and the time so far.
HEARTBEAT = 20.0


@contextlib.contextmanager
def progress(label: str, quiet: bool, unit: str | None = None, *, private: bool = False) -> Iterator:
    """Progress on stderr driven by the library's ``progress(done, fraction)`` callback.

    A bar on a terminal; in a log or a pipe, plain lines ("label: 40% after 12 s, about 18 s
    left") once the work has taken more than ``LOG_AFTER`` seconds. With a ``unit`` ("rows"),
    ``done`` counts it, and the bar and the lines show the count and its rate. The callback's
    ``phase(name)`` (``synth.engines.release.report_phase``) puts the run's phase in the label,
    and a heartbeat shows the phase and the time at least every ``HEARTBEAT`` seconds while a
    step takes long.

    ``private``: ``done`` counts the private table (its rows read, when n is not public): the
    count would be the true n once the work ends, so only the fraction and a rate rounded to
    two significant figures are shown.
    """
    if quiet:
        yield None
        return
    if not sys.stderr.isatty():
        lines = _ProgressLines(label, unit, private)
        with _heartbeat(lines.beat):
            yield lines
        return
    started = time.monotonic()

    def show(done):
        if done is None or unit is None:
            return None
        return _count_and_rate(done, unit, time.monotonic() - started, private)

    with click.progressbar(length=1000, label=label, file=sys.stderr, show_eta=False, item_show_func=show) as bar:
        shown = [0]

        class Update:
            def __call__(self, done: int, fraction: float | None) -> None:
                target = shown[0] if fraction is None else int(fraction * 1000)
                bar.update(target - shown[0], done)
                shown[0] = target

            def phase(self, name: str) -> None:
                bar.label = f"{label} ({name})"
                bar.render_progress()

            def beat(self) -> None:
                bar.render_progress()

        update = Update()
        with _heartbeat(update.beat):
            yield update


@contextlib.contextmanager
def _heartbeat(beat: Callable[[], None]) -> Iterator[None]:
    """Call ``beat`` every ``HEARTBEAT`` seconds from a daemon thread while the block runs."""
    import threading

    stop = threading.Event()

    def run() -> None:
        while not stop.wait(HEARTBEAT):
            beat()

    thread = threading.Thread(target=run, name="synth-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=1.0)


def _count_and_rate(done: int, unit: str, seconds: float, private: bool = False) -> str:
    """'12,000,000 rows, 2.4 M rows/s'; private: 'about 2.4 M rows/s' (no count)."""
    rate = done / seconds if seconds > 0 else 0.0
    if private:
        rate = float(f"{rate:.2g}")  # two significant figures: no exact count can be worked back from it
    scaled = f"{rate / 1e6:.1f} M" if rate >= 1e6 else f"{rate / 1e3:.0f} k" if rate >= 1e3 else f"{rate:.0f}"
    if private:
        return f"about {scaled} {unit}/s"
    return f"{done:,} {unit}, {scaled} {unit}/s"


class _ProgressLines:
    """The library's progress callback as plain stderr lines, for logs."""

    def __init__(self, label: str, unit: str | None = None, private: bool = False):
        self.label = label
        self.unit = unit
        self.private = private
        self.started = self.last = time.monotonic()
        self.next_step = 0.1
        self.current: str | None = None
        self.fraction: float | None = None

    def phase(self, name: str) -> None:
        self.current = name

    def _name(self) -> str:
        return f"{self.label} ({self.current})" if self.current else self.label

    def beat(self) -> None:
        """A line when nothing was written for ``HEARTBEAT`` seconds: the phase and the time."""
        now = time.monotonic()
        if now - self.started < LOG_AFTER or now - self.last < HEARTBEAT:
            return
        self.last = now
        done = f"{self.fraction:.0%} done, " if self.fraction else ""
        click.echo(f"{self._name()}: {done}still working after {now - self.started:.0f} s", err=True)

    def __call__(self, done: int, fraction: float | None) -> None:
        now = time.monotonic()
        elapsed = now - self.started
        if fraction is not None:
            self.fraction = fraction
        if elapsed < LOG_AFTER:
            return
        if fraction is not None and fraction >= self.next_step:
            self.next_step = (int(fraction * 10) + 1) / 10
        elif now - self.last < LOG_EVERY:
            return
        self.last = now
        count = f" ({_count_and_rate(done, self.unit, elapsed, self.private)})" if self.unit else ""
        if fraction is None or fraction <= 0:
            done_text = "working" if self.private else f"{done:,} done"
            click.echo(f"{self._name()}: {done_text} after {elapsed:.0f} s{count}", err=True)
            return
        left = elapsed * (1 - fraction) / fraction
        click.echo(f"{self._name()}: {fraction:.0%} after {elapsed:.0f} s, about {left:.0f} s left{count}", err=True)


def write_output(output: str, write) -> None:
    """Call ``write(handle)`` on stdout (``-``) or on a file written atomically.

    A failure part-way leaves no partial file (and an existing file untouched); a failure to
    write or flush stdout is an error, not a silent loss.
    """
    if output == "-":
        stream = sys.stdout
        write(stream)
        flush_stdout(stream)
        return
    from synth._io import atomic_write

    with atomic_write(output, encoding="utf-8", newline="") as handle:
        write(handle)


def load_schema(schema_file: str, columns: str | None):
    """The schema file and its selection by ``--columns`` (errors say which one is wrong)."""
    from synth.errors import SchemaError
    from synth.data.schema import Schema

    full = Schema.load(schema_file)
    try:
        return full, full.select(columns)
    except SchemaError as exc:
        raise click.BadParameter(f"{exc} (in {schema_file})", param_hint="--columns") from None


def bounds_option(help: str):
    """``--bounds COLUMN=LOW:HIGH`` (repeatable): public bounds of numeric columns for a schema
    derived under DP, parsed into ``{column: (low, high)}``."""

    def parse(ctx, param, items):
        if not items:
            return {}
        from synth.data.derive import parse_bounds

        try:
            return parse_bounds(items)
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None

    return click.option("--bounds", "bounds", multiple=True, metavar="COLUMN=LOW:HIGH", callback=parse, help=help)


def load_workload(workload_file: str | None, schema):
    """The --workload file over ``schema``; without one, the default workload (the Python API's:
    ``Workload.default``, every 3-way marginal), and a note that says so."""
    from synth.data.workload import DEFAULT_WAY, Workload

    if workload_file is not None:
        return Workload.load(workload_file, schema)
    workload = Workload.default(schema)
    way = min(DEFAULT_WAY, len(schema))
    note(f"workload: every {way}-way marginal of the {len(schema)} columns ({len(workload.subsets):,} marginals, "
         f"{len(workload):,} cells), the default; --workload FILE to choose")
    return workload


def flush_stdout(stream=None) -> None:
    """Flush stdout; a failure (a full disk behind a redirect) exits with a message."""
    stream = stream or sys.stdout
    try:
        stream.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise click.ClickException(f"cannot write to stdout: {exc.strerror or exc}") from None


bad_rows_option = click.option(
    "--bad-rows", type=click.Choice(["error", "drop"]), default="error", show_default=True,
    help="A row with a value outside the schema (unknown category, bad code, missing value): stop with a message "
         "that quotes it (error), or leave the row out (drop; a private run never says how many).",
)


scheduler_option = click.option(
    "--scheduler", metavar="ADDRESS|local", default=None,
    help="Count the data on a Dask cluster: a dask.distributed scheduler's address (tcp://host:8786), or "
         "'local' to start a LocalCluster here. Needs the dask extra (pip install 'synth[dask]').",
)


def scan_data(data, schema, subsets, *, columns, bad_rows, scheduler, quiet, private: bool):
    """The planned scan of DATA, in process or on Dask (``--scheduler``), with progress
    (``private``: n is not public, so the progress shows no row count)."""
    if scheduler is None:
        from synth.data.reading import scan

        with progress(f"reading {data}", quiet, "rows", private=private) as update:
            return scan(data, schema, subsets, columns=columns, progress=update, bad_rows=bad_rows)
    from synth.data.dask_scan import close, connect, scan_dask

    client = connect(scheduler)
    try:
        with progress(f"reading {data} on Dask ({scheduler})", quiet, "rows", private=private) as update:
            return scan_dask(data, schema, subsets, columns=columns, client=client, progress=update,
                             bad_rows=bad_rows)
    finally:
        close(client)


#: A delta above this draws a warning when n is not known (1/n for a table of 100,000 rows).
LARGE_DELTA = 1e-5


def warn_if_large_delta(delta: float, rows: int | None) -> None:
    """Warn when delta is too large to mean much: (epsilon, delta)-DP allows a mechanism to
    publish a row outright with probability delta, so delta should be far below 1/n."""
    limit = 1 / rows if rows else LARGE_DELTA
    if delta > limit:
        against = f"1/n = {limit:.3g}" if rows else f"{LARGE_DELTA:g} (1/n for 100,000 rows)"
        warn(f"--delta {delta:g} is above {against}: with probability delta a mechanism may leak a row outright; "
             "choose delta far below 1/n (e.g. 1e-9)")


def warn_if_inferred(schema, schema_file) -> None:
    """One warning per private run whose schema was inferred from the data."""
    if getattr(schema, "inferred", False):
        warn(f"{schema_file} was inferred from the data (synth schema infer): its categories and bin edges are NOT "
             "private and go into the release as they are; review them or replace them with public knowledge")


variant_option = click.option(
    "--variant", type=click.Choice(["practical", "theory"]), default="practical", show_default=True,
    help="pmw: practical (warm-starts on the workload's shared 2-way marginals, tests and measures whole "
         "marginals, refits every measurement) or theory (the textbook PMW with its worst-case plan).",
)

test_option = click.option(
    "--test", "test_kind", type=click.Choice(["auto", "marginal", "query"]), default="auto", show_default=True,
    help="pmw --variant practical: test (and measure) a query's whole marginal table, or the query alone; auto "
         "takes the marginal up to 2^20 (about a million) cells.",
)


representation_option = click.option(
    "--representation", type=click.Choice(["auto", "dense", "factored"]), default="auto", show_default=True,
    help="mwem, pmw: keep the distribution as one dense array over every cell (up to 10^8 cells) or as a "
         "factored model over the measured column subsets (a junction tree; any number of columns). auto: "
         "dense while the universe fits.",
)
def storage_options(representation: str, max_model_cells: int | None) -> dict:
    """The engines' ``representation`` and ``max_model_cells`` (its default filled in), after
    refusing a cap on a dense distribution."""
    if max_model_cells is not None and representation == "dense":
        raise click.UsageError("--max-model-cells applies to a factored model, not --representation dense")
    from synth.models.factored import DEFAULT_MAX_MODEL_CELLS

    return {"representation": representation, "max_model_cells": max_model_cells or DEFAULT_MAX_MODEL_CELLS}


max_model_cells_option = click.option(
    "--max-model-cells", type=click.IntRange(1000), default=None,
    help="mwem, pmw with a factored model: the most cells its junction tree's cliques may hold together "
         "(default 10,000,000, about 80 MB a copy). MWEM selects only marginals that fit; PMW answers an "
         "update that would not fit lazily.",
)
