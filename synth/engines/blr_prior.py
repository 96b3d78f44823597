"""BLR over a released model's net: candidates drawn from MWEM's or PMW's release.

A sampled net of random databases never resembles the data (adult's 7 columns: 1.72 mean L1
per 3-way marginal, worse than uniform rows' 1.45). The useful net comes from a release:

1. buy the row count n if it is not public (one noisy count, shared by both steps);
2. spend ``prior_share`` of the rest of epsilon on MWEM or PMW (``prior="mwem"|"pmw"``), or
   take an already released ``Model`` (then this run spends nothing on it: its own privacy
   is the user's to account for);
3. draw K candidate databases of m rows from the released distribution by controlled
   rounding (``synth.engines.blr.draw_candidates``, ``"systematic"``), with a generator split off
   before the data is read: the candidates depend on the data only through the release, so
   the range is public given the release (post-processing);
4. let the exponential mechanism choose one with the rest of epsilon, scored as in
   ``synth.engines.blr`` (-max query error, sensitivity 1 in rows since n is fixed).

Every charge of the engine goes on the same ``Accountant`` of epsilon as the count and the
selection (the engine runs under its share, then its ledger is recorded on the run's
accountant, which refuses anything past the budget). By basic composition the whole run is
epsilon-DP, and BLR's guarantee reads: max query error <= (best candidate's error) +
2 ln(K / beta) / (epsilon_select n), with probability >= 1 - beta; the best candidate's error
depends on the data and is not released.

Defaults (public quantities only): m = n up to ``MAX_PRIOR_ROWS`` (a candidate of n rows is
a synthetic table as close to the model as its rounding), K from a work cap of
``PRIOR_WORK`` candidate rows x column subsets, between ``MIN_PRIOR_CANDIDATES`` and
``DEFAULT_PRIOR_CANDIDATES``.
"""

from __future__ import annotations

import math

import numpy as np

from synth.data.counts import Data, data_rows
from synth.data.schema import Schema
from synth.data.tables import DEFAULT_MAX_CELLS, _check_cells
from synth.data.workload import Workload
from synth.engines.blr import _MAX_COUNT, BLRResult, NetTooLarge, _release
from synth.engines.mwem import mwem
from synth.engines.pmw import run_pmw
from synth.errors import SynthError
from synth.models.model import Model
from synth.models.model import _checksum
from synth.privacy.accounting import Accountant, subtract_epsilon
from synth.privacy.rng import make_rng
from synth.privacy.row_count import DEFAULT_COUNT_SHARE, row_count
from synth.privacy.validation import (
    MIN_BUDGET_EPSILON, check_budget_epsilon, check_positive_int, check_probability, check_real,
)

__all__ = [
    "PriorMismatch",
    "blr_prior",
    "check_prior_model",
    "prior_epsilon",
    "prior_net_size",
    "prior_candidates",
    "PRIORS",
    "DEFAULT_PRIOR_SHARE",
    "DEFAULT_PRIOR_CANDIDATES",
    "MIN_PRIOR_CANDIDATES",
    "MAX_PRIOR_ROWS",
    "PRIOR_WORK",
]

#: Engines whose release can seed the net.
PRIORS = ("mwem", "pmw")
#: Share of epsilon (after the row count) for the prior engine. Measured on adult's 7 columns,
#: all 35 3-way marginals, epsilon = 1, n public, 2 seeds, mean L1 per marginal of the release:
#: F = 0.5: 0.060-0.063, 0.6: 0.051-0.056, 0.7: 0.046-0.050, 0.8: 0.041-0.045, 0.9: 0.039-0.040.
#: The candidates are roundings of one model, so they differ by a few rows: the best one's max
#: error was 5-15 rows below the median's (of about 150), well inside the selection's own loss
#: (about 100 rows at epsilon_select = 0.2). The selection buys the stated bound, not accuracy,
#: so the engine gets most of the budget; 0.8 rather than 0.9 keeps that bound tight (the
#: selection loss grows as 1 / (1 - F)) while the release stays within about 1.15x of MWEM alone.
DEFAULT_PRIOR_SHARE = 0.8
#: Candidates K of a released-model net at most, unless asked (the best of more barely differs).
DEFAULT_PRIOR_CANDIDATES = 1_000
#: Candidates K at least, unless asked, whatever the work cap says.
MIN_PRIOR_CANDIDATES = 100
#: Rows m of each candidate at most, unless asked: m = n up to this.
MAX_PRIOR_ROWS = 1 << 17
#: Candidate rows x column subsets scored by default (about 8 s on adult's 35 marginals).
PRIOR_WORK = 1 << 29


class PriorMismatch(SynthError):
    """A prior model is not over the run's columns and values."""


def prior_net_size(rows: int) -> int:
    """Default rows m of a released-model net's candidates: n, at most ``MAX_PRIOR_ROWS``.

    A candidate of m = n rows drawn by controlled rounding is a synthetic table as close to
    the model as rounding allows (each cell within one row of n p); fewer rows add rounding
    error (adult, m = 10,000: 0.051 against 0.046 mean L1). Public: n is public or a
    released noisy count.
    """
    return min(check_positive_int(rows, "rows"), MAX_PRIOR_ROWS)


def prior_candidates(m: int, subsets: int) -> int:
    """Default K: ``PRIOR_WORK / (m x column subsets)``, within [``MIN_PRIOR_CANDIDATES``,
    ``DEFAULT_PRIOR_CANDIDATES``]: scoring costs m rows per candidate and column subset."""
    m, subsets = check_positive_int(m, "m"), check_positive_int(subsets, "subsets")
    return max(MIN_PRIOR_CANDIDATES, min(DEFAULT_PRIOR_CANDIDATES, PRIOR_WORK // (m * subsets)))


def _columns(schema: Schema) -> str:
    return ", ".join(f"{c.name} ({c.size})" for c in schema.columns)


def prior_epsilon(epsilon: float, prior_share: float, count_share: float, rows_public: bool, engine: str) -> float:
    """The prior engine's epsilon: ``prior_share`` of what the row count leaves (all of epsilon
    when n is public). A ``SynthError`` (one line) when it is below ``MIN_BUDGET_EPSILON``, the
    least an engine run takes. Public quantities only: callable before the data is read."""
    after_count = epsilon if rows_public else subtract_epsilon(epsilon, count_share * epsilon)
    engine_epsilon = prior_share * after_count
    if not engine_epsilon >= MIN_BUDGET_EPSILON:
        least = MIN_BUDGET_EPSILON / after_count
        digits = math.floor(math.log10(least)) - 2
        least = math.ceil(least / 10.0**digits) * 10.0**digits  # rounded up to 3 significant digits
        raise SynthError(f"prior share {prior_share:g} (--prior-share) leaves the {engine} prior epsilon="
                         f"{engine_epsilon:.3g}, below {MIN_BUDGET_EPSILON:g}, the least an engine run takes: give "
                         f"it a share of at least {least:.3g} (or raise --epsilon)")
    return engine_epsilon


def check_prior_model(model, schema: Schema, source: str = "the prior model") -> None:
    """``PriorMismatch`` (one line) unless ``model``'s columns and values are ``schema``'s:
    its distribution must be over the same universe, cell for cell."""
    theirs, ours = model.schema, schema
    if theirs.names != ours.names or theirs.shape != ours.shape:
        raise PriorMismatch(f"{source}: its columns {_columns(theirs)} do not match this run's {_columns(ours)}: "
                            "give a model released over the same columns, in the same order (--columns)")
    for mine, other in zip(ours.columns, theirs.columns):
        if mine != other:
            raise PriorMismatch(f"{source}: column {mine.name!r} has other values or bins than this run's schema "
                                f"({other.to_dict()} against {mine.to_dict()}): give a model released over the same "
                                "schema")


def blr_prior(
    data: Data,
    schema: Schema,
    workload: Workload,
    epsilon: float,
    *,
    prior="mwem",
    prior_share: float | None = None,
    prior_source: str | None = None,
    net_size: int | None = None,
    candidates: int | None = None,
    beta: float = 0.05,
    rows: int | None = None,
    count_share: float = DEFAULT_COUNT_SHARE,
    rng: np.random.Generator | int | None = None,
    max_cells: int = DEFAULT_MAX_CELLS,
    progress=None,
) -> BLRResult:
    """BLR over a net of K databases of m rows drawn from a released model; epsilon-DP in total.

    ``prior``: ``"mwem"`` or ``"pmw"`` (run here on ``prior_share`` of epsilon after the row
    count; default ``DEFAULT_PRIOR_SHARE``), or an already released ``synth.models.model.Model`` over
    the same schema (``prior_source`` names it in the record; all of epsilon then goes to the
    selection, and the model's own privacy is the caller's to account for). ``net_size`` (m)
    defaults to ``prior_net_size(n)``, ``candidates`` (K) to ``prior_candidates(m, subsets)``.

    ``parameters["prior"]`` records the prior (engine, share and epsilon spent, or the model's
    mechanism, its recorded privacy and checksum); the engine's round log is in the result's
    ``prior_log`` and so in the model's round log. ``parameters["selection_loss"]`` is BLR's
    bound on top of the best candidate's error.
    """
    epsilon = check_budget_epsilon(epsilon)
    beta = check_probability(beta, "beta")
    if len(workload) == 0:
        raise ValueError("the workload has no queries: the net mechanism needs something to score")
    engine = prior if isinstance(prior, str) else None
    if engine is not None and engine not in PRIORS:
        raise ValueError(f"prior ({prior!r}) must be one of: {', '.join(PRIORS)}, or a released Model")
    if engine is None:
        if not isinstance(prior, Model):
            raise TypeError(f"prior ({type(prior).__name__}) must be 'mwem', 'pmw' or a synth.models.model.Model")
        if prior_share is not None:
            raise ValueError("prior_share applies to a prior engine (mwem, pmw): a released model costs this run "
                             "nothing, so all of epsilon goes to the selection")
        check_prior_model(prior, schema, prior_source or "the prior model")
    else:
        prior_share = DEFAULT_PRIOR_SHARE if prior_share is None else check_real(prior_share, "prior_share")
        if not 0 < prior_share < 1:
            raise ValueError(f"prior_share ({prior_share:g}) must be in (0, 1): the engine gets that share of "
                             "epsilon and the selection the rest")
        public = (rows if rows is not None else schema.rows) is not None
        prior_epsilon(epsilon, prior_share, count_share, public, engine)  # refused before the data is read
    if rows is not None:
        rows = check_positive_int(rows, "rows")
    if net_size is not None and check_positive_int(net_size, "net_size") > _MAX_COUNT:  # blr's words
        raise NetTooLarge(f"net size m ({net_size:,}) is more than 2^63 - 1 rows: ask for fewer (--net-size)")
    if candidates is not None and check_positive_int(candidates, "candidates") > _MAX_COUNT:
        raise NetTooLarge(f"candidates K ({candidates:,}) is more than 2^63 - 1: ask for fewer (--candidates)")
    _check_cells(schema.universe_size, "the BLR release over the universe", max_cells)
    generator = make_rng(rng)
    # Split off the candidates' generator before anything reads the data, and the engine's apart
    # from it: the candidates are a function of the release and this generator only.
    candidate_rng = np.random.default_rng(generator.integers(0, 2**63 - 1, size=4))
    engine_rng = np.random.default_rng(generator.integers(0, 2**63 - 1, size=4))
    accountant = Accountant(epsilon)
    count = row_count(data_rows(data), rows if rows is not None else schema.rows, accountant, generator, count_share)
    halves = _Halves(progress, engine is not None) if progress is not None else None
    if engine is None:
        distribution = prior.distribution
        record = {"source": "model", "file": prior_source, "mechanism": prior.mechanism, "epsilon": 0.0,
                  "privacy_spent": prior.privacy.get("spent"), "seeded": prior.seeded,
                  "distribution_sha256": _sha256(distribution)}
        log = [{"prior": "model", "file": prior_source, "mechanism": prior.mechanism}]
    else:
        eps_engine = prior_share * subtract_epsilon(epsilon, count.epsilon)
        accountant.check(eps_engine, mechanism=engine, note=f"prior {engine}")
        distribution, engine_accountant, parameters, engine_log = _run_engine(
            engine, data, schema, workload, eps_engine, beta, count.rows, engine_rng, max_cells,
            halves and halves.first)
        for charge in engine_accountant.ledger():  # the engine ran under its share: record it on the run's budget
            accountant.spend(charge.epsilon, charge.delta, rho=charge.rho, mechanism=charge.mechanism,
                             note=f"prior {engine}: {charge.note}")
        spent = engine_accountant.spent().epsilon
        if "rows_public" in parameters:  # the engine was handed n, public or the noisy count bought above
            parameters = {**parameters, "rows_public": count.public}
        record = {"source": engine, "share": prior_share, "epsilon": spent, "parameters": parameters}
        log = [{"prior": engine, "epsilon": spent, "round_log": engine_log}]
    eps_select = subtract_epsilon(epsilon, accountant.spent().epsilon)
    if not eps_select > 0:
        raise SynthError(f"nothing of epsilon={epsilon:g} is left for the selection after the prior: lower "
                         "--prior-share")
    m = net_size if net_size is not None else prior_net_size(count.rows)
    k = candidates if candidates is not None else prior_candidates(m, len(workload.subsets))
    result = _release(data, schema, workload, accountant, count, eps_select, net="sampled", net_size=m, alpha=None,
                      candidates=k, beta=beta, prior=distribution, candidate_rng=candidate_rng, generator=generator,
                      draw="systematic", progress=halves and halves.second)
    result.parameters["prior"] = record
    result.prior_log = log
    return result


def _run_engine(engine, data, schema, workload, epsilon, beta, rows, rng, max_cells, progress):
    """The prior engine's released distribution, accountant, parameters and round log."""
    if engine == "mwem":
        result = mwem(data, schema, workload, epsilon, rows=rows, rng=rng, max_cells=max_cells, progress=progress)
        model = result.to_model(schema)
        return result.distribution, result.accountant, model.parameters, model.round_log
    run = run_pmw(data, schema, workload, epsilon, 0.0, beta, rows=rows, rng=rng, progress=progress)
    model = run.pmw.to_model()
    return model.distribution, run.accountant, model.parameters, model.round_log


def _sha256(distribution: np.ndarray) -> str:
    return _checksum(distribution)


class _Halves:
    """The caller's ``progress(done, fraction)`` split: the engine's run, then the selection."""

    def __init__(self, progress, engine: bool):
        self.progress, self.split = progress, (0.5 if engine else 0.0)

    def first(self, done, fraction) -> None:
        self.progress(done, None if fraction is None else self.split * fraction)

    def second(self, done, fraction) -> None:
        self.progress(done, None if fraction is None else self.split + (1 - self.split) * fraction)

