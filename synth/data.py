"""Read private data (CSV or DataFrame) under a schema into integer codes, in chunks.

Reading is streaming: ``iter_encoded`` yields chunks of codes, and ``scan`` folds them into
marginal tables as it goes, so memory does not grow with the number of rows. ``read``
keeps every row's codes (``n x d`` small integers) for mechanisms that need them.

Errors name the file, the row (numbered from 1, the header not counted), the column and the
value. CSV cells that are empty are missing values; there is no other missing-value marker.
"""

from __future__ import annotations

import csv
import os
import re
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Union

import numpy as np
import pandas as pd

from .errors import DataError, locate
from .tables import DEFAULT_MAX_CELLS, _check_cells, add_counts
from .schema import Categorical, Coded, Column, Numeric, Schema, _list_preview, format_value

__all__ = ["Encoded", "ScanResult", "code_dtype", "encode", "iter_encoded", "read", "scan", "decode"]

#: Rows per chunk when streaming a CSV.
DEFAULT_CHUNK_ROWS = 200_000

Source = Union[str, os.PathLike, pd.DataFrame]
Progress = Callable[[int, Union[float, None]], None]


@dataclass
class Encoded:
    """Integer codes of rows under ``schema`` (shape ``(n, len(schema))``) and clip counts."""

    schema: Schema
    codes: np.ndarray
    clipped: dict[str, int] = field(default_factory=dict)

    @property
    def n_rows(self) -> int:
        return int(self.codes.shape[0])


@dataclass
class ScanResult:
    """What one streaming pass produced: row count, marginal tables and clip counts."""

    n_rows: int
    tables: dict[tuple[str, ...], np.ndarray]
    clipped: dict[str, int]


def code_dtype(schema: Schema) -> np.dtype:
    """The smallest integer dtype that holds every code of the schema."""
    largest = max(schema.shape)
    for dtype in (np.uint8, np.uint16, np.int32):
        if largest - 1 <= np.iinfo(dtype).max:
            return np.dtype(dtype)
    return np.dtype(np.int64)


# -- encoding one frame ---------------------------------------------------------------------


def encode(
    frame: pd.DataFrame,
    schema: Schema,
    *,
    columns: str | Sequence[str] | None = None,
    source: object = "DataFrame",
    first_row: int = 1,
) -> Encoded:
    """Encode a DataFrame's rows under ``schema`` (restricted to ``columns`` if given).

    ``first_row`` is the number the frame's first row gets in error messages.
    """
    selected = schema.select(columns)
    _check_header([str(c) for c in frame.columns], schema, selected, source)
    codes = np.empty((len(frame), len(selected)), dtype=code_dtype(selected))
    clipped: dict[str, int] = {}
    for j, column in enumerate(selected):
        codes[:, j], n_clipped = _encode_column(frame[column.name], column, source, first_row)
        if n_clipped:
            clipped[column.name] = n_clipped
    return Encoded(selected, codes, clipped)


def _encode_column(series: pd.Series, column: Column, source: object, first_row: int) -> tuple[np.ndarray, int]:
    def fail(message: str, position: int) -> DataError:
        return DataError(locate(message, file=source, row=first_row + position, column=column.name))

    if isinstance(column, Categorical) and not column.numeric_labels:
        return _encode_labels(series, column, fail), 0
    if isinstance(column, Coded) and isinstance(series.dtype, np.dtype) and series.dtype.kind in "iu":
        return _check_codes(series.to_numpy(), column, fail), 0  # fast path: plain integers
    values = _numbers(series, fail)
    if isinstance(column, Numeric):
        codes, clipped = column.bin_codes(values)
        return codes, int(clipped.sum())
    if isinstance(column, Coded):
        fractional = values != np.floor(values)
        if fractional.any():
            i = int(np.argmax(fractional))
            raise fail(f"value {format_value(values[i])} is not an integer code (domain 0..{column.size - 1})", i)
        return _check_codes(values, column, fail).astype(np.int64), 0
    labels = np.array([float(v) for v in column.values])
    order = np.argsort(labels)
    at = np.clip(np.searchsorted(labels[order], values), 0, len(labels) - 1)
    found = labels[order][at] == values
    if not found.all():
        i = int(np.argmax(~found))
        raise fail(f"unknown category {format_value(values[i])}; allowed: {_list_preview(column.values)}", i)
    return order[at], 0


def _check_codes(values: np.ndarray, column: Coded, fail) -> np.ndarray:
    """``values`` if every one lies in ``0..size-1``, else the error for the first that does not."""
    if values.size and (values.min() < 0 or values.max() >= column.size):
        i = int(np.argmax((values < 0) | (values >= column.size)))
        raise fail(f"value {format_value(values[i])} is outside the domain 0..{column.size - 1}", i)
    return values


def _encode_labels(series: pd.Series, column: Categorical, fail) -> np.ndarray:
    """Codes of a string-labelled column, through pandas' categorical (one lookup per label)."""
    cat = series if isinstance(series.dtype, pd.CategoricalDtype) else series.astype("category")
    raw = cat.cat.codes.to_numpy()
    missing = raw < 0
    if missing.any():
        raise fail("missing value", int(np.argmax(missing)))
    mapping = np.full(len(cat.cat.categories), -1, dtype=np.int64)
    for k, label in enumerate(cat.cat.categories):
        try:
            mapping[k] = column.code_of(label)
        except ValueError:
            pass
    codes = mapping[raw]
    unknown = codes < 0
    if unknown.any():
        i = int(np.argmax(unknown))
        raise fail(f"unknown category {_shown(cat.iloc[i])}; allowed: {_list_preview(column.values)}", i)
    return codes


def _numbers(series: pd.Series, fail) -> np.ndarray:
    """Float64 values of a column that must be numeric; missing or non-numeric cells fail."""
    if pd.api.types.is_bool_dtype(series.dtype):
        raise fail(f"non-numeric value {_shown(series.iloc[0])}", 0)
    if pd.api.types.is_numeric_dtype(series.dtype):
        values = series.to_numpy(dtype=np.float64, na_value=np.nan)
        missing = np.isnan(values)
        if missing.any():
            raise fail("missing value", int(np.argmax(missing)))
        return values
    absent = series.isna().to_numpy()
    if absent.any():
        raise fail("missing value", int(np.argmax(absent)))
    values = pd.to_numeric(series, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    bad = np.isnan(values)
    if bad.any():
        i = int(np.argmax(bad))
        text = series.iloc[i]
        if isinstance(text, str) and text.strip().lower() == "nan":
            raise fail("missing value ('nan')", i)
        raise fail(f"non-numeric value {_shown(text)}", i)
    return values


def _shown(value) -> str:
    """A data value as it should appear in an error: strings quoted, numbers plain."""
    return repr(value) if isinstance(value, str) else format_value(value)


def _check_header(names: list[str], schema: Schema, selected: Schema, source: object) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise DataError(locate("appears twice in the header", file=source, column=name))
        seen.add(name)
    for name in names:
        if name not in schema:
            raise DataError(
                locate(
                    f"is not in the schema (schema columns: {', '.join(schema.names)})",
                    file=source,
                    column=name,
                )
            )
    for name in selected.names:
        if name not in seen:
            raise DataError(locate("is in the schema but missing from the data", file=source, column=name))


# -- streaming ------------------------------------------------------------------------------


def iter_encoded(
    source: Source,
    schema: Schema,
    *,
    columns: str | Sequence[str] | None = None,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    progress: Progress | None = None,
) -> Iterator[Encoded]:
    """Yield ``Encoded`` chunks of a CSV file or DataFrame, in row order.

    ``progress(rows_done, fraction_done)`` is called after each chunk (fraction ``None`` when
    unknown). Raises ``DataError`` for an empty source or any bad value.
    """
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows ({chunk_rows}) must be >= 1")
    if isinstance(source, pd.DataFrame):
        yield from _iter_frame(source, schema, columns, chunk_rows, progress)
        return
    yield from _iter_csv(Path(source), schema, columns, chunk_rows, progress)


def _iter_frame(frame, schema, columns, chunk_rows, progress) -> Iterator[Encoded]:
    if len(frame) == 0:
        raise DataError("DataFrame: no data rows")
    for start in range(0, len(frame), chunk_rows):
        part = frame.iloc[start : start + chunk_rows]
        yield encode(part, schema, columns=columns, first_row=start + 1)
        if progress is not None:
            progress(start + len(part), (start + len(part)) / len(frame))


def _read_header(path: Path) -> list[str]:
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            header = next(csv.reader(handle), None)
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    except UnicodeDecodeError:
        raise DataError(f"{path}: not UTF-8 text") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot read: {exc.strerror}") from None
    if not header:
        raise DataError(f"{path}: file is empty (expected a CSV header row)")
    return header


def _iter_csv(path: Path, schema, columns, chunk_rows, progress) -> Iterator[Encoded]:
    header = _read_header(path)
    selected = schema.select(columns)
    _check_header(header, schema, selected, path)
    dtypes = {
        c.name: "category"
        for c in selected
        if isinstance(c, Categorical) and not c.numeric_labels
    }
    total_bytes = os.path.getsize(path)
    rows = 0
    with open(path, "rb") as handle:
        for frame in csv_chunks(handle, path, dtype=dtypes, chunk_rows=chunk_rows):
            yield encode(frame[list(selected.names)], selected, source=path, first_row=rows + 1)
            rows += len(frame)
            if progress is not None:
                progress(rows, min(handle.tell() / max(total_bytes, 1), 1.0))
    if rows == 0:
        raise DataError(f"{path}: has a header but no data rows")


def csv_chunks(handle, path: object, *, dtype=None, chunk_rows: int = DEFAULT_CHUNK_ROWS) -> Iterator[pd.DataFrame]:
    """DataFrames of up to ``chunk_rows`` rows of an open CSV, every column, strictly parsed.

    Strict: a row with more fields than the header is an error (pandas would drop the extras
    under ``usecols``, or turn a long first row into an index), and a blank line is a row of
    missing values rather than skipped, so data row N is always line N + 1 of the file.
    """
    reader = pd.read_csv(
        handle,
        dtype=dtype,
        na_values=[""],
        keep_default_na=False,
        index_col=False,
        skip_blank_lines=False,
        chunksize=chunk_rows,
        encoding="utf-8",
        engine="c",
    )
    rows = 0
    while True:
        with warnings.catch_warnings():
            warnings.simplefilter("error", pd.errors.ParserWarning)
            try:
                frame = next(reader)
            except StopIteration:
                return
            except pd.errors.ParserWarning:
                raise DataError(f"{path}: malformed CSV: data row {rows + 1} has more fields than the header") from None
            except pd.errors.ParserError as exc:
                raise DataError(f"{path}: malformed CSV: {_parser_message(exc)}") from None
            except UnicodeDecodeError:
                raise DataError(f"{path}: not UTF-8 text (near data row {rows + 1})") from None
        rows += len(frame)
        yield frame


def _parser_message(exc: Exception) -> str:
    """pandas' tokenizer message in data rows: 'Expected 3 fields in line 4, saw 4'."""
    text = str(exc).strip()
    found = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", text)
    if found:
        expected, line, saw = (int(g) for g in found.groups())
        return f"data row {line - 1} (line {line}) has {saw} fields, the header has {expected}"
    return text.removeprefix("Error tokenizing data. C error: ")


def read(
    source: Source,
    schema: Schema,
    *,
    columns: str | Sequence[str] | None = None,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    progress: Progress | None = None,
) -> Encoded:
    """Every row's codes, read in chunks (memory: one byte or two per cell)."""
    chunks = list(iter_encoded(source, schema, columns=columns, chunk_rows=chunk_rows, progress=progress))
    clipped: dict[str, int] = {}
    for chunk in chunks:
        for name, count in chunk.clipped.items():
            clipped[name] = clipped.get(name, 0) + count
    codes = chunks[0].codes if len(chunks) == 1 else np.concatenate([c.codes for c in chunks])
    return Encoded(chunks[0].schema, codes, clipped)


def scan(
    source: Source,
    schema: Schema,
    subsets: Iterable[Sequence[str]],
    *,
    columns: str | Sequence[str] | None = None,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    max_cells: int = DEFAULT_MAX_CELLS,
    progress: Progress | None = None,
) -> ScanResult:
    """One streaming pass: the row count and the marginal table of each column subset."""
    selected = schema.select(columns)
    subsets = [tuple(s) for s in subsets]
    flat: dict[tuple[str, ...], np.ndarray] = {}
    positions = {}
    for subset in subsets:
        shape = [selected[name].size for name in subset]
        cells = int(np.prod(shape, dtype=object)) if shape else 1
        _check_cells(cells, f"the marginal over {list(subset)}", max_cells)
        flat[subset] = np.zeros(cells, dtype=np.int64)
        positions[subset] = np.array([selected.index(name) for name in subset], dtype=np.int64)
    n_rows = 0
    clipped: dict[str, int] = {}
    for chunk in iter_encoded(source, schema, columns=columns, chunk_rows=chunk_rows, progress=progress):
        n_rows += chunk.n_rows
        for name, count in chunk.clipped.items():
            clipped[name] = clipped.get(name, 0) + count
        for subset in subsets:
            add_counts(chunk.codes, selected, positions[subset], flat[subset])
    tables = {s: flat[s].reshape([selected[n].size for n in s]) for s in subsets}
    return ScanResult(n_rows, tables, clipped)


# -- decoding -------------------------------------------------------------------------------


def decode(codes: np.ndarray, schema: Schema) -> pd.DataFrame:
    """Rows of codes back to values: labels, integer codes, or numeric bin midpoints."""
    codes = np.asarray(codes)
    if codes.ndim != 2 or codes.shape[1] != len(schema):
        raise ValueError(f"codes must have shape (n, {len(schema)}), got {codes.shape}")
    for j, column in enumerate(schema):
        if codes.shape[0] and (codes[:, j].min() < 0 or codes[:, j].max() >= column.size):
            raise ValueError(f"column {column.name!r}: codes must lie in 0..{column.size - 1}")
    return pd.DataFrame({c.name: c.decode(codes[:, j]) for j, c in enumerate(schema)})
