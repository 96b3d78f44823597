import numpy as np
import pandas as pd
import pytest

from synth.data import reading as data
from synth.errors import DataError
from synth.data.schema import Categorical, Coded, Schema

from . import reference


def write(tmp_path, text, name="d.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_encode_mixed_kinds_and_count_clipped(tmp_path, mixed_schema):
    path = write(tmp_path, "sex,age,race\nmale,25,2\nfemale,-3,0\nmale,120,1\nfemale,100,1\n")
    encoded = data.read(path, mixed_schema)
    np.testing.assert_array_equal(encoded.codes, [[1, 1, 2], [0, 0, 0], [1, 3, 1], [0, 3, 1]])
    assert encoded.clipped == {"age": 2}
    assert encoded.codes.dtype == np.uint8


def test_file_column_order_does_not_matter(tmp_path, mixed_schema):
    path = write(tmp_path, "race,sex,age\n2,male,25\n")
    np.testing.assert_array_equal(data.read(path, mixed_schema).codes, [[1, 1, 2]])


def test_columns_option_restricts_and_reorders(tmp_path, mixed_schema):
    path = write(tmp_path, "sex,age,race\nmale,25,2\nfemale,5,0\n")
    encoded = data.read(path, mixed_schema, columns="race,sex")
    assert encoded.schema.names == ("race", "sex")
    np.testing.assert_array_equal(encoded.codes, [[2, 1], [0, 0]])


def test_columns_option_still_refuses_rows_with_extra_fields(tmp_path, mixed_schema):
    path = write(tmp_path, "sex,age,race\nmale,25,2\nmale,25,2,9\n")
    with pytest.raises(DataError, match=r"data row 2 \(line 3\) has 4 fields"):
        data.read(path, mixed_schema, columns="sex")


def test_columns_option_tolerates_unselected_schema_columns_missing_from_file(tmp_path, mixed_schema):
    path = write(tmp_path, "sex,race\nmale,2\n")
    np.testing.assert_array_equal(data.read(path, mixed_schema, columns="sex,race").codes, [[1, 2]])


def test_numeric_labelled_categorical_matches_by_value(tmp_path):
    schema = Schema((Categorical("year", (2019, 2020, 2021)), Categorical("score", (0.5, 1.5))))
    path = write(tmp_path, "year,score\n2021,0.5\n2019.0,1.50\n")
    np.testing.assert_array_equal(data.read(path, schema).codes, [[2, 0], [0, 1]])


@pytest.mark.parametrize(
    "text, message",
    [
        ("sex,age,race\nmale,25,2\nmal,30,1\n", r"d.csv: row 2, column 'sex': unknown category 'mal'; allowed: female, male"),
        ("sex,age,race\nmale,25,2\nmale,30,3\n", r"d.csv: row 2, column 'race': value 3 is outside the domain 0..2"),
        ("sex,age,race\nmale,25,2\nmale,30,1.5\n", r"row 2, column 'race': value 1.5 is not an integer code \(domain 0..2\)"),
        ("sex,age,race\nmale,25,2\nmale,old,1\n", r"d.csv: row 2, column 'age': non-numeric value 'old'"),
        ("sex,age,race\nmale,25,x\n", r"d.csv: row 1, column 'race': non-numeric value 'x'"),
        ("sex,age,race\nmale,25,2\n,30,1\n", r"d.csv: row 2, column 'sex': missing value"),
        ("sex,age,race\nmale,,2\n", r"d.csv: row 1, column 'age': missing value"),
        ("sex,age,race\nmale,25,2\nmale,30,\n", r"d.csv: row 2, column 'race': missing value"),
        ("sex,age\nmale,25\n", r"d.csv: column 'race': is in the schema but missing from the data"),
        ("sex,age,race,zip\nmale,25,2,1234\n", r"d.csv: column 'zip': is not in the schema"),
        ("sex,age,sex\nmale,25,male\n", r"column 'sex': appears twice in the header"),
        ("", r"d.csv: file is empty"),
        ("sex,age,race\n", r"d.csv: has a header but no data rows"),
        ("sex,age,race\nmale,25,2\nmale,25,2,7\n", r"d.csv: malformed CSV: data row 2 \(line 3\) has 4 fields, the header has 3"),
        ("sex,age,race\nmale,25,2,7\nmale,25,2\n",
         r"d.csv: malformed CSV: data row 1 \(line 2\) has 4 fields, the header has 3 \(--bad-rows drop skips such lines\)$"),
        ("sex,age,race\nmale,25\n", r"d.csv: row 1, column 'race': missing value"),
    ],
)
def test_bad_data_names_file_row_column_and_value(tmp_path, mixed_schema, text, message):
    path = write(tmp_path, text)
    with pytest.raises(DataError, match=message):
        data.read(path, mixed_schema)


@pytest.mark.parametrize("text, message", [
    ("sex,age,race\n", "has a header but no data rows (NON-PRIVATE: this message tells that the private data "
                       "has no rows)"),
    ("male,25,2\nfemale,30,1\n", "column 'male': is not in the schema (schema columns: sex, age, race) "
                                  "(NON-PRIVATE: this message may quote the private data)"),  # no header: a row is
    ("sex,age,sex\nmale,25,male\n", "column 'sex': appears twice in the header (NON-PRIVATE: this message may "
                                     "quote the private data)"),
])
def test_messages_that_tell_of_the_data_are_labelled(tmp_path, mixed_schema, text, message):
    """n = 0 and a header (a data row, where the file has none) are the private data's too."""
    path = write(tmp_path, text)
    with pytest.raises(DataError) as caught:
        data.read(path, mixed_schema)
    assert str(caught.value) == f"{path}: {message}"


def test_empty_and_all_dropped_frames_are_labelled(tmp_path, mixed_schema):
    frame = pd.DataFrame({"sex": ["alien"], "age": [3], "race": [0]})
    with pytest.raises(DataError, match=r"^DataFrame: no data rows \(NON-PRIVATE: this message tells that the private "
                                        r"data has no rows\)$"):
        data.read(frame.iloc[:0], mixed_schema)
    all_dropped = (r"no row fits the schema \(every row was dropped by --bad-rows drop\) \(NON-PRIVATE: this message "
                   r"tells that no row of the private data fits the schema\)$")
    with pytest.raises(DataError, match=f"^DataFrame: {all_dropped}"):
        data.read(frame, mixed_schema, bad_rows="drop")
    path = write(tmp_path, "sex,age,race\nalien,3,0\n")
    with pytest.raises(DataError, match=all_dropped):
        data.scan(path, mixed_schema, [("sex",)], bad_rows="drop")


def test_row_numbers_continue_across_chunks(tmp_path, mixed_schema):
    lines = ["sex,age,race"] + ["male,25,2"] * 2499 + ["male,25,7"] + ["female,3,0"] * 10
    path = write(tmp_path, "\n".join(lines) + "\n")
    with pytest.raises(DataError, match=r"row 2500, column 'race': value 7"):
        data.read(path, mixed_schema, chunk_rows=300)


def test_chunks_are_bounded_and_cover_every_row(tmp_path, mixed_schema, rng):
    frame = pd.DataFrame(
        {
            "sex": rng.choice(["female", "male"], 1001),
            "age": rng.uniform(0, 100, 1001).round(1),
            "race": rng.integers(0, 3, 1001),
        }
    )
    path = tmp_path / "d.csv"
    frame.to_csv(path, index=False)
    chunks = list(data.iter_encoded(path, mixed_schema, chunk_rows=100))
    assert [c.n_rows for c in chunks] == [100] * 10 + [1]
    whole = data.read(path, mixed_schema)
    np.testing.assert_array_equal(np.concatenate([c.codes for c in chunks]), whole.codes)
    np.testing.assert_array_equal(whole.codes, data.encode(frame, mixed_schema).codes)


def test_dataframe_errors_name_the_row(mixed_schema):
    frame = pd.DataFrame({"sex": ["male", None], "age": [3, 4], "race": [0, 1]})
    with pytest.raises(DataError, match=r"DataFrame: row 2, column 'sex': missing value"):
        data.encode(frame, mixed_schema)
    with pytest.raises(DataError, match="no data rows"):
        data.read(frame.iloc[:0], mixed_schema)


def test_boolean_column_is_not_numeric(mixed_schema):
    frame = pd.DataFrame({"sex": ["male"], "age": [True], "race": [0]})
    with pytest.raises(DataError, match="column 'age': non-numeric value True"):
        data.encode(frame, mixed_schema)


def test_scan_tables_equal_counts_of_read_codes(adult_paths):
    csv_path, domain = adult_paths
    from synth.data.schema import Schema as S

    schema = S.load(domain)
    subsets = [("sex",), ("race", "sex"), ("income>50K", "age", "workclass"), ()]
    result = data.scan(csv_path, schema, subsets, chunk_rows=10_000)
    codes = data.read(csv_path, schema).codes
    assert result.n_rows == 48_842 == codes.shape[0]
    for subset in subsets:
        positions = [schema.index(c) for c in subset]
        expected = reference.count_table(codes, positions, tuple(schema.shape[p] for p in positions))
        np.testing.assert_array_equal(result.tables[subset], expected)


def test_adult_codes_equal_pandas_values(adult_paths):
    csv_path, domain = adult_paths
    schema = Schema.load(domain)
    np.testing.assert_array_equal(data.read(csv_path, schema).codes, pd.read_csv(csv_path).to_numpy())


def test_decode_round_trips_labels_and_gives_bin_midpoints(mixed_schema):
    codes = np.array([[1, 0, 2], [0, 3, 1]])
    frame = data.decode(codes, mixed_schema)
    assert frame["sex"].tolist() == ["male", "female"]
    assert frame["age"].tolist() == [9.0, 75.0]
    assert frame["race"].tolist() == [2, 1]
    np.testing.assert_array_equal(data.encode(frame, mixed_schema).codes, codes)
    with pytest.raises(ValueError, match="column 'race': codes must lie in 0..2"):
        data.decode(np.array([[0, 0, 3]]), mixed_schema)


def test_code_dtype_grows_with_column_size():
    assert data.code_dtype(Schema((Coded("a", 256),))) == np.uint8
    assert data.code_dtype(Schema((Coded("a", 257),))) == np.uint16
    assert data.code_dtype(Schema((Coded("a", 70_000),))) == np.int32


def test_a_value_that_is_no_label_reads_as_the_other_label(tmp_path):
    schema = Schema((Categorical("port", ("S", "C", "other"), missing=True, other="other"),
                     Categorical("deck", (1, 2, 0), other=0)), missing_tokens=("?",))
    path = write(tmp_path, "port,deck\nS,1\nAtlantis,7\n,2\n?,5.5\nC,2\n")
    np.testing.assert_array_equal(data.read(path, schema).codes, [[0, 0], [2, 2], [3, 1], [3, 2], [1, 1]])
    with pytest.raises(DataError, match="row 2, column 'port': unknown category 'Atlantis'"):
        data.read(path, Schema((Categorical("port", ("S", "C"), missing=True), Categorical("deck", (1, 2, 0))),
                               missing_tokens=("?",)))
