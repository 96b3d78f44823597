"""The planned scan (``synth.data.counts``): what it counts, that every table it gives equals the
NumPy count on the rows, that partial counts merge exactly, and that the engines give the
same release from a scan's counts as from the rows (same seed)."""

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from synth.data import reading as data
from synth.engines.blr import blr
from synth.data import counts as counts_module
from synth.data.counts import GROUP_BUDGET, Counts, count_codes, data_marginal, data_rows, plan_scan
from synth.errors import DataError, SynthError
from synth.engines.mwem import mwem
from synth.engines.pmw import run_pmw
from synth.data.schema import Coded, Schema
from synth.data.workload import Workload

from .reference import count_table

SCHEMA = Schema((Coded("a", 3), Coded("b", 4), Coded("c", 2), Coded("d", 5)))


def random_codes(n: int, seed: int, schema: Schema = SCHEMA) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.stack([rng.integers(0, size, n) for size in schema.shape], axis=1).astype(np.uint8)


def test_plan_counts_the_maximal_subsets_or_the_universe():
    subsets = [("a", "b"), ("b",), ("d", "c"), ("c",), ("b", "a")]
    plan = plan_scan(SCHEMA, subsets, histogram_cells=0, group_cells=0)
    assert plan.needed == (("a", "b"), ("b",), ("d", "c"), ("c",), ("b", "a"))
    assert set(plan.counted) == {("a", "b"), ("c", "d")}  # one table per column set, in schema order
    assert plan.cells() == 12 + 10
    assert plan_scan(SCHEMA, subsets).counted == (("a", "b", "c", "d"),)  # 120 cells: the universe
    assert plan_scan(SCHEMA, [("a", "b")]).counted == (("a", "b"),)  # one table: never the universe
    assert plan_scan(SCHEMA, []).counted == ()


@pytest.mark.parametrize("seed", range(6))
def test_plan_keeps_exactly_the_maximal_subsets(seed):
    """Against the definition: a subset is counted on its own unless another strictly holds it."""
    rng = np.random.default_rng(seed)
    names = list(WIDE.names)
    subsets = [tuple(rng.permutation(names)[: int(rng.integers(0, 4))]) for _ in range(int(rng.integers(1, 60)))]
    sets = [frozenset(s) for s in subsets]
    expected = {tuple(sorted(s, key=WIDE.index)) for s in sets if s and not any(s < other for other in sets)}
    plan = plan_scan(WIDE, subsets, histogram_cells=0, group_cells=0)
    assert sorted(plan.counted) == sorted(expected)
    assert plan.needed == tuple(dict.fromkeys(subsets))


WIDE = Schema(tuple(Coded(f"c{j}", size) for j, size in enumerate((2, 3, 5, 8, 10, 16, 20, 50))))


@pytest.mark.parametrize("group_cells", [100, 2_000, 2**17])
def test_plan_packs_subsets_into_tables_within_their_limits(group_cells):
    """Every maximal subset lies in a counted table; a table that holds more than one is
    within ``group_cells``; the tables hold no more cells than the budget allows; packing
    never counts more tables than the subsets alone."""
    pairs = list(itertools.combinations(WIDE.names, 2))
    plan = plan_scan(WIDE, pairs, histogram_cells=0, group_cells=group_cells)
    alone = plan_scan(WIDE, pairs, histogram_cells=0, group_cells=0)
    assert len(alone.counted) == 28
    for pair in pairs:
        assert any(set(pair) <= set(table) for table in plan.counted), pair
    for table in plan.counted:
        holds = [pair for pair in pairs if set(pair) <= set(table)]
        assert len(holds) == 1 or math.prod(WIDE[n].size for n in table) <= group_cells
        assert list(table) == sorted(table, key=WIDE.index)
    assert plan.cells() <= max(GROUP_BUDGET, alone.cells())
    assert len(plan.counted) <= len(alone.counted)
    if group_cells == 2**17:
        assert len(plan.counted) <= 4  # 28 pairs in a few tables: a row costs a few counts, not 28


def test_packing_keeps_to_the_budget(monkeypatch):
    """Many subsets whose unions would each fit a table: the packed tables stop growing at the
    budget (the memory a scan keeps, whatever it would save)."""
    monkeypatch.setattr(counts_module, "GROUP_BUDGET", 5_000)
    pairs = list(itertools.combinations(WIDE.names, 2))
    plan = plan_scan(WIDE, pairs, histogram_cells=0, group_cells=2**17)
    alone = plan_scan(WIDE, pairs, histogram_cells=0, group_cells=0)
    assert plan.cells() <= max(5_000, alone.cells())
    assert len(plan.counted) < len(alone.counted)


def test_plan_refuses_bad_subsets():
    with pytest.raises(Exception, match="'z'"):
        plan_scan(SCHEMA, [("a", "z")])
    with pytest.raises(SynthError, match="twice"):
        plan_scan(SCHEMA, [("a", "a")])
    with pytest.raises(SynthError, match="cells"):
        plan_scan(SCHEMA, [("a", "b", "c", "d")], max_cells=100)


@pytest.mark.parametrize("histogram_cells, group_cells", [(0, 0), (0, 40), (10**6, 0)])
@pytest.mark.parametrize("seed", range(5))
def test_every_table_equals_the_numpy_count(seed, histogram_cells, group_cells):
    """Random rows, random subsets in random column orders: each table a scan gives (the
    planned ones, and any subset below them) equals the NumPy reference count."""
    rng = np.random.default_rng(seed)
    codes = random_codes(int(rng.integers(1, 500)), seed)
    names = list(SCHEMA.names)
    subsets = [tuple(rng.permutation(names)[: int(rng.integers(1, 4))]) for _ in range(3)]
    plan = plan_scan(SCHEMA, subsets, histogram_cells=histogram_cells, group_cells=group_cells)
    counts = Counts(plan)
    for part in np.array_split(codes, 3):  # chunks, as a scan reads them
        counts.add(len(part), count_codes(part, plan))
    assert counts.n_rows == data_rows(counts) == len(codes)
    below = [tuple(p) for s in subsets for k in range(0, len(s) + 1) for p in itertools.permutations(s, k)]
    for subset in subsets + below:
        positions = [SCHEMA.index(c) for c in subset]
        expected = count_table(codes, positions, tuple(SCHEMA.shape[p] for p in positions))
        np.testing.assert_array_equal(counts.marginal(subset), expected, err_msg=str(subset))
        np.testing.assert_array_equal(data_marginal(codes, SCHEMA, subset), expected)
    for subset, table in counts.tables.items():
        np.testing.assert_array_equal(table, counts.marginal(subset))


def test_an_out_of_range_code_is_one_labelled_line():
    """count_codes checks codes it did not encode itself: the message quotes one, so it says so."""
    schema = Schema((Coded("a", 3), Coded("b", 2)))
    plan = plan_scan(schema, [("a", "b")])
    with pytest.raises(DataError, match=r"^row 2, column 'a': code 9 is outside 0..2 \(NON-PRIVATE: this message "
                                        r"quotes the private data\)$"):
        count_codes(np.array([[0, 1], [9, 0]]), plan)


def test_a_table_not_planned_is_refused():
    counts = Counts(plan_scan(SCHEMA, [("a", "b"), ("c",)], histogram_cells=0, group_cells=0))
    with pytest.raises(SynthError, match=r"did not count a table over \['a', 'c'\]"):
        counts.marginal(("a", "c"))


def test_partial_counts_merge_exactly():
    codes = random_codes(1000, 3)
    plan = plan_scan(SCHEMA, [("a", "d"), ("b", "c")], histogram_cells=0)
    parts = []
    for part in np.array_split(codes, 4):
        counts = Counts(plan)
        counts.add(len(part), count_codes(part, plan), {"a": 1})
        parts.append(counts)
    merged = (parts[0].merge(parts[1])).merge(parts[2].merge(parts[3]))  # a tree
    whole = Counts(plan)
    whole.add(len(codes), count_codes(codes, plan))
    assert merged.n_rows == 1000 and merged.clipped == {"a": 4}
    for subset in plan.counted:
        np.testing.assert_array_equal(merged.counted[subset], whole.counted[subset])
    assert parts[0].n_rows == 250  # merging left its inputs alone


def test_scan_of_a_csv_in_chunks(tmp_path):
    codes = random_codes(2345, 4)
    path = tmp_path / "d.csv"
    pd.DataFrame(codes, columns=SCHEMA.names).to_csv(path, index=False)
    counts = data.scan(path, SCHEMA, [("a", "b"), ("d",)], chunk_rows=100)
    assert counts.n_rows == 2345
    np.testing.assert_array_equal(counts.tables[("d",)], np.bincount(codes[:, 3], minlength=5))
    np.testing.assert_array_equal(counts.marginal(("b", "a")), count_table(codes, [1, 0], (4, 3)))


WORKLOAD = Workload.marginals(SCHEMA, 2)


def _scanned(codes, subsets, schema: Schema = SCHEMA) -> Counts:
    plan = plan_scan(schema, subsets)
    counts = Counts(plan)
    counts.add(len(codes), count_codes(codes, plan))
    return counts


@pytest.mark.parametrize("options", [dict(selection="classic"), dict(selection="adaptive"), dict(delta=1e-6)])
def test_mwem_from_counts_equals_mwem_from_rows(options):
    codes = random_codes(800, 5)
    runs = [mwem(d, SCHEMA, WORKLOAD, 1.0, rng=11, **options) for d in (codes, _scanned(codes, WORKLOAD.subsets))]
    np.testing.assert_array_equal(runs[0].distribution, runs[1].distribution)
    assert runs[0].rows == runs[1].rows


def test_pmw_from_counts_equals_pmw_from_rows():
    codes = random_codes(800, 6)
    counts = _scanned(codes, WORKLOAD.subsets + [tuple(SCHEMA.names)])  # the KL monitor reads the histogram
    runs = [run_pmw(d, SCHEMA, WORKLOAD, 1.0, rng=12) for d in (codes, counts)]
    np.testing.assert_array_equal(runs[0].answers, runs[1].answers)
    np.testing.assert_array_equal(runs[0].final, runs[1].final)


def test_blr_from_counts_equals_blr_from_rows():
    schema = Schema((Coded("a", 3), Coded("c", 2)))
    workload = Workload.marginals(schema, 1)
    codes = random_codes(300, 7, schema)
    releases = [blr(d, schema, workload, 1.0, rng=13, net_size=4) for d in (codes, _scanned(codes, workload.subsets, schema))]
    np.testing.assert_array_equal(releases[0].distribution, releases[1].distribution)
