"""Factored models in the model file (format version 3): stored as cliques' log-potential
tables, never a dense array; read back to the same answers; damaged files refused in one line."""

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from synth_cli.main import main
from synth.models.factored import FactoredModel
from synth.models.model import Model, ModelError
from synth.models.synthetic import sample_model
from synth.data.schema import Categorical, Coded, Schema
from synth.data.workload import Workload

from .test_model_file import refused

SCHEMA = Schema((Categorical("colour", ("red", "green", "blue")), Coded("a", 4), Coded("b", 2), Coded("c", 5)))
FACTORS = (("colour", "a"), ("a", "b"), ("b", "c"), ("colour",))


def factored(seed: int = 0) -> FactoredModel:
    rng = np.random.default_rng(seed)
    model = FactoredModel(SCHEMA, max_cells=1000)
    for subset in FACTORS:
        model.add_log(subset, rng.normal(size=[SCHEMA[c].size for c in subset]))
    return model


def cell_queries(subsets) -> Workload:
    """Every cell of each marginal, as queries (last column fastest)."""
    items = []
    for subset in subsets:
        for cell in np.ndindex(*[SCHEMA[c].size for c in subset]):
            items.append({"where": {c: int(v) if c != "colour" else SCHEMA[c].values[v] for c, v in zip(subset, cell)}})
    return Workload.from_dict({"queries": items}, SCHEMA)


def release(distribution=None) -> Model:
    return Model(schema=SCHEMA, mechanism="mwem", distribution=factored() if distribution is None else distribution,
                 rows=500.0, rows_public=True, parameters={"rounds": 4}, seeded=True)


def stored(path):
    with np.load(path, allow_pickle=False) as archive:
        meta = json.loads(archive["meta"].tobytes().decode("utf-8"))
        return meta, {name: archive[name] for name in archive.files if name != "meta"}


def rewrite(path, target, edit_meta=None, edit_arrays=None):
    meta, arrays = stored(path)
    if edit_meta:
        edit_meta(meta)
    if edit_arrays:
        edit_arrays(arrays)
    raw = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)
    np.savez_compressed(target, meta=raw, **arrays)
    return target


def test_round_trip_stores_tables_not_a_dense_array_and_answers_the_same(tmp_path):
    model = release()
    model.save(tmp_path / "m.npz")
    meta, arrays = stored(tmp_path / "m.npz")
    assert meta["format_version"] == 3 and meta["representation"] == "factored"
    assert meta["factors"] == [list(s) for s in FACTORS] and meta["max_model_cells"] == 1000
    assert sorted(arrays) == [f"theta_{i}" for i in range(len(FACTORS))] and "distribution" not in arrays
    assert [a.shape for a in arrays.values()] == [(3, 4), (4, 2), (2, 5), (3,)]
    loaded = Model.load(tmp_path / "m.npz")
    assert isinstance(loaded.distribution, FactoredModel) and loaded.rows == 500.0
    np.testing.assert_allclose(loaded.distribution.dense(), model.distribution.dense(), rtol=1e-12)
    workload = cell_queries([("colour", "c"), ("a", "b", "c")])
    np.testing.assert_allclose(loaded.answer(workload), model.answer(workload), rtol=1e-10)
    expected = 500.0 * model.distribution.marginal(("colour", "c")).reshape(-1)
    np.testing.assert_allclose(loaded.answer(workload)[:15], expected, rtol=1e-10)


def test_sampling_a_loaded_model_follows_its_marginals(tmp_path):
    release().save(tmp_path / "m.npz")
    loaded = Model.load(tmp_path / "m.npz")
    frame = sample_model(loaded, 20000, rng=1)
    assert list(frame.columns) == list(SCHEMA.names) and len(frame) == 20000
    counts = frame.groupby(["a", "b"]).size().to_numpy().reshape(4, 2)
    np.testing.assert_allclose(counts / 20000, loaded.distribution.marginal(("a", "b")), atol=2e-3)


def test_synth_sample_and_answer_read_a_factored_model(tmp_path):
    release().save(tmp_path / "m.npz")
    cell_queries([("colour", "b")]).save(tmp_path / "w.json")
    runner = CliRunner()
    out = runner.invoke(main, ["sample", "--model", str(tmp_path / "m.npz"), "--rows", "50", "-o", "-", "-q"])
    assert out.exit_code == 0, out.output
    assert out.stdout.splitlines()[0] == "colour,a,b,c" and len(out.stdout.splitlines()) == 51
    out = runner.invoke(main, ["answer", "--model", str(tmp_path / "m.npz"), "--workload", str(tmp_path / "w.json"),
                               "-o", str(tmp_path / "answers.csv")])
    assert out.exit_code == 0, out.output
    answers = pd.read_csv(tmp_path / "answers.csv")["answer"].to_numpy()
    np.testing.assert_allclose(answers, 500.0 * factored().marginal(("colour", "b")).reshape(-1), rtol=1e-5)


def test_a_changed_table_fails_the_checksum(tmp_path):
    release().save(tmp_path / "m.npz")

    def swap(arrays):
        arrays["theta_0"] = arrays["theta_0"][::-1].copy()

    refused(rewrite(tmp_path / "m.npz", tmp_path / "x.npz", edit_arrays=swap),
            "damaged model file: checksum of the tables does not match its header")


@pytest.mark.parametrize("edit_meta, edit_arrays, message", [
    (lambda m: m.__setitem__("factors", "colour"), None, "header field 'factors' must be a list of lists"),
    (lambda m: m.__setitem__("max_model_cells", 0), None, "header field 'max_model_cells' must be an integer >= 1"),
    (lambda m: m.__setitem__("representation", "sparse"), None,
     "header field 'representation' must be 'dense' or 'factored', got 'sparse'"),
    (lambda m: m["factors"].append(["b"]), None, "damaged model file: arrays"),
    (lambda m: m["factors"].__setitem__(0, ["colour", "zz"]), None, "factor colour, zz: unknown column 'zz'"),
    (None, lambda a: a.__setitem__("theta_1", np.zeros((2, 4))), "factor a, b: the table must be floats of shape (4, 2)"),
    (None, lambda a: a.__setitem__("theta_2", np.full((2, 5), np.nan)), "factor b, c: the table holds nan or +inf"),
    (None, lambda a: a.__setitem__("theta_3", np.full(3, -np.inf)), "the factored model gives every row zero mass"),
    (lambda m: m.__setitem__("max_model_cells", 10), None, "factor colour, a: adding the subset colour, a would grow"),
])
def test_bad_factored_files_are_refused_in_one_line(tmp_path, edit_meta, edit_arrays, message):
    from synth.models.model import _checksum_tables

    release().save(tmp_path / "m.npz")
    meta, arrays = stored(tmp_path / "m.npz")
    if edit_meta:
        edit_meta(meta)
    if edit_arrays:
        edit_arrays(arrays)
    names = sorted(arrays, key=lambda k: int(k.split("_")[1]))
    meta["distribution_sha256"] = _checksum_tables([arrays[k] for k in names])
    raw = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)
    np.savez_compressed(tmp_path / "x.npz", meta=raw, **arrays)
    refused(tmp_path / "x.npz", message)


def test_a_dense_header_with_factored_fields_is_refused(tmp_path):
    dense = Model(schema=SCHEMA, mechanism="mwem", distribution=factored().dense().reshape(-1), rows=500.0,
                  rows_public=True)
    dense.save(tmp_path / "d.npz")
    refused(rewrite(tmp_path / "d.npz", tmp_path / "x.npz", edit_meta=lambda m: m.__setitem__("factors", [])),
            "header field 'factors' belongs to a factored model")


def test_a_factored_model_over_another_schema_is_not_saved(tmp_path):
    other = Schema((Coded("x", 2),))
    with pytest.raises(ModelError, match="over another schema"):
        release(FactoredModel(other)).save(tmp_path / "m.npz")
    assert list(tmp_path.iterdir()) == []
