"""Per-column fidelity of a synthetic table against the real one (NON-PRIVATE).

Both tables are read under the schema (``read_table``): every column's codes (the missing
value its own code; a label outside a categorical column's values reads as its ``other``
label), and for each numeric column its raw numbers (NaN where missing), not its bins.

``column_fidelity`` measures, per column:

* categorical and coded columns: ``tv``, the total-variation distance between the real and
  synthetic distributions of codes, the missing value counted as a value
  (``0.5 * sum |p - q|``, 0 to 1);
* numeric columns: ``w1_over_range``, the Wasserstein-1 distance between the real and
  synthetic values present (not missing) divided by the schema's public range (last edge
  minus first edge), and ``ks``, the two-sample Kolmogorov-Smirnov statistic (scipy);
* every column: ``missing_real`` and ``missing_synthetic``, the share of rows missing.

``column_histograms`` gives the shares per code of each column (numbers binned by the
schema's edges) for the report's plots.

Everything here reads the real data: the numbers are NOT differentially private.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from synth.data.schema import Categorical, Numeric, Schema
from synth.data.values import parse_times
from synth.report.numbers import fmt

__all__ = ["ColumnHistogram", "Table", "column_fidelity", "column_histograms", "fidelity_text", "read_table"]

#: The ``kind`` of each column in ``column_fidelity``.
KINDS = ("categorical", "coded", "numeric")


@dataclass
class Table:
    """A table's codes under ``schema`` (shape ``(n, len(schema))``) and, per numeric column,
    its raw values (float64, NaN where missing)."""

    schema: Schema
    codes: np.ndarray
    numbers: dict[str, np.ndarray] = field(default_factory=dict)
    path: str = ""
    dropped: int = 0

    @property
    def n_rows(self) -> int:
        return int(self.codes.shape[0])

    def take(self, rows: np.ndarray) -> Table:
        """The table of ``rows`` (indices or a mask)."""
        return Table(self.schema, self.codes[rows], {k: v[rows] for k, v in self.numbers.items()}, self.path)


def read_table(path: str | os.PathLike, schema: Schema, *, columns: str | list[str] | None = None,
               bad_rows: str = "error") -> Table:
    """Read a CSV under ``schema`` (restricted to ``columns``): codes, and raw numbers of the
    numeric columns. A value outside the schema raises ``DataError`` (``bad_rows="error"``) or
    drops its row (``"drop"``; ``Table.dropped`` counts them, NON-PRIVATE for the real data)."""
    import pandas as pd

    from synth.data import reading
    from synth.errors import DataError, locate

    reading.check_bad_rows(bad_rows)
    selected = schema.select(columns)
    header = reading._read_header(path)
    reading._check_header(header, schema, selected, path)
    dtypes = {c.name: "category" for c in selected if isinstance(c, Categorical) and not c.numeric_labels}
    with open(path, "rb") as handle:
        frames = list(reading.csv_chunks(handle, path, dtype=dtypes, missing_tokens=selected.missing_tokens))
    frame = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    if len(frame) == 0:
        raise DataError(f"{path}: has a header but no data rows")
    codes = np.empty((len(frame), len(selected)), dtype=np.int64)
    bad = np.zeros(len(frame), dtype=bool)
    for j, column in enumerate(selected):
        problems = reading._Problems(len(frame))
        codes[:, j], _ = reading._encode_column(frame[column.name], column, problems, selected.missing_tokens)
        if problems.first is not None:
            if bad_rows == "error":
                row, message = problems.first
                raise DataError(locate(f"{message} {reading.PRIVATE_VALUE_NOTE}", file=path, row=row + 1,
                                       column=column.name))
            bad |= problems.mask
    numbers = {}
    for j, column in enumerate(selected):
        if isinstance(column, Numeric):
            series = frame[column.name]
            if series.dtype == object:
                series = series.map(lambda v: v.strip() if isinstance(v, str) else v)
            if column.time is not None:  # ISO dates or timestamps: days or seconds since 1970
                values = parse_times(series, column.time)[0]
            else:
                values = np.array(pd.to_numeric(series, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan))
            if column.missing:
                values[codes[:, j] == column.missing_code] = np.nan
            numbers[column.name] = values
    table = Table(selected, codes, numbers, str(path))
    if bad.any():
        table = table.take(~bad)
        table.dropped = int(bad.sum())
        if table.n_rows == 0:
            raise DataError(reading.all_dropped(str(path)))
    return table


def _kind(column) -> str:
    return "numeric" if isinstance(column, Numeric) else "categorical" if isinstance(column, Categorical) else "coded"


def _shares(codes: np.ndarray, size: int) -> np.ndarray:
    counts = np.bincount(np.asarray(codes, dtype=np.int64), minlength=size).astype(np.float64)
    return counts / max(codes.size, 1)


def _missing_share(table: Table, j: int) -> float:
    column = list(table.schema)[j]
    if not column.missing:
        return 0.0
    return float(np.mean(table.codes[:, j] == column.missing_code)) if table.n_rows else 0.0


def column_fidelity(real: Table, synthetic: Table) -> dict[str, dict[str, Any]]:
    """``{name: {kind, tv | (w1_over_range, ks), missing_real, missing_synthetic}}`` in schema
    order (see the module docstring); ``None`` where a measure has nothing to compare (a
    numeric column with no value present in one of the tables)."""
    from scipy.stats import ks_2samp, wasserstein_distance

    if list(real.schema.names) != list(synthetic.schema.names):
        raise ValueError(f"the tables' columns differ: {', '.join(real.schema.names)} against "
                         f"{', '.join(synthetic.schema.names)}")
    out: dict[str, dict[str, Any]] = {}
    for j, column in enumerate(real.schema):
        entry: dict[str, Any] = {"kind": _kind(column)}
        if isinstance(column, Numeric):
            a, b = real.numbers[column.name], synthetic.numbers[column.name]
            a, b = a[~np.isnan(a)], b[~np.isnan(b)]
            span = float(column.edges[-1]) - float(column.edges[0])
            if a.size and b.size:
                entry["w1_over_range"] = float(wasserstein_distance(a, b)) / span
                entry["ks"] = float(ks_2samp(a, b).statistic)
            else:
                entry["w1_over_range"] = entry["ks"] = None
        else:
            p, q = _shares(real.codes[:, j], column.size), _shares(synthetic.codes[:, j], column.size)
            entry["tv"] = 0.5 * float(np.abs(p - q).sum())
        entry["missing_real"] = _missing_share(real, j)
        entry["missing_synthetic"] = _missing_share(synthetic, j)
        out[column.name] = entry
    return out


def fidelity_text(fidelity: Mapping[str, Mapping[str, Any]]) -> str:
    """One line for stderr: the mean TV over the categorical (and coded) columns and each
    numeric column's W1/range."""
    tvs = [e["tv"] for e in fidelity.values() if "tv" in e]
    parts = []
    if tvs:
        parts.append(f"mean TV over {len(tvs)} categorical columns {fmt(float(np.mean(tvs)))}")
    numeric = [(name, e["w1_over_range"]) for name, e in fidelity.items() if e["kind"] == "numeric"]
    if numeric:
        parts.append("W1/range " + ", ".join(f"{name} {fmt(value)}" for name, value in numeric))
    return "column fidelity: " + ("; ".join(parts) if parts else "no column")


@dataclass(frozen=True)
class ColumnHistogram:
    """One column's shares per code, real and synthetic, with the codes' labels."""

    name: str
    kind: str
    labels: tuple[str, ...]
    real: np.ndarray
    synthetic: np.ndarray


def _labels(column) -> list[str]:
    if isinstance(column, Categorical):
        labels = [str(v) for v in column.values]
    elif isinstance(column, Numeric):
        labels = [column.interval(i, i) for i in range(column.n_values)]
    else:
        labels = [str(i) for i in range(column.n_values)]
    return labels + (["missing"] if column.missing else [])


def column_histograms(real: Table, synthetic: Table) -> list[ColumnHistogram]:
    """Per column, the real and synthetic shares of each code (numbers by the schema's bins;
    values outside the edges counted in the edge bins), the missing code last."""
    return [ColumnHistogram(column.name, _kind(column), tuple(_labels(column)),
                            _shares(real.codes[:, j], column.size), _shares(synthetic.codes[:, j], column.size))
            for j, column in enumerate(real.schema)]
