"""The row count n every engine scales to: public only when the user says so.

n is public when it is given (``rows``, or ``rows`` in the schema). Otherwise a noisy count
of the data is bought from the budget with ``count_share * epsilon`` (exact discrete Laplace,
sensitivity 1), or, for an engine accounting in zCDP, with a given rho (exact discrete
Gaussian), charged to the accountant and reported. The exact n is never used silently.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from synth.errors import SynthError
from synth.privacy.accounting import Accountant, Charge
from synth.privacy.mechanisms import discrete_gaussian, discrete_laplace

__all__ = ["COUNT_NOTE", "NOISY_COUNT_FRACTION", "RowCount", "row_count", "count_noise_sd", "ledger_count_noise_sd",
           "DEFAULT_COUNT_SHARE"]

#: Share of epsilon spent on a noisy row count when n is not public.
DEFAULT_COUNT_SHARE = 0.05
#: The least epsilon the noisy count can use: exact discrete Laplace noise resolves epsilon in steps of 2^-40.
MIN_COUNT_EPSILON = 2.0**-40
#: The accountant's note on the noisy count's charge.
COUNT_NOTE = "noisy row count"
#: A noisy count whose noise has a standard deviation above this fraction of the count is too
#: uncertain to scale a release by without a word (a check on the released count: post-processing).
NOISY_COUNT_FRACTION = 0.1


@dataclass(frozen=True)
class RowCount:
    """The n a release uses: the public count, or a noisy one (at least 1)."""

    rows: int
    public: bool
    epsilon: float  # spent on the count (0 when public, or when bought under zCDP)
    rho: float = 0.0  # spent on the count under zCDP (discrete Gaussian)

    @property
    def noise_sd(self) -> float:
        """The standard deviation of the count's noise (0 for a public n): public, from the
        budget spent on it alone."""
        return 0.0 if self.public else count_noise_sd(epsilon=self.epsilon, rho=self.rho)

    def describe(self) -> str:
        if self.public:
            return f"n = {self.rows:,} (public)"
        spent = f"rho={self.rho:g} (zCDP)" if self.rho else f"epsilon={self.epsilon:g}"
        return f"n is not public: bought a noisy row count {self.rows:,} with {spent}"


def row_count(
    true_rows: int,
    public_rows: int | None,
    accountant: Accountant,
    generator: np.random.Generator,
    count_share: float = DEFAULT_COUNT_SHARE,
    rho: float | None = None,
) -> RowCount:
    """``public_rows`` when given, else a noisy count of ``true_rows`` bought from ``accountant``:
    with ``count_share * epsilon`` (discrete Laplace), or with ``rho`` (discrete Gaussian,
    rho-zCDP) when it is given."""
    if public_rows is not None:
        return RowCount(int(public_rows), True, 0.0)
    if rho is not None:
        if not rho >= MIN_COUNT_EPSILON:
            raise SynthError(f"the row count's rho ({rho:.3g}) is below 2^-40: give it more (--count-epsilon), "
                             "or give n if it is public (--rows)")
        noisy = discrete_gaussian(int(true_rows), rho, 1, generator, accountant=accountant, note=COUNT_NOTE)
        return RowCount(max(1, int(noisy)), False, 0.0, rho)
    epsilon = count_share * accountant.budget.epsilon
    if not epsilon >= MIN_COUNT_EPSILON:
        raise SynthError(f"the row count's epsilon ({epsilon:.3g}) is below 2^-40, the least its discrete Laplace "
                         "noise can use: give it more (--count-epsilon), or give n if it is public (--rows)")
    noisy = discrete_laplace(int(true_rows), epsilon, 1, generator, accountant=accountant, note=COUNT_NOTE)
    return RowCount(max(1, int(noisy)), False, epsilon)


def count_noise_sd(*, epsilon: float = 0.0, rho: float = 0.0) -> float:
    """The standard deviation of a noisy count's noise: discrete Gaussian of variance at most
    1 / (2 rho) when ``rho`` is given, else discrete Laplace P(z) ~ exp(-epsilon |z|), exactly
    sqrt(2r) / (1 - r) with r = e^-epsilon."""
    if rho:
        return math.sqrt(1 / (2 * rho))
    if not epsilon > 0:
        raise ValueError(f"epsilon ({epsilon!r}) must be > 0, or give rho")
    return math.sqrt(2 * math.exp(-epsilon)) / -math.expm1(-epsilon)


def ledger_count_noise_sd(ledger: Iterable[Charge]) -> float | None:
    """The standard deviation of the noise of the row count a run bought (``row_count``'s
    charge in an accountant's ledger), or None where it bought none (n was public)."""
    for charge in ledger:
        if charge.note == COUNT_NOTE:
            return count_noise_sd(epsilon=charge.epsilon or 0.0, rho=charge.rho or 0.0)
    return None
