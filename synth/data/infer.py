"""Infer a schema from data. The result is NOT differentially private.

Categories and bin edges read off the private data can reveal rows (a rare category shows
that someone has it; min and max edges show extreme values). The CLI says so loudly; users
should review the schema or replace it with public knowledge.

A column with any missing cell (empty, or one of ``missing_tokens``) gets ``missing=True``:
its missing values are a code of their own, not bad rows. A binned column of decimals records
the most decimal places its cells are written with (``digits``), and a column of ISO dates or
timestamps with more distinct values than ``max_categories`` is binned in days or seconds
(``time``; ``synth.data.values``).
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from synth.data.reading import DEFAULT_CHUNK_ROWS, _read_header, csv_chunks, is_parquet
from synth.data.schema import (
    SHOWN_CHARS, Categorical, Column, Numeric, Schema, check_missing_tokens, shown_value,
)
from synth.data.values import MAX_DIGITS, decimal_places, parse_times
from synth.errors import DataError, SchemaError

__all__ = ["infer_schema", "MAX_TEXT_CATEGORIES"]

#: A text column with more distinct values than this is refused (likely an identifier).
MAX_TEXT_CATEGORIES = 1000

#: A cell written as a whole number (kept exact: a float would turn 2**53 + 1 into 2**53).
_INTEGER = re.compile(r"\s*[+-]?[0-9]+\s*")


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
        self.absent = 0  # missing cells (empty, or a missing token)
        self.unfit: tuple[int, str] | None = None  # the first (row, problem) of a number infer cannot write
        self.places = 0  # the most decimal places of a number
        self.time: str | None = "date"  # every cell an ISO date ("date"), or timestamp ("datetime"), or neither
        self.first_second = np.inf  # the earliest and latest time, in seconds since 1970-01-01
        self.last_second = -np.inf

    def add(self, values: pd.Series) -> None:
        total = len(values)
        values = values.dropna()
        self.present += len(values)
        self.absent += total - len(values)
        if self.numeric:
            numbers = pd.to_numeric(values, errors="coerce")
            if numbers.isna().any():
                self.numeric = False
            elif len(numbers):
                self._check_range(values, numbers.to_numpy(dtype=np.float64))
                self.integral = self.integral and bool((numbers == np.floor(numbers)).all())
                self.low = min(self.low, float(numbers.min()))
                self.high = max(self.high, float(numbers.max()))
                if not self.integral:
                    self.places = max(self.places, decimal_places(values))
        if self.time is not None and len(values):
            self._add_times(values)
        if not self.overflow:
            self.distinct.update(values.unique().tolist())
            if len(self.distinct) > self.limit:
                self.overflow = True

    def _add_times(self, texts: pd.Series) -> None:
        """Narrow ``time`` to what every cell so far is (a date, a timestamp, or neither), and
        widen the span of times."""
        if parse_times(texts.iloc[:1], "datetime")[1][0]:  # the first is no time: the column is not one
            self.time = None
            return
        seconds, bad = parse_times(texts, "datetime")
        if bad.any():
            self.time = None
            return
        if self.time == "date" and parse_times(texts, "date")[1].any():
            self.time = "datetime"
        self.first_second = min(self.first_second, float(seconds.min()))
        self.last_second = max(self.last_second, float(seconds.max()))

    def _check_range(self, texts: pd.Series, numbers: np.ndarray) -> None:
        """Remember the first cell (its row, from 1) that a numeric schema could not hold as
        written: a non-finite number (the readers refuse ``inf``), or a whole number past 64
        bits (as a float it would be written as another number). A large float such as
        ``1e300`` is fine. It is an error only if the column stays numeric to the end."""
        if self.unfit is not None:
            return
        for i in np.flatnonzero(~np.isfinite(numbers) | (np.abs(numbers) >= 2.0**63)):
            text = texts.iloc[i]
            if _INTEGER.fullmatch(text):
                digits = text.strip()  # quoted as numbers are, without quotes, cut if long
                if len(digits) > SHOWN_CHARS:
                    digits = f"{digits[:SHOWN_CHARS]}... ({len(digits)} digits)"
                problem = f"integer {digits} is past the 64-bit range (about 9.2e18)"
            elif not math.isfinite(numbers[i]):
                problem = f"non-finite value {shown_value(text)}; synth reads only finite numbers"
            else:
                continue
            self.unfit = (int(texts.index[i]) + 1, problem)
            return


def infer_schema(
    path: str | os.PathLike,
    *,
    max_categories: int = 32,
    bins: int = 10,
    columns: str | Sequence[str] | None = None,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    missing_tokens: Sequence[str] = (),
) -> Schema:
    """A schema from a CSV's values: text columns and numeric columns with at most
    ``max_categories`` distinct values become categorical (values sorted), other numeric
    columns get ``bins`` equal-width bins from their minimum to their maximum.

    Empty cells, and cells that are exactly one of ``missing_tokens`` (such as ``"?"``), are
    missing values: a column that holds any gets ``missing=True``, and the schema records the
    tokens (``Schema.missing_tokens``), so its readers take them as missing too.
    """
    if max_categories < 1 or bins < 1:
        raise ValueError("max_categories and bins must be >= 1")
    tokens = check_missing_tokens(tuple(missing_tokens))
    if is_parquet(Path(path)):
        raise DataError(f"{path}: is Parquet, and schema infer reads CSV only; write the schema by hand, "
                        "or infer it from a CSV of the same columns")
    header = _read_header(path)
    names = _selected(header, columns, path)
    stats = {name: _ColumnStats(MAX_TEXT_CATEGORIES) for name in names}
    with open(path, "rb") as handle:
        for frame in csv_chunks(handle, path, dtype=str, chunk_rows=chunk_rows, missing_tokens=tokens):
            for name in names:
                stats[name].add(frame[name])
    return Schema(tuple(_column(name, stats[name], max_categories, bins, path) for name in names), inferred=True,
                  missing_tokens=tokens)


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


def _exact_number(text: str) -> int | float:
    """A numeric cell as a schema value: a whole number exactly, else its float (an integral
    one below 2^53 as an int: ``2.0`` is ``2``)."""
    if _INTEGER.fullmatch(text):
        return int(text)
    try:
        number = float(text)
    except ValueError:  # a form pandas reads and Python does not
        number = float(pd.to_numeric(text))
    return int(number) if number.is_integer() and abs(number) < 2**53 else number


def _column(name: str, stats: _ColumnStats, max_categories: int, bins: int, path) -> Column:
    if stats.present == 0:
        raise DataError(f"{path}: column {name!r} has no values to infer from")
    column = _values_column(name, stats, max_categories, bins, path)
    if not stats.absent:
        return column
    if isinstance(column, Categorical):
        return Categorical(name, column.values, missing=True)
    return dataclasses.replace(column, missing=True)


def _values_column(name: str, stats: _ColumnStats, max_categories: int, bins: int, path) -> Column:
    if not stats.numeric and stats.time is not None and (stats.overflow or len(stats.distinct) > max_categories):
        return _time_column(name, stats, bins)
    if not stats.numeric:
        if stats.overflow:
            raise SchemaError(
                f"{path}: column {name!r} has more than {MAX_TEXT_CATEGORIES} distinct text values "
                "(an identifier?); leave it out with --columns or write its schema by hand"
            )
        return Categorical(name, tuple(sorted(stats.distinct)))
    if stats.unfit is not None:
        row, problem = stats.unfit
        raise DataError(f"{path}: row {row}, column {shown_value(name)}: {problem}; leave the column out with "
                        "--columns, or write its schema by hand")
    if not stats.overflow and len(stats.distinct) <= max_categories:
        return Categorical(name, tuple(sorted({_exact_number(v) for v in stats.distinct})))
    if stats.integral:
        # integer data: equal integer-width bins [low + i*step, low + (i+1)*step)
        step = max(1, math.ceil((stats.high - stats.low + 1) / bins))
        return Numeric(name, tuple(int(stats.low) + step * i for i in range(bins + 1)))
    edges = np.linspace(stats.low, stats.high, bins + 1)
    if stats.places > MAX_DIGITS:  # more places than a float holds: no rounding
        return Numeric(name, tuple(float(e) for e in edges))
    # edges on the data's grid (the first and last are data values): every bin holds a value with those places
    edges = np.unique(np.round(edges, stats.places))
    return Numeric(name, tuple(float(e) for e in edges), digits=stats.places)


def _time_column(name: str, stats: _ColumnStats, bins: int) -> Numeric:
    """Equal bins of whole days (a date column) or seconds (a timestamp column) from the
    first time to the last."""
    per_unit = 86_400 if stats.time == "date" else 1
    low = math.floor(stats.first_second / per_unit)
    high = math.ceil(stats.last_second / per_unit)
    step = max(1, math.ceil((high - low + 1) / bins))
    return Numeric(name, tuple(low + step * i for i in range(bins + 1)), time=stats.time)
