"""A synthetic table writes values back as the data wrote them: integers stay integers, decimals
keep their ``digits``, dates and timestamps come out in ISO form inside their bins, identifier
columns get fresh ids (never a real value) and free text is left out or a placeholder."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import synth
from synth.data import reading
from synth.data.schema import Categorical, Numeric, Schema
from synth.data.values import decimal_places, parse_times
from synth.models.synthetic import PLACEHOLDER, decode_rows, output_columns, write_synthetic

ROWS = 400


@pytest.fixture
def schema() -> Schema:
    return Schema((
        Numeric("age", (0, 18, 65, 100)),                                      # integer edges: integers
        Numeric("fare", (0.0, 7.5, 31.0, 512.33), digits=2, missing=True),     # decimals, 2 places
        Numeric("parch", (0.0, 0.5, 2.5, 9.0), digits=0),                      # float edges, integer values
        Numeric("day", ("1912-04-10", "1912-04-15", "2024-02-29", "2024-03-01", "2024-03-05"), time="date"),
        Numeric("at", ("1969-12-31T23:00:00", "1970-01-01T00:00:00", "2024-03-01T12:30:00"), time="datetime",
                missing=True),
        Categorical("sex", ("female", "male")),
    ), ignored=("PassengerId", "Name", "Ticket", "Cabin"),
        roles={"PassengerId": "identifier", "Name": "text", "Ticket": "integer-identifier"},
        order=("PassengerId", "age", "Name", "fare", "parch", "day", "at", "sex", "Ticket", "Cabin"))


def every_code(schema: Schema, rows: int, rng) -> np.ndarray:
    """Codes covering every code of every column (the missing ones too), then random ones."""
    return np.stack([np.concatenate([np.arange(c.size), rng.integers(0, c.size, rows - c.size)])
                     for c in schema], axis=1)


def test_every_value_lies_in_its_bin_with_the_columns_type_and_precision(schema, rng):
    codes = every_code(schema, ROWS, rng)
    frame = decode_rows(codes, schema, rng=rng)
    age = frame["age"].to_numpy()
    assert age.dtype == np.int64 and (Numeric.bin_codes(schema["age"], age)[0] == codes[:, 0]).all()
    fare, present = frame["fare"].to_numpy(), codes[:, 1] != schema["fare"].missing_code
    assert np.isnan(fare[~present]).all() and not np.isnan(fare[present]).any()
    assert (schema["fare"].bin_codes(fare[present])[0] == codes[present, 1]).all()
    assert (np.round(fare[present], 2) == fare[present]).all()  # two places exactly...
    assert len(np.unique(fare[present])) > 50  # ... and not a few values only
    parch = frame["parch"].to_numpy()
    assert parch.dtype == np.int64 and (schema["parch"].bin_codes(parch.astype(float))[0] == codes[:, 2]).all()
    assert set(parch[codes[:, 2] == 0]) == {0} and set(parch[codes[:, 2] == 1]) <= {1, 2}


def test_dates_and_timestamps_come_out_iso_inside_their_bins(schema, rng):
    codes = every_code(schema, ROWS, rng)
    frame = decode_rows(codes, schema, rng=rng)
    days = frame["day"].to_numpy(dtype=object)
    assert all(re.fullmatch(r"\d{4}-\d{2}-\d{2}", d) for d in days)
    numbers, bad = parse_times(days, "date")
    assert not bad.any() and (schema["day"].bin_codes(numbers)[0] == codes[:, 3]).all()
    assert set(days[codes[:, 3] == 2]) == {"2024-02-29"}  # a one-day bin: the leap day itself
    assert set(days[codes[:, 3] == 0]) <= {f"1912-04-{d}" for d in range(10, 15)}  # before 1970
    assert set(days[codes[:, 3] == 3]) <= {"2024-03-01", "2024-03-02", "2024-03-03", "2024-03-04", "2024-03-05"}
    stamps, absent = frame["at"].to_numpy(dtype=object), codes[:, 4] == schema["at"].missing_code
    assert pd.isna(frame["at"][absent]).all()
    assert all(re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}", s) for s in stamps[~absent])
    seconds = parse_times(stamps[~absent], "datetime")[0]
    assert (schema["at"].bin_codes(seconds)[0] == codes[~absent, 4]).all()
    assert any(s.startswith("1969-12-31T23:") for s in stamps[~absent])


def test_midpoints_are_on_the_grid_too(schema, rng):
    codes = every_code(schema, ROWS, rng)
    frame = decode_rows(codes, schema, numeric="midpoint")
    assert set(frame["day"][codes[:, 3] == 1]) == {"1968-03-23"}  # the middle day of 1912-04-15 .. 2024-02-29
    assert frame["parch"].dtype == np.int64 and set(frame["parch"][codes[:, 2] == 1]) == {2}  # 1.5 -> 2 in [0.5, 2.5)
    assert set(frame["fare"][codes[:, 1] == 0]) == {3.75}


def test_a_table_reads_back_under_its_schema(schema, rng, tmp_path):
    path = tmp_path / "synthetic.csv"
    distribution = np.full(schema.universe_size, 1 / schema.universe_size)
    write_synthetic(path, distribution, schema, ROWS, rng=rng, chunk_rows=70)
    text = path.read_text().splitlines()
    assert text[0] == "PassengerId,age,fare,parch,day,at,sex,Ticket"  # the data's order; free text left out
    table = pd.read_csv(path, dtype=str, keep_default_na=False)
    assert table["age"].str.fullmatch(r"\d+").all() and table["parch"].str.fullmatch(r"\d").all()
    assert decimal_places(table["fare"]) <= 2 and table["fare"].str.contains(r"\.\d", regex=True).any()
    assert reading.read(path, schema).n_rows == ROWS  # every value inside the schema, ids and all


def test_identifiers_are_fresh_and_never_a_real_value(schema, rng, tmp_path):
    real_ids = [f"syn-{i:06d}x" for i in range(ROWS)] + [str(i) for i in range(1, ROWS + 1)]
    path = tmp_path / "synthetic.csv"
    distribution = np.full(schema.universe_size, 1 / schema.universe_size)
    write_synthetic(path, distribution, schema, ROWS, rng=rng, chunk_rows=70)  # ids go on across chunks
    table = pd.read_csv(path, dtype=str)
    assert table["PassengerId"].tolist() == [f"syn-{i:06d}" for i in range(1, ROWS + 1)]
    assert not set(table["PassengerId"]) & set(real_ids)
    assert table["Ticket"].tolist() == [str(i) for i in range(1, ROWS + 1)]  # integers: the row number alone


def test_free_text_is_left_out_or_a_placeholder(schema):
    assert output_columns(schema) == ["PassengerId", "age", "fare", "parch", "day", "at", "sex", "Ticket"]
    assert output_columns(schema, "placeholder") == ["PassengerId", "age", "Name", "fare", "parch", "day", "at",
                                                     "sex", "Ticket"]
    unordered = Schema(schema.columns, ignored=schema.ignored, roles=schema.roles)  # no order: ids first, text last
    assert output_columns(unordered, "placeholder") == ["PassengerId", "Ticket", *schema.names, "Name"]
    with pytest.raises(ValueError, match="free_text \\('keep'\\) must be one of"):
        output_columns(schema, "keep")


def test_parquet_keeps_the_types(schema, rng, tmp_path):
    pytest.importorskip("pyarrow")
    path = tmp_path / "synthetic.parquet"
    distribution = np.full(schema.universe_size, 1 / schema.universe_size)
    write_synthetic(path, distribution, schema, 50, rng=rng, free_text="placeholder")
    table = pd.read_parquet(path)
    assert list(table.columns) == output_columns(schema, "placeholder")
    assert table["age"].dtype == np.int64 and table["parch"].dtype == np.int64 and table["Ticket"].dtype == np.int64
    assert table["fare"].dtype == np.float64 and set(table["Name"]) == {PLACEHOLDER}
    assert parse_times(table["day"], "date")[1].sum() == 0
    assert reading.read(path, schema).n_rows == 50


# -- end to end: the data in, the table out -------------------------------------------------------


@pytest.fixture
def titanic(tmp_path, rng):
    """A small table with ids, names, decimals and dates, and its schema file."""
    n = 300
    frame = pd.DataFrame({
        "PassengerId": np.arange(1, n + 1),
        "Name": [f"Passenger, Mr. {i}" for i in range(n)],
        "age": rng.integers(1, 80, n),
        "fare": np.round(rng.uniform(0, 500, n), 2),
        "boarded": (pd.Timestamp("1912-04-10") + pd.to_timedelta(rng.integers(0, 3, n), unit="D")).strftime(
            "%Y-%m-%d"),
        "sex": rng.choice(["female", "male"], n),
    })
    frame.to_csv(tmp_path / "titanic.csv", index=False)
    schema = Schema((Numeric("age", (0, 18, 65, 100)), Numeric("fare", (0, 10, 50, 512.33), digits=2),
                     Numeric("boarded", ("1912-04-10", "1912-04-11", "1912-04-13"), time="date"),
                     Categorical("sex", ("female", "male"))),
                    rows=n, ignored=("PassengerId", "Name"), roles={"PassengerId": "identifier", "Name": "text"},
                    order=tuple(frame.columns))
    schema.save(tmp_path / "titanic-schema.json")
    return frame, schema, tmp_path


@pytest.mark.parametrize("free_text", ["drop", "placeholder"])
def test_generate_writes_values_as_the_data_wrote_them(titanic, free_text):
    frame, schema, folder = titanic
    done = subprocess.run([sys.executable, "-m", "synth", "generate", "titanic.csv", "--schema", "titanic-schema.json",
                           "--epsilon", "1", "--seed", "3", "--free-text", free_text, "-o", "out.csv", "--quiet"],
                          cwd=folder, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    table = pd.read_csv(folder / "out.csv", dtype=str, keep_default_na=False)
    expected = ["PassengerId", "Name", "age", "fare", "boarded", "sex"] if free_text == "placeholder" else \
        ["PassengerId", "age", "fare", "boarded", "sex"]
    assert list(table.columns) == expected
    assert not set(table["PassengerId"]) & set(frame["PassengerId"].astype(str))
    if free_text == "placeholder":
        assert set(table["Name"]) == {PLACEHOLDER} and not set(table["Name"]) & set(frame["Name"])
    assert table["age"].str.fullmatch(r"\d+").all()
    assert table["fare"].str.fullmatch(r"\d+(\.\d{1,2})?").all()
    assert set(table["boarded"]) <= {"1912-04-10", "1912-04-11", "1912-04-12", "1912-04-13"}
    assert reading.read(folder / "out.csv", schema).n_rows == len(table)


def test_the_synthesizer_fills_the_roles_too(titanic):
    frame, schema, _ = titanic
    out = synth.Synthesizer.create("mwem", epsilon=1.0, rng=5).fit_sample(frame, schema, n_rows=40,
                                                                          free_text="placeholder")
    assert list(out.columns) == ["PassengerId", "Name", "age", "fare", "boarded", "sex"]
    assert out["PassengerId"].tolist()[:2] == ["syn-000001", "syn-000002"] and set(out["Name"]) == {PLACEHOLDER}
    assert out["boarded"].str.fullmatch(r"1912-04-1[0-3]").all()
    assert list(synth.Synthesizer.create("mwem", epsilon=1.0, rng=5).fit(frame, schema).sample(5).columns) == \
        ["PassengerId", "age", "fare", "boarded", "sex"]
