"""Every engine has one shape: a frozen config of public options checked when made, an engine
over the public schema and workload whose ``plan`` reads no data, and ``run(counts, budget,
rng, progress)`` that returns a ``Release``."""

import dataclasses

import numpy as np
import pytest

from synth.data.counts import Counts
from synth.data.reading import scan
from synth.data.schema import Categorical, Schema
from synth.data.workload import Workload
from synth.engines.blr_engine import BLRConfig, BLREngine
from synth.engines.mwem import MWEMConfig, MWEMEngine, mwem
from synth.engines.pmw import PMWConfig, PMWEngine
from synth.engines.registry import make_config, make_engine, options_of
from synth.engines.release import Release
from synth.errors import SynthError
from synth.models.model import Model
from synth.privacy.accounting import Budget

SCHEMA = Schema([Categorical("a", ["x", "y"]), Categorical("b", ["p", "q", "r"]), Categorical("c", ["u", "v"])])


def frame(rows: int, seed: int):
    import pandas as pd

    rng = np.random.default_rng(seed)
    a = rng.integers(0, 2, rows)
    b = (a + rng.integers(0, 2, rows)) % 3
    return pd.DataFrame({"a": np.array(["x", "y"])[a], "b": np.array(["p", "q", "r"])[b],
                         "c": np.array(["u", "v"])[rng.integers(0, 2, rows)]})


@pytest.fixture(scope="module")
def counts() -> Counts:
    return scan(frame(3000, 0), SCHEMA, Workload.marginals(SCHEMA, 2).subsets)


@pytest.mark.parametrize("mechanism, options", [("mwem", {"rounds": 2, "selection": "classic"}),
                                                ("pmw", {"updates": 3}),
                                                ("blr", {"net": "sampled", "net_size": 50, "candidates": 200})])
def test_every_engine_runs_in_one_shape(mechanism, options, counts):
    workload = Workload.marginals(SCHEMA, 2)
    config = make_config(mechanism, rows=3000, **options)
    engine = make_engine(config, SCHEMA, workload)
    budget = Budget(1.0)
    engine.plan(budget)  # public: no data
    steps = []
    release = engine.run(counts, budget, 0, lambda step, done: steps.append(done))
    assert isinstance(release, Release) and isinstance(release.model, Model)
    assert release.model.mechanism == mechanism and release.model.rows == 3000
    assert 0 < release.accountant.spent().epsilon <= 1.0
    assert release.summary and all(isinstance(line, str) for line in release.summary)
    assert steps and steps[-1] == pytest.approx(1.0)
    again = make_engine(config, SCHEMA, workload).run(counts, budget, 0)
    assert np.array_equal(np.asarray(again.model.distribution), np.asarray(release.model.distribution))


def test_configs_are_frozen_and_checked_when_made():
    config = MWEMConfig(rounds=3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.rounds = 4
    with pytest.raises(ValueError, match=r"selection \('greedy'\) must be one of"):
        MWEMConfig(selection="greedy")
    with pytest.raises(ValueError, match="apply to selection='classic'"):
        MWEMConfig(selection="adaptive", rounds=3)
    with pytest.raises(ValueError, match="apply to the practical variant only"):
        PMWConfig(variant="theory", warm=False)
    with pytest.raises(SynthError, match="at most 100 for the practical variant"):
        PMWConfig(passes=101)
    with pytest.raises(ValueError, match="prior applies to net='sampled'"):
        BLRConfig(net="exact", prior="mwem")
    with pytest.raises(TypeError, match="'roundz' is not an option of mwem; its options are: selection, rounds"):
        make_config("mwem", roundz=3)
    assert "rounds" in options_of("mwem") and "net" in options_of("blr") and "variant" in options_of("pmw")


def test_plan_refuses_before_reading_any_data():
    """The public checks that need the budget (a Gaussian without delta, a prior's share too
    small, delta for BLR) fail in plan, which gets no data at all."""
    workload = Workload.marginals(SCHEMA, 2)
    with pytest.raises(ValueError, match="needs delta > 0"):
        MWEMEngine(MWEMConfig(noise="gaussian"), SCHEMA, workload).plan(Budget(1.0))
    with pytest.raises(SynthError, match="prior share"):
        BLREngine(BLRConfig(prior="mwem", prior_share=1e-9), SCHEMA, workload).plan(Budget(1.0))
    with pytest.raises(ValueError, match="pure epsilon-DP"):
        BLREngine(BLRConfig(), SCHEMA, workload).plan(Budget(1.0, 1e-6))
    assert MWEMEngine(MWEMConfig(), SCHEMA, workload).plan(Budget(1.0, 1e-9)).reason


def test_the_convenience_function_is_the_engine(counts):
    """``mwem(...)`` is the engine's record of the same run, option for option."""
    workload = Workload.marginals(SCHEMA, 2)
    direct = mwem(counts, SCHEMA, workload, 1.0, rng=5, rows=3000, rounds=2, selection="classic")
    engine = MWEMEngine(MWEMConfig(rows=3000, rounds=2, selection="classic"), SCHEMA, workload)
    released = engine.run(counts, Budget(1.0), 5)
    assert np.array_equal(direct.distribution, released.record.distribution)
    assert direct.parameters == released.record.parameters


def test_the_stream_opens_from_the_same_config(counts):
    opened = PMWEngine(PMWConfig(rows=3000, updates=2), SCHEMA).open(counts, Budget(1.0), 1)
    answer = opened.pmw.answer({"where": {"a": "x"}})
    assert answer.round in ("lazy", "update") and opened.plan.updates == 2
