"""Counting queries and workloads.

A counting query is a conjunction over a set of columns, each limited to allowed codes; its
answer is the number of rows that satisfy it. A workload is a list of queries. Queries are
grouped by their column subset: one marginal table per subset answers every query on it
with a small sum, which is what keeps large workloads cheap.

Workload JSON::

    {"queries": [{"name": "optional", "where": {"race": 3, "sex": [0, 1],
                                                "age": {"range": [20, 39]}}},
                 {"marginal": ["race", "sex"]}, ...]}

A scalar means equality, a list means membership, ``{"range": [lo, hi]}`` is inclusive in the
column's value order: codes for coded columns, label order for categorical ones; for numeric
columns the bins that lie wholly inside ``[lo, hi]``. A scalar on a numeric column picks the
bin that holds it. ``null`` (alone or in a list) is the missing value of a column whose schema
allows one (``"missing": true``); no range holds it.
``"where": {}`` counts every row. ``{"marginal": [columns]}`` stands for
every cell of that marginal, one query each (row-major in schema column order): a workload of
millions of cells stays a few lines, and is answered without building a query per cell.
"""

from __future__ import annotations

import itertools
import json
import math
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TextIO, Union

import numpy as np

from synth._io import atomic_write, read_json
from synth.data.schema import Schema
from synth.errors import SchemaError, WorkloadError, locate

__all__ = ["MAX_MARGINALS", "MAX_QUERIES", "MarginalCells", "Query", "Workload", "parse_query"]

MAX_MARGINALS = 1_000_000
"""The most marginals ``Workload.marginals`` builds (about 400 MB of items at the limit)."""

MAX_QUERIES = 2**63 - 1
"""The most queries (cells) a workload can hold: query ids are int64."""


@dataclass(frozen=True, eq=False)
class Query:
    """A conjunction: for each column in ``columns`` the row's code is one of ``allowed``.

    ``columns`` are in schema order; each entry of ``allowed`` is a sorted array of distinct
    codes. Build queries through ``Workload`` so they are checked against a schema.
    """

    columns: tuple[str, ...]
    allowed: tuple[np.ndarray, ...]
    name: str | None = None

    @property
    def is_cell(self) -> bool:
        """True when every column allows exactly one code (one cell of a marginal)."""
        return all(a.size == 1 for a in self.allowed)


@dataclass(frozen=True)
class MarginalCells:
    """Every cell of the marginal on ``columns`` (schema order), one counting query each, in
    row-major order (last column fastest), without a ``Query`` object per cell."""

    columns: tuple[str, ...]
    shape: tuple[int, ...]

    @property
    def cells(self) -> int:
        return math.prod(self.shape)

    def query(self, j: int) -> Query:
        """The ``j``-th cell's query."""
        cell = np.unravel_index(j, self.shape) if self.shape else ()
        return Query(self.columns, tuple(np.array([int(c)]) for c in cell))


Item = Union[Query, MarginalCells]


#: The marginals' width in the default workload (``Workload.default``).
DEFAULT_WAY = 3


class Workload:
    """An ordered list of counting queries over one schema, grouped by column subset.

    The list is made of items: single queries and whole marginals (``MarginalCells``, every
    cell a query). Length, indexing, answering and writing work on the items, so a marginal of
    a million cells costs one item, not a million queries.
    """

    def __init__(self, schema: Schema, queries: Iterable[Item], description: str | None = None):
        self.schema = schema
        self.items: tuple[Item, ...] = tuple(queries)
        self.description = description
        sizes = [item.cells if isinstance(item, MarginalCells) else 1 for item in self.items]
        total = sum(sizes)
        if total > MAX_QUERIES:
            raise WorkloadError(f"the workload has {total:.4g} queries (marginal cells), more than a "
                                f"workload can hold (2^63 - 1); use fewer or smaller marginals")
        self._starts = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
        self._plan: dict[tuple[str, ...], _Group] | None = None
        self._queries: tuple[Query, ...] | None = None

    @property
    def queries(self) -> tuple[Query, ...]:
        """Every query, one object each (built on first use: for small workloads)."""
        if self._queries is None:
            self._queries = tuple(iter(self))
        return self._queries

    def __len__(self) -> int:
        return int(self._starts[-1])

    def __getitem__(self, i: int) -> Query:
        if not -len(self) <= i < len(self):
            raise IndexError(f"query {i} of a workload of {len(self)}")
        i %= max(len(self), 1)
        k = int(np.searchsorted(self._starts, i, side="right")) - 1
        item = self.items[k]
        return item.query(i - int(self._starts[k])) if isinstance(item, MarginalCells) else item

    def __iter__(self):
        for item in self.items:
            if isinstance(item, MarginalCells):
                yield from (item.query(j) for j in range(item.cells))
            else:
                yield item

    # -- building ------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, obj: Any, schema: Schema, source: object = "workload") -> Workload:
        """Parse the JSON object form, checking every column and value against ``schema``."""
        if not isinstance(obj, dict) or "queries" not in obj:
            raise WorkloadError(f"{source}: expected a JSON object with a 'queries' list")
        unknown = sorted(set(obj) - {"queries", "description"})
        if unknown:
            raise WorkloadError(f"{source}: unknown key {unknown[0]!r}; allowed: queries, description")
        items = obj["queries"]
        if not isinstance(items, list):
            raise WorkloadError(f"{source}: 'queries' must be a list")
        if not items:
            raise WorkloadError(f"{source}: 'queries' is empty: a workload needs at least one query")
        queries = [_parse_item(item, i, schema, source) for i, item in enumerate(items)]
        description = obj.get("description")
        try:
            return cls(schema, queries, description if isinstance(description, str) else None)
        except WorkloadError as exc:
            raise WorkloadError(f"{source}: {exc}") from None

    @classmethod
    def load(cls, path: str | os.PathLike, schema: Schema) -> Workload:
        """Read a workload JSON file (see the module docstring for the format)."""
        return cls.from_dict(read_json(path, WorkloadError), schema, source=path)

    @classmethod
    def marginals(
        cls, schema: Schema, way: int, *, max_queries: int | None = None
    ) -> Workload:
        """All ``way``-way marginals, every cell a query (``MarginalCells`` items).

        Column subsets come in lexicographic order of the schema's columns; the cells of each
        marginal in row-major order of its columns (last column fastest).
        """
        if not isinstance(way, int) or isinstance(way, bool) or not 1 <= way <= len(schema):
            raise WorkloadError(f"way ({way!r}) must be an integer from 1 to {len(schema)} (the number of columns)")
        count = math.comb(len(schema), way)
        if count > MAX_MARGINALS:
            raise WorkloadError(
                f"{len(schema)} columns have {count:,} {way}-way marginals, more than the limit of "
                f"{MAX_MARGINALS:,}; select fewer columns or a different --way"
            )
        subsets = list(itertools.combinations(range(len(schema)), way))
        total = sum(math.prod(schema.shape[p] for p in s) for s in subsets)
        if total > MAX_QUERIES:
            raise WorkloadError(
                f"the {way}-way marginals over these columns have {total:.4g} cells, more than a workload "
                f"can hold (2^63 - 1); select fewer columns or a lower --way"
            )
        if max_queries is not None and total > max_queries:
            raise WorkloadError(
                f"the {way}-way marginals over these columns have {total:,} cells, more than "
                f"the limit of {max_queries:,}; select fewer columns or raise the limit"
            )
        items = [MarginalCells(tuple(schema.names[p] for p in subset), tuple(schema.shape[p] for p in subset))
                 for subset in subsets]
        description = f"all {way}-way marginals over {', '.join(schema.names)}"
        return cls(schema, items, description)

    @classmethod
    def default(cls, schema: Schema) -> Workload:
        """The workload a run gets when none is given: every 3-way marginal (every marginal of
        all the columns when there are fewer than 3). The same in the Python API and the CLI."""
        return cls.marginals(schema, min(DEFAULT_WAY, len(schema)))

    def cell_queries(self) -> Workload:
        """The same workload with every marginal written out as single cell queries."""
        return Workload(self.schema, iter(self), self.description)

    # -- describing and writing ----------------------------------------------------------
    def describe(self, i: int) -> str:
        """Human-readable form of query ``i``, e.g. ``sex = Male AND age in [20, 40)``."""
        query = self[i]
        if not query.columns:
            return "all rows"
        return " AND ".join(self.schema[c].describe(a) for c, a in zip(query.columns, query.allowed))

    def to_dict(self) -> dict:
        out: dict[str, Any] = {}
        if self.description:
            out["description"] = self.description
        out["queries"] = [self._query_dict(q) for q in self.items]
        return out

    def _query_dict(self, query: Item) -> dict:
        if isinstance(query, MarginalCells):
            return {"marginal": list(query.columns)}
        item: dict[str, Any] = {}
        if query.name is not None:
            item["name"] = query.name
        item["where"] = {c: self.schema[c].to_query_value(a) for c, a in zip(query.columns, query.allowed)}
        return item

    def save(self, path: str | os.PathLike) -> None:
        """Write the workload JSON atomically, one query per line."""
        with atomic_write(path, encoding="utf-8") as handle:
            self.write_json(handle)

    def write_json(self, handle: TextIO, cells: bool = False) -> None:
        """Write the workload JSON to an open text file, one item (query or marginal) per line;
        ``cells``: each marginal as its cells' queries (as ``cell_queries``), built one at a time."""
        handle.write("{")
        if self.description:
            handle.write(f'"description": {json.dumps(self.description)},\n ')
        handle.write('"queries": [')
        separator = "\n  "
        for item in self.items:
            expand = cells and isinstance(item, MarginalCells)
            for query in (item.query(j) for j in range(item.cells)) if expand else (item,):
                handle.write(separator)
                handle.write(json.dumps(self._query_dict(query), ensure_ascii=False))
                separator = ",\n  "
        handle.write("\n]}\n")

    # -- answering -----------------------------------------------------------------------
    @property
    def subsets(self) -> list[tuple[str, ...]]:
        """The distinct column subsets, in order of first appearance (no per-cell work)."""
        return list(dict.fromkeys(item.columns for item in self.items))

    def groups(self) -> dict[tuple[str, ...], np.ndarray]:
        """Query ids (in workload order) of each column subset."""
        return {subset: g.ids() for subset, g in self._groups().items()}

    def answer(self, tables: Mapping[tuple[str, ...], np.ndarray] | Callable[[tuple[str, ...]], np.ndarray | None],
               each: Callable[[Query], float] | None = None) -> np.ndarray:
        """Answer every query from marginal tables, one per subset (a mapping or a function).

        Each table is shaped by its subset's column sizes, in the subset's order. The result
        has the tables' dtype (int64 for counts, float64 for fractions). Where the function
        gives None for a subset (its table would be too big), that subset's queries are
        answered one at a time by ``each`` (float64 results).
        """
        get = tables.__getitem__ if isinstance(tables, Mapping) else tables
        results: np.ndarray | None = None
        for subset, group in self._groups().items():
            table = get(subset)
            if table is None and each is not None:
                results = np.zeros(len(self)) if results is None else results.astype(np.float64, copy=False)
                for i in group.ids().tolist():
                    results[i] = each(self[i])
                continue
            table = np.asarray(table)
            expected = tuple(self.schema[c].size for c in subset)
            if table.shape != expected:
                raise ValueError(f"table for {subset} has shape {table.shape}, expected {expected}")
            if results is None:
                results = np.zeros(len(self), dtype=np.result_type(table.dtype, np.int64))
            group.answer_into(table, results)
        return results if results is not None else np.zeros(0, dtype=np.int64)

    def _groups(self) -> dict[tuple[str, ...], _Group]:
        if self._plan is None:
            members: dict[tuple[str, ...], list[tuple[int, Item]]] = {}
            for start, item in zip(self._starts.tolist(), self.items):
                members.setdefault(item.columns, []).append((start, item))
            self._plan = {s: _Group(self.schema, s, found) for s, found in members.items()}
        return self._plan


class _Group:
    """Queries on one column subset: whole marginals (id ranges, one copy each), single cells
    (one gather) and the rest. Nothing here grows with a marginal's cell count."""

    def __init__(self, schema: Schema, subset: tuple[str, ...], found: list[tuple[int, Item]]):
        shape = [schema[c].size for c in subset]
        self.ranges = [(start, item.cells) for start, item in found if isinstance(item, MarginalCells)]
        single = [(start, item) for start, item in found if not isinstance(item, MarginalCells) and item.is_cell]
        self.cell_ids = np.array([start for start, _ in single], dtype=np.int64)
        if single and subset:
            codes = np.array([[int(a[0]) for a in q.allowed] for _, q in single], dtype=np.int64)
            self.cell_index = np.ravel_multi_index(codes.T, shape).astype(np.int64)
        else:
            self.cell_index = np.zeros(len(single), dtype=np.int64)
        self.other = [(start, np.ix_(*item.allowed)) for start, item in found
                      if not isinstance(item, MarginalCells) and not item.is_cell]

    def ids(self) -> np.ndarray:
        """Every query id of this subset, sorted."""
        parts = [np.arange(start, start + cells, dtype=np.int64) for start, cells in self.ranges]
        parts += [self.cell_ids, np.array([i for i, _ in self.other], dtype=np.int64)]
        return np.sort(np.concatenate(parts))

    def answer_into(self, table: np.ndarray, out: np.ndarray) -> None:
        flat = table.reshape(-1)
        for start, cells in self.ranges:
            out[start:start + cells] = flat
        out[self.cell_ids] = flat[self.cell_index]
        for i, index in self.other:
            out[i] = table[index].sum()


def parse_query(item: Any, schema: Schema, source: object = "query", index: int = 0) -> Query:
    """One query in the workload file's form (``{"where": {...}, "name": ...}``), checked against
    ``schema``; errors name ``source`` and ``index``. What PMW's ``answer`` takes from a stream."""
    return _parse_query(item, index, schema, source)


def _parse_item(item: Any, i: int, schema: Schema, source: object) -> Item:
    """A query, or ``{"marginal": [columns]}``: every cell of that marginal."""
    if not (isinstance(item, dict) and "marginal" in item):
        return _parse_query(item, i, schema, source)

    def fail(message: str) -> WorkloadError:
        return WorkloadError(locate(message, file=source, query=i))

    unknown = sorted(set(item) - {"marginal"})
    if unknown:
        raise fail(f"unknown key {unknown[0]!r} beside 'marginal' (a marginal item has no name or where)")
    columns = item["marginal"]
    if not isinstance(columns, list) or not columns or not all(isinstance(c, str) for c in columns):
        raise fail(f"'marginal' must be a non-empty list of column names, got {columns!r}")
    if len(set(columns)) != len(columns):
        raise fail(f"'marginal' names a column twice: {columns!r}")
    try:
        positions = sorted(schema.index(c) for c in columns)
    except SchemaError as exc:
        raise fail(str(exc)) from None
    return MarginalCells(tuple(schema.names[p] for p in positions), tuple(schema.shape[p] for p in positions))


def _parse_query(item: Any, i: int, schema: Schema, source: object) -> Query:
    label: int | str = i
    if isinstance(item, dict) and isinstance(item.get("name"), str):
        label = f"{i} ({item['name']!r})"

    def fail(message: str, column: str | None = None) -> WorkloadError:
        return WorkloadError(locate(message, file=source, query=label, column=column))

    if not isinstance(item, dict):
        raise fail(f"expected an object with 'where' (or 'marginal'), got {item!r}")
    unknown = sorted(set(item) - {"name", "where"})
    if unknown:
        raise fail(f"unknown key {unknown[0]!r}; allowed: name, where (or marginal alone)")
    name = item.get("name")
    if name is not None and not isinstance(name, str):
        raise fail(f"'name' must be a string, got {name!r}")
    where = item.get("where")
    if not isinstance(where, dict):
        raise fail(f"'where' must be an object mapping columns to values, got {where!r}")
    allowed: dict[str, np.ndarray] = {}
    for column_name, condition in where.items():
        try:
            column = schema[schema.index(column_name)]
        except SchemaError as exc:
            raise fail(str(exc)) from None
        try:
            allowed[column_name] = _allowed_codes(column, condition)
        except ValueError as exc:
            raise fail(str(exc), column_name) from None
    ordered = [c for c in schema.names if c in allowed]
    return Query(tuple(ordered), tuple(allowed[c] for c in ordered), name)


def _allowed_codes(column, condition: Any) -> np.ndarray:
    """Sorted distinct codes a condition allows: scalar, list, or ``{"range": [lo, hi]}``."""
    if isinstance(condition, dict):
        if set(condition) != {"range"}:
            raise ValueError(f"condition {condition!r} must be a value, a list, or {{\"range\": [lo, hi]}}")
        bounds = condition["range"]
        if not isinstance(bounds, list) or len(bounds) != 2:
            raise ValueError(f"range {bounds!r} must be a list [lo, hi]")
        return column.codes_in_range(*bounds)
    if isinstance(condition, list):
        if not condition:
            raise ValueError("an empty list allows no value")
        return np.unique(np.array([column.code_of(v) for v in condition], dtype=np.int64))
    return np.array([column.code_of(condition)], dtype=np.int64)  # null: the missing code, if the column has one
