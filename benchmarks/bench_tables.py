"""Benchmark synth's count kernels against plain NumPy / pandas baselines on adult.

Four figures, each measured against its baselines in the same run:

1. histogram build rate (rows/s): ``synth.data.tables.histogram`` vs
   ``np.bincount(np.ravel_multi_index(codes.T, shape), minlength=size)``;
2. CSV reading (rows/s): ``synth.data.reading.scan`` / ``synth.data.reading.read`` end to end vs
   ``pandas.read_csv(path)`` alone, on the same (tiled) file;
3. marginal rate (cells/s of the input table): ``synth.data.tables.marginal_from_dense`` vs
   ``x.reshape(shape).sum(axis=other_axes)``;
4. many marginals at once (MWEM's selection step: every 3-way marginal of the current
   distribution): ``synth.data.tables.marginals_from_dense`` vs one ``marginal_from_dense`` per
   subset vs a NumPy reshape + sum loop, on adult's 7- and 8-column universes and a synthetic
   ~10^7-cell one.

Every figure is the median of several repeats after a warm-up; the first (JIT) call of
each kernel is reported separately. Prints a markdown report and writes it to its own
section of ``benchmarks/RESULTS.md`` (``_results.write_section``; other sections are kept).

Usage: ``python benchmarks/bench_tables.py [--repeats N] [--quick] [--data-dir DIR]``
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numba
import numpy as np
import pandas as pd
from _data import DEFAULT_DATA_DIR, load_adult, numpy_marginal, project_codes
from _harness import (  # benchmarks/ is on sys.path when run as a script
    Comparison,
    FirstCall,
    Samples,
    Timed,
    compare,
    duration,
    first_call,
    first_call_table,
    load_average,
    machine_info,
    markdown_table,
    met,
    option_parser,
    parse_options,
    publish,
    repeats_note,
    report_header,
    round_robin,
    timed,
    timing_cells,
    timing_columns,
)

from synth import _kernels
from synth.data.reading import read, scan
from synth.data.schema import Coded, Schema
from synth.data.tables import _marginals_from_dense, histogram, marginal_from_dense, marginals_from_dense

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


#: The synthetic universe of section 4: ten columns of 2 to 10 codes, big and small mixed
#: (10,886,400 cells; with --quick the first nine, 2,721,600 cells).
SYNTHETIC_SIZES = (3, 10, 2, 7, 5, 9, 3, 6, 8, 4)
#: How many of the synthetic universe's 120 3-way subsets section 4 asks for (a seeded sample).
SYNTHETIC_SUBSETS = 60


@dataclass(frozen=True)
class Settings:
    """Sizes and repeat counts of one run."""

    repeats: int
    hist_tiles: int
    csv_tiles: int
    seed: int
    synthetic_sizes: tuple[int, ...] = SYNTHETIC_SIZES


# -- data -----------------------------------------------------------------------------------


def numpy_histogram(codes: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """The NumPy baseline histogram: bincount of the raveled cell indices."""
    size = int(np.prod(shape))
    return np.bincount(np.ravel_multi_index(codes.T, shape), minlength=size).reshape(shape)


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
    subsets = list(itertools.combinations(sub.names, 3))
    first_many = timed(lambda: marginals_from_dense(x, sub, subsets))
    plan_args = (x, np.zeros(sub.universe_size), *_many_plan(sub, subsets).arrays)
    return [
        first_call("count_cells (histogram, uint8 codes)", first_hist, _kernels.count_cells, hist_args),
        first_call(
            "marginalize (marginal_from_dense, float64)", first_marg, _kernels.marginalize, marg_args
        ),
        first_call(
            "marginals_by_plan (marginals_from_dense, float64; calls marginalize_many)",
            first_many,
            _kernels.marginals_by_plan,
            plan_args,
        ),
    ]


def _many_plan(schema: Schema, subsets: Sequence[Sequence[str]]):
    """The cached plan ``marginals_from_dense`` runs for ``subsets`` (for the cold-compile args)."""
    from synth.data.tables import _marginals_plan

    requests = tuple(sorted({tuple(sorted(schema.index(c) for c in s)) for s in subsets}))
    return _marginals_plan(tuple(schema.shape), requests)


# -- 1. histogram ---------------------------------------------------------------------------


def bench_histogram(schema: Schema, codes: np.ndarray, settings: Settings) -> list[Comparison]:
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
        rows.append(Comparison.of(case, len(tiled), "rows", *times))
    return rows


# -- 2. CSV ---------------------------------------------------------------------------------


def bench_csv(schema: Schema, codes: np.ndarray, data_dir: Path, settings: Settings) -> list[Comparison]:
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
        # Unbatched (min_sample_s=0), each synth sample followed by a pandas sample: the
        # "pandas" key pools them into one baseline shared by every row.
        entries = [entry for label, fn in cases for entry in (Timed(label, fn), Timed("pandas", pandas_read))]
        times = round_robin(entries, settings.repeats, min_sample_s=0)
        for label, _ in cases:
            case = f"{label} ({mb:.0f} MB)"
            rows.append(Comparison.of(case, n_rows, "rows", times[label], times["pandas"]))
    return rows


# -- 3. marginals ---------------------------------------------------------------------------


def bench_marginals(schema: Schema, settings: Settings) -> list[Comparison]:
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
            rows.append(Comparison.of(case, sub.universe_size, "cells", *times))
    return rows


# -- 4. many marginals at once --------------------------------------------------------------


@dataclass(frozen=True)
class ManyRow:
    """Section 4: one set of subsets timed four ways (medians and fastest samples, seconds)."""

    case: str
    cells: int
    subsets: int
    times: dict[str, Samples]

    def median(self, key: str) -> float:
        """Median seconds per call of way ``key``."""
        return statistics.median(self.times[key].seconds)

    def ratio(self, key: str) -> float:
        """How many times faster ``marginals_from_dense`` is than ``key`` (medians)."""
        return self.median(key) / self.median("fused")

    def best_ratio(self, key: str) -> float:
        """The same on each way's fastest sample."""
        return min(self.times[key].seconds) / min(self.times["fused"].seconds)


#: Section 4's ways, in sampling order: key, column title.
MANY_WAYS = (
    ("fused", "`marginals_from_dense`"),
    ("loop", "one `marginal_from_dense` per subset"),
    ("numpy", "NumPy reshape + sum per subset"),
    ("walk", "one walk, no intermediates"),
)


def numpy_marginals(x: np.ndarray, shape: tuple[int, ...], positions: Sequence[Sequence[int]]) -> list:
    """The NumPy baseline: ``numpy_marginal`` for each subset (a transposed view each, as in section 3)."""
    return [numpy_marginal(x, shape, p) for p in positions]


def many_cases(schema: Schema, settings: Settings) -> list[tuple[str, Schema, list[tuple[str, ...]]]]:
    """(label, universe schema, subsets) of section 4."""
    small = schema.project(SMALL_COLUMNS)
    big = schema.project(BIG_COLUMNS)
    sizes = settings.synthetic_sizes
    synthetic = Schema(tuple(Coded(f"s{i}", size) for i, size in enumerate(sizes)))
    triples = list(itertools.combinations(synthetic.names, 3))
    picked = np.random.default_rng(settings.seed).choice(len(triples), SYNTHETIC_SUBSETS, replace=False)
    all_small = list(itertools.combinations(SMALL_COLUMNS, 3))
    return [
        ("adult 7 columns, one 3-way subset", small, all_small[:1]),
        ("adult 7 columns, 5 3-way subsets", small, all_small[::7]),
        ("adult 7 columns, all 3-way subsets", small, all_small),
        ("adult 7 columns, all 2-way subsets", small, list(itertools.combinations(SMALL_COLUMNS, 2))),
        ("adult 8 columns (+ age), one 3-way subset", big, [("age", "marital-status", "sex")]),
        ("adult 8 columns (+ age), all 3-way subsets", big, list(itertools.combinations(BIG_COLUMNS, 3))),
        (
            f"synthetic {len(sizes)} columns {list(sizes)}, {SYNTHETIC_SUBSETS} random 3-way subsets",
            synthetic,
            [triples[i] for i in sorted(picked)],
        ),
    ]


def bench_many(schema: Schema, settings: Settings) -> list[ManyRow]:
    """marginals_from_dense vs a loop of marginal_from_dense vs a NumPy loop (and the one-walk
    design without intermediates), on random float64 distributions; results checked first."""
    rng = np.random.default_rng(settings.seed)
    rows = []
    for label, sub, subsets in many_cases(schema, settings):
        shape = sub.shape
        x = rng.random(sub.universe_size)
        x /= x.sum()
        positions = [[sub.index(c) for c in s] for s in subsets]
        ways = {
            "fused": lambda: marginals_from_dense(x, sub, subsets),
            "loop": lambda: [marginal_from_dense(x, sub, s) for s in subsets],
            "numpy": lambda: numpy_marginals(x, shape, positions),
            "walk": lambda: _marginals_from_dense(x, sub, subsets, intermediates=False),
        }
        expected = ways["numpy"]()
        for key in ("fused", "loop", "walk"):
            got = ways[key]()
            pairs = zip(got, expected)
            if not all(g.shape == e.shape and np.allclose(g, e, rtol=1e-10, atol=0) for g, e in pairs):
                raise AssertionError(f"{label}: {key} and NumPy disagree")
        del expected, got
        times = round_robin([Timed(key, ways[key]) for key, _ in MANY_WAYS], settings.repeats)
        rows.append(ManyRow(label, sub.universe_size, len(subsets), times))
    return rows


def many_table(rows: Sequence[ManyRow]) -> str:
    """Markdown table of section 4: medians, then speed-ups of marginals_from_dense."""
    columns = [("case", "---"), ("universe", "---:"), ("subsets", "---:")]
    columns += [(f"{title} median", "---:") for _, title in MANY_WAYS]
    columns += [
        ("speed-up vs `marginal_from_dense` loop (best samples)", "---:"),
        ("speed-up vs NumPy (best samples)", "---:"),
        ("speed-up vs one walk (best samples)", "---:"),
    ]
    return markdown_table(
        columns,
        (
            [r.case, f"{r.cells:,} cells", str(r.subsets)]
            + [duration(r.median(key)) for key, _ in MANY_WAYS]
            + [f"{r.ratio(key):.1f}x ({r.best_ratio(key):.1f}x)" for key in ("loop", "numpy", "walk")]
            for r in rows
        ),
    )


def many_note(rows: Sequence[ManyRow]) -> str:
    """Where marginals_from_dense wins and loses, from this run's medians."""
    lines = []
    for key, title in MANY_WAYS[1:]:
        slower = [r for r in rows if r.ratio(key) < 1.0]
        verdict = (
            "faster in every case"
            if not slower
            else "slower in: " + "; ".join(f"{r.case} ({r.ratio(key):.2f}x)" for r in slower)
        )
        best = max(rows, key=lambda r: r.ratio(key))
        lines.append(
            f"- vs {title}: {verdict} (largest speed-up {best.ratio(key):.1f}x, {best.case})."
        )
    spreads = "; ".join(
        f"{r.case}: {max(r.times['fused'].seconds) / min(r.times['fused'].seconds):.1f}x" for r in rows
    )
    lines.append(
        "- Spread of the `marginals_from_dense` samples (slowest / fastest), a gauge of the noise: "
        f"{spreads}. Its calls on the 10^7-cell universes are short (tens of ms) and memory-bound, so "
        "other processes on the shared cores move their medians most; the best-sample ratios are "
        "the steadier figures there."
    )
    return "\n".join(lines)


# -- report ---------------------------------------------------------------------------------


def results_table(rows: Sequence[Comparison], baseline: str) -> str:
    """Markdown table of one section's rows."""
    columns = [
        ("case", "---"),
        ("size", "---:"),
        *timing_columns(baseline),
        ("speed ratio", "---:"),
        ("speed ratio, best samples", "---:"),
    ]
    return markdown_table(
        columns,
        (
            [r.case, f"{r.work:,} {r.unit}", *timing_cells(r), f"{r.ratio:.2f}x", f"{r.best_ratio:.2f}x"]
            for r in rows
        ),
    )


def targets_note(
    hist: Sequence[Comparison], csv_rows: Sequence[Comparison], marg: Sequence[Comparison]
) -> str:
    """The targets and whether this run met them (medians), and marginal cases where synth is slower."""
    csv_factor, csv_best_factor = csv_rows[0].factor, csv_rows[0].best_factor
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
            f"{r.case.split(' (')[0]}: {r.factor:.2f}x (best {r.best_factor:.2f}x)"
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


def render(
    settings: Settings,
    calls: Sequence[FirstCall],
    hist: Sequence[Comparison],
    csv_rows: Sequence[Comparison],
    marg: Sequence[Comparison],
    many: Sequence[ManyRow],
    run_s: float | None = None,
    loads: tuple[str, str] = ("unavailable", "unavailable"),
) -> str:
    """The full markdown report."""
    return "\n".join(
        [
            *report_header("synth table kernels: benchmark results", machine_info(np, numba, pd), run_s),
            f"- load average (1, 5, 15 min) at start: {loads[0]}; at end: {loads[1]} "
            "(other processes' load: the cores are shared)",
            f"{repeats_note(settings.repeats)}; seed {settings.seed}",
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
            "synth: `synth.data.tables.histogram(codes, schema)`; NumPy: "
            "`np.bincount(np.ravel_multi_index(codes.T, shape), minlength=size)`; uint8 codes. "
            "Results checked identical.",
            "",
            results_table(hist, "NumPy"),
            "",
            f"## 2. Reading a CSV (adult tiled {settings.csv_tiles}x)",
            "",
            "synth: `synth.data.reading.scan` / `synth.data.reading.read` end to end (parse, encode, count); "
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
            "synth: `synth.data.tables.marginal_from_dense(x, schema, columns)`; NumPy: "
            "`x.reshape(shape).sum(axis=other_axes)` (then a transpose view for the requested order). "
            "Rate is cells of the input table per second. Results checked with `np.allclose`.",
            "",
            results_table(marg, "NumPy"),
            "",
            "## 4. Many marginals at once (MWEM's selection step)",
            "",
            "Every marginal of a random float64 distribution on a set of column subsets, in one call: "
            "`synth.data.tables.marginals_from_dense(x, schema, subsets)` (one walk of U onto a few "
            "intermediate marginals, the requested ones summed from those: a tree of passes, planned "
            "once per shape and subset set and cached; a pass onto one table, as for a single subset, "
            "runs `marginal_from_dense`'s kernel), against one `marginal_from_dense(x, schema, s)` "
            "per subset, a NumPy loop of `x.reshape(shape).sum(axis=other_axes)` (a transposed view "
            "each, as in section 3), and the simpler fused design (the private "
            "`_marginals_from_dense(..., intermediates=False)`: the same kernel walks U once and adds "
            "each row into every requested table). All four are sampled in turn; results checked "
            "against NumPy (relative 1e-10). Speed-up = that way's median time / "
            "`marginals_from_dense`'s (> 1: `marginals_from_dense` is faster); in brackets, the same on "
            "the fastest samples.",
            "",
            many_table(many),
            "",
            many_note(many),
            "",
            targets_note(hist, csv_rows, marg),
            "",
        ]
    )


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options (``--repeats`` filled in)."""
    parser = option_parser(__doc__, quick_help="fewer rows and 3 repeats (a smoke run)")
    parser.add_argument(
        "--data-dir", type=Path, default=DEFAULT_DATA_DIR, help="folder with adult.csv and adult-domain.json"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the random distributions")
    return parse_options(parser, argv)


def settings_from(args: argparse.Namespace) -> Settings:
    """Sizes for a default or a quick run."""
    return Settings(
        repeats=args.repeats,
        hist_tiles=8 if args.quick else 64,
        csv_tiles=4 if args.quick else 20,
        seed=args.seed,
        synthetic_sizes=SYNTHETIC_SIZES[:-1] if args.quick else SYNTHETIC_SIZES,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run every benchmark, print the report and write its RESULTS.md section."""
    args = parse_args(argv)
    settings = settings_from(args)
    started = time.perf_counter()
    load_start = load_average()
    schema, codes = load_adult(args.data_dir)
    calls = bench_first_calls(schema, codes, settings.seed)
    # CSV first, while the process is as fresh as a real read: once sections 1 and 3 have
    # allocated and freed their large arrays, a whole-file pandas.read_csv gets ~30% faster
    # (measured; presumably the allocator reusing that memory), while the chunked scan does not.
    csv_rows = bench_csv(schema, codes, args.data_dir, settings)
    hist = bench_histogram(schema, codes, settings)
    marg = bench_marginals(schema, settings)
    many = bench_many(schema, settings)
    total_s = time.perf_counter() - started
    report = render(settings, calls, hist, csv_rows, marg, many, total_s, (load_start, load_average()))
    publish("bench_tables", report, total_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
