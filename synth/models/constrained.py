"""A release with its schema's public constraints applied: zero mass where they rule a row out.

Post-processing of a release costs no privacy, and the constraints are public knowledge
(``synth.data.constraints``). A function constraint moves mass rather than dropping it: in a
dense distribution the mass of each cell that breaks it goes to the cell with its column's
allowed value (``synth.models.sampling.constrained_weights``), and a factored model's rows
get that value as they are sampled (``synth.models.synthetic``), every other column as the
model gave it; a factored model's own answers on that column are left as they were. A
forbidden combination is conditioned on: its cells get zero mass and the rest are
renormalised (a dense distribution; a factored model as one more factor where the subset fits
its cap, else the sampler redraws the rows that break it).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from synth.data.constraints import Function, compile_constraints
from synth.data.schema import Schema
from synth.errors import SynthError
from synth.models.distribution import DenseDistribution
from synth.models.factored import FactoredModel
from synth.models.model import Model
from synth.models.sampling import constrained_weights

__all__ = ["constrain_distribution", "constrain_model"]


def constrain_distribution(distribution: Any, schema: Schema) -> Any:
    """``distribution`` (a flat array over U, a ``DenseDistribution`` or a ``FactoredModel``)
    with zero mass on the cells ``schema``'s constraints rule out, as a new object of the same
    kind (the same object when the schema has none). A flat array comes back summing to 1."""
    compiled = compile_constraints(schema)
    if not compiled:
        return distribution
    if isinstance(distribution, FactoredModel):
        model = distribution.copy()
        for c in compiled:  # a function is kept by the sampler, which moves its column in each row
            if not isinstance(c.constraint, Function) and model.fits(c.columns):  # else by redrawing
                model.multiply(c.columns, c.allowed.astype(np.float64))
        try:
            model.calibrate()
        except SynthError:
            raise SynthError("the model gives no mass to any row that keeps the schema's constraints") from None
        return model
    if isinstance(distribution, DenseDistribution):
        weights = constrained_weights(distribution.weights, schema)
        return DenseDistribution(schema, weights)
    weights = constrained_weights(np.asarray(distribution, dtype=np.float64).reshape(-1), schema)
    return weights / weights.sum()


def constrain_model(model: Model) -> Model:
    """``model`` with its schema's constraints applied to its distribution (``constrain_distribution``);
    the model itself when its schema has none."""
    if not model.schema.constraints:
        return model
    return dataclasses.replace(model, distribution=constrain_distribution(model.distribution, model.schema))
