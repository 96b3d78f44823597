"""Scan kernels: plain integer CSV fields to values, integer columns to checked codes, and every
planned table counted in one pass."""

from __future__ import annotations

import numpy as np
from numba import njit

#: Longest run of digits read as an integer (10^18 < 2^63): longer fields go to pandas.
MAX_DIGITS = 18


#: What ``parse_int_lines`` writes for an empty field of a column that may hold one.
EMPTY = -1


@njit(cache=True, nogil=True)
def parse_int_lines(buf, start, n_fields, field_column, out, final, empty_ok=None):  # pragma: no cover - compiled
    """Parse whole CSV lines of ``buf`` from byte ``start`` into ``out[field_column[f], row]``,
    until ``out`` (shape (columns, rows)) is full or the lines end (with ``final``, a last
    line without ``\n`` counts too).

    Only the plainest CSV is taken: no quotes, ``\n`` or ``\r\n`` line ends, exactly
    ``n_fields`` fields a line, and every field with ``field_column[f] >= 0`` a run of 1 to
    ``MAX_DIGITS`` ASCII digits, or empty where ``empty_ok[field_column[f]]`` (a column that
    may hold missing values; None: no column): that field reads as ``EMPTY``. Returns
    (rows, end, wide): the rows parsed, the byte after the last of them, and whether a byte
    past ASCII appeared (in a field not read: the caller checks that the lines are UTF-8).
    Rows is -1 when anything else appears (a blank line, a sign, a decimal point, any other
    missing value, a quote, a short or long line, a lone ``\r``):
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
                if i == first and empty_ok is not None and empty_ok[column] and (
                        (i < n and (buf[i] == 44 or buf[i] == 10 or buf[i] == 13)) or (i >= n and final)):
                    value = EMPTY  # an empty field, ended by a delimiter, a line end or the file's end
                elif i - first == 0 or i - first > MAX_DIGITS:
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


@njit(cache=True, nogil=True)
def pack_column(values, size, codes, j, empty=-1):  # pragma: no cover - compiled
    """Copy integer ``values`` into column ``j`` of ``codes`` (shape (rows, columns)), each
    checked to lie in 0..size-1, in one pass. Returns -1, or the first index out of range
    (nothing from it on is copied). Values past int64 (uint64) read as negative: out of range.
    Where ``empty >= 0`` (a missing code), the value ``EMPTY`` (an empty CSV field) is written
    as ``empty``."""
    for i in range(values.shape[0]):
        value = np.int64(values[i])
        if value < 0 or value >= size:
            if value == EMPTY and empty >= 0:
                codes[i, j] = empty
                continue
            return i
        codes[i, j] = value
    return -1


#: Rows counted at a time, table by table (their keys and codes stay in the L1 cache).
COUNT_BLOCK_ROWS = 4096


@njit(cache=True, nogil=True)
def first_bad_row(columns, sizes):  # pragma: no cover - compiled
    """The first row holding a code outside 0..sizes[j]-1 in some column j of ``columns``
    (the codes column by column: shape (columns, rows)), or -1."""
    first = columns.shape[1]
    for j in range(columns.shape[0]):
        for i in range(first):
            value = np.int64(columns[j, i])
            if value < 0 or value >= sizes[j]:
                first = i
                break
    return first if first < columns.shape[1] else -1


@njit(cache=True, nogil=True)
def count_rows(columns, positions, shapes, widths, offsets, out):  # pragma: no cover - compiled
    """Add every row of ``columns`` (the codes column by column, shape (columns, rows), each
    in range: ``first_bad_row``) to every table of a scan plan.

    The tables lie end to end in the flat int64 ``out``; table t starts at ``offsets[t]``
    and has ``widths[t]`` columns: ``positions[t, j]`` (a row of ``columns``) of size
    ``shapes[t, j]``, the last varying fastest. A block of rows at a time, each table's cell
    keys are built column by column (contiguous loops the compiler vectorises), then
    counted. Releases the GIL: threads count chunks side by side, each into its own ``out``
    (integers: the caller's sum of the copies cannot depend on the order).
    """
    n = columns.shape[1]
    key = np.empty(COUNT_BLOCK_ROWS, dtype=np.int64)
    for first in range(0, n, COUNT_BLOCK_ROWS):
        m = min(n - first, COUNT_BLOCK_ROWS)
        for t in range(offsets.shape[0]):
            codes = columns[positions[t, 0], first:first + m]
            for i in range(m):
                key[i] = codes[i]
            for j in range(1, widths[t]):
                codes = columns[positions[t, j], first:first + m]
                size = shapes[t, j]
                for i in range(m):
                    key[i] = key[i] * size + codes[i]
            offset = offsets[t]
            for i in range(m):
                out[offset + key[i]] += 1
