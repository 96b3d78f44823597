"""Statistical privacy tests: every mechanism is run many times on a pair of neighbouring
inputs chosen so that its privacy loss comes close to epsilon, and ``privacy_audit.audit``
checks P[E | D] <= e^eps P[E | D'] + delta with exact Clopper-Pearson bounds (family-wise
confidence 1 - 1e-6, Bonferroni over the events). Each real mechanism must pass; next to it a
deliberately broken variant (noise scale halved, threshold noise missing, exponential
mechanism scaled by eps / Delta instead of eps / (2 Delta), ...) must be caught by the same
audit on the same pair, which shows that the pair and the sample sizes have teeth.

Sample sizes come from a power calculation, not habit. A real mechanism is flagged with
probability at most 1e-6 whatever the size (that is the audit's confidence), so the size is
set by the broken variant: the smallest round number of runs per input at which its most
telling event (from its exact law) proves the leak with probability >= 0.9999
(``privacy_audit.leak_power``, exact for one event and a lower bound for the family); the
real mechanism is audited at that same size, so the broken variant's teeth are the real
audit's too. ``test_sizes_catch_the_broken_variants`` recomputes these powers.

Goodness-of-fit tests check the samplers against their exact distributions (chi-square with
merged tail bins, and the sample variance against theory within 5.5 standard errors); a
sampler with a wrong parameter must fail them too.

Every test is seeded (``np.random.default_rng(seed)`` passed as ``rng``), so the outcomes are
deterministic. Tests taking more than a few seconds are marked ``slow`` (still run in CI).

These audits found two floating-point privacy bugs, now fixed and kept as regression tests:
AboveThreshold compared ``value + noise`` with ``threshold + noise`` in floats (rounding near
ties depends on the data; it now compares exactly), and NumericSparse released
``value + sensitivity * Z`` as a float (the reachable floats identify the input; it now
releases exact integer counts only).
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from synth.privacy.composition import zcdp_epsilon
from synth.privacy.mechanisms import (
    AboveThreshold,
    NumericSparse,
    Sparse,
    discrete_gaussian,
    discrete_gaussian_noise,
    discrete_laplace,
    discrete_laplace_noise,
    exponential,
    laplace_ratio,
)
from synth.privacy.mechanisms._exact import discrete_gaussian_exact, discrete_laplace_exact

from .privacy_audit import (
    assert_leak,
    assert_no_leak,
    assert_variance,
    audit,
    chisquare_gof,
    clopper_pearson,
    leak_power,
    point_and_tail_events,
)

GOF_ALPHA = 1e-6  # a correct sampler fails a goodness-of-fit test with probability 1e-6


def _rng(*key: int) -> np.random.Generator:
    """A seeded generator per test and input (different streams for D and D')."""
    return np.random.default_rng([20261121, *key])


# =============================================================================================
# The audit helper itself
# =============================================================================================


def test_clopper_pearson_bounds():
    """Exact bounds: the edge cases, and coverage of a known proportion."""
    assert clopper_pearson(0, 10, 0.95)[0] == 0.0
    assert clopper_pearson(10, 10, 0.95)[1] == 1.0
    lo, hi = clopper_pearson(0, 10, 0.95)
    assert hi == pytest.approx(1 - 0.025 ** (1 / 10))  # the closed form for k = 0
    lo, hi = clopper_pearson(50, 100, 0.95)
    assert 0.39 < lo < 0.40 and 0.60 < hi < 0.61
    rng = _rng(0)
    misses = sum(not (lo <= 0.3 <= hi) for lo, hi in
                 (clopper_pearson(int(k), 200, 0.9) for k in rng.binomial(200, 0.3, size=2000)))
    assert misses <= 0.1 * 2000 * 1.2  # at least nominal coverage (CP is conservative)


def test_audit_decision_logic():
    """A pair of known distributions: the audit flags ratio 4 at eps = ln 2, not at eps = ln 5."""
    rng = _rng(1)
    n = 200_000
    d = rng.random(n) < 0.4
    dp = rng.random(n) < 0.1
    events = point_and_tail_events([0, 1], tails=False)
    assert audit(d, dp, math.log(2), events=events).leak
    assert not audit(d, dp, math.log(5), events=events).leak
    assert not audit(d, dp, math.log(2), delta=0.25, events=events).leak  # 0.4 <= 2 * 0.1 + 0.25
    result = audit(dp, d, math.log(2), events=events)  # the other direction is checked too
    assert result.leak and result.direction == "D'/D"


# =============================================================================================
# Discrete Laplace: counts c vs c + sensitivity
# =============================================================================================

LAPLACE_N = 2_000_000  # draws per input (about 0.1 s)


def _laplace_outputs(eps, sensitivity, count, n, seed, noise_eps=None):
    """``n`` releases of ``count`` by ``discrete_laplace``; ``noise_eps`` overrides the epsilon
    of the noise (the broken variant: a larger epsilon is a smaller noise scale)."""
    return discrete_laplace(np.full(n, count), noise_eps or eps, sensitivity, rng=_rng(*seed))


@pytest.mark.parametrize("eps,sensitivity", [(0.1, 1), (1.0, 1), (3.0, 1), (1.0, 2)])
def test_discrete_laplace_private(eps, sensitivity):
    """Real mechanism on c = 10 vs c + sensitivity: every tail event has ratio exactly e^eps,
    so this pair is as tight as it gets; no leak may be proven."""
    d = _laplace_outputs(eps, sensitivity, 10, LAPLACE_N, (10, 1))
    dp = _laplace_outputs(eps, sensitivity, 10 + sensitivity, LAPLACE_N, (10, 2))
    result = audit(d, dp, eps)
    assert_no_leak(result, f"discrete_laplace eps={eps} sensitivity={sensitivity}")
    assert result.worst_hat[2] > 0.9 * eps  # the pair is tight: some event shows almost e^eps


@pytest.mark.parametrize("eps,sensitivity", [(0.1, 1), (1.0, 1), (3.0, 1), (1.0, 2)])
def test_discrete_laplace_half_scale_is_caught(eps, sensitivity):
    """Broken: noise scale halved (the noise drawn with 2 eps); the audit at eps must catch it."""
    d = _laplace_outputs(eps, sensitivity, 10, LAPLACE_N, (11, 1), noise_eps=2 * eps)
    dp = _laplace_outputs(eps, sensitivity, 10 + sensitivity, LAPLACE_N, (11, 2), noise_eps=2 * eps)
    assert_leak(audit(d, dp, eps), f"half-scale discrete_laplace eps={eps} sensitivity={sensitivity}")


# =============================================================================================
# Discrete Gaussian: rho-zCDP => (eps, delta)-DP with eps = zcdp_epsilon(rho, delta)
# =============================================================================================

GAUSS_RHO, GAUSS_DELTA = 0.2, 0.01  # sigma^2 = 2.5, eps = 1.525; the real gap is ~0.34 delta
# Size: with sigma halved (sigma^2 = 0.625) the event {out <= 9} has P = 0.2477 under D (c = 10) and
# 0.02095 under D', so P_D - e^eps P_D' = 0.151 >> delta. The audit selects its events on the
# first 20% of the runs and decides on the other 80% with at most 20 events: at 7,000 runs
# (5,600 deciding) leak_power = 0.99998 (0.988 at 5,000). Simulated on the exact law, with the
# selection step: caught in 1,000 of 1,000 audits already at 5,000 runs.
GAUSS_N = 7_000


@pytest.mark.slow
def test_discrete_gaussian_private():
    """Real mechanism on c vs c + 1 at (zcdp_epsilon(rho, delta), delta): no leak proven."""
    eps = zcdp_epsilon(GAUSS_RHO, GAUSS_DELTA)
    n = GAUSS_N
    d = discrete_gaussian(np.full(n, 10), GAUSS_RHO, rng=_rng(20, 1))
    dp = discrete_gaussian(np.full(n, 11), GAUSS_RHO, rng=_rng(20, 2))
    assert_no_leak(audit(d, dp, eps, GAUSS_DELTA), "discrete_gaussian")


def test_discrete_gaussian_half_sigma_is_caught():
    """Broken: sigma halved (rho four times larger); must fail the same (eps, delta) audit."""
    eps = zcdp_epsilon(GAUSS_RHO, GAUSS_DELTA)
    n = GAUSS_N
    d = discrete_gaussian(np.full(n, 10), 4 * GAUSS_RHO, rng=_rng(21, 1))
    dp = discrete_gaussian(np.full(n, 11), 4 * GAUSS_RHO, rng=_rng(21, 2))
    assert_leak(audit(d, dp, eps, GAUSS_DELTA), "half-sigma discrete_gaussian")


# =============================================================================================
# Exponential mechanism: D = [Delta, 0, ..., 0] vs D' = [0, Delta, ..., Delta]
# =============================================================================================
# Every score moves by exactly Delta, so this is a valid neighbouring pair. Candidate 0 gains
# e^(eps/2) in its weight while the normalizer loses up to e^(eps/2): with m others
#   gumbel (exact exponential mechanism): P_D(0) / P_D'(0) = a (1 + m a) / (a + m), a = e^(eps/2),
#     which tends to e^eps as m grows (m = 20, eps = 1: 2.587 vs e = 2.718);
#   permute-and-flip: P_D(0) / P_D'(0) = e^eps (1 - (1 - e^(-eps/2))^(m+1)), within 4e-5 of it at m = 10.
# The broken variant (scale eps / Delta, i.e. the real function with 2 eps) reaches about e^(2 eps).

EXP_EPS, EXP_SENS = 1.0, 2.0


def _exp_scores(m: int) -> tuple[np.ndarray, np.ndarray]:
    d = np.zeros(m + 1)
    d[0] = EXP_SENS
    dp = np.full(m + 1, EXP_SENS)
    dp[0] = 0.0
    return d, dp


def _exp_outputs(scores, eps, method, n, seed):
    rng = _rng(*seed)
    return np.array([exponential(scores, eps, EXP_SENS, rng, method=method) for _ in range(n)])


# Sizes (m, draws per input, for the real mechanism and the broken one alike): the broken
# variant's P(0) is 0.1197 vs 0.01806 (gumbel, m = 20: loss 1.89 eps) and 0.2455 vs 0.03344
# (permute-and-flip, m = 10: 1.99 eps), with 3 (m + 1) point and tail events: leak_power =
# 0.99993 at 8,000 (gumbel; 0.894 at 5,000) and 0.99992 at 3,000 (permute-and-flip; below
# 0.999 under 2,700). Were 150,000 and 100,000 for the real mechanism, 20,000 for the broken.
EXP_CASES = {"gumbel": (20, 8_000), "permute_and_flip": (10, 3_000)}  # m, draws per input


@pytest.mark.slow
@pytest.mark.parametrize("method", sorted(EXP_CASES))
def test_exponential_private(method):
    """Real exponential mechanism (both samplers) on the tight pair: no leak proven."""
    m, n = EXP_CASES[method]
    d_scores, dp_scores = _exp_scores(m)
    d = _exp_outputs(d_scores, EXP_EPS, method, n, (30, 1))
    dp = _exp_outputs(dp_scores, EXP_EPS, method, n, (30, 2))
    result = audit(d, dp, EXP_EPS, events=point_and_tail_events(range(m + 1)))
    assert_no_leak(result, f"exponential ({method})")


@pytest.mark.parametrize("method", sorted(EXP_CASES))
def test_exponential_eps_over_delta_is_caught(method):
    """Broken: weights exp(eps * score / Delta) (the eps / (2 Delta) scaling forgotten)."""
    m, n = EXP_CASES[method]
    d_scores, dp_scores = _exp_scores(m)
    d = _exp_outputs(d_scores, 2 * EXP_EPS, method, n, (31, 1))
    dp = _exp_outputs(dp_scores, 2 * EXP_EPS, method, n, (31, 2))
    result = audit(d, dp, EXP_EPS, events=point_and_tail_events(range(m + 1)))
    assert_leak(result, f"eps/Delta exponential ({method})")


# =============================================================================================
# AboveThreshold: output = index of the first "above" among k queries (k when none)
# =============================================================================================
# Pair (threshold T, sensitivity s, k = 8): D = [T - s] * 7 + [T], D' = [T] * 7 + [T - s]; every
# value moves by s. Event "first above at the last query": D's earlier queries are lower (so
# the noisy threshold is pushed high, where its density ratio is e^(eps/2)) and its last one
# higher (the query noise tail adds e^(eps/2)). Exact ratios at eps = 3 (by enumerating the
# noise): real 0.990 eps (P = 0.0465 vs 0.00238), no threshold noise 2.0 eps, query noise
# scale halved 1.5 eps. eps = 3 makes these ratios large against the sampling error, so the
# Python-speed runs stay few (at eps = 1 the tightest such pairs need far rarer events).
#
# Sizes (``_first_above_law``): without threshold noise the most telling event is {out >= 7}
# (P = 0.0667 vs 0.00035, 1.75 eps), with 27 events: leak_power = 0.99993 at 20,000 runs
# (0.43 at 10,000; 0.999 needs 17,984); with the query noise halved it is {out == 7} (0.1474 vs
# 0.00164): 0.99997 at 15,000 (0.96 at 10,000). The real mechanism runs at 20,000 (was 100,000).

AT_EPS, AT_K = 3.0, 8
AT_EVENTS = point_and_tail_events(range(AT_K + 1))  # the support is known: no selection split
AT_N = 20_000  # runs per input: the real mechanism, and the broken one without threshold noise


def _dlap_at_least(p: float, m: np.ndarray) -> np.ndarray:
    """P(Z >= m) for the discrete Laplace Z with P(z) proportional to p^|z|."""
    m = np.asarray(m, dtype=float)
    return np.where(m >= 1, p ** np.maximum(m, 1) / (1 + p), 1 - p ** np.maximum(1 - m, 1) / (1 + p))


def _first_above_law(gaps, epsilon, threshold_noise=True, query_multiple=4) -> np.ndarray:
    """The exact law of the index of the first "above" (len(gaps): none) of AboveThreshold on
    values ``threshold + gap * step`` (integer gaps, in lattice steps): threshold noise rho ~
    DLap(epsilon / 2) (or 0), query noise nu ~ DLap(epsilon / query_multiple), "above" iff
    gap + nu >= rho - 1/2, i.e. nu >= rho - gap. Sums over rho (|rho| <= 80 / (eps / 2))."""
    if threshold_noise:
        p = math.exp(-epsilon / 2)
        rho = np.arange(-math.ceil(160 / epsilon), math.ceil(160 / epsilon) + 1)
        survive = (1 - p) / (1 + p) * p ** np.abs(rho)
    else:
        rho, survive = np.zeros(1), np.ones(1)
    law = np.zeros(len(gaps) + 1)
    for i, gap in enumerate(gaps):
        above = _dlap_at_least(math.exp(-epsilon / query_multiple), rho - gap)
        law[i] = np.dot(survive, above)
        survive = survive * (1 - above)
    law[-1] = survive.sum()
    return law


def _point_and_tail_probabilities(law) -> np.ndarray:
    """The probability of each event of ``point_and_tail_events(range(len(law)))``, in order."""
    law = np.asarray(law)
    return np.concatenate([law, np.cumsum(law), np.cumsum(law[::-1])[::-1]])


def _at_pair(threshold: float, sensitivity: float, scale: int | None = None):
    """The tight pair; with ``scale`` (an integer n with sensitivity 1/n) the values are
    computed as fractions (c +- 1) / n, as a workload of fractional counts would."""
    if scale is None:
        low, high = threshold - sensitivity, threshold
    else:
        c = round(threshold * scale)
        low, high = (c - 1) / scale, c / scale
    return [low] * (AT_K - 1) + [high], [high] * (AT_K - 1) + [low]


def _first_above(factory, values, n: int, rng) -> np.ndarray:
    """``n`` runs of a fresh sparse-vector object from ``factory(rng)`` on ``values``: the index
    of the first "above" (``len(values)`` if none). ``rng``: a generator, or for the sketch a
    ``LaplaceStream``."""
    out = np.empty(n, dtype=np.int64)
    k = len(values)
    for r in range(n):
        mechanism = factory(rng)
        out[r] = next((i for i, v in enumerate(values) if mechanism.test(v)), k)
    return out


class LaplaceStream:
    """``discrete_laplace_noise`` from one generator, drawn in blocks and handed out one at a
    time. The draws are i.i.d. either way, so the law is that of one call per draw; but a call
    costs about 100 us whatever its size (it was most of a sketch run), so one per 4,096 draws."""

    BLOCK = 4096

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self._blocks: dict[tuple, tuple[list, int]] = {}

    def draw(self, epsilon: float, sensitivity: float) -> int:
        key = (epsilon, sensitivity)
        block, used = self._blocks.get(key, ((), 0))
        if used == len(block):
            block, used = discrete_laplace_noise(self.BLOCK, epsilon, sensitivity, self.rng).tolist(), 0
        self._blocks[key] = (block, used + 1)
        return block[used]


class SketchAboveThreshold:
    """AboveThreshold written out here from ``discrete_laplace_noise``, with knobs to break it.

    Noise on the sensitivity's lattice and the exact half-step comparison, as in the library
    (integer noise for an integer sensitivity, ``sensitivity * Z`` otherwise): threshold noise scale 2 s / eps (none with
    ``threshold_noise=False``), query noise scale ``query_multiple`` * s / eps (4 is right).
    ``rng`` is a generator or a ``LaplaceStream`` (share one across runs: faster, same law).
    """

    def __init__(self, threshold, epsilon, sensitivity=1, rng=None, *,
                 threshold_noise=True, query_multiple=4):
        self.integer = float(sensitivity).is_integer()
        self.unit = 1 if self.integer else sensitivity
        self.steps = sensitivity if self.integer else 1
        self.epsilon = epsilon
        self.noise = rng if isinstance(rng, LaplaceStream) else LaplaceStream(np.random.default_rng(rng))
        self.query_multiple = query_multiple
        self.threshold = threshold
        self.threshold_steps = self._noise(2) if threshold_noise else 0

    def _noise(self, multiple):
        return int(self.noise.draw(self.epsilon / multiple, self.steps))

    def test(self, value) -> bool:
        """value + unit * nu >= threshold + unit * (rho - 1/2), exactly (the library's rule)."""
        gap = Fraction(value) - Fraction(self.threshold)
        return gap >= Fraction(self.unit) * (self.threshold_steps - self._noise(self.query_multiple) - Fraction(1, 2))


AT_SETTINGS = {  # name: (threshold, sensitivity, scale for fractional values)
    "integer": (0, 1, None),
    "fraction_1e-3": (0.5, 1 / 1000, 1000),
}
AT_SEEDS = {"integer": 0, "fraction_1e-3": 1}


@pytest.mark.slow
@pytest.mark.parametrize("setting", sorted(AT_SETTINGS))
def test_above_threshold_private(setting):
    """Real AboveThreshold on the tight pair (integer counts, and fractions with sensitivity
    1/1000): no leak proven."""
    threshold, sensitivity, scale = AT_SETTINGS[setting]
    d_values, dp_values = _at_pair(threshold, sensitivity, scale)
    n = AT_N

    def factory(rng):
        return AboveThreshold(threshold, AT_EPS, sensitivity, rng)

    d = _first_above(factory, d_values, n, _rng(40, AT_SEEDS[setting], 1))
    dp = _first_above(factory, dp_values, n, _rng(40, AT_SEEDS[setting], 2))
    result = audit(d, dp, AT_EPS, events=AT_EVENTS)
    assert_no_leak(result, f"AboveThreshold ({setting})")


AT_BROKEN = {  # name: (the sketch's knobs, runs per input)
    "no_threshold_noise": (dict(threshold_noise=False), AT_N),
    "half_query_noise": (dict(query_multiple=2), 15_000),
}


@pytest.mark.slow
@pytest.mark.parametrize("setting", sorted(AT_SETTINGS))
@pytest.mark.parametrize("broken", sorted(AT_BROKEN))
def test_above_threshold_broken_is_caught(broken, setting):
    """Broken AboveThreshold (threshold noise missing, or query noise scale halved) on the same
    pair: the same audit must prove the leak."""
    threshold, sensitivity, scale = AT_SETTINGS[setting]
    d_values, dp_values = _at_pair(threshold, sensitivity, scale)
    knobs, n = AT_BROKEN[broken]

    def factory(rng):
        return SketchAboveThreshold(threshold, AT_EPS, sensitivity, rng, **knobs)

    d = _first_above(factory, d_values, n, LaplaceStream(_rng(41, AT_SEEDS[setting], 1)))
    dp = _first_above(factory, dp_values, n, LaplaceStream(_rng(41, AT_SEEDS[setting], 2)))
    assert_leak(audit(d, dp, AT_EPS, events=AT_EVENTS), f"AboveThreshold {broken} ({setting})")


# The textbook failure of AboveThreshold without threshold noise: D = [T] * k, D' = [T - 1] * k,
# event "no above in k queries". Without threshold noise the k comparisons are independent and
# the loss grows with k (exactly 2.0 eps at eps = 3, k = 8: P = 0.0453 vs 0.000112); with it,
# the threshold shift bounds this event by e^(eps/2) (exact loss 0.499 eps). Size: the broken
# variant's most telling event is {out >= 7} (D' over D: 0.0667 vs 0.00035, as on the tight
# pair): leak_power = 0.99993 at AT_N = 20,000 (was 30,000 for the real mechanism).
AT_NONE_PAIR = ([0] * AT_K, [-1] * AT_K)


@pytest.mark.slow
def test_above_threshold_none_above_private():
    """Real AboveThreshold on the "no above" pair: no leak proven."""
    n = AT_N

    def factory(rng):
        return AboveThreshold(0, AT_EPS, 1, rng)

    d, dp = (_first_above(factory, values, n, _rng(44, i)) for i, values in enumerate(AT_NONE_PAIR))
    assert_no_leak(audit(d, dp, AT_EPS, events=AT_EVENTS), "AboveThreshold (no-above pair)")


def test_above_threshold_none_above_without_threshold_noise_is_caught():
    """Without threshold noise the "no above" event gives the mechanism away."""
    n = AT_N

    def factory(rng):
        return SketchAboveThreshold(0, AT_EPS, 1, rng, threshold_noise=False)

    d, dp = (_first_above(factory, values, n, LaplaceStream(_rng(45, i)))
             for i, values in enumerate(AT_NONE_PAIR))
    assert_leak(audit(d, dp, AT_EPS, events=AT_EVENTS),
                "AboveThreshold without threshold noise (no-above pair)")


@pytest.mark.slow
def test_above_threshold_sketch_matches_library():
    """The sketch with its knobs set right is the library's mechanism: same output
    distribution on the pair (chi-square test of homogeneity), so the broken variants above
    differ from the real one only by the knob."""
    for setting, (threshold, sensitivity, scale) in AT_SETTINGS.items():
        d_values, _ = _at_pair(threshold, sensitivity, scale)
        n = 10_000
        real = _first_above(lambda rng: AboveThreshold(threshold, AT_EPS, sensitivity, rng),
                            d_values, n, _rng(42, AT_SEEDS[setting], 1))
        sketch = _first_above(lambda rng: SketchAboveThreshold(threshold, AT_EPS, sensitivity, rng),
                              d_values, n, LaplaceStream(_rng(42, AT_SEEDS[setting], 2)))
        table = np.array([np.bincount(real, minlength=AT_K + 1), np.bincount(sketch, minlength=AT_K + 1)])
        p_value = stats.chi2_contingency(table)[1]
        assert p_value > GOF_ALPHA, (
            f"{setting}: sketch and library differ: p = {p_value:.3g}, counts {table.tolist()}")


# Float thresholds and values (a regression test). The lattice argument ("the noise shifts by
# exactly one lattice step between neighbours") holds in exact arithmetic; the library used to
# compare ``value + noise >= threshold + noise'`` in floating point, where near-ties round
# either way. With eps = 3 and k = 6:
#   threshold 1/3, sensitivity 0.7: D = [nextafter(1/3, -inf)] * 5 + [1/3],
#                                   D' = [1/3 + 0.7] * 5 + [1/3 - 0.7]
#   threshold 0.9, sensitivity 1:   D = [nextafter(0.9, -inf)] * 5 + [0.9],
#                                   D' = [0.9 + 1] * 5 + [0.9 - 1]
# (every value moves by at most the sensitivity, checked exactly below). With float
# comparisons, enumerating the noise gave P[first above at query 6] = 0.0719 vs 0.00106 (loss
# 1.41 eps) and 0.0718 vs 0.00123 (1.36 eps): e.g. 1.9 + 0 >= 0.9 + 1 is True in floats (0.9 + 1
# rounds to the float 1.9). The library now compares exactly, half a lattice step below.
# Size: against those old laws, with 21 events, leak_power on {out == 5} is 0.999998 and
# 0.9997 at 45,000 runs (0.99995 and 0.9974 at the former 40,000).
AT_FLOAT_N = 45_000
AT_FLOAT_CASES = {"lattice_0.7": (1 / 3, 0.7), "integer_1": (0.9, 1.0)}
AT_FLOAT_K = 6


def _at_float_pair(threshold, sensitivity):
    below = float(np.nextafter(threshold, -np.inf))
    return ([below] * (AT_FLOAT_K - 1) + [threshold],
            [threshold + sensitivity] * (AT_FLOAT_K - 1) + [threshold - sensitivity])


@pytest.mark.parametrize("case", sorted(AT_FLOAT_CASES))
def test_above_threshold_float_pairs_are_neighbours(case):
    """The pairs of the float-tie test below are valid: each value moves by at most the
    sensitivity, in exact arithmetic on the floats themselves."""
    threshold, sensitivity = AT_FLOAT_CASES[case]
    for a, b in zip(*_at_float_pair(threshold, sensitivity)):
        assert abs(Fraction(a) - Fraction(b)) <= Fraction(sensitivity)


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(AT_FLOAT_CASES))
def test_above_threshold_float_ties(case):
    threshold, sensitivity = AT_FLOAT_CASES[case]
    d_values, dp_values = _at_float_pair(threshold, sensitivity)
    n = AT_FLOAT_N

    def factory(rng):
        return AboveThreshold(threshold, AT_EPS, sensitivity, rng)

    d = _first_above(factory, d_values, n, _rng(43, 1))
    dp = _first_above(factory, dp_values, n, _rng(43, 2))
    assert_no_leak(audit(d, dp, AT_EPS, events=point_and_tail_events(range(AT_FLOAT_K + 1))),
                   f"AboveThreshold float ties ({case})")


# =============================================================================================
# NumericSparse: output (index of the first above, released noisy value)
# =============================================================================================


def _numeric_sparse_outputs(values, threshold, eps_test, eps_release, sensitivity, n, rng):
    """Rows ``(index, released value)``; ``(len(values), 0.0)`` when nothing was above."""
    out = np.zeros((n, 2))
    k = len(values)
    for r in range(n):
        mechanism = NumericSparse(threshold, eps_test, eps_release, sensitivity, rng)
        out[r] = (k, 0.0)
        for i, v in enumerate(values):
            released = mechanism.query(v)
            if released is not None:
                out[r] = (i, released)
                break
    return out


# Design A (cheap, both ways): one query, T = 0, D = [0] vs D' = [-1], eps_test = 1,
# eps_release = 2 (claimed 3). The value part carries e^2 (real) or e^4 (release noise scale
# halved), the test part at most e^1: the broken variant is caught at point events (0, v).
# Size: the broken variant's (0, 0) has P = 0.5230 vs 0.00808 (loss 1.39 eps); the audit selects
# at most 20 events on 20% of the runs and decides on the rest: leak_power = 0.99998 at 7,000
# runs (5,600 deciding; 0.9994 at 6,000). Simulated on the exact law with the selection step:
# caught in 998 of 1,000 audits at 5,000 runs, 1,000 of 1,000 at 6,000 and 7,000.
NS_A = dict(values=([0], [-1]), threshold=0, eps_test=1.0, eps_release=2.0)
NS_A_N = 7_000  # runs per input, real (was 30,000) and broken (was 10,000)
# Design B (tight, real only): the AboveThreshold pair with eps_test = 3, eps_release = 1; the
# event (7, v) for v >= 0 has loss 0.99 * 3 + 1 = 3.97 of the claimed 4. No broken variant runs
# on this pair to size it by (the release noise halved would need far more than 60,000 runs:
# its most telling event (7, 0) has P = 0.0354 vs 0.00025, spread over many values), so it
# keeps its size.
NS_B = dict(values=([-1] * 7 + [0], [0] * 7 + [-1]), threshold=0, eps_test=3.0, eps_release=1.0)


@pytest.mark.slow
@pytest.mark.parametrize("design,n", [("A", NS_A_N), ("B", 60_000)])
def test_numeric_sparse_private(design, n):
    """Real NumericSparse at eps_test + eps_release: no leak proven (events chosen on a
    selection split: point events on (index, value))."""
    spec = NS_A if design == "A" else NS_B
    eps = spec["eps_test"] + spec["eps_release"]
    outs = [
        _numeric_sparse_outputs(values, spec["threshold"], spec["eps_test"], spec["eps_release"], 1, n,
                                _rng(50, i))
        for i, values in enumerate(spec["values"])
    ]
    assert_no_leak(audit(*outs, eps), f"NumericSparse design {design}")


def test_numeric_sparse_half_release_noise_is_caught():
    """Broken: release noise scale halved (drawn with 2 eps_release); audited at the claimed
    eps_test + eps_release on design A."""
    spec = NS_A
    eps = spec["eps_test"] + spec["eps_release"]
    n = NS_A_N
    outs = [
        _numeric_sparse_outputs(values, spec["threshold"], spec["eps_test"], 2 * spec["eps_release"], 1, n,
                                _rng(51, i))
        for i, values in enumerate(spec["values"])
    ]
    assert_leak(audit(*outs, eps), "NumericSparse with half release noise")


# The released value is ``value + sensitivity * Z`` in floating point. For fractional counts
# c / n with sensitivity 1/n the two neighbours' sets of reachable floats differ: for n = 1000,
# c = 937 almost every output of D is a float that D' can never produce (and for a value that
# moves by half a lattice step, e.g. 10 vs 10.5 with sensitivity 1, the supports are disjoint).
NS_FLOAT_CASES = {
    "fraction_937e-3": (937 / 1000, 938 / 1000, 1 / 1000),
    "half_step": (10.0, 10.5, 1.0),
}


@pytest.mark.parametrize("case", sorted(NS_FLOAT_CASES))
def test_numeric_sparse_float_pairs_are_neighbours(case):
    value_d, value_dp, sensitivity = NS_FLOAT_CASES[case]
    assert abs(Fraction(value_d) - Fraction(value_dp)) <= Fraction(sensitivity)


@pytest.mark.parametrize("case", sorted(NS_FLOAT_CASES))
def test_numeric_sparse_refuses_float_releases(case):
    """A float release value + sensitivity * Z would leak through which floats it can reach
    (the audit found an unbounded loss): NumericSparse takes only integer counts with an
    integer sensitivity, whose release is an exact integer."""
    value_d, value_dp, sensitivity = NS_FLOAT_CASES[case]
    if not float(sensitivity).is_integer():
        with pytest.raises(ValueError, match="sensitivity .* must be a whole number"):
            NumericSparse(0.0, 1.0, 1.0, sensitivity, _rng(52, 0))
        return
    mechanism = NumericSparse(0.0, 1.0, 1.0, sensitivity, _rng(52, 0))
    with pytest.raises(ValueError, match="must be a whole number"):
        mechanism.query(value_dp)



# =============================================================================================
# Sparse: the tuple of answers to a short list of queries
# =============================================================================================
# max_above = 2 runs of AboveThreshold at eps / 2 each; queries are the AboveThreshold pair with
# k = 3, twice: D = [-1, -1, 0] * 2, D' = [0, 0, -1] * 2 (T = 0, sensitivity 1). The event
# "above exactly at queries 3 and 6" multiplies the two runs' ratios: exact loss 0.62 eps at
# eps = 4 for the real mechanism, 1.36 eps with every run at the full eps (the split
# forgotten). The answer tuples that can occur are known in advance (at most max_above
# "above", then "not asked"), so they form a fixed family of point events: no selection split.
# Size (``_sparse_law``): the broken variant's "above at 3 and 6" has P = 0.1078 vs 0.00046; with
# 22 events, leak_power = 0.99990 at 50,000 runs (0.9934 at 40,000; 0.999 needs 44,800). The real
# mechanism runs at the same size (was 40,000).

SPARSE_EPS, SPARSE_MAX_ABOVE = 4.0, 2
SPARSE_PAIR = ([-1, -1, 0] * 2, [0, 0, -1] * 2)
SPARSE_N = 50_000  # runs per input


class SparseNoSplit(Sparse):
    """Broken: every AboveThreshold run gets the whole epsilon instead of eps / max_above."""

    def _new_run(self) -> AboveThreshold:
        return AboveThreshold(self.threshold, self.epsilon, self.sensitivity, self._rng)


def _sparse_code(answers) -> int:
    """A tuple of answers (0 below, 1 above, 2 not asked after halting) as a base-3 number."""
    code = 0
    for answer in answers:
        code = 3 * code + answer
    return code


def _sparse_support(k: int, max_above: int) -> list[int]:
    """Every answer tuple Sparse can give to k queries: at most max_above "above" answers,
    and "not asked" for every query after the last allowed "above"."""
    codes = []
    for bits in itertools.product((0, 1), repeat=k):
        ones = np.flatnonzero(bits)
        if len(ones) > max_above:
            continue
        answers = list(bits)
        if len(ones) == max_above:
            answers[ones[-1] + 1:] = [2] * (k - 1 - ones[-1])
            if any(bits[ones[-1] + 1:]):
                continue
        codes.append(_sparse_code(answers))
    return sorted(set(codes))


SPARSE_EVENTS = point_and_tail_events(_sparse_support(len(SPARSE_PAIR[0]), SPARSE_MAX_ABOVE), tails=False)


def _sparse_outputs(cls, values, n, rng) -> np.ndarray:
    """Each run's answers as a base-3 code (``_sparse_code``)."""
    out = np.empty(n, dtype=np.int64)
    for r in range(n):
        mechanism = cls(0, SPARSE_EPS, SPARSE_MAX_ABOVE, 1, rng)
        out[r] = _sparse_code([2 if mechanism.halted else int(mechanism.test(v)) for v in values])
    return out


@pytest.mark.slow
def test_sparse_private():
    """Real Sparse: no leak proven over point events on the answer tuples."""
    n = SPARSE_N
    outs = [_sparse_outputs(Sparse, values, n, _rng(60, i)) for i, values in enumerate(SPARSE_PAIR)]
    assert_no_leak(audit(*outs, SPARSE_EPS, events=SPARSE_EVENTS), "Sparse")


@pytest.mark.slow
def test_sparse_without_split_is_caught():
    """Broken: epsilon not split over the max_above runs; the same audit must catch it."""
    n = SPARSE_N
    outs = [_sparse_outputs(SparseNoSplit, values, n, _rng(61, i)) for i, values in enumerate(SPARSE_PAIR)]
    assert_leak(audit(*outs, SPARSE_EPS, events=SPARSE_EVENTS), "Sparse without the epsilon split")


def _sparse_law(values, epsilon_run) -> dict[int, float]:
    """The exact law of Sparse's answer code (max_above = 2, T = 0, sensitivity 1): the first
    run's first "above" at i, then a fresh run on the queries after it (``_first_above_law``)."""
    assert SPARSE_MAX_ABOVE == 2
    k = len(values)
    first = _first_above_law(values, epsilon_run)
    law = {_sparse_code([0] * k): first[k]}
    for i in range(k):
        second = _first_above_law(values[i + 1:], epsilon_run)
        for j, p in enumerate(second):  # j: offset of the second "above" (k - i - 1: none)
            answers = [0] * i + [1] + [0] * j
            if j < k - i - 1:
                answers += [1] + [2] * (k - i - 2 - j)
            law[_sparse_code(answers)] = law.get(_sparse_code(answers), 0.0) + first[i] * p
    return law


def _best_power(p_d, p_dp, n, eps, delta=0.0) -> tuple[float, int]:
    """The largest ``leak_power`` over the events (both directions), and that event's index."""
    p_d, p_dp = np.asarray(p_d, dtype=float), np.asarray(p_dp, dtype=float)
    best = (0.0, -1)
    for index, (a, b) in enumerate(zip(p_d, p_dp)):
        for p, q in ((a, b), (b, a)):
            if p > math.exp(eps) * q + delta:
                best = max(best, (leak_power(p, q, n, eps, len(p_d), delta), index))
    return best


def test_sizes_catch_the_broken_variants():
    """The power calculation behind the sample sizes: on each broken variant's exact law, the
    audit at the size used proves the leak with probability >= 0.999 from one event alone
    (``leak_power``, a lower bound for the family; for the audits that select their events,
    on the 80% that decide, with 20 events). The real mechanisms run at the same sizes. The
    laws are checked too: they sum to 1 and give the losses quoted in the comments."""
    powers = {}
    tight = _at_pair(0, 1)  # integer gaps: the fractional setting's law is the same (exact comparisons)
    real = [_first_above_law(values, AT_EPS) for values in tight]
    assert math.log(real[0][AT_K - 1] / real[1][AT_K - 1]) / AT_EPS == pytest.approx(0.990, abs=1e-3)
    none_above = {"no_threshold_noise": AT_BROKEN["no_threshold_noise"]}
    for pair, variants in ((tight, AT_BROKEN), (AT_NONE_PAIR, none_above)):
        for name, (knobs, n) in variants.items():
            laws = [_first_above_law(values, AT_EPS, **knobs) for values in pair]
            assert all(law.sum() == pytest.approx(1) for law in laws)
            label = f"AboveThreshold {name}" + (", no-above pair" if pair is AT_NONE_PAIR else "")
            powers[label] = _best_power(*map(_point_and_tail_probabilities, laws), n, AT_EPS)[0]

    for method, (m, n) in EXP_CASES.items():
        law = _softmax_probs if method == "gumbel" else _permute_and_flip_probs
        p_d, p_dp = (_point_and_tail_probabilities(law(scores, 2 * EXP_EPS, EXP_SENS))
                     for scores in _exp_scores(m))
        powers[f"exponential {method}, eps / Delta"] = _best_power(p_d, p_dp, n, EXP_EPS)[0]

    codes = [event.value for event in SPARSE_EVENTS]
    for eps_run, label in ((SPARSE_EPS / SPARSE_MAX_ABOVE, None), (SPARSE_EPS, "Sparse without the split")):
        laws = [_sparse_law(values, eps_run) for values in SPARSE_PAIR]
        assert all(set(law) == set(codes) for law in laws)  # the law's support is the family's
        p_d, p_dp = ([law[c] for c in codes] for law in laws)
        assert sum(p_d) == pytest.approx(1) and sum(p_dp) == pytest.approx(1)
        loss = max(abs(math.log(a / b)) for a, b in zip(p_d, p_dp) if a > 0 and b > 0) / SPARSE_EPS
        assert loss == pytest.approx(0.621 if label is None else 1.364, abs=1e-3)
        if label:
            powers[label] = _best_power(p_d, p_dp, SPARSE_N, SPARSE_EPS)[0]

    decide = GAUSS_N - round(0.2 * GAUSS_N)  # audit's selection split
    eps = zcdp_epsilon(GAUSS_RHO, GAUSS_DELTA)
    _, pmf = _gauss_pmf(1 / (8 * GAUSS_RHO))  # sigma halved: sigma^2 = 1 / (2 * 4 rho)
    # outputs 10 + Z and 11 + Z on one grid; point and tail events at every value
    p_d = _point_and_tail_probabilities(np.append(pmf, 0.0))
    p_dp = _point_and_tail_probabilities(np.insert(pmf, 0, 0.0))
    powers["discrete_gaussian half sigma"] = max(
        leak_power(p, q, decide, eps, 20, GAUSS_DELTA)
        for a, b in zip(p_d, p_dp) for p, q in ((a, b), (b, a)) if p > math.exp(eps) * q + GAUSS_DELTA)

    spec = NS_A
    above = [_first_above_law(values, spec["eps_test"])[0] for values in spec["values"]]
    p_release = math.exp(-2 * spec["eps_release"])  # the broken release noise
    release = [(1 - p_release) / (1 + p_release) * p_release ** abs(z) for z in (0, 1)]  # 0 = 0 + 0 = -1 + 1
    powers["NumericSparse half release noise, (0, 0)"] = leak_power(
        above[0] * release[0], above[1] * release[1], NS_A_N - round(0.2 * NS_A_N),
        spec["eps_test"] + spec["eps_release"], 20)

    weak = {label: power for label, power in powers.items() if not power >= 0.999}
    assert not weak, f"sizes too small to catch the broken variants: {weak}"


# =============================================================================================
# Goodness of fit of the samplers
# =============================================================================================


def _laplace_pmf(eps, sensitivity=1.0, width=None):
    """Support and exact pmf of P(k) = (1 - p)/(1 + p) p^|k|, p = exp(-s/t) for the library's
    rational ``(s, t) = laplace_ratio(eps, sensitivity)``."""
    s, t = laplace_ratio(eps, sensitivity)
    p = math.exp(-s / t)
    width = width or int(math.ceil(40 / (s / t)))
    support = np.arange(-width, width + 1)
    return support, (1 - p) / (1 + p) * p ** np.abs(support)


def _gauss_pmf(sigma2):
    """Support and pmf proportional to exp(-k^2 / (2 sigma^2)), normalized over +-40 sigma."""
    width = int(math.ceil(40 * math.sqrt(sigma2))) + 5
    support = np.arange(-width, width + 1)
    weights = np.exp(-(support.astype(float) ** 2) / (2 * sigma2))
    return support, weights / weights.sum()


def _check_fit(samples, support, pmf, label):
    statistic, p_value, bins = chisquare_gof(samples, support, pmf)
    assert p_value > GOF_ALPHA, f"{label}: chi-square {statistic:.1f} on {bins} bins, p = {p_value:.3g}"
    assert_variance(samples, support, pmf, label=label)


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
def test_discrete_laplace_kernel_fits(eps):
    """The Numba kernel's draws follow the discrete Laplace law (several blocks of 2^16 draws)."""
    samples = discrete_laplace_noise(1_000_000, eps, rng=_rng(70, int(eps * 10)))
    support, pmf = _laplace_pmf(eps)
    _check_fit(samples, support, pmf, f"discrete_laplace_noise eps={eps}")


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
def test_discrete_laplace_wrong_p_fails_fit(eps):
    """A sampler with a 5% wrong parameter must fail the same checks (they have teeth)."""
    samples = discrete_laplace_noise(1_000_000, 1.05 * eps, rng=_rng(71, int(eps * 10)))
    support, pmf = _laplace_pmf(eps)
    with pytest.raises(AssertionError):
        _check_fit(samples, support, pmf, "wrong p")


@pytest.mark.parametrize("eps,sensitivity", [(1.0, 3), (0.7, 1 / 3)])
def test_discrete_laplace_sensitivity_fits(eps, sensitivity):
    """Noise for a sensitivity other than 1 (a non-dyadic ratio eps/sensitivity)."""
    samples = discrete_laplace_noise(500_000, eps, sensitivity, rng=_rng(72))
    support, pmf = _laplace_pmf(eps, sensitivity)
    _check_fit(samples, support, pmf, f"discrete_laplace_noise eps={eps} sensitivity={sensitivity}")


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
def test_discrete_laplace_exact_fits(eps):
    """The pure-Python exact sampler (the kernel's fallback and reference)."""
    s, t = laplace_ratio(eps)
    rng = _rng(73, int(eps * 10))
    samples = np.array([discrete_laplace_exact(s, t, rng) for _ in range(30_000)])
    support, pmf = _laplace_pmf(eps)
    _check_fit(samples, support, pmf, f"discrete_laplace_exact eps={eps}")


def test_discrete_laplace_exact_wrong_p_fails_fit():
    s, t = laplace_ratio(1.2)
    rng = _rng(74)
    samples = np.array([discrete_laplace_exact(s, t, rng) for _ in range(30_000)])
    support, pmf = _laplace_pmf(1.0)
    with pytest.raises(AssertionError):
        _check_fit(samples, support, pmf, "wrong p")


@pytest.mark.parametrize("sigma2", [0.3, 2.5, 40.0, 1176.47])
def test_discrete_gaussian_kernel_fits(sigma2):
    """The discrete Gaussian kernel's draws follow the law (several blocks; 1176.47 is rounded
    up to a multiple of 2^-16, far below what the test can see)."""
    samples = discrete_gaussian_noise(100_000, Fraction(sigma2), rng=_rng(75, int(sigma2 * 10)))
    support, pmf = _gauss_pmf(sigma2)
    _check_fit(samples, support, pmf, f"discrete_gaussian_noise sigma2={sigma2}")


def test_discrete_gaussian_wrong_sigma_fails_fit():
    samples = discrete_gaussian_noise(100_000, Fraction(2.5 * 1.1), rng=_rng(76))
    support, pmf = _gauss_pmf(2.5)
    with pytest.raises(AssertionError):
        _check_fit(samples, support, pmf, "wrong sigma")


@pytest.mark.parametrize("sigma2", [0.3, 2.5])
def test_discrete_gaussian_exact_fits(sigma2):
    """The pure-Python exact path (Laplace candidates drawn in Python too)."""
    rng = _rng(77, int(sigma2 * 10))
    samples = np.array([discrete_gaussian_exact(Fraction(sigma2), rng) for _ in range(10_000)])
    support, pmf = _gauss_pmf(sigma2)
    _check_fit(samples, support, pmf, f"discrete_gaussian_exact sigma2={sigma2}")


GOF_SCORES = np.array([0.0, 1.0, 2.0, 3.0, 4.0, -np.inf, 2.5])  # -inf: never chosen


def _softmax_probs(scores, eps, sensitivity):
    """The exponential mechanism's law: softmax(eps * score / (2 sensitivity)), -inf excluded."""
    finite = scores > -np.inf
    logits = np.where(finite, eps * np.where(finite, scores, 0) / (2 * sensitivity), -np.inf)
    weights = np.exp(logits - logits[finite].max())
    return weights / weights.sum()


def _permute_and_flip_probs(scores, eps, sensitivity):
    """Permute-and-flip's law: P(r) = p_r * integral_0^1 prod_{j != r} (1 - x p_j) dx with
    p_j = exp(eps (score_j - max) / (2 sensitivity)): give each candidate a uniform arrival
    time; r is chosen when it is accepted and no earlier candidate (each j is earlier with
    probability x = r's arrival time) was accepted."""
    finite = np.flatnonzero(scores > -np.inf)
    p = np.exp(eps * (scores[finite] - scores[finite].max()) / (2 * sensitivity))
    probs = np.zeros(len(scores))
    for a, r in enumerate(finite):
        poly = np.polynomial.Polynomial([1.0])
        for b in range(len(finite)):
            if b != a:
                poly *= np.polynomial.Polynomial([1.0, -p[b]])
        integral = poly.integ()
        probs[r] = p[a] * (integral(1.0) - integral(0.0))
    return probs


def _selection_fit(method, eps_used, eps_theory, n, seed):
    rng = _rng(*seed)
    picks = np.array([exponential(GOF_SCORES, eps_used, 1.5, rng, method=method) for _ in range(n)])
    law = _softmax_probs if method == "gumbel" else _permute_and_flip_probs
    probs = law(GOF_SCORES, eps_theory, 1.5)
    counts = np.bincount(picks, minlength=len(GOF_SCORES))
    assert counts[probs == 0].sum() == 0, "an excluded (-inf) candidate was chosen"
    keep = probs > 0
    return stats.chisquare(counts[keep], n * probs[keep])[1], counts


@pytest.mark.slow
@pytest.mark.parametrize("method", ["gumbel", "permute_and_flip"])
def test_exponential_selection_frequencies(method):
    """Selection frequencies match softmax(eps * score / (2 Delta)) (gumbel) or the exact
    permute-and-flip law; the same test with 2 eps must fail."""
    p_value, counts = _selection_fit(method, 1.0, 1.0, 60_000, (80,))
    assert p_value > GOF_ALPHA, f"{method}: p = {p_value:.3g}, counts {counts.tolist()}"
    p_broken, _ = _selection_fit(method, 2.0, 1.0, 20_000, (81,))
    assert p_broken < GOF_ALPHA, f"{method} with 2 eps passed the fit: p = {p_broken:.3g}"
