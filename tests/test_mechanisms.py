"""Behaviour of the public mechanism functions: shapes, validation, accounting, edge cases.
(Their privacy is audited in test_privacy.py.)"""

import math
from fractions import Fraction

import numpy as np
import pytest

from synth import _kernels
from synth.privacy.accounting import Accountant, BudgetExceeded, split_epsilon
from synth.privacy.composition import advanced_epsilon, zcdp_epsilon
from synth.privacy.mechanisms import (
    AboveThreshold,
    NumericSparse,
    Sparse,
    StreamingExponential,
    discrete_gaussian,
    discrete_gaussian_noise,
    discrete_laplace,
    discrete_laplace_noise,
    exponential,
    laplace_ratio,
)


def test_laplace_ratio_never_exceeds_epsilon_over_sensitivity():
    assert laplace_ratio(1.0) == (1, 1)
    assert laplace_ratio(0.5, 2) == (1, 4)
    for eps, sens in [(0.1, 1), (0.37, 3), (2.9, 0.5), (1e-6, 1)]:
        s, t = laplace_ratio(eps, sens)
        exact = Fraction(eps) / Fraction(sens)
        assert Fraction(s, t) <= exact < Fraction(s + 1, t) or t < 2**40
        assert exact - Fraction(s, t) < Fraction(1, 2**40)
    with pytest.raises(ValueError, match="at least 2\\^-40"):
        laplace_ratio(1e-13)
    with pytest.raises(ValueError, match=r"epsilon \(0\)"):
        laplace_ratio(0)


def test_discrete_laplace_keeps_shape_and_integer_type():
    counts = np.arange(12).reshape(3, 4)
    noisy = discrete_laplace(counts, 1.0, rng=1)
    assert noisy.shape == (3, 4) and noisy.dtype == np.int64
    assert isinstance(discrete_laplace(5, 1.0, rng=1), int)
    assert discrete_laplace(np.array([2.0, 3.0]), 1.0, rng=1).dtype == np.int64


@pytest.mark.parametrize("counts, error, message", [
    (np.array([1.5]), ValueError, "whole numbers"),
    (np.array([np.nan]), ValueError, "whole numbers"),
    (np.array([True]), TypeError, "integers"),
    (np.array(["3"]), TypeError, "integers"),
])
def test_discrete_laplace_refuses_non_integer_counts(counts, error, message):
    with pytest.raises(error, match=message):
        discrete_laplace(counts, 1.0, rng=0)


def test_discrete_laplace_charges_the_accountant_once():
    accountant = Accountant(1.0)
    discrete_laplace(np.zeros(100, dtype=int), 0.4, rng=0, accountant=accountant, note="marginal a,b")
    assert [(c.mechanism, c.epsilon, c.note) for c in accountant.ledger()] == [("discrete_laplace", 0.4, "marginal a,b")]
    discrete_laplace(np.zeros(3, dtype=int), 0.6, rng=0, accountant=accountant)
    with pytest.raises(BudgetExceeded):
        discrete_laplace(np.zeros(3, dtype=int), 0.01, rng=0, accountant=accountant)
    assert len(accountant.ledger()) == 2


def test_overflow_fallback_fills_in_python(monkeypatch):
    real = _kernels.fill_discrete_laplace
    calls = []

    def stop_early(out, start, stop, s, t, state):
        calls.append(start)
        if len(calls) == 1:  # pretend the first draw overflowed
            return start
        return real(out, start, stop, s, t, state)

    monkeypatch.setattr(_kernels, "fill_discrete_laplace", stop_early)
    noise = discrete_laplace_noise(50, 1.0, rng=3)
    assert calls == [0, 1] and noise.shape == (50,)
    assert np.abs(noise).max() < 50


def test_gaussian_fallback_and_python_path_draw_the_same_law(monkeypatch):
    real = _kernels.fill_discrete_gaussian
    calls = []

    def stop_early(out, start, stop, *args):
        calls.append(start)
        if len(calls) == 1:  # pretend the kernel handed the first draw back (2^62 passes)
            return start
        return real(out, start, stop, *args)

    monkeypatch.setattr(_kernels, "fill_discrete_gaussian", stop_early)
    noise = discrete_gaussian_noise(50, 2.5, rng=3)
    assert calls == [0, 1] and noise.shape == (50,) and np.abs(noise).max() < 20
    huge = discrete_gaussian_noise(400, 4e9, rng=4)  # past the kernel's integers: Python draws
    assert 0.8 < huge.var() / 4e9 < 1.25 and abs(huge.mean()) < 4 * math.sqrt(4e9 / 400)


def test_discrete_gaussian_shape_and_zcdp_charge():
    accountant = Accountant(10.0, 1e-6)
    noisy = discrete_gaussian(np.arange(10), 0.5, rng=2, accountant=accountant)
    assert noisy.shape == (10,) and noisy.dtype == np.int64
    assert accountant.ledger()[0].rho == 0.5 and accountant.ledger()[0].epsilon is None
    with pytest.raises(ValueError, match=r"rho \(0\)"):
        discrete_gaussian(np.arange(3), 0)


@pytest.mark.parametrize("scores, message", [
    ([], "non-empty 1-D"),
    ([[1.0, 2.0]], "non-empty 1-D"),
    ([1.0, math.nan], r"scores\[1\] \(nan\) must be finite or -inf"),
    ([1.0, math.inf], r"scores\[1\] \(inf\)"),
    ([-math.inf, -math.inf], "every score is -inf"),
])
def test_exponential_refuses_bad_scores(scores, message):
    with pytest.raises(ValueError, match=message):
        exponential(scores, 1.0, 1.0, rng=0)


def test_exponential_validates_parameters():
    with pytest.raises(ValueError, match="method \\('softmax'\\) must be one of: gumbel, permute_and_flip"):
        exponential([1.0], 1.0, 1.0, method="softmax")
    with pytest.raises(ValueError, match=r"sensitivity \(0\)"):
        exponential([1.0], 1.0, 0)
    with pytest.raises(TypeError, match=r"epsilon \('1'\)"):
        exponential([1.0], "1", 1.0)


@pytest.mark.parametrize("method", ["gumbel", "permute_and_flip"])
def test_excluded_candidates_are_never_chosen(method):
    scores = np.array([0.0, -np.inf, 0.0, -np.inf])
    picks = {exponential(scores, 0.1, 1.0, rng=seed, method=method) for seed in range(300)}
    assert picks == {0, 2}


@pytest.mark.parametrize("method", ["gumbel", "permute_and_flip"])
def test_huge_score_ranges_do_not_overflow(method):
    scores = np.array([1e308, -1e308, 1e308, 0.0])
    with np.errstate(all="raise"):
        picks = {exponential(scores, 1.0, 1.0, rng=seed, method=method) for seed in range(50)}
    assert picks <= {0, 2} and picks


def test_exponential_charges_the_accountant():
    accountant = Accountant(1.0)
    exponential([1.0, 2.0], 0.3, 1.0, rng=0, accountant=accountant)
    exponential([1.0, 2.0], 0.3, 1.0, rng=0, method="permute_and_flip", accountant=accountant)
    assert [c.mechanism for c in accountant.ledger()] == ["exponential (gumbel)", "exponential (permute_and_flip)"]


def test_streaming_equals_one_shot_with_the_same_seed():
    scores = np.random.default_rng(1).normal(size=10_000) * 5
    chooser = StreamingExponential(1.0, 1.0, rng=42)
    for start in range(0, 10_000, 3_000):
        chooser.feed(scores[start:start + 3_000])
    assert chooser.candidates_seen == 10_000
    assert chooser.choose() == exponential(scores, 1.0, 1.0, rng=42)
    with pytest.raises(RuntimeError, match="choose\\(\\) was called"):
        chooser.feed(scores)


def test_streaming_errors():
    chooser = StreamingExponential(1.0, 1.0, rng=0)
    with pytest.raises(ValueError, match="no candidate"):
        chooser.choose()
    with pytest.raises(ValueError, match="overflows"):
        StreamingExponential(1.0, 1e-300, rng=0).feed([1e10])


def test_above_threshold_halts_after_the_first_above_and_charges_once():
    accountant = Accountant(1.0)
    at = AboveThreshold(1000, 1.0, rng=3, accountant=accountant)
    assert accountant.ledger() == ()  # charged at the first release, not before
    answers = [at.test(v) for v in (0, 1, 2, 10_000)]
    assert answers == [False, False, False, True] and at.halted and at.answered == 4
    assert len(accountant.ledger()) == 1
    with pytest.raises(RuntimeError, match="halted"):
        at.test(0)


def test_above_threshold_validation():
    with pytest.raises(ValueError, match=r"threshold \(inf\) must be finite"):
        AboveThreshold(math.inf, 1.0)
    with pytest.raises(ValueError, match=r"epsilon \(-1\)"):
        AboveThreshold(0, -1)
    at = AboveThreshold(0, 1.0, rng=0)
    with pytest.raises(ValueError, match=r"value \(nan\)"):
        at.test(math.nan)
    with pytest.raises(TypeError, match="value"):
        at.test("3")


def test_above_threshold_on_fractions_uses_the_sensitivity_lattice():
    at = AboveThreshold(0.5, 1.0, sensitivity=1 / 10_000, rng=1)
    assert [at.test(v) for v in (0.1, 0.3, 0.9)] == [False, False, True]


def test_numeric_sparse_releases_a_noisy_value_and_charges_both_parts():
    accountant = Accountant(1.0)
    ns = NumericSparse(100, 0.5, 0.5, rng=4, accountant=accountant)
    assert ns.query(1) is None
    released = ns.query(5000)
    assert isinstance(released, int) and abs(released - 5000) < 100 and ns.halted
    assert [c.mechanism for c in accountant.ledger()] == ["above_threshold", "numeric_sparse release"]


def test_sparse_restarts_until_max_above():
    accountant = Accountant(1.0)
    sparse = Sparse(100, 1.0, 3, rng=5, accountant=accountant)
    answers = [sparse.test(v) for v in (0, 1000, 0, 1000, 1000)]
    assert answers == [False, True, False, True, True] and sparse.halted
    assert len(accountant.ledger()) == 3
    assert accountant.spent().epsilon <= 1.0
    with pytest.raises(RuntimeError, match="halted after 3"):
        sparse.test(0)
    approx = Sparse(100, 1.0, 10, delta=1e-6, rng=5)  # basic composition still allows the most here
    assert approx.epsilon_per_run == split_epsilon(1.0, 10) and approx.composition == "basic"


# Sparse with delta > 0: the per-run epsilon is the largest that composes to epsilon.


def sparse_totals(epsilon_per_run: float, runs: int, delta: float) -> dict[str, float]:
    """The total of ``runs`` pure epsilon_per_run-DP runs under each composition theorem."""
    totals = {"basic": runs * epsilon_per_run, "zcdp": zcdp_epsilon(runs * epsilon_per_run**2 / 2, delta)}
    if runs > 1:
        totals["advanced"] = advanced_epsilon([epsilon_per_run] * runs, delta)
    return totals


def sparse_composes_within(epsilon_per_run: float, epsilon: float, runs: int, delta: float) -> bool:
    """Whether ``runs`` runs at epsilon_per_run are (epsilon, delta)-DP by some theorem."""
    return min(sparse_totals(epsilon_per_run, runs, delta).values()) <= epsilon + 1e-9


@pytest.mark.parametrize("max_above", [1, 10, 1000])
@pytest.mark.parametrize("delta", [1e-6, 0.01])
@pytest.mark.parametrize("epsilon", [0.1, 1.0, 10.0, 100.0])
def test_sparse_per_run_epsilon_is_the_largest_that_composes_to_epsilon(epsilon, delta, max_above):
    """The chosen theorem's total at epsilon_per_run is epsilon (to 1e-6 relative: the
    accountant keeps a 1e-6 share of its zCDP rho limit), no theorem's is below it by more,
    the basic split is a floor, and an accountant with budget (epsilon, delta) takes every run."""
    sparse = Sparse(0, epsilon, max_above, delta=delta, rng=1)
    e0 = sparse.epsilon_per_run
    totals = sparse_totals(e0, max_above, delta)
    assert sparse_composes_within(e0, epsilon, max_above, delta)
    assert totals[sparse.composition] == pytest.approx(epsilon, rel=1e-6)
    assert min(totals.values()) >= epsilon * (1 - 1e-6)  # no theorem would allow a larger e0
    assert e0 >= split_epsilon(epsilon, max_above)
    accountant = Accountant(epsilon, delta)
    charged = Sparse(0, epsilon, max_above, delta=delta, rng=2, accountant=accountant)
    while not charged.halted:
        assert charged.test(1e12)
    assert len(accountant.ledger()) == max_above and accountant.spent().epsilon <= epsilon


def test_sparse_old_advanced_formula_overspends_where_the_new_choice_does_not():
    """epsilon / sqrt(8 k ln(1/delta)) = 0.52 per run at (100, 0.01, 1000): far more than 100 in
    total by every theorem. The same check passes the per-run epsilon Sparse now picks."""
    epsilon, delta, runs = 100.0, 0.01, 1000
    old = epsilon / math.sqrt(8 * runs * math.log(1 / delta))
    assert not sparse_composes_within(old, epsilon, runs, delta)
    new = Sparse(0, epsilon, runs, delta=delta, rng=0)
    assert sparse_composes_within(new.epsilon_per_run, epsilon, runs, delta)
    assert new.composition == "zcdp" and new.epsilon_per_run > 3 * epsilon / runs


def test_sparse_pure_split_and_small_delta_fall_back_to_basic():
    assert Sparse(0, 1.0, 7, rng=0).epsilon_per_run == split_epsilon(1.0, 7)
    one = Sparse(0, 2.0, 1, delta=0.01, rng=0)  # one run: composition cannot beat the run itself
    assert one.epsilon_per_run == 2.0 and one.composition == "basic"
