"""Parquet input: a file or a folder of files reads to the same tables as the CSV of the same
rows, only the needed columns are read, and every bad input is one clear error naming the
file and row, with nothing written."""

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from cli.main import main
from synth.data import scan
from synth.errors import DataError
from synth.schema import Categorical, Coded, Schema
from synth.workload import Workload

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
