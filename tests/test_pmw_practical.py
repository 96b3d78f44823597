"""Practical PMW (synth.engines.pmw_practical): its plan, its online loop, its release and its monitor."""

import itertools
import math

import numpy as np
import pytest

import synth.engines.mwem
import synth.engines.pmw_practical
from synth.privacy.accounting import Accountant
from synth.engines.pmw import HALTED, LAZY, UPDATE, run_pmw
from synth.engines.pmw_practical import (PracticalPMW, PracticalPlanError, default_updates, plan_practical,
                                 warm_start_subsets)
from synth.data.schema import Coded, Schema
from synth.data.tables import marginal, marginal_from_dense
from synth.data.workload import Workload

from .test_pmw import SCHEMA, WORKLOAD, correlated_codes

TWO_WAY = Workload.marginals(SCHEMA, 2)


def mean_l1(distribution, codes, workload=TWO_WAY):
    n = len(codes)
    return np.mean([np.abs(marginal_from_dense(distribution, SCHEMA, s) - marginal(codes, SCHEMA, s) / n).sum()
                    for s in workload.subsets])


@pytest.mark.parametrize("epsilon, delta, count", [(1.0, 0.0, 0.0), (0.3, 0.0, 0.015), (1.0, 1e-6, 0.0),
                                                   (2.0, 1e-9, 0.1)])
def test_every_epoch_of_the_plan_fits_the_budget(epsilon, delta, count):
    plan = plan_practical(epsilon, delta, 5000, SCHEMA.universe_size, 12, epsilon_count=count)
    accountant = Accountant(epsilon, delta)
    if count:
        accountant.spend(count)
    for _ in range(plan.updates):
        accountant.spend(plan.epsilon_test)
        accountant.spend(rho=plan.rho_measure) if plan.rho_measure else accountant.spend(plan.epsilon_measure)
    spent = accountant.spent()
    assert spent.epsilon <= epsilon and spent.delta <= delta
    assert spent.epsilon >= 0.99 * epsilon  # the split uses the budget, not a cautious fraction of it
    assert plan.composition in (("zCDP", "basic") if delta else ("basic",))
    assert bool(plan.rho_measure) == (plan.composition == "zCDP") != bool(plan.epsilon_measure)


@pytest.mark.parametrize("updates", [4, 12, 200])
def test_plan_takes_the_composition_whose_measurements_are_less_noisy(updates):
    """With delta > 0, pure epsilon (Laplace) wins for few epochs and zCDP (Gaussian) for many."""
    options = dict(epsilon_count=0.0)
    chosen = plan_practical(1.0, 1e-9, 5000, SCHEMA.universe_size, updates, **options)
    zcdp = plan_practical(1.0, 1e-9, 5000, SCHEMA.universe_size, updates, composition="zCDP", **options)
    pure = plan_practical(1.0, 1e-9, 5000, SCHEMA.universe_size, updates, composition="basic", **options)
    assert chosen.mean_abs_noise() == min(zcdp.mean_abs_noise(), pure.mean_abs_noise())
    assert chosen.composition == ("basic" if updates == 4 else "zCDP" if updates == 200 else chosen.composition)
    assert chosen.delta == 1e-9


def test_plan_threshold_is_the_target_plus_the_mean_test_noise():
    plan = plan_practical(1.0, 0.0, 10_000, 24, 10, alpha=0.01)
    e = plan.epsilon_test
    mean_abs = lambda eps: 2 * math.exp(-eps) / (1 - math.exp(-2 * eps))  # noqa: E731
    assert plan.threshold_count == pytest.approx(100 + mean_abs(e / 2) + mean_abs(e / 4))
    assert plan.epsilon_test == pytest.approx(0.2 * 1.0 / 10)
    with pytest.raises(PracticalPlanError, match=r"alpha \(1.5\) must be in \[0, 1\)"):
        plan_practical(1.0, 0.0, 10_000, 24, 10, alpha=1.5)


def test_the_run_learns_measures_each_subset_once_and_stays_within_budget():
    codes = correlated_codes(20_000, 1)
    # L given: a workload this small is otherwise measured whole up front (``measures_all``)
    run = run_pmw(codes, SCHEMA, WORKLOAD, 1.0, rows=20_000, rng=2, variant="practical", monitor=True,
                  updates=len(WORKLOAD.subsets))
    assert run.plan.updates == len(WORKLOAD.subsets)
    assert run.pmw.updates <= run.plan.updates and run.accountant.spent().epsilon <= 1.0
    measured = [tuple(m.columns) for m in run.pmw.log]
    assert len(measured) == len(set(measured))  # never the same subset twice: measured subsets are lazy
    assert run.rounds.count(UPDATE) == run.pmw.updates and set(run.rounds) <= {LAZY, UPDATE, HALTED}
    uniform = np.full(SCHEMA.universe_size, 1 / SCHEMA.universe_size)
    assert mean_l1(run.pmw.release(), codes) < 0.25 * mean_l1(uniform, codes)
    # answers are counts on n's scale, and the release answers every query of the workload
    assert np.allclose(run.final.sum() / len(WORKLOAD), run.final.mean())
    assert len(run.monitor.rows) == run.pmw.updates


def test_seeded_runs_repeat_and_unseeded_differ():
    codes = correlated_codes(5000, 3)
    one, two = (run_pmw(codes, SCHEMA, WORKLOAD, 1.0, rows=5000, rng=4, variant="practical") for _ in range(2))
    np.testing.assert_array_equal(one.answers, two.answers)
    np.testing.assert_array_equal(one.pmw.release(), two.pmw.release())
    other = run_pmw(codes, SCHEMA, WORKLOAD, 1.0, rows=5000, rng=None, variant="practical")
    assert not np.array_equal(one.answers, other.answers)


def test_query_mode_measures_single_queries():
    codes = correlated_codes(20_000, 5)
    run = run_pmw(codes, SCHEMA, WORKLOAD, 2.0, rows=20_000, rng=6, variant="practical", test="query", updates=20)
    updates = [m for m in run.pmw.log if m.update]  # (the warm start measures one-way marginals)
    assert {m.kind for m in updates} == {"query"} and run.pmw.updates >= 1
    assert all(np.ndim(m.noisy) == 0 for m in updates)


def test_with_delta_measurements_are_gaussian_and_compose_in_zcdp():
    codes = correlated_codes(20_000, 7)
    run = run_pmw(codes, SCHEMA, WORKLOAD, 1.0, 1e-6, rows=20_000, rng=8, variant="practical", updates=40)
    assert run.plan.composition == "zCDP"  # many epochs: Gaussian noise is the less
    mechanisms = {c.mechanism for c in run.accountant.ledger()}
    assert "discrete_gaussian" in mechanisms and "discrete_laplace" not in mechanisms
    spent = run.accountant.spent()
    assert spent.epsilon <= 1.0 and spent.delta <= 1e-6


@pytest.mark.parametrize("representation", ["dense", "factored"])
def test_the_fit_is_mwems_own(monkeypatch, representation):
    """Both engines fit through the distribution's own ``fit``: one fit for MWEM and PMW alike."""
    from synth.models.distribution import DenseDistribution
    from synth.models.factored import FactoredModel

    owner = DenseDistribution if representation == "dense" else FactoredModel
    calls = []
    original = owner.fit

    def spy(self, *args, **kwargs):
        calls.append(type(self).__name__)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(owner, "fit", spy)
    codes = correlated_codes(5000, 3)
    run_pmw(codes, SCHEMA, WORKLOAD, 2.0, rows=5000, rng=4, variant="practical", representation=representation)
    from_pmw = len(calls)
    synth.engines.mwem.mwem(codes, SCHEMA, WORKLOAD, 1.0, rows=5000, rng=5, representation=representation)
    assert from_pmw > 0 and len(calls) > from_pmw and set(calls) == {owner.__name__}


def test_monitor_reports_the_potential_and_the_pythagorean_bound():
    codes = correlated_codes(20_000, 9)
    run = run_pmw(codes, SCHEMA, WORKLOAD, 3.0, rows=20_000, rng=10, variant="practical", monitor=True, warm=False)
    rows = run.monitor.rows
    assert rows and rows[0].phi_before == pytest.approx(
        run.monitor._phi.potential(np.full(SCHEMA.universe_size, 1 / SCHEMA.universe_size), 1.0))
    for before, after in zip(rows, rows[1:]):
        assert after.phi_before == pytest.approx(before.phi_after)  # one D between updates
    for row in rows:
        assert row.pythagorean_bound >= 0 and row.drop == pytest.approx(row.phi_before - row.phi_after)
        assert (row.flag == "potential rose") == (row.phi_after > row.phi_before + 1e-9)


def test_the_monitor_flags_an_update_that_raised_the_potential():
    codes = correlated_codes(2000, 11)
    plan = plan_practical(1.0, 0.0, 2000, SCHEMA.universe_size, 3)
    from synth.engines.monitor import PracticalMonitor

    monitor = PracticalMonitor(marginal(codes, SCHEMA, None), plan.threshold, plan.updates)
    truth = marginal(codes, SCHEMA, None).reshape(-1) / 2000
    uniform = np.full(SCHEMA.universe_size, 1 / SCHEMA.universe_size)
    away = uniform * np.where(truth > truth.mean(), 0.2, 1.8)
    row = monitor.record(uniform, away / away.sum(), query_id=0, query="q", columns=("a",), tested_error=10.0)
    assert row.flag == "potential rose" and row.phi_after > row.phi_before


def test_pmw_practical_refuses_a_plan_for_another_universe():
    plan = plan_practical(1.0, 0.0, 100, 10, 2)
    with pytest.raises(ValueError, match="the plan is for"):
        PracticalPMW(correlated_codes(100, 0), SCHEMA, plan)


# -- the warm start -------------------------------------------------------------------------

SIX = Schema(tuple(Coded(name, size) for name, size in zip("abcdef", (2, 3, 4, 2, 3, 2))))
THREE_WAY = Workload.marginals(SIX, 3)


def six_codes(n, seed):
    """Rows where every column follows a (pairs carry most of the structure)."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 2, n)
    columns = [a] + [np.where(rng.random(n) < 0.7, a % size, rng.integers(0, size, n)) for size in SIX.shape[1:]]
    return np.stack(columns, axis=1).astype(np.int64)


def test_warm_start_subsets_are_the_shared_pairs_of_wide_subsets():
    pairs = warm_start_subsets(THREE_WAY.subsets)
    assert sorted(pairs) == sorted(itertools.combinations("abcdef", 2))  # 15 pairs, each in 4 of the 20 triples
    assert warm_start_subsets(TWO_WAY.subsets) == ()  # 1- and 2-way workloads: none
    assert warm_start_subsets([("a", "b", "c")]) == ()  # a pair only one subset has informs only that one
    four = Workload.marginals(SIX.project(list("abcd")), 3)  # 6 pairs for 4 triples: not worth it
    assert warm_start_subsets(four.subsets) == ()
    assert warm_start_subsets([]) == ()


def test_default_updates_are_one_per_declared_subset():
    assert default_updates(THREE_WAY.subsets) == 20  # the warm start's pairs are not declared subsets
    assert default_updates(TWO_WAY.subsets) == 3
    assert default_updates([("a", "b", "c"), ("a", "b", "c")]) == 1
    many = list(itertools.combinations([f"c{i}" for i in range(16)], 3))  # 560 triples of 16 columns
    assert default_updates(many, zcdp=True) == 64 and default_updates(many) == 32  # MWEM's rounds: past them
    # each measurement's noise outgrows what it adds


@pytest.mark.parametrize("delta", [0.0, 1e-6])
def test_warm_start_and_epochs_share_the_budget_with_equal_measurements(delta):
    warm = warm_start_subsets(THREE_WAY.subsets)
    plan = plan_practical(1.0, delta, 5000, SIX.universe_size, 3, warm_subsets=warm, epsilon_count=0.05)
    accountant = Accountant(1.0, delta)
    accountant.spend(0.05)
    for _ in warm:
        accountant.spend(rho=plan.rho_warm) if delta else accountant.spend(plan.epsilon_warm)
    for _ in range(plan.updates):
        accountant.spend(plan.epsilon_test)
        accountant.spend(rho=plan.rho_measure) if delta else accountant.spend(plan.epsilon_measure)
    assert 0.99 <= accountant.spent().epsilon <= 1.0
    if delta:
        assert plan.rho_warm == pytest.approx(plan.rho_measure) and not plan.epsilon_warm
    else:
        assert plan.epsilon_warm == pytest.approx(plan.epsilon_measure, rel=1e-9) and not plan.rho_warm
    assert plan.warm_share == pytest.approx(15 / (15 + 3 / 0.8))
    assert "warm start            15 marginals of 2 columns" in plan.describe()


def test_the_warm_start_runs_before_the_first_query():
    codes = six_codes(5000, 3)
    run = run_pmw(codes, SIX, THREE_WAY, 1.0, rows=5000, rng=0, updates=20)  # L given: not ``measures_all``
    warm = warm_start_subsets(THREE_WAY.subsets)
    assert [tuple(m.columns) for m in run.pmw.log if m.update == 0] == list(warm)
    assert [m.update for m in run.pmw.log] == sorted(m.update for m in run.pmw.log)  # warm start first
    notes = [c.note for c in run.accountant.ledger()]
    assert all(note.startswith("PMW warm start") for note in notes[:len(warm)])
    assert not any("warm" in note for note in notes[len(warm):])
    assert run.accountant.spent().epsilon <= 1.0 and run.pmw.updates <= run.plan.updates == 20
    # a workload that also asks the pairs: they were measured by the warm start, so never tested
    both = Workload(SIX, Workload.marginals(SIX, 2).queries + THREE_WAY.queries)
    run = run_pmw(codes, SIX, both, 1.0, rows=5000, rng=0, updates=20)
    assert len(run.plan.warm_subsets) == 15 and not any(len(m.columns) == 2 and m.update for m in run.pmw.log)
    pair_cells = sum(math.prod(SIX[name].size for name in pair) for pair in run.plan.warm_subsets)
    assert set(run.rounds[:pair_cells]) == {LAZY}
    cold = run_pmw(codes, SIX, THREE_WAY, 1.0, rows=5000, rng=0, warm=False, updates=20)
    assert cold.plan.warm_subsets == () and not any(m.update == 0 for m in cold.pmw.log)


def test_an_interactive_stream_has_no_warm_start_and_a_schema_l():
    from synth.engines.pmw import open_pmw

    opened = open_pmw(six_codes(2000, 1), SIX, 1.0, rows=2000, rng=0)
    assert opened.plan.warm_subsets == () and opened.plan.updates == 15  # the pairs of 6 columns
    answer = opened.pmw.answer({"where": {"a": 1, "d": 0}}, query_id=0)
    assert answer.round in (LAZY, UPDATE)


@pytest.mark.parametrize("epsilon, updates", [(0.8, 3), (1.0, 7), (0.3, 11), (2.9, 13)])
def test_a_plan_without_warm_start_never_rounds_past_its_budget(epsilon, updates):
    """In floats budget * L / (1 - s) / (L / (1 - s)) can exceed the budget (0.8 over 3 epochs
    did): the exact rational sum of every charge must stay within it."""
    plan = plan_practical(epsilon, 0.0, 3000, 24, updates)
    accountant = Accountant(epsilon, 0.0)
    for _ in range(updates):
        accountant.spend(plan.epsilon_test)
        accountant.spend(plan.epsilon_measure)
    assert accountant.spent().epsilon <= epsilon


@pytest.mark.parametrize("delta", [0.0, 1e-9])
def test_an_offline_workload_spends_its_budget_and_epochs_take_what_is_left(delta):
    """The warm start informs most triples, so most tests are lazy: with fixed shares the
    unused epochs' budget was left unspent; now later epochs take it, and the total stays within
    the budget."""
    codes = six_codes(5000, 4)
    run = run_pmw(codes, SIX, THREE_WAY, 1.0, delta, rows=5000, rng=2, updates=20)
    assert run.pmw.updates < run.plan.updates  # some epochs were never needed
    spent = run.accountant.spent()
    assert spent.epsilon <= 1.0 and spent.delta <= delta
    plan, fixed = run.plan, Accountant(1.0, delta)  # what the plan's equal epochs would have spent
    for _ in plan.warm_subsets:
        fixed.spend(rho=plan.rho_warm) if plan.rho_warm else fixed.spend(plan.epsilon_warm)
    for _ in range(run.pmw.updates):
        fixed.spend(plan.epsilon_test)
        fixed.spend(rho=plan.rho_measure) if plan.rho_measure else fixed.spend(plan.epsilon_measure)
    fixed.spend(plan.epsilon_test)
    assert spent.epsilon >= 0.8 and spent.epsilon > fixed.spent().epsilon + 0.1
    budgets = [m.rho or m.epsilon for m in run.pmw.log if m.update]  # each update's own measurement
    first = plan.rho_measure or plan.epsilon_measure
    assert budgets[0] == pytest.approx(first, rel=1e-3) or budgets[0] > first
    assert budgets[-1] > 1.2 * first  # the budget of epochs that found nothing went to later ones

def test_an_undeclared_stream_keeps_the_plans_equal_epochs():
    """With no declared workload nothing is known ahead: every epoch gets the plan's budget."""
    from synth.engines.pmw import open_pmw

    codes = six_codes(5000, 5)
    opened = open_pmw(codes, SIX, 1.0, rows=5000, rng=3, updates=6)
    for query in THREE_WAY:
        opened.pmw.answer(query)
    budgets = [m.epsilon for m in opened.pmw.log if m.update]
    assert budgets and all(b == pytest.approx(opened.plan.epsilon_measure, rel=1e-9) for b in budgets)


def test_one_way_warm_start_where_no_pair_is_shared():
    """A 2-way workload (no shared pairs) warm-starts on its columns' one-ways, each at a budget
    that grows with its cells (cells^(2/3) under zCDP, against an update's at the mean subset's
    cells) and never above an update's; a 3-way workload's shared pairs hold their one-ways."""
    codes = six_codes(5000, 6)
    pairs = Workload.marginals(SIX, 2)
    run = run_pmw(codes, SIX, pairs, 1.0, 1e-9, rows=5000, rng=1, updates=40)
    plan = run.plan
    assert plan.warm_subsets == tuple((c,) for c in "abcdef") and plan.composition == "zCDP"
    mean = np.mean([math.prod(SIX[c].size for c in s) for s in pairs.subsets])
    for index, (column,) in enumerate(plan.warm_subsets):
        _, rho = plan.warm_budget(index)
        assert rho == pytest.approx(plan.rho_warm * min(1.0, (SIX[column].size / mean) ** (2 / 3)))
        assert rho <= plan.rho_measure
    assert [tuple(m.columns) for m in run.pmw.log if m.update == 0] == list(plan.warm_subsets)
    triples = run_pmw(codes, SIX, THREE_WAY, 1.0, rows=5000, rng=1, updates=20)
    assert all(len(s) == 2 for s in triples.plan.warm_subsets)  # every column is in a shared pair
    cold = run_pmw(codes, SIX, pairs, 1.0, rows=5000, rng=1, warm=False, updates=15)
    assert cold.plan.warm_subsets == ()


def test_a_factored_model_updates_and_answers_with_bounds():
    """The same loop over a factored D (the representation wide tables get): updates refit it,
    answers carry finite bounds and the release is a factored model."""
    codes = six_codes(3000, 8)
    run = run_pmw(codes, SIX, Workload.marginals(SIX, 2), 1.0, rows=3000, rng=0, representation="factored",
                  updates=15)
    assert run.pmw.representation == "factored" and run.pmw.updates >= 1
    assert np.all(np.isfinite(run.bounds)) and run.pmw.release().representation == "factored"
    assert np.isclose(run.final.sum() / len(Workload.marginals(SIX, 2).subsets), 3000, rtol=1e-6)


@pytest.mark.parametrize("delta", [0.0, 1e-9])
def test_a_workload_that_l_would_cover_is_measured_whole_before_the_first_answer(delta):
    """20 triples, fewer than MWEM's default rounds: L by default would update each once, so
    every declared subset is measured up front at an equal budget, no epoch is planned, the
    budget is spent, and every answer is lazy with no test; a query on another subset is
    halted (answered from the model). With L given, or no warm start, the tests come back."""
    from synth.engines.pmw import open_pmw

    assert synth.engines.pmw_practical.measures_all(THREE_WAY.subsets, zcdp=delta > 0)
    assert not synth.engines.pmw_practical.measures_all(Workload.marginals(Schema(tuple(
        Coded(f"x{i}", 2) for i in range(12))), 3).subsets)  # 220 triples: past MWEM's rounds
    codes = six_codes(5000, 7)
    run = run_pmw(codes, SIX, THREE_WAY, 1.0, delta, rows=5000, rng=4)
    plan = run.plan
    assert plan.updates == 0 and plan.warm_subsets == tuple(THREE_WAY.subsets) and not plan.warm_scales
    assert "L=0 epochs" in plan.describe()
    assert [tuple(m.columns) for m in run.pmw.log] == list(THREE_WAY.subsets) and run.pmw.updates == 0
    assert set(run.rounds) == {LAZY} and run.pmw._tests == 0
    charges = run.accountant.ledger()
    assert len(charges) == len(THREE_WAY.subsets) and all(c.note.startswith("PMW warm start") for c in charges)
    assert len({(c.epsilon, c.rho) for c in charges}) == 1  # one budget for all, as MWEM's rounds
    assert 0.999 <= run.accountant.spent().epsilon <= 1.0
    # online answers are the release's (the model is fit once, before the first answer)
    assert np.allclose(run.answers, run.final, rtol=0, atol=1e-6 * 5000)
    opened = open_pmw(codes, SIX, 1.0, delta, rows=5000, rng=4, subsets=THREE_WAY.subsets)
    assert opened.pmw.answer({"where": {"a": 0, "b": 1, "c": 2}}).round == LAZY
    inside = opened.pmw.answer({"where": {"a": 0}})  # not declared, but inside measured triples
    assert inside.round == HALTED and inside.bound < 0.2 * 5000  # their noisy tables bound it
    wider = opened.pmw.answer({"where": {"a": 0, "b": 1, "c": 2, "d": 0}})
    assert wider.round == HALTED and wider.bound >= wider.value  # nothing covers it: the range [0, n]
    for tested in (run_pmw(codes, SIX, THREE_WAY, 1.0, delta, rows=5000, rng=4, updates=20),
                   run_pmw(codes, SIX, THREE_WAY, 1.0, delta, rows=5000, rng=4, warm=False)):
        assert tested.plan.updates == 20 and tested.pmw._tests > 0


def test_a_factored_model_too_small_for_the_workload_keeps_its_tests():
    """``measures_all`` needs a model that holds every declared subset at once."""
    from synth.engines.pmw import open_pmw

    codes = six_codes(2000, 8)
    small = open_pmw(codes, SIX, 1.0, rows=2000, rng=0, subsets=THREE_WAY.subsets, representation="factored",
                     max_model_cells=100)
    assert small.plan.updates == 20 and not any(len(s) == 3 for s in small.plan.warm_subsets)
    roomy = open_pmw(codes, SIX, 1.0, rows=2000, rng=0, subsets=THREE_WAY.subsets, representation="factored")
    assert roomy.plan.updates == 0 and roomy.plan.warm_subsets == tuple(THREE_WAY.subsets)


def test_the_release_is_d_t_unless_d_t_has_fit_the_noise(monkeypatch):
    """The release continues from D_t (fit jointly to the target), and refits from the prior
    only where D_t's residual is below ``OVERFIT_RESIDUAL`` of the noise's expected total."""
    codes = six_codes(5000, 9)
    run = run_pmw(codes, SIX, Workload.marginals(SIX, 2), 1.0, rows=5000, rng=5, updates=15)
    pmw = run.pmw
    assert pmw.updates >= 2
    residual = pmw._total_residual(pmw._dist)
    assert residual > 0 and residual == pytest.approx(sum(
        np.abs(noisy - 5000 * marginal_from_dense(pmw._dist.normalized(), SIX, key)).sum()
        for kind, key, noisy, *_ in pmw._measured))

    def fit_from(dist):
        dist = dist.copy()
        pmw._fit(dist)
        return dist.normalized()

    from_d_t, from_prior = fit_from(pmw._dist), fit_from(pmw._start)
    assert np.abs(from_d_t - from_prior).sum() > 1e-6  # the two differ here, so the choice shows
    for ratio, expected in ((1.0, from_d_t), (0.5, from_prior)):
        pmw.released = None
        monkeypatch.setattr(PracticalPMW, "_total_residual",
                            lambda self, dist, r=ratio: r * self._noise_total)
        np.testing.assert_allclose(pmw.release(), expected, rtol=0, atol=1e-15)


def test_an_outgrown_epoch_gives_way_to_a_richer_one(monkeypatch):
    """A declared workload whose tests mostly find nothing: once a fresh epoch would get
    ``REOPEN_GAIN`` times the open one's budget, the open one ends (its test paid) and a fresh
    one takes over, so more of the budget is spent, never more than all of it. An undeclared
    stream keeps its epochs."""
    schema = Schema(tuple(Coded(f"x{i}", 2) for i in range(11)))
    rng = np.random.default_rng(10)
    codes = rng.integers(0, 2, (6000, 11)).astype(np.uint8)  # independent columns: little to find
    pairs = Workload.marginals(schema, 2)  # 55 pairs: more than MWEM's rounds under pure epsilon
    assert not synth.engines.pmw_practical.measures_all(pairs.subsets)

    monkeypatch.setattr(synth.engines.pmw_practical, "SELECTED_SHARE", 0.0)  # epochs alone: what is tested here

    def run(gain):
        monkeypatch.setattr(synth.engines.pmw_practical, "REOPEN_GAIN", gain)
        return run_pmw(codes, schema, pairs, 1.0, rows=6000, rng=3)

    kept, reopened = run(math.inf), run(2.0)
    epochs = [[c.epsilon for c in r.accountant.ledger() if c.note.startswith("PMW epoch")] for r in (kept, reopened)]
    assert len(epochs[0]) <= kept.pmw.updates + 1  # each epoch ends with an update, or the workload
    assert len(epochs[1]) > reopened.pmw.updates + 1
    assert any(later >= 2.0 * earlier * (1 - 1e-9) for earlier, later in zip(epochs[1], epochs[1][1:]))
    spent = [r.accountant.spent().epsilon for r in (kept, reopened)]
    assert spent[0] < spent[1] <= 1.0
    from synth.engines.pmw import open_pmw

    stream = open_pmw(codes, schema, 1.0, rows=6000, rng=3).pmw  # nothing declared: equal epochs
    stream.answer({"where": {"x0": 1, "x1": 0}})
    stream._left *= 100  # even with far more left than the epoch holds
    assert not stream._outgrown()


def test_a_fresh_epoch_tests_again_what_the_old_one_found_below(monkeypatch):
    """A lazy answer's bound is its epoch's "below" test: once an epoch gives way, the subsets
    it tested lazy are tested again against the new epoch's threshold."""
    from synth.engines.pmw import open_pmw

    schema = Schema(tuple(Coded(f"x{i}", 2) for i in range(11)))
    codes = np.random.default_rng(11).integers(0, 2, (6000, 11)).astype(np.uint8)
    pairs = Workload.marginals(schema, 2)
    monkeypatch.setattr(synth.engines.pmw_practical, "SELECTED_SHARE", 0.0)  # no selected rounds: epochs alone
    pmw = open_pmw(codes, schema, 1.0, rows=6000, rng=4, subsets=pairs.subsets).pmw
    first = {"where": {"x0": 1, "x1": 0}}
    assert pmw.answer(first).round == LAZY and ("x0", "x1") in pmw._tested_lazy
    before = pmw._tests
    monkeypatch.setattr(PracticalPMW, "_outgrown", lambda self: True)
    pmw.answer({"where": {"x2": 1, "x3": 0}})
    assert ("x0", "x1") not in pmw._tested_lazy or pmw.updates
    pmw.answer(first)
    assert pmw._tests == before + 2  # tested again, against the fresh epoch


def test_a_release_from_a_whole_workload_warm_start_is_not_called_unlearned(monkeypatch):
    """``synth generate --mechanism pmw`` warns when PMW learned nothing; a run that measured
    every declared subset up front (no update, L = 0) did learn, and says nothing of the kind."""
    from synth.engines.pmw import PMWConfig, PMWEngine
    from synth.privacy.accounting import Budget

    codes = six_codes(3000, 12)
    whole = PMWEngine(PMWConfig(rows=3000), SIX, THREE_WAY).run(codes, Budget(1.0, 0.0), rng=0)
    assert whole.record.pmw.updates == 0 and whole.record.plan.warm_subsets and not whole.warnings
    monkeypatch.setattr(synth.engines.pmw_practical.AboveThreshold, "test", lambda self, value: False)
    cold = PMWEngine(PMWConfig(rows=3000, warm=False, updates=4), SIX, THREE_WAY).run(
        codes, Budget(1.0, 0.0), rng=0)  # no test fires
    assert cold.record.pmw.updates == 0 and any("PMW made no update" in w for w in cold.warnings)


TWELVE = Schema(tuple(Coded(f"x{i}", 2) for i in range(12)))


def twelve_codes(n: int, seed: int) -> np.ndarray:
    """Independent fair bits, except three pairs that copy each other (95% of rows): (x3, x5),
    (x7, x9) and (x10, x11), none of them among the workload's first pairs."""
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, 2, (n, 12)).astype(np.uint8)
    for a, b in ((3, 5), (7, 9), (10, 11)):
        keep = rng.random(n) < 0.95
        codes[keep, b] = codes[keep, a]
    return codes


@pytest.mark.parametrize("delta", [0.0, 1e-9])
def test_a_workload_past_l_selects_its_worst_subsets_before_the_first_query(delta, monkeypatch):
    """66 pairs, more than L by default: ``selected_rounds`` of L's epochs run first as MWEM's
    rounds (the exponential mechanism picks the pair D_t fits worst, it is measured at an
    update's budget), the epochs after them share the rest and may each update a pair the
    rounds left. The copied pairs are picked first (workload order would pick x0's pairs),
    every charge is the plan's, the budget holds, and the release keeps D_t."""
    from synth.engines.pmw import open_pmw

    pairs = Workload.marginals(TWELVE, 2)
    zcdp = delta > 0
    assert not synth.engines.pmw_practical.measures_all(pairs.subsets, zcdp=zcdp)
    default = default_updates(pairs.subsets, zcdp=zcdp)
    selected = synth.engines.pmw_practical.selected_rounds(pairs.subsets, zcdp=zcdp)
    assert selected == round(synth.engines.pmw_practical.SELECTED_SHARE * default) and 0 < selected < default
    codes = twelve_codes(5000, 1)
    run = run_pmw(codes, TWELVE, pairs, 10.0, delta, rows=5000, rng=3)
    plan, pmw = run.plan, run.pmw
    assert (plan.selected, plan.budgeted_epochs, plan.updates) == (selected, default - selected, 66 - selected)
    assert "selected rounds" in plan.describe()
    rounds = [m for m in pmw.log if m.query.startswith("selected round")]
    assert len(rounds) == pmw.selected == selected
    assert {tuple(m.columns) for m in rounds[:3]} == {("x3", "x5"), ("x7", "x9"), ("x10", "x11")}
    assert len({tuple(m.columns) for m in rounds}) == selected  # each pair measured once
    picks = [c for c in run.accountant.ledger() if c.note.startswith("PMW selected round") and c.note.endswith("select")]
    budget = plan.selection_budget()
    assert len(picks) == selected
    gaussian = bool(plan.rho_measure)  # the plan's composition (zCDP here when delta > 0)
    assert gaussian == zcdp
    assert all((c.rho, c.epsilon) == ((budget.rho_select, None) if gaussian else (None, budget.epsilon_select))
               for c in picks)
    # a round costs what the plan's first epoch does: its selection the test's share
    cost = (budget.rho_select + budget.rho_measure) if gaussian else (budget.epsilon_select + budget.epsilon_measure)
    assert cost == pytest.approx(plan.epoch_cost)
    assert all((m.rho, m.epsilon) == (budget.rho_measure, budget.epsilon_measure) for m in rounds)
    spent = run.accountant.spent()
    assert spent.epsilon <= 10.0 and spent.delta <= delta and spent.epsilon > 9.0
    assert HALTED not in run.rounds and run.learned
    # the copied pairs are answered from their measurements: every cell within a few rows' noise
    truth = marginal(codes, TWELVE, ("x3", "x5")).ravel()
    model = 5000 * marginal_from_dense(pmw.release(), TWELVE, ("x3", "x5")).ravel()
    assert np.abs(model - truth).max() < 25
    # the release keeps D_t even where its residual is below OVERFIT_RESIDUAL of the noise
    expected = pmw._dist.copy()
    pmw._fit(expected)
    pmw.released = None
    monkeypatch.setattr(PracticalPMW, "_total_residual", lambda self, dist: 0.5 * self._noise_total)
    np.testing.assert_allclose(pmw.release(), expected.normalized(), rtol=0, atol=1e-15)
    # L given, or no warm start: no selected rounds, the epochs test every pair
    for tested in (open_pmw(codes, TWELVE, 10.0, delta, rows=5000, rng=3, subsets=pairs.subsets, updates=20),
                   open_pmw(codes, TWELVE, 10.0, delta, rows=5000, rng=3, subsets=pairs.subsets, warm=False)):
        assert tested.plan.selected == 0 and tested.pmw.selected == 0


@pytest.mark.parametrize("delta", [0.0, 1e-9])
def test_selected_rounds_warm_start_on_one_ways_not_shared_pairs(delta):
    """With selected rounds the data choose what to measure, so the warm start is the cheap
    one-way marginals; the shared pairs (each at an update's budget) stay for a plan with L
    given, whose tests need a model that already knows them, and under zCDP for a factored D
    too small for every declared subset."""
    from synth.engines.pmw import PMWConfig, PMWEngine
    from synth.privacy.accounting import Budget

    triples = Workload.marginals(TWELVE, 3).subsets
    assert warm_start_subsets(triples)  # 66 shared pairs for 220 triples
    selecting = PMWEngine(PMWConfig(), TWELVE).practical_plan(Budget(1.0, delta), 8000, triples)
    assert selecting.selected > 0 and selecting.warm_subsets == tuple((f"x{i}",) for i in range(12))
    testing = PMWEngine(PMWConfig(updates=20), TWELVE).practical_plan(Budget(1.0, delta), 8000, triples)
    assert testing.selected == 0 and testing.warm_subsets == warm_start_subsets(triples)
    # a factored D whose cap holds only some triples keeps the pairs' tree under zCDP (cheap there)
    crowded = PMWEngine(PMWConfig(representation="factored", max_model_cells=1000), TWELVE)
    plan = crowded.practical_plan(Budget(1.0, delta), 8000, triples)
    assert plan.selected > 0
    assert plan.warm_subsets and {len(s) for s in plan.warm_subsets} == ({2} if delta else {1})


def test_selected_rounds_pick_only_subsets_an_update_measures_whole():
    """A declared subset past ``max_test_cells`` is tested and measured a query at a time, so a
    selected round does not measure its whole marginal either."""
    schema = Schema(tuple(Coded(f"x{i}", 2) for i in range(4)))
    declared = [("x0",), ("x1",), ("x0", "x1"), ("x2", "x3"), ("x1", "x2")]
    codes = np.random.default_rng(5).integers(0, 2, (2000, 4)).astype(np.uint8)
    codes[:, 1] = codes[:, 0]  # (x0, x1) is the pair D fits worst
    plan = plan_practical(10.0, 0.0, 2000, schema.universe_size, 3, selected=2, max_test_cells=3)
    pmw = PracticalPMW(codes, schema, plan, rng=0, declared=declared)
    assert pmw.selected == 2 and {tuple(m.columns) for m in pmw.log} == {("x0",), ("x1",)}
    wide = plan_practical(10.0, 0.0, 2000, schema.universe_size, 3, selected=1)
    assert tuple(PracticalPMW(codes, schema, wide, rng=0, declared=declared).log[0].columns) == ("x0", "x1")
