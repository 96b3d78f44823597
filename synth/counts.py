"""The marginal tables of the private rows, from one planned scan: what the engines read.

Every engine needs the data only through a few marginal tables (its workload's, its
candidates', the row count), so the scan that turns rows into those tables is the only step
that grows with n. ``plan_scan`` decides before reading what to count: the maximal subsets
among those a run may ask for (every other table is a sum of one of them), or the whole
universe when it is small enough that one count per row beats several. ``count_codes``
counts one chunk under a plan (the unit of work of the in-process scan and of Dask's
partitions); ``Counts`` holds the sums and answers ``marginal(columns)`` for any subset of a
counted table, summed out in the columns' order, as ``synth.tables.marginal`` does on rows.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Union

import numpy as np

from .errors import SynthError
from .schema import Schema
from .tables import DEFAULT_MAX_CELLS, _check_cells, add_counts, marginal

__all__ = ["HISTOGRAM_CELLS", "Counts", "ScanPlan", "count_codes", "data_marginal", "data_rows", "plan_scan"]

#: Count the whole universe (one pass over each chunk) instead of several maximal subsets when it
#: has at most this many cells (8 MiB of int64): every planned table is then a sum of it.
HISTOGRAM_CELLS = 2**20


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
              max_cells: int = DEFAULT_MAX_CELLS) -> ScanPlan:
    """The plan for ``subsets`` (column names of ``schema``; the empty subset is the row count,
    which every scan gives anyway). Raises ``SynthError`` for a table past ``max_cells``."""
    needed: list[tuple[str, ...]] = []
    for subset in subsets:
        subset = tuple(subset)
        for name in subset:
            schema.index(name)  # SchemaError naming the column if it is not there
        if len(set(subset)) != len(subset):
            raise SynthError(f"the table over {list(subset)} names a column twice")
        _check_cells(_cells(schema, subset), f"the marginal over {list(subset)}", max_cells)
        if subset not in needed:
            needed.append(subset)
    sets = [frozenset(s) for s in needed]
    maximal = [s for s, k in zip(needed, sets) if not any(k < other for other in sets)]
    unique = list(dict.fromkeys(tuple(sorted(s, key=schema.index)) for s in maximal if s))
    if len(unique) > 1 and schema.universe_size <= histogram_cells:
        unique = [tuple(schema.names)]
    return ScanPlan(schema, tuple(needed), tuple(unique))


def count_codes(codes: np.ndarray, plan: ScanPlan) -> dict[tuple[str, ...], np.ndarray]:
    """The plan's counted tables (flat int64) of one chunk of codes (shape (rows, len(schema)))."""
    out = {}
    for subset in plan.counted:
        flat = np.zeros(_cells(plan.schema, subset), dtype=np.int64)
        positions = np.array([plan.schema.index(name) for name in subset], dtype=np.int64)
        add_counts(codes, plan.schema, positions, flat)
        out[subset] = flat
    return out


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
        raise SynthError(f"the scan did not count a table over {list(columns)}: plan it (synth.counts.plan_scan) "
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
