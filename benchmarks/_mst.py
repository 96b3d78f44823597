"""The baselines of the wide-table benchmark, computed in the harness: ``independent`` (noisy
one-way marginals, their product) and ``mst`` (McKenna, Miklau and Sheldon 2021, the winner of
the 2018 NIST synthetic-data contest). Our own plain NumPy reimplementation for comparison, written
from the paper and from reading private-pgm's ``mechanisms/mst.py``; its estimation step is a
small tree estimator of our own, not private-pgm's mirror descent (``mbi``, which needs JAX).

Both take integer codes ``(n, d)``, the columns' sizes, a zCDP budget ``rho`` and a NumPy
``Generator``, add continuous Gaussian noise (as private-pgm does) and use no exact count (n is
estimated from the noisy tables). Neither checks budgets: they are baselines, not releases.

MST, with rho split in thirds:

1. **one-ways**: every column's counts with Gaussian noise, sigma1 = sqrt(d / (2 rho/3))
   (the d tables together have L2 sensitivity sqrt(d));
2. **compress**: values whose noisy count is below 3 sigma1 are merged into one value per column
   (the merged cell's noisy count is the sum of theirs); later steps work on the merged codes;
3. **select** a spanning tree, Kruskal-style: each pair's score is the L1 distance between its
   true counts and n_hat times the product of its estimated one-ways (sensitivity 1); d - 1
   exponential-mechanism draws (epsilon sqrt(8 (rho/3) / (d - 1)) each, eps^2/8-zCDP, Gumbel-max),
   each among the pairs that join two components;
4. **measure** the tree's d - 1 pairs, sigma2 = sqrt((d - 1) / (2 rho/3));
5. **estimate** (``TreeModel.fit``): each column's counts by inverse-variance weighting of its
   noisy one-way and the margins of its noisy tree pairs, projected onto {x >= 0, sum x = n_hat}
   (Euclidean projection); each noisy pair table projected the same way, then scaled by iterative
   proportional fitting to the two one-ways (so the tables agree on every shared column); the
   joint is the tree factorisation, and any pair's table follows from the conditionals along
   the tree path between them (``pair``). Merged values get equal shares of their group's mass
   (private-pgm samples them uniformly).

Run ``python benchmarks/_mst.py`` for the exactness check (no noise, a chain-structured table:
every pair's table is reproduced exactly).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np


def counts(codes: np.ndarray, columns: Sequence[int], sizes: Sequence[int]) -> np.ndarray:
    """Counts of each combination of ``columns``' codes (float64, shaped by their sizes)."""
    shape = tuple(int(sizes[c]) for c in columns)
    index = np.ravel_multi_index(tuple(codes[:, c].astype(np.int64) for c in columns), shape)
    return np.bincount(index, minlength=int(np.prod(shape))).reshape(shape).astype(np.float64)


def simplex_projection(y: np.ndarray, total: float) -> np.ndarray:
    """The nearest (Euclidean) x >= 0 with sum ``total``: max(y - tau, 0)."""
    flat = y.ravel()
    if total <= 0:
        return np.zeros_like(y)
    ordered = np.sort(flat)[::-1]
    cumulative = np.cumsum(ordered) - total
    k = np.nonzero(ordered - cumulative / np.arange(1, flat.size + 1) > 0)[0][-1]
    tau = cumulative[k] / (k + 1)
    return np.maximum(y - tau, 0.0)


def _probabilities(y: np.ndarray, total: float) -> np.ndarray:
    x = simplex_projection(y, max(total, 1.0))
    return x / x.sum()


class Independent:
    """The product of noisy one-way marginals (probabilities per column)."""

    def __init__(self, ones: list[np.ndarray]):
        self.ones = ones

    @classmethod
    def fit(cls, codes: np.ndarray, sizes: Sequence[int], rho: float,
            rng: np.random.Generator) -> Independent:
        d = len(sizes)
        sigma = np.sqrt(d / (2 * rho))
        noisy = [counts(codes, [c], sizes) + rng.normal(0, sigma, sizes[c]) for c in range(d)]
        total = float(np.mean([y.sum() for y in noisy]))
        return cls([_probabilities(y, total) for y in noisy])

    def pair(self, a: int, b: int) -> np.ndarray:
        return np.outer(self.ones[a], self.ones[b])


def _ipf(table: np.ndarray, rows: np.ndarray, cols: np.ndarray, iterations: int = 200) -> np.ndarray:
    """``table`` scaled until its margins are ``rows`` and ``cols`` (probabilities)."""
    t = table / table.sum()
    for _ in range(iterations):
        r = t.sum(axis=1)
        t *= np.divide(rows, r, out=np.zeros_like(r), where=r > 0)[:, None]
        c = t.sum(axis=0)
        t *= np.divide(cols, c, out=np.zeros_like(c), where=c > 0)[None, :]
        if np.abs(t.sum(axis=1) - rows).sum() < 1e-12:
            break
    return t


class TreeModel:
    """A tree-structured distribution over merged codes: per-column probabilities ``ones``, the
    tree's ``edges`` with consistent pair tables, and ``expand[c]`` (merged code -> original codes,
    rows summing to 1)."""

    def __init__(self, ones, edges, tables, expand):
        self.ones, self.edges, self.tables, self.expand = ones, edges, tables, expand
        self.neighbours: dict[int, list[int]] = {c: [] for c in range(len(ones))}
        for a, b in edges:
            self.neighbours[a].append(b)
            self.neighbours[b].append(a)
        self._from: dict[int, dict[int, np.ndarray]] = {}

    @classmethod
    def fit(cls, y1: list[np.ndarray], var1: list[np.ndarray], edges: list[tuple[int, int]],
            y2: list[np.ndarray], var2: float, expand: list[np.ndarray]) -> TreeModel:
        """From noisy one-ways ``y1`` (per-cell variances ``var1``) and noisy edge tables ``y2``
        (per-cell variance ``var2``), as the module docstring says."""
        weighted = [y / v for y, v in zip(y1, var1)]
        precision = [1.0 / v for v in var1]
        for (a, b), y in zip(edges, y2):
            for c, margin, other in ((a, y.sum(axis=1), y.shape[1]), (b, y.sum(axis=0), y.shape[0])):
                weighted[c] = weighted[c] + margin / (var2 * other)
                precision[c] = precision[c] + 1.0 / (var2 * other)
        combined = [w / p for w, p in zip(weighted, precision)]
        total = float(np.median([y.sum() for y in combined]))
        ones = [_probabilities(y, total) for y in combined]
        tables = {}
        for (a, b), y in zip(edges, y2):
            start = simplex_projection(y, total) / total
            rows, cols = start.sum(axis=1), start.sum(axis=0)
            empty = ((rows == 0) & (ones[a] > 0)).any() or ((cols == 0) & (ones[b] > 0)).any()
            if empty:
                start = start + 1e-9 * np.outer(ones[a], ones[b])  # IPF cannot fill an empty row
            tables[a, b] = _ipf(start, ones[a], ones[b])
        return cls(ones, edges, tables, expand)

    def _conditional(self, a: int, b: int) -> np.ndarray:
        """P(b | a) as a matrix (rows: a's merged codes); rows where P(a) = 0 are P(b)."""
        table = self.tables[a, b] if (a, b) in self.tables else self.tables[b, a].T
        r = table.sum(axis=1, keepdims=True)
        return np.where(r > 0, table / np.where(r > 0, r, 1.0), self.ones[b][None, :])

    def _joints_from(self, a: int) -> dict[int, np.ndarray]:
        """P(a, v) over merged codes for every column v, walking the tree from a."""
        if a not in self._from:
            found = {a: np.diag(self.ones[a])}
            stack = [a]
            while stack:
                u = stack.pop()
                for v in self.neighbours[u]:
                    if v not in found:
                        found[v] = found[u] @ self._conditional(u, v)
                        stack.append(v)
            self._from[a] = found
        return self._from[a]

    def pair(self, a: int, b: int) -> np.ndarray:
        """The model's table over columns a and b (original codes, probabilities)."""
        merged = self._joints_from(a)[b]
        return self.expand[a].T @ merged @ self.expand[b]


def _merge(y: np.ndarray, var: float, threshold: float) -> tuple[np.ndarray, ...]:
    """MST's compression of one column: the kept codes' noisy counts plus one merged cell, their
    variances, the code map (original -> merged) and the expansion (merged -> original)."""
    keep = y >= threshold
    size = y.size
    if keep.all():
        return y, np.full(size, var), np.arange(size), np.eye(size)
    kept = int(keep.sum())
    mapping = np.full(size, kept)
    mapping[keep] = np.arange(kept)
    expand = np.zeros((kept + 1, size))
    expand[mapping, np.arange(size)] = 1.0
    expand[kept] /= expand[kept].sum()
    variance = np.full(kept + 1, var)
    variance[kept] = var * (size - kept)
    return np.append(y[keep], y[~keep].sum()), variance, mapping, expand


def select_tree(scores: dict[tuple[int, int], float], d: int, epsilon: float,
                rng: np.random.Generator) -> list[tuple[int, int]]:
    """d - 1 edges, each drawn by the exponential mechanism (sensitivity 1, ``epsilon`` per draw;
    ``np.inf``: the best) among the pairs joining two components (a union-find forest)."""
    root = list(range(d))

    def find(x: int) -> int:
        while root[x] != x:
            root[x] = root[root[x]]
            x = root[x]
        return x

    edges = []
    for _ in range(d - 1):
        candidates = [e for e in scores if find(e[0]) != find(e[1])]
        values = np.array([scores[e] for e in candidates])
        if np.isinf(epsilon):
            pick = int(np.argmax(values))
        else:
            pick = int(np.argmax(epsilon / 2 * values + rng.gumbel(size=values.size)))
        a, b = candidates[pick]
        root[find(a)] = find(b)
        edges.append((a, b))
    return edges


def mst(codes: np.ndarray, sizes: Sequence[int], rho: float, rng: np.random.Generator) -> TreeModel:
    """MST's estimate (a ``TreeModel``) under rho-zCDP; ``rho = np.inf`` measures exactly."""
    d = len(sizes)
    third = rho / 3
    sigma1 = np.sqrt(d / (2 * third))

    def noise(shape, sigma):
        return 0.0 if np.isinf(rho) else rng.normal(0, sigma, shape)

    merged = [_merge(counts(codes, [c], sizes) + noise(sizes[c], sigma1), sigma1**2, 3 * sigma1)
              for c in range(d)]
    y1, var1, maps, expand = (list(part) for part in zip(*merged))
    small = np.column_stack([maps[c][codes[:, c].astype(np.int64)] for c in range(d)])
    small_sizes = [len(y) for y in y1]
    total = float(np.mean([y.sum() for y in y1]))
    guess = [_probabilities(y, total) for y in y1]
    scores = {}  # each pair's L1 distance from n_hat times the product of its estimated one-ways
    for a, b in itertools.combinations(range(d), 2):
        independent = total * np.outer(guess[a], guess[b])
        scores[a, b] = float(np.abs(counts(small, [a, b], small_sizes) - independent).sum())
    epsilon = np.inf if np.isinf(rho) else np.sqrt(8 * third / (d - 1))
    edges = select_tree(scores, d, epsilon, rng)
    sigma2 = np.sqrt((d - 1) / (2 * third))
    y2 = [counts(small, [a, b], small_sizes) + noise((small_sizes[a], small_sizes[b]), sigma2)
          for a, b in edges]
    return TreeModel.fit(y1, [np.maximum(v, 1e-12) for v in var1], edges, y2, max(sigma2**2, 1e-12), expand)


def _check_exact() -> None:
    """No noise, a chain 0 - 1 - 2 - 3 with integer weights (so the table is exactly
    tree-structured): MST picks the chain and every pair's table is reproduced exactly."""
    rng = np.random.default_rng(0)
    sizes = (3, 4, 5, 2)
    weights = [rng.integers(1, 4, size=(sizes[i], sizes[i + 1])) for i in range(3)]
    weights[0][0] *= 9  # strong links, so the chain outscores the skipping pairs
    weights[1][:, 0] *= 7
    weights[2][0] *= 5
    joint = np.einsum("ab,bc,cd->abcd", *weights)
    cells = np.array(list(np.ndindex(*sizes)))
    codes = np.repeat(cells, joint.ravel(), axis=0)
    model = mst(codes, sizes, np.inf, rng)
    assert sorted(tuple(sorted(e)) for e in model.edges) == [(0, 1), (1, 2), (2, 3)], model.edges
    for a, b in itertools.combinations(range(4), 2):
        truth = counts(codes, [a, b], sizes) / len(codes)
        assert np.allclose(model.pair(a, b), truth, atol=1e-12), (a, b)
        assert np.allclose(model.pair(b, a), truth.T, atol=1e-12), (b, a)
    independent = Independent.fit(codes, sizes, 1e12, rng)
    assert np.allclose(independent.pair(0, 1).sum(axis=1), counts(codes, [0], sizes) / len(codes), atol=1e-4)
    print("exact: MST without noise reproduces all 6 pair tables of a 4-column chain")


if __name__ == "__main__":
    _check_exact()
