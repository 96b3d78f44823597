import json
import math
from fractions import Fraction

import pytest

from synth.privacy.accounting import Accountant, Budget, BudgetExceeded, Charge, compose, split_epsilon
from synth.privacy.composition import advanced_epsilon, zcdp_epsilon, zcdp_rho_limit


def test_budget_is_immutable_and_validated():
    budget = Budget(1.0, 1e-6)
    with pytest.raises(AttributeError):
        budget.epsilon = 2.0
    with pytest.raises(ValueError, match=r"epsilon \(-1\) must be finite and >= 0"):
        Budget(-1)
    with pytest.raises(ValueError, match=r"delta \(2\) must be in \[0, 1\)"):
        Budget(1, 2)


@pytest.mark.parametrize("epsilon, parts", [(1.0, 3), (0.1, 7), (1.0, 10), (2.5, 49), (1e-3, 1000)])
def test_split_never_adds_up_past_the_total(epsilon, parts):
    share = split_epsilon(epsilon, parts)
    assert Fraction(share) * parts <= Fraction(epsilon)
    assert share == pytest.approx(epsilon / parts, rel=1e-15)
    accountant = Accountant(epsilon)
    for _ in range(parts):
        accountant.spend(share, mechanism="part")
    assert accountant.spent().method == "basic"


def test_accountant_refuses_to_overspend_and_records_nothing():
    accountant = Accountant(1.0)
    accountant.spend(0.6, mechanism="a")
    with pytest.raises(BudgetExceeded, match=r"spending epsilon=0.5 \(b: second\) would bring the total to epsilon=1.1"):
        accountant.spend(0.5, mechanism="b", note="second")
    assert len(accountant.ledger()) == 1
    accountant.spend(0.4, mechanism="c")
    assert accountant.remaining().epsilon == 0.0
    with pytest.raises(BudgetExceeded):
        accountant.check(1e-12)
    assert isinstance(BudgetExceeded("x"), ValueError)


def test_check_does_not_record():
    accountant = Accountant(1.0)
    accountant.check(0.9)
    assert accountant.ledger() == ()


def test_zcdp_charge_needs_a_delta_budget():
    with pytest.raises(BudgetExceeded):
        Accountant(10.0).spend(rho=0.01, mechanism="gauss")
    accountant = Accountant(1.0, 1e-6)
    accountant.spend(rho=0.01, mechanism="gauss")
    assert accountant.spent().method == "zcdp"
    assert accountant.spent().epsilon == pytest.approx(zcdp_epsilon(0.01, 1e-6), rel=1e-9)


def test_tightest_composition_is_reported():
    many_small = [Charge("m", 0.01)] * 200
    spent = compose(many_small, 1e-6)
    basic = 2.0
    advanced = advanced_epsilon([0.01] * 200, 1e-6)
    zcdp = zcdp_epsilon(200 * 0.01**2 / 2, 1e-6)
    assert spent.epsilon == pytest.approx(min(basic, advanced, zcdp), rel=1e-9)
    assert spent.epsilon < basic
    few_large = compose([Charge("m", 0.5)] * 2, 1e-6)
    assert few_large.method == "basic" and few_large.epsilon == 1.0 and few_large.delta == 0.0


def test_with_delta_budget_more_small_charges_fit_than_basic_allows():
    accountant = Accountant(1.0, 1e-6)
    count = 0
    with pytest.raises(BudgetExceeded):
        while True:
            accountant.spend(0.01, mechanism="m")
            count += 1
    assert count > 200  # basic composition would stop at 100
    assert accountant.spent().epsilon <= 1.0


def test_approximate_charges_use_up_delta():
    accountant = Accountant(1.0, 1e-5)
    accountant.spend(0.1, 6e-6, mechanism="approx")
    with pytest.raises(BudgetExceeded, match="delta"):
        accountant.spend(0.1, 5e-6, mechanism="approx")
    spent = accountant.spent()
    assert spent.delta <= 1e-5


def test_a_charge_is_epsilon_or_rho_not_both():
    accountant = Accountant(1.0, 1e-6)
    with pytest.raises(TypeError, match="either"):
        accountant.spend(0.1, rho=0.1)
    with pytest.raises(TypeError, match="give epsilon"):
        accountant.spend()
    with pytest.raises(ValueError, match=r"epsilon \(-0.1\)"):
        accountant.spend(-0.1)


def test_ledger_serializes_and_round_trips():
    accountant = Accountant(5.0, 1e-6)
    accountant.spend(0.5, mechanism="discrete_laplace", note="marginal sex,race")
    accountant.spend(rho=0.02, mechanism="discrete_gaussian")
    text = accountant.to_json()
    obj = json.loads(text)
    assert obj["charges"][0] == {"mechanism": "discrete_laplace", "epsilon": 0.5, "delta": 0.0, "rho": None,
                                 "note": "marginal sex,race"}
    assert obj["spent"]["epsilon"] == accountant.spent().epsilon
    again = Accountant.from_dict(obj)
    assert again.ledger() == accountant.ledger()
    assert again.spent() == accountant.spent()


def test_spent_never_exceeds_budget_after_random_spending():
    import numpy as np

    rng = np.random.default_rng(4)
    for delta in (0.0, 1e-6):
        accountant = Accountant(1.0, delta)
        for _ in range(300):
            try:
                accountant.spend(float(rng.uniform(0.001, 0.2)), mechanism="m")
            except BudgetExceeded:
                pass
        spent = accountant.spent()
        assert spent.epsilon <= 1.0 and spent.delta <= delta and math.isfinite(spent.epsilon)


@pytest.mark.parametrize("delta", [0.0, 1e-6, 1e-3])
def test_fast_checks_agree_with_full_composition(delta):
    import numpy as np

    rng = np.random.default_rng(int(delta * 1e6) + 1)
    accountant = Accountant(1.0, delta)
    for _ in range(120):
        kind = rng.integers(0, 3)
        if kind == 0:
            args, kwargs = (float(rng.uniform(0.005, 0.15)),), {}
        elif kind == 1:
            args, kwargs = (float(rng.uniform(0.005, 0.15)), float(rng.uniform(0, delta / 20))), {}
        else:
            args, kwargs = (), {"rho": float(rng.uniform(1e-6, 1e-3))}
        before = accountant.ledger()
        try:
            charge = accountant.spend(*args, mechanism="m", **kwargs)
        except BudgetExceeded:
            refused = Charge("m", *args, **kwargs) if args else Charge("m", rho=kwargs["rho"])
            total = compose(list(before) + [refused], delta)
            assert total.epsilon > 1.0 * (1 - 1e-5) or total.delta > delta  # refused only when (nearly) over
            continue
        total = compose(accountant.ledger(), delta)
        assert total.epsilon <= 1.0 and total.delta <= delta, (charge, total)


@pytest.mark.parametrize("epsilon, used", [(1.0, 0.05), (0.3, 0.1), (1.0, 1 / 3), (0.7, 0.035)])
def test_subtract_never_lets_the_parts_exceed_the_whole(epsilon, used):
    from synth.privacy.accounting import subtract_epsilon

    rest = subtract_epsilon(epsilon, used)
    assert Fraction(rest) + Fraction(used) <= Fraction(epsilon)
    assert rest == pytest.approx(epsilon - used, rel=1e-15)


def test_a_sequential_record_adds_the_parts_and_keeps_every_charge():
    """A schema derived under DP, then a run: the record's budget and loss are the sums, and
    its ledger holds both parts' charges, named."""
    from synth.privacy.accounting import sequential_record

    schema = Accountant(0.1, 1e-9)
    schema.spend(0.05, mechanism="discrete_laplace", note="age: bounds")
    schema.spend(0.05, 1e-9, mechanism="partition_selection", note="sex: values")
    run = Accountant(0.9, 1e-9)
    run.spend(rho=0.01, mechanism="discrete_gaussian", note="round 1")
    record = sequential_record([("schema", schema), ("mwem", run)])
    assert record["budget"] == {"epsilon": pytest.approx(1.0), "delta": pytest.approx(2e-9)}
    assert record["spent"]["epsilon"] >= schema.spent().epsilon + run.spent().epsilon
    assert record["spent"]["epsilon"] == pytest.approx(schema.spent().epsilon + run.spent().epsilon, rel=1e-12)
    assert record["spent"]["delta"] == pytest.approx(schema.spent().delta + run.spent().delta)
    assert [c["note"] for c in record["charges"]] == ["schema: age: bounds", "schema: sex: values", "mwem: round 1"]
    assert record["spent"]["method"].startswith("basic, over schema (basic) then mwem (")


def test_zero_epsilon_delta_charge_composes_with_rho():
    """(0, delta), e.g. a partition threshold, was refused (epsilon must be > 0); it is a charge of
    its own: alone it is (0, delta) by basic composition, beside rho it takes delta from zCDP's slack."""
    alone = Accountant(1.0, 1e-6)
    alone.spend(0.0, 1e-7, mechanism="threshold")
    assert alone.spent() == compose(alone.ledger(), 1e-6)
    assert (alone.spent().epsilon, alone.spent().delta, alone.spent().method) == (0.0, 1e-7, "basic")
    accountant = Accountant(1.0, 1e-6)
    accountant.spend(rho=0.01, mechanism="counts")
    accountant.spend(0.0, 1e-7, mechanism="threshold")
    spent = accountant.spent()
    assert spent.method == "zcdp" and spent.delta == 1e-6
    assert spent.epsilon == pytest.approx(zcdp_epsilon(0.01, 1e-6 - 1e-7), rel=1e-9)
    assert Accountant.from_dict(json.loads(accountant.to_json())).spent() == spent
    with pytest.raises(ValueError, match=r"epsilon \(0\.0\) must be finite and > 0"):
        accountant.spend(0.0, mechanism="nothing")  # epsilon 0 only with a delta
    with pytest.raises(BudgetExceeded):
        Accountant(1.0).spend(0.0, 1e-9)  # no delta budget


def test_check_all_checks_charges_together_and_records_nothing():
    accountant = Accountant(1.0, 1e-6)
    rho = 0.5 * zcdp_rho_limit(1.0, 1e-6)
    accountant.check_all([Charge("a", rho=rho), Charge("a", 0.0, 1e-7)])
    accountant.check(rho=1.02 * rho)  # each fits alone, not both
    with pytest.raises(BudgetExceeded, match=r"spending rho=.*, rho=.* \(a\) would bring"):
        accountant.check_all([Charge("a", rho=rho), Charge("a", rho=1.02 * rho)])
    assert not accountant.ledger()


def test_pure_charges_beside_zcdp_ones_compose_by_basic_composition_when_that_is_tighter():
    """Pure charges can cost more as zCDP (epsilon^2 / 2 each, converted at delta) than
    their plain sum; beside a rho charge the total takes whichever is less, and the accountant
    accepts a ledger that fits only that way."""
    from synth.privacy.accounting import compose
    from synth.privacy.composition import zcdp_epsilon, zcdp_rho_limit

    pure = [Charge("discrete_laplace", 0.04) for _ in range(3)]  # 0.12 in all
    rho = zcdp_rho_limit(0.08, 1e-9) * (1 - 1e-5)
    charges = pure + [Charge("gaussian", None, 0.0, rho)]
    spent = compose(charges, 1e-9)
    assert spent.method == "basic + zcdp"
    assert spent.epsilon == pytest.approx(0.12 + zcdp_epsilon(rho, 1e-9), rel=1e-6) and spent.epsilon <= 0.2
    all_zcdp = zcdp_epsilon(3 * 0.04**2 / 2 + rho, 1e-9)
    assert all_zcdp > 0.2  # the route the accountant had before: this ledger would not fit
    accountant = Accountant(0.2, 1e-9)
    for charge in pure:
        accountant.spend(charge.epsilon, mechanism=charge.mechanism)
    accountant.spend(rho=rho, mechanism="gaussian")
    assert accountant.spent().epsilon <= 0.2
    with pytest.raises(BudgetExceeded):
        accountant.spend(0.001, mechanism="one more")
