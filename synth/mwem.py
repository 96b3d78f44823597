"""MWEM (Hardt, Ligett and McSherry 2012) for an offline workload of counting queries.

T rounds over a dense distribution A over the universe (uniform, or a public prior):

1. **select** with the exponential mechanism (budget eps_select per round) the workload item
   with the largest error on A: a whole marginal (``measure="marginal"``: the L1 distance
   between its true and estimated tables, sensitivity 1) or one query
   (``measure="query"``: its absolute error, sensitivity 1); items already measured are excluded;
2. **measure** it with exact discrete Laplace noise (budget eps_measure; a marginal's table has
   L1 sensitivity 1, so one eps_measure covers all its cells);
3. **multiplicative weights** over every measurement so far: for a measured marginal S,
   A[u] *= exp((y_S[s(u)] - n A_S[s(u)]) / (2n)); repeated for ``passes`` passes, or until a
   pass changes nothing (every factor within 1e-9 of 1).

The release is A_T (``output="last"``) or the average of A_1..A_T (``"average"``). Budget:
eps_round = (epsilon - eps_count) / T, split by ``select_share``; every charge goes through the
accountant. n is public (``rows``) or a noisy count bought with ``count_share * epsilon``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .accounting import Accountant, split_epsilon, subtract_epsilon
from .mechanisms import discrete_laplace, exponential
from .rng import make_rng
from .schema import Schema
from .tables import DEFAULT_MAX_CELLS, SelectedCells, _check_cells, marginal, marginal_from_dense, multiply_by_marginal
from .validation import check_epsilon, check_positive_int, check_probability
from .workload import Workload

__all__ = ["MWEMResult", "mwem", "DEFAULT_ROUNDS", "DEFAULT_PASSES"]

DEFAULT_ROUNDS = 20
DEFAULT_PASSES = 10
_COUNT_SHARE = 0.05


@dataclass
class MWEMResult:
    """The released distribution and how it was made (all public)."""

    distribution: np.ndarray  # flat, sums to 1
    rows: float
    rows_public: bool
    accountant: Accountant
    measurements: list[dict] = field(default_factory=list)  # round log: what was measured, noisy values
    parameters: dict = field(default_factory=dict)

    def to_model(self, schema: Schema, *, seeded: bool = False):
        from .model import Model

        log = [{k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in m.items()} for m in self.measurements]
        return Model(schema=schema, mechanism="mwem", distribution=self.distribution, rows=self.rows,
                     rows_public=self.rows_public, parameters=self.parameters, privacy=self.accountant.to_dict(),
                     round_log=log, seeded=seeded)


def mwem(
    codes: np.ndarray,
    schema: Schema,
    workload: Workload,
    epsilon: float,
    *,
    rounds: int = DEFAULT_ROUNDS,
    measure: str = "marginal",
    select_share: float = 0.5,
    passes: int = DEFAULT_PASSES,
    output: str = "last",
    rows: int | None = None,
    count_share: float = _COUNT_SHARE,
    prior: np.ndarray | None = None,
    rng: np.random.Generator | int | None = None,
    max_cells: int = DEFAULT_MAX_CELLS,
    progress=None,
) -> MWEMResult:
    """Run MWEM on the encoded rows ``codes`` for ``workload``; epsilon-DP in total."""
    epsilon = check_epsilon(epsilon)
    rounds = check_positive_int(rounds, "rounds")
    passes = check_positive_int(passes, "passes")
    select_share = check_probability(select_share, "select_share")
    if measure not in ("marginal", "query"):
        raise ValueError(f"measure ({measure!r}) must be 'marginal' or 'query'")
    if output not in ("last", "average"):
        raise ValueError(f"output ({output!r}) must be 'last' or 'average'")
    _check_cells(schema.universe_size, "the MWEM distribution over the universe", max_cells)
    generator = make_rng(rng)
    accountant = Accountant(epsilon)
    public_rows = rows if rows is not None else schema.rows
    if public_rows is None:
        count_epsilon = count_share * epsilon
        n = float(max(1, discrete_laplace(int(codes.shape[0]), count_epsilon, 1, generator, accountant=accountant,
                                          note="noisy row count")))
    else:
        count_epsilon, n = 0.0, float(public_rows)
    candidates = workload.subsets if measure == "marginal" else list(range(len(workload)))
    rounds_run = min(rounds, len(candidates))
    per_round = split_epsilon(subtract_epsilon(epsilon, count_epsilon), rounds_run)
    eps_select = per_round * select_share
    eps_measure = subtract_epsilon(per_round, eps_select)

    weights = np.full(schema.universe_size, 1.0 / schema.universe_size) if prior is None else _normalized(prior, schema)
    total = float(weights.sum())
    true_tables = {s: marginal(codes, schema, s) for s in workload.subsets}
    true_answers = workload.answer(true_tables) if measure == "query" else None
    measured: list[tuple] = []  # (kind, key, noisy values)
    log: list[dict] = []
    average = np.zeros_like(weights) if output == "average" else None
    chosen: set = set()
    selections: dict[int, SelectedCells] = {}

    for t in range(rounds_run):
        estimate = _Estimate(weights, total, schema, n)
        if measure == "marginal":
            scores = np.array([-np.inf if s in chosen else float(np.abs(true_tables[s] - estimate.table(s)).sum())
                               for s in candidates])
        else:
            answers = workload.answer(estimate.table)
            scores = np.abs(true_answers - answers)
            scores[list(chosen)] = -np.inf
        pick = exponential(scores, eps_select, 1.0, generator, accountant=accountant, note=f"MWEM round {t + 1} select")
        key = candidates[pick]
        chosen.add(key)
        if measure == "marginal":
            noisy = discrete_laplace(true_tables[key], eps_measure, 1, generator, accountant=accountant,
                                     note=f"MWEM round {t + 1} measure {','.join(key)}")
            measured.append(("marginal", key, noisy.astype(np.float64)))
            log.append({"round": t + 1, "marginal": list(key), "noisy": noisy})
        else:
            noisy = discrete_laplace(int(true_answers[key]), eps_measure, 1, generator, accountant=accountant,
                                     note=f"MWEM round {t + 1} measure query {key}")
            measured.append(("query", key, float(noisy)))
            log.append({"round": t + 1, "query_id": int(key), "query": workload.describe(key), "noisy": int(noisy)})
        total = _multiplicative_weights(weights, total, schema, workload, measured, n, passes, selections)
        if average is not None:
            average += weights / total
        if progress is not None:
            progress(t + 1, (t + 1) / rounds_run)
    distribution = average / rounds_run if average is not None else weights / total
    parameters = {"rounds": rounds_run, "measure": measure, "select_share": select_share, "passes": passes,
                  "output": output, "epsilon_select": eps_select, "epsilon_measure": eps_measure,
                  "epsilon_count": count_epsilon}
    return MWEMResult(distribution, n, public_rows is not None, accountant, log, parameters)


class _Estimate:
    """Marginals of the current distribution, in rows, computed on demand within one round."""

    def __init__(self, weights, total, schema, n):
        self.weights, self.total, self.schema, self.n = weights, total, schema, n
        self._tables: dict = {}

    def table(self, subset):
        if subset not in self._tables:
            self._tables[subset] = marginal_from_dense(self.weights, self.schema, subset) * (self.n / self.total)
        return self._tables[subset]


def _multiplicative_weights(weights, total, schema, workload, measured, n, passes, selections) -> float:
    """Passes of MW over every measurement; returns the new total of ``weights`` (updated in place)."""
    for _ in range(passes):
        largest_change = 0.0
        for kind, key, noisy in measured:
            if kind == "marginal":
                estimate = marginal_from_dense(weights, schema, key) * (n / total)
                exponent = (noisy - estimate) / (2 * n)
                largest_change = max(largest_change, float(np.abs(exponent).max()))
                total = multiply_by_marginal(weights, schema, key, np.exp(exponent))
            else:
                query = workload[key]
                estimate = n * workload_value(weights, schema, query) / total
                exponent = (noisy - estimate) / (2 * n)
                largest_change = max(largest_change, abs(exponent))
                selection = selections.setdefault(key, SelectedCells(schema, query))
                factor = math.exp(exponent)
                before = selection.scale(weights, factor)
                total += (factor - 1.0) * before
        if not 1e-300 < total < 1e300:
            weights /= total
            total = 1.0
        if largest_change < 1e-9:
            break
    return total


def workload_value(weights: np.ndarray, schema: Schema, query) -> float:
    """A query's (unnormalized) mass under ``weights``, from its marginal."""
    table = marginal_from_dense(weights, schema, query.columns)
    if not query.columns:
        return float(table)
    return float(table[np.ix_(*query.allowed)].sum())


def _normalized(prior, schema) -> np.ndarray:
    prior = np.asarray(prior, dtype=np.float64).reshape(-1)
    if prior.size != schema.universe_size or not np.all(np.isfinite(prior)) or prior.min() < 0 or prior.sum() <= 0:
        raise ValueError("prior must be a non-negative finite array over the universe with a positive sum")
    return prior / prior.sum()
