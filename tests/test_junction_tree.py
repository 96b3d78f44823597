"""Junction trees checked against brute force on small random graphs."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from synth.models.junction_tree import junction_tree, model_cells, triangulate


def random_instance(seed: int):
    rng = np.random.default_rng(seed)
    count = int(rng.integers(2, 8))
    columns = tuple(f"x{i}" for i in range(count))
    sizes = {c: int(rng.integers(2, 6)) for c in columns}
    subsets = []
    for _ in range(int(rng.integers(0, 9))):
        k = int(rng.integers(1, min(4, count) + 1))
        subsets.append(tuple(columns[i] for i in rng.choice(count, k, replace=False)))
    return columns, sizes, subsets


def chordal_edges(cliques) -> set[frozenset]:
    return {frozenset(p) for c in cliques for p in itertools.combinations(c, 2)}


def is_chordal(nodes, edges) -> bool:
    """Brute force: some elimination order makes every eliminated node's later neighbours a clique."""
    for order in itertools.permutations(nodes):
        ok = True
        for i, v in enumerate(order):
            later = [u for u in order[i + 1:] if frozenset((u, v)) in edges]
            if any(frozenset(p) not in edges for p in itertools.combinations(later, 2)):
                ok = False
                break
        if ok:
            return True
    return False


def maximal_cliques(nodes, edges) -> set[frozenset]:
    cliques = [frozenset(s) for k in range(1, len(nodes) + 1) for s in itertools.combinations(nodes, k)
               if all(frozenset(p) in edges for p in itertools.combinations(s, 2))]
    return {c for c in cliques if not any(c < d for d in cliques)}


def path(tree, i: int, j: int) -> list[int]:
    up_i, up_j = [i], [j]
    while tree.parent[up_i[-1]] >= 0:
        up_i.append(tree.parent[up_i[-1]])
    while tree.parent[up_j[-1]] >= 0:
        up_j.append(tree.parent[up_j[-1]])
    common = next(a for a in up_i if a in up_j)
    return up_i[:up_i.index(common) + 1] + up_j[:up_j.index(common)][::-1]


@pytest.mark.parametrize("seed", range(60))
def test_triangulation_is_chordal_with_exactly_its_maximal_cliques(seed):
    columns, sizes, subsets = random_instance(seed)
    cliques = triangulate(columns, subsets, sizes)
    edges = chordal_edges(cliques)
    original = {frozenset(p) for s in subsets for p in itertools.combinations(s, 2)}
    assert original <= edges  # a triangulation only adds edges
    if len(columns) <= 6:
        assert is_chordal(columns, edges)
    assert {frozenset(c) for c in cliques} == maximal_cliques(columns, edges)
    assert set().union(*map(set, cliques)) == set(columns)
    for s in subsets:
        assert any(set(s) <= set(c) for c in cliques)
    for c in cliques:
        assert list(c) == sorted(c, key=columns.index)


@pytest.mark.parametrize("seed", range(60))
def test_tree_has_running_intersection_and_is_a_maximum_spanning_tree(seed):
    columns, sizes, subsets = random_instance(seed)
    tree = junction_tree(columns, subsets, sizes)
    count = len(tree.cliques)
    assert len(tree.edges) == count - 1 and sorted(tree.order) == list(range(count)) and tree.order[0] == 0
    for child in tree.order[1:]:
        assert tree.order.index(tree.parent[child]) < tree.order.index(child)
    for i, j in itertools.combinations(range(count), 2):
        shared = set(tree.cliques[i]) & set(tree.cliques[j])
        for k in path(tree, i, j):
            assert shared <= set(tree.cliques[k])
    weight = sum(len(tree.separator(a, b)) for a, b in tree.edges)
    if count <= 6:
        best = 0
        pairs = list(itertools.combinations(range(count), 2))
        for chosen in itertools.combinations(pairs, count - 1):
            root = list(range(count))

            def find(x):
                while root[x] != x:
                    x = root[x]
                return x

            spanning = True
            for a, b in chosen:
                ra, rb = find(a), find(b)
                if ra == rb:
                    spanning = False
                    break
                root[ra] = rb
            if spanning:
                best = max(best, sum(len(set(tree.cliques[a]) & set(tree.cliques[b])) for a, b in chosen))
        assert weight == best
    cells = [math.prod(sizes[c] for c in clique) for clique in tree.cliques]
    assert cells[0] == max(cells)
    assert tree.cells(sizes) == sum(cells) == model_cells(columns, subsets, sizes)


def connected(tree, nodes) -> bool:
    nodes = set(nodes)
    start = next(iter(nodes))
    seen, stack = {start}, [start]
    while stack:
        i = stack.pop()
        for j in tree.neighbours(i):
            if j in nodes and j not in seen:
                seen.add(j)
                stack.append(j)
    return seen == nodes


@pytest.mark.parametrize("seed", range(60))
def test_covering_subtree_is_connected_covering_and_minimal(seed):
    columns, sizes, subsets = random_instance(seed)
    tree = junction_tree(columns, subsets, sizes)
    rng = np.random.default_rng(seed)
    for _ in range(5):
        k = int(rng.integers(1, len(columns) + 1))
        wanted = {columns[i] for i in rng.choice(len(columns), k, replace=False)}
        cover = tree.covering_subtree(wanted)
        assert len(set(cover)) == len(cover) and connected(tree, cover)
        assert wanted <= set().union(*(set(tree.cliques[i]) for i in cover))
        assert list(cover) == [i for i in tree.order if i in cover]
        for leaf in cover:  # minimal: no clique at the edge of the cover can go
            inside = [j for j in tree.neighbours(leaf) if j in cover]
            if len(cover) > 1 and len(inside) == 1:
                rest = set().union(*(set(tree.cliques[i]) for i in cover if i != leaf))
                assert not wanted <= rest
        single = tree.clique_containing(wanted)
        if single is not None:
            assert cover == (single,)
            holding = [i for i, c in enumerate(tree.cliques) if wanted <= set(c)]
            assert len(tree.cliques[single]) == min(len(tree.cliques[i]) for i in holding)
        else:
            assert not any(wanted <= set(c) for c in tree.cliques)


def test_separators_and_determinism():
    columns, sizes, subsets = random_instance(11)
    tree = junction_tree(columns, subsets, sizes)
    assert junction_tree(columns, list(reversed(subsets)), sizes).cliques == tree.cliques
    assert junction_tree(columns, subsets, sizes) == tree
    for a, b in tree.edges:
        assert tree.separator(a, b) == tuple(c for c in tree.cliques[a] if c in tree.cliques[b])


def test_unconnected_columns_become_one_tree_and_unknown_names_are_refused():
    tree = junction_tree(("a", "b", "c", "d"), [("a", "b")], {"a": 2, "b": 2, "c": 3, "d": 4})
    assert set(tree.cliques) == {("a", "b"), ("c",), ("d",)} and len(tree.edges) == 2
    with pytest.raises(ValueError, match="'zz'"):
        junction_tree(("a", "b"), [("a", "zz")], {"a": 2, "b": 2})


def test_a_cycle_is_triangulated_with_one_chord():
    columns = ("a", "b", "c", "d")
    cliques = triangulate(columns, [("a", "b"), ("b", "c"), ("c", "d"), ("d", "a")], dict.fromkeys(columns, 3))
    assert len(cliques) == 2 and all(len(c) == 3 for c in cliques)
