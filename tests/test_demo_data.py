"""The bundled demo table (``synth/datasets/demo.csv``): reproducible, readable, and worth modelling.

The data are SYNTHETIC, drawn by ``datasets/make_demo.py``; these tests pin the committed files
to the generator and check that the dependencies its docstring describes are really there
(strong pairs, three-way effects, and independence where none was designed), so that a good
synthesizer beats independent marginals by a visible margin.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from synth.data.reading import read
from synth.data.schema import Numeric, Schema
from tests.test_rng import GLOBAL_RNG

REPO = Path(__file__).resolve().parents[1]
DATASETS = REPO / "synth" / "datasets"  # package data: the wheel ships it
GENERATOR = REPO / "datasets" / "make_demo.py"
CSV = DATASETS / "demo.csv"
SCHEMA = DATASETS / "demo-schema.json"
ROWS = 30_000
SHAPE = {"age": 6, "sex": 2, "region": 4, "education": 5, "employment": 4, "income": 7, "smoker": 2,
         "health": 3}


def run_generator(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(GENERATOR), *args], cwd=REPO, capture_output=True, text=True, timeout=60
    )


@pytest.fixture(scope="module")
def schema() -> Schema:
    return Schema.load(SCHEMA)


@pytest.fixture(scope="module")
def codes(schema) -> np.ndarray:
    return read(CSV, schema).codes.astype(np.int64)


def table(codes: np.ndarray, schema: Schema, names: tuple[str, ...]) -> np.ndarray:
    """The marginal counts over ``names``, one axis per column."""
    sub = schema.project(names)
    index = codes[:, [schema.index(n) for n in names]] @ sub.strides
    return np.bincount(index, minlength=sub.universe_size).reshape(sub.shape).astype(float)


def g_statistic(counts: np.ndarray) -> tuple[float, int]:
    """The G-test of independence of a two-way table: (G, degrees of freedom)."""
    counts = counts[counts.sum(1) > 0][:, counts.sum(0) > 0]
    expected = counts.sum(1, keepdims=True) * counts.sum(0, keepdims=True) / counts.sum()
    seen = counts > 0
    g = 2.0 * float((counts[seen] * np.log(counts[seen] / expected[seen])).sum())
    return g, (counts.shape[0] - 1) * (counts.shape[1] - 1)


def z_score(counts: np.ndarray) -> float:
    """How many standard deviations G lies above its mean under independence (chi-square)."""
    g, df = g_statistic(counts)
    return (g - df) / math.sqrt(2 * df)


def tv_to_independence(counts: np.ndarray) -> float:
    """Total variation distance between a marginal and the product of its one-way margins."""
    p = counts / counts.sum()
    product = np.ones([1] * p.ndim)
    for axis in range(p.ndim):
        others = tuple(a for a in range(p.ndim) if a != axis)
        product = product * p.sum(axis=others, keepdims=True)
    return 0.5 * float(np.abs(p - product).sum())


# -- the files are the generator's output --------------------------------------------------


def test_generator_reproduces_the_committed_files(tmp_path):
    result = run_generator("-o", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "demo.csv").read_bytes() == CSV.read_bytes()
    assert (tmp_path / "demo-schema.json").read_bytes() == SCHEMA.read_bytes()


def test_the_schema_is_public_not_learnt_from_the_rows(tmp_path):
    result = run_generator("--rows", "500", "--seed", "3", "-o", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "demo-schema.json").read_bytes() == SCHEMA.read_bytes()
    small = pd.read_csv(tmp_path / "demo.csv")
    assert len(small) == 500
    assert not small.equals(pd.read_csv(CSV, nrows=500))  # another seed, other rows


@pytest.mark.parametrize("args, message", [(["--rows", "0"], r"--rows \(0\) must be >= 1"),
                                           (["--seed", "-1"], r"--seed \(-1\) must be >= 0")])
def test_the_generator_refuses_bad_arguments(tmp_path, args, message):
    result = run_generator(*args, "-o", str(tmp_path))
    assert result.returncode == 2
    assert re.search(message, result.stderr)
    assert not (tmp_path / "demo.csv").exists()


def test_the_generator_says_synthetic_and_uses_no_global_rng():
    source = GENERATOR.read_text()
    assert not GLOBAL_RNG.search(source)
    assert "np.random.default_rng(seed)" in source
    assert "SYNTHETIC" in source
    assert "SYNTHETIC" in json.loads(SCHEMA.read_text())["description"]


# -- the schema ----------------------------------------------------------------------------


def test_the_universe_is_moderate(schema):
    assert dict(zip(schema.names, schema.shape)) == SHAPE
    assert 6 <= len(schema) <= 8
    assert schema.universe_size == math.prod(SHAPE.values()) == 40_320
    assert 10**4 <= schema.universe_size <= 10**5


def test_the_schema_round_trips_and_leaves_the_row_count_private(schema):
    on_disk = json.loads(SCHEMA.read_text())
    assert schema.to_dict() == {k: v for k, v in on_disk.items() if k != "description"}
    assert schema.rows is None
    numeric = [c for c in schema if isinstance(c, Numeric)]
    assert [c.name for c in numeric] == ["age", "income"]
    for column in numeric:  # integer edges: synth.models.synthetic draws integers for these columns
        assert all(isinstance(e, int) for e in column.edges)
    assert [c.name for c in schema if not isinstance(c, Numeric)] == [
        "sex", "region", "education", "employment", "smoker", "health"
    ]


# -- the rows ------------------------------------------------------------------------------


def test_the_csv_reads_under_the_schema_without_clipping(schema):
    encoded = read(CSV, schema)
    assert encoded.codes.shape == (ROWS, len(schema))
    assert encoded.clipped == {}
    for j, column in enumerate(schema):  # every label and every bin is used
        assert np.bincount(encoded.codes[:, j].astype(np.int64), minlength=column.size).min() > 0, column.name


def test_numeric_columns_hold_whole_numbers_in_range():
    frame = pd.read_csv(CSV)
    assert frame["age"].dtype == np.int64 and frame["income"].dtype == np.int64
    assert frame["age"].between(18, 90).all()
    assert frame["income"].between(0, 250_000).all()
    assert (frame["income"] % 100 == 0).all()
    assert 25_000 <= frame["income"].median() <= 35_000  # plausible: a personal yearly income
    assert 40 <= frame["age"].mean() <= 50


# -- the dependencies ----------------------------------------------------------------------

DESIGNED_PAIRS = [
    ("age", "employment"), ("employment", "income"), ("education", "income"), ("age", "income"),
    ("age", "education"), ("age", "health"), ("education", "employment"), ("smoker", "health"),
    ("income", "health"), ("education", "smoker"), ("sex", "income"), ("region", "smoker"),
]


@pytest.mark.parametrize("pair", DESIGNED_PAIRS, ids="-".join)
def test_designed_pairs_are_far_from_independent(codes, schema, pair):
    assert z_score(table(codes, schema, pair)) > 20


@pytest.mark.parametrize("pair", [("age", "region"), ("sex", "region")], ids="-".join)
def test_region_is_independent_of_age_and_sex(codes, schema, pair):
    assert z_score(table(codes, schema, pair)) < 4


def test_income_follows_education_only_for_the_employed(codes, schema):
    counts = table(codes, schema, ("employment", "education", "income"))
    employed, unemployed, retired, student = counts
    assert z_score(employed) > 50 and z_score(retired) > 20
    assert z_score(unemployed) < 4 and z_score(student) < 4  # their income ignores education


def test_smoking_harms_health_more_with_age(codes, schema):
    counts = table(codes, schema, ("age", "smoker", "health"))
    poor = counts[..., 2] / counts.sum(axis=-1)  # P(poor | age bin, smoker)
    gap = poor[:, 1] - poor[:, 0]
    assert gap[-1] > 2 * gap[1] + 0.1  # 65+ against 25-34


def test_the_sex_gap_in_degrees_turns_with_age(codes, schema):
    counts = table(codes, schema, ("age", "sex", "education"))
    degree = counts[..., 3:].sum(axis=-1) / counts.sum(axis=-1)  # P(bachelor or more | age, sex)
    young = degree[1:3].mean(axis=0)  # 25-44
    assert young[0] - young[1] > 0.03  # women ahead
    assert degree[-1, 0] - degree[-1, 1] < -0.02  # 65+: men ahead


def test_independent_marginals_fit_badly(codes, schema):
    """What a synthesizer can gain: one-way margins alone miss the 2- and 3-way tables widely."""
    for way, floor in ((2, 0.05), (3, 0.10)):
        distances = [tv_to_independence(table(codes, schema, names))
                     for names in itertools.combinations(schema.names, way)]
        assert np.mean(distances) > floor, way
