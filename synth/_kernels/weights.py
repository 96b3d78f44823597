"""Multiplicative-weights kernel: scale the cells of a dense table that a conjunction selects."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def scale_selected(w, strides, allowed, offsets, counts, run, factor):  # pragma: no cover - compiled
    """Multiply by ``factor`` every cell of the flat row-major table ``w`` selected by a
    conjunction, and return the sum of those cells before scaling.

    The leading axes ``j`` (up to the query's last column) each allow the codes
    ``allowed[offsets[j] : offsets[j] + counts[j]]`` (every code for an axis the query does not
    constrain); the trailing unconstrained axes form a contiguous ``run`` of cells. Only the
    selected cells are visited, by an odometer over the allowed codes: no temporaries.
    """
    d = counts.shape[0]
    position = np.zeros(d, dtype=np.int64)
    base = 0
    for j in range(d):
        base += allowed[offsets[j]] * strides[j]
    before = 0.0
    while True:
        for r in range(run):
            value = w[base + r]
            before += value
            w[base + r] = value * factor
        j = d - 1
        while j >= 0:
            old = allowed[offsets[j] + position[j]]
            position[j] += 1
            if position[j] < counts[j]:
                base += (allowed[offsets[j] + position[j]] - old) * strides[j]
                break
            position[j] = 0
            base += (allowed[offsets[j]] - old) * strides[j]
            j -= 1
        if j < 0:
            break
    return before
