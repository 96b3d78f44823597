"""Public constraints between columns: combinations of values the data can never hold.

A schema may declare them (``Schema.constraints``; ``"constraints"`` in its JSON). They are
public knowledge, like the columns: a model gives the cells they rule out zero mass and no
synthetic row breaks one, at no privacy cost (post-processing of the release). Two kinds:

* ``Function(of, column, mapping)``: ``column``'s value is determined by ``of``'s
  (``education-num`` of ``education``). ``mapping`` takes values of ``of`` to values of
  ``column``; a value of ``of`` not in it, and a missing one, leave ``column`` free. JSON:
  ``{"function": {"of": "education", "column": "education-num", "map": {"Bachelors": 13}}}``.
* ``Forbid(cells)``: one value for each of two or more columns, a combination that cannot
  occur. JSON: ``{"forbid": {"sex": "Male", "relationship": "Wife"}}``.

Constraints act on codes: a number names the bin that holds it (a numeric ``of`` or a forbidden
number rules on the whole bin), ``null`` the missing code. ``compile_constraints`` gives each
one as a ``CompiledConstraint``: its columns in schema order and a boolean table over their
codes, True where a combination is allowed; the models, the sampler and ``synth evaluate`` use
only that form.

This module reads a schema only through its public methods (``index``, ``[name]``,
``code_of``, ``describe``), so ``synth.data.schema`` can import it (no import circle).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Union

import numpy as np

from synth.errors import SchemaError

__all__ = ["CompiledConstraint", "Constraint", "Forbid", "Function", "MAX_CONSTRAINT_CELLS", "as_constraint",
           "check_constraints", "compile_constraints", "fit_to_derived", "function_maps", "constraint_subsets", "count_violations", "keeps_all"]

#: The most cells a constraint's table (the product of its columns' sizes) may have.
MAX_CONSTRAINT_CELLS = 10**7


def _shown(value: Any) -> str:
    """A value as messages quote it: strings quoted, None as JSON's null."""
    return "null" if value is None else repr(value) if isinstance(value, str) else str(value)


def _python(value: Any) -> Any:
    """A NumPy number as the Python one (so the schema's JSON can hold it)."""
    return value.item() if isinstance(value, (np.integer, np.floating)) else value


def _plain(value: Any) -> bool:
    """A value a constraint may name: a string, a number (not a bool) or None (missing)."""
    return value is None or isinstance(value, str) or (
        isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_)))


def _check_name(name: Any, what: str) -> str:
    if not isinstance(name, str) or not name:
        raise SchemaError(f"{what} ({name!r}) must be a column name")
    return name


@dataclass(frozen=True, init=False)
class Function:
    """``column`` is a function of ``of``: each (value of ``of``, value of ``column``) pair of
    ``mapping`` allows only that value of ``column`` beside that value of ``of``."""

    of: str
    column: str
    mapping: tuple  # ((value of `of`, value of `column`), ...) in the order given
    kind: ClassVar[str] = "function"

    def __init__(self, of: str, column: str, mapping: Mapping | Iterable[tuple[Any, Any]]):
        object.__setattr__(self, "of", _check_name(of, "function constraint: 'of'"))
        object.__setattr__(self, "column", _check_name(column, "function constraint: 'column'"))
        if of == column:
            raise SchemaError(f"function constraint: column {of!r} cannot be a function of itself")
        if isinstance(mapping, Mapping):
            pairs = tuple(mapping.items())
        elif isinstance(mapping, (str, bytes)) or not isinstance(mapping, Iterable):
            raise SchemaError(f"function constraint on {column!r}: 'map' must be an object {{value of {of!r}: value "
                              f"of {column!r}}}, got {mapping!r}")
        else:
            pairs = tuple(tuple(p) if isinstance(p, (list, tuple)) else p for p in mapping)
        if not pairs:
            raise SchemaError(f"function constraint on {column!r}: 'map' is empty; give at least one value of {of!r}")
        for pair in pairs:
            if not (isinstance(pair, tuple) and len(pair) == 2):
                raise SchemaError(f"function constraint on {column!r}: {pair!r} is not a (value of {of!r}, value of "
                                  f"{column!r}) pair")
            if not (_plain(pair[0]) and pair[0] is not None) or not _plain(pair[1]):
                raise SchemaError(f"function constraint on {column!r}: {_shown(pair[0])} -> {_shown(pair[1])}: "
                                  "values must be strings or numbers (the mapped value may be null, missing)")
        object.__setattr__(self, "mapping", tuple((_python(k), _python(v)) for k, v in pairs))

    @property
    def columns(self) -> tuple[str, ...]:
        return (self.of, self.column)

    @property
    def label(self) -> str:
        """A short name for messages: ``education-num = f(education)``."""
        return f"{self.column} = f({self.of})"

    def to_dict(self) -> dict:
        return {"function": {"of": self.of, "column": self.column,
                             "map": {str(k) if not isinstance(k, str) else k: v for k, v in self.mapping}}}

    def _allowed(self, schema: Any) -> np.ndarray:
        of, column = schema[self.of], schema[self.column]
        allowed = np.ones((of.size, column.size), dtype=bool)
        chosen: dict[int, tuple[Any, int]] = {}
        for key, value in self.mapping:
            i = _code(of, key, self.label, f"value {_shown(key)} of {self.of!r}")
            j = _code(column, value, self.label, f"{_shown(key)} maps to {_shown(value)}")
            if i in chosen and chosen[i][1] != j:
                raise SchemaError(
                    f"constraint {self.label}: {_shown(chosen[i][0])} and {_shown(key)} are the same code of "
                    f"{self.of!r} ({of.describe(np.array([i]))}) but map to different codes of {self.column!r}; a "
                    "constraint acts on codes (a numeric column's bins)")
            chosen[i] = (key, j)
            allowed[i, :] = False
            allowed[i, j] = True
        return allowed

    def _normalized(self, schema: Any) -> Function:
        """The same constraint with JSON's text keys read as ``of``'s values (``"13"`` as 13 for
        a numeric or coded column, as the label 13 for a categorical one)."""
        of = schema[self.of]
        pairs = []
        for key, value in self.mapping:
            if isinstance(key, str) and of.kind in ("numeric", "coded"):
                key = _number(key, self.label, self.of)
            elif of.kind == "categorical":
                key = of.values[_code(of, key, self.label, f"value {_shown(key)} of {self.of!r}")]
            pairs.append((key, value))
        return Function(self.of, self.column, pairs)


@dataclass(frozen=True, init=False)
class Forbid:
    """A combination of values, one per column (two or more columns), that cannot occur."""

    cells: tuple  # ((column, value), ...) in the order given
    kind: ClassVar[str] = "forbid"

    def __init__(self, cells: Mapping[str, Any] | Iterable[tuple[str, Any]]):
        pairs = tuple(cells.items()) if isinstance(cells, Mapping) else tuple(map(tuple, cells))
        if len(pairs) < 2:
            raise SchemaError(f"forbid constraint {dict(pairs)!r}: name two or more columns (one value each); to "
                              "rule out a value of one column, leave it out of the schema")
        names = [_check_name(name, "forbid constraint: column") for name, _ in pairs]
        if len(set(names)) != len(names):
            raise SchemaError(f"forbid constraint: a column is named twice in {names}")
        for name, value in pairs:
            if not _plain(value):
                raise SchemaError(f"forbid constraint: column {name!r}: value {value!r} must be a string, a number or "
                                  "null (one value per column; write one constraint per combination)")
        object.__setattr__(self, "cells", tuple((name, _python(value)) for name, value in pairs))

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.cells)

    @property
    def label(self) -> str:
        """A short name for messages: ``forbid sex = 'Male', relationship = 'Wife'``."""
        return "forbid " + ", ".join(f"{name} = {_shown(value)}" for name, value in self.cells)

    def to_dict(self) -> dict:
        return {"forbid": dict(self.cells)}

    def _allowed(self, schema: Any) -> np.ndarray:
        allowed = np.ones([schema[name].size for name, _ in self.cells], dtype=bool)
        allowed[tuple(_code(schema[name], value, self.label, f"value {_shown(value)}") for name, value in self.cells)] \
            = False
        return allowed

    def _normalized(self, schema: Any) -> Forbid:
        return self


Constraint = Union[Function, Forbid]
_KEYS = {"function": {"of", "column", "map"}}


def as_constraint(entry: Any, position: int | None = None) -> Constraint:
    """A constraint object from itself or from its JSON form (``{"function": {...}}`` or
    ``{"forbid": {...}}``); ``SchemaError`` naming the entry (``position``, 0-based) if malformed."""
    if isinstance(entry, (Function, Forbid)):
        return entry
    where = "constraint" if position is None else f"constraint #{position + 1}"
    if not (isinstance(entry, Mapping) and len(entry) == 1 and next(iter(entry)) in ("function", "forbid")):
        raise SchemaError(f"{where}: expected {{\"function\": {{\"of\": ..., \"column\": ..., \"map\": {{...}}}}}} or "
                          f"{{\"forbid\": {{column: value, ...}}}}, got {entry!r}")
    kind, body = next(iter(entry.items()))
    if not isinstance(body, Mapping):
        raise SchemaError(f"{where}: {kind!r} must be an object, got {body!r}")
    try:
        if kind == "forbid":
            return Forbid(body)
        unknown = sorted(set(body) - _KEYS["function"])
        if unknown:
            raise SchemaError(f"unknown key {unknown[0]!r} in a function constraint; its keys: column, map, of")
        missing = [k for k in ("of", "column", "map") if k not in body]
        if missing:
            raise SchemaError(f"a function constraint needs {missing[0]!r}")
        return Function(body["of"], body["column"], body["map"])
    except SchemaError as exc:
        raise SchemaError(f"{where}: {exc}") from None


def check_constraints(constraints: Any, schema: Any) -> tuple[Constraint, ...]:
    """``constraints`` (objects or their JSON forms) checked against ``schema``'s columns, as a
    tuple of objects with JSON's text keys read as values; ``SchemaError`` names the
    constraint and the column or value at fault."""
    if isinstance(constraints, (str, bytes, Mapping)) or not isinstance(constraints, Iterable):
        raise SchemaError(f"constraints must be a list of constraint objects, got {constraints!r}")
    out = []
    for position, entry in enumerate(constraints):
        constraint = as_constraint(entry, position)
        where = f"constraint #{position + 1} ({constraint.label})"
        try:
            for name in constraint.columns:
                schema.index(name)  # names the columns if unknown
            cells = math.prod(schema[name].size for name in constraint.columns)
            if cells > MAX_CONSTRAINT_CELLS:
                raise SchemaError(f"its columns span {cells:,} cells, more than {MAX_CONSTRAINT_CELLS:,}: constrain "
                                  "fewer or smaller columns")
            constraint = constraint._normalized(schema)
            if not constraint._allowed(schema).any():
                raise SchemaError("it rules out every combination of its columns' values, so no row could exist")
        except SchemaError as exc:
            raise SchemaError(f"{where}: {_without_prefix(str(exc), constraint.label)}") from None
        out.append(constraint)
    return tuple(out)


def fit_to_derived(constraints: Iterable, schema: Any) -> tuple[tuple[Constraint, ...], list[str]]:
    """``constraints`` restricted to what a schema derived under DP can say, and a note for each
    part left out. A derived column reads its rare values as "other" and clips values past its
    bounds, so a function constraint keeps the entries whose two values the schema still tells
    apart (the others, like "other" itself, leave the column free), and a forbidden
    combination naming such a value is dropped (its "other" holds allowed values too). A
    column the derivation left out drops the constraint. Nothing here reads the data."""
    kept: list[Constraint] = []
    notes: list[str] = []
    for position, entry in enumerate(constraints):
        constraint = as_constraint(entry, position)
        absent = [name for name in constraint.columns if name not in schema]
        if absent:
            notes.append(f"constraint {constraint.label}: dropped, the schema has no column {absent[0]!r}")
            continue
        if isinstance(constraint, Forbid):
            if all(_expressible(schema[name], value) for name, value in constraint.cells):
                kept.append(constraint)
            else:
                notes.append(f"constraint {constraint.label}: dropped, a value of it is not one the derived schema "
                             "tells apart (read as 'other' or past the bounds)")
            continue
        of, column = schema[constraint.of], schema[constraint.column]
        pairs = [(key, value) for key, value in constraint.mapping
                 if _expressible(of, _key(of, key)) and _expressible(column, value)]
        if len(pairs) < len(constraint.mapping):
            notes.append(f"constraint {constraint.label}: {len(constraint.mapping) - len(pairs)} of its "
                         f"{len(constraint.mapping)} entries left free, their values not ones the derived schema tells "
                         "apart (read as 'other' or past the bounds)")
        if pairs:
            kept.append(Function(constraint.of, constraint.column, [(_key(of, k), v) for k, v in pairs]))
    return check_constraints(kept, schema), notes


def _key(column: Any, key: Any) -> Any:
    """A function constraint's key as ``column``'s value (JSON's text keys read as numbers by
    ``_number``; a text that is none stays text, and so names no value of a numeric column)."""
    if isinstance(key, str) and column.kind in ("numeric", "coded"):
        try:
            return _number(key, "", column.name)
        except SchemaError:
            return key
    return key


def _expressible(column: Any, value: Any) -> bool:
    """Whether ``column`` has a code of its own for ``value`` (not "other", inside the bounds)."""
    try:
        code = column.code_of(value)
    except (ValueError, TypeError):
        return False
    return getattr(column, "other_code", None) != code


def _without_prefix(text: str, label: str) -> str:
    prefix = f"constraint {label}: "
    return text[len(prefix):] if text.startswith(prefix) else text


def _code(column: Any, value: Any, label: str, what: str) -> int:
    try:
        return column.code_of(value)
    except ValueError as exc:
        raise SchemaError(f"constraint {label}: column {column.name!r}: {what}: {exc}") from None


def _number(text: str, label: str, name: str) -> int | float:
    """A JSON object key (text) read as a number, for a numeric or coded column's value."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        raise SchemaError(f"constraint {label}: column {name!r}: value {text!r} is not a number") from None
    if not math.isfinite(value):
        raise SchemaError(f"constraint {label}: column {name!r}: value {text!r} is not a finite number")
    return value


# -- compiled form ----------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class CompiledConstraint:
    """A constraint over a schema's codes: its ``columns`` (schema order), their ``positions``
    in the schema, and ``allowed``, a boolean table over their codes (axes in ``columns``'
    order), True where the combination may occur."""

    constraint: Constraint
    columns: tuple[str, ...]
    positions: tuple[int, ...]
    allowed: np.ndarray

    @property
    def label(self) -> str:
        return self.constraint.label

    def allows(self, codes: np.ndarray) -> np.ndarray:
        """Per row of ``codes`` (rows, schema columns): True where the row keeps the constraint."""
        codes = np.asarray(codes)
        return self.allowed[tuple(codes[:, p].astype(np.intp) for p in self.positions)]

    def violated_share(self, table: np.ndarray) -> float | None:
        """The share of a table's mass (counts or fractions over ``columns``, in their order)
        on combinations the constraint rules out; None for a table without mass."""
        table = np.asarray(table, dtype=np.float64)
        total = float(table.sum())
        return float(table[~self.allowed].sum()) / total if total > 0 else None


def compile_constraints(schema: Any) -> list[CompiledConstraint]:
    """``schema.constraints`` in compiled form, in order (see ``CompiledConstraint``)."""
    out = []
    for constraint in getattr(schema, "constraints", ()):
        given = constraint.columns
        positions = sorted(schema.index(name) for name in given)
        columns = tuple(schema.names[p] for p in positions)
        allowed = constraint._allowed(schema).transpose([given.index(c) for c in columns])
        out.append(CompiledConstraint(constraint, columns, tuple(positions), np.ascontiguousarray(allowed)))
    return out


def function_maps(schema: Any) -> list[tuple[int, int, np.ndarray]]:
    """Per function constraint of ``schema``: the positions of ``of`` and ``column`` and, per code
    of ``of``, the one code of ``column`` it allows (-1 where ``column`` is free). A function
    is kept by moving a row's (or a cell's mass's) ``column`` to that code, every other column
    as it was: conditioning on it instead would reweigh the other columns by how much of their
    mass the model happened to put on the allowed values (on adult-raw, income's TV went from
    0.005 to 0.024)."""
    out = []
    for c in compile_constraints(schema):
        if not isinstance(c.constraint, Function):
            continue
        of, column = schema.index(c.constraint.of), schema.index(c.constraint.column)
        allowed = c.allowed if of < column else c.allowed.T  # axes (of, column)
        single = allowed.sum(axis=1) == 1
        out.append((of, column, np.where(single, allowed.argmax(axis=1), -1).astype(np.int64)))
    return out


def constraint_subsets(schema: Any) -> list[tuple[str, ...]]:
    """The column subsets (schema order) of ``schema``'s constraints, once each."""
    return list(dict.fromkeys(tuple(sorted(c.columns, key=schema.index)) for c in getattr(schema, "constraints", ())))


def count_violations(codes: np.ndarray, schema: Any) -> list[int]:
    """How many rows of ``codes`` (rows, schema columns) break each of ``schema``'s constraints."""
    return [int((~c.allows(codes)).sum()) for c in compile_constraints(schema)]


def keeps_all(codes: np.ndarray, compiled: Sequence[CompiledConstraint]) -> np.ndarray:
    """Per row of ``codes``: True where it keeps every constraint of ``compiled``."""
    keep = np.ones(np.asarray(codes).shape[0], dtype=bool)
    for c in compiled:
        keep &= c.allows(codes)
    return keep
