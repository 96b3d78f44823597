"""synth demo: the whole pipeline on the bundled table, offline."""

import json

from click.testing import CliRunner

from cli.main import main


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_demo_writes_models_tables_and_reports(tmp_path):
    folder = tmp_path / "demo"
    result = run("demo", "-o", folder, "--seed", "1", "-q")
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
    baseline = float(result.stderr.split("1-way marginals: mean L1 per marginal ")[1].split()[0])
    assert mwem["mean_marginal_l1"] < 0.5 * baseline  # MWEM at eps=1 beats even the exact independent model
    assert "everything is in" in result.stdout and "mwem-report" in result.stdout


def test_demo_replaces_its_own_folder_and_refuses_others(tmp_path):
    folder = tmp_path / "demo"
    assert run("demo", "-o", folder, "--seed", "2", "-q").exit_code == 0
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
