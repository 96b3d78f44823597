"""Rows from a factored model: ancestral sampling along its junction tree.

The root clique's cells are drawn by controlled rounding of its belief (as a dense
distribution is sampled), over all rows, and dealt into blocks of about
``synth.models.sampling.SAMPLE_BLOCK_ROWS`` rows (``iter_factored``); the rest runs block by block, so
memory does not grow with the rows. Then each clique, parent before child, gives the rows
that share a separator value its remaining columns: the k rows of separator value s get the
counts of round_counts(belief[s, :] / belief[s].sum(), k), so every conditional group matches
the model's conditional as closely as integers can (within a block). With controlled rounding
the match is also stratified: inside a group the rows are ordered by their cell of the parent
clique, then by the other columns that have values (ties in random order), and the group's
values are spread evenly along that order, so rows sharing a parent cell get the
conditional's proportions too, not a random draw from it (a pair of columns from parent and
child lands within rounding of the model, not a multinomial away). Ties and offsets are drawn
afresh for each clique, so siblings stay independent given the parent's cell.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

from synth.data.reading import code_dtype
from synth.models.sampling import METHODS, round_counts, shuffled_blocks
from synth.privacy.rng import make_rng

__all__ = ["iter_factored", "sample_factored"]

#: Most cells of one block of (separator value x child cells) held at once.
BLOCK_CELLS = 4_000_000


def sample_factored(model, rows: int, method: str = "round", rng: np.random.Generator | int | None = None
                    ) -> np.ndarray:
    """``rows`` rows of codes, shape ``(rows, columns)``, in random order."""
    blocks = list(iter_factored(model, rows, method, rng))
    return blocks[0] if len(blocks) == 1 else np.concatenate(blocks)


def iter_factored(model, rows: int, method: str = "round", rng: np.random.Generator | int | None = None,
                  block_rows: int | None = None) -> Iterator[np.ndarray]:
    """``sample_factored``'s rows in blocks of about ``block_rows`` (default
    ``synth.models.sampling.SAMPLE_BLOCK_ROWS``): the root clique's counts
    are rounded once over all rows and dealt into blocks (``split_counts``); each block then
    gets its other columns by ancestral sampling, its conditional groups rounded within the
    block. Memory is one block's, whatever ``rows``."""
    if method not in METHODS:
        raise ValueError(f"method ({method!r}) must be one of: {', '.join(map(repr, METHODS))}")
    rng = make_rng(rng)
    schema = model.schema
    calibration = model.calibrate()
    root = calibration.tree.order[0]
    counts = round_counts(calibration.beliefs[root].reshape(-1), rows, method, rng)
    for cells in shuffled_blocks(counts, rng, block_rows):
        yield _descend(calibration, schema, cells, method, rng)


def _descend(calibration, schema, root_cells: np.ndarray, method: str, rng: np.random.Generator) -> np.ndarray:
    """Rows (codes) with the root clique's cells ``root_cells`` and every other column drawn
    clique by clique, parent before child."""
    tree = calibration.tree
    codes = np.zeros((root_cells.size, len(schema)), dtype=np.int64)
    root = tree.order[0]
    _set_columns(codes, schema, tree.cliques[root], root_cells)
    done = list(tree.cliques[root])  # columns with values so far, in the order they got them
    for i in tree.order[1:]:
        separator = tree.separator(i, tree.parent[i])
        new = tuple(c for c in tree.cliques[i] if c not in separator)
        if new:
            conditional = _grouped(calibration.beliefs[i], tree.cliques[i], separator, new, schema)
            parent = tree.cliques[tree.parent[i]]
            _fill_children(codes, schema, separator, new, conditional, method, rng,
                           (parent, [c for c in done if c not in parent]))
            done += new
    return codes.astype(code_dtype(schema))


def _grouped(belief: np.ndarray, columns, separator, new, schema) -> np.ndarray:
    """The belief as a (separator cells, new cells) matrix."""
    axes = [columns.index(c) for c in (*separator, *new)]
    sizes = dict(zip(schema.names, schema.shape))
    sep_cells = int(np.prod([sizes[c] for c in separator], dtype=np.int64))
    return np.ascontiguousarray(belief.transpose(axes)).reshape(sep_cells, -1)


def _fill_children(codes, schema, separator, new, conditional, method, rng, strata=((), ())) -> None:
    """Give every row its cells on ``new`` given its cells on ``separator``. Rounding, the rows
    of a group are ordered by their cell on the parent clique, then by the other columns that
    have values (``strata``), so the spread values stratify on them."""
    rows = codes.shape[0]
    sep_index = _cell_index(codes, schema, separator)
    shuffled = rng.permutation(rows)
    parent, others = strata
    if method == "round" and parent:
        keys = [sep_index[shuffled], _cell_index(codes, schema, parent)[shuffled],
                *(codes[shuffled, schema.index(c)] for c in others)]
        sizes = [_cells(schema, separator), _cells(schema, parent), *(_cells(schema, (c,)) for c in others)]
        order = shuffled[_lex_order(keys, sizes)]
    else:
        order = shuffled[np.argsort(sep_index[shuffled], kind="stable")]
    groups, starts, group_rows = np.unique(sep_index[order], return_index=True, return_counts=True)
    width = conditional.shape[1]
    block = max(1, BLOCK_CELLS // width)
    assigned = np.empty(rows, dtype=np.int64)
    for first in range(0, groups.size, block):
        g = groups[first:first + block]
        k = group_rows[first:first + block]
        weights = conditional[g]
        totals = weights.sum(axis=1, keepdims=True)
        p = np.divide(weights, totals, out=np.full_like(weights, 1.0 / width), where=totals > 0)
        counts = _counts(p, k, method, rng)
        start, stop = starts[first], starts[first] + int(k.sum())
        values = np.repeat(np.tile(np.arange(width), g.size), counts.reshape(-1))
        if method == "round":
            values = values[_spread(counts, rng)]
        assigned[start:stop] = values
    values = np.empty(rows, dtype=np.int64)
    values[order] = assigned
    _set_columns(codes, schema, new, values)


def _lex_order(keys: list[np.ndarray], sizes: list[int]) -> np.ndarray:
    """``np.lexsort``'s stable order of ``keys`` (the first is the primary; key i lies in
    ``0..sizes[i]-1``), with the leading keys packed into one int64 while their cells fit:
    one sort of one key instead of a pass per key."""
    packed, cells, i = keys[0].astype(np.int64), sizes[0], 1
    while i < len(keys) and cells * sizes[i] < 2**62:
        packed = packed * sizes[i] + keys[i]
        cells *= sizes[i]
        i += 1
    if i == len(keys):
        return np.argsort(packed, kind="stable")
    return np.lexsort((*reversed(keys[i:]), packed))


def _cells(schema, columns) -> int:
    return math.prod(schema.shape[schema.index(c)] for c in columns)


def _cell_index(codes: np.ndarray, schema, columns) -> np.ndarray:
    """Each row's flat cell index over ``columns`` (0 for no columns)."""
    if not columns:
        return np.zeros(codes.shape[0], dtype=np.int64)
    return np.ravel_multi_index(tuple(codes[:, schema.index(c)] for c in columns),
                                [schema.shape[schema.index(c)] for c in columns])


def _spread(counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The order that spreads each group's values evenly: value v's j-th copy (of c_v) goes to
    position (j + u_v) / c_v in its group, u_v uniform, so any run of the group holds each value
    in proportion. ``counts`` is (groups, values); the copies are laid out group by group, value
    by value, as ``np.repeat`` lays them."""
    flat = counts.reshape(-1)
    copies = int(flat.sum())
    run_start = np.repeat(np.cumsum(flat) - flat, flat)
    j = np.arange(copies) - run_start
    offset = np.repeat(rng.random(flat.size), flat)
    position = (j + offset) / np.repeat(np.maximum(flat, 1), flat)
    group = np.repeat(np.arange(counts.shape[0]), counts.sum(axis=1))
    return np.lexsort((position, group))


def _counts(p: np.ndarray, k: np.ndarray, method: str, rng: np.random.Generator) -> np.ndarray:
    """Per row of ``p`` (a conditional), integer counts summing to that row's ``k``."""
    if method == "multinomial":
        return rng.multinomial(k, p)
    expected = p * k[:, None]
    counts = np.floor(expected).astype(np.int64)
    short = k - counts.sum(axis=1)
    remainder = expected - counts
    # Controlled rounding per group: the `short` largest remainders get one more; ties broken
    # by a random column order.
    columns = rng.permutation(p.shape[1])
    ranked = columns[np.argsort(-remainder[:, columns], axis=1, kind="stable")]
    rank = np.empty_like(ranked)
    np.put_along_axis(rank, ranked, np.arange(p.shape[1])[None, :].repeat(p.shape[0], axis=0), axis=1)
    counts += rank < short[:, None]
    for row in np.flatnonzero(short < 0):  # float error only: floors summing past k
        counts[row] = round_counts(p[row], int(k[row]), "round", rng)
    return counts


def _set_columns(codes: np.ndarray, schema, columns, cells: np.ndarray) -> None:
    """Write the flat cell indices over ``columns`` into their columns of ``codes``."""
    sizes = [schema.shape[schema.index(c)] for c in columns]
    for column, values in zip(columns, np.unravel_index(cells, sizes)):
        codes[:, schema.index(column)] = values
