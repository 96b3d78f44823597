"""Parquet input: a file or a folder of files reads to the same tables as the CSV of the same
rows, only the needed columns are read, and every bad input is one clear error naming the
file and row, with nothing written; row groups read side by side come out in file order, the
first bad row in that order the error."""

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from synth_cli.main import main
from synth.data import reading as data
from synth.data.reading import scan
from synth.errors import DataError
from synth.data.schema import Categorical, Coded, Schema
from synth.data.workload import Workload

SCHEMA = Schema((Categorical("sex", ("female", "male")), Coded("age", 5), Coded("zone", 3)))
SUBSETS = [("sex", "age"), ("zone",)]


def rows(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    sex = rng.integers(0, 2, n)
    return pd.DataFrame({"sex": np.array(["female", "male"])[sex],
                         "age": np.where(rng.random(n) < 0.6, 2 * sex, rng.integers(0, 5, n)),
                         "zone": rng.integers(0, 3, n)})


def write_inputs(folder, n: int, files: int):
    """``rows(n, 1)`` as d.csv, d.parquet and a folder parts/ of ``files`` Parquet files, with
    the schema and the workload of every two-way marginal."""
    frame = rows(n, 1)
    frame.to_csv(folder / "d.csv", index=False)
    frame.to_parquet(folder / "d.parquet")
    (folder / "parts").mkdir()
    for i, part in enumerate(np.array_split(np.arange(len(frame)), files)):
        frame.iloc[part].to_parquet(folder / "parts" / f"part-{i}.parquet")
    SCHEMA.save(folder / "schema.json")
    Workload.marginals(SCHEMA, 2).save(folder / "w2.json")
    return folder


@pytest.fixture
def inputs(tmp_path):
    return write_inputs(tmp_path, 3000, 3)


def test_csv_parquet_file_and_folder_give_the_same_tables(inputs):
    scans = [scan(inputs / name, SCHEMA, SUBSETS, chunk_rows=700) for name in ("d.csv", "d.parquet", "parts")]
    for counts in scans:
        assert counts.n_rows == 3000
        for subset in SUBSETS:
            np.testing.assert_array_equal(counts.tables[subset], scans[0].tables[subset])


def test_only_the_needed_columns_are_read(tmp_path):
    frame = rows(100, 2)
    frame["zone"] = 7  # outside the schema: an error if it were read
    frame.to_parquet(tmp_path / "d.parquet")
    counts = scan(tmp_path / "d.parquet", SCHEMA, [("sex", "age")], columns=["sex", "age"])
    assert counts.n_rows == 100


@pytest.mark.parametrize("break_it,message", [
    (lambda f: f.assign(age=f["age"].where(f.index != 41, 9)), "part-1.parquet: row 42, column 'age': value 9"),
    (lambda f: f.assign(sex=f["sex"].where(f.index != 7, "other")), "part-1.parquet: row 8, column 'sex'"),
    (lambda f: f.assign(zone=f["zone"].astype("Int64").where(f.index != 3, pd.NA)), "part-1.parquet: row 4, column 'zone'"),
])
def test_a_bad_value_in_one_file_names_the_file_and_row(inputs, break_it, message):
    part = pd.read_parquet(inputs / "parts" / "part-1.parquet").reset_index(drop=True)
    break_it(part).to_parquet(inputs / "parts" / "part-1.parquet")
    with pytest.raises(DataError, match=message.replace("(", r"\(")):
        scan(inputs / "parts", SCHEMA, SUBSETS)


def test_what_pyarrow_says_of_the_data_is_labelled(tmp_path):
    """pyarrow's words on a value it cannot convert quote the value (a date 3 million years on):
    the message says it is NON-PRIVATE; so does one that says the file has no rows."""
    table = pa.table({"sex": ["male"], "age": pa.array([10**17], pa.date64()), "zone": [1]})
    pq.write_table(table, tmp_path / "far.parquet")
    with pytest.raises(DataError, match=r"far\.parquet: cannot read Parquet near row 1: year 3170843 is out of range "
                                        r"\(NON-PRIVATE: this message may quote the private data\)$"):
        scan(tmp_path / "far.parquet", SCHEMA, SUBSETS)
    rows(10, 3).iloc[:0].to_parquet(tmp_path / "none.parquet")
    with pytest.raises(DataError, match=r"none\.parquet: has columns but no data rows \(NON-PRIVATE: this message tells "
                                        r"that the private data has no rows\)$"):
        scan(tmp_path / "none.parquet", SCHEMA, SUBSETS)


def test_broken_folders_and_files_are_clear_errors(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="holds no Parquet file"):
        scan(tmp_path / "empty", SCHEMA, SUBSETS)
    (tmp_path / "junk.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(DataError, match="junk.parquet: not a readable Parquet file"):
        scan(tmp_path / "junk.parquet", SCHEMA, SUBSETS)
    rows(10, 3).drop(columns="zone").to_parquet(tmp_path / "short.parquet")
    with pytest.raises(DataError, match="'zone'.*missing from the data"):
        scan(tmp_path / "short.parquet", SCHEMA, SUBSETS)


def _generate(inputs, data, output, *extra):
    args = ["generate", str(data), "--schema", str(inputs / "schema.json"), "--workload", str(inputs / "w2.json"),
            "--epsilon", "1", "--seed", "3",
            "-o", str(output), "--quiet", *extra]
    return CliRunner().invoke(main, args)


def test_generate_from_csv_parquet_and_folder_writes_the_same_table(inputs):
    outputs = []
    for i, name in enumerate(("d.csv", "d.parquet", "parts")):
        result = _generate(inputs, inputs / name, inputs / f"out{i}.csv")
        assert result.exit_code == 0, result.output
        outputs.append((inputs / f"out{i}.csv").read_text())
    assert outputs[0] == outputs[1] == outputs[2]


def test_generate_stops_on_a_bad_partition_without_output(inputs):
    part = pd.read_parquet(inputs / "parts" / "part-2.parquet").reset_index(drop=True)
    part.loc[5, "age"] = -1
    part.to_parquet(inputs / "parts" / "part-2.parquet")
    result = _generate(inputs, inputs / "parts", inputs / "out.csv")
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "part-2.parquet: row 6, column 'age'" in result.output
    assert not (inputs / "out.csv").exists()


def test_generate_refuses_an_output_inside_the_input_folder(inputs):
    result = _generate(inputs, inputs / "parts", inputs / "parts" / "synthetic.csv")
    assert result.exit_code != 0 and "inside the input folder" in result.output
    assert not (inputs / "parts" / "synthetic.csv").exists()


# -- row groups read side by side -----------------------------------------------------------


def _grouped_file(path, n: int, group_rows: int, bad_at=()):
    """Coded columns only (the fast path), several row groups; ``bad_at``: rows given zone 3."""
    frame = rows(n, 7).drop(columns="sex")
    for row in bad_at:
        frame.loc[row, "zone"] = 3
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=group_rows)


CODED = SCHEMA.select(["age", "zone"])


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_row_groups_read_side_by_side_give_the_rows_in_order(tmp_path, monkeypatch, threads):
    _grouped_file(tmp_path / "d.parquet", 5000, 300)
    monkeypatch.setattr(data, "READ_THREADS", threads)
    codes = data.read(tmp_path / "d.parquet", CODED, chunk_rows=128).codes
    expected = rows(5000, 7)[["age", "zone"]].to_numpy()
    np.testing.assert_array_equal(codes, expected)


@pytest.mark.parametrize("parallel_rows", [0, 10**6])  # row groups one by one, or side by side
def test_the_first_bad_row_in_file_order_is_the_error(tmp_path, monkeypatch, parallel_rows):
    """Bad values in two row groups: the error names the earlier one, by its row in the file,
    whichever thread reads it."""
    _grouped_file(tmp_path / "d.parquet", 3000, 250, bad_at=(1234, 2500))
    monkeypatch.setattr(data, "READ_THREADS", 2)
    monkeypatch.setattr(data, "PARALLEL_GROUP_ROWS", parallel_rows)
    with pytest.raises(DataError, match=r"d\.parquet: row 1235, column 'zone': value 3 is outside"):
        scan(tmp_path / "d.parquet", CODED, [("age", "zone")])


def test_read_ahead_keeps_task_order_and_raises_in_order():
    import random
    import time

    def task(k):
        def run():
            time.sleep(random.random() / 200)
            if k == 6:
                raise ValueError("task 6")
            return [(k, i) for i in range(k % 3)]
        return run

    items = []
    with pytest.raises(ValueError, match="task 6"):
        for item in data._read_ahead([task(k) for k in range(12)], 3):
            items.append(item)
    assert items == [(k, i) for k in range(6) for i in range(k % 3)]
