"""A schema derived from the private data under differential privacy.

``derive_schema`` reads the table once and, for every column the caller has not described
publicly, spends a share of the derivation's budget. One row touches every column, so the
shares add up: ``TYPE_SHARE`` of epsilon tells every column's kind (pure epsilon, shared
evenly); of the rest, the numeric columns get their count's share in pure epsilon (basic
composition) for their bins, and the categorical columns' partition selections with the
numeric columns' private bounds the remainder in zCDP, with Gaussian noise, where they compose
in the square root (half of delta pays for the partition thresholds). The accountant composes the pure charges linearly beside the zCDP ones.

1. **what the column holds**: a noisy histogram (exact discrete Laplace) of its cells over
   four kinds, missing / whole number / other number / text; each cell is one kind, so one
   row moves one count by 1. The column is numeric when the noisy text count is at most
   ``TEXT_SHARE`` of the noisy non-missing count, integer when the noisy decimal count is at
   most ``TEXT_SHARE`` of the numbers.
   A column whose header names an identifier (``id``, ``user_id``, ``PassengerId``: public,
   it is the header) is left out before anything is spent on it.
2. a **categorical** column's values by Gaussian partition selection
   (``synth.privacy.mechanisms.gaussian_partition_selection``): a value held by one row
   survives with probability at most the column's share of delta, so no rare value (a name, a ticket
   number) reaches the schema. What does not survive is read as ``OTHER``. A column whose
   surviving values hold less than ``IDENTIFIER_COVER`` of its noisy non-missing count (almost
   every value distinct: names, ticket numbers, free text) is an identifier and is left out
   of the schema (the record says so).
3. a **numeric** column's bounds from public input (``bounds``) or privately
   (``private_bounds_zcdp``: a noisy histogram of magnitudes, in zCDP beside the partition
   selections), then ``bins`` bins by DP quantiles
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
from synth.privacy.accounting import Accountant, Budget, split_epsilon, subtract_epsilon
from synth.privacy.composition import zcdp_rho_limit
from synth.privacy.mechanisms import (
    discrete_laplace, dp_quantiles, gaussian_partition_selection, private_bounds_zcdp,
)
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
#: Share of the derivation's epsilon for telling the columns' kinds (the rest: values, or bounds and bins).
TYPE_SHARE = 0.3
#: Share of a numeric column's part of the budget for private bounds, when none are public (spent
#: in zCDP beside the categorical columns' partition selections; the rest, bins, in pure epsilon).
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

    def left_of(self, budget: Budget) -> Budget:
        """What a run's ``budget`` leaves for the run after this derivation's cost."""
        return Budget(subtract_epsilon(budget.epsilon, self.epsilon), max(budget.delta - self.delta, 0.0))

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
    tokens = set(missing_tokens)
    # 1. every derived column's kind: TYPE_SHARE of epsilon, shared evenly (pure epsilon, basic composition)
    e_kind = split_epsilon(TYPE_SHARE * epsilon, max(len(derived), 1))
    kinds = {name: _Kind.count(name, cells[name], tokens, e_kind, generator, accountant) for name in derived}
    numeric = [name for name in derived if kinds[name].numeric]
    categorical = [name for name in derived if not kinds[name].numeric]
    # 2. the rest, an equal share per column: numeric columns' bins (DP quantiles) in pure epsilon; the
    #    categorical columns' partition selections and the numeric columns' private bounds (noisy
    #    magnitudes) in zCDP, where they compose in the square root (Gaussian noise: one row moves one
    #    count in each), with half of delta for the partition thresholds
    rest = subtract_epsilon(epsilon, accountant.spent().epsilon)
    share = rest / len(derived) if derived else 0.0
    bounded = [name for name in numeric if name not in bounds]  # numeric columns whose bounds are derived
    e_quantiles = {name: share * (1 - BOUNDS_SHARE if name in bounded else 1.0) for name in numeric}
    pure = sum(e_quantiles.values())
    gaussian = len(categorical) + len(bounded)
    d_column = split_epsilon(delta / 2, len(categorical)) if categorical else 0.0
    rho_column = 0.0
    if gaussian:
        slack = delta - delta / 2 if categorical else delta  # what the partition thresholds leave of delta
        rho = zcdp_rho_limit(subtract_epsilon(rest, pure), slack) * (1 - 1e-5)
        rho_column = rho / gaussian
    entries: dict[str, dict[str, Any]] = {}
    out: list[Column] = []
    for name in names:
        if name in given:
            out.append(given[name])
            continue
        if name not in derived:
            continue
        kind = kinds[name]
        if kind.numeric:
            column, entry = _numeric(name, kind.numbers(cells[name]), kind.whole, bounds.get(name), bins,
                                     e_quantiles[name], rho_column, generator, accountant, kind.entry(e_kind))
        else:
            column, entry = _categorical(name, kind.texts(cells[name]), kind.present, rho_column, d_column, generator,
                                         accountant, kind.entry(e_kind))
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


@dataclass
class _Kind:
    """A column's cells by kind (missing, whole, decimal, text), and the noisy counts of each
    that decide whether it is numeric and whole."""

    masks: dict[str, np.ndarray]
    noisy: dict[str, int]

    @classmethod
    def count(cls, name: str, cells: pd.Series, tokens: set, epsilon: float, rng: np.random.Generator,
              accountant: Accountant) -> _Kind:
        masks = _kinds(cells, tokens)
        order = ("missing", "integer", "decimal", "text")
        noisy = discrete_laplace(np.array([masks[k].sum() for k in order]), epsilon, rng=rng, accountant=accountant,
                                 note=f"{name}: kinds of cells")
        return cls(masks, {k: max(int(v), 0) for k, v in zip(order, noisy)})

    @property
    def present(self) -> int:
        return self.noisy["integer"] + self.noisy["decimal"] + self.noisy["text"]

    @property
    def numeric(self) -> bool:
        return self.present > 0 and self.noisy["text"] <= TEXT_SHARE * self.present

    @property
    def whole(self) -> bool:
        return self.noisy["decimal"] <= TEXT_SHARE * (self.noisy["integer"] + self.noisy["decimal"])

    def numbers(self, cells: pd.Series) -> np.ndarray:
        return pd.to_numeric(cells[self.masks["integer"] | self.masks["decimal"]], errors="coerce").to_numpy(np.float64)

    def texts(self, cells: pd.Series) -> pd.Series:
        return cells[~self.masks["missing"]].astype(str)

    def entry(self, epsilon: float) -> dict[str, Any]:
        return {"epsilon": epsilon, "delta": 0.0, "rho": 0.0, "kinds": dict(self.noisy)}


def _categorical(name: str, texts: pd.Series, present: int, rho: float, delta: float, rng: np.random.Generator,
                 accountant: Accountant, entry: dict) -> tuple[Column | None, dict]:
    """The values Gaussian partition selection keeps (rho-zCDP, one-row values kept with
    probability at most delta), the rest read as ``OTHER``; None for an identifier."""
    kept = gaussian_partition_selection(Counter(texts.tolist()), rho, delta, rng=rng, accountant=accountant,
                                        note=f"{name}: values")
    entry.update(rho=rho, delta=delta, kind="categorical")
    cover = sum(max(c, 0) for c in kept.values())
    how = f"Gaussian partition selection (rho={rho:.3g}, delta={delta:.3g})"
    if not kept or cover < IDENTIFIER_COVER * present:
        entry["how"] = (f"an identifier or free text: the values that survive {how} hold "
                        f"{'none' if not kept else 'under half'} of its cells")
        return None, entry | {"kind": "identifier"}
    labels = list(kept)
    other = OTHER if OTHER not in kept else _fresh_label(kept)
    entry["how"] = f"categorical: {len(labels)} values kept by {how}, the rest read as {other!r}; missing allowed"
    return Categorical(name, (*labels, other), missing=True, other=other), entry


def _numeric(name: str, values: np.ndarray, whole: bool, bounds, bins: int, e_quantiles: float, rho: float,
             rng: np.random.Generator, accountant: Accountant, entry: dict) -> tuple[Column | None, dict]:
    """Bounds (public, or from noisy magnitudes at ``rho``, zCDP) and bins by DP quantiles inside
    them (``e_quantiles``, pure epsilon)."""
    entry["epsilon"] += e_quantiles
    if bounds is not None:
        low, high = bounds
        source = "public bounds"
    else:
        entry["rho"] = rho
        found = private_bounds_zcdp(values, rho, integer=whole, rng=rng, accountant=accountant, note=f"{name}: bounds")
        if found is None:
            entry.update(kind="numeric", how=f"left out: too few rows to bound it privately at rho={rho:.3g} "
                                             "(give --bounds)")
            return None, entry
        low, high = found
        source = f"private bounds (noisy magnitudes, rho={rho:.3g})"
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
