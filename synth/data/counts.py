"""The marginal tables of the private rows, from one planned scan: what the engines read.

Every engine needs the data only through a few marginal tables (its workload's, its
candidates', the row count), so the scan that turns rows into those tables is the only step
that grows with n. ``plan_scan`` decides before reading what to count: the maximal subsets
among those a run may ask for (every other table is a sum of one of them), packed into a few
wider tables that still fit a core's cache (a row costs one count per table, so 28 pairs in 3
tables count twice as fast), or the whole universe when it is small enough. ``count_codes``
counts one chunk under a plan (the unit of work of the in-process scan and of Dask's
partitions); ``Counts`` holds the sums and answers ``marginal(columns)`` for any subset of a
counted table, summed out in the columns' order, as ``synth.data.tables.marginal`` does on rows.
"""

from __future__ import annotations

import math
import queue
import threading
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Union

import numba
import numpy as np

from synth._kernels.scan import count_rows, first_bad_row
from synth.data.schema import Schema
from synth.data.tables import DEFAULT_MAX_CELLS, _check_cells, code_outside, marginal
from synth.errors import SynthError

__all__ = ["HISTOGRAM_CELLS", "Counts", "ScanPlan", "Tally", "count_codes", "count_encoded", "data_marginal", "data_rows", "plan_scan"]

#: Count the whole universe (one pass over each chunk) instead of several maximal subsets when it
#: has at most this many cells (8 MiB of int64): every planned table is then a sum of it.
HISTOGRAM_CELLS = 2**20
#: Pack the maximal subsets into tables of at most this many cells (1 MiB of int64: past it a
#: table's cache misses cost more than the counts it saves; 2^16-2^18 measured alike) ...
GROUP_CELLS = 2**17
#: ... while the packed tables hold at most this many cells in all (16 MiB), or no more than the
#: maximal subsets alone (a packed table counts cells no subset needs: bound the memory that costs).
GROUP_BUDGET = 2**21
#: Plans of more maximal subsets count each on its own (packing compares every subset with
#: every table: past this it would take longer than it saves on a small table).
PACK_MAX_SUBSETS = 256
#: A chunk of at least this many rows is counted on a worker thread (one per Numba thread, at
#: most MAX_COUNT_PARTS), each into its own copy of the tables (kept across chunks).
PARALLEL_ROWS = 50_000
MAX_COUNT_PARTS = 8


@dataclass(frozen=True)
class ScanPlan:
    """What one scan counts (``counted``) so as to give every table in ``needed``.

    ``schema`` is the schema of the columns read (the selected ones); subsets are tuples of
    its column names, in the order the caller asked for."""

    schema: Schema
    needed: tuple[tuple[str, ...], ...]
    counted: tuple[tuple[str, ...], ...]

    def cells(self) -> int:
        """The int64 cells the scan keeps (its memory, whatever n is)."""
        return sum(_cells(self.schema, s) for s in self.counted)


def _cells(schema: Schema, subset: Sequence[str]) -> int:
    return math.prod(schema[name].size for name in subset)


def plan_scan(schema: Schema, subsets: Iterable[Sequence[str]], *, histogram_cells: int = HISTOGRAM_CELLS,
              group_cells: int = GROUP_CELLS, max_cells: int = DEFAULT_MAX_CELLS) -> ScanPlan:
    """The plan for ``subsets`` (column names of ``schema``; the empty subset is the row count,
    which every scan gives anyway). ``group_cells`` 0 counts each maximal subset on its own.
    Raises ``SynthError`` for a table past ``max_cells``."""
    needed: dict[tuple[str, ...], None] = {}  # in the order asked, once each
    for subset in subsets:
        subset = tuple(subset)
        for name in subset:
            schema.index(name)  # SchemaError naming the column if it is not there
        if len(set(subset)) != len(subset):
            raise SynthError(f"the table over {list(subset)} names a column twice")
        _check_cells(_cells(schema, subset), f"the marginal over {list(subset)}", max_cells)
        needed[subset] = None
    unique = list(dict.fromkeys(tuple(sorted(s, key=schema.index)) for s in _maximal(list(needed)) if s))
    if len(unique) > 1 and schema.universe_size <= histogram_cells:
        unique = [tuple(schema.names)]
    elif 1 < len(unique) <= PACK_MAX_SUBSETS and group_cells > 0:
        unique = _packed(schema, unique, group_cells)
    return ScanPlan(schema, tuple(needed), tuple(unique))


def _maximal(subsets: Sequence[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """The subsets no other one strictly contains (found through the subsets holding each
    column, not by comparing every pair: thousands of subsets plan in a blink)."""
    holding: dict[str, set[int]] = {}
    for i, subset in enumerate(subsets):
        for name in subset:
            holding.setdefault(name, set()).add(i)
    maximal = []
    for subset in subsets:
        if subset:
            around = set.intersection(*(holding[name] for name in subset))  # the subsets holding this one
            if any(len(subsets[i]) > len(subset) for i in around):
                continue
        maximal.append(subset)
    return maximal


def _packed(schema: Schema, subsets: Sequence[tuple[str, ...]], group_cells: int) -> list[tuple[str, ...]]:
    """The subsets packed into wider tables: each, largest first, joins the table whose union
    with it is smallest (best fit) if the union stays within ``group_cells`` and the cells of all tables
    (the unplaced subsets counted alone) within ``GROUP_BUDGET`` or the subsets' own total,
    else starts a table."""
    total = sum(_cells(schema, s) for s in subsets)  # of every table, were each subset left alone
    budget = max(GROUP_BUDGET, total)
    tables: list[frozenset[str]] = []
    for subset in sorted(subsets, key=lambda s: -_cells(schema, s)):
        best = None  # (cells of the union, table, change in the total)
        for k, table in enumerate(tables):
            union = _cells(schema, table | set(subset))
            change = union - _cells(schema, table) - _cells(schema, subset)
            if union <= group_cells and total + change <= budget and (best is None or union < best[0]):
                best = (union, k, change)
        if best is None:
            tables.append(frozenset(subset))
        else:
            tables[best[1]] |= set(subset)
            total += best[2]
    return [tuple(sorted(table, key=schema.index)) for table in tables]


def count_codes(codes: np.ndarray, plan: ScanPlan) -> dict[tuple[str, ...], np.ndarray]:
    """The plan's counted tables (flat int64) of one chunk of codes (shape (rows, len(schema)))."""
    tally = Tally(plan)
    tally.add(codes)
    return tally.tables()


class Tally:
    """The counting of a scan: chunks of codes added into the plan's tables, all of them in
    one pass over each chunk (``synth._kernels.scan.count_rows``).

    A large chunk is counted on a worker thread (the kernel releases the GIL) while the
    caller reads the next, up to ``parts`` chunks at once, each into its own copy of the
    tables, kept across chunks and summed once by ``tables()``. Use it as a context manager
    (or call ``close``) so that its threads end even when reading fails."""

    def __init__(self, plan: ScanPlan, parts: int | None = None):
        """``parts``: chunks counted side by side (default: one per Numba thread, at most
        ``MAX_COUNT_PARTS``; 1, in the caller's thread, where it is already one of many
        parallel tasks)."""
        self.plan = plan
        self.layout = _layout(plan.schema, plan.counted)
        parts = min(numba.get_num_threads(), MAX_COUNT_PARTS) if parts is None else max(1, int(parts))
        self.partial = np.zeros((parts, self.layout.cells), dtype=np.int64)
        self._free: queue.SimpleQueue[int] = queue.SimpleQueue()  # copies no thread is adding to
        for part in range(parts):
            self._free.put(part)
        self._slots = threading.Semaphore(parts + 1)  # chunks held at once: bounded memory
        self._pool: ThreadPoolExecutor | None = None
        self._pending: list[Future] = []

    def add(self, codes: np.ndarray, *, checked: bool = False) -> None:
        """Count one chunk of codes (shape (rows, len(schema))). ``DataError`` naming the row
        (of the chunk, from 1) and column of a code outside its column's range, unless
        ``checked`` says the codes are known to be in range (``synth.data.reading.encode``'s)."""
        codes = np.asarray(codes)
        schema = self.plan.schema
        if codes.ndim != 2 or codes.shape[1] != len(schema):
            raise ValueError(f"codes must have shape (n, {len(schema)}), got {codes.shape}")
        if not np.issubdtype(codes.dtype, np.integer):
            raise TypeError(f"codes must be an integer array, got dtype {codes.dtype}")
        columns = np.ascontiguousarray(codes.T)  # no copy for the readers' codes (column-major)
        if not checked:
            bad = first_bad_row(columns, self.layout.sizes)
            if bad >= 0:
                column = next(j for j in range(len(schema)) if not 0 <= codes[bad, j] < schema.shape[j])
                raise code_outside(bad + 1, schema.names[column], codes[bad, column], schema.shape[column])
        if len(self.partial) == 1 or codes.shape[0] < PARALLEL_ROWS:
            self._count(columns)
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(len(self.partial), thread_name_prefix="synth-count")
        self._slots.acquire()
        self._pending = [future for future in self._pending if not future.done() or future.exception()]
        future = self._pool.submit(self._count, columns)
        future.add_done_callback(lambda _: self._slots.release())
        self._pending.append(future)

    def _count(self, columns: np.ndarray) -> None:
        part = self._free.get()
        try:
            layout = self.layout
            count_rows(columns, layout.positions, layout.shapes, layout.widths, layout.offsets, self.partial[part])
        finally:
            self._free.put(part)

    def close(self) -> None:
        """Wait for the chunks being counted and end the threads; re-raise a thread's error."""
        pending, self._pending = self._pending, []
        try:
            for future in pending:
                future.result()
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
                self._pool = None

    def __enter__(self) -> Tally:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def tables(self) -> dict[tuple[str, ...], np.ndarray]:
        """The counted tables (flat int64), summed over the copies, once every chunk is in."""
        self.close()
        flat = self.partial.sum(axis=0)
        return {subset: flat[start:start + _cells(self.plan.schema, subset)]
                for subset, start in zip(self.plan.counted, self.layout.offsets)}


def count_encoded(chunks: Iterable, plan: ScanPlan, *, parts: int | None = None) -> Counts:
    """The counts of chunks as ``synth.data.reading.encode`` gives them (codes already checked, clip
    and drop counts), in one ``Tally``; ``parts`` as ``Tally`` takes it."""
    counts = Counts(plan)
    with Tally(plan, parts) as tally:
        for chunk in chunks:
            tally.add(chunk.codes, checked=True)
            counts.add(chunk.n_rows, {}, chunk.clipped, chunk.dropped)
        counts.add(0, tally.tables())
    return counts


@dataclass(frozen=True)
class _Layout:
    """The counted tables laid end to end, as ``count_rows`` takes them."""

    positions: np.ndarray  # (tables, widest): positions of each table's columns
    shapes: np.ndarray  # (tables, widest): their sizes
    widths: np.ndarray  # (tables,): columns per table
    offsets: np.ndarray  # (tables,): where each table starts
    sizes: np.ndarray  # (columns,): each column's size
    cells: int


def _layout(schema: Schema, counted: Sequence[Sequence[str]]) -> _Layout:
    widest = max((len(subset) for subset in counted), default=0)
    positions = np.zeros((len(counted), widest), dtype=np.int64)
    shapes = np.ones((len(counted), widest), dtype=np.int64)
    offsets = np.zeros(len(counted), dtype=np.int64)
    cells = 0
    for t, subset in enumerate(counted):
        offsets[t] = cells
        cells += _cells(schema, subset)
        for j, name in enumerate(subset):
            positions[t, j] = schema.index(name)
            shapes[t, j] = schema[name].size
    widths = np.array([len(subset) for subset in counted], dtype=np.int64)
    return _Layout(positions, shapes, widths, offsets, np.array(schema.shape, dtype=np.int64), cells)


@dataclass
class Counts:
    """The row count and the counted tables of a scan (flat int64, summed over chunks), with
    clip counts and, under ``bad_rows="drop"``, the rows dropped (private: never report it).

    ``marginal(columns)`` is the table over ``columns`` (every column: the histogram), shaped
    by their sizes in the order given, summed from a counted table that holds them;
    ``tables`` holds the plan's needed tables, so shaped."""

    plan: ScanPlan
    n_rows: int = 0
    counted: dict[tuple[str, ...], np.ndarray] = field(default_factory=dict)
    clipped: dict[str, int] = field(default_factory=dict)
    dropped: int = 0

    @property
    def schema(self) -> Schema:
        return self.plan.schema

    def add(self, rows: int, tables: dict[tuple[str, ...], np.ndarray], clipped: dict[str, int] | None = None,
            dropped: int = 0) -> None:
        """Add one chunk's counts (``count_codes``), in place."""
        self.n_rows += int(rows)
        self.dropped += int(dropped)
        for subset, flat in tables.items():
            if subset in self.counted:
                self.counted[subset] += flat
            else:
                self.counted[subset] = np.array(flat, dtype=np.int64)
        for name, count in (clipped or {}).items():
            self.clipped[name] = self.clipped.get(name, 0) + int(count)

    def merge(self, other: Counts) -> Counts:
        """The counts of both (a tree reduction's step); neither is changed."""
        total = Counts(self.plan)
        for part in (self, other):
            total.add(part.n_rows, part.counted, part.clipped, part.dropped)
        return total

    def marginal(self, columns: Sequence[str] | None = None) -> np.ndarray:
        """The int64 table over ``columns`` (None: every column, in the schema's order)."""
        columns = tuple(self.schema.names) if columns is None else tuple(columns)
        wanted = set(columns)
        for subset in self.plan.counted:
            if wanted <= set(subset):
                shape = [self.schema[name].size for name in subset]
                table = self.counted.get(subset, np.zeros(math.prod(shape), dtype=np.int64)).reshape(shape)
                others = tuple(i for i, name in enumerate(subset) if name not in wanted)
                kept = [name for name in subset if name in wanted]
                summed = table.sum(axis=others) if others else table
                return np.transpose(summed, [kept.index(name) for name in columns]) if columns else summed
        if not columns:
            return np.array(self.n_rows, dtype=np.int64)
        raise SynthError(f"the scan did not count a table over {list(columns)}: plan it (synth.data.counts.plan_scan) "
                         "before reading")

    @property
    def tables(self) -> dict[tuple[str, ...], np.ndarray]:
        return {subset: self.marginal(subset) for subset in self.plan.needed}


#: What an engine reads: the rows' codes, or the counts of a planned scan.
Data = Union[np.ndarray, Counts]


def data_marginal(data: Data, schema: Schema, columns: Sequence[str] | None = None) -> np.ndarray:
    """The table over ``columns`` of the rows (codes) or of a scan's counts."""
    if isinstance(data, Counts):
        return data.marginal(columns)
    return marginal(data, schema, columns)


def data_rows(data: Data) -> int:
    """The number of rows behind ``data``."""
    return data.n_rows if isinstance(data, Counts) else int(np.shape(data)[0])
