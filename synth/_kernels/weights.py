"""Multiplicative-weights kernel: scale the cells of a dense table that a conjunction selects."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def scale_selected(w, start, strides, allowed, offsets, counts, run, factor):  # pragma: no cover - compiled
    """Multiply by ``factor`` every cell of the flat row-major table ``w`` selected by a
    conjunction, and return the sum of those cells before scaling.

    The leading axes ``j`` (up to the query's last column) each allow the codes
    ``allowed[offsets[j] : offsets[j] + counts[j]]`` (every code for an axis the query does not
    constrain); the trailing unconstrained axes form a contiguous ``run`` of cells. Only the
    selected cells are visited, by an odometer over the allowed codes: no temporaries.
    """
    d = counts.shape[0]
    position = np.zeros(d, dtype=np.int64)
    base = start
    for j in range(d):
        base += allowed[offsets[j]] * strides[j]
    before = 0.0
    while True:
        if run >= 16:  # four running sums: a fixed order (deterministic), no serial add chain
            s0 = 0.0
            s1 = 0.0
            s2 = 0.0
            s3 = 0.0
            r = 0
            while r + 4 <= run:
                v0 = w[base + r]
                v1 = w[base + r + 1]
                v2 = w[base + r + 2]
                v3 = w[base + r + 3]
                s0 += v0
                s1 += v1
                s2 += v2
                s3 += v3
                w[base + r] = v0 * factor
                w[base + r + 1] = v1 * factor
                w[base + r + 2] = v2 * factor
                w[base + r + 3] = v3 * factor
                r += 4
            while r < run:
                value = w[base + r]
                s0 += value
                w[base + r] = value * factor
                r += 1
            before += (s0 + s1) + (s2 + s3)
        else:
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
