"""The row count n every engine scales to: public only when the user says so.

n is public when it is given (``rows``, or ``rows`` in the schema). Otherwise a noisy count
of the data is bought from the budget with ``count_share * epsilon`` (exact discrete Laplace,
sensitivity 1), or, for an engine accounting in zCDP, with a given rho (exact discrete
Gaussian), charged to the accountant and reported. The exact n is never used silently.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .accounting import Accountant
from .errors import SynthError
from .mechanisms import discrete_gaussian, discrete_laplace

__all__ = ["RowCount", "row_count", "DEFAULT_COUNT_SHARE"]

#: Share of epsilon spent on a noisy row count when n is not public.
DEFAULT_COUNT_SHARE = 0.05
#: The least epsilon the noisy count can use: exact discrete Laplace noise resolves epsilon in steps of 2^-40.
MIN_COUNT_EPSILON = 2.0**-40


@dataclass(frozen=True)
class RowCount:
    """The n a release uses: the public count, or a noisy one (at least 1)."""

    rows: int
    public: bool
    epsilon: float  # spent on the count (0 when public, or when bought under zCDP)
    rho: float = 0.0  # spent on the count under zCDP (discrete Gaussian)

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
        noisy = discrete_gaussian(int(true_rows), rho, 1, generator, accountant=accountant, note="noisy row count")
        return RowCount(max(1, int(noisy)), False, 0.0, rho)
    epsilon = count_share * accountant.budget.epsilon
    if not epsilon >= MIN_COUNT_EPSILON:
        raise SynthError(f"the row count's epsilon ({epsilon:.3g}) is below 2^-40, the least its discrete Laplace "
                         "noise can use: give it more (--count-epsilon), or give n if it is public (--rows)")
    noisy = discrete_laplace(int(true_rows), epsilon, 1, generator, accountant=accountant, note="noisy row count")
    return RowCount(max(1, int(noisy)), False, epsilon)
