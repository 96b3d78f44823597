"""Time estimates before a long run, and progress lines in a log."""

import pytest

from synth_cli import _common
from synth.engines.estimate import CELL_STEPS_PER_SECOND, mwem_estimate, pmw_estimate


def test_mwem_estimate_counts_walks_of_the_universe():
    # 35 candidates cap 50 rounds; no selection: only the final fit's 1,000 passes over 35 measurements
    plain = mwem_estimate(10**8, 35, 50, 10, 1000, selecting=False)
    assert plain.seconds == pytest.approx(10**8 * 35 * 1000 / CELL_STEPS_PER_SECOND)
    assert "35 rounds" in plain.describe() and "x 10 passes" not in plain.describe()
    selecting = mwem_estimate(10**8, 100, 20, 10, 0, selecting=True)  # round t fits t measurements 10 times
    assert selecting.seconds == pytest.approx(10**8 * (10 * 20 * 21 // 2 + 20) / CELL_STEPS_PER_SECOND)
    assert pmw_estimate(10**6, 500, 2).seconds == pytest.approx(10**6 * 1000 / CELL_STEPS_PER_SECOND)
    assert "1.5 h" in pmw_estimate(int(CELL_STEPS_PER_SECOND), 90 * 60).describe()
    assert "89 min" in pmw_estimate(int(CELL_STEPS_PER_SECOND), 89 * 60).describe()


def test_progress_lines_in_a_log_start_late_and_come_every_tenth(monkeypatch, capsys):
    clock = [0.0]
    monkeypatch.setattr(_common.time, "monotonic", lambda: clock[0])
    lines = _common._ProgressLines("mwem")
    for step in range(1, 101):
        clock[0] = step * 0.2  # 20 s in all: nothing in the first 5 s
        lines(step, step / 100)
    printed = capsys.readouterr().err.splitlines()
    assert printed[0].startswith("mwem: 25% after 5 s, about 15 s left")
    assert [line.split("%")[0] for line in printed] == ["mwem: 25", "mwem: 30", "mwem: 40", "mwem: 50", "mwem: 60",
                                                        "mwem: 70", "mwem: 80", "mwem: 90", "mwem: 100"]
