"""synth generate: synthetic tables from MWEM, BLR and PMW, row-count rule, refusals."""

import itertools
import json
import re

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from synth_cli.main import main
from synth.data.reading import read
from synth.models.model import Model
from synth.data.schema import Categorical, Coded, Numeric, Schema
from synth.data.workload import Workload

from .test_pmw import correlated_codes


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture
def files(tmp_path):
    """A correlated 3-column table of 6,000 rows with labels, numeric bins and codes."""
    schema = Schema((Categorical("colour", ("red", "green")), Numeric("size", (0, 10, 20, 50)), Coded("c", 4)))
    schema.save(tmp_path / "s.json")
    codes = correlated_codes(6000, 1)
    frame = pd.DataFrame({"colour": np.array(["red", "green"])[codes[:, 0]],
                          "size": np.array([5.0, 15.0, 30.0])[codes[:, 1]], "c": codes[:, 2]})
    frame.to_csv(tmp_path / "d.csv", index=False)
    Workload.marginals(schema, 2).save(tmp_path / "w.json")
    return tmp_path


def generate(files, *extra):
    return run("generate", files / "d.csv", "--schema", files / "s.json", "--workload", files / "w.json", *extra)


def test_mwem_writes_a_valid_table_and_model(files):
    result = generate(files, "--epsilon", "2", "--rows", "6000", "-o", files / "out.csv", "--model", files / "m.npz")
    assert result.exit_code == 0, result.output
    schema = Schema.load(files / "s.json")
    table = pd.read_csv(files / "out.csv")
    assert list(table.columns) == ["colour", "size", "c"] and len(table) == 6000
    assert set(table["colour"]) <= {"red", "green"} and table["c"].between(0, 3).all()
    assert table["size"].between(0, 50).all()
    encoded = read(files / "out.csv", schema)  # every value is inside the schema
    assert encoded.n_rows == 6000
    model = Model.load(files / "m.npz")
    assert model.mechanism == "mwem" and model.rows_public and model.rows == 6000
    assert model.privacy["spent"]["epsilon"] == pytest.approx(2.0)
    assert "privacy spent epsilon=2" in result.stderr and "(public)" in result.stderr


def test_synthetic_table_tracks_the_data(files):
    """The synthetic 2-way marginals are much closer to the data's than uniform ones are."""
    assert generate(files, "--epsilon", "5", "--rows", "6000", "--seed", "1", "-o", files / "out.csv").exit_code == 0
    schema = Schema.load(files / "s.json")
    true = read(files / "d.csv", schema).codes
    synthetic = read(files / "out.csv", schema).codes
    errors, uniform = [], []
    for pair in itertools.combinations(range(3), 2):
        shape = [schema.shape[i] for i in pair]

        def table(codes, pair=pair, shape=shape):
            counts = np.bincount(np.ravel_multi_index(codes[:, pair].T, shape), minlength=np.prod(shape))
            return counts / counts.sum()

        errors.append(np.abs(table(true) - table(synthetic)).sum())
        uniform.append(np.abs(table(true) - 1 / np.prod(shape)).sum())
    assert np.mean(errors) < 0.25 * np.mean(uniform)


def test_seeded_runs_repeat_exactly(files):
    for name in ("a.csv", "b.csv"):
        result = generate(files, "--epsilon", "1", "--seed", "7", "-o", files / name)
        assert result.exit_code == 0, result.output
        assert "NOT for release" in result.stderr
    assert (files / "a.csv").read_bytes() == (files / "b.csv").read_bytes()
    generate(files, "--epsilon", "1", "-o", files / "c.csv")
    generate(files, "--epsilon", "1", "-o", files / "d2.csv")
    assert (files / "c.csv").read_bytes() != (files / "d2.csv").read_bytes()


def test_row_count_is_bought_when_not_public(files):
    result = generate(files, "--epsilon", "1", "--count-epsilon", "0.2", "-o", files / "out.csv",
                      "--model", files / "m.npz")
    assert result.exit_code == 0, result.output
    model = Model.load(files / "m.npz")
    assert not model.rows_public
    assert "noisy count, bought from the budget" in result.stderr
    notes = [c["note"] for c in model.privacy["charges"]]
    assert "noisy row count" in notes
    assert len(pd.read_csv(files / "out.csv")) == round(model.rows)


@pytest.fixture
def small(tmp_path):
    """300 rows of two coded columns."""
    schema = Schema((Coded("a", 3), Coded("b", 4)))
    schema.save(tmp_path / "s.json")
    rng = np.random.default_rng(0)
    pd.DataFrame({"a": rng.integers(0, 3, 300), "b": rng.integers(0, 4, 300)}).to_csv(tmp_path / "d.csv", index=False)
    Workload.marginals(schema, 1).save(tmp_path / "w.json")
    return tmp_path


def test_a_large_table_size_that_is_mostly_noise_is_refused_in_one_line(small):
    """--epsilon 1e-6 buys n with epsilon 5e-8: noise of standard deviation 2.8e7 (seed 1 drew
    9.8 million rows); a default table of that size is refused, nothing written."""
    result = generate(small, "--epsilon", "1e-6", "--seed", "1", "-q", "-o", small / "out.csv", "--model",
                      small / "m.npz")
    assert result.exit_code == 1 and "Traceback" not in result.output
    last = result.stderr.strip().splitlines()[-1]
    assert re.fullmatch(r"Error: the synthetic table would have [\d,]+ rows: n, a noisy count with noise of standard "
                        r"deviation 28,284,271 \(\d+% of it, more than 10%\); pass --sample-rows N to choose the "
                        r"table's size, or give n with --rows if it is public, or spend more on the count "
                        r"\(--count-epsilon, or a larger --epsilon\)", last), last
    assert not (small / "out.csv").exists() and not (small / "m.npz").exists()


@pytest.mark.parametrize("extra, warned", [(("--epsilon", "1e-6", "--sample-rows", "300"), True),
                                           (("--epsilon", "0.2", "--count-epsilon", "0.02"), True),
                                           (("--epsilon", "1e-6", "--rows", "300"), False),
                                           (("--epsilon", "1", "--count-epsilon", "0.5"), False)])
def test_a_noisy_count_far_from_exact_is_warned_about(small, extra, warned):
    """Warned when the count's noise (standard deviation, from its epsilon: public) passes 10% of
    the noisy count (released): never from the true n."""
    result = generate(small, *extra, "--seed", "1", "-q", "-o", small / "out.csv")
    assert result.exit_code == 0, result.output
    said = [line for line in result.stderr.splitlines() if "has noise of standard deviation" in line]
    assert len(said) == int(warned)
    if warned:
        assert said[0].startswith("WARNING: the noisy row count n=") and "of it, more than 10%)" in said[0]
        assert "give n with --rows if it is public" in said[0]


def test_a_table_without_rows_is_refused_in_one_labelled_line(small):
    """"no data rows" tells that n = 0: the line itself says it is NON-PRIVATE."""
    (small / "d.csv").write_text("a,b\n")
    result = generate(small, "--epsilon", "1", "-q", "-o", small / "out.csv")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.stderr.strip().splitlines() == [
        f"Error: {small / 'd.csv'}: has a header but no data rows (NON-PRIVATE: this message tells that the private "
        "data has no rows)"]
    assert not (small / "out.csv").exists()


def test_sample_rows_sets_the_table_size(files):
    result = generate(files, "--epsilon", "1", "--rows", "6000", "--sample-rows", "123", "-o", files / "out.csv")
    assert result.exit_code == 0, result.output
    assert len(pd.read_csv(files / "out.csv")) == 123


@pytest.mark.parametrize("mechanism, extra", [
    ("mwem", ["--measure", "query", "--rounds", "5", "--average"]),
    ("pmw", ["--alpha", "0.2", "--delta", "1e-6"]),
    ("blr", ["--net", "sampled", "--candidates", "200", "--net-size", "30"]),
])
def test_every_engine_generates(files, mechanism, extra):
    result = generate(files, "--mechanism", mechanism, "--epsilon", "3", "--rows", "6000", *extra,
                      "-o", files / "out.csv", "--model", files / "m.npz")
    assert result.exit_code == 0, result.output
    assert len(pd.read_csv(files / "out.csv")) == 6000
    assert Model.load(files / "m.npz").mechanism == mechanism


@pytest.fixture
def tiny(tmp_path):
    schema = Schema((Coded("a", 2), Coded("b", 2)))
    schema.save(tmp_path / "s.json")
    pd.DataFrame({"a": [0, 0, 1, 1, 1], "b": [0, 1, 1, 1, 0]}).to_csv(tmp_path / "d.csv", index=False)
    Workload.marginals(schema, 2).save(tmp_path / "w.json")
    return tmp_path


def test_blr_exact_runs_on_a_tiny_universe_and_reports_both_bounds(tiny):
    result = generate(tiny, "--mechanism", "blr", "--net-size", "5", "--epsilon", "1", "--rows", "5",
                      "-o", tiny / "out.csv", "--model", tiny / "m.npz")
    assert result.exit_code == 0, result.output
    assert "exact net of 56 databases of m=5 rows" in result.stderr  # C(4 + 5 - 1, 5)
    assert "error bound, exact net" in result.stderr
    model = Model.load(tiny / "m.npz")
    assert model.mechanism == "blr" and np.allclose(model.distribution * 5, np.round(model.distribution * 5))


def test_blr_sampled_states_both_bounds(tiny):
    result = generate(tiny, "--mechanism", "blr", "--net", "sampled", "--candidates", "50", "--epsilon", "1",
                      "--rows", "5", "-o", tiny / "out.csv")
    assert result.exit_code == 0, result.output
    assert "error bound, exact net" in result.stderr and "error bound, sampled net" in result.stderr


def test_blr_exact_refuses_politely_when_too_large(tiny):
    result = generate(tiny, "--mechanism", "blr", "--net-size", "2000", "--epsilon", "1", "--rows", "5",
                      "-o", tiny / "out.csv")
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "candidates, more than the cap" in result.stderr and "--net sampled" in result.stderr
    assert not (tiny / "out.csv").exists()


@pytest.mark.parametrize("extra, message", [
    (["--net-size", "3"], "--net-size do(es) not apply to --mechanism mwem"),
    (["--mechanism", "blr", "--rounds", "3"], "--rounds do(es) not apply to --mechanism blr"),
    (["--mechanism", "blr", "--delta", "1e-6"], "--delta do(es) not apply to --mechanism blr"),
    (["--mechanism", "blr", "--candidates", "3"], "--candidates applies to --net sampled"),
    (["--mechanism", "blr", "--passes", "3"], "--passes do(es) not apply to --mechanism blr"),
    (["--alpha", "0.1"], "--alpha do(es) not apply to --mechanism mwem"),
    (["--mechanism", "pmw", "--selection", "adaptive"], "--selection does not apply to --mechanism pmw"),
    (["--selection", "adaptive", "--rounds", "3"], "--rounds apply to --selection classic"),
    (["--selection", "adaptive", "--average"], "--average apply to --selection classic"),
    (["--count-epsilon", "2"], "must be less than --epsilon"),
])
def test_bad_options_are_refused_before_any_work(files, extra, message):
    args = ["--epsilon", "1", *extra]
    if "-o" not in extra:
        args += ["-o", files / "out.csv"]
    result = generate(files, *args)
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert message in result.stderr
    assert not (files / "out.csv").exists()


@pytest.mark.parametrize("selection, rows, said", [
    ("adaptive", "6000", "adaptive: one-way marginals first"),
    ("classic", "6000", "every one, so no selection"),
    ("auto", "6000", "classic rounds: 3 measurements at an equal share of the budget add"),
    ("auto", "5", "adaptive rounds: 3 classic measurements at an equal share of the budget would add"),
])
def test_selection_is_followed_and_auto_says_what_it_chose(files, selection, rows, said):
    result = generate(files, "--epsilon", "1", "--rows", rows, "--selection", selection, "-o", files / "out.csv")
    assert result.exit_code == 0, result.output
    assert said in result.stderr
    assert len(pd.read_csv(files / "out.csv")) == int(rows)


def test_help_has_examples():
    result = run("generate", "--help")
    assert result.exit_code == 0 and "Examples:" in result.output and "--mechanism blr" in result.output


@pytest.mark.slow
def test_adult_mwem_beats_the_baselines(adult_paths, tmp_path):
    """On 7 adult columns, all 35 3-way marginals at epsilon = 1, MWEM's synthetic table beats
    the uniform table and independent noisy 1-way marginals (the brief's 0.44)."""
    csv, domain = adult_paths
    columns = ["workclass", "education-num", "marital-status", "relationship", "race", "sex", "income>50K"]
    assert run("workload", "marginals", "--schema", domain, "--way", "3", "--columns", ",".join(columns),
               "-o", tmp_path / "w.json").exit_code == 0
    result = run("generate", csv, "--schema", domain, "--columns", ",".join(columns), "--workload",
                 tmp_path / "w.json", "--epsilon", "1", "--rows", "48842", "--seed", "5", "-o", tmp_path / "s.csv")
    assert result.exit_code == 0, result.output
    sizes = json.loads(domain.read_text())
    true = pd.read_csv(csv, usecols=columns)[columns].to_numpy()
    synthetic = pd.read_csv(tmp_path / "s.csv")[columns].to_numpy()
    assert len(synthetic) == 48842
    rng = np.random.default_rng(0)
    ones = []
    for i, c in enumerate(columns):  # the independent baseline: Laplace 1-way marginals at epsilon/7 each
        counts = np.bincount(true[:, i], minlength=sizes[c]) + rng.laplace(0, 7, sizes[c])
        ones.append(np.clip(counts, 0, None) / np.clip(counts, 0, None).sum())
    errors, independent, uniform = [], [], []
    for subset in itertools.combinations(range(len(columns)), 3):
        shape = [sizes[columns[i]] for i in subset]

        def table(codes, subset=subset, shape=shape):
            counts = np.bincount(np.ravel_multi_index(codes[:, subset].T, shape), minlength=np.prod(shape))
            return counts / counts.sum()

        truth = table(true)
        errors.append(np.abs(truth - table(synthetic)).sum())
        product = np.einsum("i,j,k->ijk", *(ones[i] for i in subset)).reshape(-1)
        independent.append(np.abs(truth - product).sum())
        uniform.append(np.abs(truth - 1 / np.prod(shape)).sum())
    assert np.mean(errors) < np.mean(independent) < np.mean(uniform)
    assert np.mean(errors) < 0.083  # smartnoise-synth's MWEM on the same task (the brief)


@pytest.mark.parametrize("delta, rows, warned", [("1e-9", None, False), ("1e-4", None, True),
                                                 ("1e-4", "6000", False), ("1e-3", "6000", True)])
def test_a_delta_too_large_to_mean_much_is_warned_about(files, delta, rows, warned):
    extra = ("--rows", rows) if rows else ()
    result = generate(files, "--epsilon", "1", "--delta", delta, *extra, "-o", files / "out.csv", "-q")
    assert result.exit_code == 0, result.output
    assert ("WARNING: --delta" in result.stderr) == warned


def test_generate_runs_without_a_workload_file_on_the_python_apis_default(files):
    """No --workload: the model is fitted for ``Workload.default`` (the Synthesizer's), the run
    says which, and its model answers that workload as the Python API's fit for it does."""
    result = run("generate", files / "d.csv", "--schema", files / "s.json", "--epsilon", "2", "--rows", "6000",
                 "--seed", "3", "-o", files / "out.csv", "--model", files / "m.npz")
    assert result.exit_code == 0, result.output
    assert "workload: every 3-way marginal of the 3 columns (1 marginals, 24 cells), the default" in result.stderr
    model = Model.load(files / "m.npz")
    assert [m["marginal"] for m in model.round_log] == [["colour", "size", "c"]]
    with_file = run("generate", files / "d.csv", "--schema", files / "s.json", "--epsilon", "2", "--rows", "6000",
                    "--seed", "3", "-o", files / "out2.csv", "--model", files / "m2.npz",
                    "--workload", files / "w.json")
    assert with_file.exit_code == 0 and "the default" not in with_file.stderr
    assert [m["marginal"] for m in Model.load(files / "m2.npz").round_log] != [["colour", "size", "c"]]


def test_no_command_uses_clicks_text_stream_getter():
    """click.get_text_stream goes in Click 9: the commands write to sys.stdout."""
    from pathlib import Path

    sources = (Path(__file__).resolve().parents[1] / "cli").glob("*.py")
    assert not [p.name for p in sources if "get_text_stream" in p.read_text(encoding="utf-8")]


def test_generate_help_groups_every_option_by_engine():
    """--help lists the options in sections, one per engine; only --help is left over."""
    result = run("generate", "--help")
    assert result.exit_code == 0
    titles = [line[:-1] for line in result.output.splitlines()
              if line and not line[0].isspace() and line.endswith(":") and not line.startswith("Usage")]
    assert titles == ["Input", "Schema derived under DP (no --schema)", "Privacy", "Engine",
                      "MWEM (--mechanism mwem, the default)", "PMW (--mechanism pmw)", "BLR (--mechanism blr)", "Output",
                      "Other options"]
    section = {title: result.output.split(f"\n{title}:\n")[1].split("\n\n")[0] for title in titles}
    assert "--rounds" in section["MWEM (--mechanism mwem, the default)"]
    assert "--updates" in section["PMW (--mechanism pmw)"] and "--rounds" not in section["PMW (--mechanism pmw)"]
    assert "--net-size" in section["BLR (--mechanism blr)"]
    assert section["Other options"].split() == ["-h,", "--help", "Show", "this", "message", "and", "exit."]
