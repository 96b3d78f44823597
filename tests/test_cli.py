"""End-to-end tests of the ``synth`` command-line app, through click's ``CliRunner``.

Two halves:

* bad inputs: every one must end the command with a non-zero status and ONE ``Error:`` line
  that names the file, the column, the row (numbered from 1, header not counted) and the
  value, with no traceback, and must leave no output file behind (or the earlier one as it
  was: outputs are written atomically);
* working commands: help texts, version, lazy imports, schema inference, schema display,
  marginal workloads and exact answers checked against counts computed here with pandas.
"""

from __future__ import annotations

import errno
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import click
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from synth_cli.main import main

REPO = Path(__file__).resolve().parents[1]
#: Shared read-only benchmark datasets, beside the checkout (``/work/shared/datasets``).
SHARED_DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"
ADULT_CSV = SHARED_DATASETS / "adult.csv"
ADULT_DOMAIN = SHARED_DATASETS / "adult-domain.json"
ADULT_ROWS = 48_842

needs_adult = pytest.mark.skipif(
    not (ADULT_CSV.is_file() and ADULT_DOMAIN.is_file()),
    reason=f"shared adult dataset not found in {SHARED_DATASETS}",
)

PREVIOUS = "previous content, must survive a failed run\n"


# -- helpers ---------------------------------------------------------------------------------


def make_runner() -> CliRunner:
    """A runner whose result keeps stderr apart (click 8.2+ always does; 8.1 needs mix_stderr)."""
    try:
        return CliRunner(mix_stderr=False)  # click < 8.2
    except TypeError:
        return CliRunner()  # click >= 8.2: result.stderr is always available


def invoke(*args: object):
    return make_runner().invoke(main, [str(a) for a in args], prog_name="synth")


def write_json(path: Path, obj) -> Path:
    path.write_text(json.dumps(obj), encoding="utf-8")
    return path


FRUITS = ("apple", "banana", "cherry")
WEIGHT_EDGES = [0, 10, 20, 50, 100]

#: A rich schema with one column of each kind (distinctive names so substring checks mean something).
RICH_SCHEMA = {
    "version": 1,
    "columns": [
        {"name": "fruit", "type": "categorical", "values": list(FRUITS)},
        {"name": "weight", "type": "numeric", "edges": WEIGHT_EDGES},
        {"name": "level", "type": "coded", "size": 5},
    ],
}
#: A private-pgm domain file: integer-coded columns only.
PGM_DOMAIN = {"level": 5, "grade": 4}


def rich_lines(n: int, seed: int = 7) -> list[str]:
    """Header and ``n`` valid data rows under ``RICH_SCHEMA``."""
    rng = np.random.default_rng(seed)
    fruit = rng.choice(FRUITS, n)
    weight = np.round(rng.uniform(0, 100, n), 1)
    level = rng.integers(0, 5, n)
    return ["fruit,weight,level"] + [f"{f},{w},{v}" for f, w, v in zip(fruit, weight, level)]


def pgm_lines(n: int, seed: int = 11) -> list[str]:
    rng = np.random.default_rng(seed)
    level = rng.integers(0, 5, n)
    grade = rng.integers(0, 4, n)
    return ["level,grade"] + [f"{a},{b}" for a, b in zip(level, grade)]


def write_csv(path: Path, lines: list[str], bad_row: int | None = None, bad_line: str | None = None) -> Path:
    """Write ``lines`` (header first), replacing data row ``bad_row`` (from 1) by ``bad_line``."""
    lines = list(lines)
    if bad_row is not None:
        lines[bad_row] = bad_line
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def rich(tmp_path):
    """Paths of the rich schema and a workload valid under it."""
    schema = write_json(tmp_path / "rich-schema.json", RICH_SCHEMA)
    workload = write_json(
        tmp_path / "rich-workload.json",
        {"queries": [{"where": {}}, {"where": {"fruit": "apple"}}, {"where": {"level": [1, 3]}}]},
    )
    return schema, workload


@pytest.fixture
def pgm(tmp_path):
    schema = write_json(tmp_path / "pgm-domain.json", PGM_DOMAIN)
    workload = write_json(tmp_path / "pgm-workload.json", {"queries": [{"where": {"level": 2}}]})
    return schema, workload


@pytest.fixture(params=[False, True], ids=["no-previous-output", "previous-output"])
def out(request, tmp_path):
    """The ``-o`` path; in the second run it already holds earlier content."""
    path = tmp_path / "result.out"
    if request.param:
        path.write_text(PREVIOUS, encoding="utf-8")
    return path


def assert_clean_failure(
    result, out_path: Path | None, *fragments: str, row: int | None = None, existed: bool = False
) -> str:
    """Non-zero exit, no traceback, ONE ``Error:`` line holding every fragment (and ``row N``),
    and the output left as it was (absent, or with its earlier content, no temporary file)."""
    combined = (result.output or "") + (result.stderr or "")
    assert result.exit_code != 0, combined
    assert "Traceback" not in combined
    # An exception other than SystemExit would be a traceback outside the CliRunner.
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.stderr
    message = errors[0]
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    if row is not None:
        assert re.search(rf"\brow {row}\b", message), f"'row {row}' not in {message!r}"
    if out_path is not None:
        assert result.stdout == "", "a failed run wrote to stdout"
        if existed:
            assert out_path.read_text(encoding="utf-8") == PREVIOUS, "a failed run changed the output file"
        else:
            assert not out_path.exists(), "a failed run left a (partial) output file"
        leftovers = [p.name for p in out_path.parent.iterdir() if p.name.startswith(f".{out_path.name}.")]
        assert leftovers == [], f"temporary files left behind: {leftovers}"
    return message


def answer(data: Path, schema: Path, workload: Path, out_path: Path, *extra: object):
    return invoke(
        "answer", data, "--schema", schema, "--workload", workload, "--exact", "-q", "--force", "-o", out_path, *extra
    )


# -- bad data values (synth answer) ----------------------------------------------------------


def check_answer_failure(result, out_path, existed, *fragments, row=None):
    assert_clean_failure(result, out_path, *fragments, row=row, existed=existed)


def test_unknown_category(tmp_path, rich, out):
    existed = out.exists()
    data = write_csv(tmp_path / "fruits.csv", rich_lines(5), 3, "durian,12.5,1")
    result = answer(data, *rich, out)
    check_answer_failure(result, out, existed, "fruits.csv", "fruit", "durian", row=3)


def test_value_outside_coded_domain_of_pgm_domain_file(tmp_path, pgm, out):
    existed = out.exists()
    data = write_csv(tmp_path / "coded.csv", pgm_lines(6), 4, "3,17")
    result = answer(data, *pgm, out)
    check_answer_failure(result, out, existed, "coded.csv", "grade", "17", row=4)


def test_negative_value_outside_coded_domain(tmp_path, pgm, out):
    existed = out.exists()
    data = write_csv(tmp_path / "coded.csv", pgm_lines(6), 2, "-3,1")
    result = answer(data, *pgm, out)
    check_answer_failure(result, out, existed, "coded.csv", "level", "-3", row=2)


def test_non_numeric_value_in_numeric_column(tmp_path, rich, out):
    existed = out.exists()
    data = write_csv(tmp_path / "weights.csv", rich_lines(5), 2, "apple,heavy,1")
    result = answer(data, *rich, out)
    check_answer_failure(result, out, existed, "weights.csv", "weight", "heavy", row=2)


def test_non_numeric_value_in_coded_column(tmp_path, pgm, out):
    existed = out.exists()
    data = write_csv(tmp_path / "coded.csv", pgm_lines(6), 5, "2,seven")
    result = answer(data, *pgm, out)
    check_answer_failure(result, out, existed, "coded.csv", "grade", "seven", row=5)


@pytest.mark.parametrize(
    "bad_line, column",
    [(",12.5,1", "fruit"), ("apple,,1", "weight"), ("apple,12.5,", "level")],
    ids=["categorical", "numeric", "coded"],
)
def test_missing_value(tmp_path, rich, out, bad_line, column):
    existed = out.exists()
    data = write_csv(tmp_path / "holes.csv", rich_lines(5), 4, bad_line)
    result = answer(data, *rich, out)
    check_answer_failure(result, out, existed, "holes.csv", column, "missing", row=4)


def test_missing_value_in_one_column_file(tmp_path, out):
    existed = out.exists()
    schema = write_json(tmp_path / "one.json", {"level": 5})
    workload = write_json(tmp_path / "w.json", {"queries": [{"where": {}}]})
    data = write_csv(tmp_path / "one.csv", ["level", "1", "", "2"])
    result = answer(data, schema, workload, out)
    check_answer_failure(result, out, existed, "one.csv", "level", "missing", row=2)


def test_missing_column(tmp_path, rich, out):
    existed = out.exists()
    data = write_csv(tmp_path / "narrow.csv", ["fruit,weight", "apple,1.5", "cherry,30"])
    result = answer(data, *rich, out)
    check_answer_failure(result, out, existed, "narrow.csv", "level", "missing")


def test_extra_column(tmp_path, rich, out):
    existed = out.exists()
    data = write_csv(tmp_path / "wide.csv", ["fruit,weight,level,colour", "apple,1.5,0,red"])
    result = answer(data, *rich, out)
    check_answer_failure(result, out, existed, "wide.csv", "colour", "not in the schema")


def test_empty_file(tmp_path, rich, out):
    existed = out.exists()
    data = tmp_path / "empty.csv"
    data.write_bytes(b"")
    result = answer(data, *rich, out)
    check_answer_failure(result, out, existed, "empty.csv", "empty")


@pytest.mark.parametrize("newline", ["\n", ""], ids=["with-newline", "without-newline"])
def test_header_only_file(tmp_path, rich, out, newline):
    existed = out.exists()
    data = tmp_path / "header.csv"
    data.write_text("fruit,weight,level" + newline, encoding="utf-8")
    result = answer(data, *rich, out)
    check_answer_failure(result, out, existed, "header.csv", "no data rows")


def test_row_with_too_many_fields(tmp_path, rich, out):
    existed = out.exists()
    data = write_csv(tmp_path / "ragged.csv", rich_lines(5), 3, "apple,12.5,1,EXTRA")
    result = answer(data, *rich, out)
    check_answer_failure(result, out, existed, "ragged.csv", row=3)


def test_first_row_with_too_many_fields(tmp_path, rich, out):
    """A long first row must not silently become a pandas index."""
    existed = out.exists()
    data = write_csv(tmp_path / "ragged.csv", rich_lines(5), 1, "apple,12.5,1,EXTRA")
    result = answer(data, *rich, out)
    check_answer_failure(result, out, existed, "ragged.csv", row=1)


def test_row_with_too_many_fields_is_refused_with_columns_option(tmp_path, rich, out):
    existed = out.exists()
    data = write_csv(tmp_path / "ragged.csv", rich_lines(5), 3, "apple,12.5,1,EXTRA")
    schema, _ = rich
    workload = write_json(tmp_path / "w.json", {"queries": [{"where": {"fruit": "apple"}}]})
    result = answer(data, schema, workload, out, "--columns", "fruit")
    check_answer_failure(result, out, existed, "ragged.csv")


# -- bad values deep in a file ---------------------------------------------------------------

DEEP_CASES = {
    "unknown-category": ("durian,12.5,1", "fruit", "durian"),
    "non-numeric-numeric": ("apple,heavy,1", "weight", "heavy"),
    "non-numeric-coded": ("apple,12.5,seven", "level", "seven"),
    "outside-coded-domain": ("apple,12.5,9", "level", "9"),
    "missing-categorical": (",12.5,1", "fruit", "missing"),
    "missing-numeric": ("apple,,1", "weight", "missing"),
}


@pytest.fixture(scope="module")
def lines_3000():
    return rich_lines(3000, seed=3)


@pytest.mark.parametrize("case", list(DEEP_CASES))
def test_bad_value_deep_in_file_names_its_row(tmp_path, rich, lines_3000, case):
    bad_line, column, value = DEEP_CASES[case]
    data = write_csv(tmp_path / "deep.csv", lines_3000, 2500, bad_line)
    out_path = tmp_path / "answers.csv"
    result = answer(data, *rich, out_path)
    assert_clean_failure(result, out_path, "deep.csv", column, value, row=2500)


@pytest.mark.parametrize("case", ["unknown-category", "outside-coded-domain", "missing-numeric"])
def test_bad_value_in_a_later_small_chunk(tmp_path, rich, lines_3000, monkeypatch, case):
    """Rows are numbered across chunks: read in chunks of 1,000 rows, row 2500 is in the third."""
    from synth.data import exact

    defaults = exact.exact_answers.__kwdefaults__ or {}
    if "chunk_rows" not in defaults:
        pytest.skip("exact_answers has no chunk_rows keyword default to shrink")
    monkeypatch.setitem(exact.exact_answers.__kwdefaults__, "chunk_rows", 1000)
    seen = []
    original_scan = exact.scan

    def scan(*args, **kwargs):
        seen.append(kwargs.get("chunk_rows"))
        return original_scan(*args, **kwargs)

    monkeypatch.setattr(exact, "scan", scan)
    bad_line, column, value = DEEP_CASES[case]
    data = write_csv(tmp_path / "deep.csv", lines_3000, 2500, bad_line)
    out_path = tmp_path / "answers.csv"
    result = answer(data, *rich, out_path)
    assert seen == [1000], "the smaller chunk size did not reach the reader"
    assert_clean_failure(result, out_path, "deep.csv", column, value, row=2500)


def test_too_many_fields_deep_in_file_names_its_row(tmp_path, rich, lines_3000):
    data = write_csv(tmp_path / "deep.csv", lines_3000, 2500, "apple,12.5,1,EXTRA")
    out_path = tmp_path / "answers.csv"
    result = answer(data, *rich, out_path)
    assert_clean_failure(result, out_path, "deep.csv", row=2500)


@pytest.fixture(scope="module")
def big_pgm_lines():
    """A 230,000-row coded file: more than one default chunk of 200,000 rows."""
    rng = np.random.default_rng(5)
    level = rng.integers(0, 5, 230_000).astype(str)
    grade = rng.integers(0, 4, 230_000).astype(str)
    return ["level,grade", *np.char.add(np.char.add(level, ","), grade).tolist()]


@pytest.mark.parametrize("bad_row", [200_000, 200_001, 225_000])
def test_bad_value_in_a_later_default_chunk(tmp_path, pgm, big_pgm_lines, bad_row):
    data = write_csv(tmp_path / "big.csv", big_pgm_lines, bad_row, "4,13")
    out_path = tmp_path / "answers.csv"
    result = answer(data, *pgm, out_path)
    assert_clean_failure(result, out_path, "big.csv", "grade", "13", row=bad_row)


# -- bad schema and workload files -----------------------------------------------------------


MALFORMED_JSON = '{"queries": [\n  {"where": {"fruit": "apple"}},\n  {"where": {"fruit" "apple"}}\n]}\n'


def test_malformed_schema_json(tmp_path, rich, out):
    existed = out.exists()
    schema = tmp_path / "broken-schema.json"
    schema.write_text('{"columns": [\n  {"name": "fruit",\n   "type": "categorical" "values": []}\n]}\n')
    data = write_csv(tmp_path / "d.csv", rich_lines(3))
    result = answer(data, schema, rich[1], out)
    check_answer_failure(result, out, existed, "broken-schema.json", "malformed JSON", "line 3")


def test_malformed_workload_json(tmp_path, rich, out):
    existed = out.exists()
    workload = tmp_path / "broken-workload.json"
    workload.write_text(MALFORMED_JSON)
    data = write_csv(tmp_path / "d.csv", rich_lines(3))
    result = answer(data, rich[0], workload, out)
    check_answer_failure(result, out, existed, "broken-workload.json", "malformed JSON", "line 3")


@pytest.mark.parametrize("which", ["schema", "workload"])
def test_empty_json_file(tmp_path, rich, out, which):
    existed = out.exists()
    empty = tmp_path / f"empty-{which}.json"
    empty.write_bytes(b"")
    schema, workload = (empty, rich[1]) if which == "schema" else (rich[0], empty)
    data = write_csv(tmp_path / "d.csv", rich_lines(3))
    result = answer(data, schema, workload, out)
    check_answer_failure(result, out, existed, f"empty-{which}.json", "empty")


def test_malformed_schema_json_in_schema_show(tmp_path):
    schema = tmp_path / "broken-schema.json"
    schema.write_text('{"sex": 2,\n "race": }\n')
    result = invoke("schema", "show", schema)
    assert_clean_failure(result, None, "broken-schema.json", "malformed JSON", "line 2")


def test_malformed_schema_json_in_workload_marginals(tmp_path, out):
    existed = out.exists()
    schema = tmp_path / "broken-schema.json"
    schema.write_text('{"sex": 2,\n "race": }\n')
    result = invoke("workload", "marginals", "--schema", schema, "--way", "1", "--force", "-o", out)
    check_answer_failure(result, out, existed, "broken-schema.json", "malformed JSON", "line 2")


def bad_workload(tmp_path: Path, where: dict) -> Path:
    """A workload whose third query (query 2) has ``where``."""
    return write_json(
        tmp_path / "bad-workload.json",
        {"queries": [{"where": {}}, {"where": {"fruit": "apple"}}, {"where": where}]},
    )


def test_workload_naming_unknown_column(tmp_path, rich, out):
    existed = out.exists()
    workload = bad_workload(tmp_path, {"fruit": "apple", "flavour": "sweet"})
    data = write_csv(tmp_path / "d.csv", rich_lines(3))
    result = answer(data, rich[0], workload, out)
    check_answer_failure(result, out, existed, "bad-workload.json", "query 2", "flavour")


@pytest.mark.parametrize(
    "where, column, value",
    [
        ({"fruit": "durian"}, "fruit", "durian"),
        ({"fruit": ["apple", "durian"]}, "fruit", "durian"),
        ({"level": 8}, "level", "8"),
        ({"weight": 250}, "weight", "250"),
    ],
    ids=["categorical", "categorical-list", "coded", "numeric"],
)
def test_workload_naming_unknown_value(tmp_path, rich, out, where, column, value):
    existed = out.exists()
    workload = bad_workload(tmp_path, where)
    data = write_csv(tmp_path / "d.csv", rich_lines(3))
    result = answer(data, rich[0], workload, out)
    check_answer_failure(result, out, existed, "bad-workload.json", "query 2", column, value)


@pytest.mark.parametrize(
    "column, lo, hi",
    [("level", 4, 1), ("fruit", "cherry", "apple"), ("weight", 75.5, 12.5)],
    ids=["coded", "categorical", "numeric"],
)
def test_workload_range_with_lo_above_hi(tmp_path, rich, out, column, lo, hi):
    existed = out.exists()
    workload = bad_workload(tmp_path, {column: {"range": [lo, hi]}})
    data = write_csv(tmp_path / "d.csv", rich_lines(3))
    result = answer(data, rich[0], workload, out)
    check_answer_failure(result, out, existed, "bad-workload.json", "query 2", column, str(lo), str(hi))


def test_coded_range_with_lo_above_hi_in_pgm_domain(tmp_path, pgm, out):
    existed = out.exists()
    workload = write_json(
        tmp_path / "bad-workload.json", {"queries": [{"where": {"grade": {"range": [3, 0]}}}]}
    )
    data = write_csv(tmp_path / "d.csv", pgm_lines(4))
    result = answer(data, pgm[0], workload, out)
    check_answer_failure(result, out, existed, "bad-workload.json", "query 0", "grade", "3", "0")


# -- bad inputs to schema infer --------------------------------------------------------------


def test_infer_empty_file(tmp_path, out):
    existed = out.exists()
    data = tmp_path / "empty.csv"
    data.write_bytes(b"")
    result = invoke("schema", "infer", data, "--force", "-o", out)
    check_answer_failure(result, out, existed, "empty.csv", "empty")


def test_infer_header_only_file(tmp_path, out):
    existed = out.exists()
    data = write_csv(tmp_path / "header.csv", ["fruit,weight"])
    result = invoke("schema", "infer", data, "--force", "-o", out)
    check_answer_failure(result, out, existed, "header.csv")


def test_infer_row_with_too_many_fields(tmp_path, out):
    existed = out.exists()
    data = write_csv(tmp_path / "ragged.csv", ["a,b", "1,2", "3,4,5", "1,4"])
    result = invoke("schema", "infer", data, "--force", "-o", out)
    check_answer_failure(result, out, existed, "ragged.csv", row=2)


# -- atomic output ---------------------------------------------------------------------------


@pytest.mark.parametrize("existed", [False, True], ids=["no-previous-output", "previous-output"])
def test_write_failure_part_way_leaves_no_partial_output(tmp_path, rich, monkeypatch, existed):
    """The disk fills up after a few answer rows: the old file survives, no temporary is left."""
    from synth.data.workload import Workload

    original = Workload.describe

    def describe(self, i):
        if i == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return original(self, i)

    monkeypatch.setattr(Workload, "describe", describe)
    out_path = tmp_path / "answers.csv"
    if existed:
        out_path.write_text(PREVIOUS, encoding="utf-8")
    data = write_csv(tmp_path / "d.csv", rich_lines(20))
    result = answer(data, *rich, out_path)
    assert_clean_failure(result, out_path, "No space left on device", existed=existed)


# -- help, version, imports ------------------------------------------------------------------


def command_paths(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths = [prefix]
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            paths += command_paths(command, prefix + (name,))
        else:
            paths.append(prefix + (name,))
    return paths


def help_params():
    for path in command_paths(main):
        yield pytest.param(path, id=" ".join(("synth",) + path))


def test_every_command_is_covered():
    paths = set(command_paths(main))
    assert {(), ("schema",), ("schema", "infer"), ("schema", "show"), ("workload",),
            ("workload", "marginals"), ("answer",)} <= paths


@pytest.mark.parametrize("path", list(help_params()))
def test_help_exits_zero_and_has_an_example(path):
    result = invoke(*path, "--help")
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output
    assert "Example" in result.output


def test_version():
    from synth import __version__

    result = invoke("--version")
    assert result.exit_code == 0
    assert "synth" in result.output and __version__ in result.output


def run_python(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=120)


def test_importing_the_cli_does_not_import_numba():
    proc = run_python("-c", "import synth_cli.main, sys; assert 'numba' not in sys.modules")
    assert proc.returncode == 0, proc.stderr


def test_every_help_text_does_not_import_numba():
    paths = [list(p) for p in command_paths(main)]
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from synth_cli.main import main\n"
        f"for path in {paths!r}:\n"
        "    result = CliRunner().invoke(main, path + ['--help'])\n"
        "    assert result.exit_code == 0, (path, result.output)\n"
        "    assert 'numba' not in sys.modules, path\n"
    )
    proc = run_python("-c", code)
    assert proc.returncode == 0, proc.stderr


def test_python_dash_m_synth_help():
    proc = run_python("-m", "synth", "--help")
    assert proc.returncode == 0, proc.stderr
    assert "Usage:" in proc.stdout
    for command in ("answer", "schema", "workload"):
        assert command in proc.stdout
    assert "Traceback" not in proc.stderr


# -- schema infer and show -------------------------------------------------------------------


def test_schema_infer_writes_a_schema_and_warns(tmp_path):
    grades = REPO / "synth" / "datasets" / "grades.csv"
    out_path = tmp_path / "schema.json"
    result = invoke("schema", "infer", grades, "-o", out_path)
    assert result.exit_code == 0, result.output
    assert "NOT differentially private" in result.stderr
    assert "NOT differentially private" not in result.stdout
    written = json.loads(out_path.read_text(encoding="utf-8"))
    frame = pd.read_csv(grades, dtype=str)
    columns = {c["name"]: c for c in written["columns"]}
    assert list(columns) == list(frame.columns)
    for name, column in columns.items():
        assert column["type"] == "categorical"
        assert sorted(column["values"]) == sorted(frame[name].unique())
    # The inferred schema works: the grades data answers under it.
    workload = REPO / "synth" / "datasets" / "grades-workload.json"
    answers = tmp_path / "answers.csv"
    assert answer(grades, out_path, workload, answers).exit_code == 0


def test_schema_infer_to_stdout_keeps_the_warning_off_stdout(tmp_path):
    result = invoke("schema", "infer", REPO / "synth" / "datasets" / "grades.csv")
    assert result.exit_code == 0
    json.loads(result.stdout)  # stdout is the schema alone
    assert "NOT differentially private" in result.stderr


@needs_adult
def test_schema_show_adult_universe_size():
    result = invoke("schema", "show", ADULT_DOMAIN)
    assert result.exit_code == 0, result.output
    assert "641,263,392,000,000,000" in result.stdout
    sizes = json.loads(ADULT_DOMAIN.read_text())
    assert f"{math.prod(sizes.values()):,}" in result.stdout
    for name in sizes:
        assert name in result.stdout


# -- workloads and exact answers -------------------------------------------------------------


def read_answers(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, keep_default_na=False)


def test_grades_example_answers_match_pandas(tmp_path):
    grades = REPO / "synth" / "datasets" / "grades.csv"
    workload = REPO / "synth" / "datasets" / "grades-workload.json"
    out_path = tmp_path / "answers.csv"
    result = answer(grades, REPO / "synth" / "datasets" / "grades-schema.json", workload, out_path)
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(grades)
    queries = json.loads(workload.read_text())["queries"]
    got = read_answers(out_path)
    assert got["name"].tolist() == [q.get("name", "") for q in queries]
    for query, value in zip(queries, got["answer"]):
        mask = np.ones(len(frame), dtype=bool)
        for column, wanted in query["where"].items():
            mask &= (frame[column] == wanted).to_numpy()
        assert value == mask.sum()


def test_answer_without_exact_is_refused(tmp_path, rich, out):
    existed = out.exists()
    data = write_csv(tmp_path / "d.csv", rich_lines(3))
    result = invoke("answer", data, "--schema", rich[0], "--workload", rich[1], "-o", out)
    assert_clean_failure(result, out, "--exact", existed=existed)


def test_answers_to_stdout_are_labelled_non_private(tmp_path, rich):
    data = write_csv(tmp_path / "d.csv", rich_lines(50))
    result = invoke("answer", data, "--schema", rich[0], "--workload", rich[1], "--exact", "-q")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "query_id,name,query,answer,privacy"
    assert len(lines) == 1 + 3  # nothing but the CSV on stdout
    assert all("NON-PRIVATE" in line for line in lines[1:])
    assert "NON-PRIVATE" in result.stderr


@pytest.fixture(scope="module")
def adult_frame():
    return pd.read_csv(ADULT_CSV)


@needs_adult
def test_adult_two_way_marginals_match_pandas(tmp_path, adult_frame):
    columns = ["sex", "race", "income>50K"]
    workload = tmp_path / "w.json"
    result = invoke("workload", "marginals", "--schema", ADULT_DOMAIN, "--way", 2,
                    "--columns", ",".join(columns), "--cells", "-o", workload)
    assert result.exit_code == 0, result.output
    queries = json.loads(workload.read_text())["queries"]

    out_path = tmp_path / "answers.csv"
    result = answer(ADULT_CSV, ADULT_DOMAIN, workload, out_path, "--columns", ",".join(columns))
    assert result.exit_code == 0, result.output
    assert "NON-PRIVATE" in result.stderr

    got = read_answers(out_path)
    assert list(got.columns) == ["query_id", "name", "query", "answer", "privacy"]
    assert got["query_id"].tolist() == list(range(len(queries)))
    assert got["privacy"].map(lambda p: "NON-PRIVATE" in p).all()

    sizes = json.loads(ADULT_DOMAIN.read_text())
    # Marginals in lexicographic order of column subsets, cells row-major within each.
    expected_order = []
    for i in range(len(columns)):
        for j in range(i + 1, len(columns)):
            a, b = columns[i], columns[j]
            expected_order += [{a: x, b: y} for x in range(sizes[a]) for y in range(sizes[b])]
    assert [q["where"] for q in queries] == expected_order

    by_subset: dict[tuple[str, ...], int] = {}
    counts = {}
    for query, text, value in zip(queries, got["query"], got["answer"]):
        subset = tuple(query["where"])
        by_subset[subset] = by_subset.get(subset, 0) + value
        if subset not in counts:
            counts[subset] = adult_frame.groupby(list(subset)).size()
        key = tuple(query["where"].values())
        assert value == counts[subset].get(key, 0), (query, value)
        assert text == " AND ".join(f"{c} = {v}" for c, v in query["where"].items())
    assert len(by_subset) == 3
    assert all(total == len(adult_frame) == ADULT_ROWS for total in by_subset.values())

    # And the same with crosstab, independently of the groupby above.
    first = got.iloc[: sizes["sex"] * sizes["race"]]["answer"].to_numpy().reshape(sizes["sex"], sizes["race"])
    table = pd.crosstab(adult_frame["sex"], adult_frame["race"]).reindex(
        index=range(sizes["sex"]), columns=range(sizes["race"]), fill_value=0
    )
    np.testing.assert_array_equal(first, table.to_numpy())


def random_conjunctions(sizes: dict[str, int], n: int, seed: int, max_cells: int = 50_000) -> list[dict]:
    """Queries over up to 4 columns mixing equalities, memberships and ranges."""
    rng = np.random.default_rng(seed)
    names = list(sizes)
    queries = [{"name": "everyone", "where": {}}]
    while len(queries) < n:
        k = int(rng.integers(1, 5))
        chosen = [names[i] for i in rng.choice(len(names), k, replace=False)]
        if math.prod(sizes[c] for c in chosen) > max_cells:
            continue
        where = {}
        for column in chosen:
            size = sizes[column]
            kind = rng.integers(3)
            if kind == 0:
                where[column] = int(rng.integers(size))
            elif kind == 1:
                m = int(rng.integers(1, min(4, size) + 1))
                where[column] = sorted(int(v) for v in rng.choice(size, m, replace=False))
            else:
                lo, hi = sorted(int(v) for v in rng.integers(0, size, 2))
                where[column] = {"range": [lo, hi]}
        queries.append({"name": f"q{len(queries)}", "where": where})
    return queries


@needs_adult
def test_random_conjunctions_on_adult_match_pandas(tmp_path, adult_frame):
    sizes = json.loads(ADULT_DOMAIN.read_text())
    queries = random_conjunctions(sizes, 200, seed=20240611)
    workload = write_json(tmp_path / "random.json", {"queries": queries})
    out_path = tmp_path / "answers.csv"
    result = answer(ADULT_CSV, ADULT_DOMAIN, workload, out_path)
    assert result.exit_code == 0, result.output
    got = read_answers(out_path)
    assert got["query_id"].tolist() == list(range(len(queries)))
    assert got["name"].tolist() == [q["name"] for q in queries]

    expected = []
    for query in queries:
        mask = np.ones(len(adult_frame), dtype=bool)
        for column, condition in query["where"].items():
            values = adult_frame[column]
            if isinstance(condition, dict):
                lo, hi = condition["range"]
                mask &= values.between(lo, hi).to_numpy()
            elif isinstance(condition, list):
                mask &= values.isin(condition).to_numpy()
            else:
                mask &= (values == condition).to_numpy()
        expected.append(int(mask.sum()))
    assert expected[0] == ADULT_ROWS
    assert got["answer"].tolist() == expected
    assert any(0 < e < ADULT_ROWS for e in expected)


def test_output_into_a_missing_folder_fails_before_reading(tmp_path, rich):
    data = write_csv(tmp_path / "d.csv", rich_lines(5))
    target = tmp_path / "nope" / "answers.csv"
    result = invoke("answer", data, "--schema", rich[0], "--workload", rich[1], "--exact", "-o", target)
    assert result.exit_code != 0
    assert "Traceback" not in result.output
    assert "does not exist" in result.stderr and "nope" in result.stderr
    assert "NON-PRIVATE" not in result.stderr  # stopped before any answer was computed
