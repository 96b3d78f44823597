"""Property-based fuzzing of the ``synth`` command line with hypothesis.

One property for every generated input: the command either exits 0 with valid output, or
exits non-zero with exactly ONE ``Error:`` line on stderr (the last line: a message folded
onto one line), no traceback, not the catch-all "This is a bug in synth" line, and nothing
written (the output folder exactly as it was: no new file, a file passed with ``--force``
unchanged, no ``.<name>.*.tmp*`` temporary left behind).

Generators: CSV bodies under a fixed mixed schema, schema JSON, workload JSON, model-file
headers, and numeric options at their edges for every engine. Examples are derandomized (the
same inputs on every run, so CI is reproducible) and few enough to keep the file fast (about
25 s). To hunt for new bugs: ``SYNTH_FUZZ_SCALE=20 SYNTH_FUZZ_RANDOM=1 pytest this-file``.

Each bug the fuzzing found has a plain regression test at the end of the file, named after
its input.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import math
import os
import re
import signal
import tempfile
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from synth_cli.main import main

FUZZ = settings(
    # The same examples on every run, so CI is reproducible; SYNTH_FUZZ_RANDOM=1 draws new ones.
    derandomize=not os.environ.get("SYNTH_FUZZ_RANDOM"),
    deadline=None,
    database=None,
    print_blob=False,
    suppress_health_check=list(HealthCheck),
)


#: Hunting bugs: SYNTH_FUZZ_SCALE=20 runs twenty times the examples; CI runs 1.
SCALE = max(1, int(os.environ.get("SYNTH_FUZZ_SCALE", "1")))


def fuzz(examples: int) -> settings:
    return settings(FUZZ, max_examples=examples * SCALE)


#: What the catch-all handler of unexpected exceptions says (cli/_common.py, SynthGroup).
BUG_MESSAGE = "This is a bug in synth"
PREVIOUS = b"previous content, must survive a failed run\n"

# -- the fixed inputs ------------------------------------------------------------------------

COLORS = ["red", "green", "blue"]
SIZE_EDGES = [0, 10, 20, 50]
RANKS = [1, 2, 5]
NAMES = ["color", "size", "code", "rank"]
SCHEMA = {
    "version": 1,
    "columns": [
        {"name": "color", "type": "categorical", "values": COLORS},
        {"name": "size", "type": "numeric", "edges": SIZE_EDGES},
        {"name": "code", "type": "coded", "size": 4},
        {"name": "rank", "type": "categorical", "values": RANKS},
    ],
}
#: Query 0 counts every row: every other answer is at most its answer.
WORKLOAD = {
    "queries": [
        {"where": {}},
        {"name": "reds", "where": {"color": "red"}},
        {"where": {"code": [1, 2], "size": {"range": [0, 20]}}},
        {"where": {"rank": 5}},
    ]
}
#: A two-marginal workload: keeps MWEM's final fit short.
SMALL_WORKLOAD = {"queries": [{"where": {"color": "red"}}, {"where": {"code": [1, 2], "size": {"range": [0, 20]}}}]}
DATA_ROWS = [
    ["red", "1", "0", "1"], ["green", "15", "3", "2"], ["blue", "30", "2", "5"], ["red", "49.5", "1", "5"],
    ["green", "0", "0", "1"], ["blue", "50", "3", "2"], ["red", "12", "2", "1"], ["blue", "7", "1", "5"],
]


def csv_text(header, rows) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue()


DATA = csv_text(NAMES, DATA_ROWS)


@pytest.fixture(scope="module")
def fixed(tmp_path_factory) -> dict[str, Path]:
    """Schema, workloads, data and one valid model, shared by every example (read-only)."""
    folder = tmp_path_factory.mktemp("fuzz-fixed")
    paths = {
        "schema": folder / "schema.json",
        "workload": folder / "workload.json",
        "small_workload": folder / "small-workload.json",
        "data": folder / "data.csv",
        "model": folder / "model.npz",
    }
    paths["schema"].write_text(json.dumps(SCHEMA), encoding="utf-8")
    paths["workload"].write_text(json.dumps(WORKLOAD), encoding="utf-8")
    paths["small_workload"].write_text(json.dumps(SMALL_WORKLOAD), encoding="utf-8")
    paths["data"].write_text(DATA, encoding="utf-8")
    result = invoke("generate", paths["data"], "--schema", paths["schema"], "--workload", paths["small_workload"],
                    "--epsilon", 1, "--rows", len(DATA_ROWS), "--seed", 1, "-q", "--model", paths["model"],
                    "-o", folder / "synthetic.csv")
    assert result.exit_code == 0, result.stderr
    return paths


# -- running a command and checking the property ---------------------------------------------


def invoke(*args: object):
    try:
        runner = CliRunner(mix_stderr=False)  # click < 8.2
    except TypeError:
        runner = CliRunner()  # click >= 8.2 keeps stderr apart
    return runner.invoke(main, [str(a) for a in args], prog_name="synth", env={"SYNTH_DEBUG": None})


def snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every entry of ``folder`` (recursively) and its bytes (None for a folder)."""
    return {str(p.relative_to(folder)): (None if p.is_dir() else p.read_bytes()) for p in sorted(folder.rglob("*"))}


def stray_temporaries(folder: Path) -> list[str]:
    return [p.name for p in folder.rglob(".*") if ".tmp" in p.name]


def check(result, out_dir: Path, before: dict[str, bytes | None], validate=None) -> str | None:
    """The property. Returns the error line of a failed run (None for a success)."""
    stdout, stderr = result.stdout, result.stderr
    assert "Traceback" not in stdout + stderr, stderr
    assert BUG_MESSAGE not in stderr, stderr
    assert stray_temporaries(out_dir) == [], f"temporary files left behind: {stray_temporaries(out_dir)}"
    if result.exit_code == 0:
        assert result.exception is None, repr(result.exception)
        assert not [line for line in stderr.splitlines() if line.startswith("Error:")], stderr
        if validate is not None:
            validate(result)
        return None
    # Any exception but SystemExit would have been a traceback outside the CliRunner.
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    lines = [line for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("Error:")]
    assert len(errors) == 1, f"expected one Error: line, got:\n{stderr}"
    assert lines[-1] == errors[0], f"the error message runs over several lines:\n{stderr}"
    assert errors[0][len("Error:"):].strip(), stderr
    assert stdout == "", f"a failed run wrote to stdout: {stdout[:200]!r}"
    assert snapshot(out_dir) == before, "a failed run changed the output folder"
    return errors[0]


class Workspace:
    """A fresh input folder and output folder for one example (hypothesis reruns the body)."""

    def __enter__(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="synth-fuzz-")
        root = Path(self._tmp.name)
        self.inputs, self.outputs = root / "in", root / "out"
        self.inputs.mkdir()
        self.outputs.mkdir()
        return self

    def __exit__(self, *exc):
        self._tmp.cleanup()

    def output(self, name: str, existing: bool) -> tuple[Path, list[str]]:
        """The output path ``name``; with ``existing`` it already holds PREVIOUS and ``--force`` is passed."""
        path = self.outputs / name
        if existing:
            path.write_bytes(PREVIOUS)
            return path, ["--force"]
        return path, []

    def run(self, *args: object, validate=None) -> str | None:
        before = snapshot(self.outputs)
        return check(invoke(*args), self.outputs, before, validate)


# -- validators of a successful run's output --------------------------------------------------


def read_csv_file(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def check_answers(path: Path, queries: int, *, counts: bool, noisy: bool = False) -> list[float]:
    """An answers CSV: one finite answer per query, in order; >= 0 unless ``noisy`` (PMW
    releases noisy measurements, which may be negative)."""
    rows = read_csv_file(path)
    assert len(rows) == queries
    assert [int(r["query_id"]) for r in rows] == list(range(queries))
    answers = [float(r["answer"]) for r in rows]
    assert all(math.isfinite(a) and (noisy or a >= 0) for a in answers), answers
    if counts:
        assert all(a == int(a) for a in answers), answers
    return answers


def check_exact_answers(path: Path, workload: dict) -> None:
    answers = check_answers(path, len(workload["queries"]), counts=True)
    if workload is WORKLOAD:  # query 0 counts every row, the others a part of them
        assert answers[0] >= 1
        assert all(a <= answers[0] for a in answers), answers


def check_synthetic(path: Path, rows: int | None = None, schema: dict = SCHEMA) -> None:
    """A synthetic table under ``schema``: its columns in order, every value inside the schema."""
    with open(path, newline="", encoding="utf-8") as handle:
        table = list(csv.reader(handle))
    names = [c["name"] for c in schema["columns"]]
    assert table[0] == names
    body = table[1:]
    if rows is not None:
        assert len(body) == rows
    for row in body:
        assert len(row) == len(names)
        for column, value in zip(schema["columns"], row):
            if column["type"] == "categorical":
                assert value in {str(v) for v in column["values"]} or float(value) in {
                    float(v) for v in column["values"] if not isinstance(v, str)}, (column, value)
            elif column["type"] == "numeric":
                assert column["edges"][0] <= float(value) <= column["edges"][-1], (column, value)
            else:
                assert 0 <= int(value) < column["size"], (column, value)


def rarely(draw, one_in: int) -> bool:
    """True about once in ``one_in`` draws (hypothesis leans to a strategy's first, simplest value:
    here False, so the rare damage stays rare)."""
    return draw(st.sampled_from([False] * (one_in - 1) + [True]))


# -- 1. CSV bodies under a fixed schema -------------------------------------------------------

VALID_CELLS = {
    "color": COLORS,
    "size": ["0", "5", "9.5", "10", "19.999", "20", "49.99", "50", "-3", "75", "1e1", " 12 "],
    "code": ["0", "1", "2", "3", "3.0", "2.000"],
    "rank": ["1", "2", "5", "5.0", "1.0"],
}
BAD_CELLS = [
    "", " ", "purple", "Red", "RED ", "nan", "NaN", "-nan", "inf", "-inf", "Infinity", "1e400", "-1e400", "1e308",
    "9" * 40, "-" + "9" * 40, "9" * 400, "0x10", "1_000", "1,5", '"', '""', 'a"b', "x,y", "line\nbreak", "\r", "é",
    "\u00a0", "\x00", "null", "None", "true", "False", "-1", "4", "2.5", "3.000000001", "1e-320", "5e-324", "+2", "٣",
]


@st.composite
def csv_bodies(draw) -> bytes:
    """A CSV file's bytes: mostly near-valid under SCHEMA, with every kind of damage."""
    shape = draw(st.sampled_from(["rows"] * 8 + ["empty", "header-only", "blank", "bytes"]))
    if shape == "empty":
        return b""
    if shape == "blank":
        return draw(st.sampled_from([b"\n", b"\n\n", b" \n", b"\r\n", b","]))
    if shape == "bytes":
        return draw(st.binary(max_size=40))
    header = list(NAMES)
    damage = draw(st.sampled_from(["none"] * 6 + ["shuffle", "drop", "extra", "duplicate", "rename", "blank"]))
    if damage == "shuffle":
        header = draw(st.permutations(header))
    elif damage == "drop":
        header.pop(draw(st.integers(0, len(header) - 1)))
    elif damage == "extra":
        header.insert(draw(st.integers(0, len(header))), draw(st.sampled_from(["extra", "Color", "", " size"])))
    elif damage == "duplicate":
        header.append(draw(st.sampled_from(NAMES)))
    elif damage == "rename":
        header[draw(st.integers(0, len(header) - 1))] = draw(st.sampled_from(["Color", "size ", "", "codé"]))
    elif damage == "blank":
        header = [""]
    rows = []
    for _ in range(0 if shape == "header-only" else draw(st.integers(1, 6))):
        width = len(header) + draw(st.sampled_from([0] * 8 + [-1, 1, 3]))
        row = []
        for j in range(max(width, 0)):
            name = header[j] if j < len(header) else None
            kind = draw(st.integers(0, 9))
            if kind < 7 and name in VALID_CELLS:
                row.append(draw(st.sampled_from(VALID_CELLS[name])))
            elif kind < 9:
                row.append(draw(st.sampled_from(BAD_CELLS)))
            else:
                row.append(draw(st.text(max_size=5)))
        rows.append(row)
    newline = draw(st.sampled_from(["\n", "\n", "\r\n", "\r"]))
    if draw(st.booleans()):  # properly quoted
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator=newline)
        writer.writerow(header)
        writer.writerows(rows)
        text = buffer.getvalue()
    else:  # raw: commas, quotes and newlines inside cells break the rows
        text = newline.join(",".join(r) for r in [header] + rows) + (newline if draw(st.booleans()) else "")
    data = text.encode("utf-8", errors="surrogatepass")
    if rarely(draw, 10):
        data = b"\xef\xbb\xbf" + data
    if rarely(draw, 10):
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.sampled_from([b"\xff", b"\xc3(", b"\x80\x80", b"\xfe\xff"])) + data[at:]
    return data


@fuzz(80)
@given(body=csv_bodies(), drop=st.booleans(), existing=st.booleans())
def test_fuzz_csv_answer_exact(fixed, body, drop, existing):
    with Workspace() as ws:
        data = ws.inputs / "data.csv"
        data.write_bytes(body)
        out, force = ws.output("answers.csv", existing)
        ws.run("answer", data, "--schema", fixed["schema"], "--workload", fixed["workload"], "--exact", "-q",
               "-o", out, *force, *(["--bad-rows", "drop"] if drop else []),
               validate=lambda r: check_exact_answers(out, WORKLOAD))


@fuzz(40)
@given(body=csv_bodies(), drop=st.booleans(), existing=st.booleans(), rows=st.sampled_from([None, 1, 5, 30]))
def test_fuzz_csv_generate_mwem(fixed, body, drop, existing, rows):
    with Workspace() as ws:
        data = ws.inputs / "data.csv"
        data.write_bytes(body)
        out, force = ws.output("synthetic.csv", existing)
        model = ws.outputs / "model.npz"

        def valid(result):
            check_synthetic(out, rows)
            assert model.is_file(), "the table was written without its model"

        ws.run("generate", data, "--schema", fixed["schema"], "--workload", fixed["small_workload"],
               "--mechanism", "mwem", "--epsilon", "0.5", "--seed", 3, "-q", "-o", out, "--model", model, *force,
               *(["--rows", rows] if rows else []), *(["--bad-rows", "drop"] if drop else []), validate=valid)


# -- 2. schema JSON ---------------------------------------------------------------------------

#: An integer JSON allows and no float holds (past 1.8e308).
HUGE = 2**1100
json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8),
    st.sampled_from([0, 1, -1, 2**63, 10**20, HUGE, -HUGE, 1.5, 1e308, "", "x", "categorical", "numeric", "coded"]),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


def dumps(value) -> str:
    """JSON text; NaN and Infinity written as Python's json does (and reads back)."""
    return json.dumps(value, allow_nan=True, ensure_ascii=False)


def _mutate_column(draw, column: dict) -> None:
    how = draw(st.sampled_from(["wrong-type", "delete", "unknown-key", "kind", "content"]))
    if not column and how in ("wrong-type", "delete"):
        how = "unknown-key"
    if how == "wrong-type":
        column[draw(st.sampled_from(sorted(column)))] = draw(json_values)
    elif how == "delete":
        del column[draw(st.sampled_from(sorted(column)))]
    elif how == "unknown-key":
        column[draw(st.sampled_from(["label", "values", "edges", "size", "Type"]))] = draw(json_scalars)
    elif how == "kind":
        column["type"] = draw(st.sampled_from(["categorical", "numeric", "coded", "Coded", "int", ""]))
    elif column.get("type") == "categorical":
        column["values"] = draw(st.sampled_from([
            [], ["a", "a"], [1, 1.0], ["1", 1], [None], [["nested"]], [{"a": 1}], [True, False], [float("nan")],
            ["x"] * 3, list(range(1000)), [""], ["ok", 2**70], [1e308, -1e308], [1, HUGE]]))
    elif column.get("type") == "numeric":
        column["edges"] = draw(st.sampled_from([
            [], [1], [5, 1], [0, 0, 1], [0, float("nan")], [0, float("inf")], [-1e308, 1e308], [0, 1e-320],
            [0, 2**70], [0, HUGE], [-HUGE, 0], ["0", "1"], [0, True], [0, 1, 0.5], list(range(2000)), [[0, 1]],
            [0, None]]))
    else:
        column["size"] = draw(st.sampled_from([0, -1, 1, 1.0, 2.5, "3", True, None, 2**63, 2**64, 10**20, 10**6, HUGE,
                                               float("nan"), float("inf"), [3]]))


@st.composite
def near_schemas(draw) -> dict:
    """SCHEMA with one to three mutations (wrong types, bad content, unknown keys, ...)."""
    schema = json.loads(json.dumps(SCHEMA))
    for _ in range(draw(st.integers(1, 3))):
        how = draw(st.sampled_from(["column"] * 4 + ["version", "columns", "rows", "inferred", "unknown",
                                                     "duplicate", "description"]))
        columns = schema.get("columns")
        if how == "column" and isinstance(columns, list) and columns:
            column = columns[draw(st.integers(0, len(columns) - 1))]
            if isinstance(column, dict):
                _mutate_column(draw, column)
        elif how == "version":
            schema["version"] = draw(st.sampled_from([2, 0, "1", 1.0, True, None, [1]]))
        elif how == "columns":
            schema["columns"] = draw(st.sampled_from([[], None, {}, "color", [1, 2], [[]], [{}]]))
        elif how == "rows":
            schema["rows"] = draw(st.sampled_from([-1, 0, 1.5, 10.0, "8", True, None, 2**63, 10**30, HUGE, 1e308,
                                                   float("nan"), float("inf"), 8, 100]))
        elif how == "inferred":
            schema["inferred"] = draw(st.sampled_from([1, 0, "yes", None, True, False]))
        elif how == "unknown":
            schema[draw(st.sampled_from(["colums", "Rows", "extra", ""]))] = draw(json_scalars)
        elif how == "duplicate" and isinstance(columns, list) and columns:
            columns.append(json.loads(json.dumps(columns[draw(st.integers(0, len(columns) - 1))])))
        elif how == "description":
            schema["description"] = draw(json_values)
    return schema


@st.composite
def schema_texts(draw) -> str:
    """Schema file text: random JSON, raw junk, near-valid rich schemas and private-pgm domains."""
    kind = draw(st.sampled_from(["random", "junk", "pgm"] + ["near"] * 5))
    if kind == "random":
        return dumps(draw(json_values))
    if kind == "junk":
        return draw(st.sampled_from(["", " ", "{", "[1,", "{\"columns\": [}", "nul", "\ufeff{}", "{}{}",
                                     '{"a": 1, "a": 2}', "[" * 3000 + "]" * 3000, "1e999"]))
    if kind == "pgm":
        domain = {"level": 5, "grade": 4}
        key = draw(st.sampled_from(["level", "grade", "", "new"]))
        domain[key] = draw(st.sampled_from([2.5, 3.0, 0, -1, True, None, "4", 2**63, 10**20, HUGE, 1e300,
                                            float("nan"), float("inf"), [4], {"size": 4}, 1]))
        return dumps(domain)
    text = dumps(draw(near_schemas()))
    if rarely(draw, 10):  # a duplicate key, which json.loads would silently take
        text = text.replace('"version": 1', '"version": 1, "version": 1', 1)
    return text


def run_schema_command(ws: Workspace, command: str, schema: Path, fixed: dict, existing: bool) -> None:
    if command == "show":
        ws.run("schema", "show", schema, validate=lambda r: "universe size:" in r.stdout or pytest.fail(r.stdout))
    elif command.startswith("marginals"):
        out, force = ws.output("workload.json", existing)
        way = command[-1]

        def valid(result):
            from synth.data.schema import Schema
            from synth.data.workload import Workload

            assert len(Workload.load(out, Schema.load(schema))) >= 1

        ws.run("workload", "marginals", "--schema", schema, "--way", way, "--max-queries", 2000, "-o", out, *force,
               validate=valid)
    else:
        out, force = ws.output("answers.csv", existing)
        ws.run("answer", fixed["data"], "--schema", schema, "--workload", fixed["all_rows"], "--exact", "-q",
               "-o", out, *force, validate=lambda r: check_answers(out, 1, counts=True))


@pytest.fixture(scope="module")
def fixed_all_rows(fixed, tmp_path_factory) -> dict[str, Path]:
    """``fixed`` plus a workload valid under any schema: one query counting every row."""
    path = tmp_path_factory.mktemp("fuzz-all-rows") / "all-rows.json"
    path.write_text(json.dumps({"queries": [{"where": {}}]}), encoding="utf-8")
    return {**fixed, "all_rows": path}


@fuzz(80)
@given(text=schema_texts(), command=st.sampled_from(["show", "marginals 1", "marginals 2", "answer"]),
       existing=st.booleans())
def test_fuzz_schema_files(fixed_all_rows, text, command, existing):
    with Workspace() as ws:
        schema = ws.inputs / "schema.json"
        schema.write_text(text, encoding="utf-8", errors="surrogatepass")
        run_schema_command(ws, command, schema, fixed_all_rows, existing)


# -- 3. workload JSON -------------------------------------------------------------------------

CONDITIONS = {
    "color": ["red", ["red", "blue"], {"range": ["red", "blue"]}, {"range": ["blue", "red"]}, "purple", ["red", "x"],
              1, [], None, True, {"range": ["red"]}, {"range": "red"}, {"values": ["red"]}, {"range": ["red", 1]},
              ["red", "red"], ["red"] * 5000],
    "size": [5, 10, 50, -1, 51, {"range": [0, 20]}, {"range": [20, 0]}, {"range": [1, 2]}, {"range": [0, 1e308]},
             {"range": [float("-inf"), float("inf")]}, {"range": [float("nan"), 1]}, float("nan"), float("inf"),
             "5", [0, 10, 20], True, {"range": [0, 20, 30]}, {"range": [None, 1]}, 2**70, HUGE, -HUGE,
             {"range": [0, HUGE]}, {"range": [-HUGE, 20]}],
    "code": [0, 3, 4, -1, 1.5, 2.0, "1", True, [0, 1, 2, 3], {"range": [1, 2]}, {"range": [2, 1]},
             {"range": [-5, 100]}, {"range": [4, 9]}, {"range": [0.5, 2]}, 2**63, 2**64, -(2**63) - 1, 1e308,
             float("nan"), float("inf"), HUGE, {"range": [0, HUGE]}, {"range": [0, float("inf")]}, [[1]],
             {"range": [True, 2]}],
    "rank": [1, 5, 5.0, "5", 3, [1, 2], {"range": [1, 5]}, {"range": [5, 1]}, True, 1e-320, float("inf"), HUGE,
             {"range": [1, HUGE]}],
}


@st.composite
def workload_texts(draw) -> str:
    kind = draw(st.sampled_from(["random", "junk"] + ["near"] * 6))
    if kind == "random":
        return dumps(draw(json_values))
    if kind == "junk":
        return draw(st.sampled_from(["", "{", "[]", '{"queries": []}', '{"queries": {}}', '{"queries": null}',
                                     '{"queries": [{"where": {}}], "queries": []}',
                                     '{"queries": [{"where": {"code": 1, "code": 2}}]}',
                                     '{"queries": [' + '{"where": {}},' * 3 + "]}", "[" * 5000 + "]" * 5000,
                                     '{"queries": [{"where": {}}]}\x00']))
    queries = []
    for _ in range(draw(st.integers(0, 4))):
        shape = draw(st.sampled_from(["ok"] * 4 + ["garbage", "name", "extra", "where"]))
        if shape == "garbage":
            queries.append(draw(json_values))
            continue
        where = {}
        for name in draw(st.lists(st.sampled_from(NAMES + ["colour", "", "Size"]), max_size=3, unique=True)):
            pool = CONDITIONS.get(name, ["red", 1])
            where[name] = draw(json_values) if rarely(draw, 5) else draw(st.sampled_from(pool))
        query = {"where": where}
        if shape == "name":
            query["name"] = draw(json_scalars)
        elif shape == "extra":
            query[draw(st.sampled_from(["filter", "Where", "weight"]))] = draw(json_scalars)
        elif shape == "where":
            query["where"] = draw(json_values)
        queries.append(query)
    if rarely(draw, 10):
        queries = queries * 1000  # a large list
    workload = {"queries": queries}
    if rarely(draw, 6):
        workload[draw(st.sampled_from(["description", "name", "version"]))] = draw(json_values)
    return dumps(workload)


@fuzz(80)
@given(text=workload_texts(), existing=st.booleans())
def test_fuzz_workload_answer_exact(fixed, text, existing):
    with Workspace() as ws:
        workload = ws.inputs / "workload.json"
        workload.write_text(text, encoding="utf-8", errors="surrogatepass")
        out, force = ws.output("answers.csv", existing)

        def valid(result):
            check_answers(out, len(json.loads(text)["queries"]), counts=True)

        ws.run("answer", fixed["data"], "--schema", fixed["schema"], "--workload", workload, "--exact", "-q",
               "-o", out, *force, validate=valid)


@fuzz(30)
@given(text=workload_texts(), existing=st.booleans())
def test_fuzz_workload_generate(fixed, text, existing):
    with Workspace() as ws:
        workload = ws.inputs / "workload.json"
        workload.write_text(text, encoding="utf-8", errors="surrogatepass")
        out, force = ws.output("synthetic.csv", existing)
        ws.run("generate", fixed["data"], "--schema", fixed["schema"], "--workload", workload, "--epsilon", 1,
               "--rows", len(DATA_ROWS), "--rounds", 2, "--seed", 5, "-q", "-o", out, *force,
               validate=lambda r: check_synthetic(out, len(DATA_ROWS)))


# -- 4. model-file headers --------------------------------------------------------------------


def read_model(path: Path) -> tuple[dict, np.ndarray]:
    with np.load(path, allow_pickle=False) as archive:
        return json.loads(archive["meta"].tobytes().decode("utf-8")), archive["distribution"]


def write_model(path: Path, header: dict | str, distribution: np.ndarray, *, checksum: bool = True) -> None:
    """A model file with this header; ``checksum`` recomputes the distribution's SHA-256 in it."""
    if isinstance(header, dict) and checksum:
        header = dict(header)
        header["distribution_sha256"] = hashlib.sha256(
            np.ascontiguousarray(distribution, dtype="<f8").tobytes()).hexdigest()
    text = header if isinstance(header, str) else dumps(header)
    meta = np.frombuffer(text.encode("utf-8", errors="surrogatepass"), dtype=np.uint8)
    with open(path, "wb") as handle:
        np.savez_compressed(handle, distribution=distribution, meta=meta)


HEADER_VALUES = {
    "format": ["synth-model", "synth", "", None, 1],
    "format_version": [1, 2, 3, 0, "2", 2.0, True, None, 2**70],
    "mechanism": ["mwem", "pmw", "blr", "", "magic", None, 3, ["mwem"]],
    "rows": [0, 1, 8, 8.5, -1, 1e308, 2**70, HUGE, float("nan"), float("inf"), "8", True, None, 1e-300],
    "rows_public": [True, False, 1, "true", None],
    "parameters": [{}, {"updates": "x"}, {"rounds": -1}, [], None, "p"],
    "privacy": [{}, {"spent": {"epsilon": float("nan")}}, {"spent": {"epsilon": -1}}, {"spent": "x"},
                {"spent": {"epsilon": "1"}}, {"spent": {"epsilon": float("inf"), "delta": 0}},
                {"budget": {"delta": -1}}, {"spent": {}}, {"spent": {"epsilon": 1e308}}, [], None],
    "round_log": [[], [1, 2], {}, None, [{"round": "x"}]],
    "seeded": [True, False, 0, "no", None],
    "library_version": ["0.0.1", "", 1, None],
    "distribution_sha256": ["0" * 64, "", "X" * 64, 123, None],
}


@st.composite
def model_variants(draw, base: tuple[dict, np.ndarray]):
    """(header or header text, distribution, recompute checksum) for a mutated model file."""
    header, distribution = json.loads(json.dumps(base[0])), base[1].copy()
    kind = draw(st.sampled_from(["field"] * 5 + ["delete", "extra", "schema", "whole", "distribution"]))
    checksum = not rarely(draw, 5)
    if kind == "field":
        for _ in range(draw(st.integers(1, 2))):
            key = draw(st.sampled_from(sorted(HEADER_VALUES)))
            header[key] = draw(json_values) if rarely(draw, 4) else draw(st.sampled_from(HEADER_VALUES[key]))
            if key == "distribution_sha256":
                checksum = False
    elif kind == "delete":
        del header[draw(st.sampled_from(sorted(header)))]
        checksum = checksum and "distribution_sha256" in header
    elif kind == "extra":
        header[draw(st.sampled_from(["notes", "Format", "epsilon", ""]))] = draw(json_scalars)
    elif kind == "schema":
        header["schema"] = draw(near_schemas()) if draw(st.booleans()) else draw(json_values)
    elif kind == "whole":
        text = draw(st.sampled_from(["", "[]", "null", "{", '{"format": "synth-model"}', "\udcff"]))
        return text, distribution, False
    else:
        how = draw(st.sampled_from(["nan", "negative", "zero", "float32", "int", "short", "2d", "unnormalized",
                                    "huge"]))
        if how == "nan":
            distribution[0] = np.nan
        elif how == "negative":
            distribution[0] = -distribution.max()
        elif how == "zero":
            distribution[:] = 0
        elif how == "float32":
            distribution = distribution.astype(np.float32)
        elif how == "int":
            distribution = (distribution * 100).astype(np.int64)
        elif how == "short":
            distribution = distribution[:-1]
        elif how == "2d":
            distribution = distribution.reshape(1, -1)
        elif how == "unnormalized":
            distribution = distribution * 3
        else:
            distribution[:] = 1e308
    return header, distribution, checksum


@pytest.fixture(scope="module")
def base_model(fixed) -> tuple[dict, np.ndarray]:
    return read_model(fixed["model"])


@fuzz(80)
@given(data=st.data(), command=st.sampled_from(["answer", "sample", "sample-rows"]), existing=st.booleans())
def test_fuzz_model_headers(fixed, base_model, data, command, existing):
    header, distribution, checksum = data.draw(model_variants(base_model))
    with Workspace() as ws:
        model = ws.inputs / "model.npz"
        write_model(model, header, distribution, checksum=checksum)
        if command == "answer":
            out, force = ws.output("answers.csv", existing)
            ws.run("answer", "--model", model, "--workload", fixed["workload"], "-o", out, *force,
                   validate=lambda r: check_answers(out, len(WORKLOAD["queries"]), counts=False))
        else:
            out, force = ws.output("synthetic.csv", existing)
            rows = ["--rows", 7] if command == "sample-rows" else []
            ws.run("sample", "--model", model, "--seed", 2, "-q", "-o", out, *force, *rows,
                   validate=lambda r: check_synthetic(out, 7 if rows else None))


@fuzz(15)
@given(data=st.data())
def test_fuzz_model_headers_evaluate(fixed, base_model, data):
    header, distribution, checksum = data.draw(model_variants(base_model))
    with Workspace() as ws:
        model = ws.inputs / "model.npz"
        write_model(model, header, distribution, checksum=checksum)
        report = ws.outputs / "report"
        ws.run("evaluate", fixed["data"], "--schema", fixed["schema"], "--workload", fixed["workload"],
               "--model", model, "-q", "-o", report,
               validate=lambda r: (report / "summary.json").is_file() or pytest.fail("no summary.json"))


# -- 5. numeric options at their edges --------------------------------------------------------

EDGE_VALUES = ["0", "-1", "1e-300", "1e300", "nan", "inf", "-inf", "abc", "", " ", str(2**63), str(2**64), str(HUGE),
               str(-(2**63) - 1), "1e-6", "1e-7", "0.5", "1", "2", "3", "0.999999", "1000", "1001", "1.5", "1e3",
               "0x10", "5e-324", "-0"]

#: Per engine: its base arguments (a run that succeeds) and the options it takes.
ENGINES = {
    "generate mwem": (["--mechanism", "mwem", "--epsilon", "1"],
                      ["--epsilon", "--rows", "--sample-rows", "--count-epsilon", "--rounds", "--passes",
                       "--select-share", "--beta"]),
    "generate pmw": (["--mechanism", "pmw", "--variant", "theory", "--epsilon", "100", "--rows", "1000",
                      "--sample-rows", "20"],
                     ["--epsilon", "--delta", "--rows", "--sample-rows", "--count-epsilon", "--alpha", "--beta",
                      "--updates", "--passes"]),
    "generate blr": (["--mechanism", "blr", "--epsilon", "1", "--max-net", "10000"],
                     ["--epsilon", "--rows", "--sample-rows", "--count-epsilon", "--net-size", "--alpha", "--beta",
                      "--max-net"]),
    "generate blr sampled": (["--mechanism", "blr", "--net", "sampled", "--epsilon", "1", "--candidates", "50"],
                             ["--epsilon", "--rows", "--net-size", "--candidates", "--alpha", "--beta"]),
    "answer pmw": (["--mechanism", "pmw", "--variant", "theory", "--epsilon", "100", "--rows", "1000"],
                   ["--epsilon", "--delta", "--rows", "--count-epsilon", "--alpha", "--beta", "--updates",
                    "--passes"]),
    "answer pmw plan": (["--mechanism", "pmw", "--variant", "theory", "--epsilon", "100", "--rows", "1000", "--plan"],
                        ["--epsilon", "--delta", "--rows", "--alpha", "--beta", "--updates", "--passes"]),
    "answer pmw practical": (["--mechanism", "pmw", "--epsilon", "100", "--rows", "1000"],
                             ["--epsilon", "--delta", "--rows", "--count-epsilon", "--alpha", "--beta", "--updates",
                              "--passes"]),
    "answer pmw practical plan": (["--mechanism", "pmw", "--epsilon", "100", "--rows", "1000", "--plan"],
                                  ["--epsilon", "--delta", "--rows", "--alpha", "--beta", "--updates", "--passes"]),
    "sample": ([], ["--rows"]),
}


def _with_option(base: list[str], option: str, value: str) -> list[str]:
    """``base`` with ``option`` set to ``value`` (replacing its value in ``base`` if there)."""
    args = list(base)
    if option in args:
        args[args.index(option) + 1] = value
        return args
    return args + [option, value]


@st.composite
def numeric_cases(draw):
    engine = draw(st.sampled_from(sorted(ENGINES)))
    base, options = ENGINES[engine]
    option = draw(st.sampled_from(options))
    return engine, _with_option(base, option, draw(st.sampled_from(EDGE_VALUES)))


def run_engine(ws: Workspace, fixed: dict, engine: str, args: list[str], existing: bool) -> str | None:
    if engine == "sample":
        out, force = ws.output("synthetic.csv", existing)
        return ws.run("sample", "--model", fixed["model"], "--seed", 4, "-q", "-o", out, *force, *args,
                      validate=lambda r: check_synthetic(out))
    command = engine.split()[0]
    if command == "generate":
        out, force = ws.output("synthetic.csv", existing)

        def valid(result):  # a run that succeeded took --sample-rows as an integer
            check_synthetic(out, int(args[args.index("--sample-rows") + 1]) if "--sample-rows" in args else None)

        return ws.run("generate", fixed["data"], "--schema", fixed["schema"], "--workload", fixed["small_workload"],
                      "--seed", 4, "-q", "-o", out, *force, *args, validate=valid)
    if "--plan" in args:
        return ws.run("answer", "--schema", fixed["schema"], "--workload", fixed["workload"], *args,
                      validate=lambda r: "L=" in r.stdout or "updates" in r.stdout or pytest.fail(r.stdout))
    out, force = ws.output("answers.csv", existing)
    return ws.run("answer", fixed["data"], "--schema", fixed["schema"], "--workload", fixed["workload"],
                  "--seed", 4, "-q", "-o", out, *force, *args,
                  validate=lambda r: check_answers(out, len(WORKLOAD["queries"]), counts=False, noisy=True))


@fuzz(150)
@given(case=numeric_cases(), existing=st.booleans())
def test_fuzz_numeric_options(fixed, case, existing):
    engine, args = case
    with Workspace() as ws:
        run_engine(ws, fixed, engine, args, existing)


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_every_engine_base_run_succeeds(fixed, engine):
    """The numeric property's base runs work, so its successes are real successes."""
    with Workspace() as ws:
        assert run_engine(ws, fixed, engine, ENGINES[engine][0], existing=False) is None


# -- regression tests: one per bug the fuzzing found -------------------------------------------


@contextlib.contextmanager
def time_limit(seconds: int):
    """Fail, rather than hang, a regression test of an input that once ran forever."""

    class Expired(BaseException):  # not an Exception: nothing on the way may turn it into a message
        pass

    def expire(signum, frame):
        raise Expired(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def failure(ws: Workspace, *args: object) -> str:
    """The one Error: line of a run that must fail cleanly (the property, then the message)."""
    line = ws.run(*args)
    assert line is not None, "the command succeeded"
    return line


def answer_exact(ws: Workspace, fixed: dict, data: Path, *extra: object) -> str | None:
    return ws.run("answer", data, "--schema", fixed["schema"], "--workload", fixed["workload"], "--exact", "-q",
                  "-o", ws.outputs / "answers.csv", *extra)


@pytest.mark.parametrize("drop", [False, True], ids=["bad-rows-error", "bad-rows-drop"])
def test_csv_with_a_quote_never_closed_in_its_first_rows(fixed, drop):
    # pandas tokenizes the first rows when the reader is made: its ParserError escaped the
    # handlers around next(reader) and showed as "unexpected ParserError ... a bug in synth".
    with Workspace() as ws:
        data = ws.inputs / "quote.csv"
        data.write_bytes(b'\xef\xbb\xbfcolor,size,code,rank\nred,",0\nred,0,0,1\n')
        line = answer_exact(ws, fixed, data, *(["--bad-rows", "drop"] if drop else []))
        assert line is not None
        assert re.search(r"quote\.csv: malformed CSV: data row 1: a quoted field opens with '\"' but is never "
                         r"closed; close it, or write a '\"' inside a quoted field as '\"\"'$", line), line


def test_csv_whose_label_column_is_empty_in_every_row(fixed):
    # No label at all gave pandas a categorical with no categories: indexing it raised an IndexError.
    with Workspace() as ws:
        data = ws.inputs / "empty-labels.csv"
        data.write_text("color,size,code,rank\n,0,0,1\n,5,1,2\n", encoding="utf-8")
        line = failure(ws, "answer", data, "--schema", fixed["schema"], "--workload", fixed["workload"], "--exact",
                       "-q", "-o", ws.outputs / "answers.csv")
        assert re.search(r"empty-labels\.csv: row 1, column 'color': missing value", line), line
        line = failure(ws, "answer", data, "--schema", fixed["schema"], "--workload", fixed["workload"], "--exact",
                       "-q", "--bad-rows", "drop", "-o", ws.outputs / "answers.csv")
        assert "no row fits the schema" in line, line


def test_csv_with_some_label_cells_empty_still_counts_the_others(fixed):
    with Workspace() as ws:
        data = ws.inputs / "some-empty.csv"
        data.write_text("color,size,code,rank\n,0,0,1\nred,5,1,5\n", encoding="utf-8")
        out = ws.outputs / "answers.csv"
        assert ws.run("answer", data, "--schema", fixed["schema"], "--workload", fixed["workload"], "--exact", "-q",
                      "--bad-rows", "drop", "-o", out) is None
        assert [float(r["answer"]) for r in read_csv_file(out)] == [1, 1, 1, 1]


def test_schema_column_whose_type_is_a_list(fixed):
    # "type": [] is unhashable: the membership test raised a TypeError.
    schema = json.loads(json.dumps(SCHEMA))
    schema["columns"][1]["type"] = []
    with Workspace() as ws:
        path = ws.inputs / "schema.json"
        path.write_text(json.dumps(schema), encoding="utf-8")
        line = failure(ws, "schema", "show", path)
        assert re.search(r"schema\.json: column 'size': type \[\] must be one of: categorical, numeric, coded$", line)


@pytest.mark.parametrize("domain, message", [
    ({"level": 0, "grade": 4}, r"domain\.json: column 'level': size 0 must be an integer >= 1$"),
    ({"level": -1}, r"domain\.json: column 'level': size -1 must be an integer >= 1$"),
    ({"": 3}, r"domain\.json: column name '' must be a non-empty string$"),
], ids=["size-0", "size-minus-1", "empty-name"])
def test_domain_file_with_a_bad_size_names_the_file(domain, message):
    # The domain branch built Coded(name, size) unwrapped: its message had no file name.
    with Workspace() as ws:
        path = ws.inputs / "domain.json"
        path.write_text(json.dumps(domain), encoding="utf-8")
        line = failure(ws, "schema", "show", path)
        assert re.search(message, line), line


@pytest.mark.parametrize("what", ["schema", "workload"])
def test_json_nested_10000_deep(fixed, what):
    # json.loads raised RecursionError, which read_json did not catch.
    with Workspace() as ws:
        path = ws.inputs / f"{what}.json"
        path.write_text("[" * 10000 + "]" * 10000, encoding="utf-8")
        schema = path if what == "schema" else fixed["schema"]
        workload = path if what == "workload" else fixed["workload"]
        line = failure(ws, "answer", fixed["data"], "--schema", schema, "--workload", workload, "--exact", "-q",
                       "-o", ws.outputs / "answers.csv")
        assert re.search(rf"{what}\.json: JSON nested too deeply", line), line


def test_json_with_a_byte_order_mark_is_read(fixed):
    # A BOM gave "Unexpected UTF-8 BOM (decode using utf-8-sig)": Python's words, for a file
    # that is fine (the CSV reader already skips a BOM).
    with Workspace() as ws:
        schema = ws.inputs / "schema.json"
        schema.write_text("\ufeff" + json.dumps(SCHEMA), encoding="utf-8")
        workload = ws.inputs / "workload.json"
        workload.write_text("\ufeff" + json.dumps(WORKLOAD), encoding="utf-8")
        out = ws.outputs / "answers.csv"
        assert ws.run("answer", fixed["data"], "--schema", schema, "--workload", workload, "--exact", "-q",
                      "-o", out) is None
        assert float(read_csv_file(out)[0]["answer"]) == len(DATA_ROWS)


#: (engine of ENGINES, option, value, the error it must give; None: the run must succeed).
OPTION_REGRESSIONS = [
    ("generate mwem", "--count-epsilon", "1e-300",
     r"the row count's epsilon \(1e-300\) is below 2\^-40, .*\(--count-epsilon\), or give n if it is public"),
    ("generate mwem", "--select-share", "nan", r"Invalid value for '--select-share': select-share \(nan\) must be in"),
    ("generate mwem", "--select-share", "5e-324",
     r"each round's epsilon \(.*\) split by select_share=5e-324 leaves 0 to select .*\(--select-share\)"),
    ("generate mwem", "--select-share", "0.9999999999999999",
     r"split by select_share=0\.9999999999999999 leaves .* to measure: .*measuring at least 2\^-40"),
    ("generate blr", "--alpha", "1e-300",
     r"alpha \(1e-300\) asks for m = ln\|C\| / alpha\^2 = inf rows per database, more than 2\^63 - 1"),
    ("generate blr", "--alpha", "1.5", r"alpha \(1\.5\) must be in \(0, 1\): the target accuracy is a fraction of n"),
    ("generate blr sampled", "--net-size", str(2**63),
     r"net size m \(9,223,372,036,854,775,808\) is more than 2\^63 - 1 rows: ask for fewer \(--net-size\)"),
    ("generate blr sampled", "--candidates", str(2**63),
     r"candidates K \(9,223,372,036,854,775,808\) is more than 2\^63 - 1: ask for fewer \(--candidates\)"),
    ("generate blr sampled", "--beta", "5e-324", None),
    ("answer pmw plan", "--alpha", "1e-300",
     r"alpha \(1e-300\) needs L = 16 ln\|U\| / T\^2 = inf updates .*ask for a larger alpha, or fix L \(--updates\)"),
    ("answer pmw plan", "--alpha", "0.001", r"alpha \(0\.001\) needs L = 16 ln\|U\| / T\^2 = 1\.69e\+08 updates"),
    ("answer pmw plan", "--alpha", "1e300", r"alpha \(1e\+300\) must be in \(0, 1\.5\)"),
    ("answer pmw plan", "--updates", str(2**63),
     r"updates L \(9,223,372,036,854,775,808\) must be at most 1,000,000: ask for fewer \(--updates\)"),
    ("answer pmw plan", "--delta", "5e-324", None),
    ("answer pmw", "--delta", "5e-324", None),
    ("generate pmw", "--passes", str(2**63),
     r"queries k \(18,446,744,073,709,551,616: the workload's queries times the passes\) is more than 2\^63 - 1"),
    ("answer pmw", "--passes", str(2**63), r"queries k \(36,893,488,147,419,103,232: .*ask for fewer passes"),
    ("answer pmw practical", "--passes", str(2**63), r"passes \(9,223,372,036,854,775,808\) must be at most 100"),
    ("answer pmw practical plan", "--updates", str(2**63),
     r"updates L \(9,223,372,036,854,775,808\) must be at most 1,000,000: ask for fewer \(--updates\)"),
    ("answer pmw practical", "--delta", "5e-324", None),
]


@pytest.mark.parametrize("engine, option, value, message", OPTION_REGRESSIONS,
                         ids=[f"{e.replace(' ', '-')}{o}={v}" for e, o, v, _ in OPTION_REGRESSIONS])
def test_option_at_its_edge(fixed, engine, option, value, message):
    # Before: unexpected ValueError / ZeroDivisionError / OverflowError ("a bug in synth"), or a
    # run that never ended (--candidates, --passes 2^63; --alpha 0.001 planned for hours).
    args = _with_option(ENGINES[engine][0], option, value)
    with Workspace() as ws, time_limit(60):
        line = run_engine(ws, fixed, engine, args, existing=False)
    if message is None:
        assert line is None, line
    else:
        assert line is not None and re.search(message, line), line


def test_library_refusals_are_synth_errors():
    """The library entry points raise the project's errors (a ValueError), not Python's."""
    from synth.engines.blr import NetTooLarge, net_size_for_alpha
    from synth.privacy.composition import zcdp_epsilon, zcdp_rho_limit
    from synth.engines.pmw_plan import PlanError, plan_pmw

    with pytest.raises(NetTooLarge, match=r"alpha \(1e-300\) asks for m = .* = inf rows per database"):
        net_size_for_alpha(1e-300, 10)
    with pytest.raises(PlanError, match=r"alpha \(1e-300\) needs L = 16 ln\|U\| / T\^2 = inf updates"):
        plan_pmw(10.0, 0.0, 1000, 24, 5, alpha=1e-300)
    with pytest.raises(PlanError, match=r"alpha \(2\.0\) must be in \(0, 1\.5\)"):
        plan_pmw(10.0, 0.0, 1000, 24, 5, alpha=2.0)
    with pytest.raises(PlanError, match=r"queries k \(9,223,372,036,854,775,808: "):
        plan_pmw(10.0, 0.0, 1000, 24, 2**63)
    # ln(1/delta) overflowed to inf for a subnormal delta; -ln(delta) is finite (744.4).
    assert math.isfinite(zcdp_epsilon(0.5, 5e-324))
    assert 0 < zcdp_rho_limit(1.0, 5e-324) < 1.0


@pytest.mark.parametrize("where, value, message", [
    ("edges", [0, HUGE], r"column 'size': bin edge 1358\d+ must be a finite number$"),
    ("values", [1, HUGE], r"column 'rank': value 1358\d+ must be a string or a number \(within float range\)$"),
    ("rows", HUGE, r"rows \(1358\d+\) must be a non-negative integer \(at most 2\^63 - 1\) or absent$"),
], ids=["edge-2^1100", "label-2^1100", "rows-2^1100"])
def test_schema_integer_past_float_range(where, value, message):
    # float() of a JSON integer past 1.8e308 raised OverflowError ("a bug in synth"); rows that
    # large passed the schema and crashed every engine.
    schema = json.loads(json.dumps(SCHEMA))
    if where == "rows":
        schema["rows"] = value
    else:
        schema["columns"][1 if where == "edges" else 3][where] = value
    with Workspace() as ws:
        path = ws.inputs / "schema.json"
        path.write_text(json.dumps(schema), encoding="utf-8")
        line = failure(ws, "schema", "show", path)
        assert re.search(r"schema\.json: " + message, line), line


@pytest.mark.parametrize("condition, message", [
    ({"rank": HUGE}, r"query 0, column 'rank': unknown value 1358\d+; allowed: 1, 2, 5$"),
    ({"code": HUGE}, r"query 0, column 'code': value 1358\d+ is outside the domain 0\.\.3$"),
    ({"code": float("inf")}, r"query 0, column 'code': value inf is not an integer code$"),
    ({"code": float("nan")}, r"query 0, column 'code': value nan is not an integer code$"),
    ({"code": {"range": [0, float("inf")]}}, r"query 0, column 'code': range bound inf is not an integer code$"),
    ({"size": -HUGE}, r"query 0, column 'size': value -1358\d+ lies outside the bin edges \[0, 50\]$"),
    ({"size": {"range": [0, HUGE]}}, None),
    ({"code": {"range": [-HUGE, HUGE]}}, None),
], ids=["rank-2^1100", "code-2^1100", "code-inf", "code-nan", "code-range-to-inf", "size-minus-2^1100",
        "size-range-to-2^1100", "code-range-2^1100"])
def test_workload_number_past_float_range_or_not_finite(fixed, condition, message):
    # float() of 2^1100, or int() of inf, raised OverflowError inside the value checks.
    with Workspace() as ws:
        path = ws.inputs / "workload.json"
        path.write_text(dumps({"queries": [{"where": condition}]}), encoding="utf-8")
        out = ws.outputs / "answers.csv"
        line = ws.run("answer", fixed["data"], "--schema", fixed["schema"], "--workload", path, "--exact", "-q",
                      "-o", out)
        if message is None:  # every bin or code lies inside the range: every row counts
            assert line is None, line
            assert float(read_csv_file(out)[0]["answer"]) == len(DATA_ROWS)
        else:
            assert line is not None and re.search(r"workload\.json: " + message, line), line


@pytest.mark.parametrize("engine, option", [("generate mwem", "--rows"), ("generate mwem", "--sample-rows"),
                                            ("answer pmw plan", "--rows"), ("answer pmw", "--rows"),
                                            ("sample", "--rows")])
def test_row_count_option_2_pow_1100(fixed, engine, option):
    # Row counts past float range raised OverflowError in the size checks and the engines.
    with Workspace() as ws:
        line = run_engine(ws, fixed, engine, _with_option(ENGINES[engine][0], option, str(HUGE)), existing=False)
    assert line is not None and re.search(rf"Invalid value for '{option}': 1358\d+ is not in the range "
                                          r"[01]<=x<=9223372036854775807\.$", line), line
