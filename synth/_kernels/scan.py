"""Scan kernels: plain integer CSV fields to values, and every planned table counted in one pass."""

from __future__ import annotations

import numpy as np
from numba import njit, prange

#: Longest run of digits read as an integer (10^18 < 2^63): longer fields go to pandas.
MAX_DIGITS = 18


@njit(cache=True)
def parse_int_lines(buf, start, n_fields, field_column, out, final):  # pragma: no cover - compiled
    """Parse whole CSV lines of ``buf`` from byte ``start`` into ``out[field_column[f], row]``,
    until ``out`` (shape (columns, rows)) is full or the lines end (with ``final``, a last
    line without ``\n`` counts too).

    Only the plainest CSV is taken: no quotes, ``\n`` or ``\r\n`` line ends, exactly
    ``n_fields`` fields a line, and every field with ``field_column[f] >= 0`` a run of 1 to
    ``MAX_DIGITS`` ASCII digits. Returns (rows, end, wide): the rows parsed, the byte after
    the last of them, and whether a byte past ASCII appeared (in a field not read: the caller
    checks that the lines are UTF-8). Rows is -1 when anything else appears (a blank line, a
    sign, a decimal point, a missing value, a quote, a short or long line, a lone ``\r``):
    the caller then reads from ``start`` with pandas, whose rules and messages are the
    reference.
    """
    n = buf.shape[0]
    capacity = out.shape[1]
    rows = 0
    wide = False
    i = start
    while rows < capacity and i < n:
        line_start = i
        field = 0
        while True:  # one field, then its delimiter
            column = field_column[field]
            if column >= 0:
                value = 0
                first = i
                while i < n and buf[i] >= 48 and buf[i] <= 57:
                    value = value * 10 + (buf[i] - 48)
                    i += 1
                if i - first == 0 or i - first > MAX_DIGITS:
                    if i < n or final:
                        return -1, start, wide
                    return rows, line_start, wide  # the line goes on past the bytes read
                out[column, rows] = value
            else:
                while i < n and buf[i] != 44 and buf[i] != 10 and buf[i] != 13:
                    if buf[i] == 34:
                        return -1, start, wide
                    if buf[i] >= 128:
                        wide = True
                    i += 1
            if i >= n:  # the bytes end inside this line
                if final and field == n_fields - 1 and i > line_start:
                    return rows + 1, n, wide  # a last line without its '\n'
                if final and i > line_start:
                    return -1, start, wide
                return rows, line_start, wide
            c = buf[i]
            if c == 44:  # ','
                field += 1
                i += 1
                if field >= n_fields:
                    return -1, start, wide
                continue
            if field != n_fields - 1:  # a line end with fields missing (or a field read that holds text)
                return -1, start, wide
            if c == 13:
                if i + 1 < n and buf[i + 1] == 10:
                    i += 1
                elif i + 1 < n:  # a '\r' alone: pandas' business
                    return -1, start, wide
                elif not final:  # '\r' at the end of the bytes read: take its line with the next read
                    return rows, line_start, wide
            elif c != 10:
                return -1, start, wide
            i += 1
            rows += 1
            break
    return rows, i, wide


#: Rows counted into one table before moving to the next (their codes stay in the L1 cache).
COUNT_BLOCK_ROWS = 2048


@njit(cache=True)
def _count_rows(codes, start, stop, columns, sizes, strides, widths, offsets, check, out):  # pragma: no cover
    """Add rows ``start:stop`` of ``codes`` to every table (see ``count_tables``), a block of
    rows at a time and table by table within a block; with ``check``, return the first row
    holding a code outside its column's range (counting stops there, some tables short of
    it), else -1."""
    for first in range(start, stop, COUNT_BLOCK_ROWS):
        last = min(stop, first + COUNT_BLOCK_ROWS)
        if check:  # every code in range before any is counted
            for i in range(first, last):
                for j in range(codes.shape[1]):
                    if np.int64(codes[i, j]) < 0 or np.int64(codes[i, j]) >= sizes[j]:
                        return i
        for t in range(offsets.shape[0]):
            offset = offsets[t]
            if widths[t] == 2:  # the common case (two-way marginals), unrolled
                a, b, stride = columns[t, 0], columns[t, 1], strides[t, 0]
                for i in range(first, last):
                    out[offset + np.int64(codes[i, a]) * stride + np.int64(codes[i, b])] += 1
            else:
                for i in range(first, last):
                    index = offset
                    for j in range(widths[t]):
                        index += np.int64(codes[i, columns[t, j]]) * strides[t, j]
                    out[index] += 1
    return -1


@njit(cache=True, parallel=True)
def count_tables(codes, columns, sizes, strides, widths, offsets, partial, check=True):  # pragma: no cover
    """Add the rows of ``codes`` to every table of a scan plan, in one pass over the rows.

    The tables lie end to end in a flat int64 array; table t starts at ``offsets[t]`` and
    has ``widths[t]`` columns: ``columns[t, j]`` (a position in ``codes``) with row-major
    stride ``strides[t, j]``. ``sizes[j]`` is column j's size. ``partial`` holds one such
    array per slice of the rows (shape (slices, cells)): the slices are counted in parallel,
    each into its own array, and the caller sums them (integers: the order cannot change
    the sum). Returns -1, or the first row holding a code outside its column's range
    (``check=False`` skips that check: for codes already checked, as ``encode`` gives them).
    """
    n = codes.shape[0]
    parts = partial.shape[0]
    bad = np.full(parts, -1, dtype=np.int64)
    for p in prange(parts):
        bad[p] = _count_rows(codes, n * p // parts, n * (p + 1) // parts, columns, sizes, strides, widths,
                             offsets, check, partial[p])
    for p in range(parts):
        if bad[p] >= 0:
            return bad[p]
    return -1
