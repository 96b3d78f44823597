"""The KL-potential monitors for PMW: NON-PRIVATE diagnostics for the data owner.

Both read the true histogram x (xbar = x/n) and, at each update t (D_t the model before it,
D_{t+1} after), record one row that says where the online error came from:

* ``phi_before``, ``phi_after``: the potential Phi_t = KL(xbar || D_t) and Phi_{t+1}, in nats (inf
  when D gives zero mass to a cell of the data); ``drop`` = Phi_t - Phi_{t+1}, the actual drop.
* ``predicted_drop``: KL(D_{t+1} || D_t), computed from the two public models alone: what the
  step would lower Phi by, at least, if it were an exact projection onto a set holding xbar.
* ``bound_gap`` = drop - predicted_drop, and ``kept_bound``: bound_gap >= -1e-9.
* ``true_error`` and ``threshold``: the tested value's true error and the T its epoch tested
  against (fractions of n; the plan's T for the theory variant); the theory monitor adds
  ``guaranteed_drop`` (T^2/16) and ``sign_correct``, the practical one ``columns`` and ``test``
  (what was tested: ``marginal`` or ``query``).
* the budget, read from the PMW's accountant right after the update: ``epsilon_spent``,
  ``delta_spent`` and ``spent_method`` (``Accountant.spent()``: every charge so far, the row count
  and the warm start included); ``rho_spent``, the ledger's zCDP rho (its rho charges plus
  epsilon^2/2 per pure charge, as an epsilon-DP release is epsilon^2/2-zCDP; (epsilon, delta > 0)
  charges left out); and the update's own charges, ``epsilon_update`` and ``rho_update``: its
  epoch's test (noted "PMW epoch t") and its measurement ("PMW update t"). NaN without an
  accountant.

**The Pythagorean bound, exactly.** Let l = ln(D_{t+1} / D_t) (on D_{t+1}'s support). Then

    Phi_t - Phi_{t+1} = E_xbar[l]        and        KL(D_{t+1} || D_t) = E_{D_{t+1}}[l],

so bound_gap = E_xbar[l] - E_{D_{t+1}}[l]: no approximation. D_{t+1} = D_t e^l is the I-projection
of D_t onto the half-space H_t = {P : E_P[l] >= E_{D_{t+1}}[l]} (an exponential tilt of D_t
reaching the constraint), and Bregman's Pythagorean inequality KL(P || D_t) >= KL(P || D_{t+1}) +
KL(D_{t+1} || D_t) holds for every P in H_t. So the step keeps to the bound exactly when xbar is in
H_t: when the truth lies at least as far along the step's own direction as D_{t+1} does. A
negative gap is how far the step overshot the truth in its direction; with exact measurements
and an exact projection it cannot happen, so it is the noise's part (a noisy measurement, or an
earlier one refit, pulled D past the truth). For the textbook step l = eta s f(u) - ln Z, so
bound_gap = eta s (f(xbar) - f(D_{t+1})); for the practical refit l is a function of the measured
marginals' cells, and an exact fit to exact marginals keeps it with equality (gap 0).

They only read the model's state (read-only views or copies) and the accountant's ledger, and
draw no randomness, so they can never change what PMW releases. Each update costs O(|U|) and the
accountant's ``spent()`` (linear in its ledger).

The CSV starts with two comment lines: the NON-PRIVATE header, then the run's plan
(``# plan: updates_allowed=L threshold=T``), so the plan's L and T are on file even when PMW
made no update and the table below has no rows.
"""

from __future__ import annotations

import csv
import math
from dataclasses import asdict, dataclass

import numpy as np

__all__ = ["KLMonitor", "MonitorRow", "NON_PRIVATE_HEADER", "PLAN_PREFIX", "PracticalMonitor", "PracticalMonitorRow",
           "kl_divergence"]

NON_PRIVATE_HEADER = (
    "# NON-PRIVATE diagnostic: computed from the true data, for the data owner only; never release it"
)
#: The second line of the CSV: the plan's update bound L and threshold T (a fraction of n).
PLAN_PREFIX = "# plan:"
_TOLERANCE = 1e-9
_BLOCK = 1 << 16  # cells per block of kl_divergence (its temporaries stay this small)


def kl_divergence(p: np.ndarray, q: np.ndarray, p_total: float = 1.0, q_total: float = 1.0) -> float:
    """KL(p/p_total || q/q_total) in nats, over p's support (inf where q is 0 and p is not);
    by blocks, so that a universe-sized pair needs no universe-sized temporaries."""
    parts = []
    with np.errstate(divide="ignore", invalid="ignore"):
        for start in range(0, p.size, _BLOCK):
            a, b = p[start:start + _BLOCK] / p_total, q[start:start + _BLOCK] / q_total
            support = a > 0
            parts.append(float(np.sum(a[support] * np.log(a[support] / b[support]))))
    return math.fsum(parts)


@dataclass(frozen=True)
class _Budget:
    """The accountant's record at one update (``_Ledger.read``)."""

    epsilon_update: float
    rho_update: float
    epsilon_spent: float
    delta_spent: float
    rho_spent: float
    spent_method: str


class _Ledger:
    """Reads the PMW's accountant after each update: what is spent so far, and the update's own charges."""

    def __init__(self) -> None:
        self._seen = 0  # ledger entries before this update's epoch

    def read(self, accountant, update: int) -> _Budget:
        """The budget right after update ``update``: its own charges (noted "PMW epoch t" and
        "PMW update t", among those made since the last read) and the totals; NaN without an
        accountant. Reads the ledger; charges nothing."""
        if accountant is None:
            return _Budget(math.nan, math.nan, math.nan, math.nan, math.nan, "")
        ledger = accountant.ledger()
        own = {f"PMW epoch {update}", f"PMW update {update}"}
        mine = [c for c in ledger[self._seen:] if c.note in own]
        self._seen = len(ledger)
        spent = accountant.spent()
        rho = math.fsum([c.rho for c in ledger if c.is_zcdp]
                        + [c.epsilon**2 / 2 for c in ledger if not c.is_zcdp and c.delta == 0])
        return _Budget(math.fsum(c.epsilon for c in mine if not c.is_zcdp),
                       math.fsum(c.rho for c in mine if c.is_zcdp), spent.epsilon, spent.delta, rho, spent.method)


@dataclass(frozen=True)
class MonitorRow:
    """One update of the textbook PMW as the theory sees it (the module docstring defines
    each column)."""

    update: int
    updates_allowed: int
    query_id: int
    query: str
    true_error: float  # |f(x) - f(D_t)| as a fraction of the true n
    threshold: float  # the plan's T, a fraction of n
    sign_correct: bool
    phi_before: float
    phi_after: float
    drop: float
    predicted_drop: float  # KL(D_{t+1} || D_t): the Pythagorean bound on the drop
    bound_gap: float  # drop - predicted_drop = eta s (f(xbar) - f(D_{t+1})); < 0: the step overshot the truth
    kept_bound: bool
    guaranteed_drop: float  # T^2 / 16, owed when true_error >= T/2 and the sign is right
    epsilon_update: float  # this update's own charges: its epoch's test and its measurement
    rho_update: float
    epsilon_spent: float  # the accountant's total right after the update
    delta_spent: float
    rho_spent: float
    spent_method: str
    flag: str  # "" when the step agrees with the theory


class KLMonitor:
    """Watches a PMW run against the true histogram ``counts`` (a dense array over U)."""

    def __init__(self, counts: np.ndarray, threshold: float, updates_allowed: int):
        counts = np.asarray(counts, dtype=np.float64).reshape(-1)
        self.n = float(counts.sum())
        support = counts > 0
        self._support = np.flatnonzero(support)
        self._x = counts[support] / self.n
        self._entropy_part = float(np.dot(self._x, np.log(self._x)))
        self.threshold = threshold
        self.updates_allowed = updates_allowed
        self.rows: list[MonitorRow] = []
        self._before: float | None = None
        self._model_before: tuple[np.ndarray, float] | None = None  # D_t's weights (a copy) and total
        self._ledger = _Ledger()

    def potential(self, weights: np.ndarray, total: float) -> float:
        """KL(x/n || weights/total), in nats (inf if D gives zero mass to a data cell)."""
        d = weights[self._support] / total
        with np.errstate(divide="ignore"):
            return self._entropy_part - float(np.dot(self._x, np.log(d)))

    def before_update(self, weights: np.ndarray, total: float) -> None:
        """Keep Phi_t and a copy of D_t (the update changes the weights in place)."""
        self._before = self.potential(weights, total)
        self._model_before = (np.array(weights, dtype=np.float64), float(total))

    def after_update(self, weights: np.ndarray, total: float, *, query_id: int, query: str,
                     true_fraction: float, model_fraction: float, sign: int, accountant=None) -> MonitorRow:
        """Record the update just made; ``accountant`` is the PMW's (read, never charged)."""
        after = self.potential(weights, total)
        before = self._before if self._before is not None else math.nan
        predicted = (kl_divergence(weights, self._model_before[0], total, self._model_before[1])
                     if self._model_before is not None else math.nan)
        error = abs(true_fraction - model_fraction)
        correct = sign == (1 if true_fraction > model_fraction else -1 if true_fraction < model_fraction else 0)
        guaranteed = self.threshold**2 / 16
        flags = []
        if correct and after > before + _TOLERANCE:
            flags.append("potential rose")
        if correct and error >= self.threshold / 2 and before - after < guaranteed - _TOLERANCE:
            flags.append("drop below T^2/16")
        if not correct:
            flags.append("wrong sign (noise beyond the plan's bound)")
        if error < self.threshold / 2:
            flags.append("update with true error < T/2 (noise beyond the plan's bound)")
        update = len(self.rows) + 1
        gap = (before - after) - predicted
        budget = self._ledger.read(accountant, update)
        row = MonitorRow(update, self.updates_allowed, query_id, query, error, float(self.threshold), correct,
                         before, after, before - after, predicted, gap, bool(gap >= -_TOLERANCE), guaranteed,
                         **asdict(budget), flag="; ".join(flags))
        self.rows.append(row)
        self._before = self._model_before = None
        return row

    def write_csv(self, handle) -> None:
        """The rows as CSV, under a first line that says the file is NON-PRIVATE and a second
        that records the plan's L and T (so they survive a run with no update)."""
        _write(handle, f"updates_allowed={int(self.updates_allowed)} threshold={float(self.threshold)!r}",
               MonitorRow, self.rows)


@dataclass(frozen=True)
class PracticalMonitorRow:
    """One update of practical PMW, against the potential Phi = KL(x/n || D) (the module
    docstring defines each column)."""

    update: int
    updates_allowed: int
    query_id: int
    query: str
    columns: str  # the tested subset, comma-separated
    test: str  # "marginal" or "query" ("" when not told)
    true_error: float  # the tested value (marginal L1 error, or the query's error) as a fraction of n
    threshold: float  # the T this update's epoch tested against, a fraction of n
    phi_before: float
    phi_after: float
    drop: float
    predicted_drop: float  # KL(D_{t+1} || D_t): what an exact projection would lower Phi by at least
    bound_gap: float  # drop - predicted_drop; < 0: the refit overshot the truth (the noise's part)
    kept_bound: bool
    epsilon_update: float  # this update's own charges: its epoch's test and its measurement
    rho_update: float
    epsilon_spent: float  # the accountant's total right after the update
    delta_spent: float
    rho_spent: float
    spent_method: str
    flag: str  # "potential rose" when the noise won this update

    @property
    def pythagorean_bound(self) -> float:
        """The predicted drop's older name (files before the column was renamed use it)."""
        return self.predicted_drop


class PracticalMonitor:
    """Watches practical PMW against the true histogram ``counts``: Phi before and after each
    update, the Pythagorean bound KL(D_{t+1} || D_t) and the gap to it, the tested value's true
    error, the budget spent, and a flag on every update where Phi rose (a noisy measurement's
    set need not contain x/n). Reads only copies of the model's state: it cannot change what
    PMW releases."""

    variant = "practical"

    def __init__(self, counts: np.ndarray, threshold: float, updates_allowed: int):
        self._phi = KLMonitor(counts, threshold, updates_allowed)
        self.n = self._phi.n
        self.threshold = threshold
        self.updates_allowed = updates_allowed
        self.rows: list[PracticalMonitorRow] = []
        self._ledger = _Ledger()

    def record(self, before: np.ndarray, after: np.ndarray, *, query_id: int, query: str,
               columns: tuple[str, ...], tested_error: float, test: str = "", accountant=None,
               threshold: float | None = None) -> PracticalMonitorRow:
        """``before`` and ``after`` are D_t and D_{t+1} (normalized); ``tested_error`` in rows;
        ``accountant`` is the PMW's (read, never charged); ``threshold`` the T this update's
        epoch tested against, a fraction of n (default: the plan's)."""
        phi_before, phi_after = self._phi.potential(before, 1.0), self._phi.potential(after, 1.0)
        step = kl_divergence(after, before)
        flag = "potential rose" if phi_after > phi_before + _TOLERANCE else ""
        update = len(self.rows) + 1
        gap = (phi_before - phi_after) - step
        budget = self._ledger.read(accountant, update)
        threshold = float(self.threshold if threshold is None else threshold)
        row = PracticalMonitorRow(update, self.updates_allowed, query_id, query, ",".join(columns), test,
                                  tested_error / self.n, threshold, phi_before, phi_after, phi_before - phi_after,
                                  step, gap, bool(gap >= -_TOLERANCE), **asdict(budget), flag=flag)
        self.rows.append(row)
        return row

    def write_csv(self, handle) -> None:
        """As ``KLMonitor.write_csv``: the NON-PRIVATE line, the plan line, then one row per update."""
        plan = (f"updates_allowed={int(self.updates_allowed)} threshold={float(self.threshold)!r} "
                f"variant={self.variant}")
        _write(handle, plan, PracticalMonitorRow, self.rows)


def _write(handle, plan: str, kind, rows) -> None:
    handle.write(NON_PRIVATE_HEADER + "\n")
    handle.write(f"{PLAN_PREFIX} {plan}\n")
    writer = csv.DictWriter(handle, fieldnames=list(kind.__dataclass_fields__), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow(asdict(row))
