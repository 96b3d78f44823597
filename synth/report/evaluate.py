"""How far released answers are from the truth: a NON-PRIVATE evaluation for the data owner.

It compares a workload's answers from a release (a model, a synthetic table, or an answers
CSV) with the exact answers on the private data, by the error measures of DESIGN.md:

* per query: the absolute error ``|true/n - released/n'|`` as a fraction of n (and relative to
  the true answer), where n is the true row count and n' the row count the release is scaled
  to (the model's ``rows``, the synthetic table's row count, or n for an answers CSV, which
  carries no row count). Comparing fractions means a synthetic table of another size, or a
  model scaled to a noisy count, is judged on its distribution, not on its row count;
* over the workload: the maximum and mean absolute error;
* per marginal S (each non-empty column subset of the workload): the L1 distance between the
  normalized true table and the normalized released table, and its mean over the marginals.
  A model or a synthetic table gives every table; an answers CSV gives a table only when its
  cell queries cover every cell of it (otherwise that marginal's L1 is ``None``).

Beside the release, two baselines are answered and scored the same way (``BASELINES``): the
product of the true 1-way marginals (what a release would get knowing only each column alone)
and the uniform distribution (knowing nothing). They are computed from the true data too.

The release's privacy record (mechanism, epsilon and delta spent, whether its n is public or
a noisy count bought from the budget, whether the run was seeded) comes from a model: its own
for a model, or the one passed beside a synthetic table or an answers CSV (``add_model_record``),
which carry none. Without one the summary says the record is not recorded.

When the schema declares constraints (``synth.data.constraints``), the evaluation also gives,
per constraint, the share of the release's rows that break it (a model's mass on the cells it
rules out; a synthetic table's rows) and, for reference, the share of the real rows that do.

Everything here reads the true data: the numbers are NOT differentially private.
"""

from __future__ import annotations

import csv
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

import numpy as np

from synth.data.constraints import compile_constraints, constraint_subsets
from synth.data.schema import Schema
from synth.data.workload import Workload
from synth.errors import SynthError
from synth.report.numbers import COUNT, fmt

__all__ = [
    "BASELINES",
    "BASELINE_NOTE",
    "NON_PRIVATE_NOTE",
    "NON_PRIVATE_TAG",
    "Baseline",
    "ConstraintCheck",
    "Evaluation",
    "EvaluationError",
    "MarginalError",
    "NOT_RECORDED",
    "Released",
    "add_model_record",
    "baselines_text",
    "check_model_schema",
    "constraints_text",
    "evaluate",
    "read_answers",
    "read_synthetic",
    "released_from_codes",
    "released_from_model",
    "released_from_tables",
    "release_record",
    "release_text",
]

NON_PRIVATE_NOTE = ("NON-PRIVATE: computed from the true data (it reads the private data); "
                    "for the data owner only, never release it")

SOURCES = ("model", "synthetic", "answers")

#: The baselines every evaluation scores beside the release: summary key -> (label, what it is).
BASELINES = {
    "independent": ("product of the true 1-way marginals",
                    "what a release would get knowing only each column alone (each column's true distribution, "
                    "the columns independent)"),
    "uniform": ("uniform", "what a release would get knowing nothing (every cell of a marginal equally likely)"),
}
#: How a line on stderr marks numbers computed from the true data.
NON_PRIVATE_TAG = "[NON-PRIVATE: computed from the true data]"
BASELINE_NOTE = ("NON-PRIVATE: the baselines are computed from the true data (the product of its 1-way marginals, "
                 "and both baselines' errors against the exact answers); for the data owner only, never release "
                 "them")

#: What the report says of a synthetic table or an answers CSV evaluated without its model.
NOT_RECORDED = "not recorded: {what} carries no privacy record; pass --model to show it"
_CARRIERS = {"model": "a model", "synthetic": "a synthetic CSV", "answers": "an answers CSV"}
#: The privacy record's entries in ``Released.info`` (``None`` where not known).
RECORD_FIELDS = ("mechanism", "epsilon", "delta", "rows_public", "seeded")

Tables = Mapping[tuple, np.ndarray] | Callable[[tuple], np.ndarray]


class EvaluationError(SynthError):
    """A release that does not fit the data, schema or workload it is evaluated against."""


# -- what was released ----------------------------------------------------------------------


@dataclass
class Released:
    """A release's answers to a workload, on the scale it was released at.

    ``answers`` are counts (rows) in workload order, scaled to ``rows`` (``None``: to the true
    n). ``tables`` holds, for column subsets where the release determines the whole marginal,
    its table as fractions of ``rows`` (cells summing to 1 for a model or a synthetic table).
    ``info`` describes the source (mechanism, privacy spent, path...) for the report.
    """

    kind: str
    answers: np.ndarray
    rows: float | None = None
    tables: dict[tuple[str, ...], np.ndarray] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in SOURCES:
            raise ValueError(f"kind ({self.kind!r}) must be one of: {', '.join(SOURCES)}")
        self.answers = np.asarray(self.answers, dtype=np.float64).reshape(-1)
        if self.rows is not None and not (math.isfinite(self.rows) and self.rows > 0):
            raise ValueError(f"rows ({self.rows!r}) must be a positive number or None")


def check_model_schema(model_schema: Schema, schema: Schema, source: object = "model") -> None:
    """Refuse a model over other columns (or other values or bins) than ``schema``'s."""
    if model_schema.names != schema.names:
        raise EvaluationError(
            f"{source}: the model is over columns {', '.join(model_schema.names)} but the schema selection is "
            f"{', '.join(schema.names)}; select the model's columns (--columns {','.join(model_schema.names)})"
        )
    for ours, theirs in zip(model_schema, schema):
        if ours != theirs:
            raise EvaluationError(
                f"{source}: column {ours.name!r} differs between the model ({_column_text(ours)}) and the schema "
                f"({_column_text(theirs)}); evaluate the model under the schema it was fitted with"
            )


def _column_text(column) -> str:
    entry = column.to_dict()
    entry.pop("name", None)
    text = ", ".join(f"{k}={v}" for k, v in entry.items())
    return text if len(text) <= 80 else text[:77] + "..."


def _model_record(model) -> dict[str, Any]:
    privacy = model.privacy or {}
    spent, budget = privacy.get("spent", {}), privacy.get("budget", {})
    return {"mechanism": model.mechanism, "epsilon": spent.get("epsilon", budget.get("epsilon")),
            "delta": spent.get("delta", budget.get("delta")), "rows_public": bool(model.rows_public),
            "seeded": bool(model.seeded)}


def released_from_model(model, workload: Workload, *, source: object = "model") -> Released:
    """The answers of a ``synth.models.model.Model`` (``model.answer``) and its marginal tables."""
    from synth.models.distribution import as_distribution

    check_model_schema(model.schema, workload.schema, source)
    subsets = list(dict.fromkeys([*workload.subsets, *constraint_subsets(workload.schema)]))
    if isinstance(model.distribution, np.ndarray) and not float(model.distribution.sum()) > 0:
        raise EvaluationError(f"{source}: the model's distribution sums to 0")
    tables = dict(zip(subsets, as_distribution(model.distribution, model.schema).marginals(subsets)))
    answers = model.rows * workload.answer(tables)
    info = {**_model_record(model), "privacy_record": "the model's own"}
    return Released("model", answers, float(model.rows), tables, info)


def add_model_record(released: Released, model, workload: Workload, *, source: object = "model") -> Released:
    """Give a synthetic table's or an answers CSV's ``released`` the privacy record of ``model``,
    the release it came from (its mechanism, privacy spent, n and whether it was seeded).

    The model must be over the workload's columns; for an answers CSV whose ``privacy`` column
    names how it was made, it must name the model's mechanism (answers from another run, or
    exact answers, are refused). Returns ``released``, its ``info`` updated.
    """
    if released.kind == "model":
        raise ValueError("released is a model's: it carries its own record")
    check_model_schema(model.schema, workload.schema, source)
    label = released.info.get("privacy")
    if label is not None and not re.search(rf"\b{re.escape(model.mechanism)}\b", label):
        raise EvaluationError(
            f"{source}: the model is a {model.mechanism} release but {released.info.get('path', 'the answers')} "
            f"says its answers are {label!r}; pass the model saved by the run that wrote the answers "
            "(synth answer --save-model)"
        )
    released.info.update(_model_record(model), model_rows=float(model.rows), model=str(source),
                         privacy_record=f"from the model {source}")
    return released


def release_record(kind: str, info: Mapping[str, Any]) -> dict[str, Any]:
    """The privacy record of a release for the report: ``RECORD_FIELDS`` (``None`` where not
    known), ``n_status`` (``"public"``, ``"noisy count"`` or ``None``) and ``privacy_record``
    (where it came from, or ``NOT_RECORDED`` when nothing is known)."""
    record = {name: info.get(name) for name in RECORD_FIELDS}
    public = record["rows_public"]
    record["n_status"] = None if public is None else "public" if public else "noisy count"
    if info.get("privacy_record"):
        record["privacy_record"] = info["privacy_record"]
    elif all(record[name] is None for name in RECORD_FIELDS):
        record["privacy_record"] = NOT_RECORDED.format(what=_CARRIERS.get(kind, "the release"))
    else:  # a caller set part of it by hand
        record["privacy_record"] = "partly recorded: the entries it lacks are not recorded"
    return record


def released_from_tables(tables: Mapping[tuple[str, ...], np.ndarray], workload: Workload, *,
                         kind: str = "synthetic") -> Released:
    """Answers from count tables of a synthetic table (one per subset of the workload; any other
    table, such as one over a constraint's columns, is kept among the fractions too)."""
    counts = {tuple(s): np.asarray(t) for s, t in tables.items()}
    missing = [s for s in workload.subsets if s not in counts]
    if missing:
        raise ValueError(f"no table for the column subset {missing[0]}")
    rows = float(next(iter(counts.values())).sum()) if counts else 0.0
    if not rows > 0:
        raise EvaluationError("the synthetic table has no rows")
    answers = workload.answer(counts).astype(np.float64)
    fractions = {s: counts[s] / rows for s in counts}
    return Released(kind, answers, rows, fractions, {})


def released_from_codes(codes: np.ndarray, workload: Workload) -> Released:
    """Answers on a synthetic table given as rows of codes under ``workload.schema``."""
    from synth.data.tables import marginal

    subsets = dict.fromkeys([*workload.subsets, *constraint_subsets(workload.schema)])
    return released_from_tables({s: marginal(codes, workload.schema, s) for s in subsets}, workload)


def read_synthetic(path: str | os.PathLike, schema: Schema, workload: Workload, *,
                   columns: str | list[str] | None = None, progress=None) -> Released:
    """Read a synthetic CSV under ``schema`` (restricted to ``columns``) and answer the workload.

    Values outside the schema raise ``DataError`` (naming row, column and value); numeric
    values outside the bin edges, which ``synth.data.reading`` would clip, are refused too: a synthetic
    table drawn under the schema has none, so they mean the table belongs to another schema.
    """
    from synth.data.reading import scan

    result = scan(path, schema, [*workload.subsets, *constraint_subsets(workload.schema)], columns=columns,
                  progress=progress)
    if result.clipped:
        name, count = next(iter(result.clipped.items()))
        raise EvaluationError(
            f"{path}: column {name!r}: {fmt(count, COUNT)} values lie outside the schema's bin edges; a synthetic "
            "table "
            "drawn under this schema has none (is it for another schema?)"
        )
    released = released_from_tables(result.tables, workload)
    released.info["path"] = str(path)
    return released


def read_answers(path: str | os.PathLike, workload: Workload) -> Released:
    """Read an answers CSV as written by ``synth answer`` (columns ``query_id`` and ``answer``).

    Every query of the workload must have exactly one answer; when the CSV has a ``query``
    column, each text must be the workload's description of that query (so answers to another
    workload, or to other --columns, are refused). The answers are counts on the scale of the
    true n (the CSV carries no row count).
    """
    rows = _read_csv_rows(path)
    if not rows:
        raise EvaluationError(f"{path}: no answers (expected a CSV with a header and one row per query)")
    header = rows[0]
    missing = [c for c in ("query_id", "answer") if c not in header]
    if missing:
        raise EvaluationError(
            f"{path}: not an answers CSV: no column {missing[0]!r} (expected query_id and answer, as written by "
            f"synth answer); header: {', '.join(header)}"
        )
    body = rows[1:]
    if len(body) != len(workload):
        raise EvaluationError(
            f"{path}: has {fmt(len(body), COUNT)} answers but the workload has {fmt(len(workload), COUNT)} queries; "
            "answer this "
            "workload (with the same --columns) to evaluate it"
        )
    at = {name: header.index(name) for name in ("query_id", "answer", "query", "privacy") if name in header}
    answers = np.full(len(workload), np.nan)
    seen = np.zeros(len(workload), dtype=bool)
    privacy = set()
    for line, row in enumerate(body, start=1):
        if len(row) != len(header):
            raise EvaluationError(f"{path}: row {line}: has {len(row)} fields, the header has {len(header)}")
        text = row[at["query_id"]].strip()
        try:
            qid = int(text)
        except ValueError:
            raise EvaluationError(f"{path}: row {line}, column 'query_id': {text!r} is not an integer") from None
        if not 0 <= qid < len(workload):
            raise EvaluationError(
                f"{path}: row {line}, column 'query_id': {qid} is not a query of the workload (0..{len(workload) - 1})"
            )
        if seen[qid]:
            raise EvaluationError(f"{path}: row {line}, column 'query_id': query {qid} is answered twice")
        seen[qid] = True
        if "query" in at and row[at["query"]] != workload.describe(qid):
            raise EvaluationError(
                f"{path}: row {line}: query {qid} is {row[at['query']]!r} but the workload's query {qid} is "
                f"{workload.describe(qid)!r}; answer this workload (with the same --columns) to evaluate it"
            )
        try:
            value = float(row[at["answer"]])
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise EvaluationError(f"{path}: row {line}, column 'answer': {row[at['answer']]!r} is not a finite number")
        answers[qid] = value
        if "privacy" in at:
            privacy.add(row[at["privacy"]])
    info: dict[str, Any] = {"path": str(path)}
    if privacy:
        info["privacy"] = "; ".join(sorted(privacy))
    return Released("answers", answers, None, {}, info)


def _read_csv_rows(path) -> list[list[str]]:
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            return [row for row in csv.reader(handle) if row]
    except FileNotFoundError:
        raise EvaluationError(f"{path}: no such file") from None
    except UnicodeDecodeError:
        raise EvaluationError(f"{path}: not UTF-8 text") from None
    except csv.Error as exc:
        raise EvaluationError(f"{path}: malformed CSV: {exc}") from None


# -- the comparison -------------------------------------------------------------------------


@dataclass(frozen=True)
class MarginalError:
    """The L1 distance between the normalized true and released tables of one marginal."""

    columns: tuple[str, ...]
    cells: int
    queries: int
    l1: float | None  # None: the release does not determine this marginal's table
    #: The baselines' L1 distances for this marginal (``BASELINES`` keys; always known).
    baselines: dict[str, float] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class ConstraintCheck:
    """One declared constraint: the share of the release's rows that break it (a model's mass on
    the cells it rules out; None where the release gives no table over its columns) and of the
    real rows (NON-PRIVATE; None where the truth gives no such table)."""

    constraint: str
    columns: tuple[str, ...]
    released_share: float | None
    real_share: float | None


@dataclass
class Baseline:
    """A baseline's answers (fractions, workload order) and errors, scored as the release is.

    ``marginal_l1`` maps each marginal's columns to the L1 distance between the normalized
    true table and the baseline's table. NON-PRIVATE: computed from the true data.
    """

    name: str
    label: str
    description: str
    released_fraction: np.ndarray
    absolute_error: np.ndarray
    relative_error: np.ndarray
    marginal_l1: dict[tuple[str, ...], float]


@dataclass
class Evaluation:
    """Per-query answers and errors (workload order), per-marginal L1 errors, and the summary.

    ``true`` holds the exact counts; ``released`` the released answers scaled to the true n
    (``released_fraction * n``), so both are counts on one scale. ``absolute_error`` is
    ``|true_fraction - released_fraction|`` (a fraction of n); ``relative_error`` is that over
    ``true_fraction`` (NaN where the true count is 0).
    """

    workload: Workload
    n: int
    kind: str
    released_rows: float
    true: np.ndarray
    released: np.ndarray
    true_fraction: np.ndarray
    released_fraction: np.ndarray
    absolute_error: np.ndarray
    relative_error: np.ndarray
    marginals: list[MarginalError]
    info: dict[str, Any] = field(default_factory=dict)
    #: ``BASELINES`` keys -> their scores (NON-PRIVATE).
    baselines: dict[str, Baseline] = field(default_factory=dict)
    #: The schema's declared constraints, each with the share of rows that break it.
    constraints: list[ConstraintCheck] = field(default_factory=list)

    @property
    def marginal_l1(self) -> list[float]:
        """The L1 errors of the marginals the release determines."""
        return [m.l1 for m in self.marginals if m.l1 is not None]

    def baseline_marginal_l1(self, name: str) -> list[float]:
        """A baseline's L1 errors on the marginals the release determines (so the two compare)."""
        return [m.baselines[name] for m in self.marginals if m.l1 is not None]

    def summary(self) -> dict[str, Any]:
        """The numbers of the report (JSON-ready: floats, ints, strings, lists and None).

        ``baselines`` holds, per ``BASELINES`` key, the same measures as the release's (under
        the same keys), its ``label`` and ``description``; its marginal L1 measures are over the
        marginals the release determines. Each entry of ``marginals`` has ``baseline_l1``.
        """
        abs_err = self.absolute_error
        l1 = self.marginal_l1
        return {
            "privacy": NON_PRIVATE_NOTE,
            "n": int(self.n),
            "queries": len(self.workload),
            "columns": list(self.workload.schema.names),
            "source": {"kind": self.kind, "rows": _number(self.released_rows), **_jsonable(self.info),
                       **_jsonable(release_record(self.kind, self.info))},
            **_measures(abs_err, self.relative_error, l1, self.n),
            "worst_query": int(np.argmax(abs_err)) if abs_err.size else None,
            "marginals_evaluated": len(l1),
            "marginals_total": len(self.marginals),
            "baselines": {
                "privacy": BASELINE_NOTE,
                **{name: {"label": b.label, "description": b.description,
                          **_measures(b.absolute_error, b.relative_error, self.baseline_marginal_l1(name), self.n)}
                   for name, b in self.baselines.items()},
            },
            "marginals": [{"columns": list(m.columns), "cells": m.cells, "queries": m.queries,
                           "l1": _number(m.l1) if m.l1 is not None else None,
                           "baseline_l1": {name: _number(v) for name, v in m.baselines.items()}}
                          for m in self.marginals],
            **({"constraints": {"privacy": CONSTRAINTS_NOTE, "checks": [
                {"constraint": c.constraint, "columns": list(c.columns),
                 "released_violating_share": None if c.released_share is None else _number(c.released_share),
                 "real_violating_share": None if c.real_share is None else _number(c.real_share)}
                for c in self.constraints]}} if self.constraints else {}),
        }

    def write_answers_csv(self, handle: TextIO) -> None:
        """query_id, name, query, true, released, absolute error, relative error (one row per query).

        ``true`` and ``released`` are counts at the true n (``released`` to 10 significant
        digits); the errors are fractions (of n and of the true answer, 6 significant digits);
        the relative error is empty where the true count is 0.
        """
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["query_id", "name", "query", "true", "released", "absolute error", "relative error"])
        for i in range(len(self.workload)):
            relative = self.relative_error[i]
            writer.writerow([i, self.workload[i].name or "", self.workload.describe(i), _count_text(self.true[i]),
                             f"{self.released[i]:.10g}", f"{self.absolute_error[i]:.6g}",
                             f"{relative:.6g}" if math.isfinite(relative) else ""])


def evaluate(truth: np.ndarray | Tables, workload: Workload, released: Released | np.ndarray, *,
             n: int | None = None, info: Mapping[str, Any] | None = None) -> Evaluation:
    """Compare ``released`` with the exact answers of ``workload`` on ``truth``.

    ``truth`` is the private data as codes ``(n, len(workload.schema))``, or its count table
    for every column subset of the workload (a mapping or a function, as from
    ``synth.data.reading.scan``). ``released`` is a ``Released`` or a plain array of answers in rows
    on the scale of the true n. ``n`` defaults to the codes' row count (or a table's total).
    """
    if len(workload) == 0:
        raise EvaluationError("the workload has no queries")
    if not isinstance(released, Released):
        released = Released("answers", released)
    if released.answers.shape != (len(workload),):
        raise EvaluationError(
            f"{fmt(released.answers.size, COUNT)} released answers for a workload of "
            f"{fmt(len(workload), COUNT)} queries"
        )
    if not np.all(np.isfinite(released.answers)):
        raise EvaluationError("the released answers include a non-finite value")
    subsets = workload.subsets
    true_tables = _true_tables(truth, workload)
    if n is None:
        n = int(np.asarray(true_tables[subsets[0]]).sum())
    if not n > 0:
        raise EvaluationError("the data has no rows")
    true = workload.answer(true_tables)
    rows = float(released.rows) if released.rows is not None else float(n)
    true_fraction = true / n
    released_fraction = released.answers / rows
    difference = np.abs(true_fraction - released_fraction)
    with np.errstate(divide="ignore", invalid="ignore"):
        relative = np.where(true > 0, difference / true_fraction, np.nan)
    released_tables = dict(released.tables)
    if not released_tables:  # answers only: whole marginals where cell queries cover them
        released_tables = _tables_from_cells(workload, released_fraction)
    groups = workload.groups()
    true_fractions = {s: np.asarray(true_tables[s], dtype=np.float64) / n for s in subsets}
    baseline_tables = {name: {s: _baseline_table(name, true_fractions[s]) for s in subsets} for name in BASELINES}
    baselines = {}
    for name, (label, description) in BASELINES.items():
        answered = workload.answer(baseline_tables[name]).astype(np.float64)
        error = np.abs(true_fraction - answered)
        with np.errstate(divide="ignore", invalid="ignore"):
            baseline_relative = np.where(true > 0, error / true_fraction, np.nan)
        l1s = {s: float(np.abs(true_fractions[s] - baseline_tables[name][s]).sum()) for s in subsets if s}
        baselines[name] = Baseline(name, label, description, answered, error, baseline_relative, l1s)
    marginals = []
    for subset in subsets:
        if not subset:  # the "all rows" query: no marginal to compare
            continue
        table = true_fractions[subset]
        theirs = released_tables.get(subset)
        l1 = None if theirs is None else float(np.abs(table - np.asarray(theirs, dtype=np.float64)).sum())
        marginals.append(MarginalError(subset, int(table.size), int(groups[subset].size), l1,
                                       {name: b.marginal_l1[subset] for name, b in baselines.items()}))
    details = {**released.info, **(info or {})}
    checks = [ConstraintCheck(c.label, c.columns, _share(c, released.tables.get(c.columns)),
                              _share(c, _truth_table(truth, workload.schema, c.columns)))
              for c in compile_constraints(workload.schema)]
    return Evaluation(workload, int(n), released.kind, rows, np.asarray(true), released_fraction * n, true_fraction,
                      released_fraction, difference, relative, marginals, details, baselines, checks)


#: What summary.json says of the constraint shares.
CONSTRAINTS_NOTE = ("the share of rows that break each declared constraint: released_violating_share from the release "
                    "(a model's mass on the rows it rules out; a synthetic table's rows), real_violating_share from "
                    "the true data, NON-PRIVATE, for reference only")


def _share(compiled, table) -> float | None:
    return None if table is None else compiled.violated_share(table)


def _truth_table(truth, schema: Schema, columns: tuple[str, ...]) -> np.ndarray | None:
    """The true count table over ``columns``, or None where ``truth`` does not hold it."""
    if isinstance(truth, np.ndarray):
        from synth.data.tables import marginal

        return marginal(truth, schema, columns)
    if isinstance(truth, Mapping):
        return truth.get(columns)
    try:
        return np.asarray(truth(columns))
    except (SynthError, KeyError):
        return None


def _baseline_table(name: str, true: np.ndarray) -> np.ndarray:
    """A baseline's table (fractions) for one marginal, given that marginal's true fractions.

    ``independent``: the outer product of the table's own 1-way marginals (the true 1-way
    marginals); ``uniform``: the same mass in every cell. A table of no column is the total.
    """
    if true.ndim == 0:
        return np.asarray(float(true.sum()))
    if name == "uniform":
        return np.full(true.shape, float(true.sum()) / true.size)
    product = np.ones(())
    for axis in range(true.ndim):
        product = np.multiply.outer(product, true.sum(axis=tuple(j for j in range(true.ndim) if j != axis)))
    total = float(true.sum())
    return product / total ** (true.ndim - 1) if total > 0 else product


def _true_tables(truth, workload: Workload) -> dict[tuple[str, ...], np.ndarray]:
    if isinstance(truth, np.ndarray):
        from synth.data.tables import marginal

        if truth.ndim != 2 or truth.shape[1] != len(workload.schema):
            raise ValueError(f"codes must have shape (n, {len(workload.schema)}), got {truth.shape}")
        return {s: marginal(truth, workload.schema, s) for s in workload.subsets}
    get = truth.__getitem__ if isinstance(truth, Mapping) else truth
    return {s: np.asarray(get(s)) for s in workload.subsets}


def _tables_from_cells(workload: Workload, fractions: np.ndarray) -> dict[tuple[str, ...], np.ndarray]:
    """Released tables of the marginals whose every cell is answered by a cell query."""
    tables = {}
    for subset, ids in workload.groups().items():
        if not subset:
            continue
        shape = tuple(workload.schema[c].size for c in subset)
        table = np.full(shape, np.nan)
        for i in ids.tolist():
            query = workload[i]
            if query.is_cell:
                table[tuple(int(a[0]) for a in query.allowed)] = fractions[i]
        if not np.isnan(table).any():
            tables[subset] = table
    return tables


def _measures(abs_err: np.ndarray, relative: np.ndarray, l1: list[float], n: int) -> dict[str, float | None]:
    """The error measures of the summary, for the release and for each baseline (one set of keys)."""
    rel = relative[np.isfinite(relative)]
    some = bool(abs_err.size)
    return {
        "max_absolute_error": _number(abs_err.max()) if some else None,
        "mean_absolute_error": _number(abs_err.mean()) if some else None,
        "median_absolute_error": _number(np.median(abs_err)) if some else None,
        "max_absolute_error_rows": _number(abs_err.max() * n) if some else None,
        "mean_absolute_error_rows": _number(abs_err.mean() * n) if some else None,
        "mean_relative_error": _number(rel.mean()) if rel.size else None,
        "mean_marginal_l1": _number(np.mean(l1)) if l1 else None,
        "max_marginal_l1": _number(np.max(l1)) if l1 else None,
    }


def release_text(summary: Mapping[str, Any]) -> str:
    """The release's headline numbers from ``summary``, for a line on stderr."""
    text = (f"max absolute error {fmt(summary['max_absolute_error'])} of n, mean "
            f"{fmt(summary['mean_absolute_error'])}, over {fmt(summary['queries'], COUNT)} queries "
            f"(n={fmt(summary['n'], COUNT)})")
    if summary["mean_marginal_l1"] is not None:
        text += (f"; mean L1 per marginal {fmt(summary['mean_marginal_l1'])} over "
                 f"{fmt(summary['marginals_evaluated'], COUNT)} of {fmt(summary['marginals_total'], COUNT)} marginals")
    return text


#: What the release's share of rows breaking a constraint is a share of, by its kind.
_BREAKING = {"model": "of the model's mass", "synthetic": "of the synthetic rows", "answers": "of the released rows"}


def constraints_text(evaluation: Evaluation) -> list[str]:
    """One line per declared constraint for stderr: the share of the release's rows that break it
    and, marked NON-PRIVATE, of the real rows."""
    lines = []
    for c in evaluation.constraints:
        released = ("not known (the release gives no table over its columns)" if c.released_share is None
                    else f"{fmt(c.released_share)} {_BREAKING[evaluation.kind]}")
        lines.append(f"constraint {c.constraint}: broken by {released}; by {fmt(c.real_share)} of the real rows "
                     f"{NON_PRIVATE_TAG}")
    return lines


def baselines_text(summary: Mapping[str, Any]) -> str:
    """The baselines' headline numbers from ``summary``, for a line on stderr (NON-PRIVATE)."""
    parts = []
    for name in BASELINES:
        b = summary["baselines"][name]
        part = f"{b['label']}: max absolute error {fmt(b['max_absolute_error'])} of n"
        if b["mean_marginal_l1"] is not None:
            part += f", mean L1 per marginal {fmt(b['mean_marginal_l1'])}"
        parts.append(part)
    return "baselines, for comparison: " + "; ".join(parts) + " " + NON_PRIVATE_TAG


def _number(value) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def _count_text(value) -> str:
    value = float(value)
    return str(int(value)) if value.is_integer() else f"{value:.6g}"


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return _number(obj)
    return obj
