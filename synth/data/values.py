"""Values as the data writes them: ISO dates and times as numbers, and decimal places.

A numeric column with a ``time`` unit holds dates (``"date"``: days since 1970-01-01) or
timestamps (``"datetime"``: seconds since 1970-01-01T00:00:00) written in ISO form:
``2024-03-01``, ``2024-03-01T12:30:00`` or ``2024-03-01 12:30:00``. ``parse_times`` reads them
as numbers (so bins, counts and draws are those of any numeric column), ``format_times`` writes
numbers back in ISO form. ``decimal_places`` tells how many decimal places numbers are written
with (the precision a synthetic value is rounded to); ``grid_bounds`` gives, per bin, the first
and last value a bin holds on such a grid (whole days, whole seconds, or ``digits`` places).

Nothing here is private or random: these are the pure helpers the readers, the schema
inference (``synth.data.infer``), its private derivation (``synth.data.derive``) and the
synthetic writer (``synth.models.synthetic``) share.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["TIME_UNITS", "TIME_FORMS", "MAX_DIGITS", "check_time_unit", "parse_times", "checked_times",
           "format_times", "decimal_places", "grid_bounds"]

#: The units a numeric column's ``time`` may name.
TIME_UNITS = ("date", "datetime")
#: How each unit's cells are written (for messages).
TIME_FORMS = {"date": "YYYY-MM-DD", "datetime": "YYYY-MM-DDTHH:MM:SS"}
#: The most decimal places a column may keep (a float64 holds 15 significant decimal digits).
MAX_DIGITS = 15

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
#: A datetime: a date, then optionally the time (``T`` or a space between), seconds and their fraction optional.
_DATETIME = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?)?")
_NUMBER = re.compile(r"[+-]?(?:\d+\.?(\d*)|\.(\d+))(?:[eE]([+-]?\d+))?")
_US_PER_DAY = 86_400 * 10**6


def check_time_unit(unit: Any) -> str:
    """``unit`` if it is one of ``TIME_UNITS``; ``ValueError`` naming the choices otherwise."""
    if not (isinstance(unit, str) and unit in TIME_UNITS):
        raise ValueError(f"time ({unit!r}) must be one of: {', '.join(map(repr, TIME_UNITS))}")
    return unit


def parse_times(cells: Sequence | np.ndarray | pd.Series, unit: str) -> tuple[np.ndarray, np.ndarray]:
    """Cells in ISO form as numbers: days since 1970-01-01 (``unit="date"``) or seconds since
    1970-01-01T00:00:00 (``"datetime"``), as float64.

    Returns ``(values, bad)``: ``values`` is NaN where a cell is missing (None, NaN, NaT, an
    empty or blank text) or unparsable, and ``bad`` marks the cells that are present but not a
    valid date or time (``2024-02-30``, ``03/01/2024``, a number). A date column takes
    ``YYYY-MM-DD`` only (a time of day is refused, not cut); a datetime column takes
    ``YYYY-MM-DD``, ``YYYY-MM-DDTHH:MM``, ``YYYY-MM-DDTHH:MM:SS(.ffffff)``, with ``T`` or a
    space, no time zone. Spaces around a text are ignored. Datetime arrays (NumPy or pandas,
    time-zone aware ones as UTC) and ``datetime.date``/``datetime`` objects are taken as they are.

    >>> values, bad = parse_times(["1970-01-02", "1969-12-31", "", "2023-02-29"], "date")
    >>> values.tolist()[:2], bad.tolist()
    ([1.0, -1.0], [False, False, False, True])
    """
    check_time_unit(unit)
    series = cells if isinstance(cells, pd.Series) else pd.Series(list(cells) if not isinstance(cells, np.ndarray)
                                                                  else cells)
    if pd.api.types.is_datetime64_any_dtype(series.dtype):
        return _from_datetimes(series, unit)
    if isinstance(series.dtype, pd.CategoricalDtype):  # parse each category once
        categories = pd.Series(series.cat.categories, dtype=object)
        values, bad = parse_times(categories, unit)
        codes = series.cat.codes.to_numpy()
        present = codes >= 0
        out = np.full(len(series), np.nan)
        out[present] = values[codes[present]]
        return out, np.where(present, bad[np.maximum(codes, 0)] if len(bad) else False, False)
    objects = series.to_numpy(dtype=object, na_value=None)
    values = np.full(len(objects), np.nan)
    bad = np.zeros(len(objects), dtype=bool)
    is_text = np.fromiter((isinstance(v, str) for v in objects), dtype=bool, count=len(objects))
    if is_text.any():
        rows = np.flatnonzero(is_text)
        texts = np.array([v.strip() for v in objects[rows]], dtype=object)
        blank = texts == ""
        values[rows], bad[rows] = _from_texts(texts, unit)
        bad[rows[blank]] = False
    rows = np.flatnonzero(~is_text)
    naive = rows.size and all(isinstance(v, _dt.date) and getattr(v, "tzinfo", None) is None for v in objects[rows])
    if naive:  # Parquet's dates (date32 read as datetime.date), or datetimes: converted at once
        values[rows], bad[rows] = _from_datetimes(pd.Series(np.array(list(objects[rows]), dtype="datetime64[us]")),
                                                  unit)
        return values, bad
    for i in rows:  # anything else, one by one: nulls, time-zone aware stamps, numbers (bad)
        value, wrong = _from_object(objects[i], unit)
        values[i], bad[i] = value, wrong
    return values, bad


def checked_times(cells: Sequence | np.ndarray | pd.Series, unit: str, *, column: str, first_row: int = 1
                  ) -> np.ndarray:
    """``parse_times``, with ``ValueError`` at the first unparsable cell naming the column, its
    row (numbered from ``first_row``) and the value: ``column 'day', row 3: value '2024-13-01'
    is not a date (YYYY-MM-DD)``. Missing cells are NaN."""
    values, bad = parse_times(cells, unit)
    if bad.any():
        i = int(np.argmax(bad))
        cell = cells.iloc[i] if isinstance(cells, pd.Series) else list(cells)[i]
        raise ValueError(f"column {column!r}, row {first_row + i}: {time_problem(cell, unit)}")
    return values


def time_problem(cell: Any, unit: str) -> str:
    """Why ``cell`` is no value of a ``unit`` column, quoting it (cut if long)."""
    what = "a date" if unit == "date" else "a date and time"
    timed = isinstance(cell, str) and _DATETIME.fullmatch(cell.strip()) and not _DATE.fullmatch(cell.strip())
    hint = " (it has a time of day: make the column's time \"datetime\")" if unit == "date" and timed else ""
    return f"value {_shown(cell)} is not {what} ({TIME_FORMS[unit]}){hint}"


#: Longest text a message quotes whole (as ``synth.data.schema.SHOWN_CHARS``; the schema imports this module).
_SHOWN_CHARS = 60


def _shown(cell: Any) -> str:
    """A cell as a message quotes it: texts quoted, anything long cut and its length said."""
    text = cell if isinstance(cell, str) else str(cell)
    if len(text) > _SHOWN_CHARS:
        return f"{text[:_SHOWN_CHARS]!r}... ({len(text)} characters)"
    return repr(text) if isinstance(cell, str) else text


def _from_texts(texts: np.ndarray, unit: str) -> tuple[np.ndarray, np.ndarray]:
    pattern = _DATE if unit == "date" else _DATETIME
    ok = np.fromiter((pattern.fullmatch(t) is not None for t in texts), dtype=bool, count=len(texts))
    values = np.full(len(texts), np.nan)
    rows = np.flatnonzero(ok)
    if rows.size:
        kind = "datetime64[D]" if unit == "date" else "datetime64[us]"
        try:
            stamps = np.array(texts[rows].astype(str), dtype=kind)
        except ValueError:  # a day or hour out of range somewhere: find which, one by one
            stamps = np.array([_one_stamp(t, kind) for t in texts[rows]], dtype=kind)
        invalid = np.isnat(stamps)
        ok[rows[invalid]] = False
        numbers = stamps.astype(np.int64).astype(np.float64)
        values[rows] = np.where(invalid, np.nan, numbers if unit == "date" else numbers / 1e6)
    return values, ~ok


def _one_stamp(text: str, kind: str) -> np.datetime64:
    try:
        return np.datetime64(text, kind[11:-1])
    except ValueError:
        return np.datetime64("NaT")


def _from_datetimes(series: pd.Series, unit: str) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(series.dtype, pd.DatetimeTZDtype):
        series = series.dt.tz_convert(None)  # as UTC
    stamps = series.to_numpy(dtype="datetime64[us]", na_value=np.datetime64("NaT"))
    absent = np.isnat(stamps)
    micros = stamps.astype(np.int64)
    if unit == "datetime":
        return np.where(absent, np.nan, micros / 1e6), np.zeros(len(stamps), dtype=bool)
    bad = ~absent & (micros % _US_PER_DAY != 0)  # a time of day in a date column
    return np.where(absent | bad, np.nan, micros // _US_PER_DAY), bad


def _from_object(value: Any, unit: str) -> tuple[float, bool]:
    """One cell that is not a text: (its number, whether it is bad)."""
    if value is None or value is pd.NaT or (isinstance(value, float) and math.isnan(value)):
        return math.nan, False
    if isinstance(value, (_dt.date, np.datetime64)):  # datetime and pd.Timestamp are dates too
        stamp = pd.Timestamp(value)
        if stamp is pd.NaT:
            return math.nan, False
        if stamp.tzinfo is not None:
            stamp = stamp.tz_convert(None)
        values, bad = _from_datetimes(pd.Series([stamp]), unit)
        return float(values[0]), bool(bad[0])
    return math.nan, True


def format_times(numbers: np.ndarray | Sequence[float], unit: str) -> np.ndarray:
    """Numbers (days or seconds since 1970-01-01, as ``parse_times`` reads them) in ISO form:
    ``YYYY-MM-DD`` for dates, ``YYYY-MM-DDTHH:MM:SS`` for datetimes (cut down to the whole
    day or second); an object array, None where a number is NaN.

    >>> format_times([0, 59.5, float("nan")], "date").tolist()
    ['1970-01-01', '1970-03-01', None]
    """
    check_time_unit(unit)
    numbers = np.asarray(numbers, dtype=np.float64)
    absent = np.isnan(numbers)
    whole = np.floor(np.where(absent, 0.0, numbers)).astype(np.int64)
    texts = whole.astype("datetime64[D]" if unit == "date" else "datetime64[s]").astype(str).astype(object)
    texts[absent] = None
    return texts


def decimal_places(texts: Sequence | np.ndarray | pd.Series) -> int:
    """The most decimal places among the cells written as numbers (``"2.50"``: 2, ``"1e-3"``:
    3, ``"12"``: 0); other cells (missing, text) are skipped. 0 when none has any.

    >>> decimal_places(["1.5", "2.25", "3", "", "x", "1.5e-2"])
    3
    """
    most = 0
    for text in pd.unique(pd.Series(texts, dtype=object).dropna()):
        found = _NUMBER.fullmatch(text.strip()) if isinstance(text, str) else None
        if found is None:
            continue
        fraction = found.group(1) or found.group(2) or ""
        most = max(most, len(fraction) - int(found.group(3) or 0))
    return most


def grid_bounds(edges: np.ndarray, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Per bin ``[e_i, e_{i+1})`` (the last closed), the first and last multiple ``k / scale``
    it holds, as the integers k (float64): a value with ``log10(scale)`` decimal places
    (``scale = 10**digits``), or a whole day or second (``scale = 1``). A bin that holds none
    has first > last.

    >>> [k.tolist() for k in grid_bounds(np.array([0.0, 0.25, 1.0]), 10.0)]
    [[0.0, 3.0], [2.0, 10.0]]
    """
    edges = np.asarray(edges, dtype=np.float64)
    lo, hi = edges[:-1], edges[1:]
    # lo * scale and hi * scale are rounded: each guess is moved by one where it is off
    first = np.ceil(lo * scale)
    first = np.where(first / scale < lo, first + 1, np.where((first - 1) / scale >= lo, first - 1, first))
    last = np.ceil(hi * scale) - 1  # below hi: the bin is open ...
    last = np.where(last / scale >= hi, last - 1, np.where((last + 1) / scale < hi, last + 1, last))
    top = np.floor(hi[-1] * scale)  # ... but the last is closed
    last[-1] = top - 1 if top / scale > hi[-1] else top + 1 if (top + 1) / scale <= hi[-1] else top
    return first, last
