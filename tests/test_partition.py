"""Partition selection (``synth.privacy.mechanisms.partition``): the threshold against a brute-force
sum of the discrete Laplace pmf, the probability that a value held by one row is released
(at most delta; a variant with no threshold, or a threshold one too low, is caught), an
(epsilon, delta) audit of the released noisy counts on neighbouring count tables, and the
behaviour (order, accounting, validation).

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

from synth.privacy.accounting import Accountant, BudgetExceeded
from synth.privacy.mechanisms import laplace_ratio, partition_selection, partition_threshold
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
