"""synth model show: what a released model holds and spent, for a dense, a factored, a PMW and
a BLR model; a damaged file is refused; schema show points a model file here."""

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from synth_cli.main import main
from synth.models.model import Model
from synth.data.schema import Categorical, Coded, Schema
from synth.data.workload import Workload


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("model-show")
    schema = Schema((Categorical("colour", ("red", "green")), Coded("a", 3), Coded("b", 2)))
    schema.save(folder / "s.json")
    rng = np.random.default_rng(3)
    pd.DataFrame({"colour": rng.choice(["red", "green"], 800), "a": rng.integers(0, 3, 800),
                  "b": rng.integers(0, 2, 800)}).to_csv(folder / "d.csv", index=False)
    Workload.marginals(schema, 2).save(folder / "w.json")
    return folder


@pytest.mark.parametrize("mechanism, extra, representation", [
    ("mwem", [], "dense"),
    ("mwem", ["--representation", "factored"], "factored"),
    ("pmw", [], "dense"),
    ("blr", ["--net", "sampled", "--prior", "uniform", "--candidates", "200", "--net-size", "20"], "dense"),
])
def test_show_says_what_a_model_spent_and_holds(files, mechanism, extra, representation):
    path = files / f"{mechanism}-{representation}.npz"
    made = run("generate", files / "d.csv", "--schema", files / "s.json", "--workload", files / "w.json",
               "--mechanism", mechanism, "--epsilon", "1", "-o", files / "out.csv", "--model", path, "--force", *extra)
    assert made.exit_code == 0, made.output
    model = Model.load(path)
    shown = run("model", "show", path)
    assert shown.exit_code == 0, shown.output
    assert f"mechanism:    {mechanism}" in shown.stdout
    assert f"spent:        epsilon={model.privacy['spent']['epsilon']:.6g}" in shown.stdout
    assert "noisy row count" in shown.stdout  # the ledger, charge by charge
    assert f"distribution: {representation}" in shown.stdout and "colour" in shown.stdout
    summary = json.loads(run("model", "show", path, "--json").stdout)
    assert summary["mechanism"] == mechanism and summary["storage"]["representation"] == representation
    assert summary["privacy"] == model.privacy and summary["rows"] == model.rows
    assert len(summary["checksum"]) == 64 and summary["format_version"] == 3
    assert [c["name"] for c in summary["columns"]] == ["colour", "a", "b"]


def test_a_damaged_model_is_refused_not_shown(files, tmp_path):
    path = tmp_path / "m.npz"
    made = run("generate", files / "d.csv", "--schema", files / "s.json", "--workload", files / "w.json",
               "--epsilon", "1", "-o", tmp_path / "o.csv", "--model", path)
    assert made.exit_code == 0, made.output
    archive = dict(np.load(path))
    archive["distribution"] = archive["distribution"][::-1].copy()  # same sum, other cells: checksum fails
    np.savez(tmp_path / "edited.npz", **archive)
    shown = run("model", "show", tmp_path / "edited.npz")
    assert shown.exit_code == 1 and "checksum" in shown.output and "Traceback" not in shown.output


def test_schema_show_on_a_model_file_points_to_model_show(files):
    run("generate", files / "d.csv", "--schema", files / "s.json", "--workload", files / "w.json", "--epsilon", "1",
        "-o", files / "o.csv", "--model", files / "m.npz", "--force")
    shown = run("schema", "show", files / "m.npz")
    assert shown.exit_code == 2 and "synth model show" in shown.output and "UTF-8" not in shown.output
