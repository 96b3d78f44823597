import itertools
import sys

import numpy as np
import pandas as pd
import pytest

import synth.models.sampling
import synth.models.synthetic
from synth.data import reading as data
from synth.errors import SynthError
from synth.models.model import Model
from synth.models.sampling import iter_codes, round_counts, sample_codes, split_counts
from synth.models.synthetic import _uniform_in_bins, decode_rows, sample_model, write_synthetic
from synth.data.schema import Categorical, Coded, Numeric, Schema


@pytest.fixture
def schema() -> Schema:
    """Every kind of column; integer edges, float edges and a one-bin 0/1 integer column."""
    return Schema(
        (
            Categorical("sex", ("female", "male")),
            Numeric("age", (0, 18, 30, 50, 100)),
            Numeric("score", (0.0, 0.5, 2.5)),
            Numeric("flag", (0, 1)),
            Coded("race", 3),
            Categorical("year", (2019, 2020.5, "unknown")),
        )
    )


def dirichlet(rng, size, alpha=0.3):
    return rng.dirichlet(np.full(size, alpha))


def histogram(codes, schema):
    return np.bincount(schema.cell_index(codes), minlength=schema.universe_size)


# -- round_counts ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "size, rows", [(1, 7), (5, 0), (5, 1), (40, 13), (40, 1000), (1000, 333), (3, 10**12)]
)
def test_rounded_counts_sum_to_rows_and_are_floor_or_ceiling(rng, size, rows):
    for _ in range(5):
        p = dirichlet(rng, size)
        counts = round_counts(p, rows, rng=rng)
        assert counts.dtype == np.int64
        assert counts.sum() == rows
        exact = rows * p / p.sum()
        assert np.all((counts == np.floor(exact)) | (counts == np.ceil(exact)))


def test_unnormalized_distribution_is_scaled_by_its_sum(rng):
    np.testing.assert_array_equal(round_counts(np.array([3.0, 1.0, 0.0, 4.0]), 8, rng=rng), [3, 1, 0, 4])
    np.testing.assert_array_equal(round_counts([1, 1, 2], 4, rng=rng), [1, 1, 2])
    np.testing.assert_array_equal(round_counts(np.array([1e-310, 3e-310]), 1000, rng=rng), [250, 750])


def test_rounding_error_is_least_possible_and_below_multinomial(rng):
    for size, rows in [(30, 17), (200, 1000), (2000, 500)]:
        for _ in range(5):
            p = dirichlet(rng, size)
            exact = rows * p
            error = np.abs(round_counts(p, rows, rng=rng) - exact)
            assert error.max() < 1
            drawn = np.abs(round_counts(p, rows, method="multinomial", rng=rng) - exact).sum()
            assert error.sum() < drawn


def test_rounding_error_matches_brute_force_optimum(rng):
    rows, size = 6, 4
    every = np.array([c for c in itertools.product(range(rows + 1), repeat=size) if sum(c) == rows])
    for _ in range(20):
        p = dirichlet(rng, size, alpha=1.0)
        best = np.abs(every - rows * p).sum(axis=1).min()
        assert np.abs(round_counts(p, rows, rng=rng) - rows * p).sum() == pytest.approx(best, abs=1e-12)


def test_ties_are_broken_at_random_not_toward_low_cells():
    size, rows, seeds = 10, 3, 600
    hits = sum(round_counts(np.full(size, 1 / size), rows, rng=seed) for seed in range(seeds))
    # each cell should get its extra row in rows/size = 30% of runs (binomial sd about 1.9%)
    np.testing.assert_allclose(hits / seeds, rows / size, atol=0.08)
    # only tied remainders take part: 4 rows over [3, 1, 1, 1, 2, 0] / 8 leave 2 rows for 4 remainders of 1/2
    hits = sum(round_counts(np.array([3.0, 1, 1, 1, 2, 0]), 4, rng=seed) for seed in range(seeds))
    assert hits[4] == seeds and hits[5] == 0
    np.testing.assert_allclose((hits[:4] - [seeds, 0, 0, 0]) / seeds, 0.5, atol=0.08)


def test_rounding_a_large_universe_is_quick_and_exact(rng):
    p = rng.random(3_000_000)
    counts = round_counts(p, 1_234_567, rng=rng)
    assert counts.sum() == 1_234_567 and counts.max() <= 2


def test_multinomial_seeded_runs_repeat_and_unseeded_runs_differ(rng):
    p = dirichlet(rng, 500)
    np.testing.assert_array_equal(
        round_counts(p, 10_000, "multinomial", 42), round_counts(p, 10_000, "multinomial", 42)
    )
    assert not np.array_equal(round_counts(p, 10_000, "multinomial"), round_counts(p, 10_000, "multinomial"))
    assert round_counts(p, 10_000, "multinomial", 1).sum() == 10_000


def test_multinomial_tolerates_sums_slightly_off_one_and_is_unbiased(rng):
    p = np.array([0.1, 0.2, 0.3, 0.4]) * (1 + 1e-9)
    draws = np.array([round_counts(p, 1000, "multinomial", rng) for _ in range(400)])
    assert (draws.sum(axis=1) == 1000).all()
    # the mean of 400 runs has sd sqrt(1000 p (1 - p) / 400) <= 1.3 rows
    np.testing.assert_allclose(draws.mean(axis=0), [100, 200, 300, 400], atol=6)


@pytest.mark.parametrize(
    "distribution, rows, method, error, message",
    [
        ([0.5, 0.5], -1, "round", ValueError, r"rows \(-1\) must be >= 0"),
        ([0.5, 0.5], 2.5, "round", TypeError, r"rows \(2.5\) must be an integer"),
        ([0.5, 0.5], True, "round", TypeError, r"rows \(True\) must be an integer"),
        ([0.5, -0.1, 0.6], 3, "round", ValueError, r"distribution has a negative value \(-0.1\) at cell 1"),
        ([0.5, np.nan], 3, "round", ValueError, r"distribution has a non-finite value \(nan\) at cell 1"),
        ([0.5, np.inf], 3, "multinomial", ValueError, r"non-finite value \(inf\) at cell 1"),
        ([0.0, 0.0], 3, "round", ValueError, r"distribution sums to 0"),
        ([], 3, "round", ValueError, r"distribution must be a non-empty 1-D array .* shape \(0,\)"),
        (
            [[0.5, 0.5]],
            3,
            "round",
            ValueError,
            r"distribution must be a non-empty 1-D array .* shape \(1, 2\)",
        ),
        (["a", "b"], 3, "round", TypeError, r"distribution must be an array of numbers"),
        ([0.5, 0.5], 3, "floor", ValueError, r"method \('floor'\) must be one of: 'round', 'multinomial'"),
    ],
)
def test_bad_counting_arguments_are_named(distribution, rows, method, error, message):
    with pytest.raises(error, match=message):
        round_counts(distribution, rows, method, rng=0)


# -- sample_codes ---------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["round", "multinomial"])
def test_sampled_codes_have_the_counts_histogram_in_random_order(rng, schema, method):
    p = dirichlet(rng, schema.universe_size)
    codes = sample_codes(p, schema, 500, method, rng=11)
    assert codes.shape == (500, len(schema)) and codes.dtype == data.code_dtype(schema)
    assert (codes.min(axis=0) >= 0).all() and (codes.max(axis=0) < np.array(schema.shape)).all()
    np.testing.assert_array_equal(histogram(codes, schema), round_counts(p, 500, method, rng=11))
    cells = schema.cell_index(codes)
    assert (np.diff(cells) < 0).any() and (np.diff(cells) > 0).any()


def test_split_counts_deals_every_row_once_to_a_uniform_block():
    counts = np.array([1000, 0, 37, 5])
    parts = np.array([list(split_counts(counts, 4, np.random.default_rng(seed))) for seed in range(400)])
    assert parts.shape == (400, 4, 4) and (parts >= 0).all()
    assert (parts.sum(axis=1) == counts).all()
    # each of the 1000 rows of cell 0 lands in each block with chance 1/4: block sizes ~ Bin(1000, 1/4)
    sd = np.sqrt(1000 * 0.25 * 0.75)
    np.testing.assert_allclose(parts[:, :, 0].mean(axis=0), 250, atol=4 * sd / np.sqrt(400))
    np.testing.assert_allclose(parts[:, :, 0].std(axis=0), sd, rtol=0.15)


def test_one_block_draws_nothing():
    rng = np.random.default_rng(3)
    state = rng.bit_generator.state
    assert [list(p) for p in split_counts(np.array([4, 5]), 1, rng)] == [[4, 5]]
    assert rng.bit_generator.state == state


def test_sampling_in_blocks_keeps_the_rounded_histogram(rng, schema, monkeypatch):
    monkeypatch.setattr(synth.models.sampling, "SAMPLE_BLOCK_ROWS", 64)
    p = dirichlet(rng, schema.universe_size)
    blocks = list(iter_codes(p, schema, 500, rng=11))
    assert len(blocks) == 8 and sum(len(b) for b in blocks) == 500 and all(20 < len(b) < 110 for b in blocks)
    codes = sample_codes(p, schema, 500, rng=11)
    np.testing.assert_array_equal(codes, np.concatenate(blocks))
    np.testing.assert_array_equal(histogram(codes, schema), round_counts(p, 500, rng=11))


def test_sample_codes_checks_the_universe(schema):
    with pytest.raises(ValueError, match=r"distribution has 4 cells but the schema's universe has 144"):
        sample_codes(np.full(4, 0.25), schema, 10, rng=0)


def test_zero_rows_give_an_empty_table(schema):
    codes = sample_codes(np.ones(schema.universe_size), schema, 0, rng=0)
    assert codes.shape == (0, len(schema))
    assert list(decode_rows(codes, schema, rng=0).columns) == list(schema.names)


# -- decode_rows ----------------------------------------------------------------------------


def test_uniform_values_lie_inside_their_bins_and_read_back_to_the_same_codes(schema):
    codes = sample_codes(np.ones(schema.universe_size), schema, 5000, rng=3)
    frame = decode_rows(codes, schema, rng=4)
    assert list(frame.columns) == list(schema.names)
    np.testing.assert_array_equal(data.encode(frame, schema).codes, codes)
    assert data.encode(frame, schema).clipped == {}
    for j, name in [(1, "age"), (2, "score"), (3, "flag")]:
        edges = schema[name].edge_array
        lo, hi = edges[codes[:, j]], edges[codes[:, j] + 1]
        last = codes[:, j] == schema[name].size - 1
        values = frame[name].to_numpy()
        assert ((values >= lo) & ((values < hi) | (last & (values == hi)))).all()
        assert len(np.unique(values)) > schema[name].size  # spread inside the bins, not midpoints
    assert (
        frame["age"].dtype == np.int64
        and frame["flag"].dtype == np.int64
        and frame["score"].dtype == np.float64
    )
    assert set(frame["flag"]) == {0, 1}  # the one closed bin [0, 1] gives both integers
    assert frame["age"].max() == 100  # the closed last bin reaches its top edge
    assert set(frame["sex"]) == {"female", "male"} and set(frame["race"]) == {0, 1, 2}
    assert set(frame["year"]) == {2019, 2020.5, "unknown"}


def test_uniform_draw_never_rounds_up_onto_the_upper_edge():
    column = Numeric("x", (0.0, 1.0, float(np.nextafter(1.0, 2.0))))
    codes, u = np.array([0, 1, 1]), np.array([np.nextafter(1.0, 0.0), np.nextafter(1.0, 0.0), 0.0])
    values = _uniform_in_bins(column, codes, u)
    np.testing.assert_array_equal(column.bin_codes(values)[0], codes)
    assert values[1] == 1.0


def test_midpoint_decoding_is_synth_data_decode(schema, rng):
    codes = sample_codes(dirichlet(rng, schema.universe_size), schema, 300, rng=rng)
    frame = decode_rows(codes, schema, numeric="midpoint")
    pd.testing.assert_frame_equal(frame, data.decode(codes, schema))
    assert set(frame["age"]) <= {9.0, 24.0, 40.0, 75.0}


def test_decoding_in_chunks_draws_the_same_values(schema):
    codes = sample_codes(np.ones(schema.universe_size), schema, 100, rng=1)
    whole = decode_rows(codes, schema, rng=9)
    generator = np.random.default_rng(9)
    parts = pd.concat([decode_rows(codes[a : a + 30], schema, rng=generator) for a in range(0, 100, 30)])
    pd.testing.assert_frame_equal(parts.reset_index(drop=True), whole)


def test_bad_decoding_arguments_are_named(schema):
    codes = np.zeros((2, len(schema)), dtype=np.int64)
    with pytest.raises(ValueError, match=r"numeric \('mid'\) must be one of: 'uniform', 'midpoint'"):
        decode_rows(codes, schema, numeric="mid")
    codes[1, 4] = 3
    with pytest.raises(ValueError, match=r"column 'race': codes must lie in 0..2"):
        decode_rows(codes, schema, rng=0)


# -- write_synthetic ------------------------------------------------------------------------


def test_csv_reads_back_to_the_rounded_histogram(tmp_path, schema, rng):
    p = dirichlet(rng, schema.universe_size)
    path = tmp_path / "synthetic.csv"
    assert write_synthetic(path, p, schema, 777, rng=5) == 777
    assert path.read_text().splitlines()[0] == ",".join(schema.names)
    encoded = data.read(path, schema)
    np.testing.assert_array_equal(histogram(encoded.codes, schema), round_counts(p, 777, rng=5))
    assert encoded.clipped == {}


def test_chunked_writing_gives_the_same_file(tmp_path, schema, rng):
    p = dirichlet(rng, schema.universe_size)
    calls = []

    def progress(done, fraction):
        calls.append((done, fraction))

    write_synthetic(tmp_path / "one.csv", p, schema, 250, rng=8, chunk_rows=10_000)
    written = write_synthetic(tmp_path / "many.csv", p, schema, 250, rng=8, chunk_rows=40, progress=progress)
    assert written == 250
    assert (tmp_path / "one.csv").read_bytes() == (tmp_path / "many.csv").read_bytes()
    assert [c[0] for c in calls] == [40, 80, 120, 160, 200, 240, 250] and calls[-1][1] == 1.0
    write_synthetic(tmp_path / "other.csv", p, schema, 250, rng=9)
    assert (tmp_path / "one.csv").read_bytes() != (tmp_path / "other.csv").read_bytes()


def test_writing_in_blocks_gives_the_same_file_whatever_the_chunks(tmp_path, schema, rng, monkeypatch):
    """Blocks are sampled between chunks with a generator of their own: the chunk size must
    not shift the decoding's draws."""
    monkeypatch.setattr(synth.models.sampling, "SAMPLE_BLOCK_ROWS", 64)
    p = dirichlet(rng, schema.universe_size)
    write_synthetic(tmp_path / "one.csv", p, schema, 300, rng=8, chunk_rows=10_000)
    write_synthetic(tmp_path / "many.csv", p, schema, 300, rng=8, chunk_rows=45)
    assert (tmp_path / "one.csv").read_bytes() == (tmp_path / "many.csv").read_bytes()
    encoded = data.read(tmp_path / "many.csv", schema)
    # a Dirichlet draw has no tied remainders: the rounding does not depend on the generator
    np.testing.assert_array_equal(histogram(encoded.codes, schema), round_counts(p, 300, rng=0))


def test_writing_and_sampling_a_model_agree(tmp_path, schema, rng):
    model = Model(
        schema=schema,
        mechanism="test",
        distribution=dirichlet(rng, schema.universe_size),
        rows=99.6,
        rows_public=True,
    )
    frame = sample_model(model, rng=3, numeric="midpoint")
    assert len(frame) == 100 and list(frame.columns) == list(schema.names)
    write_synthetic(tmp_path / "m.csv", model.distribution, schema, 100, numeric="midpoint", rng=3)
    np.testing.assert_array_equal(
        data.read(tmp_path / "m.csv", schema).codes, data.encode(frame, schema).codes
    )
    assert len(sample_model(model, rows=7, rng=3)) == 7


def test_zero_rows_write_only_the_header(tmp_path, schema):
    assert write_synthetic(tmp_path / "e.csv", np.ones(schema.universe_size), schema, 0, rng=0) == 0
    assert (tmp_path / "e.csv").read_text() == ",".join(schema.names) + "\n"


def test_a_failure_leaves_no_partial_file(tmp_path, schema):
    def stop(done, fraction):
        if done > 50:
            raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError, match="interrupted"):
        write_synthetic(
            tmp_path / "s.csv",
            np.ones(schema.universe_size),
            schema,
            200,
            rng=0,
            chunk_rows=50,
            progress=stop,
        )
    assert list(tmp_path.iterdir()) == []


def test_parquet_without_pyarrow_fails_before_any_work(tmp_path, schema, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow now raises ImportError
    message = r"s.parquet: Parquet output needs pyarrow \(pip install pyarrow\); write .csv instead"
    with pytest.raises(SynthError, match=message):
        write_synthetic(tmp_path / "s.parquet", None, schema, -1)  # bad arguments are not even looked at
    assert list(tmp_path.iterdir()) == []


def test_parquet_reads_back_to_the_rounded_histogram(tmp_path, schema, rng):
    pytest.importorskip("pyarrow")
    p = dirichlet(rng, schema.universe_size)
    path = tmp_path / "s.parquet"
    assert write_synthetic(path, p, schema, 333, rng=2, chunk_rows=100) == 333
    frame = pd.read_parquet(path)
    assert list(frame.columns) == list(schema.names) and frame["age"].dtype == np.int64
    # labels of mixed kinds come back as text
    frame["year"] = frame["year"].map(lambda v: v if v == "unknown" else float(v))
    np.testing.assert_array_equal(
        histogram(data.encode(frame, schema).codes, schema), round_counts(p, 333, rng=2)
    )


@pytest.mark.parametrize(
    "options, error, message",
    [
        ({"chunk_rows": 0}, ValueError, r"chunk_rows \(0\) must be >= 1"),
        ({"chunk_rows": 2.0}, TypeError, r"chunk_rows \(2.0\) must be an integer"),
        ({"numeric": "exact"}, ValueError, r"numeric \('exact'\) must be one of"),
        ({"method": "exact"}, ValueError, r"method \('exact'\) must be one of"),
        ({"rng": "7"}, TypeError, r"rng \('7'\) must be"),
    ],
)
def test_bad_writing_arguments_are_named_and_write_nothing(tmp_path, schema, options, error, message):
    with pytest.raises(error, match=message):
        write_synthetic(tmp_path / "s.csv", np.ones(schema.universe_size), schema, 10, **options)
    assert list(tmp_path.iterdir()) == []


def test_memory_check_counts_one_block_when_writing_and_every_row_when_sampling_a_frame(tmp_path, schema, monkeypatch):
    """write_synthetic holds one block of rows, sample_model every row: 40 MB of memory lets
    the first write 10^7 rows' worth of planning pass and refuses the second."""
    monkeypatch.setattr(synth.models.synthetic, "_available_memory", lambda: 40_000_000)
    p = np.ones(schema.universe_size)
    synth.models.synthetic.check_capacity(None, schema, 10**7, p)
    with pytest.raises(SynthError, match=r"10,000,000 synthetic rows need about .* of memory"):
        synth.models.synthetic.check_capacity(None, schema, 10**7, p, streamed=False)
    model = Model(schema=schema, mechanism="test", distribution=p, rows=10**7, rows_public=True)
    with pytest.raises(SynthError, match="of memory"):
        sample_model(model, rng=0)
