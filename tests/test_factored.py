"""The factored model against the dense distribution it stands for, on small random schemas."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import synth.models.sampling
from synth.models.distribution import DenseDistribution, make_distribution
from synth.models.factored import FactoredModel, ModelSizeError
from synth.models.fit import expected_noise
from synth.data.schema import Coded, Schema
from synth.data.tables import marginal
from synth.data.workload import Query


def random_schema(rng: np.random.Generator, columns: int | None = None) -> Schema:
    columns = columns or int(rng.integers(2, 6))
    return Schema(tuple(Coded(f"c{i}", int(rng.integers(2, 5))) for i in range(columns)))


def random_subsets(rng: np.random.Generator, schema: Schema, count: int) -> list[tuple[str, ...]]:
    subsets = []
    for _ in range(count):
        k = int(rng.integers(1, min(3, len(schema)) + 1))
        chosen = rng.choice(len(schema), k, replace=False)
        subsets.append(tuple(schema.names[i] for i in chosen))  # any order: the model sorts them
    return subsets


def dense_reference(schema: Schema, potentials: dict) -> np.ndarray:
    """exp(Σ θ_S[u_S]) over the whole universe by broadcasting, normalized (the definition)."""
    log = np.zeros(schema.shape)
    for subset, theta in potentials.items():
        axes = [schema.index(c) for c in subset]
        order = np.argsort(axes)
        table = np.transpose(theta, order)
        shape = [1] * len(schema)
        for a in sorted(axes):
            shape[a] = schema.shape[a]
        log = log + table.reshape(shape)
    with np.errstate(invalid="ignore"):  # every cell -inf: NaN, which the callers check
        p = np.exp(log - log.max())
    return p / p.sum()


def dense_marginal(p: np.ndarray, schema: Schema, subset) -> np.ndarray:
    axes = [schema.index(c) for c in subset]
    others = tuple(a for a in range(len(schema)) if a not in axes)
    table = p.sum(axis=others)
    kept = sorted(axes)
    return np.transpose(table, [kept.index(a) for a in axes])


def random_model(seed: int):
    rng = np.random.default_rng(seed)
    schema = random_schema(rng)
    potentials = {}
    for subset in random_subsets(rng, schema, int(rng.integers(1, 6))):
        potentials[subset] = rng.normal(0, 1.5, [schema[c].size for c in subset])
    model = FactoredModel(schema)
    for subset, theta in potentials.items():
        model.add_log(subset, theta)
    combined = {}
    for subset, theta in potentials.items():  # a subset repeated adds up in the model too
        combined[subset] = combined.get(subset, 0) + theta
    return rng, schema, model, dense_reference(schema, combined)


@pytest.mark.parametrize("seed", range(40))
def test_marginals_match_the_dense_definition(seed):
    rng, schema, model, p = random_model(seed)
    for k in range(0, len(schema) + 1):
        for subset in itertools.combinations(schema.names, k):
            order = list(rng.permutation(subset)) if subset else []
            np.testing.assert_allclose(model.marginal(order), dense_marginal(p, schema, order), atol=1e-12)
    np.testing.assert_allclose(model.dense(), p.reshape(-1), atol=1e-12)


@pytest.mark.parametrize("seed", range(20))
def test_extreme_and_zero_potentials_match_the_dense_definition(seed):
    """Calibration divides messages out in linear space: potentials hundreds of nats apart and
    cells of zero mass (a child with none at some separator value) must still match."""
    rng = np.random.default_rng(1000 + seed)
    schema = random_schema(rng)
    model, combined = FactoredModel(schema), {}
    for subset in random_subsets(rng, schema, int(rng.integers(2, 6))):
        theta = rng.normal(0, 60, [schema[c].size for c in subset])
        theta[rng.random(theta.shape) < 0.2] = -np.inf
        model.add_log(subset, theta)
        combined[subset] = combined.get(subset, 0) + theta
    p = dense_reference(schema, combined)
    if not np.isfinite(p).all():  # every cell zero: the model refuses to normalize (another test)
        return
    for k in (1, 2):
        for subset in itertools.combinations(schema.names, k):
            np.testing.assert_allclose(model.marginal(subset), dense_marginal(p, schema, subset), atol=1e-12)


@pytest.mark.parametrize("seed", range(10))
def test_query_answers_and_partition_match(seed):
    rng, schema, model, p = random_model(seed)
    for subset in random_subsets(rng, schema, 5):
        allowed = tuple(np.sort(rng.choice(schema[c].size, int(rng.integers(1, schema[c].size + 1)), replace=False))
                        for c in subset)
        query = Query(tuple(subset), allowed)
        expected = dense_marginal(p, schema, subset)[np.ix_(*allowed)].sum()
        assert model.answer(query) == pytest.approx(expected, abs=1e-12)
    log = np.zeros(schema.shape)
    for s, theta in model._potentials.items():
        log = log + theta.reshape([schema[c].size if c in s else 1 for c in schema.names])
    assert model.log_partition() == pytest.approx(np.log(np.exp(log).sum()), rel=1e-12)


def test_zero_factors_give_zero_mass_without_nan():
    schema = Schema((Coded("a", 3), Coded("b", 2), Coded("c", 2)))
    model = FactoredModel(schema)
    model.multiply(("a", "b"), np.array([[0.0, 1.0], [2.0, 0.0], [1.0, 1.0]]))
    model.multiply(("b", "c"), np.array([[1.0, 0.0], [3.0, 1.0]]))
    dense = DenseDistribution(schema)
    dense.multiply(("a", "b"), np.array([[0.0, 1.0], [2.0, 0.0], [1.0, 1.0]]))
    dense.multiply(("b", "c"), np.array([[1.0, 0.0], [3.0, 1.0]]))
    for subset in [("a",), ("c",), ("a", "c"), ("c", "a", "b")]:
        got = model.marginal(subset)
        assert np.all(np.isfinite(got))
        np.testing.assert_allclose(got, dense.marginal(subset), atol=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_fit_reaches_the_dense_fit_on_consistent_measurements(seed):
    """Exact marginals of some data: both fits converge to the one maximum-entropy solution."""
    rng = np.random.default_rng(100 + seed)
    schema = random_schema(rng, int(rng.integers(3, 5)))
    rows = 20000
    codes = np.column_stack([rng.integers(0, c.size, rows) for c in schema]).astype(np.int64)
    copy = rng.random(rows) < 0.5  # some dependence, but no empty cells (their fit only tends to 0)
    codes[copy, 1] = codes[copy, 0] % schema[1].size
    subsets = list(dict.fromkeys(tuple(sorted(s, key=schema.index)) for s in random_subsets(rng, schema, 3)))
    measured = [("marginal", s, marginal(codes, schema, s).astype(float)) for s in subsets]
    dense, factored = make_distribution(schema, "dense"), make_distribution(schema, "factored")
    dense.fit(measured, rows, 20000, stop_residual=1e-6)
    factored.fit(measured, rows, 20000, stop_residual=1e-6)
    for s in subsets:
        np.testing.assert_allclose(factored.marginal(s), marginal(codes, schema, s) / rows, atol=1e-6)
    np.testing.assert_allclose(factored.dense(), dense.normalized(), atol=1e-5)


def test_fit_never_raises_the_squared_loss_and_stops_at_the_noise():
    rng = np.random.default_rng(7)
    schema = random_schema(rng, 4)
    rows = 2000
    codes = np.column_stack([rng.integers(0, c.size, rows) for c in schema]).astype(np.int64)
    subsets = [("c0", "c1"), ("c1", "c2"), ("c2", "c3")]
    measured = [("marginal", s, marginal(codes, schema, s) + rng.laplace(0, 20, [schema[c].size for c in s]))
                for s in subsets]
    model = FactoredModel(schema)

    def loss():
        return sum(float(np.square(noisy - rows * model.marginal(s)).sum()) for _, s, noisy in measured)

    losses = [loss()]
    for _ in range(30):
        model.fit(measured, rows, 3)
        losses.append(loss())
    assert all(b <= a * (1 + 1e-12) for a, b in zip(losses, losses[1:])) and losses[-1] < 0.5 * losses[0]
    target = expected_noise(measured, 1 / 20)
    fresh = FactoredModel(schema)
    passes, residual = fresh.fit(measured, rows, 10000, stop_residual=target)
    assert residual <= target and passes < 10000


def test_query_measurements_fit_like_dense():
    schema = Schema((Coded("a", 3), Coded("b", 3), Coded("c", 2)))
    workload = [Query(("a", "b"), (np.array([0, 2]), np.array([1]))), Query(("c",), (np.array([1]),))]
    measured = [("query", 0, 120.0), ("query", 1, 700.0)]
    dense, factored = make_distribution(schema, "dense"), make_distribution(schema, "factored")
    dense.fit(measured, 1000, 5000, workload=workload, stop_residual=1e-6)
    factored.fit(measured, 1000, 5000, workload=workload, stop_residual=1e-6)
    for q, (_, _, noisy) in zip(workload, measured):
        assert factored.answer(q) * 1000 == pytest.approx(noisy, abs=1e-3)
    np.testing.assert_allclose(factored.dense(), dense.normalized(), atol=1e-5)


def test_a_subset_past_the_cap_is_refused_and_the_model_kept():
    schema = Schema(tuple(Coded(f"c{i}", 10) for i in range(4)))
    model = FactoredModel(schema, max_cells=250)
    model.add_log(("c0", "c1"), np.zeros((10, 10)))
    assert model.fits(("c2", "c3")) and not model.fits(("c1", "c2", "c3"))
    with pytest.raises(ModelSizeError, match="cap of 250"):
        model.add_log(("c1", "c2", "c3"), np.zeros((10, 10, 10)))
    assert model.subsets == [("c0", "c1")] and model.cells <= 250
    np.testing.assert_allclose(model.marginal(("c3",)), np.full(10, 0.1))


def test_a_subset_inside_a_clique_does_not_retriangulate():
    schema = Schema(tuple(Coded(f"c{i}", 3) for i in range(4)))
    model = FactoredModel(schema)
    model.add_log(("c0", "c1", "c2"), np.zeros((3, 3, 3)))
    tree = model.tree
    model.add_log(("c2", "c0"), np.ones((3, 3)))
    assert model.tree is tree


# -- sampling ---------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(8))
def test_sampled_marginals_match_the_model_within_rounding(seed):
    rng, schema, model, p = random_model(seed)
    rows = 5000
    codes = model.sample_codes(rows, "round", rng)
    assert codes.shape == (rows, len(schema))
    tree = model.calibrate().tree
    root = tree.cliques[tree.order[0]]
    # The root clique is rounded once: every cell within one row of rows * p.
    assert np.abs(marginal(codes, schema, root) - rows * dense_marginal(p, schema, root)).max() < 1 + 1e-9
    for clique in tree.cliques:  # a child clique: rounding inside each separator group
        error = np.abs(marginal(codes, schema, clique) / rows - dense_marginal(p, schema, clique)).sum()
        assert error < 0.02 + 2 * np.prod([schema[c].size for c in clique]) / rows
    for subset in itertools.combinations(schema.names, 2):  # across cliques: a statistical check
        error = np.abs(marginal(codes, schema, subset) / rows - dense_marginal(p, schema, subset)).sum()
        assert error < 0.08


@pytest.mark.parametrize("seed", range(4))
def test_sampling_in_blocks_keeps_the_root_rounding_and_the_model(seed, monkeypatch):
    """Past SAMPLE_BLOCK_ROWS rows the sampler works block by block: the root clique is still
    rounded once over every row, and the other cliques are rounded within each block, so
    their error grows by at most one rounding per block."""
    monkeypatch.setattr(synth.models.sampling, "SAMPLE_BLOCK_ROWS", 700)
    rng, schema, model, p = random_model(seed)
    rows = 5000
    blocks = list(model.iter_sample_codes(rows, "round", rng))
    assert len(blocks) == 8 and all(300 < len(b) < 1100 for b in blocks)
    codes = np.concatenate(blocks)
    tree = model.calibrate().tree
    root = tree.cliques[tree.order[0]]
    assert np.abs(marginal(codes, schema, root) - rows * dense_marginal(p, schema, root)).max() < 1 + 1e-9
    for clique in tree.cliques:
        error = np.abs(marginal(codes, schema, clique) / rows - dense_marginal(p, schema, clique)).sum()
        assert error < 0.02 + 2 * len(blocks) * np.prod([schema[c].size for c in clique]) / rows
    first = np.concatenate(list(model.iter_sample_codes(rows, "round", np.random.default_rng(7))))
    again = model.sample_codes(rows, "round", np.random.default_rng(7))
    np.testing.assert_array_equal(first, again)


def test_controlled_rounding_beats_multinomial_draws():
    _, schema, model, p = random_model(3)
    rows = 3000
    def err(method, seed):
        codes = model.sample_codes(rows, method, np.random.default_rng(seed))
        return np.abs(np.bincount(schema.cell_index(codes), minlength=p.size) / rows - p.reshape(-1)).sum()
    rounded = np.median([err("round", s) for s in range(5)])
    drawn = np.median([err("multinomial", s) for s in range(5)])
    assert rounded < 0.7 * drawn


def test_siblings_stay_independent_given_their_separator():
    """Two children of one clique on the same separator: the sampler must not couple them."""
    schema = Schema((Coded("a", 2), Coded("b", 4), Coded("c", 4)))
    model = FactoredModel(schema)
    model.add_log(("a", "b"), np.zeros((2, 4)))
    model.add_log(("a", "c"), np.zeros((2, 4)))
    codes = model.sample_codes(20000, "round", np.random.default_rng(0))
    joint = marginal(codes, schema, ("b", "c")) / 20000
    np.testing.assert_allclose(joint, np.full((4, 4), 1 / 16), atol=0.01)


def test_rounding_stratifies_a_pair_across_cliques():
    """a and c sit in different cliques (a-b, b-c): with controlled rounding their pair lands
    within rounding of the model (about one row per b value per cell), not a multinomial draw
    away; the multinomial sampler is the yardstick."""
    schema = Schema((Coded("a", 3), Coded("b", 4), Coded("c", 5)))
    rng = np.random.default_rng(12)
    model = FactoredModel(schema)
    model.add_log(("a", "b"), rng.normal(size=(3, 4)))
    model.add_log(("b", "c"), rng.normal(size=(4, 5)))
    n = 20_000
    expected = n * model.marginal(("a", "c"))
    rounded = [np.abs(marginal(model.sample_codes(n, "round", np.random.default_rng(s)), schema, ("a", "c"))
                      - expected).max() for s in range(5)]
    drawn = [np.abs(marginal(model.sample_codes(n, "multinomial", np.random.default_rng(s)), schema, ("a", "c"))
                    - expected).max() for s in range(5)]
    assert max(rounded) <= 4 + 2 and np.median(drawn) > 3 * max(rounded)


def test_seeded_sampling_repeats():
    _, _, model, _ = random_model(5)
    a = model.sample_codes(1000, "round", np.random.default_rng(9))
    b = model.sample_codes(1000, "round", np.random.default_rng(9))
    assert np.array_equal(a, b)
