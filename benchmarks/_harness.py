"""The harness of the benchmark scripts: one run of a script, from its options to its section of
``benchmarks/RESULTS.md``.

Each ``bench_*.py`` answers one question and writes its own section of RESULTS.md (named after
the script). ``python benchmarks/run_all.py`` runs every script but the slow ones (``bench_wide``,
run by name) with ``--quick`` in turn and so rewrites their sections (progress on stderr; a
non-zero exit when a script fails).

The scripts share, beside this module: ``_timing`` (samples taken in turn, synth-vs-baseline
figures, runs over seeds, peak memory, first-call costs), ``_report`` (figures as text, the
markdown tables and blocks), ``_baselines`` (the plain NumPy peers synth is compared with),
``_peers`` (other tools' figures, quoted), ``_data`` (adult, projections of it, synthetic
universes, the workloads and their error), ``_results`` (the writer of one section of
RESULTS.md), and for the wide tables ``_wide`` (their builders), ``_mst`` (the MST and
independent baselines, our reimplementation) and ``_isolate`` (a method in a fresh process,
with a time limit and its peak memory). ``benchmarks/`` is on ``sys.path`` when a script runs.

A script's run is a ``Session`` (``session(__doc__, quick_help, argv, ...)``): the options every
script has (``--repeats``, ``--quick``, ``--seed``, ``--data-dir``, ``--no-write``; ``--seeds``
where it runs over seeds) and those it adds; its settings, full or quick (``pick``, ``seeds``);
progress lines on stderr (``stage``, ``say``); and the report's header (command, date, machine,
load, repeats) and publication (``publish``: printed, and stored unless ``--no-write``).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import os
import platform
import shlex
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from _data import DEFAULT_DATA_DIR, load_table  # benchmarks/ is on sys.path when run as a script
from _results import write_section
from _timing import MIN_SAMPLE_S

REPO = Path(__file__).resolve().parents[1]


def command_line() -> str:
    """The command that produced this run, with the script path relative to the repository."""
    script = Path(sys.argv[0]).resolve()
    try:
        script_text = str(script.relative_to(REPO))
    except ValueError:
        script_text = str(script)
    return shlex.join(["python", script_text, *sys.argv[1:]])


def machine_info(*libraries: ModuleType) -> str:
    """Markdown list lines: cores, platform, and the versions of ``libraries``."""
    return (
        f"- cores (os.cpu_count()): {os.cpu_count()}\n"
        f"- platform: {platform.platform()}, {platform.machine()}, Python {platform.python_version()}\n"
        "- " + ", ".join(f"{lib.__name__} {lib.__version__}" for lib in libraries)
    )


def load_average() -> str:
    """The 1-, 5- and 15-minute load averages, where the platform has them."""
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except (AttributeError, OSError):  # pragma: no cover - not Unix
        return "unavailable"


def repeats_note(repeats: int, batching_extra: str = "") -> str:
    """The '- repeats per figure' line (``batching_extra`` goes just before its closing parenthesis)."""
    return (
        f"- repeats per figure: {repeats} (median reported, after one warm-up call of each; "
        f"calls faster than {MIN_SAMPLE_S * 1e3:.0f} ms are batched into samples of at least that long"
        f"{batching_extra})"
    )


@dataclass
class Session:
    """One run of a benchmark script: its options, its start (time, load average), progress
    lines on stderr, and its report's header and publication."""

    args: argparse.Namespace
    seed_counts: tuple[int, int] | None = None  # (full, quick) default of --seeds
    started: float = field(default_factory=time.perf_counter)
    load_start: str = field(default_factory=load_average)

    @property
    def quick(self) -> bool:
        return self.args.quick

    @property
    def repeats(self) -> int:
        return self.args.repeats

    @property
    def seed(self) -> int:
        return self.args.seed

    def pick(self, full, quick):
        """``full``, or ``quick`` with ``--quick``."""
        return quick if self.quick else full

    @property
    def seeds(self) -> tuple[int, ...]:
        """``--seed`` and the next ones: ``--seeds`` of them (its default: fewer with ``--quick``)."""
        count = self.args.seeds or self.pick(*self.seed_counts)
        return tuple(self.seed + i for i in range(count))

    def adult(self) -> tuple:
        """The adult schema and codes from ``--data-dir``."""
        return self.table("adult")

    def table(self, name: str) -> tuple:
        """A benchmark table's schema and codes from ``--data-dir`` (``adult``, ``titanic``)."""
        return load_table(self.args.data_dir, name)

    def say(self, text: str) -> None:
        """A progress line on stderr."""
        print(text, file=sys.stderr)

    @contextlib.contextmanager
    def stage(self, label: str) -> Iterator[None]:
        """Say on stderr how long the block took."""
        start = time.perf_counter()
        yield
        self.say(f"{label}: {time.perf_counter() - start:.0f} s")

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def header(self, title: str, libraries: Sequence[ModuleType], note: str = "", repeats: bool = True,
               machine_extra: str = "", batching_extra: str = "") -> list[str]:
        """Title, command, date and run time, machine lines (``machine_extra`` after the library
        versions) and load, then the repeats line (``repeats``) with ``note`` after it."""
        now = _dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
        last = (repeats_note(self.repeats, batching_extra) if repeats else "") + note
        return [
            f"# {title}", "", f"Command: `{command_line()}`  ",
            f"Date: {now} (run took {self.elapsed():.0f} s)", "", machine_info(*libraries) + machine_extra,
            f"- load average (1, 5, 15 min) at start: {self.load_start}; at end: {load_average()} "
            "(the cores are shared)",
            *([last] if last else []), "",
        ]

    def publish(self, section: str, report: str) -> None:
        """Print ``report`` and, unless ``--no-write``, store it as ``section`` of RESULTS.md."""
        print(report)
        if self.args.no_write:
            self.say(f"(--no-write: RESULTS.md left as it is; total {self.elapsed():.0f} s)")
        else:
            path = write_section(section, report)
            self.say(f"(wrote the {section} section of {path}; total {self.elapsed():.0f} s)")


def session(
    doc: str,
    quick_help: str,
    argv: Sequence[str] | None = None,
    add_options: Callable[[argparse.ArgumentParser], None] | None = None,
    seeds: tuple[int, int] | None = None,
) -> Session:
    """Parse a script's options and start its ``Session``: ``--repeats``, ``--quick`` (described by
    ``quick_help``), ``--seed``, ``--data-dir``, ``--no-write``, ``--seeds`` when ``seeds`` gives
    its (full, quick) default, and what ``add_options`` adds. ``doc``'s first paragraph is the help."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument(
        "--repeats", type=int, default=None, help="timed repeats per figure (default 5; 3 with --quick)"
    )
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--seed", type=int, default=0, help="first seed of the runs and of any random data")
    if seeds is not None:
        parser.add_argument("--seeds", type=int, default=None,
                            help=f"seeds per figure (default {seeds[0]}; {seeds[1]} with --quick)")
    parser.add_argument(
        "--data-dir", type=Path, default=DEFAULT_DATA_DIR, help="folder with adult.csv and adult-domain.json"
    )
    parser.add_argument(
        "--no-write", action="store_true", help="print the report only; leave benchmarks/RESULTS.md as it is"
    )
    if add_options is not None:
        add_options(parser)
    args = parser.parse_args(argv)
    if args.repeats is not None and args.repeats < 1:
        parser.error("--repeats must be >= 1")
    if args.repeats is None:
        args.repeats = 3 if args.quick else 5
    if args.seed < 0:
        parser.error("--seed must be >= 0")
    if getattr(args, "seeds", None) is not None and args.seeds < 1:
        parser.error("--seeds must be >= 1")
    return Session(args, seeds)
