"""A wide counting query on a 14-column factored model through the CLI: answered by message
passing with evidence, never by its marginal table (which would have ~8.5e14 cells here)."""

from __future__ import annotations

import csv
import json

import numpy as np
from click.testing import CliRunner

from synth_cli.main import main
from synth.models.factored import FactoredModel
from synth.models.model import Model
from synth.data.schema import Coded, Schema

ADULT_SIZES = {"age": 85, "workclass": 9, "fnlwgt": 100, "education-num": 16, "marital-status": 7, "occupation": 15,
               "relationship": 6, "race": 5, "sex": 2, "capital-gain": 100, "capital-loss": 100,
               "hours-per-week": 99, "native-country": 42, "income>50K": 2}
#: Eight columns whose joint table has 100^3 * 99 * 85 * 42 * 16 * 15 ≈ 8.5e14 cells.
WIDE = {"age": 30, "fnlwgt": 10, "education-num": 9, "occupation": 2, "capital-gain": 0, "capital-loss": 0,
        "hours-per-week": 40, "native-country": 0}


def run(*args, **kwargs):
    return CliRunner().invoke(main, [str(a) for a in args], **kwargs)


def test_answer_from_a_14_column_model_answers_an_8_column_point_query(tmp_path):
    schema = Schema(tuple(Coded(name, size) for name, size in ADULT_SIZES.items()))
    rng = np.random.default_rng(1)
    model = FactoredModel(schema)
    names = schema.names
    for a, b in [(names[i], names[i + 1]) for i in range(13)] + [("age", "income>50K"), ("sex", "hours-per-week")]:
        model.add_log((a, b), rng.normal(0, 1, (ADULT_SIZES[a], ADULT_SIZES[b])))
    assert len(model.tree.cliques) > 1
    Model(schema=schema, mechanism="mwem", distribution=model, rows=48842.0, rows_public=True).save(tmp_path / "m.npz")
    every = {c: {"range": [0, ADULT_SIZES[c] - 1]} for c in WIDE}
    (tmp_path / "w.json").write_text(json.dumps({"queries": [{"where": WIDE}, {"where": every},
                                                              {"where": {"sex": 1, "race": [0, 1]}}]}))
    result = run("answer", "--model", tmp_path / "m.npz", "--workload", tmp_path / "w.json", "-o", tmp_path / "a.csv")
    assert result.exit_code == 0, result.output
    with open(tmp_path / "a.csv", newline="") as handle:
        answers = [float(row["answer"]) for row in csv.DictReader(handle)]
    assert len(answers) == 3 and 0 < answers[0] < 48842
    assert abs(answers[1] - 48842) <= 1  # every value allowed: n (the CSV has 6 digits)
    assert 0 < answers[2] < 48842


def test_a_pmw_stream_on_14_adult_columns_answers_a_wide_query_and_saves_the_model(adult_paths, tmp_path):
    csv_path, domain = adult_paths
    queries = [{"where": {"sex": 1}}, {"where": {"age": 30, "sex": 0}}, {"where": WIDE, "query_id": "wide"},
               {"where": {"race": 1}}, {"where": {**WIDE, "sex": 1}}]
    text = "".join(json.dumps(q) + "\n" for q in queries)
    result = run("answer", csv_path, "--schema", domain, "--mechanism", "pmw", "--epsilon", "1", "--stream",
                 "--seed", "2", "--save-model", tmp_path / "s.npz", input=text)
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["query_id"] for r in records] == [0, 1, "wide", 3, 4]
    assert all("answer" in r and np.isfinite(r["answer"]) for r in records), records
    saved = Model.load(tmp_path / "s.npz")
    assert isinstance(saved.distribution, FactoredModel) and len(saved.schema) == 14
