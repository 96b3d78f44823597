"""Progress on stderr: in a log, plain lines once work runs long, with the rows done and their
rate for reading and writing; nothing with --quiet."""

import pytest

from cli import _common


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
