"""Junction trees over column subsets: min-fill triangulation and a maximum spanning tree.

A factored distribution D ∝ exp(Σ_S θ_S[u_S]) is a Markov random field whose graph joins the
columns that share a subset S. Exact inference on it needs that graph triangulated (made
chordal): its maximal cliques, joined into a tree with the running intersection property
(the cliques holding any one column form a connected subtree), let sum-product compute every
clique's marginal. Greedy min-fill elimination keeps the cliques small; the model's size is
their total cells.

Column sets are Python ints used as bit masks (bit i = the i-th column in canonical order),
so that triangulating 50 columns takes a few milliseconds: a model runs it once per
candidate subset per round, to test its size cap.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from synth._kernels.triangulation import least_cells_order

__all__ = ["EXACT_COLUMNS", "Forest", "JunctionTree", "junction_tree", "least_cells", "model_cells",
           "triangulate"]


@dataclass(frozen=True)
class JunctionTree:
    """Maximal cliques (columns in canonical order) joined into one tree rooted at clique 0.

    Clique 0 is the largest in cells. ``clique_cells`` (when given) holds each clique's cells,
    so that ``clique_containing`` can prefer the cheapest clique without being passed sizes.
    """

    columns: tuple[str, ...]
    cliques: tuple[tuple[str, ...], ...]
    edges: tuple[tuple[int, int], ...]  # (parent, child)
    order: tuple[int, ...]  # root first; every clique after its parent
    parent: tuple[int, ...]  # -1 for the root
    clique_cells: tuple[int, ...] = ()

    def separator(self, i: int, j: int) -> tuple[str, ...]:
        """The columns cliques ``i`` and ``j`` share, in canonical order."""
        other = set(self.cliques[j])
        return tuple(c for c in self.cliques[i] if c in other)

    def cells(self, sizes: Mapping[str, int]) -> int:
        """Total cells of the clique tables: the model's size."""
        return sum(_cells(clique, sizes) for clique in self.cliques)

    def neighbours(self, i: int) -> tuple[int, ...]:
        """The cliques joined to clique ``i`` by a tree edge (parent first, then children)."""
        children = tuple(b for a, b in self.edges if a == i)
        return children if self.parent[i] < 0 else (self.parent[i], *children)

    def clique_containing(self, subset: Iterable[str]) -> int | None:
        """The smallest clique holding all of ``subset`` (fewest cells, then lowest index); None if none.

        Without ``clique_cells`` "smallest" falls back to fewest columns.
        """
        wanted = self._checked(subset)
        best: int | None = None
        for i, clique in enumerate(self.cliques):
            if wanted.issubset(clique) and (best is None or self._weight(i) < self._weight(best)):
                best = i
        return best

    def covering_subtree(self, subset: Iterable[str]) -> tuple[int, ...]:
        """The smallest connected set of cliques whose union holds ``subset``, root-first.

        So ``result[0]`` is its top clique and every other member's parent is a member. Ties
        (equal clique counts) go to fewer cells, then to the lower-indexed top clique.
        """
        wanted = self._checked(subset)
        single = self.clique_containing(wanted)
        if single is not None:
            return (single,)
        if not self.cliques:
            return ()
        best = min(self._forced_covers(wanted), key=lambda cover: (
            len(cover[1]), sum(self._weight(i) for i in cover[1]), cover[0]))
        members = best[1]
        return tuple(i for i in self.order if i in members)

    def _forced_covers(self, wanted: set[str]) -> list[tuple[int, set[int]]]:
        """For each clique ``v`` that can top a cover, the least cover topped by ``v``.

        By the running intersection property each column's cliques form a subtree with a
        highest clique (its top). A connected cover topped by ``v`` must hold ``v`` and the
        path up from every top strictly below ``v``; it exists iff every other column's
        subtree contains ``v``. Every cover contains one of these, so the best is among them.
        """
        depth = [0] * len(self.cliques)
        for i in self.order[1:]:
            depth[i] = depth[self.parent[i]] + 1
        tops = [min((i for i, clique in enumerate(self.cliques) if c in clique), key=depth.__getitem__)
                for c in wanted]
        covers = []
        for v in range(len(self.cliques)):
            members = {v}
            for column, top in zip(wanted, tops):
                path = self._path_up(top, v)
                if path is not None:
                    members.update(path)
                elif column not in self.cliques[v]:
                    break
            else:
                covers.append((v, members))
        return covers

    def _path_up(self, i: int, ancestor: int) -> list[int] | None:
        """Cliques from ``i`` up to ``ancestor`` inclusive; None if ``ancestor`` is not above ``i``."""
        path = [i]
        while path[-1] != ancestor:
            if self.parent[path[-1]] < 0:
                return None
            path.append(self.parent[path[-1]])
        return path

    def _weight(self, i: int) -> int:
        return self.clique_cells[i] if self.clique_cells else len(self.cliques[i])

    def _checked(self, subset: Iterable[str]) -> set[str]:
        wanted = set(subset)
        for name in sorted(wanted - set(self.columns)):
            raise ValueError(f"unknown column {name!r}")
        return wanted


def _cells(columns: Iterable[str], sizes: Mapping[str, int]) -> int:
    return math.prod(sizes[c] for c in columns)


#: The set bits of each byte, for ``_bits``.
_BYTE_BITS = [tuple(i for i in range(8) if byte >> i & 1) for byte in range(256)]


def _bits(mask: int) -> list[int]:
    """Positions of the set bits of ``mask``, lowest first (skipping runs of zeros)."""
    out: list[int] = []
    offset = 0
    while mask:
        skip = (mask & -mask).bit_length() - 1
        mask >>= skip
        offset += skip
        out += [offset + i for i in _BYTE_BITS[mask & 255]]
        mask >>= 8
        offset += 8
    return out


def _graph(columns: tuple[str, ...], subsets: Iterable[Sequence[str]],
           sizes: Mapping[str, int]) -> tuple[list[int], list[int]]:
    """Adjacency masks of the columns' interaction graph, and the columns' sizes by position.

    Raises ValueError for a column named twice, a subset naming an unknown column, or a
    column without a size.
    """
    position = {c: i for i, c in enumerate(columns)}
    if len(position) != len(columns):
        raise ValueError(f"columns {list(columns)} name a column twice")
    missing = [c for c in columns if c not in sizes]
    if missing:
        raise ValueError(f"no size for column {missing[0]!r}")
    masks = set()
    for subset in subsets:
        mask = 0
        for name in subset:
            if name not in position:
                raise ValueError(f"unknown column {name!r} in subset {list(subset)}")
            mask |= 1 << position[name]
        masks.add(mask)
    adjacent = [0] * len(columns)
    for mask in masks:
        for i in _bits(mask):
            adjacent[i] |= mask
    return [m & ~(1 << i) for i, m in enumerate(adjacent)], [int(sizes[c]) for c in columns]


def _cost(v: int, adjacent: list[int], sizes: list[int]) -> tuple[int, int, int]:
    """Min-fill sort key of eliminating ``v``: (edges it adds, its clique's cells, ``v``).

    The edges added are the pairs of ``v``'s neighbours not yet joined.
    """
    near = adjacent[v]
    neighbours = _bits(near)
    degree = len(neighbours)
    joined = sum([(adjacent[a] & near).bit_count() for a in neighbours])  # each edge twice
    return (degree * (degree - 1) - joined) // 2, math.prod([sizes[a] for a in neighbours]) * sizes[v], v


def _eliminate(adjacent: list[int], sizes: list[int]) -> list[int]:
    """Greedy min-fill elimination: the clique (mask) each column's elimination leaves.

    Each step removes the column whose neighbours need the fewest new edges to become a
    clique; ties go to the smaller clique in cells, then to the earlier column. Costs are
    cached. Eliminating a simplicial column (no fill) only drops it from its neighbours,
    whose costs are updated in place; otherwise the costs within distance two of it (the
    only ones a new edge can change) are recomputed.
    """
    adjacent = list(adjacent)
    left = (1 << len(adjacent)) - 1
    costs: dict[int, tuple[int, int, int]] = {}
    stale = left
    cliques = []
    while left:
        for v in _bits(stale & left):
            costs[v] = _cost(v, adjacent, sizes)
        fill, _, v = min(costs.values())
        del costs[v]
        near = adjacent[v]
        cliques.append(near | 1 << v)
        left &= ~(1 << v)
        stale = 0
        if fill == 0:  # a neighbour loses v and its non-edges to v; nothing else changes
            for a in _bits(near):
                old_fill, old_cells, _ = costs[a]
                adjacent[a] &= ~(1 << v)
                gone = (adjacent[a] & ~near).bit_count()
                costs[a] = (old_fill - gone, old_cells // sizes[v], a)
        else:
            stale = near
            for a in _bits(near):
                adjacent[a] = (adjacent[a] | near) & ~(1 << a) & ~(1 << v)
                stale |= adjacent[a]
    return cliques


def _maximal(masks: list[int]) -> list[int]:
    """The masks contained in no other (elimination cliques are distinct, so no duplicates)."""
    return [m for m in masks if not any(m != other and m & other == m for other in masks)]


def _clique_masks(columns: tuple[str, ...], subsets: Iterable[Sequence[str]], sizes: Mapping[str, int],
                  limit: int | None = None) -> tuple[list[int], list[int], bool]:
    """The maximal cliques of the triangulation as bit masks, the columns' sizes, and whether
    their total is the least any triangulation has.

    Min-fill's, unless ``limit`` is given and their total cells exceed it: then each connected
    part of the graph of at most ``EXACT_COLUMNS`` columns is triangulated exactly
    (``_least_cliques``), and min-fill's cliques are kept only where they were as small. So a
    model is refused growth past its cap only when no triangulation fits (on adult's 14
    columns min-fill refused 11 of 359 subsets that an exact one held).
    """
    adjacent, column_sizes = _graph(columns, subsets, sizes)
    masks = _maximal(_eliminate(adjacent, column_sizes))
    if limit is None or _total(masks, column_sizes) <= limit:
        return masks, column_sizes, False
    out, exact = [], True
    for part in _parts(adjacent):
        mine = [m for m in masks if m & part]
        if part.bit_count() > EXACT_COLUMNS:
            out += mine
            exact = False
            continue
        least = _least_cliques(adjacent, column_sizes, part) if part.bit_count() > 2 else mine
        out += least if _total(least, column_sizes) < _total(mine, column_sizes) else mine
    return out, column_sizes, exact


#: The most columns of one connected part of a model's graph that ``_clique_masks`` triangulates
#: exactly: 2^k states (14 columns: 8 ms; 16: about 50 ms).
EXACT_COLUMNS = 16


def _total(masks: list[int], sizes: list[int]) -> int:
    return sum(math.prod(sizes[i] for i in _bits(m)) for m in masks)


def _parts(adjacent: list[int]) -> list[int]:
    """The connected parts of the graph, as masks, by lowest column."""
    parts, left = [], (1 << len(adjacent)) - 1
    while left:
        part = frontier = left & -left
        while frontier:
            reach = 0
            for i in _bits(frontier):
                reach |= adjacent[i]
            frontier = reach & ~part
            part |= frontier
        parts.append(part)
        left &= ~part
    return parts


def _least_cliques(adjacent: list[int], sizes: list[int], part: int) -> list[int]:
    """The maximal cliques (masks) of the least-cells triangulation of the connected ``part``,
    by the exact elimination-order search (``synth._kernels.triangulation``)."""
    members = _bits(part)
    local = {c: k for k, c in enumerate(members)}
    masks = np.array([sum(1 << local[a] for a in _bits(adjacent[c] & part)) for c in members], dtype=np.int64)
    order = np.zeros(len(members), dtype=np.int64)
    least_cells_order(masks, np.array([sizes[c] for c in members], dtype=np.float64), order)
    graph = [adjacent[c] & part for c in range(len(adjacent))]
    left, cliques = part, []
    for v in (members[k] for k in order.tolist()):
        near = graph[v] & left & ~(1 << v)
        cliques.append(near | 1 << v)
        for a in _bits(near):
            graph[a] |= near & ~(1 << a)
        left &= ~(1 << v)
    return _maximal(cliques)


def triangulate(columns: Sequence[str], subsets: Iterable[Sequence[str]],
                sizes: Mapping[str, int]) -> list[tuple[str, ...]]:
    """Maximal cliques of the min-fill triangulation of the graph the subsets make.

    Each clique lists its columns in canonical order; the cliques come in elimination order.
    A column in no subset is a clique of its own.
    """
    columns = tuple(columns)
    masks, _, _ = _clique_masks(columns, subsets, sizes)
    return [tuple(columns[i] for i in _bits(m)) for m in masks]


class Forest:
    """Kruskal's union-find: which pairs of items would join two components."""

    def __init__(self, items: Iterable):
        self._root = {item: item for item in items}

    def _find(self, item):
        while self._root[item] != item:
            self._root[item] = self._root[self._root[item]]
            item = self._root[item]
        return item

    def joins(self, pair: tuple) -> bool:
        return self._find(pair[0]) != self._find(pair[1])

    def join(self, pair: tuple) -> None:
        self._root[self._find(pair[0])] = self._find(pair[1])


def _spanning_tree(masks: list[int]) -> list[list[int]]:
    """Adjacency lists of a maximum spanning tree over cliques weighted by shared columns.

    Kruskal over all pairs, heaviest first (ties: lower index pair first). Zero-weight pairs
    come last, so separate components are joined by empty separators into one tree.
    """
    count = len(masks)
    pairs = sorted((-(masks[i] & masks[j]).bit_count(), i, j)
                   for i in range(count) for j in range(i + 1, count))
    forest = Forest(range(count))
    adjacent: list[list[int]] = [[] for _ in range(count)]
    for _, i, j in pairs:
        if forest.joins((i, j)):
            forest.join((i, j))
            adjacent[i].append(j)
            adjacent[j].append(i)
    return adjacent


def junction_tree(columns: Sequence[str], subsets: Iterable[Sequence[str]],
                  sizes: Mapping[str, int], *, limit: int | None = None) -> JunctionTree:
    """The junction tree of the subsets' min-fill triangulation, rooted at its largest clique
    (where min-fill's cliques total more than ``limit`` cells, the least triangulation's:
    ``_clique_masks``).

    Cliques are numbered by cells, largest first (ties: earlier columns first), so clique 0
    (the root) is the largest; the tree is a maximum spanning tree (weight: shared columns),
    hence has the running intersection property. Unknown column names raise ValueError.
    """
    columns = tuple(columns)
    masks, column_sizes, _ = _clique_masks(columns, subsets, sizes, limit)
    cells = {m: math.prod(column_sizes[i] for i in _bits(m)) for m in masks}
    masks.sort(key=lambda m: (-cells[m], _bits(m)))
    adjacent = _spanning_tree(masks)
    parent = [-1] * len(masks)
    order, edges = [0] if masks else [], []
    queue = deque(order)
    while queue:  # breadth first from the root, children by index
        i = queue.popleft()
        for j in sorted(adjacent[i]):
            if j != parent[i]:
                parent[j] = i
                order.append(j)
                edges.append((i, j))
                queue.append(j)
    cliques = tuple(tuple(columns[i] for i in _bits(m)) for m in masks)
    return JunctionTree(columns, cliques, tuple(edges), tuple(order), tuple(parent),
                        tuple(cells[m] for m in masks))


def model_cells(columns: Sequence[str], subsets: Iterable[Sequence[str]], sizes: Mapping[str, int], *,
                limit: int | None = None) -> int:
    """Total clique cells of the subsets' junction tree (the factored model's size), without the
    tree (``junction_tree``'s, with the same ``limit``)."""
    return least_cells(columns, subsets, sizes, limit)[0]


def least_cells(columns: Sequence[str], subsets: Iterable[Sequence[str]], sizes: Mapping[str, int],
                limit: int | None = None) -> tuple[int, bool]:
    """``model_cells``, and whether it is the least total of any triangulation (so that any
    model holding these subsets and more is at least as big)."""
    masks, column_sizes, exact = _clique_masks(tuple(columns), subsets, sizes, limit)
    return _total(masks, column_sizes), exact
