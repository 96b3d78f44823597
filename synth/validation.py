"""Parameter checks shared by every mechanism.

``TypeError`` for a wrong type, ``ValueError`` for a bad value; every message names the
parameter, the value and what is allowed, e.g. ``epsilon (-1.0) must be finite and > 0``.
"""

from __future__ import annotations

import math
import numbers

__all__ = [
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
