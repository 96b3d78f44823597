"""The sparse vector technique: answer "is this query above the threshold?" for a stream of
queries, paying only for the queries that are above (Dwork and Roth 2014, Section 3.6).

* ``AboveThreshold``: threshold noise Lap(2 sensitivity / epsilon), query noise
  Lap(4 sensitivity / epsilon); halts after the first "above". epsilon-DP in total.
* ``NumericSparse``: the same test, and on "above" it releases the value plus fresh
  Lap(sensitivity / epsilon_release) noise. (epsilon_test + epsilon_release)-DP.
* ``Sparse``: AboveThreshold restarted with a fresh noisy threshold after each "above", up
  to ``max_above`` times; each run gets epsilon / max_above, or with delta > 0 the largest
  per-run epsilon whose composition over max_above runs (basic, advanced or zCDP, as the
  accountant composes them) is at most epsilon. Each run is charged to the accountant when
  it starts answering.

The noise is exact discrete Laplace on the lattice of the sensitivity: for an integer
sensitivity (counts) it is integer noise with the scales above; for any other sensitivity
(fractions, e.g. 1/n) it is ``sensitivity * Z`` with Z discrete Laplace of scale 2/epsilon
(4/epsilon), which shifts by exactly one lattice step between neighbouring datasets. The
comparison is decided in exact rational arithmetic on the given floats (a floating-point
comparison rounds near ties in a data-dependent way, which breaks that argument), against a
noisy threshold lowered by half a lattice step: values on the lattice (counts, or fractions
c/n computed in floats) then sit half a step from every decision boundary, so the rounding
error in a computed value cannot flip a comparison. The guarantee is for query values whose
neighbouring differences are at most the sensitivity; a value computed in floats may exceed
that by an ulp, which matters only if it also lands within an ulp of a boundary. Only the
comparison result (and NumericSparse's integer count) is released.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from synth import _kernels
from synth.privacy.mechanisms._exact import discrete_laplace_exact
from synth.privacy.mechanisms.discrete import laplace_ratio
from synth.privacy.rng import kernel_state, make_rng
from synth.privacy.validation import (
    check_delta, check_epsilon, check_positive_int, check_real, check_sensitivity,
)

if TYPE_CHECKING:
    from synth.privacy.accounting import Accountant

__all__ = ["AboveThreshold", "NumericSparse", "Sparse"]


class _LatticeNoise:
    """Discrete Laplace noise of scale ``multiple * sensitivity / epsilon``, in lattice steps.

    The lattice step ``unit`` is 1 for an integer sensitivity (counts), else the sensitivity
    itself; ``draw`` returns the noise as a whole number of steps. The draws come from the
    exact kernel on a state taken from ``rng`` once, so a single draw costs about a microsecond.
    """

    def __init__(self, epsilon: float, sensitivity: float, rng: np.random.Generator):
        integer = float(sensitivity).is_integer()
        self.unit = Fraction(1) if integer else Fraction(sensitivity)
        self.steps = sensitivity if integer else 1.0  # the sensitivity in lattice steps
        self.epsilon = epsilon
        self.rng = rng
        self._state = kernel_state(rng)
        self._ratios: dict[float, tuple[int, int]] = {}
        self._out = np.zeros(1, dtype=np.int64)

    def draw(self, multiple: float) -> int:
        ratio = self._ratios.get(multiple)
        if ratio is None:
            ratio = self._ratios[multiple] = laplace_ratio(self.epsilon / multiple, self.steps)
        s, t = ratio
        if _kernels.fill_discrete_laplace(self._out, 0, 1, np.uint64(s), np.uint64(t), self._state) == 1:
            return int(self._out[0])
        return discrete_laplace_exact(s, t, self.rng)  # overflow fallback (probability < exp(-2^20))


class AboveThreshold:
    """Tell, one query value at a time, whether it is above ``threshold``; halt after the first
    "above". epsilon-DP for query values whose sensitivity is ``sensitivity``.

    >>> at = AboveThreshold(100, epsilon=1.0, rng=7)
    >>> [at.test(v) for v in (3, 5, 400)]
    [False, False, True]
    """

    def __init__(
        self,
        threshold: float,
        epsilon: float,
        sensitivity: float = 1,
        rng: np.random.Generator | int | None = None,
        *,
        accountant: Accountant | None = None,
        note: str = "",
    ):
        self.threshold = check_real(threshold, "threshold")
        if not math.isfinite(self.threshold):
            raise ValueError(f"threshold ({threshold!r}) must be finite")
        self.epsilon = check_epsilon(epsilon)
        self.sensitivity = check_sensitivity(sensitivity)
        self._noise = _LatticeNoise(self.epsilon, self.sensitivity, make_rng(rng))
        self._accountant = accountant
        self._note = note
        if accountant is not None:
            accountant.check(self.epsilon)
        self._threshold_noise = self._noise.draw(2)  # in lattice steps
        # Integer threshold on the integer lattice: the exact test needs no fractions.
        self._integers = self._noise.unit == 1 and self.threshold.is_integer()
        self._integer_threshold = int(self.threshold) if self._integers else 0
        self._charged = False
        self.halted = False
        self.answered = 0

    def _charge(self) -> None:
        if not self._charged and self._accountant is not None:
            self._accountant.spend(self.epsilon, mechanism="above_threshold", note=self._note)
        self._charged = True

    def test(self, value: float) -> bool:
        """True when ``value`` (plus fresh noise) is above the noisy threshold; then it halts."""
        if self.halted:
            raise RuntimeError("AboveThreshold halted after its first 'above': start a new one")
        value = check_real(value, "value")
        if not math.isfinite(value):
            raise ValueError(f"value ({value!r}) must be finite")
        self._charge()
        # value + unit * nu >= threshold + unit * (rho - 1/2), decided exactly on the given floats.
        # Exactly: float rounding near a tie depends on the data and breaks the lattice argument.
        # Half a step down: values on the lattice (counts, or fractions c/n computed in floats)
        # then never sit on the boundary, so an ulp of error in them cannot flip a comparison.
        # (For integer values and threshold this is the same test as without the half step.)
        query_noise = self._noise.draw(4)
        bound = self._threshold_noise - query_noise
        if self._integers and value.is_integer():  # counts: gap >= bound - 1/2 is gap >= bound, in integers
            above = int(value) - self._integer_threshold >= bound
        else:
            gap = Fraction(value) - Fraction(self.threshold)
            above = gap >= self._noise.unit * Fraction(2 * bound - 1, 2)
        self.answered += 1
        self.halted = above
        return above


class NumericSparse:
    """AboveThreshold that also releases a noisy value for the query that is above.

    ``query(value)`` returns None while below; on the first "above" it returns ``value`` plus
    fresh discrete Laplace noise of scale ``sensitivity / epsilon_release`` and halts.
    (epsilon_test + epsilon_release)-DP.

    Values are integer counts and the sensitivity an integer: a released ``value + noise`` is
    then an exact integer. (A float release such as ``c/n + Z/n`` would reveal the value
    through which floats it can land on; express fractions as counts instead.)
    """

    def __init__(
        self,
        threshold: float,
        epsilon_test: float,
        epsilon_release: float,
        sensitivity: float = 1,
        rng: np.random.Generator | int | None = None,
        *,
        accountant: Accountant | None = None,
        note: str = "",
    ):
        generator = make_rng(rng)
        if not float(check_sensitivity(sensitivity)).is_integer():
            raise ValueError(
                f"sensitivity ({sensitivity!r}) must be a whole number: NumericSparse releases integer counts"
            )
        self.epsilon_release = check_epsilon(epsilon_release, "epsilon_release")
        if accountant is not None:
            accountant.check(check_epsilon(epsilon_test, "epsilon_test") + self.epsilon_release)
        self._test = AboveThreshold(threshold, epsilon_test, sensitivity, generator, accountant=accountant, note=note)
        self._release_noise = _LatticeNoise(self.epsilon_release, self._test.sensitivity, generator)
        self._accountant = accountant
        self._note = note

    @property
    def halted(self) -> bool:
        return self._test.halted

    def query(self, value: int) -> int | None:
        """None when below; the noisy count (then halted) when above."""
        number = check_real(value, "value")
        if not (math.isfinite(number) and number.is_integer()):
            raise ValueError(f"value ({value!r}) must be a whole number (a count)")
        if not self._test.test(number):
            return None
        if self._accountant is not None:
            self._accountant.spend(self.epsilon_release, mechanism="numeric_sparse release", note=self._note)
        return int(number) + self._release_noise.draw(1)


class Sparse:
    """AboveThreshold restarted after each "above", for at most ``max_above`` aboves.

    Each run is an ``epsilon_per_run``-DP AboveThreshold (charged to the accountant, as a pure
    epsilon, when it starts answering), and at most ``max_above`` runs answer. Guarantee:

    * delta = 0: epsilon-DP by basic composition; epsilon_per_run = epsilon / max_above
      (rounded down so that the exact sum stays within epsilon).
    * delta > 0: (epsilon, delta)-DP. epsilon_per_run is the largest e0 such that max_above
      runs of e0 compose to at most epsilon under one of the theorems the accountant uses
      (``synth.privacy.accounting.compose``), whichever allows the largest e0:

      - basic: max_above * e0;
      - advanced (max_above > 1): ``advanced_epsilon([e0] * max_above, delta)``, i.e.
        sqrt(2 k ln(1/delta)) e0 + k e0 (e^e0 - 1);
      - zCDP: each run is e0^2/2-zCDP, so k e0^2 / 2 in total, converted to (epsilon', delta)
        by ``zcdp_epsilon`` (the accountant's own rho limit, safety share included).

      Each e0 is found by bisection (every total grows with e0) and checked the way the
      accountant checks a charge, with a little extra room for the rounding of its running
      sums, and the zCDP one also against the total the accountant reports; so an
      ``Accountant(epsilon, delta)`` accepts all max_above charges and reports at most
      epsilon. It is never below the basic split epsilon / max_above (delta then buys
      nothing and the guarantee is pure epsilon-DP). ``composition`` names the theorem used.

    The familiar closed form epsilon / sqrt(8 k ln(1/delta)) is not used: it ignores the
    k e0 (e^e0 - 1) term, so for large per-run epsilons (e.g. epsilon = 100, delta = 0.01,
    k = 1000: 0.52 per run) the true total is several times epsilon.
    """

    def __init__(
        self,
        threshold: float,
        epsilon: float,
        max_above: int,
        sensitivity: float = 1,
        rng: np.random.Generator | int | None = None,
        *,
        delta: float = 0.0,
        accountant: Accountant | None = None,
        note: str = "",
    ):
        self.threshold = check_real(threshold, "threshold")
        self.epsilon = check_epsilon(epsilon)
        self.max_above = check_positive_int(max_above, "max_above")
        self.delta = check_delta(delta)
        self.sensitivity = check_sensitivity(sensitivity)
        self.epsilon_per_run, self.composition = _per_run_epsilon(self.epsilon, self.max_above, self.delta)
        self._rng = make_rng(rng)
        self._accountant = accountant
        self._note = note
        self.aboves = 0
        self._run = self._new_run()

    def _new_run(self) -> AboveThreshold:
        return AboveThreshold(self.threshold, self.epsilon_per_run, self.sensitivity, self._rng,
                              accountant=self._accountant, note=self._note)

    @property
    def halted(self) -> bool:
        return self.aboves >= self.max_above

    def test(self, value: float) -> bool:
        """True when above (a fresh noisy threshold follows); halts after ``max_above`` aboves."""
        if self.halted:
            raise RuntimeError(f"Sparse halted after {self.max_above} 'above' answers")
        above = self._run.test(value)
        if above:
            self.aboves += 1
            if not self.halted:
                self._run = self._new_run()
        return above


def _per_run_epsilon(epsilon: float, runs: int, delta: float) -> tuple[float, str]:
    """The largest per-run epsilon (and the theorem) for which ``runs`` pure charges of it
    compose to at most ``epsilon`` with ``delta``, as ``Accountant(epsilon, delta)`` checks them.

    The accountant sums the charges one by one in floating point; the room ``safety`` covers
    that rounding (under 1e-13 relative for a thousand runs).
    """
    from synth.privacy.accounting import _MARGIN, Accountant, split_epsilon

    options = [(split_epsilon(epsilon, runs), "basic")]
    if delta == 0:
        return options[0]
    safety = 1 + max(1e-9, runs * 2.0**-50)
    log_term = 2 * math.log(1 / delta)

    def advanced_fits(e0: float) -> bool:
        try:
            total = math.sqrt(log_term * runs * e0 * e0) + runs * e0 * math.expm1(e0)
        except OverflowError:
            return False
        return total * (1 + _MARGIN) * safety <= epsilon

    try:
        rho_limit = Accountant(epsilon, delta)._rho_limit(epsilon, delta)  # the limit its checks use
    except OverflowError:  # the conversion fails at extreme (epsilon, delta): leave zCDP out
        rho_limit = None

    def zcdp_fits(e0: float) -> bool:
        return runs * e0 * e0 / 2 * safety <= rho_limit

    if runs > 1:  # the accountant applies advanced composition to two charges or more
        options.append((_largest(advanced_fits, epsilon), "advanced"))
    if rho_limit is not None:
        options.append((_zcdp_reported_within(_largest(zcdp_fits, epsilon), epsilon, runs, delta, safety), "zcdp"))
    return max(options, key=lambda option: option[0])  # ties: the first, basic before the others


def _zcdp_reported_within(e0: float, epsilon: float, runs: int, delta: float, safety: float) -> float:
    """``e0``, or less, so that the zCDP total the accountant reports (``compose``) is at most epsilon.

    The accountant's check (its rho limit) and its report (``zcdp_epsilon``, rounded up to 1e-12
    absolute below 1) can disagree at tiny epsilons; then bisect down on the report (each step a
    few milliseconds), to 1e-9 relative.
    """
    from synth.privacy.accounting import _MARGIN
    from synth.privacy.composition import zcdp_epsilon

    def reported_fits(x: float) -> bool:
        return zcdp_epsilon(runs * x * x / 2 * safety, delta) * (1 + _MARGIN) <= epsilon

    if e0 == 0 or reported_fits(e0):
        return e0
    low, high = 0.0, e0
    while high - low > 1e-9 * high:
        middle = (low + high) / 2
        low, high = (middle, high) if reported_fits(middle) else (low, middle)
    return low


def _largest(fits, start: float) -> float:
    """The largest x >= 0 with ``fits(x)``, for a ``fits`` true up to some point and false after
    it (bisection to the last float; 0 if nothing positive fits)."""
    low, high = 0.0, start
    while fits(high):
        low, high = high, 2 * high
        if math.isinf(high):
            return low
    while True:
        middle = (low + high) / 2
        if middle <= low or middle >= high:
            return low
        if fits(middle):
            low = middle
        else:
            high = middle
