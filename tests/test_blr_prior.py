"""Tests of BLR over a released model's net (``synth.engines.blr_prior``) and its CLI (``--prior``).

* Accounting: the count, the engine's charges and the selection share one accountant; the
  total never passes epsilon (exactly, in rationals), whatever the prior, share or n; an engine
  that spends past the budget is refused.
* The candidates depend on the data only through the release: a spy on
  ``_QueryCounts.counts`` sees exactly ``draw_candidates(release, m, K, generator)`` with the
  generator split off before the data is read; two datasets with the same release get the
  same candidates, and a candidate draw that peeks at the data is caught.
* Seeded runs repeat; unseeded runs differ.
* ``draw_candidates``: controlled rounding (every cell within one row of m p), zero cells
  never drawn, batches equal one draw.
* A prior model over other columns is refused in one line; a matching one costs nothing.
* The release beats the uniform net on a small correlated table, and the uniform net warns
  where it cannot beat uniform rows.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import synth.engines.blr
import synth.engines.blr_prior
from synth_cli.main import main
from synth.privacy.accounting import Accountant, BudgetExceeded
from synth.engines.blr import _QueryCounts, blr, draw_candidates, uniform_net_outlook
from synth.engines.blr_prior import (
    DEFAULT_PRIOR_SHARE,
    PriorMismatch,
    blr_prior,
    check_prior_model,
    prior_candidates,
    prior_net_size,
)
from synth.models.model import Model
from synth.engines.mwem import mwem
from synth.data.schema import Coded, Schema
from synth.data.tables import marginal, marginal_from_dense
from synth.data.workload import Workload

SCHEMA = Schema((Coded("a", 2), Coded("b", 3), Coded("c", 4)))
WORKLOAD = Workload.marginals(SCHEMA, 2)


def correlated(n: int, seed: int) -> np.ndarray:
    """b and c follow a: far from uniform (as ``tests.test_pmw.correlated_codes``)."""
    rng = np.random.default_rng([20261121, 91, seed])
    a = rng.integers(0, 2, n)
    b = np.where(rng.random(n) < 0.8, a, rng.integers(0, 3, n))
    c = np.where(rng.random(n) < 0.7, 2 * a + b % 2, rng.integers(0, 4, n))
    return np.stack([a, b, c], axis=1).astype(np.int64)


def mean_l1(distribution: np.ndarray, codes: np.ndarray, schema: Schema, workload: Workload) -> float:
    n = codes.shape[0]
    return float(np.mean([np.abs(marginal_from_dense(distribution, schema, s) - marginal(codes, schema, s) / n).sum()
                          for s in workload.subsets]))


class CandidateSpy:
    """Every batch of candidates ``_QueryCounts.counts`` scores (the net's only use of it)."""

    def __init__(self, monkeypatch):
        self.batches: list[np.ndarray] = []
        real = _QueryCounts.counts

        def spy(counter, cells):
            self.batches.append(np.array(cells, copy=True))
            return real(counter, cells)

        monkeypatch.setattr(_QueryCounts, "counts", spy)

    def take(self) -> np.ndarray:
        out = np.concatenate(self.batches)
        self.batches = []
        return out


def released_model(codes=None, epsilon: float = 1.0, seed: int = 5) -> Model:
    codes = correlated(400, 9) if codes is None else codes
    return mwem(codes, SCHEMA, WORKLOAD, epsilon, rows=codes.shape[0], rng=seed).to_model(SCHEMA)


# =============================================================================================
# Accounting
# =============================================================================================


@pytest.mark.parametrize("prior", ["mwem", "pmw", "model"])
@pytest.mark.parametrize("epsilon, share, rows", [(1.0, None, 300), (0.3, 0.6, None), (2.9, 0.95, None),
                                                  (1.0, 0.75, 300)])
def test_accounting_never_overspends(prior, epsilon, share, rows):
    """One ledger: the noisy count (when n is not public), every engine charge (noted as the
    prior's), then the selection; the exact rational sum is at most epsilon."""
    codes = correlated(300, 1)
    kwargs = {"prior": released_model(), "prior_source": "m.npz"} if prior == "model" else {
        "prior": prior, "prior_share": share}
    result = blr_prior(codes, SCHEMA, WORKLOAD, epsilon, rows=rows, candidates=40, rng=3, **kwargs)
    ledger = result.accountant.ledger()
    assert sum((Fraction(c.epsilon) for c in ledger), Fraction(0)) <= Fraction(epsilon)
    assert result.accountant.spent().epsilon <= epsilon
    assert result.accountant.spent().epsilon == pytest.approx(epsilon, rel=1e-9)  # all of it is used
    notes = [c.note for c in ledger]
    assert (notes[0] == "noisy row count") == (rows is None) and result.rows_public == (rows is not None)
    assert ledger[-1].note.startswith("BLR sampled net") and ledger[-1].epsilon == result.parameters["epsilon_select"]
    record = result.parameters["prior"]
    engine = [c for c in ledger if c.note.startswith("prior ")]
    if prior == "model":
        assert engine == [] and record["epsilon"] == 0.0 and record["file"] == "m.npz"
        assert record["mechanism"] == "mwem" and record["privacy_spent"]["epsilon"] == pytest.approx(1.0)
    else:
        assert engine and all(c.note.startswith(f"prior {prior}: ") for c in engine)
        spent = sum(c.epsilon for c in engine)
        count = ledger[0].epsilon if rows is None else 0.0
        assert spent == pytest.approx(record["epsilon"])
        assert spent <= (share or DEFAULT_PRIOR_SHARE) * (epsilon - count) * (1 + 1e-12)
        assert record["share"] == (share or DEFAULT_PRIOR_SHARE) and record["source"] == prior


def test_an_engine_that_overspends_is_refused(monkeypatch):
    """The engine's charges go through the run's accountant: an engine that spent more than
    the whole budget stops the run before anything is released."""
    real = synth.engines.blr_prior._run_engine

    def greedy(engine, codes, schema, workload, epsilon, *rest):
        distribution, _, parameters, log = real(engine, codes, schema, workload, epsilon, *rest)
        accountant = Accountant(10.0)
        accountant.spend(1.5, mechanism="discrete_laplace", note="too much")
        return distribution, accountant, parameters, log

    monkeypatch.setattr(synth.engines.blr_prior, "_run_engine", greedy)
    with pytest.raises(BudgetExceeded, match="prior mwem: too much"):
        blr_prior(correlated(200, 2), SCHEMA, WORKLOAD, 1.0, rows=200, candidates=10, rng=0)


@pytest.mark.parametrize("kwargs, error, message", [
    ({"prior": "aim"}, ValueError, r"prior \('aim'\) must be one of: mwem, pmw"),
    ({"prior": 3}, TypeError, "prior \\(int\\) must be"),
    ({"prior_share": 1.0}, ValueError, r"prior_share \(1\) must be in \(0, 1\)"),
    ({"prior_share": 0.0}, ValueError, "prior_share"),
    ({"candidates": 0}, ValueError, "candidates"),
    ({"net_size": 0}, ValueError, "net_size"),
    ({"beta": 2.0}, ValueError, "beta"),
])
def test_bad_parameters(kwargs, error, message):
    with pytest.raises(error, match=message):
        blr_prior(correlated(50, 3), SCHEMA, WORKLOAD, 1.0, rows=50, **{"rng": 0, **kwargs})


def test_a_model_prior_takes_no_share():
    with pytest.raises(ValueError, match="prior_share applies to a prior engine"):
        blr_prior(correlated(50, 3), SCHEMA, WORKLOAD, 1.0, prior=released_model(), prior_share=0.5, rows=50)


# =============================================================================================
# The candidates depend on the data only through the release
# =============================================================================================


def candidate_generator(seed: int) -> np.random.Generator:
    """The generator ``blr_prior`` draws candidates with: the first split of the run's."""
    return np.random.default_rng(np.random.default_rng(seed).integers(0, 2**63 - 1, size=4))


def test_candidates_are_the_release_drawn_by_a_public_generator(monkeypatch):
    """The candidates scored are exactly ``draw_candidates(release, m, K, generator)``, the
    generator being split off the seed before the data is read: nothing else goes in."""
    releases = []
    real = synth.engines.blr_prior._run_engine

    def recording(*args):
        out = real(*args)
        releases.append(out[0].copy())
        return out

    monkeypatch.setattr(synth.engines.blr_prior, "_run_engine", recording)
    spy = CandidateSpy(monkeypatch)
    result = blr_prior(correlated(300, 4), SCHEMA, WORKLOAD, 1.0, rows=300, candidates=500, net_size=40, rng=12)
    seen = spy.take()
    expected = draw_candidates(releases[0], 40, 500, candidate_generator(12))
    np.testing.assert_array_equal(seen, expected)
    assert (np.sort(seen, axis=1) == result.cells).all(axis=1).any(), "the release is not a candidate"


def fixed_release(monkeypatch, distribution: np.ndarray) -> None:
    """The engine runs (and spends) as usual but releases ``distribution``."""
    real = synth.engines.blr_prior._run_engine

    def fixed(*args):
        _, accountant, parameters, log = real(*args)
        return distribution, accountant, parameters, log

    monkeypatch.setattr(synth.engines.blr_prior, "_run_engine", fixed)


@pytest.mark.parametrize("prior", ["mwem", "model"])
def test_same_release_same_candidates_whatever_the_data(monkeypatch, prior):
    """Two very different datasets of the same public n: the same release (an engine's, held
    fixed, or a model file's) gives exactly the same candidates (several batches)."""
    release = released_model()
    if prior == "mwem":
        fixed_release(monkeypatch, release.distribution)
        kwargs = {"prior": "mwem"}
    else:
        kwargs = {"prior": release}
    spy = CandidateSpy(monkeypatch)
    seen = []
    for codes in (correlated(300, 5), np.tile([[1, 2, 3]], (300, 1))):
        blr_prior(codes, SCHEMA, WORKLOAD, 1.0, rows=300, candidates=3_000, net_size=600, rng=8, **kwargs)
        seen.append(spy.take())
    assert seen[0].shape == (3_000, 600) and len(spy.batches) == 0
    np.testing.assert_array_equal(seen[0], seen[1])


def test_the_spy_sees_a_candidate_draw_that_peeks(monkeypatch):
    """The same check has teeth: a draw that mixes the data's histogram into the release gives
    the two datasets different candidates."""
    release = released_model()
    real = synth.engines.blr._sample_net
    spy = CandidateSpy(monkeypatch)
    seen = []
    for codes in (correlated(300, 5), np.tile([[1, 2, 3]], (300, 1))):
        histogram = marginal(codes, SCHEMA, None).reshape(-1).astype(float)

        def peeking(query_counts, true_counts, n_rows, m, k, epsilon, prior, *rest, histogram=histogram, **kw):
            return real(query_counts, true_counts, n_rows, m, k, epsilon, prior + histogram / 300, *rest, **kw)

        monkeypatch.setattr(synth.engines.blr, "_sample_net", peeking)
        blr_prior(codes, SCHEMA, WORKLOAD, 1.0, prior=release, rows=300, candidates=200, net_size=50, rng=8)
        seen.append(spy.take())
    assert not np.array_equal(seen[0], seen[1])


def test_seeded_runs_repeat_and_unseeded_differ(monkeypatch):
    codes = correlated(300, 6)
    spy = CandidateSpy(monkeypatch)
    runs = []
    for seed in (21, 21, None, None):
        result = blr_prior(codes, SCHEMA, WORKLOAD, 1.0, rows=300, candidates=200, net_size=300, rng=seed)
        runs.append((result.cells, spy.take(), [c.note for c in result.accountant.ledger()]))
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    np.testing.assert_array_equal(runs[0][1], runs[1][1])
    assert runs[0][2] == runs[1][2]
    assert not np.array_equal(runs[2][1], runs[3][1]) and not np.array_equal(runs[0][1], runs[2][1])


# =============================================================================================
# draw_candidates and the defaults
# =============================================================================================


@pytest.mark.parametrize("m", [1, 7, 64, 1000])
def test_systematic_draw_is_a_controlled_rounding(m):
    """Every cell holds floor or ceil of m p; cells of probability 0 never appear; the rows of
    each candidate are sorted; drawing in two batches equals drawing at once."""
    rng = np.random.default_rng([20261121, 92, m])
    p = rng.random(50) ** 3
    p[[0, 17, 18, 49]] = 0.0
    cells = draw_candidates(p, m, 300, np.random.default_rng(1))
    assert cells.shape == (300, m) and (np.diff(cells, axis=1) >= 0).all()
    assert not np.isin(cells, [0, 17, 18, 49]).any()
    counts = np.stack([np.bincount(c, minlength=50) for c in cells])
    expected = m * p / p.sum()
    assert (counts >= np.floor(expected - 1e-9)).all() and (counts <= np.ceil(expected + 1e-9)).all()
    np.testing.assert_allclose(counts.mean(axis=0), expected, atol=max(0.2, 5 * np.sqrt(expected.max() / 300)))
    generator = np.random.default_rng(1)
    halves = np.concatenate([draw_candidates(p, m, 120, generator), draw_candidates(p, m, 180, generator)])
    np.testing.assert_array_equal(halves, cells)


def test_iid_draw_and_bad_method():
    p = np.array([0.0, 1.0, 3.0])
    cells = draw_candidates(p, 4000, 2, np.random.default_rng(2), method="iid")
    assert not (cells == 0).any() and abs((cells == 2).mean() - 0.75) < 0.03
    with pytest.raises(ValueError, match="method \\('round'\\) must be one of: iid, systematic"):
        draw_candidates(p, 3, 2, np.random.default_rng(2), method="round")


def test_defaults_come_from_public_quantities():
    assert prior_net_size(48_842) == 48_842 and prior_net_size(10**7) == 1 << 17
    assert prior_candidates(48_842, 35) == (1 << 29) // (48_842 * 35)
    assert prior_candidates(10, 3) == 1_000 and prior_candidates(1 << 17, 500) == 100
    result = blr_prior(correlated(300, 7), SCHEMA, WORKLOAD, 1.0, rows=300, rng=0)
    assert result.parameters["net_size"] == 300 and result.parameters["candidates"] == 1_000
    assert result.parameters["draw"] == "systematic" and "sampling_alpha" not in result.parameters


# =============================================================================================
# The prior model
# =============================================================================================


def test_a_prior_model_over_other_columns_is_refused():
    model = released_model()
    other = Schema((Coded("a", 2), Coded("b", 3), Coded("d", 4)))
    with pytest.raises(PriorMismatch, match=r"m\.npz: its columns a \(2\), b \(3\), c \(4\) do not match this "
                                            r"run's a \(2\), b \(3\), d \(4\)"):
        check_prior_model(model, other, "m.npz")
    resized = Schema((Coded("a", 2), Coded("b", 3), Coded("c", 5)))
    with pytest.raises(PriorMismatch, match="do not match"):
        blr_prior(np.zeros((5, 3), dtype=np.int64), resized, Workload.marginals(resized, 1), 1.0, prior=model)
    check_prior_model(model, SCHEMA)  # the same schema passes


def test_model_round_trip_records_the_prior(tmp_path):
    codes = correlated(300, 8)
    result = blr_prior(codes, SCHEMA, WORKLOAD, 1.0, rows=300, candidates=50, rng=4)
    result.to_model(seeded=True).save(tmp_path / "blr.npz")
    model = Model.load(tmp_path / "blr.npz")
    assert model.mechanism == "blr" and model.parameters == result.parameters
    assert model.parameters["prior"]["source"] == "mwem"
    assert model.round_log[0]["prior"] == "mwem" and model.round_log[0]["round_log"]  # MWEM's measurements
    assert model.round_log[-1] == {"net": "sampled", "chosen_cells": result.cells.tolist()}
    np.testing.assert_array_equal(model.distribution, result.distribution)


def test_a_large_chosen_database_is_not_listed_in_the_round_log(monkeypatch):
    monkeypatch.setattr(synth.engines.blr, "_LOGGED_CELLS", 100)
    result = blr_prior(correlated(300, 8), SCHEMA, WORKLOAD, 1.0, rows=300, candidates=20, rng=4)
    entry = result.to_model().round_log[-1]
    assert "chosen_cells" not in entry and "m = 300" in entry["chosen_database"]


# =============================================================================================
# Utility and the uniform net's warning
# =============================================================================================


def test_release_beats_the_uniform_net_on_a_correlated_table():
    """2-way marginals of a correlated 24-cell table, epsilon = 1, n = 2,000 public: the
    released-model net is far closer to the data than the uniform net and uniform rows."""
    codes = correlated(2_000, 10)
    errors = {"prior": [], "uniform net": []}
    for seed in range(3):
        errors["prior"].append(mean_l1(blr_prior(codes, SCHEMA, WORKLOAD, 1.0, rows=2_000, rng=seed).distribution,
                                       codes, SCHEMA, WORKLOAD))
        uniform = blr(codes, SCHEMA, WORKLOAD, 1.0, net="sampled", rows=2_000, rng=seed)
        errors["uniform net"].append(mean_l1(uniform.distribution, codes, SCHEMA, WORKLOAD))
    uniform_rows = mean_l1(np.full(SCHEMA.universe_size, 1 / SCHEMA.universe_size), codes, SCHEMA, WORKLOAD)
    assert max(errors["prior"]) < 0.25 * min(errors["uniform net"])
    assert max(errors["prior"]) < 0.25 * uniform_rows


def test_uniform_net_outlook_and_warning():
    """Noise against gain: small tables pass, wide ones warn (independently of m)."""
    assert uniform_net_outlook([6, 8, 12], 600, 10_000)[0] < uniform_net_outlook([6, 8, 12], 600, 10_000)[1]
    for m in (50, 600, 5_000):
        noise, gain = uniform_net_outlook([1_000], m, 10_000)
        assert noise > gain
    noise, gain = uniform_net_outlook([1_000], 10, 10_000)
    assert noise == 2.0  # 10 rows on 1,000 cells
    small = blr(correlated(100, 1), SCHEMA, WORKLOAD, 1.0, net="sampled", candidates=100, rows=100, rng=0)
    assert not any("uniform net" in w for w in small.warnings)
    wide = Schema((Coded("a", 12), Coded("b", 10), Coded("c", 9)))
    codes = np.zeros((100, 3), dtype=np.int64)
    result = blr(codes, wide, Workload.marginals(wide, 2), 1.0, net="sampled", candidates=100, rows=100, rng=0)
    assert any(w.startswith("a uniform net can hardly beat uniform rows") and "--prior mwem" in w
               for w in result.warnings)
    assert result.parameters["uniform_net_noise"] > result.parameters["uniform_net_gain"]


# =============================================================================================
# CLI
# =============================================================================================


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture
def files(tmp_path):
    SCHEMA.save(tmp_path / "s.json")
    pd.DataFrame(correlated(3_000, 11), columns=["a", "b", "c"]).to_csv(tmp_path / "d.csv", index=False)
    WORKLOAD.save(tmp_path / "w.json")
    return tmp_path


def generate(files, *extra):
    return run("generate", files / "d.csv", "--schema", files / "s.json", "--workload", files / "w.json",
               "--mechanism", "blr", "--epsilon", "1", *extra)


def test_cli_prior_mwem_prints_the_bound_and_records_the_prior(files):
    result = generate(files, "--prior", "mwem", "--rows", "3000", "--seed", "1", "-o", files / "o.csv",
                      "--model", files / "m.npz")
    assert result.exit_code == 0, result.output
    assert "drawn from mwem's release (mwem spent epsilon=0.8" in result.stderr
    assert "error bound, sampled net: max query error <= (best candidate's error) + " in result.stderr
    assert "privacy spent epsilon=1," in result.stderr and "uniform net" not in result.stderr
    model = Model.load(files / "m.npz")
    assert model.parameters["prior"]["source"] == "mwem" and model.parameters["net_size"] == 3000
    assert any(c["note"].startswith("prior mwem: ") for c in model.privacy["charges"])
    assert len(pd.read_csv(files / "o.csv")) == 3000


def test_cli_net_sampled_defaults_to_the_mwem_prior_and_uniform_is_kept(files):
    result = generate(files, "--net", "sampled", "--candidates", "30", "--rows", "3000", "-o", files / "o.csv",
                      "--model", files / "m.npz")
    assert result.exit_code == 0, result.output
    assert Model.load(files / "m.npz").parameters["prior"]["source"] == "mwem"
    result = generate(files, "--prior", "uniform", "--candidates", "30", "--rows", "3000", "-o", files / "u.csv",
                      "--model", files / "u.npz", "--force")
    assert result.exit_code == 0, result.output
    assert "uniform net of 30 databases" in result.stderr
    assert "prior" not in Model.load(files / "u.npz").parameters


def test_cli_prior_model_spends_everything_on_the_selection(files):
    assert generate(files, "--mechanism", "pmw", "--rows", "3000", "-o", files / "p.csv", "--model", files / "p.npz",
                    "--seed", "2").exit_code == 0
    result = generate(files, "--prior-model", files / "p.npz", "--rows", "3000", "--candidates", "50",
                      "-o", files / "o.csv", "--model", files / "m.npz")
    assert result.exit_code == 0, result.output
    assert "drawn from the released model" in result.stderr and "yours to account for" in result.stderr
    assert "came from a seeded run" in result.stderr
    model = Model.load(files / "m.npz")
    ledger = model.privacy["charges"]
    assert len(ledger) == 1 and ledger[0]["epsilon"] == 1.0
    assert model.parameters["prior"]["mechanism"] == "pmw" and model.parameters["prior"]["epsilon"] == 0.0


def test_cli_prior_model_over_other_columns_is_refused_in_one_line(files):
    Workload.marginals(Schema((Coded("a", 2), Coded("b", 3))), 1).save(files / "w2.json")
    assert run("generate", files / "d.csv", "--schema", files / "s.json", "--columns", "a,b", "--workload",
               files / "w2.json", "--epsilon", "1", "-o", files / "x.csv", "--model", files / "ab.npz").exit_code == 0
    result = generate(files, "--prior-model", files / "ab.npz", "--rows", "3000", "-o", files / "o.csv")
    assert result.exit_code != 0 and "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "its columns a (2), b (3) do not match this run's a (2), b (3), c (4)" in lines[0]
    assert not (files / "o.csv").exists()


def test_cli_uniform_net_warns_on_a_wide_universe(tmp_path):
    wide = Schema((Coded("a", 12), Coded("b", 10), Coded("c", 9)))
    wide.save(tmp_path / "s.json")
    rng = np.random.default_rng(3)
    pd.DataFrame(rng.integers(0, 9, (500, 3)), columns=["a", "b", "c"]).to_csv(tmp_path / "d.csv", index=False)
    Workload.marginals(wide, 2).save(tmp_path / "w.json")
    result = run("generate", tmp_path / "d.csv", "--schema", tmp_path / "s.json", "--workload", tmp_path / "w.json",
                 "--mechanism", "blr", "--prior", "uniform", "--candidates", "50", "--epsilon", "1", "--rows", "500",
                 "-o", tmp_path / "o.csv")
    assert result.exit_code == 0, result.output
    assert "WARNING: a uniform net can hardly beat uniform rows" in result.stderr


@pytest.mark.parametrize("extra, message", [
    (["--prior", "mwem", "--net", "exact"], "--prior applies to --net sampled"),
    (["--prior", "mwem", "--prior-model", "s.json"], "give --prior or --prior-model, not both"),
    (["--prior", "uniform", "--prior-share", "0.5"], "--prior-share applies to --prior mwem or pmw"),
    (["--prior-model", "s.json", "--prior-share", "0.5"], "--prior-share applies to --prior mwem or pmw"),
    (["--prior", "mwem", "--alpha", "0.1"], "--alpha applies to --net exact or --prior uniform"),
    (["--prior", "pmw", "--max-net", "10"], "--max-net applies to --net exact"),
    (["--mechanism", "mwem", "--prior", "mwem"], "--prior do(es) not apply to --mechanism mwem"),
    (["--mechanism", "pmw", "--prior-share", "0.5"], "--prior-share do(es) not apply to --mechanism pmw"),
])
def test_cli_prior_options_are_refused_before_any_work(files, extra, message):
    extra = [str(files / e) if e == "s.json" else e for e in extra]
    result = generate(files, *extra, "-o", files / "o.csv")
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert message in result.stderr
    assert not (files / "o.csv").exists()


def test_cli_help_describes_the_prior():
    result = run("generate", "--help")
    assert "--prior [mwem|pmw|uniform]" in result.output and "--prior-model" in result.output
    assert "--prior mwem" in result.output  # an example
