"""synth demo: the whole pipeline on the bundled table, offline."""

import json
import shutil

import pytest
from click.testing import CliRunner

from synth.report.numbers import fmt
from synth_cli.main import main

# The demo takes several seconds: one seeded run (``seeded_demo``) serves both tests, and the
# group keeps them on one pytest-xdist worker so that it runs once.
pytestmark = pytest.mark.xdist_group("demo")


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def seeded_demo(tmp_path_factory):
    """One ``synth demo --seed 1`` run: its folder (read it, or copy it to change it) and result."""
    folder = tmp_path_factory.mktemp("demo-run") / "demo"
    return folder, run("demo", "-o", folder, "--seed", "1", "-q")


def test_demo_writes_models_tables_and_reports(seeded_demo):
    folder, result = seeded_demo
    assert result.exit_code == 0, result.output
    for name in ("workload.json", "mwem-model.npz", "mwem-synthetic.csv", "pmw-model.npz", "pmw-synthetic.csv",
                 "pmw-monitor.csv"):
        assert (folder / name).stat().st_size > 0, name
    html = (folder / "mwem-report" / "index.html").read_text()
    pngs = sorted(p.name for p in (folder / "mwem-report").glob("*.png"))
    assert pngs and all(f'src="{name}"' in html for name in pngs)
    assert "NON-PRIVATE" in html
    assert (folder / "pmw-report" / "kl_potential.png").exists()  # the monitor's plots
    mwem = json.loads((folder / "mwem-report" / "summary.json").read_text())
    assert mwem["marginals_evaluated"] == mwem["marginals_total"] == 28 + 56
    independent = mwem["baselines"]["independent"]
    assert mwem["mean_marginal_l1"] < 0.5 * independent["mean_marginal_l1"]  # MWEM at eps=1 beats the exact
    # independent model; the report shows the baselines beside the release, and stderr says the same
    assert "<h2>The release against two baselines (NON-PRIVATE)</h2>" in html
    assert f"<td class='num baseline'>{fmt(independent['mean_marginal_l1'])}</td>" in html
    pmw = json.loads((folder / "pmw-report" / "summary.json").read_text())
    assert pmw["baselines"] == mwem["baselines"]  # one data set, one workload
    assert (f"baselines, for comparison: product of the true 1-way marginals: max absolute error "
            f"{fmt(independent['max_absolute_error'])} of n, mean L1 per marginal "
            f"{fmt(independent['mean_marginal_l1'])}; uniform: ") in result.stderr
    assert (f"mwem: spent epsilon=1 (its own run); synthetic table's max absolute error "
            f"{fmt(mwem['max_absolute_error'])} of n, mean L1 per marginal {fmt(mwem['mean_marginal_l1'])}"
            ) in result.stderr
    assert "everything is in" in result.stdout and "mwem-report" in result.stdout


def test_demo_replaces_its_own_folder_and_refuses_others(seeded_demo, tmp_path):
    seeded, result = seeded_demo
    assert result.exit_code == 0, result.output
    folder = tmp_path / "demo"
    shutil.copytree(seeded, folder)  # a previous demo's folder (seed 1), this test's own copy
    first = (folder / "mwem-synthetic.csv").read_bytes()
    again = run("demo", "-o", folder, "--seed", "3", "-q")
    assert again.exit_code == 0, again.output
    assert (folder / "mwem-synthetic.csv").read_bytes() != first
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    refused = run("demo", "-o", other, "-q")
    assert refused.exit_code != 0 and "not a previous demo's folder" in refused.stderr
    assert [p.name for p in other.iterdir()] == ["notes.txt"]


def test_an_unseeded_demo_marks_its_models_unseeded_and_a_seeded_one_seeded(seeded_demo, tmp_path):
    """The seed mark in a model file says whether its noise can be replayed: only --seed sets it."""
    from synth.models.model import Model

    folder, _ = seeded_demo
    assert Model.load(folder / "mwem-model.npz").seeded and Model.load(folder / "pmw-model.npz").seeded
    result = run("demo", "-o", tmp_path / "demo", "-q")
    assert result.exit_code == 0, result.output
    assert not Model.load(tmp_path / "demo" / "mwem-model.npz").seeded
    assert not Model.load(tmp_path / "demo" / "pmw-model.npz").seeded
