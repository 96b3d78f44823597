"""What the benchmarks share about their data: adult (and titanic) from ``../shared/datasets``,
projections of it, the marginal workloads measured on it and their error (``mean_l1``); and
synthetic universes of coded columns with seeded skewed rows, and PMW's typical queries on them."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from synth.data.reading import code_dtype, read
from synth.data.schema import Coded, Schema
from synth.data.tables import marginal, marginals_from_dense
from synth.data.workload import Query, Workload
from synth.models.distribution import as_distribution

DEFAULT_DATA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"

#: The adult configuration of the engine comparisons: 7 columns, 120,960 cells, 35 3-way
#: marginals (8,453 cell queries), 48,842 public rows.
SEVEN = ("workclass", "education-num", "marital-status", "relationship", "race", "sex", "income>50K")
#: A smaller adult subset: 840 cells, 10 3-way marginals.
FIVE = ("marital-status", "relationship", "race", "sex", "income>50K")

Tables = Mapping[tuple[str, ...], np.ndarray] | Callable[[tuple[str, ...]], np.ndarray]


def load_table(data_dir: Path, name: str) -> tuple[Schema, np.ndarray]:
    """An integer-coded benchmark table (``NAME.csv`` with ``NAME-domain.json``): its schema and
    every row's codes, read through synth."""
    schema = Schema.load(data_dir / f"{name}-domain.json")
    return schema, read(data_dir / f"{name}.csv", schema).codes


def project_codes(schema: Schema, codes: np.ndarray, columns: Sequence[str]) -> tuple[Schema, np.ndarray]:
    """The sub-schema over ``columns`` and the matching contiguous code array (smallest dtype)."""
    sub = schema.project(columns)
    positions = [schema.index(name) for name in columns]
    return sub, np.ascontiguousarray(codes[:, positions], dtype=code_dtype(sub))


def mean_l1(model: Tables, truth: Mapping[tuple[str, ...], np.ndarray]) -> float:
    """The error of every benchmark: the mean over the marginals (``truth``'s keys) of the L1
    distance between the normalized true table and the model's (a mapping or a function)."""
    get = model.__getitem__ if isinstance(model, Mapping) else model
    return float(np.mean([np.abs(get(s) - t).sum() for s, t in truth.items()]))


@dataclass
class Marginals:
    """All ``way``-way marginals of some adult columns: the rows, the workload (cell queries)
    and the normalized true tables, and the error of a release against them."""

    label: str
    schema: Schema
    codes: np.ndarray
    workload: Workload
    truth: dict[tuple[str, ...], np.ndarray]  # subset -> true table / n

    @classmethod
    def of(cls, adult: tuple[Schema, np.ndarray], columns: Sequence[str], way: int = 3,
           label: str | None = None) -> Marginals:
        schema, codes = project_codes(*adult, columns)
        workload = Workload.marginals(schema, way)
        truth = {s: marginal(codes, schema, s) / len(codes) for s in workload.subsets}
        return cls(label or f"{len(columns)} columns", schema, codes, workload, truth)

    @property
    def rows(self) -> int:
        return len(self.codes)

    @property
    def marginals(self) -> int:
        return len(self.truth)

    def describe(self) -> str:
        return (f"{self.label}: {self.schema.universe_size:,} cells, {self.marginals} marginals "
                f"({len(self.workload):,} cell queries), n = {self.rows:,}")

    def error(self, distribution: np.ndarray) -> float:
        """``mean_l1`` of a distribution over the universe (one fused walk for every table)."""
        tables = marginals_from_dense(distribution, self.schema, list(self.truth))
        return mean_l1(dict(zip(self.truth, tables)), self.truth)

    def model_error(self, distribution) -> float:
        """``mean_l1`` of a released distribution, dense or factored (``as_distribution``)."""
        model = as_distribution(distribution, self.schema)
        return mean_l1(dict(zip(self.truth, model.marginals(list(self.truth)))), self.truth)

    def answers_error(self, answers: np.ndarray) -> float:
        """``mean_l1`` of released answers to the workload's cell queries (in rows, workload
        order), each marginal's answers divided by n."""
        tables = {s: np.zeros_like(t) for s, t in self.truth.items()}
        for i, query in enumerate(self.workload):
            if not query.is_cell:
                raise ValueError(f"query {i} is not one cell of a marginal: answers_error needs cell queries")
            tables[query.columns][tuple(int(a[0]) for a in query.allowed)] = answers[i] / self.rows
        return mean_l1(tables, self.truth)

    def uniform_error(self) -> float:
        """The error of the uniform distribution (the engines' usual starting point)."""
        return mean_l1(lambda s: np.full(self.truth[s].shape, 1.0 / self.truth[s].size), self.truth)

    def independent_error(self) -> float:
        """The error of the product of the exact (non-private) 1-way marginals."""
        ones = {c: marginal(self.codes, self.schema, (c,)) / self.rows for c in self.schema.names}

        def product(subset):
            table = np.ones(())
            for c in subset:
                table = np.multiply.outer(table, ones[c])
            return table

        return mean_l1(product, self.truth)


# -- synthetic universes ---------------------------------------------------------------------


def coded_schema(sizes: Sequence[int], prefix: str = "c") -> Schema:
    """A schema of ``Coded`` columns ``c0, c1, ...`` with ``sizes`` codes."""
    return Schema(tuple(Coded(f"{prefix}{i}", size) for i, size in enumerate(sizes)))


def skewed_codes(schema: Schema, rows: int, seed: int) -> np.ndarray:
    """Seeded rows of a schema whose columns all have the same number of codes: P(v) ~ 1/(v+1)
    per column, independent columns."""
    codes = schema.shape[0]
    p = 1.0 / np.arange(1, codes + 1)
    rng = np.random.default_rng(seed)
    return rng.choice(codes, size=(rows, len(schema)), p=p / p.sum()).astype(code_dtype(schema))


class Case(NamedTuple):
    """A query, and its label in a report."""

    label: str
    query: Query


def case(schema: Schema, label: str, constraints: Sequence[tuple[int, Sequence[int]]]) -> Case:
    """The query of (axis, allowed codes) pairs."""
    pairs = sorted(constraints)
    return Case(label, Query(tuple(schema.names[a] for a, _ in pairs),
                             tuple(np.asarray(codes, dtype=np.int64) for _, codes in pairs)))


def typical_cases(schema: Schema) -> list[Case]:
    """PMW's typical queries: 2-way and 3-way cells and two 1-way ranges over half the codes
    (first, middle, last column); a query on the last column selects runs of one cell."""
    mid, last, half = len(schema) // 2, len(schema) - 1, range(schema.shape[0] // 2)
    return [
        case(schema, "2-way cell (c0=0, c_last=0)", [(0, [0]), (last, [0])]),
        case(schema, "3-way cell (c0=0, c_mid=1, c_last=0)", [(0, [0]), (mid, [1]), (last, [0])]),
        case(schema, "1-way range, half of c_mid", [(mid, half)]),
        case(schema, "1-way range, half of c_last", [(last, half)]),
    ]


#: The query of every cell: a full pass over the universe.
FULL = Case("all cells, Query((), ()): full pass", Query((), ()))


def selected_cells(schema: Schema, query: Query) -> int:
    """How many cells of the universe ``query`` selects."""
    fixed = dict(zip(query.columns, map(len, query.allowed)))
    return math.prod(fixed.get(name, size) for name, size in zip(schema.names, schema.shape))


def true_count(codes: np.ndarray, schema: Schema, query: Query) -> int:
    """The query's answer on the rows."""
    return int(marginal(codes, schema, query.columns)[np.ix_(*query.allowed)].sum())
