"""The exact least-cells triangulation (``synth._kernels.triangulation``) and its use: a junction
tree under a cell limit, and a factored model that grows whenever some triangulation fits."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from synth._kernels.triangulation import least_cells_order
from synth.data.schema import Coded, Schema
from synth.models.factored import FactoredModel, ModelSizeError
from synth.models.junction_tree import junction_tree, least_cells, model_cells

from .test_junction_tree import chordal_edges, is_chordal, maximal_cliques, path, random_instance

#: A 4-cycle a-b-c-d-a: min-fill's chord b-d (its first clique, {a, b, d}, is the smallest) leaves
#: cliques of 50 + 150 cells; the chord a-c leaves 60 + 60.
CYCLE = [("a", "b"), ("b", "c"), ("c", "d"), ("a", "d")]
CYCLE_SIZES = {"a": 2, "b": 5, "c": 6, "d": 5}


def elimination_cliques(adjacent: list[int], order) -> list[int]:
    """Reference: the maximal cliques (masks) that eliminating in ``order`` leaves, in plain Python."""
    graph, left, out = list(adjacent), (1 << len(adjacent)) - 1, []
    for v in order:
        near = graph[v] & left & ~(1 << v)
        out.append(near | 1 << v)
        for u in range(len(graph)):
            if near >> u & 1:
                graph[u] |= near & ~(1 << u)
        left &= ~(1 << v)
    return [m for m in out if not any(m != o and m & o == m for o in out)]


def total_cells(masks, sizes) -> int:
    return sum(math.prod(int(sizes[i]) for i in range(len(sizes)) if m >> i & 1) for m in masks)


def random_graph(rng: np.random.Generator, n: int) -> list[int]:
    p = rng.random()
    adjacent = [0] * n
    for i, j in itertools.combinations(range(n), 2):
        if rng.random() < p:
            adjacent[i] |= 1 << j
            adjacent[j] |= 1 << i
    return adjacent


@pytest.mark.parametrize("seed", range(40))
def test_least_cells_order_is_the_best_of_every_elimination_order(seed):
    """Against brute force over all n! orders (n <= 7): the same least total, and the order it
    writes leaves exactly that total."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 8))
    adjacent = random_graph(rng, n)
    sizes = rng.integers(1, 12, n)
    brute = min(total_cells(elimination_cliques(adjacent, order), sizes) for order in itertools.permutations(range(n)))
    order = np.full(n, -1, dtype=np.int64)
    got = least_cells_order(np.array(adjacent, dtype=np.int64), sizes.astype(np.float64), order)
    assert sorted(order.tolist()) == list(range(n))
    assert got == brute == total_cells(elimination_cliques(adjacent, order.tolist()), sizes)


def test_min_fill_is_not_always_least_and_a_limit_asks_for_the_least():
    columns = tuple(CYCLE_SIZES)
    assert model_cells(columns, CYCLE, CYCLE_SIZES) == 200  # min-fill's, without a limit
    assert least_cells(columns, CYCLE, CYCLE_SIZES, 500) == (200, False)  # under the limit: min-fill's, kept
    assert least_cells(columns, CYCLE, CYCLE_SIZES, 150) == (120, True)
    tree = junction_tree(columns, CYCLE, CYCLE_SIZES, limit=150)
    assert {frozenset(c) for c in tree.cliques} == {frozenset("abc"), frozenset("acd")}
    assert tree.cells(CYCLE_SIZES) == 120 == model_cells(columns, CYCLE, CYCLE_SIZES, limit=150)


@pytest.mark.parametrize("seed", range(60))
def test_a_tree_under_a_limit_is_a_junction_tree_no_bigger_than_min_fills(seed):
    columns, sizes, subsets = random_instance(seed)
    plain = model_cells(columns, subsets, sizes)
    tree = junction_tree(columns, subsets, sizes, limit=1)  # every instance is past it: the least one
    edges = chordal_edges(tree.cliques)
    assert {frozenset(p) for s in subsets for p in itertools.combinations(s, 2)} <= edges
    if len(columns) <= 6:
        assert is_chordal(columns, edges)
    assert {frozenset(c) for c in tree.cliques} == maximal_cliques(columns, edges)
    for i, j in itertools.combinations(range(len(tree.cliques)), 2):
        shared = set(tree.cliques[i]) & set(tree.cliques[j])
        assert all(shared <= set(tree.cliques[k]) for k in path(tree, i, j))
    cells, exact = least_cells(columns, subsets, sizes, 1)
    assert exact and tree.cells(sizes) == cells <= plain


def test_parts_past_the_exact_limit_keep_min_fill_and_say_so(monkeypatch):
    import synth.models.junction_tree as jt

    monkeypatch.setattr(jt, "EXACT_COLUMNS", 3)
    columns = tuple(CYCLE_SIZES)
    assert least_cells(columns, CYCLE, CYCLE_SIZES, 150) == (200, False)


def cycle_model(max_cells: int) -> FactoredModel:
    schema = Schema(tuple(Coded(c, k) for c, k in CYCLE_SIZES.items()))
    model = FactoredModel(schema, max_cells=max_cells)
    for subset in CYCLE[:3]:
        model.add_subset(subset)
    return model


def test_a_model_grows_when_some_triangulation_fits():
    model = cycle_model(150)
    assert model.fits(("a", "d")) and model.cells_with(("d", "a")) == 120
    model.add_subset(("a", "d"))
    assert model.cells == 120 <= model.max_cells
    assert {frozenset(c) for c in model.tree.cliques} == {frozenset("abc"), frozenset("acd")}


def test_a_refusal_is_exact_and_remembered(monkeypatch):
    from synth.models import factored

    model = cycle_model(119)
    assert not model.fits(("a", "d"))
    with pytest.raises(ModelSizeError):
        model.add_subset(("a", "d"))

    def fail(*args, **kwargs):
        raise AssertionError("a remembered refusal triangulates nothing")

    monkeypatch.setattr(factored, "least_cells", fail)
    assert not model.fits(("d", "a")) and not model.copy().fits(("a", "d"))
    twin = cycle_model(150)  # another cap: not refused
    monkeypatch.undo()
    assert twin.fits(("a", "d"))
