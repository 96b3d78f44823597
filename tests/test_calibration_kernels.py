"""The calibration kernel (``synth._kernels.calibration``) and the calibration built on it, against
plain NumPy: a clique's log table cell for cell, and every clique's belief against the dense
distribution or the log-space sum-product the factored model used before."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from synth._kernels.calibration import broadcast_sum
from synth.data.schema import Coded, Schema
from synth.errors import SynthError
from synth.models import factored
from synth.models.factored import FactoredModel


def broadcast_reference(parts, columns, sizes) -> np.ndarray:
    """Σ of the parts broadcast over ``columns``, added in order by NumPy (the definition)."""
    out = np.zeros([sizes[c] for c in columns])
    for subset, table in parts:
        out = out + np.asarray(table).reshape([sizes[c] if c in subset else 1 for c in columns])
    return out


def random_parts(rng, columns, sizes, count, minus_inf=0.0):
    parts = []
    for _ in range(count):
        subset = tuple(c for c in columns if rng.random() < 0.5)
        table = rng.normal(0, 3, [sizes[c] for c in subset])
        if minus_inf and table.ndim:
            table[rng.random(table.shape) < minus_inf] = -np.inf
        parts.append((subset, table))
    return parts


# Shapes that reach every way of adding a table to a block: long last axes (rows copied or
# spread), short ones (gathers), several blocks, the whole clique one block, axes of one cell,
# a last axis longer than the largest block, a single column.
SHAPES = [
    {"a": 3, "b": 5, "c": 9},
    {"a": 7, "b": 6, "c": 2},
    {"a": 40, "b": 30, "c": 20, "d": 3},
    {"a": 11, "b": 13, "c": 17, "d": 5},
    {"a": 1, "b": 4, "c": 1, "d": 6},
    {"a": 3, "b": 20000},
    {"a": 50},
    {"a": 2, "b": 2, "c": 2, "d": 2, "e": 2, "f": 2, "g": 2, "h": 2, "i": 2, "j": 2, "k": 2},
]


@pytest.mark.parametrize("sizes", SHAPES)
@pytest.mark.parametrize("seed", range(4))
def test_summed_tables_match_numpy_to_the_bit(sizes, seed):
    rng = np.random.default_rng(seed)
    columns = tuple(sizes)
    for count in (0, 1, 2, 5):
        parts = random_parts(rng, columns, sizes, count, minus_inf=0.1 if seed % 2 else 0.0)
        got = factored._summed(parts, columns, sizes)
        np.testing.assert_array_equal(got, broadcast_reference(parts, columns, sizes))


def test_the_shapes_reach_every_kind_of_table():
    kinds, rng = set(), np.random.default_rng(0)
    for sizes in SHAPES:
        columns = tuple(sizes)
        for _ in range(10):
            parts = random_parts(rng, columns, sizes, 4)
            plan = factored._broadcast_plan(columns, tuple(sizes.values()), tuple(s for s, _ in parts))
            kinds.update(plan[4].tolist())
    assert kinds == {0, 1, 2, 3, 4}


@pytest.mark.parametrize("seed", range(40))
def test_random_shapes_match_numpy(seed):
    rng = np.random.default_rng(100 + seed)
    columns = tuple(f"c{i}" for i in range(int(rng.integers(1, 6))))
    sizes = {c: int(rng.choice([1, 2, 3, 5, 8, 13, 40])) for c in columns}
    parts = random_parts(rng, columns, sizes, int(rng.integers(0, 6)), minus_inf=0.05)
    expected = broadcast_reference(parts, columns, sizes)
    np.testing.assert_array_equal(factored._summed(parts, columns, sizes), expected)


def test_kernel_writes_every_cell_and_fills_zeros_without_tables():
    out = np.full(12, np.nan)
    empty, no_offsets = np.zeros(0, dtype=np.int64), np.zeros((0, 1), dtype=np.int64)
    broadcast_sum(out, np.array([3, 4]), empty, empty, np.zeros(0), 1, empty, no_offsets)
    np.testing.assert_array_equal(out, np.zeros(12))
    sizes = {"a": 3, "b": 4}
    parts = [(("a",), np.arange(3.0)), (("b",), np.arange(4.0) * 10)]
    np.testing.assert_array_equal(factored._summed(parts, ("a", "b"), sizes),
                                  np.arange(3.0)[:, None] + np.arange(4.0)[None, :] * 10)


# -- the calibration ---------------------------------------------------------------------------


def dense_log(schema: Schema, potentials) -> np.ndarray:
    log = np.zeros(schema.shape)
    for subset, theta in potentials:
        log = log + np.asarray(theta).reshape([schema[c].size if c in subset else 1 for c in schema.names])
    return log


def dense_marginal(log: np.ndarray, schema: Schema, subset) -> np.ndarray:
    p = np.exp(log - log.max())
    p /= p.sum()
    return p.sum(axis=tuple(i for i, c in enumerate(schema.names) if c not in subset))


def log_space_beliefs(model: FactoredModel) -> tuple[list[np.ndarray], float]:
    """The sum-product the model used before its calibration kernel: messages in log space,
    each taken out by its largest entry; a child's message from its parent is the parent's
    log belief without the child's own message, summed onto the separator."""
    tree, sizes = model.tree, model._sizes

    def lift(table, subset, columns):
        return np.asarray(table).reshape([sizes[c] if c in subset else 1 for c in columns])

    def log_sum(table, columns, keep):
        top = table.max()
        axes = tuple(a for a, c in enumerate(columns) if c not in keep)
        with np.errstate(divide="ignore"):
            return np.log(np.exp(table - top).sum(axis=axes)) + top

    logs = [np.zeros([sizes[c] for c in clique]) for clique in tree.cliques]
    for subset, theta in model._potentials.items():
        i = tree.clique_containing(subset)
        logs[i] = logs[i] + lift(theta, subset, tree.cliques[i])
    children = {i: [c for c in tree.order if tree.parent[c] == i] for i in tree.order}
    upward = {}
    for i in reversed(tree.order):
        for c in children[i]:
            logs[i] = logs[i] + lift(upward[c], tree.separator(c, i), tree.cliques[i])
        if tree.parent[i] >= 0:
            upward[i] = log_sum(logs[i], tree.cliques[i], tree.separator(i, tree.parent[i]))
    for i in tree.order:
        for c in children[i]:
            separator = tree.separator(c, i)
            own = np.where(np.isfinite(upward[c]), upward[c], 0.0)  # -inf: the parent has -inf there too
            without = logs[i] - lift(own, separator, tree.cliques[i])
            logs[c] = logs[c] + lift(log_sum(without, tree.cliques[i], separator), separator, tree.cliques[c])
    root = tree.order[0]
    log_z = float(log_sum(logs[root], tree.cliques[root], ()))
    return [np.exp(log - log_z) for log in logs], log_z


def random_factored(seed: int, columns: int, sizes=(2, 9), scale: float = 1.5, subsets: int = 8):
    rng = np.random.default_rng(seed)
    schema = Schema(tuple(Coded(f"c{i}", int(rng.integers(*sizes))) for i in range(columns)))
    model, potentials = FactoredModel(schema, max_cells=10**8), []
    for _ in range(subsets):
        positions = sorted(rng.choice(columns, int(rng.integers(1, 4)), replace=False))
        chosen = tuple(schema.names[i] for i in positions)
        theta = rng.normal(0, scale, [schema[c].size for c in chosen])
        model.add_log(chosen, theta)
        potentials.append((chosen, theta))
    return schema, model, potentials


def assert_beliefs(model, expected, log_z=None, floor=0.0):
    calibration = model.calibrate()
    for clique, got, want in zip(model.tree.cliques, calibration.beliefs, expected):
        assert got.shape == want.shape, clique
        keep = want > floor
        np.testing.assert_allclose(got[keep], want[keep], rtol=1e-10, atol=0, err_msg=str(clique))
        assert np.abs(got[~keep]).max(initial=0.0) <= max(floor, 1e-300)
    if log_z is not None:
        assert calibration.log_z == pytest.approx(log_z, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("seed", range(12))
def test_beliefs_match_the_dense_distribution(seed):
    schema, model, potentials = random_factored(seed, int(np.random.default_rng(seed).integers(3, 7)))
    log = dense_log(schema, potentials)
    expected = [dense_marginal(log, schema, clique) for clique in model.tree.cliques]
    top = log.max()
    assert_beliefs(model, expected, top + math.log(np.exp(log - top).sum()))
    for subset in itertools.combinations(schema.names, 2):
        np.testing.assert_allclose(model.marginal(subset), dense_marginal(log, schema, subset), rtol=1e-10)


@pytest.mark.parametrize("seed", range(6))
def test_beliefs_match_the_log_space_calibration_on_big_models(seed):
    """Universes far past a dense table (11 columns of up to 13 codes), cliques up to 2·10^5 cells."""
    _, model, _ = random_factored(50 + seed, 11, sizes=(2, 14), subsets=20)
    expected, log_z = log_space_beliefs(model)
    assert max(model.tree.clique_cells) > 500
    assert_beliefs(model, expected, log_z)


@pytest.mark.parametrize("seed", range(6))
def test_extreme_potentials_and_zero_mass_match_the_log_space_calibration(seed):
    rng = np.random.default_rng(70 + seed)
    _, model, _ = random_factored(70 + seed, 7, subsets=10, scale=40)
    for subset in list(model.subsets)[:3]:
        theta = np.zeros([model._sizes[c] for c in subset])
        theta[rng.random(theta.shape) < 0.3] = -np.inf
        model.add_log(subset, theta)
    expected, log_z = log_space_beliefs(model)
    if not np.isfinite(log_z):
        pytest.skip("every cell has zero mass")
    assert_beliefs(model, expected, log_z, floor=1e-250)


def triangle(root_elsewhere: bool) -> tuple[Schema, FactoredModel, list]:
    """A clique (a, b, c) whose two pair tables peak at different values of a: the sum of
    their largest entries, 1800, is 900 above the clique's largest entry (900), so a table
    exponentiated by the first shift would underflow everywhere."""
    names = [("a", 2), ("b", 2), ("c", 2)] + ([("d", 10), ("e", 10)] if root_elsewhere else [])
    schema = Schema(tuple(Coded(n, s) for n, s in names))
    potentials = [(("a", "b"), np.array([[900.0, 900.0], [0.0, 0.0]])),
                  (("a", "c"), np.array([[0.0, 0.0], [900.0, 901.0]])),
                  (("b", "c"), np.array([[0.0, 1.0], [2.0, 0.5]]))]
    if root_elsewhere:  # a bigger clique (c, d, e) becomes the root, the triangle its child
        potentials.append((("c", "d", "e"), np.random.default_rng(0).normal(0, 1, (2, 10, 10))))
    model = FactoredModel(schema)
    for subset, theta in potentials:
        model.add_log(subset, theta)
    return schema, model, potentials


@pytest.mark.parametrize("root_elsewhere", [False, True])
def test_a_shift_far_above_the_largest_entry_falls_back_to_the_exact_one(root_elsewhere):
    schema, model, potentials = triangle(root_elsewhere)
    assert ("a", "b", "c") in model.tree.cliques
    assert (model.tree.order[0] != model.tree.cliques.index(("a", "b", "c"))) == root_elsewhere
    log = dense_log(schema, potentials)
    top = log.max()
    assert_beliefs(model, [dense_marginal(log, schema, c) for c in model.tree.cliques],
                   top + math.log(np.exp(log - top).sum()))


def test_a_child_far_below_its_parent_is_recomputed_in_log_space():
    """The child (a, x) gives a = 1 e^-300 and e^-740 (its own table: the second underflows to a
    subnormal); the root gives a = 1 e^300 back. The belief of (a = 1, x = 1), e^-440 of the
    largest, must keep its bits, as the log-space calibration kept them."""
    schema = Schema((Coded("a", 2), Coded("b", 3), Coded("c", 3), Coded("x", 2)))
    rng = np.random.default_rng(3)
    potentials = [(("a", "b"), np.array([[0.0] * 3, [300.0] * 3])), (("b", "c"), rng.normal(0, 1, (3, 3))),
                  (("a", "c"), rng.normal(0, 1, (2, 3))),
                  (("a", "x"), np.array([[0.0, 0.0], [-300.0, -740.0]]))]
    model = FactoredModel(schema)
    for subset, theta in potentials:
        model.add_log(subset, theta)
    assert model.tree.cliques[model.tree.order[0]] == ("a", "b", "c")
    log = dense_log(schema, potentials)
    expected = [dense_marginal(log, schema, c) for c in model.tree.cliques]
    assert 0 < expected[model.tree.cliques.index(("a", "x"))][1, 1] < 1e-180
    assert_beliefs(model, expected, floor=1e-250)


def test_no_mass_anywhere_is_refused():
    schema = Schema((Coded("a", 2), Coded("b", 3)))
    model = FactoredModel(schema)
    model.add_log(("a", "b"), np.array([[0.0, -np.inf, 0.0], [-np.inf, -np.inf, -np.inf]]))
    model.add_log(("a",), np.array([-np.inf, 0.0]))
    with pytest.raises(SynthError, match="zero mass"):
        model.calibrate()


def test_marginals_in_any_order_and_type_match():
    schema, model, potentials = random_factored(5, 5)
    log = dense_log(schema, potentials)
    subsets = [("c0", "c1"), ["c1", "c0"], ("c1", "c0"), ("c2",), (), tuple(model.subsets[0])]
    for subset, got in zip(subsets, model.marginals(subsets)):
        ranks = np.argsort(np.argsort([schema.index(c) for c in subset]))  # schema order -> the subset's
        want = dense_marginal(log, schema, subset).transpose(ranks)
        np.testing.assert_allclose(got, want, rtol=1e-10)
        np.testing.assert_allclose(model.marginal(subset), want, rtol=1e-10)
