"""Progress on stderr: in a log, plain lines once work runs long, with the rows done and their
rate for reading and writing; nothing with --quiet."""

import io
import json
import sys

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from synth_cli import _common
from synth_cli.main import main


@pytest.fixture
def clock(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(_common.time, "monotonic", lambda: now[0])
    return now


def test_log_lines_show_rows_and_rate_after_the_first_seconds(clock, capsys):
    lines = _common._ProgressLines("reading big.csv", "rows")
    clock[0] += 1
    lines(1_000_000, 0.05)  # too early: nothing
    clock[0] += 9  # 10 s in
    lines(24_000_000, 0.24)
    err = capsys.readouterr().err
    assert err == "reading big.csv: 24% after 10 s, about 32 s left (24,000,000 rows, 2.4 M rows/s)\n"


def test_log_lines_without_a_unit_say_no_count(clock, capsys):
    lines = _common._ProgressLines("mwem")
    clock[0] += 6
    lines(3, 0.5)
    assert capsys.readouterr().err == "mwem: 50% after 6 s, about 6 s left\n"


@pytest.mark.parametrize("rows, seconds, text", [(5, 2.0, "5 rows, 2 rows/s"), (30_000, 2.0, "30,000 rows, 15 k rows/s"),
                                                 (10**8, 40.0, "100,000,000 rows, 2.5 M rows/s")])
def test_count_and_rate(rows, seconds, text):
    assert _common._count_and_rate(rows, "rows", seconds) == text


def test_quiet_gives_no_callback():
    with _common.progress("reading x", True, "rows") as update:
        assert update is None


def test_private_log_lines_show_the_fraction_and_a_rounded_rate_never_the_count(clock, capsys):
    lines = _common._ProgressLines("reading big.csv", "rows", private=True)
    clock[0] += 10
    lines(24_012_345, 0.5)
    lines(48_024_690, None)  # a scan whose fraction is unknown
    err = capsys.readouterr().err
    assert err.splitlines()[0] == "reading big.csv: 50% after 10 s, about 10 s left (about 2.4 M rows/s)"
    assert "24,012,345" not in err and "48,024,690" not in err and "24012345" not in err


@pytest.mark.parametrize("rows, seconds, text", [(12_345, 1.0, "about 12 k rows/s"), (987, 1.0, "about 990 rows/s")])
def test_private_rate_has_two_significant_figures(rows, seconds, text):
    assert _common._count_and_rate(rows, "rows", seconds, private=True) == text


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_private_terminal_bar_shows_no_count(monkeypatch):
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    with _common.progress("reading big.csv", False, "rows", private=True) as update:
        update(1_234_567, 0.5)
        update(2_469_134, 1.0)
    assert "reading big.csv" in terminal.getvalue()
    assert "2,469,134" not in terminal.getvalue() and "1,234,567" not in terminal.getvalue()
    public = _Terminal()
    monkeypatch.setattr(sys, "stderr", public)
    with _common.progress("reading big.csv", False, "rows") as update:
        update(2_469_134, 1.0)
    assert "2,469,134 rows" in public.getvalue()  # the same bar with a public n does count


def _table(folder, rows: int) -> None:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.integers(0, 3, rows), "b": rng.integers(0, 2, rows)})
    frame.to_csv(folder / "d.csv", index=False)
    (folder / "s.json").write_text(json.dumps({"a": 3, "b": 2}))
    (folder / "w.json").write_text(json.dumps({"queries": [{"marginal": ["a", "b"]}]}))


@pytest.mark.parametrize("command", [
    ["generate", "{d}/d.csv", "--schema", "{d}/s.json", "--workload", "{d}/w.json", "--epsilon", "1",
     "-o", "{d}/out.csv"],
    ["answer", "{d}/d.csv", "--schema", "{d}/s.json", "--workload", "{d}/w.json", "--mechanism", "pmw",
     "--epsilon", "1", "-o", "{d}/answers.csv"],
])
def test_a_private_run_without_a_public_n_logs_no_true_row_count(tmp_path, monkeypatch, command):
    """A run that buys a noisy n must not print the true one in its reading progress."""
    monkeypatch.setattr(_common, "LOG_AFTER", 0.0)  # every progress line a log would get, at once
    rows = 4_321
    _table(tmp_path, rows)
    command = [part.format(d=tmp_path) for part in command] + ["--force"]
    result = CliRunner().invoke(main, command)
    assert result.exit_code == 0, result.output
    reading = [line for line in result.stderr.splitlines() if line.startswith("reading")]
    assert reading and all("rows/s" in line for line in reading)
    # (the noisy count printed later may by chance equal n: only the progress lines are checked)
    assert not any(f"{rows:,}" in line or str(rows) in line for line in reading), reading
    with_public_n = CliRunner().invoke(main, command + ["--rows", str(rows)])
    assert with_public_n.exit_code == 0, with_public_n.output
    assert f"({rows:,} rows" in with_public_n.stderr  # the public n may be shown


def test_a_long_step_still_shows_its_phase_and_time_in_a_log(clock, capsys):
    """A fit that takes minutes calls back rarely: the heartbeat writes the phase and the time
    at least every HEARTBEAT seconds, and only when nothing else was written."""
    lines = _common._ProgressLines("mwem")
    clock[0] += 6
    lines(1, 0.1)  # 10%: a line
    lines.phase("final fit")
    clock[0] += _common.HEARTBEAT / 2
    lines.beat()  # too soon after the last line: nothing
    clock[0] += _common.HEARTBEAT
    lines.beat()
    err = capsys.readouterr().err.splitlines()
    assert err == ["mwem: 10% after 6 s, about 54 s left",
                   f"mwem (final fit): 10% done, still working after {6 + 1.5 * _common.HEARTBEAT:.0f} s"]


def test_the_heartbeat_thread_calls_back_while_the_block_runs(monkeypatch):
    import time as real_time

    monkeypatch.setattr(_common, "HEARTBEAT", 0.02)
    beats = []
    with _common._heartbeat(lambda: beats.append(1)):
        real_time.sleep(0.2)
    count = len(beats)
    real_time.sleep(0.1)
    assert count >= 3 and len(beats) == count  # it beat during the block, and stopped after it
