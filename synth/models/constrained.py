"""A release with its schema's public constraints applied: zero mass where they rule a row out.

Post-processing of a release costs no privacy, and the constraints are public knowledge
(``synth.data.constraints``). Each constraint is one more factor over its columns
(``keeping_factor``): zero on the cells it rules out, and for a function constraint a rescaling
of the allowed cells that keeps each value of its ``of`` at its mass. A dense distribution is
multiplied by it (``synth.models.sampling.constrained_weights``): its answers and its rows
then keep every constraint exactly. A factored model takes it where the subset fits its cap;
a constraint that does not fit is left to the sampler, which never writes a row that breaks
one (``synth.models.synthetic``: it moves a function's column to its allowed value, and
redraws other rows), while the model's answers may give such rows some mass.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from synth.data.constraints import compile_constraints, keeping_factor
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
        for c in compiled:
            if model.fits(c.columns):  # else the sampler keeps it: it moves a function's column, redraws other rows
                model.multiply(c.columns, keeping_factor(c, model.marginals([c.columns])[0]))
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
