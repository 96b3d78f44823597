"""Triangulation kernel: the elimination order of a small graph whose maximal cliques have the
fewest total cells (an exact dynamic program over the sets of columns eliminated first)."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def least_cells_order(adjacent, sizes, order):  # pragma: no cover - compiled
    """Write into ``order`` an elimination order of the graph ``adjacent`` (bit masks, vertex i's
    neighbours in ``adjacent[i]``; at most 30 vertices) whose triangulation has the least total
    of maximal-clique cells (vertex i has ``sizes[i]`` cells); return that total (float64).

    Eliminating v once the set R is gone leaves the clique K = {v} + the vertices outside R
    that v reaches through R. K is maximal in the triangulation unless some component C of R
    (in the graph) has exactly K as its neighbourhood (then C's last vertex's clique is
    K + that vertex). So best[S], the least total of the maximal cliques the vertices of S
    leave when eliminated first, is the least over v in S of best[S - v] + (cells of K if
    maximal, else 0): 2^n states, ties to the lowest v. Exact for every triangulation, since
    each one is the fill of some elimination order.
    """
    n = adjacent.shape[0]
    states = 1 << n
    best = np.full(states, np.inf)
    last = np.zeros(states, dtype=np.int64)
    best[0] = 0.0
    hoods = np.zeros(n, dtype=np.int64)
    for s in range(1, states):
        top = np.inf
        chosen = -1
        for v in range(n):
            bit = 1 << v
            if not s & bit:
                continue
            rest = s & ~bit
            before = best[rest]
            if before >= top:
                continue
            clique = (adjacent[v] & ~rest) | bit
            seen = 0
            found = 0
            for r in range(n):  # each component of ``rest`` that v touches
                if not (adjacent[v] >> r) & 1 or not (rest >> r) & 1 or (seen >> r) & 1:
                    continue
                component = 1 << r
                frontier = component
                while frontier:
                    reach = 0
                    for x in range(n):
                        if (frontier >> x) & 1:
                            reach |= adjacent[x]
                    frontier = reach & rest & ~component
                    component |= frontier
                seen |= component
                hood = 0
                for x in range(n):
                    if (component >> x) & 1:
                        hood |= adjacent[x]
                hood &= ~rest
                hoods[found] = hood
                found += 1
                clique |= hood
            cells = 1.0
            for x in range(n):
                if (clique >> x) & 1:
                    cells *= sizes[x]
            for k in range(found):
                if hoods[k] == clique:
                    cells = 0.0  # held by a bigger clique
                    break
            if before + cells < top:
                top = before + cells
                chosen = v
        best[s] = top
        last[s] = chosen
    s = states - 1
    for i in range(n - 1, -1, -1):
        order[i] = last[s]
        s &= ~(1 << last[s])
    return best[states - 1]
