"""Missing values are data: a column with ``missing=True`` has one more code, the last; every
reader (CSV by pandas and by the plain-integer reader, Parquet by Arrow's buffers and by
pandas, DataFrames, Dask) reads an empty cell, a null, NaN or a schema ``missing_tokens`` cell
as that code and never drops the row; a column without it still refuses them; synthetic
tables write the code back as an empty cell (or the first token) and Parquet nulls; queries
select it with ``null``; and ``synth schema infer`` marks the columns that hold any."""

import io
import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from synth_cli.main import main
from synth._kernels.scan import EMPTY, pack_column
from synth.data import reading
from synth.data.infer import infer_schema
from synth.data.reading import decode, encode, read, scan
from synth.data.schema import Categorical, Coded, Numeric, Schema
from synth.data.workload import Workload
from synth.errors import DataError, SchemaError, WorkloadError
from synth.models.synthetic import decode_rows, write_synthetic

from .test_plain_csv import assert_parser_matches_reference, random_lines

SCHEMA = Schema((Numeric("age", (18, 40, 65, 90), missing=True),
                 Categorical("region", ("north", "south"), missing=True),
                 Coded("visits", 3, missing=True),
                 Categorical("flag", (0, 1), missing=True)),
                missing_tokens=("?",))
# rows and the codes they read as (missing codes: age 3, region 2, visits 3, flag 2)
CSV = "age,region,visits,flag\n34,north,2,1\n,south,0,\n51,?,1,0\n?,,,?\n70,south, ? ,1\n"
CODES = [[0, 0, 2, 1], [3, 1, 0, 2], [1, 2, 1, 0], [3, 2, 3, 2], [2, 1, 3, 1]]


def repeated(times: int) -> str:
    """CSV's rows ``times`` over, under one header."""
    header, body = CSV.split("\n", 1)
    return header + "\n" + body * times


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


# -- the schema -----------------------------------------------------------------------------


def test_a_missing_code_is_the_last_and_counted_in_size():
    age, region, visits, flag = SCHEMA
    assert (age.size, age.n_values, age.missing_code) == (4, 3, 3)
    assert (region.size, region.missing_code) == (3, 2)
    assert (visits.size, visits.n_values, visits.missing_code) == (4, 3, 3)
    assert SCHEMA.shape == (4, 3, 4, 3) and SCHEMA.universe_size == 144
    plain = Coded("visits", 3)
    assert (plain.size, plain.missing_code, plain.missing) == (3, None, False)
    assert plain != visits and repr(visits) == "Coded(name='visits', size=3, missing=True)"


def test_schema_round_trips_missing_and_tokens_through_json(tmp_path):
    path = tmp_path / "s.json"
    SCHEMA.save(path)
    raw = json.loads(path.read_text())
    assert raw["missing_tokens"] == ["?"]
    assert raw["columns"][0] == {"name": "age", "type": "numeric", "edges": [18, 40, 65, 90], "missing": True}
    assert raw["columns"][2] == {"name": "visits", "type": "coded", "size": 3, "missing": True}  # size: value codes
    loaded = Schema.load(path)
    assert loaded == SCHEMA and loaded.missing_tokens == ("?",) and loaded.shape == SCHEMA.shape
    assert loaded.select("visits,age").missing_tokens == ("?",)  # a selection keeps the tokens
    # a schema without missing values writes neither key, as before
    plain = Schema((Coded("a", 2), Numeric("b", (0, 1))))
    assert "missing_tokens" not in plain.to_dict() and all("missing" not in c for c in plain.to_dict()["columns"])


@pytest.mark.parametrize("obj, message", [
    ({"columns": [{"name": "a", "type": "coded", "size": 2, "missing": "yes"}]}, "'missing' must be true or false"),
    ({"columns": [{"name": "a", "type": "coded", "size": 2}], "missing_tokens": "?"}, "must be a list"),
    ({"columns": [{"name": "a", "type": "coded", "size": 2}], "missing_tokens": [""]}, "always missing"),
    ({"columns": [{"name": "a", "type": "coded", "size": 2}], "missing_tokens": [" ?"]}, "spaces around it"),
    ({"columns": [{"name": "a", "type": "coded", "size": 2}], "missing_tokens": ["?", "?"]}, "twice"),
    ({"columns": [{"name": "a", "type": "categorical", "values": ["?", "b"]}], "missing_tokens": ["?"]},
     "label '\\?' is also a missing token"),
])
def test_bad_missing_settings_are_refused_in_one_line(obj, message):
    with pytest.raises(SchemaError, match=message):
        Schema.from_dict(obj)


def test_code_of_describe_decode_and_query_values_know_the_missing_code():
    age, region, visits, _ = SCHEMA
    assert age.code_of(None) == 3 and region.code_of(None) == 2
    assert visits.code_of(None) == 3
    with pytest.raises(ValueError, match="outside the domain 0..2"):
        visits.code_of(3)  # the missing code is no value of the data
    with pytest.raises(ValueError, match="holds no missing value"):
        Coded("x", 3).code_of(None)
    with pytest.raises(ValueError, match="lies in no range"):
        age.codes_in_range(None, 50)
    np.testing.assert_array_equal(visits.codes_in_range(0, 10), [0, 1, 2])  # a range never reaches it
    assert age.describe(np.array([3])) == "age = missing"
    assert age.describe(np.array([0, 1, 3])) == "age in [18, 65) or missing"
    assert age.describe(np.array([2])) == "age in [65, 90]"  # the last bin is still closed
    assert region.describe(np.array([0, 2])) == "region in {north, missing}"
    assert visits.describe(np.array([0, 1, 2, 3])) == "visits in 0..2 or missing"
    assert Categorical("x", ("missing",), missing=True).describe(np.array([0, 1])) == 'x in {"missing", missing}'
    assert list(region.decode(np.array([1, 2]))) == ["south", None]
    assert np.isnan(age.decode(np.array([3]))[0]) and np.isnan(visits.decode(np.array([3]))[0])
    assert age.to_query_value(np.array([3])) is None
    assert age.to_query_value(np.array([0, 3])) == [18, None]
    assert visits.to_query_value(np.array([1, 3])) == [1, None]


# -- reading --------------------------------------------------------------------------------


def test_csv_reads_empty_cells_and_tokens_as_the_missing_code(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text(CSV)
    encoded = read(path, SCHEMA)
    assert encoded.codes.tolist() == CODES and encoded.dropped == 0


def test_dataframe_nulls_nan_and_tokens_read_as_the_missing_code():
    frame = pd.DataFrame({"age": [34.0, np.nan, 51, None, 70], "region": ["north", "south", "?", None, "south"],
                          "visits": pd.array([2, 0, 1, None, pd.NA], dtype="Int64"), "flag": [1, None, 0, "?", 1]})
    assert encode(frame, SCHEMA).codes.tolist() == CODES


@pytest.mark.parametrize("rows_per_group", [2, 100])
def test_parquet_nulls_and_tokens_read_as_the_missing_code(tmp_path, rows_per_group):
    frame = pd.DataFrame({"age": ["34", None, "51", "?", "70"], "region": ["north", "south", "?", None, "south"],
                          "visits": pd.array([2, 0, 1, None, None], dtype="Int64"),
                          "flag": pd.array([1, None, 0, None, 1], dtype="Int64")})
    frame.to_parquet(tmp_path / "d.parquet", row_group_size=rows_per_group)
    assert read(tmp_path / "d.parquet", SCHEMA).codes.tolist() == CODES


def test_parquet_integer_nulls_take_the_arrow_fast_path(tmp_path, monkeypatch):
    schema = Schema((Coded("a", 3, missing=True), Coded("b", 2)))
    pd.DataFrame({"a": pd.array([0, None, 2, None], dtype="Int64"), "b": [1, 0, 1, 1]}).to_parquet(tmp_path / "d.parquet")
    monkeypatch.setattr(reading, "encode", lambda *a, **k: pytest.fail("went through pandas"))
    assert read(tmp_path / "d.parquet", schema).codes.tolist() == [[0, 1], [3, 0], [2, 1], [3, 1]]


def test_a_null_where_no_missing_value_is_allowed_still_stops_parquet(tmp_path):
    schema = Schema((Coded("a", 3), Coded("b", 2)))
    pd.DataFrame({"a": pd.array([0, None], dtype="Int64"), "b": [1, 0]}).to_parquet(tmp_path / "d.parquet")
    with pytest.raises(DataError, match="row 2, column 'a': missing value"):
        read(tmp_path / "d.parquet", schema)


PLAIN = Schema((Coded("a", 4, missing=True), Numeric("b", (0, 10, 100, 1000), missing=True), Coded("c", 12)))


def _plain_table(path, rng, n):
    lines = ["a,b,c"]
    for _ in range(n):
        a = "" if rng.random() < 0.2 else str(rng.integers(0, 4))
        b = "" if rng.random() < 0.2 else str(rng.integers(0, 1000))
        lines.append(f"{a},{b},{rng.integers(0, 12)}")
    path.write_text("\n".join(lines) + ("\n" if rng.random() < 0.5 else ""))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("columns", [["a", "c"], ["a", "b", "c"]])
def test_the_plain_integer_reader_reads_empty_fields_as_pandas_does(tmp_path, monkeypatch, seed, columns):
    """Empty fields in columns that allow missing values stay on the Numba reader (no pandas
    chunk at all), and give pandas' codes."""
    path = tmp_path / "d.csv"
    _plain_table(path, np.random.default_rng(seed), 700)
    monkeypatch.setattr(reading, "csv_chunks", lambda *a, **k: pytest.fail("the plain reader handed over to pandas"))
    fast = read(path, PLAIN, columns=columns, chunk_rows=64).codes
    monkeypatch.undo()
    monkeypatch.setattr(reading, "PLAIN_CSV", False)
    slow = read(path, PLAIN, columns=columns, chunk_rows=64).codes
    np.testing.assert_array_equal(fast, slow)
    assert (fast[:, 0] == 4).mean() == pytest.approx(0.2, abs=0.05)  # the missing code, about a fifth


@pytest.mark.parametrize("oddity", ["", ",,", "3,,", "4,5,1", "-1,5,1", "?,5,1", ",5,12", "1,?,1", "1, ,1"])
def test_plain_reader_and_pandas_agree_around_missing_cells(tmp_path, monkeypatch, oddity):
    """Odd lines among plain ones: the same codes, or the same error, from both readers (a
    value 4 in a column of 4 codes is out of its domain, not its missing code)."""
    schema = Schema(PLAIN.columns, missing_tokens=("?",))
    path = tmp_path / "d.csv"
    _plain_table(path, np.random.default_rng(9), 300)
    lines = path.read_text().splitlines()
    lines.insert(150, oddity)
    path.write_text("\n".join(lines) + "\n")

    def outcome(plain: bool):
        monkeypatch.setattr(reading, "PLAIN_CSV", plain)
        try:
            return read(path, schema, chunk_rows=50).codes.tolist()
        except DataError as error:
            return str(error)

    assert outcome(True) == outcome(False)


def test_a_token_written_in_digits_is_missing_not_a_number(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("a,c\n1,2\n9,3\n")
    schema = Schema((Coded("a", 4, missing=True), Coded("c", 12)), missing_tokens=("9",))
    assert read(path, schema).codes.tolist() == [[1, 2], [4, 3]]


def test_a_coded_value_equal_to_the_missing_code_is_out_of_domain_everywhere(tmp_path):
    schema = Schema((Coded("a", 3, missing=True),))
    (tmp_path / "d.csv").write_text("a\n0\n3\n")
    pd.DataFrame({"a": [0, 3]}).to_parquet(tmp_path / "d.parquet")
    for source in (tmp_path / "d.csv", tmp_path / "d.parquet", pd.DataFrame({"a": [0, 3]})):
        with pytest.raises(DataError, match="row 2, column 'a': value 3 is outside the domain 0..2"):
            read(source, schema)


@pytest.mark.parametrize("cell, column", [("", "age"), ("?", "age"), ("?", "region"), ("", "region"), ("", "c")])
def test_a_column_without_missing_values_still_refuses_them(tmp_path, cell, column):
    schema = Schema((Numeric("age", (18, 40, 65, 90)), Categorical("region", ("north", "south")), Coded("c", 3)),
                    missing_tokens=("?",))
    row = {"age": "34", "region": "north", "c": "1"} | {column: cell}
    path = tmp_path / "d.csv"
    path.write_text("age,region,c\n34,north,1\n" + ",".join(row.values()) + "\n")
    with pytest.raises(DataError, match=rf"row 2, column '{column}': missing value"):
        read(path, schema)
    encoded = read(path, schema, bad_rows="drop")
    assert encoded.n_rows == 1 and encoded.dropped == 1
    frame = pd.DataFrame({"age": [34, 50], "region": ["north", "north"], "c": [1, 1]}, dtype=object)
    frame.loc[1, column] = "?" if cell == "?" else None
    with pytest.raises(DataError, match=rf"row 2, column '{column}': missing value"):
        encode(frame, schema)


def test_spaces_around_a_token_or_nan_in_a_numeric_column_read_as_missing():
    schema = Schema((Numeric("x", (0, 10), missing=True), Categorical("k", ("a",), missing=True)),
                    missing_tokens=("?",))
    frame = pd.DataFrame({"x": [" ? ", "NaN", " 3 "], "k": ["a", "a", "a"]})
    assert encode(frame, schema).codes[:, 0].tolist() == [1, 1, 0]
    with pytest.raises(DataError, match="unknown category ' \\?'"):  # labels are compared exactly
        encode(pd.DataFrame({"x": ["1"], "k": [" ?"]}), schema)


def test_dask_scan_counts_missing_values_as_the_in_process_scan(tmp_path):
    pytest.importorskip("dask.dataframe")
    from synth.data.dask_scan import scan_dask

    path = tmp_path / "d.csv"
    path.write_text(repeated(50))
    subsets = [("age", "region"), ("visits",), ("flag",)]
    expected = scan(path, SCHEMA, subsets)
    counts = scan_dask(path, SCHEMA, subsets)
    assert counts.n_rows == expected.n_rows == 250
    for subset in subsets:
        np.testing.assert_array_equal(counts.tables[subset], expected.tables[subset])
    assert counts.tables[("visits",)].tolist() == [50, 50, 50, 100]


# -- the kernels against their references ---------------------------------------------------


@pytest.mark.parametrize("seed", range(40))
def test_line_parser_with_empty_fields_matches_the_python_reference(seed):
    rng = np.random.default_rng(1000 + seed)
    n_fields = int(rng.integers(1, 5))
    buf = random_lines(rng, int(rng.integers(0, 12)), n_fields)
    final = bool(rng.random() < 0.7)
    if not final:
        buf = buf[:int(rng.integers(0, len(buf) + 1))]
    field_column = [-1] * n_fields
    read_fields = sorted(rng.choice(n_fields, int(rng.integers(1, n_fields + 1)), replace=False))
    for k, f in enumerate(read_fields):
        field_column[f] = k
    empty_ok = rng.random(len(read_fields)) < 0.6
    assert_parser_matches_reference(buf, n_fields, field_column, int(rng.integers(1, 15)), final, fill=-7,
                                    empty_ok=empty_ok)


def test_pack_column_writes_empty_fields_as_the_missing_code_only_when_asked():
    values = np.array([0, EMPTY, 2], dtype=np.int64)
    codes = np.zeros((3, 1), dtype=np.uint8)
    assert pack_column(values, 3, codes, 0, 3) == -1 and codes[:, 0].tolist() == [0, 3, 2]
    assert pack_column(values, 3, codes, 0) == 1  # -1 is out of the domain otherwise


# -- writing back ---------------------------------------------------------------------------


WRITE = Schema((Numeric("age", (18, 40, 65, 90), missing=True), Numeric("w", (0.0, 0.5, 1.0), missing=True),
                Categorical("region", ("north", "south"), missing=True), Coded("visits", 3, missing=True),
                Categorical("flag", (0, 1), missing=True)))


def test_decode_gives_nulls_and_keeps_integers_integers():
    codes = np.array([[0, 0, 0, 0, 0], [3, 2, 2, 3, 2], [2, 1, 1, 2, 1]])
    frame = decode_rows(codes, WRITE, rng=1)
    assert str(frame["age"].dtype) == "Int64" and str(frame["visits"].dtype) == "Int64"
    assert frame.iloc[1].isna().all() and frame.drop(index=1).notna().all().all()
    assert frame["age"].iloc[2] in range(65, 91) and frame["visits"].tolist()[::2] == [0, 2]
    text = io.StringIO()
    frame.to_csv(text, index=False)
    assert text.getvalue().splitlines()[2] == ",,,,"
    assert ".0" not in text.getvalue().splitlines()[1].split(",")[0]
    middles = decode(codes, WRITE)  # midpoints: floats with NaN; codes: nullable integers
    assert np.isnan(middles["age"].iloc[1]) and middles["age"].iloc[0] == 29.0
    assert middles["visits"].isna().tolist() == [False, True, False]


@pytest.mark.parametrize("tokens, written", [((), ""), (("?", "NA"), "?")])
def test_synthetic_csv_writes_missing_as_an_empty_cell_or_the_first_token(tmp_path, tokens, written):
    schema = Schema(WRITE.columns, missing_tokens=tokens)
    distribution = np.zeros(schema.universe_size)
    distribution[schema.cell_index(np.array([[3, 2, 2, 3, 2], [1, 0, 1, 2, 0]]))] = 0.5
    write_synthetic(tmp_path / "s.csv", distribution, schema, 10, rng=1)
    lines = (tmp_path / "s.csv").read_text().splitlines()
    assert lines.count(",".join([written] * 5)) == 5
    assert read(tmp_path / "s.csv", schema).codes.tolist().count([3, 2, 2, 3, 2]) == 5  # reads back as written
    write_synthetic(tmp_path / "s.parquet", distribution, schema, 10, rng=1)
    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "s.parquet")
    assert [str(t) for t in table.schema.types] == ["int64", "double", "string", "int64", "int64"]
    assert all(table.column(k).null_count == 5 for k in range(5))


@pytest.mark.parametrize("tokens", [(), ("?",)])
def test_generate_keeps_every_row_and_the_missing_shares(tmp_path, tokens):
    """A table with missing cells in a categorical and a numeric column: no row dropped, and
    the synthetic CSV holds about the true share of missing cells, written as empty cells
    (or, with '?' as the schema's token, as '?'), at a large epsilon."""
    rng = np.random.default_rng(4)
    n = 3000
    token = tokens[0] if tokens else ""
    age = np.where(rng.random(n) < 0.25, "", rng.integers(18, 90, n).astype(str))
    city = np.where(rng.random(n) < 0.35, token, rng.choice(["a", "b", "c"], n))
    pd.DataFrame({"age": age, "city": city, "score": rng.integers(0, 4, n)}).to_csv(tmp_path / "d.csv", index=False)
    schema = Schema((Numeric("age", (18, 30, 50, 70, 90), missing=True),
                     Categorical("city", ("a", "b", "c"), missing=True), Coded("score", 4)), missing_tokens=tokens)
    schema.save(tmp_path / "s.json")
    result = run("generate", tmp_path / "d.csv", "--schema", tmp_path / "s.json", "--epsilon", 50, "--seed", 3,
                 "--rows", n, "-o", tmp_path / "out.csv")  # --rows: n is public, so a dropped row would show
    assert result.exit_code == 0, result.output
    assert read(tmp_path / "d.csv", schema).n_rows == n  # nothing dropped
    out = pd.read_csv(tmp_path / "out.csv", dtype=str, keep_default_na=False)
    assert len(out) == n
    assert (out["age"] == token).mean() == pytest.approx((age == "").mean(), abs=0.02)
    assert (out["city"] == token).mean() == pytest.approx((city == token).mean(), abs=0.02)
    assert out.loc[out["age"] != token, "age"].str.fullmatch(r"\d+").all()  # integers, not 34.0


# -- queries --------------------------------------------------------------------------------


def test_a_query_on_null_counts_the_missing_cells(tmp_path):
    (tmp_path / "d.csv").write_text(CSV)
    SCHEMA.save(tmp_path / "s.json")
    workload = {"queries": [{"where": {"age": None}}, {"where": {"region": [None, "south"], "flag": None}},
                            {"marginal": ["visits"]}]}
    (tmp_path / "w.json").write_text(json.dumps(workload))
    parsed = Workload.load(tmp_path / "w.json", SCHEMA)
    assert parsed.describe(0) == "age = missing" and parsed.describe(5) == "visits = missing"
    assert Workload.from_dict(parsed.to_dict(), SCHEMA).describe(1) == parsed.describe(1)  # null written back
    result = run("answer", tmp_path / "d.csv", "--schema", tmp_path / "s.json", "--workload", tmp_path / "w.json",
                 "--exact", "-o", tmp_path / "a.csv")
    assert result.exit_code == 0, result.output
    answers = pd.read_csv(tmp_path / "a.csv")
    assert answers["answer"].tolist() == [2, 2, 1, 1, 1, 2]
    with pytest.raises(WorkloadError, match="column 'c': value null: the column holds no missing value"):
        Workload.from_dict({"queries": [{"where": {"c": None}}]}, Schema((Coded("c", 2),)))


def test_workload_marginals_cover_the_missing_code(tmp_path):
    SCHEMA.save(tmp_path / "s.json")
    result = run("workload", "marginals", "--schema", tmp_path / "s.json", "--way", 2, "--cells", "-o",
                 tmp_path / "w.json")
    assert result.exit_code == 0, result.output
    workload = Workload.load(tmp_path / "w.json", SCHEMA)
    assert len(workload) == 4 * 3 + 4 * 4 + 4 * 3 + 3 * 4 + 3 * 3 + 4 * 3
    assert {"where": {"age": None, "region": None}} in workload.to_dict()["queries"]


def test_evaluate_compares_missing_cells_of_a_synthetic_table(tmp_path):
    (tmp_path / "d.csv").write_text(repeated(20))
    SCHEMA.save(tmp_path / "s.json")
    (tmp_path / "w.json").write_text(json.dumps({"queries": [{"where": {"age": None}}, {"marginal": ["visits"]}]}))
    (tmp_path / "syn.csv").write_text(repeated(10))  # the same shares: no error
    result = run("evaluate", tmp_path / "d.csv", "--schema", tmp_path / "s.json", "--workload", tmp_path / "w.json",
                 "--synthetic", tmp_path / "syn.csv", "-o", tmp_path / "report")
    assert result.exit_code == 0, result.output
    answers = pd.read_csv(tmp_path / "report" / "answers.csv")
    assert answers["true"].tolist() == [40, 20, 20, 20, 40]
    assert answers["absolute error"].abs().max() == pytest.approx(0)


# -- inference ------------------------------------------------------------------------------


def test_infer_marks_columns_with_missing_cells(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("age,city,n\n" + "".join(f"{a},{c},{i % 3}\n" for i, (a, c) in enumerate(
        zip([str(v) for v in range(20, 70)] + ["", "?"], ["x", "y", "?", ""] * 13))))
    plain = infer_schema(path, max_categories=5)
    assert plain["age"].kind == "categorical" and "?" in plain["age"].values  # '?' is text without the token
    assert plain["city"].missing and "?" in plain["city"].values and not plain["n"].missing
    result = run("schema", "infer", path, "--missing-token", "?", "--max-categories", 5, "-o", tmp_path / "s.json")
    assert result.exit_code == 0, result.output
    schema = Schema.load(tmp_path / "s.json")
    assert schema.missing_tokens == ("?",)
    assert isinstance(schema["age"], Numeric) and schema["age"].missing
    assert schema["city"] == Categorical("city", ("x", "y"), missing=True) and not schema["n"].missing
    assert read(path, schema).n_rows == 52  # the data reads under it, no row dropped
