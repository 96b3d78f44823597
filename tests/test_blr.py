"""Tests of the BLR net mechanism (``synth.engines.blr``) and its exact-net kernels (``synth._kernels.net``).

* The kernels against brute force (``tests/reference.py``): ``score_exact_net`` scores every
  m-multiset in ``itertools.combinations_with_replacement`` order, ``_QueryCounts`` counts
  every query on batches of small databases, ``sample_exact_net`` visits every multiset once
  and resumes where it stopped.
* Exact mode's output law is the exponential mechanism's, P(y) proportional to
  exp(eps * score(y) / 2): chi-square goodness of fit on the kernel (many kernel states) and
  through ``blr``; a sampler with the wrong scale (eps instead of eps / 2) must fail the same
  test.
* Net sizes: ``NetTooLarge`` with the size and a hint; ``choose_net_size`` within ``max_net``,
  the bound's argmin, from public quantities only.
* Sampled mode: the candidates do not depend on the data (a spy on ``_QueryCounts.counts``
  sees the same candidates for two datasets of the same public n, and sees the difference
  when the candidate draw is made to peek), the chosen database is a candidate, seeded runs
  repeat, the prior's support holds, and the choice follows the exponential mechanism over
  the candidates drawn.
* Budget, utility at large epsilon, the model round trip, parameters.

Every statistical test is seeded, so the outcomes are deterministic; a correct sampler fails
a goodness-of-fit test with probability ``GOF_ALPHA``.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

import synth._kernels.net as net_kernels
import synth.engines.blr
from synth._kernels.net import sample_exact_net, score_exact_net
from synth.engines.blr import (
    DEFAULT_MAX_NET,
    NetTooLarge,
    _exact_bound,
    _QueryCounts,
    blr,
    choose_net_size,
    log_net_size,
    net_alpha,
    net_size_for_alpha,
)
from synth.privacy.rng import kernel_state
from synth.data.schema import Schema
from synth.data.tables import marginal, marginal_from_dense
from synth.data.workload import Workload

from .reference import (
    exponential_probabilities,
    multisets,
    net_query_counts,
    net_scores,
    query_count,
)

GOF_ALPHA = 1e-6  # a correct sampler fails a goodness-of-fit test with probability 1e-6


def _rng(*key: int) -> np.random.Generator:
    return np.random.default_rng([20261121, 77, *key])


# =============================================================================================
# Small random cases
# =============================================================================================


def random_schema(rng: np.random.Generator, max_universe: int = 12) -> Schema:
    """1 to 3 coded columns of 1 to 4 codes, at most ``max_universe`` cells."""
    while True:
        sizes = rng.integers(1, 5, size=int(rng.integers(1, 4)))
        if math.prod(sizes.tolist()) <= max_universe:
            return Schema.from_dict({f"c{i}": int(size) for i, size in enumerate(sizes)})


def random_condition(rng: np.random.Generator, size: int):
    """A scalar, a list or a range condition on a column of ``size`` codes."""
    kind = rng.integers(3)
    if kind == 0:
        return int(rng.integers(size))
    if kind == 1:
        picked = rng.choice(size, size=int(rng.integers(1, size + 1)), replace=False)
        return [int(v) for v in picked]
    lo = int(rng.integers(size))
    return {"range": [lo, int(rng.integers(lo, size))]}


def random_workload(rng: np.random.Generator, schema: Schema) -> Workload:
    """Some k-way marginals, the empty ("where": {}) query, and random conjunctions of scalars,
    lists and ranges (their "where" keys in a random order)."""
    queries = list(Workload.marginals(schema, int(rng.integers(1, len(schema) + 1))))
    items = [{"where": {}}]
    for _ in range(int(rng.integers(1, 5))):
        columns = [c for c in schema.names if rng.random() < 0.6]
        rng.shuffle(columns)
        items.append({"where": {c: random_condition(rng, schema[c].size) for c in columns}})
    queries += list(Workload.from_dict({"queries": items}, schema))
    order = rng.permutation(len(queries))
    return Workload(schema, [queries[i] for i in order])


def true_counts(codes: np.ndarray, schema: Schema, workload: Workload) -> np.ndarray:
    """Every query's count on the data, by brute force."""
    return np.array(
        [query_count(codes, [schema.index(c) for c in q.columns], list(q.allowed)) for q in workload],
        dtype=np.int64,
    )


def random_codes(rng: np.random.Generator, schema: Schema, rows: int) -> np.ndarray:
    return np.column_stack([rng.integers(0, size, size=rows) for size in schema.shape]).astype(np.int64)


# =============================================================================================
# The kernels and _QueryCounts against brute force
# =============================================================================================


@pytest.mark.parametrize("seed", range(12))
def test_score_exact_net_matches_brute_force(seed):
    """Every multiset's score, in enumeration order, equals -max_q |m x_q - n y_q| / m computed
    from the cells' codes, query by query (n differs from the data's size on purpose)."""
    rng = _rng(1, seed)
    schema = random_schema(rng)
    workload = random_workload(rng, schema)
    codes = random_codes(rng, schema, int(rng.integers(0, 15)))
    n_rows = int(rng.integers(1, 20))
    true = true_counts(codes, schema, workload)
    indicator = np.ascontiguousarray(_QueryCounts(schema, workload).indicator())
    for m in (1, 2, 3):
        nets = multisets(schema.universe_size, m)
        expected = net_scores(true, net_query_counts(schema, workload, nets), n_rows, m)
        scores = np.full(len(nets) + 1, np.nan)
        seen = score_exact_net(indicator, m * true, n_rows, m, scores)
        assert seen == len(nets) == math.comb(schema.universe_size + m - 1, m)
        np.testing.assert_array_equal(scores[:seen], expected)
        assert np.isnan(scores[seen])  # nothing written past the net


@pytest.mark.parametrize("seed", range(12))
def test_query_counts_match_brute_force(seed):
    """``_QueryCounts.counts`` on random batches of databases, and ``indicator``, equal the
    counts of each query on each database's rows taken one by one."""
    rng = _rng(2, seed)
    schema = random_schema(rng, max_universe=48)
    workload = random_workload(rng, schema)
    counter = _QueryCounts(schema, workload)
    universe = schema.universe_size
    np.testing.assert_array_equal(
        counter.indicator(), net_query_counts(schema, workload, np.arange(universe)[:, None])
    )
    for k, m in ((1, 1), (7, 3), (20, 8)):
        cells = rng.integers(0, universe, size=(k, m), dtype=np.int64)
        got = counter.counts(cells)
        assert got.dtype == np.int64 and got.shape == (k, len(workload))
        np.testing.assert_array_equal(got, net_query_counts(schema, workload, cells))


def _start(indicator: np.ndarray, m: int):
    """The kernel's documented start: cells 0, their counts, no leader."""
    return (
        np.zeros(m, dtype=np.int64),
        m * indicator[0].copy(),
        np.array([-np.inf, 0.0]),
        np.zeros(m, dtype=np.int64),
    )


@pytest.mark.parametrize("seed", range(6))
def test_sample_exact_net_visits_every_multiset_and_resumes(seed):
    """One call visits C(U+m-1, m) multisets and finishes on the last one; calls of 1, 2 or 3
    steps from the same state visit the same multisets and pick the same leader, whose
    recorded score is its brute-force score."""
    rng = _rng(3, seed)
    schema = random_schema(rng)
    workload = random_workload(rng, schema)
    codes = random_codes(rng, schema, 9)
    true = true_counts(codes, schema, workload)
    indicator = np.ascontiguousarray(_QueryCounts(schema, workload).indicator())
    universe, m, n_rows = schema.universe_size, 3, 9
    size = math.comb(universe + m - 1, m)
    state = kernel_state(rng)
    cells, counts, best, best_cells = _start(indicator, m)
    visited, done = sample_exact_net(
        indicator, m * true, n_rows, 0.7, state.copy(), cells, counts, 10 * size, best, best_cells
    )
    assert (visited, done) == (size, True)
    np.testing.assert_array_equal(cells, np.full(m, universe - 1))
    np.testing.assert_array_equal(counts, m * indicator[universe - 1])  # incremental counts stayed exact
    expected_score = net_scores(true, net_query_counts(schema, workload, best_cells[None, :]), n_rows, m)[0]
    assert best[1] == expected_score
    for limit in (1, 2, 3):
        step_state = state.copy()
        c2, k2, b2, bc2 = _start(indicator, m)
        total, calls, finished = 0, 0, False
        while not finished:
            steps, finished = sample_exact_net(
                indicator, m * true, n_rows, 0.7, step_state, c2, k2, limit, b2, bc2
            )
            assert 1 <= steps <= limit
            total, calls = total + steps, calls + 1
        assert total == size and calls == math.ceil(size / limit)
        np.testing.assert_array_equal(bc2, best_cells)
        np.testing.assert_array_equal(b2, best)


# =============================================================================================
# Exact mode's law: the exponential mechanism over the whole net
# =============================================================================================

# U = 2 x 2, m = 3: 20 multisets; 1-way marginals plus non-marginal queries; n = 7 public.
GOF_SCHEMA = Schema.from_dict({"a": 2, "b": 2})
GOF_WORKLOAD = Workload(
    GOF_SCHEMA,
    list(Workload.marginals(GOF_SCHEMA, 1))
    + list(
        Workload.from_dict(
            {
                "queries": [
                    {"where": {"a": 0, "b": [0, 1]}},
                    {"where": {}},
                    {"where": {"b": {"range": [1, 1]}}},
                ]
            },
            GOF_SCHEMA,
        )
    ),
)
GOF_CODES = np.array([[0, 0], [0, 0], [0, 1], [1, 1], [1, 1], [0, 0], [1, 0]], dtype=np.int64)
GOF_ROWS, GOF_M, GOF_EPS = 7, 3, 2.0


def gof_law(scale: float) -> tuple[np.ndarray, np.ndarray]:
    """The multisets of the GOF design and the exponential mechanism's law over them at ``scale``."""
    nets = multisets(GOF_SCHEMA.universe_size, GOF_M)
    counts = net_query_counts(GOF_SCHEMA, GOF_WORKLOAD, nets)
    scores = net_scores(true_counts(GOF_CODES, GOF_SCHEMA, GOF_WORKLOAD), counts, GOF_ROWS, GOF_M)
    return nets, exponential_probabilities(scores, scale)


def multiset_index(nets: np.ndarray, outputs: np.ndarray) -> np.ndarray:
    """Each output multiset's (sorted row's) position in ``nets``; fails on anything else."""
    lookup = {tuple(row): i for i, row in enumerate(nets.tolist())}
    return np.array([lookup[tuple(sorted(row))] for row in np.asarray(outputs).tolist()], dtype=np.int64)


def chisquare_pvalue(observed: np.ndarray, pmf: np.ndarray, min_expected: float = 5.0) -> float:
    """Pearson's chi-square of bin counts against ``pmf``; bins expected below ``min_expected``
    are pooled into one bin (with the next smallest bins until the pool reaches it)."""
    observed = np.asarray(observed, dtype=float)
    expected = observed.sum() * np.asarray(pmf, dtype=float) / np.sum(pmf)
    order = np.argsort(expected)
    pooled = 0
    while (
        pooled < len(order)
        and expected[order[:pooled]].sum() < min_expected
        and expected[order[pooled]] < min_expected
    ):
        pooled += 1
    if 0 < pooled < len(order) and expected[order[:pooled]].sum() < min_expected:
        pooled += 1
    small, big = order[:pooled], order[pooled:]
    obs = np.concatenate([observed[big], [observed[small].sum()]] if pooled else [observed[big]])
    exp = np.concatenate([expected[big], [expected[small].sum()]] if pooled else [expected[big]])
    return float(stats.chisquare(obs, exp).pvalue)


def kernel_outputs(scale: float, runs: int, rng: np.random.Generator) -> np.ndarray:
    """``runs`` kernel draws over the GOF net, each from a fresh kernel state."""
    indicator = np.ascontiguousarray(_QueryCounts(GOF_SCHEMA, GOF_WORKLOAD).indicator())
    true_scaled = GOF_M * true_counts(GOF_CODES, GOF_SCHEMA, GOF_WORKLOAD)
    out = np.empty((runs, GOF_M), dtype=np.int64)
    for r in range(runs):
        cells, counts, best, best_cells = _start(indicator, GOF_M)
        _, done = sample_exact_net(
            indicator,
            true_scaled,
            GOF_ROWS,
            scale,
            kernel_state(rng),
            cells,
            counts,
            1 << 20,
            best,
            best_cells,
        )
        assert done
        out[r] = best_cells
    return out


def test_kernel_law_is_the_exponential_mechanism():
    """200,000 kernel draws (independent kernel states) at scale eps / 2 fit the exact law
    P(y) proportional to exp(eps * score(y) / 2) over the 20 multisets; the same draws are
    rejected against the law at scale eps (so the test can tell the two scales apart)."""
    nets, law = gof_law(GOF_EPS / 2)
    observed = np.bincount(
        multiset_index(nets, kernel_outputs(GOF_EPS / 2, 200_000, _rng(4))), minlength=len(nets)
    )
    assert chisquare_pvalue(observed, law) > GOF_ALPHA
    _, wrong = gof_law(GOF_EPS)
    assert chisquare_pvalue(observed, wrong) < GOF_ALPHA
    _, slightly_wrong = gof_law(1.05 * GOF_EPS / 2)  # 5% off in the scale is visible too
    assert chisquare_pvalue(observed, slightly_wrong) < GOF_ALPHA


def blr_exact_outputs(runs: int, rng: np.random.Generator, **kwargs) -> np.ndarray:
    return np.array(
        [
            blr(
                GOF_CODES, GOF_SCHEMA, GOF_WORKLOAD, GOF_EPS, net_size=GOF_M, rows=GOF_ROWS, rng=rng, **kwargs
            ).cells
            for _ in range(runs)
        ]
    )


def scaled_kernel(monkeypatch, factor: float) -> None:
    """Broken: ``blr``'s exact-net kernel gets ``factor`` times its scale (the accountant still
    says eps). The wrapper calls the kernel through its module, so a spy there sees the
    broken arguments."""

    def broken(indicator, true_scaled, n_rows, scale, *rest):
        return net_kernels.sample_exact_net(indicator, true_scaled, n_rows, factor * scale, *rest)

    monkeypatch.setattr(synth.engines.blr, "sample_exact_net", broken)


def doubled_scale_kernel(monkeypatch) -> None:
    """Broken: the exact-net kernel gets eps instead of eps / 2."""
    scaled_kernel(monkeypatch, 2.0)


def test_blr_exact_law_is_the_exponential_mechanism():
    """2,000 ``blr`` runs (exact net, public n) fit the exact law at eps / 2."""
    nets, law = gof_law(GOF_EPS / 2)
    outputs = blr_exact_outputs(2_000, _rng(5))
    assert chisquare_pvalue(np.bincount(multiset_index(nets, outputs), minlength=len(nets)), law) > GOF_ALPHA


def test_blr_exact_with_the_wrong_scale_fails_the_fit(monkeypatch):
    """The same test on a ``blr`` whose kernel uses eps instead of eps / 2: rejected."""
    doubled_scale_kernel(monkeypatch)
    nets, law = gof_law(GOF_EPS / 2)
    outputs = blr_exact_outputs(2_000, _rng(5))
    assert chisquare_pvalue(np.bincount(multiset_index(nets, outputs), minlength=len(nets)), law) < GOF_ALPHA


def test_blr_exact_seeded_runs_repeat_and_unseeded_differ():
    runs = [
        blr(GOF_CODES, GOF_SCHEMA, GOF_WORKLOAD, GOF_EPS, net_size=GOF_M, rows=GOF_ROWS, rng=seed).cells
        for seed in [5, 5] + [None] * 12
    ]
    np.testing.assert_array_equal(runs[0], runs[1])
    assert len({tuple(r) for r in runs[2:]}) > 1  # 12 unseeded runs all equal: probability 0.21^11 < 1e-7


def test_blr_exact_reports_progress_and_resumes_between_kernel_calls(monkeypatch):
    """With 3 candidates per kernel call, ``blr`` picks the same database for the same seed,
    and ``progress`` sees the candidates visited so far, ending at (|N|, 1.0)."""
    reference = blr(GOF_CODES, GOF_SCHEMA, GOF_WORKLOAD, GOF_EPS, net_size=GOF_M, rows=GOF_ROWS, rng=6)
    monkeypatch.setattr(synth.engines.blr, "_STEPS_PER_CALL", 3)
    calls = []
    chunked = blr(
        GOF_CODES,
        GOF_SCHEMA,
        GOF_WORKLOAD,
        GOF_EPS,
        net_size=GOF_M,
        rows=GOF_ROWS,
        rng=6,
        progress=lambda seen, fraction: calls.append((seen, fraction)),
    )
    np.testing.assert_array_equal(chunked.cells, reference.cells)
    assert [seen for seen, _ in calls] == [3, 6, 9, 12, 15, 18, 20]
    assert calls[-1] == (20, 1.0) and chunked.parameters["candidates"] == 20


# =============================================================================================
# Net sizes
# =============================================================================================


def test_log_net_size_alpha_and_m_for_alpha():
    for universe, m in ((1, 1), (4, 3), (10, 7), (1000, 2), (120_960, 5)):
        assert log_net_size(universe, m) == pytest.approx(
            math.log(math.comb(universe + m - 1, m)), rel=1e-9, abs=1e-12
        )
    assert net_alpha(50, 10) == pytest.approx(math.sqrt(math.log(20) / 100))
    assert net_size_for_alpha(0.1, 100) == math.ceil(math.log(100) / 0.01)
    assert net_alpha(net_size_for_alpha(0.1, 100), 100) <= 0.1


def test_net_too_large_names_the_size_and_a_net_size_that_fits():
    schema = Schema.from_dict({"a": 10, "b": 10, "c": 10})  # |U| = 1,000
    workload = Workload.marginals(schema, 1)
    codes = np.zeros((5, 3), dtype=np.int64)
    with pytest.raises(
        NetTooLarge,
        match=r"5-row databases over 1,000 cells has 8\.417e\+12 candidates, more than the "
        r"cap of 10,000,000; --net-size 2 fits",
    ):
        blr(codes, schema, workload, 1.0, net_size=5, rows=5, rng=0)
    with pytest.raises(NetTooLarge, match=r"has 1\.672e\+08 candidates.*cap of 1,000,000.*--net-size 2 fits"):
        blr(codes, schema, workload, 1.0, net_size=3, rows=5, rng=0, max_net=1_000_000)
    with pytest.raises(NetTooLarge, match="no net size fits"):
        blr(codes, schema, workload, 1.0, net_size=2, rows=5, rng=0, max_net=999)


def test_max_net_boundary_is_inclusive():
    """A net of exactly ``max_net`` multisets is enumerated; one more than the cap is refused."""
    schema = Schema.from_dict({"a": 10})
    workload = Workload.marginals(schema, 1)
    codes = np.zeros((3, 1), dtype=np.int64)
    size = math.comb(10 + 3 - 1, 3)  # 220
    result = blr(codes, schema, workload, 1.0, net_size=3, rows=3, rng=0, max_net=size)
    assert result.parameters["candidates"] == size
    with pytest.raises(
        NetTooLarge, match="has 220 candidates, more than the cap of 219; --net-size 2 fits"
    ):
        blr(codes, schema, workload, 1.0, net_size=3, rows=3, rng=0, max_net=size - 1)


def test_net_too_large_for_a_net_past_the_float_range():
    """alpha = 0.05 over 1,000 cells asks for m = 1,361: a net of about 1e2000 multisets. The
    user should get NetTooLarge with the size, not an OverflowError."""
    schema = Schema.from_dict({"a": 10, "b": 10, "c": 10})
    with pytest.raises(NetTooLarge, match="candidates"):
        blr(
            np.zeros((5, 3), dtype=np.int64),
            schema,
            Workload.marginals(schema, 1),
            1.0,
            alpha=0.05,
            rows=5,
            rng=0,
        )


@pytest.mark.parametrize(
    "universe, queries, epsilon, rows, max_net",
    [
        (4, 4, 1.0, 100, None),
        (4, 4, 1.0, 100, 30),
        (12, 7, 0.5, 1_000, 10**4),
        (120, 30, 2.0, 50_000, DEFAULT_MAX_NET),
        (840, 100, 1.0, 30_000, DEFAULT_MAX_NET),
        (10, 3, 50.0, 10**6, 10**9),
        (1000, 30, 1.0, 10**5, 10**6),
    ],
)
def test_choose_net_size_is_the_bound_argmin_within_max_net(universe, queries, epsilon, rows, max_net):
    """The m chosen is the smallest minimizer of the exact net's bound over every m whose net
    fits in ``max_net`` (brute force over m), and its net does fit."""
    m = choose_net_size(universe, queries, epsilon, rows, 0.05, max_net)
    if max_net is not None:
        assert math.comb(universe + m - 1, m) <= max_net
    limit = 5_000
    sizes = [k for k in range(1, limit) if max_net is None or math.comb(universe + k - 1, k) <= max_net]
    bounds = [_exact_bound(k, universe, queries, epsilon, rows, 0.05) for k in sizes]
    assert m == sizes[int(np.argmin(bounds))]


def test_choose_net_size_respects_max_net_at_the_boundary():
    """max_net = C(51, 32) - 1 (about 4.8e13): m = 32 over 20 cells no longer fits."""
    cap = math.comb(20 + 32 - 1, 32) - 1
    m = choose_net_size(20, 10, 1.0, 10**12, 0.05, max_net=cap)
    assert math.comb(20 + m - 1, m) <= cap, (
        f"m = {m}: C({20 + m - 1}, {m}) = {math.comb(20 + m - 1, m):,} > {cap:,}"
    )


def test_choose_net_size_refuses_when_one_row_does_not_fit():
    with pytest.raises(NetTooLarge, match="even 1-row databases number 1,000, more than the cap of 999"):
        choose_net_size(1000, 10, 1.0, 100, 0.05, max_net=999)


def test_net_size_is_chosen_from_public_quantities_only():
    """Two datasets of the same public n get the same m: the one ``choose_net_size`` gives for
    (|U|, |C|, eps, n, beta, max_net) (exact net), ``sampled_net_size(|C|, n, beta)`` (sampled)."""
    schema = Schema.from_dict({"a": 3, "b": 2})
    workload = Workload.marginals(schema, 2)
    rng = _rng(7)
    first, second = random_codes(rng, schema, 40), np.zeros((40, 2), dtype=np.int64)
    for net, max_net, candidates in (("exact", 5_000, 10), ("sampled", 10**9, 300)):
        sizes = {
            blr(
                codes, schema, workload, 2.0, net=net, rows=40, rng=8, max_net=max_net, candidates=candidates
            ).parameters["net_size"]
            for codes in (first, second)
        }
        if net == "sampled":
            assert sizes == {synth.engines.blr.sampled_net_size(len(workload), 40, 0.05)}
            continue
        expected = choose_net_size(6, len(workload), 2.0, 40, 0.05, max_net)
        assert sizes == {expected}
        assert math.comb(6 + expected - 1, expected) <= max_net < math.comb(6 + expected, expected + 1)


# =============================================================================================
# Sampled mode
# =============================================================================================

S_SCHEMA = Schema.from_dict({"a": 3, "b": 4})
S_WORKLOAD = Workload.marginals(S_SCHEMA, 2)


class CandidateSpy:
    """Records every batch of candidates ``_QueryCounts.counts`` scores (sampled mode only
    scores candidates with it)."""

    def __init__(self, monkeypatch):
        self.batches: list[np.ndarray] = []
        real = _QueryCounts.counts

        def spy(counter, cells):
            self.batches.append(np.array(cells, copy=True))
            return real(counter, cells)

        monkeypatch.setattr(_QueryCounts, "counts", spy)

    def take(self) -> np.ndarray:
        """The candidates recorded since the last ``take``, one row each."""
        out = np.concatenate(self.batches) if self.batches else np.zeros((0, 0), dtype=np.int64)
        self.batches = []
        return out


def peeking_sample_net(codes: np.ndarray, schema: Schema):
    """Broken ``_sample_net``: the candidates are drawn from the public prior (uniform when
    none) plus the data's histogram, so the range depends on the data. The selection is the
    library's."""
    real = synth.engines.blr._sample_net
    histogram = marginal(codes, schema, None).reshape(-1).astype(np.float64)

    def broken(query_counts, true_counts, n_rows, m, k, epsilon, prior, *rest):
        base = np.full(schema.universe_size, 1.0) if prior is None else np.asarray(prior, dtype=np.float64)
        return real(query_counts, true_counts, n_rows, m, k, epsilon, base / base.sum() + histogram, *rest)

    return broken


def sampled_candidates(monkeypatch, datasets, rows: int, seed: int, **kwargs) -> list[np.ndarray]:
    spy = CandidateSpy(monkeypatch)
    out = []
    for codes in datasets:
        blr(codes, S_SCHEMA, S_WORKLOAD, 1.0, net="sampled", rows=rows, rng=seed, **kwargs)
        out.append(spy.take())
    return out


def two_datasets(rows: int) -> tuple[np.ndarray, np.ndarray]:
    rng = _rng(8)
    return random_codes(rng, S_SCHEMA, rows), np.tile([[2, 3]], (rows, 1))


@pytest.mark.parametrize("prior", [None, np.arange(12, dtype=float)])
def test_sampled_candidates_do_not_depend_on_the_data(monkeypatch, prior):
    """Same seed, same public n, two very different datasets: exactly the same candidates
    (several chunks: 2 ** 20 rows a chunk, m = 64)."""
    first, second = sampled_candidates(
        monkeypatch, two_datasets(60), 60, 9, candidates=20_000, net_size=64, prior=prior
    )
    assert first.shape == (20_000, 64)
    np.testing.assert_array_equal(first, second)


def test_candidate_spy_sees_a_peeking_candidate_draw(monkeypatch):
    """The same check has teeth: when the candidate draw peeks at the data, the two datasets
    get different candidates."""
    codes = two_datasets(60)
    first, second = [], []
    for target, codes_now in zip((first, second), codes):
        monkeypatch.setattr(synth.engines.blr, "_sample_net", peeking_sample_net(codes_now, S_SCHEMA))
        target.extend(sampled_candidates(monkeypatch, [codes_now], 60, 9, candidates=500, net_size=8))
    assert first[0].shape == second[0].shape == (500, 8)
    assert not np.array_equal(first[0], second[0])


@pytest.mark.parametrize("chunk_rows", [None, 42])
def test_sampled_choice_is_a_candidate_and_seeded_runs_repeat(monkeypatch, chunk_rows):
    """The release is one of the candidates scored (also when they come in chunks of 7), the
    same seed repeats the candidates and the choice, and unseeded runs draw others."""
    if chunk_rows is not None:
        monkeypatch.setattr(synth.engines.blr._QueryCounts, "batch", lambda self, m, rows=chunk_rows: max(1, rows // m))
    codes = two_datasets(50)[0]
    spy = CandidateSpy(monkeypatch)
    runs = {}
    for label, seed in (("a", 10), ("b", 10), ("c", None), ("d", None)):
        result = blr(
            codes, S_SCHEMA, S_WORKLOAD, 1.0, net="sampled", candidates=300, net_size=6, rows=50, rng=seed
        )
        runs[label] = (result.cells, spy.take())
        candidates = np.sort(runs[label][1], axis=1)
        assert candidates.shape == (300, 6)
        assert (candidates == result.cells).all(axis=1).any(), "the released database is not a candidate"
        assert result.parameters["candidates"] == 300 and result.parameters["net"] == "sampled"
    np.testing.assert_array_equal(runs["a"][0], runs["b"][0])
    np.testing.assert_array_equal(runs["a"][1], runs["b"][1])
    assert not np.array_equal(runs["c"][1], runs["d"][1])
    assert not np.array_equal(runs["a"][1], runs["c"][1])


def test_sampled_prior_support_is_respected(monkeypatch):
    """A prior with zeros (first, middle and last cells) never puts those cells in a
    candidate nor in the release, even when the data sits on them."""
    prior = np.ones(12)
    zero = [0, 5, 6, 11]
    prior[zero] = 0.0
    codes = S_SCHEMA.cell_codes(np.array(zero * 10))  # every row on a forbidden cell
    spy = CandidateSpy(monkeypatch)
    for seed in range(5):
        result = blr(
            codes,
            S_SCHEMA,
            S_WORKLOAD,
            5.0,
            net="sampled",
            candidates=2_000,
            net_size=5,
            rows=40,
            prior=prior,
            rng=seed,
        )
        candidates = spy.take()
        assert not np.isin(candidates, zero).any()
        assert not np.isin(result.cells, zero).any()
        # every allowed cell does show up: the prior is used, not ignored
        assert set(np.unique(candidates)) == set(range(12)) - set(zero)


@pytest.mark.parametrize(
    "prior, message",
    [
        (np.ones(11), "prior must be a non-negative finite array over the universe"),
        (-np.ones(12), "prior must be"),
        (np.zeros(12), "prior must be"),
        (np.full(12, np.nan), "prior must be"),
    ],
)
def test_sampled_bad_prior(prior, message):
    with pytest.raises(ValueError, match=message):
        blr(
            np.zeros((3, 2), dtype=np.int64),
            S_SCHEMA,
            S_WORKLOAD,
            1.0,
            net="sampled",
            candidates=10,
            net_size=2,
            rows=3,
            prior=prior,
            rng=0,
        )


@pytest.mark.parametrize("chunk_rows", [None, 6])
def test_sampled_choice_follows_the_exponential_mechanism_over_the_candidates(monkeypatch, chunk_rows):
    """U = 3, m = 2, K = 12 candidates (in one chunk, or in chunks of 3): given the candidates
    drawn (spied), the released multiset y has probability
    c_y exp(eps score(y) / 2) / sum_z c_z exp(eps score(z) / 2) (c_y: the candidates equal to
    y). Summed over 1,500 runs these give the expected counts of a chi-square test
    (conservative: the runs' laws differ); a selection with eps instead of eps / 2 fails it."""
    if chunk_rows is not None:
        monkeypatch.setattr(synth.engines.blr._QueryCounts, "batch", lambda self, m, rows=chunk_rows: max(1, rows // m))
    schema = Schema.from_dict({"a": 3})
    workload = Workload.marginals(schema, 1)
    codes = np.array([[0], [0], [0], [1], [2]], dtype=np.int64)
    nets = multisets(3, 2)
    scores = net_scores(true_counts(codes, schema, workload), net_query_counts(schema, workload, nets), 5, 2)
    eps = 2.0

    def run(generator_seed: int) -> tuple[np.ndarray, np.ndarray]:
        spy = CandidateSpy(monkeypatch)
        rng = _rng(11, generator_seed)
        observed, expected, expected_wrong = np.zeros(len(nets)), np.zeros(len(nets)), np.zeros(len(nets))
        for _ in range(1_500):
            result = blr(
                codes, schema, workload, eps, net="sampled", candidates=12, net_size=2, rows=5, rng=rng
            )
            present = np.bincount(multiset_index(nets, spy.take()), minlength=len(nets))
            observed[multiset_index(nets, result.cells[None, :])[0]] += 1
            for target, scale in ((expected, eps / 2), (expected_wrong, eps)):
                weights = present * np.exp(scale * (scores - scores.max()))
                target += weights / weights.sum()
        return observed, expected, expected_wrong

    observed, expected, expected_wrong = run(0)
    assert chisquare_pvalue(observed, expected) > GOF_ALPHA
    assert chisquare_pvalue(observed, expected_wrong) < GOF_ALPHA


# =============================================================================================
# Budget, utility, model, parameters
# =============================================================================================


@pytest.mark.parametrize("net", ["exact", "sampled"])
@pytest.mark.parametrize("epsilon", [0.3, 1.0, 2.9])
def test_budget_is_spent_exactly(net, epsilon):
    """Public n: one charge of epsilon. No n: a noisy count (count_share * eps) then the
    selection with the rest; the total is epsilon, never more."""
    codes = random_codes(_rng(12), GOF_SCHEMA, 30)
    public = blr(codes, GOF_SCHEMA, GOF_WORKLOAD, epsilon, net=net, net_size=3, candidates=50, rows=30, rng=1)
    ledger = public.accountant.ledger()
    assert len(ledger) == 1 and ledger[0].epsilon == epsilon and public.rows_public and public.rows == 30.0
    assert public.parameters["epsilon_count"] == 0.0 and public.parameters["epsilon_select"] == epsilon
    private = blr(
        codes, GOF_SCHEMA, GOF_WORKLOAD, epsilon, net=net, net_size=3, candidates=50, rng=1, count_share=0.1
    )
    ledger = private.accountant.ledger()
    assert ledger[0].note == "noisy row count" and len(ledger) == 2
    assert ledger[0].epsilon == pytest.approx(0.1 * epsilon)
    spent = private.accountant.spent().epsilon
    assert spent <= epsilon and spent == pytest.approx(epsilon, rel=1e-12)
    assert not private.rows_public and private.parameters["epsilon_count"] == ledger[0].epsilon
    assert private.parameters["epsilon_select"] == ledger[1].epsilon


def test_schema_rows_count_as_public():
    schema = Schema(GOF_SCHEMA.columns, rows=7)
    result = blr(GOF_CODES, schema, GOF_WORKLOAD, 1.0, net_size=2, rng=0)
    assert result.rows_public and result.rows == 7.0 and len(result.accountant.ledger()) == 1


@pytest.mark.parametrize("seed", range(3))
def test_large_epsilon_finds_a_database_near_the_best_in_the_net(seed):
    """eps = 50, |U| = 4, m = 4 (35 multisets), n = 200 public: the released database's max
    error is within 2 (ln|N| + ln(1/beta)) / eps rows (beta = 1e-9) of the best in the net
    (brute force), and below the net's median error (a uniform pick would not be)."""
    rng = _rng(13, seed)
    codes = GOF_SCHEMA.cell_codes(rng.choice(4, size=200, p=[0.55, 0.1, 0.3, 0.05]))
    m = 4
    nets = multisets(4, m)
    scores = net_scores(
        true_counts(codes, GOF_SCHEMA, GOF_WORKLOAD), net_query_counts(GOF_SCHEMA, GOF_WORKLOAD, nets), 200, m
    )
    slack = 2 * (math.log(len(nets)) + math.log(1e9)) / 50
    for run in range(5):
        result = blr(codes, GOF_SCHEMA, GOF_WORKLOAD, 50.0, net_size=m, rows=200, rng=100 * seed + run)
        chosen = scores[multiset_index(nets, result.cells[None, :])[0]]
        assert chosen >= scores.max() - slack
        assert chosen > np.median(scores)


def test_model_round_trip(tmp_path):
    from synth.models.model import Model

    result = blr(GOF_CODES, GOF_SCHEMA, GOF_WORKLOAD, 1.0, net_size=3, rows=7, rng=3)
    assert result.cells.shape == (3,) and (np.diff(result.cells) >= 0).all()
    np.testing.assert_array_equal(result.distribution, np.bincount(result.cells, minlength=4) / 3)
    result.to_model(seeded=True).save(tmp_path / "blr.npz")
    model = Model.load(tmp_path / "blr.npz")
    assert model.mechanism == "blr" and model.seeded and model.rows == 7.0 and model.rows_public
    np.testing.assert_array_equal(model.distribution, result.distribution)
    assert model.round_log == [{"net": "exact", "chosen_cells": result.cells.tolist()}]
    assert model.parameters == result.parameters
    assert model.privacy == result.accountant.to_dict()
    expected = 7 * GOF_WORKLOAD.answer(lambda s: marginal_from_dense(result.distribution, GOF_SCHEMA, s))
    np.testing.assert_allclose(model.answer(GOF_WORKLOAD), expected)
    counts = net_query_counts(GOF_SCHEMA, GOF_WORKLOAD, result.cells[None, :])[0]
    np.testing.assert_allclose(model.answer(GOF_WORKLOAD), 7 * counts / 3)  # n / m rows per chosen row


def test_parameters_state_both_bounds():
    result = blr(GOF_CODES, GOF_SCHEMA, GOF_WORKLOAD, 1.0, net_size=3, rows=7, rng=0, beta=0.1)
    p = result.parameters
    q = len(GOF_WORKLOAD)
    assert p["net_alpha"] == pytest.approx(net_alpha(3, q))
    assert p["selection_loss"] == pytest.approx(2 * (math.log(20) + math.log(10)) / 7)
    assert p["bound_exact_net"] == pytest.approx(net_alpha(3, q) + p["selection_loss"])
    sampled = blr(
        GOF_CODES,
        GOF_SCHEMA,
        GOF_WORKLOAD,
        1.0,
        net="sampled",
        candidates=64,
        net_size=3,
        rows=7,
        rng=0,
        beta=0.1,
    ).parameters
    assert sampled["selection_loss"] == pytest.approx(2 * (math.log(64) + math.log(10)) / 7)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"net": "approx"}, ValueError, "net \\('approx'\\) must be 'exact' or 'sampled'"),
        ({"candidates": 0}, ValueError, "candidates"),
        ({"beta": 1.5}, ValueError, "beta"),
        ({"net_size": 0}, ValueError, "net_size"),
        ({"alpha": 0.0}, ValueError, "alpha"),
        ({"net_size": 2.5}, TypeError, "net_size"),
    ],
)
def test_bad_parameters(kwargs, error, message):
    with pytest.raises(error, match=message):
        blr(GOF_CODES, GOF_SCHEMA, GOF_WORKLOAD, 1.0, rows=7, rng=0, **kwargs)


def test_empty_workload_and_bad_epsilon_are_refused():
    with pytest.raises(ValueError, match="the workload has no queries"):
        blr(GOF_CODES, GOF_SCHEMA, Workload(GOF_SCHEMA, []), 1.0, rows=7, rng=0)
    with pytest.raises(ValueError, match="epsilon"):
        blr(GOF_CODES, GOF_SCHEMA, GOF_WORKLOAD, -1.0, rows=7, rng=0)


def test_multiset_helper_order_is_the_kernels():
    """The reference enumeration is itertools' lexicographic order of sorted tuples."""
    nets = multisets(4, 3)
    assert [tuple(r) for r in nets.tolist()] == list(itertools.combinations_with_replacement(range(4), 3))
    assert [tuple(r) for r in nets.tolist()] == sorted(tuple(r) for r in nets.tolist())


@pytest.mark.parametrize("kwargs, error, message", [
    ({"rows": 0}, ValueError, "rows"),
    ({"rows": -3}, ValueError, "rows"),
    ({"prior": np.ones(6)}, ValueError, "prior applies to the sampled net"),
])
def test_rows_and_prior_are_checked(kwargs, error, message):
    schema = Schema.from_dict({"a": 3, "b": 2})
    with pytest.raises(error, match=message):
        blr(np.zeros((5, 2), dtype=np.int64), schema, Workload.marginals(schema, 1), 1.0, net_size=2, **kwargs)


# =============================================================================================
# The sampled net's default m, and warnings about vacuous bounds
# =============================================================================================

ADULT7_SHAPE = {"workclass": 9, "education-num": 16, "marital-status": 7, "relationship": 6, "race": 5,
                "sex": 2, "income>50K": 2}


def sampling_alpha(m: int, queries: int, beta: float = 0.05) -> float:
    """Every query of an m-row sample is within this of its prior's answer w.p. >= 1 - beta."""
    return math.sqrt(math.log(2 * queries / beta) / (2 * m))


def test_sampled_net_default_m_is_the_smallest_accurate_enough():
    """On adult's 7-column shape with all 3-way marginals (8,453 queries, n = 48,842) the default
    m is the smallest whose samples are within 0.1 of n of the prior on every query (637, not
    the exact-net rule's m = 1), and never more than n."""
    queries = len(Workload.marginals(Schema.from_dict(ADULT7_SHAPE), 3))
    m = synth.engines.blr.sampled_net_size(queries, 48_842)
    assert m > 1 and sampling_alpha(m, queries) <= 0.1 < sampling_alpha(m - 1, queries)
    assert synth.engines.blr.sampled_net_size(queries, 48_842, alpha=0.2) < m  # a looser target needs fewer rows
    assert synth.engines.blr.sampled_net_size(queries, 300) == 300  # capped at n
    with pytest.raises(ValueError, match="alpha"):
        synth.engines.blr.sampled_net_size(queries, 300, alpha=0.0)


def test_blr_sampled_net_uses_the_default_m_and_states_its_sampling_error():
    schema = Schema.from_dict({"race": 5, "sex": 2, "income": 2, "relationship": 6})
    workload = Workload.marginals(schema, 2)
    codes = random_codes(_rng(30), schema, 500)
    result = blr(codes, schema, workload, 1.0, net="sampled", candidates=40, rows=2_000, rng=0)
    p = result.parameters
    m = p["net_size"]
    assert m == synth.engines.blr.sampled_net_size(len(workload), 2_000) > 1 and result.cells.size == m
    assert p["sampling_alpha"] == pytest.approx(sampling_alpha(m, len(workload)))
    assert p["sampling_alpha"] <= 0.1
    assert result.warnings == [] == p["warnings"]


@pytest.mark.parametrize("rows", range(10, 20))
def test_sampled_vacuous_bound_warning_appears_exactly_when_the_selection_loss_reaches_n(rows):
    """selection loss = 2 (ln 64 + ln 20) / n: 1.02 at n = 14, 0.95 at n = 15."""
    result = blr(GOF_CODES, GOF_SCHEMA, GOF_WORKLOAD, 1.0, net="sampled", candidates=64, rows=rows, rng=0)
    loss = result.parameters["selection_loss"]
    vacuous = [w for w in result.warnings if "vacuous" in w]
    assert len(vacuous) == (loss >= 1) == (rows <= 14)
    if vacuous:
        start = f"the sampled net's error bound (its best candidate's error plus {loss:.3g} of n"
        assert vacuous[0].startswith(start + " for the selection) is vacuous")
        assert "fewer candidates (--candidates)" in vacuous[0]
    assert not any(w.startswith("m = 1") for w in result.warnings)


def test_exact_vacuous_bound_and_one_row_warnings():
    tiny = blr(GOF_CODES, GOF_SCHEMA, GOF_WORKLOAD, 1.0, net_size=3, rows=7, rng=0)
    bound = tiny.parameters["bound_exact_net"]
    assert bound >= 1 and len(tiny.warnings) == 1
    assert tiny.warnings[0].startswith(f"the exact net's error bound ({bound:.3g} of n: ")
    assert "is vacuous: every answer can be off by at most n anyway; raise epsilon, or use a smaller net" in (
        tiny.warnings[0])
    large = blr(GOF_CODES, GOF_SCHEMA, GOF_WORKLOAD, 1.0, net_size=8, rows=10**4, rng=0)
    assert large.parameters["bound_exact_net"] < 1 and large.warnings == []
    one = blr(GOF_CODES, GOF_SCHEMA, GOF_WORKLOAD, 1.0, net_size=1, rows=10**6, rng=0)  # alpha(1) dominates
    assert one.parameters["bound_exact_net"] >= 1 and len(one.warnings) == 2
    assert "raise --max-net so that a larger m fits" in one.warnings[0]
    one_row = ("m = 1: the released database is a single row, so the synthetic data is that row repeated "
               "1,000,000 times")
    assert one.warnings[1] == f"{one_row}; raise --max-net, use fewer columns, or --net sampled"
    sampled_one = blr(GOF_CODES, GOF_SCHEMA, GOF_WORKLOAD, 1.0, net="sampled", candidates=8, net_size=1,
                      rows=10**6, rng=0)
    assert sampled_one.warnings == [f"{one_row}; set --net-size above 1"]


@pytest.mark.parametrize("seed", range(4))
def test_query_counts_without_the_cell_lookup_match(monkeypatch, seed):
    """Past ``_MAX_LOOKUP`` the counts decode each row's codes instead: the same counts."""
    rng = _rng(31, seed)
    schema = random_schema(rng, max_universe=48)
    workload = random_workload(rng, schema)
    cells = rng.integers(0, schema.universe_size, size=(9, 5), dtype=np.int64)
    with_lookup = _QueryCounts(schema, workload).counts(cells)
    monkeypatch.setattr(synth.engines.blr, "_MAX_LOOKUP", 0)
    counter = _QueryCounts(schema, workload)
    np.testing.assert_array_equal(counter.counts(cells), with_lookup)
    assert counter._lookups is None
    np.testing.assert_array_equal(with_lookup, net_query_counts(schema, workload, cells))
