"""Statistical privacy test of a whole PMW run (``synth.engines.pmw.PMW``) on a tiny universe.

PMW releases a transcript: for each query of the stream its round kind (lazy, update,
halted) and its released value (lazy and halted answers are functions of the public model,
update answers are noisy counts). The run's privacy loss is what its accountant reports,
never more than the plan's epsilon. Here PMW is run many times on a pair of neighbouring
datasets, and ``privacy_audit.audit`` checks P[E | D] <= e^eps P[E | D'] for a fixed,
data-independent family of sets E of whole transcripts, in both directions, with exact
Clopper-Pearson bounds (family-wise confidence 1 - 1e-6, Bonferroni over the events), at
eps = the largest total the accountants report.

Design (everything exact: integer counts, dyadic epsilons, model counts and threshold on the
integers, so the law of the transcript can be computed in closed form):

* universe a x b = {0,1} x {0,1} (|U| = 4), n = 8 public (the plan's ``rows``: an input of
  the mechanism, the same for D and D'), uniform start: every query below has model count
  8 * 1/2 = 4;
* D = (0,0) x2, (0,1) x3, (1,1) x3; D' = D plus one row (0,0) (add/remove neighbours);
* queries A = "a = 0" (D: 5, D': 6, errors 1 and 2) and B = "b = 0" (D: 2, D': 3, errors 2
  and 1); threshold T = 2 rows (fraction 1/4), L = 1 update, so one epoch: an AboveThreshold
  run on the errors, then one measurement, then halted answers from D_1;
* stream A x7, B, A, B (10 queries): in D the seven A errors are T - 1 and the B error is T, in
  D' the other way round: the tight AboveThreshold pair of test_privacy (the noisy threshold
  pushed up by seven low errors, then one high one), followed by the measurement of B.

A transcript is a function of (position of the update, its measured value) (checked on the
samples: lazy answers are the uniform model's, the halted ones follow from the update's
sign), so the events are: "the first j rounds are lazy" (j = 1..10, j = 10: no update),
"the update is at position i", and "the update is at i with value <= v" / ">= v" for v in
0..9 (220 events).

Plans (hand-made ``PMWPlan``s, one epoch of eps_test + eps_measure), with exact losses
(``exact_law``; a loss is ln(P[E|D] / P[E|D']) for the event named):

* ``tight``: eps_test = 2.5, eps_measure = 0.25 (eps = 2.75). Real mechanism: worst loss over
  the family 0.986 eps, at "update at round 8 (B), value <= 2" (P = 0.0204 vs 0.00135): the
  AboveThreshold part, 0.985 eps_test, plus the measurement tail, exactly eps_measure.
  Broken, without threshold noise: the lazy rounds become independent comparisons, each
  with ratio e^(eps_test / 4), so the loss grows with their number: 1.91 eps on the same
  event (0.0182 vs 9.6e-5), 1.59 eps on "rounds 1..7 lazy" (0.0497 vs 6.3e-4), which the
  real mechanism keeps at 0.45 eps (0.100 vs 0.029). Caught with 30,000 runs per input.
* ``measure_heavy``: eps_test = 0.25, eps_measure = 2 (eps = 2.25). Real: worst 0.995 eps
  ("update at round 8, value <= 1", 0.00147 vs 1.6e-4), and 0.91 eps on the likely event
  "update at round 1, value >= 6" (D'/D: 0.450 vs 0.058). Broken, measurement noise scale
  halved (drawn with 2 eps_measure, charged as eps_measure): 1.80 eps on that event
  (0.501 vs 0.0088), caught with 2,000 runs per input.

Sizes (runs per input, the real mechanism at the same size as its broken variant; a real
mechanism is flagged with probability at most 1e-6 whatever the size):

* ``tight``: no single event is enough (``leak_power`` of "rounds 1..7 lazy" is 0.971 at
  25,000), so the audit was simulated on the exact law (multinomial counts over (position,
  value), all 220 events): caught in 19,797 of 20,000 audits at 25,000 runs (0.990), 39,968
  of 40,000 at 28,000 and 19,997 of 20,000 at 30,000 (0.99985): 30,000 (was 25,000).
* ``measure_heavy``: "update at round 1, value >= 6" alone gives leak_power 0.999998 at 2,000
  (0.68 at 1,000): 2,000 (was 4,000 for the real mechanism, 3,000 for the broken one).
  Simulated, the real mechanism's largest estimated loss stays above 0.84 eps at 2,000.

The samples are also checked against the exact law (each event's exact probability inside
its Bonferroni Clopper-Pearson interval), which shows that the exact losses above are those
of the library's code, and that the broken variants really are broken as described. Every
generator is seeded, so the outcomes are deterministic.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pytest

import synth.engines.pmw
from synth.privacy.accounting import compose
from synth.privacy.mechanisms import AboveThreshold, discrete_laplace, laplace_ratio
from synth.engines.pmw import HALTED, LAZY, PMW, UPDATE
from synth.engines.pmw_plan import PMWPlan, _epoch_charges
from synth.data.schema import Coded, Schema
from synth.data.tables import marginal
from synth.data.workload import Workload

from .privacy_audit import DEFAULT_CONFIDENCE, assert_leak, assert_no_leak, audit, clopper_pearson, mask_event


def _rng(*key: int) -> np.random.Generator:
    """A seeded generator per test and input (different streams for D and D')."""
    return np.random.default_rng([20261121, 90, *key])


# =============================================================================================
# The design: schema, neighbouring datasets, stream, plans
# =============================================================================================

SCHEMA = Schema((Coded("a", 2), Coded("b", 2)))
ROWS = 8
D = np.array([(0, 0)] * 2 + [(0, 1)] * 3 + [(1, 1)] * 3, dtype=np.uint8)
D_PRIME = np.concatenate([D, np.array([(0, 0)], dtype=np.uint8)])  # D plus one row
DATASETS = (D, D_PRIME)

QUERIES = Workload.from_dict(
    {"queries": [{"name": "A", "where": {"a": 0}}, {"name": "B", "where": {"b": 0}}]}, SCHEMA)
STREAM = Workload(SCHEMA, [QUERIES[i] for i in [0] * 7 + [1] + [0, 1]])
K = len(STREAM)
LABELS = [STREAM.describe(i) for i in range(K)]  # each query's label, worked out once for all runs
THRESHOLD = 0.25  # T = 2 rows


def make_plan(epsilon_test: float, epsilon_measure: float) -> PMWPlan:
    """One epoch (L = 1) at threshold T = 2 rows with the given budget split."""
    return PMWPlan(
        epsilon=epsilon_test + epsilon_measure, delta=0.0, beta=0.05, rows=float(ROWS), rows_public=True,
        universe_size=SCHEMA.universe_size, queries=K, threshold=THRESHOLD, updates=1, eta=THRESHOLD / 4,
        epsilon_test=epsilon_test, epsilon_measure=epsilon_measure, epsilon_count=0.0, alpha=1.5 * THRESHOLD,
        failure_bound=1.0, composition="basic",
    )


PLANS = {"tight": make_plan(2.5, 0.25), "measure_heavy": make_plan(0.25, 2.0)}


def true_count(codes: np.ndarray, query) -> int:
    return int(marginal(codes, SCHEMA, query.columns)[np.ix_(*query.allowed)].sum())


def test_design_is_valid():
    """D and D' are neighbours (one row added), the plans fit their budgets under the
    accountant's own composition, the numbers are exact (model counts, threshold, noise
    parameters), and the errors are the tight AboveThreshold pair."""
    assert len(D_PRIME) == len(D) + 1 and np.array_equal(D_PRIME[: len(D)], D)
    for plan in PLANS.values():
        total = compose(_epoch_charges(plan.epsilon_test, plan.epsilon_measure, plan.updates, 0.0), 0.0)
        assert total.epsilon <= plan.epsilon and total.method == "basic"
        assert plan.threshold_count == 2.0
        for eps in (plan.epsilon_test / 2, plan.epsilon_test / 4, plan.epsilon_measure, 2 * plan.epsilon_measure):
            s, t = laplace_ratio(eps)
            assert Fraction(s, t) == Fraction(eps)  # the library's noise is exactly DLap(eps)
    fresh = PMW(D, SCHEMA, PLANS["tight"], rng=0)
    assert [fresh.model_answer(q) for q in QUERIES] == [4.0, 4.0]
    errors = [[abs(true_count(codes, q) - 4) for q in STREAM] for codes in DATASETS]
    assert errors == [[1] * 7 + [2, 1, 2], [2] * 7 + [1, 2, 1]]


# =============================================================================================
# Sampling whole runs
# =============================================================================================


class Transcripts:
    """Whole-run transcripts (tuples of (round, value)) of both inputs, as ids into one table."""

    def __init__(self):
        self.ids: dict[tuple, int] = {}
        self.table: list[tuple] = []

    def add(self, transcript: tuple) -> int:
        index = self.ids.get(transcript)
        if index is None:
            index = self.ids[transcript] = len(self.table)
            self.table.append(transcript)
        return index

    def features(self) -> tuple[np.ndarray, np.ndarray]:
        """Per transcript id: the position of the update (K if none) and its released value
        (0 if none). Checks that the transcripts have PMW's shape for L = 1 (lazy rounds
        answered by the uniform model, one update with an integer value, then halted) and
        that (position, value) determines the whole transcript, so that sets of
        (position, value) are sets of whole transcripts."""
        first = np.full(len(self.table), K, dtype=np.int64)
        value = np.zeros(len(self.table), dtype=np.int64)
        seen: dict[tuple[int, int], tuple] = {}
        for index, transcript in enumerate(self.table):
            rounds = [r for r, _ in transcript]
            position = rounds.index(UPDATE) if UPDATE in rounds else K
            assert rounds == [LAZY] * position + [UPDATE] * (position < K) + [HALTED] * (K - position - 1), rounds
            assert all(v == 4.0 for _, v in transcript[:position]), transcript
            if position < K:
                released = transcript[position][1]
                assert float(released).is_integer(), transcript
                first[index], value[index] = position, int(released)
            key = (int(first[index]), int(value[index]))
            assert seen.setdefault(key, transcript) == transcript, (key, transcript, seen[key])
        return first, value


def _sample(codes, plan, n, rng, transcripts: Transcripts) -> tuple[np.ndarray, float]:
    """``n`` whole PMW runs over STREAM: their transcript ids, and the largest total privacy
    loss their accountants reported."""
    out = np.empty(n, dtype=np.int64)
    worst = 0.0
    for r in range(n):
        pmw = PMW(codes, SCHEMA, plan, rng)
        answers = [pmw.answer(q, query_id=i, label=LABELS[i]) for i, q in enumerate(STREAM)]
        out[r] = transcripts.add(tuple((a.round, a.value) for a in answers))
        worst = max(worst, pmw.accountant.spent().epsilon)
    return out, worst


class AboveThresholdWithoutThresholdNoise(AboveThreshold):
    """Broken: the threshold is not noisy (its noise set to 0 once drawn); the query noise,
    the exact comparison and the charge to the accountant are the library's."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._threshold_noise = 0


def discrete_laplace_half_noise(counts, epsilon, sensitivity=1, rng=None, *, accountant=None, note=""):
    """Broken: the noise is drawn with 2 epsilon (half the scale) but charged as epsilon."""
    if accountant is not None:
        accountant.check(epsilon)
    noisy = discrete_laplace(counts, 2 * epsilon, sensitivity, rng)
    if accountant is not None:
        accountant.spend(epsilon, mechanism="discrete_laplace", note=note)
    return noisy


VARIANTS = {
    "real": {},
    "no_threshold_noise": {"AboveThreshold": AboveThresholdWithoutThresholdNoise},
    "half_measurement_noise": {"discrete_laplace": discrete_laplace_half_noise},
}


@contextlib.contextmanager
def _variant(name: str):
    """Patch ``synth.engines.pmw`` with a broken part for the duration (in this process only)."""
    patches = VARIANTS[name]
    saved = {attribute: getattr(synth.engines.pmw, attribute) for attribute in patches}
    try:
        for attribute, replacement in patches.items():
            setattr(synth.engines.pmw, attribute, replacement)
        yield
    finally:
        for attribute, original in saved.items():
            setattr(synth.engines.pmw, attribute, original)


def _sample_job(job) -> tuple[list[tuple], np.ndarray, float]:
    """One input's runs (a top-level function, so that a worker process can run it)."""
    dataset, plan_name, variant, n, key = job
    transcripts = Transcripts()
    with _variant(variant):
        ids, worst = _sample(DATASETS[dataset], PLANS[plan_name], n, _rng(*key, dataset), transcripts)
    return transcripts.table, ids, worst


def _map(function, jobs):
    """Run the jobs here, one after the other (each has its own seeded generator). Forking
    workers would halve the time, but a fork after Numba's thread pool has started is not
    safe with every threading layer."""
    return [function(job) for job in jobs]


def sample_pair(plan_name: str, variant: str, n: int, key: tuple[int, ...]):
    """``n`` runs on D and on D': the transcript ids of each (into one shared table), the
    table's features (update position, value), and the largest total privacy loss any
    accountant reported (checked against the plan's epsilon)."""
    results = _map(_sample_job, [(dataset, plan_name, variant, n, key) for dataset in range(len(DATASETS))])
    merged = Transcripts()
    outputs = []
    for table, ids, _ in results:
        remap = np.array([merged.add(transcript) for transcript in table], dtype=np.int64)
        outputs.append(remap[ids])
    eps = max(worst for _, _, worst in results)
    plan = PLANS[plan_name]
    assert eps <= plan.epsilon, f"an accountant reported epsilon={eps} > the plan's {plan.epsilon}"
    return outputs, merged.features(), eps


# =============================================================================================
# Events and the exact law of a transcript
# =============================================================================================


def _dlap_ge(p: float, m: np.ndarray) -> np.ndarray:
    """P(Z >= m) for discrete Laplace Z with P(z) ~ p^|z|."""
    m = np.asarray(m, dtype=float)
    upper = p ** np.maximum(m, 1) / (1 + p)
    lower = 1 - p ** np.maximum(1 - m, 1) / (1 + p)
    return np.where(m >= 1, upper, lower)


@dataclass(frozen=True)
class Law:
    """The exact law of a transcript: P(update at position i), i = 0..K-1, and P(no update)
    at index K; the true counts of the stream's queries; the measurement noise parameter."""

    first: np.ndarray
    counts: tuple[int, ...]
    p_measure: float

    def value_le(self, position: int, v: int) -> float:
        """P(released value <= v | update at ``position``)."""
        return float(1 - _dlap_ge(self.p_measure, v - self.counts[position] + 1))


def exact_law(codes, plan, *, threshold_noise=True, measure_multiple=1.0) -> Law:
    """The transcript's law for one epoch: threshold noise rho ~ DLap(eps_test / 2) (or 0),
    query noise nu ~ DLap(eps_test / 4), "above" iff nu >= rho - (error - T) (the library's
    half-step rule on integers), measurement noise DLap(measure_multiple * eps_measure)."""
    counts = tuple(true_count(codes, q) for q in STREAM)
    gaps = [abs(c - 4) - plan.threshold_count for c in counts]
    assert all(float(g).is_integer() for g in gaps)
    p_test = math.exp(-plan.epsilon_test / 4)
    if threshold_noise:
        p_threshold = math.exp(-plan.epsilon_test / 2)
        width = math.ceil(80 / (plan.epsilon_test / 2))
        rho = np.arange(-width, width + 1)
        survive = (1 - p_threshold) / (1 + p_threshold) * p_threshold ** np.abs(rho)
    else:
        rho, survive = np.zeros(1), np.ones(1)
    first = np.zeros(K + 1)
    for i, gap in enumerate(gaps):
        above = _dlap_ge(p_test, rho - gap)
        first[i] = np.dot(survive, above)
        survive = survive * (1 - above)
    first[K] = survive.sum()
    return Law(first, counts, math.exp(-measure_multiple * plan.epsilon_measure))


@dataclass(frozen=True)
class TranscriptEvent:
    """A set of whole transcripts, given through (update position, released value)."""

    kind: str  # "lazy": the first ``position`` rounds are lazy; "update": the update is at
    # ``position``; "update<=" / "update>=": ... with released value <= / >= ``value``
    position: int
    value: int = 0

    @property
    def name(self) -> str:
        if self.kind == "lazy":
            return f"rounds 1..{self.position} lazy"
        text = f"update at round {self.position + 1}"
        return text if self.kind == "update" else f"{text}, value {self.kind[-2:]} {self.value}"

    def mask(self, first: np.ndarray, value: np.ndarray) -> np.ndarray:
        if self.kind == "lazy":
            return first >= self.position
        at = first == self.position
        if self.kind == "update":
            return at
        return at & (value <= self.value if self.kind == "update<=" else value >= self.value)

    def probability(self, law: Law) -> float:
        if self.kind == "lazy":
            return float(law.first[self.position:].sum())
        p = float(law.first[self.position])
        if self.kind == "update<=":
            return p * law.value_le(self.position, self.value)
        if self.kind == "update>=":
            return p * (1 - law.value_le(self.position, self.value - 1))
        return p


VALUES = range(10)
EVENTS = (
    [TranscriptEvent("lazy", j) for j in range(1, K + 1)]
    + [TranscriptEvent("update", i) for i in range(K)]
    + [TranscriptEvent(kind, i, v) for kind in ("update<=", "update>=") for i in range(K) for v in VALUES]
)


def audit_events(features) -> list:
    """The family as ``privacy_audit`` events over transcript ids."""
    first, value = features
    return [mask_event(e.name, lambda ids, e=e: e.mask(first, value)[ids]) for e in EVENTS]


def exact_loss(law_d: Law, law_dp: Law) -> tuple[float, str]:
    """The largest ln(P[E|D] / P[E|D']) over the family and both directions, and its event."""
    best = (-math.inf, "")
    for event in EVENTS:
        p, q = event.probability(law_d), event.probability(law_dp)
        if p > 0 and q > 0:
            best = max(best, (abs(math.log(p / q)), event.name))
    return best


def assert_matches_law(outputs, features, laws, label: str) -> None:
    """Each event's exact probability lies in its Clopper-Pearson interval on both inputs
    (Bonferroni over all of them: a correct law fails with probability at most 1e-6)."""
    first, value = features
    level = 1 - (1 - DEFAULT_CONFIDENCE) / (2 * len(EVENTS))
    for ids, law, which in zip(outputs, laws, ("D", "D'")):
        for event in EVENTS:
            k = int(np.count_nonzero(event.mask(first, value)[ids]))
            lo, hi = clopper_pearson(k, len(ids), level)
            p = event.probability(law)
            assert lo <= p <= hi, f"{label} on {which}: {event.name}: {k}/{len(ids)} vs exact {p:.5g}"


# =============================================================================================
# The tests
# =============================================================================================

LAWS = {  # variant: keyword arguments of exact_law
    "real": {},
    "no_threshold_noise": {"threshold_noise": False},
    "half_measurement_noise": {"measure_multiple": 2.0},
}


def _laws(plan_name: str, variant: str) -> list[Law]:
    return [exact_law(codes, PLANS[plan_name], **LAWS[variant]) for codes in DATASETS]


@pytest.mark.parametrize("plan_name,variant,low,high", [
    ("tight", "real", 0.98, 1.0),
    ("measure_heavy", "real", 0.98, 1.0),
    ("tight", "no_threshold_noise", 1.5, math.inf),
    ("measure_heavy", "half_measurement_noise", 1.5, math.inf),
])
def test_exact_losses(plan_name, variant, low, high):
    """On the exact law (no sampling): the real mechanism's worst loss over the event family
    is within [0.98, 1] eps (the pair is tight, and private), the broken ones' above 1.5 eps."""
    eps = PLANS[plan_name].epsilon
    loss, event = exact_loss(*_laws(plan_name, variant))
    assert low * eps <= loss <= high * eps, f"{plan_name}/{variant}: exact loss {loss / eps:.4f} eps at {event!r}"


RUNS = {"tight": 30_000, "measure_heavy": 2_000}  # runs per input, real and broken (see the module docstring)


@pytest.mark.parametrize("plan_name", [pytest.param("tight", marks=pytest.mark.slow), "measure_heavy"])
def test_pmw_run_is_private(plan_name):
    """The real PMW: no leak proven at the epsilon its accountants report (the plan's), and
    the transcripts follow the exact law (whose worst loss is 0.99 eps)."""
    plan = PLANS[plan_name]
    outputs, features, eps = sample_pair(plan_name, "real", RUNS[plan_name], (1, len(plan_name)))
    assert eps == plan.epsilon  # a run with an update spends exactly the plan
    result = audit(*outputs, eps, events=audit_events(features))
    assert_no_leak(result, f"PMW ({plan_name} plan)")
    assert_matches_law(outputs, features, _laws(plan_name, "real"), f"PMW ({plan_name} plan)")
    assert result.worst_hat is not None and result.worst_hat[2] > 0.75 * eps, str(result)


@pytest.mark.slow
def test_pmw_without_threshold_noise_is_caught():
    """Broken: every epoch's AboveThreshold without threshold noise (same budget charged).
    The same audit on the same pair and stream must prove the leak."""
    outputs, features, eps = sample_pair("tight", "no_threshold_noise", RUNS["tight"], (2,))
    assert eps == PLANS["tight"].epsilon
    assert_leak(audit(*outputs, eps, events=audit_events(features)), "PMW without threshold noise")
    assert_matches_law(outputs, features, _laws("tight", "no_threshold_noise"), "PMW without threshold noise")


def test_pmw_half_measurement_noise_is_caught():
    """Broken: the update's measurement drawn with half the noise scale, charged as
    eps_measure; caught on the measure-heavy plan."""
    outputs, features, eps = sample_pair("measure_heavy", "half_measurement_noise",
                                         RUNS["measure_heavy"], (3,))
    assert eps == PLANS["measure_heavy"].epsilon
    assert_leak(audit(*outputs, eps, events=audit_events(features)), "PMW with half the measurement noise")
    assert_matches_law(outputs, features, _laws("measure_heavy", "half_measurement_noise"),
                       "PMW with half the measurement noise")
