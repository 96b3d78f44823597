import math

import numpy as np
import pytest

from synth.engines.mwem import DEFAULT_FINAL_PASSES, DEFAULT_SELECT_SHARE, FIT_TOLERANCE, expected_noise, mwem
from synth.data.schema import Coded, Schema
from synth.data.tables import marginal, marginal_from_dense
from synth.data.workload import Workload

from .test_pmw import SCHEMA, WORKLOAD, correlated_codes


def l1_error(distribution, codes, workload=WORKLOAD, schema=SCHEMA):
    """Mean L1 distance per marginal between the data's normalized tables and the model's."""
    n = codes.shape[0]
    return np.mean([np.abs(marginal(codes, schema, s) / n - marginal_from_dense(distribution, schema, s)).sum()
                    for s in workload.subsets])


def test_mwem_beats_the_uniform_baseline_on_a_correlated_workload():
    codes = correlated_codes(20_000, 1)
    uniform = np.full(SCHEMA.universe_size, 1 / SCHEMA.universe_size)
    errors = [l1_error(mwem(codes, SCHEMA, WORKLOAD, 1.0, rounds=6, rows=20_000, rng=seed).distribution, codes)
              for seed in range(5)]
    assert np.median(errors) < 0.5 * l1_error(uniform, codes)


@pytest.mark.parametrize("measure, output", [("marginal", "last"), ("query", "last"), ("marginal", "average")])
def test_budget_is_spent_exactly_and_never_more(measure, output):
    codes = correlated_codes(5_000, 2)
    result = mwem(codes, SCHEMA, WORKLOAD, 0.7, rounds=4, measure=measure, output=output, rows=5_000, rng=3)
    spent = result.accountant.spent()
    assert spent.epsilon <= 0.7 and spent.epsilon == pytest.approx(0.7, rel=1e-12)
    assert len(result.accountant.ledger()) == 2 * 4
    assert result.distribution.sum() == pytest.approx(1.0) and (result.distribution >= 0).all()
    assert len(result.measurements) == 4


def test_marginals_are_measured_once_each_and_rounds_are_capped():
    codes = correlated_codes(5_000, 3)
    result = mwem(codes, SCHEMA, WORKLOAD, 1.0, rounds=50, rows=5_000, rng=4)
    measured = [tuple(m["marginal"]) for m in result.measurements]
    assert len(measured) == len(set(measured)) == len(WORKLOAD.subsets)


def test_noisy_count_when_n_is_not_public():
    codes = correlated_codes(5_000, 5)
    result = mwem(codes, SCHEMA, WORKLOAD, 1.0, rounds=3, rng=6)
    assert not result.rows_public and result.accountant.ledger()[0].note == "noisy row count"
    assert result.accountant.spent().epsilon <= 1.0


def test_seeded_runs_repeat_and_unseeded_differ():
    codes = correlated_codes(5_000, 7)
    first = mwem(codes, SCHEMA, WORKLOAD, 1.0, rounds=3, rows=5_000, rng=8).distribution
    np.testing.assert_array_equal(first, mwem(codes, SCHEMA, WORKLOAD, 1.0, rounds=3, rows=5_000, rng=8).distribution)
    assert not np.array_equal(first, mwem(codes, SCHEMA, WORKLOAD, 1.0, rounds=3, rows=5_000, rng=None).distribution)


@pytest.mark.parametrize("kwargs, message", [
    ({"measure": "cells"}, "measure"), ({"output": "median"}, "output"), ({"rounds": 0}, "rounds"),
    ({"select_share": 1.0}, "select_share"),
])
def test_bad_parameters(kwargs, message):
    with pytest.raises(ValueError, match=message):
        mwem(correlated_codes(100, 9), SCHEMA, WORKLOAD, 1.0, rows=100, **kwargs)


def test_model_round_trip(tmp_path):
    from synth.models.model import Model

    codes = correlated_codes(5_000, 10)
    result = mwem(codes, SCHEMA, WORKLOAD, 1.0, rounds=3, rows=5_000, rng=11)
    result.to_model(SCHEMA, seeded=True).save(tmp_path / "m.npz")
    model = Model.load(tmp_path / "m.npz")
    assert model.mechanism == "mwem" and model.seeded
    np.testing.assert_allclose(model.answer(WORKLOAD), 5_000 * WORKLOAD.answer(
        lambda s: marginal_from_dense(result.distribution, SCHEMA, s)))


@pytest.mark.parametrize("epsilon, rounds", [(1.0, 3), (0.3, 5), (0.7, 4), (2.9, 6)])
def test_every_round_fits_after_the_row_count_purchase(epsilon, rounds):
    """The count, selection and measurement budgets must add up to at most epsilon exactly,
    or the accountant would refuse the last round."""
    result = mwem(correlated_codes(2_000, 12), SCHEMA, WORKLOAD, epsilon, rounds=rounds, select_share=0.5, rng=13)
    assert len(result.accountant.ledger()) == 1 + 2 * rounds
    assert result.accountant.spent().epsilon <= epsilon


def test_measuring_every_candidate_skips_selection():
    """When the rounds cover every marginal, selection could only reorder them: by default the
    whole budget measures, in workload order; an explicit select_share still selects."""
    codes = correlated_codes(5_000, 14)
    result = mwem(codes, SCHEMA, WORKLOAD, 1.0, rounds=50, rows=5_000, rng=15)
    notes = [charge.note for charge in result.accountant.ledger()]
    assert len(notes) == len(WORKLOAD.subsets) and not any("select" in note for note in notes)
    assert [tuple(m["marginal"]) for m in result.measurements] == WORKLOAD.subsets
    assert result.accountant.spent().epsilon == pytest.approx(1.0, rel=1e-12)
    assert result.parameters["epsilon_select"] == 0
    chosen = mwem(codes, SCHEMA, WORKLOAD, 1.0, rounds=50, select_share=0.2, rows=5_000, rng=15)
    assert sum("select" in c.note for c in chosen.accountant.ledger()) == len(WORKLOAD.subsets)
    fewer = mwem(codes, SCHEMA, WORKLOAD, 1.0, rounds=3, rows=5_000, rng=15)
    assert fewer.parameters["select_share"] == DEFAULT_SELECT_SHARE


def test_expected_noise_matches_the_discrete_laplace():
    from synth.privacy.mechanisms import discrete_laplace

    draws = discrete_laplace(np.zeros(200_000, dtype=np.int64), 0.3, 1, np.random.default_rng(16))
    measured = [("marginal", ("a",), np.zeros(200_000))]
    assert expected_noise(measured, 0.3) == pytest.approx(np.abs(draws).sum(), rel=0.02)


def test_final_fit_stops_near_the_noise_level_and_helps():
    """The final fit runs until the residual reaches the expected noise (not to zero, which
    would fit the noise), and it lowers the error against the unfitted estimate."""
    codes = correlated_codes(20_000, 17)
    fitted = [mwem(codes, SCHEMA, WORKLOAD, 1.0, rows=20_000, rng=seed) for seed in range(5)]
    unfitted = [mwem(codes, SCHEMA, WORKLOAD, 1.0, rows=20_000, rng=seed, final_passes=0) for seed in range(5)]
    assert np.median([l1_error(r.distribution, codes) for r in fitted]) < \
        np.median([l1_error(r.distribution, codes) for r in unfitted])
    for result in fitted:
        noise = result.parameters["epsilon_measure"]
        residual = sum(np.abs(np.asarray(m["noisy"]) - 20_000 * marginal_from_dense(result.distribution, SCHEMA, tuple(m["marginal"]))).sum()
                       for m in result.measurements)
        expected = expected_noise([(None, None, np.asarray(m["noisy"])) for m in result.measurements], noise)
        assert result.parameters["fit_target_residual"] == pytest.approx(FIT_TOLERANCE * expected)
        passes, stop = result.parameters["final_passes_run"], result.parameters["final_fit_stop"]
        assert 1 <= passes <= DEFAULT_FINAL_PASSES
        assert stop in ("noise level", "converged")
        if stop == "noise level":  # the residual is measured after each pass
            assert residual <= FIT_TOLERANCE * expected * (1 + 1e-9)
        else:  # the fit can get no closer: the residual stays above the target
            assert residual > FIT_TOLERANCE * expected
    assert "noise level" in {r.parameters["final_fit_stop"] for r in fitted}


@pytest.mark.parametrize("output, rounds_seen", [("last", 4), ("average", 3)])
def test_progress_reaches_the_end(output, rounds_seen):
    """One call per round (then per 10 fitting passes and one at the end of the final fit);
    fractions only grow and end at 1."""
    seen = []
    mwem(correlated_codes(2_000, 18), SCHEMA, WORKLOAD, 1.0, rounds=3, rows=2_000, rng=19, output=output,
         progress=lambda done, fraction: seen.append((done, fraction)))
    assert len({done for done, _ in seen}) == rounds_seen and seen[-1][1] == pytest.approx(1.0)
    assert [f for _, f in seen] == sorted(f for _, f in seen) and all(0 < f <= 1 for _, f in seen)


# -- zCDP (delta > 0): discrete Gaussian measurements, the selection charged eps^2 / 8 ------------


def test_zcdp_plan_spends_the_budget_and_converts_back():
    from synth.privacy.composition import zcdp_rho_limit
    from synth.engines.mwem_budget import plan_rounds

    for epsilon, delta, count, rho_count, rounds, share in [(1.0, 1e-9, 0.05, 0.0, 35, 0.1),
                                                            (0.3, 1e-6, 0.0, 0.0, 10, 0.2),
                                                            (3.0, 1e-9, 0.0, 0.01, 50, 0.0)]:
        budget = plan_rounds(epsilon, delta, count, rounds, share, select=share > 0, rho_count=rho_count)
        assert budget.composition == "zCDP" and budget.noise == "discrete Gaussian"
        assert budget.epsilon_select == pytest.approx(math.sqrt(8 * budget.rho_select))
        rho = rounds * (budget.rho_select + budget.rho_measure) + count**2 / 2 + rho_count
        assert rho <= zcdp_rho_limit(epsilon, delta) and rho >= (1 - 1e-4) * zcdp_rho_limit(epsilon, delta)
        assert budget.rho_select == pytest.approx(share * (budget.rho_select + budget.rho_measure))


def test_mwem_with_delta_measures_with_gaussian_noise_within_the_budget():
    schema = Schema((Coded("a", 3), Coded("b", 4), Coded("c", 2)))
    rng = np.random.default_rng(8)
    codes = np.column_stack([rng.integers(0, k, 4000) for k in (3, 4, 2)])
    codes[:, 1] = np.where(rng.random(4000) < 0.7, codes[:, 0], codes[:, 1])
    workload = Workload.marginals(schema, 2)
    # selects 2 of 3 pairs + 1-ways; so few measurements would run pure epsilon unless told (``plan_noise``)
    result = mwem(codes, schema, workload, 1.0, delta=1e-6, noise="gaussian", rng=2, rounds=2)
    p = result.parameters
    assert p["composition"] == "zCDP" and p["noise"] == "discrete Gaussian" and p["rho_measure"] > 0
    ledger = result.accountant.ledger()
    kinds = [charge.mechanism for charge in ledger]
    assert kinds[0] == "discrete_gaussian" and ledger[0].note == "noisy row count"  # a Gaussian count
    from synth.privacy.composition import zcdp_rho_limit

    assert ledger[0].rho == pytest.approx(0.05 * zcdp_rho_limit(1.0, 1e-6)) == p["rho_count"]
    assert kinds[1:] == ["exponential (bounded range, eps^2/8-zCDP)", "discrete_gaussian"] * 2
    assert all(c.rho == pytest.approx(p["rho_select"]) for c in ledger[1::2])
    spent = result.accountant.spent()
    assert spent.method == "zcdp" and spent.epsilon <= 1.0 and spent.delta <= 1e-6 and spent.epsilon > 0.99
    pure = mwem(codes, schema, workload, 1.0, rng=2, rounds=2)
    assert pure.parameters["composition"] == "basic" and pure.parameters["noise"] == "discrete Laplace"


def test_default_rounds_grow_under_zcdp_where_gaussian_noise_costs_less():
    from synth.engines.mwem import DEFAULT_ROUNDS, ZCDP_MAX_ROUNDS, ZCDP_ROUNDS_PER_COLUMN, default_rounds

    def pairs(columns: int) -> Workload:
        return Workload.marginals(Schema(tuple(Coded(f"c{i}", 2) for i in range(columns))), 2)

    for columns in (11, 12, 14, 20):
        workload = pairs(columns)
        candidates = len(workload.subsets)
        assert default_rounds(workload, candidates) == min(DEFAULT_ROUNDS, 2 * columns)
        zcdp = default_rounds(workload, candidates, zcdp=True)
        assert zcdp == min(ZCDP_MAX_ROUNDS, ZCDP_ROUNDS_PER_COLUMN * columns) > default_rounds(workload, candidates)
    small = pairs(10)  # 45 pairs: every one measured, whatever the accounting
    assert default_rounds(small, 45) == default_rounds(small, 45, zcdp=True) == 45
    assert default_rounds(pairs(14), 91, measure="query", zcdp=True) == DEFAULT_ROUNDS


def test_mwem_with_delta_runs_the_zcdp_default_rounds():
    schema = Schema(tuple(Coded(f"c{i}", 2) for i in range(12)))  # 66 pairs: more than DEFAULT_ROUNDS
    rng = np.random.default_rng(3)
    codes = rng.integers(0, 2, (2000, 12))
    workload = Workload.marginals(schema, 2)
    zcdp = mwem(codes, schema, workload, 1.0, delta=1e-9, rows=2000, rng=1, selection="classic", final_passes=0)
    pure = mwem(codes, schema, workload, 1.0, rows=2000, rng=1, selection="classic", final_passes=0)
    assert zcdp.parameters["rounds"] == 60 and pure.parameters["rounds"] == 24
