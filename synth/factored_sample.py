"""Rows from a factored model: ancestral sampling along its junction tree.

The root clique's cells are drawn by controlled rounding of its belief (as a dense
distribution is sampled). Then each clique, parent before child, gives the rows that share a
separator value its remaining columns: the k rows of separator value s get the counts of
round_counts(belief[s, :] / belief[s].sum(), k), so every conditional group matches the
model's conditional as closely as integers can. Rows are shuffled before each clique, so
siblings that share a separator stay independent given it.
"""

from __future__ import annotations

import numpy as np

from .data import code_dtype
from .rng import make_rng
from .sample import METHODS, round_counts

__all__ = ["sample_factored"]

#: Most cells of one block of (separator value x child cells) held at once.
BLOCK_CELLS = 4_000_000


def sample_factored(model, rows: int, method: str = "round", rng: np.random.Generator | int | None = None
                    ) -> np.ndarray:
    """``rows`` rows of codes, shape ``(rows, columns)``, in random order."""
    if method not in METHODS:
        raise ValueError(f"method ({method!r}) must be one of: {', '.join(map(repr, METHODS))}")
    rng = make_rng(rng)
    schema = model.schema
    calibration = model.calibrate()
    tree = calibration.tree
    codes = np.zeros((rows, len(schema)), dtype=np.int64)
    root = tree.order[0]
    counts = round_counts(calibration.beliefs[root].reshape(-1), rows, method, rng)
    cells = np.repeat(np.flatnonzero(counts), counts[np.flatnonzero(counts)])
    rng.shuffle(cells)
    _set_columns(codes, schema, tree.cliques[root], cells)
    for i in tree.order[1:]:
        separator = tree.separator(i, tree.parent[i])
        new = tuple(c for c in tree.cliques[i] if c not in separator)
        if new:
            conditional = _grouped(calibration.beliefs[i], tree.cliques[i], separator, new, schema)
            _fill_children(codes, schema, separator, new, conditional, method, rng)
    return codes.astype(code_dtype(schema))


def _grouped(belief: np.ndarray, columns, separator, new, schema) -> np.ndarray:
    """The belief as a (separator cells, new cells) matrix."""
    axes = [columns.index(c) for c in (*separator, *new)]
    sizes = dict(zip(schema.names, schema.shape))
    sep_cells = int(np.prod([sizes[c] for c in separator], dtype=np.int64))
    return np.ascontiguousarray(belief.transpose(axes)).reshape(sep_cells, -1)


def _fill_children(codes, schema, separator, new, conditional, method, rng) -> None:
    """Give every row its cells on ``new`` given its cells on ``separator``."""
    rows = codes.shape[0]
    sizes = dict(zip(schema.names, schema.shape))
    if separator:
        sep_index = np.ravel_multi_index(tuple(codes[:, schema.index(c)] for c in separator),
                                         [sizes[c] for c in separator])
    else:
        sep_index = np.zeros(rows, dtype=np.int64)
    shuffled = rng.permutation(rows)
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
        assigned[start:stop] = np.repeat(np.tile(np.arange(width), g.size), counts.reshape(-1))
    values = np.empty(rows, dtype=np.int64)
    values[order] = assigned
    _set_columns(codes, schema, new, values)


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
