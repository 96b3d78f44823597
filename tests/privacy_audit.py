"""Statistical privacy audits: is there an output event E with P[E | D] > e^eps P[E | D'] + delta?

A mechanism M is (eps, delta)-DP when, for every pair of neighbouring inputs (D, D') and
every set of outputs E,

    P[M(D) in E] <= e^eps * P[M(D') in E] + delta      (and the same with D and D' swapped).

An audit runs M many times on a fixed pair (D, D'), so the two probabilities of an event are
binomial proportions, and asks whether the samples *prove* that the inequality fails for
some event. The decision is one-sided on purpose: the audit says "leak proven" only when

    lower(P[E | D])  >  e^eps * upper(P[E | D']) + delta

where ``lower`` and ``upper`` are exact Clopper-Pearson bounds, for some event E and either
direction (D over D', or D' over D). If every interval covers its true probability, a
DP mechanism can never satisfy that inequality, so a correct mechanism is flagged only when
some interval misses, which happens with probability at most ``1 - confidence``:

* each event gives two binomial proportions (one per input), and the test looks at
  ``m`` events, so there are ``2 m`` intervals; each is a two-sided Clopper-Pearson interval
  at level ``1 - (1 - confidence) / (2 m)`` (Bonferroni), so all of them cover at once with
  probability at least ``confidence``. Both directions reuse the same intervals.
* the family of events must not be chosen by looking at the samples the decision uses
  (otherwise the "worst" event is a selection effect and Bonferroni over it means nothing).
  Either pass a fixed, data-independent list of events (``point_and_tail_events`` over a
  support known in advance, or hand-written events), or let ``audit`` build candidates
  itself: it then splits each sample, builds every point event ``{out == v}`` and every
  tail event ``{out <= v}``, ``{out >= v}`` over the values seen in the first part (the
  selection part), keeps the ``max_events`` most telling ones there, and decides on the
  second part only, with Bonferroni over the events it kept.

The audit also reports the strongest evidence it found as a privacy-loss lower bound
``eps_lower = ln((lower(P[E|D]) - delta) / upper(P[E|D']))`` (leak proven iff ``eps_lower >
eps``) and the point estimate ``ln(p_hat(E|D) / p_hat(E|D'))`` of the same event, which for a
tight pair is close to ``eps`` for the real mechanism and well above it for a broken one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

__all__ = [
    "Event",
    "AuditResult",
    "clopper_pearson",
    "point_and_tail_events",
    "candidate_events",
    "mask_event",
    "audit",
    "assert_no_leak",
    "assert_leak",
    "leak_power",
    "leak_power_sizes",
    "chisquare_gof",
    "assert_variance",
    "merge_tail_bins",
]

DEFAULT_CONFIDENCE = 1 - 1e-6  # family-wise: a correct mechanism fails at most once in a million runs


# -- exact binomial confidence bounds --------------------------------------------------------


def clopper_pearson(k: int, n: int, confidence: float) -> tuple[float, float]:
    """The exact (Clopper-Pearson) two-sided interval for a binomial proportion.

    ``k`` successes out of ``n`` trials; each side misses with probability at most
    ``(1 - confidence) / 2``. Uses the beta quantiles: lower = Beta(k, n - k + 1).ppf(a / 2)
    (0 when k = 0), upper = Beta(k + 1, n - k).ppf(1 - a / 2) (1 when k = n).
    """
    if not 0 <= k <= n or n <= 0:
        raise ValueError(f"need 0 <= k <= n and n > 0, got k={k}, n={n}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence ({confidence!r}) must be in (0, 1)")
    alpha = 1 - confidence
    lower = 0.0 if k == 0 else float(stats.beta.ppf(alpha / 2, k, n - k + 1))
    upper = 1.0 if k == n else float(stats.beta.ppf(1 - alpha / 2, k + 1, n - k))
    return lower, upper


# -- events ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    """A set of outputs: ``{out == value}``, ``{out <= value}``, ``{out >= value}`` or any mask.

    ``kind`` is "==", "<=", ">=" (over 1-D numeric outputs, or "==" over whole rows of 2-D
    outputs) or "mask" (``fn(outputs)`` returns a boolean mask).
    """

    name: str
    kind: str
    value: object = None
    fn: Callable[[np.ndarray], np.ndarray] | None = field(default=None, compare=False)


def mask_event(name: str, fn: Callable[[np.ndarray], np.ndarray]) -> Event:
    """An event given by a function from the outputs array to a boolean mask."""
    return Event(name, "mask", None, fn)


def point_and_tail_events(values: Sequence, tails: bool = True) -> list[Event]:
    """Every ``{out == v}`` and (with ``tails``) ``{out <= v}``, ``{out >= v}`` for ``v`` in values.

    Pass a support known in advance (e.g. ``range(k + 1)`` for an index output) to get a
    data-independent family; ``audit`` then uses all samples for the decision.
    """
    events = [Event(f"out == {v!r}", "==", v) for v in values]
    if tails:
        events += [Event(f"out <= {v!r}", "<=", v) for v in values]
        events += [Event(f"out >= {v!r}", ">=", v) for v in values]
    return events


def _row_keys(outputs: np.ndarray) -> np.ndarray:
    """Rows of a 2-D array as one opaque (bytes) key each, so equal rows compare equal."""
    array = np.ascontiguousarray(outputs)
    return array.view(np.dtype((np.void, array.dtype.itemsize * array.shape[1]))).ravel()


def candidate_events(outputs: np.ndarray, tails: bool = True) -> list[Event]:
    """Point events for every distinct output seen (rows for 2-D outputs) and, for 1-D numeric
    outputs with ``tails``, both tail events at each of them. Data-dependent: build them from
    samples that the decision does not use."""
    outputs = np.asarray(outputs)
    if outputs.ndim == 2:
        keys, first = np.unique(_row_keys(outputs), return_index=True)
        return [Event(f"out == {tuple(outputs[i].tolist())}", "==", key) for key, i in zip(keys, first)]
    values = np.unique(outputs)
    numeric = np.issubdtype(values.dtype, np.number) or values.dtype == bool
    return point_and_tail_events(values.tolist(), tails=tails and numeric)


class _Counter:
    """Counts of events over one sample, fast for point and tail events (sorting once)."""

    def __init__(self, outputs: np.ndarray):
        self.outputs = np.asarray(outputs)
        self.n = int(self.outputs.shape[0])
        if self.outputs.ndim == 2:
            self.sorted = np.sort(_row_keys(self.outputs))
        else:
            self.sorted = np.sort(self.outputs)

    def count(self, event: Event) -> int:
        if event.kind == "mask":
            return int(np.count_nonzero(event.fn(self.outputs)))
        value = event.value
        if event.kind == "==":
            if self.outputs.ndim == 2 and not isinstance(value, np.void):
                value = _row_keys(np.asarray([value], dtype=self.outputs.dtype))[0]
            left = np.searchsorted(self.sorted, value, side="left")
            right = np.searchsorted(self.sorted, value, side="right")
            return int(right - left)
        if event.kind == "<=":
            return int(np.searchsorted(self.sorted, value, side="right"))
        if event.kind == ">=":
            return self.n - int(np.searchsorted(self.sorted, value, side="left"))
        raise ValueError(f"unknown event kind {event.kind!r}")


# -- the audit ---------------------------------------------------------------------------------


@dataclass
class AuditResult:
    """The outcome of an audit and the most telling event it found.

    ``direction`` is "D/D'" when the event is more likely under D (then ``k_num``/``n_num``
    are D's counts) and "D'/D" otherwise. ``eps_lower`` is the privacy loss that the samples
    prove (-inf when nothing is proven); ``eps_hat`` the point estimate for the same event.
    """

    leak: bool
    eps: float
    delta: float
    confidence: float
    n_events: int
    event: str
    direction: str
    k_num: int
    n_num: int
    k_den: int
    n_den: int
    lower_num: float
    upper_den: float
    eps_lower: float
    eps_hat: float
    worst_hat: tuple[str, str, float] | None = None  # the largest point estimate among well-sampled events

    def __str__(self) -> str:
        verdict = "LEAK PROVEN" if self.leak else "no leak proven"
        p_num = self.k_num / self.n_num
        p_den = self.k_den / self.n_den
        bound = math.exp(self.eps) * self.upper_den + self.delta
        text = (
            f"{verdict} at eps={self.eps:g}, delta={self.delta:g} (family-wise confidence {self.confidence}, "
            f"{self.n_events} events, Bonferroni); most telling event {self.event!r} [{self.direction}]: "
            f"{self.k_num}/{self.n_num} = {p_num:.5g} (CP lower {self.lower_num:.5g}) vs "
            f"{self.k_den}/{self.n_den} = {p_den:.5g} (CP upper {self.upper_den:.5g}); "
            f"lower {self.lower_num:.5g} {'>' if self.leak else '<='} e^eps * upper + delta = {bound:.5g}; "
            f"proven loss >= {self.eps_lower:.4g}, estimated loss {self.eps_hat:.4g} (eps = {self.eps:g})"
        )
        if self.worst_hat is not None:
            name, direction, value = self.worst_hat
            text += f"; largest estimated loss {value:.4g} at {name!r} [{direction}]"
        return text


def _log_ratio(a: float, b: float) -> float:
    if a <= 0:
        return -math.inf
    if b <= 0:
        return math.inf
    return math.log(a / b)


def _split(outputs: np.ndarray, fraction: float) -> tuple[np.ndarray, np.ndarray]:
    cut = int(round(len(outputs) * fraction))
    return outputs[:cut], outputs[cut:]


def _select_events(
    sel_d: np.ndarray, sel_dp: np.ndarray, eps: float, delta: float, tails: bool, max_events: int
) -> list[Event]:
    """The ``max_events`` candidates (from the selection samples) with the strongest evidence
    of a leak there, in either direction: ranked by the privacy loss proven at a lax
    per-event confidence (0.9), then by the estimated loss."""
    both = np.concatenate([sel_d, sel_dp])
    events = candidate_events(both, tails=tails)
    counter_d, counter_dp = _Counter(sel_d), _Counter(sel_dp)
    scored = []
    for event in events:
        k1, k2 = counter_d.count(event), counter_dp.count(event)
        lo1, hi1 = clopper_pearson(k1, counter_d.n, 0.8)
        lo2, hi2 = clopper_pearson(k2, counter_dp.n, 0.8)
        proven = max(_log_ratio(lo1 - delta, hi2), _log_ratio(lo2 - delta, hi1))
        estimated = max(_log_ratio(k1 / counter_d.n - delta, k2 / counter_dp.n),
                        _log_ratio(k2 / counter_dp.n - delta, k1 / counter_d.n))
        scored.append((proven, estimated, event))
    scored.sort(key=lambda item: (item[0], min(item[1], 1e300)), reverse=True)
    return [event for _, _, event in scored[:max_events]]


def audit(
    outputs_d,
    outputs_dp,
    eps: float,
    delta: float = 0.0,
    events: Sequence[Event] | None = None,
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    selection_fraction: float = 0.2,
    max_events: int = 20,
    tails: bool = True,
    min_count: int = 30,
) -> AuditResult:
    """Decide whether the samples prove that (eps, delta)-DP fails on this pair (D, D').

    ``outputs_d`` and ``outputs_dp`` are arrays of outputs of the mechanism on D and on D'
    (independent runs; 1-D numeric, or 2-D with one output tuple per row). With ``events``
    (a data-independent family) all samples decide. Without, the first
    ``selection_fraction`` of each sample picks up to ``max_events`` candidate point/tail
    events and the rest decides (see the module docstring). Either way every event is
    checked in both directions with Clopper-Pearson bounds at a Bonferroni-corrected level,
    so that a DP mechanism is flagged with probability at most ``1 - confidence``.

    Returns the most telling event (largest proven loss, then largest estimate) with its
    counts and bounds; ``worst_hat`` is the largest point estimate among events seen at least
    ``min_count`` times under both inputs (a readable "measured ratio").
    """
    outputs_d, outputs_dp = np.asarray(outputs_d), np.asarray(outputs_dp)
    if events is None:
        sel_d, outputs_d = _split(outputs_d, selection_fraction)
        sel_dp, outputs_dp = _split(outputs_dp, selection_fraction)
        events = _select_events(sel_d, sel_dp, eps, delta, tails, max_events)
    events = list(events)
    if not events:
        raise ValueError("no events to audit")
    per_interval = 1 - (1 - confidence) / (2 * len(events))
    counter_d, counter_dp = _Counter(outputs_d), _Counter(outputs_dp)
    exp_eps = math.exp(eps)
    best = None
    worst_hat = None
    for event in events:
        k1, k2 = counter_d.count(event), counter_dp.count(event)
        lo1, hi1 = clopper_pearson(k1, counter_d.n, per_interval)
        lo2, hi2 = clopper_pearson(k2, counter_dp.n, per_interval)
        for direction, (k_num, n_num, lo_num), (k_den, n_den, hi_den) in (
            ("D/D'", (k1, counter_d.n, lo1), (k2, counter_dp.n, hi2)),
            ("D'/D", (k2, counter_dp.n, lo2), (k1, counter_d.n, hi1)),
        ):
            leak = lo_num > exp_eps * hi_den + delta
            eps_lower = _log_ratio(lo_num - delta, hi_den)
            eps_hat = _log_ratio(k_num / n_num - delta, k_den / n_den)
            key = (leak, eps_lower, min(eps_hat, 1e300))
            if best is None or key > best[0]:
                best = (key, AuditResult(
                    leak, eps, delta, confidence, len(events), event.name, direction,
                    k_num, n_num, k_den, n_den, lo_num, hi_den, eps_lower, eps_hat,
                ))
            if min(k_num, k_den) >= min_count and (worst_hat is None or eps_hat > worst_hat[2]):
                worst_hat = (event.name, direction, eps_hat)
    result = best[1]
    result.worst_hat = worst_hat
    return result


def assert_no_leak(result: AuditResult, label: str = "") -> None:
    """Fail, printing the most telling event and its bounds, when the audit proved a leak."""
    assert not result.leak, f"{label}: privacy violation proven: {result}"


def assert_leak(result: AuditResult, label: str = "") -> None:
    """Fail when the audit did not prove the leak it was meant to catch (a test with no teeth)."""
    assert result.leak, f"{label}: the audit missed a broken mechanism: {result}"


# -- power: how many runs an audit needs --------------------------------------------------------


def leak_power(p: float, q: float, n: int, eps: float, n_events: int, delta: float = 0.0,
               confidence: float = DEFAULT_CONFIDENCE) -> float:
    """The exact probability that ``audit`` proves a leak on one event with P[E|D] = ``p`` and
    P[E|D'] = ``q`` from ``n`` runs per input, with ``n_events`` events in the family.

    The counts are k ~ Bin(n, p) and l ~ Bin(n, q), independent; the event proves a leak when
    lower(k) > e^eps * upper(l) + delta, both Clopper-Pearson bounds at the audit's
    Bonferroni level 1 - (1 - confidence) / (2 n_events). Sums over l of P(l) * P(k >= the
    smallest k that proves it). Since the audit proves a leak when any event of its family
    does, this is a lower bound on its power for a family containing the event (for an audit
    that selects its events, on the decision part, if the selection keeps this event).
    """
    alpha = (1 - confidence) / (2 * n_events)  # 1 - the per-interval level
    # only counts with a chance above 1e-13 matter (the rest changes the power by less than 1e-12)
    ls = np.arange(*(stats.binom.ppf([1e-13, 1 - 1e-13], n, q).astype(int) + [0, 1]))
    ks = np.arange(*(stats.binom.ppf([1e-13, 1 - 1e-13], n, p).astype(int) + [0, 1]))
    upper = np.where(ls < n, stats.beta.ppf(1 - alpha / 2, ls + 1, np.maximum(n - ls, 1)), 1.0)
    lower = np.where(ks > 0, stats.beta.ppf(alpha / 2, np.maximum(ks, 1), n - ks + 1), 0.0)  # increasing
    smallest = np.searchsorted(lower, math.exp(eps) * upper + delta, side="right")  # first k that proves it
    tail = np.append(stats.binom.sf(ks - 1, n, p), 0.0)  # P(k >= ks[j]); 0 past the last
    return float(np.dot(stats.binom.pmf(ls, n, q), tail[smallest]))


def leak_power_sizes(p: float, q: float, n_num: int, n_den: int, eps: float, n_events: int, delta: float = 0.0,
                     confidence: float = DEFAULT_CONFIDENCE) -> float:
    """``leak_power`` with a different number of runs on each input: ``n_num`` on the input
    where the event is more likely (probability ``p``), ``n_den`` on the other (``q``).

    A rare event's upper bound on the second input, times e^eps, is what a leak must beat, and
    when ``q`` is small that bound is set by the count there (about -ln(alpha) / n_den when it
    is 0): an audit of such an event gains more from runs on that input than on the first,
    whose proportion is large and well estimated with fewer. Same sums as ``leak_power``
    (which is this function with ``n_num == n_den``).
    """
    alpha = (1 - confidence) / (2 * n_events)  # 1 - the per-interval level
    ls = np.arange(*(stats.binom.ppf([1e-13, 1 - 1e-13], n_den, q).astype(int) + [0, 1]))
    ks = np.arange(*(stats.binom.ppf([1e-13, 1 - 1e-13], n_num, p).astype(int) + [0, 1]))
    upper = np.where(ls < n_den, stats.beta.ppf(1 - alpha / 2, ls + 1, np.maximum(n_den - ls, 1)), 1.0)
    lower = np.where(ks > 0, stats.beta.ppf(alpha / 2, np.maximum(ks, 1), n_num - ks + 1), 0.0)  # increasing
    smallest = np.searchsorted(lower, math.exp(eps) * upper + delta, side="right")  # first k that proves it
    tail = np.append(stats.binom.sf(ks - 1, n_num, p), 0.0)  # P(k >= ks[j]); 0 past the last
    return float(np.dot(stats.binom.pmf(ls, n_den, q), tail[smallest]))


# -- goodness of fit ---------------------------------------------------------------------------


def merge_tail_bins(expected: np.ndarray, min_expected: float) -> tuple[int, int]:
    """Indices ``(lo, hi)`` such that bins ``[0, lo]`` and ``[hi, end]`` merged into two tail
    bins, and every bin in between, have an expected count of at least ``min_expected``."""
    cumulative = np.cumsum(expected)
    lo = int(np.searchsorted(cumulative, min_expected))
    reverse = np.cumsum(expected[::-1])
    hi = len(expected) - 1 - int(np.searchsorted(reverse, min_expected))
    while lo < hi and expected[lo + 1 : hi].size and expected[lo + 1 : hi].min() < min_expected:
        # a thin bin in the middle (not expected for unimodal pmfs): widen the tails
        lo, hi = lo + 1, hi - 1
    if lo >= hi:
        raise ValueError("too few samples for a chi-square test with these bins")
    return lo, hi


def chisquare_gof(samples, support: np.ndarray, pmf: np.ndarray, min_expected: float = 20.0):
    """Pearson's chi-square test of integer ``samples`` against ``pmf`` over ``support``.

    ``support`` is a sorted run of consecutive integers covering all but a negligible mass
    (``pmf`` is renormalized over it); the bins below and above it go into the tail bins, which
    are widened until each bin's expected count is at least ``min_expected``. Returns
    ``(statistic, p_value, n_bins)``.
    """
    samples = np.asarray(samples)
    support = np.asarray(support)
    pmf = np.asarray(pmf, dtype=float) / np.sum(pmf)
    n = samples.size
    expected = n * pmf
    lo, hi = merge_tail_bins(expected, min_expected)
    index = np.clip(samples - support[0], 0, len(support) - 1)  # out of range: into the tail bins
    counts = np.bincount(index, minlength=len(support)).astype(float)
    observed = np.concatenate([[counts[: lo + 1].sum()], counts[lo + 1 : hi], [counts[hi:].sum()]])
    expect = np.concatenate([[expected[: lo + 1].sum()], expected[lo + 1 : hi], [expected[hi:].sum()]])
    statistic, p_value = stats.chisquare(observed, expect)
    return float(statistic), float(p_value), len(observed)


def assert_variance(samples, support: np.ndarray, pmf: np.ndarray, z: float = 5.5, label: str = "") -> None:
    """The sample variance matches the variance of ``pmf`` within ``z`` standard errors.

    The standard error of the sample variance is sqrt((mu4 - sigma^4) / n) (large n), with
    the central moments mu4 and sigma^2 of the theoretical distribution.
    """
    samples = np.asarray(samples, dtype=float)
    pmf = np.asarray(pmf, dtype=float) / np.sum(pmf)
    support = np.asarray(support, dtype=float)
    mean = float(np.dot(pmf, support))
    var = float(np.dot(pmf, (support - mean) ** 2))
    mu4 = float(np.dot(pmf, (support - mean) ** 4))
    n = samples.size
    se = math.sqrt((mu4 - var**2) / n)
    sample_var = float(samples.var(ddof=1))
    assert abs(sample_var - var) <= z * se, (
        f"{label}: sample variance {sample_var:.6g} vs theory {var:.6g}: off by "
        f"{(sample_var - var) / se:+.2f} standard errors (se {se:.3g}, n {n}, tolerance {z})"
    )
