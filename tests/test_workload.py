import itertools
import json
import re

import numpy as np
import pytest

from synth.errors import WorkloadError
from synth.data.schema import Categorical, Coded, Numeric, Schema
from synth.data.tables import marginal
from synth.data.workload import Workload

from . import reference


def parse(obj, schema):
    return Workload.from_dict(obj, schema, source="w.json")


def test_scalar_list_and_range_conditions(mixed_schema):
    w = parse(
        {
            "queries": [
                {"name": "men", "where": {"sex": "male"}},
                {"where": {"race": [2, 0, 2], "age": {"range": [18, 50]}}},
                {"where": {"age": 40}},
                {"where": {"race": {"range": [0, 1]}, "sex": ["female", "male"]}},
                {"where": {}},
            ]
        },
        mixed_schema,
    )
    assert [q.columns for q in w] == [("sex",), ("age", "race"), ("age",), ("sex", "race"), ()]
    np.testing.assert_array_equal(w[1].allowed[0], [1, 2])
    np.testing.assert_array_equal(w[1].allowed[1], [0, 2])
    assert w[0].name == "men"
    assert w.describe(0) == "sex = male"
    assert w.describe(1) == "age in [18, 50) AND race in {0, 2}"
    assert w.describe(2) == "age in [30, 50)"
    assert w.describe(3) == "sex in {female, male} AND race in {0, 1}"
    assert w.describe(4) == "all rows"


@pytest.mark.parametrize(
    "where, message",
    [
        ({"colour": 1}, r"w.json: query 0: unknown column 'colour'; columns are: sex, age, race"),
        ({"sex": "other"}, r"w.json: query 0, column 'sex': unknown value 'other'; allowed: female, male"),
        ({"race": 7}, r"query 0, column 'race': value 7 is outside the domain 0..2"),
        ({"race": {"range": [2, 1]}}, r"column 'race': range \[2, 1\] has lo > hi"),
        ({"age": {"range": [50, 18]}}, r"column 'age': range \[50, 18\] has lo > hi"),
        ({"sex": {"range": ["male", "female"]}}, r"column 'sex': range \['male', 'female'\] has lo after hi"),
        ({"age": {"range": [1]}}, r"must be a list \[lo, hi\]"),
        ({"age": {"between": [1, 2]}}, r"must be a value, a list, or"),
        ({"sex": []}, "empty list allows no value"),
        ({"sex": None}, "column 'sex': value null: the column holds no missing value"),
        ({"age": "old"}, "value 'old' is not a number"),
        ({"race": True}, "not an integer code"),
    ],
)
def test_bad_conditions_name_file_query_column_and_value(mixed_schema, where, message):
    with pytest.raises(WorkloadError, match=message):
        parse({"queries": [{"where": where}]}, mixed_schema)


@pytest.mark.parametrize(
    "obj, message",
    [
        ([], "expected a JSON object with a 'queries' list"),
        ({"queries": {}}, "'queries' must be a list"),
        ({"queries": [], "extra": 1}, "unknown key 'extra'"),
        ({"queries": [{"wher": {}}]}, "query 0: unknown key 'wher'"),
        ({"queries": [{"where": []}]}, "'where' must be an object"),
        ({"queries": [{"where": {}, "name": 3}]}, "'name' must be a string"),
        ({"queries": [{"where": {}}, 5]}, "query 1: expected an object"),
    ],
)
def test_malformed_workloads_are_refused(mixed_schema, obj, message):
    with pytest.raises(WorkloadError, match=message):
        parse(obj, mixed_schema)


def test_query_name_appears_in_errors(mixed_schema):
    with pytest.raises(WorkloadError, match=r"query 1 \('old men'\), column 'sex'"):
        parse({"queries": [{"where": {}}, {"name": "old men", "where": {"sex": "man"}}]}, mixed_schema)


def test_marginals_order_subsets_lexicographically_and_cells_row_major():
    schema = Schema((Coded("a", 2), Coded("b", 3), Coded("c", 2)))
    w = Workload.marginals(schema, 2)
    assert w.subsets == [("a", "b"), ("a", "c"), ("b", "c")]
    assert len(w) == 6 + 4 + 6
    first = [tuple(int(a[0]) for a in q.allowed) for q in w.queries[:6]]
    assert first == list(itertools.product(range(2), range(3)))


def test_marginals_follow_the_selected_column_order(mixed_schema):
    w = Workload.marginals(mixed_schema.select("race,sex"), 2)
    assert w.subsets == [("race", "sex")]
    assert w.describe(1) == "race = 0 AND sex = male"


def test_marginals_refuse_a_bad_way_or_too_many_queries(mixed_schema):
    with pytest.raises(WorkloadError, match="way \\(4\\) must be an integer from 1 to 3"):
        Workload.marginals(mixed_schema, 4)
    with pytest.raises(WorkloadError, match="have 26 cells, more than the limit of 10"):
        Workload.marginals(mixed_schema, 2, max_queries=10)


def test_json_round_trip_keeps_every_query(tmp_path, mixed_schema):
    w = parse(
        {
            "queries": [
                {"name": "q", "where": {"age": {"range": [0, 30]}, "sex": "female"}},
                {"where": {"age": [0, 60], "race": [0, 2]}},
                {"where": {"age": 99}},
            ]
        },
        mixed_schema,
    )
    path = tmp_path / "w.json"
    w.save(path)
    again = Workload.load(path, mixed_schema)
    assert [w.describe(i) for i in range(len(w))] == [again.describe(i) for i in range(len(again))]
    assert again[0].name == "q"
    assert json.loads(path.read_text())["queries"][2] == {"where": {"age": {"range": [50, 100]}}}


def test_marginal_workload_on_numeric_columns_round_trips(tmp_path, mixed_schema):
    w = Workload.marginals(mixed_schema, 1)
    w.save(tmp_path / "w.json")
    again = Workload.load(tmp_path / "w.json", mixed_schema)
    assert len(again) == len(w) == 2 + 4 + 3
    for original, loaded in zip(w, again):
        assert loaded.columns == original.columns
        assert [a.tolist() for a in loaded.allowed] == [a.tolist() for a in original.allowed]


def test_answers_match_row_by_row_counts(rng):
    schema = Schema((Coded("a", 4), Categorical("b", ("x", "y", "z")), Numeric("c", (0, 1, 2, 3, 4, 5)), Coded("d", 2)))
    codes = np.stack([rng.integers(0, s, 3000) for s in schema.shape], axis=1)
    queries = []
    for _ in range(300):
        k = int(rng.integers(0, 5))
        cols = rng.choice(4, size=k, replace=False)
        where = {}
        for c in cols:
            column = schema[int(c)]
            picked = rng.choice(column.size, size=int(rng.integers(1, column.size + 1)), replace=False)
            where[column.name] = column.to_query_value(np.sort(picked))
        queries.append({"where": where})
    w = parse({"queries": queries}, schema)
    tables = {s: marginal(codes, schema, s) for s in w.subsets}
    got = w.answer(tables)
    positions = lambda q: [schema.index(c) for c in q.columns]  # noqa: E731
    expected = [reference.query_count(codes, positions(q), list(q.allowed)) for q in w]
    np.testing.assert_array_equal(got, expected)
    assert w.answer(lambda s: tables[s]).tolist() == got.tolist()


def test_answer_checks_table_shapes(mixed_schema):
    w = parse({"queries": [{"where": {"sex": "male"}}]}, mixed_schema)
    with pytest.raises(ValueError, match=r"table for \('sex',\) has shape \(3,\), expected \(2,\)"):
        w.answer({("sex",): np.zeros(3)})


def test_float_tables_give_float_answers(mixed_schema):
    w = Workload.marginals(mixed_schema.select("sex"), 1)
    got = w.answer({("sex",): np.array([0.25, 0.75])})
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, [0.25, 0.75])


# -- whole marginals as items ({"marginal": [...]}) ---------------------------------------------


def _compact_and_cells():


    schema = Schema((Categorical("colour", ("red", "green", "blue")), Coded("a", 4), Coded("b", 2)))
    compact = Workload.marginals(schema, 2)
    return schema, compact, compact.cell_queries()


def test_a_whole_marginal_item_is_the_same_queries_as_its_cells():
    from synth.data.workload import MarginalCells

    schema, compact, cells = _compact_and_cells()
    assert all(isinstance(item, MarginalCells) for item in compact.items) and len(compact.items) == 3
    assert len(cells.items) == len(cells) == len(compact) == 3 * 4 + 3 * 2 + 4 * 2
    rng = np.random.default_rng(3)
    tables = {s: rng.integers(0, 50, [schema[c].size for c in s]) for s in compact.subsets}
    np.testing.assert_array_equal(compact.answer(tables), cells.answer(tables))
    for i in [0, 5, 11, 12, 17, 18, 25, -1]:
        a, b = compact[i], cells[i]
        assert a.columns == b.columns and [x.tolist() for x in a.allowed] == [x.tolist() for x in b.allowed]
        assert compact.describe(i) == cells.describe(i)
    assert [q.columns for q in compact] == [q.columns for q in cells.queries]
    assert {s: ids.tolist() for s, ids in compact.groups().items()} == {s: ids.tolist() for s, ids in
                                                                        cells.groups().items()}
    with pytest.raises(IndexError):
        compact[len(compact)]


def test_whole_marginals_round_trip_through_json_as_one_line_each(tmp_path):
    schema, compact, _ = _compact_and_cells()
    compact.save(tmp_path / "w.json")
    text = (tmp_path / "w.json").read_text()
    assert '{"marginal": ["colour", "a"]}' in text and "where" not in text
    loaded = Workload.load(tmp_path / "w.json", schema)
    assert loaded.items == compact.items
    mixed = {"queries": [{"where": {"a": 1}}, {"marginal": ["b", "colour"]}, {"where": {}}]}
    workload = Workload.from_dict(mixed, schema)
    assert len(workload) == 1 + 6 + 1 and workload[1].columns == ("colour", "b")  # schema order
    assert workload.describe(7) == "all rows" and workload.describe(2) == "colour = red AND b = 1"


@pytest.mark.parametrize("item, message", [
    ({"marginal": []}, "'marginal' must be a non-empty list of column names, got []"),
    ({"marginal": "a"}, "'marginal' must be a non-empty list of column names, got 'a'"),
    ({"marginal": ["a", "a"]}, "'marginal' names a column twice"),
    ({"marginal": ["a", "zz"]}, "unknown column 'zz'"),
    ({"marginal": ["a"], "name": "x"}, "unknown key 'name' beside 'marginal'"),
])
def test_bad_marginal_items_are_named(item, message):
    schema, _, _ = _compact_and_cells()
    with pytest.raises(WorkloadError, match=re.escape(message)):
        Workload.from_dict({"queries": [{"where": {}}, item]}, schema, source="w.json")
