"""Continuous Laplace and Gaussian noise, FOR ANALYSIS AND TESTS ONLY.

Floating-point Laplace or Gaussian noise added to a released value leaks through its low
bits (Mironov 2012), so synth never releases values made with these functions: released
noise comes from ``synth.privacy.mechanisms.discrete``. They exist for benchmarks (as the unsafe
baseline), for plotting and for predicting accuracy.
"""

from __future__ import annotations

import numpy as np

from synth.privacy.rng import make_rng
from synth.privacy.validation import check_sensitivity

__all__ = ["laplace_noise_for_analysis", "gaussian_noise_for_analysis"]


def laplace_noise_for_analysis(size, scale: float, rng: np.random.Generator | int | None = None) -> np.ndarray:
    """Continuous Laplace(0, scale) draws. NOT for released values."""
    return make_rng(rng).laplace(0.0, check_sensitivity(scale, "scale"), size)


def gaussian_noise_for_analysis(size, sigma: float, rng: np.random.Generator | int | None = None) -> np.ndarray:
    """Continuous N(0, sigma^2) draws. NOT for released values."""
    return make_rng(rng).normal(0.0, check_sensitivity(sigma, "sigma"), size)
