"""Numba kernel for matching synthetic rows to target tables (``synth.models.matching``)."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def match_rows(codes, strides, offsets, sizes, counts, targets, order):  # pragma: no cover - compiled
    """One greedy sweep: for each row in ``order`` and each of its columns in turn, move the
    value to the one that lowers Σ |counts - targets| the most over the tables holding that
    column (ties and no gain: the value stays). Updates ``codes`` (rows, columns), ``counts``
    in place; returns the number of values moved.

    Table t holds the cells ``offsets[t] + Σ_j codes[r, j] * strides[t, j]`` of the flat
    ``counts``/``targets`` (``strides[t, j]`` 0 where column j is not in table t).
    """
    tables, columns = strides.shape
    keys = np.empty(tables, dtype=np.int64)
    moved = 0
    for r in order:
        for t in range(tables):
            key = offsets[t]
            for j in range(columns):
                key += codes[r, j] * strides[t, j]
            keys[t] = key
        for j in range(columns):
            old = codes[r, j]
            best_gain = -1e-9
            best = old
            for value in range(sizes[j]):
                if value == old:
                    continue
                change = 0.0
                for t in range(tables):
                    stride = strides[t, j]
                    if stride == 0:
                        continue
                    here = keys[t]
                    there = here + (value - old) * stride
                    change += (abs(counts[here] - 1.0 - targets[here]) - abs(counts[here] - targets[here])
                               + abs(counts[there] + 1.0 - targets[there]) - abs(counts[there] - targets[there]))
                if change < best_gain:
                    best_gain = change
                    best = value
            if best != old:
                for t in range(tables):
                    stride = strides[t, j]
                    if stride == 0:
                        continue
                    counts[keys[t]] -= 1.0
                    keys[t] += (best - old) * stride
                    counts[keys[t]] += 1.0
                codes[r, j] = best
                moved += 1
    return moved
