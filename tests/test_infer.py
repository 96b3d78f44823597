import pytest

from synth.data import reading as data
from synth.errors import DataError, SchemaError
from synth.data.infer import MAX_TEXT_CATEGORIES, infer_schema
from synth.data.schema import Categorical, Numeric


def test_infers_kinds_and_the_schema_reads_its_own_data(tmp_path):
    lines = ["city,kids,income"] + [f"{c},{k},{v}" for c, k, v in zip(["Oslo", "Rome", "Lima"] * 20, [0, 1, 2, 3] * 15, range(60))]
    path = tmp_path / "d.csv"
    path.write_text("\n".join(lines) + "\n")
    schema = infer_schema(path, max_categories=10, bins=6)
    assert schema["city"] == Categorical("city", ("Lima", "Oslo", "Rome"))
    assert schema["kids"] == Categorical("kids", (0, 1, 2, 3))
    assert isinstance(schema["income"], Numeric)
    assert schema["income"].edges == (0, 10, 20, 30, 40, 50, 60)
    assert schema.rows is None  # the exact row count is never put in a schema silently
    encoded = data.read(path, schema)
    assert encoded.n_rows == 60 and not encoded.clipped


def test_fractional_numbers_get_equal_width_float_bins(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("x\n" + "\n".join(str(i / 2) for i in range(41)) + "\n")
    schema = infer_schema(path, max_categories=5, bins=4)
    assert schema["x"].edges == (0.0, 5.0, 10.0, 15.0, 20.0)


def test_columns_restrict_inference(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("a,b\n1,x\n2,y\n")
    assert infer_schema(path, columns="b").names == ("b",)
    with pytest.raises(DataError, match="column 'c' is not in the file"):
        infer_schema(path, columns="b,c")


def test_identifier_like_text_column_is_refused(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("id\n" + "\n".join(f"user{i}" for i in range(MAX_TEXT_CATEGORIES + 1)) + "\n")
    with pytest.raises(SchemaError, match="more than 1000 distinct text values"):
        infer_schema(path)


def test_empty_column_is_refused(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("a,b\n1,\n2,\n")
    with pytest.raises(DataError, match="column 'b' has no values"):
        infer_schema(path)


def test_an_inferred_schema_says_so_and_every_private_run_warns_once(tmp_path):
    import json

    from click.testing import CliRunner

    from synth_cli.main import main
    from synth.data.bundled import bundled

    grades = bundled("grades")
    schema_path = tmp_path / "schema.json"
    runner = CliRunner()
    assert runner.invoke(main, ["schema", "infer", str(grades.data), "-o", str(schema_path)]).exit_code == 0
    saved = json.loads(schema_path.read_text())
    assert saved["inferred"] is True and "NOT differentially private" in saved["description"]
    workload = tmp_path / "w.json"
    workload.write_text('{"queries": [{"where": {"gender": "female", "grade": "pass"}}]}')
    args = ["--schema", str(schema_path), "--workload", str(workload), "--epsilon", "1", "-q"]
    result = runner.invoke(main, ["generate", str(grades.data), *args, "-o", str(tmp_path / "s.csv"),
                                  "--model", str(tmp_path / "m.npz"), "--columns", "gender,grade"])
    assert result.exit_code == 0, result.stderr
    assert result.stderr.count("was inferred from the data") == 1
    from synth.models.model import Model

    assert Model.load(tmp_path / "m.npz").schema.inferred  # the release records it too
    public = runner.invoke(main, ["generate", str(grades.data), *args[:1], str(grades.schema), *args[2:],
                                  "-o", str(tmp_path / "p.csv"), "--columns", "gender,grade"])
    assert public.exit_code == 0 and "was inferred from the data" not in public.stderr
