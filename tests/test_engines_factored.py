"""MWEM and PMW on the factored representation: the cap on the model's size is respected and
said, and the engines learn as they do on the dense array."""

import numpy as np
import pytest

from synth.models.distribution import DenseDistribution, choose_representation, make_distribution
from synth.errors import SynthError
from synth.models.factored import FactoredModel, ModelSizeError
from synth.engines.mwem import mwem
from synth.engines.pmw import CAPPED, LAZY, UPDATE, run_pmw
from synth.data.schema import Coded, Schema
from synth.data.tables import marginal
from synth.data.workload import Workload

WIDE = Schema(tuple(Coded(name, 8) for name in "abcd"))  # a pair is 64 cells, a triple 512


def chained_codes(n: int, seed: int) -> np.ndarray:
    """Each column copies the previous one most of the time: every pair is far from uniform."""
    rng = np.random.default_rng(seed)
    codes = np.empty((n, 4), dtype=np.int64)
    codes[:, 0] = rng.integers(0, 8, n)
    for j in range(1, 4):
        codes[:, j] = np.where(rng.random(n) < 0.7, codes[:, j - 1], rng.integers(0, 8, n))
    return codes


def mean_l1(distribution, codes, subsets) -> float:
    return float(np.mean([np.abs(distribution.marginal(s) - marginal(codes, WIDE, s) / len(codes)).sum()
                          for s in subsets]))


def test_auto_is_dense_while_the_universe_fits():
    assert choose_representation(WIDE, "auto", max_cells=4096) == "dense"
    assert choose_representation(WIDE, "auto", max_cells=4095) == "factored"
    assert isinstance(make_distribution(WIDE, "auto", max_cells=100), FactoredModel)
    assert isinstance(make_distribution(WIDE, "dense"), DenseDistribution)
    with pytest.raises(SynthError, match="needs the dense representation"):
        make_distribution(WIDE, "factored", prior=np.ones(WIDE.universe_size))
    with pytest.raises(SynthError, match="must be one of: auto, dense, factored"):
        choose_representation(WIDE, "sparse")


@pytest.mark.parametrize("variant", ["practical", "theory"])
def test_pmw_answers_a_query_past_the_cap_lazily_and_labels_it(variant):
    codes = chained_codes(20_000, 1)
    triples = Workload.marginals(WIDE, 3)
    pairs = Workload.marginals(WIDE, 2)
    workload = Workload(WIDE, list(pairs.queries) + list(triples.queries))
    run = run_pmw(codes, WIDE, workload, 4.0, 1e-6, rows=20_000, rng=2, variant=variant,
                  representation="factored", max_model_cells=300)
    labels = np.array(run.rounds)
    triple = np.array([len(q.columns) == 3 for q in workload])
    assert set(labels[triple]) == {CAPPED}  # no triple fits under 300 cells
    assert run.pmw.capped == (labels == CAPPED).sum() and run.pmw.rounds[LAZY] >= run.pmw.capped
    if variant == "practical":
        assert UPDATE in set(labels[~triple])  # the pairs still teach D
    assert run.pmw.representation == "factored" and run.pmw.model_cells <= 300
    for subset in run.pmw.distribution().subsets:
        assert len(subset) <= 2


def test_pmw_factored_learns_like_dense():
    codes = chained_codes(20_000, 3)
    workload = Workload.marginals(WIDE, 2)
    errors = {}
    for representation in ("dense", "factored"):
        run = run_pmw(codes, WIDE, workload, 2.0, rows=20_000, rng=4, variant="practical",
                      representation=representation)
        final = run.pmw.release() if hasattr(run.pmw, "release") else run.pmw.distribution()
        errors[representation] = mean_l1(make_or_wrap(final), codes, workload.subsets)
    uniform = mean_l1(DenseDistribution(WIDE), codes, workload.subsets)
    assert errors["factored"] < 0.3 * uniform
    assert errors["factored"] == pytest.approx(errors["dense"], rel=0.25, abs=0.01)


def make_or_wrap(distribution):
    from synth.models.distribution import as_distribution

    return as_distribution(distribution, WIDE)


def test_the_monitor_needs_a_dense_distribution():
    codes = chained_codes(1000, 5)
    with pytest.raises(SynthError, match="--representation dense"):
        run_pmw(codes, WIDE, Workload.marginals(WIDE, 2), 1.0, rows=1000, rng=1, monitor=True,
                representation="factored")


PAIRS_AND_TRIPLES = Workload(WIDE, list(Workload.marginals(WIDE, 2).queries) + list(Workload.marginals(WIDE, 3).queries))


def test_mwem_selects_only_candidates_that_fit():
    codes = chained_codes(20_000, 6)
    result = mwem(codes, WIDE, PAIRS_AND_TRIPLES, 2.0, rows=20_000, rng=7, rounds=5, representation="factored",
                  max_model_cells=300)
    measured = [tuple(entry["marginal"]) for entry in result.measurements]
    assert len(measured) == 5 and all(len(s) <= 2 for s in measured)  # a triple is 512 cells
    assert result.parameters["model_cells"] <= 300 and result.parameters["representation"] == "factored"
    assert result.notes == []


def test_mwem_stops_with_a_note_when_fewer_candidates_fit_than_rounds():
    codes = chained_codes(5000, 8)
    result = mwem(codes, WIDE, PAIRS_AND_TRIPLES, 2.0, rows=5000, rng=9, rounds=9, representation="factored",
                  max_model_cells=300)
    # 4 one-way marginals and at most 3 pairs (a tree of pairs over 4 columns) fit under 300 cells
    assert result.parameters["rounds"] <= 7
    assert len(result.notes) == 1 and f"stopped after {result.parameters['rounds']} of 9 rounds" in result.notes[0]
    assert "--max-model-cells" in result.notes[0] and result.accountant.spent().epsilon < 2.0


def test_mwem_when_the_cap_cannot_hold_every_candidate_the_data_choose_by_a_tree():
    """Four chained columns, 10 pairs and triples, a cap of 300 cells (a triple is 512): the
    one-way marginals, then a spanning tree of pairs (the chain a-b-c-d, chosen privately), then
    rounds selecting among the rest, none of which fits beside the chain: the note says so."""
    codes = chained_codes(5000, 8)
    result = mwem(codes, WIDE, PAIRS_AND_TRIPLES, 2.0, rows=5000, rng=9, representation="factored",
                  max_model_cells=300)
    measured = [tuple(entry["marginal"]) for entry in result.measurements]
    assert measured[:4] == [("a",), ("b",), ("c",), ("d",)]
    assert sorted(measured[4:]) == [("a", "b"), ("b", "c"), ("c", "d")]
    assert result.parameters["model_cells"] <= 300 and result.parameters["epsilon_select"] > 0
    assert "the data choose which: 4 one-way marginals, a spanning tree" in result.notes[1]
    assert "stopped after 7 of 11 rounds" in result.notes[2]
    assert result.accountant.spent().epsilon < 2.0


def test_under_the_cap_the_tree_joins_every_column_whatever_the_workload_order():
    """Two wide columns and two narrow ones, the wide pair first in the workload: taken in order
    it fills the cap and only the narrow pair fits beside it. The tree start measures every
    one-way marginal and a spanning tree of pairs (three, joining all four columns) within the cap."""
    schema = Schema((Coded("a", 60), Coded("b", 60), Coded("c", 4), Coded("d", 4)))
    workload = Workload.marginals(schema, 2)
    assert workload.subsets[0] == ("a", "b")
    rng = np.random.default_rng(3)
    codes = np.column_stack([rng.integers(0, 60, 4000), rng.integers(0, 60, 4000), rng.integers(0, 4, 4000),
                             rng.integers(0, 4, 4000)])
    result = mwem(codes, schema, workload, 1.0, rows=4000, rng=1, representation="factored", max_model_cells=3700)
    measured = [tuple(entry["marginal"]) for entry in result.measurements]
    assert measured[:4] == [("a",), ("b",), ("c",), ("d",)]
    edges = measured[4:7]
    assert all(len(e) == 2 for e in edges) and {c for e in edges for c in e} == {"a", "b", "c", "d"}
    assert result.parameters["model_cells"] <= 3700


def test_mwem_refuses_a_workload_of_which_nothing_fits():
    """Classic rounds measure workload marginals only, so none fitting is a refusal; adaptive
    rounds measure the marginals below them that fit, and say what the model cannot hold."""
    with pytest.raises(ModelSizeError, match="no marginal of the workload fits a factored model of at most 300"):
        mwem(chained_codes(1000, 1), WIDE, Workload.marginals(WIDE, 3), 1.0, rows=1000, rng=1,
             representation="factored", max_model_cells=300, selection="classic")
    workload = Workload.marginals(WIDE, 3)
    adaptive = mwem(chained_codes(1000, 1), WIDE, workload, 1.0, rows=1000, rng=1, representation="factored",
                    max_model_cells=300, selection="adaptive")
    assert adaptive.distribution.cells <= 300
    assert any(f"of the workload's {len(workload.subsets)} marginals would grow the model past its cap of 300" in note
               for note in adaptive.notes)


def test_mwem_factored_matches_dense_error():
    codes = chained_codes(30_000, 10)
    workload = Workload.marginals(WIDE, 2)
    errors = {}
    for representation in ("dense", "factored"):
        result = mwem(codes, WIDE, workload, 1.0, rows=30_000, rng=11, representation=representation)
        errors[representation] = mean_l1(make_or_wrap(result.distribution), codes, workload.subsets)
    assert errors["factored"] == pytest.approx(errors["dense"], rel=0.1)
