"""Dirty data: --bad-rows error (a labelled message quoting the value) or drop (release anyway,
never saying how many rows went)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from synth_cli.main import main
from synth.data import reading as data
from synth.errors import DataError
from synth.data.schema import Categorical, Coded, Numeric, Schema

SCHEMA = Schema((Categorical("sex", ("female", "male")), Numeric("age", (0, 18, 30, 50, 100)), Coded("race", 3)))
CLEAN = ["female,25,0", "male,40,1", "female,70,2", "male,10,0"]
DIRTY = {
    "unknown category": "X_secret_person,25,0",
    "missing label": ",25,1",
    "non-numeric": "male,old,1",
    "missing number": "male,,1",
    "infinite number": "male,inf,1",
    "code outside domain": "female,25,7",
    "fractional code": "female,25,1.5",
    "short line": "female,25",
    "long line": "female,25,1,extra",
}


def write(tmp_path, lines, name="d.csv"):
    path = tmp_path / name
    path.write_text("sex,age,race\n" + "\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("kind", sorted(DIRTY))
def test_drop_keeps_exactly_the_clean_rows(tmp_path, kind):
    lines = CLEAN[:2] + [DIRTY[kind]] + CLEAN[2:]
    path = write(tmp_path, lines)
    kept = data.read(path, SCHEMA, bad_rows="drop")
    expected = data.read(write(tmp_path, CLEAN, "clean.csv"), SCHEMA)
    np.testing.assert_array_equal(kept.codes, expected.codes)
    assert kept.dropped == 1
    scanned = data.scan(path, SCHEMA, [("sex", "race")], bad_rows="drop")
    assert scanned.n_rows == len(CLEAN) and scanned.dropped == 1


@pytest.mark.parametrize("kind", sorted(set(DIRTY) - {"long line"}))
def test_error_names_the_row_and_says_it_quotes_private_data(tmp_path, kind):
    path = write(tmp_path, CLEAN[:2] + [DIRTY[kind]] + CLEAN[2:])
    with pytest.raises(DataError, match=r"row 3, column .*NON-PRIVATE: this message quotes the private data"):
        data.read(path, SCHEMA)


INTEGERS = Schema((Coded("a", 3), Coded("b", 4), Coded("c", 3)))
INTEGER_ROWS = ["0,1,2", "1,2,0", "2,3,1", "0,0,0"]


@pytest.mark.parametrize("long", ["female,25,1,extra", "female,25,1,"])  # "1,": an empty extra field
def test_a_long_first_data_line_is_dropped_or_refused_as_any_other(tmp_path, long):
    """pandas took a first data line with too many fields as a row cut short (or refused it
    even under --bad-rows drop): it is dropped, or refused naming its row, as any later one."""
    path = write(tmp_path, [long] + CLEAN)
    kept = data.read(path, SCHEMA, bad_rows="drop")
    np.testing.assert_array_equal(kept.codes, data.read(write(tmp_path, CLEAN, "clean.csv"), SCHEMA).codes)
    assert kept.dropped == 1
    scanned = data.scan(path, SCHEMA, [("sex", "race")], bad_rows="drop")
    assert scanned.n_rows == len(CLEAN) and scanned.dropped == 1
    with pytest.raises(DataError, match=r"d\.csv: malformed CSV: data row 1 \(line 2\) has 4 fields, the header has 3 "
                                        r"\(--bad-rows drop skips such lines\)$"):
        data.read(path, SCHEMA)
    only = write(tmp_path, [long, long], "only.csv")
    with pytest.raises(DataError, match="no row fits the schema"):
        data.read(only, SCHEMA, bad_rows="drop")


def test_a_long_line_where_a_chunk_or_a_dask_block_begins_is_dropped(tmp_path):
    """The fast integer reader hands a chunk with a long line to pandas from the chunk's
    start, and Dask gives a block of lines its own reader: a long line first there too."""
    path = tmp_path / "i.csv"
    path.write_text("a,b,c\n" + "\n".join(INTEGER_ROWS[:2] + ["1,2,1,9"] + INTEGER_ROWS[2:]) + "\n")
    kept = data.read(path, INTEGERS, bad_rows="drop", chunk_rows=2)  # the long line opens the second chunk
    assert kept.n_rows == 4 and kept.dropped == 1
    np.testing.assert_array_equal(kept.codes, [[int(v) for v in row.split(",")] for row in INTEGER_ROWS])
    with pytest.raises(DataError, match=r"malformed CSV: data row 3 \(line 4\) has 4 fields, the header has 3"):
        data.read(path, INTEGERS, chunk_rows=2)
    block = b"1,2,1,9\n2,3,1\n"
    chunks = list(data.encode_csv_lines(block, ["a", "b", "c"], INTEGERS, source="block", bad_rows="drop"))
    assert sum(c.n_rows for c in chunks) == 1 and sum(c.dropped for c in chunks) == 1
    with pytest.raises(DataError, match=r"^block: malformed CSV: data row 1 \(line 2\) has 4 fields"):
        list(data.encode_csv_lines(block, ["a", "b", "c"], INTEGERS, source="block"))


def test_drop_on_a_dataframe_and_everything_dropped(tmp_path):
    frame = pd.DataFrame({"sex": ["female", "alien", "male"], "age": [20, 30, 40], "race": [0, 1, 9]})
    encoded = data.encode(frame, SCHEMA, bad_rows="drop")
    assert encoded.n_rows == 1 and encoded.dropped == 2
    with pytest.raises(DataError, match="no row fits the schema"):
        data.read(frame.iloc[1:2], SCHEMA, bad_rows="drop")
    with pytest.raises(ValueError, match=r"bad_rows \('skip'\) must be one of: 'error', 'drop'"):
        data.read(frame, SCHEMA, bad_rows="skip")


def test_clip_counts_ignore_dropped_rows(tmp_path):
    path = write(tmp_path, ["female,150,0", "male,150,9", "female,25,1"])
    assert data.read(path, SCHEMA, bad_rows="drop").clipped == {"age": 1}


@pytest.fixture
def dirty_files(tmp_path):
    schema = tmp_path / "schema.json"
    SCHEMA.save(schema)
    rows = CLEAN * 50 + [DIRTY["unknown category"], DIRTY["long line"]]
    table = write(tmp_path, rows)
    workload = tmp_path / "w.json"
    workload.write_text('{"queries": [{"where": {"sex": "male"}}, {"where": {"race": 2}}]}')
    return table, schema, workload


def test_generate_releases_from_a_dirty_table_and_says_nothing_of_the_drops(tmp_path, dirty_files):
    table, schema, workload = dirty_files
    out = tmp_path / "synthetic.csv"
    result = CliRunner().invoke(main, ["generate", str(table), "--schema", str(schema), "--workload", str(workload),
                                       "--epsilon", "1", "--bad-rows", "drop", "-q", "-o", str(out)])
    assert result.exit_code == 0, result.stderr
    assert len(pd.read_csv(out)) > 0
    assert "drop" not in result.stderr.lower() and "X_secret_person" not in result.stderr
    refused = CliRunner().invoke(main, ["generate", str(table), "--schema", str(schema), "--workload", str(workload),
                                        "--epsilon", "1", "-q", "-o", str(tmp_path / "other.csv")])
    assert refused.exit_code == 1 and "has 4 fields" in refused.stderr and "--bad-rows drop" in refused.stderr
    one_dirty = write(tmp_path, CLEAN * 50 + [DIRTY["unknown category"]], "one-dirty.csv")
    refused = CliRunner().invoke(main, ["generate", str(one_dirty), "--schema", str(schema), "--workload",
                                        str(workload), "--epsilon", "1", "-q", "-o", str(tmp_path / "other.csv")])
    assert refused.exit_code == 1 and "NON-PRIVATE" in refused.stderr and "X_secret_person" in refused.stderr
    assert not (tmp_path / "other.csv").exists()


def test_exact_answers_say_how_many_rows_were_dropped(tmp_path, dirty_files):
    table, schema, workload = dirty_files
    result = CliRunner().invoke(main, ["answer", str(table), "--schema", str(schema), "--workload", str(workload),
                                       "--exact", "--bad-rows", "drop", "-q", "-o", "-"])
    assert result.exit_code == 0, result.stderr
    assert "2 rows outside the schema were left out" in result.stderr and "NON-PRIVATE" in result.stderr
    assert result.stdout.splitlines()[1].split(",")[3] == "100"  # the 100 clean male rows
