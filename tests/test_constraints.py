"""Public constraints in the schema (``synth.data.constraints``): parsing, checks, the models'
zero mass, synthetic rows that never break one, evaluate's shares, the Python API and the CLI."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import synth
from synth.data.constraints import (Forbid, Function, compile_constraints, constraint_subsets, count_violations,
                                    keeps_all)
from synth.data.schema import Categorical, Coded, Numeric, Schema
from synth.data.workload import Workload
from synth.errors import SchemaError, SynthError
from synth.models.constrained import constrain_distribution, constrain_model
from synth.models.factored import FactoredModel
from synth.models.model import Model
from synth.models.sampling import sample_codes
from synth.models.synthetic import decode_rows, sample_model
from synth.report.evaluate import constraints_text, evaluate, released_from_codes, released_from_model
from synth_cli.main import main

COLUMNS = (Categorical("education", ("HS", "BA", "MA")), Numeric("education-num", tuple(range(1, 18))),
           Categorical("sex", ("Male", "Female")), Categorical("relationship", ("Husband", "Wife", "Other")))
FUNCTION = {"function": {"of": "education", "column": "education-num", "map": {"HS": 9, "BA": 13, "MA": 14}}}
FORBID = {"forbid": {"sex": "Male", "relationship": "Wife"}}
CONSTRAINED = Schema(COLUMNS, constraints=(FUNCTION, FORBID))
FREE = Schema(COLUMNS)


def table(rng: np.random.Generator, n: int = 2000) -> pd.DataFrame:
    """Rows that keep both constraints (education-num of education; no male wife)."""
    education = rng.choice(["HS", "BA", "MA"], n)
    sex = rng.choice(["Male", "Female"], n)
    relationship = np.where(sex == "Male", rng.choice(["Husband", "Other"], n), rng.choice(["Wife", "Other"], n))
    return pd.DataFrame({"education": education,
                         "education-num": pd.Series(education).map({"HS": 9, "BA": 13, "MA": 14}).to_numpy(),
                         "sex": sex, "relationship": relationship})


def violations(frame: pd.DataFrame, schema: Schema = CONSTRAINED) -> list[int]:
    return count_violations(synth.encode(frame, FREE).codes, schema)


# -- parsing and round trips ------------------------------------------------------------------


def test_both_forms_parse_and_round_trip_through_json():
    assert CONSTRAINED.constraints == (Function("education", "education-num", {"HS": 9, "BA": 13, "MA": 14}),
                                       Forbid({"sex": "Male", "relationship": "Wife"}))
    text = CONSTRAINED.to_json_text()
    assert json.loads(text)["constraints"] == [FUNCTION, FORBID]
    again = Schema.from_dict(json.loads(text))
    assert again == CONSTRAINED and again.constraints == CONSTRAINED.constraints
    assert Schema.from_dict(FREE.to_dict()) == FREE and "constraints" not in FREE.to_dict()
    assert FREE != CONSTRAINED


def test_map_keys_read_as_the_of_columns_values_and_round_trip(tmp_path):
    schema = Schema((Coded("code", 4), Numeric("years", (0, 10, 20)), Categorical("grade", (1, 2, 3))),
                    constraints=[{"function": {"of": "code", "column": "grade", "map": {"0": 1, "3": 3}}},
                                 {"function": {"of": "years", "column": "code", "map": {"12.5": 2}}},
                                 {"function": {"of": "grade", "column": "years", "map": {"2": 15}}}])
    assert [c.mapping for c in schema.constraints] == [((0, 1), (3, 3)), ((12.5, 2),), ((2, 15),)]
    schema.save(tmp_path / "s.json")
    assert Schema.load(tmp_path / "s.json").constraints == schema.constraints


def test_project_keeps_the_constraints_within_the_selection_and_with_constraints_adds():
    assert CONSTRAINED.select("education,education-num").constraints == CONSTRAINED.constraints[:1]
    assert CONSTRAINED.select("sex,relationship,education").constraints == CONSTRAINED.constraints[1:]
    assert FREE.with_constraints([FUNCTION, Forbid({"sex": "Male", "relationship": "Wife"})]) == CONSTRAINED
    assert constraint_subsets(CONSTRAINED) == [("education", "education-num"), ("sex", "relationship")]


@pytest.mark.parametrize("constraint, message", [
    ({"function": {"of": "education", "column": "age", "map": {"HS": 1}}},
     r"constraint #1 \(age = f\(education\)\): unknown column 'age'; columns are: education, education-num"),
    ({"function": {"of": "education", "column": "education-num", "map": {"PhD": 20}}},
     r"constraint #1 \(education-num = f\(education\)\): column 'education': value 'PhD' of 'education': unknown "
     r"value 'PhD'; allowed: HS, BA, MA"),
    ({"function": {"of": "education", "column": "education-num", "map": {"HS": 30}}},
     r"column 'education-num': 'HS' maps to 30: value 30 lies outside the bin edges \[1, 17\]"),
    ({"function": {"of": "education", "column": "education-num", "map": {"HS": None}}},
     r"column 'education-num'.*value null: the column holds no missing value"),
    ({"function": {"of": "education", "column": "education", "map": {"HS": "BA"}}},
     r"column 'education' cannot be a function of itself"),
    ({"function": {"of": "education", "column": "education-num", "map": {}}}, r"'map' is empty"),
    ({"function": {"of": "education", "column": "education-num", "map": [1, 2]}}, r"1 is not a \(value of"),
    ({"function": {"of": "education", "column": "education-num", "mapping": {}}},
     r"constraint #1: unknown key 'mapping' in a function constraint; its keys: column, map, of"),
    ({"function": {"of": "education", "map": {"HS": 9}}}, r"constraint #1: a function constraint needs 'column'"),
    ({"forbid": {"sex": "Male"}}, r"constraint #1: forbid constraint \{'sex': 'Male'\}: name two or more columns"),
    ({"forbid": {"sex": "Male", "relationship": ["Wife", "Other"]}},
     r"column 'relationship': value \['Wife', 'Other'\] must be a string, a number or null \(one value per column"),
    ({"forbid": {"sex": "Male", "relationship": "Aunt"}},
     r"constraint #1 \(forbid sex = 'Male', relationship = 'Aunt'\): column 'relationship': value 'Aunt': unknown "
     r"value 'Aunt'"),
    ({"allow": {"sex": "Male"}}, r"constraint #1: expected \{\"function\""),
    ("forbid", r"constraint #1: expected"),
])
def test_bad_constraints_are_refused_naming_the_constraint_and_the_value(constraint, message):
    with pytest.raises(SchemaError, match=message):
        Schema(COLUMNS, constraints=[constraint])
    with pytest.raises(SchemaError, match=r"^schema\.json: constraint #1"):
        Schema.from_dict({**FREE.to_dict(), "constraints": [constraint]}, source="schema.json")


def test_bad_constraint_lists_and_impossible_ones_are_refused():
    with pytest.raises(SchemaError, match=r"schema\.json: 'constraints' must be a list of constraint objects"):
        Schema.from_dict({**FREE.to_dict(), "constraints": FORBID}, source="schema.json")
    with pytest.raises(SchemaError, match=r"constraints must be a list of constraints"):
        FREE.with_constraints(FORBID)
    tiny = (Categorical("a", ("x",)), Categorical("b", ("y",)))
    with pytest.raises(SchemaError, match=r"constraint #1 \(forbid a = 'x', b = 'y'\): it rules out every combination"):
        Schema(tiny, constraints=[{"forbid": {"a": "x", "b": "y"}}])
    binned = (Numeric("x", (0, 10, 20)), Categorical("y", ("p", "q")))
    with pytest.raises(SchemaError, match=r"1 and 2 are the same code of 'x' \(x in \[0, 10\)\) but map to "
                                          r"different codes of 'y'"):
        Schema(binned, constraints=[{"function": {"of": "x", "column": "y", "map": {"1": "p", "2": "q"}}}])
    Schema(binned, constraints=[{"function": {"of": "x", "column": "y", "map": {"1": "p", "2": "p"}}}])  # agree


def test_compiled_masks_allow_exactly_the_mapped_cells_and_leave_missing_free():
    schema = Schema((Categorical("a", ("x", "y", "z"), missing=True), Coded("b", 3, missing=True)),
                    constraints=[{"function": {"of": "a", "column": "b", "map": {"x": 2, "y": None}}},
                                 {"forbid": {"b": None, "a": "z"}}])
    function, forbid = compile_constraints(schema)
    assert function.columns == ("a", "b") and forbid.columns == ("a", "b")  # schema order
    assert function.allowed.astype(int).tolist() == [[0, 0, 1, 0], [0, 0, 0, 1], [1, 1, 1, 1], [1, 1, 1, 1]]
    assert (~forbid.allowed).sum() == 1 and not forbid.allowed[2, 3]
    codes = np.array([[0, 2], [0, 1], [1, 3], [3, 0], [2, 3]])
    assert function.allows(codes).tolist() == [True, False, True, True, True]
    assert count_violations(codes, schema) == [1, 1]
    assert keeps_all(codes, compile_constraints(schema)).tolist() == [True, False, True, True, False]


# -- the models and their rows ---------------------------------------------------------------


def test_a_dense_distribution_is_sampled_without_a_breaking_row(rng):
    weights = rng.random(CONSTRAINED.universe_size) + 0.1  # mass on every cell
    assert min(count_violations(sample_codes(weights, FREE, 5000, rng=rng), CONSTRAINED)) > 100
    for method in ("round", "multinomial"):
        assert count_violations(sample_codes(weights, CONSTRAINED, 5000, method, rng=rng), CONSTRAINED) == [0, 0]
    constrained = constrain_distribution(weights, CONSTRAINED)
    assert constrained.sum() == pytest.approx(1.0)
    assert constrained[~keeps_all(CONSTRAINED.cell_codes(np.arange(CONSTRAINED.universe_size)),
                                  compile_constraints(CONSTRAINED))].sum() == 0


@pytest.mark.parametrize("cap", [10**6, 24])
def test_a_factored_model_gives_no_breaking_row_with_or_without_room_for_the_constraints(rng, cap):
    """Room for the constraints' subsets: factors of zeros; no room (cap 24, its one-way tables): rejection."""
    model = FactoredModel(CONSTRAINED, max_cells=cap)
    for subset in (("education",), ("education-num",), ("sex",), ("relationship",)):
        model.add_log(subset, rng.normal(size=[CONSTRAINED[c].size for c in subset]))
    fits = cap > 24
    assert model.fits(("education", "education-num")) is fits and model.fits(("sex", "relationship")) is fits
    constrained = constrain_distribution(model, CONSTRAINED)
    assert bool(constrained.marginal(("sex", "relationship"))[0, 1] == 0) is fits
    release = Model(CONSTRAINED, "mwem", model, 3000.0, True)
    rows = sample_model(release, rng=rng)
    assert len(rows) == 3000 and violations(rows) == [0, 0]
    free = Model(FREE, "mwem", FactoredModel(FREE, max_cells=cap), 3000.0, True)
    assert min(violations(sample_model(free, rng=rng))) > 0


def test_a_model_with_no_allowed_mass_is_refused(rng):
    weights = np.zeros(CONSTRAINED.universe_size)
    weights[CONSTRAINED.cell_index(np.array([[0, 0, 0, 1]]))] = 1.0  # a male wife with education-num 1
    with pytest.raises(SynthError, match="no mass to any row that keeps the schema's constraints"):
        sample_codes(weights, CONSTRAINED, 10, rng=rng)


def test_a_numeric_column_that_is_a_function_is_written_as_the_mapped_number(rng):
    mapping = {"function": {"of": "education", "column": "years", "map": {"HS": 9.5, "BA": 13}}}
    schema = Schema((Categorical("education", ("HS", "BA")), Numeric("years", (0.0, 10.0, 20.0))),
                    constraints=[mapping])
    codes = np.array([[0, 0], [1, 1], [1, 1], [0, 0]])
    for numeric in ("uniform", "midpoint"):
        assert decode_rows(codes, schema, numeric, rng)["years"].tolist() == [9.5, 13, 13, 9.5]
    assert decode_rows(codes, Schema(schema.columns), "uniform", rng)["years"].tolist() != [9.5, 13, 13, 9.5]
    whole = Schema((schema[0], Numeric("years", (0, 10, 20))), constraints=[mapping])  # integer draws
    years = decode_rows(codes, whole, "uniform", rng)["years"]
    assert years.dtype == np.int64 and years.tolist()[1:3] == [13, 13] and 0 <= years[0] < 10


@pytest.mark.parametrize("mechanism, options", [
    ("mwem", {}), ("mwem", {"representation": "factored"}), ("pmw", {"delta": 1e-6, "alpha": 0.2}),
    ("blr", {"net": "sampled", "candidates": 200}),
])
def test_a_fitted_model_gives_no_breaking_row_and_no_mass_to_one(rng, mechanism, options):
    frame = table(rng)
    unconstrained = synth.Synthesizer.create(mechanism, epsilon=0.3, rows=len(frame), rng=1, **options)
    assert sum(violations(unconstrained.fit_sample(frame, FREE))) > 0  # noise puts rows there without them
    synthesizer = synth.Synthesizer.create(mechanism, epsilon=0.3, rows=len(frame), rng=1, **options)
    rows = synthesizer.fit_sample(frame, FREE, constraints=[FUNCTION, FORBID])
    assert len(rows) == len(frame) and violations(rows) == [0, 0]
    model = synthesizer.model
    assert model.schema.constraints == CONSTRAINED.constraints
    released = released_from_model(model, Workload.marginals(CONSTRAINED, 2))
    assert released.tables[("sex", "relationship")][0, 1] == 0
    if options.get("representation") != "factored":  # a factored model's rows get the function, not its answers
        assert released.tables[("education", "education-num")][0, [8]].sum() == pytest.approx(
            released.tables[("education", "education-num")][0].sum())


def test_a_saved_model_keeps_its_constraints_and_so_do_its_rows(rng, tmp_path):
    synthesizer = synth.Synthesizer.create("mwem", epsilon=0.3, rows=2000, rng=1)
    synthesizer.fit(table(rng), CONSTRAINED)
    synthesizer.save(tmp_path / "m.npz")
    loaded = synth.Synthesizer.load(tmp_path / "m.npz")
    assert loaded.model.schema.constraints == CONSTRAINED.constraints
    assert violations(loaded.sample(3000, rng=2)) == [0, 0]
    assert constrain_model(loaded.model).distribution.tolist() == pytest.approx(loaded.model.distribution.tolist())


# -- the Python API --------------------------------------------------------------------------


def test_fit_refuses_malformed_constraints_before_reading_the_data(rng):
    synthesizer = synth.Synthesizer.create("mwem", epsilon=1.0, rng=1)
    with pytest.raises(TypeError, match="constraints must be a list of constraints"):
        synthesizer.fit("no-such-file.csv", FREE, constraints=FORBID)
    with pytest.raises(SchemaError, match=r"constraint #2: forbid constraint \{'sex': 'Male'\}: name two"):
        synthesizer.fit("no-such-file.csv", FREE, constraints=[FUNCTION, {"forbid": {"sex": "Male"}}])
    with pytest.raises(SchemaError, match=r"constraint #1 \(forbid sex = 'Male', relationship = 'Aunt'\)"):
        synthesizer.fit(table(rng), FREE, constraints=[{"forbid": {"sex": "Male", "relationship": "Aunt"}}])
    assert synthesizer.model is None


def test_fit_adds_constraints_to_a_schema_derived_under_dp(rng):
    frame = table(rng, 3000).drop(columns=["education-num"])
    synthesizer = synth.Synthesizer.create("mwem", epsilon=2.0, delta=1e-6, rng=1)
    rows = synthesizer.fit_sample(frame, constraints=[FORBID])
    assert synthesizer.model.schema.constraints == (Forbid({"sex": "Male", "relationship": "Wife"}),)
    assert not ((rows["sex"] == "Male") & (rows["relationship"] == "Wife")).any()


# -- evaluate --------------------------------------------------------------------------------


def test_evaluate_reports_the_share_of_rows_breaking_each_constraint(rng):
    truth = synth.encode(table(rng, 1000), FREE).codes
    released = truth.copy()
    released[:50, 1] = 0  # 50 rows with education-num 1 (in bin [1, 2))
    released[40:140, 2:] = [0, 1]  # 100 male wives
    workload = Workload.marginals(CONSTRAINED, 1)
    evaluation = evaluate(truth, workload, released_from_codes(released, workload))
    shares = [(c.constraint, c.released_share, c.real_share) for c in evaluation.constraints]
    assert shares == [("education-num = f(education)", pytest.approx(0.05), 0.0),
                      ("forbid sex = 'Male', relationship = 'Wife'", pytest.approx(0.1), 0.0)]
    summary = evaluation.summary()["constraints"]
    assert "NON-PRIVATE" in summary["privacy"]
    assert summary["checks"][1] == {"constraint": "forbid sex = 'Male', relationship = 'Wife'",
                                    "columns": ["sex", "relationship"], "released_violating_share": pytest.approx(0.1),
                                    "real_violating_share": 0.0}
    assert constraints_text(evaluation)[1] == ("constraint forbid sex = 'Male', relationship = 'Wife': broken by 0.100 "
                                               "of the synthetic rows; by 0 of the real rows [NON-PRIVATE: computed "
                                               "from the true data]")
    assert "constraints" not in evaluate(truth, Workload.marginals(FREE, 1),
                                         released_from_codes(released, Workload.marginals(FREE, 1))).summary()


# -- the CLI ---------------------------------------------------------------------------------


def test_generate_sample_and_evaluate_keep_the_schema_constraints(rng, tmp_path):
    data = tmp_path / "d.csv"
    table(rng).to_csv(data, index=False)
    schema = tmp_path / "s.json"
    CONSTRAINED.save(schema)
    runner = CliRunner()
    done = runner.invoke(main, ["generate", str(data), "--schema", str(schema), "--epsilon", "0.3", "--rows", "2000",
                                "--seed", "1", "--quiet", "-o", str(tmp_path / "syn.csv"), "--model",
                                str(tmp_path / "m.npz")])
    assert done.exit_code == 0, done.output
    assert violations(pd.read_csv(tmp_path / "syn.csv")) == [0, 0]
    done = runner.invoke(main, ["sample", "--model", str(tmp_path / "m.npz"), "--rows", "3000", "-o",
                                str(tmp_path / "more.csv")])
    assert done.exit_code == 0, done.output
    assert violations(pd.read_csv(tmp_path / "more.csv")) == [0, 0]
    done = runner.invoke(main, ["evaluate", str(data), "--schema", str(schema), "--synthetic",
                                str(tmp_path / "syn.csv"), "--model", str(tmp_path / "m.npz"), "--quiet", "-o",
                                str(tmp_path / "report")])
    assert done.exit_code == 0, done.output
    checks = json.loads((tmp_path / "report" / "summary.json").read_text())["constraints"]["checks"]
    assert [(c["released_violating_share"], c["real_violating_share"]) for c in checks] == [(0.0, 0.0), (0.0, 0.0)]
    assert "constraint education-num = f(education): broken by 0 of the synthetic rows" in done.output
    assert "Declared constraints" in (tmp_path / "report" / "index.html").read_text()


def test_a_function_moves_mass_to_the_allowed_value_and_leaves_the_rest(rng):
    """Conditioning on education-num = f(education) would reweigh every other column by how much
    of its mass the model had put on the right number; moving that mass instead leaves every
    marginal without education-num as it was. A row the model could not constrain gets its
    education-num moved, nothing else."""
    from synth.data.tables import marginal_from_dense
    from synth.models.sampling import constrained_weights, repair_functions

    schema = Schema(CONSTRAINED.columns, constraints=[FUNCTION])
    weights = rng.random(schema.universe_size)
    weights /= weights.sum()
    kept = constrained_weights(weights, schema)
    assert kept.sum() == pytest.approx(1.0)
    for columns in (["education"], ["education", "sex"], ["sex", "relationship"], ["education", "sex", "relationship"]):
        assert np.allclose(marginal_from_dense(kept, schema, columns), marginal_from_dense(weights, schema, columns))
    table = marginal_from_dense(kept, schema, ["education", "education-num"])
    assert table[~compile_constraints(schema)[0].allowed].sum() == pytest.approx(0.0, abs=1e-15)
    plain = weights * compile_constraints(schema)[0].allowed[  # conditioning, for contrast: the others move
        tuple(schema.cell_codes(np.arange(schema.universe_size))[:, [0, 1]].T)].astype(float)
    assert not np.allclose(marginal_from_dense(plain / plain.sum(), schema, ["education", "sex"]),
                           marginal_from_dense(weights, schema, ["education", "sex"]))
    codes = schema.cell_codes(rng.integers(0, schema.universe_size, 500))
    fixed = repair_functions(codes.copy(), schema)
    assert count_violations(fixed, schema) == [0]
    assert np.array_equal(np.delete(fixed, 1, axis=1), np.delete(codes, 1, axis=1))  # only education-num moved
