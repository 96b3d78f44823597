"""synth answer --mechanism pmw: plan, run, model and monitor files, and bad options."""

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from synth_cli.main import main
from synth.models.model import Model, ModelError
from synth.data.schema import Coded, Schema
from synth.data.workload import Workload

from .test_pmw import correlated_codes


@pytest.fixture
def files(tmp_path):
    schema = Schema((Coded("a", 2), Coded("b", 3), Coded("c", 4)))
    schema.save(tmp_path / "s.json")
    codes = correlated_codes(6000, 1)
    pd.DataFrame(codes, columns=list("abc")).to_csv(tmp_path / "d.csv", index=False)
    workload = Workload(schema, Workload.marginals(schema, 1).queries + Workload.marginals(schema, 2).queries)
    workload.save(tmp_path / "w.json")
    return tmp_path


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def pmw_args(files, *extra):
    return ["answer", files / "d.csv", "--schema", files / "s.json", "--workload", files / "w.json",
            "--mechanism", "pmw", "--variant", "theory", "--epsilon", "30", "--alpha", "0.15", "--passes", "2", *extra]


def test_plan_runs_without_data(files):
    result = run("answer", "--schema", files / "s.json", "--workload", files / "w.json", "--mechanism", "pmw",
                 "--variant", "theory", "--epsilon", "30", "--rows", "6000", "--plan")
    assert result.exit_code == 0, result.output
    assert "PMW plan (public: computed without reading the data)" in result.stdout
    assert "update bound L" in result.stdout


def test_practical_plan_runs_without_data(files):
    """The default variant's plan: L, the warm start (3-way workloads) and the threshold, without the data."""
    result = run("answer", "--schema", files / "s.json", "--workload", files / "w.json", "--mechanism", "pmw",
                 "--epsilon", "30", "--rows", "6000", "--plan")
    assert result.exit_code == 0, result.output
    assert "PMW plan, practical variant (public: computed without reading the data)" in result.stdout
    # a workload this small is measured whole before the first query: no epoch, no threshold
    assert "update bound          L=0 epochs" in result.stdout and "threshold T" not in result.stdout
    assert "every declared subset is measured before the first query" in result.stdout
    tested = run("answer", "--schema", files / "s.json", "--workload", files / "w.json", "--mechanism", "pmw",
                 "--epsilon", "30", "--rows", "6000", "--plan", "--updates", "3")
    assert tested.exit_code == 0, tested.output
    assert "update bound          L=3 epochs" in tested.stdout and "threshold T" in tested.stdout


def test_plan_needs_a_public_row_count(files):
    result = run("answer", "--schema", files / "s.json", "--workload", files / "w.json", "--mechanism", "pmw",
                 "--epsilon", "30", "--plan")
    assert result.exit_code != 0 and "--plan needs a public row count" in result.stderr


def test_seeded_runs_repeat_and_files_are_written(files):
    first = run(*pmw_args(files, "--rows", "6000", "--seed", "3", "-o", files / "a1.csv",
                          "--save-model", files / "m.npz", "--monitor", files / "kl.csv"))
    assert first.exit_code == 0, first.output
    assert "NOT for release" in first.stderr and "NON-PRIVATE diagnostic" in first.stderr
    second = run(*pmw_args(files, "--rows", "6000", "--seed", "3", "-o", files / "a2.csv"))
    assert second.exit_code == 0, second.output
    assert (files / "a1.csv").read_text() == (files / "a2.csv").read_text()
    answers = pd.read_csv(files / "a1.csv")
    assert list(answers.columns) == ["query_id", "name", "query", "answer", "error_bound", "round", "final_answer",
                                     "privacy"]
    assert (answers["error_bound"] > 0).all() and (answers["error_bound"] < 6000).any()
    assert set(answers["round"]) <= {"lazy", "update", "halted"} and (answers["round"] == "update").any()
    model = Model.load(files / "m.npz")
    assert model.mechanism == "pmw" and model.seeded and model.rows == 6000
    workload = Workload.load(files / "w.json", model.schema)
    np.testing.assert_allclose(model.answer(workload), answers["final_answer"], rtol=1e-5)
    assert model.privacy["spent"]["epsilon"] <= 30
    assert (files / "kl.csv").read_text().startswith("# NON-PRIVATE")
    monitor = pd.read_csv(files / "kl.csv", comment="#")
    assert len(monitor) >= 1 and monitor["update"].tolist() == list(range(1, len(monitor) + 1))
    assert monitor["phi_after"].iloc[-1] < monitor["phi_before"].iloc[0]


def test_unseeded_runs_differ(files):
    outputs = []
    for i in range(3):
        result = run(*pmw_args(files, "--rows", "6000", "-o", files / f"u{i}.csv"))
        assert result.exit_code == 0, result.output
        outputs.append((files / f"u{i}.csv").read_text())
    assert len(set(outputs)) > 1


def test_without_rows_a_noisy_count_is_bought_and_reported(files):
    result = run(*pmw_args(files, "--seed", "1", "-o", files / "a.csv", "--save-model", files / "m.npz"))
    assert result.exit_code == 0, result.output
    assert "bought a noisy row count" in result.stderr
    model = Model.load(files / "m.npz")
    assert not model.rows_public
    assert model.privacy["charges"][0]["note"] == "noisy row count"


@pytest.mark.parametrize("extra, message", [
    ((), "choose one"),
    (("--exact", "--mechanism", "pmw"), "choose one"),
    (("--mechanism", "pmw"), "needs --epsilon"),
    (("--mechanism", "pmw", "--epsilon", "0"), "epsilon (0.0) must be finite and > 0"),
    (("--mechanism", "pmw", "--epsilon", "1", "--delta", "1"), "delta (1.0) must be in [0, 1)"),
    (("--mechanism", "pmw", "--epsilon", "1", "--beta", "0"), "beta (0.0) must be in (0, 1)"),
    (("--mechanism", "pmw", "--variant", "theory", "--epsilon", "0.001", "--rows", "6000"),
     "is too small for n=6,000 rows"),
    (("--mechanism", "pmw", "--epsilon", "1", "--count-epsilon", "2"), "over the budget epsilon=1"),
])
def test_bad_pmw_options_fail_cleanly(files, extra, message):
    result = run("answer", files / "d.csv", "--schema", files / "s.json", "--workload", files / "w.json", *extra,
                 "-o", files / "x.csv")
    assert result.exit_code != 0
    assert "Traceback" not in result.output
    assert message in result.stderr
    assert not (files / "x.csv").exists()


def test_damaged_or_foreign_model_files_are_refused(tmp_path):
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(ModelError, match=r"not a synth model file \(not a \.npz archive\)"):
        Model.load(tmp_path / "bad.npz")
    np.savez(tmp_path / "other.npz", x=np.zeros(3))
    with pytest.raises(ModelError, match="not a synth model file"):
        Model.load(tmp_path / "other.npz")
    with pytest.raises(ModelError, match="no such file"):
        Model.load(tmp_path / "missing.npz")


def test_missing_model_folder_fails_before_anything_is_written(files):
    result = run(*pmw_args(files, "--rows", "6000", "-o", files / "a.csv", "--save-model", files / "nope" / "m.npz"))
    assert result.exit_code != 0 and "does not exist" in result.stderr
    assert not (files / "a.csv").exists()
