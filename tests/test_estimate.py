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


def test_factored_estimate_counts_passes_over_the_model_and_the_rounds_scoring():
    from synth.engines.estimate import FACTORED_CELL_SECONDS, FACTORED_PASS_SECONDS, FACTORED_SCORE_SECONDS
    from synth.engines.estimate import factored_mwem_estimate

    known = factored_mwem_estimate(10**6, 2000, 30, 45, 10, selecting=False, known_model=True)
    per_pass = 10**6 * FACTORED_CELL_SECONDS + FACTORED_PASS_SECONDS
    assert known.seconds == pytest.approx(2000 * per_pass)
    assert "a 1,000,000-cell model x 2,000 fitting passes" in known.describe() and "rounds" not in known.describe()
    typical = factored_mwem_estimate(10**6, 2000, 30, 45, 10, selecting=True, known_model=False)
    assert typical.seconds == pytest.approx(2000 * per_pass + 30 * (45 * FACTORED_SCORE_SECONDS + 10 * per_pass / 2))
    assert "a typical 1,000,000-cell model" in typical.describe() and "30 rounds scoring 45" in typical.describe()


def test_a_factored_mwem_run_has_an_estimate_from_public_facts():
    """Every factored route gets a figure before the data is read: measuring every candidate
    (the model is known: its cells and the final fit's passes from FIT_WORK), the tree start
    under a cap, and adaptive rounds."""
    from synth.data.schema import Coded, Schema
    from synth.data.workload import Workload
    from synth.engines.mwem import FIT_WORK, MWEMConfig, MWEMEngine
    from synth.privacy.accounting import Budget

    schema = Schema(tuple(Coded(f"c{i}", 6) for i in range(6)))
    workload = Workload.marginals(schema, 2)  # 15 pairs of 36 cells: all of them need one 46,656-cell clique
    budget = Budget(1.0, 1e-9)
    every = MWEMEngine(MWEMConfig(selection="classic", representation="factored"), schema, workload).estimate(budget)
    assert "(a 46,656-cell model x 5,000 fitting passes)" in every.describe()  # FIT_WORK / 46,656 > 5,000
    capped = MWEMEngine(MWEMConfig(selection="classic", representation="factored", max_model_cells=10_000), schema,
                        workload).estimate(budget)
    assert "typical 2,000-cell model" in capped.describe() and "17 rounds" in capped.describe()  # 3 x 6 - 1
    adaptive = MWEMEngine(MWEMConfig(selection="adaptive", representation="factored"), schema,
                          workload).estimate(budget)
    assert "typical 20,000-cell model x 1,000 fitting passes" in adaptive.describe()
    assert every.seconds > 0 and FIT_WORK > 0
