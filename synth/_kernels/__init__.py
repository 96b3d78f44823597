"""Numba kernels, kept together. Private: the public wrappers validate inputs and pass
contiguous arrays and scalars. Randomness enters only through an explicit xoshiro256**
state array (``synth.privacy.rng.kernel_state``). Each kernel has a NumPy or pure-Python reference
in ``tests/reference.py`` that the tests compare it with on random inputs."""

from .tables import count_cells, marginalize, marginalize_many, marginals_by_plan, multiply_by_marginal

__all__ = ["count_cells", "marginalize", "marginalize_many", "marginals_by_plan", "multiply_by_marginal"]
from .sampling import (  # noqa: E402
    bernoulli_exp_fraction,
    bernoulli_exp_minus_one,
    bernoulli_exp_pow2,
    discrete_gaussian_one,
    discrete_laplace_one,
    divmod_128,
    fill_discrete_gaussian,
    fill_discrete_gaussian_blocks,
    fill_discrete_laplace,
    fill_discrete_laplace_blocks,
    gumbel,
    gumbel_argmax,
    next_u64,
    square_128,
    uniform_below,
    uniform_below_small,
    uniform_open01,
)

__all__ += [
    "bernoulli_exp_fraction",
    "bernoulli_exp_minus_one",
    "bernoulli_exp_pow2",
    "discrete_gaussian_one",
    "discrete_laplace_one",
    "divmod_128",
    "fill_discrete_gaussian",
    "fill_discrete_gaussian_blocks",
    "fill_discrete_laplace",
    "fill_discrete_laplace_blocks",
    "gumbel",
    "gumbel_argmax",
    "next_u64",
    "square_128",
    "uniform_below",
    "uniform_below_small",
    "uniform_open01",
]
from .weights import scale_selected  # noqa: E402

__all__ += ["scale_selected"]
