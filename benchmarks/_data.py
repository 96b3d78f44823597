"""What the benchmarks share about their data: adult from ``../shared/datasets``, projections
of it, and the plain NumPy marginal the kernels are compared with."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from synth.data import code_dtype, read
from synth.schema import Schema

DEFAULT_DATA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"


def load_adult(data_dir: Path) -> tuple[Schema, np.ndarray]:
    """The adult schema (its domain file) and every row's codes, read through synth."""
    schema = Schema.load(data_dir / "adult-domain.json")
    return schema, read(data_dir / "adult.csv", schema).codes


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
