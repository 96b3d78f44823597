"""The dense fit (``synth.models.fit.mw_fit``): its accelerated step reaches the fixed point of MW's
own step, never raises the squared loss, and stops at the noise level or once it converges."""

import itertools

import numpy as np
import pytest

from synth.models.fit import mw_fit
from synth.data.schema import Coded, Schema
from tests.reference import marginal_of_dense

SCHEMA = Schema((Coded("a", 3), Coded("b", 4), Coded("c", 2), Coded("d", 3)))
SUBSETS = [s for s in itertools.combinations(SCHEMA.names, 2)]


def mw_reference(targets: dict, n: float, passes: int) -> np.ndarray:
    """MW's own step, one measurement after another, in plain NumPy: the fit the accelerated
    one must agree with."""
    shape = SCHEMA.shape
    w = np.full(shape, 1.0 / SCHEMA.universe_size)
    for _ in range(passes):
        for subset, noisy in targets.items():
            positions = [SCHEMA.names.index(c) for c in subset]
            estimate = marginal_of_dense(w.reshape(-1), shape, positions) * n / w.sum()
            factor = np.exp((noisy - estimate) / (2 * n))
            index = [slice(None) if i in positions else np.newaxis for i in range(len(shape))]
            w = w * factor.reshape([shape[i] for i in positions])[tuple(index)]
    return (w / w.sum()).reshape(-1)


def random_tables(seed: int, n: int, noise: float = 0.0) -> dict:
    rng = np.random.default_rng(seed)
    truth = rng.dirichlet(np.full(SCHEMA.universe_size, 0.5)) * n
    targets = {}
    for subset in SUBSETS:
        positions = [SCHEMA.names.index(c) for c in subset]
        table = marginal_of_dense(truth, SCHEMA.shape, positions)
        targets[subset] = table + rng.normal(0, noise, table.shape) if noise else table
    return targets


def loss(weights: np.ndarray, targets: dict, n: float) -> float:
    shape = SCHEMA.shape
    total = 0.0
    for subset, noisy in targets.items():
        estimate = marginal_of_dense(weights, shape, [SCHEMA.names.index(c) for c in subset]) * n / weights.sum()
        total += float(((noisy - estimate) ** 2).sum())
    return total


@pytest.mark.parametrize("seed", range(4))
def test_accelerated_fit_reaches_the_fixed_point_of_mw_steps(seed):
    """Consistent tables (every pair of a random distribution): both fits converge to the one
    distribution of maximum entropy that matches them, so they agree to high precision."""
    n = 5_000.0
    targets = random_tables(seed, n)
    measured = [("marginal", s, t) for s, t in targets.items()]
    weights = np.full(SCHEMA.universe_size, 1.0 / SCHEMA.universe_size)
    _, passes, residual = mw_fit(weights, 1.0, SCHEMA, None, measured, n, 20_000, {}, stop_residual=1e-7)
    reference = mw_reference(targets, n, 3_000)
    np.testing.assert_allclose(weights / weights.sum(), reference, atol=2e-6)
    assert residual < 1e-3  # rows, summed over every cell of the 6 tables
    assert passes < 3_000 / 4  # and it got there in far fewer passes


@pytest.mark.parametrize("seed", range(3))
def test_accelerated_fit_never_raises_the_loss(seed):
    """Noisy (inconsistent) tables: every pass the fit keeps lowers the squared loss, so
    fitting more passes never ends higher."""
    n = 2_000.0
    targets = random_tables(seed, n, noise=30.0)
    measured = [("marginal", s, t) for s, t in targets.items()]
    losses = []
    for passes in (1, 2, 4, 8, 16, 32):
        weights = np.full(SCHEMA.universe_size, 1.0 / SCHEMA.universe_size)
        mw_fit(weights, 1.0, SCHEMA, None, measured, n, passes, {})
        losses.append(loss(weights, targets, n))
    assert losses == sorted(losses, reverse=True) and losses[-1] < losses[0]


def test_fit_stops_once_it_converges_short_of_an_unreachable_target():
    """Tables far from any distribution (noise larger than the counts) cannot be fitted to
    residual 0: the fit stops once a pass gains almost nothing, long before its pass limit."""
    n = 200.0
    targets = random_tables(5, n, noise=100.0)
    measured = [("marginal", s, t) for s, t in targets.items()]
    weights = np.full(SCHEMA.universe_size, 1.0 / SCHEMA.universe_size)
    _, passes, residual = mw_fit(weights, 1.0, SCHEMA, None, measured, n, 5_000, {}, stop_residual=1.0)
    assert residual > 1.0 and passes < 1_000
