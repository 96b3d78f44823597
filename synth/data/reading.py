"""Read private data (CSV, Parquet, DataFrame) under a schema into integer codes, in chunks.

Reading is streaming: ``iter_encoded`` yields chunks of codes, and ``scan`` folds them into
marginal tables as it goes, so memory does not grow with the number of rows. ``read``
keeps every row's codes (``n x d`` small integers) for mechanisms that need them.

Errors name the file, the row (numbered from 1, the header not counted), the column and the
value. Missing values are empty CSV cells, nulls (Parquet, DataFrames), NaN, and cells that are
exactly one of the schema's ``missing_tokens`` (in numeric and coded columns, once stripped of
spaces, as numbers are; there the text ``nan`` is missing too). A column whose schema allows
them (``missing=True``) reads them as its missing code; in any other they are bad values.
A Parquet folder is read file by file (errors name the file).
"""

from __future__ import annotations

import csv
import io
import itertools
import math
import os
import re
import warnings
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Union

import numpy as np
import pandas as pd

from synth._kernels.scan import EMPTY, pack_column, parse_int_lines
from synth.data.counts import Counts, count_encoded, plan_scan
from synth.data.schema import (
    Categorical, Coded, Column, Numeric, Schema, _list_preview, format_value, shown_value,
)
from synth.data.tables import DEFAULT_MAX_CELLS
from synth.data.values import parse_times, time_problem
from synth.errors import DataError, locate, non_private

__all__ = ["BAD_ROWS", "Encoded", "check_bad_rows", "code_dtype", "encode", "encode_csv_lines", "iter_encoded",
           "parquet_chunks", "parquet_row_groups", "read", "scan", "decode"]

#: Rows per chunk when streaming a CSV.
DEFAULT_CHUNK_ROWS = 200_000

Source = Union[str, os.PathLike, pd.DataFrame]
Progress = Callable[[int, Union[float, None]], None]


#: What to do with a row whose value lies outside the schema (unknown category, bad code,
#: missing or non-numeric value, a line with too many fields).
BAD_ROWS = ("error", "drop")

#: Said after every error that quotes a data value: the message itself is not private.
PRIVATE_VALUE_NOTE = "(NON-PRIVATE: this message quotes the private data; --bad-rows drop skips such rows)"
#: What the NON-PRIVATE label (``synth.errors.non_private``) says of a message quoting pandas'
#: or pyarrow's words on the data, or a header (a headerless CSV's header is its first row) ...
MAY_QUOTE = "may quote the private data"
#: ... of one that says the data has no rows (n = 0) ...
TELLS_EMPTY = "tells that the private data has no rows"
#: ... and of one that says every row was dropped.
TELLS_ALL_DROPPED = "tells that no row of the private data fits the schema"


@dataclass
class Encoded:
    """Integer codes of rows under ``schema`` (shape ``(n, len(schema))``; column-major from
    the readers, as counting reads them) and clip counts.

    ``dropped`` counts rows removed by ``bad_rows="drop"``: it is computed from the private
    data, so a private run must never report it.
    """

    schema: Schema
    codes: np.ndarray
    clipped: dict[str, int] = field(default_factory=dict)
    dropped: int = 0

    @property
    def n_rows(self) -> int:
        return int(self.codes.shape[0])


def code_dtype(schema: Schema) -> np.dtype:
    """The smallest integer dtype that holds every code of the schema."""
    largest = max(schema.shape)
    for dtype in (np.uint8, np.uint16, np.int32):
        if largest - 1 <= np.iinfo(dtype).max:
            return np.dtype(dtype)
    return np.dtype(np.int64)


def check_bad_rows(bad_rows: object) -> str:
    """``bad_rows`` if it is one of ``BAD_ROWS``, else ``ValueError`` naming the choices."""
    if not (isinstance(bad_rows, str) and bad_rows in BAD_ROWS):
        raise ValueError(f"bad_rows ({bad_rows!r}) must be one of: {', '.join(map(repr, BAD_ROWS))}")
    return bad_rows


# -- encoding one frame ---------------------------------------------------------------------


class _Problems:
    """Rows of one column that do not fit the schema: a mask and the first one's message."""

    def __init__(self, size: int):
        self.mask = np.zeros(size, dtype=bool)
        self.first: tuple[int, str] | None = None

    def add(self, bad: np.ndarray, describe: Callable[[int], str]) -> None:
        """Mark the rows where ``bad`` is true; ``describe(i)`` is row i's problem."""
        if not bad.any():
            return
        i = int(np.argmax(bad))
        if self.first is None or i < self.first[0]:
            self.first = (i, describe(i))
        self.mask |= bad

    def merge(self, part: _Problems, rows: np.ndarray) -> None:
        """Add the problems of a part of the column: its row i is row ``rows[i]`` here."""
        if part.first is None:
            return
        self.mask[rows] |= part.mask
        i = int(rows[part.first[0]])
        if self.first is None or i < self.first[0]:
            self.first = (i, part.first[1])


def encode(
    frame: pd.DataFrame,
    schema: Schema,
    *,
    columns: str | Sequence[str] | None = None,
    source: object = "DataFrame",
    first_row: int = 1,
    bad_rows: str = "error",
) -> Encoded:
    """Encode a DataFrame's rows under ``schema`` (restricted to ``columns`` if given).

    ``first_row`` is the number the frame's first row gets in error messages. A value outside
    the schema raises ``DataError`` naming row, column and value (``bad_rows="error"``), or
    removes its row (``bad_rows="drop"``; a row-wise filter, so a DP guarantee on the kept rows
    holds for the table).
    """
    check_bad_rows(bad_rows)
    selected = schema.select(columns)
    _check_header([str(c) for c in frame.columns], schema, selected, source)
    codes = _plain_codes(frame, selected)
    if codes is not None:
        return Encoded(selected, codes)
    codes = np.empty((len(frame), len(selected)), dtype=code_dtype(selected), order="F")  # filled column by column
    clipped_rows: dict[str, np.ndarray] = {}
    bad = np.zeros(len(frame), dtype=bool)
    for j, column in enumerate(selected):
        _check_kind(frame[column.name], column, source)
        problems = _Problems(len(frame))
        codes[:, j], clipped_rows[column.name] = _encode_column(frame[column.name], column, problems,
                                                                selected.missing_tokens)
        if problems.first is not None:
            if bad_rows == "error":
                row, message = problems.first
                raise DataError(locate(f"{message} {PRIVATE_VALUE_NOTE}", file=source, row=first_row + row,
                                       column=column.name))
            bad |= problems.mask
    clipped = {name: int(np.count_nonzero(mask & ~bad)) for name, mask in clipped_rows.items()}
    clipped = {name: count for name, count in clipped.items() if count}
    if bad.any():
        codes = codes[~bad]
    return Encoded(selected, codes, clipped, int(np.count_nonzero(bad)))


def _plain_codes(frame: pd.DataFrame, selected: Schema) -> np.ndarray | None:
    """The codes of a frame whose columns are all coded, held as plain integers, every one in
    range (the common case); else None (``encode`` then goes column by column, and words any
    problem)."""
    def integers(name: str) -> np.ndarray | None:
        series = frame[name]
        return series.to_numpy() if isinstance(series.dtype, np.dtype) and series.dtype.kind in "iu" else None

    return _checked_codes(integers, len(frame), selected)


def _arrow_codes(batch, selected: Schema) -> np.ndarray | None:
    """``_plain_codes`` of an Arrow record batch, straight from its integer buffers (no pandas
    frame: that conversion took longer than the Parquet decoding); None where a column is not
    plain integers, or holds nulls where its schema allows no missing value (a null in a
    column that allows one is its missing code)."""
    import pyarrow as pa

    nulls: dict[str, np.ndarray] = {}

    def integers(name: str) -> np.ndarray | None:
        array = batch.column(name)
        if not pa.types.is_integer(array.type):
            return None
        if array.null_count == 0:
            return array.to_numpy()
        if not selected[name].missing:
            return None
        nulls[name] = array.is_null().to_numpy(zero_copy_only=False)
        return array.fill_null(0).to_numpy()

    return _checked_codes(integers, batch.num_rows, selected, nulls)


def _checked_codes(integers: Callable[[str], np.ndarray | None], rows: int, selected: Schema,
                   nulls: dict[str, np.ndarray] | None = None,
                   empty_is_missing: bool = False) -> np.ndarray | None:
    """The codes of ``rows`` rows from each column's plain integers (``integers(name)``, None
    where they are not), or None unless every column is coded and in range (one pass a
    column: ``synth._kernels.scan.pack_column``). The rows of ``nulls[name]`` (set when
    ``integers(name)`` is called) get the column's missing code, and so, with
    ``empty_is_missing``, do the values -1 (the plain CSV reader's empty fields) of a column
    that allows missing values."""
    if not all(isinstance(column, Coded) for column in selected):
        return None
    codes = np.empty((rows, len(selected)), dtype=code_dtype(selected), order="F")
    for j, column in enumerate(selected):
        values = integers(column.name)
        empty = column.missing_code if empty_is_missing and column.missing else -1
        if values is None or pack_column(values, column.n_values, codes, j, empty) >= 0:
            return None
        if nulls and column.name in nulls:
            codes[nulls[column.name], j] = column.missing_code
    return codes


def _encode_column(series: pd.Series, column: Column, problems: _Problems,
                   tokens: tuple[str, ...] = ()) -> tuple[np.ndarray, np.ndarray]:
    """Codes of one column (0 where a row is bad) and the mask of rows clipped into an edge bin.

    Missing cells (``_absent``) get the missing code where the column has one, and are bad
    rows where it has none; the other cells are read by ``_encode_values``."""
    absent = _absent(series, column, tokens) if (column.missing or tokens) else None
    if absent is None or not absent.any():
        return _encode_values(series, column, problems)
    if not column.missing:
        problems.add(absent, lambda i: _missing_message(series.iloc[i]))
    codes = np.full(len(series), column.missing_code if column.missing else 0, dtype=np.int64)
    clipped = np.zeros(len(series), dtype=bool)
    rows = np.flatnonzero(~absent)
    if rows.size:
        part = _Problems(rows.size)
        codes[rows], clipped[rows] = _encode_values(series.iloc[rows], column, part)
        problems.merge(part, rows)
    return codes, clipped


def _absent(series: pd.Series, column: Column, tokens: tuple[str, ...]) -> np.ndarray:
    """Where a column's cells are missing: null or NaN, or a text exactly one of ``tokens``
    (stripped of spaces first in a numeric or coded column, as its numbers are; there the
    text ``nan`` too, which pandas reads as NaN)."""
    absent = np.array(series.isna().to_numpy(dtype=bool, na_value=True))  # a copy: pandas' may be read-only
    kind = getattr(series.dtype, "kind", "O")
    if kind in "biufcmM":  # numbers, booleans, times: no text to compare
        return absent
    text_column = isinstance(column, Categorical) and not column.numeric_labels
    if text_column:  # an empty text is an empty cell (as a CSV's is), unless the column lists it as a label
        marks = (*tokens, "") if "" not in column.values else tokens
        absent |= series.isin(marks).to_numpy(dtype=bool, na_value=False)
        return absent
    marks = {*tokens, ""}
    text_missing = isinstance(column, Numeric) and column.text_missing

    def missing_text(cell) -> bool:
        if not isinstance(cell, str):
            return False
        text = cell.strip()
        return text in marks or (column.missing and text.lower() == "nan") or (text_missing and _not_a_value(text,
                                                                                                            column))

    absent |= np.asarray(series.map(missing_text, na_action="ignore").to_numpy(dtype=object, na_value=False),
                         dtype=bool)
    return absent


def _not_a_value(text: str, column: Numeric) -> bool:
    """Whether a numeric column's cell text is neither a number nor (a time column) a date or
    timestamp: what ``Numeric.text_missing`` reads as missing."""
    if column.time is not None:
        return bool(parse_times([text], column.time)[1][0])
    try:
        return not math.isfinite(float(text))
    except ValueError:
        return True


def _missing_message(cell) -> str:
    """The problem of a missing cell in a column that allows none."""
    shown = "" if cell is None or (isinstance(cell, float) and np.isnan(cell)) or cell is pd.NA or \
        cell is pd.NaT else f" ({_shown(cell)})"
    return f"missing value{shown}"


def _encode_values(series: pd.Series, column: Column, problems: _Problems) -> tuple[np.ndarray, np.ndarray]:
    """``_encode_column`` of cells that are not missing (or in a column that allows none).

    Booleans read as the labels 'False' and 'True' in a text categorical column, as 0 and 1 in
    a coded or numeric-labelled one; a numeric (binned) column refuses them."""
    none = np.zeros(len(series), dtype=bool)
    if isinstance(column, Categorical) and not column.numeric_labels:
        return _encode_labels(series, column, problems), none
    if isinstance(column, Coded) and isinstance(series.dtype, np.dtype) and series.dtype.kind in "iu":
        return _check_codes(series.to_numpy(), column, problems), none  # fast path: plain integers
    if isinstance(column, Numeric) and column.time is not None:
        values = _times(series, column, problems)
        codes, clipped = column.bin_codes(np.where(problems.mask, column.edges[0], values))
        return codes, np.asarray(clipped, dtype=bool)
    if isinstance(column, Numeric) and pd.api.types.is_bool_dtype(series.dtype):
        problems.add(np.ones(len(series), dtype=bool),
                     lambda i: f"non-numeric value {_shown(series.iloc[i])}: the column holds booleans, and a numeric "
                               "(binned) column needs numbers; make it coded (size 2) or categorical")
        return np.zeros(len(series), dtype=np.int64), none
    values = _numbers(series, problems)
    shown = _quoted(series, values)
    if isinstance(column, Numeric):
        codes, clipped = column.bin_codes(np.where(problems.mask, column.edges[0], values))
        return codes, np.asarray(clipped, dtype=bool)
    if isinstance(column, Coded):
        fractional = ~problems.mask & (values != np.floor(values))
        problems.add(fractional,
                     lambda i: f"value {shown(i)} is not an integer code (domain 0..{column.n_values - 1})")
        return _check_codes(np.where(problems.mask, 0, values), column, problems, shown).astype(np.int64), none
    labels = np.array([float(v) for v in column.values])
    order = np.argsort(labels)
    at = np.clip(np.searchsorted(labels[order], values), 0, len(labels) - 1)
    found = problems.mask | (labels[order][at] == values)
    if column.other is not None:  # a number that is no label reads as the column's 'other'
        return np.where(problems.mask, 0, np.where(found, order[at], column.other_code)), none
    problems.add(~found, lambda i: f"unknown category {shown(i)}; allowed: {_list_preview(column.values)}")
    return np.where(found & ~problems.mask, order[at], 0), none


def _quoted(series: pd.Series, values: np.ndarray) -> Callable[[int], str]:
    """How an error quotes row i of a column read as the numbers ``values``: the cell itself
    where pandas kept it (text, an integer too large for int64, a bool), so the message shows
    what the file holds, not its float (99999999999999999999999999 is no 1.0000000000000000476e26);
    a float column's own value otherwise."""
    if getattr(series.dtype, "kind", "O") == "f":
        return lambda i: _shown(values[i])
    return lambda i: _shown(series.iloc[i])


def _check_codes(values: np.ndarray, column: Coded, problems: _Problems,
                 shown: Callable[[int], str] | None = None) -> np.ndarray:
    """``values`` with rows outside ``0..size-1`` marked bad (and set to 0); ``shown(i)``
    quotes row i in the message (default: its value)."""
    outside = (values < 0) | (values >= column.n_values)
    if values.size and outside.any():
        shown = shown or (lambda i: _shown(values[i]))
        problems.add(outside, lambda i: f"value {shown(i)} is outside the domain 0..{column.n_values - 1}")
        values = np.where(outside, 0, values)
    return values


def _check_kind(series: pd.Series, column: Column, source: object) -> None:
    """Refuse timestamps and durations where the schema reads numbers: as numbers they are
    raw counts of (micro- or nano)seconds, which would pass as codes or be clipped into a bin
    without a word. (A text categorical column compares them as labels, and says so.)"""
    kind = getattr(series.dtype, "kind", "O")
    if kind not in "mM" or (isinstance(column, Categorical) and not column.numeric_labels):
        return
    if kind == "M" and isinstance(column, Numeric) and column.time is not None:
        return  # a time column reads timestamps
    what = "timestamps" if kind == "M" else "durations"
    wants = "integer codes" if isinstance(column, Coded) else "numbers"
    raise DataError(locate(f"holds {what} ({series.dtype}), but the schema's {column.kind} column reads {wants}; "
                           f"convert the {what} to numbers first (e.g. years or days), or make the column categorical"
                           + ("" if kind == "m" or not isinstance(column, Numeric) else
                              ", or give it \"time\": \"date\" or \"datetime\""),
                           file=source, column=column.name))


def _encode_labels(series: pd.Series, column: Categorical, problems: _Problems) -> np.ndarray:
    """Codes of a string-labelled column, through pandas' categorical (one lookup per label)."""
    cat = series if isinstance(series.dtype, pd.CategoricalDtype) else series.astype("category")
    categories = cat.cat.categories
    booleans = len(categories) > 0 and all(isinstance(c, (bool, np.bool_)) for c in categories)
    if booleans:  # True and False read as the labels 'True' and 'False'
        cat = cat.cat.rename_categories([str(bool(c)) for c in categories])
    raw = cat.cat.codes.to_numpy()
    missing = raw < 0
    problems.add(missing, lambda i: "missing value")
    mapping = np.full(len(cat.cat.categories), -1, dtype=np.int64)
    for k, label in enumerate(cat.cat.categories):
        try:
            mapping[k] = column.code_of(label)
        except ValueError:
            pass
    if column.other is not None:  # a value that is no label reads as the column's 'other'
        mapping[mapping < 0] = column.other_code
    codes = np.zeros(len(raw), dtype=np.int64)
    codes[~missing] = mapping[raw[~missing]]  # not mapping[raw]: no categories at all when every cell is missing
    unknown = codes < 0
    hint = " (the column holds booleans: they read as the labels 'False' and 'True')" if booleans else ""
    problems.add(unknown, lambda i: f"unknown category {_shown(cat.iloc[i])}; allowed: "
                                    f"{_list_preview(column.values)}{hint}")
    return np.where(unknown, 0, codes)


def _numbers(series: pd.Series, problems: _Problems) -> np.ndarray:
    """Float64 values of a column that must be numeric (booleans as 0 and 1); missing or
    non-numeric cells are bad (their value is NaN)."""
    if pd.api.types.is_bool_dtype(series.dtype) or pd.api.types.is_numeric_dtype(series.dtype):
        values = series.to_numpy(dtype=np.float64, na_value=np.nan)
        problems.add(np.isnan(values), lambda i: "missing value")
        problems.add(np.isinf(values), lambda i: f"non-finite value {format_value(values[i])}")
        return values
    absent = series.isna().to_numpy()
    problems.add(absent, lambda i: "missing value")
    try:
        values = pd.to_numeric(series, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    except OverflowError:  # Python integers past float range, kept as objects by pandas: +-inf
        values = np.array([_float(v) for v in series], dtype=np.float64)

    def describe(i: int) -> str:
        text = series.iloc[i]
        if isinstance(text, str) and text.strip().lower() == "nan":
            return "missing value ('nan')"
        return f"non-numeric value {_shown(text)}"

    def describe_inf(i: int) -> str:
        cell = series.iloc[i]
        return f"non-finite value {_shown(cell)}" if isinstance(cell, str) else \
            f"value {_shown(cell)} is past the range of a float"

    problems.add(np.isnan(values) & ~absent, describe)
    problems.add(np.isinf(values), describe_inf)
    return values


def _times(series: pd.Series, column: Numeric, problems: _Problems) -> np.ndarray:
    """Float64 days or seconds since 1970-01-01 of a time column's cells: ISO texts, dates or
    timestamps (``synth.data.values.parse_times``); missing or unparsable cells are bad, and
    so are numbers (a count of days or seconds is not told from a year or an amount)."""
    if pd.api.types.is_bool_dtype(series.dtype) or pd.api.types.is_numeric_dtype(series.dtype):
        problems.add(np.ones(len(series), dtype=bool),
                     lambda i: f"{time_problem(series.iloc[i], column.time)}: the column holds numbers, and its schema "
                               f"reads {column.time}s; write them in ISO form, or drop the column's 'time'")
        return np.zeros(len(series))
    values, bad = parse_times(series, column.time)
    problems.add(np.isnan(values) & ~bad, lambda i: "missing value")
    problems.add(bad, lambda i: time_problem(series.iloc[i], column.time))
    return values


def _float(value) -> float:
    """``float(value)``, an integer past float range as +-inf, and anything else as NaN."""
    try:
        return float(value)
    except OverflowError:
        return np.inf if value > 0 else -np.inf
    except (TypeError, ValueError):
        return np.nan


def _shown(value) -> str:
    """A data value as it should appear in an error: strings quoted, numbers plain, anything
    long cut (``synth.data.schema.shown_value``)."""
    return shown_value(value)


def _check_header(names: list[str], schema: Schema, selected: Schema, source: object) -> None:
    """Refuse a header with a name twice, a name not in the schema, or a selected column
    missing; the name is quoted cut short if long (a header is data too)."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise DataError(non_private(locate(f"column {_shown(name)}: appears twice in the header", file=source),
                                        MAY_QUOTE))
        seen.add(name)
    for name in names:
        if name not in schema and name not in schema.ignored:
            raise DataError(non_private(locate(f"column {_shown(name)}: is not in the schema (schema columns: "
                                               f"{', '.join(schema.names)})", file=source), MAY_QUOTE))
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
    bad_rows: str = "error",
) -> Iterator[Encoded]:
    """Yield ``Encoded`` chunks of a CSV file, a Parquet file or folder (``is_parquet``; only the
    needed columns are read, batch by batch) or a DataFrame, in row order.

    ``progress(rows_done, fraction_done)`` is called after each chunk (fraction ``None`` when
    unknown). Raises ``DataError`` for an empty source, or for any bad value unless
    ``bad_rows="drop"`` (then the bad rows, and CSV lines with too many fields, are skipped).
    """
    check_bad_rows(bad_rows)
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows ({chunk_rows}) must be >= 1")
    if isinstance(source, pd.DataFrame):
        yield from _iter_frame(source, schema, columns, chunk_rows, progress, bad_rows)
        return
    path = Path(source)
    if is_parquet(path):
        yield from _iter_parquet(path, schema, columns, chunk_rows, progress, bad_rows)
        return
    yield from _iter_csv(path, schema, columns, chunk_rows, progress, bad_rows)


def is_parquet(path: Path) -> bool:
    """A folder (read as a Parquet dataset), a ``.parquet`` file, or a regular file that starts
    with Parquet's magic bytes ``PAR1`` whatever its name (``data.pq``, none); else CSV."""
    if path.is_dir() or path.suffix.lower() == ".parquet":
        return True
    if not path.is_file():  # missing, or a FIFO: reading its first bytes would eat them
        return False
    try:
        with open(path, "rb") as handle:
            return handle.read(4) == b"PAR1"
    except OSError:
        return False


def _iter_frame(frame, schema, columns, chunk_rows, progress, bad_rows) -> Iterator[Encoded]:
    if len(frame) == 0:
        raise DataError(non_private("DataFrame: no data rows", TELLS_EMPTY))
    for start in range(0, len(frame), chunk_rows):
        part = frame.iloc[start : start + chunk_rows]
        yield encode(part, schema, columns=columns, first_row=start + 1, bad_rows=bad_rows)
        if progress is not None:
            progress(start + len(part), (start + len(part)) / len(frame))


def _parquet_dataset(path: Path):
    """The Parquet file or folder as a ``pyarrow.dataset`` (its files' schemas unified)."""
    try:
        import pyarrow.dataset as ds
    except ImportError:  # pragma: no cover - pyarrow is a dependency
        raise DataError(f"{path}: reading Parquet needs pyarrow (pip install pyarrow)") from None
    if not path.exists():
        raise DataError(f"{path}: no such file or folder")
    try:
        dataset = ds.dataset(path, format="parquet", exclude_invalid_files=False)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several kinds for a broken file
        raise DataError(non_private(f"{path}: not a readable Parquet {'dataset' if path.is_dir() else 'file'}: "
                                    f"{_first_line(exc)}", MAY_QUOTE)) from None
    if not dataset.files:
        raise DataError(f"{path}: folder holds no Parquet file")
    return dataset


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _iter_parquet(path: Path, schema, columns, chunk_rows, progress, bad_rows) -> Iterator[Encoded]:
    """Batches of the needed columns only, row group by row group (``parquet_chunks``), in
    file order; errors name the file and its row. Row groups are read on threads, a few
    ahead, when none is larger than ``PARALLEL_GROUP_ROWS`` (each is held whole once read)."""
    selected = schema.select(columns)
    groups = parquet_row_groups(path, schema, selected)
    total = sum(rows for *_, rows in groups)

    def read(file: str, group: int, first: int, threads: bool) -> Iterator[Encoded]:
        return parquet_chunks(file, selected, source=file if path.is_dir() else path, chunk_rows=chunk_rows,
                              bad_rows=bad_rows, row_groups=[group], first_row=first, threads=threads)

    readers = min(READ_THREADS, len(groups))
    if readers > 1 and max(rows for *_, rows in groups) <= PARALLEL_GROUP_ROWS:
        chunks = _read_ahead([lambda g=g: list(read(*g[:3], threads=False)) for g in groups], readers)
    else:
        chunks = (chunk for g in groups for chunk in read(*g[:3], threads=True))
    rows = 0
    for encoded in chunks:
        yield encoded
        rows += encoded.n_rows + encoded.dropped
        if progress is not None:
            progress(rows, rows / max(total, 1))
    if rows == 0:
        raise DataError(non_private(f"{path}: has columns but no data rows", TELLS_EMPTY))


#: Parquet row groups decoded side by side (the counting runs on threads of its own).
READ_THREADS = min(2, os.cpu_count() or 1)
#: ... when no row group has more rows than this (a group read ahead is held whole as codes).
PARALLEL_GROUP_ROWS = 2**22


def parquet_row_groups(path: Path, schema: Schema, selected: Schema) -> list[tuple[str, int, int, int]]:
    """The row groups of a Parquet file or folder, in file order, as (file, group, its first
    row in the file, its rows), from the files' metadata, once the columns are checked."""
    import pyarrow.parquet as pq

    dataset = _parquet_dataset(path)
    groups = []
    for fragment in dataset.get_fragments():
        try:
            file = pq.ParquetFile(fragment.path)
            metadata, names = file.metadata, file.schema_arrow.names
        except Exception as exc:  # noqa: BLE001 - pyarrow raises several kinds for a broken file
            raise DataError(non_private(f"{fragment.path}: not a readable Parquet file: {_first_line(exc)}",
                                        MAY_QUOTE)) from None
        # every file's own columns: the dataset's schema is its first file's
        _check_header(list(names), schema, selected, fragment.path if path.is_dir() else path)
        first = 1
        for group in range(metadata.num_row_groups):
            rows = metadata.row_group(group).num_rows
            groups.append((fragment.path, group, first, rows))
            first += rows
    return groups


def _read_ahead(tasks: list[Callable[[], list]], threads: int) -> Iterator:
    """The items of each task's list, task by task in order, the tasks run on ``threads``
    threads up to twice that many ahead (an error comes out where its task's items would:
    the first in order wins, whichever thread met it first)."""
    pool = ThreadPoolExecutor(threads, thread_name_prefix="synth-read")
    try:
        waiting = iter(tasks)
        running = deque(pool.submit(task) for task in itertools.islice(waiting, 2 * threads))
        while running:
            items = running.popleft().result()
            following = next(waiting, None)
            if following is not None:
                running.append(pool.submit(following))
            yield from items
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def parquet_chunks(file: str | Path, selected: Schema, *, source: object, chunk_rows: int = DEFAULT_CHUNK_ROWS,
                   bad_rows: str = "error", row_groups: Sequence[int] | None = None, first_row: int = 1,
                   threads: bool = True) -> Iterator[Encoded]:
    """``Encoded`` chunks of one Parquet file's selected columns (of ``row_groups`` only, if
    given: a Dask task's share), batch by batch (``ParquetFile.iter_batches``: a row group's
    worth of memory at most; the dataset scanner reads several ahead, some 400 MB more at 10^6
    rows a group). Plain integer columns go straight from Arrow's buffers to codes; anything
    else through ``encode``. Errors name ``source`` and the row, numbered from ``first_row``.
    ``threads``: let Arrow decode the columns side by side (not in a task that runs beside
    others)."""
    import pyarrow.parquet as pq

    done = 0
    try:
        batches = pq.ParquetFile(file).iter_batches(batch_size=chunk_rows, row_groups=row_groups,
                                                    columns=list(selected.names), use_threads=threads)
        for batch in batches:
            codes = _arrow_codes(batch, selected)
            if codes is not None:
                yield Encoded(selected, codes)
            else:  # labels, decimals, nulls or a bad value: pandas' path words the problem
                yield encode(batch.to_pandas(), selected, source=source, first_row=first_row + done,
                             bad_rows=bad_rows)
            done += batch.num_rows
    except DataError:
        raise
    except Exception as exc:  # noqa: BLE001 - a corrupt page, a type pyarrow cannot convert
        raise DataError(non_private(f"{source}: cannot read Parquet near row {first_row + done}: {_first_line(exc)}",
                                    MAY_QUOTE)) from None


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


def _iter_csv(path: Path, schema, columns, chunk_rows, progress, bad_rows) -> Iterator[Encoded]:
    header = _read_header(path)
    selected = schema.select(columns)
    _check_header(header, schema, selected, path)
    total_bytes = os.path.getsize(path)
    rows = 0
    with open(path, "rb") as handle:
        for encoded in _encode_csv(handle, path, header, selected, chunk_rows, bad_rows):
            yield encoded
            rows += encoded.n_rows + encoded.dropped
            if progress is not None:
                progress(rows, min(handle.tell() / max(total_bytes, 1), 1.0))
    if rows == 0:
        raise DataError(non_private(f"{path}: has a header but no data rows", TELLS_EMPTY))


def encode_csv_lines(lines: bytes, header: list[str], selected: Schema, *, source: object,
                     chunk_rows: int = DEFAULT_CHUNK_ROWS, bad_rows: str = "error") -> Iterator[Encoded]:
    """``Encoded`` chunks of whole CSV lines without their header (a block of a bigger file,
    as Dask splits one), read as ``iter_encoded`` reads a file; rows are numbered from the
    block's first line."""
    yield from _encode_csv(io.BytesIO(lines), source, header, selected, chunk_rows, bad_rows, header_read=True)


def _encode_csv(handle, source, header: list[str], selected: Schema, chunk_rows: int, bad_rows: str,
                header_read: bool = False) -> Iterator[Encoded]:
    # text labels, and a time column's ISO texts (each distinct one parsed once), as categories
    dtypes = {c.name: "category" for c in selected if (isinstance(c, Categorical) and not c.numeric_labels)
              or (isinstance(c, Numeric) and c.time is not None)}
    rows = 0
    names = list(selected.names)
    for frame in _csv_frames(handle, source, header, selected, dtypes, chunk_rows, bad_rows == "drop",
                             header_read):
        if isinstance(frame, np.ndarray):  # the plain reader's values, a column a row
            values = frame
            codes = _checked_codes(lambda name: values[names.index(name)], values.shape[1], selected,
                                   empty_is_missing=True)
            if codes is not None:
                rows += values.shape[1]
                yield Encoded(selected, codes)
                continue
            frame = _plain_frame(values, selected)
        encoded = encode(frame[names], selected, source=source, first_row=rows + 1, bad_rows=bad_rows)
        encoded.dropped += frame.attrs.get("skipped_lines", 0)
        rows += len(frame)
        yield encoded


def _plain_frame(values: np.ndarray, selected: Schema) -> pd.DataFrame:
    """The plain reader's values (shape (columns, rows)) as a DataFrame; in a column that may
    hold missing values, its empty fields (``EMPTY``) as nulls (a nullable integer column)."""
    columns = {}
    for k, column in enumerate(selected):
        if column.missing:
            columns[column.name] = pd.arrays.IntegerArray(values[k].copy(), values[k] == EMPTY)
        else:
            columns[column.name] = values[k]
    return pd.DataFrame(columns, copy=False)


def _plain_ok(selected: Schema) -> bool:
    """Whether the plain reader may read a CSV under ``selected``: not when a missing token is
    written in digits (it would read as a number)."""
    return not any(token.isascii() and token.isdigit() for token in selected.missing_tokens)


def _csv_frames(handle, path: Path, header: list[str], selected: Schema, dtypes: dict, chunk_rows: int,
                skip_long_lines: bool, header_read: bool = False) -> Iterator[pd.DataFrame | np.ndarray]:
    """The CSV's rows, up to ``chunk_rows`` at a time: by the Numba reader of plain integer
    fields (``_plain_values``: arrays of shape (columns, rows)) while the lines allow it, then
    as DataFrames by pandas (``csv_chunks``) from the first chunk that holds anything else.
    ``header_read``: the handle starts after the header (or holds none)."""
    rows = 0
    if PLAIN_CSV and not dtypes and _plain_ok(selected) and (header_read or _plain_header(handle)):  # numbers only
        for values in _plain_values(handle, header, selected, chunk_rows):
            if isinstance(values, int):  # a line it does not take: pandas reads on from that chunk
                handle.seek(values)
                header_read = True
                break
            rows += values.shape[1]
            yield values
        else:
            return
    elif not header_read:
        handle.seek(0)  # pandas reads the header itself
    yield from csv_chunks(handle, path, dtype=dtypes, chunk_rows=chunk_rows, skip_long_lines=skip_long_lines,
                          names=header if header_read else None, rows_before=rows,
                          missing_tokens=selected.missing_tokens)


def _plain_header(handle) -> bool:
    """Read the header line; whether the plain reader may go on after it: no quote in it, and
    it ends in ``\n`` or ``\r\n`` (in a file whose lines end in ``\r`` alone, old Mac style,
    the "line" would be the whole file; pandas reads those)."""
    line = handle.readline(PLAIN_READ_BYTES)
    return line.endswith(b"\n") and b'"' not in line and b"\r" not in line[:-1].removesuffix(b"\r")


#: Read plain integer lines with the Numba reader (False: pandas reads every line; the
#: reference the tests hold the fast reader to).
PLAIN_CSV = True
#: Bytes read at a time by the plain-integer CSV reader.
PLAIN_READ_BYTES = 16 * 2**20


def _plain_values(handle, header: list[str], selected: Schema, chunk_rows: int) -> Iterator[np.ndarray | int]:
    """The values of the CSV's plain lines (``synth._kernels.scan.parse_int_lines``: integers
    in the fields read, no quotes; the header already read), one chunk at a time, shape
    (columns, rows) in ``selected``'s order; at the first chunk holding anything else, its
    byte offset (an int) instead, and nothing more.

    The bytes and the values live in buffers made once and reused: a chunk's values must be
    used before the next is asked for. (Fresh buffers a chunk cost a third more time, and
    nearly twice the time where the allocator hands every large block back to the system, as
    in Dask's workers.)"""
    names = list(selected.names)
    field_column = np.array([names.index(name) if name in names else -1 for name in header], dtype=np.int64)
    empty_ok = np.array([column.missing for column in selected], dtype=np.bool_)
    buffer = np.empty(2 * PLAIN_READ_BYTES, dtype=np.uint8)
    length = 0  # bytes held
    offset = handle.tell()  # of buffer[0] in the file
    at = 0  # the next line's start in the buffer
    final = more = False
    values = np.empty((len(names), chunk_rows), dtype=np.int64)  # column by column, as pandas keeps them
    while True:
        if not final and (more or length - at < PLAIN_READ_BYTES):
            buffer[: length - at] = buffer[at:length]  # the unread bytes to the front
            length, offset, at = length - at, offset + at, 0
            if len(buffer) - length < PLAIN_READ_BYTES:  # a line longer than the buffer: grow it
                buffer = np.concatenate([buffer[:length], np.empty(len(buffer), dtype=np.uint8)])
            read = handle.readinto(memoryview(buffer)[length: length + PLAIN_READ_BYTES])
            final = not read
            length += read or 0
        rows, end, wide = parse_int_lines(buffer[:length], at, len(header), field_column, values, final,
                                          empty_ok if empty_ok.any() else None)
        if rows < 0 or (wide and not _utf8(buffer[at:end].tobytes())):
            yield offset + at
            return
        more = rows == 0  # a line longer than what was read: read more
        if more and final:
            return
        if more:
            continue
        at = end
        yield values[:, :rows]


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def csv_chunks(handle, path: object, *, dtype=None, chunk_rows: int = DEFAULT_CHUNK_ROWS,
               skip_long_lines: bool = False, names: list[str] | None = None, rows_before: int = 0,
               missing_tokens: Sequence[str] = ()) -> Iterator[pd.DataFrame]:
    """DataFrames of up to ``chunk_rows`` rows of an open CSV, every column, strictly parsed;
    empty cells and cells that are exactly one of ``missing_tokens`` read as NaN.

    Strict: a row with more fields than the header is an error (pandas would drop the extras
    under ``usecols``, or turn a long first row into an index) unless ``skip_long_lines``, and
    a blank line is a row of missing values rather than skipped, so data row N is always line
    N + 1 of the file. ``names``: the header, when reading resumes after it at a line start
    (``rows_before`` data rows read already, for the messages).
    """
    reader = None
    rows = rows_before
    lines_before = 0 if names is None else rows_before + 1  # file lines before pandas' line 1
    skipped = 0  # long records ahead of pandas' first line, left out here
    leading = _leading_long_records(handle, path, names, rows, skip_long_lines)
    if leading is not None:  # pandas starts after them, with the header's names
        names, skipped, lines_before = leading
        rows += skipped
        if _at_end(handle):  # nothing after them: pandas would read no columns
            frame = pd.DataFrame({name: pd.Series([], dtype=object) for name in names})
            frame.attrs["skipped_lines"] = skipped
            yield frame
            return
    while True:
        with warnings.catch_warnings(record=skip_long_lines) as caught:
            warnings.simplefilter("always" if skip_long_lines else "error", pd.errors.ParserWarning)
            try:
                if reader is None:  # pandas already tokenizes the first lines here: same errors as below
                    reader = pd.read_csv(
                        handle,
                        dtype=dtype,
                        na_values=["", *missing_tokens],
                        keep_default_na=False,
                        index_col=False,
                        skip_blank_lines=False,
                        chunksize=chunk_rows,
                        encoding="utf-8",
                        engine="c",
                        on_bad_lines="warn" if skip_long_lines else "error",
                        **({} if names is None else {"header": None, "names": names}),
                    )
                frame = next(reader)
            except StopIteration:
                return
            except pd.errors.ParserWarning:
                raise DataError(f"{path}: malformed CSV: data row {rows + 1} has more fields than the header") from None
            except pd.errors.ParserError as exc:
                raise DataError(f"{path}: malformed CSV: {_parser_message(exc, lines_before)}") from None
            except UnicodeDecodeError:
                raise DataError(f"{path}: not UTF-8 text (near data row {rows + 1})") from None
        if skip_long_lines:
            messages = [str(w.message) for w in caught if issubclass(w.category, pd.errors.ParserWarning)]
            skipped += sum(m.count("Skipping line") for m in messages)
            if any("Skipping line" not in m for m in messages):
                raise DataError(f"{path}: malformed CSV: data row {rows + 1} has more fields than the header")
            frame.attrs["skipped_lines"] = skipped  # lines with too many fields, left out
            skipped = 0
        rows += len(frame)
        yield frame


def _leading_long_records(handle, path: object, names: list[str] | None, rows: int,
                          skip: bool) -> tuple[list[str], int, int] | None:
    """Where the records ahead of pandas' first data line (from the handle's position, after
    the header when ``names`` is None) have more fields than the header: refuse the first
    (``DataError`` naming its row), or, with ``skip``, read past every such one and return the
    header's names, how many were skipped and the file lines before the next record; None
    where the first is no longer than the header (the handle is left where it was).

    pandas takes a first line too long as a row cut short (with a warning, or without one
    when the extra fields are empty), where it skips or refuses any later one: here the first
    line gets the same treatment as the others. ``rows``: data rows before the handle's."""
    start = handle.tell()
    header = names
    line = rows + 2 if names is not None else 1  # the file line of the next record
    if names is None:
        record = _next_record(handle, first=True)
        if record is None:
            handle.seek(start)
            return None
        header, lines = record
        line += lines
    skipped = 0
    while True:
        at = handle.tell()
        record = _next_record(handle)
        if record is None or len(record[0]) <= len(header):
            handle.seek(at)
            break
        if not skip:
            raise DataError(f"{path}: malformed CSV: data row {rows + skipped + 1} (line {line}) has "
                            f"{len(record[0])} fields, the header has {len(header)} (--bad-rows drop skips such lines)")
        skipped += 1
        line += record[1]
    if not skipped:
        handle.seek(start)
        return None
    return list(header), skipped, line - 1


def _next_record(handle, first: bool = False) -> tuple[list[str], int] | None:
    """The fields of the CSV record at the handle's position (a binary file) and its lines,
    the handle left after it; None at the end, or where ``csv`` cannot read it (a line past
    ``PLAIN_READ_BYTES``, old Mac line ends): pandas then reads it as it would. ``first``:
    the file's first record (a UTF-8 byte-order mark is no part of it)."""
    lines = 0
    cut = False

    def feed() -> Iterator[str]:
        nonlocal lines, cut
        while True:
            line = handle.readline(PLAIN_READ_BYTES)
            if not line:
                return
            if not line.endswith(b"\n") and len(line) == PLAIN_READ_BYTES:
                cut = True
                return
            lines += 1
            yield line.decode("utf-8-sig" if first and lines == 1 else "utf-8", errors="replace")

    try:
        fields = next(csv.reader(feed()), None)
    except csv.Error:
        return None
    return None if fields is None or cut else (fields, lines)


def _at_end(handle) -> bool:
    """Whether nothing is left to read (the handle stays where it was)."""
    at = handle.tell()
    empty = handle.read(1) == b""
    handle.seek(at)
    return empty


def _parser_message(exc: Exception, lines_before: int = 0) -> str:
    """pandas' tokenizer message in data rows ('Expected 3 fields in line 4, saw 4'), with the
    fix; pandas' line 1 is line ``lines_before + 1`` of the file."""
    text = str(exc).strip()
    found = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", text)
    if found:
        expected, line, saw = (int(g) for g in found.groups())
        line += lines_before
        return (f"data row {line - 1} (line {line}) has {saw} fields, the header has {expected} "
                "(--bad-rows drop skips such lines)")
    found = re.search(r"EOF inside string starting at row (\d+)", text)
    if found:
        return (f"data row {int(found.group(1)) + lines_before}: a quoted field opens with '\"' but is never closed; close it, or "
                "write a '\"' inside a quoted field as '\"\"'")
    return text.removeprefix("Error tokenizing data. C error: ")


def read(
    source: Source,
    schema: Schema,
    *,
    columns: str | Sequence[str] | None = None,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    progress: Progress | None = None,
    bad_rows: str = "error",
) -> Encoded:
    """Every row's codes, read in chunks (memory: one byte or two per cell).

    With ``bad_rows="drop"`` rows outside the schema are skipped; ``Encoded.dropped`` counts
    them (private: never report it from a private run). ``DataError`` if no row is left.
    """
    chunks = list(iter_encoded(source, schema, columns=columns, chunk_rows=chunk_rows, progress=progress,
                               bad_rows=bad_rows))
    clipped: dict[str, int] = {}
    for chunk in chunks:
        for name, count in chunk.clipped.items():
            clipped[name] = clipped.get(name, 0) + count
    # the readers' chunks are column-major (what counting wants); rows are what the engines walk
    codes = np.empty((sum(c.n_rows for c in chunks), len(chunks[0].schema)), dtype=chunks[0].codes.dtype)
    np.concatenate([c.codes for c in chunks], out=codes)
    if codes.shape[0] == 0:
        raise DataError(all_dropped(_source_name(source)))
    return Encoded(chunks[0].schema, codes, clipped, sum(c.dropped for c in chunks))


def all_dropped(name: str) -> str:
    """The message for a source whose every row was dropped (``bad_rows="drop"``), labelled."""
    return non_private(f"{name}: no row fits the schema (every row was dropped by --bad-rows drop)", TELLS_ALL_DROPPED)


def _source_name(source: Source) -> str:
    return "DataFrame" if isinstance(source, pd.DataFrame) else str(source)


def scan(
    source: Source,
    schema: Schema,
    subsets: Iterable[Sequence[str]],
    *,
    columns: str | Sequence[str] | None = None,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    max_cells: int = DEFAULT_MAX_CELLS,
    progress: Progress | None = None,
    bad_rows: str = "error",
) -> Counts:
    """One streaming pass: the row count and the marginal table of each column subset
    (``Counts.tables``; ``Counts.marginal`` gives any table below them), in memory that does
    not grow with n (``synth.data.counts.plan_scan``).

    ``bad_rows`` as in ``read``; ``Counts.dropped`` counts dropped rows.
    """
    plan = plan_scan(schema.select(columns), subsets, max_cells=max_cells)
    counts = count_encoded(iter_encoded(source, schema, columns=columns, chunk_rows=chunk_rows, progress=progress,
                                        bad_rows=bad_rows), plan)
    if counts.n_rows == 0:
        raise DataError(all_dropped(_source_name(source)))
    return counts


# -- decoding -------------------------------------------------------------------------------


def decode(codes: np.ndarray, schema: Schema) -> pd.DataFrame:
    """Rows of codes back to values: labels, integer codes, or numeric bin midpoints. The
    missing code is a null: None among labels, NaN among midpoints, and a coded column that
    may hold it is a nullable integer column (``Int64``), so its codes stay integers."""
    codes = np.asarray(codes)
    if codes.ndim != 2 or codes.shape[1] != len(schema):
        raise ValueError(f"codes must have shape (n, {len(schema)}), got {codes.shape}")
    for j, column in enumerate(schema):
        if codes.shape[0] and (codes[:, j].min() < 0 or codes[:, j].max() >= column.size):
            raise ValueError(f"column {column.name!r}: codes must lie in 0..{column.size - 1}")
    return pd.DataFrame({c.name: _decoded(c, codes[:, j]) for j, c in enumerate(schema)})


def _decoded(column: Column, codes: np.ndarray):
    """``column.decode(codes)``; a coded column's with its missing code as ``pd.NA`` (``Int64``)."""
    if isinstance(column, Coded) and column.missing:
        codes = np.asarray(codes, dtype=np.int64)
        return pd.arrays.IntegerArray(codes, codes == column.missing_code)
    return column.decode(codes)
