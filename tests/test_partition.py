"""Partition selection (``synth.privacy.mechanisms.partition``): the threshold against a brute-force
sum of the discrete Laplace pmf, the probability that a value held by one row is released
(at most delta; a variant with no threshold, or a threshold one too low, is caught), an
(epsilon, delta) audit of the released noisy counts on neighbouring count tables, and the
behaviour (order, accounting, validation); the same for the discrete Gaussian variant (threshold
against a brute-force tail sum, one-row release rate, rho plus (0, delta) charges, and its lower
threshold than Laplace's when 15 columns share one budget).

Many runs at once: every key of ``counts`` gets its own independent noise and is kept or not
on its own count alone, so one call with N keys of the same count gives N independent runs of
the mechanism's output for one such key (the output for the key that differs between two
neighbouring tables is all an audit of that pair looks at; the other keys' outputs have the
same law under both). Seeded throughout.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from synth.privacy.accounting import Accountant, BudgetExceeded, Charge, compose
from synth.privacy.composition import zcdp_epsilon, zcdp_rho_limit
from synth.privacy.mechanisms import (
    gaussian_partition_selection,
    gaussian_partition_threshold,
    laplace_ratio,
    partition_selection,
    partition_threshold,
)
from synth.privacy.mechanisms.discrete import gaussian_parameters
from synth.privacy.mechanisms import partition as partition_module

from .privacy_audit import assert_leak, assert_no_leak, audit, clopper_pearson, point_and_tail_events

CONFIDENCE = 1 - 1e-6  # a correct mechanism fails a check with probability at most 1e-6


def _rng(*key: int) -> np.random.Generator:
    return np.random.default_rng([20261128, *key])


# -- the threshold ---------------------------------------------------------------------------


def _tail(e: Fraction, k: int) -> float:
    """P(X >= k) by brute force: the pmf exp(-e |x|) summed over |x| <= 60 / e (the rest is
    below e^-60 of the total), normalized by the same sum."""
    e = float(e)
    span = int(60 / e) + 10
    xs = np.arange(-span, span + 1)
    weights = np.exp(-e * np.abs(xs))
    return math.fsum(weights[xs >= k]) / math.fsum(weights)


CASES = [(1.0, 1e-6), (0.1, 1e-9), (0.5, 0.02), (2.0, 0.3), (0.05, 1e-5), (3.0, 1e-12), (0.3, 0.49)]
CASES += [(float(e), float(d))
          for e, d in zip(_rng(0).uniform(0.02, 4, 12), 10 ** _rng(1).uniform(-12, -0.5, 12))]


@pytest.mark.parametrize("epsilon, delta", CASES)
def test_threshold_is_the_smallest_that_keeps_a_single_row_below_delta(epsilon, delta):
    """tau: P(1 + X >= tau) <= delta, and tau - 1 would not do (unless tau is at its floor 2);
    X with the parameter the sampler uses (``laplace_ratio``)."""
    tau = partition_threshold(epsilon, delta)
    e = Fraction(*laplace_ratio(epsilon))
    assert isinstance(tau, int) and tau >= 2
    assert _tail(e, tau - 1) <= delta
    if tau > 2:
        assert _tail(e, tau - 2) > delta * (1 - 1e-9)
    r = math.exp(-float(e))
    assert _tail(e, tau - 1) == pytest.approx(r ** (tau - 1) / (1 + r), rel=1e-9)  # the closed form


def test_threshold_known_values():
    # e = 1: (ln 1e6 - ln(1 + e^-1)) / 1 = 13.50 -> tau - 1 = 14
    assert partition_threshold(1.0, 1e-6) == 15
    assert partition_threshold(0.1, 1e-9) == 202
    assert partition_threshold(1.0, 0.9) == 2  # the floor: tau - 1 >= 1


@pytest.mark.parametrize("delta, message", [(0.0, r"delta \(0.0\) must be in \(0, 1\)"),
                                            (1.0, r"delta \(1.0\) must be in \(0, 1\)")])
def test_threshold_refuses_bad_delta(delta, message):
    with pytest.raises(ValueError, match=message):
        partition_threshold(1.0, delta)
    with pytest.raises(ValueError, match=r"epsilon \(0\) must be finite and > 0"):
        partition_threshold(0, 1e-6)


# -- a value held by one row: released with probability at most delta -------------------------

SINGLE_EPS = 1.0
SINGLE_K = 3  # delta just above P(X >= 3) = e^-3 / (1 + e^-1) = 0.03640: the threshold is tight
SINGLE_DELTA = 1.0001 * math.exp(-SINGLE_K) / (1 + math.exp(-1))
SINGLE_RUNS = 200_000
# Sizes: the real mechanism keeps a single row with p = 0.03640 = delta / 1.0001; a threshold one
# lower keeps it with e p = 0.0989 and no threshold (1) with 1 / (1 + e^-1) = 0.731. At 200,000
# runs the Clopper-Pearson interval at 1 - 1e-6 is about p +- 0.0022, so both broken variants
# are far outside it, and a correct one falls outside only with probability 1e-6.


def _single_row_kept(seed: int) -> int:
    """How many of SINGLE_RUNS values held by one row each are released (one call)."""
    singles = {i: 1 for i in range(SINGLE_RUNS)}
    released = partition_selection(singles, SINGLE_EPS, SINGLE_DELTA, rng=_rng(seed))
    return len(released)


def test_single_row_released_with_probability_at_most_delta():
    assert partition_threshold(SINGLE_EPS, SINGLE_DELTA) == SINGLE_K + 1
    kept = _single_row_kept(10)
    lower, upper = clopper_pearson(kept, SINGLE_RUNS, CONFIDENCE)
    assert lower <= SINGLE_DELTA, (
        f"{kept}/{SINGLE_RUNS} kept: P(keep) >= {lower:.5f} > delta {SINGLE_DELTA:.5f}")
    exact = math.exp(-SINGLE_K) / (1 + math.exp(-1))
    assert lower <= exact <= upper  # and it is what the derivation says


@pytest.mark.parametrize("broken", [lambda tau: 1, lambda tau: tau - 1],
                         ids=["no threshold", "threshold - 1"])
def test_single_row_check_catches_a_broken_threshold(monkeypatch, broken):
    real = partition_module.partition_threshold
    monkeypatch.setattr(partition_module, "partition_threshold", lambda e, d: broken(real(e, d)))
    kept = _single_row_kept(11)
    lower, _ = clopper_pearson(kept, SINGLE_RUNS, CONFIDENCE)
    assert lower > SINGLE_DELTA, f"{kept}/{SINGLE_RUNS} kept: the broken threshold was not caught"


# -- (epsilon, delta) audit of the released noisy counts ------------------------------------------

AUDIT_EPS, AUDIT_DELTA = 1.0, 0.02  # tau = 5
AUDIT_RUNS = 20_000
DROPPED = -1  # the output for a run where the value is not released (a released count is >= tau)
# The pairs: "new" D = {} vs D' = {x: 1} (the delta part: x appears with probability
# P(X >= 4) = 0.0134 <= delta); "present" D = {x: 8} vs D' = {x: 9} (the epsilon part: each tail
# event of the noisy count has ratio e^eps, as far as the threshold leaves it). Broken: no
# threshold (x appears in 73% of the runs on D', never on D) and half-scale noise (the tail
# {out >= 9} has 0.12 vs 0.88, ratio 7.4 > e). With the 63 events below, leak_power is
# 1 - 1e-13 for each at 2,000 runs already; 20,000 (0.1 s) let the real mechanism's audit
# come close to e^eps on the "present" pair (estimated loss 0.98 eps at seed 20).
PAIRS = {"new": (None, 1), "present": (8, 9)}


def _released(count_d, seed: int) -> np.ndarray:
    """AUDIT_RUNS independent outputs for the value x held by ``count_d`` rows (None: not in the
    table)."""
    if count_d is None:
        return np.full(AUDIT_RUNS, DROPPED)
    table = {i: count_d for i in range(AUDIT_RUNS)}
    released = partition_selection(table, AUDIT_EPS, AUDIT_DELTA, rng=_rng(seed))
    return np.array([released.get(i, DROPPED) for i in range(AUDIT_RUNS)])


def _audit_pair(name: str, seed: int):
    count_d, count_dp = PAIRS[name]
    support = [DROPPED] + list(range(partition_threshold(AUDIT_EPS, AUDIT_DELTA), 25))
    return audit(_released(count_d, seed), _released(count_dp, seed + 1), AUDIT_EPS, AUDIT_DELTA,
                 events=point_and_tail_events(support))


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_released_counts_are_eps_delta_private(name):
    assert_no_leak(_audit_pair(name, 20), f"partition_selection, pair {name}")


def test_audit_catches_no_threshold(monkeypatch):
    monkeypatch.setattr(partition_module, "partition_threshold", lambda e, d: 1)
    assert_leak(_audit_pair("new", 22), "partition_selection without threshold")


def test_audit_catches_half_scale_noise(monkeypatch):
    real = partition_module.discrete_laplace_noise
    monkeypatch.setattr(partition_module, "discrete_laplace_noise",
                        lambda size, epsilon, sensitivity, rng: real(size, 2 * epsilon, sensitivity, rng))
    assert_leak(_audit_pair("present", 24), "partition_selection with half-scale noise")


# -- behaviour ----------------------------------------------------------------------------------


def test_result_is_ordered_by_noisy_count_then_string():
    counts = {("b" if i % 2 else "a") + str(i): 40 + i % 3 for i in range(60)}
    released = partition_selection(counts, 0.5, 1e-6, rng=_rng(30))
    items = list(released.items())
    assert items == sorted(items, key=lambda item: (-item[1], str(item[0])))
    assert all(isinstance(v, int) for v in released.values())
    # the same counts in another order: the same kind of order, never the input's
    shuffled = dict(reversed(list(counts.items())))
    items = list(partition_selection(shuffled, 0.5, 1e-6, rng=_rng(31)).items())
    assert items == sorted(items, key=lambda item: (-item[1], str(item[0])))


def test_large_counts_kept_rare_dropped():
    released = partition_selection({"common": 10_000, "rare": 2, "absent": 0}, 1.0, 1e-9, rng=_rng(32))
    assert list(released) == ["common"] and abs(released["common"] - 10_000) < 40


def test_charges_epsilon_and_delta_once():
    accountant = Accountant(1.0, 1e-6)
    partition_selection({"a": 5}, 0.4, 1e-7, rng=1, accountant=accountant, note="column city")
    assert [(c.mechanism, c.epsilon, c.delta, c.note) for c in accountant.ledger()] == [
        ("partition_selection", 0.4, 1e-7, "column city")]
    pure = Accountant(1.0)  # no delta to spend: refused before anything is drawn
    with pytest.raises(BudgetExceeded):
        partition_selection({"a": 5}, 0.4, 1e-7, rng=1, accountant=pure)
    assert not pure.ledger()


def test_empty_counts_release_nothing_and_still_charge():
    accountant = Accountant(1.0, 1e-6)
    assert partition_selection({}, 1.0, 1e-7, rng=1, accountant=accountant) == {}
    assert len(accountant.ledger()) == 1


def test_seeded_runs_repeat():
    counts = {str(i): i for i in range(100)}
    assert partition_selection(counts, 1.0, 1e-3, rng=5) == partition_selection(counts, 1.0, 1e-3, rng=5)


@pytest.mark.parametrize("counts, error, message", [
    ([("a", 1)], TypeError, "counts must be a mapping"),
    ({"a": 1.5}, TypeError, r"counts\['a'\] \(1.5\) must be an integer"),
    ({"a": True}, TypeError, r"counts\['a'\] \(True\) must be an integer"),
    ({"a": -1}, ValueError, r"counts\['a'\] \(-1\) must be >= 0"),
])
def test_refuses_bad_counts(counts, error, message):
    with pytest.raises(error, match=message):
        partition_selection(counts, 1.0, 1e-6, rng=0)


def test_refuses_bad_privacy_parameters():
    with pytest.raises(ValueError, match=r"delta \(0\) must be in \(0, 1\)"):
        partition_selection({"a": 1}, 1.0, 0, rng=0)
    with pytest.raises(ValueError, match=r"epsilon \(-1.0\) must be finite and > 0"):
        partition_selection({"a": 1}, -1.0, 1e-6, rng=0)
    assert partition_selection({"a": np.int64(3)}, 1.0, 0.4, rng=0) is not None  # NumPy integers are counts


# -- discrete Gaussian noise: the threshold ---------------------------------------------------------


def _sampler_sigma2(sigma2: float) -> Fraction:
    """The variance parameter the sampler really uses for ``sigma2`` (rounded up)."""
    parameters = gaussian_parameters(Fraction(sigma2))
    return Fraction(parameters[0], parameters[1]) if parameters else Fraction(sigma2)


def _gaussian_tail(s: Fraction, k: int) -> float:
    """P(X >= k) by brute force: the pmf exp(-x^2 / (2 s)) summed over |x| <= sqrt(120 s) + 10
    (the rest is below e^-60 of the total), normalized by the same sum."""
    s = float(s)
    span = int(math.sqrt(120 * s)) + 10
    xs = np.arange(-span, span + 1, dtype=np.float64)
    weights = np.exp(-xs * xs / (2 * s))
    return math.fsum(weights[xs >= k]) / math.fsum(weights)


GAUSSIAN_CASES = [(1.0, 1e-6), (4.0, 0.0385), (100.0, 1e-9), (1e4, 1e-9), (0.05, 1e-12), (0.3, 0.1),
                  (1 / (2 * 0.0123), 1e-7), (37.7, 0.02), (3e9, 1e-9), (2.0, 0.45)]
GAUSSIAN_CASES += [(float(s), float(d))
                   for s, d in zip(10 ** _rng(2).uniform(-1.5, 5, 10), 10 ** _rng(3).uniform(-12, -0.5, 10))]


@pytest.mark.parametrize("sigma2, delta", GAUSSIAN_CASES)
def test_gaussian_threshold_is_the_smallest_that_keeps_a_single_row_below_delta(sigma2, delta):
    """tau: P(1 + X >= tau) <= delta, and tau - 1 would not do (unless tau is at its floor 2);
    X with the variance the sampler uses (``gaussian_parameters``), summed by brute force."""
    tau = gaussian_partition_threshold(sigma2, delta)
    s = _sampler_sigma2(sigma2)
    assert isinstance(tau, int) and tau >= 2
    assert _gaussian_tail(s, tau - 1) <= delta
    if tau > 2:
        assert _gaussian_tail(s, tau - 2) > delta * (1 - 1e-9)


def test_gaussian_threshold_known_values_and_refusals():
    # s = 1: P(X >= 5) = 1.5e-6 > 1e-6 >= P(X >= 6) = 6.1e-9 -> tau - 1 = 6
    assert gaussian_partition_threshold(1.0, 1e-6) == 7
    assert gaussian_partition_threshold(Fraction(1, 3), 0.9) == 2  # the floor: tau - 1 >= 1
    with pytest.raises(ValueError, match=r"delta \(0.0\) must be in \(0, 1\)"):
        gaussian_partition_threshold(1.0, 0.0)
    with pytest.raises(ValueError, match=r"sigma2 \(-1.0\) must be finite and > 0"):
        gaussian_partition_threshold(-1.0, 1e-6)


# -- discrete Gaussian noise: a value held by one row -----------------------------------------------

GAUSS_SIGMA2 = 4.0  # rho = 1/8, which the sampler uses exactly
GAUSS_K = 4  # P(X >= 4) = 0.03846: delta just above it, so the threshold (5) is tight
GAUSS_DELTA = 1.0001 * _gaussian_tail(Fraction(4), GAUSS_K)
# Sizes: a threshold one lower keeps a single row with P(X >= 3) = 0.103 and none (1) with
# P(X >= 0) = 0.60; at 200,000 runs the Clopper-Pearson interval at 1 - 1e-6 is about +- 0.0022.


def _gaussian_single_row_kept(seed: int) -> int:
    singles = {i: 1 for i in range(SINGLE_RUNS)}
    return len(gaussian_partition_selection(singles, 1 / (2 * GAUSS_SIGMA2), GAUSS_DELTA, rng=_rng(seed)))


def test_gaussian_single_row_released_with_probability_at_most_delta():
    assert gaussian_partition_threshold(GAUSS_SIGMA2, GAUSS_DELTA) == GAUSS_K + 1
    kept = _gaussian_single_row_kept(40)
    lower, upper = clopper_pearson(kept, SINGLE_RUNS, CONFIDENCE)
    assert lower <= GAUSS_DELTA, f"{kept}/{SINGLE_RUNS} kept: P(keep) >= {lower:.5f} > delta {GAUSS_DELTA:.5f}"
    assert lower <= _gaussian_tail(Fraction(4), GAUSS_K) <= upper


@pytest.mark.parametrize("broken", [lambda tau: 1, lambda tau: tau - 1], ids=["no threshold", "threshold - 1"])
def test_gaussian_single_row_check_catches_a_broken_threshold(monkeypatch, broken):
    real = partition_module.gaussian_partition_threshold
    monkeypatch.setattr(partition_module, "gaussian_partition_threshold", lambda s, d: broken(real(s, d)))
    kept = _gaussian_single_row_kept(41)
    lower, _ = clopper_pearson(kept, SINGLE_RUNS, CONFIDENCE)
    assert lower > GAUSS_DELTA, f"{kept}/{SINGLE_RUNS} kept: the broken threshold was not caught"


# -- discrete Gaussian noise: behaviour and accounting ---------------------------------------------


def test_gaussian_result_is_ordered_and_keeps_common_values():
    counts = {("b" if i % 2 else "a") + str(i): 40 + i % 3 for i in range(60)}
    items = list(gaussian_partition_selection(counts, 0.5, 1e-6, rng=_rng(42)).items())
    assert items == sorted(items, key=lambda item: (-item[1], str(item[0])))
    assert all(isinstance(v, int) for v in dict(items).values())
    released = gaussian_partition_selection({"common": 10_000, "rare": 2, "absent": 0}, 0.5, 1e-9, rng=_rng(43))
    assert list(released) == ["common"] and abs(released["common"] - 10_000) < 10
    counts = {str(i): i for i in range(100)}
    assert gaussian_partition_selection(counts, 0.1, 1e-3, rng=5) == gaussian_partition_selection(
        counts, 0.1, 1e-3, rng=5)


def test_gaussian_charges_rho_and_zero_epsilon_delta():
    """One call: rho as zCDP and (0, delta); the total is zCDP's epsilon at the delta left."""
    accountant = Accountant(1.0, 1e-6)
    gaussian_partition_selection({"a": 5}, 0.01, 1e-7, rng=1, accountant=accountant, note="column city")
    name = "gaussian_partition_selection"
    assert [(c.mechanism, c.epsilon, c.delta, c.rho, c.note) for c in accountant.ledger()] == [
        (name, None, 0.0, 0.01, "column city"), (name, 0.0, 1e-7, None, "column city")]
    spent = accountant.spent()
    assert spent.method == "zcdp" and spent.delta == 1e-6
    assert spent.epsilon == pytest.approx(zcdp_epsilon(0.01, 1e-6 - 1e-7), rel=1e-9)
    assert spent == compose([Charge(name, rho=0.01), Charge(name, 0.0, 1e-7)], 1e-6)


def test_gaussian_checks_both_charges_together_before_drawing(monkeypatch):
    pure = Accountant(1.0)  # no delta to spend
    with pytest.raises(BudgetExceeded):
        gaussian_partition_selection({"a": 5}, 0.01, 1e-7, rng=1, accountant=pure)
    assert not pure.ledger()
    # rho fits with the whole delta budget as slack, and (0, delta) fits alone, but not both
    accountant = Accountant(1.0, 1e-6)
    rho = 0.999 * zcdp_rho_limit(1.0, 1e-6)
    accountant.check(rho=rho)
    accountant.check(0.0, 0.9e-6)
    monkeypatch.setattr(partition_module, "discrete_gaussian_noise", lambda *a: pytest.fail("drew noise"))
    with pytest.raises(BudgetExceeded, match=r"spending rho=.*, epsilon=0, delta=9e-07 \(gaussian_partition"):
        gaussian_partition_selection({"a": 5}, rho, 0.9e-6, rng=1, accountant=accountant)
    assert not accountant.ledger()


def test_gaussian_refuses_bad_parameters():
    with pytest.raises(ValueError, match=r"rho \(0\) must be finite and > 0"):
        gaussian_partition_selection({"a": 1}, 0, 1e-6, rng=0)
    with pytest.raises(ValueError, match=r"delta \(0\) must be in \(0, 1\)"):
        gaussian_partition_selection({"a": 1}, 0.1, 0, rng=0)
    with pytest.raises(TypeError, match="counts must be a mapping"):
        gaussian_partition_selection([("a", 1)], 0.1, 1e-6, rng=0)


# -- many columns at one budget: Gaussian against Laplace -------------------------------------------

COLUMNS = 15


@pytest.mark.parametrize("epsilon, laplace_tau, gaussian_tau", [(0.2, 1707, 705), (1.0, 343, 151)])
def test_gaussian_threshold_is_lower_when_columns_share_a_budget(epsilon, laplace_tau, gaussian_tau):
    """At a total (epsilon, 1e-9) over 15 columns: Laplace splits epsilon and delta evenly (basic
    composition); the Gaussian columns split delta / 2 for their thresholds and share the rho
    whose zCDP epsilon at the other delta / 2 is the budget (their rhos add up: sqrt(15) in
    sigma, not 15). An accountant holding the total takes all 15 Gaussian calls."""
    delta = 1e-9
    laplace = partition_threshold(epsilon / COLUMNS, delta / COLUMNS)
    rho = zcdp_rho_limit(epsilon, delta / 2) * (1 - 1e-5) / COLUMNS  # the accountant keeps a 1e-6 share
    gaussian = gaussian_partition_threshold(1 / (2 * rho), delta / 2 / COLUMNS)
    assert (laplace, gaussian) == (laplace_tau, gaussian_tau)
    assert gaussian < 0.5 * laplace
    accountant = Accountant(epsilon, delta)
    for column in range(COLUMNS):
        gaussian_partition_selection({"x": 2 * gaussian}, rho, delta / 2 / COLUMNS, rng=_rng(50, column),
                                     accountant=accountant)
    assert accountant.spent().epsilon <= epsilon
