"""Per-column fidelity, ML utility and per-column histograms of ``synth evaluate --synthetic``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from scipy.stats import ks_2samp, wasserstein_distance

from synth.data.schema import Categorical, Coded, Numeric, Schema
from synth.data.workload import Workload
from synth.report.columns import column_fidelity, column_histograms, fidelity_text, read_table

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

SCHEMA = Schema((
    Categorical("colour", ("red", "green", "blue", "other"), missing=True, other="other"),
    Numeric("age", (0, 20, 40, 60, 100), missing=True),
    Coded("visits", 3),
), missing_tokens=("?",), ignored=("id",))

REAL = """id,colour,age,visits
1,red,10,0
2,red,35.5,1
3,green,,2
4,blue,50,0
5,,80,1
6,purple,?,2
7,red,22,0
8,green,61,1
"""
SYNTHETIC = """id,colour,age,visits
1,red,12,0
2,green,30,0
3,green,45,2
4,blue,,0
5,blue,90,1
6,red,5,1
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_fidelity_matches_a_hand_computation(tmp_path):
    real = read_table(_write(tmp_path, "real.csv", REAL), SCHEMA)
    synthetic = read_table(_write(tmp_path, "syn.csv", SYNTHETIC), SCHEMA)
    got = column_fidelity(real, synthetic)
    assert list(got) == ["colour", "age", "visits"]

    # colour: red, green, blue, other (purple reads as "other"), missing
    p = np.array([3, 2, 1, 1, 1]) / 8
    q = np.array([2, 2, 2, 0, 0]) / 6
    assert got["colour"] == pytest.approx({"kind": "categorical", "tv": 0.5 * np.abs(p - q).sum(),
                                           "missing_real": 1 / 8, "missing_synthetic": 0.0})
    assert got["colour"]["tv"] == pytest.approx(0.5 * (abs(3 / 8 - 2 / 6) + 0 + abs(1 / 8 - 2 / 6) + 1 / 8 + 1 / 8)
                                                 + 0.5 * abs(2 / 8 - 2 / 6))
    # age: the raw values, not the bins; missing ("" and "?") left out of W1 and KS
    a = np.array([10, 35.5, 50, 80, 22, 61])
    b = np.array([12, 30, 45, 90, 5])
    assert got["age"]["kind"] == "numeric"
    assert got["age"]["w1_over_range"] == pytest.approx(wasserstein_distance(a, b) / 100)
    assert got["age"]["ks"] == pytest.approx(ks_2samp(a, b).statistic)
    assert got["age"]["missing_real"] == pytest.approx(2 / 8)
    assert got["age"]["missing_synthetic"] == pytest.approx(1 / 6)
    # visits (coded)
    p, q = np.bincount([0, 1, 2, 0, 1, 2, 0, 1]) / 8, np.bincount([0, 0, 2, 0, 1, 1]) / 6
    assert got["visits"] == pytest.approx({"kind": "coded", "tv": 0.5 * np.abs(p - q).sum(), "missing_real": 0.0,
                                           "missing_synthetic": 0.0})
    line = fidelity_text(got)
    assert "mean TV over 2 categorical columns" in line and "W1/range age" in line


def test_w1_reads_values_not_bins(tmp_path):
    """Values in the same bins but far apart: W1 sees the distance (bin codes would not)."""
    schema = Schema((Numeric("x", (0, 100)),))
    real = read_table(_write(tmp_path, "r.csv", "x\n1\n2\n3\n"), schema)
    synthetic = read_table(_write(tmp_path, "s.csv", "x\n91\n92\n93\n"), schema)
    got = column_fidelity(real, synthetic)["x"]
    assert got["w1_over_range"] == pytest.approx(0.9)
    assert got["ks"] == pytest.approx(1.0)
    same = column_fidelity(real, real)["x"]
    assert same["w1_over_range"] == 0 and same["ks"] == 0


def test_histograms_are_shares_per_code(tmp_path):
    real = read_table(_write(tmp_path, "real.csv", REAL), SCHEMA)
    synthetic = read_table(_write(tmp_path, "syn.csv", SYNTHETIC), SCHEMA)
    colour, age, visits = column_histograms(real, synthetic)
    assert colour.labels == ("red", "green", "blue", "other", "missing")
    assert colour.real == pytest.approx(np.array([3, 2, 1, 1, 1]) / 8)
    assert age.labels[0] == "[0, 20)" and age.labels[-1] == "missing"
    assert age.real == pytest.approx(np.array([1, 2, 1, 2, 2]) / 8)  # 10 | 35.5, 22 | 50 | 80, 61 | "", ?
    assert visits.synthetic == pytest.approx(np.array([3, 2, 1]) / 6)


# -- machine-learning utility ---------------------------------------------------------------

LEARN = Schema((Categorical("shape", ("a", "b", "c")), Numeric("size", (0, 50, 100), missing=True),
                Coded("noise", 4), Categorical("label", ("no", "yes"))))


def _learnable(rows: int, seed: int) -> pd.DataFrame:
    """``label`` is "yes" when shape is "a" and size > 50, or shape is "c" and size <= 50."""
    rng = np.random.default_rng(seed)
    shape = rng.choice(np.array(["a", "b", "c"]), rows)
    size = rng.uniform(0, 100, rows).round(1)
    label = np.where(((shape == "a") & (size > 50)) | ((shape == "c") & (size <= 50)), "yes", "no")
    frame = pd.DataFrame({"shape": shape, "size": size, "noise": rng.integers(0, 4, rows), "label": label})
    frame.loc[rng.random(rows) < 0.05, "size"] = np.nan  # some missing sizes
    return frame


def _tables(tmp_path, rows=2000):
    from synth.report.utility import split

    real_path = tmp_path / "real.csv"
    _learnable(rows, 1).to_csv(real_path, index=False)
    real = read_table(real_path, LEARN)
    train, test = split(real.n_rows)
    return real, real.take(train), real.take(test)


def test_ml_utility_real_beats_shuffled_synthetic(tmp_path):
    pytest.importorskip("sklearn")
    from synth.report.utility import ml_utility, utility_text

    real, train, test = _tables(tmp_path)
    assert train.n_rows == 1400 and test.n_rows == 600
    shuffled = train.take(np.arange(train.n_rows))
    rng = np.random.default_rng(2)
    label = list(LEARN.names).index("label")
    shuffled.codes = shuffled.codes.copy()
    shuffled.codes[:, label] = rng.permutation(shuffled.codes[:, label])  # the label no longer depends on anything
    utility = ml_utility(train, test, shuffled, "label", split_note="a 30% split")
    assert set(utility["models"]) == {"gradient_boosting", "logistic_regression"}
    gbm = utility["models"]["gradient_boosting"]
    assert gbm["train_real"]["accuracy"] > 0.9 and gbm["train_real"]["roc_auc"] > 0.95
    assert gbm["train_synthetic"]["accuracy"] < gbm["train_real"]["accuracy"] - 0.2
    assert gbm["train_synthetic"]["roc_auc"] < 0.7
    logistic = utility["models"]["logistic_regression"]
    assert logistic["train_synthetic"]["roc_auc"] < logistic["train_real"]["roc_auc"]
    assert utility["rows"] == {"train_synthetic": 1400, "train_real": 1400, "test_real": 600}
    assert "ML utility, predicting label" in utility_text(utility)


def test_ml_utility_multiclass_and_one_class_training(tmp_path):
    pytest.importorskip("sklearn")
    from synth.report.utility import ml_utility

    real, train, test = _tables(tmp_path, rows=600)
    utility = ml_utility(train, test, train, "shape", split_note="split")  # three classes: macro one-vs-rest
    for entry in utility["models"].values():
        assert 0 <= entry["train_real"]["roc_auc"] <= 1
    one = train.take(train.codes[:, list(LEARN.names).index("label")] == 0)  # synthetic with one label only
    utility = ml_utility(train, test, one, "label", split_note="split")
    for entry in utility["models"].values():
        assert entry["train_synthetic"]["roc_auc"] == 0.5


def test_without_sklearn_target_fails_in_one_line(tmp_path, monkeypatch):
    for name in [m for m in sys.modules if m == "sklearn" or m.startswith("sklearn.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "sklearn", None)  # import sklearn now raises ImportError
    paths = _cli_files(tmp_path, rows=50)
    result = _run(*paths, "--target", "label")
    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1] == (
        "Error: --target needs scikit-learn, an optional extra: pip install 'synth[eval]'")
    assert not (tmp_path / "report").exists()


# -- the command ----------------------------------------------------------------------------


def _cli_files(tmp_path, rows=2000):
    schema_path = tmp_path / "schema.json"
    LEARN.save(schema_path)
    Workload.marginals(LEARN, 1).save(tmp_path / "w.json")
    real, synthetic = tmp_path / "real.csv", tmp_path / "syn.csv"
    _learnable(rows, 1).to_csv(real, index=False)
    _learnable(rows // 2, 5).to_csv(synthetic, index=False)
    return real, schema_path, tmp_path / "w.json", synthetic


def _run(real, schema_path, workload, synthetic, *extra):
    args = ["evaluate", real, "--schema", schema_path, "--workload", workload, "--synthetic", synthetic,
            "-o", Path(real).parent / "report", *extra]
    from synth_cli.main import main as cli

    return CliRunner().invoke(cli, [str(a) for a in args], prog_name="synth")


def test_report_has_columns_utility_and_histograms(tmp_path):
    pytest.importorskip("sklearn")
    result = _run(*_cli_files(tmp_path), "--target", "label", "--quiet")
    assert result.exit_code == 0, result.output
    folder = tmp_path / "report"
    summary = json.loads((folder / "summary.json").read_text())
    fidelity = summary["column_fidelity"]
    assert fidelity["privacy"].startswith("NON-PRIVATE")
    assert set(fidelity["size"]) == {"kind", "w1_over_range", "ks", "missing_real", "missing_synthetic"}
    assert set(fidelity["shape"]) == {"kind", "tv", "missing_real", "missing_synthetic"}
    assert fidelity["size"]["w1_over_range"] < 0.05  # two draws of one distribution
    utility = summary["ml_utility"]
    assert utility["privacy"].startswith("NON-PRIVATE") and "30% split" in utility["test"]
    assert utility["models"]["gradient_boosting"]["train_synthetic"]["accuracy"] > 0.85  # same process: learnable
    assert "column_histograms.png" in summary["files"]
    assert (folder / "column_histograms.png").read_bytes()[:8] == PNG_MAGIC
    page = (folder / "index.html").read_text()
    assert 'src="column_histograms.png"' in page
    assert "Columns: real against synthetic (NON-PRIVATE)" in page
    assert "Machine-learning utility: predicting label (NON-PRIVATE)" in page
    assert "column fidelity: mean TV over 3 categorical columns" in result.output
    assert "ML utility, predicting label" in result.output and "split" in result.output


def test_held_out_test_table_and_option_checks(tmp_path):
    pytest.importorskip("sklearn")
    paths = _cli_files(tmp_path, rows=400)
    held_out = tmp_path / "test.csv"
    _learnable(200, 9).to_csv(held_out, index=False)
    result = _run(*paths, "--target", "label", "--test", held_out, "--quiet")
    assert result.exit_code == 0, result.output
    utility = json.loads((tmp_path / "report" / "summary.json").read_text())["ml_utility"]
    assert utility["rows"] == {"train_synthetic": 200, "train_real": 400, "test_real": 200}
    assert str(held_out) in utility["test"]
    assert "--target ('nope') must be one of" in _run(*paths, "--target", "nope").output
    assert "pass --target too" in _run(*paths, "--test", held_out).output


def test_report_without_target_has_columns_but_no_utility(tmp_path):
    result = _run(*_cli_files(tmp_path, rows=300), "--quiet")
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert "column_fidelity" in summary and "ml_utility" not in summary
    assert summary["columns"] == list(LEARN.names)  # the list of names, as before


def test_imports_stay_free_of_sklearn():
    import subprocess

    code = ("import sys, synth_cli.evaluate_cmd, synth.report.evaluate, synth.report.html, synth.report.columns, "
            "synth.report.utility; "
            "print(sorted(m for m in ('matplotlib', 'numba', 'sklearn') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[1], capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_evaluate_runs_on_the_default_workload_without_a_file(tmp_path):
    """No --workload: every 3-way marginal of the evaluated columns, said on stderr."""
    import synth
    from click.testing import CliRunner

    from synth_cli.main import main

    demo = synth.bundled("demo")
    result = CliRunner().invoke(main, ["evaluate", str(demo.data), "--schema", str(demo.schema), "--columns",
                                       "sex,region,smoker", "--synthetic", str(demo.data), "-o", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    assert "workload: every 3-way marginal of the 3 columns (1 marginals" in result.stderr
    assert "mean L1 per marginal 0 over 1 of 1 marginals" in result.stderr  # the table against itself
