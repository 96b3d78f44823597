"""A schema derived under DP from a raw table: kinds, values, bounds and bins, at a stated cost."""

import numpy as np
import pandas as pd
import pytest

from synth.data.derive import DEFAULT_SCHEMA_SHARE, OTHER, derive_schema, parse_bounds
from synth.data.schema import Categorical, Numeric, Schema
from synth.errors import SchemaError


def passengers(rows: int = 3000, seed: int = 0) -> pd.DataFrame:
    """A passenger list as people have one: ids, unique names, tickets, ages with empty cells,
    cabins mostly empty, a long-tailed fare, and a few rare ports."""
    rng = np.random.default_rng(seed)
    age = rng.normal(30, 14, rows).clip(0, 80).round()
    ages = np.where(rng.random(rows) < 0.2, "", age.astype(int).astype(str))
    cabin = np.where(rng.random(rows) < 0.8, "", np.char.add("C", rng.integers(1, 150, rows).astype(str)))
    port = rng.choice(["S", "C", "Q"], rows, p=[0.7, 0.2, 0.1]).astype(object)
    port[:3] = ["Atlantis", "Lemuria", "Mu"]  # each held by one row: must never appear
    fare = np.where(rng.random(rows) < 0.05, 0.0, np.round(rng.lognormal(3, 1, rows), 2))
    return pd.DataFrame({
        "PassengerId": np.arange(1, rows + 1),
        "Name": [f"Passenger, Mr. Number{i}" for i in range(rows)],
        "Sex": rng.choice(["male", "female"], rows),
        "Pclass": rng.choice([1, 2, 3], rows),
        "Age": ages,
        "Ticket": [f"T{rng.integers(10**6)}" for _ in range(rows)],
        "Fare": fare,
        "Cabin": cabin,
        "Embarked": port,
    })


def test_a_passenger_list_keeps_no_rare_value_and_leaves_identifiers_out():
    frame = passengers()
    derived = derive_schema(frame, 1.0, 1e-9, bounds={"Age": (0, 100)}, rng=1)
    schema = derived.schema
    assert set(derived.excluded) >= {"PassengerId", "Name", "Ticket"}
    assert "PassengerId" not in schema and "Name" not in schema
    counts = {name: frame[name].astype(str).value_counts() for name in frame.columns}
    for column in schema:
        if isinstance(column, Categorical):
            for value in column.values:
                if value != column.other:
                    assert counts[column.name].get(value, 0) >= 20, (column.name, value)
    assert set(schema["Sex"].values) == {"male", "female", OTHER} and schema["Sex"].missing
    assert {"Atlantis", "Lemuria", "Mu"}.isdisjoint(schema["Embarked"].values)
    age = schema["Age"]
    assert isinstance(age, Numeric) and age.missing and all(float(e).is_integer() for e in age.edges)
    assert age.edges[0] == 0 and age.edges[-1] == 100
    fare = schema["Fare"]  # bounds derived privately: inside the data's range, powers of two
    assert isinstance(fare, Numeric) and fare.edges[0] >= 0 and fare.edges[-1] <= 2 ** 12
    spent = derived.accountant.spent()
    assert spent.epsilon <= 1.0 and spent.delta <= 1e-9 and spent.epsilon == pytest.approx(1.0, rel=1e-4)
    assert (derived.epsilon, derived.delta) == (spent.epsilon, spent.delta)
    assert "PassengerId" not in derived.columns  # left out by its header, before anything was spent on it
    assert schema.ignored == tuple(derived.excluded) and schema.derivation == derived.record()


def test_a_spike_gets_its_own_bin_and_the_bins_follow_the_mass():
    rng = np.random.default_rng(3)
    gain = np.where(rng.random(20000) < 0.92, 0, rng.integers(1, 100000, 20000))
    derived = derive_schema(pd.DataFrame({"gain": gain}), 2.0, 1e-9, bounds={"gain": (0, 100000)}, bins=16, rng=2)
    edges = derived.schema["gain"].edges
    assert edges[0] == 0 and edges[1] == 1 and edges[-1] == 100000  # zeros alone in [0, 1)
    assert len(edges) >= 4  # the tail is cut too
    uniform = derive_schema(pd.DataFrame({"u": rng.integers(0, 1000, 20000)}), 2.0, 1e-9, bounds={"u": (0, 1000)},
                            bins=10, rng=3).schema["u"].edges
    widths = np.diff(uniform)
    assert len(uniform) == 11 and widths.max() < 2.5 * widths.min()


def test_public_input_is_taken_as_given_and_costs_nothing():
    frame = passengers(1500)
    sex = Categorical("Sex", ("female", "male"))
    derived = derive_schema(frame, 1.0, 1e-9, public=[sex], bounds={"Fare": (0, 600)},
                            columns=["Sex", "Fare", "Pclass"], rng=4)
    assert derived.schema["Sex"] is sex and derived.public == ["Sex"] and "Sex" not in derived.columns
    fare = derived.schema["Fare"]
    assert fare.edges[0] == 0 and fare.edges[-1] == 600
    assert "public bounds" in derived.columns["Fare"]["how"]
    assert set(derived.columns) == {"Fare", "Pclass"}
    record = derived.record()
    # no categorical column to derive: the half of delta kept for partition thresholds goes unused
    assert 0.95 <= record["epsilon"] <= 1.0 and record["public"] == ["Sex"]


def test_deriving_needs_delta_and_known_columns():
    frame = passengers(200)
    with pytest.raises(SchemaError, match="needs delta > 0"):
        derive_schema(frame, 1.0, 0.0)
    with pytest.raises(SchemaError, match="'Fair' is described but the data has no such column"):
        derive_schema(frame, 1.0, 1e-9, bounds={"Fair": (0, 1)})
    with pytest.raises(ValueError, match="must read COLUMN=LOW:HIGH"):
        parse_bounds(["age=10"])
    assert parse_bounds(["age=0:120", "x=y=-1.5:2"]) == {"age": (0.0, 120.0), "x=y": (-1.5, 2.0)}


def test_a_derived_schema_reads_its_own_table(tmp_path):
    """Rows with rare values read as 'other', empty cells as missing: nothing is dropped."""
    from synth.data.reading import read

    frame = passengers(2000)
    path = tmp_path / "p.csv"
    frame.to_csv(path, index=False)
    derived = derive_schema(path, 1.0, 1e-9, bounds={"Age": (0, 100)}, rng=5)
    encoded = read(path, derived.schema)  # the identifiers it left out are skipped
    assert encoded.n_rows == 2000
    embarked = derived.schema["Embarked"]
    codes = encoded.codes[:, derived.schema.index("Embarked")]
    assert (codes[:3] == embarked.values.index(embarked.other)).all()
    age = derived.schema["Age"]
    assert (encoded.codes[:, derived.schema.index("Age")] == age.size - 1).mean() == pytest.approx(
        (frame["Age"] == "").mean())
    again = Schema.from_dict(derived.schema.to_dict())  # the schema file round-trips, record and all
    assert again == derived.schema and again.derivation == derived.record() and again.ignored == derived.schema.ignored


def test_the_cli_derives_a_schema_and_generate_counts_its_cost(tmp_path):
    """schema infer --epsilon writes a schema with its record; generate on it adds that cost to
    its own, in the summary and the model file; no rare value reaches the synthetic table and
    no row is dropped for an empty cell."""
    from click.testing import CliRunner

    from synth.models.model import Model
    from synth_cli.main import main

    frame = passengers(4000, seed=7)
    frame.to_csv(tmp_path / "p.csv", index=False)
    run = CliRunner().invoke
    result = run(main, ["schema", "infer", str(tmp_path / "p.csv"), "--epsilon", "1", "--delta", "1e-9",
                        "--bounds", "Age=0:100", "--seed", "3", "-o", str(tmp_path / "s.json")])
    assert result.exit_code == 0, result.output
    assert "schema derived under DP: rho=" in result.stderr and "(epsilon=1, delta=1e-09 alone" in result.stderr
    assert "Name: left out" in result.stderr
    schema = Schema.load(tmp_path / "s.json")
    assert schema.derivation["epsilon"] == pytest.approx(1.0, rel=1e-4) and "Name" in schema.ignored
    result = run(main, ["generate", str(tmp_path / "p.csv"), "--schema", str(tmp_path / "s.json"), "--epsilon", "1",
                        "--seed", "4", "-o", str(tmp_path / "out.csv"), "--model", str(tmp_path / "m.npz")])
    assert result.exit_code == 0, result.output
    assert "total with the schema's derivation (epsilon=0.99999" in result.stderr
    privacy = Model.load(tmp_path / "m.npz").privacy
    spent = [c["epsilon"] for c in privacy["charges"] if not c["note"].startswith("schema derivation")]
    # both parts counted (each alone spent about 1), within both budgets; composed as one ledger, the
    # run's 40 small pure charges convert to zCDP beside the derivation's rho, for less than 2 in all
    assert max(1.0, sum(spent)) < privacy["spent"]["epsilon"] <= 2.0
    assert privacy["budget"]["epsilon"] == pytest.approx(2.0)
    assert any(c["note"].startswith("schema derivation: Age") for c in privacy["charges"])
    out = pd.read_csv(tmp_path / "out.csv", keep_default_na=False, dtype=str)
    assert set(out.columns) == set(schema.names) | {"PassengerId"}  # Name and Ticket (free text) left out
    assert set(out["PassengerId"]).isdisjoint(frame["PassengerId"].astype(str))  # fresh ids, never real ones
    assert {"Atlantis", "Lemuria", "Mu"}.isdisjoint(out["Embarked"])
    assert abs((out["Age"] == "").mean() - 0.2) < 0.05  # missing ages come back as empty cells, in share
    refused = run(main, ["schema", "infer", str(tmp_path / "p.csv"), "--bounds", "Age=0:100", "-o",
                         str(tmp_path / "t.json")])
    assert refused.exit_code == 2 and "--bounds apply to a private derivation: add --epsilon" in refused.stderr


def test_the_synthesizer_derives_a_schema_when_none_is_given():
    """fit(df) with no schema: a schema derived under DP with a share of the budget; the
    release's record counts both parts and stays within the budget; delta must be > 0."""
    import synth

    frame = passengers(3000, seed=9)
    synthesizer = synth.Synthesizer.create("mwem", epsilon=1.0, delta=1e-6, rng=11)
    out = synthesizer.fit_sample(frame, bounds={"Age": (0, 100)}, columns=["Sex", "Pclass", "Age", "Embarked"])
    assert list(out.columns) == ["Sex", "Pclass", "Age", "Embarked"] and len(out) > 2500
    spent = synthesizer.privacy_spent  # as one ledger the derivation's rho converts at the run's whole delta: < 1
    assert 0.95 <= spent["epsilon"] <= 1.0
    notes = [c["note"] for c in synthesizer.model.privacy["charges"]]
    assert any(n.startswith("schema derivation: Age") for n in notes) and any(n.startswith("mwem:") for n in notes)
    # four columns: MWEM's few measurements take Laplace noise, so the derivation took its share of epsilon
    assert synthesizer.model.schema.derivation["epsilon"] == pytest.approx(DEFAULT_SCHEMA_SHARE, rel=1e-4)
    with pytest.raises(SchemaError, match="needs delta > 0"):
        synth.Synthesizer.create("mwem", epsilon=1.0).fit(frame)


def test_a_derivation_for_a_run_in_zcdp_shares_its_rho():
    """Many columns: MWEM measures with Gaussian noise (rho-zCDP), so the derivation takes its share
    of the run's rho and the two compose as one ledger, within the budget; a broken split (the
    run given the whole budget again) would be refused rather than recorded."""
    import synth
    from synth.privacy.composition import zcdp_rho_limit

    frame = passengers(3000, seed=9)
    rng = np.random.default_rng(2)
    for k in range(4):
        frame[f"flag{k}"] = rng.choice(["yes", "no"], len(frame))
    synthesizer = synth.Synthesizer.create("mwem", epsilon=1.0, delta=1e-6, rng=11)
    synthesizer.fit(frame, columns=["Sex", "Pclass", "Embarked", "flag0", "flag1", "flag2", "flag3"])
    record = synthesizer.model.privacy
    rho = sum(c["rho"] or 0.0 for c in synthesizer.model.schema.derivation["privacy"]["charges"])
    assert rho == pytest.approx(DEFAULT_SCHEMA_SHARE * zcdp_rho_limit(1.0, 0.5e-6), rel=1e-4)  # half of delta: the thresholds
    assert "over one ledger: schema derivation then mwem" in record["spent"]["method"]
    assert record["spent"]["epsilon"] <= 1.0 and record["spent"]["epsilon"] == pytest.approx(1.0, rel=1e-4)
    assert record["budget"] == {"epsilon": 1.0, "delta": 1e-6}
    assert all(c["rho"] is not None or c["epsilon"] == 0.0 for c in record["charges"])  # rho, or a threshold's delta
    from synth.engines.release import with_schema_cost
    from synth.privacy.accounting import Accountant, Budget, BudgetExceeded

    greedy = Accountant(1.0, 1e-6)
    greedy.spend(rho=zcdp_rho_limit(1.0, 0.5e-6) * 0.99)  # a run that took the whole rho again
    with pytest.raises(BudgetExceeded):
        with_schema_cost(synthesizer.model, synthesizer.model.schema, greedy, "mwem", Budget(1.0, 1e-6))


def test_generate_without_a_schema_derives_one_with_a_stated_share(tmp_path):
    from click.testing import CliRunner

    from synth.models.model import Model
    from synth_cli.main import main

    passengers(3000, seed=12).to_csv(tmp_path / "p.csv", index=False)
    base = ["generate", str(tmp_path / "p.csv"), "--epsilon", "1", "--columns", "Sex,Pclass,Age,Embarked",
            "--bounds", "Age=0:100", "--seed", "5", "-o", str(tmp_path / "out.csv")]
    refused = CliRunner().invoke(main, base)
    assert refused.exit_code == 2 and "needs --delta > 0" in refused.stderr
    result = CliRunner().invoke(main, [*base, "--delta", "1e-9", "--schema-share", "0.3", "--model",
                                       str(tmp_path / "m.npz")])
    assert result.exit_code == 0, result.output
    assert "no --schema: deriving one under DP with 0.3 of the budget's epsilon and delta (--schema-share)" in \
        result.stderr  # four columns: MWEM takes Laplace noise, so the derivation is not in its rho
    privacy = Model.load(tmp_path / "m.npz").privacy
    assert 0.95 <= privacy["spent"]["epsilon"] <= 1.0 and privacy["budget"] == {"epsilon": 1.0, "delta": 1e-9}
    assert privacy["spent"]["delta"] <= 1e-9
    out = pd.read_csv(tmp_path / "out.csv", keep_default_na=False, dtype=str)
    assert list(out.columns) == ["Sex", "Pclass", "Age", "Embarked"]
    Model.load(tmp_path / "m.npz").schema.save(tmp_path / "s.json")
    with_schema = CliRunner().invoke(main, [*base[:-2], "--delta", "1e-9", "--schema", str(tmp_path / "s.json"),
                                            "-o", str(tmp_path / "o2.csv")])
    assert with_schema.exit_code == 2 and "--bounds apply without --schema" in with_schema.stderr


def test_the_synthesizer_counts_a_derived_schema_file_too(tmp_path):
    """A schema derived earlier (a file with its derivation) costs a Synthesizer run as it costs
    synth generate: the release's record holds both ledgers."""
    import synth

    frame = passengers(2000, seed=13)
    derived = derive_schema(frame, 0.5, 1e-9, bounds={"Age": (0, 100)}, columns=["Sex", "Pclass", "Age"], rng=6)
    derived.schema.save(tmp_path / "s.json")
    synthesizer = synth.Synthesizer.create("mwem", epsilon=1.0, rng=7).fit(frame, schema=tmp_path / "s.json")
    privacy = synthesizer.model.privacy
    assert privacy["spent"]["epsilon"] == pytest.approx(1.0 + derived.epsilon, rel=1e-6)
    assert any(c["note"].startswith("schema derivation: Age") for c in privacy["charges"])


def test_dates_and_decimal_places_are_derived_and_written_back_as_read():
    """A column of ISO dates is derived as a time column (days), a column of prices with two
    decimal places keeps them: the synthetic table writes dates in ISO form and prices with two
    places, inside the derived range."""
    import synth

    rng = np.random.default_rng(5)
    n = 20_000
    days = rng.integers(0, 3 * 365, n)
    frame = pd.DataFrame({
        "visit": (np.datetime64("2021-01-01") + days.astype("timedelta64[D]")).astype(str),
        "price": np.round(rng.lognormal(3, 0.5, n), 2),
        "kind": rng.choice(["a", "b"], n),
    })
    frame.loc[:99, "price"] = 12.5  # a few cells written with one place: still a two-place column
    derived = derive_schema(frame, 1.0, 1e-9, rng=6)
    visit, price = derived.schema["visit"], derived.schema["price"]
    assert isinstance(visit, Numeric) and visit.time == "date" and price.digits == 2 and price.time is None
    assert "a date column" in derived.columns["visit"]["how"] and "2 decimal places" in derived.columns["price"]["how"]
    out = synth.Synthesizer.create("mwem", epsilon=1.0, delta=1e-9, rng=7).fit_sample(frame)
    dates = pd.to_datetime(out["visit"].dropna(), format="%Y-%m-%d")  # ISO dates, or this raises
    outside = (dates < pd.Timestamp("2020-06-01")) | (dates > pd.Timestamp("2024-06-30"))
    assert outside.mean() < 0.03, outside.mean()  # the derived bounds are wider, but their empty ends stay empty
    prices = out["price"].dropna().astype(float)
    assert np.allclose(prices, np.round(prices, 2)) and not np.allclose(prices, np.round(prices, 1))


def test_a_declared_function_holds_in_every_row_of_a_run_without_a_schema(tmp_path):
    """--constraints with a derived schema: level-num = f(level) holds in every synthetic row
    (the same run without it breaks it), and the entry of a rare level, read as "other" by the
    derived schema, is left free with a warning instead of stopping the run."""
    import json

    from click.testing import CliRunner

    from synth_cli.main import main

    rng = np.random.default_rng(8)
    n = 6000
    levels = rng.choice(["low", "mid", "high", "rare"], n, p=[0.5, 0.3, 0.198, 0.002])
    numbers = {"low": 1, "mid": 5, "high": 9, "rare": 12}
    frame = pd.DataFrame({"level": levels, "level-num": [numbers[v] for v in levels],
                          "age": rng.integers(18, 90, n), "flag": rng.choice(["y", "n"], n)})
    frame.to_csv(tmp_path / "t.csv", index=False)
    (tmp_path / "c.json").write_text(json.dumps([{"function": {"of": "level", "column": "level-num", "map": numbers}}]))
    base = ["generate", str(tmp_path / "t.csv"), "--epsilon", "1", "--delta", "1e-9", "--seed", "3"]
    result = CliRunner().invoke(main, [*base, "--constraints", str(tmp_path / "c.json"), "-o", str(tmp_path / "o.csv")])
    assert result.exit_code == 0, result.output
    assert "entries left free" in result.stderr
    out = pd.read_csv(tmp_path / "o.csv")
    kept = out[out["level"].isin(["low", "mid", "high"])]
    assert len(kept) > 0.9 * len(out)
    assert (kept["level-num"] == kept["level"].map(numbers)).all()  # the mapped number itself, in every row
    free = CliRunner().invoke(main, [*base, "-o", str(tmp_path / "free.csv")])
    assert free.exit_code == 0, free.output
    loose = pd.read_csv(tmp_path / "free.csv")
    loose = loose[loose["level"].isin(["low", "mid", "high"])]
    assert (loose["level-num"] != loose["level"].map(numbers)).mean() > 0.02  # the model alone breaks it


def test_public_categories_and_missing_flags_are_taken_as_given():
    import synth

    frame = passengers(2000, seed=4)
    synthesizer = synth.Synthesizer.create("mwem", epsilon=1.0, delta=1e-9, rng=2)
    out = synthesizer.fit_sample(frame, columns=["Sex", "Pclass", "Age"], categories={"Sex": ["female", "male"]},
                                 missing={"Sex": False, "Pclass": False}, bounds={"Age": (0, 100)})
    schema = synthesizer.model.schema
    assert schema["Sex"].values == ("female", "male") and not schema["Sex"].missing  # no "other", no missing code
    assert not schema["Pclass"].missing and schema["Age"].missing  # derived, with the public flag; the default
    assert "Sex" not in schema.derivation["columns"]  # public: nothing spent on it
    assert set(out["Sex"]) == {"female", "male"} and out["Pclass"].notna().all()
    with pytest.raises(SchemaError, match="'Sx' is described but the data has no such column"):
        synth.Synthesizer.create("mwem", epsilon=1.0, delta=1e-9).fit(frame, missing={"Sx": False})


def test_text_cells_in_a_derived_numeric_column_read_as_missing(tmp_path):
    """A numeric column with a few 'N/A' and 'unknown' cells stays numeric, and those cells read
    as its missing value: no row refused, none dropped, the share of missing in the output
    near theirs."""
    import synth

    rng = np.random.default_rng(11)
    n = 5000
    income = rng.integers(1000, 90000, n).astype(object)
    junk = rng.random(n) < 0.05
    income[junk] = rng.choice(["N/A", "unknown"], junk.sum())
    frame = pd.DataFrame({"income": income, "group": rng.choice(["a", "b", "c"], n)})
    frame.to_csv(tmp_path / "t.csv", index=False)
    synthesizer = synth.Synthesizer.create("mwem", epsilon=1.0, delta=1e-9, rng=3)
    out = synthesizer.fit_sample(tmp_path / "t.csv")
    column = synthesizer.model.schema["income"]
    assert isinstance(column, Numeric) and column.text_missing and column.missing
    assert abs(out["income"].isna().mean() - 0.05) < 0.03
    assert Schema.from_dict(synthesizer.model.schema.to_dict())["income"].text_missing  # kept in the JSON
    with pytest.raises(SchemaError, match="text_missing"):
        Numeric("x", (0, 1), text_missing=True)  # only with missing


def test_a_passenger_list_run_with_no_schema_writes_no_value_of_fewer_than_20_rows(tmp_path):
    """The issue's check at a real passenger list's size (891 rows), through the command a new
    user types: no value held by fewer than 20 rows of the data appears in the derived schema
    or the synthetic CSV; ids are fresh, names and tickets left out, empty ages kept."""
    from click.testing import CliRunner

    from synth.models.model import Model
    from synth_cli.main import main

    frame = passengers(891, seed=21)
    frame.to_csv(tmp_path / "p.csv", index=False)
    result = CliRunner().invoke(main, ["generate", str(tmp_path / "p.csv"), "--epsilon", "1", "--delta", "1e-9",
                                       "--seed", "4", "-o", str(tmp_path / "out.csv"), "--model",
                                       str(tmp_path / "m.npz")])
    assert result.exit_code == 0, result.output
    real = pd.read_csv(tmp_path / "p.csv", dtype=str, keep_default_na=False)
    out = pd.read_csv(tmp_path / "out.csv", dtype=str, keep_default_na=False)
    schema = Model.load(tmp_path / "m.npz").schema
    assert "Name" not in out and "Ticket" not in out and len(out) > 700
    assert set(out["PassengerId"]).isdisjoint(real["PassengerId"])
    for column in schema:
        if isinstance(column, Categorical):
            counts = real[column.name].value_counts()
            for value in column.values:
                assert value == column.other or counts.get(value, 0) >= 20, (column.name, value)
            written = set(out[column.name]) - {"", column.other}
            assert all(counts.get(value, 0) >= 20 for value in written), (column.name, written)
    assert (out["Age"] == "").mean() > 0.05  # the empty ages (a fifth of the rows) come back as empty cells
