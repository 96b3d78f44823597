"""Statistical privacy test of whole MWEM runs under zCDP (``delta`` > 0): the exponential
mechanism charged as eps^2/8-zCDP, exact discrete Gaussian measurements, the total converted
to (epsilon, delta) by the accountant.

The design is ``test_mwem_privacy``'s (universe {0,1}^2, workload the two 1-way marginals, D
and D' = D plus the row (0,0), n = 8 public, uniform prior, one round, passes=1 and no final
fit) with ``delta`` = 0.01 and epsilon = 2: the accountant turns (2, 0.01) into rho ~ 0.305,
select_share 1/8 gives eps_select = sqrt(8 rho_select) ~ 0.55 and the measurement sigma^2 =
1 / (2 rho_measure) ~ 1.87. The audit checks P[E | D] <= e^eps P[E | D'] + delta in both
directions, on the same data-independent family of 106 events (selections and tails of the
selected marginal's noisy cells), at the (epsilon, delta) every run's accountant reports.

Exact law (``gaussian_law``, computed here from the formulas, not the library): round 1 picks
i with probability ~ exp(eps_select * score_i / 2) and each noisy cell is its count plus a
discrete Gaussian with P(z) ~ exp(-z^2 / (2 sigma^2)).

* Real: on the exact law no event of the family comes within delta of breaking the bound
  (largest P[E|D] - e^eps P[E|D'] is 0.0034 against delta = 0.01; the tightest ratio 1.64
  eps is on an event of probability below 0.016, which delta covers).
* Broken, the measurement drawn with 4 rho (sigma halved) but charged rho: "select (b),
  noisy b=0 <= 2" has P = 0.132 under D and 0.0041 under D' (gap 0.102 >> delta); at 8,000
  runs per input the audit proves it with probability 0.9992 from that event alone
  (``test_size_catches_the_broken_variant`` recomputes it).

The samples are checked against the exact law as well (every event inside its Bonferroni
Clopper-Pearson interval), so the loss figures above are those of the library's code and the
broken variant is broken as described. Runs are sequential and seeded.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import synth.engines.mwem_budget
from synth.privacy.composition import zcdp_rho_limit
from synth.engines.mwem import mwem

from .privacy_audit import DEFAULT_CONFIDENCE, assert_leak, assert_no_leak, audit, clopper_pearson, leak_power
from .test_mwem_privacy import (
    CANDIDATES,
    DATASETS,
    FEATURES,
    ROWS,
    SCHEMA,
    WORKLOAD,
    Case,
    Releases,
    ReleaseEvent,
    _features,
    _patched,
    audit_events,
    events_for,
    scores,
    true_tables,
)
from .test_pmw_practical_privacy import discrete_gaussian_half_noise  # sigma halved, charged whole

EPSILON, DELTA, SELECT_SHARE = 2.0, 0.01, 0.125
CASE = Case(EPSILON, SELECT_SHARE)  # one round, n = 8 public (its pure-epsilon fields are not used)
RUNS = 8_000  # per input, for the real mechanism and the broken one


def _rng(*key: int) -> np.random.Generator:
    return np.random.default_rng([20261123, 17, *key])


def _run(codes, rng):
    return mwem(codes, SCHEMA, WORKLOAD, EPSILON, delta=DELTA, noise="gaussian", rounds=1, measure="marginal",
                select_share=SELECT_SHARE, passes=1, final_passes=0, output="last", rows=ROWS, prior=None, rng=rng)


def sample_pair(variant: str, n: int, key: int) -> tuple[list[np.ndarray], float]:
    """``n`` runs on D and on D': their features, and the epsilon every accountant reports
    (checked to be one value, at most EPSILON, with delta = DELTA, from two zCDP charges)."""
    patches = [] if variant == "real" else [(synth.engines.mwem_budget, "discrete_gaussian", discrete_gaussian_half_noise)]
    releases, reported, outputs = Releases(), set(), []
    with _patched(patches):
        for i, codes in enumerate(DATASETS):
            rng, out = _rng(key, i), np.empty((n, FEATURES), dtype=np.int64)
            for r in range(n):
                result = _run(codes, rng)
                spent = result.accountant.spent()
                assert spent.method == "zcdp" and spent.delta == DELTA and spent.epsilon <= EPSILON, spent
                assert [c.is_zcdp for c in result.accountant.ledger()] == [True, True]
                reported.add(spent.epsilon)
                out[r] = features = _features(result, CASE)
                releases.add(features, result)
            outputs.append(out)
    assert len(reported) == 1, reported
    return outputs, reported.pop()


# -- the exact law -----------------------------------------------------------------------------


def gaussian_law(codes, rho_multiple: float = 1.0):
    """(selection probabilities, noise support, noise pmf) of a run on ``codes``: rho is the
    largest that (EPSILON, DELTA) allows, split 1/8 to select and 7/8 to measure."""
    rho = zcdp_rho_limit(EPSILON, DELTA)
    eps_select = math.sqrt(8 * rho * SELECT_SHARE)
    sigma2 = 1 / (2 * rho_multiple * rho * (1 - SELECT_SHARE))
    support = np.arange(-60, 61)
    pmf = np.exp(-support.astype(float) ** 2 / (2 * sigma2))
    score = scores(codes, ROWS)
    weights = np.exp(eps_select * (score - score.max()) / 2)
    return weights / weights.sum(), support, pmf / pmf.sum()


def event_probability(event: ReleaseEvent, codes, rho_multiple: float = 1.0) -> float:
    select, support, pmf = gaussian_law(codes, rho_multiple)
    tables = true_tables(codes)
    total = 0.0
    for i in ([event.pick] if event.pick is not None else range(len(CANDIDATES))):
        p = float(select[i])
        for _, cell, kind, value in event.tails:  # one round: the selected marginal's cells
            noisy = support + tables[i][cell]
            p *= float(pmf[noisy <= value].sum() if kind == "<=" else pmf[noisy >= value].sum())
        total += p
    return total


def exact_probabilities(rho_multiple: float) -> list[tuple[ReleaseEvent, float, float]]:
    return [(e, *(event_probability(e, codes, rho_multiple) for codes in DATASETS)) for e in events_for(CASE)]


def assert_matches_law(outputs, rho_multiple: float, label: str) -> None:
    """Each event's exact probability inside its Clopper-Pearson interval on both inputs."""
    table = exact_probabilities(rho_multiple)
    level = 1 - (1 - DEFAULT_CONFIDENCE) / (2 * len(table))
    for which, features in enumerate(outputs):
        for event, *probabilities in table:
            k = int(np.count_nonzero(event.mask(features)))
            lo, hi = clopper_pearson(k, len(features), level)
            assert lo <= probabilities[which] <= hi, f"{label}: {event.name}: {k}/{len(features)} vs exact " \
                                                     f"{probabilities[which]:.5g} on {'DD'[which]}{chr(39) * which}"


def _largest_gap(rho_multiple: float, eps: float) -> tuple[float, ReleaseEvent, float, float]:
    """The largest P[E|X] - e^eps P[E|Y] over the family and both directions."""
    return max(((max(p - math.exp(eps) * q, q - math.exp(eps) * p), e.name, p, q)
                for e, p, q in exact_probabilities(rho_multiple)), key=lambda t: t[0])


# -- the tests -----------------------------------------------------------------------------------


def test_exact_gaps():
    """On the exact law: the real mechanism stays within (eps, delta) on every event, by a
    margin (the audit cannot flag it); the broken one exceeds delta tenfold."""
    eps = EPSILON  # what the accountant reports is at most this (checked on the samples)
    real, broken = _largest_gap(1.0, eps), _largest_gap(4.0, eps)
    assert real[0] < DELTA / 2, real
    assert broken[0] > 10 * DELTA, broken


def test_size_catches_the_broken_variant():
    """The sample size: the broken variant's most telling event alone is proven a leak with
    probability >= 0.999 at RUNS runs per input (family of 106 events, Bonferroni)."""
    table = exact_probabilities(4.0)
    power = max(leak_power(p, q, RUNS, EPSILON, len(table), DELTA)
                for _, a, b in table for p, q in ((a, b), (b, a)) if p > math.exp(EPSILON) * q + DELTA)
    assert len(table) == 106 and power >= 0.999, power


@pytest.mark.slow
def test_zcdp_mwem_run_is_private():
    """The real zCDP MWEM: no leak proven at the (epsilon, delta) its accountants report, and
    the releases follow the exact law."""
    outputs, eps = sample_pair("real", RUNS, 1)
    assert eps == pytest.approx(EPSILON, rel=1e-5)  # the plan spends (nearly) all it was given
    assert_no_leak(audit(*outputs, eps, DELTA, events=audit_events(CASE)), "zCDP MWEM")
    assert_matches_law(outputs, 1.0, "zCDP MWEM")


def test_zcdp_mwem_half_sigma_is_caught():
    """Broken: measurements with half the Gaussian's sigma, charged as if whole; the same
    audit on the same pair must prove the leak, and the releases follow the broken law."""
    outputs, eps = sample_pair("half_sigma", RUNS, 2)
    assert_leak(audit(*outputs, eps, DELTA, events=audit_events(CASE)), "zCDP MWEM with half sigma")
    assert_matches_law(outputs, 4.0, "zCDP MWEM with half sigma")
