import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from . import reference
from synth.errors import DataError, SchemaError
from synth.data.schema import Coded, Schema
from synth.data.tables import add_counts, histogram, marginal, marginal_from_dense


@st.composite
def schema_and_codes(draw):
    sizes = draw(st.lists(st.integers(1, 6), min_size=1, max_size=5))
    n = draw(st.integers(0, 200))
    seed = draw(st.integers(0, 2**32 - 1))
    dtype = draw(st.sampled_from([np.uint8, np.uint16, np.int32, np.int64]))
    rng = np.random.default_rng(seed)
    codes = np.stack([rng.integers(0, s, n) for s in sizes], axis=1).astype(dtype)
    schema = Schema(tuple(Coded(f"c{i}", s) for i, s in enumerate(sizes)))
    return schema, codes


@settings(max_examples=150, deadline=None)
@given(schema_and_codes(), st.data())
def test_marginal_kernel_matches_bincount(case, data):
    schema, codes = case
    positions = data.draw(st.lists(st.integers(0, len(schema) - 1), unique=True, max_size=len(schema)))
    names = [schema.names[p] for p in positions]
    got = marginal(codes, schema, names)
    expected = reference.count_table(codes, positions, tuple(schema.shape[p] for p in positions))
    np.testing.assert_array_equal(got, expected)
    assert got.dtype == np.int64


@settings(max_examples=50, deadline=None)
@given(schema_and_codes())
def test_histogram_is_the_marginal_over_every_column(case):
    schema, codes = case
    got = histogram(codes, schema)
    assert got.shape == schema.shape
    np.testing.assert_array_equal(got, reference.count_table(codes, list(range(len(schema))), schema.shape))
    assert got.sum() == codes.shape[0]


def test_counts_accumulate_across_chunks(rng):
    schema = Schema((Coded("a", 4), Coded("b", 3)))
    codes = rng.integers(0, [4, 3], size=(1000, 2)).astype(np.uint8)
    out = np.zeros(12, dtype=np.int64)
    for chunk in np.array_split(codes, 7):
        add_counts(chunk, schema, np.array([0, 1]), out)
    np.testing.assert_array_equal(out.reshape(4, 3), marginal(codes, schema))


def test_out_of_range_code_names_row_and_column():
    schema = Schema((Coded("a", 4), Coded("b", 3)))
    codes = np.array([[0, 0], [1, 2], [3, 3]], dtype=np.int32)
    with pytest.raises(DataError, match=r"row 3, column 'b': code 3 is outside 0..2"):
        marginal(codes, schema)
    negative = np.array([[0, 0], [-1, 0]], dtype=np.int32)
    with pytest.raises(DataError, match=r"row 2, column 'a': code -1"):
        marginal(negative, schema)


OUTSIDE_LABELLED = r"^row 2, column 'b': code 7 is outside 0..2 \(NON-PRIVATE: this message quotes the private data\)$"


def test_an_out_of_range_code_is_labelled_as_quoting_the_data():
    codes = np.array([[0, 0], [1, 7]], dtype=np.int32)
    with pytest.raises(DataError, match=OUTSIDE_LABELLED):
        marginal(codes, Schema((Coded("a", 4), Coded("b", 3))))


def test_a_query_count_labels_an_out_of_range_code_too():
    from synth.data.tables import count_matching
    from synth.data.workload import parse_query

    schema = Schema((Coded("a", 4), Coded("b", 3)))
    with pytest.raises(DataError, match=OUTSIDE_LABELLED):
        count_matching(np.array([[0, 0], [1, 7]], dtype=np.int32), schema, parse_query({"where": {"b": 1}}, schema))


def test_table_past_the_cap_is_refused():
    schema = Schema((Coded("a", 1000), Coded("b", 1000)))
    with pytest.raises(SchemaError, match="1,000,000 cells, more than the cap of 1,000"):
        histogram(np.zeros((1, 2), dtype=np.int32), schema, max_cells=1000)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=6), st.data())
def test_marginal_from_dense_matches_reshape_sum(sizes, data):
    schema = Schema(tuple(Coded(f"c{i}", s) for i, s in enumerate(sizes)))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    positions = data.draw(st.lists(st.integers(0, len(sizes) - 1), unique=True, min_size=1, max_size=len(sizes)))
    names = [schema.names[p] for p in positions]
    x = rng.random(schema.universe_size)
    got = marginal_from_dense(x, schema, names)
    np.testing.assert_allclose(got, reference.marginal_of_dense(x, schema.shape, positions), rtol=1e-12)
    counts = rng.integers(0, 50, schema.universe_size)
    got_counts = marginal_from_dense(counts, schema, names)
    assert got_counts.dtype == np.int64
    np.testing.assert_array_equal(got_counts, reference.marginal_of_dense(counts, schema.shape, positions))


def test_marginal_from_dense_of_histogram_equals_marginal_of_rows(rng):
    schema = Schema((Coded("a", 3), Coded("b", 4), Coded("c", 2), Coded("d", 5)))
    codes = np.stack([rng.integers(0, s, 500) for s in schema.shape], axis=1)
    x = histogram(codes, schema)
    for names in (["b"], ["d", "a"], ["a", "c"], ["b", "c", "d"]):
        np.testing.assert_array_equal(marginal_from_dense(x, schema, names), marginal(codes, schema, names))


def test_marginal_from_dense_checks_size():
    schema = Schema((Coded("a", 3), Coded("b", 4)))
    with pytest.raises(ValueError, match="has 5 cells but the universe has 12"):
        marginal_from_dense(np.zeros(5), schema, ["a"])


def test_add_counts_refuses_a_wrong_sized_table():
    schema = Schema((Coded("a", 4), Coded("b", 3)))
    with pytest.raises(ValueError, match="flat int64 array of 12 cells"):
        add_counts(np.zeros((2, 2), dtype=np.uint8), schema, np.array([0, 1]), np.zeros(11, dtype=np.int64))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=5), st.data())
def test_scale_query_cells_matches_a_full_mask(sizes, data):
    from synth.data.tables import scale_query_cells
    from synth.data.workload import Query

    schema = Schema(tuple(Coded(f"c{i}", s) for i, s in enumerate(sizes)))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    positions = sorted(data.draw(st.lists(st.integers(0, len(sizes) - 1), unique=True, max_size=len(sizes))))
    allowed = [np.sort(rng.choice(sizes[p], size=int(rng.integers(1, sizes[p] + 1)), replace=False)) for p in positions]
    query = Query(tuple(schema.names[p] for p in positions), tuple(allowed))
    w = rng.random(schema.universe_size)
    factor = float(rng.uniform(0.5, 2.0))
    expected, expected_before = reference.scale_query_cells(w, schema.shape, positions, allowed, factor)
    before = scale_query_cells(w, schema, query, factor)
    np.testing.assert_allclose(w, expected, rtol=1e-15)
    assert before == pytest.approx(expected_before, rel=1e-12)


def test_scale_query_cells_checks_the_table():
    from synth.data.tables import scale_query_cells
    from synth.data.workload import Query

    schema = Schema((Coded("a", 3),))
    with pytest.raises(ValueError, match="contiguous flat float64 array of 3 cells"):
        scale_query_cells(np.ones(3, dtype=np.float32), schema, Query((), ()), 2.0)


@pytest.mark.parametrize("positions", [[], [0], [1], [0, 1], [2], [0, 2]])
def test_scale_query_cells_on_long_contiguous_runs(positions):
    """Trailing unconstrained axes give runs of 16+ cells (the kernel's four-sum path); a code
    range on the last constrained axis joins the run (with free axes before it walked)."""
    from synth.data.tables import SelectedCells
    from synth.data.workload import Query

    schema = Schema((Coded("a", 3), Coded("b", 2), Coded("c", 7), Coded("d", 5)))
    rng = np.random.default_rng(len(positions))
    allowed = [np.array([1, 2]) if p == 0 else np.array([2, 3, 4, 5]) if p == 2 else np.array([0]) for p in positions]
    query = Query(tuple(schema.names[p] for p in positions), tuple(allowed))
    w = rng.random(schema.universe_size)
    expected, expected_before = reference.scale_query_cells(w, schema.shape, positions, allowed, 1.7)
    selected = SelectedCells(schema, query)
    assert selected.run >= 16
    assert selected.scale(w, 1.7) == pytest.approx(expected_before, rel=1e-12)
    np.testing.assert_allclose(w, expected, rtol=1e-15)


@settings(max_examples=120, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=5), st.data())
def test_multiply_by_marginal_matches_numpy_broadcasting(sizes, data):
    from synth.data.tables import multiply_by_marginal

    schema = Schema(tuple(Coded(f"c{i}", s) for i, s in enumerate(sizes)))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    positions = data.draw(st.lists(st.integers(0, len(sizes) - 1), unique=True, max_size=len(sizes)))
    names = [schema.names[p] for p in positions]
    factors = rng.uniform(0.5, 2.0, size=[sizes[p] for p in positions])
    x = rng.random(schema.universe_size)
    expected = reference.multiply_by_marginal(x, schema.shape, positions, factors)
    total = multiply_by_marginal(x, schema, names, factors)
    np.testing.assert_allclose(x, expected, rtol=1e-14)
    assert total == pytest.approx(expected.sum(), rel=1e-12)


# -- marginals_from_dense: many marginals in one call ----------------------------------------


@st.composite
def schema_and_subsets(draw, max_size=5):
    """A schema of 1-6 columns and 0-8 subsets of its positions (any order, maybe empty or repeated)."""
    sizes = draw(st.lists(st.integers(1, max_size), min_size=1, max_size=6))
    k = len(sizes)
    one = st.lists(st.integers(0, k - 1), unique=True, max_size=k).flatmap(st.permutations)
    subsets = draw(st.lists(one, max_size=8))
    if subsets and draw(st.booleans()):
        subsets.append(list(draw(st.sampled_from(subsets))))  # a repeat
    schema = Schema(tuple(Coded(f"c{i}", s) for i, s in enumerate(sizes)))
    return schema, subsets


@settings(max_examples=200, deadline=None)
@given(schema_and_subsets(), st.integers(0, 2**32 - 1))
def test_marginals_from_dense_match_numpy_and_marginal_from_dense(case, seed):
    from synth.data.tables import _marginals_from_dense, marginals_from_dense

    schema, subsets = case
    rng = np.random.default_rng(seed)
    names = [[schema.names[p] for p in s] for s in subsets]
    x = rng.random(schema.universe_size)
    got = marginals_from_dense(x, schema, names)
    expected = reference.marginals_of_dense(x, schema.shape, subsets)
    assert len(got) == len(subsets)
    for table, want, columns in zip(got, expected, names):
        assert table.shape == tuple(schema[c].size for c in columns)  # axes in the subset's order
        assert table.dtype == np.float64 and table.flags.c_contiguous
        np.testing.assert_allclose(table, want, rtol=1e-12)
        one = marginal_from_dense(x, schema, columns)
        assert table.shape == one.shape and table.dtype == one.dtype
        np.testing.assert_allclose(table, one, rtol=1e-12)
        if columns:  # alone, a subset takes marginal_from_dense's walk: the same sums, bit for bit
            np.testing.assert_array_equal(marginals_from_dense(x, schema, [columns])[0], one)
    for table, want in zip(_marginals_from_dense(x, schema, names, intermediates=False), expected):
        np.testing.assert_allclose(table, want, rtol=1e-12)  # the one-walk design (kept to measure)
    counts = rng.integers(0, 50, schema.universe_size)
    for table, want in zip(marginals_from_dense(counts, schema, names),
                           reference.marginals_of_dense(counts, schema.shape, subsets)):
        assert table.dtype == np.int64
        np.testing.assert_array_equal(table, want)  # integer sums: exact


@settings(max_examples=60, deadline=None)
@given(schema_and_subsets(max_size=24), st.integers(0, 2**32 - 1))
def test_marginals_from_dense_on_long_rows(case, seed):
    """Columns of up to 24 codes: rows of 16+ cells take the kernels' four-sum path."""
    from synth.data.tables import marginals_from_dense

    schema, subsets = case
    x = np.random.default_rng(seed).random(schema.universe_size)
    got = marginals_from_dense(x, schema, [[schema.names[p] for p in s] for s in subsets])
    for table, want in zip(got, reference.marginals_of_dense(x, schema.shape, subsets)):
        assert table.shape == np.shape(want)
        np.testing.assert_allclose(table, want, rtol=1e-12)


def test_marginals_from_dense_axes_follow_each_subset(rng):
    from synth.data.tables import marginals_from_dense

    schema = Schema((Coded("a", 2), Coded("b", 3), Coded("c", 4)))
    x = rng.random(24)
    ca, ac, cba = marginals_from_dense(x, schema, [["c", "a"], ["a", "c"], ["c", "b", "a"]])
    cube = x.reshape(2, 3, 4)
    assert ca.shape == (4, 2) and ac.shape == (2, 4) and cba.shape == (4, 3, 2)
    np.testing.assert_allclose(ca, cube.sum(axis=1).T, rtol=1e-14)
    np.testing.assert_allclose(ac, cube.sum(axis=1), rtol=1e-14)
    np.testing.assert_allclose(cba, cube.transpose(2, 1, 0), rtol=1e-14)  # every column: U itself, reordered
    np.testing.assert_allclose(ca, marginal_from_dense(x, schema, ["c", "a"]), rtol=1e-14)


def test_marginals_from_dense_empty_repeated_and_single_column():
    from synth.data.tables import marginals_from_dense

    schema = Schema((Coded("a", 5),))
    x = np.arange(5, dtype=np.float64)
    first, total, again, none = marginals_from_dense(x, schema, [["a"], [], ["a"], ()])
    assert total.shape == () and none.shape == () and float(total) == 10.0 == float(none)
    np.testing.assert_array_equal(first, x)
    np.testing.assert_array_equal(again, x)
    first[0] = 99.0  # every table is its own array: not a view of x, nor of a repeat
    assert again[0] == 0.0 and x[0] == 0.0
    assert marginals_from_dense(x, schema, []) == []
    total_int = marginals_from_dense(np.arange(5), schema, [[]])[0]
    assert total_int.shape == () and total_int.dtype == np.int64 and int(total_int) == 10


def test_marginals_from_dense_every_3_way_of_an_adult_sized_universe(rng):
    """MWEM's selection step on adult's 7-column shape: one walk of U, then smaller tables."""
    import itertools

    from synth.data.tables import _marginals_from_dense, _marginals_plan, marginals_from_dense

    sizes = (9, 16, 7, 6, 5, 2, 2)
    schema = Schema(tuple(Coded(f"c{i}", s) for i, s in enumerate(sizes)))
    x = rng.random(schema.universe_size)
    subsets = [list(s) for s in itertools.combinations(schema.names, 3)]
    got = marginals_from_dense(x, schema, subsets)
    walked = _marginals_from_dense(x, schema, subsets, intermediates=False)
    for columns, table, table_walked in zip(subsets, got, walked):
        one = marginal_from_dense(x, schema, columns)
        np.testing.assert_allclose(table, one, rtol=1e-12)
        np.testing.assert_allclose(table_walked, one, rtol=1e-12)
    requests = tuple(sorted(tuple(schema.index(c) for c in s) for s in subsets))
    sources = _marginals_plan(sizes, requests).arrays[0]
    assert (sources < 0).sum() == 1  # U is walked once


def test_marginals_from_dense_converts_dtypes_like_marginal_from_dense():
    from synth.data.tables import marginals_from_dense

    schema = Schema((Coded("a", 3), Coded("b", 4)))
    cases = ((np.float32, np.float64), (np.int32, np.int64), (np.uint8, np.int64), (np.int64, np.int64))
    for dtype, out in cases:
        x = np.arange(12).astype(dtype).reshape(3, 4)  # any shape with the universe's size
        (table,) = marginals_from_dense(x, schema, [["b"]])
        assert table.dtype == out == marginal_from_dense(x, schema, ["b"]).dtype
        np.testing.assert_array_equal(table, [12, 15, 18, 21])


def test_marginals_from_dense_validates_like_marginal_from_dense():
    from synth.data.tables import marginals_from_dense

    schema = Schema((Coded("a", 3), Coded("b", 4)))
    with pytest.raises(ValueError, match="has 5 cells but the universe has 12"):
        marginals_from_dense(np.zeros(5), schema, [["a"]])
    with pytest.raises(SchemaError, match=r"columns \['a', 'a'\] name a column twice"):
        marginals_from_dense(np.zeros(12), schema, [["b"], ["a", "a"]])
    with pytest.raises(SchemaError, match="unknown column 'z'"):
        marginals_from_dense(np.zeros(12), schema, [["z"]])
    with pytest.raises(TypeError, match=r"got the string 'ab'; write \['ab'\] for one column"):
        marginals_from_dense(np.zeros(12), schema, [["a"], "ab"])
    with pytest.raises(TypeError, match="subsets must be a sequence of column lists, got the string 'a'"):
        marginals_from_dense(np.zeros(12), schema, "a")


@pytest.mark.parametrize("columns", [["b"], ["d"], ["a", "c"], ["b", "d"], ["a", "b", "d"], ["e", "c", "a"],
                                     ["a", "b", "c", "d", "e"]])
def test_marginal_from_dense_walks_many_merged_axes(columns, rng):
    """Alternating kept and summed axes (five or more after merging) wrap the odometer's counter
    of axis r - 3 and its counters in memory; rows of 17 cells take the four-sum path."""
    schema = Schema((Coded("a", 3), Coded("b", 2), Coded("c", 4), Coded("d", 3), Coded("e", 17)))
    positions = [schema.index(c) for c in columns]
    x = rng.random(schema.universe_size)
    np.testing.assert_allclose(marginal_from_dense(x, schema, columns),
                               reference.marginal_of_dense(x, schema.shape, positions), rtol=1e-13)
    factors = rng.uniform(0.5, 2.0, size=[schema.shape[p] for p in positions])
    from synth.data.tables import multiply_by_marginal

    expected = reference.multiply_by_marginal(x, schema.shape, positions, factors)
    total = multiply_by_marginal(x, schema, columns, factors)
    np.testing.assert_allclose(x, expected, rtol=1e-15)
    assert total == pytest.approx(expected.sum(), rel=1e-12)
