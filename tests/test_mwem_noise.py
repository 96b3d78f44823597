"""MWEM's noise under delta > 0 (``synth.engines.mwem_noise``, ``synth.engines.mwem.plan_noise``): pure epsilon
with discrete Laplace where it adds less noise (few measurements), zCDP with the discrete
Gaussian where it does not, and the run saying which and why (issue 26, item 6)."""

import math
import re

import numpy as np
import pytest
from click.testing import CliRunner

from synth_cli.main import main
from synth.privacy.mechanisms import mean_abs_noise
from synth.engines.mwem import mwem, plan_noise
from synth.engines.mwem_noise import choose_noise
from synth.data.schema import Coded, Schema
from synth.data.workload import Workload


def binary_schema(columns: int) -> Schema:
    return Schema(tuple(Coded(f"c{i}", 2) for i in range(columns)))


def correlated(rows: int, columns: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, 2, (rows, columns))
    codes[:, 1:] = np.where(rng.random((rows, columns - 1)) < 0.6, codes[:, :1], codes[:, 1:])
    return codes


def test_few_measurements_take_laplace_many_take_gaussian():
    for epsilon in (0.3, 1.0, 3.0):
        few = choose_noise("auto", epsilon, 1e-9, 10, 0.0, 0.05)
        many = choose_noise("auto", epsilon, 1e-9, 35, 0.0, 0.05)
        assert not few.zcdp and few.laplace < few.gaussian and "discrete Laplace, pure epsilon-DP" in few.reason
        assert many.zcdp and many.gaussian < many.laplace and "discrete Gaussian, rho-zCDP" in many.reason
    # the per-cell noise compared is each plan's own: Laplace at (eps - count) / T, Gaussian at (rho - count) / T
    from synth.privacy.composition import zcdp_rho_limit

    choice = choose_noise("auto", 1.0, 1e-9, 10, 0.0, 0.05)
    assert choice.laplace == pytest.approx(mean_abs_noise(0.95 / 10), rel=1e-9)
    assert choice.gaussian == pytest.approx(mean_abs_noise(0.0, 0.95 * zcdp_rho_limit(1.0, 1e-9) / 10), rel=1e-4)


def test_the_choice_changes_once_as_measurements_grow():
    """Laplace's noise grows like T, the Gaussian's like sqrt(T): one crossing, near 20 at
    delta = 1e-9 (fewer at a larger delta, whose rho is larger)."""
    for delta in (1e-9, 1e-6):
        picks = [choose_noise("auto", 1.0, delta, t, 0.1, None).zcdp for t in range(1, 80)]
        switch = picks.index(True)
        assert not any(picks[:switch]) and all(picks[switch:])
        assert (10 <= switch <= 30) if delta == 1e-9 else (5 <= switch <= 20)


def test_delta_zero_is_laplace_whatever_the_measurements():
    for t in (1, 10, 35, 100, 1000):
        choice = choose_noise("auto", 1.0, 0.0, t, 0.1, 0.05)
        assert not choice.zcdp and choice.reason == ""
    schema = binary_schema(7)
    assert not plan_noise(Workload.marginals(schema, 3), schema, 1.0, 0.0).zcdp


def test_forced_noise_is_kept_and_gaussian_needs_delta():
    assert choose_noise("gaussian", 1.0, 1e-9, 3, 0.0, 0.05).zcdp
    assert not choose_noise("laplace", 1.0, 1e-9, 300, 0.0, 0.05).zcdp
    with pytest.raises(ValueError, match="needs delta > 0"):
        choose_noise("gaussian", 1.0, 0.0, 3, 0.0, 0.05)
    with pytest.raises(ValueError, match="must be one of"):
        choose_noise("uniform", 1.0, 1e-9, 3, 0.0, 0.05)


def test_plan_noise_counts_the_plan_measurements():
    """The measurements compared are the pure plan's: every marginal when there are at most 50,
    a given --rounds, or the selecting plan's rounds (zCDP's own larger count is named)."""
    five, seven = binary_schema(5), binary_schema(7)
    assert plan_noise(Workload.marginals(five, 3), five, 1.0, 1e-9).measurements == 10
    assert not plan_noise(Workload.marginals(five, 3), five, 1.0, 1e-9).zcdp
    assert plan_noise(Workload.marginals(seven, 3), seven, 1.0, 1e-9).zcdp
    assert not plan_noise(Workload.marginals(seven, 3), seven, 1.0, 1e-9, rounds=5).zcdp
    wide = binary_schema(14)  # 91 pairs: the pure plan selects 28 rounds, the zCDP one 64
    choice = plan_noise(Workload.marginals(wide, 2), wide, 1.0, 1e-9)
    assert choice.zcdp and choice.measurements == 28 and "the zCDP plan then makes 64" in choice.reason


def test_a_delta_run_with_few_measurements_is_the_pure_run():
    """5 columns, all 10 triples, n not public: the delta = 1e-9 run is the pure epsilon run
    (the same noise, so the same release), spends (epsilon, 0) by basic composition and says why."""
    schema = binary_schema(5)
    workload = Workload.marginals(schema, 3)
    codes = correlated(3000, 5, 1)
    pure = mwem(codes, schema, workload, 1.0, rng=5)
    with_delta = mwem(codes, schema, workload, 1.0, delta=1e-9, rng=5)
    np.testing.assert_array_equal(with_delta.distribution, pure.distribution)
    assert with_delta.parameters["noise"] == "discrete Laplace" and with_delta.parameters["composition"] == "basic"
    assert all(charge.rho is None and charge.delta == 0 for charge in with_delta.accountant.ledger())
    spent = with_delta.accountant.spent()
    assert spent.epsilon <= 1.0 and spent.delta == 0 and spent.method == "basic"
    assert any(n.startswith("noise: discrete Laplace") and "expected |noise| per cell" in n for n in with_delta.notes)
    forced = mwem(codes, schema, workload, 1.0, delta=1e-9, noise="gaussian", rng=5)
    assert forced.parameters["noise"] == "discrete Gaussian" and not any(n.startswith("noise:") for n in forced.notes)


def test_a_delta_run_with_many_measurements_keeps_zcdp():
    schema = binary_schema(7)
    result = mwem(correlated(3000, 7, 2), schema, Workload.marginals(schema, 3), 1.0, delta=1e-9, rng=5,
                  final_passes=20)
    assert result.parameters["noise"] == "discrete Gaussian" and result.parameters["composition"] == "zCDP"
    assert any(n.startswith("noise: discrete Gaussian") for n in result.notes)
    spent = result.accountant.spent()
    assert spent.method == "zcdp" and spent.epsilon <= 1.0 and spent.delta <= 1e-9


def test_the_choice_reads_no_data():
    """Two tables of different sizes and contents, n not public: the same choice, the same reason."""
    schema = binary_schema(6)
    workload = Workload.marginals(schema, 3)  # 20 triples, near the change
    reasons = {mwem(correlated(rows, 6, seed), schema, workload, 1.0, delta=1e-9, rng=seed, final_passes=5).notes[0]
               for rows, seed in ((500, 1), (20_000, 2))}
    assert len(reasons) == 1 and next(iter(reasons)).startswith("noise: ")


@pytest.fixture
def files(tmp_path):
    schema = binary_schema(5)
    schema.save(tmp_path / "s.json")
    np.savetxt(tmp_path / "d.csv", correlated(3000, 5, 3), fmt="%d", delimiter=",",
               header=",".join(schema.names), comments="")
    Workload.marginals(schema, 3).save(tmp_path / "w.json")
    return tmp_path


def generate(files, *extra):
    return CliRunner().invoke(main, ["generate", str(files / "d.csv"), "--schema", str(files / "s.json"),
                                     "--workload", str(files / "w.json"), "--epsilon", "1", "-o",
                                     str(files / "out.csv"), "--force", "-q", *extra])


def test_generate_says_which_noise_and_why(files):
    result = generate(files, "--delta", "1e-9", "--seed", "1")
    assert result.exit_code == 0, result.output
    line = next(line for line in result.stderr.splitlines() if "noise: " in line)
    assert "noise: discrete Laplace, pure epsilon-DP" in line and "at 10 measurements" in line
    found = re.search(r"per cell ([\d.]+) against ([\d.]+) with the discrete Gaussian", line)
    laplace, gaussian = float(found.group(1)), float(found.group(2))
    assert laplace < gaussian and math.isfinite(gaussian)
    assert "with discrete Laplace noise (pure epsilon-DP)" in result.stderr
    assert "privacy spent epsilon=1, delta=0 of epsilon=1" in result.stderr
    forced = generate(files, "--delta", "1e-9", "--noise", "gaussian", "--seed", "1")
    assert forced.exit_code == 0, forced.output
    assert "with discrete Gaussian noise (rho-zCDP)" in forced.stderr and "noise: " not in forced.stderr


@pytest.mark.parametrize("extra, message", [
    (["--noise", "gaussian"], "--noise gaussian accounts in rho-zCDP: it needs --delta > 0"),
    (["--noise", "laplace", "--mechanism", "blr"], "--noise do(es) not apply to --mechanism blr"),
])
def test_generate_refuses_noise_that_does_not_apply(files, extra, message):
    result = generate(files, *extra)
    assert result.exit_code == 2 and message in result.output
