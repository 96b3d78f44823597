"""Shared harness of the benchmark scripts: timing, first-call costs, report pieces, options.

Measuring: ``round_robin`` (and its two-function form ``compare``) samples functions in turn
after one warm-up call each, batching fast calls; ``Comparison`` is one synth-vs-baseline
figure built from those samples. ``first_call`` measures a Numba kernel's JIT cost and
``first_run`` a whole library call's first-call cost; ``traced_peaks`` the peak memory
(tracemalloc) of a sequence of steps. Runs over seeds: ``over_seeds`` (seeds outermost) and
``Spread`` (median and range over the seeds).
Reporting: markdown helpers for the sections ``_results.write_section`` stores in RESULTS.md.
A script's run is a ``Session`` (``session(__doc__, ...)``): its options (``--repeats``,
``--quick``, ``--seed``, ``--data-dir``, ``--no-write``), progress lines on stderr, and the
report's header (command, date, machine, load) and publication.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import math
import os
import platform
import shlex
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import numba
from _data import DEFAULT_DATA_DIR  # benchmarks/ is on sys.path when run as a script
from _results import write_section

REPO = Path(__file__).resolve().parents[1]
#: Fast calls are repeated back to back until one timing sample lasts this long.
MIN_SAMPLE_S = 0.02


# -- timing ---------------------------------------------------------------------------------


def timed(fn: Callable[[], object]) -> float:
    """Seconds taken by one call of ``fn``."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def calls_per_sample(fn: Callable[[], object], min_sample_s: float) -> int:
    """How many calls of ``fn`` make one timing sample last at least ``min_sample_s``."""
    seconds = timed(fn)
    return max(1, math.ceil(min_sample_s / max(seconds, 1e-9)))


def sample(fn: Callable[[], object], number: int) -> tuple[float, float]:
    """Mean seconds per call over ``number`` back-to-back calls of ``fn``, and the process's
    CPU time over that wall time (about 1 when one core worked, up to the thread count)."""
    cpu_start = time.process_time()
    start = time.perf_counter()
    for _ in range(number):
        fn()
    wall = time.perf_counter() - start
    return wall / number, (time.process_time() - cpu_start) / max(wall, 1e-9)


@dataclass
class Samples:
    """Timing samples of one function: seconds per call, and CPU time / wall time."""

    seconds: list[float]
    cpu: list[float]


@dataclass(frozen=True)
class Timed:
    """One function to time: its key (samples of equal keys are pooled), and an optional
    ``setup`` run before its warm-up and before each of its samples, outside the timing."""

    key: str
    fn: Callable[[], object]
    setup: Callable[[], object] | None = None


def round_robin(
    entries: Sequence[Timed], repeats: int, min_sample_s: float = MIN_SAMPLE_S
) -> dict[str, Samples]:
    """Samples of each entry's key, ``repeats`` per listing of the key, taken in turn.

    Each distinct key is called once first (warm-up, and to size its batches: fast calls
    are batched so one sample lasts at least ``min_sample_s``; 0 means one call a sample).
    Then every repeat samples the entries in order, so machine noise hits all alike; a key
    listed twice (a shared baseline) pools its samples.
    """
    numbers: dict[str, int] = {}
    for entry in entries:
        if entry.key not in numbers:
            if entry.setup is not None:
                entry.setup()
            numbers[entry.key] = calls_per_sample(entry.fn, min_sample_s)
    times = {key: Samples([], []) for key in numbers}
    for _ in range(repeats):
        for entry in entries:
            if entry.setup is not None:
                entry.setup()
            seconds, cpu = sample(entry.fn, numbers[entry.key])
            times[entry.key].seconds.append(seconds)
            times[entry.key].cpu.append(cpu)
    return times


def compare(
    synth_fn: Callable[[], object],
    base_fn: Callable[[], object],
    repeats: int,
    min_sample_s: float = MIN_SAMPLE_S,
) -> tuple[Samples, Samples]:
    """Samples of ``synth_fn`` and of ``base_fn``, taken alternately (``round_robin``)."""
    times = round_robin([Timed("synth", synth_fn), Timed("base", base_fn)], repeats, min_sample_s)
    return times["synth"], times["base"]


@dataclass(frozen=True)
class Comparison:
    """One figure: synth vs its baseline on the same work (``work`` items of ``unit``)."""

    case: str
    work: int
    unit: str
    synth_s: float  # median seconds per call
    base_s: float
    synth_best_s: float  # fastest sample
    base_best_s: float
    synth_cpu: float  # median CPU time / wall time of the synth samples
    threads: str  # bench_mechanisms' Numba thread count column ("-" where it does not apply)

    @classmethod
    def of(
        cls, case: str, work: int, unit: str, synth: Samples, base: Samples, threads: str = "-"
    ) -> Comparison:
        """The figure from the synth and baseline samples: medians and minimums."""
        return cls(
            case,
            work,
            unit,
            statistics.median(synth.seconds),
            statistics.median(base.seconds),
            min(synth.seconds),
            min(base.seconds),
            statistics.median(synth.cpu),
            threads,
        )

    @property
    def ratio(self) -> float:
        """Speed ratio synth / baseline on medians (> 1: synth faster)."""
        return self.base_s / self.synth_s

    @property
    def best_ratio(self) -> float:
        """Speed ratio synth / baseline on the fastest samples (less sensitive to noise)."""
        return self.base_best_s / self.synth_best_s

    @property
    def factor(self) -> float:
        """synth time / baseline time on the medians (> 1: synth slower)."""
        return self.synth_s / self.base_s

    @property
    def best_factor(self) -> float:
        """synth time / baseline time on the fastest samples (less sensitive to noise)."""
        return self.synth_best_s / self.base_best_s


def traced_peaks(*steps: Callable[[], object]) -> list[int]:
    """Peak bytes traced by ``tracemalloc`` during each of ``steps``, run in order in one
    tracing session (NumPy reports its array buffers to tracemalloc; memory allocated before
    the session is not counted). A step's peak includes what earlier steps still hold."""
    peaks = []
    tracemalloc.start()
    try:
        for step in steps:
            tracemalloc.reset_peak()
            step()
            peaks.append(tracemalloc.get_traced_memory()[1])
    finally:
        tracemalloc.stop()
    return peaks


# -- runs over seeds -------------------------------------------------------------------------


@dataclass(frozen=True)
class Spread:
    """One figure over seeds: the median, the range, how many values and their sum."""

    median: float
    low: float
    high: float
    count: int
    total: float

    @classmethod
    def of(cls, values: Iterable[float]) -> Spread:
        values = list(values)
        return cls(statistics.median(values), min(values), max(values), len(values), sum(values))

    def text(self, digits: int = 3) -> str:
        """'0.037 [0.036, 0.038]' (just the median when every value is the same)."""
        mid = f"{self.median:.{digits}f}"
        return mid if self.low == self.high else f"{mid} [{self.low:.{digits}f}, {self.high:.{digits}f}]"


def with_time(fn: Callable[[], object]) -> tuple[object, float]:
    """``fn()``'s result and the seconds it took."""
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def over_seeds(
    keys: Iterable[Hashable], seeds: Sequence[int], run: Callable[[Hashable, int], dict[str, float]]
) -> dict[Hashable, dict[str, Spread]]:
    """``run(key, seed)`` (named figures) for every key and seed, seeds outermost so that load
    changes on the shared machine hit every key alike; each figure's ``Spread`` per key."""
    keys = list(keys)
    figures: dict[Hashable, dict[str, list[float]]] = {key: {} for key in keys}
    for seed in seeds:
        for key in keys:
            for name, value in run(key, seed).items():
                figures[key].setdefault(name, []).append(value)
    return {key: {name: Spread.of(v) for name, v in named.items()} for key, named in figures.items()}


# -- first calls (JIT) ----------------------------------------------------------------------


@dataclass(frozen=True)
class FirstCall:
    """First-call (JIT) cost of one kernel."""

    kernel: str
    first_call_s: float
    cache: str
    cold_compile_s: float


def cache_status(dispatcher) -> str:
    """'cache load' or 'compile', from a Numba dispatcher's cache counters."""
    stats = dispatcher.stats
    if sum(stats.cache_misses.values()):
        return "compile (cache miss)"
    if sum(stats.cache_hits.values()):
        return "cache load"
    return "compile (no cache)"


def cold_compile_s(dispatcher, args: tuple, **jit_options) -> float:
    """Seconds of a from-scratch compile + first call of the kernel's Python function (no
    cache; the kernels it calls are already compiled)."""
    fresh = numba.njit(cache=False, **jit_options)(dispatcher.py_func)
    return timed(lambda: fresh(*args))


def first_call(kernel: str, first_call_s: float, dispatcher, args: tuple, **jit_options) -> FirstCall:
    """The ``FirstCall`` of ``dispatcher`` whose library call took ``first_call_s``: its cache
    status, then a cold compile run on ``args`` (``jit_options`` as the kernel's, e.g. parallel)."""
    cache = cache_status(dispatcher)
    return FirstCall(kernel, first_call_s, cache, cold_compile_s(dispatcher, args, **jit_options))


def synth_kernels() -> dict[str, object]:
    """synth's Numba kernels (dispatchers) by name, from every module of ``synth._kernels``."""
    import importlib
    import pkgutil

    import synth._kernels as package

    found = {}
    for module in [package] + [
        importlib.import_module(f"{package.__name__}.{m.name}")
        for m in pkgutil.iter_modules(package.__path__)
    ]:
        found.update({n: k for n in dir(module) if hasattr(k := getattr(module, n), "py_func")})
    return found


@dataclass(frozen=True)
class FirstRun:
    """A library call's first-call cost: the first call, the same call again, and the kernels
    the first call loaded from the on-disk cache or compiled."""

    what: str
    first_s: float
    second_s: float
    loaded: tuple[tuple[str, str], ...]  # (kernel, cache status)

    def text(self) -> str:
        kernels = ", ".join(f"`{k}` ({status})" for k, status in self.loaded) or "none"
        extra = self.first_s - self.second_s
        one_off = f"one-off about {duration(extra)}" if extra > 0 else "no one-off cost above the noise"
        return (f"{self.what}: first call {duration(self.first_s)}, again {duration(self.second_s)} "
                f"({one_off}; kernels it loaded: {kernels})")


def first_run(what: str, fn: Callable[[], object]) -> FirstRun:
    """Time ``fn``'s first call and a second one, and list the kernels the first call used
    that no earlier call had (with their cache status)."""
    kernels = synth_kernels()
    before = {name for name, k in kernels.items() if k.signatures}
    first, second = timed(fn), timed(fn)
    loaded = tuple(
        (name, cache_status(k)) for name, k in sorted(kernels.items()) if k.signatures and name not in before
    )
    return FirstRun(what, first, second, loaded)


# -- report ---------------------------------------------------------------------------------


def rate(work: int, seconds: float, unit: str) -> str:
    """Human-readable rate, e.g. '52.3 M rows/s'."""
    value = work / seconds
    for scale, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:.1f} {prefix} {unit}/s"
    return f"{value:.0f} {unit}/s"


def fine(seconds: float) -> str:
    """``duration`` with two decimals below 10 microseconds."""
    return f"{seconds * 1e6:.2f} us" if seconds < 1e-5 else duration(seconds)


def seconds_text(seconds: float) -> str:
    """Seconds with two decimals below 10 s, one above."""
    return f"{seconds:.2f} s" if seconds < 10 else f"{seconds:.1f} s"


def duration(seconds: float) -> str:
    """Human-readable duration: s, ms, or microseconds below 1 ms."""
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} us"
    if seconds >= 10:
        return f"{seconds:.1f} s"
    return f"{seconds * 1e3:.1f} ms"


def markdown_table(columns: Sequence[tuple[str, str]], rows: Iterable[Sequence[str]]) -> str:
    """A markdown table: ``columns`` are (title, rule) pairs such as ("size", "---:")."""
    lines = [
        "| " + " | ".join(title for title, _ in columns) + " |",
        "|" + "|".join(rule for _, rule in columns) + "|",
    ]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    return "\n".join(lines)


def table(titles: str, rows: Iterable[Sequence[str]]) -> str:
    """``markdown_table`` from '|'-separated titles, right-aligned unless marked with a leading
    '@'; a literal bar is written '\\|' (and stays escaped, as markdown needs)."""
    names = [t.replace("\0", "\\|") for t in titles.replace("\\|", "\0").split("|")]
    return markdown_table([(t.lstrip("@"), "---" if t.startswith("@") else "---:") for t in names], rows)


def timing_columns(baseline: str) -> list[tuple[str, str]]:
    """The median and rate columns of synth and of ``baseline`` (see ``timing_cells``)."""
    titles = ("synth median", "synth rate", f"{baseline} median", f"{baseline} rate")
    return [(title, "---:") for title in titles]


def timing_cells(row: Comparison) -> list[str]:
    """A row's synth and baseline medians and rates, under ``timing_columns``."""
    return [
        duration(row.synth_s),
        rate(row.work, row.synth_s, row.unit),
        duration(row.base_s),
        rate(row.work, row.base_s, row.unit),
    ]


def first_call_table(calls: Sequence[FirstCall]) -> str:
    """Markdown table of the first-call (JIT) costs."""
    columns = [
        ("kernel", "---"),
        ("first call via library", "---:"),
        ("what it did", "---"),
        ("cold compile, no cache", "---:"),
    ]
    return markdown_table(
        columns,
        (
            [c.kernel, f"{c.first_call_s * 1e3:.0f} ms", c.cache, f"{c.cold_compile_s * 1e3:.0f} ms"]
            for c in calls
        ),
    )


def met(ok: bool) -> str:
    """Bold 'met' or 'not met'."""
    return "**met**" if ok else "**not met**"


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


def report_header(title: str, machine: str, run_s: float | None = None) -> list[str]:
    """The first lines of a report: title, command, date (and run time), machine lines."""
    now = _dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    took = "" if run_s is None else f" (run took {run_s:.0f} s)"
    return [f"# {title}", "", f"Command: `{command_line()}`  ", f"Date: {now}{took}", "", machine]


def repeats_note(repeats: int, batching_extra: str = "") -> str:
    """The '- repeats per figure' line up to its closing parenthesis (``batching_extra`` goes
    just before it)."""
    return (
        f"- repeats per figure: {repeats} (median reported, after one warm-up call of each; "
        f"calls faster than {MIN_SAMPLE_S * 1e3:.0f} ms are batched into samples of at least that long"
        f"{batching_extra})"
    )


def publish(section: str, report: str, total_s: float) -> None:
    """Print ``report``, write it to ``section`` of RESULTS.md, and say so on stderr."""
    print(report)
    path = write_section(section, report)
    print(f"(wrote the {section} section of {path}; total {total_s:.0f} s)", file=sys.stderr)


# -- options --------------------------------------------------------------------------------


def option_parser(doc: str, quick_help: str) -> argparse.ArgumentParser:
    """A parser described by ``doc``'s first paragraph, with ``--repeats`` and ``--quick``."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument(
        "--repeats", type=int, default=None, help="timed repeats per figure (default 5; 3 with --quick)"
    )
    parser.add_argument("--quick", action="store_true", help=quick_help)
    return parser


def parse_options(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse ``argv``, check ``--repeats`` and fill in its default (5, or 3 with ``--quick``)."""
    args = parser.parse_args(argv)
    if args.repeats is not None and args.repeats < 1:
        parser.error("--repeats must be >= 1")
    if args.repeats is None:
        args.repeats = 3 if args.quick else 5
    return args



# -- a script's run --------------------------------------------------------------------------


@dataclass
class Session:
    """One run of a benchmark script: its options, its start (time, load average), progress
    lines on stderr, and its report's header and publication."""

    args: argparse.Namespace
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

    def seeds(self, full: int, quick: int) -> tuple[int, ...]:
        """``--seed`` and the next ones: ``full`` of them, ``quick`` with ``--quick``."""
        return tuple(self.seed + i for i in range(quick if self.quick else full))

    def adult(self) -> tuple:
        """The adult schema and codes from ``--data-dir``."""
        return self.table("adult")

    def table(self, name: str) -> tuple:
        """A benchmark table's schema and codes from ``--data-dir`` (``adult``, ``titanic``)."""
        from _data import load_table

        return load_table(self.args.data_dir, name)

    @contextlib.contextmanager
    def stage(self, label: str) -> Iterator[None]:
        """Say on stderr how long the block took."""
        start = time.perf_counter()
        yield
        print(f"{label}: {time.perf_counter() - start:.0f} s", file=sys.stderr)

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def header(
        self, title: str, libraries: Sequence[ModuleType], note: str = "", repeats: bool = True
    ) -> list[str]:
        """Title, command, date and run time, machine and load lines, then the repeats line
        (``repeats``) with ``note`` after it."""
        machine = (
            f"{machine_info(*libraries)}\n- load average (1, 5, 15 min) at start: {self.load_start}; at end: "
            f"{load_average()} (the cores are shared)"
        )
        last = (repeats_note(self.repeats) if repeats else "") + note
        return [*report_header(title, machine, self.elapsed()), *([last] if last else []), ""]

    def publish(self, section: str, report: str) -> None:
        """Print ``report`` and, unless ``--no-write``, store it as ``section`` of RESULTS.md."""
        if self.args.no_write:
            print(report)
            print(f"(--no-write: RESULTS.md left as it is; total {self.elapsed():.0f} s)", file=sys.stderr)
        else:
            publish(section, report, self.elapsed())


def session(
    doc: str,
    quick_help: str,
    argv: Sequence[str] | None = None,
    add_options: Callable[[argparse.ArgumentParser], None] | None = None,
) -> Session:
    """Parse a script's options (``--repeats``, ``--quick``, ``--seed``, ``--data-dir``,
    ``--no-write`` and what ``add_options`` adds) and start its ``Session``."""
    parser = option_parser(doc, quick_help)
    parser.add_argument("--seed", type=int, default=0, help="first seed of the runs and of any random data")
    parser.add_argument(
        "--data-dir", type=Path, default=DEFAULT_DATA_DIR, help="folder with adult.csv and adult-domain.json"
    )
    parser.add_argument(
        "--no-write", action="store_true", help="print the report only; leave benchmarks/RESULTS.md as it is"
    )
    if add_options is not None:
        add_options(parser)
    args = parse_options(parser, argv)
    if args.seed < 0:
        parser.error("--seed must be >= 0")
    return Session(args)
