"""No data is ever lost: outputs never replace an input, each other, or an existing file without
--force; symlinks and FIFOs are written through; a failure or a signal leaves no stray file.

Every path here lives in a pytest temp folder: never a real device or system file.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from synth_cli.main import main
from synth._io import OutputGroup, atomic_write, output_group
from synth.data.bundled import bundled
from synth.errors import SynthError

GRADES = bundled("grades")


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def generate(output, *extra):
    return run("generate", GRADES.data, "--schema", GRADES.schema, "--workload", GRADES.workload,
               "--epsilon", "1", "--rows", "10", "--seed", "1", "-q", "-o", output, *extra)


def one_error_line(result) -> str:
    assert result.exit_code != 0
    assert "Traceback" not in result.output + result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.stderr
    return errors[0]


def files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.fixture
def private(tmp_path) -> Path:
    """A copy of the grades table, to play the private input."""
    path = tmp_path / "private.csv"
    path.write_bytes(GRADES.data.read_bytes())
    return path


def test_output_naming_the_input_is_refused_and_the_input_kept(private):
    before = private.read_bytes()
    result = run("generate", private, "--schema", GRADES.schema, "--workload", GRADES.workload, "--epsilon", "1",
                 "--rows", "10", "-q", "--force", "-o", private)
    assert "is also the input DATA" in one_error_line(result)
    assert private.read_bytes() == before


def test_output_reaching_the_input_through_a_symlink_is_refused(private, tmp_path):
    link = tmp_path / "link.csv"
    link.symlink_to(private)
    result = run("generate", private, "--schema", GRADES.schema, "--workload", GRADES.workload, "--epsilon", "1",
                 "--rows", "10", "-q", "--force", "-o", link)
    assert "is also the input DATA" in one_error_line(result)
    assert private.read_bytes() == GRADES.data.read_bytes()


def test_two_outputs_on_one_path_are_refused(tmp_path):
    result = generate(tmp_path / "same", "--model", tmp_path / "same")
    assert "give each output its own path" in one_error_line(result)
    assert files(tmp_path) == []


def test_an_existing_file_needs_force(tmp_path):
    out = tmp_path / "synthetic.csv"
    out.write_text("mine\n")
    assert "exists: pass --force" in one_error_line(generate(out))
    assert out.read_text() == "mine\n"
    assert generate(out, "--force").exit_code == 0
    assert len(pd.read_csv(out)) == 10
    assert files(tmp_path) == ["synthetic.csv"]


def test_table_and_model_appear_together(tmp_path, monkeypatch):
    """A failure while saving the model leaves neither the table nor the model."""
    from synth.models.model import Model

    def broken_save(self, path):
        Path(path).write_bytes(b"half")
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(Model, "save", broken_save)
    result = generate(tmp_path / "t.csv", "--model", tmp_path / "m.npz")
    assert "No space left on device" in one_error_line(result)
    assert files(tmp_path) == []


def test_a_symlink_is_written_through(tmp_path):
    target = tmp_path / "real.csv"
    target.write_text("old\n")
    link = tmp_path / "link.csv"
    link.symlink_to(target)
    assert generate(link, "--force").exit_code == 0
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert len(pd.read_csv(target)) == 10


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_written_through_not_replaced(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text()))
    reader.start()
    result = generate(fifo)  # a stream holds nothing to lose: no --force needed
    reader.join(timeout=60)
    assert result.exit_code == 0, result.stderr
    assert fifo.is_fifo()
    assert received and received[0].startswith("name,") and len(received[0].splitlines()) == 11


def test_a_folder_as_output_is_refused(tmp_path):
    (tmp_path / "folder").mkdir()
    assert one_error_line(generate(tmp_path / "folder"))
    assert files(tmp_path) == ["folder"]


@pytest.mark.parametrize("command", ["generate", "sample"])
def test_dash_writes_csv_to_stdout(tmp_path, command):
    if command == "generate":
        result = generate("-")
    else:
        assert generate(tmp_path / "t.csv", "--model", tmp_path / "m.npz").exit_code == 0
        result = run("sample", "--model", tmp_path / "m.npz", "--rows", "7", "-q", "-o", "-")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("name,") and len(lines) == (11 if command == "generate" else 8)
    assert not (tmp_path / "-").exists() and not Path("-").exists()


def test_dash_is_stdout_only_where_it_makes_sense(tmp_path):
    result = generate(tmp_path / "t.csv", "--model", "-")
    assert "'-' (stdout) is not allowed here" in one_error_line(result)


def test_a_mistyped_public_n_does_not_start_a_huge_table(tmp_path):
    result = generate(tmp_path / "t.csv", "--rows", "1000000000")
    message = one_error_line(result)
    assert "1,000,000,000 rows" in message and "--sample-rows" in message
    assert files(tmp_path) == []


def test_sampling_more_rows_than_the_disk_holds_is_refused(tmp_path):
    """Sampling holds one block of rows whatever their number: the disk is the limit."""
    assert generate(tmp_path / "t.csv", "--model", tmp_path / "m.npz").exit_code == 0
    result = run("sample", "--model", tmp_path / "m.npz", "--rows", str(10**12), "-q", "-o", tmp_path / "big.csv")
    assert "synthetic rows need" in one_error_line(result) and "on disk" in one_error_line(result)
    assert files(tmp_path) == ["m.npz", "t.csv"]


def test_atomic_write_leaves_nothing_on_ctrl_c(tmp_path):
    target = tmp_path / "out.csv"
    target.write_text("keep\n")
    with pytest.raises(KeyboardInterrupt):
        with atomic_write(target) as handle:
            handle.write("partial")
            raise KeyboardInterrupt
    assert target.read_text() == "keep\n" and files(tmp_path) == ["out.csv"]


def test_output_group_discards_every_staged_file(tmp_path):
    with pytest.raises(RuntimeError):
        with output_group() as group:
            group.stage(tmp_path / "a.csv").write_text("a")
            group.stage(tmp_path / "b.npz").write_text("b")
            raise RuntimeError("boom")
    assert files(tmp_path) == []
    with output_group() as group:
        staged = group.stage(tmp_path / "a.parquet")
        assert staged.suffix == ".parquet"  # writers choose the format by suffix
        staged.write_text("a")
    assert files(tmp_path) == ["a.parquet"]


def test_sigterm_removes_the_temporary_file(tmp_path):
    """The CLI turns SIGTERM into SystemExit, so the same cleanup as Ctrl-C runs."""
    code = (
        "import os, signal, sys\n"
        "from synth_cli._common import _terminate\n"
        "from synth._io import atomic_write\n"
        "signal.signal(signal.SIGTERM, _terminate)\n"
        "with atomic_write(sys.argv[1]) as handle:\n"
        "    handle.write('partial')\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    signal.pause()\n"
    )
    target = tmp_path / "out.csv"
    done = subprocess.run([sys.executable, "-c", code, str(target)], capture_output=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 128 + signal.SIGTERM, done.stderr
    assert files(tmp_path) == []


def test_non_regular_files_are_refused_by_the_library(tmp_path):
    with pytest.raises(SynthError, match="is a folder"):
        OutputGroup().stage(tmp_path)
