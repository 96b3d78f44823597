"""The peers synth is measured against: plain NumPy (and itertools) implementations of the same
work as synth's kernels and engine steps, written the obvious way, in floating point and with no
accounting. Each script checks its peer's output against synth's before timing them.

Tables: ``numpy_histogram``, ``numpy_marginal``, ``NumpySubset`` (a marginal onto, and an update
by, one column subset). PMW: ``numpy_mask`` / ``numpy_scale`` (an update step through a boolean
mask), ``pmw_update_round`` and ``pmw_lazy_round``. MWEM: ``mw_passes`` and ``mwem_round``. BLR:
``exact_net`` (Gumbel-max over every m-multiset). Exponential mechanism: ``softmax_choice``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

def numpy_histogram(codes: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """bincount of the raveled cell indices."""
    size = int(np.prod(shape))
    return np.bincount(np.ravel_multi_index(codes.T, shape), minlength=size).reshape(shape)


def numpy_marginal(x: np.ndarray, shape: tuple[int, ...], positions: Sequence[int]) -> np.ndarray:
    """Sum out the other axes, then put the kept axes in the order asked (a transposed view)."""
    other = tuple(i for i in range(len(shape)) if i not in positions)
    table = x.reshape(shape).sum(axis=other)
    in_order = sorted(positions)
    return table.transpose([in_order.index(p) for p in positions])


class NumpySubset:
    """NumPy's marginal onto, and multiplication by a table over, one column subset."""

    def __init__(self, schema, columns: Sequence[str]):
        self.shape = schema.shape
        positions = [schema.index(c) for c in columns]
        in_order = sorted(positions)
        self.other = tuple(j for j in range(len(self.shape)) if j not in positions)
        self.to_subset = [in_order.index(p) for p in positions]
        self.to_schema = [positions.index(p) for p in in_order]
        self.broadcast = tuple(self.shape[j] if j in positions else 1 for j in range(len(self.shape)))

    def marginal(self, x: np.ndarray) -> np.ndarray:
        return x.reshape(self.shape).sum(axis=self.other).transpose(self.to_subset)

    def multiply(self, x: np.ndarray, factors: np.ndarray) -> None:
        view = x.reshape(self.shape)
        view *= factors.transpose(self.to_schema).reshape(self.broadcast)

    def multiply_total(self, x: np.ndarray, factors: np.ndarray) -> float:
        self.multiply(x, factors)
        return float(x.sum())


# -- PMW -------------------------------------------------------------------------------------


def numpy_mask(schema, query) -> np.ndarray:
    """The broadcast boolean mask of the cells a query (``columns``, ``allowed`` codes) selects."""
    shape = schema.shape
    mask = np.ones(shape, dtype=bool)
    for name, allowed in zip(query.columns, query.allowed):
        axis = schema.index(name)
        column = np.zeros(shape[axis], dtype=bool)
        column[allowed] = True
        mask &= column.reshape([-1 if j == axis else 1 for j in range(len(shape))])
    return mask


def numpy_scale(w: np.ndarray, schema, query, factor: float) -> float:
    """The update step: the mask, the selected cells' sum, then the scaling (in place)."""
    mask, view = numpy_mask(schema, query), w.reshape(schema.shape)
    selected = view[mask]
    before = float(selected.sum())
    view[mask] = selected * factor
    return before


def pmw_update_round(d: np.ndarray, schema, queries, trues, rows: int, plan, rng) -> None:
    """PMW update rounds on ``d`` in place, one per query: mask, f(D), a float Laplace
    measurement, D[mask] *= exp(eta sign), D /= D.sum()."""
    for query, true in zip(queries, trues):
        mask, view = numpy_mask(schema, query), d.reshape(schema.shape)
        selected = view[mask]
        measured = true + rng.laplace(0.0, 1.0 / plan.epsilon_measure)
        sign = float(np.sign(measured - rows * float(selected.sum())))
        view[mask] = selected * math.exp(plan.eta * sign)
        np.divide(d, d.sum(), out=d)


def pmw_lazy_round(d: np.ndarray, masks, trues, rows: int, threshold: float, epsilon_test: float, rng
                   ) -> None:
    """PMW lazy rounds, one per query: ``n * (D * mask).sum()`` with a precomputed flat mask
    (NumPy's best case), then the noisy comparison with the threshold."""
    for mask, true in zip(masks, trues):
        noise = rng.laplace(0.0, 4.0 / epsilon_test)
        _ = abs(true - rows * float((d * mask).sum())) + noise >= threshold


# -- MWEM ------------------------------------------------------------------------------------


def mw_passes(x, ops, measured, n: float, passes: int) -> int:
    """MW passes over (subset, noisy) on ``x`` in place, mwem's no-change stop; passes run."""
    total, runs = float(x.sum()), 0
    for _ in range(passes):
        runs += 1
        largest = 0.0
        for key, noisy in measured:
            exponent = (noisy - ops[key].marginal(x) * (n / total)) / (2 * n)
            largest = max(largest, float(np.abs(exponent).max()))
            total = ops[key].multiply_total(x, np.exp(exponent))
        if largest < 1e-9:
            break
    return runs


def mwem_round(x, ops, true_tables, measured, n, params, rng) -> int:
    """One MWEM round on ``x`` (float noise, no accounting). Selecting: score the marginals not
    yet measured, Gumbel-max, Laplace noise, then the passes over ``measured`` (the library run's
    measurements, so both do the same passes). Otherwise: the next marginal's noise, no passes."""
    keys, select = list(true_tables), params["epsilon_select"] > 0
    if select:
        total, chosen = float(x.sum()), {k for k, _ in measured[:-1]}
        scores = np.array([-np.inf if s in chosen
                           else float(np.abs(true_tables[s] - ops[s].marginal(x) * (n / total)).sum())
                           for s in keys])
        key = keys[int(np.argmax(scores * (params["epsilon_select"] / 2) + rng.gumbel(size=len(scores))))]
    else:
        key = keys[len(measured) - 1]
        if key != measured[-1][0]:
            raise AssertionError(f"round {len(measured)}: mwem measured {measured[-1][0]}, not {key}")
    _ = true_tables[key] + rng.laplace(0.0, 1.0 / params["epsilon_measure"], true_tables[key].shape)
    return mw_passes(x, ops, measured, n, params["passes"]) if select else 0


# -- BLR and the exponential mechanism -------------------------------------------------------

#: Multisets scored per batch by ``exact_net``.
NET_BATCH = 1 << 14


def exact_net(indicator: np.ndarray, true_counts: np.ndarray, n_rows: int, m: int, scale: float,
              rng: np.random.Generator, scores_out: np.ndarray | None = None) -> np.ndarray:
    """Gumbel-max over every m-multiset of U, batch by batch; returns the chosen cells: the
    multisets from ``itertools.combinations_with_replacement`` (``np.fromiter``), their query
    counts as sums of rows of the (U x Q) indicator, the scores ``-max_q |m x_q - n y_q| / m``.
    With ``scores_out`` the scores are also written there, in enumeration order (for the check)."""
    multisets = itertools.combinations_with_replacement(range(indicator.shape[0]), m)
    true_scaled = m * true_counts
    best_key, best, done = -np.inf, None, 0
    while True:
        batch = itertools.chain.from_iterable(itertools.islice(multisets, NET_BATCH))
        flat = np.fromiter(batch, dtype=np.int64)
        if flat.size == 0:
            return best
        cells = flat.reshape(-1, m)
        counts = indicator[cells].sum(axis=1)  # (batch, Q): the rows of each multiset's cells
        scores = -np.abs(true_scaled - n_rows * counts).max(axis=1) / m
        if scores_out is not None:
            scores_out[done : done + scores.size] = scores
        keys = scale * scores + rng.gumbel(size=scores.size)
        i = int(np.argmax(keys))
        if keys[i] > best_key:
            best_key, best = keys[i], cells[i].copy()
        done += scores.size


def softmax_choice(scores: np.ndarray, scale: float, rng: np.random.Generator) -> int:
    """An index drawn with probability proportional to exp(scale * score)."""
    p = np.exp(scale * (scores - scores.max()))
    p /= p.sum()
    return int(rng.choice(len(scores), p=p))
