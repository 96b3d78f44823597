"""MWEM's tree start: the one-way marginals, then a spanning tree of pairs chosen privately.

MST's lesson (McKenna, Miklau and Sheldon 2021) for tables with many or large columns: a few
pairs carry most of the structure, and the pairs between large columns are too noisy to
measure all of them (a 10-column trip table: 6 pairs of 6,700-7,800 cells) and too large to
hold all of them in one model. So before classic MWEM's rounds select anything else, it
measures

1. every one-way marginal of the columns the workload's pairs join, without selection;
2. a maximum spanning tree (a forest, where the pairs do not join every column) of the
   workload's pairs, edge by edge as Kruskal's algorithm adds them: each edge is chosen by the
   exponential mechanism among the pairs joining two components, on the L1 distance between the
   pair's true table and what the noisy one-way marginals predict for it under independence
   (n times the outer product of the two, clipped at 0 and normalized). The prediction is a
   function of released values only, so a row moves a score by at most 1: sensitivity 1.
   Each chosen edge is then measured.

A tree of pairs keeps the model a sum of pair tables (no clique wider than two columns), so it
always fits beside what follows, and the fit runs over few cells. Everything here reads the
data only through the marginals measured and the scores selected on.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np

from synth.data.schema import Schema
from synth.data.workload import Workload
from synth.models.junction_tree import Forest

__all__ = ["choose_tree", "independence_scores", "spanning_edges", "tree_columns", "tree_pairs"]


def tree_pairs(workload: Workload, schema: Schema) -> list[tuple[str, str]]:
    """The pairs a tree may use: every two-column subset of a workload marginal (of two or more
    columns), in schema order, once each, in the order the workload first names them."""
    pairs: dict[tuple[str, str], None] = {}
    for subset in workload.subsets:
        ordered = sorted(subset, key=schema.index)
        for a, b in itertools.combinations(ordered, 2):
            pairs.setdefault((a, b), None)
    return list(pairs)


def tree_columns(pairs: list[tuple[str, str]], schema: Schema) -> list[str]:
    """The columns the pairs join, in schema order."""
    named = {c for pair in pairs for c in pair}
    return [c for c in schema.names if c in named]


def independence_scores(pairs: list[tuple[str, str]], true_pairs: dict, noisy_ones: dict, n: float) -> np.ndarray:
    """Each pair's L1 distance between its true table and the independence prediction of the noisy
    one-way marginals: n p_a p_b', with p the noisy counts clipped at 0 and normalized (uniform
    where every count was clipped). Sensitivity 1: the prediction is public once the one-ways are."""
    shares = {c: _shares(np.asarray(table, dtype=np.float64)) for c, table in noisy_ones.items()}
    return np.array([float(np.abs(true_pairs[(a, b)] - n * np.outer(shares[a], shares[b])).sum())
                     for a, b in pairs])


def _shares(counts: np.ndarray) -> np.ndarray:
    clipped = np.clip(counts, 0.0, None)
    total = clipped.sum()
    return clipped / total if total > 0 else np.full(counts.size, 1.0 / counts.size)


def spanning_edges(pairs: list[tuple[str, str]], columns: list[str]) -> int:
    """How many edges a spanning forest of ``pairs`` over ``columns`` has (public: from the
    workload alone), so the plan can count the tree's rounds before any data is read."""
    forest, edges = Forest(columns), 0
    for pair in pairs:
        if forest.joins(pair):
            forest.join(pair)
            edges += 1
    return edges


def choose_tree(pairs: list[tuple[str, str]], columns: list[str], scores: np.ndarray,
                select: Callable[[np.ndarray, str], int], room: Callable[[tuple[str, str]], bool]) -> list:
    """Kruskal's algorithm with each edge drawn by ``select(scores, note)`` (the exponential
    mechanism, charged by the caller) among the pairs that join two components and that the
    model has room for (``room``, asked of the pairs that join); stops when none is left."""
    forest, edges = Forest(columns), []
    while True:
        open_ = np.array([forest.joins(pair) and room(pair) for pair in pairs])
        if not open_.any():
            return edges
        masked = np.where(open_, scores, -np.inf)
        pick = select(masked, f"tree edge {len(edges) + 1}")
        edges.append(pairs[pick])
        forest.join(pairs[pick])
