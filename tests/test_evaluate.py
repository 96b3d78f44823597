"""synth.report.evaluate, synth.report.html and ``synth evaluate``: metrics, sources, report files, refusals."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import click
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from synth_cli._common import SynthGroup
from synth_cli.answer_cmd import answer
from synth_cli.evaluate_cmd import evaluate as evaluate_command
from synth_cli.generate_cmd import generate
from synth.report import html as report
from synth.report.evaluate import (
    BASELINES,
    EvaluationError,
    Released,
    evaluate,
    read_answers,
    released_from_codes,
    released_from_model,
)
from synth.report.numbers import COUNT, PRIVACY, fmt
from synth.models.model import Model
from synth.engines.pmw import run_pmw
from synth.data.schema import Categorical, Coded, Numeric, Schema
from synth.data.workload import Query, Workload

from .test_pmw import correlated_codes

REPO = Path(__file__).resolve().parents[1]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@click.group(cls=SynthGroup)
def app() -> None:
    """The commands these tests need, under the group's error handling (as in synth_cli.main)."""


app.add_command(evaluate_command, "evaluate")
app.add_command(generate, "generate")
app.add_command(answer, "answer")


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args], prog_name="synth")


# -- metrics on a small example, by hand ----------------------------------------------------

SMALL = Schema((Coded("a", 2), Coded("b", 3)))
SMALL_CODES = np.array([[0, 0]] * 4 + [[0, 1]] * 2 + [[1, 2]] * 3 + [[1, 0]], dtype=np.uint8)  # n = 10
SMALL_WORKLOAD = Workload(SMALL, Workload.marginals(SMALL, 1).queries + Workload.marginals(SMALL, 2).queries)


def truth_fractions() -> np.ndarray:
    counts = np.zeros((2, 3))
    np.add.at(counts, (SMALL_CODES[:, 0], SMALL_CODES[:, 1]), 1)
    return counts / len(SMALL_CODES)


def small_model(table: np.ndarray, rows: float = 10.0) -> Model:
    return Model(schema=SMALL, mechanism="test", distribution=table.reshape(-1).astype(float), rows=rows,
                 rows_public=True)


def test_release_equal_to_the_truth_has_zero_error():
    result = evaluate(SMALL_CODES, SMALL_WORKLOAD, released_from_model(small_model(truth_fractions()), SMALL_WORKLOAD))
    assert result.n == 10 and np.allclose(result.absolute_error, 0) and np.allclose(result.released, result.true)
    assert result.marginal_l1 == pytest.approx([0, 0, 0])
    summary = result.summary()
    assert summary["max_absolute_error"] == pytest.approx(0) and summary["mean_marginal_l1"] == pytest.approx(0)


def test_known_perturbation_gives_the_known_errors():
    """Move 0.1 of the mass from cell (a=0, b=0) to (a=1, b=2): every marginal's L1 is 0.2."""
    p = truth_fractions()
    p[0, 0] -= 0.1
    p[1, 2] += 0.1
    result = evaluate(SMALL_CODES, SMALL_WORKLOAD, released_from_model(small_model(p), SMALL_WORKLOAD))
    # by hand, query by query (a=0, a=1, b=0, b=1, b=2, then the 6 cells of a x b)
    expected = np.array([0.1, 0.1, 0.1, 0, 0.1, 0.1, 0, 0, 0, 0, 0.1])
    np.testing.assert_allclose(result.absolute_error, expected, atol=1e-12)
    np.testing.assert_allclose(result.true, [6, 4, 5, 2, 3, 4, 2, 0, 1, 0, 3])
    np.testing.assert_allclose(result.released, [5, 5, 4, 2, 4, 3, 2, 0, 1, 0, 4])
    relative = result.relative_error
    assert relative[0] == pytest.approx(0.1 / 0.6) and relative[2] == pytest.approx(0.1 / 0.5)
    assert np.isnan(relative[7]) and np.isnan(relative[9])  # true count 0
    assert [m.columns for m in result.marginals] == [("a",), ("b",), ("a", "b")]
    assert result.marginal_l1 == pytest.approx([0.2, 0.2, 0.2])
    summary = result.summary()
    assert summary["max_absolute_error"] == pytest.approx(0.1)
    assert summary["mean_absolute_error"] == pytest.approx(expected.mean())
    assert summary["max_absolute_error_rows"] == pytest.approx(1.0)
    assert summary["mean_marginal_l1"] == pytest.approx(0.2) and summary["worst_query"] in {0, 1, 2, 4, 5, 10}


def test_plain_answers_give_marginals_only_where_cells_cover_them():
    """Answers in rows: a marginal missing a cell query (and the all-rows query) has no L1."""
    p = truth_fractions()
    p[0, 0] -= 0.1
    p[1, 2] += 0.1
    queries = list(SMALL_WORKLOAD.queries)
    del queries[3]  # b = 1: the b marginal is no longer covered
    queries.append(Query((), ()))  # all rows
    workload = Workload(SMALL, queries)
    answers = small_model(p).answer(workload)
    result = evaluate(SMALL_CODES, workload, answers)
    by_columns = {m.columns: m.l1 for m in result.marginals}
    assert set(by_columns) == {("a",), ("b",), ("a", "b")}  # no marginal for the all-rows query
    assert by_columns[("b",)] is None
    assert by_columns[("a",)] == pytest.approx(0.2) and by_columns[("a", "b")] == pytest.approx(0.2)
    assert result.absolute_error[-1] == pytest.approx(0)
    assert result.summary()["marginals_evaluated"] == 2 and result.summary()["marginals_total"] == 3


def test_fractions_are_compared_so_the_released_row_count_does_not_matter():
    """A synthetic table twice the size with the same distribution, or a model scaled to
    another n, has zero error."""
    doubled = released_from_codes(np.concatenate([SMALL_CODES, SMALL_CODES]), SMALL_WORKLOAD)
    assert doubled.rows == 20
    result = evaluate(SMALL_CODES, SMALL_WORKLOAD, doubled)
    assert np.allclose(result.absolute_error, 0) and result.marginal_l1 == pytest.approx([0, 0, 0])
    np.testing.assert_allclose(result.released, result.true)  # released is scaled to the true n
    scaled = released_from_model(small_model(truth_fractions(), rows=12.5), SMALL_WORKLOAD)
    assert np.allclose(evaluate(SMALL_CODES, SMALL_WORKLOAD, scaled).absolute_error, 0)


def test_library_refusals_name_the_problem():
    with pytest.raises(EvaluationError, match="11 released answers for a workload of 10 queries"):
        evaluate(SMALL_CODES, Workload(SMALL, SMALL_WORKLOAD.queries[:10]), np.zeros(11))
    other = Schema((Coded("a", 2), Coded("b", 4)))
    model = Model(schema=other, mechanism="test", distribution=np.full(8, 1 / 8), rows=10, rows_public=True)
    with pytest.raises(EvaluationError, match="column 'b' differs between the model"):
        released_from_model(model, SMALL_WORKLOAD)
    with pytest.raises(ValueError, match="kind"):
        Released("guess", np.zeros(3))


# -- the baselines, and one number format -----------------------------------------------------


def baselines_by_hand(p: np.ndarray) -> dict[str, dict[tuple[str, ...], np.ndarray]]:
    """The two baselines' tables for the small example, from its true 2 x 3 fractions ``p``."""
    a, b = p.sum(axis=1), p.sum(axis=0)
    return {"independent": {("a",): a, ("b",): b, ("a", "b"): np.outer(a, b)},
            "uniform": {("a",): np.full(2, 1 / 2), ("b",): np.full(3, 1 / 3), ("a", "b"): np.full((2, 3), 1 / 6)}}


def test_baselines_match_a_computation_by_hand():
    """The product of the true 1-way marginals and uniform, scored on the 10-row table by hand:
    true p = [[.4, .2, 0], [.1, 0, .3]], a = (.6, .4), b = (.5, .2, .3)."""
    p = truth_fractions()
    result = evaluate(SMALL_CODES, SMALL_WORKLOAD, released_from_model(small_model(p), SMALL_WORKLOAD))
    tables = baselines_by_hand(p)
    true_tables = {("a",): p.sum(axis=1), ("b",): p.sum(axis=0), ("a", "b"): p}
    summary = result.summary()
    assert set(summary["baselines"]) == {"privacy", *BASELINES} == {"privacy", "independent", "uniform"}
    assert summary["baselines"]["privacy"].startswith("NON-PRIVATE")
    for name in BASELINES:
        # per marginal: the L1 distance of the normalized tables
        expected_l1 = {s: float(np.abs(true_tables[s] - tables[name][s]).sum()) for s in true_tables}
        assert {m.columns: m.baselines[name] for m in result.marginals} == pytest.approx(expected_l1)
        assert {tuple(m["columns"]): m["baseline_l1"][name] for m in summary["marginals"]} == pytest.approx(expected_l1)
        # per query (1-way cells, then the 6 cells of a x b): |true - baseline| as fractions of n
        answers = np.concatenate([tables[name][("a",)], tables[name][("b",)], tables[name][("a", "b")].ravel()])
        error = np.abs(result.true_fraction - answers)
        np.testing.assert_allclose(result.baselines[name].absolute_error, error, atol=1e-12)
        entry = summary["baselines"][name]
        assert entry["label"] == BASELINES[name][0]
        assert entry["max_absolute_error"] == pytest.approx(error.max())
        assert entry["mean_absolute_error"] == pytest.approx(error.mean())
        assert entry["median_absolute_error"] == pytest.approx(np.median(error))
        assert entry["max_absolute_error_rows"] == pytest.approx(error.max() * 10)
        assert entry["mean_marginal_l1"] == pytest.approx(np.mean(list(expected_l1.values())))
        assert entry["max_marginal_l1"] == pytest.approx(max(expected_l1.values()))
        assert set(entry) == {"label", "description", "max_absolute_error", "mean_absolute_error",
                              "median_absolute_error", "max_absolute_error_rows", "mean_absolute_error_rows",
                              "mean_relative_error", "mean_marginal_l1", "max_marginal_l1"}
    # the numbers themselves, worked out on paper
    independent, uniform = summary["baselines"]["independent"], summary["baselines"]["uniform"]
    by_columns = {tuple(m["columns"]): m["baseline_l1"] for m in summary["marginals"]}
    assert by_columns[("a",)]["independent"] == 0 and by_columns[("b",)]["independent"] == 0  # 1-way: exact
    assert by_columns[("a", "b")]["independent"] == pytest.approx(0.72)  # |p - a x b| = 2 (.1 + .08 + .18)
    assert by_columns[("a", "b")]["uniform"] == pytest.approx(0.8)
    assert by_columns[("a",)]["uniform"] == pytest.approx(0.2) and by_columns[("b",)]["uniform"] == pytest.approx(1 / 3)
    assert independent["max_absolute_error"] == pytest.approx(0.18)
    assert independent["mean_marginal_l1"] == pytest.approx(0.24)
    assert uniform["max_absolute_error"] == pytest.approx(0.4 - 1 / 6)  # the cell a=0, b=0
    # a release equal to the truth beats both; the release's own numbers are unchanged by them
    assert summary["mean_marginal_l1"] == pytest.approx(0) and summary["max_absolute_error"] == pytest.approx(0)


def test_baselines_are_scored_on_the_marginals_the_release_determines():
    """Answers that leave the b marginal uncovered: the baselines' mean L1 is over (a) and (a, b)
    too, so that it compares with the release's; every marginal still has its baseline L1."""
    queries = list(SMALL_WORKLOAD.queries)
    del queries[3]  # b = 1
    workload = Workload(SMALL, queries)
    result = evaluate(SMALL_CODES, workload, small_model(truth_fractions()).answer(workload))
    summary = result.summary()
    assert summary["marginals_evaluated"] == 2
    assert summary["baselines"]["independent"]["mean_marginal_l1"] == pytest.approx((0 + 0.72) / 2)
    assert summary["baselines"]["uniform"]["mean_marginal_l1"] == pytest.approx((0.2 + 0.8) / 2)
    uncovered = next(m for m in summary["marginals"] if m["columns"] == ["b"])
    assert uncovered["l1"] is None and uncovered["baseline_l1"]["uniform"] == pytest.approx(1 / 3)


def test_the_report_shows_the_baselines_beside_the_release(tmp_path, monkeypatch):
    """The page: a table of the release against both baselines (labelled NON-PRIVATE, with the
    sentence saying what they are) and the baselines' L1 per marginal; summary.json carries
    them; the plots mark them. Every number in the format of ``fmt``."""
    p = truth_fractions()
    p[0, 0] -= 0.1
    p[1, 2] += 0.1
    result = evaluate(SMALL_CODES, SMALL_WORKLOAD, released_from_model(small_model(p), SMALL_WORKLOAD))
    drawn = {}
    save = report._save

    def keep(figure, path):
        drawn[path.name] = figure
        return save(figure, path)

    monkeypatch.setattr(report, "_save", keep)
    report.write_report(tmp_path / "r", result)
    page = (tmp_path / "r" / "index.html").read_text()
    summary = load_summary(tmp_path / "r")
    assert summary["baselines"] == json.loads(json.dumps(result.summary()["baselines"]))
    assert "<h2>The release against two baselines (NON-PRIVATE)</h2>" in page
    assert ("the product of the true 1-way marginals is what a release would get knowing only each column alone"
            in page) and "uniform is what it would get knowing nothing" in page
    assert "Both are computed from the true data: NON-PRIVATE, for the data owner only." in page
    assert ("<th class='baseline'>product of the true 1-way marginals (NON-PRIVATE)</th>"
            "<th class='baseline'>uniform (NON-PRIVATE)</th>") in page
    # mean L1 per marginal: the release 0.2, the product of the 1-way marginals (0 + 0 + .72) / 3, uniform
    # (.2 + 1/3 + .8) / 3; max absolute error: .1 (a row of n = 10), .18 (1.8 rows), .2333 (2.3 rows)
    assert ("<tr><th>mean L1 per marginal (0 to 2)</th><td class='num'>0.200</td>"
            "<td class='num baseline'>0.240</td><td class='num baseline'>0.444</td></tr>") in page
    assert ("<tr><th>max absolute error (fraction of n)</th><td class='num'>0.100 (~1 rows)</td>"
            "<td class='num baseline'>0.180 (~1.8 rows)</td>"
            "<td class='num baseline'>0.233 (~2.3 rows)</td></tr>") in page
    assert ("<tr><td>a x b</td><td class='num'>6</td><td class='num'>6</td><td class='num'>0.200</td>"
            "<td class='num baseline'>0.720</td><td class='num baseline'>0.800</td></tr>") in page
    # the plots: the baselines' mean errors as lines, their L1 per marginal as markers
    labels = [t.get_text() for t in drawn["error_distribution.png"].axes[0].get_legend().get_texts()]
    assert "product of the true 1-way marginals: mean 0.0655 (NON-PRIVATE)" in labels
    bars = drawn["marginal_errors.png"].axes[0]
    labels = [t.get_text() for t in bars.get_legend().get_texts()]
    assert {"product of the true 1-way marginals (NON-PRIVATE)", "uniform (NON-PRIVATE)"} <= set(labels)
    markers = {c.get_label(): c.get_offsets()[:, 0] for c in bars.collections}
    order = [m.columns for m in sorted(result.marginals, key=lambda m: -m.l1)]  # the bars' order, worst first
    expected = {("a",): 0.0, ("b",): 0.0, ("a", "b"): 0.72}
    np.testing.assert_allclose(markers["product of the true 1-way marginals (NON-PRIVATE)"],
                               [expected[c] for c in order], atol=1e-12)


def test_one_number_format():
    """Errors to 3 significant figures, counts with thousands separators, epsilon and delta plain."""
    assert [fmt(v) for v in (0.2, 0.07123, 1.5e-5, 123.4, 0, 2.0, None, float("nan"))] == [
        "0.200", "0.0712", "1.50e-05", "123", "0", "2.00", "n/a", "n/a"]
    assert [fmt(v, COUNT) for v in (6000, 6000.0, 48842, 1234.56, np.int64(7))] == [
        "6,000", "6,000", "48,842", "1,234.6", "7"]
    assert [fmt(v, PRIVACY) for v in (1, 0.625, 1e-6, 3e-7, 0.90512)] == ["1", "0.625", "1e-06", "3e-07", "0.905"]
    with pytest.raises(ValueError, match="kind"):
        fmt(1, "percent")


# -- the command on a 3-column table --------------------------------------------------------


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Data (6,000 correlated rows), schema, workload, a seeded MWEM model and its synthetic table."""
    tmp = tmp_path_factory.mktemp("evaluate")
    schema = Schema((Categorical("colour", ("red", "green")), Numeric("size", (0, 10, 20, 50)), Coded("c", 4)))
    schema.save(tmp / "s.json")
    codes = correlated_codes(6000, 1)
    frame = pd.DataFrame({"colour": np.array(["red", "green"])[codes[:, 0]],
                          "size": np.array([5.0, 15.0, 30.0])[codes[:, 1]], "c": codes[:, 2]})
    frame.to_csv(tmp / "d.csv", index=False)
    workload = Workload(schema, Workload.marginals(schema, 1).queries + Workload.marginals(schema, 2).queries)
    workload.save(tmp / "w.json")
    result = run("generate", tmp / "d.csv", "--schema", tmp / "s.json", "--workload", tmp / "w.json",
                 "--epsilon", "1", "--rows", "6000", "--seed", "2", "-o", tmp / "syn.csv", "--model", tmp / "m.npz")
    assert result.exit_code == 0, result.output
    model = Model.load(tmp / "m.npz")
    with open(tmp / "answers.csv", "w", newline="") as handle:  # the model's answers, as synth answer writes them
        writer = csv.writer(handle)
        writer.writerow(["query_id", "name", "query", "answer", "privacy"])
        for i, value in enumerate(model.answer(workload).tolist()):
            writer.writerow([i, "", workload.describe(i), repr(value), "differentially private (test)"])
    return tmp


def evaluate_cli(files, out, *extra):
    return run("evaluate", files / "d.csv", "--schema", files / "s.json", "--workload", files / "w.json",
               *extra, "-o", out)


def load_summary(folder: Path) -> dict:
    return json.loads((folder / "summary.json").read_text())


def test_three_sources_give_consistent_reports(files, tmp_path):
    summaries = {}
    for kind, path in (("model", "m.npz"), ("synthetic", "syn.csv"), ("answers", "answers.csv")):
        result = evaluate_cli(files, tmp_path / kind, f"--{kind}", files / path, "--quiet")
        assert result.exit_code == 0, result.output
        assert "NON-PRIVATE" in result.stderr and "max absolute error" in result.stderr
        summaries[kind] = load_summary(tmp_path / kind)
    model, synthetic, answers = summaries["model"], summaries["synthetic"], summaries["answers"]
    assert model["source"]["kind"] == "model" and model["source"]["mechanism"] == "mwem"
    assert model["source"]["epsilon"] == pytest.approx(1.0) and model["n"] == 6000
    assert synthetic["source"]["kind"] == "synthetic" and synthetic["source"]["rows"] == 6000
    # the answers CSV holds the model's own answers: the same numbers, and every marginal is covered
    for key in ("max_absolute_error", "mean_absolute_error", "mean_marginal_l1"):
        assert answers[key] == pytest.approx(model[key], rel=1e-9, abs=1e-12)
    assert answers["marginals_evaluated"] == model["marginals_evaluated"] == 6
    # the synthetic table rounds the model to 6,000 rows: within a row per cell of it
    assert synthetic["mean_absolute_error"] == pytest.approx(model["mean_absolute_error"], abs=2e-3)
    assert synthetic["max_absolute_error"] == pytest.approx(model["max_absolute_error"], abs=4e-3)
    # every cell of U is rounded by less than a row, so a marginal moves by less than |U| rows in all
    universe = Schema.load(files / "s.json").universe_size
    for ours, theirs in zip(synthetic["marginals"], model["marginals"]):
        assert ours["columns"] == theirs["columns"]
        assert ours["l1"] == pytest.approx(theirs["l1"], abs=universe / 6000)
    assert model["mean_marginal_l1"] < 0.3  # and it did learn the data (uniform is ~0.6 here)


def test_report_files_are_complete_and_linked(files, tmp_path):
    out = tmp_path / "report"
    result = evaluate_cli(files, out, "--model", files / "m.npz")
    assert result.exit_code == 0, result.output
    names = {p.name for p in out.iterdir()}
    assert names == {"answers.csv", "summary.json", "index.html", "error_distribution.png",
                     "marginal_errors.png", "true_vs_released.png"}
    page = (out / "index.html").read_text()
    assert "READS THE PRIVATE DATA" in page and "NON-PRIVATE" in page and "data owner only" in page
    linked = set(re.findall(r'<img src="([^"]+)"', page))
    pngs = {n for n in names if n.endswith(".png")}
    assert linked == pngs
    for name in pngs:
        assert (out / name).read_bytes()[:8] == PNG_MAGIC
    assert 'href="answers.csv"' in page and 'href="summary.json"' in page
    summary = load_summary(out)
    assert summary["format"] == "synth-evaluation" and summary["privacy"].startswith("NON-PRIVATE")
    assert set(summary["files"]) == names
    table = pd.read_csv(out / "answers.csv")
    assert list(table.columns) == ["query_id", "name", "query", "true", "released", "absolute error",
                                   "relative error"]
    assert len(table) == summary["queries"] == 35 and table["query_id"].tolist() == list(range(35))
    assert table["absolute error"].max() == pytest.approx(summary["max_absolute_error"], rel=1e-5)
    assert table["absolute error"].mean() == pytest.approx(summary["mean_absolute_error"], rel=1e-4)
    np.testing.assert_allclose((table["true"] - table["released"]).abs() / 6000, table["absolute error"],
                               rtol=1e-4, atol=1e-9)
    assert len(summary["marginals"]) == 6 and summary["marginals"][0]["columns"] == ["colour"]
    assert page.count("<tr><td>") >= 6  # the marginal table
    assert f"<td class='num'>{fmt(summary['mean_marginal_l1'])}</td>" in page
    # the baselines: in summary.json, on the page and on stderr, each number in one format
    codes = correlated_codes(6000, 1)
    for name in ("independent", "uniform"):
        baseline = summary["baselines"][name]
        assert 0 < summary["mean_marginal_l1"] < baseline["mean_marginal_l1"]  # the release beats both here
        assert f"<td class='num baseline'>{fmt(baseline['mean_marginal_l1'])}</td>" in page
        assert (f"{baseline['label']}: max absolute error {fmt(baseline['max_absolute_error'])} of n, mean L1 per "
                f"marginal {fmt(baseline['mean_marginal_l1'])}") in result.stderr
    assert "baselines, for comparison:" in result.stderr
    assert "[NON-PRIVATE: computed from the true data]" in result.stderr
    assert f"mean L1 per marginal {fmt(summary['mean_marginal_l1'])} over 6 of 6 marginals" in result.stderr
    # the product of the 1-way marginals of the (colour, size) marginal, by hand
    true = np.zeros((2, 3))
    np.add.at(true, (codes[:, 0], codes[:, 1]), 1 / len(codes))
    by_hand = np.abs(true - np.outer(true.sum(axis=1), true.sum(axis=0))).sum()
    row = next(m for m in summary["marginals"] if m["columns"] == ["colour", "size"])
    assert row["baseline_l1"]["independent"] == pytest.approx(by_hand) and by_hand > 0.01
    assert row["baseline_l1"]["uniform"] == pytest.approx(np.abs(true - 1 / 6).sum())


def test_monitor_adds_the_kl_plots(files, tmp_path):
    schema = Schema.load(files / "s.json")
    workload = Workload.load(files / "w.json", schema)
    codes = correlated_codes(6000, 1)
    pmw = run_pmw(codes, schema, workload, 30.0, alpha=0.15, passes=2, rows=6000, rng=3, monitor=True,
                  updates=len(workload.subsets))  # L given: a workload this small is otherwise measured up front
    with open(tmp_path / "kl.csv", "w", newline="") as handle:
        pmw.monitor.write_csv(handle)
    pmw.pmw.to_model().save(tmp_path / "pmw.npz")
    assert len(pmw.monitor.rows) >= 1
    out = tmp_path / "report"
    result = evaluate_cli(files, out, "--model", tmp_path / "pmw.npz", "--monitor", tmp_path / "kl.csv")
    assert result.exit_code == 0, result.output
    page = (out / "index.html").read_text()
    for name in ("kl_potential.png", "round_timeline.png"):
        assert (out / name).read_bytes()[:8] == PNG_MAGIC and f'src="{name}"' in page
    monitor = load_summary(out)["monitor"]
    assert monitor["updates"] == len(pmw.monitor.rows) and monitor["path"] == str(tmp_path / "kl.csv")
    assert monitor["phi_start"] == pytest.approx(pmw.monitor.rows[0].phi_before)
    assert load_summary(out)["source"]["mechanism"] == "pmw"


def test_a_previous_report_is_replaced_and_other_folders_refused(files, tmp_path):
    out = tmp_path / "report"
    out.mkdir()  # an empty folder is filled
    assert evaluate_cli(files, out, "--model", files / "m.npz").exit_code == 0
    assert evaluate_cli(files, out, "--synthetic", files / "syn.csv").exit_code == 0  # a previous report
    assert load_summary(out)["source"]["kind"] == "synthetic"
    (out / "notes.txt").write_text("mine")
    result = evaluate_cli(files, out, "--model", files / "m.npz")
    assert result.exit_code != 0 and "is not a synth evaluation report" in result.stderr
    assert (out / "notes.txt").read_text() == "mine" and load_summary(out)["source"]["kind"] == "synthetic"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]  # no temporary folder left


def test_a_failure_while_writing_leaves_no_report(files, tmp_path, monkeypatch):
    schema = Schema.load(files / "s.json")
    workload = Workload.load(files / "w.json", schema)
    evaluation = evaluate(correlated_codes(6000, 1), workload, released_from_model(Model.load(files / "m.npz"), workload))

    def broken(evaluation, path):
        raise RuntimeError("disk full")

    monkeypatch.setattr(report, "_plot_scatter", broken)
    with pytest.raises(RuntimeError, match="disk full"):
        report.write_report(tmp_path / "new", evaluation)
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    report.write_report(tmp_path / "old", evaluation)
    before = {p.name: p.read_bytes() for p in (tmp_path / "old").iterdir()}
    monkeypatch.setattr(report, "_plot_scatter", broken)
    with pytest.raises(RuntimeError, match="disk full"):
        report.write_report(tmp_path / "old", evaluation)
    assert {p.name: p.read_bytes() for p in (tmp_path / "old").iterdir()} == before  # untouched
    assert [p.name for p in tmp_path.iterdir()] == ["old"]


# -- refusals -------------------------------------------------------------------------------


def bad_inputs(files: Path, tmp: Path) -> dict[str, tuple[list, str]]:
    """name: (arguments after DATA, message expected on stderr)."""
    schema = Schema.load(files / "s.json")
    Workload.marginals(schema.select("colour,size"), 2).save(tmp / "w2.json")
    other = Schema((Categorical("colour", ("green", "red")), Numeric("size", (0, 10, 20, 50)), Coded("c", 4)))
    other.save(tmp / "s_other.json")
    answers = pd.read_csv(files / "answers.csv")
    answers.iloc[:-1].to_csv(tmp / "short.csv", index=False)
    swapped = answers.copy()
    swapped.loc[3, "query"] = "colour = blue"
    swapped.to_csv(tmp / "swapped.csv", index=False)
    synthetic = pd.read_csv(files / "syn.csv")
    blue = synthetic.copy()
    blue.loc[1, "colour"] = "blue"
    blue.to_csv(tmp / "blue.csv", index=False)
    big = synthetic.copy()
    big.loc[0, "size"] = 75
    big.to_csv(tmp / "big.csv", index=False)
    (tmp / "kl.csv").write_text("update,phi_before\n1,0.5\n")
    (tmp / "notes").mkdir()
    (tmp / "notes" / "a.txt").write_text("keep me")
    s, w = files / "s.json", files / "w.json"
    return {
        "model over other columns": (["--schema", s, "--columns", "colour,size", "--workload", tmp / "w2.json",
                                      "--model", files / "m.npz"],
                                     ("the model is over columns colour, size, c but the schema selection is "
                                     "colour, size; select the model's columns (--columns colour,size,c)")),
        "model under another schema": (["--schema", tmp / "s_other.json", "--workload", w, "--model", files / "m.npz"],
                                       "column 'colour' differs between the model"),
        "answers too few": (["--schema", s, "--workload", w, "--answers", tmp / "short.csv"],
                            "has 34 answers but the workload has 35 queries"),
        "answers to other queries": (["--schema", s, "--workload", w, "--answers", tmp / "swapped.csv"],
                                     "row 4: query 3 is 'colour = blue' but the workload's query 3 is"),
        "answers not an answers CSV": (["--schema", s, "--workload", w, "--answers", files / "syn.csv"],
                                       "not an answers CSV: no column 'query_id'"),
        "synthetic unknown label": (["--schema", s, "--workload", w, "--synthetic", tmp / "blue.csv"],
                                    "row 2, column 'colour': unknown category 'blue'"),
        "synthetic outside the bins": (["--schema", s, "--workload", w, "--synthetic", tmp / "big.csv"],
                                       "column 'size': 1 values lie outside the schema's bin edges"),
        "no source": (["--schema", s, "--workload", w], "choose one release to evaluate"),
        "two sources": (["--schema", s, "--workload", w, "--synthetic", files / "syn.csv", "--answers",
                         files / "answers.csv"], "(got --synthetic, --answers)"),
        "not a monitor": (["--schema", s, "--workload", w, "--model", files / "m.npz", "--monitor", tmp / "kl.csv"],
                          "not a PMW monitor file"),
        "occupied folder": (["--schema", s, "--workload", w, "--model", files / "m.npz", "-o", tmp / "notes"],
                            "exists and is not a synth evaluation report"),
    }


def test_bad_inputs_are_refused_clearly_and_leave_no_report(files, tmp_path):
    cases = bad_inputs(files, tmp_path)
    before = set(tmp_path.iterdir())
    for name, (args, message) in cases.items():
        if "-o" not in args:
            args = [*args, "-o", tmp_path / "report"]
        result = run("evaluate", files / "d.csv", *args)
        assert result.exit_code != 0, name
        assert "Traceback" not in result.output, name
        assert result.exception is None or isinstance(result.exception, SystemExit), name
        assert message in result.stderr, f"{name}: {result.stderr}"
        lines = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
        assert len(lines) == 1, name
        assert set(tmp_path.iterdir()) == before, name  # no report, no temporary folder
    assert (tmp_path / "notes" / "a.txt").read_text() == "keep me"


def test_read_answers_refuses_duplicates(files, tmp_path):
    schema = Schema.load(files / "s.json")
    workload = Workload.load(files / "w.json", schema)
    answers = pd.read_csv(files / "answers.csv")
    answers.loc[5, "query_id"] = 4
    answers.to_csv(tmp_path / "dup.csv", index=False)
    with pytest.raises(EvaluationError, match="row 6, column 'query_id': query 4 is answered twice"):
        read_answers(tmp_path / "dup.csv", workload)


def test_help_has_examples():
    result = run("evaluate", "--help")
    assert result.exit_code == 0 and "Examples:" in result.output
    assert "--model mwem.npz" in result.output and "NON-PRIVATE" in result.output


def test_imports_stay_light():
    """Importing the command, the evaluation and the report loads neither matplotlib nor Numba."""
    code = ("import sys, synth_cli.evaluate_cmd, synth.report.evaluate, synth.report.html; "
            "print(sorted(m for m in ('matplotlib', 'numba') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_adult_model_report_on_a_few_columns(adult_paths, tmp_path):
    csv_path, domain = adult_paths
    columns = "sex,race,relationship,income>50K"
    full = Schema.load(domain)
    Workload.marginals(full.select(columns), 2).save(tmp_path / "w.json")
    common = ["--schema", domain, "--columns", columns, "--workload", tmp_path / "w.json"]
    result = run("generate", csv_path, *common, "--epsilon", "1", "--rows", "48842", "--seed", "4",
                 "-o", tmp_path / "syn.csv", "--model", tmp_path / "m.npz")
    assert result.exit_code == 0, result.output
    result = run("evaluate", csv_path, *common, "--model", tmp_path / "m.npz", "-o", tmp_path / "report")
    assert result.exit_code == 0, result.output
    summary = load_summary(tmp_path / "report")
    assert summary["n"] == 48842 and summary["columns"] == columns.split(",")
    assert summary["marginals_evaluated"] == 6 and summary["source"]["epsilon"] == pytest.approx(1.0)
    assert summary["mean_marginal_l1"] < 0.1 and summary["max_absolute_error"] < 0.05
    # the exact answers match a count with pandas
    data = pd.read_csv(csv_path, usecols=["sex", "race"])
    table = pd.read_csv(tmp_path / "report" / "answers.csv")
    count = int(((data["sex"] == 1) & (data["race"] == 4)).sum())
    assert table.loc[table["query"] == "sex = 1 AND race = 4", "true"].item() == count


# -- the release's privacy record, and PMW's L in the monitor plots --------------------------


def noisy_unseeded_model(files: Path, path: Path) -> Model:
    """The fixture's model, its record changed so that every entry differs from the original."""
    import dataclasses

    model = Model.load(files / "m.npz")
    privacy = json.loads(json.dumps(model.privacy))
    privacy["spent"] = {**privacy["spent"], "epsilon": 0.625, "delta": 3e-7}
    changed = dataclasses.replace(model, rows=6012.0, rows_public=False, seeded=False, privacy=privacy)
    changed.save(path)
    return changed


def test_a_synthetic_table_with_its_model_shows_the_models_record(files, tmp_path):
    model = Model.load(files / "m.npz")  # seeded MWEM at epsilon 1, n public (--rows 6000)
    spent = model.privacy["spent"]
    out = tmp_path / "seeded"
    result = evaluate_cli(files, out, "--synthetic", files / "syn.csv", "--model", files / "m.npz")
    assert result.exit_code == 0, result.output
    assert "comes from a seeded run: for testing, not for release" in result.stderr
    source = load_summary(out)["source"]
    assert source["kind"] == "synthetic" and source["rows"] == 6000  # the synthetic table is evaluated
    assert source["mechanism"] == "mwem" and source["epsilon"] == pytest.approx(spent["epsilon"])
    assert source["delta"] == pytest.approx(spent["delta"])
    assert source["n_status"] == "public" and source["rows_public"] is True and source["seeded"] is True
    assert source["model"] == str(files / "m.npz") and source["model_rows"] == model.rows
    page = (out / "index.html").read_text()
    assert "<th>mechanism</th><td>mwem</td>" in page
    assert f"epsilon = {fmt(spent['epsilon'], PRIVACY)}, delta = {fmt(spent['delta'], PRIVACY)}" in page
    assert "6,000: public (given, not read from the data)" in page
    assert "yes: a seeded run is for testing, not for release" in page and "not recorded" not in page
    # the numbers are the synthetic table's, whatever model is passed beside it
    alone = tmp_path / "alone"
    assert evaluate_cli(files, alone, "--synthetic", files / "syn.csv").exit_code == 0
    assert load_summary(alone)["marginals"] == load_summary(out)["marginals"]
    # another record (noisy n, unseeded, other epsilon) shows as such
    noisy_unseeded_model(files, tmp_path / "noisy.npz")
    out = tmp_path / "noisy"
    result = evaluate_cli(files, out, "--synthetic", files / "syn.csv", "--model", tmp_path / "noisy.npz")
    assert result.exit_code == 0, result.output
    assert "seeded run" not in result.stderr
    source = load_summary(out)["source"]
    assert source["epsilon"] == 0.625 and source["delta"] == 3e-7 and source["model_rows"] == 6012
    assert source["n_status"] == "noisy count" and source["seeded"] is False
    page = (out / "index.html").read_text()
    assert "epsilon = 0.625, delta = 3e-07" in page and "6,012: a noisy count bought from the budget" in page
    assert "<th>seeded run</th><td>no</td>" in page


def test_a_csv_without_its_model_says_its_record_is_not_recorded(files, tmp_path):
    for kind, path, what in (("synthetic", "syn.csv", "a synthetic CSV"), ("answers", "answers.csv", "an answers CSV")):
        out = tmp_path / kind
        result = evaluate_cli(files, out, f"--{kind}", files / path)
        assert result.exit_code == 0, result.output
        assert "carries no privacy record" in result.stderr and "pass --model" in result.stderr
        expected = f"not recorded: {what} carries no privacy record; pass --model to show it"
        source = load_summary(out)["source"]
        assert source["privacy_record"] == expected
        assert all(source[k] is None for k in ("mechanism", "epsilon", "delta", "n_status", "seeded"))
        page = (out / "index.html").read_text()
        assert f"<th>privacy record</th><td>{expected}</td>" in page
        for label in ("mechanism", "privacy spent", "release&#x27;s n", "seeded run"):
            assert f"<th>{label}</th><td>not recorded</td>" in page, label


def test_answers_with_their_model_show_the_models_record_and_the_monitors_l(files, tmp_path):
    """A theory-variant PMW run at epsilon 1 (n bought as a noisy count) makes no update here: its
    monitor file has no row, and the report must still show the run's L (it used to say L = 0)."""
    result = run("answer", files / "d.csv", "--schema", files / "s.json", "--workload", files / "w.json",
                 "--mechanism", "pmw", "--variant", "theory", "--epsilon", "1", "--delta", "1e-6", "--seed", "5", "-o", tmp_path / "pmw.csv",
                 "--save-model", tmp_path / "pmw.npz", "--monitor", tmp_path / "kl.csv", "--quiet")
    assert result.exit_code == 0, result.output
    model = Model.load(tmp_path / "pmw.npz")
    allowed = model.parameters["updates"]
    assert allowed > 0 and model.round_log == []  # L > 0 allowed, none used
    out = tmp_path / "report"
    result = evaluate_cli(files, out, "--answers", tmp_path / "pmw.csv", "--model", tmp_path / "pmw.npz",
                          "--monitor", tmp_path / "kl.csv")
    assert result.exit_code == 0, result.output
    summary = load_summary(out)
    source = summary["source"]
    assert source["kind"] == "answers" and source["mechanism"] == "pmw" and source["n_status"] == "noisy count"
    assert source["epsilon"] == pytest.approx(model.privacy["spent"]["epsilon"]) and source["seeded"] is True
    assert source["delta"] == pytest.approx(model.privacy["spent"]["delta"]) and source["model_rows"] == model.rows
    assert summary["monitor"]["updates"] == 0 and summary["monitor"]["updates_allowed"] == allowed
    assert summary["monitor"]["threshold"] == pytest.approx(model.parameters["threshold"])
    page = (out / "index.html").read_text()
    assert "<th>mechanism</th><td>pmw</td>" in page and "a noisy count bought from the budget" in page
    assert f"0 updates (of L = {allowed:,} allowed)" in page and "L = 0" not in page
    # answers from another mechanism than the model's are refused
    result = evaluate_cli(files, tmp_path / "other", "--answers", files / "answers.csv", "--model",
                          tmp_path / "pmw.npz")
    assert result.exit_code != 0 and "the model is a pmw release but" in result.stderr
    assert "'differentially private (test)'" in result.stderr and not (tmp_path / "other").exists()


def write_monitor(run, path: Path) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        run.monitor.write_csv(handle)
    return path


@pytest.mark.parametrize("epsilon, alpha, rng, updates", [(3.0, None, 1, "none"), (30.0, 0.15, 3, "some")])
def test_the_monitor_file_keeps_the_runs_l(tmp_path, epsilon, alpha, rng, updates):
    from .test_pmw import SCHEMA as PMW_SCHEMA, WORKLOAD as PMW_WORKLOAD

    pmw = run_pmw(correlated_codes(4000, 2), PMW_SCHEMA, PMW_WORKLOAD, epsilon, alpha=alpha, rows=4000, rng=rng,
                  passes=2, monitor=True, variant="theory")
    assert (pmw.pmw.updates > 0) == (updates == "some") and pmw.plan.updates > 0
    log = report.read_monitor(write_monitor(pmw, tmp_path / "kl.csv"))
    assert len(log) == pmw.pmw.updates
    assert log.updates_allowed == pmw.plan.updates and log.summary()["updates_allowed"] == pmw.plan.updates
    assert log.threshold == pytest.approx(pmw.plan.threshold)
    assert report._allowed_label(log) == f"of L = {pmw.plan.updates:,} allowed"


def test_an_old_monitor_file_without_its_plan_line(tmp_path, files):
    schema = Schema.load(files / "s.json")
    workload = Workload.load(files / "w.json", schema)
    pmw = run_pmw(correlated_codes(6000, 1), schema, workload, 30.0, alpha=0.15, rows=6000, rng=3, monitor=True,
                  updates=len(workload.subsets))
    lines = write_monitor(pmw, tmp_path / "kl.csv").read_text().splitlines(keepends=True)
    assert lines[1].startswith("# plan: updates_allowed=")
    (tmp_path / "rows.csv").write_text(lines[0] + "".join(lines[2:]))  # L from its rows
    assert report.read_monitor(tmp_path / "rows.csv").updates_allowed == pmw.plan.updates
    (tmp_path / "empty.csv").write_text(lines[0] + lines[2])  # no row, no plan line: L is unknown, not 0
    log = report.read_monitor(tmp_path / "empty.csv")
    assert log.updates_allowed is None and "L not recorded" in report._allowed_label(log)
    (tmp_path / "bad.csv").write_text(lines[0] + "# plan: updates_allowed=many threshold=0.1\n" + lines[2])
    with pytest.raises(report.ReportError, match=r"line 2: updates_allowed='many' is not a number >= 0"):
        report.read_monitor(tmp_path / "bad.csv")
    # with the run's PMW model beside it, the report takes L from the model
    pmw.pmw.to_model().save(tmp_path / "pmw.npz")
    out = tmp_path / "report"
    result = evaluate_cli(files, out, "--model", tmp_path / "pmw.npz", "--monitor", tmp_path / "empty.csv")
    assert result.exit_code == 0, result.output
    assert load_summary(out)["monitor"]["updates_allowed"] == pmw.plan.updates
