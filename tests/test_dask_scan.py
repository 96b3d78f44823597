"""The scan on Dask (``synth.data.dask_scan``) on a LocalCluster of 2 workers: the same tables as the
in-process scan, exactly, from CSV, Parquet and a Dask DataFrame; a partition with a bad value
is the in-process reader's one clear error, at the row in the file, no task erring on a worker,
and no output; a malformed --scheduler address is one line; and without Dask the option is
refused in one line."""

import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from synth_cli.main import main
from synth import Synthesizer
from synth.data.reading import scan
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
    from synth.data import dask_scan

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
    from synth.data.dask_scan import scan_dask

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


def _generate_process(inputs, data, output, *extra) -> subprocess.CompletedProcess:
    """``_generate`` as its own program: a CLI run that connects to the fixture's cluster must
    not be a second Client in this process (two clients' event loops in one process made
    distributed fail now and then with 'bound to a different event loop')."""
    args = ["generate", str(data), "--schema", str(inputs / "schema.json"), "--workload", str(inputs / "w2.json"),
            "--epsilon", "1", "--seed", "3", "-o", str(output), "--quiet", *extra]
    return subprocess.run([sys.executable, "-m", "synth", *args], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[1])


def test_generate_on_a_local_cluster_writes_the_in_process_table(client, inputs):
    result = _generate(inputs, inputs / "parts", inputs / "out0.csv")
    assert result.exit_code == 0, result.output
    done = _generate_process(inputs, inputs / "parts", inputs / "out1.csv", "--scheduler", client.scheduler.address)
    assert done.returncode == 0, done.stderr
    assert (inputs / "out0.csv").read_text() == (inputs / "out1.csv").read_text()


@pytest.mark.slow
def test_generate_scheduler_local_starts_its_own_cluster(inputs):
    done = _generate_process(inputs, inputs / "d.csv", inputs / "out.csv", "--scheduler", "local")
    assert done.returncode == 0, done.stderr
    assert len(pd.read_csv(inputs / "out.csv")) > 4000


def test_generate_stops_on_a_bad_partition_without_output(client, inputs):
    part = pd.read_parquet(inputs / "parts" / "part-1.parquet").reset_index(drop=True)
    part.loc[0, "sex"] = "unknown"
    part.to_parquet(inputs / "parts" / "part-1.parquet")
    done = _generate_process(inputs, inputs / "parts", inputs / "out.csv", "--scheduler", client.scheduler.address)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "partition 2 of 4): row 1, column 'sex'" in done.stderr
    assert not (inputs / "out.csv").exists()


def test_without_dask_the_option_is_refused_in_one_line(inputs, monkeypatch):
    for name in ("distributed", "dask", "dask.dataframe"):
        monkeypatch.setitem(sys.modules, name, None)  # import fails as if not installed
    from synth.data.dask_scan import require_dask

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

    from synth.data import dask_scan

    frame = pd.read_csv(write_inputs(tmp_path, 3000, 2) / "d.csv")
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), tmp_path / "g.parquet", row_group_size=300)
    monkeypatch.setattr(dask_scan, "PARQUET_PIECE_ROWS", 1000)  # 3 groups a partition, 4 partitions
    pieces = dask_scan._parquet_pieces(tmp_path / "g.parquet", SCHEMA, SCHEMA)
    assert [(groups, firsts) for _, groups, firsts in pieces] == [
        ([0, 1, 2], [1, 301, 601]), ([3, 4, 5], [901, 1201, 1501]), ([6, 7, 8], [1801, 2101, 2401]), ([9], [2701])]
    _assert_same(dask_scan.scan_dask(tmp_path / "g.parquet", SCHEMA, SUBSETS, client=client),
                 scan(tmp_path / "d.csv", SCHEMA, SUBSETS))
    frame.loc[2345, "zone"] = 3
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), tmp_path / "g.parquet", row_group_size=300)
    with pytest.raises(DataError, match=r"g\.parquet \(partition 3 of 4\): row 2346, column 'zone': value 3"):
        dask_scan.scan_dask(tmp_path / "g.parquet", SCHEMA, SUBSETS, client=client)


def _in_process_error(call) -> str:
    """The message of the DataError ``call`` raises, without Dask's partition tag."""
    with pytest.raises(DataError) as caught:
        call()
    return re.sub(r" \(partition \d+ of \d+\)", "", str(caught.value))


@pytest.fixture
def erred_tasks(client):
    """Keys of the tasks that erred on the fixture's cluster (its scheduler runs in this process)
    while the test ran: a task that raises is logged by its worker with a traceback."""
    from distributed.diagnostics.plugin import SchedulerPlugin

    class Erred(SchedulerPlugin):
        name = "synth-test-erred"

        def __init__(self):
            self.keys = []

        def transition(self, key, start, finish, *args, **kwargs):
            if finish == "erred":
                self.keys.append(key)

    scheduler = client.cluster.scheduler
    plugin = Erred()
    scheduler.add_plugin(plugin)
    yield plugin.keys
    scheduler.remove_plugin(name=plugin.name)


def _quoted_header(inputs, *bad: tuple[int, str]):
    """d.csv with a quoted header and ``bad`` (data row, line) put in; its path."""
    lines = (inputs / "d.csv").read_text().splitlines()
    lines[0] = ",".join(f'"{name}"' for name in lines[0].split(","))
    for row, line in sorted(bad, reverse=True):
        lines.insert(row, line)
    (inputs / "q.csv").write_text("\n".join(lines) + "\n")
    return inputs / "q.csv"


@pytest.mark.parametrize("columns", [None, ["age", "zone"]])  # pandas' reader, the plain-integer one
@pytest.mark.parametrize("bad", ["female,x,1", "female,,1", "female,2.5,1", "female,99999999999999999999,1",
                                 'female,"2,1', "female,2,1,0"])
def test_a_quoted_header_csv_reads_as_in_process(client, inputs, monkeypatch, erred_tasks, bad, columns):
    """A CSV whose header is quoted is read by the blocks' reader too: the in-process verdict
    and message for a bad value, an unclosed quote and a row of too many fields, at the row in
    the file (4001: past the first blocks), and the in-process counts once such rows are dropped."""
    from synth.data import dask_scan

    monkeypatch.setattr(dask_scan, "CSV_BLOCK_BYTES", 20_000)  # 3 or 4 blocks
    subsets = SUBSETS
    if columns is not None:  # every field a number: the plain-integer reader's path
        bad, subsets = bad.replace("female", "1"), [("age", "zone")]
        (inputs / "d.csv").write_text((inputs / "d.csv").read_text().replace("female", "1").replace("male", "0"))
    path = _quoted_header(inputs, (4001, bad))

    def scans(scan, **options):
        return scan(path, SCHEMA, subsets, columns=columns, **options)

    expected = _in_process_error(lambda: scans(scan))
    assert "row 4001" in expected
    assert _in_process_error(lambda: scans(dask_scan.scan_dask, client=client)) == expected
    if "never closed" not in expected:  # an open quote swallows the rest of the file: no verdict to drop
        dropped = scans(dask_scan.scan_dask, client=client, bad_rows="drop")
        in_process = scans(scan, bad_rows="drop")
        assert dropped.n_rows == in_process.n_rows == 5000 and dropped.dropped == in_process.dropped == 1
        for subset in subsets:
            np.testing.assert_array_equal(dropped.tables[subset], in_process.tables[subset])
    assert erred_tasks == []


def test_csv_rows_are_numbered_from_the_file_start(client, inputs, monkeypatch, erred_tasks):
    """A bad row in a later block is named by its row in the file (the rows of the blocks before
    it counted only on error), and of two bad rows in different blocks the first in the file
    is the error, whichever block failed first."""
    from synth.data import dask_scan

    monkeypatch.setattr(dask_scan, "CSV_BLOCK_BYTES", 10_000)  # 6 or 7 blocks
    frame = pd.read_csv(inputs / "d.csv", nrows=4000)
    frame.loc[3456, "age"] = 9
    lines = (inputs / "d.csv").read_text().splitlines(keepends=True)
    lines[4500] = "male,7,1\n"  # data row 4500
    (inputs / "d.csv").write_text("".join(lines))
    with pytest.raises(DataError, match=r"d\.csv \(partition [4-9] of \d\): row 4500, column 'age': value 7"):
        dask_scan.scan_dask(inputs / "d.csv", SCHEMA, SUBSETS, client=client)
    lines[3001] = "male,0,1,0\n"  # data row 3001: too many fields
    (inputs / "d.csv").write_text("".join(lines))
    with pytest.raises(DataError, match=r"\(partition [3-9] of \d\): malformed CSV: data row 3001 \(line 3002\) "
                                        r"has 4 fields, the header has 3"):
        dask_scan.scan_dask(inputs / "d.csv", SCHEMA, SUBSETS, client=client)
    with pytest.raises(DataError, match=r"Dask DataFrame \(partition 4 of 4\): row 3457, column 'age': value 9"):
        dask_scan.scan_dask(dd.from_pandas(frame, npartitions=4), SCHEMA, SUBSETS, client=client)
    assert erred_tasks == []


def test_the_tree_sum_passes_on_the_first_failure_behind_the_rows_before_it(monkeypatch):
    """Without a cluster the tree sum (``_merge``) carries the first failure in partition order,
    its row moved on by every row of the partitions ahead of it."""
    from synth.data import dask_scan
    from synth.data.counts import Counts, plan_scan

    monkeypatch.setattr(dask_scan, "FAN_IN", 2)
    plan = plan_scan(SCHEMA, SUBSETS)
    failure = dask_scan._Failed("f.csv (partition 4 of 5): row 2, column 'age': bad", "f.csv (partition 4 of 5)")
    later = dask_scan._Failed("f.csv (partition 5 of 5): row 1, column 'age': bad", "f.csv (partition 5 of 5)")
    leaves = [Counts(plan, n_rows=10), Counts(plan, n_rows=5, dropped=2), Counts(plan, n_rows=3), failure, later]
    total = dask_scan._tree(leaves, dask_scan._merge)
    assert str(total.error()) == "f.csv (partition 4 of 5): row 22, column 'age': bad"


def test_a_parquet_read_error_names_the_row_group_as_in_process(client, tmp_path, monkeypatch, erred_tasks):
    """A damaged row group inside a piece of several is named by its first row in the file, as
    the in-process reader names it, not by the piece's."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from synth.data import dask_scan

    frame = pd.read_csv(write_inputs(tmp_path, 3000, 2) / "d.csv")
    path = tmp_path / "g.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=300, compression="none")
    offset = pq.ParquetFile(path).metadata.row_group(5).column(1).data_page_offset
    data = bytearray(path.read_bytes())
    data[offset: offset + 12] = b"\xff" * 12  # the page header of group 5 (rows 1501-1800), column age
    path.write_bytes(bytes(data))
    monkeypatch.setattr(dask_scan, "PARQUET_PIECE_ROWS", 1000)  # groups 3-5 are partition 2
    expected = _in_process_error(lambda: scan(path, SCHEMA, SUBSETS))
    assert "cannot read Parquet near row 1501" in expected
    assert _in_process_error(lambda: dask_scan.scan_dask(path, SCHEMA, SUBSETS, client=client)) == expected
    assert erred_tasks == []


@pytest.mark.parametrize("address, problem", [
    ("foo", "not a scheduler address (tcp://HOST:PORT, or local)"),
    ("", "not a scheduler address"),
    ("LOCAL", "not a scheduler address"),
    ("tcp://h:1/x", "not a scheduler address"),
    ("inproc://x", "unsupported protocol 'inproc://'"),
    ("tcp://:8786", "no host before the port"),
    ("tcp://127.0.0.1:99999", "port 99999 is outside 1..65535"),
    ("tls://127.0.0.1:1", "tls:// needs TLS certificates in Dask's configuration"),
])
def test_a_malformed_scheduler_address_is_one_line(address, problem):
    from synth.data.dask_scan import connect

    with pytest.raises(SynthError, match=f"^--scheduler {re.escape(repr(address))}: {re.escape(problem)}"):
        connect(address)


def test_generate_with_a_malformed_scheduler_says_what_is_wrong(inputs):
    result = _generate(inputs, inputs / "d.csv", inputs / "out.csv", "--scheduler", "inproc://x")
    assert result.exit_code == 1 and "Traceback" not in result.output and "bug in synth" not in result.output
    assert result.output.strip().splitlines()[-1] == (
        "Error: --scheduler 'inproc://x': unsupported protocol 'inproc://' (tcp://HOST:PORT, or local)")
    assert not (inputs / "out.csv").exists()


@pytest.fixture
def silent_address():
    """A tcp:// address on 127.0.0.1 whose port accepts connections and never answers; it
    closes them after 6 s (and at the test's end), so a client that waits for the peer ends too."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                held.append(server.accept()[0])
            except OSError:  # the server closed
                return

    def close() -> None:
        server.close()
        for connection in held:
            connection.close()

    threading.Thread(target=serve, daemon=True).start()
    timer = threading.Timer(6.0, close)
    timer.start()
    try:
        yield f"tcp://127.0.0.1:{server.getsockname()[1]}"
    finally:
        timer.cancel()
        close()


def test_a_scheduler_port_that_never_answers_is_refused_within_the_timeout(silent_address):
    from synth.data.dask_scan import connect

    start = time.monotonic()
    with pytest.raises(SynthError, match=f"^--scheduler {re.escape(silent_address)}: no Dask scheduler answered "
                                         r"there within 0\.5 s"):
        connect(silent_address, timeout=0.5)
    assert time.monotonic() - start < 4


def test_generate_with_a_silent_scheduler_port_ends_in_one_line(inputs, silent_address, monkeypatch):
    from synth.data import dask_scan

    monkeypatch.setattr(dask_scan, "CONNECT_TIMEOUT_S", 0.5, raising=False)
    start = time.monotonic()
    result = _generate(inputs, inputs / "d.csv", inputs / "out.csv", "--scheduler", silent_address)
    assert time.monotonic() - start < 4  # not until the peer closes (6 s)
    assert result.exit_code == 1 and "Traceback" not in result.output and "bug in synth" not in result.output
    assert result.output.strip().splitlines()[-1:] == [
        f"Error: --scheduler {silent_address}: no Dask scheduler answered there within 0.5 s (something may accept "
        "connections at that address without being one)"]
    assert not (inputs / "out.csv").exists()


def test_a_partition_pandas_cannot_read_and_an_empty_frame_are_labelled():
    """What pandas says of a partition may quote it, and "no data rows" tells n = 0: both say
    they are NON-PRIVATE, in the line itself."""
    from synth.data import dask_scan
    from synth.data.counts import plan_scan

    frame = pd.DataFrame({"sex": [["male"]], "age": [1], "zone": [0]})  # a list where a label goes
    failed = dask_scan._count_partition(frame, plan_scan(SCHEMA, SUBSETS), "Dask DataFrame", 0, 2, "error")
    assert str(failed.error()) == ("Dask DataFrame (partition 1 of 2): cannot read: unhashable type: 'list' "
                                   "(NON-PRIVATE: this message may quote the private data)")
    empty = dd.from_pandas(pd.DataFrame({"sex": ["male"], "age": [1], "zone": [0]}).iloc[:0], npartitions=1)
    with pytest.raises(DataError, match=r"^Dask DataFrame: no data rows \(NON-PRIVATE: this message tells that the "
                                        r"private data has no rows\)$"):
        dask_scan.scan_dask(empty, SCHEMA, SUBSETS)
    alien = dd.from_pandas(pd.DataFrame({"sex": ["alien"], "age": [1], "zone": [0]}), npartitions=1)
    with pytest.raises(DataError, match=r"^Dask DataFrame: no row fits the schema .*\(NON-PRIVATE: this message tells "
                                        r"that no row of the private data fits the schema\)$"):
        dask_scan.scan_dask(alien, SCHEMA, SUBSETS, bad_rows="drop")


def test_scheduler_local_with_a_bad_value_prints_one_line(inputs):
    """The whole program, its LocalCluster's processes included: one line on stderr (no worker
    log, no traceback), a non-zero exit and no output file."""
    part = pd.read_parquet(inputs / "parts" / "part-1.parquet").reset_index(drop=True)
    part.loc[3, "zone"] = 5
    part.to_parquet(inputs / "parts" / "part-1.parquet")
    out = inputs / "out.csv"
    result = subprocess.run(
        [sys.executable, "-m", "synth", "generate", str(inputs / "parts"), "--schema", str(inputs / "schema.json"),
         "--workload", str(inputs / "w2.json"), "--epsilon", "1", "-o", str(out), "--quiet", "--scheduler", "local"],
        capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parents[1])
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"Error: {inputs / 'parts' / 'part-1.parquet'} (partition 2 of 4): row 4, column 'zone': value 5 is outside "
        "the domain 0..2 (NON-PRIVATE: this message quotes the private data; --bad-rows drop skips such rows)"]
    assert not out.exists()
