"""synth answer --mechanism pmw --stream: one JSON query per line in, one JSON answer per line out."""

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from synth_cli.main import main
from synth.privacy.accounting import BudgetExceeded
from synth.data.reading import read
from synth.models.model import Model
from synth.engines.pmw import HALTED, LAZY, UPDATE, open_pmw
from synth.engines.pmw_practical import PracticalPMW
from synth.data.schema import Categorical, Schema
from synth.data.workload import Workload

from .conftest import REPO

SCHEMA = Schema((Categorical("sex", ("female", "male")), Categorical("smoker", ("no", "yes")),
                 Categorical("region", ("north", "south", "west"))))
QUERIES = [{"where": {"sex": "male"}}, {"where": {"sex": "male", "smoker": "yes"}},
           {"where": {"region": ["north", "west"]}, "name": "not south"}, {"where": {"smoker": "yes", "region": "west"}},
           {"where": {}}]


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(7)
    n = 4000
    sex = rng.integers(0, 2, n)
    smoker = np.where(rng.random(n) < 0.8, sex, 1 - sex)  # far from the uniform start
    region = np.where(rng.random(n) < 0.7, 2 * smoker, rng.integers(0, 3, n))
    pd.DataFrame({"sex": np.array(SCHEMA["sex"].values)[sex], "smoker": np.array(SCHEMA["smoker"].values)[smoker],
                  "region": np.array(SCHEMA["region"].values)[region]}).to_csv(tmp_path / "d.csv", index=False)
    SCHEMA.save(tmp_path / "s.json")
    return tmp_path


def lines(*items) -> str:
    return "".join((item if isinstance(item, str) else json.dumps(item)) + "\n" for item in items)


def stream(files, text, *extra):
    args = ["answer", files / "d.csv", "--schema", files / "s.json", "--mechanism", "pmw", "--epsilon", "2",
            "--stream", *extra]
    return CliRunner().invoke(main, [str(a) for a in args], input=text)


def records(result) -> list[dict]:
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_answers_come_in_order_with_their_ids(files):
    text = lines(QUERIES[0], "", {**QUERIES[1], "query_id": "smokers"}, "   ", QUERIES[2], {**QUERIES[3], "query_id": 70})
    result = stream(files, text, "--rows", "4000", "--seed", "1")
    assert result.exit_code == 0, result.output
    out = records(result)  # stdout holds only the JSON lines: progress and notes are on stderr
    assert [r["query_id"] for r in out] == [0, "smokers", 2, 70]  # blank lines are skipped, not counted
    for record in out:
        assert set(record) == {"query_id", "answer", "error_bound", "round", "epsilon_spent"}
        assert isinstance(record["answer"], float) and isinstance(record["epsilon_spent"], float)
        assert 0 < record["error_bound"] <= 4000
        assert record["round"] in {LAZY, UPDATE} and 0 <= record["answer"] <= 4000
    spent = [r["epsilon_spent"] for r in out]
    assert spent == sorted(spent) and 0 < spent[-1] <= 2
    assert "stream ended (end of input): 4 answers, 0 error lines" in result.stderr
    assert "PMW (practical) ready: L=" in result.stderr and "privacy spent: epsilon=" in result.stderr


def test_malformed_lines_get_an_error_object_and_the_stream_goes_on(files):
    text = lines("{not json", "[1, 2]", {"where": {"sexx": "male"}}, {"where": {"sex": "other"}},
                 {"where": {"sex": "male"}, "query_id": [1]}, {"where": {"sex": "male"}, "extra": 1}, QUERIES[0])
    result = CliRunner().invoke(main, ["answer", str(files / "d.csv"), "--schema", str(files / "s.json"),
                                       "--mechanism", "pmw", "--epsilon", "2", "--stream", "--rows", "4000"],
                                input=text.encode() + b"\xff\xfe\n" + lines(QUERIES[1]).encode())
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    out = records(result)
    assert [r["query_id"] for r in out] == list(range(9))
    errors = [r["error"] for r in out if "error" in r]
    assert errors == [
        "line 1: not valid JSON (Expecting property name enclosed in double quotes at column 2)",
        'line 2: expected a JSON object like {"where": {"column": "value"}}, got a list',
        "line 3: query 2: unknown column 'sexx'; columns are: sex, smoker, region",
        "line 4: query 3, column 'sex': unknown value 'other'; allowed: female, male",
        "line 5: query_id must be an integer or a string, got a list",
        "line 6: unknown key 'extra'; allowed: query_id, name, where",
        "line 8: not UTF-8 text",
    ]
    assert [set(r) for r in out if "error" in r] == [{"query_id", "error"}] * 7
    assert "answer" in out[6] and "answer" in out[8]
    assert "stream ended (end of input): 2 answers, 7 error lines" in result.stderr


def test_no_bad_line_ends_the_stream_and_ids_are_kept_short(files, monkeypatch):
    """A leading byte-order mark is not content; a 5,000-digit id, a repeated key, an over-long id
    and an over-long line each get one error object that does not echo them, and the stream goes
    on to answer the line after each."""
    from synth_cli import answer_cmd

    monkeypatch.setattr(answer_cmd, "MAX_LINE_BYTES", 8192)  # the 1 MiB limit, scaled for the test
    good = json.dumps(QUERIES[0])
    text = ("\ufeff" + good + "\n"
            + '{"query_id": ' + "7" * 5000 + ', "where": {"sex": "male"}}\n' + good + "\n"
            + '{"where": {"sex": "male"}, "where": {"sex": "female"}}\n' + good + "\n"
            + json.dumps({"query_id": "x" * 3000, "where": {}}) + "\n" + good + "\n"
            + json.dumps({"query_id": 2**70, "where": {}}) + "\n" + good + "\n"
            + json.dumps({"query_id": "y" * 10000, "where": {}}) + "\n" + good + "\n")
    result = stream(files, text, "--rows", "4000")
    assert result.exit_code == 0, result.output
    assert "bug in synth" not in result.output
    out = records(result)
    assert len(out) == 11 and [r["query_id"] for r in out] == list(range(11))
    assert ["answer" in r for r in out] == [True, False, True, False, True, False, True, False, True, False, True]
    errors = [r["error"] for r in out if "error" in r]
    assert errors[0] == "line 2: not valid JSON (a number with thousands of digits)"
    assert errors[1] == "line 4: key 'where' appears twice in one JSON object"
    assert errors[2].startswith("line 6: query_id 'xxxx") and "3,000 characters" in errors[2]
    assert "out of range" in errors[3]
    assert errors[4] == "line 10: longer than 8,192 bytes: skipped"
    assert all(len(json.dumps(r)) < 300 for r in out)  # nothing long is echoed


def test_a_query_that_runs_out_of_memory_gets_an_error_and_the_model_is_saved(files, monkeypatch):
    """A query the model cannot answer is one error line: the stream goes on and the model is saved."""
    answer = PracticalPMW.answer

    def answer_or_fail(self, query, **kwargs):
        if len(query.columns) == 2:
            raise MemoryError
        return answer(self, query, **kwargs)

    monkeypatch.setattr(PracticalPMW, "answer", answer_or_fail)
    result = stream(files, lines(QUERIES[0], QUERIES[1], QUERIES[2]), "--rows", "4000", "--save-model",
                    files / "m.npz")
    assert result.exit_code == 0, result.output
    out = records(result)
    assert ["answer" in r for r in out] == [True, False, True]
    assert out[1]["error"] == "line 2: out of memory answering this query: the stream goes on without it"
    assert Model.load(files / "m.npz").mechanism == "pmw"


def test_halted_pmw_keeps_answering_without_spending(files):
    result = stream(files, lines(*QUERIES * 2), "--rows", "4000", "--updates", "1", "--seed", "2")
    assert result.exit_code == 0, result.output
    out = records(result)
    rounds = [r["round"] for r in out]
    assert len(out) == 10 and rounds.count(UPDATE) == 1 and HALTED in rounds
    after = [r["epsilon_spent"] for r in out[rounds.index(UPDATE):]]
    assert len(set(after)) == 1 and after[0] == pytest.approx(2.0)  # L=1: the one epoch had the whole budget
    assert "PMW halted after L=1 updates: later answers come from its model" in result.stderr
    assert "1 updates of L=1" in result.stderr
    assert f"{rounds.count(HALTED)} answers came from its model (no budget spent)" in result.stderr
    assert "privacy spent: epsilon=2, delta=0 (basic composition) of epsilon=2" in result.stderr


def test_seeded_runs_repeat_and_match_the_python_api(files):
    text = lines(*QUERIES)
    first = stream(files, text, "--rows", "4000", "--seed", "3")
    second = stream(files, text, "--rows", "4000", "--seed", "3")
    assert first.exit_code == 0, first.output
    assert first.stdout == second.stdout and "NOT for release" in first.stderr
    # the same stream from Python: PMW.answer takes the workload's query dicts
    codes = read(files / "d.csv", SCHEMA).codes
    opened = open_pmw(codes, SCHEMA, 2.0, rows=4000, rng=3)
    answers = [opened.pmw.answer(query, query_id=i) for i, query in enumerate(QUERIES)]
    assert [r["answer"] for r in records(first)] == [a.value for a in answers]
    assert [r["round"] for r in records(first)] == [a.round for a in answers]
    assert records(first)[-1]["epsilon_spent"] == opened.accountant.spent().epsilon


def test_model_and_monitor_are_written_after_the_stream(files):
    result = stream(files, lines(*QUERIES), "--rows", "4000", "--seed", "4", "--save-model", files / "m.npz",
                    "--monitor", files / "kl.csv")
    assert result.exit_code == 0, result.output
    out = records(result)
    model = Model.load(files / "m.npz")
    assert model.mechanism == "pmw" and model.seeded and model.rows == 4000
    assert model.privacy["spent"]["epsilon"] == pytest.approx(out[-1]["epsilon_spent"])
    updates = sum(r["round"] == UPDATE for r in out)
    assert sum(1 for entry in model.round_log if entry["update"]) == updates
    assert (files / "kl.csv").read_text().startswith("# NON-PRIVATE")
    assert len(pd.read_csv(files / "kl.csv", comment="#")) == updates
    assert "NON-PRIVATE diagnostic" in result.stderr and "model saved to" in result.stderr
    # the release answers the stream's queries from the model file alone (post-processing)
    assert np.all(np.isfinite(model.answer(Workload.from_dict({"queries": QUERIES}, model.schema))))


def test_a_workload_only_declares_subsets(files):
    Workload.marginals(SCHEMA, 2).save(files / "w.json")
    result = stream(files, "", "--rows", "4000", "--workload", files / "w.json")
    assert result.exit_code == 0, result.output
    assert result.stdout == ""  # its queries are not answered
    # few enough subsets that L would measure each: all measured up front, no epochs
    assert "ready for the workload's 3 column subsets, each measured before the first query" in result.stderr
    assert "L=0 updates" in result.stderr
    assert "stream ended (end of input): 0 answers, 0 error lines" in result.stderr
    tested = stream(files, "", "--rows", "4000", "--workload", files / "w.json", "--updates", "2")
    assert tested.exit_code == 0, tested.output
    assert "ready for the workload's 3 column subsets: L=2 updates" in tested.stderr


def test_queries_ends_the_stream_and_the_theory_variant_needs_it(files):
    refused = stream(files, lines(*QUERIES), "--rows", "4000", "--variant", "theory")
    assert refused.exit_code == 2 and "--stream --variant theory needs --queries N" in refused.stderr
    result = stream(files, lines(*QUERIES), "--rows", "4000", "--variant", "theory", "--queries", "2",
                    "--alpha", "0.1")
    assert result.exit_code == 0, result.output
    assert len(records(result)) == 2 and "stream ended (--queries 2 answered): 2 answers" in result.stderr
    assert "PMW (theory) ready" in result.stderr


def test_an_exhausted_budget_ends_the_stream_cleanly(files, monkeypatch):
    answer = PracticalPMW.answer
    calls = []

    def spend_out(self, query, **kwargs):
        calls.append(query)
        if len(calls) == 2:
            raise BudgetExceeded("charging epsilon=0.5 would spend 2.1 of the budget 2")
        return answer(self, query, **kwargs)

    monkeypatch.setattr(PracticalPMW, "answer", spend_out)
    result = stream(files, lines(*QUERIES), "--rows", "4000", "--save-model", files / "m.npz")
    assert result.exit_code == 0, result.output
    out = records(result)
    assert len(out) == 2 and "answer" in out[0]
    assert out[1] == {"query_id": 1, "error": "line 2: budget exhausted: charging epsilon=0.5 would spend 2.1 of "
                                              "the budget 2"}
    assert "stream ended (budget exhausted): 1 answer, 1 error line" in result.stderr
    assert (files / "m.npz").exists()


@pytest.mark.parametrize("extra, message", [
    (("--exact",), "--stream works with --mechanism pmw only"),
    (("--mechanism", "pmw", "--epsilon", "1", "-o", "x.csv"), "--stream writes its answers to stdout: drop -o"),
    (("--mechanism", "pmw", "--epsilon", "1", "--plan"), "drop --stream"),
    (("--mechanism", "pmw", "--epsilon", "1", "--passes", "2"), "--passes feeds a workload file again"),
    (("--mechanism", "pmw"), "--mechanism pmw needs --epsilon"),
])
def test_bad_stream_options_fail_in_one_line(files, extra, message):
    args = ["answer", files / "d.csv", "--schema", files / "s.json", "--stream", *extra]
    result = CliRunner().invoke(main, [str(a) for a in args], input=lines(*QUERIES))
    assert result.exit_code == 2 and message in result.stderr
    assert result.stdout == "" and "Traceback" not in result.output


def test_a_workload_run_without_a_workload_answers_the_default_one(files):
    """No --workload: the Python API's default (every 3-way marginal here: 3 columns), and the
    run says so; --queries still belongs to --stream."""
    base = ["answer", str(files / "d.csv"), "--schema", str(files / "s.json"), "--exact"]
    result = CliRunner().invoke(main, [*base, "-o", str(files / "exact.csv")])
    assert result.exit_code == 0, result.output
    default = Workload.default(SCHEMA)
    assert len(default.subsets) == 1 and len(default) == SCHEMA.universe_size
    assert f"workload: every 3-way marginal of the 3 columns (1 marginals, {len(default):,} cells), the default" \
        in result.stderr
    assert len((files / "exact.csv").read_text().splitlines()) == len(default) + 1
    Workload.marginals(SCHEMA, 1).save(files / "w.json")
    result = CliRunner().invoke(main, [*base, "--workload", str(files / "w.json"), "--queries", "3"])
    assert result.exit_code == 2 and "--queries applies to --stream only" in result.stderr


def test_a_real_pipe_gets_each_answer_before_the_next_query_and_ctrl_c_ends_cleanly(files):
    """Through an OS pipe: every answer is flushed as it is made (the next query can depend on
    it), and SIGINT ends the stream with its summary and the model written."""
    command = [sys.executable, "-c", "from synth_cli.main import main; main()", "answer", str(files / "d.csv"),
               "--schema", str(files / "s.json"), "--mechanism", "pmw", "--epsilon", "2", "--rows", "4000",
               "--stream", "--quiet", "--save-model", str(files / "m.npz")]
    process = subprocess.Popen(command, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, bufsize=1)
    try:
        process.stdin.write(lines(QUERIES[0]))
        process.stdin.flush()
        first = json.loads(process.stdout.readline())
        # an adaptive choice: ask next about the larger sex
        larger = "male" if first["answer"] >= 2000 else "female"
        process.stdin.write(lines({"where": {"sex": larger, "smoker": "yes"}}))
        process.stdin.flush()
        second = json.loads(process.stdout.readline())
        assert first["query_id"] == 0 and second["query_id"] == 1
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0 and out == "", err
    assert "stream ended (interrupted): 2 answers, 0 error lines" in err and "Traceback" not in err
    assert os.path.exists(files / "m.npz")
