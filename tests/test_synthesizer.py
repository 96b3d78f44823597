"""The Python front door: Synthesizer.create / fit / sample / answer / save / load."""

import numpy as np
import pandas as pd
import pytest

import synth
from synth.errors import SynthError
from synth.schema import Categorical, Coded, Numeric, Schema
from synth.workload import Workload

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
    with pytest.raises(ValueError, match="delta applies to pmw only"):
        synth.Synthesizer.create("mwem", epsilon=1.0, delta=1e-6)
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
