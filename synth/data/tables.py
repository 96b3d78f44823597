"""Count histograms and marginal tables, from integer codes or from a dense table over U.

A marginal over columns S is the table of counts of each combination of S's codes. It is
computed straight from the rows (never through the full universe), or by summing a dense
table over U (a histogram or a distribution) onto S; ``marginals_from_dense`` sums it onto
many subsets at once (one walk of U, then smaller intermediate tables).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from synth import _kernels
from synth.data.schema import Schema
from synth.errors import DataError, SchemaError, non_private

__all__ = ["DEFAULT_MAX_CELLS", "count_matching", "histogram", "marginal", "marginal_from_dense", "marginals_from_dense",
           "add_counts", "scale_query_cells", "SelectedCells", "multiply_by_marginal"]

#: Largest dense table built unless the caller raises the cap (10^8 float64 cells = 800 MB).
DEFAULT_MAX_CELLS = 10**8


def _check_cells(cells: int, what: str, max_cells: int) -> None:
    if cells > max_cells:
        raise SchemaError(
            f"{what} has {cells:,} cells, more than the cap of {max_cells:,}; "
            "select fewer columns (--columns) or raise the cap"
        )


def _positions(schema: Schema, columns: Sequence[str] | None) -> np.ndarray:
    return np.array(_position_list(schema, columns), dtype=np.int64)


def _position_list(schema: Schema, columns: Sequence[str] | None) -> list[int]:
    names = schema.names if columns is None else list(columns)
    if len(set(names)) != len(names):
        raise SchemaError(f"columns {list(names)} name a column twice")
    return [schema.index(name) for name in names]


def add_counts(codes: np.ndarray, schema: Schema, positions: np.ndarray, out: np.ndarray) -> None:
    """Add the rows of ``codes`` to the flat count table ``out`` over the columns at ``positions``.

    The streaming building block: call once per chunk with the same ``out``.
    """
    codes = np.ascontiguousarray(codes)
    if codes.ndim != 2 or codes.shape[1] != len(schema):
        raise ValueError(f"codes must have shape (n, {len(schema)}), got {codes.shape}")
    if not np.issubdtype(codes.dtype, np.integer):
        raise TypeError(f"codes must be an integer array, got dtype {codes.dtype}")
    sizes = np.array([schema.shape[p] for p in positions], dtype=np.int64)
    if out.ndim != 1 or out.size != int(np.prod(sizes)) or out.dtype != np.int64:
        raise ValueError(f"out must be a flat int64 array of {int(np.prod(sizes))} cells")
    strides = np.ones(len(sizes), dtype=np.int64)  # row-major: last column fastest
    strides[:-1] = np.cumprod(sizes[::-1])[::-1][1:]
    bad = _kernels.count_cells(codes, positions, sizes, strides, out)
    if bad >= 0:
        row = codes[bad]
        for p in positions:
            if not 0 <= row[p] < schema.shape[p]:
                raise code_outside(bad + 1, schema.names[p], row[p], schema.shape[p])


def marginal(
    codes: np.ndarray,
    schema: Schema,
    columns: Sequence[str] | None = None,
    *,
    max_cells: int = DEFAULT_MAX_CELLS,
) -> np.ndarray:
    """Counts (int64) of each combination of ``columns``' codes, shaped by their sizes.

    ``codes`` is ``(n, len(schema))``; ``columns=None`` means every column (the histogram).
    """
    positions = _positions(schema, columns)
    shape = tuple(schema.shape[p] for p in positions)
    cells = int(np.prod(shape, dtype=object)) if shape else 1
    _check_cells(cells, f"the table over {[schema.names[p] for p in positions]}", max_cells)
    out = np.zeros(cells, dtype=np.int64)
    add_counts(codes, schema, positions, out)
    return out.reshape(shape)


def code_outside(row: int, column: str, code: int, size: int) -> DataError:
    """The error for a code outside its column's 0..size-1 at data row ``row`` (from 1): it
    quotes the private data, and says so."""
    return DataError(non_private(f"row {row}, column {column!r}: code {code} is outside 0..{size - 1}"))


def count_matching(codes: np.ndarray, schema: Schema, query) -> int:
    """The rows of ``codes`` a counting query (a ``synth.data.workload.Query``) counts: every one of
    its columns' codes among the allowed ones. Column by column, in memory O(rows), so a query
    over any number of columns needs no table over them."""
    codes = np.asarray(codes)
    if codes.ndim != 2 or codes.shape[1] != len(schema):
        raise ValueError(f"codes must have shape (n, {len(schema)}), got {codes.shape}")
    inside = np.ones(codes.shape[0], dtype=bool)
    for name, allowed in zip(query.columns, query.allowed):
        p = schema.index(name)
        column = codes[:, p]
        outside = np.flatnonzero((column < 0) | (column >= schema.shape[p]))
        if outside.size:
            raise code_outside(outside[0] + 1, name, column[outside[0]], schema.shape[p])
        wanted = np.zeros(schema.shape[p], dtype=bool)
        wanted[allowed] = True
        inside &= wanted[column]
    return int(np.count_nonzero(inside))


def histogram(codes: np.ndarray, schema: Schema, *, max_cells: int = DEFAULT_MAX_CELLS) -> np.ndarray:
    """The dense count histogram over the whole universe, shaped ``schema.shape``."""
    return marginal(codes, schema, None, max_cells=max_cells)


def marginal_from_dense(x: np.ndarray, schema: Schema, columns: Sequence[str]) -> np.ndarray:
    """Sum a dense table over U (counts or a distribution) onto ``columns``, in their order."""
    x = np.asarray(x)
    if x.size != schema.universe_size:
        raise ValueError(f"table has {x.size} cells but the universe has {schema.universe_size}")
    if x.dtype not in (np.float64, np.int64):
        x = x.astype(np.float64 if np.issubdtype(x.dtype, np.floating) else np.int64)
    positions = _positions(schema, columns)
    if len(positions) == 0:
        return np.asarray(x.sum())
    flat = np.ascontiguousarray(x).reshape(-1)
    dims, kept, out_strides, in_schema_order = _marginal_walk(schema, positions)
    out = np.zeros(math.prod(dims[kept].tolist()), dtype=flat.dtype)
    _kernels.marginalize(flat, dims, kept, out_strides, out)
    table = out.reshape([schema.shape[p] for p in in_schema_order])
    return np.ascontiguousarray(table.transpose([in_schema_order.index(p) for p in positions]))


def marginals_from_dense(x: np.ndarray, schema: Schema, subsets: Sequence[Sequence[str]]) -> list[np.ndarray]:
    """Sum a dense table over U onto each of ``subsets`` (lists of column names), all at once.

    Returns one new table per subset, in order, as ``marginal_from_dense(x, schema, subset)``
    would give it: axes in the subset's order, the empty subset giving the 0-d total; equal up
    to float rounding (the sums are taken in another order; int64 tables are exact).

    Much faster than one ``marginal_from_dense`` per subset when there are several (e.g. every
    3-way marginal, for MWEM's selection step): U is walked once, onto a few intermediate
    marginals that the requested ones are summed from in turn (a plan built once per schema
    shape and set of subsets, then cached). Repeated subsets, or the same columns in another
    order, are computed once. A single subset is summed by ``marginal_from_dense``'s kernel.
    The intermediate tables live in one temporary array (for all 3-way marginals of a 10^7-cell
    universe, a quarter to a half the size of ``x``).
    """
    return _marginals_from_dense(x, schema, subsets, intermediates=True)


def _marginals_from_dense(x: np.ndarray, schema: Schema, subsets: Sequence[Sequence[str]], *,
                          intermediates: bool) -> list[np.ndarray]:
    """``marginals_from_dense``; without ``intermediates``, every table is summed straight from
    U in one walk (each cell added into every table: the simpler design, kept to measure)."""
    x = np.asarray(x)
    if x.size != schema.universe_size:
        raise ValueError(f"table has {x.size} cells but the universe has {schema.universe_size}")
    if x.dtype not in (np.float64, np.int64):
        x = x.astype(np.float64 if np.issubdtype(x.dtype, np.floating) else np.int64)
    if isinstance(subsets, str):
        raise TypeError(f"subsets must be a sequence of column lists, got the string {subsets!r}")
    positions = []
    for subset in subsets:
        if isinstance(subset, str):
            raise TypeError(f"each subset must be a sequence of column names, got the string {subset!r}; "
                            f"write [{subset!r}] for one column")
        positions.append(_position_list(schema, subset))
    if not positions:
        return []
    flat = np.ascontiguousarray(x).reshape(-1)
    shape = tuple(int(size) for size in schema.shape)
    plan = _marginals_plan(shape, tuple(sorted({tuple(sorted(p)) for p in positions})), intermediates)
    work = np.empty(plan.work_cells, dtype=flat.dtype)
    _kernels.marginals_by_plan(flat, work, *plan.arrays)
    tables = []
    for p in positions:
        axes = tuple(sorted(p))
        if axes in plan.tables:
            start, cells = plan.tables[axes]
            table = work[start:start + cells]
        else:  # every column: U itself
            table = flat
        table = table.reshape([shape[a] for a in axes]).transpose([axes.index(a) for a in p])
        tables.append(table.copy())  # C order; never a view of work (or of x), never shared
    return tables


@dataclass(frozen=True)
class _MarginalsPlan:
    """How ``marginals_from_dense`` computes a set of marginals: the passes of
    ``_kernels.marginals_by_plan`` (its arguments after ``x`` and ``work``) and where each table
    lies in ``work`` (``tables[axes] = (start, cells)``, axes in schema order)."""

    work_cells: int
    tables: dict
    arrays: tuple


@functools.lru_cache(maxsize=64)
def _marginals_plan(shape: tuple[int, ...], requests: tuple[tuple[int, ...], ...],
                    intermediates: bool = True) -> _MarginalsPlan:
    """Plan the marginals over the axes ``requests`` (sorted tuples) of a table shaped ``shape``.

    A tree of tables, each summed from its parent in one pass (``marginalize_many``: one walk of
    the parent fills all its children). At a table over axes A with requests R (R's members are
    subsets of A): when R's union is smaller than A, its child is that union; otherwise, while it
    pays, the axis a that most reduces the work of the requests without a (``len(those) * (1 -
    1/size_a)`` passes of A saved, at the cost of one) becomes a child A - {a} that those requests
    are taken from, recursively; the rest are children of A directly. A pass costs about one add
    per cell per child, so routing k requests through a child 1/size_a as big turns k cell-adds
    per cell into 1 + k/size_a.
    """
    everything = tuple(range(len(shape)))
    tables: dict[tuple[int, ...], tuple[int, int]] = {}
    children: dict[tuple[int, ...], list[tuple[int, ...]]] = {everything: []}
    cells = [0]

    def child(parent: tuple[int, ...], axes: tuple[int, ...]) -> None:
        if axes in tables or axes == everything:  # computed already (not expected) or U itself
            return
        tables[axes] = (cells[0], math.prod(shape[a] for a in axes))
        cells[0] += tables[axes][1]
        children[parent].append(axes)
        children[axes] = []

    def build(node: tuple[int, ...], wanted: list[tuple[int, ...]]) -> None:
        remaining = [r for r in wanted if r != node]
        union = tuple(sorted(set().union(*remaining))) if remaining else node
        if len(remaining) >= 2 and union != node:
            child(node, union)
            build(union, remaining)
            return
        while len(remaining) >= 2:
            best, best_gain = -1, 1.0
            for a in node:
                gain = sum(a not in r for r in remaining) * (1.0 - 1.0 / shape[a])
                if gain > best_gain:
                    best, best_gain = a, gain
            if best < 0:
                break
            without = tuple(b for b in node if b != best)
            child(node, without)
            build(without, [r for r in remaining if best not in r])
            remaining = [r for r in remaining if best in r]
        for r in remaining:
            child(node, r)

    if intermediates:
        build(everything, list(requests))
    else:
        for r in requests:
            child(everything, r)
    sources: list[int] = []
    dims: list[int] = []
    strides: list[int] = []
    starts: list[int] = []
    sizes: list[int] = []
    dim_bounds, stride_bounds, table_bounds = [0], [0], [0]
    for node, kids in children.items():  # parents come before their children
        if not kids:
            continue
        sources.append(-1 if node == everything else tables[node][0])
        # merge neighbouring axes that every child keeps, or sums out, alike
        groups: list[list[int]] = []
        for a in node:
            pattern = [a in kid for kid in kids]
            if groups and [groups[-1][-1] in kid for kid in kids] == pattern:
                groups[-1].append(a)
            else:
                groups.append([a])
        dims += [math.prod(shape[a] for a in g) for g in groups]
        dim_bounds.append(len(dims))
        for kid in kids:
            kid_strides = {a: math.prod(shape[b] for b in kid[i + 1:]) for i, a in enumerate(kid)}
            strides += [kid_strides.get(g[-1], 0) for g in groups]
            starts.append(tables[kid][0])
            sizes.append(tables[kid][1])
        stride_bounds.append(len(strides))
        table_bounds.append(len(starts))
    arrays = tuple(np.array(v, dtype=np.int64)
                   for v in (sources, dim_bounds, dims, stride_bounds, strides, table_bounds, starts, sizes))
    return _MarginalsPlan(cells[0], tables, arrays)


def _marginal_walk(schema: Schema, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[int]]:
    """Merged axes, keep flags and output strides for walking U onto the columns at ``positions``;
    and the kept positions in schema order (the walk's output layout). Cached per shape and
    positions: engines walk onto the same few subsets again and again."""
    return _walk_plan(schema.shape, tuple(int(p) for p in positions))


@functools.lru_cache(maxsize=4096)
def _walk_plan(shape: tuple[int, ...], positions: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                                            list[int]]:
    keep = np.zeros(len(shape), dtype=np.bool_)
    keep[list(positions)] = True
    dims, kept = _merge_axes(shape, keep)
    out_strides = np.zeros(len(dims), dtype=np.int64)
    stride = 1
    for j in range(len(dims) - 1, -1, -1):
        if kept[j]:
            out_strides[j] = stride
            stride *= dims[j]
    arrays = (np.array(dims, dtype=np.int64), np.array(kept), out_strides)
    for array in arrays:
        array.flags.writeable = False  # shared by every caller of the cache
    return (*arrays, sorted(positions))


def multiply_by_marginal(x: np.ndarray, schema: Schema, columns: Sequence[str], factors: np.ndarray) -> float:
    """Multiply each cell of the flat float64 table ``x`` over U (in place) by ``factors`` at its
    cell of the marginal on ``columns`` (``factors`` shaped by those columns, in their order);
    return the new total of ``x``. One pass, no universe-sized temporaries."""
    if x.ndim != 1 or x.size != schema.universe_size or x.dtype != np.float64 or not x.flags.c_contiguous:
        raise ValueError(f"x must be a contiguous flat float64 array of {schema.universe_size} cells")
    positions = _positions(schema, columns)
    factors = np.asarray(factors, dtype=np.float64)
    expected = tuple(schema.shape[p] for p in positions)
    if factors.shape != expected:
        raise ValueError(f"factors have shape {factors.shape}, expected {expected}")
    if len(positions) == 0:
        x *= float(factors)
        return float(x.sum())
    dims, kept, out_strides, in_schema_order = _marginal_walk(schema, positions)
    order = [list(positions).index(p) for p in in_schema_order]
    flat_factors = np.ascontiguousarray(factors.transpose(order)).reshape(-1)
    return float(_kernels.multiply_by_marginal(x, dims, kept, out_strides, flat_factors))


def _merge_axes(shape: Sequence[int], keep: np.ndarray) -> tuple[list[int], list[bool]]:
    """Merge neighbouring axes that are both kept or both summed out (row-major order)."""
    dims: list[int] = []
    kept: list[bool] = []
    for size, k in zip(shape, keep.tolist()):
        if dims and kept[-1] == k:
            dims[-1] *= size
        else:
            dims.append(size)
            kept.append(k)
    return dims, kept


class SelectedCells:
    """The kernel arguments that select a query's cells in a dense table (build once, reuse)."""

    def __init__(self, schema: Schema, query):
        constrained = {schema.index(c): np.asarray(a, dtype=np.int64) for c, a in zip(query.columns, query.allowed)}
        last = max(constrained, default=-1)
        strides = schema.strides
        self.universe_size = schema.universe_size
        self.run = int(np.prod(schema.shape[last + 1:], dtype=np.int64))
        self.start = 0
        if last >= 0 and _is_range(constrained[last]):  # its codes join the contiguous run
            self.start = int(constrained[last][0] * strides[last])
            self.run *= len(constrained[last])
            last -= 1  # any free axes before it are walked by the odometer, every code
        allowed = [constrained.get(j, np.arange(schema.shape[j], dtype=np.int64)) for j in range(last + 1)]
        self.counts = np.array([len(a) for a in allowed], dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.counts)[:-1]]).astype(np.int64)[: len(allowed)]
        self.allowed = np.concatenate(allowed) if allowed else np.zeros(0, np.int64)
        self.strides = np.ascontiguousarray(strides[: last + 1])

    def scale(self, w: np.ndarray, factor: float) -> float:
        """Multiply the selected cells of ``w`` by ``factor``; return their sum before."""
        if w.ndim != 1 or w.size != self.universe_size or w.dtype != np.float64 or not w.flags.c_contiguous:
            raise ValueError(f"w must be a contiguous flat float64 array of {self.universe_size} cells")
        return float(_kernels.scale_selected(w, self.start, self.strides, self.allowed, self.offsets, self.counts,
                                             self.run, float(factor)))


def _is_range(codes: np.ndarray) -> bool:
    return len(codes) > 0 and int(codes[-1]) - int(codes[0]) == len(codes) - 1


def scale_query_cells(w: np.ndarray, schema: Schema, query, factor: float) -> float:
    """Multiply the cells of the flat dense table ``w`` that ``query`` selects by ``factor``
    (in place, one pass over the selected cells only); return their sum before scaling.

    ``query`` is a ``synth.data.workload.Query`` over ``schema``'s columns. To scale by the same
    query repeatedly, build ``SelectedCells(schema, query)`` once.
    """
    return SelectedCells(schema, query).scale(w, factor)
