"""Pair matching of synthetic rows (synth.models.matching): the Numba sweep against a plain Python
twin, and what it is for: rows closer to the model's pair tables, never further."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from synth._kernels.matching import match_rows
from synth.models.factored import FactoredModel
from synth.models.matching import _layout, all_pairs, match_pairs
from synth.data.schema import Coded, Schema


def reference_sweep(codes, strides, offsets, sizes, counts, targets, order):
    """The greedy sweep in plain NumPy/Python: same visiting order, same tie rule."""
    moved = 0
    for r in order:
        for j in range(codes.shape[1]):
            old = codes[r, j]
            keys = offsets + strides @ codes[r]
            held = strides[:, j] != 0
            best, best_gain = old, -1e-9
            for value in range(sizes[j]):
                if value == old:
                    continue
                here = keys[held]
                there = here + (value - old) * strides[held, j]
                change = float(np.sum(np.abs(counts[here] - 1 - targets[here]) - np.abs(counts[here] - targets[here])
                                      + np.abs(counts[there] + 1 - targets[there]) - np.abs(counts[there] - targets[there])))
                if change < best_gain:
                    best, best_gain = value, change
            if best != old:
                counts[keys[held]] -= 1
                codes[r, j] = best
                counts[offsets[held] + strides[held] @ codes[r]] += 1
                moved += 1
    return moved


def random_case(seed: int):
    rng = np.random.default_rng(seed)
    schema = Schema(tuple(Coded(f"c{i}", int(rng.integers(2, 5))) for i in range(int(rng.integers(2, 5)))))
    rows = int(rng.integers(5, 60))
    codes = np.stack([rng.integers(0, size, rows) for size in schema.shape], axis=1).astype(np.int64)
    tables = {pair: rng.dirichlet(np.ones(schema[pair[0]].size * schema[pair[1]].size)).reshape(
        schema[pair[0]].size, schema[pair[1]].size) for pair in all_pairs(schema)}
    return rng, schema, codes, tables


def objective(codes, schema, tables) -> float:
    total = 0.0
    for (a, b), table in tables.items():
        counts = np.zeros(table.shape)
        np.add.at(counts, (codes[:, schema.index(a)], codes[:, schema.index(b)]), 1)
        total += np.abs(counts - table * len(codes)).sum()
    return total


@pytest.mark.parametrize("seed", range(30))
def test_kernel_sweep_equals_the_reference(seed):
    rng, schema, codes, tables = random_case(seed)
    strides, offsets, targets = _layout(schema, tables, len(codes))
    counts = np.zeros_like(targets)
    np.add.at(counts, (offsets[None, :] + codes @ strides.T).reshape(-1), 1.0)
    order = rng.permutation(len(codes))
    sizes = np.array(schema.shape, dtype=np.int64)
    got_codes, got_counts = codes.copy(), counts.copy()
    want_codes, want_counts = codes.copy(), counts.copy()
    got = match_rows(got_codes, strides, offsets, sizes, got_counts, targets, order)
    want = reference_sweep(want_codes, strides, offsets, sizes, want_counts, targets, order)
    assert got == want
    np.testing.assert_array_equal(got_codes, want_codes)
    np.testing.assert_allclose(got_counts, want_counts)


@pytest.mark.parametrize("seed", range(10))
def test_matching_never_raises_the_distance_and_keeps_counts_true(seed):
    rng, schema, codes, tables = random_case(seed)
    before = objective(codes, schema, tables)
    moved = match_pairs(codes, schema, tables, rng)
    after = objective(codes, schema, tables)
    assert after <= before + 1e-9
    assert (moved > 0) == (after < before - 1e-9)
    assert all(0 <= codes[:, j].min() and codes[:, j].max() < size for j, size in enumerate(schema.shape))


def test_sampled_factored_rows_move_toward_the_model_across_cliques():
    """Two cliques joined by one column: a pair across them is a random draw away from the
    model after sampling; matching brings it close."""
    rng = np.random.default_rng(5)
    schema = Schema(tuple(Coded(name, 6) for name in "abcd"))
    model = FactoredModel(schema)
    model.add_log(("a", "b"), rng.normal(0, 1.5, (6, 6)))
    model.add_log(("b", "c"), rng.normal(0, 1.5, (6, 6)))
    model.add_log(("c", "d"), rng.normal(0, 1.5, (6, 6)))
    pairs = all_pairs(schema)
    tables = dict(zip(pairs, model.marginals(pairs)))
    codes = model.sample_codes(3000, rng=1).astype(np.int64)
    before = objective(codes, schema, tables)
    match_pairs(codes, schema, tables, np.random.default_rng(2))
    after = objective(codes, schema, tables)
    assert after < 0.5 * before
    far = ("a", "d")  # three cliques apart
    table = np.zeros((6, 6))
    np.add.at(table, (codes[:, 0], codes[:, 3]), 1)
    assert np.abs(table / len(codes) - tables[far]).sum() < 0.02


def test_no_rows_or_no_pairs_is_a_no_op():
    rng, schema, codes, tables = random_case(0)
    assert match_pairs(codes[:0], schema, tables, rng) == 0
    assert match_pairs(codes, schema, {}, rng) == 0
    assert list(itertools.islice(all_pairs(Schema((Coded("x", 2),))), 1)) == []
