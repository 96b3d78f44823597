"""The multiplicative-weights fit of a dense distribution to noisy measurements.

MWEM (its rounds and its final fit) and practical PMW (after each update) move their estimate
the same way: passes of multiplicative weights over every measurement so far, until the
measurements' residual falls to about the noise's expected size (fitting closer would fit the
noise). It reads only released noisy values, so it is post-processing: no privacy is spent.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from .mechanisms import mean_abs_noise
from .schema import Schema
from .tables import SelectedCells, marginal_from_dense, multiply_by_marginal
from .workload import Query

__all__ = ["FIT_TOLERANCE", "MAX_EXPONENT", "expected_noise", "mw_fit", "workload_value"]

#: A fit stops once the residual falls to this fraction of the noise's expected total.
FIT_TOLERANCE = 0.97
#: Largest |exponent| of one multiplicative step. Reached only when the noise dwarfs n (a tiny
#: epsilon): a step of e^30 already moves all mass, and a larger one would overflow.
MAX_EXPONENT = 30.0


def mw_fit(weights: np.ndarray, total: float, schema: Schema, workload: Sequence[Query] | None,
           measured: list[tuple], n: float, passes: int, selections: dict, stop_residual: float = 0.0,
           on_pass: Callable[[int], None] | None = None) -> tuple[float, int, float]:
    """Passes of multiplicative weights over every measurement, ``weights`` updated in place.

    ``measured`` holds ``(kind, key, noisy)``: ``("marginal", subset, table)`` or
    ``("query", index into workload, count)`` (``workload``: a ``Workload`` or a list of
    queries); ``selections`` caches the cells of measured queries between calls. Each pass moves, in turn for every measurement, the weights by
    ``exp((noisy - estimate) / (2 n))`` on its cells. Stops after ``passes``, once a pass changes
    nothing, or once the total absolute residual falls to ``stop_residual`` (fitting closer than
    the noise would fit the noise). ``on_pass(done)`` is called every 10 passes.

    Returns the weights' new total, the passes run and the last pass's residual.
    """
    done = 0
    residual = math.inf
    for _ in range(passes):
        done += 1
        largest_change = residual = 0.0
        for kind, key, noisy in measured:
            if kind == "marginal":
                estimate = marginal_from_dense(weights, schema, key) * (n / total)
                exponent = np.clip((noisy - estimate) / (2 * n), -MAX_EXPONENT, MAX_EXPONENT)
                largest_change = max(largest_change, float(np.abs(exponent).max()))
                residual += float(np.abs(exponent).sum()) * 2 * n
                total = multiply_by_marginal(weights, schema, key, np.exp(exponent))
            else:
                query = workload[key]
                estimate = n * workload_value(weights, schema, query) / total
                exponent = min(max((noisy - estimate) / (2 * n), -MAX_EXPONENT), MAX_EXPONENT)
                largest_change = max(largest_change, abs(exponent))
                residual += abs(exponent) * 2 * n
                selection = selections.setdefault(key, SelectedCells(schema, query))
                factor = math.exp(exponent)
                before = selection.scale(weights, factor)
                total += (factor - 1.0) * before
        if not 1e-100 < total < 1e100:
            weights /= total
            total = 1.0
        if largest_change < 1e-9 or residual <= stop_residual:
            break
        if on_pass is not None and done % 10 == 0:
            on_pass(done)
    return total, done, residual


def expected_noise(measured, epsilon: float = 0.0, rho: float = 0.0) -> float:
    """E[sum of |noise|] over every measured value, each with discrete Laplace noise of scale
    1/epsilon, or discrete Gaussian of variance 1/(2 rho) (``synth.mechanisms.mean_abs_noise``)."""
    return sum(np.size(noisy) for _, _, noisy in measured) * mean_abs_noise(epsilon, rho)


def workload_value(weights: np.ndarray, schema: Schema, query) -> float:
    """A query's (unnormalized) mass under ``weights``, from its marginal."""
    table = marginal_from_dense(weights, schema, query.columns)
    if not query.columns:
        return float(table)
    return float(table[np.ix_(*query.allowed)].sum())

