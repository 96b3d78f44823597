"""BLR's front door: the net mechanism's config and engine, over the exact net, a uniform
sampled net (``synth.engines.blr``), or a net drawn from a released model (MWEM's or PMW's,
run first on a share of the budget, or a model file's: ``synth.engines.blr_prior``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from synth.data.counts import Data
from synth.data.schema import Schema
from synth.data.tables import DEFAULT_MAX_CELLS
from synth.data.workload import Workload
from synth.engines.blr import DEFAULT_CANDIDATES, DEFAULT_MAX_NET, BLRResult, blr
from synth.engines.blr_prior import DEFAULT_PRIOR_SHARE, blr_prior, prior_epsilon
from synth.engines.release import Progress, Release
from synth.models.model import Model
from synth.privacy.accounting import Budget
from synth.privacy.rng import is_seeded
from synth.privacy.row_count import DEFAULT_COUNT_SHARE
from synth.privacy.validation import check_budget_epsilon, check_positive_int, check_probability

__all__ = ["BLRConfig", "BLREngine", "NETS", "PRIOR_ENGINES"]

NETS = ("exact", "sampled")
#: Where a sampled net's candidates come from: uniform random rows, or a release of these engines.
PRIOR_ENGINES = ("mwem", "pmw", "uniform")


@dataclass(frozen=True)
class BLRConfig:
    """BLR's public options, checked when made (before any data is read).

    ``net``: ``exact`` (every m-row database; tiny universes) or ``sampled`` (K candidates from
    a prior); None: exact, or sampled when a prior is named. ``prior``: ``mwem`` or ``pmw`` (run
    first on ``prior_share`` of epsilon after any row count) or ``uniform``; a released model as
    the prior is the engine's input (``BLREngine(prior_model=...)``). ``net_size`` (m),
    ``candidates`` (K), ``max_net``, ``alpha`` and ``beta`` as in ``synth.engines.blr.blr``.
    ``rows``: n when public, else a noisy count bought with ``count_share`` of epsilon.
    """

    net: str | None = None
    prior: str | None = None
    prior_share: float | None = None
    net_size: int | None = None
    candidates: int | None = None
    max_net: int = DEFAULT_MAX_NET
    alpha: float | None = None
    beta: float = 0.05
    rows: int | None = None
    count_share: float = DEFAULT_COUNT_SHARE
    max_cells: int = DEFAULT_MAX_CELLS

    def __post_init__(self) -> None:
        if self.prior is not None and self.prior not in PRIOR_ENGINES:
            raise ValueError(f"prior ({self.prior!r}) must be one of: {', '.join(PRIOR_ENGINES)}")
        if self.net is not None and self.net not in NETS:
            raise ValueError(f"net ({self.net!r}) must be 'exact' or 'sampled'")
        if self.net == "exact" and self.prior is not None:
            raise ValueError("prior applies to net='sampled' (the exact net holds every database)")
        if self.prior_share is not None and self.prior not in ("mwem", "pmw", None):
            raise ValueError("prior_share applies to prior='mwem' or 'pmw' (the share of epsilon they get)")
        for name in ("net_size", "candidates", "rows"):
            if getattr(self, name) is not None:
                check_positive_int(getattr(self, name), name)
        check_positive_int(self.max_net, "max_net")
        check_probability(self.beta, "beta")


class BLREngine:
    """BLR for one schema and workload: ``plan`` refuses, before the data is read, a prior
    engine's share too small to run; ``run`` counts n, draws or enumerates the net, scores it
    and releases the chosen database."""

    name = "blr"

    def __init__(self, config: BLRConfig, schema: Schema, workload: Workload, *, prior_model: Model | None = None,
                 prior_source: str | None = None):
        if prior_model is not None and (config.prior is not None or config.net == "exact"):
            raise ValueError("a prior model takes the place of prior= and needs net='sampled'")
        if prior_model is not None and config.prior_share is not None:
            raise ValueError("prior_share applies to a prior engine (mwem, pmw): a released model costs this run "
                             "nothing, so all of epsilon goes to the selection")
        self.config, self.schema, self.workload = config, schema, workload
        self.prior_model, self.prior_source = prior_model, prior_source

    @property
    def net(self) -> str:
        """The net this run scores: the config's, or sampled when a prior is named, else exact."""
        c = self.config
        return c.net or ("sampled" if c.prior is not None or self.prior_model is not None else "exact")

    @property
    def prior(self) -> str | Model | None:
        """What a sampled net is drawn from: a prior engine's name, a released model, or None (uniform)."""
        if self.prior_model is not None:
            return self.prior_model
        if self.net == "sampled" and self.config.prior != "uniform":
            return self.config.prior or "mwem"
        return None

    def plan(self, budget: Budget) -> None:
        """Refuse a prior engine's share of epsilon too small to run it (public facts only)."""
        c = self.config
        check_budget_epsilon(budget.epsilon)
        if budget.delta:
            raise ValueError("blr is pure epsilon-DP: its budget takes no delta")
        if isinstance(self.prior, str):
            prior_epsilon(budget.epsilon, DEFAULT_PRIOR_SHARE if c.prior_share is None else c.prior_share,
                          c.count_share, (c.rows if c.rows is not None else self.schema.rows) is not None, self.prior)

    def estimate(self, budget: Budget) -> None:
        """None: BLR's progress bar counts its candidates as it scores them."""
        return None

    def run(self, counts: Data, budget: Budget, rng: np.random.Generator | int | None = None,
            progress: Progress | None = None) -> Release:
        """The chosen m-row database as the release, with its error bounds in the summary."""
        result = self.record(counts, budget, rng, progress)
        p = result.parameters
        if self.prior is None:
            kind = "uniform net" if p["net"] == "sampled" else "exact net"
            lines = [f"blr: {kind} of {p['candidates']:,} databases of m={p['net_size']} rows, each standing for "
                     f"{result.rows / p['net_size']:,.1f} rows"]
            lines += _bounds(p, exact_run=p["net"] == "exact")
        else:
            lines = _prior_lines(result, self.prior_source)
        warnings = list(result.warnings)
        if self.prior_model is not None and result.parameters["prior"].get("seeded"):
            warnings.append(f"{self.prior_source or 'the prior model'} came from a seeded run: its noise is "
                            "reproducible by anyone who knows the seed")
        return Release(result.to_model(seeded=is_seeded(rng)), result.accountant, tuple(lines), tuple(warnings),
                       result)

    def record(self, counts: Data, budget: Budget, rng: np.random.Generator | int | None = None,
               progress: Progress | None = None) -> BLRResult:
        """``run``'s work, as the engine's own record."""
        c = self.config
        self.plan(budget)
        if self.prior is not None:
            return blr_prior(counts, self.schema, self.workload, budget.epsilon, prior=self.prior,
                             prior_share=c.prior_share, prior_source=self.prior_source, net_size=c.net_size,
                             candidates=c.candidates, beta=c.beta, rows=c.rows, count_share=c.count_share, rng=rng,
                             max_cells=c.max_cells, progress=progress)
        return blr(counts, self.schema, self.workload, budget.epsilon, net=self.net, net_size=c.net_size,
                   alpha=c.alpha, candidates=c.candidates or DEFAULT_CANDIDATES, beta=c.beta, rows=c.rows,
                   count_share=c.count_share, rng=rng, max_net=c.max_net, max_cells=c.max_cells, progress=progress)


def _prior_lines(result: BLRResult, source: str | None) -> list[str]:
    """The summary of a net drawn from a prior: where it came from, and what the prior cost."""
    p = result.parameters
    record = p["prior"]
    if record["source"] != "model":
        origin = (f"{record['source']}'s release ({record['source']} spent epsilon={record['epsilon']:.6g}, "
                  f"{record['share']:g} of the budget after any row count)")
    else:
        origin = f"the released model {source or 'given'} ({record['mechanism']})"
    lines = [f"blr: net of {p['candidates']:,} databases of m={p['net_size']:,} rows drawn from {origin} by controlled "
             f"rounding, each row standing for {result.rows / p['net_size']:,.2f} rows; the exponential mechanism "
             f"chose one with epsilon={p['epsilon_select']:.6g}"]
    lines += _bounds(p, exact_run=False)
    if record["source"] == "model":
        spent = record.get("privacy_spent") or {}
        cost = (f"epsilon={spent['epsilon']:g}, delta={spent.get('delta', 0):g}" if "epsilon" in spent
                else "not recorded in the file")
        lines.append(f"note: the prior model's own privacy loss ({cost}) is not part of this run's budget: it is "
                     "yours to account for (the two releases together cost the sum)")
    return lines


def _bounds(p: dict, exact_run: bool) -> list[str]:
    """BLR's bounds: the exact net's (of the run, or for comparison) and a sampled net's."""
    confidence = f"with probability >= {1 - p['beta']:g}"
    label = "error bound, exact net" if exact_run else "error bound, exact net (for comparison, not run)"
    parts = f"alpha(m)={p['net_alpha']:.4f} plus selection {p['bound_exact_net'] - p['net_alpha']:.4g}"
    if exact_run or p["bound_exact_net"] < 1:
        lines = [f"{label}: max query error <= {p['bound_exact_net']:.4f} of n {confidence} ({parts})"]
    else:  # the net of every m-row database is far too large to promise anything
        lines = [f"{label}: none for m={p['net_size']:,} ({parts} of n)"]
    if p["net"] == "sampled":
        lines.append(f"error bound, sampled net: max query error <= (best candidate's error) + "
                     f"{p['selection_loss']:.4f} of n {confidence} (2 ln(K/beta) / (epsilon n)); the best "
                     "candidate's error depends on the data and is not released")
    return lines
