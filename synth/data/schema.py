"""The public schema: columns in order, each with a finite set of codes.

A schema is public knowledge (it must not be learnt from the private data without saying
so). Three column kinds:

* ``Categorical``: an explicit list of labels; code i is ``values[i]``.
* ``Numeric``: explicit bin edges ``e_0 < ... < e_k``; code i is the bin ``[e_i, e_{i+1})``,
  the last bin closed. Values outside ``[e_0, e_k]`` are clipped into the edge bins.
* ``Coded``: data already integer-coded ``0..size-1`` (private-pgm domain files).

Any column may also hold **missing values** (``missing=True``): its domain then has one more
code, the last (``column.missing_code``), so ``column.size`` is ``column.n_values + 1``. An
empty cell, a null, NaN, or one of the schema's ``missing_tokens`` (such as ``"?"``) reads
as that code; it is written back as an empty cell (or the first token).

The universe U is the product of the column sizes; a row's cell index is the mixed-radix
(row-major, last column fastest) number of its codes.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Union

import numpy as np

from synth._io import atomic_write, read_json
from synth.data.values import MAX_DIGITS, TIME_FORMS, TIME_UNITS, format_times, grid_bounds, parse_times
from synth.data.constraints import check_constraints
from synth.errors import SchemaError

__all__ = ["Categorical", "Numeric", "Coded", "Column", "Schema", "ROLES", "check_missing_tokens", "format_value",
           "shown_value"]

_INT64_MAX = 2**63 - 1
#: The most codes a column may have: its one-way table is the largest synth counts
#: (``synth.data.tables.DEFAULT_MAX_CELLS``; past it, sizes overflowed the workload's int64 cell
#: offsets or exhausted memory instead of being refused).
MAX_COLUMN_SIZE = 10**8


def format_value(value: Any) -> str:
    """Short human-readable text for a label or number (quoted when it would be ambiguous).

    A float is written in its shortest exact form, as an integer where it has one below
    1e16 (``3``, not ``3.0``; ``1e+300``, not 301 digits that were never in any file)."""
    if isinstance(value, float):  # np.float64 too (repr of a plain float: no 'np.float64(...)')
        value = float(value)
        return str(int(value)) if value.is_integer() and abs(value) < 1e16 else repr(value)
    if isinstance(value, str):
        if value == "" or value != value.strip() or any(c in value for c in ",{}[]=\"'"):
            return json.dumps(value)
        return value
    return str(value)


#: Longest text an error quotes whole; longer values are cut, their length said.
SHOWN_CHARS = 60


def shown_value(value: Any) -> str:
    """A value as an error quotes it: strings quoted, numbers plain (``format_value``), and
    anything longer than ``SHOWN_CHARS`` cut with an ellipsis and its length, so one huge
    cell cannot make a huge message."""
    if isinstance(value, str):
        return repr(value) if len(value) <= SHOWN_CHARS else f"{value[:SHOWN_CHARS]!r}... ({len(value)} characters)"
    try:
        text = format_value(value)
    except ValueError:  # an integer past Python's 4300-digit limit on str()
        return f"(an integer of {int(value).bit_length()} bits)"
    return text if len(text) <= SHOWN_CHARS else f"{text[:SHOWN_CHARS]}... ({len(text)} characters)"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)


def _float_sized(value: Any) -> bool:
    """A number that converts to a float (a JSON integer can be far beyond 1e308)."""
    try:
        float(value)
    except OverflowError:
        return False
    return True


def _is_integer(value: Any) -> bool:
    """An integer, or a float with an integer value (not a bool, not nan or inf)."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return True
    return isinstance(value, (float, np.floating)) and math.isfinite(value) and float(value).is_integer()


def _runs(codes: np.ndarray) -> list[tuple[int, int]]:
    """Split sorted distinct codes into maximal runs of consecutive codes, as (first, last)."""
    runs: list[tuple[int, int]] = []
    for code in codes.tolist():
        if runs and code == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], code)
        else:
            runs.append((code, code))
    return runs


#: How ``describe`` shows the missing code.
MISSING_TEXT = "missing"


def _check_missing(name: str, missing: Any) -> None:
    if not isinstance(missing, (bool, np.bool_)):
        raise SchemaError(f"column {name!r}: missing ({missing!r}) must be true or false")


def _check_total(column: Any) -> None:
    """Refuse a column whose codes, the missing one included, pass ``MAX_COLUMN_SIZE``."""
    if column.size > MAX_COLUMN_SIZE:
        raise SchemaError(f"column {column.name!r}: {column.size:,} codes (the missing one included) are too many: "
                          f"a column may have at most {MAX_COLUMN_SIZE:,}")


class _MissingCode:
    """What every column kind shares about its codes: ``n_values`` codes that stand for values
    (``0..n_values-1``) and, when ``missing``, one more, the last, for a missing value."""

    @property
    def size(self) -> int:
        """The domain size: every code, the missing one included."""
        return self.n_values + int(self.missing)

    @property
    def missing_code(self) -> int | None:
        """The code of a missing value (the last), or None when the column has none."""
        return self.n_values if self.missing else None

    def _split(self, codes: np.ndarray) -> tuple[np.ndarray, bool]:
        """``codes`` without the missing code, and whether it was among them."""
        codes = np.asarray(codes)
        if not self.missing:
            return codes, False
        present = codes != self.n_values
        return codes[present], not bool(present.all())

    def _missing_code_of(self) -> int:
        if not self.missing:
            raise ValueError('value null: the column holds no missing value (give it "missing": true in the '
                             "schema to allow one)")
        return self.n_values

    def _refuse_missing_bounds(self, lo: Any, hi: Any) -> None:
        if lo is None or hi is None:
            raise ValueError(f"range [{lo!r}, {hi!r}]: a missing value (null) lies in no range; "
                             "select it with null itself")

    def _with_missing(self, text: str | None, has_missing: bool) -> str:
        """``describe``: ``text`` (of the value codes; None when there are none), and the
        missing code when it is among the codes."""
        if not has_missing:
            return text or ""
        return f"{self.name} = {MISSING_TEXT}" if text is None else f"{text} or {MISSING_TEXT}"


@dataclass(frozen=True)
class Categorical(_MissingCode):
    """A column with an explicit, ordered list of labels (code i is ``values[i]``).

    ``other``, when given, is one of the labels: a data value that is no label reads as it
    (the rest of a derived column's values), instead of being a bad value."""

    name: str
    values: tuple
    missing: bool = field(default=False, kw_only=True)
    other: Any = field(default=None, kw_only=True)
    kind: ClassVar[str] = "categorical"

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", tuple(self.values))
        _check_name(self.name)
        _check_missing(self.name, self.missing)
        object.__setattr__(self, "missing", bool(self.missing))
        if not self.values:
            raise SchemaError(f"column {self.name!r}: a categorical column needs at least one value")
        for value in self.values:
            if not (isinstance(value, str) or (_is_number(value) and _float_sized(value))):
                raise SchemaError(
                    f"column {self.name!r}: value {value!r} must be a string or a number (within float range)"
                )
        seen: set = set()
        for value in self.values:
            key = _label_key(value)
            if key in seen:
                raise SchemaError(f"column {self.name!r}: value {value!r} is listed twice")
            seen.add(key)
        if self.other is not None and (not (isinstance(self.other, str) or _is_number(self.other))
                                       or _label_key(self.other) not in seen):
            raise SchemaError(f"column {self.name!r}: other ({self.other!r}) must be one of its values")
        _check_total(self)

    @property
    def other_code(self) -> int | None:
        """The code data values that are no label read as (``other``), or None."""
        return None if self.other is None else self.code_of(self.other)

    @property
    def n_values(self) -> int:
        """Codes that stand for a label (every code but the missing one)."""
        return len(self.values)

    @property
    def numeric_labels(self) -> bool:
        """True when every label is a number, so data values are matched numerically."""
        return all(_is_number(v) for v in self.values)

    def code_of(self, value: Any) -> int:
        """The code of one label (None: the missing code); ``ValueError`` naming the allowed
        labels if unknown."""
        if value is None:  # JSON null
            return self._missing_code_of()
        lookup = self._lookup
        key = _label_key(value) if (isinstance(value, str) or _is_number(value)) else None
        if key in lookup:
            return lookup[key]
        if key is not None and str(value) in self._str_lookup:
            return self._str_lookup[str(value)]
        raise ValueError(f"unknown value {value!r}; allowed: {_list_preview(self.values)}")

    def codes_in_range(self, lo: Any, hi: Any) -> np.ndarray:
        """Codes of the labels from ``lo`` to ``hi`` inclusive, in the schema's label order."""
        self._refuse_missing_bounds(lo, hi)
        a, b = self.code_of(lo), self.code_of(hi)
        if a > b:
            raise ValueError(
                f"range [{lo!r}, {hi!r}] has lo after hi in the column's value order"
            )
        return np.arange(a, b + 1)

    def describe(self, codes: np.ndarray) -> str:
        labels = [self._shown_label(c) for c in np.asarray(codes).tolist()]
        if len(labels) == 1:
            return f"{self.name} = {labels[0]}"
        return f"{self.name} in {{{', '.join(labels)}}}"

    def _shown_label(self, code: int) -> str:
        if code == self.missing_code:
            return MISSING_TEXT
        text = format_value(self.values[code])
        return json.dumps(text) if self.missing and text == MISSING_TEXT else text  # the label, not the code

    def to_query_value(self, codes: np.ndarray) -> Any:
        labels = [None if c == self.missing_code else self.values[c] for c in np.asarray(codes).tolist()]
        return labels[0] if len(labels) == 1 else labels

    def decode(self, codes: np.ndarray) -> np.ndarray:
        """The labels of ``codes`` (an object array; None for the missing code)."""
        labels = self.values + (None,) if self.missing else self.values
        out = np.empty(len(labels), dtype=object)
        out[:] = labels
        return out[codes]

    def to_dict(self) -> dict:
        out = {"name": self.name, "type": self.kind, "values": list(self.values)}
        if self.missing:
            out["missing"] = True
        if self.other is not None:
            out["other"] = self.other
        return out

    @property
    def _lookup(self) -> dict:
        cache = self.__dict__.get("_lookup_cache")
        if cache is None:
            cache = {_label_key(v): i for i, v in enumerate(self.values)}
            object.__setattr__(self, "_lookup_cache", cache)
        return cache

    @property
    def _str_lookup(self) -> dict:
        cache = self.__dict__.get("_str_lookup_cache")
        if cache is None:
            strings = [str(v) for v in self.values]
            cache = {s: i for i, s in enumerate(strings)} if len(set(strings)) == len(strings) else {}
            object.__setattr__(self, "_str_lookup_cache", cache)
        return cache


@dataclass(frozen=True)
class Numeric(_MissingCode):
    """A numeric column cut into bins by explicit edges (code i is ``[e_i, e_{i+1})``).

    The last bin is closed, ``[e_{k-1}, e_k]``. Data values below ``e_0`` or above ``e_k`` are
    clipped into the first or last bin and counted as clipped. Decoding gives each bin's
    midpoint. With ``missing``, code ``k`` (after the last bin) is a missing value.

    ``digits`` (public): the decimal places the column's values are written with; a synthetic
    value then has that many places (0: an integer), drawn among those inside its bin. ``time``
    (``"date"`` or ``"datetime"``): the cells are ISO dates or timestamps, read as days or
    seconds since 1970-01-01 (``synth.data.values``); the edges are in those units (ISO texts
    are taken too), and synthetic values are whole days or seconds written back in ISO form.
    Either way every bin must hold at least one such value.

    ``text_missing`` (with ``missing``): a cell that is not a number (not a date or timestamp,
    for a time column), such as ``N/A`` or ``unknown``, reads as a missing value instead of a
    bad row. A schema derived under DP sets it where its noisy count saw such cells.
    """

    name: str
    edges: tuple
    missing: bool = field(default=False, kw_only=True)
    digits: int | None = field(default=None, kw_only=True)
    time: str | None = field(default=None, kw_only=True)
    text_missing: bool = field(default=False, kw_only=True)
    kind: ClassVar[str] = "numeric"

    def __post_init__(self) -> None:
        _check_name(self.name)
        _check_missing(self.name, self.missing)
        object.__setattr__(self, "missing", bool(self.missing))
        if self.time is not None and not (isinstance(self.time, str) and self.time in TIME_UNITS):
            raise SchemaError(f"column {self.name!r}: time ({self.time!r}) must be one of: "
                              f"{', '.join(map(repr, TIME_UNITS))} (or absent)")
        if self.digits is not None and (not isinstance(self.digits, (int, np.integer)) or isinstance(self.digits, bool)
                                        or not 0 <= self.digits <= MAX_DIGITS):
            raise SchemaError(f"column {self.name!r}: digits ({self.digits!r}) must be an integer from 0 to "
                              f"{MAX_DIGITS} (decimal places), or absent")
        if self.digits is not None and self.time is not None:
            raise SchemaError(f"column {self.name!r}: a time column holds whole days or seconds; drop 'digits'")
        if not isinstance(self.text_missing, bool) or (self.text_missing and not self.missing):
            raise SchemaError(f"column {self.name!r}: text_missing ({self.text_missing!r}) must be true or false, and "
                              "true only with missing: true (text cells read as the missing value)")
        object.__setattr__(self, "digits", None if self.digits is None else int(self.digits))
        object.__setattr__(self, "edges", tuple(self._edge_number(e) for e in self.edges)
                           if self.time is not None else tuple(self.edges))
        if len(self.edges) < 2:
            raise SchemaError(f"column {self.name!r}: a numeric column needs at least two bin edges")
        for edge in self.edges:
            if not _is_number(edge) or not _float_sized(edge) or not math.isfinite(edge):
                hint = " (give the column \"time\": \"date\" or \"datetime\" to write dates)" \
                    if isinstance(edge, str) and self.time is None else ""
                raise SchemaError(f"column {self.name!r}: bin edge {edge!r} must be a finite number{hint}")
        for a, b in zip(self.edges, self.edges[1:]):
            if not a < b:
                raise SchemaError(
                    f"column {self.name!r}: bin edges must increase strictly, but {self._edge_text(a)} is followed "
                    f"by {self._edge_text(b)}"
                )
        _check_total(self)
        if self.grid is not None:
            first, last = self.grid_codes
            empty = np.flatnonzero(first > last)
            if empty.size:
                what = f"no value with {self.digits} decimal places" if self.time is None else \
                    f"no whole {'day' if self.time == 'date' else 'second'}"
                raise SchemaError(f"column {self.name!r}: bin {self.interval(int(empty[0]), int(empty[0]))} holds "
                                  f"{what}; move or merge its edges")

    def _edge_number(self, edge: Any) -> Any:
        """An edge of a time column as a number: an ISO text (or a date) parsed, whole values as
        ints (so they are written back as ISO texts)."""
        if _is_number(edge) or isinstance(edge, bool):
            return edge
        values, bad = parse_times([edge], self.time)
        if bad[0] or math.isnan(values[0]):
            raise SchemaError(f"column {self.name!r}: bin edge {edge!r} must be a number or "
                              f"{'a date' if self.time == 'date' else 'a date and time'} ({TIME_FORMS[self.time]})")
        return int(values[0]) if float(values[0]).is_integer() else float(values[0])

    def _edge_text(self, edge: Any) -> str:
        """An edge as messages and descriptions show it: ISO for a time column."""
        if self.time is not None and _is_number(edge) and math.isfinite(edge):
            return str(format_times([edge], self.time)[0]) if float(edge).is_integer() else format_value(edge)
        return format_value(edge)

    @property
    def grid(self) -> float | None:
        """The grid synthetic values lie on, as values per unit: ``10**digits``, 1 for a time
        column (whole days or seconds), or None (any value)."""
        if self.time is not None:
            return 1.0
        return None if self.digits is None else float(10**self.digits)

    @property
    def grid_codes(self) -> tuple[np.ndarray, np.ndarray]:
        """Per bin, the first and last multiple k of ``1 / grid`` inside it, as the integers k
        (``synth.data.values.grid_bounds``); only for a column with a grid."""
        cache = self.__dict__.get("_grid_cache")
        if cache is None:
            cache = grid_bounds(self.edge_array, self.grid)
            object.__setattr__(self, "_grid_cache", cache)
        return cache

    @property
    def n_values(self) -> int:
        """The bins (every code but the missing one)."""
        return len(self.edges) - 1

    @property
    def edge_array(self) -> np.ndarray:
        return np.asarray(self.edges, dtype=np.float64)

    def bin_codes(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Bin codes for finite ``values`` and a mask of the values clipped into an edge bin."""
        edges = self.edge_array
        codes = np.searchsorted(edges, values, side="right") - 1
        np.clip(codes, 0, self.n_values - 1, out=codes)
        clipped = (values < edges[0]) | (values > edges[-1])
        return codes, clipped

    def code_of(self, value: Any) -> int:
        """The bin that holds ``value``; it must lie within the edges (None: the missing code)."""
        if value is None:  # JSON null
            return self._missing_code_of()
        value = self._time_value(value)
        if not _is_number(value):
            raise ValueError(f"value {value!r} is not a number")
        if not self.edges[0] <= value <= self.edges[-1]:
            raise ValueError(
                f"value {value!r} lies outside the bin edges "
                f"[{format_value(self.edges[0])}, {format_value(self.edges[-1])}]"
            )
        return int(self.bin_codes(np.array([float(value)]))[0][0])

    def codes_in_range(self, lo: Any, hi: Any) -> np.ndarray:
        """Bins that lie wholly inside ``[lo, hi]`` (so a count never includes values outside)."""
        self._refuse_missing_bounds(lo, hi)
        lo, hi = self._time_value(lo), self._time_value(hi)
        for v in (lo, hi):
            if not _is_number(v):
                raise ValueError(f"range bound {v!r} is not a number")
        if lo > hi:
            raise ValueError(f"range [{lo!r}, {hi!r}] has lo > hi")
        edges = self.edge_array
        lo, hi = (v if _float_sized(v) else math.inf if v > 0 else -math.inf for v in (lo, hi))  # past 1e308
        inside = np.flatnonzero((edges[:-1] >= lo) & (edges[1:] <= hi))
        if inside.size == 0:
            raise ValueError(
                f"range [{lo!r}, {hi!r}] holds no whole bin; bin edges are {_list_preview(self.edges)}"
            )
        return inside

    def _time_value(self, value: Any) -> Any:
        """A query's ISO text as a number, in a time column (anything else as it is)."""
        if self.time is None or not isinstance(value, str):
            return value
        values, bad = parse_times([value], self.time)
        if bad[0] or math.isnan(values[0]):
            raise ValueError(f"value {value!r} is not {'a date' if self.time == 'date' else 'a date and time'} "
                             f"({TIME_FORMS[self.time]})")
        return float(values[0])

    def interval(self, first: int, last: int) -> str:
        close = "]" if last == self.n_values - 1 else ")"
        return f"[{self._edge_text(self.edges[first])}, {self._edge_text(self.edges[last + 1])}{close}"

    def describe(self, codes: np.ndarray) -> str:
        present, has_missing = self._split(codes)
        intervals = " or ".join(self.interval(a, b) for a, b in _runs(present))
        return self._with_missing(f"{self.name} in {intervals}" if intervals else None, has_missing)

    def to_query_value(self, codes: np.ndarray) -> Any:
        present, has_missing = self._split(codes)
        if has_missing:  # left edges (each picks its own bin) and null
            return [self.edges[c] for c in present.tolist()] + [None] if present.size else None
        runs = _runs(present)
        if len(runs) == 1:
            first, last = runs[0]
            return {"range": [self.edges[first], self.edges[last + 1]]}
        return [self.edges[c] for c in present.tolist()]  # left edges: each picks its own bin

    def midpoints(self) -> np.ndarray:
        edges = self.edge_array
        return (edges[:-1] + edges[1:]) / 2

    def decode(self, codes: np.ndarray) -> np.ndarray:
        """The bins' midpoints (float64; NaN for the missing code)."""
        middles = self.midpoints()
        return (np.append(middles, np.nan) if self.missing else middles)[codes]

    def to_dict(self) -> dict:
        edges: list = list(self.edges)
        if self.time is not None and all(float(e).is_integer() for e in edges):  # ISO texts, for the reader
            edges = format_times(edges, self.time).tolist()
        out = {"name": self.name, "type": self.kind, "edges": edges}
        if self.missing:
            out["missing"] = True
        if self.digits is not None:
            out["digits"] = self.digits
        if self.time is not None:
            out["time"] = self.time
        if self.text_missing:
            out["text_missing"] = True
        return out


@dataclass(frozen=True, init=False, repr=False)
class Coded(_MissingCode):
    """A column already integer-coded as ``0..size-1`` (private-pgm domain files).

    ``Coded(name, size, missing=True)`` has ``size`` codes that are values and one more,
    ``size``, for a missing value: its ``size`` property (the domain size) is then
    ``size + 1``, while its schema JSON keeps ``"size"`` as the number of value codes and adds
    ``"missing": true``. ``n_values`` is the number of value codes either way.
    """

    name: str
    n_values: int
    missing: bool = False
    kind: ClassVar[str] = "coded"

    def __init__(self, name: str, size: int, *, missing: bool = False) -> None:
        _check_name(name)
        problem = _size_problem(size)
        if problem:
            raise SchemaError(f"column {name!r}: {problem}")
        _check_missing(name, missing)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "n_values", int(size))
        object.__setattr__(self, "missing", bool(missing))
        _check_total(self)

    def __repr__(self) -> str:
        return f"Coded(name={self.name!r}, size={self.n_values!r}" + (", missing=True)" if self.missing else ")")

    def code_of(self, value: Any) -> int:
        if value is None:  # JSON null
            return self._missing_code_of()
        if not _is_integer(value):
            raise ValueError(f"value {value!r} is not an integer code")
        if not 0 <= value < self.n_values:
            raise ValueError(f"value {value!r} is outside the domain 0..{self.n_values - 1}")
        return int(value)

    def codes_in_range(self, lo: Any, hi: Any) -> np.ndarray:
        self._refuse_missing_bounds(lo, hi)
        for v in (lo, hi):
            if not _is_integer(v):
                raise ValueError(f"range bound {v!r} is not an integer code")
        if lo > hi:
            raise ValueError(f"range [{lo!r}, {hi!r}] has lo > hi")
        a, b = max(int(lo), 0), min(int(hi), self.n_values - 1)
        if a > b:
            raise ValueError(f"range [{lo!r}, {hi!r}] lies outside the domain 0..{self.n_values - 1}")
        return np.arange(a, b + 1)

    def describe(self, codes: np.ndarray) -> str:
        present, has_missing = self._split(codes)
        runs = _runs(present)
        if not has_missing and len(runs) == 1 and runs[0][0] == runs[0][1]:
            return f"{self.name} = {runs[0][0]}"
        if len(runs) == 1 and runs[0][1] - runs[0][0] >= 2:
            return self._with_missing(f"{self.name} in {runs[0][0]}..{runs[0][1]}", has_missing)
        if not runs:
            return self._with_missing(None, has_missing)
        shown = [*map(str, present.tolist()), *([MISSING_TEXT] if has_missing else [])]
        return f"{self.name} in {{{', '.join(shown)}}}"

    def to_query_value(self, codes: np.ndarray) -> Any:
        values = [None if c == self.missing_code else c for c in np.asarray(codes).tolist()]
        return values[0] if len(values) == 1 else values

    def decode(self, codes: np.ndarray) -> np.ndarray:
        """The codes themselves (int64); with ``missing``, float64 with NaN for the missing code."""
        codes = np.asarray(codes, dtype=np.int64)
        if not self.missing:
            return codes
        return np.where(codes == self.n_values, np.nan, codes)

    def to_dict(self) -> dict:
        out = {"name": self.name, "type": self.kind, "size": self.n_values}
        if self.missing:
            out["missing"] = True
        return out


def _size_problem(size: Any) -> str | None:
    """What is wrong with a coded column's size (None if nothing): it must be an integer (not
    a bool, not text) from 1 to ``MAX_COLUMN_SIZE``."""
    if not isinstance(size, (int, np.integer)) or isinstance(size, bool) or size < 1:
        return f"size {shown_value(size)} must be an integer >= 1"
    if size > MAX_COLUMN_SIZE:
        return (f"size {shown_value(size)} is too large: a column may have at most {MAX_COLUMN_SIZE:,} codes "
                "(the most cells of a table synth counts)")
    return None


Column = Union[Categorical, Numeric, Coded]
_KINDS = {cls.kind: cls for cls in (Categorical, Numeric, Coded)}


#: What an inferred schema says of itself in its JSON.
INFERRED_DESCRIPTION = ("inferred from the data by synth schema infer: its categories and bin edges are NOT "
                        "differentially private; review them or replace them with public knowledge")


@dataclass(frozen=True)
class Schema:
    """Columns in order (public knowledge) and, optionally, the public row count ``rows``.

    ``inferred`` marks a schema read off the data itself (``synth schema infer``): its
    categories and bin edges are then NOT private, and every private run says so.

    ``missing_tokens`` are cell texts that stand for a missing value (``("?",)``), besides the
    empty cell, null and NaN, which always do: in a column with ``missing=True`` they read as
    its missing code, in any other they are refused as missing values. A synthetic CSV writes
    the missing code as the first token (an empty cell when there is none).

    ``ignored`` names columns of the data the schema knows of and leaves out (identifiers, free
    text): readers skip them instead of refusing the table. ``roles`` says what a synthetic
    table holds in some of them (``ROLES``): ``{"PassengerId": "identifier", "Name": "text"}``
    gives fresh ids, made from the row number alone, and free text (left out, or a placeholder);
    an ignored column without a role is left out. ``order`` (optional) is the data's column
    order, schema and ignored columns together: a synthetic table follows it. ``derivation`` is the record of a
    schema derived under DP (``synth.data.derive``): what was derived, how, and its cost, which
    a run that uses the schema counts in its total.

    ``constraints`` are public constraints between columns (``synth.data.constraints``: a
    column that is a function of another, combinations that cannot occur), given as objects or
    their JSON forms; models give the cells they rule out zero mass and synthetic rows keep them.
    """

    columns: tuple
    rows: int | None = None
    inferred: bool = False
    missing_tokens: tuple = ()
    ignored: tuple = ()
    derivation: dict | None = field(default=None, compare=False, hash=False)
    roles: dict = field(default_factory=dict, hash=False)
    order: tuple = ()
    constraints: tuple = ()
    _positions: dict = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        columns = tuple(self.columns)
        object.__setattr__(self, "columns", columns)
        for column in columns:
            if not isinstance(column, (Categorical, Numeric, Coded)):
                raise TypeError(f"schema column {column!r} must be Categorical, Numeric or Coded")
        positions: dict[str, int] = {}
        for i, column in enumerate(columns):
            if column.name in positions:
                raise SchemaError(f"column {column.name!r} appears twice in the schema")
            positions[column.name] = i
        object.__setattr__(self, "_positions", positions)
        if self.rows is not None and (
            not isinstance(self.rows, (int, np.integer)) or isinstance(self.rows, bool)
            or not 0 <= self.rows <= _INT64_MAX
        ):
            raise SchemaError(f"rows ({self.rows!r}) must be a non-negative integer (at most 2^63 - 1) or absent")
        if not isinstance(self.inferred, bool):
            raise SchemaError(f"inferred ({self.inferred!r}) must be true or false")
        object.__setattr__(self, "missing_tokens", _checked_tokens(self.missing_tokens, columns))
        object.__setattr__(self, "ignored", tuple(self.ignored))
        for name in self.ignored:
            if not isinstance(name, str) or name in positions:
                raise SchemaError(f"ignored column {name!r} must be a name that is not a schema column")
        object.__setattr__(self, "roles", _checked_roles(self.roles, self.ignored))
        object.__setattr__(self, "order", _checked_order(self.order, positions, self.ignored))
        if self.derivation is not None and not (isinstance(self.derivation, dict)
                                                and _finite_cost(self.derivation)):
            raise SchemaError("derivation must be a record with a finite, non-negative 'epsilon' and 'delta'")
        object.__setattr__(self, "constraints", check_constraints(self.constraints, self))

    # -- shape ---------------------------------------------------------------------------
    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @functools.cached_property
    def shape(self) -> tuple[int, ...]:
        """Each column's size. Kept once computed (the columns are frozen): every marginal asks for it,
        and recomputing it took a fifth of a 16-column PMW run."""
        return tuple(c.size for c in self.columns)

    @property
    def universe_size(self) -> int:
        """|U|, the product of the column sizes, as an exact Python integer."""
        return math.prod(self.shape)

    def __len__(self) -> int:
        return len(self.columns)

    def __iter__(self):
        return iter(self.columns)

    def __getitem__(self, key: str | int) -> Column:
        return self.columns[self.index(key) if isinstance(key, str) else key]

    def __contains__(self, name: object) -> bool:
        return name in self._positions

    def index(self, name: str) -> int:
        """Position of column ``name``; ``SchemaError`` listing the columns if unknown."""
        try:
            return self._positions[name]
        except KeyError:
            raise SchemaError(f"unknown column {name!r}; columns are: {', '.join(self.names)}") from None

    def project(self, names: Iterable[str]) -> Schema:
        """The schema restricted to ``names``, in the order given."""
        names = list(names)
        if not names:
            raise SchemaError("at least one column must be selected")
        seen: set[str] = set()
        for name in names:
            if name in seen:
                raise SchemaError(f"column {name!r} is selected twice")
            seen.add(name)
        kept = tuple(c for c in self.constraints if seen.issuperset(c.columns))  # the others constrain no column here
        return Schema(tuple(self[self.index(n)] for n in names), rows=self.rows, inferred=self.inferred,
                      missing_tokens=self.missing_tokens, ignored=self.ignored, derivation=self.derivation,
                      constraints=kept, roles=self.roles,
                      order=tuple(n for n in self.order if n in seen or n in self.ignored))

    def with_constraints(self, constraints: Iterable) -> Schema:
        """This schema with ``constraints`` (objects or their JSON forms) added to its own."""
        if isinstance(constraints, (str, bytes, dict)) or not isinstance(constraints, Iterable):
            raise SchemaError(f"constraints must be a list of constraints, got {constraints!r}")
        return dataclasses.replace(self, constraints=self.constraints + tuple(constraints))

    def select(self, columns: str | Sequence[str] | None) -> Schema:
        """``project`` from a comma-separated string or a list; ``None`` keeps every column."""
        if columns is None:
            return self
        if isinstance(columns, str):
            columns = [c.strip() for c in columns.split(",") if c.strip()]
        return self.project(columns)

    # -- mixed-radix cell index ----------------------------------------------------------
    @property
    def strides(self) -> np.ndarray:
        """Row-major strides of the cell index (last column fastest), as int64."""
        if self.universe_size > _INT64_MAX:
            raise SchemaError(
                f"universe of {self.universe_size:.3e} cells is too large to index with 64-bit integers"
            )
        strides = np.ones(len(self), dtype=np.int64)
        for i in range(len(self) - 2, -1, -1):
            strides[i] = strides[i + 1] * self.shape[i + 1]
        return strides

    def cell_index(self, codes: np.ndarray) -> np.ndarray:
        """Cell indices (int64) of rows of codes, shape ``(n, len(self))``."""
        codes = np.asarray(codes)
        if codes.ndim != 2 or codes.shape[1] != len(self):
            raise ValueError(f"codes must have shape (n, {len(self)}), got {codes.shape}")
        return codes.astype(np.int64) @ self.strides

    def cell_codes(self, index: np.ndarray | int) -> np.ndarray:
        """Inverse of ``cell_index``: codes of shape ``(n, len(self))`` for cell indices."""
        index = np.atleast_1d(np.asarray(index, dtype=np.int64))
        if index.size and (index.min() < 0 or index.max() >= self.universe_size):
            raise ValueError(f"cell index out of range 0..{self.universe_size - 1}")
        return ((index[:, None] // self.strides) % np.asarray(self.shape, dtype=np.int64)).astype(np.int64)

    # -- JSON ----------------------------------------------------------------------------
    def to_dict(self) -> dict:
        out: dict[str, Any] = {"version": 1, "columns": [c.to_dict() for c in self.columns]}
        if self.rows is not None:
            out["rows"] = int(self.rows)
        if self.missing_tokens:
            out["missing_tokens"] = list(self.missing_tokens)
        if self.inferred:
            out["inferred"] = True
            out["description"] = INFERRED_DESCRIPTION
        if self.ignored:
            out["ignored"] = list(self.ignored)
        if self.roles:
            out["roles"] = dict(self.roles)
        if self.order:
            out["order"] = list(self.order)
        if self.derivation is not None:
            out["derivation"] = self.derivation
        if self.constraints:
            out["constraints"] = [c.to_dict() for c in self.constraints]
        return out

    @classmethod
    def from_dict(cls, obj: Any, source: object = "schema") -> Schema:
        """Build from the rich format or a private-pgm domain (``{"col": size, ...}``)."""
        if not isinstance(obj, dict) or not obj:
            raise SchemaError(f"{source}: expected a JSON object with 'columns', or a domain {{column: size}}")
        if _is_domain(obj):
            columns = []
            for name, size in obj.items():
                if not name:
                    raise SchemaError(f"{source}: column name {name!r} must be a non-empty string")
                problem = _size_problem(size)
                if problem:
                    raise SchemaError(f"{source}: column {name!r}: {problem}")
                columns.append(Coded(name, size))
            return cls(tuple(columns))
        _check_keys(obj, _SCHEMA_KEYS, source, "schema")
        if obj.get("version", 1) != 1:
            raise SchemaError(f"{source}: schema version {obj['version']!r} is not supported (expected 1)")
        entries = obj.get("columns")
        if not isinstance(entries, list) or not entries:
            raise SchemaError(f"{source}: 'columns' must be a non-empty list of column objects")
        columns = [_column_from_dict(entry, i, source) for i, entry in enumerate(entries)]
        try:
            tokens = obj.get("missing_tokens", [])
            if not isinstance(tokens, list):
                raise SchemaError(f"'missing_tokens' must be a list of strings, got {tokens!r}")
            ignored = obj.get("ignored", [])
            if not isinstance(ignored, list):
                raise SchemaError(f"'ignored' must be a list of column names, got {ignored!r}")
            constraints = obj.get("constraints", [])
            if not isinstance(constraints, list):
                raise SchemaError(f"'constraints' must be a list of constraint objects, got {constraints!r}")
            return cls(tuple(columns), rows=obj.get("rows"), inferred=obj.get("inferred", False),
                       missing_tokens=tuple(tokens), ignored=tuple(ignored), derivation=obj.get("derivation"),
                       constraints=tuple(constraints), roles=_json_roles(obj), order=_json_order(obj))
        except SchemaError as exc:
            raise SchemaError(f"{source}: {exc}") from None

    @classmethod
    def load(cls, path: str | os.PathLike) -> Schema:
        """Read a schema or private-pgm domain JSON file."""
        return cls.from_dict(read_json(path, SchemaError), source=path)

    def to_json_text(self) -> str:
        """The rich JSON format as text."""
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n"

    def save(self, path: str | os.PathLike) -> None:
        """Write the rich JSON format atomically."""
        with atomic_write(path, encoding="utf-8") as handle:
            handle.write(self.to_json_text())


_SCHEMA_KEYS = {"columns", "rows", "version", "description", "inferred", "missing_tokens", "ignored", "derivation",
                "constraints", "roles", "order"}

#: What a synthetic table holds in an ignored column with a role (``Schema.roles``).
ROLES = {
    "identifier": "fresh text ids made from the row number (syn-000001, syn-000002, ...)",
    "integer-identifier": "fresh integer ids made from the row number (1, 2, ...)",
    "text": "free text: left out, or a placeholder text (free_text='placeholder', --free-text placeholder)",
}


def _checked_roles(roles: Any, ignored: tuple) -> dict[str, str]:
    """``roles`` as a dict, checked: each an ignored column's name and one of ``ROLES``."""
    if not isinstance(roles, dict):
        raise SchemaError(f"roles ({roles!r}) must map ignored column names to a role, such as "
                          '{"PassengerId": "identifier", "Name": "text"}')
    for name, role in roles.items():
        if name not in ignored:
            raise SchemaError(f"roles: column {name!r} must be listed in 'ignored' (a schema column is modelled, "
                              "not filled in)")
        if not isinstance(role, str) or role not in ROLES:
            raise SchemaError(f"roles: column {name!r}: role {role!r} must be one of: {', '.join(map(repr, ROLES))}")
    return dict(roles)


def _checked_order(order: Any, positions: dict, ignored: tuple) -> tuple[str, ...]:
    """``order`` as a tuple, checked: distinct names, each a schema or an ignored column."""
    if isinstance(order, str) or not isinstance(order, (tuple, list)):
        raise SchemaError(f"order ({order!r}) must be a list of column names")
    order = tuple(order)
    for name in order:
        if not (isinstance(name, str) and (name in positions or name in ignored)):
            raise SchemaError(f"order: {name!r} must name a schema column or an ignored one")
    if len(set(order)) != len(order):
        raise SchemaError(f"order {list(order)!r} lists a column twice")
    return order


def _json_roles(obj: dict) -> dict:
    roles = obj.get("roles", {})
    if not isinstance(roles, dict):
        raise SchemaError(f"'roles' must be an object {{column: role}}, got {roles!r}")
    return roles


def _json_order(obj: dict) -> tuple:
    order = obj.get("order", [])
    if not isinstance(order, list):
        raise SchemaError(f"'order' must be a list of column names, got {order!r}")
    return tuple(order)


def _finite_cost(record: dict) -> bool:
    """Whether a derivation record states its cost: finite epsilon and delta, both >= 0."""
    try:
        return all(math.isfinite(float(record[k])) and float(record[k]) >= 0 for k in ("epsilon", "delta"))
    except (KeyError, TypeError, ValueError):
        return False


def _checked_tokens(tokens: Any, columns: tuple) -> tuple[str, ...]:
    """``check_missing_tokens``, and none of them a categorical column's label (a cell could
    not be told to be one or the other)."""
    tokens = check_missing_tokens(tokens)
    for column in columns:
        if isinstance(column, Categorical):
            clash = [v for v in column.values if isinstance(v, str) and v in tokens]
            if clash:
                raise SchemaError(f"column {column.name!r}: label {clash[0]!r} is also a missing token; drop it "
                                  "from the values (give the column \"missing\": true) or from missing_tokens")
    return tokens


def check_missing_tokens(tokens: Any) -> tuple[str, ...]:
    """Missing-value tokens as a tuple, checked (``SchemaError``): distinct non-empty strings
    without surrounding spaces (the empty cell is always missing)."""
    if isinstance(tokens, str) or not isinstance(tokens, (tuple, list)):
        raise SchemaError(f"missing_tokens ({tokens!r}) must be a list of strings, such as [\"?\"]")
    tokens = tuple(tokens)
    for token in tokens:
        if not isinstance(token, str) or not token:
            raise SchemaError(f"missing token {token!r} must be a non-empty string "
                              "(an empty cell is always missing)")
        if token != token.strip():
            raise SchemaError(f"missing token {token!r} has spaces around it; give it as {token.strip()!r}")
    if len(set(tokens)) != len(tokens):
        raise SchemaError(f"missing_tokens {list(tokens)!r} lists a token twice")
    return tokens


def _is_domain(obj: dict) -> bool:
    """Whether a JSON object is a private-pgm domain ``{column: size}``: every value a number,
    or no 'columns' key, a key that is not the rich format's, and only plain values (so a size
    of ``"x"`` or ``true`` is called a bad size, not an unknown key)."""
    if all(_is_number(v) for v in obj.values()):
        return True
    return "columns" not in obj and not set(obj) <= _SCHEMA_KEYS and \
        not any(isinstance(v, (dict, list)) for v in obj.values())


def _label_key(value: Any) -> Any:
    """Dict key for a label: numbers compare by value (1 == 1.0), strings as themselves."""
    if _is_number(value):
        return ("n", float(value) if _float_sized(value) else value)  # an int past 1e308 equals no float label
    return ("s", value)


def _list_preview(values: Sequence, limit: int = 12) -> str:
    shown = ", ".join(format_value(v) for v in list(values)[:limit])
    return shown + (f", ... ({len(values)} in all)" if len(values) > limit else "")


def _check_name(name: Any) -> None:
    if not isinstance(name, str) or not name:
        raise SchemaError(f"column name {name!r} must be a non-empty string")


def _check_keys(obj: dict, allowed: set[str], source: object, what: str) -> None:
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise SchemaError(
            f"{source}: unknown key {unknown[0]!r} in {what}; allowed keys: {', '.join(sorted(allowed))}"
        )


#: The optional keys of a column kind, beside name, type, its values and missing.
_EXTRA_KEYS = {"categorical": {"other"}, "numeric": {"digits", "time", "text_missing"}}


def _column_from_dict(entry: Any, position: int, source: object) -> Column:
    where = f"{source}: column #{position + 1}"
    if not isinstance(entry, dict):
        raise SchemaError(f"{where}: expected an object with 'name' and 'type', got {entry!r}")
    name = entry.get("name")
    if isinstance(name, str) and name:
        where = f"{source}: column {name!r}"
    kind = entry.get("type")
    if not isinstance(kind, str) or kind not in _KINDS:  # a list or an object is not even hashable
        raise SchemaError(f"{where}: type {kind!r} must be one of: {', '.join(_KINDS)}")
    field_name = {"categorical": "values", "numeric": "edges", "coded": "size"}[kind]
    _check_keys(entry, {"name", "type", field_name, "missing"} | _EXTRA_KEYS.get(kind, set()), where, "column")
    if field_name not in entry:
        raise SchemaError(f"{where}: a {kind} column needs '{field_name}'")
    value = entry[field_name]
    if field_name != "size" and not isinstance(value, list):
        raise SchemaError(f"{where}: '{field_name}' must be a list, got {value!r}")
    missing = entry.get("missing", False)
    if not isinstance(missing, bool):
        raise SchemaError(f"{where}: 'missing' must be true or false, got {missing!r}")
    extra = {key: entry[key] for key in _EXTRA_KEYS.get(kind, ()) if key in entry}
    try:
        return _KINDS[kind](name, value, missing=missing, **extra)
    except SchemaError as exc:
        raise SchemaError(f"{source}: {exc}") from None
