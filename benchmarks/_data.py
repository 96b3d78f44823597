"""What the benchmarks share about their data: adult from ``../shared/datasets``, projections
of it, the marginal workloads measured on it and their error (``mean_l1``), and the plain
NumPy marginal the kernels are compared with."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from synth.data.reading import code_dtype, read
from synth.data.schema import Schema
from synth.data.tables import marginal, marginals_from_dense
from synth.data.workload import Workload

DEFAULT_DATA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"

#: The adult configuration of the engine comparisons: 7 columns, 120,960 cells, 35 3-way
#: marginals (8,453 cell queries), 48,842 public rows.
SEVEN = ("workclass", "education-num", "marital-status", "relationship", "race", "sex", "income>50K")
#: A smaller adult subset: 840 cells, 10 3-way marginals.
FIVE = ("marital-status", "relationship", "race", "sex", "income>50K")

Tables = Mapping[tuple[str, ...], np.ndarray] | Callable[[tuple[str, ...]], np.ndarray]


def load_adult(data_dir: Path) -> tuple[Schema, np.ndarray]:
    """The adult schema (its domain file) and every row's codes, read through synth."""
    return load_table(data_dir, "adult")


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


def numpy_marginal(x: np.ndarray, shape: tuple[int, ...], positions: Sequence[int]) -> np.ndarray:
    """The NumPy baseline marginal: sum out the other axes, then put kept axes in order."""
    other = tuple(i for i in range(len(shape)) if i not in positions)
    table = x.reshape(shape).sum(axis=other)
    in_order = sorted(positions)
    return table.transpose([in_order.index(p) for p in positions])


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
