"""Bad inputs refused in one line, or said out loud (issue 26, item 5): a marginal workload too
big to hold (and memory that does not grow with its cells), a BLR prior share too small to
run its engine, a tampered factored model with a recomputed checksum, and --rounds beyond
the workload."""

from __future__ import annotations

import json
import math
import re
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from synth.engines.blr_prior import blr_prior, prior_epsilon
from synth.errors import SynthError, WorkloadError
from synth.models.factored import FactoredModel
from synth.models.model import MAX_LOG_POTENTIAL, Model, ModelError, _checksum_tables
from synth.engines.mwem import mwem
from synth.data.schema import Coded, Schema
from synth.privacy.validation import MIN_BUDGET_EPSILON
from synth.data.workload import MAX_MARGINALS, Workload

from .test_blr_prior import SCHEMA as PRIOR_SCHEMA
from .test_blr_prior import WORKLOAD as PRIOR_WORKLOAD
from .test_blr_prior import correlated
from .test_cli import PREVIOUS, assert_clean_failure, invoke
from .test_model_file_factored import SCHEMA as MODEL_SCHEMA
from .test_model_file_factored import cell_queries, release, stored

BUNDLED = Path(__file__).resolve().parents[1] / "synth" / "datasets"


def coded_domain(path: Path, columns: int, size: int) -> Path:
    path.write_text(json.dumps({f"c{i}": size for i in range(columns)}))
    return path


def no_bug(result) -> None:
    text = (result.output or "") + (result.stderr or "")
    assert "bug in synth" not in text and "Traceback" not in text, text


# -- synth workload marginals ---------------------------------------------------------------


def test_writing_marginals_takes_no_memory_per_cell(tmp_path):
    """30 columns of 10 values, way 3: 4,060 marginals, 4.06 million cells. Writing them (and
    the summary line after) holds the 4,060 items, never an array over the cells (which took
    65 MB here, and 22 GB at 100 values a column)."""
    schema = coded_domain(tmp_path / "s.json", 30, 10)
    out = tmp_path / "w.json"
    tracemalloc.start()
    try:
        result = invoke("workload", "marginals", "--schema", schema, "--way", 3, "-o", out)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.exit_code == 0, result.output + result.stderr
    assert "wrote 4,060,000 queries (4060 marginals of 3 columns)" in result.stderr
    assert len(json.loads(out.read_text())["queries"]) == 4060
    assert peak < 16 * 2**20, f"peak {peak / 2**20:.1f} MiB"


def test_writing_cells_holds_one_query_at_a_time(tmp_path):
    """--cells writes 14,080 cell queries (12 columns of 4 values, way 3) building one query at
    a time: the same file as ``cell_queries()`` (which holds every query: 9 MB here), in
    0.5 MB."""
    schema = coded_domain(tmp_path / "s.json", 12, 4)
    out = tmp_path / "w.json"
    tracemalloc.start()
    try:
        result = invoke("workload", "marginals", "--schema", schema, "--way", 3, "--cells", "-o", out)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.exit_code == 0, result.output + result.stderr
    assert "wrote 14,080 queries (220 marginals of 3 columns)" in result.stderr
    expected = tmp_path / "expected.json"
    Workload.marginals(Schema.load(schema), 3).cell_queries().save(expected)
    assert out.read_text() == expected.read_text()
    assert peak < 3 * 2**20, f"peak {peak / 2**20:.1f} MiB"


def test_a_workload_of_marginals_answers_without_per_cell_index_arrays():
    """``subsets`` needs no answering plan, and answering copies each marginal's table into
    its id range: the same answers as the cell queries one by one."""
    schema = Schema((Coded("a", 3), Coded("b", 2), Coded("c", 4)))
    workload = Workload.marginals(schema, 2)
    assert workload.subsets == [("a", "b"), ("a", "c"), ("b", "c")]
    assert workload._plan is None
    tables = {s: np.arange(math.prod(schema[c].size for c in s)).reshape([schema[c].size for c in s]) + 100 * k
              for k, s in enumerate(workload.subsets)}
    expected = [int(tables[q.columns][tuple(int(a[0]) for a in q.allowed)]) for q in workload]
    np.testing.assert_array_equal(workload.answer(tables), expected)
    singles = workload.cell_queries()
    np.testing.assert_array_equal(singles.answer(tables), expected)
    for subset, ids in workload.groups().items():
        np.testing.assert_array_equal(ids, [i for i, q in enumerate(workload) if q.columns == subset])


@pytest.mark.parametrize("columns, size, way, fragments", [
    (40, 2, 20, ["40 columns have 137,846,528,820 20-way marginals", f"limit of {MAX_MARGINALS:,}"]),
    (12, 1000, 7, ["7-way marginals over these columns have 7.92e+23 cells", "2^63 - 1"]),
])
def test_workload_marginals_too_big_to_hold_is_refused_in_one_line(tmp_path, columns, size, way, fragments):
    schema = coded_domain(tmp_path / "s.json", columns, size)
    out = tmp_path / "w.json"
    result = invoke("workload", "marginals", "--schema", schema, "--way", way, "-o", out)
    no_bug(result)
    assert_clean_failure(result, out, *fragments)


def test_a_workload_file_of_marginals_past_int64_is_refused_naming_it():
    schema = Schema(tuple(Coded(f"c{i}", 1000) for i in range(7)))
    obj = {"queries": [{"marginal": list(schema.names)}, {"marginal": list(schema.names[:6])}]}
    expected = "w.json: the workload has 1.001e+21 queries (marginal cells), more than a workload can hold"
    with pytest.raises(WorkloadError, match="^" + re.escape(expected)):
        Workload.from_dict(obj, schema, source="w.json")


# -- blr --prior mwem|pmw --prior-share ------------------------------------------------------


@pytest.mark.parametrize("prior", ["mwem", "pmw"])
def test_a_prior_share_too_small_for_its_engine_is_refused_before_the_data_is_read(tmp_path, prior):
    """Without n public the count takes 5% first: 1e-12 of the rest is 9.5e-13, under the
    engines' least epsilon. The data file has a bad row 3: the refusal comes before it is read."""
    data = tmp_path / "grades.csv"
    lines = (BUNDLED / "grades.csv").read_text().splitlines()
    lines[3] = "Chris,robot,pass"
    data.write_text("\n".join(lines) + "\n")
    out = tmp_path / "synthetic.csv"
    out.write_text(PREVIOUS)
    result = invoke("generate", data, "--schema", BUNDLED / "grades-schema.json", "--workload",
                    BUNDLED / "grades-workload.json", "--mechanism", "blr", "--prior", prior, "--prior-share", "1e-12",
                    "--epsilon", 1, "--force", "-o", out)
    no_bug(result)
    assert_clean_failure(result, out, "prior share 1e-12 (--prior-share)", f"the {prior} prior epsilon=9.5e-13",
                         "at least 1.06e-06", existed=True)


@pytest.mark.parametrize("prior", ["mwem", "pmw"])
def test_blr_prior_refuses_a_share_too_small_with_a_synth_error(prior):
    with pytest.raises(SynthError, match=r"prior share 1e-12 .* epsilon=1e-12, below 1e-06"):
        blr_prior(correlated(50, 3), PRIOR_SCHEMA, PRIOR_WORKLOAD, 1.0, prior=prior, prior_share=1e-12, rows=50, rng=0)


@pytest.mark.parametrize("epsilon, count_share, public", [(1.0, 0.05, False), (0.3, 0.1, False), (7.0, 0.05, True)])
def test_the_least_share_the_refusal_names_is_enough(epsilon, count_share, public):
    with pytest.raises(SynthError) as refused:
        prior_epsilon(epsilon, 1e-9, count_share, public, "mwem")
    least = float(str(refused.value).split("share of at least ")[1].split(" ")[0])
    assert prior_epsilon(epsilon, least, count_share, public, "mwem") >= MIN_BUDGET_EPSILON


# -- a tampered factored model, checksum recomputed -------------------------------------------


def tampered(tmp_path: Path, table: str, cell: tuple[int, ...], value: float) -> Path:
    """The factored test model with one log-potential changed and its checksum recomputed."""
    release().save(tmp_path / "m.npz")
    meta, arrays = stored(tmp_path / "m.npz")
    arrays[table][cell] = value
    names = sorted(arrays, key=lambda k: int(k.split("_")[1]))
    meta["distribution_sha256"] = _checksum_tables([arrays[k] for k in names])
    target = tmp_path / "tampered.npz"
    np.savez_compressed(target, meta=np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8), **arrays)
    return target


@pytest.mark.parametrize("value", [1e308, -1e308, 1e20])
def test_a_log_potential_beyond_float64_precision_is_refused(tmp_path, value):
    """Loaded, 1e308 answered twice n (adult: 73.8 million for 48,843 rows)."""
    path = tampered(tmp_path, "theta_0", (1, 2), value)
    expected = f"{path}: factor colour, a: log-potential {value:g} at cell (1, 2) is beyond +-4.5e+15"
    with pytest.raises(ModelError, match="^" + re.escape(expected)):
        Model.load(path)


@pytest.mark.parametrize("table, cell", [("theta_0", (0, 0)), ("theta_3", (0,))])
def test_tables_whose_answers_do_not_sum_to_n_are_refused(tmp_path, table, cell):
    """1e12 is within the bound, but swamps the other tables: the cliques' marginals no
    longer sum to 1 (answers about 2.5e-5 of n off)."""
    path = tampered(tmp_path, table, cell, 1e12)
    expected = "^" + re.escape(f"{path}: the factored model's marginal on ") + ".* sums to 0.9999"
    with pytest.raises(ModelError, match=expected):
        Model.load(path)


def test_large_but_exact_log_potentials_still_load(tmp_path):
    path = tampered(tmp_path, "theta_0", (0, 0), -1e9)
    model = Model.load(path)
    answers = model.answer(cell_queries([("colour", "a"), ("b", "c")]))
    np.testing.assert_allclose([answers[:12].sum(), answers[12:].sum()], [model.rows, model.rows], rtol=1e-9)


def test_synth_answer_refuses_the_tampered_model_in_one_line(tmp_path):
    path = tampered(tmp_path, "theta_0", (0, 0), 1e308)
    cell_queries([("colour",)]).save(tmp_path / "w.json")
    out = tmp_path / "answers.csv"
    result = invoke("answer", "--model", path, "--workload", tmp_path / "w.json", "-o", out)
    no_bug(result)
    assert_clean_failure(result, out, str(path), "log-potential 1e+308")


def test_a_model_load_would_refuse_is_not_saved(tmp_path):
    model = FactoredModel(MODEL_SCHEMA, max_cells=1000)
    model.add_log(("colour", "a"), np.full((3, 4), 2.0 * MAX_LOG_POTENTIAL))
    with pytest.raises(ModelError, match="cannot save the model: factor colour, a: log-potential"):
        release(model).save(tmp_path / "m.npz")
    assert list(tmp_path.iterdir()) == []


# -- mwem --rounds beyond the workload ---------------------------------------------------------


def test_rounds_beyond_the_workload_are_said_to_be_cut(tmp_path):
    out = tmp_path / "synthetic.csv"
    result = invoke("generate", BUNDLED / "grades.csv", "--schema", BUNDLED / "grades-schema.json", "--workload",
                    BUNDLED / "grades-workload.json", "--rounds", 10**12, "--epsilon", 1, "--seed", 1, "-o", out)
    assert result.exit_code == 0, result.output + result.stderr
    lines = [line for line in result.stderr.splitlines() if "1,000,000,000,000 rounds" in line]
    assert lines == ["mwem: asked for 1,000,000,000,000 rounds; used 4, one per marginal of the workload: a round "
                     "measures a marginal not measured before"]
    assert "mwem: 4 rounds measuring marginals" in result.stderr


def test_mwem_notes_rounds_it_cannot_run_and_not_those_it_can():
    schema = Schema((Coded("a", 2), Coded("b", 3), Coded("c", 2)))
    workload = Workload.marginals(schema, 2)
    codes = np.random.default_rng(3).integers(0, 2, size=(200, 3))
    many = mwem(codes, schema, workload, 1.0, selection="classic", rounds=7, rows=200, rng=1)
    assert many.parameters["rounds"] == 3
    assert [n for n in many.notes if "rounds" in n] == [
        "asked for 7 rounds; used 3, one per marginal of the workload: a round measures a marginal not measured before"]
    assert not [n for n in mwem(codes, schema, workload, 1.0, selection="classic", rounds=3, rows=200, rng=1).notes
                if "asked for" in n]
    queries = mwem(codes, schema, workload, 1.0, rounds=10**6, measure="query", rows=200, rng=1)
    assert f"asked for 1,000,000 rounds; used {len(workload)}, one per query of the workload" in " ".join(queries.notes)
