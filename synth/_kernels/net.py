"""The BLR exact-net kernel: every multiset of m cells, scored and sampled in one stream.

The multisets are the non-decreasing sequences ``cells[0] <= ... <= cells[m-1]`` over
``[0, U)``, visited in lexicographic order. The successor moves the last movable element
up by one and drops the elements after it onto the same cell, so on average fewer than two
elements move per step; each move updates every query's count incrementally (``-=`` the old
cell's row of the indicator, ``+=`` the new one's). No multiset is stored.

The score of a multiset y is ``-max_q |m * x_q - n * y_q| / m`` in rows (x_q the true count,
y_q the count in y, n the public or noisy row count): integers until the final division.
Selection is streaming Gumbel-max with key ``scale * score + Gumbel``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from synth._kernels.sampling import gumbel


@njit(cache=True, inline="always")
def _score(true_scaled, counts, n_rows, m):  # pragma: no cover - compiled
    worst = 0
    for q in range(counts.shape[0]):
        gap = true_scaled[q] - n_rows * counts[q]
        if gap < 0:
            gap = -gap
        if gap > worst:
            worst = gap
    return -worst / m


@njit(cache=True, inline="always")
def _move(indicator, counts, old, new):  # pragma: no cover - compiled
    for q in range(counts.shape[0]):
        counts[q] += indicator[new, q] - indicator[old, q]


@njit(cache=True, inline="always")
def _advance(indicator, counts, cells, n_cells):  # pragma: no cover - compiled
    """Step ``cells`` to the next multiset, updating ``counts``; False after the last one."""
    m = cells.shape[0]
    position = m - 1
    while position >= 0 and cells[position] == n_cells - 1:
        position -= 1
    if position < 0:
        return False
    target = cells[position] + 1
    for j in range(position, m):
        _move(indicator, counts, cells[j], target)
        cells[j] = target
    return True


@njit(cache=True)
def sample_exact_net(indicator, true_scaled, n_rows, scale, state, cells, counts, limit, best,
                     best_cells):  # pragma: no cover - compiled
    """Streaming Gumbel-max over the next ``limit`` multisets; returns ``(visited, finished)``.

    ``indicator`` is ``(U, Q)`` int64 (1 where cell u satisfies query q) and ``true_scaled``
    is ``m * true_counts``. The walk resumes from ``cells`` (a multiset) and ``counts`` (its
    query counts), both advanced in place; ``best`` holds ``(key, score)`` of the leader so
    far and ``best_cells`` its multiset. Start with ``cells = 0``, ``counts = m * indicator[0]``
    and ``best = (-inf, 0)``.
    """
    m = cells.shape[0]
    visited = 0
    while visited < limit:
        score = _score(true_scaled, counts, n_rows, m)
        key = scale * score + gumbel(state)
        visited += 1
        if key > best[0]:
            best[0] = key
            best[1] = score
            best_cells[:] = cells
        if not _advance(indicator, counts, cells, indicator.shape[0]):
            return visited, True
    return visited, False


@njit(cache=True)
def score_exact_net(indicator, true_scaled, n_rows, m, scores):  # pragma: no cover - compiled
    """Every m-multiset's score, in enumeration order, into ``scores`` (for tests and checks)."""
    cells = np.zeros(m, dtype=np.int64)
    counts = m * indicator[0].copy()
    seen = 0
    more = True
    while more:
        scores[seen] = _score(true_scaled, counts, n_rows, m)
        seen += 1
        more = _advance(indicator, counts, cells, indicator.shape[0])
    return seen
