"""Slow, obviously-correct NumPy references that the Numba kernels are checked against."""

from __future__ import annotations

import numpy as np


def count_table(codes: np.ndarray, positions: list[int], shape: tuple[int, ...]) -> np.ndarray:
    """Counts of each code combination of the columns at ``positions`` (np.bincount)."""
    if not positions:
        return np.array(codes.shape[0], dtype=np.int64)
    index = np.ravel_multi_index(codes[:, positions].T.astype(np.int64), shape)
    return np.bincount(index, minlength=int(np.prod(shape))).reshape(shape)


def marginal_of_dense(x: np.ndarray, shape: tuple[int, ...], positions: list[int]) -> np.ndarray:
    """Sum a dense table onto the axes ``positions`` (in that order) with reshape + sum."""
    table = x.reshape(shape)
    others = tuple(i for i in range(len(shape)) if i not in positions)
    summed = table.sum(axis=others)
    kept = sorted(positions)
    return summed.transpose([kept.index(p) for p in positions])


def query_count(codes: np.ndarray, positions: list[int], allowed: list[np.ndarray]) -> int:
    """Rows whose code at each position is among the allowed codes (boolean masks)."""
    mask = np.ones(codes.shape[0], dtype=bool)
    for p, values in zip(positions, allowed):
        mask &= np.isin(codes[:, p], values)
    return int(mask.sum())


# -- sampling kernels: pure-Python twins that consume the same xoshiro256** stream ----------

_MASK64 = (1 << 64) - 1


class Xoshiro:
    """xoshiro256** in Python integers, on a copy of a kernel state."""

    def __init__(self, state):
        self.s = [int(w) for w in state]

    def next(self) -> int:
        s = self.s

        def rotl(x, k):
            return ((x << k) | (x >> (64 - k))) & _MASK64

        result = (rotl((s[1] * 5) & _MASK64, 7) * 9) & _MASK64
        t = (s[1] << 17) & _MASK64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = rotl(s[3], 45)
        return result


def uniform_below(gen: Xoshiro, n: int) -> int:
    if n & (n - 1) == 0:
        return gen.next() & (n - 1)
    excess = (1 << 64) % n
    while True:
        word = gen.next()
        if word < (1 << 64) - excess:
            return word % n


def uniform_below_small(gen: Xoshiro, n: int) -> int:
    product = (gen.next() >> 32) * n
    low = product & 0xFFFFFFFF
    floor = ((1 << 32) - n) % n
    while low < floor:
        product = (gen.next() >> 32) * n
        low = product & 0xFFFFFFFF
    return product >> 32


def bernoulli_exp_fraction(gen: Xoshiro, num: int, den: int) -> bool:
    k = 1
    while True:
        if uniform_below(gen, den) >= num:
            break
        if k > 1 and uniform_below_small(gen, k) != 0:
            break
        k += 1
    return k % 2 == 1


def bernoulli_exp_pow2(gen: Xoshiro, u: int, bits: int) -> bool:
    mask = (1 << bits) - 1
    k = 1
    while True:
        word = gen.next()
        if word & mask >= u:
            break
        if k > 1:
            product = (word >> 40) * k
            low = product & 0xFFFFFF
            floor = ((1 << 24) - k) % k
            while low < floor:
                product = (gen.next() >> 40) * k
                low = product & 0xFFFFFF
            if product >> 24 != 0:
                break
        k += 1
    return k % 2 == 1


def bernoulli_exp_minus_one(gen: Xoshiro) -> bool:
    k = 2
    while uniform_below_small(gen, k) == 0:
        k += 1
    return k % 2 == 1


def discrete_laplace(gen: Xoshiro, s: int, t: int) -> int:
    bits = t.bit_length() - 1 if t & (t - 1) == 0 and t <= 1 << 40 else -1
    while True:
        if bits >= 0:
            u = gen.next() & (t - 1)
            if not bernoulli_exp_pow2(gen, u, bits):
                continue
        else:
            u = uniform_below(gen, t)
            if not bernoulli_exp_fraction(gen, u, t):
                continue
        v = 0
        while bernoulli_exp_minus_one(gen):
            v += 1
        y = (u + t * v) // s
        negative = gen.next() >> 63 == 1
        if negative and y == 0:
            continue
        return -y if negative else y


def discrete_gaussian(gen: Xoshiro, p: int, q: int, t: int, y_max: int | None = None) -> int:
    """Twin of ``discrete_gaussian_one`` in Python integers: CKS Algorithm 3 with every
    candidate's test finished, whatever its size (the kernel's 64-bit, 128-bit and huge-gamma
    paths draw the same random words in the same order). A candidate past ``y_max``, if
    given, is tested as the kernel tests one whose gamma is past 2^62: Bernoulli(exp(-1))
    draws up to the first failure, which rejects it."""
    den = 2 * p * q * t * t
    while True:
        y = discrete_laplace(gen, 1, t)
        if y_max is not None and abs(y) > y_max:
            while bernoulli_exp_minus_one(gen):
                pass
            continue
        num = (abs(y) * t * q - p) ** 2
        whole, rest = divmod(num, den)
        accept = True
        for _ in range(whole):
            if not bernoulli_exp_minus_one(gen):
                accept = False
                break
        if accept and bernoulli_exp_fraction(gen, rest, den):
            return y


def gumbel_argmax(gen: Xoshiro, scores, scale: float) -> int:
    import math

    best_key, best = -math.inf, -1
    for i, score in enumerate(scores):
        if score == -math.inf:
            continue
        u = ((gen.next() >> 11) + 0.5) * (1.0 / 9007199254740992.0)
        key = scale * score + (-math.log(-math.log(u)))
        if key > best_key:
            best_key, best = key, i
    return best


def scale_query_cells(w: np.ndarray, shape: tuple[int, ...], positions: list[int], allowed: list[np.ndarray],
                      factor: float) -> tuple[np.ndarray, float]:
    """NumPy twin of the multiplicative-weights step: a full boolean mask over the universe."""
    grids = np.indices(shape).reshape(len(shape), -1)
    mask = np.ones(w.size, dtype=bool)
    for p, values in zip(positions, allowed):
        mask &= np.isin(grids[p], values)
    out = w.copy()
    before = float(w[mask].sum())
    out[mask] *= factor
    return out, before


def multiply_by_marginal(x: np.ndarray, shape: tuple[int, ...], positions: list[int], factors: np.ndarray) -> np.ndarray:
    """NumPy twin of the MWEM update: broadcast the factors over the universe and multiply."""
    if not positions:
        return x * float(factors)
    kept = sorted(positions)
    aligned = factors.transpose([positions.index(p) for p in kept])
    view_shape = [shape[i] if i in kept else 1 for i in range(len(shape))]
    return (x.reshape(shape) * aligned.reshape(view_shape)).reshape(-1)


# -- the BLR net mechanism: brute force over every m-row multiset --------------------------


def multisets(universe: int, m: int) -> np.ndarray:
    """Every multiset of ``m`` cells of ``range(universe)`` as sorted rows, in lexicographic
    order (``itertools.combinations_with_replacement``), shape ``(C(U + m - 1, m), m)``."""
    import itertools

    rows = list(itertools.combinations_with_replacement(range(universe), m))
    return np.array(rows, dtype=np.int64).reshape(len(rows), m)


def net_query_counts(schema, workload, databases: np.ndarray) -> np.ndarray:
    """``(k, Q)`` counts of every query on each database (rows of cell indices), one query and
    one database at a time from the cells' codes (``query_count``)."""
    databases = np.asarray(databases, dtype=np.int64)
    out = np.zeros((databases.shape[0], len(workload)), dtype=np.int64)
    for i, cells in enumerate(databases):
        codes = schema.cell_codes(cells)
        for j, query in enumerate(workload):
            positions = [schema.index(c) for c in query.columns]
            out[i, j] = query_count(codes, positions, list(query.allowed))
    return out


def net_scores(true_counts: np.ndarray, counts: np.ndarray, n_rows: int, m: int) -> np.ndarray:
    """Each database's score ``-max_q |x_q - n y_q / m|`` in rows, computed in integers as
    ``-max_q |m x_q - n y_q|`` and divided by m once."""
    true_scaled = m * np.asarray(true_counts, dtype=np.int64)[None, :]
    gaps = np.abs(true_scaled - n_rows * np.asarray(counts, dtype=np.int64))
    return -gaps.max(axis=1) / m


def exponential_probabilities(scores: np.ndarray, scale: float) -> np.ndarray:
    """The exponential mechanism's law: P(i) proportional to exp(scale * scores[i])."""
    scores = np.asarray(scores, dtype=np.float64)
    weights = np.exp(scale * (scores - scores.max()))
    return weights / weights.sum()


# -- many marginals of a dense table at once -------------------------------------------------


def marginals_of_dense(x: np.ndarray, shape: tuple[int, ...],
                       subsets: list[list[int]]) -> list[np.ndarray]:
    """Each subset's marginal on its own: reshape + sum over the other axes, then the subset's
    axis order (``marginal_of_dense``); the empty subset gives the 0-d total."""
    return [np.asarray(marginal_of_dense(x, shape, list(positions))) for positions in subsets]
