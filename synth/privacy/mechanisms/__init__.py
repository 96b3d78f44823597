"""Privacy mechanisms: exact discrete noise, the exponential mechanism and sparse vector.

Every function and class takes ``rng: numpy.random.Generator | int | None`` (``None``:
seeded from the OS's secure source) and an optional ``accountant`` that is checked before
sampling and charged at release.
"""

from synth.privacy.mechanisms.discrete import (
    discrete_gaussian,
    discrete_gaussian_noise,
    discrete_laplace,
    discrete_laplace_noise,
    laplace_ratio,
    mean_abs_noise,
    noise_variance,
)
from synth.privacy.mechanisms.exponential import StreamingExponential, exponential
from synth.privacy.mechanisms.partition import (
    gaussian_partition_selection,
    gaussian_partition_threshold,
    partition_selection,
    partition_threshold,
)
from synth.privacy.mechanisms.quantiles import (
    bounds_from_magnitudes, bucket_edges, bucket_index, dp_quantiles, magnitude_threshold, noisy_magnitudes,
    passing_buckets, private_bounds, private_bounds_zcdp,
)
from synth.privacy.mechanisms.sparse_vector import AboveThreshold, NumericSparse, Sparse

__all__ = [
    "AboveThreshold",
    "NumericSparse",
    "Sparse",
    "StreamingExponential",
    "discrete_gaussian",
    "discrete_gaussian_noise",
    "discrete_laplace",
    "discrete_laplace_noise",
    "dp_quantiles",
    "exponential",
    "gaussian_partition_selection",
    "gaussian_partition_threshold",
    "laplace_ratio",
    "mean_abs_noise",
    "noise_variance",
    "partition_selection",
    "partition_threshold",
    "private_bounds",
    "private_bounds_zcdp",
    "noisy_magnitudes",
    "bounds_from_magnitudes",
    "bucket_index",
    "bucket_edges",
    "magnitude_threshold",
    "passing_buckets",
]
