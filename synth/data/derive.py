"""A schema derived from the private data under differential privacy.

``derive_schema`` reads the table once and, for every column the caller has not described
publicly, spends a share of the derivation's budget (the columns share it equally: one row
touches every column, so the shares add up, by basic composition):

1. **what the column holds**: a noisy histogram (exact discrete Laplace) of its cells over
   four kinds, missing / whole number / other number / text; each cell is one kind, so one
   row moves one count by 1. The column is numeric when the noisy text count is at most
   ``TEXT_SHARE`` of the noisy non-missing count, integer when the noisy decimal count is at
   most ``TEXT_SHARE`` of the numbers. ``TYPE_SHARE`` of the column's share pays for this.
   A column whose header names an identifier (``id``, ``user_id``, ``PassengerId``: public,
   it is the header) is left out before anything is spent on it.
2. a **categorical** column's values by partition selection
   (``synth.privacy.mechanisms.partition_selection``): a value held by one row survives with
   probability at most the column's share of delta, so no rare value (a name, a ticket
   number) reaches the schema. What does not survive is read as ``OTHER``. A column whose
   surviving values hold less than ``IDENTIFIER_COVER`` of its noisy non-missing count (almost
   every value distinct: names, ticket numbers, free text) is an identifier and is left out
   of the schema (the record says so).
3. a **numeric** column's bounds from public input (``bounds``) or privately
   (``private_bounds``: a noisy histogram of magnitudes), then ``bins`` bins by DP quantiles
   inside them (``dp_quantiles``): bins of similar mass, and a value that many quantiles land
   on (a spike such as capital-gain's zeros) gets a bin of its own. Integer columns get
   integer edges.

Every derived column may hold a missing value (a code of its own), so no row is ever dropped
for an empty cell. The result records what was derived, how and at what cost
(``Derivation``, also in the schema as ``derivation``, with the left-out columns as
``ignored``); a run that uses the schema counts that cost in its total.
"""

from __future__ import annotations

import math
import os
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from synth.data.reading import DEFAULT_CHUNK_ROWS, _read_header, csv_chunks, is_parquet
from synth.data.schema import Categorical, Column, Numeric, Schema
from synth.errors import DataError, SchemaError
from synth.privacy.accounting import Accountant, split_epsilon, subtract_epsilon
from synth.privacy.mechanisms import discrete_laplace, dp_quantiles, partition_selection, private_bounds
from synth.privacy.rng import make_rng
from synth.privacy.validation import check_budget_epsilon, check_delta, check_positive_int

__all__ = ["Derivation", "derive_schema", "DEFAULT_BINS", "DEFAULT_SCHEMA_SHARE", "OTHER", "parse_bounds"]

#: The share of a run's epsilon and delta a schema derived for it gets (``synth generate``
#: without --schema, ``Synthesizer.fit`` without ``schema=``).
DEFAULT_SCHEMA_SHARE = 0.2
#: Bins per derived numeric column (DP quantiles; a spike adds one).
DEFAULT_BINS = 32
#: The label the values that did not survive partition selection are read as.
OTHER = "other"
#: Share of a column's epsilon for telling its kind (the rest: its values, or bounds and bins).
TYPE_SHARE = 0.3
#: Share of a numeric column's remaining epsilon for private bounds, when none are public.
BOUNDS_SHARE = 0.3
#: A column is numeric (or integer) when text (or decimals) are at most this share of its cells
#: (noisy counts: a share, not a count, so the rule holds at any n; a few junk cells in a column
#: of numbers leave it numeric).
TEXT_SHARE = 0.1
#: A text column whose surviving values cover less than this share of its cells is an identifier.
IDENTIFIER_COVER = 0.5
#: A header that names an identifier (public: the header is not private): ``id``, ``user_id``,
#: ``ID-card``, and in camel case ``PassengerId``, ``userID``.
_ID_WORD = re.compile(r"(^|[_\W])id$|^id([_\W]|$)", re.IGNORECASE)
_ID_CAMEL = re.compile(r"[a-z](Id|ID)$")


@dataclass
class Derivation:
    """A derived schema and its record: per column how it was derived and what it cost, the
    columns taken from public input, those left out (identifiers), and the total spent
    (``epsilon``, ``delta``: what the accountant spent, at most the budget)."""

    schema: Schema
    epsilon: float
    delta: float
    columns: dict[str, dict[str, Any]] = field(default_factory=dict)
    public: list[str] = field(default_factory=list)
    excluded: dict[str, str] = field(default_factory=dict)
    accountant: Accountant | None = None

    def record(self) -> dict[str, Any]:
        """The record a schema file carries (JSON-ready)."""
        return {"method": "derived under differential privacy (synth.data.derive)", "epsilon": self.epsilon,
                "delta": self.delta, "columns": self.columns, "public": self.public, "excluded": self.excluded,
                "privacy": self.accountant.to_dict() if self.accountant is not None else None}

    def describe(self) -> list[str]:
        """One line per column, for the run's summary."""
        lines = [f"schema derived under DP: epsilon={self.epsilon:.3g}, delta={self.delta:.3g} over "
                 f"{len(self.columns)} columns" + (f" ({len(self.public)} given publicly)" if self.public else "")]
        for name, entry in self.columns.items():
            lines.append(f"  {name}: {entry['how']}")
        for name, why in self.excluded.items():
            lines.append(f"  {name}: left out, {why}")
        return lines


def parse_bounds(items: Sequence[str]) -> dict[str, tuple[float, float]]:
    """``["age=0:120", "fare=0:600"]`` as ``{"age": (0, 120), ...}``; a ``ValueError`` names a bad one."""
    out = {}
    for item in items:
        name, sep, span = item.rpartition("=")
        lo, colon, hi = span.partition(":")
        try:
            low, high = float(lo), float(hi)
        except ValueError:
            low = high = math.nan
        if not (sep and colon and name) or not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise ValueError(f"bounds {item!r} must read COLUMN=LOW:HIGH with finite LOW < HIGH, e.g. age=0:120")
        out[name] = (low, high)
    return out


def derive_schema(
    source: pd.DataFrame | str | os.PathLike,
    epsilon: float,
    delta: float,
    *,
    public: Schema | Sequence[Column] = (),
    bounds: Mapping[str, tuple[float, float]] | None = None,
    bins: int = DEFAULT_BINS,
    missing_tokens: Sequence[str] = (),
    columns: Sequence[str] | None = None,
    rng: np.random.Generator | int | None = None,
) -> Derivation:
    """Derive a schema of ``source`` (a DataFrame, a CSV or a Parquet file) under
    (``epsilon``, ``delta``)-DP; ``public`` columns are taken as given (no cost), ``bounds``
    are public numeric bounds. ``delta`` must be > 0 when a column's values are derived
    (partition selection keeps a one-row value with probability at most its share of delta)."""
    epsilon = check_budget_epsilon(epsilon)
    delta = check_delta(delta)
    bins = check_positive_int(bins, "bins")
    bounds = dict(bounds or {})
    given = {column.name: column for column in (public.columns if isinstance(public, Schema) else public)}
    cells, unselected = _read_columns(source, columns)
    names = list(cells)
    unknown = sorted(set(given) - set(names)) + sorted(set(bounds) - set(names))
    if unknown:
        raise SchemaError(f"column {unknown[0]!r} is described but the data has no such column; its columns are: "
                          f"{', '.join(names)}")
    excluded = {name: "an identifier (its header says so): fresh ids, never real values"
                for name in names if name not in given and _names_an_identifier(name)}  # the header is public
    derived = [name for name in names if name not in given and name not in excluded]
    if derived and not delta > 0:
        raise SchemaError("deriving a column privately needs delta > 0 (partition selection keeps a value held by one "
                          "row with probability at most delta): pass --delta, e.g. 1e-9, or describe every column "
                          "publicly")
    generator = make_rng(rng)
    accountant = Accountant(epsilon, delta)
    share_e = split_epsilon(epsilon, max(len(derived), 1))  # shares that add up to at most the budget, exactly
    share_d = split_epsilon(delta, max(len(derived), 1)) if delta > 0 else 0.0
    tokens = set(missing_tokens)
    entries: dict[str, dict[str, Any]] = {}
    out: list[Column] = []
    for name in names:
        if name in given:
            out.append(given[name])
        elif name in derived:
            column, entry = _derive_column(name, cells[name], share_e, share_d, bounds.get(name), bins, tokens,
                                           generator, accountant)
            entries[name] = entry
            if column is None:
                excluded[name] = entry["how"]
            else:
                out.append(column)
    if not out:
        raise SchemaError("no column is left to model: every column was left out as an identifier")
    spent = accountant.spent()
    result = Derivation(Schema((Categorical("_", ("_",)),)), spent.epsilon, spent.delta, entries,
                        [n for n in names if n in given], {n: excluded[n] for n in names if n in excluded}, accountant)
    result.schema = Schema(tuple(out), missing_tokens=tuple(missing_tokens),
                           ignored=(*result.excluded, *unselected), derivation=result.record())
    return result


def _names_an_identifier(name: str) -> bool:
    return bool(_ID_WORD.search(name) or _ID_CAMEL.search(name))


# -- one column ---------------------------------------------------------------------------------


def _derive_column(name: str, cells: pd.Series, epsilon: float, delta: float, bounds, bins: int, tokens: set,
                   rng: np.random.Generator, accountant: Accountant) -> tuple[Column | None, dict]:
    kinds = _kinds(cells, tokens)
    e_type = TYPE_SHARE * epsilon
    rest = subtract_epsilon(epsilon, e_type)
    noisy = discrete_laplace(np.array([kinds[k].sum() for k in ("missing", "integer", "decimal", "text")]), e_type,
                             rng=rng, accountant=accountant, note=f"{name}: kinds of cells")
    missing, integer, decimal, text = (max(int(v), 0) for v in noisy)
    present = integer + decimal + text
    entry: dict[str, Any] = {"epsilon": epsilon, "delta": 0.0,
                             "kinds": {"missing": missing, "integer": integer, "decimal": decimal, "text": text}}
    numeric = present > 0 and text <= TEXT_SHARE * present
    if numeric:
        whole = decimal <= TEXT_SHARE * (integer + decimal)
        values = pd.to_numeric(cells[kinds["integer"] | kinds["decimal"]], errors="coerce").to_numpy(np.float64)
        return _numeric(name, values, whole, bounds, bins, rest, rng, accountant, entry)
    texts = cells[kinds["integer"] | kinds["decimal"] | kinds["text"]].astype(str)
    kept = partition_selection(Counter(texts.tolist()), rest, delta, rng=rng, accountant=accountant,
                               note=f"{name}: values")
    entry.update(delta=delta, kind="categorical")
    cover = sum(max(c, 0) for c in kept.values())
    if not kept or cover < IDENTIFIER_COVER * present:
        entry["how"] = (f"an identifier or free text: the values that survive partition selection hold "
                        f"{'none' if not kept else 'under half'} of its cells (epsilon={rest:.3g}, delta={delta:.3g})")
        return None, entry | {"kind": "identifier"}
    labels = list(kept)
    other = OTHER if OTHER not in kept else _fresh_label(kept)
    entry["how"] = (f"categorical: {len(labels)} values kept by partition selection (epsilon={rest:.3g}, "
                    f"delta={delta:.3g}), the rest read as {other!r}; missing allowed")
    return Categorical(name, (*labels, other), missing=True, other=other), entry


def _numeric(name: str, values: np.ndarray, whole: bool, bounds, bins: int, epsilon: float,
             rng: np.random.Generator, accountant: Accountant, entry: dict) -> tuple[Column | None, dict]:
    if bounds is not None:
        low, high = bounds
        source = "public bounds"
        e_quantiles = epsilon
    else:
        e_bounds = BOUNDS_SHARE * epsilon
        found = private_bounds(values, e_bounds, integer=whole, rng=rng, accountant=accountant,
                               note=f"{name}: bounds")
        e_quantiles = subtract_epsilon(epsilon, e_bounds)
        if found is None:
            entry.update(kind="numeric", how=f"left out: too few rows to bound it privately at epsilon={e_bounds:.3g} "
                                             "(give --bounds)")
            return None, entry
        low, high = found
        source = f"private bounds (noisy magnitudes, epsilon={e_bounds:.3g})"
    if whole:
        low, high = math.floor(low), math.ceil(high)
    if not high > low:  # one bucket passed (a column of zeros, or a spike with a thin tail): one bin around it
        high = low + 1
    quantiles = [i / bins for i in range(1, bins)]
    points = dp_quantiles(values, quantiles, low, high, e_quantiles, integer=whole, rng=rng, accountant=accountant,
                          note=f"{name}: bin edges") if quantiles else np.array([])
    edges = _edges(np.asarray(points, dtype=np.float64), low, high, whole)
    entry.update(kind="numeric", integer=whole, bounds=[low, high],
                 how=f"numeric{' (integer)' if whole else ''}: {source} [{_num(low)}, {_num(high)}], "
                     f"{len(edges) - 1} bins by DP quantiles (epsilon={e_quantiles:.3g}); missing allowed"
                     + ("" if bounds is not None else "; values outside the bounds are clipped into the edge bins "
                        "(give --bounds if you know them)"))
    return Numeric(name, tuple(_num(e) for e in edges), missing=True), entry


def _edges(points: np.ndarray, low: float, high: float, whole: bool) -> list[float]:
    """Bin edges from sorted quantile points inside [low, high]: the points, deduplicated, with
    a point that several quantiles landed on given its own bin [v, v + step) (a spike)."""
    step = 1.0 if whole else (high - low) * 1e-6
    counts = Counter(points.tolist())
    edges = {low, high}
    for value, times in counts.items():
        value = min(max(value, low), high)
        edges.add(value)
        if times > 1 and value + step < high:
            edges.add(value + step)
    ordered = sorted(edges)
    if whole:  # bins must keep at least one integer each
        ordered = sorted({math.floor(e) for e in ordered[:-1]} | {ordered[-1]})
    return ordered


def _kinds(cells: pd.Series, tokens: set) -> dict[str, np.ndarray]:
    """Each cell's kind: missing (empty, or a missing token), integer, decimal or text."""
    text = cells.astype(str).str.strip()
    missing = cells.isna().to_numpy() | (text == "").to_numpy() | text.isin(tokens).to_numpy()
    numbers = pd.to_numeric(text.where(~missing), errors="coerce").to_numpy(np.float64)
    finite = np.isfinite(numbers) & ~missing
    integer = finite & (numbers == np.floor(np.where(finite, numbers, 0.0)))
    return {"missing": missing, "integer": integer, "decimal": finite & ~integer, "text": ~missing & ~finite}


def _fresh_label(taken: Mapping) -> str:
    label = f"({OTHER})"
    while label in taken:
        label = f"({label})"
    return label


def _num(value: float) -> int | float:
    return int(value) if float(value).is_integer() and abs(value) < 2**53 else float(value)


# -- reading ------------------------------------------------------------------------------------


def _read_columns(source, columns: Sequence[str] | None) -> tuple[dict[str, pd.Series], list[str]]:
    """Every selected column's cells as text, read once, and the names of the columns not
    selected (the schema lists them as ignored, so the data still reads under it). The
    derivation holds the cells in memory: one string per cell."""
    if isinstance(source, pd.DataFrame):
        frame = source
    else:
        path = Path(source)
        if not path.exists():
            raise DataError(f"{path}: no such file or folder")
        frame = pd.concat(list(_chunks(path)), ignore_index=True) if not is_parquet(path) else pd.read_parquet(path)
    every = {str(label): frame[label] for label in frame.columns}
    if not columns:
        return every, []
    absent = [c for c in columns if c not in every]
    if absent:
        raise SchemaError(f"--columns: the data has no column {absent[0]!r}; its columns are: {', '.join(every)}")
    return {name: every[name] for name in columns}, [name for name in every if name not in columns]


def _chunks(path: Path) -> Iterator[pd.DataFrame]:
    header = _read_header(path)
    with open(path, "rb") as handle:
        yield from csv_chunks(handle, path, dtype={name: str for name in header}, chunk_rows=DEFAULT_CHUNK_ROWS)
