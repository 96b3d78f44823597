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

The first (JIT) call of each kernel is reported apart.

Usage: ``python benchmarks/bench_tables.py [--repeats N] [--quick] [--seed S] [--data-dir DIR] [--no-write]``
"""

from __future__ import annotations

import itertools
import statistics
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numba
import numpy as np
import pandas as pd
from _baselines import numpy_histogram, numpy_marginal
from _data import SEVEN, project_codes
from _harness import Session, session
from _report import document, comparison_table, duration, first_call_table, met, table
from _timing import Comparison, FirstCall, Samples, Timed, compare, first_call, round_robin, timed

from synth import _kernels
from synth.data.reading import read, scan
from synth.data.schema import Coded, Schema
from synth.data.tables import (_marginals_from_dense, _marginals_plan, histogram, marginal_from_dense,
                               marginals_from_dense)

#: The 7-column universe (120,960 cells), and the 8-column one: age in front (10,281,600 cells).
SMALL_COLUMNS, BIG_COLUMNS = SEVEN, ("age",) + SEVEN
#: Column subsets for the marginal benchmark: (label, columns in the small universe, in the big one).
SUBSETS = (
    ("1-way, first axis", ("workclass",), ("age",)),
    ("1-way, middle axis", ("marital-status",), ("marital-status",)),
    ("1-way, last axis", ("income>50K",), ("income>50K",)),
    ("2-way, first two", ("workclass", "education-num"), ("age", "workclass")),
    ("2-way, last two", ("sex", "income>50K"), ("sex", "income>50K")),
    ("2-way, first + last", ("workclass", "income>50K"), ("age", "income>50K")),
    ("3-way, interleaved", ("workclass", "marital-status", "sex"), ("age", "marital-status", "sex")),
    ("3-way, interleaved, reversed order", ("income>50K", "race", "education-num"),
     ("income>50K", "race", "education-num")),
)
#: The synthetic universe of section 4: ten columns of 2 to 10 codes, big and small mixed
#: (10,886,400 cells; with --quick the first nine, 2,721,600 cells).
SYNTHETIC_SIZES = (3, 10, 2, 7, 5, 9, 3, 6, 8, 4)
#: How many of the synthetic universe's 120 3-way subsets section 4 asks for (a seeded sample).
SYNTHETIC_SUBSETS = 60
#: Tiles of adult, (full, quick): in memory for the histogram, in the CSV file.
HIST_TILES, CSV_TILES = (64, 8), (20, 4)
RATIOS = [("speed ratio", lambda r: f"{r.ratio:.2f}x"),
          ("speed ratio, best samples", lambda r: f"{r.best_ratio:.2f}x")]


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
    """First-call cost of the kernels through the library, on tiny inputs. Must run before any
    other call of ``histogram`` / ``marginal_from_dense``."""
    sub, small = project_codes(schema, codes[:1000], SMALL_COLUMNS)
    first_hist = timed(lambda: histogram(small, sub))
    positions, sizes = np.arange(len(sub), dtype=np.int64), np.array(sub.shape, dtype=np.int64)
    hist_args = (small, positions, sizes, sub.strides, np.zeros(sub.universe_size, dtype=np.int64))
    x = np.random.default_rng(seed).random(sub.universe_size)
    first_marg = timed(lambda: marginal_from_dense(x, sub, ["workclass", "sex"]))
    dims, keep = np.array([9, 16 * 7 * 6 * 5, 2, 2], dtype=np.int64), np.array([True, False, True, False])
    marg_args = (x, dims, keep, np.array([2, 0, 1, 0], dtype=np.int64), np.zeros(18))
    subsets = list(itertools.combinations(sub.names, 3))
    first_many = timed(lambda: marginals_from_dense(x, sub, subsets))
    # the cached plan marginals_from_dense runs for these subsets (for the cold compile's arguments)
    requests = tuple(sorted({tuple(sorted(sub.index(c) for c in s)) for s in subsets}))
    plan_args = (x, np.zeros(sub.universe_size), *_marginals_plan(tuple(sub.shape), requests).arrays)
    return [
        first_call("count_cells (histogram, uint8 codes)", first_hist, _kernels.count_cells, hist_args),
        first_call("marginalize (marginal_from_dense, float64)", first_marg, _kernels.marginalize, marg_args),
        first_call("marginals_by_plan (marginals_from_dense, float64; calls marginalize_many)", first_many,
                   _kernels.marginals_by_plan, plan_args),
    ]


# -- 1. histogram, 2. CSV, 3. marginals --------------------------------------------------------


def bench_histogram(schema: Schema, codes: np.ndarray, tiles: int, repeats: int) -> list[Comparison]:
    """Histogram build rate over the 7- and 8-column universes from tiled in-memory codes."""
    rows = []
    for label, columns in (("7 columns", SMALL_COLUMNS), ("8 columns (+ age)", BIG_COLUMNS)):
        sub, sub_codes = project_codes(schema, codes, columns)
        tiled, shape = np.tile(sub_codes, (tiles, 1)), sub.shape
        if not np.array_equal(histogram(tiled, sub), numpy_histogram(tiled, shape)):
            raise AssertionError(f"histogram over {label}: synth and NumPy disagree")
        times = compare(lambda: histogram(tiled, sub), lambda: numpy_histogram(tiled, shape), repeats)
        case = f"{label}, universe {sub.universe_size:,} cells"
        rows.append(Comparison.of(case, len(tiled), "rows", *times))
    return rows


def bench_csv(schema: Schema, codes: np.ndarray, data_dir: Path, tiles: int, repeats: int
              ) -> list[Comparison]:
    """scan / read of a tiled adult CSV end to end vs pandas.read_csv alone (same file)."""
    sub, sub_codes = project_codes(schema, codes, SMALL_COLUMNS)
    expected = histogram(sub_codes, sub) * tiles
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_tables_") as tmp:
        path = Path(tmp) / "adult_tiled.csv"
        n_rows = write_tiled_csv(data_dir / "adult.csv", path, tiles)
        mb = path.stat().st_size / 1e6
        cases = (
            ("scan, all 14 columns -> 7-col marginal", lambda: scan(path, schema, [SMALL_COLUMNS])),
            ("read, all 14 columns -> codes", lambda: read(path, schema)),
            ("scan, columns=7 -> 7-col marginal",
             lambda: scan(path, schema, [SMALL_COLUMNS], columns=SMALL_COLUMNS)),
        )
        if not np.array_equal(cases[0][1]().tables[SMALL_COLUMNS], expected):
            raise AssertionError("scan (all columns): the marginal disagrees with the in-memory histogram")
        if not np.array_equal(cases[2][1]().tables[SMALL_COLUMNS], expected):
            raise AssertionError("scan (7 columns): marginal disagrees with the in-memory histogram")
        if not np.array_equal(cases[1][1]().codes, np.tile(codes, (tiles, 1))):
            raise AssertionError("read: codes disagree with the tiled in-memory codes")
        # Unbatched (min_sample_s=0), each synth sample followed by a pandas sample: the
        # "pandas" key pools them into one baseline shared by every row.
        pandas = Timed("pandas", lambda: pd.read_csv(path))
        entries = [e for label, fn in cases for e in (Timed(label, fn), pandas)]
        times = round_robin(entries, repeats, min_sample_s=0)
        for label, _ in cases:
            case = f"{label} ({mb:.0f} MB)"
            rows.append(Comparison.of(case, n_rows, "rows", times[label], times["pandas"]))
    return rows


def bench_marginals(schema: Schema, seed: int, repeats: int) -> list[Comparison]:
    """marginal_from_dense vs reshape + sum on random float64 distributions over two universes."""
    rng, rows = np.random.default_rng(seed), []
    for which, columns in enumerate((SMALL_COLUMNS, BIG_COLUMNS)):
        sub = schema.project(columns)
        shape, x = sub.shape, rng.random(sub.universe_size)
        x /= x.sum()
        for label, *subsets in SUBSETS:
            subset = subsets[which]
            positions = [sub.index(name) for name in subset]
            if not np.allclose(marginal_from_dense(x, sub, subset), numpy_marginal(x, shape, positions)):
                raise AssertionError(f"marginal over {subset}: synth and NumPy disagree")
            times = compare(lambda: marginal_from_dense(x, sub, subset),
                            lambda: numpy_marginal(x, shape, positions), repeats)
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
        return statistics.median(self.times[key].seconds)

    def ratio(self, key: str) -> float:  # how many times faster marginals_from_dense is than key
        return self.median(key) / self.median("fused")

    def best_ratio(self, key: str) -> float:  # the same on each way's fastest sample
        return min(self.times[key].seconds) / min(self.times["fused"].seconds)


#: Section 4's ways, in sampling order: key, column title.
MANY_WAYS = (
    ("fused", "`marginals_from_dense`"),
    ("loop", "one `marginal_from_dense` per subset"),
    ("numpy", "NumPy reshape + sum per subset"),
    ("walk", "one walk, no intermediates"),
)


def many_cases(schema: Schema, sizes: tuple[int, ...], seed: int) -> list[tuple[str, Schema, list]]:
    """(label, universe schema, subsets) of section 4."""
    small, big = schema.project(SMALL_COLUMNS), schema.project(BIG_COLUMNS)
    synthetic = Schema(tuple(Coded(f"s{i}", size) for i, size in enumerate(sizes)))
    triples = list(itertools.combinations(synthetic.names, 3))
    picked = np.random.default_rng(seed).choice(len(triples), SYNTHETIC_SUBSETS, replace=False)
    all_small = list(itertools.combinations(SMALL_COLUMNS, 3))
    return [
        ("adult 7 columns, one 3-way subset", small, all_small[:1]),
        ("adult 7 columns, 5 3-way subsets", small, all_small[::7]),
        ("adult 7 columns, all 3-way subsets", small, all_small),
        ("adult 7 columns, all 2-way subsets", small, list(itertools.combinations(SMALL_COLUMNS, 2))),
        ("adult 8 columns (+ age), one 3-way subset", big, [("age", "marital-status", "sex")]),
        ("adult 8 columns (+ age), all 3-way subsets", big, list(itertools.combinations(BIG_COLUMNS, 3))),
        (f"synthetic {len(sizes)} columns {list(sizes)}, {SYNTHETIC_SUBSETS} random 3-way subsets", synthetic,
         [triples[i] for i in sorted(picked)]),
    ]


def bench_many(schema: Schema, sizes: tuple[int, ...], seed: int, repeats: int) -> list[ManyRow]:
    """marginals_from_dense vs a loop of marginal_from_dense vs a NumPy loop (and the one-walk
    design without intermediates), on random float64 distributions; results checked first."""
    rng, rows = np.random.default_rng(seed), []
    for label, sub, subsets in many_cases(schema, sizes, seed):
        shape, x = sub.shape, rng.random(sub.universe_size)
        x /= x.sum()
        positions = [[sub.index(c) for c in s] for s in subsets]
        ways = {
            "fused": lambda: marginals_from_dense(x, sub, subsets),
            "loop": lambda: [marginal_from_dense(x, sub, s) for s in subsets],
            "numpy": lambda: [numpy_marginal(x, shape, p) for p in positions],
            "walk": lambda: _marginals_from_dense(x, sub, subsets, intermediates=False),
        }
        expected = ways["numpy"]()
        for key in ("fused", "loop", "walk"):
            pairs = zip(ways[key](), expected)
            if not all(g.shape == e.shape and np.allclose(g, e, rtol=1e-10, atol=0) for g, e in pairs):
                raise AssertionError(f"{label}: {key} and NumPy disagree")
        del expected, pairs
        times = round_robin([Timed(key, ways[key]) for key, _ in MANY_WAYS], repeats)
        rows.append(ManyRow(label, sub.universe_size, len(subsets), times))
    return rows


def many_table(rows: Sequence[ManyRow]) -> str:
    """Markdown table of section 4: medians, then speed-ups of marginals_from_dense."""
    titles = ["@case", "universe", "subsets", *(f"{title} median" for _, title in MANY_WAYS),
              "speed-up vs `marginal_from_dense` loop (best samples)", "speed-up vs NumPy (best samples)",
              "speed-up vs one walk (best samples)"]
    return table(titles, ([r.case, f"{r.cells:,} cells", str(r.subsets)]
                          + [duration(r.median(key)) for key, _ in MANY_WAYS]
                          + [f"{r.ratio(k):.1f}x ({r.best_ratio(k):.1f}x)" for k in ("loop", "numpy", "walk")]
                          for r in rows))


def many_note(rows: Sequence[ManyRow]) -> str:
    """Where marginals_from_dense wins and loses, from this run's medians."""
    lines = []
    for key, title in MANY_WAYS[1:]:
        slower = [r for r in rows if r.ratio(key) < 1.0]
        verdict = ("faster in every case" if not slower
                   else "slower in: " + "; ".join(f"{r.case} ({r.ratio(key):.2f}x)" for r in slower))
        best = max(rows, key=lambda r: r.ratio(key))
        lines.append(f"- vs {title}: {verdict} (largest speed-up {best.ratio(key):.1f}x, {best.case}).")
    spreads = "; ".join(f"{r.case}: {max(r.times['fused'].seconds) / min(r.times['fused'].seconds):.1f}x"
                        for r in rows)
    lines.append(
        "- Spread of the `marginals_from_dense` samples (slowest / fastest), a gauge of the noise: "
        f"{spreads}. Its calls on the 10^7-cell universes are short (tens of ms) and memory-bound, so "
        "other processes on the shared cores move their medians most; the best-sample ratios are "
        "the steadier figures there."
    )
    return "\n".join(lines)


# -- report ---------------------------------------------------------------------------------


def targets_note(hist: Sequence[Comparison], csv_rows: Sequence[Comparison], marg: Sequence[Comparison]
                 ) -> str:
    """The targets and whether this run met them (medians), and marginal cases where synth is slower."""
    csv = csv_rows[0]
    slow = [r for r in marg if r.ratio < 1.0]
    return "\n".join([
        "## Targets (judged on the medians)",
        "",
        "- Numba histogram at least as fast as the NumPy baseline (speed ratio >= 1 on both universes): "
        + met(all(r.ratio >= 1.0 for r in hist))
        + " (" + "; ".join(f"{r.ratio:.2f}x, best samples {r.best_ratio:.2f}x" for r in hist) + ").",
        "- CSV read end to end within 1.5x of `pandas.read_csv` alone (synth time / pandas time <= 1.5, "
        "judged on `scan` over all 14 columns, the like-for-like case): "
        f"{met(csv.factor <= 1.5)} ({csv.factor:.2f}x the time of pandas.read_csv; best samples "
        f"{csv.best_factor:.2f}x). Other cases: "
        + ", ".join(f"{r.case.split(' (')[0]}: {r.factor:.2f}x (best {r.best_factor:.2f}x)"
                    for r in csv_rows[1:])
        + ".",
        "- No target is set for marginals; `marginal_from_dense` is slower than NumPy in: "
        + "; ".join(f"{r.case} ({r.ratio:.2f}x)" for r in slow) + "." if slow else
        "- No target is set for marginals; `marginal_from_dense` is at least as fast as NumPy in every case.",
        "- The machine is shared and noisy: figures are medians of alternating synth / baseline calls, "
        "and ratios near 1 can flip between runs; the best-sample ratios are a cross-check.",
    ])


def render(run: Session, calls, hist, csv_rows, marg, many) -> str:
    """The full markdown report."""
    return document(
        run.header("synth table kernels: benchmark results", (np, numba, pd), f"; seed {run.seed}"),
        "Speed ratio = synth rate / baseline rate on the medians (> 1 means synth is faster); "
        "the last column is the same ratio on each side's fastest sample, a check against noise.",
        "## First calls (JIT)",
        "First call through the library on a tiny input (a Numba cache load when the on-disk cache "
        "is valid, else a compile), and a from-scratch compile of the same kernel with caching off. "
        "The very first call also pays Numba's one-off start-up (hence count_cells' first call can "
        "exceed its cold compile, which runs later).",
        first_call_table(calls),
        f"## 1. Histogram from in-memory codes (adult tiled {run.pick(*HIST_TILES)}x)",
        "synth: `synth.data.tables.histogram(codes, schema)`; NumPy: "
        "`np.bincount(np.ravel_multi_index(codes.T, shape), minlength=size)`; uint8 codes. "
        "Results checked identical.",
        comparison_table(hist, "NumPy", RATIOS),
        f"## 2. Reading a CSV (adult tiled {run.pick(*CSV_TILES)}x)",
        "synth: `synth.data.reading.scan` / `synth.data.reading.read` end to end (parse, encode, count); "
        "pandas: `pandas.read_csv(path)` alone, same file, timed after each synth call (one shared "
        "baseline from all those samples). Results checked against the in-memory codes. "
        "This section runs before sections 1 and 3: after their large arrays are freed, the "
        "allocator's reuse of that memory makes a whole-file `pandas.read_csv` about 30% faster "
        "(the chunked synth readers do not gain), which would not reflect a fresh process.",
        comparison_table(csv_rows, "pandas", RATIOS),
        "## 3. Marginals from a dense float64 distribution over U",
        "synth: `synth.data.tables.marginal_from_dense(x, schema, columns)`; NumPy: "
        "`x.reshape(shape).sum(axis=other_axes)` (then a transpose view for the requested order). "
        "Rate is cells of the input table per second. Results checked with `np.allclose`.",
        comparison_table(marg, "NumPy", RATIOS),
        "## 4. Many marginals at once (MWEM's selection step)",
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
        many_table(many),
        many_note(many),
        targets_note(hist, csv_rows, marg),
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run every benchmark, print the report and write its RESULTS.md section."""
    run = session(__doc__, "fewer rows and 3 repeats (a smoke run)", argv)
    schema, codes = run.adult()
    calls = bench_first_calls(schema, codes, run.seed)
    # CSV first, while the process is as fresh as a real read: once sections 1 and 3 have
    # allocated and freed their large arrays, a whole-file pandas.read_csv gets ~30% faster
    # (measured; presumably the allocator reusing that memory), while the chunked scan does not.
    csv_rows = bench_csv(schema, codes, run.args.data_dir, run.pick(*CSV_TILES), run.repeats)
    hist = bench_histogram(schema, codes, run.pick(*HIST_TILES), run.repeats)
    marg = bench_marginals(schema, run.seed, run.repeats)
    many = bench_many(schema, run.pick(SYNTHETIC_SIZES, SYNTHETIC_SIZES[:-1]), run.seed, run.repeats)
    run.publish("bench_tables", render(run, calls, hist, csv_rows, marg, many))
    return 0


if __name__ == "__main__":
    sys.exit(main())
