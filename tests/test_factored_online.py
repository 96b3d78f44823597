"""A factored model's cheap online moves (one measurement fit alone, a fit stopped at convergence
or started from a given step) and its queries across cliques (tables only where they are cheap
to build, evidence otherwise), against the dense definition."""

from __future__ import annotations

import numpy as np
import pytest

from synth.data.schema import Coded, Schema
from synth.data.workload import MarginalCells, Query, Workload
from synth.engines.pmw import run_pmw
from synth.models.factored import SMALL_TABLE_CELLS, TABLE_QUERIES, FactoredModel
from synth.models.fit import CONVERGED, ONLINE_PASSES

from .test_factored import dense_marginal, dense_reference

N = 5000.0


def small_model(seed: int):
    """Five columns, a chain of pairs and one triple: several cliques."""
    rng = np.random.default_rng(seed)
    schema = Schema(tuple(Coded(f"c{i}", int(rng.integers(2, 5))) for i in range(5)))
    names = schema.names
    subsets = [(names[0], names[1]), (names[1], names[2]), (names[2], names[3], names[4])]
    potentials = {s: rng.normal(0, 1, [schema[c].size for c in s]) for s in subsets}
    return rng, schema, FactoredModel(schema, potentials=potentials), potentials


def noisy_table(rng, schema, subset) -> np.ndarray:
    return rng.dirichlet(np.ones(int(np.prod([schema[c].size for c in subset])))).reshape(
        [schema[c].size for c in subset]) * N + rng.normal(0, 20, [schema[c].size for c in subset])


@pytest.mark.parametrize("seed", range(6))
def test_fit_one_moves_only_its_potential_and_knows_its_marginal(seed):
    rng, schema, model, _ = small_model(seed)
    subset = (schema.names[3], schema.names[2])  # inside the triple's clique, given out of order
    noisy = noisy_table(rng, schema, subset)
    before = {s: model.potential(s) for s in model.subsets}
    start = np.abs(noisy - N * model.marginal(subset)).sum()
    done, residual = model.fit_one(("marginal", subset, noisy), N, 200)
    assert done > 0 and residual < start
    moved = [s for s in model.subsets if not np.array_equal(model.potential(s), before.get(s, 0.0))]
    assert moved == [model.canonical(subset)]
    known = model.marginal(subset)  # from fit_one, without a calibration
    assert model._calibration is None
    assert residual == pytest.approx(np.abs(noisy - N * known).sum(), rel=1e-12)
    combined = {s: model.potential(s) for s in model.subsets}
    np.testing.assert_allclose(known, dense_marginal(dense_reference(schema, combined), schema, subset), atol=1e-13)
    model.calibrate()
    np.testing.assert_allclose(model.marginal(subset), known, atol=1e-13)


def test_fit_one_fits_a_query_on_its_cells():
    _, schema, model, _ = small_model(0)
    names = schema.names
    query = Query((names[0], names[1]), (np.array([0, 1]), np.array([1])))
    mask = np.zeros([schema[c].size for c in query.columns], dtype=bool)
    mask[np.ix_(*query.allowed)] = True
    target = 0.6 * N
    start = abs(target - N * model.marginal(query.columns)[mask].sum())
    done, residual = model.fit_one(("query", 0, target), N, 500, workload=[query], stop_residual=1.0)
    assert done > 0 and residual <= 1.0 < start
    assert N * model.answer(query) == pytest.approx(target, abs=1.0)


def test_a_known_marginal_is_dropped_when_the_model_moves():
    rng, schema, model, _ = small_model(1)
    subset = schema.names[3:5]
    model.fit_one(("marginal", subset, noisy_table(rng, schema, subset)), N, 50)
    model.add_log(schema.names[:2], rng.normal(0, 1, [schema[c].size for c in schema.names[:2]]))
    fresh = FactoredModel(schema, potentials={s: model.potential(s) for s in model.subsets})
    np.testing.assert_allclose(model.marginal(subset), fresh.marginal(subset), atol=1e-13)


def measurements(rng, schema, model):
    subsets = [s for s in model.subsets if len(s) == 2]
    return [("marginal", s, noisy_table(rng, schema, s)) for s in subsets]


@pytest.mark.parametrize("seed", range(4))
def test_a_converged_fit_stops_sooner_without_raising_the_loss(seed):
    rng, schema, model, _ = small_model(seed)
    measured = measurements(rng, schema, model)

    def loss(m):
        return sum(float(np.square(t - N * m.marginal(s)).sum()) for _, s, t in measured)

    full, early = model.copy(), model.copy()
    start = loss(model)
    passes, _ = full.fit(measured, N, 300)
    fewer, _ = early.fit(measured, N, 300, converged=CONVERGED)
    assert fewer < passes
    assert loss(full) <= loss(early) <= start


def test_a_fit_starts_from_the_step_it_is_given_and_reports_where_it_ended():
    rng, schema, model, _ = small_model(2)
    measured = measurements(rng, schema, model)
    one, four = model.copy(), model.copy()
    one.fit(measured, N, 1)
    four.fit(measured, N, 1, step=4.0)
    for subset in [s for _, s, _ in measured]:
        moved_one = one.potential(subset) - model.potential(subset)
        moved_four = four.potential(subset) - model.potential(subset)
        if np.abs(moved_four).max() > 0:  # the pass was kept: 4 times MW's step
            np.testing.assert_allclose(moved_four, 4 * moved_one, rtol=1e-9, atol=1e-15)
    assert one.last_step == 1.5 and four.last_step in (6.0, 2.0)


# -- queries across cliques ------------------------------------------------------------------


def wide_separator_model(seed: int):
    """Two cliques over (x, s1, s2, s3) and (s1, s2, s3, y) with a 1,000-cell separator: the table
    on (x, y) has 2,500 cells but takes some 2.5M multiply-adds to build."""
    rng = np.random.default_rng(seed)
    schema = Schema((Coded("x", 50), Coded("s1", 10), Coded("s2", 10), Coded("s3", 10), Coded("y", 50)))
    potentials = {("x", "s1", "s2", "s3"): rng.normal(0, 1, (50, 10, 10, 10)),
                  ("s1", "s2", "s3", "y"): rng.normal(0, 1, (10, 10, 10, 50))}
    return rng, schema, FactoredModel(schema, potentials=potentials), potentials


def test_an_expensive_table_is_left_to_evidence_until_queries_pay_for_it():
    _, schema, model, potentials = wide_separator_model(0)
    p = dense_reference(schema, potentials)
    truth = dense_marginal(p, schema, ("x", "y"))
    work, cover = model.calibrate().table_work(("x", "y"))
    assert work > max(TABLE_QUERIES * cover, SMALL_TABLE_CELLS)
    assert not model.marginal_fits(("x", "y"))
    queries = [Query(("x", "y"), (np.array([3]), np.array([7]))),  # one cell
               Query(("x", "y"), (np.arange(10, 30), np.arange(5, 45))),  # ranges: views
               Query(("x", "y"), (np.array([1, 4, 9, 30]), np.array([0, 2, 49])))]  # codes apart: gathers
    asked = 0
    while not model.marginal_fits(("x", "y")):
        query = queries[asked % len(queries)]
        assert model.answer(query) == pytest.approx(truth[np.ix_(*query.allowed)].sum(), rel=1e-9)
        asked += 1
    assert asked == int(np.ceil(work / cover))  # rent, then buy
    np.testing.assert_allclose(model.marginal(("y", "x")), truth.T, rtol=1e-9, atol=1e-15)


def test_a_workload_of_whole_marginals_builds_the_expensive_table():
    _, schema, model, potentials = wide_separator_model(1)
    truth = dense_marginal(dense_reference(schema, potentials), schema, ("x", "y"))
    workload = Workload(schema, [MarginalCells(("x", "y"), (50, 50))])
    np.testing.assert_allclose(model.answer_workload(workload), truth.reshape(-1), rtol=1e-9, atol=1e-15)
    assert ("x", "y") in model.calibrate()._cache


@pytest.mark.parametrize("seed", range(4))
def test_marginals_across_several_cliques_match_the_dense_definition(seed):
    rng = np.random.default_rng(seed)
    schema = Schema(tuple(Coded(f"c{i}", int(rng.integers(2, 5))) for i in range(7)))
    names = schema.names
    subsets = [(names[0], names[1]), (names[1], names[2]), (names[1], names[3]), (names[3], names[4]),
               (names[2], names[5]), (names[5], names[6])]  # a branching tree of pairs
    potentials = {s: rng.normal(0, 1, [schema[c].size for c in s]) for s in subsets}
    model = FactoredModel(schema, potentials=potentials)
    p = dense_reference(schema, potentials)
    for key in [(names[0], names[4], names[6]), (names[6], names[0]), (names[4], names[2], names[5], names[0])]:
        np.testing.assert_allclose(model.marginal(key), dense_marginal(p, schema, key), rtol=1e-9, atol=1e-15)


# -- practical PMW's online refit of a factored model ------------------------------------------


def test_pmw_refits_a_factored_model_online_in_a_few_passes(monkeypatch):
    calls = []
    original = FactoredModel.fit

    def spy(self, measured, n, passes, **kwargs):
        calls.append((passes, kwargs.get("converged", 0.0)))
        return original(self, measured, n, passes, **kwargs)

    monkeypatch.setattr(FactoredModel, "fit", spy)
    schema = Schema(tuple(Coded(f"c{i}", 4) for i in range(5)))
    rng = np.random.default_rng(3)
    codes = rng.integers(0, 4, (3000, 5))
    codes[:, 1] = np.where(rng.random(3000) < 0.7, codes[:, 0], codes[:, 1])
    run = run_pmw(codes, schema, Workload.marginals(schema, 2), 1.0, rows=3000, rng=0, representation="factored",
                  updates=10)  # L given: not measured up front
    assert run.pmw.updates >= 1
    online = [c for c in calls if c[0] == ONLINE_PASSES]
    assert online and all(converged == CONVERGED for _, converged in online)
    assert all(p <= ONLINE_PASSES for p in run.pmw.fit_passes)
