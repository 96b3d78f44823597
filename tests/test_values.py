"""synth.data.values: ISO dates and times as numbers and back, decimal places, bin grids; and
the schema keys that use them (``digits``, ``time``, ``roles``, ``order``)."""

from __future__ import annotations

import datetime

import numpy as np
import pandas as pd
import pytest

from synth.data import reading
from synth.data.schema import Numeric, Schema
from synth.data.values import checked_times, decimal_places, format_times, grid_bounds, parse_times
from synth.errors import DataError, SchemaError


# -- parse_times / format_times ------------------------------------------------------------------


def test_dates_are_days_since_1970_by_hand():
    values, bad = parse_times(["1970-01-01", "1970-01-02", "1969-12-31", "2000-03-01", "2024-02-29",
                               "1900-01-01"], "date")
    # 2000-03-01: 30 years of 365 days, 7 leap days (72 76 80 84 88 92 96), then Jan + Feb 2000 (31 + 29)
    assert values.tolist() == [0, 1, -1, 30 * 365 + 7 + 60, 19782, -25567]
    assert not bad.any()


def test_datetimes_are_seconds_since_1970_in_every_written_form():
    values, bad = parse_times(["1970-01-01T00:00:01", "1970-01-02 00:00:00", "1970-01-01T01:30",
                               "1970-01-01", " 1969-12-31T23:59:59 ", "1970-01-01T00:00:00.25"], "datetime")
    assert values.tolist() == [1, 86_400, 5_400, 0, -1, 0.25]
    assert not bad.any()


def test_missing_cells_are_nan_and_not_bad():
    values, bad = parse_times(["2024-01-01", "", "  ", None, float("nan"), pd.NaT], "date")
    assert values[0] == 19723 and np.isnan(values[1:]).all()
    assert not bad.any()


@pytest.mark.parametrize("text", ["2023-02-29", "2024-13-01", "2024-00-10", "2024-1-5", "01/03/2024", "20240301",
                                  "2024-03-01T12:00:00", "2024-03-01Z", "yesterday", "19782"])
def test_what_a_date_column_refuses(text):
    values, bad = parse_times(["2024-03-01", text], "date")
    assert bad.tolist() == [False, True] and np.isnan(values[1])


@pytest.mark.parametrize("text", ["2024-03-01T25:00", "2024-03-01T12:61:00", "2024-03-01T12:30:00+02:00",
                                  "2024-03-01 12", "2024-02-30 10:00"])
def test_what_a_datetime_column_refuses(text):
    assert parse_times([text], "datetime")[1].tolist() == [True]


def test_a_bad_cell_among_many_is_found_alone():
    cells = ["2024-01-01"] * 1000 + ["2024-02-30"] + ["1999-12-31"] * 10
    values, bad = parse_times(cells, "date")
    assert np.flatnonzero(bad).tolist() == [1000]
    assert values[1001] == 10956


def test_categories_and_datetime_arrays_are_taken_as_they_are():
    cats = pd.Series(["2024-03-01", None, "1969-07-20", "2024-03-01"], dtype="category")
    values, bad = parse_times(cats, "date")
    assert values[[0, 2, 3]].tolist() == [19783, -165, 19783] and np.isnan(values[1]) and not bad.any()
    stamps = pd.Series(pd.to_datetime(["2024-03-01 00:00", "2024-03-01 06:00", None]))
    assert parse_times(stamps, "datetime")[0][:2].tolist() == [1709251200, 1709272800]
    assert parse_times(stamps, "date")[1].tolist() == [False, True, False]  # a time of day is no date
    aware = pd.Series(pd.to_datetime(["2024-03-01 01:00"])).dt.tz_localize("Europe/Oslo")
    assert parse_times(aware, "datetime")[0].tolist() == [1709251200]  # read as UTC


def test_date_objects_are_taken_and_numbers_are_bad():
    values, bad = parse_times([datetime.date(2024, 3, 1), datetime.datetime(1970, 1, 2), 19783, True], "date")
    assert values[:2].tolist() == [19783, 1] and bad.tolist() == [False, False, True, True]


def test_format_times_writes_iso_whole_days_and_seconds():
    assert format_times([0, -1, 19782, 19782.9, np.nan], "date").tolist() == [
        "1970-01-01", "1969-12-31", "2024-02-29", "2024-02-29", None]
    assert format_times([0, 1709296200.7, -0.5], "datetime").tolist() == [
        "1970-01-01T00:00:00", "2024-03-01T12:30:00", "1969-12-31T23:59:59"]


@pytest.mark.parametrize("unit", ["date", "datetime"])
def test_format_then_parse_is_the_identity_on_whole_units(unit, rng):
    numbers = rng.integers(-80_000, 80_000, 500) * (1 if unit == "date" else 86_399)
    values, bad = parse_times(format_times(numbers, unit), unit)
    assert not bad.any() and values.tolist() == numbers.tolist()


def test_checked_times_names_column_row_and_value():
    with pytest.raises(ValueError, match=r"^column 'day', row 12: value '2024-02-30' is not a date \(YYYY-MM-DD\)$"):
        checked_times(["2024-02-01", "2024-02-30"], "date", column="day", first_row=11)
    with pytest.raises(ValueError, match="make the column's time \"datetime\""):
        checked_times(["2024-02-01 10:00"], "date", column="day")
    with pytest.raises(ValueError, match="time \\('week'\\) must be one of: 'date', 'datetime'"):
        parse_times(["2024-02-01"], "week")


# -- decimal_places and grid_bounds ---------------------------------------------------------------


@pytest.mark.parametrize("texts, places", [(["1", "22", "-3"], 0), (["1.5", "2.25"], 2), (["2.50"], 2),
                                           ([".125", "x", "", None], 3), (["1.5e-2"], 3), (["1.25E1"], 1),
                                           (["3e5", "12.0"], 1), ([], 0), (["abc"], 0)])
def test_decimal_places(texts, places):
    assert decimal_places(texts) == places


def test_grid_bounds_open_bins_and_a_closed_last_one():
    first, last = grid_bounds(np.array([0.0, 0.25, 0.3, 1.0]), 10.0)
    assert first.tolist() == [0, 3, 3] and last.tolist() == [2, 2, 10]  # [0.25, 0.3) holds no tenth
    first, last = grid_bounds(np.array([0.1, 0.2, 0.3]), 10.0)  # 0.1 * 10, 0.3 * 10 are not whole in floats
    assert first.tolist() == [1, 2] and last.tolist() == [1, 3]


def test_grid_bounds_stay_inside_on_awkward_floats(rng):
    edges = np.sort(np.round(rng.uniform(-1000, 1000, 200), 2))
    edges = np.unique(edges)
    first, last = grid_bounds(edges, 100.0)
    assert (first / 100 >= edges[:-1]).all() and (last[:-1] / 100 < edges[1:-1]).all()
    assert ((first - 1) / 100 < edges[:-1]).all() and ((last[:-1] + 1) / 100 >= edges[1:-1]).all()


# -- the schema keys ------------------------------------------------------------------------------


def test_numeric_time_and_digits_round_trip_through_json():
    schema = Schema((Numeric("day", ("2024-01-01", "2024-02-01", "2024-12-31"), time="date", missing=True),
                     Numeric("at", (0, 3600.5), time="datetime"),
                     Numeric("fare", (0, 7.5, 512.33), digits=2)))
    assert schema["day"].edges == (19723, 19754, 20088)
    data = schema.to_dict()
    assert data["columns"][0]["edges"] == ["2024-01-01", "2024-02-01", "2024-12-31"]
    assert data["columns"][0]["time"] == "date" and data["columns"][2]["digits"] == 2
    assert data["columns"][1]["edges"] == [0, 3600.5]  # not whole seconds: numbers
    assert Schema.from_dict(data) == schema
    assert Schema.from_dict({"columns": [{"name": "d", "type": "numeric", "time": "date",
                                          "edges": [19723, "2024-02-01"]}]})["d"].edges == (19723, 19754)
    assert schema["day"].describe(np.array([0])) == "day in [2024-01-01, 2024-02-01)"
    assert schema["day"].code_of("2024-06-30") == 1
    assert schema["day"].codes_in_range("2024-01-01", "2024-03-01").tolist() == [0]


@pytest.mark.parametrize("column, message", [
    ({"edges": [0, 1], "digits": -1}, r"digits \(-1\) must be an integer from 0 to 15"),
    ({"edges": [0, 1], "digits": 1.5}, r"digits \(1.5\) must be an integer"),
    ({"edges": [0, 1], "digits": True}, r"digits \(True\) must be an integer"),
    ({"edges": [0, 1], "time": "week"}, r"time \('week'\) must be one of: 'date', 'datetime'"),
    ({"edges": [0, 1], "time": "date", "digits": 2}, "a time column holds whole days or seconds; drop 'digits'"),
    ({"edges": ["2024-01-01", "2024-02-01"]}, "bin edge '2024-01-01' must be a finite number \\(give the column "
                                              "\"time\""),
    ({"edges": ["2024-01-01", "2024-02-30"], "time": "date"}, "bin edge '2024-02-30' must be a number or a date"),
    ({"edges": [0.2, 0.4, 1], "digits": 0}, r"bin \[0.2, 0.4\) holds no value with 0 decimal places"),
    ({"edges": [0, 0.5, 0.9, 5], "time": "date"}, r"bin \[1970-01-01T?.*holds no whole day|bin \[0.5, 0.9\) holds no whole day"),
    ({"edges": ["2024-01-02", "2024-01-01"], "time": "date"}, "but 2024-01-02 is followed by 2024-01-01"),
])
def test_bad_numeric_keys_are_refused(column, message):
    with pytest.raises(SchemaError, match=message):
        Schema.from_dict({"columns": [{"name": "x", "type": "numeric", **column}]})


def test_roles_and_order_round_trip_and_are_checked():
    data = {"columns": [{"name": "age", "type": "numeric", "edges": [0, 100]}],
            "ignored": ["PassengerId", "Name", "Cabin"],
            "roles": {"PassengerId": "identifier", "Name": "text"},
            "order": ["PassengerId", "Name", "age", "Cabin"]}
    schema = Schema.from_dict(data)
    assert schema.roles == {"PassengerId": "identifier", "Name": "text"}
    assert Schema.from_dict(schema.to_dict()) == schema and schema.to_dict()["order"] == data["order"]
    assert schema.project(["age"]).roles == schema.roles
    for bad, message in [({"roles": {"age": "text"}}, "roles: column 'age' must be listed in 'ignored'"),
                         ({"roles": {"Name": "secret"}}, "role 'secret' must be one of: 'identifier', "
                                                         "'integer-identifier', 'text'"),
                         ({"roles": ["Name"]}, "'roles' must be an object"),
                         ({"order": ["age", "age"]}, "lists a column twice"),
                         ({"order": ["Ticket"]}, "order: 'Ticket' must name a schema column or an ignored one"),
                         ({"order": "age"}, "'order' must be a list")]:
        with pytest.raises(SchemaError, match=message):
            Schema.from_dict({**data, **bad})


# -- reading dates --------------------------------------------------------------------------------


def _schema() -> Schema:
    return Schema((Numeric("day", ("2000-01-01", "2020-01-01", "2030-01-01"), time="date", missing=True),
                   Numeric("at", ("2024-01-01T00:00:00", "2024-01-01T12:00:00", "2024-01-02T00:00:00"),
                           time="datetime")))


def test_csv_dates_are_read_into_their_bins(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("day,at\n2019-12-31,2024-01-01 11:59:59\n2020-01-01,2024-01-01T12:00\n,2024-01-01\n"
                    "1969-07-20,2024-01-02T00:00:00\n")
    encoded = reading.read(path, _schema())
    assert encoded.codes.tolist() == [[0, 0], [1, 1], [2, 0], [0, 1]]
    assert encoded.clipped == {"day": 1}  # 1969 lies before the first edge


def test_a_bad_date_in_a_csv_names_file_row_column_and_value(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("day,at\n2019-12-31,2024-01-01\n2019-02-29,2024-01-01\n")
    with pytest.raises(DataError, match=r"d.csv: row 2, column 'day': value '2019-02-29' is not a date "
                                        r"\(YYYY-MM-DD\) \(NON-PRIVATE"):
        reading.read(path, _schema())
    assert reading.read(path, _schema(), bad_rows="drop").n_rows == 1


def test_frames_and_parquet_with_datetime_types_are_read(tmp_path):
    frame = pd.DataFrame({"day": pd.to_datetime(["2019-12-31", None, "2021-05-05"]),
                          "at": pd.to_datetime(["2024-01-01 13:00", "2024-01-01 01:00", "2024-01-01 12:00"])})
    assert reading.read(frame, _schema()).codes.tolist() == [[0, 1], [2, 0], [1, 1]]
    frame.to_parquet(tmp_path / "d.parquet")
    assert reading.read(tmp_path / "d.parquet", _schema()).codes.tolist() == [[0, 1], [2, 0], [1, 1]]
    numbers = frame.assign(day=[18000.0, 18001.0, 18002.0])
    with pytest.raises(DataError, match="row 1, column 'day': value 18000.0 is not a date .*the column holds numbers"):
        reading.read(numbers, _schema())


def test_a_date_column_refuses_numbers_in_a_csv(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("day,at\n18000,2024-01-01\n")
    with pytest.raises(DataError, match="row 1, column 'day': value '?18000'? is not a date"):
        reading.read(path, _schema())
