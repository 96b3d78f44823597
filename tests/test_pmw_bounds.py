"""PMW's stated error bounds (``synth.engines.pmw_bounds``): each piece against the noise's
exact law or a Monte Carlo draw of the very samplers PMW uses, then end to end: over many
answers of real runs, the share whose true count lies outside its bound stays below beta."""

from __future__ import annotations

import math

import numpy as np
import pytest

from synth.data.schema import Coded, Schema
from synth.data.tables import marginal
from synth.data.workload import Workload
from synth.engines.pmw import HALTED, LAZY, UPDATE, run_pmw
from synth.engines.pmw_bounds import laplace_quantile, noise_sum_bound, range_bound, below_bound
from synth.privacy.mechanisms import discrete_gaussian, discrete_laplace

SCHEMA = Schema((Coded("a", 3), Coded("b", 4), Coded("c", 2), Coded("d", 5)))


def _tail(scale: float, k: int) -> float:
    """P(Z >= k) for discrete Laplace P(z) ~ exp(-|z| / scale), summed term by term."""
    p = math.exp(-1 / scale)
    z = np.arange(k, k + 20_000)
    return float(((1 - p) / (1 + p) * p ** np.abs(z)).sum())


@pytest.mark.parametrize("scale, gamma", [(1.0, 0.05), (7.5, 0.025), (40.0, 0.001), (0.3, 0.2)])
def test_laplace_quantile_is_the_least_integer_with_that_tail(scale, gamma):
    k = int(laplace_quantile(scale, gamma))
    assert _tail(scale, k) <= gamma * (1 + 1e-9)
    assert k == 0 or _tail(scale, k - 1) > gamma


@pytest.mark.parametrize("k", [1, 6, 60])
@pytest.mark.parametrize("noise", [{"epsilon": 0.2}, {"rho": 0.01}])
def test_a_sum_of_noises_stays_within_its_bound(k, noise):
    """Monte Carlo on the samplers PMW measures with: the share outside is below beta, and the
    bound is not loose beyond a Chernoff/sub-Gaussian factor (a bound 3x too big fails)."""
    beta, draws = 0.05, 4000
    rng = np.random.default_rng(k)
    zeros = np.zeros((draws, k), dtype=np.int64)
    sample = (discrete_gaussian(zeros, noise["rho"], 1, rng) if "rho" in noise
              else discrete_laplace(zeros, noise["epsilon"], 1, rng))
    sums = np.abs(np.asarray(sample, dtype=float).sum(axis=1))
    bound = noise_sum_bound(k, beta, **noise)
    assert np.mean(sums > bound) <= beta
    assert bound <= 2.0 * np.quantile(sums, 1 - beta)


def test_test_bound_covers_what_a_below_answer_can_hide():
    """After "below", the tested value is under T + threshold noise - test noise: simulate both
    noises at AboveThreshold's scales (2/eps, 4/eps) and check the bound's tail."""
    epsilon, beta, threshold = 0.05, 0.05, 300.0
    rng = np.random.default_rng(3)
    zeros = np.zeros(20_000, dtype=np.int64)
    rho = np.asarray(discrete_laplace(zeros, epsilon / 2, 1, rng), dtype=float)
    nu = np.asarray(discrete_laplace(zeros, epsilon / 4, 1, rng), dtype=float)
    assert np.mean(threshold + rho - nu > below_bound(threshold, epsilon, beta)) <= beta


def test_range_bound_is_the_far_end_of_zero_to_n():
    assert range_bound(30.0, 100.0, 0.05) == 70.0
    assert range_bound(80.0, 100.0, 0.05) == 80.0
    assert range_bound(30.0, 100.0, 0.05, epsilon_count=0.05) > 70.0  # a noisy n: its upper quantile


def _codes(rows: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 3, rows)
    b = np.where(rng.random(rows) < 0.7, a, rng.integers(0, 4, rows))
    c = (rng.random(rows) < 0.2 + 0.2 * (a == 1)).astype(int)
    d = np.where(rng.random(rows) < 0.5, b, rng.integers(0, 5, rows))
    return np.column_stack([a, b, c, d]).astype(np.uint8)


def _truth(codes, workload) -> np.ndarray:
    return np.array([marginal(codes, SCHEMA, q.columns)[tuple(int(v[0]) for v in q.allowed)] for q in workload],
                    dtype=float)


@pytest.mark.parametrize("way, delta, variant", [(2, 1e-9, "practical"), (3, 0.0, "practical"),
                                                 (2, 0.0, "theory")])
def test_answers_lie_within_their_bounds_at_the_stated_confidence(way, delta, variant):
    """Many answers of several runs (lazy, update and halted alike) against the true counts."""
    workload = Workload.marginals(SCHEMA, way)
    outside = total = 0
    rounds = set()
    for seed in range(4):
        codes = _codes(4000, seed)
        options = {"updates": 3} if variant == "practical" else {"alpha": 0.1, "updates": 3}
        run = run_pmw(codes, SCHEMA, workload, 1.0, delta, beta=0.05, rng=seed, variant=variant, **options)
        error = np.abs(_truth(codes, workload) - run.answers)
        assert np.all(np.isfinite(run.bounds)) and np.all(run.bounds >= 0)
        outside += int(np.sum(error > run.bounds))
        total += len(workload)
        rounds |= set(run.rounds)
    assert {LAZY, UPDATE} <= rounds
    assert outside / total <= 0.05


def test_a_query_in_a_measured_marginal_is_bounded_by_its_measurement():
    """Halted answers on a measured subset keep a measurement's bound; on a subset nothing
    covers, only the range [0, n]; the measured one is far tighter."""
    codes = _codes(4000, 9)
    workload = Workload.marginals(SCHEMA, 2)
    run = run_pmw(codes, SCHEMA, workload, 1.0, rows=4000, rng=1, updates=1)
    measured = {tuple(m.columns) for m in run.pmw.log}
    halted = [i for i, r in enumerate(run.rounds) if r == HALTED]
    bare = [i for i in halted if not any(set(workload[i].columns) <= set(s) for s in measured)]
    assert bare, "the run should halt before some subsets are measured"
    for i in bare:
        assert run.bounds[i] == range_bound(run.answers[i], 4000, 0.05)
    lazy_on_measured = [i for i, r in enumerate(run.rounds)
                        if r in (LAZY, UPDATE) and workload[i].columns in measured]
    assert lazy_on_measured and max(run.bounds[lazy_on_measured]) < min(run.bounds[bare])
