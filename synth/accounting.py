"""Privacy budgets, an explicit accountant, and its ledger.

An ``Accountant`` holds the user's total budget (epsilon, delta). Mechanisms ``check`` it
before they sample and ``spend`` at release; a charge that would take the total past the
budget raises ``BudgetExceeded`` and is not recorded, so nothing is ever overspent. The
total is the tightest valid one among basic, advanced and zCDP composition
(``synth.composition``). There is no global accountant: pass one explicitly.

Basic composition is checked in exact rational arithmetic, so splitting epsilon into
parts with ``split_epsilon`` never fails on a rounding error.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any

from .composition import advanced_epsilon, zcdp_epsilon
from .errors import SynthError
from .validation import check_delta, check_epsilon, check_positive_int, check_real

__all__ = ["Budget", "Charge", "Spent", "Accountant", "BudgetExceeded", "split_epsilon", "compose"]

# Advanced and zCDP totals are floating-point bounds: they count only when smaller than the
# budget by this relative margin, so rounding can never let them overspend.
_MARGIN = 1e-12


class BudgetExceeded(SynthError):
    """A charge would take the total privacy loss past the budget (a ``ValueError``)."""


@dataclass(frozen=True)
class Budget:
    """An immutable (epsilon, delta) pair."""

    epsilon: float
    delta: float = 0.0

    def __post_init__(self) -> None:
        epsilon = check_real(self.epsilon, "epsilon")
        if not math.isfinite(epsilon) or epsilon < 0:
            raise ValueError(f"epsilon ({self.epsilon!r}) must be finite and >= 0")
        object.__setattr__(self, "epsilon", epsilon)
        object.__setattr__(self, "delta", check_delta(self.delta))

    def split(self, parts: int) -> Budget:
        """One of ``parts`` equal shares whose exact sum never exceeds this budget."""
        return Budget(split_epsilon(self.epsilon, parts), self.delta / check_positive_int(parts, "parts"))


def split_epsilon(epsilon: float, parts: int) -> float:
    """``epsilon / parts`` rounded down so that ``parts`` copies add up to at most epsilon exactly."""
    parts = check_positive_int(parts, "parts")
    share = epsilon / parts
    while Fraction(share) * parts > Fraction(epsilon):
        share = math.nextafter(share, 0.0)
    return share


@dataclass(frozen=True)
class Charge:
    """One release: pure (epsilon), approximate (epsilon, delta) or zCDP (rho)."""

    mechanism: str
    epsilon: float | None = None
    delta: float = 0.0
    rho: float | None = None
    note: str = ""

    @property
    def is_zcdp(self) -> bool:
        return self.rho is not None


@dataclass(frozen=True)
class Spent:
    """A total privacy loss and the composition theorem that gave it."""

    epsilon: float
    delta: float
    method: str


def compose(charges: tuple[Charge, ...] | list[Charge], delta_budget: float) -> Spent:
    """The tightest valid total of ``charges`` whose delta stays within ``delta_budget``.

    Returns epsilon = inf when no theorem fits (e.g. a zCDP charge with a zero delta budget).
    """
    if not charges:
        return Spent(0.0, 0.0, "none")
    approx = [c for c in charges if not c.is_zcdp and c.delta > 0]
    pure = [c for c in charges if not c.is_zcdp and c.delta == 0]
    zcdp = [c for c in charges if c.is_zcdp]
    delta_used = math.fsum(c.delta for c in approx)
    options: list[Spent] = []
    if not zcdp:
        total = sum((Fraction(c.epsilon) for c in charges), Fraction(0))
        options.append(Spent(_round_up(total), delta_used, "basic"))
    slack = delta_budget - delta_used
    if slack > 0:
        if not zcdp and len(charges) > 1:
            bound = advanced_epsilon([c.epsilon for c in charges], slack)
            options.append(Spent(bound * (1 + _MARGIN), delta_budget, "advanced"))
        rho = math.fsum([c.epsilon**2 / 2 for c in pure] + [c.rho for c in zcdp])
        bound = zcdp_epsilon(rho, slack) + math.fsum(c.epsilon for c in approx)
        options.append(Spent(bound * (1 + _MARGIN), delta_budget, "zcdp"))
    if not options:
        return Spent(math.inf, delta_budget, "none fits")
    return min(options, key=lambda s: (s.epsilon, s.delta))


def _round_up(value: Fraction) -> float:
    result = float(value)
    return math.nextafter(result, math.inf) if Fraction(result) < value else result


class Accountant:
    """Tracks releases against a total budget; refuses any charge that would overspend.

    >>> acc = Accountant(1.0)
    >>> _ = acc.spend(0.25, mechanism="discrete_laplace")
    >>> acc.remaining().epsilon
    0.75
    """

    def __init__(self, epsilon: float, delta: float = 0.0):
        self._budget = Budget(check_epsilon(epsilon), check_delta(delta))
        self._charges: list[Charge] = []

    @property
    def budget(self) -> Budget:
        return self._budget

    def ledger(self) -> tuple[Charge, ...]:
        """Every charge made so far, in order."""
        return tuple(self._charges)

    def spent(self) -> Spent:
        """The tightest valid total privacy loss of the ledger."""
        return compose(self._charges, self._budget.delta)

    def remaining(self) -> Budget:
        """The budget less what is spent (an indication: the next check composes exactly)."""
        spent = self.spent()
        return Budget(max(0.0, self._budget.epsilon - spent.epsilon), max(0.0, self._budget.delta - spent.delta))

    def _charge(self, epsilon, delta, rho, mechanism, note) -> Charge:
        if rho is None:
            if epsilon is None:
                raise TypeError("give epsilon (pure or approximate DP) or rho (zCDP)")
            return Charge(mechanism, check_epsilon(epsilon), check_delta(delta), None, note)
        if epsilon is not None or delta:
            raise TypeError("a charge is either (epsilon, delta) or rho, not both")
        return Charge(mechanism, None, 0.0, check_epsilon(rho, "rho"), note)

    def check(
        self, epsilon: float | None = None, delta: float = 0.0, *, rho: float | None = None,
        mechanism: str = "", note: str = "",
    ) -> Spent:
        """The total after this charge; ``BudgetExceeded`` if it would not fit. Records nothing."""
        charge = self._charge(epsilon, delta, rho, mechanism, note)
        total = compose(self._charges + [charge], self._budget.delta)
        if not self._fits(total, charge):
            what = f"rho={charge.rho:g}" if charge.is_zcdp else f"epsilon={charge.epsilon:g}" + (
                f", delta={charge.delta:g}" if charge.delta else "")
            label = f" ({mechanism}{': ' + note if note else ''})" if mechanism else ""
            raise BudgetExceeded(
                f"spending {what}{label} would bring the total to epsilon={total.epsilon:.10g}, "
                f"delta={total.delta:.3g} ({total.method} composition), over the budget "
                f"epsilon={self._budget.epsilon:g}, delta={self._budget.delta:g}; "
                f"remaining epsilon={self.remaining().epsilon:.10g}"
            )
        return total

    def _fits(self, total: Spent, charge: Charge) -> bool:
        if total.delta > self._budget.delta:
            return False
        if total.method == "basic":  # exact: the sum of the charges' epsilons as fractions
            exact = sum((Fraction(c.epsilon) for c in self._charges + [charge]), Fraction(0))
            return exact <= Fraction(self._budget.epsilon)
        return total.epsilon <= self._budget.epsilon

    def spend(
        self, epsilon: float | None = None, delta: float = 0.0, *, rho: float | None = None,
        mechanism: str = "", note: str = "",
    ) -> Charge:
        """Record a release; ``BudgetExceeded`` (and nothing recorded) if it would overspend."""
        self.check(epsilon, delta, rho=rho, mechanism=mechanism, note=note)
        charge = self._charge(epsilon, delta, rho, mechanism, note)
        self._charges.append(charge)
        return charge

    # -- serialization -------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        spent = self.spent()
        return {
            "budget": asdict(self._budget),
            "spent": asdict(spent),
            "charges": [asdict(c) for c in self._charges],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> Accountant:
        """Rebuild an accountant (budget and ledger) from ``to_dict`` output."""
        accountant = cls(obj["budget"]["epsilon"], obj["budget"]["delta"])
        for item in obj["charges"]:
            accountant.spend(item.get("epsilon"), item.get("delta", 0.0), rho=item.get("rho"),
                             mechanism=item.get("mechanism", ""), note=item.get("note", ""))
        return accountant
