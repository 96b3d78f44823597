"""The KL-potential monitor for PMW: a NON-PRIVATE diagnostic for the data owner.

It reads the true histogram x and, at each update, records the potential
Phi_t = KL(x/n || D_t) before and after, the drop against the T^2/16 the theory guarantees,
the true error of the query, and flags any step that breaks the theory. It only reads the
model's state (through read-only views) and draws no randomness, so it can never change
what PMW releases.

Its CSV starts with two comment lines: the NON-PRIVATE header, then the run's plan
(``# plan: updates_allowed=L threshold=T``), so the plan's L and T are on file even when PMW
made no update and the table below has no rows.
"""

from __future__ import annotations

import csv
import math
from dataclasses import asdict, dataclass

import numpy as np

__all__ = ["KLMonitor", "MonitorRow", "NON_PRIVATE_HEADER", "PLAN_PREFIX", "PracticalMonitor", "PracticalMonitorRow"]

NON_PRIVATE_HEADER = (
    "# NON-PRIVATE diagnostic: computed from the true data, for the data owner only; never release it"
)
#: The second line of the CSV: the plan's update bound L and threshold T (a fraction of n).
PLAN_PREFIX = "# plan:"
_TOLERANCE = 1e-9


@dataclass(frozen=True)
class MonitorRow:
    """One update as the theory sees it."""

    update: int
    updates_allowed: int
    query_id: int
    query: str
    true_error: float  # |f(x) - f(D_t)| as a fraction of the true n
    sign_correct: bool
    phi_before: float
    phi_after: float
    drop: float
    guaranteed_drop: float  # T^2 / 16, owed when true_error >= T/2 and the sign is right
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

    def potential(self, weights: np.ndarray, total: float) -> float:
        """KL(x/n || weights/total), in nats (inf if D gives zero mass to a data cell)."""
        d = weights[self._support] / total
        with np.errstate(divide="ignore"):
            return self._entropy_part - float(np.dot(self._x, np.log(d)))

    def before_update(self, weights: np.ndarray, total: float) -> None:
        self._before = self.potential(weights, total)

    def after_update(self, weights: np.ndarray, total: float, *, query_id: int, query: str,
                     true_fraction: float, model_fraction: float, sign: int) -> MonitorRow:
        after = self.potential(weights, total)
        before = self._before if self._before is not None else math.nan
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
        row = MonitorRow(len(self.rows) + 1, self.updates_allowed, query_id, query, error, correct,
                         before, after, before - after, guaranteed, "; ".join(flags))
        self.rows.append(row)
        self._before = None
        return row

    def write_csv(self, handle) -> None:
        """The rows as CSV, under a first line that says the file is NON-PRIVATE and a second
        that records the plan's L and T (so they survive a run with no update)."""
        handle.write(NON_PRIVATE_HEADER + "\n")
        plan = f"updates_allowed={int(self.updates_allowed)} threshold={float(self.threshold)!r}"
        handle.write(f"{PLAN_PREFIX} {plan}\n")
        fields = list(MonitorRow.__dataclass_fields__)
        writer = csv.DictWriter(handle, fieldnames=fields, lineterminator="\n")
        writer.writeheader()
        for row in self.rows:
            writer.writerow(asdict(row))


@dataclass(frozen=True)
class PracticalMonitorRow:
    """One update of practical PMW, against the potential Phi = KL(x/n || D)."""

    update: int
    updates_allowed: int
    query_id: int
    query: str
    columns: str  # the tested subset, comma-separated
    true_error: float  # the tested value (marginal L1 error, or the query's error) as a fraction of n
    phi_before: float
    phi_after: float
    drop: float
    pythagorean_bound: float  # KL(D_{t+1} || D_t): what an exact projection would lower Phi by at least
    flag: str  # "potential rose" when the noise won this update


class PracticalMonitor:
    """Watches practical PMW against the true histogram ``counts``: Phi before and after each
    update, the Pythagorean bound KL(D_{t+1} || D_t), the tested value's true error, and a flag
    on every update where Phi rose (a noisy measurement's set need not contain x/n). Reads only
    copies of the model's state: it cannot change what PMW releases."""

    variant = "practical"

    def __init__(self, counts: np.ndarray, threshold: float, updates_allowed: int):
        self._phi = KLMonitor(counts, threshold, updates_allowed)
        self.n = self._phi.n
        self.threshold = threshold
        self.updates_allowed = updates_allowed
        self.rows: list[PracticalMonitorRow] = []

    def record(self, before: np.ndarray, after: np.ndarray, *, query_id: int, query: str,
               columns: tuple[str, ...], tested_error: float) -> PracticalMonitorRow:
        """``before`` and ``after`` are D_t and D_{t+1} (normalized); ``tested_error`` in rows."""
        phi_before, phi_after = self._phi.potential(before, 1.0), self._phi.potential(after, 1.0)
        support = after > 0
        with np.errstate(divide="ignore", invalid="ignore"):
            step = float(np.sum(after[support] * np.log(after[support] / before[support])))
        flag = "potential rose" if phi_after > phi_before + _TOLERANCE else ""
        row = PracticalMonitorRow(len(self.rows) + 1, self.updates_allowed, query_id, query, ",".join(columns),
                                  tested_error / self.n, phi_before, phi_after, phi_before - phi_after, step, flag)
        self.rows.append(row)
        return row

    def write_csv(self, handle) -> None:
        """As ``KLMonitor.write_csv``: the NON-PRIVATE line, the plan line, then one row per update."""
        handle.write(NON_PRIVATE_HEADER + "\n")
        plan = (f"updates_allowed={int(self.updates_allowed)} threshold={float(self.threshold)!r} "
                f"variant={self.variant}")
        handle.write(f"{PLAN_PREFIX} {plan}\n")
        writer = csv.DictWriter(handle, fieldnames=list(PracticalMonitorRow.__dataclass_fields__),
                                lineterminator="\n")
        writer.writeheader()
        for row in self.rows:
            writer.writerow(asdict(row))
