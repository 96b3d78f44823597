"""The randomness policy: one explicit ``numpy.random.Generator`` per call, never a global.

Every random entry point takes ``rng: Generator | int | None``:

* ``None`` (the default): a fresh generator seeded from the operating system's secure
  source (``secrets``), for real releases;
* an ``int``: a reproducible generator, for tests and demos only; the CLI says so;
* a ``Generator``: used as is (the caller owns its seeding).

The generators themselves (NumPy's PCG64, and the xoshiro256** state that Numba kernels get
from it) are statistical, not cryptographic, generators: the secure source seeds them.
"""

from __future__ import annotations

import numbers
import secrets

import numpy as np

__all__ = ["RNGLike", "make_rng", "child_rng", "is_seeded", "kernel_state", "SEEDED_RUN_WARNING"]

RNGLike = "np.random.Generator | int | None"

SEEDED_RUN_WARNING = (
    "seeded run: the noise is reproducible by anyone who knows the seed. "
    "For testing only, NOT for release."
)


def make_rng(rng: np.random.Generator | int | None = None) -> np.random.Generator:
    """A Generator from ``rng``: ``None`` seeds from the OS's secure source."""
    if rng is None:
        return np.random.Generator(np.random.PCG64(secrets.randbits(128)))
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, numbers.Integral) and not isinstance(rng, bool):
        if rng < 0:
            raise ValueError(f"rng seed ({rng!r}) must be >= 0")
        return np.random.Generator(np.random.PCG64(int(rng)))
    raise TypeError(
        f"rng ({rng!r}) must be a numpy.random.Generator, an int seed or None, not {type(rng).__name__}"
    )


def child_rng(rng: np.random.Generator) -> np.random.Generator:
    """An independent generator seeded from ``rng`` (one draw of 256 bits): for a stream of
    work whose draws must not shift another's, e.g. sampling rows block by block while
    decoding them chunk by chunk."""
    entropy = [int(word) for word in rng.integers(0, 2**64, size=4, dtype=np.uint64)]
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy)))


def is_seeded(rng: np.random.Generator | int | None) -> bool:
    """True when ``rng`` makes the run reproducible (anything but ``None``)."""
    return rng is not None


def kernel_state(rng: np.random.Generator) -> np.ndarray:
    """A fresh xoshiro256** state (4 uint64 words, not all zero) drawn from ``rng``.

    Numba kernels take randomness only through such an explicit state array.
    """
    while True:
        state = rng.integers(0, 2**64, size=4, dtype=np.uint64)
        if state.any():
            return state
