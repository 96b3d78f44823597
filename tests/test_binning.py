"""Bin edges from noisy counts (synth.data.binning): the grid, the cut into bins of similar mass,
and the widening of private bounds over a thin tail."""

import numpy as np
import pytest

from synth.data.binning import (
    CELL_SIGMAS, EXTEND_GAP, MAX_CELLS_PER_BUCKET, equal_mass_edges, extend_bounds, fine_grid, grid_cells,
)


def test_the_grid_is_fine_where_the_magnitudes_hold_mass_and_coarse_elsewhere():
    sigma = 10.0

    def count(x):  # magnitudes: many values in [32, 64), none elsewhere
        return 10_000 if 32 <= x < 64 else 0

    edges = fine_grid(0, 1024, True, count, sigma)
    assert edges[0] == 0 and edges[-1] == 1024 and np.all(np.diff(edges) > 0)
    inside = edges[(edges >= 32) & (edges <= 64)]
    assert len(inside) == 33  # every integer of [32, 64): 32 cells (the bucket's count allows up to 64)
    assert {0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024} <= set(edges.tolist())
    assert not set(edges.tolist()) & {3, 5, 100, 300, 700}  # empty buckets are single cells
    real = fine_grid(-3.0, 5.0, False, lambda x: 1e6 if 1 <= x < 2 else 0, sigma)
    assert real[0] == -3.0 and real[-1] == 5.0
    assert np.sum((real > 1) & (real < 2)) == MAX_CELLS_PER_BUCKET - 1  # the cap on one bucket's cells
    thin = fine_grid(0, 64, False, lambda x: CELL_SIGMAS * sigma * 3 if 32 <= x < 64 else 0, sigma)
    assert np.sum((thin > 32) & (thin < 64)) == 2  # three cells: each holds about CELL_SIGMAS deviations


def test_grid_cells_count_one_cell_per_value_with_cells_outside():
    edges = np.array([0.0, 1.0, 5.0, 10.0])
    values = np.array([-1, 0, 0.5, 1, 4.99, 5, 10, 10.5, 99])
    assert grid_cells(values, edges).tolist() == [1, 2, 2, 2, 2]  # below, [0,1), [1,5), [5,10], above


def test_bins_of_similar_mass_with_a_spike_alone_and_the_tail_cut_finely():
    edges = np.arange(0, 101, dtype=np.float64)
    mass = np.full(100, 10.0)
    mass[0] = 9000.0  # a spike at 0: 90% of the mass
    bins = equal_mass_edges(edges, mass, 10, True)
    assert bins[0] == 0 and bins[1] == 1 and bins[-1] == 100  # the spike alone
    widths = np.diff(bins[1:])
    assert len(bins) == 11 and widths.max() <= 12 and widths.min() >= 10  # the rest: 9 bins of ~11 cells
    flat = equal_mass_edges(edges, np.full(100, 10.0), 4, True)
    assert flat == [0, 25, 50, 75, 100]
    noisy = equal_mass_edges(edges, np.where(np.arange(100) < 50, 50.0, -3.0), 5, False, sigma=5.0)
    assert 50.0 in noisy and noisy[-1] == 100.0 and noisy[-2] == 50.0  # the empty end is a bin of its own


def test_bounds_widen_over_a_thin_tail_but_not_to_a_lone_far_bucket():
    sigma = 10.0
    noisy = np.zeros(40)
    noisy[10:20] = 1000  # the body
    noisy[22] = 30  # a thin tail two buckets past it (3 sigma)
    noisy[35] = 100  # far out, past EXTEND_GAP empty buckets: never reached
    first, last = extend_bounds(noisy, 10, 19, sigma, zero=0)
    assert (first, last) == (10, 22)
    noisy[22] = 10  # 1 sigma: not enough
    assert extend_bounds(noisy, 10, 19, sigma, zero=0) == (10, 19)
    noisy[9 - EXTEND_GAP + 1] = 50  # below: within reach
    assert extend_bounds(noisy, 10, 19, sigma, zero=0)[0] == 9 - EXTEND_GAP + 1
    assert extend_bounds(noisy, 10, 19, sigma, zero=10)[0] == 10  # never across zero into the other sign


@pytest.mark.parametrize("seed", range(3))
def test_derived_bins_of_a_long_tailed_column_keep_its_zeros_and_its_cap(seed):
    """A column like capital-gain: 90% zeros, a body in the thousands, 1% at a cap of 99,999:
    the derived bounds reach the cap and the zeros are a bin of their own."""
    import pandas as pd

    from synth.data.derive import derive_schema

    rng = np.random.default_rng(seed)
    n = 30_000
    gain = np.where(rng.random(n) < 0.9, 0, rng.integers(2000, 15000, n))
    gain[rng.random(n) < 0.01] = 99_999
    edges = derive_schema(pd.DataFrame({"gain": gain}), 2.0, 1e-9, rng=seed).schema["gain"].edges
    assert edges[0] == 0 and edges[1] == 1 and edges[-1] >= 99_999


def test_a_bin_whose_mass_crowds_at_one_end_is_cut_there():
    """Drawn uniformly inside its bin, a value of a bin whose mass sits at one end would spread
    over all of it: such a bin is cut where its mass crosses half."""
    edges = np.array([0.0, 10.0, 20.0, 30.0, 40.0])
    crowded = equal_mass_edges(edges, np.array([900.0, 30.0, 30.0, 40.0]), 1, False)
    assert crowded == [0.0, 10.0, 40.0]
    even = equal_mass_edges(edges, np.array([250.0, 250.0, 250.0, 250.0]), 1, False)
    assert even == [0.0, 40.0]
