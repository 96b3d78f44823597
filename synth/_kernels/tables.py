"""Counting kernels: tables of code combinations from rows, and sums of dense tables."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def count_cells(codes, cols, sizes, strides, out):  # pragma: no cover - compiled
    """Add one to ``out[sum_j codes[i, cols[j]] * strides[j]]`` for every row i.

    ``out`` is the flat (row-major) table over the columns ``cols``; with every column it is
    the full histogram. Returns -1, or the first row whose code is out of range (nothing of
    that row is counted).
    """
    n = codes.shape[0]
    k = cols.shape[0]
    for i in range(n):
        index = 0
        for j in range(k):
            code = np.int64(codes[i, cols[j]])
            if code < 0 or code >= sizes[j]:
                return i
            index += code * strides[j]
        out[index] += 1
    return -1


@njit(cache=True)
def _block_sum(x, start, length):  # pragma: no cover - compiled
    """Sum of ``x[start:start+length]`` with four running totals (lets the CPU overlap adds).

    A fixed order, so the result is deterministic (no fastmath reassociation).
    """
    t0 = x[start] - x[start]
    t1 = t0
    t2 = t0
    t3 = t0
    i = 0
    while i + 4 <= length:
        t0 += x[start + i]
        t1 += x[start + i + 1]
        t2 += x[start + i + 2]
        t3 += x[start + i + 3]
        i += 4
    while i < length:
        t0 += x[start + i]
        i += 1
    return (t0 + t1) + (t2 + t3)


@njit(cache=True, inline="always")
def _next_block(counters, dims, out_strides, base):  # pragma: no cover - compiled
    """Advance the odometer over every axis but the last; return the output offset it moves to."""
    j = dims.shape[0] - 2
    while j >= 0:
        counters[j] += 1
        base += out_strides[j]
        if counters[j] < dims[j]:
            break
        base -= out_strides[j] * dims[j]
        counters[j] = 0
        j -= 1
    return base


@njit(cache=True)
def marginalize(x, dims, keep, out_strides, out):  # pragma: no cover - compiled
    """Sum the flat row-major array ``x`` of shape ``dims`` onto the axes where ``keep``.

    ``out_strides[j]`` is the stride of axis j in the flat output (0 where not kept). Axes
    should be merged beforehand so neighbours differ in ``keep``; the last axis is walked by
    an inner loop and the others by an odometer, so no index is divided or multiplied per cell.
    """
    r = dims.shape[0]
    inner = dims[r - 1]
    outer = x.shape[0] // inner
    counters = np.zeros(r, dtype=np.int64)
    base = 0
    position = 0
    keep_inner = keep[r - 1]
    for _ in range(outer):
        if keep_inner:
            for i in range(inner):
                out[base + i] += x[position + i]
        elif inner >= 16:
            out[base] += _block_sum(x, position, inner)
        else:
            total = x[position]
            for i in range(1, inner):
                total += x[position + i]
            out[base] += total
        position += inner
        base = _next_block(counters, dims, out_strides, base)


@njit(cache=True)
def multiply_by_marginal(x, dims, keep, out_strides, factors):  # pragma: no cover - compiled
    """Multiply each cell of the flat row-major ``x`` by ``factors`` at its marginal cell; return
    the new sum of ``x``.

    The axes, ``keep`` and ``out_strides`` are as in ``marginalize`` (merged so neighbours
    differ in ``keep``): the walk is the same odometer, with the factor looked up instead of
    a sum accumulated. One pass over the universe, no temporaries.
    """
    r = dims.shape[0]
    inner = dims[r - 1]
    outer = x.shape[0] // inner
    counters = np.zeros(r, dtype=np.int64)
    base = 0
    position = 0
    keep_inner = keep[r - 1]
    total = 0.0
    for _ in range(outer):
        if keep_inner:
            for i in range(inner):
                value = x[position + i] * factors[base + i]
                x[position + i] = value
                total += value
        else:
            factor = factors[base]
            for i in range(inner):
                value = x[position + i] * factor
                x[position + i] = value
                total += value
        position += inner
        base = _next_block(counters, dims, out_strides, base)
    return total
