import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from synth.errors import SchemaError
from synth.data.schema import Categorical, Coded, Numeric, Schema


def test_universe_size_is_exact_product(adult_paths):
    schema = Schema.load(adult_paths[1])
    assert schema.universe_size == np.prod(schema.shape, dtype=object)
    assert schema.universe_size == 641_263_392_000_000_000
    assert isinstance(schema.universe_size, int)


def test_pgm_domain_becomes_coded_columns_in_file_order(adult_paths):
    schema = Schema.load(adult_paths[1])
    raw = json.loads(adult_paths[1].read_text())
    assert schema.names == tuple(raw)
    assert all(isinstance(c, Coded) for c in schema)
    assert schema.shape == tuple(raw.values())


@given(st.lists(st.integers(1, 7), min_size=1, max_size=5), st.data())
def test_cell_index_round_trips_and_matches_numpy(sizes, data):
    schema = Schema(tuple(Coded(f"c{i}", s) for i, s in enumerate(sizes)))
    n = data.draw(st.integers(0, 20))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    codes = np.stack([rng.integers(0, s, n) for s in sizes], axis=1) if n else np.zeros((0, len(sizes)), int)
    index = schema.cell_index(codes)
    expected = np.ravel_multi_index(codes.T, sizes) if n else np.zeros(0)
    np.testing.assert_array_equal(index, expected)
    np.testing.assert_array_equal(schema.cell_codes(index).reshape(codes.shape), codes)


def test_cell_codes_rejects_out_of_range():
    schema = Schema((Coded("a", 3), Coded("b", 2)))
    with pytest.raises(ValueError, match="out of range 0..5"):
        schema.cell_codes(6)


def test_rich_schema_round_trips_through_json(tmp_path, mixed_schema):
    schema = Schema(mixed_schema.columns, rows=1234)
    path = tmp_path / "s.json"
    schema.save(path)
    loaded = Schema.load(path)
    assert loaded == schema
    assert loaded.rows == 1234
    assert json.loads(path.read_text())["columns"][1] == {"name": "age", "type": "numeric", "edges": [0, 18, 30, 50, 100]}


def test_project_keeps_requested_order_and_rows(mixed_schema):
    sub = Schema(mixed_schema.columns, rows=5).select("race, sex")
    assert sub.names == ("race", "sex")
    assert sub.rows == 5
    assert sub.universe_size == 6


@pytest.mark.parametrize(
    "columns, message",
    [("sex,nope", "unknown column 'nope'; columns are: sex, age, race"), ("sex,sex", "selected twice"), ("", "at least one")],
)
def test_select_errors_name_the_column(mixed_schema, columns, message):
    with pytest.raises(SchemaError, match=message):
        mixed_schema.select(columns)


def test_numeric_bins_clip_outside_values_and_close_last_bin():
    age = Numeric("age", (0, 18, 30, 50, 100))
    codes, clipped = age.bin_codes(np.array([-5.0, 0, 17.9, 18, 50, 99.9, 100, 130]))
    np.testing.assert_array_equal(codes, [0, 0, 0, 1, 3, 3, 3, 3])
    np.testing.assert_array_equal(clipped, [True, False, False, False, False, False, False, True])


def test_numeric_range_selects_whole_bins_only():
    age = Numeric("age", (0, 18, 30, 50, 100))
    np.testing.assert_array_equal(age.codes_in_range(18, 50), [1, 2])
    np.testing.assert_array_equal(age.codes_in_range(17, 51), [1, 2])
    with pytest.raises(ValueError, match="holds no whole bin"):
        age.codes_in_range(19, 29)
    with pytest.raises(ValueError, match="lo > hi"):
        age.codes_in_range(50, 18)


def test_numeric_scalar_picks_the_bin_that_holds_it():
    age = Numeric("age", (0, 18, 30, 50, 100))
    assert [age.code_of(v) for v in (0, 17.5, 18, 100)] == [0, 0, 1, 3]
    with pytest.raises(ValueError, match="outside the bin edges"):
        age.code_of(101)


def test_numeric_decodes_to_bin_midpoints():
    age = Numeric("age", (0, 18, 30, 50, 100))
    np.testing.assert_array_equal(age.decode(np.array([0, 3])), [9.0, 75.0])


def test_categorical_lookup_and_range_in_label_order():
    edu = Categorical("edu", ("none", "school", "college", "phd"))
    assert edu.code_of("college") == 2
    np.testing.assert_array_equal(edu.codes_in_range("school", "phd"), [1, 2, 3])
    with pytest.raises(ValueError, match="lo after hi"):
        edu.codes_in_range("phd", "none")
    with pytest.raises(ValueError, match="unknown value 'master'; allowed: none, school, college, phd"):
        edu.code_of("master")


def test_numeric_labels_match_by_value_and_by_text():
    year = Categorical("year", (2019, 2020, 2021))
    assert year.code_of(2020) == 1
    assert year.code_of(2020.0) == 1
    assert year.code_of("2021") == 2


def test_coded_checks_domain():
    race = Coded("race", 5)
    assert race.code_of(4) == 4
    with pytest.raises(ValueError, match="outside the domain 0..4"):
        race.code_of(5)
    with pytest.raises(ValueError, match="not an integer"):
        race.code_of(1.5)
    np.testing.assert_array_equal(race.codes_in_range(3, 10), [3, 4])


@pytest.mark.parametrize(
    "obj, message",
    [
        ({"columns": [{"name": "a", "type": "categorical", "values": ["x", "x"]}]}, "'x' is listed twice"),
        ({"columns": [{"name": "a", "type": "numeric", "edges": [0, 5, 5]}]}, "increase strictly"),
        ({"columns": [{"name": "a", "type": "numeric", "edges": [1]}]}, "at least two bin edges"),
        ({"columns": [{"name": "a", "type": "color"}]}, "type 'color' must be one of"),
        ({"columns": [{"name": "a", "type": "coded", "size": 0}]}, "size 0 must be an integer >= 1"),
        ({"columns": [{"name": "a", "type": "coded", "size": 2}, {"name": "a", "type": "coded", "size": 2}]}, "appears twice"),
        ({"colums": []}, "unknown key 'colums'"),
        ({"columns": [{"name": "a", "type": "coded"}]}, "needs 'size'"),
        ({"a": 2, "b": 2.5}, "size 2.5 must be an integer"),
        ([], "expected a JSON object"),
        ({"columns": [{"name": "a", "type": "coded", "size": 2}], "rows": -1}, "rows"),
    ],
)
def test_bad_schema_objects_are_refused_with_a_reason(obj, message):
    with pytest.raises(SchemaError, match=message):
        Schema.from_dict(obj, source="s.json")


@pytest.mark.parametrize("text, message", [("", "file is empty"), ("{oops", "malformed JSON at line 1"), ('{"a": 1, "a": 2}', "appears twice")])
def test_bad_schema_files_name_the_file(tmp_path, text, message):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(SchemaError, match=message) as info:
        Schema.load(path)
    assert "bad.json" in str(info.value)


def test_strides_refuse_a_universe_past_int64():
    schema = Schema(tuple(Coded(f"c{i}", 1000) for i in range(7)))
    with pytest.raises(SchemaError, match="too large to index"):
        schema.strides


def test_an_other_label_round_trips_and_must_be_one_of_the_values():
    column = Categorical("port", ("S", "C", "other"), missing=True, other="other")
    assert column.other_code == 2 and column.size == 4
    schema = Schema((column,))
    assert schema.to_dict()["columns"][0] == {"name": "port", "type": "categorical", "values": ["S", "C", "other"],
                                              "missing": True, "other": "other"}
    assert Schema.from_dict(schema.to_dict()) == schema
    with pytest.raises(SchemaError, match=r"other \('Q'\) must be one of its values"):
        Categorical("port", ("S", "C"), other="Q")
    with pytest.raises(SchemaError, match="unknown key 'other'"):
        Schema.from_dict({"columns": [{"name": "a", "type": "coded", "size": 2, "other": 1}]})
