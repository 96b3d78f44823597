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

When the T rounds measure every candidate anyway, selection could only reorder them, so by
default it is skipped and the whole budget measures (in workload order). After the rounds,
a **final fit** runs more passes (``final_passes`` at most) until the measurements' total
absolute residual falls to ``FIT_TOLERANCE`` times the noise's expected total: fitting
further would fit the noise (on adult the error rises again past that point). The fit reads
only the noisy measurements, so it is post-processing.

The release is A_T (``output="last"``) or the average of A_1..A_T (``"average"``, no final
fit). Budget: eps_round = (epsilon - eps_count) / T, split by ``select_share``; every charge
goes through the accountant. n is public (``rows``) or a noisy count bought with
``count_share * epsilon``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .accounting import Accountant, split_epsilon, subtract_epsilon
from .errors import SynthError
from .fit import FIT_TOLERANCE, expected_noise, mw_fit
from .mechanisms import discrete_laplace, exponential
from .rng import make_rng
from .row_count import DEFAULT_COUNT_SHARE, row_count
from .schema import Schema
from .tables import DEFAULT_MAX_CELLS, _check_cells, marginal, marginals_from_dense
from .validation import check_budget_epsilon, check_positive_int, check_probability, normalized_prior
from .workload import Workload

__all__ = ["MWEMResult", "mwem", "DEFAULT_ROUNDS", "DEFAULT_PASSES", "DEFAULT_FINAL_PASSES", "DEFAULT_SELECT_SHARE",
           "FIT_TOLERANCE", "expected_noise"]

DEFAULT_ROUNDS = 50
DEFAULT_PASSES = 10  # per round when selecting: fewer leave the estimate near uniform, and selection repeats itself
DEFAULT_FINAL_PASSES = 1000
#: Share of a round's epsilon for selection when selection is needed (AIM's choice, about 0.1).
DEFAULT_SELECT_SHARE = 0.1


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
    select_share: float | None = None,
    passes: int = DEFAULT_PASSES,
    final_passes: int = DEFAULT_FINAL_PASSES,
    output: str = "last",
    rows: int | None = None,
    count_share: float = DEFAULT_COUNT_SHARE,
    prior: np.ndarray | None = None,
    rng: np.random.Generator | int | None = None,
    max_cells: int = DEFAULT_MAX_CELLS,
    progress=None,
) -> MWEMResult:
    """Run MWEM on the encoded rows ``codes`` for ``workload``; epsilon-DP in total.

    ``select_share=None`` spends ``DEFAULT_SELECT_SHARE`` of each round on selection, or
    nothing when the rounds measure every candidate anyway (selection could only change
    their order, so the whole budget goes to measurement).
    """
    epsilon = check_budget_epsilon(epsilon)
    rounds = check_positive_int(rounds, "rounds")
    passes = check_positive_int(passes, "passes")
    if isinstance(final_passes, bool) or not isinstance(final_passes, int) or final_passes < 0:
        raise ValueError(f"final_passes ({final_passes!r}) must be an integer >= 0")
    if select_share is not None:
        select_share = check_probability(select_share, "select_share")
    if measure not in ("marginal", "query"):
        raise ValueError(f"measure ({measure!r}) must be 'marginal' or 'query'")
    if output not in ("last", "average"):
        raise ValueError(f"output ({output!r}) must be 'last' or 'average'")
    _check_cells(schema.universe_size, "the MWEM distribution over the universe", max_cells)
    generator = make_rng(rng)
    accountant = Accountant(epsilon)
    count = row_count(codes.shape[0], rows if rows is not None else schema.rows, accountant, generator, count_share)
    n, count_epsilon = float(count.rows), count.epsilon
    candidates = workload.subsets if measure == "marginal" else list(range(len(workload)))
    rounds_run = min(rounds, len(candidates))
    select = select_share is not None or rounds_run < len(candidates)
    if select_share is None:
        select_share = DEFAULT_SELECT_SHARE if select else 0.0
    per_round = split_epsilon(subtract_epsilon(epsilon, count_epsilon), rounds_run)
    eps_select = per_round * select_share
    eps_measure = subtract_epsilon(per_round, eps_select)
    if (select and not eps_select > 0) or not eps_measure >= 2.0**-40:  # 2^-40: what discrete Laplace resolves
        raise SynthError(f"each round's epsilon ({per_round:.3g}) split by select_share={select_share!r} leaves "
                         f"{eps_select:.3g} to select and {eps_measure:.3g} to measure: selecting needs more than 0 and "
                         "measuring at least 2^-40; choose a share further from 0 and 1 (--select-share), fewer rounds "
                         "(--rounds) or more epsilon")

    weights = np.full(schema.universe_size, 1.0 / schema.universe_size) if prior is None else normalized_prior(prior, schema.universe_size)
    total = float(weights.sum())
    true_tables = {s: marginal(codes, schema, s) for s in workload.subsets}
    true_answers = workload.answer(true_tables) if measure == "query" else None
    measured: list[tuple] = []  # (kind, key, noisy values)
    log: list[dict] = []
    average = np.zeros_like(weights) if output == "average" else None
    chosen: set = set()
    selections: dict = {}  # the cells of measured queries, kept between fits
    final_fit = average is None and final_passes > 0
    work = _Work(rounds_run, passes if (select or average is not None) else 0, final_passes if final_fit else 0)

    for t in range(rounds_run):
        if select:
            estimate = _Estimate(weights, total, schema, workload.subsets, n)
            if measure == "marginal":
                scores = np.array([-np.inf if s in chosen else float(np.abs(true_tables[s] - estimate.table(s)).sum())
                                   for s in candidates])
            else:
                scores = np.abs(true_answers - workload.answer(estimate.table))
                scores[list(chosen)] = -np.inf
            pick = exponential(scores, eps_select, 1.0, generator, accountant=accountant,
                               note=f"MWEM round {t + 1} select")
        else:
            pick = t  # every candidate is measured: in workload order, no selection
        key = candidates[pick]
        chosen.add(key)
        if measure == "marginal":
            noisy = discrete_laplace(true_tables[key], eps_measure, 1, generator, accountant=accountant,
                                     note=f"MWEM round {t + 1} measure {','.join(key)}")
            measured.append(("marginal", key, np.asarray(noisy, dtype=np.float64)))
            log.append({"round": t + 1, "marginal": list(key), "noisy": noisy})
        else:
            noisy = discrete_laplace(int(true_answers[key]), eps_measure, 1, generator, accountant=accountant,
                                     note=f"MWEM round {t + 1} measure query {key}")
            measured.append(("query", key, float(noisy)))
            log.append({"round": t + 1, "query_id": int(key), "query": workload.describe(key), "noisy": int(noisy)})
        if select or average is not None:  # the estimate is needed now: by the next selection or the average
            total, _, _ = mw_fit(weights, total, schema, workload, measured, n, passes, selections)
        if average is not None:
            average += weights / total
        if progress is not None:
            progress(t + 1, work.after_round(t))
    fit_passes, target = 0, FIT_TOLERANCE * expected_noise(measured, eps_measure)
    if final_fit:
        on_pass = None
        if progress is not None:
            def on_pass(done: int) -> None:
                progress(rounds_run, work.during_fit(done))

        total, fit_passes, _ = mw_fit(weights, total, schema, workload, measured, n, final_passes, selections,
                                      target, on_pass)
        if progress is not None:
            progress(rounds_run + 1, 1.0)
    distribution = average / rounds_run if average is not None else weights / total
    parameters = {"rounds": rounds_run, "measure": measure, "select_share": select_share, "passes": passes,
                  "final_passes": final_passes if average is None else 0, "final_passes_run": fit_passes,
                  "fit_target_residual": target, "output": output,
                  "epsilon_select": eps_select, "epsilon_measure": eps_measure, "epsilon_count": count_epsilon}
    return MWEMResult(distribution, n, count.public, accountant, log, parameters)


class _Work:
    """Progress as a share of the walks of the universe a run makes at most: round t fits t
    measurements ``passes`` times; the final fit at most ``final_passes`` times all of them."""

    def __init__(self, rounds: int, passes: int, final_passes: int):
        self.rounds, self.passes = rounds, passes
        self.fit = final_passes * rounds
        self.total = passes * rounds * (rounds + 1) / 2 + rounds + self.fit

    def after_round(self, t: int) -> float:
        return (self.passes * (t + 1) * (t + 2) / 2 + t + 1) / self.total

    def during_fit(self, passes_done: int) -> float:
        return min(1.0, self.after_round(self.rounds - 1) + passes_done * self.rounds / self.total)


class _Estimate:
    """The current distribution's marginal tables (in rows) on every workload subset, from one
    fused walk over the universe."""

    def __init__(self, weights, total, schema, subsets, n):
        tables = marginals_from_dense(weights, schema, subsets)
        self._tables = {s: t * (n / total) for s, t in zip(subsets, tables)}

    def table(self, subset):
        return self._tables[subset]
