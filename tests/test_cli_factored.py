"""All 14 adult columns (6.4e17 cells) through the CLI: a factored model, end to end, at a
reduced workload (16 MWEM rounds over the 91 two-way marginals, not the default 28)."""

import itertools
import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from synth_cli.main import main
from synth.models.factored import FactoredModel
from synth.models.model import Model


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def mean_pair_l1(true: pd.DataFrame, synthetic: pd.DataFrame, sizes: dict) -> float:
    errors = []
    for a, b in itertools.combinations(sizes, 2):
        shape = (sizes[a], sizes[b])

        def table(frame, a=a, b=b, shape=shape):
            counts = np.bincount(np.ravel_multi_index((frame[a].to_numpy(), frame[b].to_numpy()), shape),
                                 minlength=shape[0] * shape[1])
            return counts / counts.sum()

        errors.append(np.abs(table(true) - table(synthetic)).sum())
    return float(np.mean(errors))


@pytest.mark.slow
def test_all_adult_columns_generate_sample_and_answer(adult_paths, tmp_path):
    csv, domain = adult_paths
    sizes = json.loads(domain.read_text())
    assert len(sizes) == 14
    assert run("workload", "marginals", "--schema", domain, "--way", "2", "-o", tmp_path / "w.json").exit_code == 0
    refused = run("generate", csv, "--schema", domain, "--workload", tmp_path / "w.json", "--epsilon", "1",
                  "--representation", "dense", "-o", tmp_path / "dense.csv")
    assert refused.exit_code == 1 and "more than the cap of 100,000,000" in refused.output
    assert "Traceback" not in refused.output and not (tmp_path / "dense.csv").exists()

    result = run("generate", csv, "--schema", domain, "--workload", tmp_path / "w.json", "--epsilon", "1",
                 "--rounds", "16", "--seed", "3", "-q", "-o", tmp_path / "s.csv", "--model", tmp_path / "m.npz")
    assert result.exit_code == 0, result.output
    assert "distribution: factored" in result.output and "(universe: 641,263,392,000,000,000 cells)" in result.output

    true = pd.read_csv(csv)
    synthetic = pd.read_csv(tmp_path / "s.csv")
    assert list(synthetic.columns) == list(sizes) and abs(len(synthetic) - len(true)) < 500  # a noisy n
    uniform = pd.DataFrame({c: np.random.default_rng(0).integers(0, k, len(true)) for c, k in sizes.items()})
    error = mean_pair_l1(true, synthetic, sizes)
    assert error < 0.2 < 0.15 * mean_pair_l1(true, uniform, sizes)  # 16 rounds learn most pairs (0.15 seen)

    model = Model.load(tmp_path / "m.npz")
    assert isinstance(model.distribution, FactoredModel) and model.distribution.cells <= 10**7
    sampled = run("sample", "--model", tmp_path / "m.npz", "--rows", "2000", "--seed", "1", "-q",
                  "-o", tmp_path / "more.csv")
    assert sampled.exit_code == 0, sampled.output
    assert list(pd.read_csv(tmp_path / "more.csv").columns) == list(sizes)
    answered = run("answer", "--model", tmp_path / "m.npz", "--workload", tmp_path / "w.json",
                   "-o", tmp_path / "answers.csv")
    assert answered.exit_code == 0, answered.output
    answers = pd.read_csv(tmp_path / "answers.csv")["answer"].to_numpy()
    assert len(answers) == 148_137 and np.all(answers >= 0)
    # every marginal's cells sum to the model's n
    np.testing.assert_allclose(answers[:sizes["age"] * sizes["workclass"]].sum(), model.rows, rtol=1e-6)


def test_representation_options_are_refused_where_they_do_not_apply(tmp_path):
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps({"a": 2, "b": 3}))
    (tmp_path / "d.csv").write_text("a,b\n0,1\n1,2\n")
    assert run("workload", "marginals", "--schema", schema, "--way", "2", "-o", tmp_path / "w.json").exit_code == 0
    base = ["generate", tmp_path / "d.csv", "--schema", schema, "--workload", tmp_path / "w.json", "--epsilon", "1",
            "-o", tmp_path / "o.csv"]
    for extra, message in [
        (["--mechanism", "blr", "--representation", "factored"], "--representation do(es) not apply to --mechanism blr"),
        (["--representation", "dense", "--max-model-cells", "5000"], "--max-model-cells applies to a factored model"),
        (["--representation", "factored", "--average"], "--average needs --representation dense"),
        (["--max-model-cells", "10"], "Invalid value for '--max-model-cells'"),
    ]:
        result = run(*base, *extra)
        assert result.exit_code == 2 and message in result.output, result.output
    (tmp_path / "m.npz").write_bytes(b"not read: the options are refused first")
    result = run("answer", "--model", tmp_path / "m.npz", "--workload", tmp_path / "w.json", "--representation",
                 "factored", "-o", tmp_path / "a.csv")
    assert result.exit_code == 2 and "apply to --mechanism pmw" in result.output


def test_generate_factored_on_a_small_table_matches_the_data(tmp_path):
    rng = np.random.default_rng(4)
    a = rng.integers(0, 3, 3000)
    frame = pd.DataFrame({"a": a, "b": (a + (rng.random(3000) < 0.2)) % 3, "c": rng.integers(0, 2, 3000)})
    frame.to_csv(tmp_path / "d.csv", index=False)
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps({"a": 3, "b": 3, "c": 2}))
    assert run("workload", "marginals", "--schema", schema, "--way", "2", "-o", tmp_path / "w.json").exit_code == 0
    for mechanism in ("mwem", "pmw"):
        out = tmp_path / f"{mechanism}.csv"
        result = run("generate", tmp_path / "d.csv", "--schema", schema, "--workload", tmp_path / "w.json",
                     "--epsilon", "5", "--rows", "3000", "--mechanism", mechanism, "--representation", "factored",
                     "--seed", "2", "-q", "-o", out)
        assert result.exit_code == 0, result.output
        assert "distribution: factored" in result.output
        synthetic = pd.read_csv(out)
        assert len(synthetic) == 3000
        error = mean_pair_l1(frame, synthetic, {"a": 3, "b": 3, "c": 2})
        assert error < 0.1, (mechanism, error)
