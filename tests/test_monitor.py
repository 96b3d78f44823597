"""synth.engines.monitor: the KL-potential monitors' Phi, Pythagorean bound and budget columns,
checked against NumPy and the accountant, and how the report reads and shows them."""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import astuple

import numpy as np
import pytest

from synth.data.schema import Coded, Schema
from synth.data.tables import marginal, marginal_from_dense
from synth.data.workload import Workload
from synth.engines.monitor import (NON_PRIVATE_HEADER, PLAN_PREFIX, KLMonitor, MonitorRow, PracticalMonitor,
                                   PracticalMonitorRow)
from synth.engines.pmw import UPDATE, open_pmw
from synth.privacy.accounting import Accountant
from synth.report import html as report
from synth.report.evaluate import evaluate

from .test_pmw import SCHEMA, WORKLOAD, correlated_codes

N = 6000


def kl(p: np.ndarray, q: np.ndarray) -> float:
    """KL(p || q) by hand, over p's support."""
    s = p > 0
    return float(np.sum(p[s] * np.log(p[s] / q[s])))


def fraction(distribution: np.ndarray, query) -> float:
    """f(D): the query's share under a flat distribution over SCHEMA's universe."""
    return float(marginal_from_dense(distribution, SCHEMA, query.columns)[np.ix_(*query.allowed)].sum())


def zcdp_rho(ledger) -> float:
    return math.fsum([c.rho for c in ledger if c.is_zcdp]
                     + [c.epsilon**2 / 2 for c in ledger if not c.is_zcdp and c.delta == 0])


def step_through(codes, schema, workload, epsilon, delta=0.0, passes=1, **options):
    """Answer ``workload`` one query at a time; at each update keep D before and after, the
    accountant's state right after (nothing is charged after the update within ``answer``), and
    the charges made since the previous update (or since PMW opened: after the row count and
    the warm start), which are this update's epoch's test and measurement."""
    if options.get("variant") == "practical":  # L given: a small workload is otherwise measured up front
        options.setdefault("updates", len(set(workload.subsets)))
    opened = open_pmw(codes, schema, epsilon, delta, rng=7, subsets=workload.subsets,
                      queries=len(workload) * passes, monitor=True, **options)
    pmw, seen = opened.pmw, []
    mark = len(opened.accountant.ledger())
    for _ in range(passes):
        for i, query in enumerate(workload):
            before = pmw.distribution()
            if pmw.answer(query, query_id=i, label=workload.describe(i)).round == UPDATE:
                ledger = opened.accountant.ledger()
                seen.append({"query": query, "before": before, "after": pmw.distribution(),
                             "spent": opened.accountant.spent(), "ledger": ledger, "epoch": ledger[mark:],
                             "threshold": getattr(pmw, "epoch_threshold", None),
                             "sign": getattr(pmw, "updates_log", [None])[-1]})
                mark = len(ledger)
    return opened, seen


def epoch_charges(step) -> tuple[float, float]:
    """(epsilon, rho) charged since the previous update, summed by hand."""
    charges = step["epoch"]
    return (math.fsum(c.epsilon for c in charges if not c.is_zcdp), math.fsum(c.rho for c in charges if c.is_zcdp))


# -- the textbook PMW's monitor -----------------------------------------------------------------


@pytest.mark.parametrize("delta", [0.0, 1e-6])
def test_theory_rows_match_numpy_and_the_accountant(delta):
    codes = correlated_codes(N, 2)
    truth = marginal(codes, SCHEMA, None).reshape(-1) / N
    opened, seen = step_through(codes, SCHEMA, WORKLOAD, 30.0, delta, passes=2, rows=N, alpha=0.15,
                                variant="theory")
    rows, plan = opened.monitor.rows, opened.plan
    assert len(rows) == len(seen) == opened.pmw.updates >= 3
    for t, (row, step) in enumerate(zip(rows, seen), start=1):
        assert row.update == t and row.threshold == plan.threshold
        assert row.phi_before == pytest.approx(kl(truth, step["before"]), rel=1e-10, abs=1e-12)
        assert row.phi_after == pytest.approx(kl(truth, step["after"]), rel=1e-10, abs=1e-12)
        assert row.predicted_drop == pytest.approx(kl(step["after"], step["before"]), rel=1e-8, abs=1e-14)
        assert row.bound_gap == pytest.approx(row.drop - row.predicted_drop, abs=1e-14)
        # the textbook step's gap is eta s (f(xbar) - f(D_{t+1})): kept exactly when it did not overshoot
        overshoot = step["sign"].sign * (fraction(truth, step["query"]) - fraction(step["after"], step["query"]))
        assert row.bound_gap == pytest.approx(plan.eta * overshoot, abs=1e-10)
        assert row.kept_bound == (row.bound_gap >= -1e-9)
        assert row.epsilon_update == pytest.approx(plan.epsilon_test + plan.epsilon_measure, rel=1e-12)
        assert (row.epsilon_update, row.rho_update) == pytest.approx(epoch_charges(step), rel=1e-12)
        assert row.rho_update == 0.0
        assert (row.epsilon_spent, row.delta_spent, row.spent_method) == astuple(step["spent"])
        assert row.rho_spent == pytest.approx(zcdp_rho(step["ledger"]), rel=1e-12)


def test_theory_monitor_without_an_accountant_leaves_the_budget_blank():
    codes = correlated_codes(500, 1)
    monitor = KLMonitor(marginal(codes, SCHEMA, None), 0.2, 4)
    uniform = np.ones(SCHEMA.universe_size)
    monitor.before_update(uniform, float(uniform.sum()))
    row = monitor.after_update(uniform * 2, 2 * uniform.sum(), query_id=0, query="q", true_fraction=0.5,
                               model_fraction=0.5, sign=1)
    assert row.predicted_drop == 0.0 and row.drop == 0.0 and row.kept_bound
    assert math.isnan(row.epsilon_spent) and math.isnan(row.epsilon_update) and row.spent_method == ""


# -- the practical monitor ----------------------------------------------------------------------


@pytest.mark.parametrize("delta", [0.0, 1e-6])
def test_practical_rows_match_numpy_and_the_accountant(delta):
    codes = correlated_codes(N, 3)
    truth = marginal(codes, SCHEMA, None).reshape(-1) / N
    opened, seen = step_through(codes, SCHEMA, WORKLOAD, 2.0, delta, rows=N, variant="practical")
    rows, plan = opened.monitor.rows, opened.plan
    assert len(rows) == len(seen) == opened.pmw.updates >= 3
    for row, step in zip(rows, seen):
        assert row.phi_before == pytest.approx(kl(truth, step["before"]), rel=1e-10, abs=1e-12)
        assert row.phi_after == pytest.approx(kl(truth, step["after"]), rel=1e-10, abs=1e-12)
        assert row.predicted_drop == pytest.approx(kl(step["after"], step["before"]), rel=1e-8, abs=1e-14)
        assert row.pythagorean_bound == row.predicted_drop  # the older name still reads
        assert row.bound_gap == pytest.approx(row.drop - row.predicted_drop, abs=1e-14)
        assert row.columns == ",".join(step["query"].columns) and row.test == "marginal"
        assert row.threshold == pytest.approx(step["threshold"] / plan.rows)  # the epoch's own T
        assert (row.epsilon_spent, row.delta_spent, row.spent_method) == astuple(step["spent"])
        assert row.rho_spent == pytest.approx(zcdp_rho(step["ledger"]), rel=1e-12)
        assert (row.epsilon_update, row.rho_update) == pytest.approx(epoch_charges(step), rel=1e-12)
        assert row.epsilon_update > 0 and (row.rho_update > 0) == (plan.rho_measure > 0)


def test_the_update_charges_leave_out_the_row_count_and_the_warm_start():
    """Six columns' 3-way marginals: a warm start on their shared pairs, and n bought as a noisy
    count; the first update's own charges are its epoch's test and its measurement only, while the
    spent total carries everything."""
    schema = Schema(tuple(Coded(name, 2) for name in "abcdef"))
    rng = np.random.default_rng(4)
    first = rng.integers(0, 2, 4000)
    codes = np.stack([np.where(rng.random(4000) < 0.7, first, rng.integers(0, 2, 4000)) for _ in range(6)],
                     axis=1).astype(np.uint8)
    workload = Workload.marginals(schema, 3)
    opened, seen = step_through(codes, schema, workload, 4.0, variant="practical")
    plan, rows = opened.plan, opened.monitor.rows
    assert plan.warm_subsets and not plan.rows_public and len(rows) >= 2
    for row, step in zip(rows, seen):
        assert (row.epsilon_update, row.rho_update) == pytest.approx(epoch_charges(step), rel=1e-12)
        assert row.epsilon_spent == step["spent"].epsilon and step["spent"].method == "basic"
    before_first = plan.epsilon_count + len(plan.warm_subsets) * plan.epsilon_warm
    assert rows[0].epsilon_spent == pytest.approx(before_first + rows[0].epsilon_update, rel=1e-9)
    # basic composition adds up: the count, the warm start and every update's own charges
    assert rows[-1].epsilon_spent == pytest.approx(before_first + sum(r.epsilon_update for r in rows), rel=1e-9)


def test_the_gap_is_the_noise_of_a_projected_measurement():
    """D_{t+1} = D_t rescaled to a measured marginal a (the I-projection onto {M_S(P) = a}):
    exact a keeps to the bound with equality; an a that overshoots the truth gives the gap
    sum_c (M_S(xbar)_c - a_c) ln(a_c / M_S(D_t)_c) < 0."""
    codes = correlated_codes(N, 5)
    truth = marginal(codes, SCHEMA, None).reshape(-1) / N
    start = np.full(SCHEMA.universe_size, 1 / SCHEMA.universe_size)
    subset = ("a", "b")
    true_table, start_table = (marginal_from_dense(d, SCHEMA, subset) for d in (truth, start))
    monitor = PracticalMonitor(marginal(codes, SCHEMA, None), 0.1, 3)

    def projected(table):
        return (start.reshape(2, 3, 4) * (table / start_table)[:, :, None]).reshape(-1)

    exact = monitor.record(start, projected(true_table), query_id=0, query="exact", columns=subset,
                           tested_error=1.0)
    assert exact.bound_gap == pytest.approx(0.0, abs=1e-12) and exact.kept_bound
    overshoot = true_table + 0.15 * (true_table - start_table)  # past the truth, away from D_t
    assert overshoot.min() > 0 and overshoot.sum() == pytest.approx(1.0)
    noisy = monitor.record(start, projected(overshoot), query_id=1, query="noisy", columns=subset,
                           tested_error=1.0)
    expected = float(np.sum((true_table - overshoot) * np.log(overshoot / start_table)))
    assert noisy.bound_gap == pytest.approx(expected, rel=1e-9) and expected < 0 and not noisy.kept_bound
    assert noisy.predicted_drop == pytest.approx(kl(overshoot.reshape(-1), start_table.reshape(-1)), rel=1e-9)


def test_the_budget_columns_read_a_zcdp_ledger(tmp_path):
    """A ledger by hand: a noisy count, an earlier epoch, then update 2's test (epsilon) and its
    measurement (rho): the update's own charges are the last two, the totals the accountant's,
    and rho_spent the rhos plus epsilon^2/2 per pure charge."""
    codes = correlated_codes(500, 1)
    monitor = PracticalMonitor(marginal(codes, SCHEMA, None), 0.1, 4)
    accountant = Accountant(2.0, 1e-6)
    uniform = np.full(SCHEMA.universe_size, 1 / SCHEMA.universe_size)
    accountant.spend(0.05, note="noisy row count")
    accountant.spend(0.1, note="PMW epoch 1")
    accountant.spend(rho=0.02, note="PMW update 1")
    first = monitor.record(uniform, uniform, query_id=0, query="q", columns=("a",), tested_error=1.0,
                           accountant=accountant)
    assert (first.epsilon_update, first.rho_update) == (0.1, 0.02)
    accountant.spend(0.2, note="PMW epoch 2")
    accountant.spend(rho=0.03, note="PMW update 2")
    second = monitor.record(uniform, uniform, query_id=1, query="r", columns=("b",), tested_error=1.0,
                            accountant=accountant, threshold=0.25)
    assert (second.epsilon_update, second.rho_update, second.threshold) == (0.2, 0.03, 0.25)
    assert first.threshold == 0.1  # the plan's T when the epoch's is not given
    spent = accountant.spent()
    assert (second.epsilon_spent, second.delta_spent, second.spent_method) == astuple(spent)
    assert second.rho_spent == pytest.approx(0.05**2 / 2 + 0.1**2 / 2 + 0.02 + 0.2**2 / 2 + 0.03)
    (tmp_path / "kl.csv").write_text(written(monitor))
    log = report.read_monitor(tmp_path / "kl.csv")
    assert log.zcdp and log.summary()["rho_spent"] == second.rho_spent
    answers = np.array([500 * fraction(uniform, q) for q in WORKLOAD])
    report.write_report(tmp_path / "out", evaluate(codes, WORKLOAD, answers), monitor=log)
    page = (tmp_path / "out" / "index.html").read_text()
    assert "<th>rho, this update</th>" in page and "<th>rho spent</th>" in page


# -- the file and the report --------------------------------------------------------------------


def written(monitor) -> str:
    handle = io.StringIO()
    monitor.write_csv(handle)
    return handle.getvalue()


def test_the_csv_carries_every_column_under_the_non_private_and_plan_lines(tmp_path):
    codes = correlated_codes(N, 3)
    opened, _ = step_through(codes, SCHEMA, WORKLOAD, 2.0, 1e-6, rows=N, variant="practical")
    lines = written(opened.monitor).splitlines()
    assert lines[0] == NON_PRIVATE_HEADER and lines[1].startswith(PLAN_PREFIX) and "variant=practical" in lines[1]
    assert lines[2].split(",") == list(PracticalMonitorRow.__dataclass_fields__)
    for name in ("phi_before", "phi_after", "predicted_drop", "bound_gap", "kept_bound", "true_error", "threshold",
                 "epsilon_update", "rho_update", "epsilon_spent", "delta_spent", "rho_spent", "spent_method"):
        assert name in lines[2].split(",")
    (tmp_path / "kl.csv").write_text("\n".join(lines) + "\n")
    log = report.read_monitor(tmp_path / "kl.csv")
    rows = opened.monitor.rows
    assert log.variant == "practical" and len(log) == len(rows)
    for name in ("predicted_drop", "bound_gap", "epsilon_update", "rho_update", "epsilon_spent", "rho_spent"):
        np.testing.assert_array_equal(getattr(log, name), [getattr(r, name) for r in rows])  # exact round trip
    np.testing.assert_array_equal(log.kept_bound, [r.kept_bound for r in rows])
    assert log.spent_method == [r.spent_method for r in rows]
    assert log.zcdp == any(r.rho_update > 0 or "zcdp" in r.spent_method for r in rows)


def test_the_theory_csv_header():
    codes = correlated_codes(N, 2)
    opened, _ = step_through(codes, SCHEMA, WORKLOAD, 30.0, rows=N, alpha=0.15, variant="theory")
    assert written(opened.monitor).splitlines()[2].split(",") == list(MonitorRow.__dataclass_fields__)


@pytest.mark.parametrize("variant, delta", [("theory", 0.0), ("practical", 1e-6)])
def test_the_report_shows_phi_the_bound_and_the_budget(tmp_path, variant, delta):
    codes = correlated_codes(N, 2)
    options = {"alpha": 0.15, "passes": 2} if variant == "theory" else {}
    opened, _ = step_through(codes, SCHEMA, WORKLOAD, 30.0 if variant == "theory" else 2.0, delta, rows=N,
                             variant=variant, **options)
    (tmp_path / "kl.csv").write_text(written(opened.monitor))
    log = report.read_monitor(tmp_path / "kl.csv")
    answers = np.array([opened.pmw.model_answer(q) for q in WORKLOAD])
    report.write_report(tmp_path / "out", evaluate(codes, WORKLOAD, answers), monitor=log)
    page = (tmp_path / "out" / "index.html").read_text()
    for text in ("where the online error came from", "Phi before", "predicted drop KL(D_t+1 || D_t)",
                 "gap (drop - predicted)", "kept to the bound", "epsilon, this update", "epsilon spent",
                 "true error (of n)", "How to read it"):
        assert text in page
    assert ("rho spent" in page) == log.zcdp  # zCDP: rho beside epsilon
    rows = opened.monitor.rows
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())["monitor"]
    assert summary["updates_within_bound"] == sum(r.kept_bound for r in rows)
    assert summary["epsilon_spent"] == rows[-1].epsilon_spent
    assert (summary["rho_spent"] is not None) == log.zcdp
    assert (tmp_path / "out" / "kl_potential.png").exists()


def test_older_files_still_read_and_render(tmp_path):
    """A practical file whose bound was called pythagorean_bound, and a theory file with neither
    the bound nor the budget: both read, and the report leaves out what they lack."""
    codes = correlated_codes(N, 3)
    opened, _ = step_through(codes, SCHEMA, WORKLOAD, 2.0, rows=N, variant="practical")
    rows = opened.monitor.rows
    old = ["update", "updates_allowed", "query_id", "query", "columns", "true_error", "phi_before", "phi_after",
           "drop", "pythagorean_bound", "flag"]
    with open(tmp_path / "old.csv", "w", newline="") as handle:
        handle.write("\n".join(written(opened.monitor).splitlines()[:2]) + "\n")
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(old)
        writer.writerows([getattr(r, c) for c in old] for r in rows)
    log = report.read_monitor(tmp_path / "old.csv")
    np.testing.assert_array_equal(log.predicted_drop, [r.predicted_drop for r in rows])
    np.testing.assert_allclose(log.bound_gap, [r.bound_gap for r in rows], atol=1e-12)
    assert log.epsilon_spent is None and log.summary()["epsilon_spent"] is None
    answers = np.array([opened.pmw.model_answer(q) for q in WORKLOAD])
    report.write_report(tmp_path / "out", evaluate(codes, WORKLOAD, answers), monitor=log)
    page = (tmp_path / "out" / "index.html").read_text()
    assert "kept to the bound" in page and "epsilon spent" not in page

    theory = ["update", "updates_allowed", "query_id", "query", "true_error", "sign_correct", "phi_before",
              "phi_after", "drop", "guaranteed_drop", "flag"]
    (tmp_path / "theory.csv").write_text(f"{NON_PRIVATE_HEADER}\n{','.join(theory)}\n"
                                         "1,9,2,q,0.2,True,1.2,1.1,0.1,0.0025,\n")
    log = report.read_monitor(tmp_path / "theory.csv")
    assert log.predicted_drop is None and log.kept_bound is None and log.summary()["updates_within_bound"] is None
    report.write_report(tmp_path / "out2", evaluate(codes, WORKLOAD, answers), monitor=log)
    page = (tmp_path / "out2" / "index.html").read_text()
    assert "<th>Phi before</th>" in page and "<th>predicted drop" not in page
