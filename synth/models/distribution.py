"""One interface to the engines' distribution D over the universe, with two representations.

- ``DenseDistribution``: a flat float64 array over U (and its running total), right up to
  about 10⁸ cells; the multiplicative-weights steps run in place on it.
- ``synth.models.factored.FactoredModel``: D ∝ exp(Σ_S θ_S[u_S]) over the subsets measured or updated
  on, for universes no array can hold.

Both answer ``marginal``, ``marginals``, ``marginal_fits``, ``answer``, ``answer_workload``,
``multiply``, ``fit``, ``fits`` and ``sample_codes``; MWEM, PMW, sampling, ``answer --model`` and
``evaluate`` use only these.
``make_distribution`` picks the representation (``auto``: dense while U fits the dense cap).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Union

import numpy as np

from synth.data.schema import Schema
from synth.data.tables import (DEFAULT_MAX_CELLS, SelectedCells, _check_cells, marginal_from_dense, marginals_from_dense,
                     multiply_by_marginal)
from synth.errors import SynthError
from synth.models.factored import DEFAULT_MAX_MODEL_CELLS, FactoredModel
from synth.models.fit import mw_fit, workload_value
from synth.models.sampling import sample_codes
from synth.privacy.validation import normalized_prior

__all__ = ["REPRESENTATIONS", "DenseDistribution", "Distribution", "as_distribution", "make_distribution",
           "choose_representation"]

REPRESENTATIONS = ("auto", "dense", "factored")


class DenseDistribution:
    """D as a flat array of (unnormalized) weights over U, with their running total."""

    representation = "dense"

    def __init__(self, schema: Schema, weights: np.ndarray | None = None, total: float | None = None):
        self.schema = schema
        if weights is None:
            weights = np.full(schema.universe_size, 1.0 / schema.universe_size)
        self.weights = weights
        self.total = float(weights.sum()) if total is None else float(total)
        self._selections: dict = {}  # cells of measured queries, kept between fits

    @property
    def cells(self) -> int:
        return self.weights.size

    def fits(self, subset: Sequence[str]) -> bool:
        """Any subset fits: the dense array already holds every cell."""
        return True

    def add_subset(self, subset: Sequence[str]) -> tuple[str, ...]:
        """Nothing to make room for: every subset is already held."""
        return tuple(subset)

    def normalized(self) -> np.ndarray:
        """The flat distribution over U, summing to 1 (a new array)."""
        return self.weights / self.total

    def marginal(self, subset: Sequence[str]) -> np.ndarray:
        return marginal_from_dense(self.weights, self.schema, subset) / self.total

    def marginals(self, subsets: Sequence[Sequence[str]]) -> list[np.ndarray]:
        return [t / self.total for t in marginals_from_dense(self.weights, self.schema, subsets)]

    def marginal_fits(self, subset: Sequence[str]) -> bool:
        """Every marginal fits: none is bigger than the array over U already held."""
        return True

    def answer(self, query) -> float:
        return workload_value(self.weights, self.schema, query) / self.total

    def answer_workload(self, workload) -> np.ndarray:
        """Every query's probability under D (a ``synth.data.workload.Workload``), from marginals."""
        return workload.answer(self.marginal)

    def multiply(self, subset: Sequence[str], factors: np.ndarray) -> None:
        self.total = multiply_by_marginal(self.weights, self.schema, subset, np.asarray(factors, dtype=np.float64))

    def scale_query(self, query, factor: float) -> None:
        """D *= ``factor`` on the query's cells (PMW's update on one counting query)."""
        key = (query.columns, tuple(map(tuple, query.allowed)))
        selection = self._selections.setdefault(key, SelectedCells(self.schema, query))
        before = selection.scale(self.weights, factor)
        self.total += (factor - 1.0) * before

    def fit(self, measured: list[tuple], n: float, passes: int, *, workload=None, stop_residual: float = 0.0,
            on_pass: Callable[[int], None] | None = None) -> tuple[int, float]:
        """Sequential multiplicative-weights passes (``synth.models.fit.mw_fit``), in place."""
        self.total, done, residual = mw_fit(self.weights, self.total, self.schema, workload, measured, n, passes,
                                            self._selections, stop_residual, on_pass)
        return done, residual

    def copy(self) -> DenseDistribution:
        return DenseDistribution(self.schema, self.weights.copy(), self.total)

    def sample_codes(self, rows: int, method: str = "round", rng=None) -> np.ndarray:
        return sample_codes(self.weights, self.schema, rows, method, rng)


Distribution = Union[DenseDistribution, FactoredModel]


def choose_representation(schema: Schema, representation: str = "auto", max_cells: int = DEFAULT_MAX_CELLS) -> str:
    """``dense`` or ``factored``: ``auto`` is dense while |U| fits ``max_cells``."""
    if representation not in REPRESENTATIONS:
        raise SynthError(f"representation ({representation!r}) must be one of: {', '.join(REPRESENTATIONS)}")
    if representation == "auto":
        return "dense" if schema.universe_size <= max_cells else "factored"
    return representation


def make_distribution(schema: Schema, representation: str = "auto", *, prior: np.ndarray | None = None,
                      max_cells: int = DEFAULT_MAX_CELLS,
                      max_model_cells: int = DEFAULT_MAX_MODEL_CELLS) -> DenseDistribution | FactoredModel:
    """The uniform distribution (or ``prior``, dense only) in the chosen representation."""
    chosen = choose_representation(schema, representation, max_cells)
    if chosen == "factored":
        if prior is not None:
            raise SynthError("a prior over the universe needs the dense representation (--representation dense)")
        return FactoredModel(schema, max_cells=max_model_cells)
    _check_cells(schema.universe_size, "the distribution over the universe", max_cells)
    if prior is None:
        return DenseDistribution(schema)
    return DenseDistribution(schema, normalized_prior(prior, schema.universe_size))


def as_distribution(distribution, schema: Schema) -> DenseDistribution | FactoredModel:
    """A released model's distribution behind the interface (a flat array becomes dense)."""
    if isinstance(distribution, (DenseDistribution, FactoredModel)):
        return distribution
    weights = np.asarray(distribution, dtype=np.float64).reshape(-1)
    if weights.size != schema.universe_size:
        raise ValueError(f"distribution has {weights.size} cells but the universe has {schema.universe_size}")
    return DenseDistribution(schema, weights)
