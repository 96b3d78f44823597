"""Junction-tree calibration kernel: a clique's log table written as a sum of broadcast tables.

The rest of a calibration stays in NumPy: its exponential is SIMD (about 0.7 ns a cell where
Numba's scalar ``np.exp`` loop takes 4.5 ns, measured on a 1.8M-cell clique), and the sums
onto separators are ``synth._kernels.tables``'s walks.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from synth._kernels.tables import advance_offsets


@njit(cache=True)
def broadcast_sum(out, dims, strides, starts, tables, tail, kinds, offsets):  # pragma: no cover - compiled
    """Write into the flat row-major ``out`` (shape ``dims``) the sum of K tables broadcast to it.

    Table k starts at ``tables[starts[k]]``; ``strides[k * r + j]`` is its stride for axis j
    (0 where it does not hold the axis; r = len(dims)). Cell u gets
    ``((t_0[u] + t_1[u]) + t_2[u]) + ...``, the order of NumPy's ``add(t_0, t_1, out)`` then
    ``out += t_k``: the same result to the bit, with ``out`` written once instead of once per
    table. With no tables ``out`` is filled with zeros.

    The walk goes by blocks of the last ``tail`` axes (an odometer moves each table's offset
    over the other axes), and each table adds itself to the whole block in turn, the block
    staying in cache. ``kinds[k]`` says how: 0, the table holds all of the block's axes (one
    contiguous run); 1, none (one value); 2, a row of the last axis at each of the offsets
    ``offsets[k, :rows]`` (rows of the block); 3, one value spread along each such row; 4, a
    gather, one offset per cell of the block (for rows too short to loop over). Measured on
    adult's 1.8M-cell clique (three tables): 1.2 ms, against 3.1 ms for NumPy's adds; where
    the last axes are short (rows of 2 cells, four tables) 3.7 ms by gathers, against 25 ms
    row by row.
    """
    r = dims.shape[0]
    k_tables = starts.shape[0]
    cells = out.shape[0]
    if k_tables == 0:
        for i in range(cells):
            out[i] = 0.0
        return
    inner = dims[r - 1]
    block = 1
    for j in range(r - tail, r):
        block *= dims[j]
    rows = block // inner
    base = starts.copy()  # each table's offset at the block's first cell
    counters = np.zeros(r, dtype=np.int64)
    position = 0
    for _ in range(cells // block):
        cells_out = out[position:position + block]  # views indexed from 0: the loops vectorize
        for k in range(k_tables):
            b = base[k]
            first = k == 0
            if kinds[k] == 0:
                source = tables[b:b + block]
                if first:
                    for i in range(block):
                        cells_out[i] = source[i]
                else:
                    for i in range(block):
                        cells_out[i] += source[i]
            elif kinds[k] == 1:
                value = tables[b]
                if first:
                    for i in range(block):
                        cells_out[i] = value
                else:
                    for i in range(block):
                        cells_out[i] += value
            elif kinds[k] == 4:
                at = offsets[k]
                if first:
                    for i in range(block):
                        cells_out[i] = tables[b + at[i]]
                else:
                    for i in range(block):
                        cells_out[i] += tables[b + at[i]]
            elif kinds[k] == 2:
                at = offsets[k]
                for m in range(rows):
                    row = cells_out[m * inner:(m + 1) * inner]
                    source = tables[b + at[m]:b + at[m] + inner]
                    if first:
                        for i in range(inner):
                            row[i] = source[i]
                    else:
                        for i in range(inner):
                            row[i] += source[i]
            else:
                at = offsets[k]
                for m in range(rows):
                    row = cells_out[m * inner:(m + 1) * inner]
                    value = tables[b + at[m]]
                    if first:
                        for i in range(inner):
                            row[i] = value
                    else:
                        for i in range(inner):
                            row[i] += value
        position += block
        advance_offsets(counters, dims, strides, base, r - tail - 1)
