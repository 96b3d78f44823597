"""Infer a schema from data. The result is NOT differentially private.

Categories and bin edges read off the private data can reveal rows (a rare category shows
that someone has it; min and max edges show extreme values). The CLI says so loudly; users
should review the schema or replace it with public knowledge.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

import numpy as np
import pandas as pd

from .data import DEFAULT_CHUNK_ROWS, _read_header, csv_chunks
from .errors import DataError, SchemaError
from .schema import Categorical, Column, Numeric, Schema

__all__ = ["infer_schema", "MAX_TEXT_CATEGORIES"]

#: A text column with more distinct values than this is refused (likely an identifier).
MAX_TEXT_CATEGORIES = 1000


class _ColumnStats:
    def __init__(self, limit: int):
        self.limit = limit
        self.distinct: set[str] = set()
        self.overflow = False
        self.numeric = True
        self.integral = True
        self.low = np.inf
        self.high = -np.inf
        self.present = 0

    def add(self, values: pd.Series) -> None:
        values = values.dropna()
        self.present += len(values)
        if self.numeric:
            numbers = pd.to_numeric(values, errors="coerce")
            if numbers.isna().any():
                self.numeric = False
            elif len(numbers):
                self.integral = self.integral and bool((numbers == np.floor(numbers)).all())
                self.low = min(self.low, float(numbers.min()))
                self.high = max(self.high, float(numbers.max()))
        if not self.overflow:
            self.distinct.update(values.unique().tolist())
            if len(self.distinct) > self.limit:
                self.overflow = True


def infer_schema(
    path: str | os.PathLike,
    *,
    max_categories: int = 32,
    bins: int = 10,
    columns: str | Sequence[str] | None = None,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
) -> Schema:
    """A schema from a CSV's values: text columns and numeric columns with at most
    ``max_categories`` distinct values become categorical (values sorted), other numeric
    columns get ``bins`` equal-width bins from their minimum to their maximum.
    """
    if max_categories < 1 or bins < 1:
        raise ValueError("max_categories and bins must be >= 1")
    header = _read_header(path)
    names = _selected(header, columns, path)
    stats = {name: _ColumnStats(MAX_TEXT_CATEGORIES) for name in names}
    with open(path, "rb") as handle:
        for frame in csv_chunks(handle, path, dtype=str, chunk_rows=chunk_rows):
            for name in names:
                stats[name].add(frame[name])
    return Schema(tuple(_column(name, stats[name], max_categories, bins, path) for name in names), inferred=True)


def _selected(header: list[str], columns: str | Sequence[str] | None, path) -> list[str]:
    if columns is None:
        names = header
    elif isinstance(columns, str):
        names = [c.strip() for c in columns.split(",") if c.strip()]
    else:
        names = list(columns)
    for name in names:
        if name not in header:
            raise DataError(f"{path}: column {name!r} is not in the file (columns: {', '.join(header)})")
    if len(set(names)) != len(names) or len(set(header)) != len(header):
        raise DataError(f"{path}: a column name appears twice")
    if not names:
        raise DataError(f"{path}: no columns selected")
    return names


def _column(name: str, stats: _ColumnStats, max_categories: int, bins: int, path) -> Column:
    if stats.present == 0:
        raise DataError(f"{path}: column {name!r} has no values to infer from")
    if not stats.numeric:
        if stats.overflow:
            raise SchemaError(
                f"{path}: column {name!r} has more than {MAX_TEXT_CATEGORIES} distinct text values "
                "(an identifier?); leave it out with --columns or write its schema by hand"
            )
        return Categorical(name, tuple(sorted(stats.distinct)))
    if not stats.overflow and len(stats.distinct) <= max_categories:
        numbers = sorted({float(v) for v in stats.distinct})
        values = [int(v) if v.is_integer() else v for v in numbers]
        return Categorical(name, tuple(values))
    if stats.integral:
        # integer data: equal integer-width bins [low + i*step, low + (i+1)*step)
        step = max(1, math.ceil((stats.high - stats.low + 1) / bins))
        return Numeric(name, tuple(int(stats.low) + step * i for i in range(bins + 1)))
    edges = np.linspace(stats.low, stats.high, bins + 1)
    return Numeric(name, tuple(float(e) for e in edges))
