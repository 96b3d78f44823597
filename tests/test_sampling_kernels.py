"""Each sampling kernel against its pure-Python twin on the same random stream, plus the
probabilities the exact samplers must hit."""

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit
from scipy import stats

from synth import _kernels
from synth.rng import kernel_state

from . import reference as ref

states = st.lists(st.integers(0, 2**64 - 1), min_size=4, max_size=4).filter(any)


def as_state(words):
    return np.array(words, dtype=np.uint64)


@given(states)
def test_xoshiro_matches_python(words):
    state, twin = as_state(words), ref.Xoshiro(words)
    assert [int(_kernels.next_u64(state)) for _ in range(20)] == [twin.next() for _ in range(20)]
    assert [int(w) for w in state] == twin.s  # the state advanced the same way


def test_xoshiro_known_first_outputs():
    state = as_state([1, 2, 3, 4])
    assert [int(_kernels.next_u64(state)) for _ in range(3)] == [11520, 0, 1509978240]


@settings(max_examples=200, deadline=None)
@given(states, st.integers(1, 2**64 - 1))
def test_uniform_below_matches_python(words, n):
    state, twin = as_state(words), ref.Xoshiro(words)
    got = [int(_kernels.uniform_below(state, np.uint64(n))) for _ in range(5)]
    assert got == [ref.uniform_below(twin, n) for _ in range(5)]
    assert all(0 <= g < n for g in got)


@settings(max_examples=200, deadline=None)
@given(states, st.integers(1, 2**32 - 1))
def test_uniform_below_small_matches_python(words, n):
    state, twin = as_state(words), ref.Xoshiro(words)
    got = [int(_kernels.uniform_below_small(state, np.uint64(n))) for _ in range(5)]
    assert got == [ref.uniform_below_small(twin, n) for _ in range(5)]
    assert all(0 <= g < n for g in got)


@settings(max_examples=100, deadline=None)
@given(states, st.integers(0, 2**40), st.integers(1, 2**40))
def test_bernoulli_exp_fraction_matches_python(words, num, den):
    num = min(num, den)
    state, twin = as_state(words), ref.Xoshiro(words)
    got = [bool(_kernels.bernoulli_exp_fraction(state, np.uint64(num), np.uint64(den))) for _ in range(10)]
    assert got == [ref.bernoulli_exp_fraction(twin, num, den) for _ in range(10)]


@settings(max_examples=100, deadline=None)
@given(states, st.integers(0, 40), st.data())
def test_bernoulli_exp_pow2_matches_python(words, bits, data):
    u = data.draw(st.integers(0, 2**bits))
    state, twin = as_state(words), ref.Xoshiro(words)
    got = [bool(_kernels.bernoulli_exp_pow2(state, np.uint64(u), bits)) for _ in range(10)]
    assert got == [ref.bernoulli_exp_pow2(twin, u, bits) for _ in range(10)]


@settings(max_examples=60, deadline=None)
@given(states, st.sampled_from([(1, 1), (1, 4), (109951162777, 2**40), (3602879701896397, 36028797018963968), (7, 3), (1, 101)]))
def test_discrete_laplace_kernel_matches_python(words, params):
    s, t = params
    state, twin = as_state(words), ref.Xoshiro(words)
    out = np.zeros(25, dtype=np.int64)
    assert _kernels.fill_discrete_laplace(out, 0, 25, np.uint64(s), np.uint64(t), state) == 25
    assert out.tolist() == [ref.discrete_laplace(twin, s, t) for _ in range(25)]


@settings(max_examples=60, deadline=None)
@given(states, st.sampled_from([0.3, 1, 2.5, 7.25, 1176.47, 1e6, 4e8]))
def test_discrete_gaussian_kernel_matches_python(words, sigma2):
    from fractions import Fraction

    from synth.mechanisms.discrete import gaussian_parameters

    p, q, t, y_max = gaussian_parameters(Fraction(sigma2))
    state, twin = as_state(words), ref.Xoshiro(words)
    out = np.zeros(25, dtype=np.int64)
    stop = _kernels.fill_discrete_gaussian(out, 0, 25, np.uint64(p), np.uint64(q), np.uint64(t), np.uint64(y_max),
                                           state)
    expected = []
    while len(expected) < 25:
        draw = ref.discrete_gaussian(twin, p, q, t, y_max)
        if draw is None:  # the kernel hands this draw back to Python: it must stop here too
            break
        expected.append(draw)
    assert out[:stop].tolist() == expected and stop == len(expected)
    if sigma2 < 1e6:
        assert stop == 25  # a fallback has probability below e^-40


@settings(max_examples=300, deadline=None)
@given(st.fractions(min_value=Fraction(1, 10**6), max_value=10**9))
def test_gaussian_parameters_round_sigma2_up_and_fit_64_bits(sigma2):
    from synth.mechanisms.discrete import gaussian_parameters

    found = gaussian_parameters(sigma2)
    if found is None:  # only past the kernel's range
        assert sigma2 > 5 * 10**8
        return
    p, q, t, y_max = found
    assert Fraction(p, q) >= sigma2 and Fraction(p, q) - sigma2 < Fraction(1, q)  # rounded up, by under 1/q
    assert q & (q - 1) == 0 and q <= 2**32 and t == math.isqrt(p // q) + 1
    assert 2 * p * q * t * t < 2**63 and (y_max * t * q + p) ** 2 < 2**64 and y_max >= 4 * t
    if sigma2 < 10**6:
        assert q >= 2**6 and y_max >= 40 * t  # fine rounding and a negligible fallback rate


def test_parallel_blocks_equal_serial_blocks():
    rng = np.random.default_rng(5)
    block, n = 1000, 4500
    states = rng.integers(0, 2**64, size=(5, 4), dtype=np.uint64)
    parallel = np.zeros(n, dtype=np.int64)
    stops = np.zeros(5, dtype=np.int64)
    _kernels.fill_discrete_laplace_blocks(parallel, block, np.uint64(3), np.uint64(8), states.copy(), stops)
    serial = np.zeros(n, dtype=np.int64)
    for b in range(5):
        _kernels.fill_discrete_laplace(serial, b * block, min(n, (b + 1) * block), np.uint64(3), np.uint64(8), states[b].copy())
    np.testing.assert_array_equal(parallel, serial)
    assert stops.tolist() == [1000, 2000, 3000, 4000, 4500]


@settings(max_examples=50, deadline=None)
@given(states, st.lists(st.one_of(st.floats(-50, 50), st.just(-math.inf)), min_size=1, max_size=30), st.floats(0.01, 5))
def test_gumbel_argmax_matches_python(words, scores, scale):
    state, twin = as_state(words), ref.Xoshiro(words)
    values = np.array(scores, dtype=np.float64)
    _, best = _kernels.gumbel_argmax(values, scale, state, -np.inf, -1, 0)
    assert best == ref.gumbel_argmax(twin, scores, scale)


def test_gumbel_argmax_streams_across_chunks():
    values = np.random.default_rng(2).normal(size=1000)
    whole_state = kernel_state(np.random.default_rng(9))
    chunk_state = whole_state.copy()
    _, whole = _kernels.gumbel_argmax(values, 1.5, whole_state, -np.inf, -1, 0)
    key, best = -np.inf, -1
    for start in range(0, 1000, 300):
        key, best = _kernels.gumbel_argmax(values[start:start + 300], 1.5, chunk_state, key, best, start)
    assert best == whole


@njit
def _bernoulli_frequency(state, num, den, n):
    hits = 0
    for _ in range(n):
        hits += _kernels.bernoulli_exp_fraction(state, num, den)
    return hits


@njit
def _bernoulli_pow2_frequency(state, u, bits, n):
    hits = 0
    for _ in range(n):
        hits += _kernels.bernoulli_exp_pow2(state, u, bits)
    return hits


@njit
def _bernoulli_minus_one_frequency(state, n):
    hits = 0
    for _ in range(n):
        hits += _kernels.bernoulli_exp_minus_one(state)
    return hits


@pytest.mark.parametrize("num, den", [(0, 1), (1, 1), (1, 3), (2, 7), (999, 1000)])
def test_bernoulli_exp_fraction_probability(num, den):
    n = 200_000
    hits = _bernoulli_frequency(kernel_state(np.random.default_rng(num * 31 + den)), np.uint64(num), np.uint64(den), n)
    assert stats.binomtest(int(hits), n, math.exp(-num / den)).pvalue > 1e-4


@pytest.mark.parametrize("u, bits", [(0, 0), (1, 0), (1, 1), (3, 2), (2**39, 40), (2**40 - 1, 40)])
def test_bernoulli_exp_pow2_probability(u, bits):
    n = 200_000
    hits = _bernoulli_pow2_frequency(kernel_state(np.random.default_rng(u + bits)), np.uint64(u), bits, n)
    assert stats.binomtest(int(hits), n, math.exp(-u / 2**bits)).pvalue > 1e-4


def test_bernoulli_exp_minus_one_probability():
    n = 400_000
    hits = _bernoulli_minus_one_frequency(kernel_state(np.random.default_rng(1)), n)
    assert stats.binomtest(int(hits), n, math.exp(-1)).pvalue > 1e-4


def test_uniform_below_is_uniform():
    state = kernel_state(np.random.default_rng(3))
    draws = [int(_kernels.uniform_below(state, np.uint64(7))) for _ in range(70_000)]
    assert stats.chisquare(np.bincount(draws, minlength=7)).pvalue > 1e-4
    small = [int(_kernels.uniform_below_small(state, np.uint64(5))) for _ in range(50_000)]
    assert stats.chisquare(np.bincount(small, minlength=5)).pvalue > 1e-4
