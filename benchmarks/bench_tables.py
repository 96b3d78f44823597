"""Benchmark synth's count kernels against plain NumPy / pandas baselines on adult.

Three figures, each measured against its baseline in the same run:

1. histogram build rate (rows/s): ``synth.tables.histogram`` vs
   ``np.bincount(np.ravel_multi_index(codes.T, shape), minlength=size)``;
2. CSV reading (rows/s): ``synth.data.scan`` / ``synth.data.read`` end to end vs
   ``pandas.read_csv(path)`` alone, on the same (tiled) file;
3. marginal rate (cells/s of the input table): ``synth.tables.marginal_from_dense`` vs
   ``x.reshape(shape).sum(axis=other_axes)``.

Every figure is the median of several repeats after a warm-up; the first (JIT) call of
each kernel is reported separately. Prints a markdown report and writes it to its own
section of ``benchmarks/RESULTS.md`` (``_results.write_section``; other sections are kept).

Usage: ``python benchmarks/bench_tables.py [--repeats N] [--quick] [--data-dir DIR]``
"""

from __future__ import annotations

import argparse
import datetime as _dt
import math
import os
import platform
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numba
import numpy as np
import pandas as pd

from synth import _kernels
from synth.data import code_dtype, read, scan
from synth.schema import Schema
from synth.tables import histogram, marginal_from_dense

from _results import RESULTS_PATH, write_section  # benchmarks/ is on sys.path when run as a script

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA_DIR = REPO.parent / "shared" / "datasets"
#: Fast calls are repeated back to back until one timing sample lasts this long.
MIN_SAMPLE_S = 0.02

#: The 7-column universe (120,960 cells).
SMALL_COLUMNS = ("workclass", "education-num", "marital-status", "relationship", "race", "sex", "income>50K")
#: The 8-column universe: age in front of the 7 above (10,281,600 cells).
BIG_COLUMNS = ("age",) + SMALL_COLUMNS

#: Column subsets for the marginal benchmark: (label, columns), per universe.
SMALL_SUBSETS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("1-way, first axis", ("workclass",)),
    ("1-way, middle axis", ("marital-status",)),
    ("1-way, last axis", ("income>50K",)),
    ("2-way, first two", ("workclass", "education-num")),
    ("2-way, last two", ("sex", "income>50K")),
    ("2-way, first + last", ("workclass", "income>50K")),
    ("3-way, interleaved", ("workclass", "marital-status", "sex")),
    ("3-way, interleaved, reversed order", ("income>50K", "race", "education-num")),
)
BIG_SUBSETS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("1-way, first axis", ("age",)),
    ("1-way, middle axis", ("marital-status",)),
    ("1-way, last axis", ("income>50K",)),
    ("2-way, first two", ("age", "workclass")),
    ("2-way, last two", ("sex", "income>50K")),
    ("2-way, first + last", ("age", "income>50K")),
    ("3-way, interleaved", ("age", "marital-status", "sex")),
    ("3-way, interleaved, reversed order", ("income>50K", "race", "education-num")),
)


@dataclass(frozen=True)
class Settings:
    """Sizes and repeat counts of one run."""

    repeats: int
    hist_tiles: int
    csv_tiles: int
    seed: int


@dataclass(frozen=True)
class Row:
    """One benchmark figure: synth vs its baseline on the same work."""

    case: str
    work: int
    unit: str
    synth_s: float
    base_s: float
    synth_best_s: float
    base_best_s: float

    @property
    def ratio(self) -> float:
        """Speed ratio synth / baseline on medians (> 1: synth faster)."""
        return self.base_s / self.synth_s

    @property
    def best_ratio(self) -> float:
        """Speed ratio synth / baseline on the fastest samples (less sensitive to noise)."""
        return self.base_best_s / self.synth_best_s


@dataclass(frozen=True)
class FirstCall:
    """First-call (JIT) cost of one kernel."""

    kernel: str
    first_call_s: float
    cache: str
    cold_compile_s: float


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


def sample(fn: Callable[[], object], number: int) -> float:
    """Mean seconds per call over ``number`` back-to-back calls of ``fn``."""
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number


def compare(
    synth_fn: Callable[[], object],
    base_fn: Callable[[], object],
    repeats: int,
    min_sample_s: float = MIN_SAMPLE_S,
) -> tuple[float, float, float, float]:
    """Seconds per call of ``synth_fn`` and ``base_fn``: the two medians, then the two minimums.

    Each is called once first (warm-up, and to size the batches): fast calls are batched so
    one sample lasts at least ``min_sample_s``. The two are sampled alternately so that
    machine noise hits both alike.
    """
    synth_number = calls_per_sample(synth_fn, min_sample_s)
    base_number = calls_per_sample(base_fn, min_sample_s)
    synth_times, base_times = [], []
    for _ in range(repeats):
        synth_times.append(sample(synth_fn, synth_number))
        base_times.append(sample(base_fn, base_number))
    return statistics.median(synth_times), statistics.median(base_times), min(synth_times), min(base_times)


def compare_shared_baseline(
    synth_fns: Sequence[Callable[[], object]], base_fn: Callable[[], object], repeats: int
) -> list[tuple[float, float, float, float]]:
    """Like ``compare`` for several synth functions against one baseline, without batching.

    Round robin: each repeat times every synth function, each followed by the baseline, so
    the baseline's median and minimum come from ``repeats * len(synth_fns)`` samples and are
    shared by every row.
    """
    for fn in (*synth_fns, base_fn):
        fn()
    synth_times: list[list[float]] = [[] for _ in synth_fns]
    base_times: list[float] = []
    for _ in range(repeats):
        for times, fn in zip(synth_times, synth_fns):
            times.append(timed(fn))
            base_times.append(timed(base_fn))
    base_median, base_best = statistics.median(base_times), min(base_times)
    return [(statistics.median(t), base_median, min(t), base_best) for t in synth_times]


# -- data -----------------------------------------------------------------------------------


def load_adult(data_dir: Path) -> tuple[Schema, np.ndarray]:
    """The adult schema (from its domain file) and every row's codes, read through synth."""
    schema = Schema.load(data_dir / "adult-domain.json")
    encoded = read(data_dir / "adult.csv", schema)
    return schema, encoded.codes


def project_codes(schema: Schema, codes: np.ndarray, columns: Sequence[str]) -> tuple[Schema, np.ndarray]:
    """The sub-schema over ``columns`` and the matching contiguous code array (smallest dtype)."""
    sub = schema.project(columns)
    positions = [schema.index(name) for name in columns]
    return sub, np.ascontiguousarray(codes[:, positions], dtype=code_dtype(sub))


def numpy_histogram(codes: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """The NumPy baseline histogram: bincount of the raveled cell indices."""
    size = int(np.prod(shape))
    return np.bincount(np.ravel_multi_index(codes.T, shape), minlength=size).reshape(shape)


def numpy_marginal(x: np.ndarray, shape: tuple[int, ...], positions: Sequence[int]) -> np.ndarray:
    """The NumPy baseline marginal: sum out the other axes, then put kept axes in order."""
    other = tuple(i for i in range(len(shape)) if i not in positions)
    table = x.reshape(shape).sum(axis=other)
    in_order = sorted(positions)
    return table.transpose([in_order.index(p) for p in positions])


def write_tiled_csv(source: Path, target: Path, tiles: int) -> int:
    """Write ``source``'s header then its data rows ``tiles`` times; return the data row count."""
    header, body = source.read_bytes().split(b"\n", 1)
    if not body.endswith(b"\n"):
        body += b"\n"
    with open(target, "wb") as handle:
        handle.write(header + b"\n")
        for _ in range(tiles):
            handle.write(body)
    return body.count(b"\n") * tiles


# -- 0. first calls -------------------------------------------------------------------------


def cache_status(dispatcher) -> str:
    """'cache load' or 'compile', from a Numba dispatcher's cache counters."""
    stats = dispatcher.stats
    if sum(stats.cache_misses.values()):
        return "compile (cache miss)"
    if sum(stats.cache_hits.values()):
        return "cache load"
    return "compile (no cache)"


def cold_compile_s(dispatcher, args: tuple) -> float:
    """Seconds of a from-scratch compile + first call of the kernel's Python function (no cache)."""
    fresh = numba.njit(cache=False)(dispatcher.py_func)
    return timed(lambda: fresh(*args))


def bench_first_calls(schema: Schema, codes: np.ndarray, seed: int) -> list[FirstCall]:
    """First-call cost of the two kernels through the library, on tiny inputs.

    Must run before any other call of ``histogram`` / ``marginal_from_dense``.
    """
    sub, small = project_codes(schema, codes[:1000], SMALL_COLUMNS)
    first_hist = timed(lambda: histogram(small, sub))
    positions = np.arange(len(sub), dtype=np.int64)
    sizes = np.array(sub.shape, dtype=np.int64)
    out = np.zeros(sub.universe_size, dtype=np.int64)
    hist_args = (small, positions, sizes, sub.strides, out)

    x = np.random.default_rng(seed).random(sub.universe_size)
    first_marg = timed(lambda: marginal_from_dense(x, sub, ["workclass", "sex"]))
    dims = np.array([9, 16 * 7 * 6 * 5, 2, 2], dtype=np.int64)
    keep = np.array([True, False, True, False])
    marg_args = (x, dims, keep, np.array([2, 0, 1, 0], dtype=np.int64), np.zeros(18))
    return [
        FirstCall(
            "count_cells (histogram, uint8 codes)",
            first_hist,
            cache_status(_kernels.count_cells),
            cold_compile_s(_kernels.count_cells, hist_args),
        ),
        FirstCall(
            "marginalize (marginal_from_dense, float64)",
            first_marg,
            cache_status(_kernels.marginalize),
            cold_compile_s(_kernels.marginalize, marg_args),
        ),
    ]


# -- 1. histogram ---------------------------------------------------------------------------


def bench_histogram(schema: Schema, codes: np.ndarray, settings: Settings) -> list[Row]:
    """Histogram build rate over the 7- and 8-column universes from tiled in-memory codes."""
    rows = []
    for label, columns in (("7 columns", SMALL_COLUMNS), ("8 columns (+ age)", BIG_COLUMNS)):
        sub, sub_codes = project_codes(schema, codes, columns)
        tiled = np.tile(sub_codes, (settings.hist_tiles, 1))
        shape = sub.shape
        if not np.array_equal(histogram(tiled, sub), numpy_histogram(tiled, shape)):
            raise AssertionError(f"histogram over {label}: synth and NumPy disagree")
        times = compare(
            lambda: histogram(tiled, sub), lambda: numpy_histogram(tiled, shape), settings.repeats
        )
        case = f"{label}, universe {sub.universe_size:,} cells"
        rows.append(Row(case, len(tiled), "rows", *times))
    return rows


# -- 2. CSV ---------------------------------------------------------------------------------


def bench_csv(schema: Schema, codes: np.ndarray, data_dir: Path, settings: Settings) -> list[Row]:
    """scan / read of a tiled adult CSV end to end vs pandas.read_csv alone (same file)."""
    sub, sub_codes = project_codes(schema, codes, SMALL_COLUMNS)
    expected = histogram(sub_codes, sub) * settings.csv_tiles
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_tables_") as tmp:
        path = Path(tmp) / "adult_tiled.csv"
        n_rows = write_tiled_csv(data_dir / "adult.csv", path, settings.csv_tiles)
        mb = path.stat().st_size / 1e6

        def pandas_read() -> pd.DataFrame:
            return pd.read_csv(path)

        def scan_all() -> object:
            return scan(path, schema, [SMALL_COLUMNS])

        def scan_seven() -> object:
            return scan(path, schema, [SMALL_COLUMNS], columns=SMALL_COLUMNS)

        def read_all() -> object:
            return read(path, schema)

        if not np.array_equal(scan_all().tables[SMALL_COLUMNS], expected):
            raise AssertionError("scan (all columns): the marginal disagrees with the in-memory histogram")
        if not np.array_equal(scan_seven().tables[SMALL_COLUMNS], expected):
            raise AssertionError("scan (7 columns): marginal disagrees with the in-memory histogram")
        if not np.array_equal(read_all().codes, np.tile(codes, (settings.csv_tiles, 1))):
            raise AssertionError("read: codes disagree with the tiled in-memory codes")
        cases = (
            ("scan, all 14 columns -> 7-col marginal", scan_all),
            ("read, all 14 columns -> codes", read_all),
            ("scan, columns=7 -> 7-col marginal", scan_seven),
        )
        all_times = compare_shared_baseline([fn for _, fn in cases], pandas_read, settings.repeats)
        for (label, _), times in zip(cases, all_times):
            rows.append(Row(f"{label} ({mb:.0f} MB)", n_rows, "rows", *times))
    return rows


# -- 3. marginals ---------------------------------------------------------------------------


def bench_marginals(schema: Schema, settings: Settings) -> list[Row]:
    """marginal_from_dense vs reshape + sum on random float64 distributions over two universes."""
    rng = np.random.default_rng(settings.seed)
    rows = []
    for columns, subsets in ((SMALL_COLUMNS, SMALL_SUBSETS), (BIG_COLUMNS, BIG_SUBSETS)):
        sub = schema.project(columns)
        shape = sub.shape
        x = rng.random(sub.universe_size)
        x /= x.sum()
        for label, subset in subsets:
            positions = [sub.index(name) for name in subset]
            if not np.allclose(marginal_from_dense(x, sub, subset), numpy_marginal(x, shape, positions)):
                raise AssertionError(f"marginal over {subset}: synth and NumPy disagree")
            times = compare(
                lambda: marginal_from_dense(x, sub, subset),
                lambda: numpy_marginal(x, shape, positions),
                settings.repeats,
            )
            case = f"universe {sub.universe_size:,}: {label} {list(subset)}"
            rows.append(Row(case, sub.universe_size, "cells", *times))
    return rows


# -- report ---------------------------------------------------------------------------------


def rate(work: int, seconds: float, unit: str) -> str:
    """Human-readable rate, e.g. '52.3 M rows/s'."""
    value = work / seconds
    for scale, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:.1f} {prefix} {unit}/s"
    return f"{value:.0f} {unit}/s"


def duration(seconds: float) -> str:
    """Human-readable duration: ms, or microseconds below 1 ms."""
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} us"
    return f"{seconds * 1e3:.1f} ms"


def results_table(rows: Sequence[Row], baseline: str) -> str:
    """Markdown table of one section's rows."""
    lines = [
        f"| case | size | synth median | synth rate | {baseline} median | {baseline} rate "
        "| speed ratio | speed ratio, best samples |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.case} | {r.work:,} {r.unit} | {duration(r.synth_s)} | {rate(r.work, r.synth_s, r.unit)} "
            f"| {duration(r.base_s)} | {rate(r.work, r.base_s, r.unit)} "
            f"| {r.ratio:.2f}x | {r.best_ratio:.2f}x |"
        )
    return "\n".join(lines)


def first_call_table(calls: Sequence[FirstCall]) -> str:
    """Markdown table of the first-call (JIT) costs."""
    lines = [
        "| kernel | first call via library | what it did | cold compile, no cache |",
        "|---|---:|---|---:|",
    ]
    for c in calls:
        lines.append(
            f"| {c.kernel} | {c.first_call_s * 1e3:.0f} ms | {c.cache} | {c.cold_compile_s * 1e3:.0f} ms |"
        )
    return "\n".join(lines)


def met(ok: bool) -> str:
    """Bold 'met' or 'not met'."""
    return "**met**" if ok else "**not met**"


def targets_note(hist: Sequence[Row], csv_rows: Sequence[Row], marg: Sequence[Row]) -> str:
    """The targets and whether this run met them (medians), and marginal cases where synth is slower."""
    primary = csv_rows[0]
    csv_factor = primary.synth_s / primary.base_s
    csv_best_factor = primary.synth_best_s / primary.base_best_s
    lines = [
        "## Targets (judged on the medians)",
        "",
        "- Numba histogram at least as fast as the NumPy baseline (speed ratio >= 1 on both universes): "
        + met(all(r.ratio >= 1.0 for r in hist))
        + " (" + "; ".join(f"{r.ratio:.2f}x, best samples {r.best_ratio:.2f}x" for r in hist) + ").",
        "- CSV read end to end within 1.5x of `pandas.read_csv` alone (synth time / pandas time <= 1.5, "
        "judged on `scan` over all 14 columns, the like-for-like case): "
        f"{met(csv_factor <= 1.5)} ({csv_factor:.2f}x the time of pandas.read_csv; best samples "
        f"{csv_best_factor:.2f}x). Other cases: "
        + ", ".join(
            f"{r.case.split(' (')[0]}: {r.synth_s / r.base_s:.2f}x "
            f"(best {r.synth_best_s / r.base_best_s:.2f}x)"
            for r in csv_rows[1:]
        )
        + ".",
    ]
    slow = [r for r in marg if r.ratio < 1.0]
    if slow:
        lines.append(
            "- No target is set for marginals; `marginal_from_dense` is slower than NumPy in: "
            + "; ".join(f"{r.case} ({r.ratio:.2f}x)" for r in slow)
            + "."
        )
    else:
        lines.append(
            "- No target is set for marginals; `marginal_from_dense` is at least as fast as NumPy "
            "in every case."
        )
    lines.append(
        "- The machine is shared and noisy: figures are medians of alternating synth / baseline calls, "
        "and ratios near 1 can flip between runs; the best-sample ratios are a cross-check."
    )
    return "\n".join(lines)


def command_line() -> str:
    """The command that produced this run, with the script path relative to the repository."""
    script = Path(sys.argv[0]).resolve()
    try:
        script_text = str(script.relative_to(REPO))
    except ValueError:
        script_text = str(script)
    return shlex.join(["python", script_text, *sys.argv[1:]])


def machine_info() -> str:
    """Cores, platform and library versions."""
    return (
        f"- cores (os.cpu_count()): {os.cpu_count()}\n"
        f"- platform: {platform.platform()}, {platform.machine()}, Python {platform.python_version()}\n"
        f"- numpy {np.__version__}, numba {numba.__version__}, pandas {pd.__version__}"
    )


def render(
    settings: Settings,
    calls: Sequence[FirstCall],
    hist: Sequence[Row],
    csv_rows: Sequence[Row],
    marg: Sequence[Row],
) -> str:
    """The full markdown report."""
    now = _dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    return "\n".join(
        [
            "# synth table kernels: benchmark results",
            "",
            f"Command: `{command_line()}`  ",
            f"Date: {now}",
            "",
            machine_info(),
            f"- repeats per figure: {settings.repeats} (median reported, after one warm-up call of each; "
            f"calls faster than {MIN_SAMPLE_S * 1e3:.0f} ms are batched into samples of at least that long); "
            f"seed {settings.seed}",
            "",
            "Speed ratio = synth rate / baseline rate on the medians (> 1 means synth is faster); "
            "the last column is the same ratio on each side's fastest sample, a check against noise.",
            "",
            "## First calls (JIT)",
            "",
            "First call through the library on a tiny input (a Numba cache load when the on-disk cache "
            "is valid, else a compile), and a from-scratch compile of the same kernel with caching off. "
            "The very first call also pays Numba's one-off start-up (hence count_cells' first call can "
            "exceed its cold compile, which runs later).",
            "",
            first_call_table(calls),
            "",
            f"## 1. Histogram from in-memory codes (adult tiled {settings.hist_tiles}x)",
            "",
            "synth: `synth.tables.histogram(codes, schema)`; NumPy: "
            "`np.bincount(np.ravel_multi_index(codes.T, shape), minlength=size)`; uint8 codes. "
            "Results checked identical.",
            "",
            results_table(hist, "NumPy"),
            "",
            f"## 2. Reading a CSV (adult tiled {settings.csv_tiles}x)",
            "",
            "synth: `synth.data.scan` / `synth.data.read` end to end (parse, encode, count); "
            "pandas: `pandas.read_csv(path)` alone, same file, timed after each synth call (one shared "
            "baseline from all those samples). Results checked against the in-memory codes. "
            "This section runs before sections 1 and 3: after their large arrays are freed, the "
            "allocator's reuse of that memory makes a whole-file `pandas.read_csv` about 30% faster "
            "(the chunked synth readers do not gain), which would not reflect a fresh process.",
            "",
            results_table(csv_rows, "pandas"),
            "",
            "## 3. Marginals from a dense float64 distribution over U",
            "",
            "synth: `synth.tables.marginal_from_dense(x, schema, columns)`; NumPy: "
            "`x.reshape(shape).sum(axis=other_axes)` (then a transpose view for the requested order). "
            "Rate is cells of the input table per second. Results checked with `np.allclose`.",
            "",
            results_table(marg, "NumPy"),
            "",
            targets_note(hist, csv_rows, marg),
            "",
        ]
    )


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--repeats", type=int, default=None, help="timed repeats per figure (default 5; 3 with --quick)"
    )
    parser.add_argument("--quick", action="store_true", help="fewer rows and 3 repeats (a smoke run)")
    parser.add_argument(
        "--data-dir", type=Path, default=DEFAULT_DATA_DIR, help="folder with adult.csv and adult-domain.json"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the random distributions")
    args = parser.parse_args(argv)
    if args.repeats is not None and args.repeats < 1:
        parser.error("--repeats must be >= 1")
    return args


def settings_from(args: argparse.Namespace) -> Settings:
    """Sizes for a default or a quick run."""
    repeats = args.repeats if args.repeats is not None else (3 if args.quick else 5)
    if args.quick:
        return Settings(repeats=repeats, hist_tiles=8, csv_tiles=4, seed=args.seed)
    return Settings(repeats=repeats, hist_tiles=64, csv_tiles=20, seed=args.seed)


def main(argv: Sequence[str] | None = None) -> int:
    """Run every benchmark, print the report and write RESULTS.md."""
    args = parse_args(argv)
    settings = settings_from(args)
    started = time.perf_counter()
    schema, codes = load_adult(args.data_dir)
    calls = bench_first_calls(schema, codes, settings.seed)
    # CSV first, while the process is as fresh as a real read: once sections 1 and 3 have
    # allocated and freed their large arrays, a whole-file pandas.read_csv gets ~30% faster
    # (measured; presumably the allocator reusing that memory), while the chunked scan does not.
    csv_rows = bench_csv(schema, codes, args.data_dir, settings)
    hist = bench_histogram(schema, codes, settings)
    marg = bench_marginals(schema, settings)
    report = render(settings, calls, hist, csv_rows, marg)
    print(report)
    write_section("bench_tables", report)
    print(f"(wrote {RESULTS_PATH}; total {time.perf_counter() - started:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
