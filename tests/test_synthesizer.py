"""The Python front door: Synthesizer.create / fit / sample / answer / save / load."""

import numpy as np
import pandas as pd
import pytest

import synth
from synth.errors import SynthError
from synth.data.schema import Categorical, Coded, Numeric, Schema
from synth.data.workload import Workload

from .test_pmw import correlated_codes

SCHEMA = Schema((Categorical("colour", ("red", "green")), Numeric("size", (0, 10, 20, 50)), Coded("c", 4)))


@pytest.fixture
def frame():
    codes = correlated_codes(6000, 2)
    return pd.DataFrame({"colour": np.array(["red", "green"])[codes[:, 0]],
                         "size": np.array([5, 15, 30])[codes[:, 1]], "c": codes[:, 2]})


def two_way(frame, schema=SCHEMA):
    codes = synth.encode(frame, schema).codes
    tables = [synth.marginal(codes, schema, s) / len(codes) for s in Workload.marginals(schema, 2).subsets]
    return tables


@pytest.mark.parametrize("mechanism, options", [
    ("mwem", {}), ("pmw", {"delta": 1e-6, "alpha": 0.2}), ("blr", {"net": "sampled", "candidates": 300}),
])
def test_fit_sample_gives_a_dataframe_in_the_schema(frame, mechanism, options):
    synthesizer = synth.Synthesizer.create(mechanism, epsilon=3.0, rows=6000, rng=1, **options)
    out = synthesizer.fit_sample(frame, schema=SCHEMA, workload=Workload.marginals(SCHEMA, 2))
    assert list(out.columns) == ["colour", "size", "c"] and len(out) == 6000
    synth.encode(out, SCHEMA)  # every value is inside the schema
    assert synthesizer.model.mechanism == mechanism
    spent = synthesizer.privacy_spent["epsilon"]
    if mechanism == "pmw":  # PMW charges epoch by epoch: at most the budget
        assert 0 < spent <= 3.0
    else:
        assert spent == pytest.approx(3.0)


def test_mwem_synthetic_frame_tracks_the_data(frame):
    out = synth.Synthesizer.create("mwem", epsilon=5.0, rows=6000, rng=2).fit_sample(frame, schema=SCHEMA)
    uniform = [np.full(t.shape, 1 / t.size) for t in two_way(frame)]
    error = np.mean([np.abs(a - b).sum() for a, b in zip(two_way(frame), two_way(out))])
    baseline = np.mean([np.abs(a - b).sum() for a, b in zip(two_way(frame), uniform)])
    assert error < 0.25 * baseline


def test_answer_save_and_load(frame, tmp_path):
    synthesizer = synth.Synthesizer.create("mwem", epsilon=2.0, rng=3).fit(frame, schema=SCHEMA)
    assert not synthesizer.model.rows_public  # no rows given: a noisy count was bought
    queries = {"queries": [{"where": {"colour": "red"}}, {"where": {}}]}
    answers = synthesizer.answer(queries)
    synthesizer.save(tmp_path / "m.npz")
    loaded = synth.Synthesizer.load(tmp_path / "m.npz")
    np.testing.assert_allclose(loaded.answer(queries), answers)
    assert answers[1] == pytest.approx(synthesizer.model.rows)
    assert len(loaded.sample(100)) == 100 and loaded.model.seeded


def test_workload_and_state_errors(frame):
    with pytest.raises(ValueError, match="mechanism"):
        synth.Synthesizer.create("aim", epsilon=1.0)
    with pytest.raises(ValueError, match="delta applies to mwem and pmw"):
        synth.Synthesizer.create("blr", epsilon=1.0, delta=1e-6)
    with pytest.raises(SynthError, match="call fit"):
        synth.Synthesizer.create("mwem", epsilon=1.0).sample(10)
    other = Schema((Coded("x", 2),))
    with pytest.raises(SynthError, match="not the schema's"):
        synth.Synthesizer.create("mwem", epsilon=1.0).fit(frame, schema=SCHEMA, workload=Workload.marginals(other, 1))
    bad = frame.assign(colour=["blue"] + list(frame["colour"][1:]))
    with pytest.raises(SynthError, match="row 1.*colour.*blue"):
        synth.Synthesizer.create("mwem", epsilon=1.0).fit(bad, schema=SCHEMA)


def test_columns_select_part_of_the_schema(frame):
    synthesizer = synth.Synthesizer.create("mwem", epsilon=2.0, rows=6000, rng=4)
    out = synthesizer.fit_sample(frame[["colour", "c"]], schema=SCHEMA, columns="colour,c", n_rows=50)
    assert list(out.columns) == ["colour", "c"] and len(out) == 50


@pytest.mark.parametrize("epsilon, error, message", [
    (-1, ValueError, "must be finite and > 0"), (0, ValueError, "must be finite and > 0"),
    (float("nan"), ValueError, "must be finite"), (float("inf"), ValueError, "must be finite"),
    (1e300, ValueError, "between"), (1e-300, ValueError, "between"),
    ("1", TypeError, "must be a real number"), (True, TypeError, "must be a real number"),
])
def test_create_checks_epsilon_like_the_cli(epsilon, error, message):
    with pytest.raises(error, match=message):
        synth.Synthesizer.create("mwem", epsilon=epsilon)


def test_create_checks_delta_rows_and_options():
    with pytest.raises(ValueError, match=r"delta \(1\) must be in \[0, 1\)"):
        synth.Synthesizer.create("pmw", epsilon=1.0, delta=1)
    with pytest.raises(TypeError, match=r"rows \(2.5\) must be an integer"):
        synth.Synthesizer.create("mwem", epsilon=1.0, rows=2.5)
    with pytest.raises(TypeError, match="'roundz' is not an option of mwem; its options are: selection, rounds"):
        synth.Synthesizer.create("mwem", epsilon=1.0, roundz=3)
    with pytest.raises(TypeError, match="'net' is not an option of pmw"):
        synth.Synthesizer.create("pmw", epsilon=1.0, net="sampled")


def test_fit_refuses_empty_data_and_a_second_fit(frame):
    synthesizer = synth.Synthesizer.create("mwem", epsilon=1.0, rows=6000, rng=5)
    with pytest.raises(SynthError, match="no data rows"):
        synthesizer.fit(frame.iloc[:0], schema=SCHEMA)
    assert synthesizer.model is None  # nothing spent
    synthesizer.fit(frame, schema=SCHEMA)
    with pytest.raises(SynthError, match="already spent its budget"):
        synthesizer.fit(frame, schema=SCHEMA)
    assert synthesizer.privacy_spent["epsilon"] == pytest.approx(1.0)


def test_fit_reads_a_csv_path_and_refuses_other_data(frame, tmp_path):
    path = tmp_path / "people.csv"
    frame.to_csv(path, index=False)
    out = synth.Synthesizer.create("mwem", epsilon=1.0, rows=6000, rng=6).fit_sample(path, schema=SCHEMA, n_rows=20)
    assert len(out) == 20
    for data in (frame.to_numpy(), frame.values.tolist()):
        with pytest.raises(TypeError, match="data must be a pandas DataFrame or the path of a CSV file, a Parquet file or a folder"):
            synth.Synthesizer.create("mwem", epsilon=1.0).fit(data, schema=SCHEMA)
    with pytest.raises(SynthError, match="no such file"):
        synth.Synthesizer.create("mwem", epsilon=1.0).fit(tmp_path / "missing.csv", schema=SCHEMA)


def test_fit_drops_bad_rows_when_asked_and_warns_of_an_inferred_schema(frame):
    dirty = frame.copy()
    dirty.loc[3, "colour"] = "ultraviolet"
    with pytest.raises(SynthError, match="ultraviolet.*NON-PRIVATE"):
        synth.Synthesizer.create("mwem", epsilon=1.0).fit(dirty, schema=SCHEMA)
    synth.Synthesizer.create("mwem", epsilon=1.0, rng=7).fit(dirty, schema=SCHEMA, bad_rows="drop")
    inferred = Schema(SCHEMA.columns, inferred=True)
    with pytest.warns(synth.PrivacyWarning, match="NOT differentially private"):
        synth.Synthesizer.create("mwem", epsilon=1.0, rng=8).fit(frame, schema=inferred)
