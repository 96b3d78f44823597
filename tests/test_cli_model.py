"""Releases as files: synth answer --model and synth sample read a model without the data."""

import re

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from synth_cli.main import main
from synth.data.reading import read
from synth.models.model import Model
from synth.data.schema import Schema
from synth.data.workload import Workload

from .test_cli_generate import files  # noqa: F401  (the fixture)


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture
def model_file(files):  # noqa: F811
    result = run("generate", files / "d.csv", "--schema", files / "s.json", "--workload", files / "w.json",
                 "--epsilon", "2", "--rows", "6000", "--seed", "4", "-o", files / "g.csv", "--model", files / "m.npz")
    assert result.exit_code == 0, result.output
    return files / "m.npz"


def test_answer_from_a_model_needs_no_data(model_file, tmp_path):
    model = Model.load(model_file)
    fresh = Workload.from_dict({"queries": [{"where": {"colour": "red"}}, {"where": {"c": [1, 2], "size": 15}},
                                            {"where": {}}]}, model.schema)
    fresh.save(tmp_path / "new.json")
    result = run("answer", "--model", model_file, "--workload", tmp_path / "new.json", "-o", tmp_path / "a.csv")
    assert result.exit_code == 0, result.output
    answers = pd.read_csv(tmp_path / "a.csv")
    assert list(answers.columns) == ["query_id", "name", "query", "answer", "privacy"]
    np.testing.assert_allclose(answers["answer"], model.answer(fresh), rtol=1e-5)
    assert answers["answer"][2] == pytest.approx(6000)
    assert answers["privacy"][0] == "post-processing of a mwem release (epsilon=2)"
    assert "no privacy spent" in result.stderr and "seeded run" in result.stderr


@pytest.mark.parametrize("extra, message", [
    (["DATA"], "--model answers without the data"),
    (["--schema", "SCHEMA"], "--model carries its own schema"),
    (["--exact"], "choose one"),
])
def test_answer_from_a_model_refuses_data_options(model_file, extra, message):
    files = model_file.parent
    extra = [files / "d.csv" if e == "DATA" else files / "s.json" if e == "SCHEMA" else e for e in extra]
    result = run("answer", *extra, "--model", model_file, "--workload", files / "w.json")
    assert result.exit_code != 0 and message in result.stderr and "Traceback" not in result.output


@pytest.mark.parametrize("damage", ["text", "truncated", "foreign", "version"])
def test_damaged_or_foreign_models_are_refused_clearly(model_file, damage):
    bad = model_file.parent / "bad.npz"
    if damage == "text":
        bad.write_text("not a model\n")
    elif damage == "truncated":
        bad.write_bytes(model_file.read_bytes()[:200])
    elif damage == "foreign":
        np.savez(bad, weights=np.ones(3))
    else:
        model = Model.load(model_file)
        header = model.header()
        header["format_version"] = 99
        import json

        np.savez(bad, distribution=model.distribution,
                 meta=np.frombuffer(json.dumps(header).encode(), dtype=np.uint8))
    for args in (["answer", "--model", bad, "--workload", model_file.parent / "w.json"],
                 ["sample", "--model", bad, "-o", model_file.parent / "x.csv"]):
        result = run(*args)
        assert result.exit_code != 0 and "Traceback" not in result.output
        assert str(bad) in result.stderr
        assert ("not a synth model file" in result.stderr or "version 99 is not supported" in result.stderr)
    assert not (model_file.parent / "x.csv").exists()


def test_sample_writes_rows_inside_the_schema(model_file):
    files = model_file.parent
    result = run("sample", "--model", model_file, "--rows", "2500", "--seed", "1", "-o", files / "s1.csv")
    assert result.exit_code == 0, result.output
    schema = Schema.load(files / "s.json")
    assert read(files / "s1.csv", schema).n_rows == 2500
    again = run("sample", "--model", model_file, "--rows", "2500", "--seed", "1", "-o", files / "s2.csv")
    assert again.exit_code == 0 and (files / "s1.csv").read_bytes() == (files / "s2.csv").read_bytes()
    midpoints = run("sample", "--model", model_file, "--numeric", "midpoint", "-o", files / "s3.csv")
    assert midpoints.exit_code == 0, midpoints.output
    table = pd.read_csv(files / "s3.csv")
    assert len(table) == 6000 and set(table["size"]) <= {5.0, 15.0, 35.0}


def test_sampled_histogram_follows_the_model(model_file):
    """Controlled rounding: every cell's count is the floor or ceiling of n times its probability."""
    files = model_file.parent
    assert run("sample", "--model", model_file, "-o", files / "s.csv").exit_code == 0
    model = Model.load(model_file)
    codes = read(files / "s.csv", model.schema).codes
    counts = np.bincount(model.schema.cell_index(codes), minlength=model.schema.universe_size)
    expected = 6000 * model.distribution
    assert np.all(np.abs(counts - expected) < 1)


@pytest.mark.parametrize("mechanism", ["mwem", "pmw", "blr"])
def test_models_hold_no_exact_row_count_or_true_answers(files, mechanism):  # noqa: F811
    """Without --rows the model scales to a noisy n; the exact n (6,000) and the true answers
    appear nowhere in its header, and no monitor data is stored."""
    import json

    extra = {"mwem": [], "pmw": ["--alpha", "0.2", "--delta", "1e-6"],
             "blr": ["--net", "sampled", "--candidates", "50", "--net-size", "10"]}[mechanism]
    result = run("generate", files / "d.csv", "--schema", files / "s.json", "--workload", files / "w.json",
                 "--mechanism", mechanism, "--epsilon", "2", "--seed", "11", *extra, "-o", files / "g.csv",
                 "--model", files / "m.npz")
    assert result.exit_code == 0, result.output
    model = Model.load(files / "m.npz")
    assert not model.rows_public and model.rows != 6000
    text = json.dumps(model.header())
    assert "6000" not in text.replace(" ", "") and "monitor" not in text.lower()
    codes = read(files / "d.csv", Schema.load(files / "s.json")).codes
    true = Workload.load(files / "w.json", model.schema).answer(
        lambda s: np.asarray(__import__("synth").marginal(codes, model.schema, s)))
    logged = set(re.findall(r"-?\d+", text))
    assert not {str(int(v)) for v in true if v > 50} <= logged  # the true counts are not all in the header
