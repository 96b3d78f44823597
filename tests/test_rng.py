import pathlib
import re

import numpy as np
import pytest

from synth.privacy.mechanisms import AboveThreshold, discrete_gaussian, discrete_laplace, exponential
from synth.privacy.rng import is_seeded, kernel_state, make_rng

SOURCES = sorted((pathlib.Path(__file__).resolve().parents[1] / "synth").rglob("*.py")) + sorted(
    (pathlib.Path(__file__).resolve().parents[1] / "cli").rglob("*.py")
)


def test_none_gives_fresh_generators_and_ints_repeat():
    assert make_rng(None).integers(0, 2**62) != make_rng(None).integers(0, 2**62)
    assert make_rng(7).integers(0, 2**62) == make_rng(7).integers(0, 2**62)
    generator = np.random.default_rng(1)
    assert make_rng(generator) is generator
    assert is_seeded(3) and not is_seeded(None)


@pytest.mark.parametrize("bad, error", [("7", TypeError), (1.5, TypeError), (True, TypeError), (-1, ValueError)])
def test_bad_rng_arguments(bad, error):
    with pytest.raises(error, match="rng"):
        make_rng(bad)


def test_kernel_state_is_never_all_zero():
    assert kernel_state(np.random.default_rng(0)).any()


def _runs(seed):
    counts = np.arange(200_000) % 50
    at = AboveThreshold(30, 1.0, rng=seed)
    return (
        discrete_laplace(counts, 0.7, rng=seed).tolist(),
        discrete_gaussian(np.arange(20), 0.5, rng=seed).tolist(),
        exponential(np.linspace(0, 3, 100), 1.0, 1.0, rng=seed),
        exponential(np.linspace(0, 3, 100), 1.0, 1.0, rng=seed, method="permute_and_flip"),
        [at.test(v) for v in (0, 10, 20, 25, 28, 29, 30, 31, 40, 50) if not at.halted],
    )


def test_seeded_runs_repeat_exactly_and_unseeded_runs_differ():
    assert _runs(123) == _runs(123)
    first, second = _runs(None), _runs(None)
    assert first[0] != second[0] and first[1] != second[1]


def test_seeded_output_does_not_depend_on_thread_count():
    import numba

    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = discrete_laplace(np.zeros(300_000, dtype=np.int64), 1.0, rng=5)
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
        many = discrete_laplace(np.zeros(300_000, dtype=np.int64), 1.0, rng=5)
    finally:
        numba.set_num_threads(before)
    np.testing.assert_array_equal(one, many)


GLOBAL_RNG = re.compile(r"np\.random\.(?!Generator|PCG64|SeedSequence|default_rng)[a-z_]+\(|numpy\.random\.[a-z_]+\(|^\s*import random\b|^\s*from random import", re.M)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_no_global_random_state_in_the_package(path):
    text = path.read_text()
    assert not GLOBAL_RNG.search(text), f"{path} uses a global random generator"


def test_the_global_rng_scan_would_catch_a_violation():
    assert GLOBAL_RNG.search("x = np.random.laplace(0, 1)")
    assert GLOBAL_RNG.search("import random\n")
    assert not GLOBAL_RNG.search("g = np.random.default_rng(1)")
