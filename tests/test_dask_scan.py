"""The scan on Dask (``synth.dask_scan``) on a LocalCluster of 2 workers: the same tables as the
in-process scan, exactly, from CSV, Parquet and a Dask DataFrame; a partition with a bad value
is one clear error and no output; and without Dask the option is refused in one line."""

import sys

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from cli.main import main
from synth import Synthesizer
from synth.data import scan
from synth.errors import DataError, SynthError

from .test_parquet_input import SCHEMA, write_inputs

dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")

SUBSETS = [("sex", "age"), ("age", "zone"), ("zone",)]


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                                  silence_logs=50) as cluster, distributed.Client(cluster) as client:
        yield client


@pytest.fixture
def inputs(tmp_path):
    return write_inputs(tmp_path, 5000, 4)


def _assert_same(counts, expected):
    assert counts.n_rows == expected.n_rows
    for subset in SUBSETS:
        np.testing.assert_array_equal(counts.tables[subset], expected.tables[subset])


def test_dask_tables_equal_the_in_process_ones(client, inputs, monkeypatch):
    from synth import dask_scan

    monkeypatch.setattr(dask_scan, "CSV_BLOCK_BYTES", 20_000)  # several CSV partitions
    expected = scan(inputs / "d.csv", SCHEMA, SUBSETS)
    seen = []
    csv = dask_scan.scan_dask(inputs / "d.csv", SCHEMA, SUBSETS, client=client,
                              progress=lambda done, fraction: seen.append((done, fraction)))
    assert len(seen) >= 2 and seen[-1] == (5000, 1.0)  # one report per partition
    _assert_same(csv, expected)
    _assert_same(dask_scan.scan_dask(inputs / "parts", SCHEMA, SUBSETS, client=client), expected)
    frame = dd.from_pandas(pd.read_csv(inputs / "d.csv"), npartitions=5)
    _assert_same(dask_scan.scan_dask(frame, SCHEMA, SUBSETS, client=client), expected)


def test_a_bad_value_in_one_partition_is_one_clear_error(client, inputs):
    from synth.dask_scan import scan_dask

    part = pd.read_parquet(inputs / "parts" / "part-2.parquet").reset_index(drop=True)
    part.loc[9, "zone"] = 3
    part.to_parquet(inputs / "parts" / "part-2.parquet")
    with pytest.raises(DataError, match=r"partition 3 of 4\): row 10, column 'zone': value 3 is outside"):
        scan_dask(inputs / "parts", SCHEMA, SUBSETS, client=client)


def test_synthesizer_fits_a_dask_dataframe_as_it_fits_pandas(client, inputs):
    frame = pd.read_csv(inputs / "d.csv")
    releases = [Synthesizer("mwem", 1.0, rng=5).fit(data, SCHEMA).model.distribution
                for data in (frame, dd.from_pandas(frame, npartitions=3))]
    np.testing.assert_array_equal(releases[0], releases[1])


def _generate(inputs, data, output, *extra):
    args = ["generate", str(data), "--schema", str(inputs / "schema.json"), "--workload", str(inputs / "w2.json"),
            "--epsilon", "1", "--seed", "3", "-o", str(output), "--quiet", *extra]
    return CliRunner().invoke(main, args)


def test_generate_on_a_local_cluster_writes_the_in_process_table(client, inputs):
    address = client.scheduler.address
    for i, extra in enumerate(([], ["--scheduler", address])):
        result = _generate(inputs, inputs / "parts", inputs / f"out{i}.csv", *extra)
        assert result.exit_code == 0, result.output
    assert (inputs / "out0.csv").read_text() == (inputs / "out1.csv").read_text()


@pytest.mark.slow
def test_generate_scheduler_local_starts_its_own_cluster(inputs):
    result = _generate(inputs, inputs / "d.csv", inputs / "out.csv", "--scheduler", "local")
    assert result.exit_code == 0, result.output
    assert len(pd.read_csv(inputs / "out.csv")) > 4000


def test_generate_stops_on_a_bad_partition_without_output(client, inputs):
    part = pd.read_parquet(inputs / "parts" / "part-1.parquet").reset_index(drop=True)
    part.loc[0, "sex"] = "unknown"
    part.to_parquet(inputs / "parts" / "part-1.parquet")
    result = _generate(inputs, inputs / "parts", inputs / "out.csv", "--scheduler", client.scheduler.address)
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "partition 2 of 4): row 1, column 'sex'" in result.output
    assert not (inputs / "out.csv").exists()


def test_without_dask_the_option_is_refused_in_one_line(inputs, monkeypatch):
    for name in ("distributed", "dask", "dask.dataframe"):
        monkeypatch.setitem(sys.modules, name, None)  # import fails as if not installed
    from synth.dask_scan import require_dask

    with pytest.raises(SynthError, match=r"needs Dask: pip install 'synth\[dask\]'"):
        require_dask()
    result = _generate(inputs, inputs / "d.csv", inputs / "out.csv", "--scheduler", "local")
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "--scheduler needs Dask: pip install 'synth[dask]'" in result.output
    assert not (inputs / "out.csv").exists()


def test_parquet_row_groups_gathered_into_partitions(client, tmp_path, monkeypatch):
    """A file of many row groups, read a few groups a partition: the in-process tables, and a
    bad value named by its row in the file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from synth import dask_scan

    frame = pd.read_csv(write_inputs(tmp_path, 3000, 2) / "d.csv")
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), tmp_path / "g.parquet", row_group_size=300)
    monkeypatch.setattr(dask_scan, "PARQUET_PIECE_ROWS", 1000)  # 3 groups a partition, 4 partitions
    pieces = dask_scan._parquet_pieces(tmp_path / "g.parquet", SCHEMA, SCHEMA)
    assert [(groups, first) for _, groups, first in pieces] == [([0, 1, 2], 1), ([3, 4, 5], 901),
                                                                ([6, 7, 8], 1801), ([9], 2701)]
    _assert_same(dask_scan.scan_dask(tmp_path / "g.parquet", SCHEMA, SUBSETS, client=client),
                 scan(tmp_path / "d.csv", SCHEMA, SUBSETS))
    frame.loc[2345, "zone"] = 3
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), tmp_path / "g.parquet", row_group_size=300)
    with pytest.raises(DataError, match=r"g\.parquet \(partition 3 of 4\): row 2346, column 'zone': value 3"):
        dask_scan.scan_dask(tmp_path / "g.parquet", SCHEMA, SUBSETS, client=client)
