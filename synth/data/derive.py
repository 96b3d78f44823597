"""A schema derived from the private data under differential privacy.

``derive_schema`` reads the table once and, for every column the caller has not described
publicly, spends a share of the derivation's budget. Everything it releases is a noisy count
with Gaussian noise, so the whole derivation is rho-zCDP (plus, for the partition thresholds,
``THRESHOLD_DELTA_SHARE`` of delta), and one row touches every column, so the columns' rhos add
up. In a run (``synth generate`` without --schema, ``Synthesizer.fit`` without ``schema=``)
whose engine composes in zCDP too, the derivation takes its share of the run's rho
(``derivation_budget``) and the two compose in zCDP (``Derivation.left_of``), where the costs
add in rho, not in epsilon.

1. **what the column holds**: a noisy histogram (exact discrete Gaussian, ``KIND_SHARE`` of rho
   over the columns) of its cells over four kinds, missing / whole number / other number /
   text; each cell is one kind, so one row moves one count by 1. The column is numeric when the
   noisy text count is at most ``TEXT_SHARE`` of the noisy non-missing count, integer when the
   noisy decimal count is at most ``TEXT_SHARE`` of the numbers. A column whose header names an
   identifier (``id``, ``user_id``, ``PassengerId``: public, it is the header) is left out
   before anything is spent on it.
2. the rest of rho by weight (``CATEGORICAL_WEIGHT`` for a categorical column, 1 for a numeric
   one). A **categorical** column's values by Gaussian partition selection
   (``synth.privacy.mechanisms.gaussian_partition_selection``): a value held by one row
   survives with probability at most the column's share of delta, so no rare value (a name, a
   ticket number) reaches the schema. What does not survive is read as ``OTHER``. A column
   whose surviving values hold less than ``IDENTIFIER_COVER`` of its noisy non-missing count
   (almost every value distinct: names, ticket numbers, free text) is an identifier and is left
   out of the schema (the record says so).
3. a **numeric** column: a noisy histogram of its magnitudes over fixed power-of-two buckets
   (``MAGNITUDE_SHARE`` of its rho) gives its bounds (unless ``bounds`` gives them publicly) and
   says where its values lie; a noisy histogram over a grid inside the bounds, fine where the
   magnitudes say the mass is, with one cell below and one above, gives its bins
   (``synth.data.binning``): bins of similar mass, a spike (capital-gain's zeros) in a bin of
   its own, the tail in bins of its own, integer edges for integer columns, and the share of
   values the bounds clip, stated in the record.

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

from synth.data.binning import (
    combined_counts, equal_mass_edges, extend_bounds, fine_grid, grid_cells, refined_grid,
)
from synth.data.constraints import fit_to_derived
from synth.data.reading import DEFAULT_CHUNK_ROWS, _read_header, csv_chunks, is_parquet
from synth.data.schema import Categorical, Column, Numeric, Schema
from synth.data.values import parse_times
from synth.errors import DataError, SchemaError
from synth.privacy.accounting import Accountant, Budget, subtract_epsilon
from synth.privacy.composition import zcdp_epsilon, zcdp_rho_limit
from synth.privacy.mechanisms import (
    bucket_edges, bucket_index, discrete_gaussian, gaussian_partition_selection, magnitude_threshold, noisy_magnitudes,
    passing_buckets,
)
from synth.privacy.rng import make_rng
from synth.privacy.validation import check_budget_epsilon, check_delta, check_positive_int

__all__ = ["Derivation", "derive_schema", "derivation_budget", "modelled_names", "DEFAULT_BINS", "DEFAULT_SCHEMA_SHARE", "OTHER", "parse_bounds"]

#: The share of a run's budget a schema derived for it gets (``synth generate`` without
#: --schema, ``Synthesizer.fit`` without ``schema=``): of its rho when the run composes in zCDP,
#: else of its epsilon and delta.
DEFAULT_SCHEMA_SHARE = 0.3
#: Bins per derived numeric column (a spike adds one).
DEFAULT_BINS = 32
#: The label the values that did not survive partition selection are read as.
OTHER = "other"
#: Share of the derivation's rho for telling the columns' kinds.
KIND_SHARE = 0.05
#: A categorical column's weight in the split of the rest of rho (a numeric column weighs 1).
CATEGORICAL_WEIGHT = 1.25
#: Share of a numeric column's rho for its magnitude histogram (the rest: the fine histogram).
MAGNITUDE_SHARE = 0.7
#: Share of delta that pays for the partition thresholds (the rest converts rho to epsilon).
THRESHOLD_DELTA_SHARE = 0.5
#: A clipped share at least this large is stated in the column's record and the run's summary.
CLIP_NOTED = 0.001
#: ... and its noisy count at least this many noise deviations (else it is taken as noise: none).
CLIP_SIGMAS = 2.0
#: rho is taken this much (relatively) under its limit, so float rounding never overspends.
RHO_MARGIN = 1e-6
#: A column is numeric (or integer) when text (or decimals) are at most this share of its cells
#: (noisy counts: a share, not a count, so the rule holds at any n; a few junk cells in a column
#: of numbers leave it numeric).
TEXT_SHARE = 0.1
#: Decimal places told apart in a column's kinds (the last: this many or more).
MAX_PLACES = 6
_DECIMAL_KINDS = tuple(f"decimal{k}" for k in range(1, MAX_PLACES + 1))
_NUMBER_KINDS = ("integer", *_DECIMAL_KINDS)
#: The kinds of a cell, in the order of the kinds histogram.
KINDS = ("missing", *_NUMBER_KINDS, "date", "datetime", "text")
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

    def left_of(self, budget: Budget, zcdp: bool = False) -> Budget:
        """What a run's ``budget`` leaves for the run after this derivation's cost: with
        ``zcdp`` (a run that composes in zCDP, whose derivation took its share of the run's rho
        through ``derivation_budget``), the rho the derivation left, as the (epsilon, delta)
        whose zCDP limit it is, so that the two compose to at most ``budget`` in rho
        (``synth.privacy.accounting.combined_record``); else the epsilon and delta left by
        basic composition."""
        charges = self.accountant.ledger() if self.accountant is not None else ()
        if zcdp and not any(not c.is_zcdp and c.delta == 0 and c.epsilon for c in charges):
            delta = budget.delta - math.fsum(c.delta for c in charges if not c.is_zcdp)
            if delta > 0:
                rho = zcdp_rho_limit(budget.epsilon, delta) * (1 - RHO_MARGIN) - math.fsum(
                    c.rho for c in charges if c.is_zcdp)
                if rho > 0:
                    return Budget(zcdp_epsilon(rho, delta), delta)
        return Budget(subtract_epsilon(budget.epsilon, self.epsilon), max(budget.delta - self.delta, 0.0))

    def record(self) -> dict[str, Any]:
        """The record a schema file carries (JSON-ready)."""
        return {"method": "derived under differential privacy (synth.data.derive)", "epsilon": self.epsilon,
                "delta": self.delta, "columns": self.columns, "public": self.public, "excluded": self.excluded,
                "privacy": self.accountant.to_dict() if self.accountant is not None else None}

    def describe(self) -> list[str]:
        """One line per column, for the run's summary."""
        rho = math.fsum(c.rho for c in self.accountant.ledger() if c.is_zcdp) if self.accountant is not None else 0.0
        cost = (f"rho={rho:.3g} (epsilon={self.epsilon:.3g}, delta={self.delta:.3g} alone; a run in zCDP adds its rho "
                "to this one)" if rho else f"epsilon={self.epsilon:.3g}, delta={self.delta:.3g}")
        lines = [f"schema derived under DP: {cost} over {len(self.columns)} columns"
                 + (f" ({len(self.public)} given publicly)" if self.public else "")]
        for name, entry in self.columns.items():
            lines.append(f"  {name}: {entry['how']}")
        for name, why in self.excluded.items():
            lines.append(f"  {name}: left out, {why}")
        return lines


def derivation_budget(budget: Budget, share: float, zcdp: bool) -> tuple[Budget, float | None]:
    """The budget a schema derived for a run of ``budget`` is accounted in, and its rho: with
    ``zcdp`` (the run composes in zCDP), the run's whole budget and ``share`` of its rho (the
    run gets the rest through ``Derivation.left_of``); else ``share`` of its epsilon and delta,
    and the derivation's own rho limit (None)."""
    if zcdp and budget.delta > 0:
        threshold_delta = budget.delta * THRESHOLD_DELTA_SHARE
        return budget, share * zcdp_rho_limit(budget.epsilon, budget.delta - threshold_delta) * (1 - RHO_MARGIN)
    return Budget(share * budget.epsilon, share * budget.delta), None


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
    missing: Mapping[str, bool] | None = None,
    missing_tokens: Sequence[str] = (),
    columns: Sequence[str] | None = None,
    rho: float | None = None,
    rng: np.random.Generator | int | None = None,
) -> Derivation:
    """Derive a schema of ``source`` (a DataFrame, a CSV or a Parquet file) under
    (``epsilon``, ``delta``)-DP; ``public`` columns are taken as given (no cost), ``bounds``
    are public numeric bounds. ``delta`` must be > 0 when a column's values are derived
    (partition selection keeps a one-row value with probability at most its share of delta).
    ``missing`` says publicly whether a column can hold a missing value (every derived column
    can by default, so no row is ever refused for an empty cell). ``rho`` caps the derivation's zCDP cost below what (``epsilon``, ``delta``) allows: a
    derivation for a run that composes in zCDP takes only its share (``derivation_budget``)."""
    epsilon = check_budget_epsilon(epsilon)
    delta = check_delta(delta)
    bins = check_positive_int(bins, "bins")
    bounds = dict(bounds or {})
    given = {column.name: column for column in (public.columns if isinstance(public, Schema) else public)}
    cells, unselected = _read_columns(source, columns)
    names = list(cells)
    missing = dict(missing or {})
    unknown = sorted(set(given) - set(names)) + sorted(set(bounds) - set(names)) + sorted(set(missing) - set(names))
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
    threshold_delta = delta * THRESHOLD_DELTA_SHARE
    if rho is None and derived:
        rho = zcdp_rho_limit(epsilon, delta - threshold_delta) * (1 - RHO_MARGIN)
    # 1. every derived column's kind: KIND_SHARE of rho, shared evenly (a row is one cell of each column)
    rho_kind = KIND_SHARE * rho / len(derived) if derived else 0.0
    kinds = {name: _Kind.count(name, cells[name], tokens, rho_kind, generator, accountant) for name in derived}
    categorical = [name for name in derived if not kinds[name].numeric]
    # 2. the rest by weight: a categorical column's partition selection (its threshold falls with the
    #    square root of its rho, and a value under it is lost to "other"), a numeric column's
    #    magnitudes (bounds, and where its grid is fine) and its fine histogram (bins)
    weights = {name: CATEGORICAL_WEIGHT if name in categorical else 1.0 for name in derived}
    unit = (rho - rho_kind * len(derived)) / sum(weights.values()) * (1 - RHO_MARGIN) if derived else 0.0
    d_column = threshold_delta / len(categorical) if categorical else 0.0
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
            column, entry = _numeric(name, kind, kind.numbers(cells[name]), bounds.get(name), bins,
                                     unit * weights[name], generator, accountant, kind.entry(rho_kind),
                                     missing.get(name, True))
        else:
            column, entry = _categorical(name, kind.texts(cells[name]), kind.present, unit * weights[name], d_column,
                                         generator, accountant, kind.entry(rho_kind), missing.get(name, True))
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
    # left-out columns written back: fresh ids where the header names an identifier, else free text
    roles = {n: "identifier" if _names_an_identifier(n) else "text" for n in result.excluded}
    carried = public.constraints if isinstance(public, Schema) else ()  # a partial schema's public constraints
    result.schema = Schema(tuple(out), missing_tokens=tuple(missing_tokens), ignored=(*result.excluded, *unselected),
                           derivation=result.record(), roles=roles, order=tuple(names),
                           constraints=fit_to_derived(carried, Schema(tuple(out)))[0] if carried else ())
    return result


def modelled_names(source: pd.DataFrame | str | os.PathLike, columns: Sequence[str] | None = None) -> list[str]:
    """The columns a derivation of ``source`` would model, from the header alone (public): the
    selected ones, less those whose header names an identifier. A run plans its budget on them
    before anything is derived."""
    if isinstance(source, pd.DataFrame):
        names = [str(label) for label in source.columns]
    else:
        path = Path(source)
        if is_parquet(path):
            import pyarrow.parquet as pq

            names = list(pq.ParquetDataset(path).schema.names)
        else:
            names = _read_header(path)
    return [name for name in (columns or names) if not _names_an_identifier(name)]


def _names_an_identifier(name: str) -> bool:
    return bool(_ID_WORD.search(name) or _ID_CAMEL.search(name))


# -- one column ---------------------------------------------------------------------------------


@dataclass
class _Kind:
    """A column's cells by kind, and the noisy counts of each that decide what the column is:
    missing, whole number, decimal number by its places (1 to ``MAX_PLACES``, the last "or
    more"), ISO date, ISO timestamp, or other text. Each cell is one kind, so one row moves one
    count by 1."""

    masks: dict[str, np.ndarray]
    noisy: dict[str, int]

    @classmethod
    def count(cls, name: str, cells: pd.Series, tokens: set, rho: float, rng: np.random.Generator,
              accountant: Accountant) -> _Kind:
        masks = _kinds(cells, tokens)
        noisy = discrete_gaussian(np.array([masks[k].sum() for k in KINDS]), rho, rng=rng, accountant=accountant,
                                  note=f"{name}: kinds of cells")
        return cls(masks, {k: int(v) for k, v in zip(KINDS, noisy)})  # unclipped: sums of them stay unbiased

    def _sum(self, kinds) -> int:
        return sum(self.noisy[k] for k in kinds)

    @property
    def present(self) -> int:
        return self._sum(KINDS[1:])

    @property
    def numeric(self) -> bool:
        return self.present > 0 and self.noisy["text"] <= TEXT_SHARE * self.present

    @property
    def time(self) -> str | None:
        """``"date"`` or ``"datetime"`` when the column's cells hold more ISO dates or timestamps
        than numbers (noisy counts)."""
        stamps = self.noisy["date"] + self.noisy["datetime"]
        if not self.numeric or stamps <= self._sum(_NUMBER_KINDS):
            return None
        return "datetime" if self.noisy["datetime"] > TEXT_SHARE * stamps else "date"

    @property
    def whole(self) -> bool:
        numbers = self._sum(_NUMBER_KINDS)
        return self.time is not None or self._sum(_DECIMAL_KINDS) <= TEXT_SHARE * numbers

    @property
    def digits(self) -> int | None:
        """The decimal places of a decimal column: the fewest that hold ``1 - TEXT_SHARE`` of its
        noisy decimal cells (None for a whole or time column)."""
        if self.whole:
            return None
        decimals = self._sum(_DECIMAL_KINDS)
        held = 0
        for places, kind in enumerate(_DECIMAL_KINDS, start=1):
            held += self.noisy[kind]
            if held >= (1 - TEXT_SHARE) * decimals:
                return places
        return None  # more places than MAX_PLACES: written as drawn

    def numbers(self, cells: pd.Series) -> np.ndarray:
        if self.time is not None:
            return parse_times(cells[self.masks["date"] | self.masks["datetime"]], self.time)[0]
        mask = np.logical_or.reduce([self.masks[k] for k in _NUMBER_KINDS])
        return pd.to_numeric(cells[mask], errors="coerce").to_numpy(np.float64)

    def texts(self, cells: pd.Series) -> pd.Series:
        return cells[~self.masks["missing"]].astype(str)

    def entry(self, rho: float) -> dict[str, Any]:
        return {"rho": rho, "delta": 0.0, "kinds": dict(self.noisy)}


def _categorical(name: str, texts: pd.Series, present: int, rho: float, delta: float, rng: np.random.Generator,
                 accountant: Accountant, entry: dict, missing: bool = True) -> tuple[Column | None, dict]:
    """The values Gaussian partition selection keeps (rho-zCDP, one-row values kept with
    probability at most delta), the rest read as ``OTHER``; None for an identifier."""
    kept = gaussian_partition_selection(Counter(texts.tolist()), rho, delta, rng=rng, accountant=accountant,
                                        note=f"{name}: values")
    entry.update(rho=entry["rho"] + rho, delta=delta, kind="categorical")
    cover = sum(max(c, 0) for c in kept.values())
    how = f"Gaussian partition selection (rho={rho:.3g}, delta={delta:.3g})"
    if not kept or cover < IDENTIFIER_COVER * present:
        entry["how"] = (f"an identifier or free text: the values that survive {how} hold "
                        f"{'none' if not kept else 'under half'} of its cells")
        return None, entry | {"kind": "identifier"}
    labels = list(kept)
    other = OTHER if OTHER not in kept else _fresh_label(kept)
    entry["how"] = (f"categorical: {len(labels)} values kept by {how}, the rest read as {other!r}; missing "
                    f"{'allowed' if missing else 'never (public)'}")
    return Categorical(name, (*labels, other), missing=missing, other=other), entry


def _numeric(name: str, kind: _Kind, values: np.ndarray, bounds, bins: int, rho: float, rng: np.random.Generator,
             accountant: Accountant, entry: dict, missing: bool = True) -> tuple[Column | None, dict]:
    """A noisy magnitude histogram (``MAGNITUDE_SHARE`` of ``rho``): the bounds, unless public,
    and where the grid is fine; then a noisy histogram over that grid with a cell below and one
    above the bounds (the rest of ``rho``): the bins, and the share the bounds clip."""
    whole, time, digits = kind.whole, kind.time, kind.digits
    rho_magnitudes = MAGNITUDE_SHARE * rho
    rho_cells = rho - rho_magnitudes
    sigma_magnitudes = math.sqrt(1 / (2 * rho_magnitudes))
    magnitudes = noisy_magnitudes(values, rho_magnitudes, integer=whole, rng=rng, accountant=accountant,
                                  note=f"{name}: magnitudes")
    entry["rho"] += rho
    if bounds is not None:
        low, high = bounds
        source = "public bounds"
    else:
        passing = passing_buckets(magnitudes, magnitude_threshold(rho_magnitudes, whole))
        if passing is None:
            entry.update(kind="numeric", how=f"left out: too few rows to bound it privately at rho={rho:.3g} "
                                             "(give --bounds)")
            return None, entry
        zero = int(bucket_index(np.zeros(1), whole)[0])
        first, last = extend_bounds(magnitudes, *passing, sigma_magnitudes, zero)
        low, high = bucket_edges(first, whole)[0], bucket_edges(last, whole)[1]
        source = f"private bounds (noisy magnitudes, rho={rho_magnitudes:.3g})"
    if whole:
        low, high = math.floor(low), math.ceil(high)
    if not high > low:  # one bucket passed (a column of zeros, or a spike with a thin tail): one bin around it
        high = low + 1
    # the fine histogram in two rounds of equal noise: a grid from the magnitudes, then the same grid
    # with every cell heavier than a bin's share cut finer; a cell of both gets the mean of its counts
    sigma = math.sqrt(1 / rho_cells)  # each round has half of rho_cells: sigma^2 = 1 / (2 rho_cells / 2)
    grid = fine_grid(low, high, whole, lambda x: magnitudes[bucket_index(np.array([x]), whole)[0]], sigma)
    first = discrete_gaussian(grid_cells(values, grid), rho_cells / 2, rng=rng, accountant=accountant,
                              note=f"{name}: bins, first grid")
    finer = refined_grid(grid, first[1:-1], bins, whole, sigma)
    second = discrete_gaussian(grid_cells(values, finer), rho_cells / 2, rng=rng, accountant=accountant,
                               note=f"{name}: bins, refined grid")
    noisy = combined_counts(grid, first, finer, second)
    edges = equal_mass_edges(finer, noisy[1:-1], bins, whole, sigma / math.sqrt(2))
    total = max(float(np.maximum(noisy, 0).sum()), 1.0)
    below, above = (float(c) / total if c >= CLIP_SIGMAS * sigma else 0.0 for c in (noisy[0], noisy[-1]))
    clipped = ([f"{below:.1%} below {_num(low)}"] if below >= CLIP_NOTED else []) + \
              ([f"{above:.1%} above {_num(high)}"] if above >= CLIP_NOTED else [])
    what = f"a {time} column (in {'days' if time == 'date' else 'seconds'} since 1970)" if time else \
        "integer" if whole else f"{digits} decimal places" if digits is not None else "decimal"
    entry.update(kind="numeric", integer=whole, time=time, digits=digits, bounds=[low, high],
                 clipped={"below": below, "above": above},
                 how=f"numeric ({what}): {source} [{_num(low)}, {_num(high)}], "
                     f"{len(edges) - 1} bins of similar mass from a noisy histogram (rho={rho_cells:.3g}); missing "
                     f"{'allowed (text cells read as missing)' if missing else 'never (public)'}; " + (f"about {' and '.join(clipped)} of its values (noisy shares) are clipped into "
                                    "the edge bins (give --bounds if you know wider ones)" if clipped else
                                    "no clipping seen (the noisy counts outside are within their noise)"))
    if digits is not None:  # edges on the column's grid of places, so every bin holds a value it can write
        edges = sorted({round(e, digits) for e in edges})
    # a cell that is not a number (N/A, unknown: under TEXT_SHARE of them, by the noisy kinds) reads as missing
    return Numeric(name, tuple(_num(e) for e in edges), missing=missing, digits=digits, time=time,
                   text_missing=missing), entry


def _kinds(cells: pd.Series, tokens: set) -> dict[str, np.ndarray]:
    """Each cell's kind (``KINDS``): missing (empty, or a missing token), integer, decimal by its
    places, ISO date, ISO timestamp, or text."""
    text = cells.astype(str).str.strip()
    missing = cells.isna().to_numpy() | (text == "").to_numpy() | text.isin(tokens).to_numpy()
    numbers = pd.to_numeric(text.where(~missing), errors="coerce").to_numpy(np.float64)
    finite = np.isfinite(numbers) & ~missing
    integer = finite & (numbers == np.floor(np.where(finite, numbers, 0.0)))
    places = text.str.extract(r"\.(\d+)$", expand=False).str.len().fillna(0).to_numpy().astype(np.int64)
    decimal = finite & ~integer
    out = {"missing": missing, "integer": integer}
    for k, kind in enumerate(_DECIMAL_KINDS, start=1):
        out[kind] = decimal & ((places == k) if k < MAX_PLACES else (places >= k) | (places == 0))
    rest = ~missing & ~finite
    dates = rest & text.str.fullmatch(r"\d{4}-\d{2}-\d{2}").to_numpy(bool)
    stamps = rest & ~dates & text.str.fullmatch(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?").to_numpy(bool)
    if dates.any():
        dates &= ~parse_times(text[dates], "date")[1]
    if stamps.any():
        stamps &= ~parse_times(text[stamps], "datetime")[1]
    out.update(date=dates, datetime=stamps, text=rest & ~dates & ~stamps)
    return out


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
