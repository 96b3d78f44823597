"""Integer counts and rows of codes from a distribution over the universe: the low-level sampling
that the dense and the factored models share (post-processing, so it costs no privacy).

1. ``round_counts``: integer counts per cell that sum to the requested row count, by
   controlled rounding (largest remainder, ties broken at random) or a multinomial draw;
2. ``sample_codes``: those counts as rows of integer codes, in random order (the order of
   synthetic rows must not reveal the cell order); ``iter_codes`` gives them in blocks of
   about ``SAMPLE_BLOCK_ROWS`` (``split_counts`` deals the counts into blocks), so sampling
   10^8 rows holds one block, not every row.

A schema's public constraints (``synth.data.constraints``) hold in every row ``iter_codes``
gives: it samples ``constrained_weights``, the distribution with the cells they rule out set
to zero mass (post-processing).

Every random step takes ``rng: Generator | int | None`` (see ``synth.privacy.rng``).
"""

from __future__ import annotations

import numbers
from collections.abc import Iterator
from typing import Any

import numpy as np

from synth.data.constraints import Function, compile_constraints, function_maps
from synth.data.reading import code_dtype
from synth.data.schema import Schema
from synth.data.tables import multiply_by_marginal
from synth.errors import SynthError
from synth.privacy.rng import make_rng

__all__ = ["METHODS", "SAMPLE_BLOCK_ROWS", "block_count", "check_choice", "check_rows", "constrained_weights",
           "iter_codes", "repair_functions", "round_counts", "sample_codes", "shuffled_blocks", "split_counts"]

METHODS = ("round", "multinomial")
#: Rows sampled at once (their cell indices, codes and, for a factored model, the ancestral
#: sampler's per-row arrays): the memory of sampling, whatever the number of rows.
SAMPLE_BLOCK_ROWS = 2**20


# -- counts ---------------------------------------------------------------------------------


def round_counts(
    distribution: np.ndarray, rows: int, method: str = "round", rng: np.random.Generator | int | None = None
) -> np.ndarray:
    """Integer counts per cell (int64) that sum exactly to ``rows``.

    ``method="round"``: controlled rounding by largest remainder. Each cell gets
    ``floor(rows * p)``, and the cells with the largest fractional parts get one more until
    the total is ``rows``; equal fractional parts are broken at random (no bias toward low
    cell indices). Every count is the floor or the ceiling of ``rows * p``, so the total
    absolute error is the least possible. O(U) time (a partition, not a sort).

    ``method="multinomial"``: ``rows`` independent draws from the distribution.

    ``distribution`` need not be normalized: it is divided by its sum.
    """
    p = _check_distribution(distribution)
    rows = check_rows(rows)
    check_choice("method", method, METHODS)
    rng = make_rng(rng)
    total = float(p.sum())
    if method == "multinomial":
        return rng.multinomial(rows, p / total).astype(np.int64, copy=False)
    frac = p / total  # not p * (rows / total), which overflows for a tiny total
    frac *= rows
    counts = frac.astype(np.int64)  # floor: the values are non-negative
    frac -= counts
    short = rows - int(counts.sum())  # in [0, U) but for float error in rows * p
    if short >= p.size:  # float error only: spread whole rounds evenly
        counts += short // p.size
        short %= p.size
    if short > 0:
        counts[_largest(frac, short, rng)] += 1
    while short < 0:  # float error only: floors summing past rows; take from the smallest remainders
        positive = np.flatnonzero(counts > 0)
        take = min(-short, positive.size)
        counts[positive[_largest(-frac[positive], take, rng)]] -= 1
        short += take
    return counts


def _largest(key: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """Indices of the ``k`` largest values of ``key`` (0 < k <= size); ties chosen at random."""
    threshold = np.partition(key, key.size - k)[key.size - k]  # the k-th largest, O(U)
    above = np.flatnonzero(key > threshold)
    tied = np.flatnonzero(key == threshold)
    return np.concatenate([above, rng.choice(tied, k - above.size, replace=False)])


# -- codes ----------------------------------------------------------------------------------


def sample_codes(
    distribution: np.ndarray,
    schema: Schema,
    rows: int,
    method: str = "round",
    rng: np.random.Generator | int | None = None,
) -> np.ndarray:
    """``rows`` rows of codes, shape ``(rows, len(schema))``, with ``round_counts``'s histogram.

    The rows come in random order. Memory: the codes, plus one block's cell indices.
    """
    blocks = list(iter_codes(distribution, schema, rows, method, rng))
    return blocks[0] if len(blocks) == 1 else np.concatenate(blocks)


def iter_codes(
    distribution: np.ndarray,
    schema: Schema,
    rows: int,
    method: str = "round",
    rng: np.random.Generator | int | None = None,
    block_rows: int | None = None,
) -> Iterator[np.ndarray]:
    """``sample_codes``'s rows, in blocks of about ``block_rows`` (default ``SAMPLE_BLOCK_ROWS``;
    at least one block, maybe
    empty): the counts are rounded once over all rows, then dealt into blocks
    (``split_counts``) and each block shuffled, so the blocks in turn are a random order of
    the rows. Every row keeps the schema's constraints (``constrained_weights``)."""
    rng = make_rng(rng)
    p = _check_distribution(distribution)
    if p.size != schema.universe_size:
        raise ValueError(
            f"distribution has {p.size} cells but the schema's universe has {schema.universe_size}"
        )
    p = constrained_weights(p, schema)
    dtype = code_dtype(schema)
    for cells in shuffled_blocks(round_counts(p, rows, method, rng), rng, block_rows):
        yield schema.cell_codes(cells).astype(dtype)


def shuffled_blocks(counts: np.ndarray, rng: np.random.Generator, block_rows: int | None = None
                    ) -> Iterator[np.ndarray]:
    """The rows of ``counts`` (rows per cell) as cell indices in random order, in blocks of
    about ``block_rows``: the counts dealt into blocks (``split_counts``), each block
    shuffled."""
    occupied = np.flatnonzero(counts)
    for part in split_counts(counts[occupied], block_count(int(counts.sum()), block_rows), rng):
        cells = np.repeat(occupied, part)
        rng.shuffle(cells)
        yield cells


def block_count(rows: int, block_rows: int | None = None) -> int:
    """How many blocks of about ``block_rows`` rows (default ``SAMPLE_BLOCK_ROWS``) sampling
    ``rows`` takes (at least 1)."""
    block_rows = SAMPLE_BLOCK_ROWS if block_rows is None else block_rows
    return max(1, -(-int(rows) // int(block_rows)))


def split_counts(counts: np.ndarray, blocks: int, rng: np.random.Generator) -> Iterator[np.ndarray]:
    """``counts`` (rows per cell) dealt into ``blocks`` parts, each row to a uniformly random
    part (binomial splitting: the parts are a uniformly random order of the rows, cut into
    pieces), yielded in turn; the parts sum to ``counts``. One block draws nothing."""
    remaining = np.asarray(counts, dtype=np.int64)
    for left in range(blocks, 1, -1):
        part = rng.binomial(remaining, 1.0 / left)
        remaining = remaining - part
        yield part
    yield remaining


def constrained_weights(weights: np.ndarray, schema: Schema) -> np.ndarray:
    """Flat weights over U that keep ``schema``'s constraints (a copy; ``weights`` itself when
    the schema has none): a function constraint moves the mass of each cell that breaks it to
    the cell with its column's allowed value, every other column unchanged (``function_maps``),
    so every marginal without that column stays as it was; a forbidden combination's cells are
    set to 0, the rest keeping their relative weights (conditioning). Post-processing of a
    release, at no privacy cost. ``SynthError`` when no weight is left."""
    compiled = compile_constraints(schema)
    if not compiled:
        return weights
    out = np.array(weights, dtype=np.float64, order="C")
    tensor = out.reshape(schema.shape)
    for of, column, targets in function_maps(schema):
        view = np.moveaxis(tensor, (of, column), (0, 1))  # a view: writes reach ``out``
        for i in np.flatnonzero(targets >= 0):
            moved = view[i].sum(axis=0)
            view[i] = 0.0
            view[i, targets[i]] = moved
    total = float(out.sum())
    for c in compiled:
        if not isinstance(c.constraint, Function):
            total = multiply_by_marginal(out, schema, c.columns, c.allowed.astype(np.float64))
    if not total > 0:
        raise SynthError("the distribution gives no mass to any row that keeps the schema's constraints: every cell "
                         "it weighs breaks one of them")
    return out


def repair_functions(codes: np.ndarray, schema: Schema) -> np.ndarray:
    """``codes`` (rows, schema columns) with each function constraint's column set to the value
    its ``of`` allows (``function_maps``), in place; the rows, for chaining."""
    for of, column, targets in function_maps(schema):
        wanted = targets[codes[:, of].astype(np.intp)]
        fixed = wanted >= 0
        codes[fixed, column] = wanted[fixed]
    return codes


# -- validation -----------------------------------------------------------------------------


def _check_distribution(distribution: Any) -> np.ndarray:
    try:
        p = np.asarray(distribution, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(
            f"distribution must be an array of numbers, not {type(distribution).__name__}"
        ) from None
    if p.ndim != 1 or p.size == 0:
        raise ValueError(f"distribution must be a non-empty 1-D array over the universe, got shape {p.shape}")
    bad = ~np.isfinite(p)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"distribution has a non-finite value ({float(p[i])!r}) at cell {i}")
    if p.min() < 0:
        i = int(np.argmin(p))
        raise ValueError(f"distribution has a negative value ({float(p[i])!r}) at cell {i}")
    if not p.sum() > 0:
        raise ValueError("distribution sums to 0; it needs a positive total")
    return p


def check_rows(rows: Any) -> int:
    if not isinstance(rows, numbers.Integral) or isinstance(rows, bool):
        raise TypeError(f"rows ({rows!r}) must be an integer")
    if rows < 0:
        raise ValueError(f"rows ({rows}) must be >= 0")
    return int(rows)


def check_choice(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if not (isinstance(value, str) and value in allowed):
        raise ValueError(f"{name} ({value!r}) must be one of: {', '.join(map(repr, allowed))}")
