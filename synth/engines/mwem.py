"""MWEM (Hardt, Ligett and McSherry 2012) for an offline workload of counting queries.

T rounds over a distribution A over the universe (uniform, or a public prior), kept dense or
factored (``synth.models.distribution``; the factored one for universes past the dense cap):

1. **select** with the exponential mechanism (budget eps_select per round) the workload item
   with the largest error on A: a whole marginal (``measure="marginal"``: the L1 distance
   between its true and estimated tables less the expected L1 noise of measuring it, AIM's
   rule, sensitivity 1; the workload's one-way marginals are candidates too) or one query
   (``measure="query"``: its absolute error, sensitivity 1); items already measured, and on a
   factored A those that would grow it past its cap, are excluded;
2. **measure** it with exact discrete Laplace noise (budget eps_measure; a marginal's table has
   L1 sensitivity 1, so one eps_measure covers all its cells), or with ``delta`` > 0 exact
   discrete Gaussian noise under rho-zCDP (its L2 sensitivity is 1; ``synth.engines.mwem_budget``)
   when that plan adds less noise than the pure one (``plan_noise``: with few measurements a
   delta > 0 run keeps pure epsilon and Laplace noise, which is also (epsilon, delta)-DP);
3. **multiplicative weights** over every measurement so far: for a measured marginal S,
   A[u] *= exp((y_S[s(u)] - n A_S[s(u)]) / (2n)); repeated for ``passes`` passes, or until a
   pass changes nothing (every factor within 1e-9 of 1).

When the T rounds measure every candidate anyway, selection could only reorder them, so by
default it is skipped and the whole budget measures (in workload order). After the rounds,
a **final fit** runs more passes (``final_passes`` at most) until the measurements' total
absolute residual falls to ``FIT_TOLERANCE`` times the noise's expected total: fitting
further would fit the noise (on adult the error rises again past that point). When selection
left workload marginals unmeasured, the fit runs to convergence instead. The fit reads only
the noisy measurements, so it is post-processing. T defaults to ``default_rounds``.

That is classic MWEM (``selection="classic"``). ``selection="adaptive"`` runs AIM-style rounds
instead (``synth.engines.mwem_adaptive``: sub-marginal candidates, one-way marginals first, an annealed
budget, rounds until it is spent), and ``"auto"`` (the default) picks adaptive where measuring
every workload marginal would bury the median one under more than ``ADAPTIVE_RATIO`` n of noise
(small tables), classic otherwise, and notes which and why.

The release is A_T (``output="last"``) or the average of A_1..A_T (``"average"``, no final
fit). Budget: eps_round = (epsilon - eps_count) / T (under zCDP rho_round = (rho - rho_count) /
T, the count a discrete Gaussian with ``count_share`` of rho), split by ``select_share``; every
charge goes through the accountant. n is public (``rows``) or a noisy count bought with
``count_share * epsilon`` (under zCDP, ``count_share`` of rho).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from synth.privacy.accounting import Accountant
from synth.models.distribution import make_distribution
from synth.errors import SynthError
from synth.models.fit import FIT_TOLERANCE, expected_noise
from synth.privacy.mechanisms import mean_abs_noise
from synth.engines.mwem_adaptive import ADAPTIVE_RATIO, SELECT_SHARE, AnnealingBudget, adaptive_rounds, first_round_budget, noise_ratio
from synth.engines.mwem_budget import count_rho, plan_rounds, rounds_total
from synth.engines.mwem_noise import NoiseChoice, check_noise, choose_noise
from synth.privacy.rng import make_rng
from synth.privacy.row_count import DEFAULT_COUNT_SHARE, RowCount, row_count
from synth.data.schema import Schema
from synth.models.factored import DEFAULT_MAX_MODEL_CELLS, ModelSizeError, FactoredModel
from synth.data.counts import Data, data_marginal, data_rows
from synth.data.tables import DEFAULT_MAX_CELLS
from synth.privacy.validation import check_budget_epsilon, check_delta, check_positive_int, check_probability
from synth.data.workload import Workload
from synth.models.model import Model

__all__ = ["MWEMResult", "mwem", "plan_noise", "DEFAULT_ROUNDS", "DEFAULT_PASSES", "DEFAULT_FINAL_PASSES", "DEFAULT_SELECT_SHARE",
           "FIT_TOLERANCE", "expected_noise"]

#: How rounds are chosen: ``adaptive`` (``synth.engines.mwem_adaptive``), ``classic`` (a fixed number
#: of rounds over the workload's marginals, or every one of them), or ``auto``.
SELECTIONS = ("auto", "adaptive", "classic")
DEFAULT_ROUNDS = 50
#: Rounds per column (and their cap) when a selecting run accounts in zCDP (``default_rounds``).
ZCDP_ROUNDS_PER_COLUMN = 5
ZCDP_MAX_ROUNDS = 64
DEFAULT_PASSES = 10  # per round when selecting: fewer leave the estimate near uniform, and selection repeats itself
DEFAULT_FINAL_PASSES = 1000
#: Share of a round's epsilon for selection when selection is needed (AIM's choice, about 0.1).
DEFAULT_SELECT_SHARE = 0.1


@dataclass
class MWEMResult:
    """The released distribution and how it was made (all public)."""

    distribution: np.ndarray | FactoredModel  # flat and summing to 1, or a factored model
    rows: float
    rows_public: bool
    accountant: Accountant
    measurements: list[dict] = field(default_factory=list)  # round log: what was measured, noisy values
    parameters: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # what the run could not do as asked

    def to_model(self, schema: Schema, *, seeded: bool = False):
        log = [{k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in m.items()} for m in self.measurements]
        return Model(schema=schema, mechanism="mwem", distribution=self.distribution, rows=self.rows,
                     rows_public=self.rows_public, parameters=self.parameters, privacy=self.accountant.to_dict(),
                     round_log=log, seeded=seeded)



def mwem(
    data: Data,
    schema: Schema,
    workload: Workload,
    epsilon: float,
    *,
    delta: float = 0.0,
    selection: str = "auto",
    rounds: int | None = None,
    measure: str = "marginal",
    select_share: float | None = None,
    passes: int = DEFAULT_PASSES,
    final_passes: int = DEFAULT_FINAL_PASSES,
    output: str = "last",
    rows: int | None = None,
    count_share: float = DEFAULT_COUNT_SHARE,
    noise: str = "auto",
    prior: np.ndarray | None = None,
    rng: np.random.Generator | int | None = None,
    max_cells: int = DEFAULT_MAX_CELLS,
    representation: str = "auto",
    max_model_cells: int = DEFAULT_MAX_MODEL_CELLS,
    progress=None,
) -> MWEMResult:
    """Run MWEM on ``data`` (the encoded rows, or a planned scan's ``synth.data.counts.Counts``)
    for ``workload``: epsilon-DP in total, or with ``delta`` > 0 (epsilon, delta)-DP through
    rho-zCDP with discrete Gaussian measurements (``synth.engines.mwem_budget``).

    ``noise="auto"`` runs the pure epsilon-DP plan (discrete Laplace) even when delta > 0 if
    its measurements carry less noise (few of them; ``plan_noise``, ``synth.engines.mwem_noise``), and
    notes which and why; ``"laplace"`` or ``"gaussian"`` (delta > 0) force one.

    ``select_share=None`` spends ``DEFAULT_SELECT_SHARE`` of each round on selection, or
    nothing when the rounds measure every candidate anyway (selection could only change
    their order, so the whole budget goes to measurement).

    ``representation`` keeps D dense (an array over U, at most ``max_cells`` cells) or
    factored (``synth.models.factored``; ``auto``: factored once U passes ``max_cells``). A factored
    D only selects candidates whose subset keeps its junction tree within ``max_model_cells``.
    """
    epsilon = check_budget_epsilon(epsilon)
    delta = check_delta(delta)
    noise = check_noise(noise, delta)
    rounds = None if rounds is None else check_positive_int(rounds, "rounds")
    passes = check_positive_int(passes, "passes")
    if isinstance(final_passes, bool) or not isinstance(final_passes, int) or final_passes < 0:
        raise ValueError(f"final_passes ({final_passes!r}) must be an integer >= 0")
    if select_share is not None:
        select_share = check_probability(select_share, "select_share")
    if selection not in SELECTIONS:
        raise ValueError(f"selection ({selection!r}) must be one of: {', '.join(SELECTIONS)}")
    if selection == "adaptive" and (rounds is not None or measure != "marginal" or output != "last"
                                    or select_share is not None):
        raise ValueError("rounds, measure='query', output='average' and select_share apply to selection='classic' "
                         "(adaptive rounds follow from the budget)")
    if selection == "adaptive" and not any(workload.subsets):
        raise ValueError("adaptive rounds need a workload with a marginal on at least one column")
    if measure not in ("marginal", "query"):
        raise ValueError(f"measure ({measure!r}) must be 'marginal' or 'query'")
    if output not in ("last", "average"):
        raise ValueError(f"output ({output!r}) must be 'last' or 'average'")
    if output == "average" and representation != "dense" and schema.universe_size > max_cells:
        raise SynthError("output='average' needs a dense distribution: the universe is too large for one")
    dist = make_distribution(schema, "dense" if output == "average" else representation, prior=prior,
                             max_cells=max_cells, max_model_cells=max_model_cells)
    generator = make_rng(rng)
    # pure epsilon or zCDP, chosen before the data is touched, from public facts only
    choice = plan_noise(workload, schema, epsilon, delta, noise=noise, selection=selection, rounds=rounds,
                        measure=measure, select_share=select_share, output=output, rows=rows, count_share=count_share)
    plan_delta = delta if choice.zcdp else 0.0  # the delta the plan accounts with: 0 is pure epsilon
    accountant = Accountant(epsilon, delta)
    count = row_count(data_rows(data), rows if rows is not None else schema.rows, accountant, generator, count_share,
                      rho=count_rho(epsilon, delta, count_share) if choice.zcdp else None)
    n, count_epsilon = float(count.rows), count.epsilon
    mode, why = _selection_mode(selection, rounds, measure, output, select_share, schema, workload, n, epsilon,
                                plan_delta, count)
    lead = [text for text in (choice.reason, why) if text]  # the run's notes: which noise, which rounds, why
    if mode == "adaptive":
        return _adaptive(data, schema, workload, dist, n, count, accountant, generator, passes, final_passes,
                         progress, lead, plan_delta, noise)
    candidates = workload.subsets if measure == "marginal" else list(range(len(workload)))
    subset_of = (lambda key: key) if measure == "marginal" else (lambda key: workload[key].columns)
    rounds_run = min(rounds or default_rounds(workload, len(candidates), measure, zcdp=choice.zcdp), len(candidates))
    select = select_share is not None or rounds_run < len(candidates)
    notes: list[str] = lead
    if rounds is not None and rounds > len(candidates):
        notes.append(f"asked for {rounds:,} rounds; used {len(candidates):,}, one per {measure} of the workload: a "
                     f"round measures a {measure} not measured before")
    if not select:  # every candidate is measured: plan the budget for those that fit (structure only, no data)
        fitting = _fitting_in_order(dist, candidates, subset_of)
        if not fitting:
            raise _nothing_fits(max_model_cells)
        if len(fitting) < len(candidates):
            notes.append(f"measured {len(fitting)} of the {len(candidates)} {measure}s: the others would grow the "
                         f"model past its cap of {max_model_cells:,} cells (--max-model-cells); they are answered "
                         "from the model")
            candidates = fitting
            rounds_run = len(candidates)
    if select_share is None:
        select_share = DEFAULT_SELECT_SHARE if select else 0.0
    budget = plan_rounds(epsilon, plan_delta, count_epsilon, rounds_run, select_share, select, count.rho)

    if select and measure == "marginal":  # one-way marginals too: cheap to measure, and what D needs first
        present = set(candidates)
        candidates = list(candidates) + [(c,) for c in schema.names
                                         if (c,) not in present and any(c in s for s in workload.subsets)]
    true_tables = {s: data_marginal(data, schema, s) for s in (candidates if measure == "marginal" else workload.subsets)}
    # AIM's selection rule: a candidate's score is its error less the noise measuring it would
    # add (data-independent, so the score's sensitivity stays 1).
    noise_per_cell = budget.mean_abs_noise
    true_answers = workload.answer(true_tables) if measure == "query" else None
    measured: list[tuple] = []  # (kind, key, noisy values)
    log: list[dict] = []
    average = np.zeros(schema.universe_size) if output == "average" else None
    chosen: set = set()
    final_fit = average is None and final_passes > 0
    work = _Work(rounds_run, passes if (select or average is not None) else 0, final_passes if final_fit else 0)

    rounds_done = 0
    for t in range(rounds_run):
        open_ = [i for i, key in enumerate(candidates) if key not in chosen and dist.fits(subset_of(key))]
        if not open_ and t == 0:
            raise _nothing_fits(max_model_cells)
        if not open_:
            notes.append(f"stopped after {t} of {rounds_run} rounds: every candidate left would grow the model past "
                         f"its cap of {max_model_cells:,} cells (--max-model-cells); the rest of epsilon is unspent")
            break
        if select:
            estimate = _Estimate(dist, candidates if measure == "marginal" else workload.subsets, n)
            if measure == "marginal":
                scores = np.array([float(np.abs(true_tables[s] - estimate.table(s)).sum())
                                   - noise_per_cell * true_tables[s].size for s in candidates])
            else:
                scores = np.abs(true_answers - workload.answer(estimate.table))
            closed = np.ones(len(candidates), dtype=bool)
            closed[open_] = False
            scores[closed] = -np.inf
            pick = budget.select(scores, generator, accountant, note=f"MWEM round {t + 1} select")
        else:
            pick = open_[0]  # every candidate is measured: in workload order, no selection
        key = candidates[pick]
        chosen.add(key)
        dist.add_subset(subset_of(key))  # a factored D makes room now: later candidates must fit beside it
        if measure == "marginal":
            noisy = budget.measure(true_tables[key], generator, accountant,
                                   note=f"MWEM round {t + 1} measure {','.join(key)}")
            measured.append(("marginal", key, np.asarray(noisy, dtype=np.float64)))
            log.append({"round": t + 1, "marginal": list(key), "noisy": noisy})
        else:
            noisy = budget.measure(int(true_answers[key]), generator, accountant,
                                   note=f"MWEM round {t + 1} measure query {key}")
            measured.append(("query", key, float(noisy)))
            log.append({"round": t + 1, "query_id": int(key), "query": workload.describe(key), "noisy": int(noisy)})
        if select or average is not None:  # the estimate is needed now: by the next selection or the average
            dist.fit(measured, n, passes, workload=workload)
        if average is not None:
            average += dist.normalized()
        rounds_done = t + 1
        if progress is not None:
            progress(t + 1, work.after_round(t))
    # The fit stops at the noise level when the measurements are the workload (fitting closer
    # fits their noise). When selection left marginals unmeasured it runs to convergence: the
    # closer fit carries the measured structure to them (full adult, 91 pairs, eps = 1: mean L1
    # 0.085-0.087 against 0.091-0.093 stopped at the noise level).
    noise = expected_noise(measured, budget.epsilon_measure, budget.rho_measure)
    target = FIT_TOLERANCE * noise if not select else 0.0
    fit = _final_fit(dist, measured, n, final_passes if final_fit else 0, target, workload,
                     lambda done: progress(rounds_run, work.during_fit(done)) if progress is not None else None)
    if progress is not None and final_fit:
        progress(rounds_run + 1, 1.0)
    if average is not None:
        distribution = average / max(rounds_done, 1)
    else:
        distribution = dist.normalized() if dist.representation == "dense" else dist
    parameters = {"selection": "classic", "rounds": rounds_done, "representation": dist.representation,
                  "model_cells": dist.cells, "measure": measure, "select_share": select_share, "passes": passes,
                  "final_passes": final_passes if average is None else 0, **fit, "output": output,
                  **budget.as_dict(), "noise_asked": noise, "epsilon_count": count_epsilon, "rho_count": count.rho}
    return MWEMResult(distribution, n, count.public, accountant, log, parameters, notes)


def _final_fit(dist, measured: list[tuple], n: float, passes: int, target: float, workload, on_pass) -> dict:
    """Fit every measurement (at most ``passes`` passes, to ``target`` residual); how it went."""
    if not passes:
        return {"final_passes_run": 0, "final_fit_stop": "none", "fit_target_residual": target}
    done, residual = dist.fit(measured, n, passes, workload=workload, stop_residual=target, on_pass=on_pass)
    stop = "noise level" if residual <= target else "passes" if done >= passes else "converged"
    return {"final_passes_run": done, "final_fit_stop": stop, "fit_target_residual": target}


def _selection_mode(selection: str, rounds: int | None, measure: str, output: str, select_share: float | None,
                    schema: Schema, workload: Workload, n: float, epsilon: float, delta: float,
                    count) -> tuple[str, str]:
    """``adaptive`` or ``classic``, and why (for ``auto``; empty otherwise). ``auto`` is classic
    when an option only classic MWEM has was asked for (rounds, single queries, the average, a
    selection share); else adaptive when classic MWEM's measurements would each carry more than
    ``ADAPTIVE_RATIO`` times n in expected L1 noise (``synth.engines.mwem_adaptive.noise_ratio``). It
    reads the row count (public, or the noisy count already released), never the data."""
    if selection != "auto":
        return selection, ""
    if (rounds is not None or measure != "marginal" or output != "last" or select_share is not None
            or not any(workload.subsets)):
        return "classic", ""
    subsets = workload.subsets
    measurements = min(default_rounds(workload, len(subsets), zcdp=delta > 0), len(subsets))
    share = rounds_total(epsilon, delta, count.epsilon, count.rho) / measurements
    per_cell = mean_abs_noise(0.0, share) if delta > 0 else mean_abs_noise(share)
    sizes = dict(zip(schema.names, schema.shape))
    cells = [math.prod(sizes[c] for c in s) for s in subsets]
    ratio = noise_ratio(cells, n, per_cell)
    if ratio > ADAPTIVE_RATIO:
        return "adaptive", (f"adaptive rounds: measuring the workload's {measurements} marginals at an equal share "
                            f"would add {ratio:.2g} n of expected L1 noise to the median one (over {ADAPTIVE_RATIO:g})")
    return "classic", (f"classic rounds: the median of the workload's {measurements} marginals measured at an "
                       f"equal share carries {ratio:.2g} n of expected L1 noise (at most {ADAPTIVE_RATIO:g}; "
                       "--selection adaptive to override)")


def plan_noise(workload: Workload, schema: Schema, epsilon: float, delta: float, *, noise: str = "auto",
               selection: str = "auto", rounds: int | None = None, measure: str = "marginal",
               select_share: float | None = None, output: str = "last", rows: int | None = None,
               count_share: float = DEFAULT_COUNT_SHARE) -> NoiseChoice:
    """The noise and accounting of an MWEM run with these options (``synth.engines.mwem_noise``): with
    ``noise="auto"`` and delta > 0, pure epsilon with discrete Laplace or rho-zCDP with discrete
    Gaussian, whichever plan adds less expected |noise| to a measured cell at the pure plan's
    number of measurements. That number is its classic rounds (``default_rounds``), or under
    ``selection="adaptive"`` (or ``auto`` choosing it, which is known beforehand only when n is
    public) the rounds its first round's budget would allow. Reads only public facts: epsilon,
    delta, the options, the workload and schema, and n when it is public (``rows`` or the schema's)."""
    if noise != "auto" or not delta > 0:  # nothing to choose
        return choose_noise(noise, epsilon, delta, 1, 0.0, None)
    public = rows if rows is not None else schema.rows
    count_share_used = None if public is not None else count_share
    mode = "classic" if selection == "auto" else selection
    if selection == "auto" and public is not None:
        mode, _ = _selection_mode(selection, rounds, measure, output, select_share, schema, workload, float(public),
                                  epsilon, 0.0, RowCount(int(public), True, 0.0))
    zcdp_rounds = None
    if mode == "adaptive" and any(workload.subsets):
        total = rounds_total(epsilon, 0.0, 0.0 if public is not None else count_share * epsilon)
        start = _annealing_budget(total, False, schema, workload, public).first_round
        measurements, share = max(1, round(total / start)), SELECT_SHARE
    else:
        candidates = len(workload.subsets) if measure == "marginal" else len(workload)
        measurements = max(1, min(rounds or default_rounds(workload, candidates, measure), candidates))
        zcdp_rounds = max(1, min(rounds or default_rounds(workload, candidates, measure, zcdp=True), candidates))
        select = select_share is not None or measurements < candidates
        share = select_share if select_share is not None else (DEFAULT_SELECT_SHARE if select else 0.0)
    return choose_noise(noise, epsilon, delta, measurements, share, count_share_used, zcdp_rounds)


def _annealing_budget(total: float, zcdp: bool, schema: Schema, workload: Workload,
                      n: float | None) -> AnnealingBudget:
    """Adaptive MWEM's budget over the workload's columns, its first round sized from n (the
    annealing's default first round where n is not known yet)."""
    columns = [c for c in schema.names if any(c in s for s in workload.subsets)]
    sizes = dict(zip(schema.names, schema.shape))
    first = None if n is None else first_round_budget(total, zcdp, [sizes[c] for c in columns], n)
    return AnnealingBudget(total, zcdp, len(columns), first)


def _adaptive(data, schema, workload, dist, n, count, accountant, generator, passes, final_passes,
              progress, lead: list[str], delta: float, noise: str) -> MWEMResult:
    """Adaptive MWEM (``synth.engines.mwem_adaptive``) and its final fit, to convergence; ``delta`` is the
    plan's (0: pure epsilon, discrete Laplace), ``lead`` the run's first notes."""
    total = rounds_total(accountant.budget.epsilon, delta, count.epsilon, count.rho)
    budget = _annealing_budget(total, delta > 0, schema, workload, n)
    report = (lambda share: progress(0, 0.5 * share)) if progress is not None else None
    run = adaptive_rounds(data, schema, workload, dist, n, budget, accountant, generator, passes, report)
    fit = _final_fit(dist, run.measured, n, final_passes, 0.0, workload,
                     lambda done: progress(0, min(1.0, 0.5 + 0.5 * done / final_passes)) if progress else None)
    if progress is not None:
        progress(run.rounds, 1.0)
    distribution = dist.normalized() if dist.representation == "dense" else dist
    parameters = {"selection": "adaptive", "rounds": run.rounds, "annealed": run.annealed,
                  "representation": dist.representation, "model_cells": dist.cells, "measure": "marginal",
                  "select_share": SELECT_SHARE, "passes": passes, "final_passes": final_passes, **fit,
                  "output": "last", "composition": "zCDP" if delta > 0 else "basic",
                  "noise": "discrete Gaussian" if delta > 0 else "discrete Laplace",
                  "noise_asked": noise, "budget_total": total, "first_round_budget": budget.first_round,
                  "epsilon_count": count.epsilon, "rho_count": count.rho}
    notes = list(lead)
    unheld = [s for s in workload.subsets if not dist.fits(s)]
    if unheld:
        notes.append(f"{len(unheld)} of the workload's {len(workload.subsets)} marginals would grow the model past its "
                     f"cap of {dist.max_cells:,} cells (--max-model-cells); they are answered from the model")
    return MWEMResult(distribution, n, count.public, accountant, run.log, parameters, notes)


def _nothing_fits(max_model_cells: int) -> ModelSizeError:
    return ModelSizeError(f"no marginal of the workload fits a factored model of at most {max_model_cells:,} cells: "
                          "raise --max-model-cells or ask for smaller marginals")


def _fitting_in_order(dist, candidates: list, subset_of) -> list:
    """The candidates a model can hold, taken in order, each beside those before it that fit
    (all of them for a dense D). Depends on the subsets alone, never on the data."""
    if dist.representation == "dense":
        return list(candidates)
    scratch = dist.copy()
    fitting = []
    for key in candidates:
        if scratch.fits(subset_of(key)):
            scratch.add_subset(subset_of(key))
            fitting.append(key)
    return fitting


def default_rounds(workload: Workload, candidates: int, measure: str = "marginal", zcdp: bool = False) -> int:
    """Rounds when none are given: every candidate when there are at most ``DEFAULT_ROUNDS``;
    otherwise a few per column the workload touches, capped. Under pure epsilon two per column
    (a one-way marginal and about one pair each, as a tree of pairs needs), at most
    ``DEFAULT_ROUNDS``: a round's noise grows linearly with the rounds, and on full adult's 91
    pairs at eps = 1, 28-40 rounds give mean L1 0.085-0.087 and 50 rounds 0.093. Under zCDP
    (``zcdp``) ``ZCDP_ROUNDS_PER_COLUMN`` per column, at most ``ZCDP_MAX_ROUNDS``: Gaussian noise
    grows only with the square root of the rounds, and at eps = 1, delta = 1e-9 the model's
    median over seeds goes from 0.074 (28 rounds) to 0.067 (64 or 70; 78 rounds grew a model
    whose fit took 6x as long). Single queries (``measure="query"``): 50."""
    if candidates <= DEFAULT_ROUNDS or measure != "marginal":
        return min(candidates, DEFAULT_ROUNDS)
    columns = {c for s in workload.subsets for c in s}
    per_column, cap = (ZCDP_ROUNDS_PER_COLUMN, ZCDP_MAX_ROUNDS) if zcdp else (2, DEFAULT_ROUNDS)
    return max(1, min(cap, per_column * len(columns)))


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

    def __init__(self, dist, subsets, n):
        self._tables = {s: t * n for s, t in zip(subsets, dist.marginals(subsets))}

    def table(self, subset):
        return self._tables[subset]
