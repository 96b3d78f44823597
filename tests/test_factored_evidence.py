"""Counting queries on a factored model by sum-product with evidence: against the full joint on
small models, against a chain's transfer-matrix sum on wide ones, in memory bounded by the cliques."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from synth.models.factored import FactoredModel
from synth.models.model import Model
from synth.engines.pmw import open_pmw
from synth.data.schema import Coded, Schema
from synth.data.tables import count_matching, marginal
from synth.data.workload import MarginalCells, Query, Workload

from .test_factored import dense_marginal, dense_reference


def small_model(seed: int) -> tuple[np.random.Generator, Schema, FactoredModel, np.ndarray]:
    """5-6 columns, pairs and triples chained and branching (several cliques), some zero cells."""
    rng = np.random.default_rng(seed)
    schema = Schema(tuple(Coded(f"c{i}", int(rng.integers(2, 5))) for i in range(int(rng.integers(5, 7)))))
    names = schema.names
    subsets = [(names[i], names[i + 1]) for i in range(len(names) - 1)]
    subsets += [tuple(rng.choice(names, int(rng.integers(2, 4)), replace=False)) for _ in range(2)]
    model, combined = FactoredModel(schema), {}
    for subset in subsets:
        theta = rng.normal(0, 1.5, [schema[c].size for c in subset])
        theta[rng.random(theta.shape) < 0.1] = -np.inf
        model.add_log(subset, theta)
        combined[subset] = combined.get(subset, 0) + theta
    return rng, schema, model, dense_reference(schema, combined)


def random_query(rng: np.random.Generator, schema: Schema, columns: int) -> Query:
    chosen = sorted(rng.choice(len(schema), columns, replace=False))
    allowed = tuple(np.sort(rng.choice(schema.shape[p], int(rng.integers(1, schema.shape[p] + 1)), replace=False))
                    for p in chosen)
    return Query(tuple(schema.names[p] for p in chosen), allowed)


@pytest.mark.parametrize("seed", range(30))
def test_evidence_matches_the_full_joint(seed):
    rng, schema, model, p = small_model(seed)
    if not np.isfinite(p).all():  # every cell zero: nothing to answer (another test's case)
        return
    calibration = model.calibrate()
    assert len(model.tree.cliques) > 1
    for _ in range(25):
        query = random_query(rng, schema, int(rng.integers(1, len(schema) + 1)))
        expected = float(dense_marginal(p, schema, query.columns)[np.ix_(*query.allowed)].sum())
        allowed = dict(zip(query.columns, query.allowed))
        assert calibration._evidence(query.columns, allowed) == pytest.approx(expected, abs=1e-9, rel=1e-9)
        assert model.answer(query) == pytest.approx(expected, abs=1e-9, rel=1e-9)


@pytest.mark.parametrize("seed", range(10))
def test_point_queries_on_every_column_match_the_full_joint(seed):
    rng, schema, model, p = small_model(100 + seed)
    if not np.isfinite(p).all():
        return
    for flat in rng.choice(p.size, 20, replace=False):
        cell = np.unravel_index(flat, schema.shape)
        query = Query(tuple(schema.names), tuple(np.array([c]) for c in cell))
        assert model.calibrate()._evidence(query.columns, dict(zip(query.columns, query.allowed))) == pytest.approx(
            p[cell], abs=1e-12, rel=1e-9)


def chain(columns: int, size: int, seed: int) -> tuple[Schema, FactoredModel, list[np.ndarray]]:
    """A chain c0 - c1 - ... of random pair potentials: |U| = size**columns, cliques of size**2 cells."""
    rng = np.random.default_rng(seed)
    schema = Schema(tuple(Coded(f"c{i}", size) for i in range(columns)))
    model = FactoredModel(schema)
    thetas = []
    for i in range(columns - 1):
        theta = rng.normal(0, 1.0, (size, size))
        model.add_log((f"c{i}", f"c{i + 1}"), theta)
        thetas.append(theta)
    return schema, model, thetas


def chain_reference(schema: Schema, thetas: list[np.ndarray], query: Query) -> float:
    """P(query) on a chain by the transfer-matrix sum (forward vectors), with and without the
    query's indicators: plain NumPy, never a table over more than two columns."""
    indicator = [np.ones(size) for size in schema.shape]
    for column, allowed in zip(query.columns, query.allowed):
        indicator[schema.index(column)] = np.zeros(schema[column].size)
        indicator[schema.index(column)][allowed] = 1.0

    def total(weights: list[np.ndarray]) -> float:
        forward = weights[0]
        for i, theta in enumerate(thetas):
            forward = (forward @ np.exp(theta)) * weights[i + 1]
        return float(forward.sum())

    return total(indicator) / total([np.ones(size) for size in schema.shape])


def test_a_wide_query_on_a_chain_matches_the_transfer_matrix_sum():
    schema, model, thetas = chain(14, 10, seed=1)
    rng = np.random.default_rng(2)
    for columns in (3, 8, 14):
        for _ in range(5):
            query = random_query(rng, schema, columns)
            assert not model.marginal_fits(query.columns) or columns == 3
            assert model.answer(query) == pytest.approx(chain_reference(schema, thetas, query), rel=1e-9, abs=1e-15)


def test_a_wide_point_query_is_answered_in_memory_bounded_by_the_cliques():
    """An 8-column point query on 14 columns of 100 values: its marginal would have 10^16 cells
    (the old code asked for that table and failed); the answer needs only clique-sized tables."""
    schema, model, thetas = chain(14, 100, seed=3)
    query = Query(tuple(f"c{i}" for i in (0, 2, 3, 5, 7, 8, 11, 13)), tuple(np.array([v]) for v in (1, 5, 9, 0, 3, 7,
                                                                                                          2, 99)))
    model.calibrate()
    tracemalloc.start()
    try:
        value = model.answer(query)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert value == pytest.approx(chain_reference(schema, thetas, query), rel=1e-9)
    clique_bytes = 100 * 100 * 8
    assert peak < 20 * clique_bytes  # a few clique-sized tables at most (10^16 cells asked before)


def test_a_workload_answers_wide_queries_one_by_one_and_the_rest_from_tables():
    schema, model, thetas = chain(14, 10, seed=4)
    wide = Query(tuple(f"c{i}" for i in range(0, 14, 2)), tuple(np.array([i % 10]) for i in range(7)))
    ranged = Query(("c1", "c4", "c6", "c7", "c9", "c11", "c13"), tuple(np.arange(i, i + 4) for i in range(7)))
    pair = Query(("c2", "c9"), (np.array([3]), np.array([1, 4])))
    workload = Workload(schema, [MarginalCells(("c0", "c5"), (10, 10)), wide, pair, ranged, wide])
    assert not model.marginal_fits(wide.columns) and not model.marginal_fits(ranged.columns)
    assert model.marginal_fits(pair.columns)
    answers = model.answer_workload(workload)
    assert answers.dtype == np.float64 and len(answers) == 104
    np.testing.assert_allclose(answers[:100], model.marginal(("c0", "c5")).reshape(-1), rtol=1e-12)
    expected = [chain_reference(schema, thetas, q) for q in (wide, pair, ranged, wide)]
    np.testing.assert_allclose(answers[100:], expected, rtol=1e-9)
    saved = Model(schema=schema, mechanism="mwem", distribution=model, rows=1000.0, rows_public=True)
    np.testing.assert_allclose(saved.answer(workload), 1000.0 * answers, rtol=1e-12)


def test_a_table_function_giving_none_falls_back_to_each_query():
    schema = Schema((Coded("a", 3), Coded("b", 2)))
    workload = Workload(schema, [MarginalCells(("a",), (3,)), Query(("a", "b"), (np.array([1]), np.array([0, 1])))])
    counts = {("a",): np.array([4, 5, 6])}
    got = workload.answer(lambda s: counts.get(s), each=lambda q: 0.5)
    np.testing.assert_array_equal(got, [4.0, 5.0, 6.0, 0.5])
    with pytest.raises(ValueError):  # without ``each`` a missing table is still an error
        workload.answer(lambda s: counts.get(s))


@pytest.mark.parametrize("seed", range(5))
def test_count_matching_matches_the_marginal_table(seed):
    rng = np.random.default_rng(seed)
    schema = Schema(tuple(Coded(f"c{i}", int(rng.integers(2, 6))) for i in range(6)))
    codes = np.column_stack([rng.integers(0, k, 500) for k in schema.shape])
    for columns in range(0, 7):
        query = random_query(rng, schema, columns)
        table = marginal(codes, schema, query.columns)
        expected = int(table[np.ix_(*query.allowed)].sum()) if query.columns else len(codes)
        assert count_matching(codes, schema, query) == expected


@pytest.mark.parametrize("variant", ["practical", "theory"])
def test_pmw_answers_a_wide_query_on_a_factored_model(variant):
    """PMW's online answer to an 8-column point query over 14 columns of 100 values: the model
    answers by evidence and the true count comes from the rows, never from a 10^16-cell table."""
    rng = np.random.default_rng(5)
    schema = Schema(tuple(Coded(f"c{i}", 100) for i in range(14)))
    codes = np.column_stack([rng.integers(0, 3, 2000) for _ in range(14)])
    opened = open_pmw(codes, schema, 2.0, 0.0, 0.05, rows=2000, rng=1, variant=variant,
                      **({"queries": 3, "alpha": 0.5, "updates": 2} if variant == "theory" else {}))
    pmw = opened.pmw
    assert pmw.representation == "factored"
    wide = Query(tuple(f"c{i}" for i in range(8)), tuple(np.array([1]) for _ in range(8)))
    first = pmw.answer(Query(("c0",), (np.array([0]),)))
    result = pmw.answer(wide)
    after = pmw.answer(Query(("c1",), (np.array([2]),)))
    assert np.isfinite(result.value) and np.isfinite(first.value) and np.isfinite(after.value)
    assert pmw._true_count(wide) == count_matching(codes, schema, wide)
    assert pmw.model_answer(wide) == pytest.approx(2000 * pmw._dist.answer(wide), rel=1e-12)
    final = pmw.model_fractions(Workload(schema, [wide]))
    assert final[0] == pytest.approx(pmw._dist.answer(wide), rel=1e-12)



def test_pmw_tests_a_wide_query_that_fits_the_model_on_the_rows(monkeypatch):
    """A 7-column query of 2.1e6 cells fits a factored D (cap 10^7) but its data table is past
    the small-table size: its true count comes from matching the rows, and the answer is made."""
    import synth.engines.pmw

    rng = np.random.default_rng(6)
    schema = Schema(tuple(Coded(f"c{i}", 8) for i in range(10)))
    codes = np.column_stack([rng.integers(0, 2, 3000) for _ in range(10)])
    opened = open_pmw(codes, schema, 4.0, 0.0, 0.05, rows=3000, rng=2, representation="factored")
    pmw = opened.pmw
    counted = []
    monkeypatch.setattr(synth.engines.pmw_base, "count_matching", lambda *a: counted.append(a[2]) or count_matching(*a))
    wide = Query(tuple(f"c{i}" for i in range(7)), tuple(np.array([0, 1]) for _ in range(7)))
    assert pmw._dist.fits(wide.columns)
    result = pmw.answer(wide)
    assert counted and all(q is wide for q in counted) and np.isfinite(result.value)  # tested (and measured)
    assert result.round in ("lazy", "update")


def test_a_query_whose_cover_spans_more_columns_than_einsum_takes_is_answered():
    """Two ends of a 60-column chain: a 4-cell marginal, but the cliques between them hold 60
    columns, past einsum's 52 axes (refused before); evidence answers it, and the workload too."""
    schema, model, thetas = chain(60, 2, seed=7)
    query = Query(("c0", "c59"), (np.array([1]), np.array([0])))
    assert not model.marginal_fits(query.columns)
    assert model.answer(query) == pytest.approx(chain_reference(schema, thetas, query), rel=1e-9)
    workload = Workload(schema, [MarginalCells(("c0", "c59"), (2, 2))])
    cells = [Query(("c0", "c59"), (np.array([a]), np.array([b]))) for a in range(2) for b in range(2)]
    np.testing.assert_allclose(model.answer_workload(workload), [chain_reference(schema, thetas, q) for q in cells],
                               rtol=1e-9)
