"""Shared fixtures: paths to the benchmark datasets beside the project, small schemas."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from synth.data.schema import Categorical, Coded, Numeric, Schema

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "datasets"
ADULT_CSV = SHARED_DATA / "adult.csv"
ADULT_DOMAIN = SHARED_DATA / "adult-domain.json"


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261121)


@pytest.fixture
def adult_paths() -> tuple[Path, Path]:
    if not ADULT_CSV.exists():
        pytest.skip(f"shared dataset missing: {ADULT_CSV}")
    return ADULT_CSV, ADULT_DOMAIN


@pytest.fixture
def mixed_schema() -> Schema:
    """One column of each kind: categorical labels, numeric bins, integer codes."""
    return Schema(
        (
            Categorical("sex", ("female", "male")),
            Numeric("age", (0, 18, 30, 50, 100)),
            Coded("race", 3),
        )
    )
