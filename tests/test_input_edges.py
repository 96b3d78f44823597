"""Edge inputs a fuzz run found: old-Mac line endings, Parquet folders whose later files differ,
Parquet files not named .parquet, huge or inexact values in messages, non-finite and 64-bit
overflowing values in inference, bad sizes in domain files, timestamp and boolean columns,
and output paths that name a folder. Each is read correctly or refused in one clear line."""

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from synth_cli.main import main
from synth.data import reading as data
from synth._io import writable_target
from synth.errors import DataError, SchemaError, SynthError
from synth.data.infer import infer_schema
from synth.data.schema import MAX_COLUMN_SIZE, Categorical, Coded, Numeric, Schema, format_value
from synth.data.tables import DEFAULT_MAX_CELLS

ABC = Schema((Coded("a", 3), Coded("b", 4), Coded("c", 2)))


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def one_line_error(result, code=1):
    """The command failed with ``code`` and said so in a line, without a traceback."""
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output and "bug in synth" not in result.output
    return result.output.strip().splitlines()[-1]


# -- 1. line endings -----------------------------------------------------------------------


@pytest.mark.parametrize("end", ["\r", "\r\n", "\n"])
def test_every_line_ending_reads_the_same_rows(tmp_path, end):
    rows = [(i % 3, i % 4, i % 2) for i in range(100)]
    path = tmp_path / "d.csv"
    path.write_bytes(end.join(["a,b,c"] + [f"{a},{b},{c}" for a, b, c in rows]).encode() + end.encode())
    encoded = data.read(path, ABC)
    np.testing.assert_array_equal(encoded.codes, rows)
    assert data.scan(path, ABC, [("a", "b")]).n_rows == 100


# -- 2, 3. Parquet folders and names -------------------------------------------------------


def _parquet(path, **columns):
    pq.write_table(pa.table({name: values for name, values in columns.items()}), path)


@pytest.mark.parametrize("extra, message", [
    ({"z": [5, 5]}, r"p2\.parquet: column 'z': is not in the schema"),
    ({"drop": "c"}, r"p2\.parquet: column 'c': is in the schema but missing from the data"),
], ids=["extra", "missing"])
def test_every_file_of_a_parquet_folder_has_its_columns_checked(tmp_path, extra, message):
    (tmp_path / "parts").mkdir()
    _parquet(tmp_path / "parts" / "p1.parquet", a=[0, 1], b=[0, 1], c=[0, 1])
    second = {"a": [0, 1], "b": [0, 1], "c": [0, 1]}
    if "drop" in extra:
        del second[extra["drop"]]
    else:
        second.update(extra)
    _parquet(tmp_path / "parts" / "p2.parquet", **second)
    with pytest.raises(DataError, match=message):
        data.scan(tmp_path / "parts", ABC, [("a", "b")])


@pytest.mark.parametrize("name", ["data.pq", "data"])
def test_a_parquet_file_is_known_by_its_magic_bytes(tmp_path, name):
    _parquet(tmp_path / name, a=[0, 1, 2], b=[3, 2, 1], c=[1, 0, 1])
    assert data.is_parquet(tmp_path / name)
    np.testing.assert_array_equal(data.read(tmp_path / name, ABC).codes, [[0, 3, 1], [1, 2, 0], [2, 1, 1]])
    with pytest.raises(DataError, match="is Parquet, and schema infer reads CSV only"):
        infer_schema(tmp_path / name)


def test_a_csv_file_without_suffix_is_still_csv(tmp_path):
    (tmp_path / "data").write_text("a,b,c\n0,1,1\n")
    assert not data.is_parquet(tmp_path / "data")
    assert data.read(tmp_path / "data", ABC).n_rows == 1


# -- 4. values quoted in messages ----------------------------------------------------------


def test_a_huge_field_is_quoted_cut_short(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("a,b,c\n" + "x" * 100_000 + ",0,0\n")
    with pytest.raises(DataError) as caught:
        data.read(path, ABC)
    message = str(caught.value)
    assert len(message) < 400 and "(100000 characters)" in message and "'" + "x" * 60 + "'..." in message


def test_a_huge_column_name_is_quoted_cut_short(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("a,b,c," + "y" * 100_000 + "\n0,0,0,0\n")
    with pytest.raises(DataError, match=r"column 'y{60}'\.\.\. \(100000 characters\): is not in the schema") as caught:
        data.read(path, ABC)
    assert len(str(caught.value)) < 400


@pytest.mark.parametrize("cell, shown", [
    ("99999999999999999999999999", "value 99999999999999999999999999 is outside"),  # was 100000000000000004764729344
    ("9" * 400, r"value 9{60}\.\.\. \(400 characters\) is past the range of a float"),  # was an OverflowError
], ids=["past-int64", "past-float"])
def test_a_large_integer_is_quoted_as_written(tmp_path, cell, shown):
    path = tmp_path / "d.csv"
    path.write_text(f"a,b,c\n0,0,0\n{cell},0,0\n")
    with pytest.raises(DataError, match=f"row 2, column 'a': {shown}"):
        data.read(path, ABC)


def test_a_large_float_is_quoted_in_shortest_form(tmp_path):
    _parquet(tmp_path / "d.parquet", a=[1.0, 1e300], b=[0, 0], c=[0, 0])
    with pytest.raises(DataError, match=r"row 2, column 'a': value 1e\+300 is outside the domain 0\.\.2 \("):
        data.read(tmp_path / "d.parquet", ABC)
    assert (format_value(3.0), format_value(-2.5), format_value(np.float64(1e16))) == ("3", "-2.5", "1e+16")


def test_infer_keeps_integers_exact_and_refuses_them_past_64_bits(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("a\n9007199254740993\n-3\n2.0\n1e300\n")
    assert infer_schema(path)["a"].values == (-3, 2, 9007199254740993, 1e300)
    path.write_text("a\n1\n99999999999999999999999999\n")
    with pytest.raises(DataError, match=r"d\.csv: row 2, column 'a': integer 99999999999999999999999999 is past the 64-bit"):
        infer_schema(path)


# -- 5. non-finite values in inference -----------------------------------------------------


@pytest.mark.parametrize("cell", ["inf", "-inf", "Infinity"])
def test_infer_refuses_a_non_finite_number(tmp_path, cell):
    path = tmp_path / "d.csv"
    path.write_text(f"a,b\n1,x\n{cell},y\n")
    with pytest.raises(DataError, match=f"d\\.csv: row 2, column 'a': non-finite value '{cell}'"):
        infer_schema(path)


def test_infer_keeps_inf_as_a_label_in_a_text_column(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("a\ninf\nabc\n")
    assert infer_schema(path)["a"] == Categorical("a", ("abc", "inf"))


# -- 6. sizes in domain files --------------------------------------------------------------


@pytest.mark.parametrize("size, message", [
    (10**20, "size 100000000000000000000 is too large: a column may have at most 100,000,000 codes"),
    ("x", "size 'x' must be an integer >= 1"),
    (True, "size True must be an integer >= 1"),
    (None, "size None must be an integer >= 1"),
], ids=["huge", "text", "bool", "null"])
def test_a_domain_file_with_a_bad_size_names_the_column_and_the_size(tmp_path, size, message):
    path = tmp_path / "d.json"
    path.write_text(json.dumps({"a": 3, "b": size, "c": 2}))
    with pytest.raises(SchemaError, match=f"d\\.json: column 'b': {message}"):
        Schema.load(path)
    line = one_line_error(run("workload", "marginals", "--schema", path, "--way", 2, "-o", tmp_path / "w.json"))
    assert f"column 'b': {message}" in line


def test_a_coded_column_is_at_most_the_largest_table():
    assert MAX_COLUMN_SIZE == DEFAULT_MAX_CELLS
    assert Coded("a", MAX_COLUMN_SIZE).size == MAX_COLUMN_SIZE
    with pytest.raises(SchemaError, match="column 'a': size 100000001 is too large"):
        Coded("a", MAX_COLUMN_SIZE + 1)


# -- 7. timestamps -------------------------------------------------------------------------


@pytest.mark.parametrize("column", [Coded("t", 3), Numeric("t", (0, 10, 20)), Categorical("t", (0, 1, 2))])
@pytest.mark.parametrize("values, what", [
    (pd.to_datetime([0, 1, 2], unit="us"), "timestamps"),
    (pd.to_timedelta([0, 1, 2], unit="us"), "durations"),
])
def test_timestamps_are_refused_where_the_schema_reads_numbers(column, values, what):
    with pytest.raises(DataError, match=f"DataFrame: column 't': holds {what} .*reads .*convert the {what}"):
        data.read(pd.DataFrame({"t": values}), Schema((column,)))


def test_parquet_timestamps_are_refused_too(tmp_path):
    _parquet(tmp_path / "d.parquet", a=pa.array([2, 1], pa.timestamp("us")), b=[0, 1], c=[0, 1])
    with pytest.raises(DataError, match=r"d\.parquet: column 'a': holds timestamps \(datetime64\[us\]\)"):
        data.read(tmp_path / "d.parquet", ABC)


def test_timestamps_in_a_text_column_are_labels_that_do_not_match():
    frame = pd.DataFrame({"t": pd.to_datetime(["2000-01-01"])})
    with pytest.raises(DataError, match="unknown category 2000-01-01 00:00:00; allowed: 2000-01-01"):
        data.read(frame, Schema((Categorical("t", ("2000-01-01",)),)))


# -- 8. output paths -----------------------------------------------------------------------


def test_an_output_path_naming_a_folder_or_nothing_is_refused(tmp_path):
    with pytest.raises(SynthError, match="out/: names a folder"):
        writable_target(f"{tmp_path}/out/")
    with pytest.raises(SynthError, match="^empty path: give a file name$"):
        writable_target("")
    schema = tmp_path / "d.json"
    schema.write_text('{"a": 3}')
    for output, message in ((f"{tmp_path}/w/", "w/: names a folder (it ends in '/'); give a file name"),
                            ("", "Invalid value for -o: empty path: give a file name")):
        line = one_line_error(run("workload", "marginals", "--schema", schema, "--way", 1, "-o", output), code=2)
        assert line.endswith(message)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.json"]  # no file 'w'


# -- 9. booleans ---------------------------------------------------------------------------


def test_booleans_read_as_codes_0_and_1_or_as_the_labels_false_and_true():
    frame = pd.DataFrame({"x": [True, False, True], "y": [False, True, True], "z": [True, True, False]})
    schema = Schema((Coded("x", 2), Categorical("y", ("False", "True")), Categorical("z", (0, 1))))
    np.testing.assert_array_equal(data.read(frame, schema).codes, [[1, 0, 1], [0, 1, 1], [1, 1, 0]])
    nullable = pd.DataFrame({"x": pd.array([True, None], dtype="boolean")})
    with pytest.raises(DataError, match="row 2, column 'x': missing value"):
        data.read(nullable, Schema((Coded("x", 2),)))


@pytest.mark.parametrize("column, message", [
    (Coded("x", 1), "value True is outside the domain 0..0"),
    (Numeric("x", (0, 1)), "non-numeric value True: the column holds booleans"),
    (Categorical("x", ("no", "yes")), "unknown category 'True'; allowed: no, yes .the column holds booleans"),
])
def test_booleans_that_do_not_fit_say_so(column, message):
    with pytest.raises(DataError, match=f"row 1, column 'x': {message}"):
        data.read(pd.DataFrame({"x": [True, False]}), Schema((column,)))


def test_boolean_csv_and_parquet_columns_read_as_codes(tmp_path):
    (tmp_path / "d.csv").write_text("a,b,c\n1,0,True\n0,3,False\n")
    _parquet(tmp_path / "d.parquet", a=[1, 0], b=[0, 3], c=[True, False])
    for name in ("d.csv", "d.parquet"):
        np.testing.assert_array_equal(data.read(tmp_path / name, ABC).codes, [[1, 0, 1], [0, 3, 0]])
