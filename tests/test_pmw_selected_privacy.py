"""Statistical privacy test of practical PMW's selected rounds (``PracticalPMW._select_rounds``).

Before the first query, a selected round picks a declared subset with the exponential
mechanism (AIM's score: the subset's L1 error on D_t less the noise its measurement would
add, sensitivity 1) and measures it. The pick is released (the round log names it), so it must
be as private as the selection's charge says. Here one round runs many times on a pair of
neighbouring datasets, and ``privacy_audit.audit`` checks P[pick | D] <= e^eps_select
P[pick | D'] for both picks, in both directions (exact Clopper-Pearson bounds, family-wise
confidence 1 - 1e-6).

Design (as test_mwem_privacy's ``select_heavy`` case):

* schema a x b = {0,1} x {0,1}, declared subsets (a) and (b), a uniform prior, n = 8 public
  (an input of the plan, the same for D and D'), so both estimated tables are (4, 4), and the
  noise term of the score is the same for both (two cells each);
* D = (0,0) x2, (0,1) x2, (1,0) x1, (1,1) x3: tables a = (4, 4), b = (3, 5), errors (0, 2);
  D' = D plus a row (0,0): a = (5, 4), b = (4, 5), errors (1, 1). So P[pick (a) | D] =
  1 / (1 + e^eps) and P[pick (a) | D'] = 1/2 for the exponential mechanism of eps = eps_select,
  a loss of ln((1 + e^eps) / 2) < eps.
* Plans: ``pure`` (epsilon 4, delta 0, one round and one epoch, test share 15/16: eps_select
  1.875, ``synth.engines.mwem_budget.RoundBudget``) and ``zcdp`` (epsilon 10, delta 1e-9: the
  selection is charged as rho = eps_select^2 / 8, eps_select about 2.0). The real loss on
  "pick (a)" is about 0.64 eps_select (0.133 against 0.5).
* Broken: the exponential mechanism told the scores' sensitivity is 1/2 (weights twice as
  steep, charged the same): P[pick (a) | D] = 1 / (1 + e^(2 eps)) = 0.023, a loss of 1.4
  eps_select; caught at 1,500 runs per input (the Clopper-Pearson upper bound of 0.023 at that
  size is below 0.5 e^-eps_select = 0.077).

The samples are also checked against the exact law (each pick's probability inside its
interval), which shows that the losses above are those of the library's code. Every generator
is seeded, so the outcomes are deterministic.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from synth.data.schema import Coded, Schema
from synth.engines.mwem_budget import RoundBudget
from synth.engines.pmw_practical import PracticalPMW, plan_practical

from .privacy_audit import DEFAULT_CONFIDENCE, assert_leak, assert_no_leak, audit, clopper_pearson, \
    point_and_tail_events

SCHEMA = Schema((Coded("a", 2), Coded("b", 2)))
D = np.array([(0, 0)] * 2 + [(0, 1)] * 2 + [(1, 0)] + [(1, 1)] * 3, dtype=np.uint8)
D_PRIME = np.vstack([D, [(0, 0)]]).astype(np.uint8)
DECLARED = [("a",), ("b",)]
RUNS = 1_500
PLANS = {
    "pure": dict(epsilon=4.0, delta=0.0),
    "zcdp": dict(epsilon=10.0, delta=1e-9),
}


def plan_for(name: str):
    return plan_practical(PLANS[name]["epsilon"], PLANS[name]["delta"], 8, SCHEMA.universe_size, 1,
                          test_share=15 / 16, selected=1, composition="zCDP" if name == "zcdp" else "basic")


def picks(codes: np.ndarray, plan, seed: tuple) -> np.ndarray:
    """Index of the subset each run's selected round measured (0: a, 1: b)."""
    out = np.empty(RUNS, dtype=np.int64)
    for run in range(RUNS):
        pmw = PracticalPMW(codes, SCHEMA, plan, rng=np.random.default_rng((*seed, run)), declared=DECLARED)
        out[run] = DECLARED.index(tuple(pmw.log[0].columns))
    return out


@pytest.fixture
def half_sensitivity(monkeypatch):
    """The broken variant: the selection's sensitivity taken as 1/2, charged as planned."""
    select = RoundBudget.select
    monkeypatch.setattr(RoundBudget, "select", lambda self, scores, rng, accountant, note, sensitivity=1.0:
                        select(self, scores, rng, accountant, note, sensitivity / 2))


def check_law(sample: np.ndarray, p_a: float, label: str) -> None:
    low, high = clopper_pearson(int((sample == 0).sum()), len(sample), 1 - (1 - DEFAULT_CONFIDENCE) / 4)
    assert low <= p_a <= high, f"{label}: P[pick (a)] = {p_a:.4f} outside [{low:.4f}, {high:.4f}]"


def test_the_design_is_as_described():
    """One selected round, nothing else that reads the data; its budget as the docstring says;
    D and D' are neighbours."""
    for name in PLANS:
        plan = plan_for(name)
        assert plan.selected == 1 and not plan.warm_subsets
        budget = plan.selection_budget()
        assert 1.8 <= budget.epsilon_select <= 2.1
        if name == "zcdp":
            assert budget.rho_select == pytest.approx(budget.epsilon_select**2 / 8)
        pmw = PracticalPMW(D, SCHEMA, plan, rng=0, declared=DECLARED)
        charges = [c.note for c in pmw.accountant.ledger()]
        assert charges == ["PMW selected round 1: select", f"PMW selected round 1: measure {pmw.log[0].columns[0]}"]
    assert len(D_PRIME) == len(D) + 1 and (D_PRIME[:-1] == D).all()


@pytest.mark.parametrize("name", list(PLANS))
def test_a_selected_round_is_private(name):
    plan = plan_for(name)
    eps = plan.selection_budget().epsilon_select
    sample_d, sample_dp = picks(D, plan, (1, len(name))), picks(D_PRIME, plan, (2, len(name)))
    result = audit(sample_d, sample_dp, eps, events=point_and_tail_events([0, 1], tails=False))
    assert_no_leak(result, f"selected round ({name})")
    check_law(sample_d, 1 / (1 + math.exp(eps)), f"{name}, D")
    check_law(sample_dp, 0.5, f"{name}, D'")
    assert result.worst_hat is not None and result.worst_hat[2] > 0.5 * eps  # the pair is tight enough to see


@pytest.mark.parametrize("name", list(PLANS))
def test_a_selection_steeper_than_charged_is_caught(name, half_sensitivity):
    plan = plan_for(name)
    eps = plan.selection_budget().epsilon_select
    sample_d, sample_dp = picks(D, plan, (3, len(name))), picks(D_PRIME, plan, (4, len(name)))
    assert_leak(audit(sample_d, sample_dp, eps, events=point_and_tail_events([0, 1], tails=False)),
                f"selected round ({name}), half sensitivity")
    check_law(sample_d, 1 / (1 + math.exp(2 * eps)), f"{name} broken, D")
