"""MWEM's tree start (``synth.engines.mwem_tree``): the scores' sensitivity, Kruskal's choices,
and a capped run that keeps the strongly related large pair smallest-first would drop."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from synth.data.schema import Coded, Schema
from synth.data.tables import marginal
from synth.data.workload import Workload
from synth.engines.mwem import mwem
from synth.engines.mwem_tree import choose_tree, independence_scores, spanning_edges, tree_columns, tree_pairs

SCHEMA = Schema((Coded("a", 5), Coded("b", 3), Coded("c", 4), Coded("d", 2)))
PAIRS = tree_pairs(Workload.marginals(SCHEMA, 2), SCHEMA)


def _pair_tables(codes: np.ndarray) -> dict:
    return {pair: marginal(codes, SCHEMA, pair).astype(np.float64) for pair in PAIRS}


def _broken_scores(codes: np.ndarray, n: float) -> np.ndarray:
    """The independence prediction from each dataset's own true one-way marginals (no noise):
    it moves with the row, so a score can move by more than 1."""
    ones = {c: marginal(codes, SCHEMA, (c,)).astype(np.float64) for c in SCHEMA.names}
    return independence_scores(PAIRS, _pair_tables(codes), ones, n)


def _worst_move(score_of, trials: int = 200) -> float:
    """The largest change of any pair's score between a dataset and it plus one row."""
    rng = np.random.default_rng(5)
    worst = 0.0
    for _ in range(trials):
        rows = int(rng.integers(5, 40))
        codes = np.column_stack([rng.integers(0, s, rows) for s in SCHEMA.shape])
        extra = np.array([[rng.integers(0, s) for s in SCHEMA.shape]])
        neighbour = np.vstack([codes, extra])
        worst = max(worst, float(np.abs(score_of(codes) - score_of(neighbour)).max()))
    return worst


def test_scores_move_by_at_most_one_between_neighbours_and_the_broken_variant_does_not():
    rng = np.random.default_rng(1)
    noisy = {c: rng.normal(10, 4, s) for c, s in zip(SCHEMA.names, SCHEMA.shape)}  # released before: fixed
    n = 20.0  # the released count: fixed too
    real = _worst_move(lambda codes: independence_scores(PAIRS, _pair_tables(codes), noisy, n))
    assert real <= 1.0 + 1e-9
    assert _worst_move(lambda codes: _broken_scores(codes, float(len(codes)))) > 1.0


def test_clipped_one_ways_give_a_uniform_prediction_when_nothing_is_left():
    tables = {pair: np.zeros([SCHEMA[c].size for c in pair]) for pair in PAIRS}
    ones = {c: -np.ones(s) for c, s in zip(SCHEMA.names, SCHEMA.shape)}  # every count clipped
    scores = independence_scores(PAIRS, tables, ones, 12.0)
    assert scores == pytest.approx([12.0] * len(PAIRS))  # sum of n/(cells) over the cells


def test_kruskal_picks_a_spanning_tree_in_score_order_and_respects_room():
    columns = tree_columns(PAIRS, SCHEMA)
    assert columns == list(SCHEMA.names) and spanning_edges(PAIRS, columns) == 3
    scores = np.array([6.0, 5.0, 1.0, 4.0, 3.0, 2.0])  # ab, ac, ad, bc, bd, cd
    assert PAIRS == list(itertools.combinations("abcd", 2))

    def best(masked, note):
        return int(np.argmax(masked))

    assert choose_tree(PAIRS, columns, scores, best, lambda pair: True) == [("a", "b"), ("a", "c"), ("b", "d")]
    no_b = choose_tree(PAIRS, columns, scores, best, lambda pair: "b" not in pair)
    assert no_b == [("a", "c"), ("c", "d")]  # b is left alone: no pair with room joins it


def test_a_capped_run_keeps_the_strong_large_pair_that_smallest_first_dropped():
    """Two 30-value columns that copy each other and two small independent ones. Under a cap
    of 2,000 cells, the small pairs taken first left no room for a x b (its clique would hold
    every column); the tree start measures a x b first, because the data say it matters."""
    schema = Schema((Coded("a", 30), Coded("b", 30), Coded("c", 4), Coded("d", 4)))
    rng = np.random.default_rng(3)
    rows = 20_000
    a = rng.integers(0, 30, rows)
    b = np.where(rng.random(rows) < 0.9, a, rng.integers(0, 30, rows))
    codes = np.column_stack([a, b, rng.integers(0, 4, rows), rng.integers(0, 4, rows)])
    workload = Workload.marginals(schema, 2)
    result = mwem(codes, schema, workload, 1.0, delta=1e-9, rng=2, representation="factored",
                  max_model_cells=2000, selection="classic")
    measured = [tuple(entry["marginal"]) for entry in result.measurements]
    assert measured[:4] == [("a",), ("b",), ("c",), ("d",)]
    assert ("a", "b") in measured[4:7]  # a tree edge
    assert result.parameters["model_cells"] <= 2000
    assert any("the data choose which" in note for note in result.notes)
    spent = result.accountant.spent()
    assert spent.epsilon <= 1.0 + 1e-9
    truth = marginal(codes, schema, ("a", "b")) / rows
    model = result.distribution.marginal(("a", "b"))
    independent = np.outer(truth.sum(1), truth.sum(0))
    assert np.abs(model - truth).sum() < 0.5 * np.abs(independent - truth).sum()
