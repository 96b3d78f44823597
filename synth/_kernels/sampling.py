"""Exact sampling kernels over an explicit xoshiro256** state (4 uint64 words).

Integer-only where the output is released: uniform integers by rejection, Bernoulli(exp(-u/t))
by the series method of Canonne, Kamath and Steinke (2020, Algorithm 1), and the discrete
Laplace and discrete Gaussian by their Algorithms 2 and 3. No floating point touches either. Gumbel
noise (for Gumbel-max selection) is floating point; only the argmax index is released.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

_ONE = np.uint64(1)
_ZERO = np.uint64(0)
_ALL_ONES = np.uint64(0xFFFFFFFFFFFFFFFF)
_INT64_MAX = np.uint64(0x7FFFFFFFFFFFFFFF)


@njit(cache=True, inline="always")
def _rotl(x, k):  # pragma: no cover - compiled
    return (x << np.uint64(k)) | (x >> np.uint64(64 - k))


@njit(cache=True)
def next_u64(state):  # pragma: no cover - compiled
    """The next 64 random bits of xoshiro256** (Blackman and Vigna), advancing ``state``."""
    s0 = state[0]
    s1 = state[1]
    s2 = state[2]
    s3 = state[3]
    result = _rotl(s1 * np.uint64(5), 7) * np.uint64(9)
    t = s1 << np.uint64(17)
    s2 ^= s0
    s3 ^= s1
    s1 ^= s2
    s0 ^= s3
    s2 ^= t
    s3 = _rotl(s3, 45)
    state[0] = s0
    state[1] = s1
    state[2] = s2
    state[3] = s3
    return result


@njit(cache=True)
def uniform_below(state, n):  # pragma: no cover - compiled
    """A uniform integer in ``[0, n)`` for a uint64 ``n >= 1``, exactly (rejection)."""
    if (n & (n - _ONE)) == _ZERO:  # a power of two: take the low bits
        return next_u64(state) & (n - _ONE)
    excess = ((_ALL_ONES % n) + _ONE) % n  # 2^64 mod n: the words to reject
    bound = _ZERO - excess  # 2^64 - excess, a multiple of n (wraps to 0 when excess is 0)
    while True:
        word = next_u64(state)
        if excess == _ZERO or word < bound:
            return word % n


@njit(cache=True)
def uniform_below_small(state, n):  # pragma: no cover - compiled
    """A uniform integer in ``[0, n)`` for ``1 <= n < 2^32``, exactly.

    Lemire's multiply-shift method on 32 random bits: one multiplication, and a modulo only
    in the rare rejection zone.
    """
    product = (next_u64(state) >> np.uint64(32)) * n
    low = product & np.uint64(0xFFFFFFFF)
    if low < n:
        floor = (np.uint64(0x100000000) - n) % n
        while low < floor:
            product = (next_u64(state) >> np.uint64(32)) * n
            low = product & np.uint64(0xFFFFFFFF)
    return product >> np.uint64(32)


@njit(cache=True)
def bernoulli_exp_fraction(state, num, den):  # pragma: no cover - compiled
    """True with probability exp(-num/den) for uint64 ``0 <= num <= den``, exactly.

    CKS Algorithm 1: count K while Bernoulli(gamma / K) succeeds; return whether K is odd.
    Bernoulli(gamma / K) is Bernoulli(num/den) and Bernoulli(1/K), which never overflows.
    """
    k = np.uint64(1)
    while True:
        if uniform_below(state, den) >= num:
            break
        if k > _ONE and uniform_below_small(state, k) != _ZERO:
            break
        k += _ONE
    return (k & _ONE) == _ONE


@njit(cache=True)
def bernoulli_exp_pow2(state, u, bits):  # pragma: no cover - compiled
    """True with probability exp(-u / 2^bits) for ``0 <= u <= 2^bits``, ``bits <= 40``, exactly.

    The series of CKS Algorithm 1, one 64-bit word per step: its low ``bits`` bits decide
    Bernoulli(u / 2^bits) and its top 24 bits Bernoulli(1/K) (Lemire's multiply-shift, with a
    fresh word only in the rare rejection zone). The two parts use disjoint bits, so they
    are independent and their conjunction is Bernoulli(u / (2^bits K)).
    """
    mask = (_ONE << np.uint64(bits)) - _ONE
    k = np.uint64(1)
    while True:
        word = next_u64(state)
        if (word & mask) >= u:
            break
        if k > _ONE:
            product = (word >> np.uint64(40)) * k
            low = product & np.uint64(0xFFFFFF)
            if low < k:
                floor = (np.uint64(0x1000000) - k) % k
                while low < floor:
                    product = (next_u64(state) >> np.uint64(40)) * k
                    low = product & np.uint64(0xFFFFFF)
            if (product >> np.uint64(24)) != _ZERO:
                break
        k += _ONE
    return (k & _ONE) == _ONE


@njit(cache=True)
def bernoulli_exp_minus_one(state):  # pragma: no cover - compiled
    """True with probability exp(-1), exactly (CKS Algorithm 1 with gamma = 1).

    Bernoulli(1/1) always succeeds, so the series starts at K = 2.
    """
    k = np.uint64(2)
    while uniform_below_small(state, k) == _ZERO:
        k += _ONE
    return (k & _ONE) == _ONE


@njit(cache=True)
def discrete_laplace_one(state, s, t, v_max, bits):  # pragma: no cover - compiled
    """One draw with P(z) proportional to exp(-|z| s / t) (CKS Algorithm 2), and an ok flag.

    ``s`` and ``t`` are uint64 >= 1 with ``t < 2^62``; ``v_max`` is
    ``(2^63 - 1 - (t - 1)) // t`` and ``bits`` is ``log2(t)`` when ``t`` is a power of two up to
    2^40, else -1 (see ``laplace_constants``). The flag is False only when an intermediate value would
    overflow 63 bits (probability below exp(-2^20)); the caller then draws that sample with
    Python integers. With ``bits >= 0`` the U step uses ``bernoulli_exp_pow2``; otherwise the
    general ``bernoulli_exp_fraction``.
    """
    while True:
        if bits >= 0:
            u = next_u64(state) & (t - _ONE)
            if not bernoulli_exp_pow2(state, u, bits):
                continue
        else:
            u = uniform_below(state, t)
            if not bernoulli_exp_fraction(state, u, t):
                continue
        v = _ZERO
        while bernoulli_exp_minus_one(state):
            v += _ONE
            if v > v_max:
                return np.int64(0), False
        x = u + t * v  # geometric with parameter 1 - exp(-1/t)
        y = x // s  # geometric with parameter 1 - exp(-s/t)
        negative = (next_u64(state) >> np.uint64(63)) == _ONE
        if negative and y == _ZERO:
            continue
        value = np.int64(y)
        return (-value if negative else value), True


@njit(cache=True)
def laplace_constants(t):  # pragma: no cover - compiled
    """Per-parameter constants of ``discrete_laplace_one``: ``(v_max, bits)``."""
    v_max = (_INT64_MAX - (t - _ONE)) // t
    bits = -1
    if (t & (t - _ONE)) == _ZERO and t <= (_ONE << np.uint64(40)):
        bits = 0
        while (_ONE << np.uint64(bits)) < t:
            bits += 1
    return v_max, bits


@njit(cache=True)
def fill_discrete_laplace(out, start, stop, s, t, state):  # pragma: no cover - compiled
    """Fill ``out[start:stop]`` with discrete Laplace draws; return where it stopped.

    Returns ``stop`` when done, or the index of a draw the caller must make itself.
    """
    v_max, bits = laplace_constants(t)
    for i in range(start, stop):
        value, ok = discrete_laplace_one(state, s, t, v_max, bits)
        if not ok:
            return i
        out[i] = value
    return stop


@njit(cache=True, parallel=True)
def fill_discrete_laplace_blocks(out, block, s, t, states, stops):  # pragma: no cover - compiled
    """``fill_discrete_laplace`` over blocks of ``block`` draws in parallel, block b with its
    own state ``states[b]``: the output does not depend on the number of threads.
    ``stops[b]`` gets where block b stopped (its end when done)."""
    n_blocks = states.shape[0]
    for b in prange(n_blocks):
        start = b * block
        stop = min(start + block, out.shape[0])
        state = states[b].copy()  # a private copy: neighbouring rows share a cache line
        stops[b] = fill_discrete_laplace(out, start, stop, s, t, state)
        states[b, :] = state  # the caller continues from here after a fallback


_LOW32 = np.uint64(0xFFFFFFFF)
#: Bernoulli(exp(-1)) trials the kernel runs for a candidate whose gamma exceeds 2^62 (see
#: ``discrete_gaussian_one``): passing them all has probability exp(-2^62) and takes centuries.
_HUGE_TRIALS = np.uint64(1) << np.uint64(62)


@njit(cache=True)
def square_128(d):  # pragma: no cover - compiled
    """``d * d`` for a uint64 ``d`` as the 128-bit pair ``(high, low)`` (32-bit halves)."""
    a = d >> np.uint64(32)
    b = d & _LOW32
    cross = a * b  # d^2 = a^2 2^64 + cross 2^33 + b^2
    low = b * b
    mid = cross << np.uint64(33)
    total = low + mid
    carry = _ONE if total < low else _ZERO
    return a * a + (cross >> np.uint64(31)) + carry, total


@njit(cache=True)
def divmod_128(high, low, den):  # pragma: no cover - compiled
    """``divmod(high 2^64 + low, den)`` for ``high < den < 2^63`` (so the quotient fits 64 bits):
    binary long division, one quotient bit per step."""
    rest = high
    quotient = _ZERO
    for i in range(63, -1, -1):
        rest = (rest << _ONE) | ((low >> np.uint64(i)) & _ONE)  # rest < 2^63: no overflow
        quotient <<= _ONE
        if rest >= den:
            rest -= den
            quotient |= _ONE
    return quotient, rest


@njit(cache=True)
def discrete_gaussian_one(state, p, q, t, v_max, bits, y_max):  # pragma: no cover - compiled
    """One draw with P(z) proportional to exp(-z^2 / (2 sigma2)), sigma2 = p/q, and an ok flag
    (CKS Algorithm 3).

    Candidates are discrete Laplace of scale ``t`` (``v_max`` and ``bits`` as
    ``laplace_constants(t)`` gives them), kept with probability
    exp(-gamma), gamma = (|y| - sigma2/t)^2 / (2 sigma2) = d^2 / den with d = |y| t q - p and
    den = 2 p q t^2, decided in integers: the whole part of gamma by Bernoulli(exp(-1)) draws,
    the rest by ``bernoulli_exp_fraction``. Every candidate's test is finished here, never
    cut short, so the law is exact at every sigma2 the caller passes:

    - d < 2^32 (nearly every candidate when the caller's parameters allow): d^2 in 64 bits;
    - |y| <= ``y_max``, so d < 2^64: d^2 in 128 bits (``square_128``, ``divmod_128``);
    - a larger candidate, a square of 2^64 den or more, or a Laplace step that overflows has
      gamma > 2^62: up to 2^62 Bernoulli(exp(-1)) draws reject it (all but surely at the
      first few). Only if all 2^62 pass (probability exp(-2^62)) is the flag False, and the
      caller draws that sample with Python integers.

    The caller guarantees 2 p q t^2 < 2^63, t < 2^62 and y_max = (2^64 - 1 - p) // (t q) (a
    smaller y_max only sends more candidates down the huge-gamma path, where the law is then
    not exact; the tests use that to exercise it). Handing a wide candidate back to be drawn
    afresh instead would under-weight the tail past it (about 60 times, past 4 sigma).
    """
    den = np.uint64(2) * p * q * t * t
    while True:
        y, ok = discrete_laplace_one(state, _ONE, t, v_max, bits)
        size = np.uint64(y if y >= 0 else -y)
        huge = not ok or size > y_max
        if not huge:
            x = size * t * q
            diff = x - p if x >= p else p - x
            if diff <= _LOW32:
                num = diff * diff
                whole = num // den
                rest = num % den
            else:
                high, low = square_128(diff)
                if high >= den:  # gamma >= 2^64
                    huge = True
                else:
                    whole, rest = divmod_128(high, low, den)
        if huge:  # gamma > 2^62: the first 2^62 of its Bernoulli(exp(-1)) draws
            trials = _ZERO
            while trials < _HUGE_TRIALS and bernoulli_exp_minus_one(state):
                trials += _ONE
            if trials == _HUGE_TRIALS:
                return np.int64(0), False
            continue
        accept = True
        while whole > _ZERO:
            if not bernoulli_exp_minus_one(state):
                accept = False
                break
            whole -= _ONE
        if accept and bernoulli_exp_fraction(state, rest, den):
            return y, True


@njit(cache=True)
def fill_discrete_gaussian(out, start, stop, p, q, t, y_max, state):  # pragma: no cover - compiled
    """Fill ``out[start:stop]`` with discrete Gaussian draws (``discrete_gaussian_one``); return
    ``stop`` when done, or the index of a draw the caller must make itself."""
    v_max, bits = laplace_constants(t)
    for i in range(start, stop):
        value, ok = discrete_gaussian_one(state, p, q, t, v_max, bits, y_max)
        if not ok:
            return i
        out[i] = value
    return stop


@njit(cache=True, parallel=True)
def fill_discrete_gaussian_blocks(out, block, p, q, t, y_max, states, stops):  # pragma: no cover - compiled
    """``fill_discrete_gaussian`` over blocks of ``block`` draws in parallel, block b with its own
    state ``states[b]`` (the output does not depend on the number of threads); ``stops[b]`` gets
    where block b stopped."""
    n_blocks = states.shape[0]
    for b in prange(n_blocks):
        start = b * block
        stop = min(start + block, out.shape[0])
        state = states[b].copy()
        stops[b] = fill_discrete_gaussian(out, start, stop, p, q, t, y_max, state)
        states[b, :] = state


@njit(cache=True)
def uniform_open01(state):  # pragma: no cover - compiled
    """A uniform float in the open interval (0, 1): 53 random bits plus one half."""
    return (np.float64(next_u64(state) >> np.uint64(11)) + 0.5) * (1.0 / 9007199254740992.0)


@njit(cache=True)
def gumbel(state):  # pragma: no cover - compiled
    """A standard Gumbel draw, -log(-log(U))."""
    return -np.log(-np.log(uniform_open01(state)))


@njit(cache=True)
def gumbel_argmax(scores, scale, state, best_key, best_index, offset):  # pragma: no cover - compiled
    """Streaming Gumbel-max over one chunk of scores: key = scale * score + Gumbel.

    ``-inf`` scores are excluded (their key is never drawn). Returns the running
    ``(best_key, best_index)``, indices counted from ``offset``.
    """
    for i in range(scores.shape[0]):
        score = scores[i]
        if score == -np.inf:
            continue
        key = scale * score + gumbel(state)
        if key > best_key:
            best_key = key
            best_index = offset + i
    return best_key, best_index
