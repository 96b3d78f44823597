"""DP quantiles and private bounds (``synth.privacy.mechanisms.quantiles``): accuracy on easy
data, integer results, spikes, accounting and validation, and privacy audits on neighbouring
datasets (``privacy_audit.audit``: Clopper-Pearson bounds, family-wise confidence 1 - 1e-6),
each next to a deliberately broken variant that the same audit must catch. Seeded throughout.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from synth.privacy.accounting import Accountant, BudgetExceeded
from synth.privacy.mechanisms import dp_quantiles, partition_threshold, private_bounds
from synth.privacy.mechanisms import quantiles as quantiles_module
from synth.privacy.mechanisms.quantiles import BOUNDS_BETA, bucket_edges

from .privacy_audit import assert_leak, assert_no_leak, audit, leak_power, point_and_tail_events


def _rng(*key: int) -> np.random.Generator:
    return np.random.default_rng([20261129, *key])


# =============================================================================================
# dp_quantiles
# =============================================================================================


def test_median_of_uniform_integers():
    values = _rng(1).integers(0, 1000, 10_000)
    for seed in range(5):
        (median,) = dp_quantiles(values, [0.5], 0, 999, 1.0, integer=True, rng=_rng(2, seed))
        assert abs(median - np.median(values)) <= 10  # 1% of the range (about 100 rows of rank)


def test_quantiles_of_reals_are_close_and_sorted():
    values = _rng(3).normal(50, 10, 10_000)
    qs = [0.9, 0.1, 0.5, 0.25, 0.75]  # any order in; sorted out
    result = dp_quantiles(values, qs, 0.0, 100.0, 1.0, rng=_rng(4))
    assert result.dtype == np.float64 and np.all(np.diff(result) >= 0)
    assert np.allclose(result, np.quantile(values, sorted(qs)), atol=0.5)


def test_integer_results_are_integers():
    values = _rng(5).integers(-300, 300, 2_000)
    result = dp_quantiles(values, np.linspace(0.1, 0.9, 9), -300, 300, 0.5, integer=True, rng=_rng(6))
    assert result.dtype == np.int64 and result.shape == (9,)
    assert np.all((result >= -300) & (result <= 300)) and np.all(np.diff(result) >= 0)


def test_wide_integer_range_uses_a_grid_of_integers():
    values = _rng(7).integers(0, 10**9, 5_000)
    result = dp_quantiles(values, [0.25, 0.5, 0.75], 0, 2**40, 1.0, integer=True, rng=_rng(8))
    assert result.dtype == np.int64
    assert np.allclose(result, np.quantile(values, [0.25, 0.5, 0.75]), rtol=0.05)


def test_spike_gives_repeated_zeros():
    """90% zeros: every quantile up to 0.85 is 0 (c = 0 takes the ranks 0..0.9n)."""
    generator = _rng(9)
    values = np.where(generator.random(10_000) < 0.9, 0, generator.integers(1, 100_000, 10_000))
    result = dp_quantiles(values, np.linspace(0.05, 0.85, 17), 0, 131_072, 1.0, integer=True, rng=_rng(10))
    assert np.all(result == 0)
    real = dp_quantiles(values.astype(float), [0.2, 0.5, 0.8], -10.0, 1e5, 1.0, rng=_rng(11))
    assert np.all(real == 0.0)  # 0 is always a candidate inside the bounds


def test_values_outside_the_bounds_are_clipped():
    values = np.concatenate([np.full(500, -1e9), np.full(499, 1e9), [np.inf]])
    low, high = dp_quantiles(values, [0.1, 0.9], 0, 10, 1.0, integer=True, rng=_rng(12))
    assert (low, high) == (0, 10)


def test_equal_bounds_and_no_rows():
    assert dp_quantiles(np.array([3.0, 4.0]), [0.5], 7, 7, 1.0, integer=True, rng=1).tolist() == [7]
    result = dp_quantiles(np.array([]), [0.5], 0.0, 1.0, 1.0, rng=1)  # no rows: any candidate
    assert 0.0 <= result[0] <= 1.0


def test_quantiles_charge_epsilon_once():
    accountant = Accountant(1.0)
    dp_quantiles(np.arange(100), [0.2, 0.4, 0.6], 0, 99, 0.3, integer=True, rng=1, accountant=accountant,
                 note="age edges")
    charges = [(c.mechanism, c.epsilon, c.note) for c in accountant.ledger()]
    assert charges == [("dp_quantiles", 0.3, "age edges")]
    with pytest.raises(BudgetExceeded):
        dp_quantiles(np.arange(100), [0.5], 0, 99, 0.8, integer=True, rng=1, accountant=accountant)
    assert len(accountant.ledger()) == 1


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(values=np.array([1.0, np.nan])), ValueError, "values must not hold NaN"),
    (dict(values=np.array(["a"])), TypeError, "values must be numbers"),
    (dict(values=np.zeros((2, 2))), ValueError, "1-D"),
    (dict(quantiles=[]), ValueError, "quantiles must not be empty"),
    (dict(quantiles=[0.5, 1.5]), ValueError, r"quantiles\[1\] \(1.5\) must be in \[0, 1\]"),
    (dict(quantiles=0.5), TypeError, "quantiles must be a sequence"),
    (dict(lower=5, upper=1), ValueError, r"lower \(5.0\) must be <= upper \(1.0\)"),
    (dict(lower=0.5, integer=True), ValueError, r"lower \(0.5\) must be a whole number"),
    (dict(upper=math.inf), ValueError, r"upper \(inf\) must be finite"),
    (dict(epsilon=0), ValueError, r"epsilon \(0\) must be finite and > 0"),
    (dict(integer=1), TypeError, r"integer \(1\) must be True or False"),
])
def test_quantiles_refuse_bad_input(kwargs, error, message):
    arguments = dict(values=np.arange(10.0), quantiles=[0.5], lower=0, upper=9, epsilon=1.0)
    arguments.update(kwargs)
    with pytest.raises(error, match=message):
        dp_quantiles(rng=0, **arguments)


# -- privacy audit ------------------------------------------------------------------------------
# One quantile (q = 0.25) over the integers 0..10 at eps = 2: D = [8, 10, 10], D' = D + [0]
# (one row added). Under D the utility is highest at 8 (rank 0.75 of 3 rows lies in its
# interval); under D' at 0..8. Found by enumerating small pairs for the largest gap of the
# broken variant; the exact laws (``_exact_law``): the real mechanism's largest loss over point
# and tail events is 0.79 eps; the broken one (sensitivity taken as half the true one, i.e.
# the factor 2 of the exponential mechanism forgotten) reaches 1.54 eps, its most telling event
# {out >= 9} having P = 0.330 under D and 0.0152 under D'. leak_power with the 33 events of
# the family: 0.99978 at 4,000 runs per input, 0.9999995 at 5,000.

Q_EPS, Q_Q, Q_TOP = 2.0, 0.25, 10
Q_D, Q_DP = [8, 10, 10], [8, 10, 10, 0]
Q_RUNS = 5_000


def _exact_law(data, factor: float = 1.0) -> np.ndarray:
    """The exact output law over 0..Q_TOP (the sensitivity divided by ``factor``)."""
    candidates = np.arange(Q_TOP + 1.0)
    ordered = np.sort(np.asarray(data, dtype=float))
    below = np.searchsorted(ordered, candidates, "left").astype(float)
    at_or_below = np.searchsorted(ordered, candidates, "right").astype(float)
    utility = -np.maximum(0, np.maximum(below - Q_Q * len(ordered), Q_Q * len(ordered) - at_or_below))
    weights = np.exp(Q_EPS * utility / (2 * max(Q_Q, 1 - Q_Q) / factor))
    return weights / weights.sum()


def _quantile_runs(data, seed: int) -> np.ndarray:
    generator = _rng(seed)
    values = np.asarray(data, dtype=float)
    return np.array([dp_quantiles(values, [Q_Q], 0, Q_TOP, Q_EPS, integer=True, rng=generator)[0]
                     for _ in range(Q_RUNS)])


def _quantile_audit(seed: int):
    return audit(_quantile_runs(Q_D, seed), _quantile_runs(Q_DP, seed + 1), Q_EPS,
                 events=point_and_tail_events(range(Q_TOP + 1)))


def test_quantile_audit_size_catches_the_broken_variant():
    """The numbers above, from the exact laws."""
    def tails(p):
        return np.concatenate([p, np.cumsum(p), np.cumsum(p[::-1])[::-1]])

    real = np.log(tails(_exact_law(Q_D)) / tails(_exact_law(Q_DP)))
    assert 0.75 * Q_EPS < np.max(np.abs(real)) <= Q_EPS  # a tight pair, within eps
    d, dp = tails(_exact_law(Q_D, 2)), tails(_exact_law(Q_DP, 2))
    best = int(np.argmax(d - math.exp(Q_EPS) * dp))
    assert leak_power(d[best], dp[best], Q_RUNS, Q_EPS, 3 * (Q_TOP + 1)) > 0.9999


def test_quantile_matches_its_exact_law():
    outputs = _quantile_runs(Q_DP, 40)
    frequencies = np.bincount(outputs, minlength=Q_TOP + 1) / Q_RUNS
    # 0.025 is 5.8 standard errors of the largest probability (0.105), more for the others
    assert np.allclose(frequencies, _exact_law(Q_DP), atol=0.025)


def test_quantile_private():
    assert_no_leak(_quantile_audit(42), "dp_quantiles")


def test_quantile_half_sensitivity_is_caught(monkeypatch):
    real = quantiles_module._sensitivity
    monkeypatch.setattr(quantiles_module, "_sensitivity", lambda q: real(q) / 2)
    assert_leak(_quantile_audit(44), "dp_quantiles with the sensitivity halved")


# =============================================================================================
# private_bounds
# =============================================================================================


def test_bounds_of_integers_0_to_99():
    values = _rng(50).integers(0, 100, 10_000)
    for seed in range(5):
        assert private_bounds(values, 1.0, integer=True, rng=_rng(51, seed)) == (0, 128)


def test_bounds_of_reals_and_negatives():
    values = _rng(52).uniform(0, 100, 10_000)
    lower, upper = private_bounds(values, 1.0, rng=_rng(53))
    assert 0 <= lower <= 0.5 and upper == 128.0 and isinstance(upper, float)
    assert private_bounds(np.arange(-50, 51), 1.0, integer=True, rng=_rng(54)) == (-64, 64)


def test_bounds_none_for_three_rows():
    for seed in range(20):
        assert private_bounds(np.array([3.0, 17.0, 250.0]), 0.1, rng=_rng(55, seed)) is None


def test_default_threshold_ignores_a_lone_outlier():
    """The default threshold: partition_threshold(eps, 1e-3 / buckets), 13 at eps = 1 for both
    layouts; a bucket holding one row passes with probability at most 1e-3 / buckets."""
    values = np.concatenate([np.zeros(1000), [2.0**40]])
    for integer, buckets in ((False, 167), (True, 125)):
        assert partition_threshold(1.0, BOUNDS_BETA / buckets) == 13
        assert quantiles_module._bucket_count(integer) == buckets
        for seed in range(50):
            assert private_bounds(values, 1.0, integer=integer, rng=_rng(56, seed)) == (0, 0)


def test_bounds_charge_epsilon_once_even_when_none():
    accountant = Accountant(1.0)
    assert private_bounds(np.array([1.0]), 0.2, rng=1, accountant=accountant, note="income") is None
    assert [(c.mechanism, c.epsilon, c.delta) for c in accountant.ledger()] == [("private_bounds", 0.2, 0.0)]
    with pytest.raises(BudgetExceeded):
        private_bounds(np.array([1.0]), 0.9, rng=1, accountant=accountant)


def test_bucket_edges_hold_their_values():
    values = np.array([-5.0, -1.0, -0.5, 0.0, 1e-9, 0.25, 1.0, 3.0, 2.0**62 * 1.5])
    for value in values:
        (index,) = quantiles_module._buckets(np.array([value]), False)
        lo, hi = bucket_edges(index)
        assert lo <= value <= hi or abs(value) < 2**-20
    assert bucket_edges(quantiles_module._buckets(np.array([-3.0]), True)[0], True) == (-4, -2)


def test_bounds_take_infinities_and_stray_decimals():
    """Nothing in the data makes private_bounds fail (only NaN, the caller's to drop): infinities
    count in the outermost buckets, a decimal in an integer column in its magnitude's bucket."""
    values = np.concatenate([np.full(100, np.inf), np.full(100, -np.inf), np.full(100, 2.5)])
    assert private_bounds(values, 1.0, rng=1) == (-(2.0**63), 2.0**63)
    assert private_bounds(values[200:], 1.0, integer=True, rng=1) == (2, 4)
    assert private_bounds(np.full(100, 0.5), 1.0, integer=True, rng=1) == (0, 0)


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(values=np.array([np.nan])), ValueError, "values must not hold NaN"),
    (dict(threshold="5"), TypeError, r"threshold \('5'\) must be a real number"),
    (dict(threshold=math.nan), ValueError, r"threshold \(nan\) must be finite"),
    (dict(epsilon=-1), ValueError, r"epsilon \(-1\) must be finite and > 0"),
])
def test_bounds_refuse_bad_input(kwargs, error, message):
    arguments = dict(values=np.arange(10.0), epsilon=1.0)
    arguments.update(kwargs)
    with pytest.raises(error, match=message):
        private_bounds(rng=0, **arguments)


# -- privacy audit ------------------------------------------------------------------------------
# D: 20 rows in [1, 21); D': the same and one extreme row, 1.5 * 2^62 (the top bucket,
# [2^62, 2^63)). Threshold 1, eps = 1, so every probability is large: the output's upper bound
# is 2^63 when the top bucket's noisy count reaches 1, P(X >= 1) = e^-1 / (1 + e^-1) = 0.269
# under D and P(X >= 0) = 0.731 under D': ratio exactly e^eps (a tight pair). Broken variants:
# half-scale noise (0.119 vs 0.881, ratio 7.4) and noise only on the buckets the data occupies,
# so that an empty bucket never passes (0 vs 0.731). leak_power for both: 1 - 1e-12 at 3,000
# runs with the 9 events below.

B_EPS, B_RUNS = 1.0, 3_000
B_D = np.arange(1.0, 21.0)
B_DP = np.append(B_D, 1.5 * 2.0**62)
B_EVENTS = point_and_tail_events([61, 62, 63])


def _occupied_only(values, epsilon, *, rng, threshold):
    """Broken: noise and threshold only where the data has rows (a bucket's presence leaks)."""
    counts = np.bincount(quantiles_module._buckets(values, False), minlength=167)
    occupied = np.flatnonzero(counts)
    noisy = counts[occupied] + quantiles_module.discrete_laplace_noise(occupied.size, epsilon, 1, rng)
    passing = occupied[noisy >= threshold]
    return None if passing.size == 0 else (bucket_edges(passing[0])[0], bucket_edges(passing[-1])[1])


def _bounds_runs(data, seed: int, mechanism=private_bounds) -> np.ndarray:
    generator = _rng(seed)
    uppers = [mechanism(data, B_EPS, rng=generator, threshold=1)[1] for _ in range(B_RUNS)]
    return np.array([round(math.log2(upper)) for upper in uppers])


def test_bounds_audit_sizes():
    r1, r2 = math.exp(-1), math.exp(-2)
    assert leak_power(1 / (1 + r2), r2 / (1 + r2), B_RUNS, B_EPS, len(B_EVENTS)) > 1 - 1e-9
    assert leak_power(1 / (1 + r1), 0.0, B_RUNS, B_EPS, len(B_EVENTS)) > 1 - 1e-9


def test_bounds_private():
    result = audit(_bounds_runs(B_D, 60), _bounds_runs(B_DP, 61), B_EPS, events=B_EVENTS)
    assert_no_leak(result, "private_bounds")
    assert result.worst_hat[2] > 0.9 * B_EPS  # the pair is tight


def test_bounds_half_scale_noise_is_caught(monkeypatch):
    real = quantiles_module.discrete_laplace_noise
    monkeypatch.setattr(quantiles_module, "discrete_laplace_noise",
                        lambda size, epsilon, sensitivity, rng: real(size, 2 * epsilon, sensitivity, rng))
    assert_leak(audit(_bounds_runs(B_D, 62), _bounds_runs(B_DP, 63), B_EPS, events=B_EVENTS),
                "private_bounds with half-scale noise")


def test_bounds_noise_on_occupied_buckets_only_is_caught():
    result = audit(_bounds_runs(B_D, 64, _occupied_only), _bounds_runs(B_DP, 65, _occupied_only), B_EPS,
                   events=B_EVENTS)
    assert_leak(result, "private_bounds releasing which buckets are occupied")


# -- private_bounds_zcdp: the same buckets under discrete Gaussian noise ----------------------------

Z_RHO, Z_DELTA = 0.5, 1e-3  # an audit at (zcdp_epsilon(rho, delta), delta)


def _bounds_zcdp_runs(data, seed: int, noise_scale: float = 1.0) -> np.ndarray:
    generator = _rng(seed)
    uppers = [quantiles_module.private_bounds_zcdp(data, Z_RHO * noise_scale, rng=generator, threshold=1)[1]
              for _ in range(B_RUNS)]
    return np.array([round(math.log2(upper)) for upper in uppers])


def test_bounds_zcdp_find_the_data_and_charge_rho():
    from synth.privacy.accounting import Accountant
    from synth.privacy.mechanisms import private_bounds_zcdp

    values = np.repeat(np.arange(100.0), 100)
    accountant = Accountant(1.0, 1e-9)
    assert private_bounds_zcdp(values, 0.01, integer=True, rng=1, accountant=accountant, note="x") == (0, 128)
    assert [(c.rho, c.note) for c in accountant.ledger()] == [(0.01, "x")]
    assert private_bounds_zcdp(np.array([5.0, 6.0, 7.0]), 1e-4, rng=2) is None
    # at a budget shared by 15 columns, the Gaussian threshold is the lower one
    from synth.privacy.composition import zcdp_rho_limit
    from synth.privacy.mechanisms import gaussian_partition_threshold, partition_threshold

    rho = zcdp_rho_limit(0.2, 1e-9) / 15
    buckets = quantiles_module._bucket_count(True)
    laplace = partition_threshold(0.2 / 15, quantiles_module.BOUNDS_BETA / buckets)
    gaussian = gaussian_partition_threshold(1 / (2 * rho), quantiles_module.BOUNDS_BETA / buckets)
    assert gaussian < 0.7 * laplace


def test_bounds_zcdp_private():
    from synth.privacy.composition import zcdp_epsilon

    epsilon = zcdp_epsilon(Z_RHO, Z_DELTA)
    result = audit(_bounds_zcdp_runs(B_D, 70), _bounds_zcdp_runs(B_DP, 71), epsilon, Z_DELTA, events=B_EVENTS)
    assert_no_leak(result, "private_bounds_zcdp")


def test_bounds_zcdp_with_a_sixteenth_of_the_noise_is_caught():
    from synth.privacy.composition import zcdp_epsilon

    epsilon = zcdp_epsilon(Z_RHO, Z_DELTA)  # audited at the real rho's guarantee, run at 256 times the rho
    result = audit(_bounds_zcdp_runs(B_D, 72, 256.0), _bounds_zcdp_runs(B_DP, 73, 256.0), epsilon, Z_DELTA,
                   events=B_EVENTS)
    assert_leak(result, "private_bounds_zcdp with a sixteenth of the noise")
