"""Parameter checks shared by every mechanism.

``TypeError`` for a wrong type, ``ValueError`` for a bad value; every message names the
parameter, the value and what is allowed, e.g. ``epsilon (-1.0) must be finite and > 0``.
"""

from __future__ import annotations

import math
import numbers

__all__ = [
    "MAX_BUDGET_EPSILON",
    "MIN_BUDGET_EPSILON",
    "check_budget_epsilon",
    "check_epsilon",
    "check_delta",
    "check_sensitivity",
    "check_probability",
    "check_positive_int",
    "check_real",
    "normalized_prior",
]


def check_real(value: object, name: str) -> float:
    """``value`` as a float if it is a real number (bool is not); else ``TypeError``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} ({value!r}) must be a real number, not {type(value).__name__}")
    return float(value)


def _positive_finite(value: object, name: str) -> float:
    number = check_real(value, name)
    if not math.isfinite(number) or number <= 0:
        raise ValueError(f"{name} ({value!r}) must be finite and > 0")
    return number


def check_epsilon(value: object, name: str = "epsilon") -> float:
    """A privacy parameter epsilon: finite and > 0."""
    return _positive_finite(value, name)


#: The range of a whole run's epsilon. Below it the noise dwarfs any count and the engines'
#: per-step shares fall under what the exact samplers resolve (2^-40); above it the
#: guarantee (a likelihood ratio of e^1000) protects nothing, and exp(epsilon) overflows.
MIN_BUDGET_EPSILON = 1e-6
MAX_BUDGET_EPSILON = 1000.0


def check_budget_epsilon(value: object, name: str = "epsilon") -> float:
    """A run's whole privacy budget epsilon: a number in [MIN_BUDGET_EPSILON, MAX_BUDGET_EPSILON]."""
    number = _positive_finite(value, name)
    if not MIN_BUDGET_EPSILON <= number <= MAX_BUDGET_EPSILON:
        raise ValueError(f"{name} ({value!r}) must be between {MIN_BUDGET_EPSILON:g} and {MAX_BUDGET_EPSILON:g}: "
                         "below, the noise drowns every count; above, the guarantee protects nothing")
    return number


def check_sensitivity(value: object, name: str = "sensitivity") -> float:
    """A sensitivity: finite and > 0."""
    return _positive_finite(value, name)


def check_delta(value: object, name: str = "delta") -> float:
    """A privacy parameter delta: in [0, 1)."""
    number = check_real(value, name)
    if not 0 <= number < 1:
        raise ValueError(f"{name} ({value!r}) must be in [0, 1)")
    return number


def check_probability(value: object, name: str) -> float:
    """A failure probability such as beta: in (0, 1)."""
    number = check_real(value, name)
    if not 0 < number < 1:
        raise ValueError(f"{name} ({value!r}) must be in (0, 1)")
    return number


def check_positive_int(value: object, name: str) -> int:
    """A count such as rounds or restarts: an integer >= 1."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} ({value!r}) must be an integer, not {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name} ({value!r}) must be >= 1")
    return int(value)


def normalized_prior(prior: object, cells: int):
    """A public prior over the universe as a flat float64 distribution (divided by its sum).

    It must have ``cells`` entries, all finite and non-negative, with a positive sum.
    """
    import numpy as np  # here, not at import: the CLI imports this module for option checks

    values = np.asarray(prior, dtype=np.float64).reshape(-1)
    if values.size != cells or not np.all(np.isfinite(values)) or values.min() < 0 or values.sum() <= 0:
        raise ValueError("prior must be a non-negative finite array over the universe with a positive sum")
    return values / values.sum()
