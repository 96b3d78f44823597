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
