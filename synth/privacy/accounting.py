"""Privacy budgets, an explicit accountant, and its ledger.

An ``Accountant`` holds the user's total budget (epsilon, delta). Mechanisms ``check`` it
before they sample and ``spend`` at release; a charge that would take the total past the
budget raises ``BudgetExceeded`` and is not recorded, so nothing is ever overspent. The
total is the tightest valid one among basic, advanced and zCDP composition
(``synth.privacy.composition``). There is no global accountant: pass one explicitly.

Basic composition is checked in exact rational arithmetic, so splitting epsilon into
parts with ``split_epsilon`` never fails on a rounding error.
"""

from __future__ import annotations

import json
import functools
import math
from dataclasses import asdict, dataclass, replace
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from synth.errors import SynthError
from synth.privacy.composition import advanced_epsilon, zcdp_epsilon, zcdp_rho_limit
from synth.privacy.validation import check_delta, check_epsilon, check_positive_int, check_real

__all__ = ["Budget", "Charge", "Spent", "Accountant", "BudgetExceeded", "split_epsilon", "subtract_epsilon", "compose",
           "sequential_record", "combined_record"]

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


def subtract_epsilon(epsilon: float, used: float) -> float:
    """``epsilon - used`` rounded down, so that ``used`` plus the result never exceeds epsilon exactly."""
    rest = epsilon - used
    while Fraction(rest) + Fraction(used) > Fraction(epsilon):
        rest = math.nextafter(rest, 0.0)
    return rest


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

    An (epsilon, delta > 0) charge (epsilon = 0 allowed: a release that differs between
    neighbours only on an event of probability <= delta) enters every theorem as itself: its
    delta adds up, and beside zCDP charges its epsilon adds to the zCDP total's (an
    (epsilon, delta)-DP release is delta-approximately epsilon^2/2-zCDP, and approximate zCDP
    composes: Bun and Steinke 2016, Section 8), so rho with (0, delta) gives
    (zcdp_epsilon(rho, delta'), delta + delta'). Beside zCDP charges, pure ones are composed
    both ways, as epsilon^2/2-zCDP and by basic composition (their sum plus the zCDP total:
    the two groups are each private, and basic composition joins them), and the lesser counts.

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
        if zcdp and pure:  # the pure charges by basic composition beside the zCDP ones (better for many small ones)
            rho = math.fsum(c.rho for c in zcdp)
            linear = _round_up(sum((Fraction(c.epsilon) for c in pure + approx), Fraction(0)))
            options.append(Spent(linear + zcdp_epsilon(rho, slack) * (1 + _MARGIN), delta_budget, "basic + zcdp"))
    if not options:
        return Spent(math.inf, delta_budget, "none fits")
    return min(options, key=lambda s: (s.epsilon, s.delta))


@dataclass(frozen=True)
class _Sums:
    """Running sums of a ledger, enough to check each composition theorem in O(1)."""

    count: int = 0
    basic: int = 0  # sum of epsilons (non-zCDP charges), exact, in units of 2^-1074 (``_exact``)
    approx_delta: int = 0  # the same for deltas, so a delta budget is never passed by rounding
    approx_epsilon: float = 0.0  # sum of epsilons of (epsilon, delta > 0) charges
    squares: float = 0.0  # sum of epsilon^2 (non-zCDP), for advanced composition
    drift: float = 0.0  # sum of epsilon (e^epsilon - 1)
    rho: float = 0.0  # pure epsilon^2 / 2 plus zCDP rhos
    has_zcdp: bool = False
    zcdp_rho: float = 0.0  # zCDP rhos alone (the pure charges composed apart, by basic composition)

    def plus(self, charge: Charge) -> _Sums:
        if charge.is_zcdp:
            return _Sums(self.count + 1, self.basic, self.approx_delta, self.approx_epsilon, self.squares,
                         self.drift, self.rho + charge.rho, True, self.zcdp_rho + charge.rho)
        eps = charge.epsilon
        approx = charge.delta > 0
        return _Sums(
            self.count + 1, self.basic + _exact(eps), self.approx_delta + _exact(charge.delta),
            self.approx_epsilon + (eps if approx else 0.0), self.squares + eps * eps,
            self.drift + eps * _expm1(eps), self.rho + (0.0 if approx else eps * eps / 2), self.has_zcdp,
            self.zcdp_rho,
        )


#: Every float is a whole multiple of 2^-1074: sums of floats scaled by this are exact integers.
_SCALE = 2**1074


@functools.lru_cache(maxsize=4096)
def _exact(value: float) -> int:
    """``value`` times 2^1074, an exact integer (integer sums are exact and far faster than
    ``Fraction`` ones); cached, as the same few epsilons are charged over and over."""
    return int(Fraction(value) * _SCALE)


def _expm1(x: float) -> float:
    """e^x - 1, infinite past float range (advanced composition then loses to basic)."""
    return math.expm1(x) if x < 709 else math.inf


def _round_up(value: Fraction) -> float:
    result = float(value)
    return math.nextafter(result, math.inf) if Fraction(result) < value else result


class Accountant:
    """Tracks releases against a total budget; refuses any charge that would overspend.

    Checks are O(1): running sums of the ledger (exact for basic composition) and, for zCDP,
    the largest rho the budget allows, cached. ``spent()`` composes the whole ledger.

    >>> acc = Accountant(1.0)
    >>> _ = acc.spend(0.25, mechanism="discrete_laplace")
    >>> acc.remaining().epsilon
    0.75
    """

    def __init__(self, epsilon: float, delta: float = 0.0):
        self._budget = Budget(check_epsilon(epsilon), check_delta(delta))
        self._charges: list[Charge] = []
        self._sums = _Sums()
        self._rho_limits: dict[tuple[float, float], float] = {}

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
            delta = check_delta(delta)
            if delta > 0 and check_real(epsilon, "epsilon") == 0:
                # (0, delta): a release that differs between neighbours only on an event of
                # probability <= delta, e.g. partition selection's threshold on a new value.
                return Charge(mechanism, 0.0, delta, None, note)
            return Charge(mechanism, check_epsilon(epsilon), delta, None, note)
        if epsilon is not None or delta:
            raise TypeError("a charge is either (epsilon, delta) or rho, not both")
        return Charge(mechanism, None, 0.0, check_epsilon(rho, "rho"), note)

    def check(
        self, epsilon: float | None = None, delta: float = 0.0, *, rho: float | None = None,
        mechanism: str = "", note: str = "",
    ) -> None:
        """``BudgetExceeded`` if this charge would not fit; records nothing."""
        self._check([self._charge(epsilon, delta, rho, mechanism, note)])

    def check_all(self, charges: Sequence[Charge]) -> None:
        """``BudgetExceeded`` if these charges together would not fit; records nothing. For a
        release charged in parts (a rho and a (0, delta), say), checked at once before sampling."""
        self._check([self._charge(c.epsilon, c.delta, c.rho, c.mechanism, c.note) for c in charges])

    def _check(self, charges: list[Charge]) -> None:
        sums = self._sums
        for charge in charges:
            sums = sums.plus(charge)
        if self._fits(sums):
            return
        total = compose(self._charges + charges, self._budget.delta)
        what = ", ".join(f"rho={c.rho:g}" if c.is_zcdp else f"epsilon={c.epsilon:g}" + (
            f", delta={c.delta:g}" if c.delta else "") for c in charges)
        mechanism, note = charges[0].mechanism, charges[0].note
        label = f" ({mechanism}{': ' + note if note else ''})" if mechanism else ""
        raise BudgetExceeded(
            f"spending {what}{label} would bring the total to epsilon={total.epsilon:.10g}, "
            f"delta={total.delta:.3g} ({total.method} composition), over the budget "
            f"epsilon={self._budget.epsilon:g}, delta={self._budget.delta:g}; "
            f"remaining epsilon={self.remaining().epsilon:.10g}"
        )

    def _fits(self, sums: _Sums) -> bool:
        """Whether a ledger with these running sums fits the budget (the theorems of ``compose``)."""
        budget = self._budget
        if sums.approx_delta > _exact(budget.delta):
            return False
        if not sums.has_zcdp and sums.basic <= _exact(budget.epsilon):
            return True
        slack = budget.delta - sums.approx_delta / _SCALE  # int / int: correctly rounded
        if slack <= 0:
            return False
        if not sums.has_zcdp and sums.count > 1:
            bound = math.sqrt(2 * -math.log(slack) * sums.squares) + sums.drift
            if bound * (1 + _MARGIN) <= budget.epsilon:
                return True
        target = budget.epsilon - sums.approx_epsilon
        if target > 0 and sums.rho <= self._rho_limit(target, slack):
            return True
        linear = budget.epsilon - _round_up(Fraction(sums.basic, _SCALE))  # pure and approximate, by basic composition
        return sums.has_zcdp and linear > 0 and sums.zcdp_rho <= self._rho_limit(linear, slack)

    def _rho_limit(self, target: float, slack: float) -> float:
        """The largest rho (less a 1e-6 safety share) whose zCDP total stays within ``target``."""
        key = (target, slack)
        if key not in self._rho_limits:
            self._rho_limits[key] = zcdp_rho_limit(target / (1 + _MARGIN), slack) * (1 - 1e-6)
        return self._rho_limits[key]

    def spend(
        self, epsilon: float | None = None, delta: float = 0.0, *, rho: float | None = None,
        mechanism: str = "", note: str = "",
    ) -> Charge:
        """Record a release; ``BudgetExceeded`` (and nothing recorded) if it would overspend."""
        self.check(epsilon, delta, rho=rho, mechanism=mechanism, note=note)
        charge = self._charge(epsilon, delta, rho, mechanism, note)
        self._charges.append(charge)
        self._sums = self._sums.plus(charge)
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


def sequential_record(parts: Sequence[tuple[str, Accountant]]) -> dict[str, Any]:
    """The privacy record of releases made one after the other on the same data, each under
    its own accountant (a schema derived under DP, then an engine's run): budgets and losses
    add up (basic composition of the parts), and the ledger lists every part's charges, each
    note prefixed by the part's name. The shape of ``Accountant.to_dict``."""
    spent = [accountant.spent() for _, accountant in parts]
    epsilon = _round_up(sum((Fraction(s.epsilon) for s in spent), Fraction(0)))  # never below the exact sum
    delta = _round_up(sum((Fraction(s.delta) for s in spent), Fraction(0)))
    method = "basic, over " + " then ".join(f"{name} ({s.method})" for (name, _), s in zip(parts, spent))
    budgets = [accountant.budget for _, accountant in parts]
    return {
        "budget": {"epsilon": math.fsum(b.epsilon for b in budgets), "delta": math.fsum(b.delta for b in budgets)},
        "spent": {"epsilon": epsilon, "delta": delta, "method": method},
        "charges": [asdict(replace(charge, note=f"{name}: {charge.note}" if charge.note else name))
                    for name, accountant in parts for charge in accountant.ledger()],
    }


def combined_record(parts: Sequence[tuple[str, Accountant]], budget: Budget | None = None) -> dict[str, Any]:
    """``sequential_record``, or, when it is tighter, the record of every part's charges
    composed as one ledger (``compose``: rho adds up across the parts, so a derivation and a
    run that both compose in zCDP cost less together than their epsilons added). ``budget``
    is the total they were planned in (default: the parts' budgets added); a total past it is
    a ``BudgetExceeded``, never a record."""
    record = sequential_record(parts)
    total = budget if budget is not None else Budget(record["budget"]["epsilon"], min(record["budget"]["delta"], 1.0))
    charges = [charge for _, accountant in parts for charge in accountant.ledger()]
    joint = compose(charges, total.delta) if total.delta > 0 else Spent(math.inf, 0.0, "none")
    if joint.epsilon < record["spent"]["epsilon"]:
        record["spent"] = {"epsilon": joint.epsilon, "delta": joint.delta,
                           "method": f"{joint.method}, over one ledger: " + " then ".join(name for name, _ in parts)}
    record["budget"] = {"epsilon": total.epsilon, "delta": total.delta}
    if record["spent"]["epsilon"] > total.epsilon or record["spent"]["delta"] > total.delta:
        raise BudgetExceeded(f"the parts ({', '.join(name for name, _ in parts)}) spent epsilon="
                             f"{record['spent']['epsilon']:.6g}, delta={record['spent']['delta']:.3g}, past the "
                             f"budget epsilon={total.epsilon:g}, delta={total.delta:g}")
    return record
