"""Every code block of docs/*.md runs, in order, as a reader would run them (``doc_blocks``).

Each document runs in its own scratch folder, set up as its first lines say: beside a copy of
the folder ``synth demo`` leaves (``synth-demo/``, made once per session), and CONTRIBUTING.md
in the checkout itself (its commands are a contributor's: the tests, the reference check).
docs/cli.md holds only help text, checked by ``test_cli_reference``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO
from .doc_blocks import LANGUAGES, blocks, links, plan_mismatches, run_blocks

DOCS = REPO / "docs"
#: Documents whose blocks run (docs/cli.md is the generated reference: help text only).
RUN = sorted(path.name for path in DOCS.glob("*.md") if path.name != "cli.md")
#: Documents that run in the checkout rather than beside a demo folder.
IN_CHECKOUT = {"CONTRIBUTING.md"}

pytestmark = pytest.mark.xdist_group("docs")  # one worker runs the demo once for all of them


@pytest.fixture(scope="session")
def demo_folder(tmp_path_factory) -> Path:
    """What ``synth demo`` leaves, made once: each document gets a copy of it."""
    folder = tmp_path_factory.mktemp("demo") / "synth-demo"
    done = subprocess.run([sys.executable, "-m", "synth", "demo", "-o", str(folder), "--quiet"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return folder


def test_the_docs_are_there():
    assert {"cli.md", "engines.md", "privacy.md", "formats.md", "scaling.md", "CONTRIBUTING.md"} <= {
        path.name for path in DOCS.glob("*.md")}


@pytest.mark.parametrize("name", RUN)
def test_every_block_has_a_language_and_every_link_resolves(name):
    document = DOCS / name
    for language, body in blocks(document.read_text(encoding="utf-8")):
        assert language in LANGUAGES, f"{name}: a block fenced {language!r} ({body[:60]!r})"
    for target in links(document):
        assert (document.parent / target).exists(), f"{name} links to {target}, which is not there"


@pytest.mark.parametrize("name", RUN)
def test_every_plan_example_plans_the_run_beside_it(name):
    assert plan_mismatches(DOCS / name) == []


@pytest.mark.slow
@pytest.mark.parametrize("name", RUN)
def test_every_doc_block_runs(name, tmp_path, demo_folder):
    if name in IN_CHECKOUT:
        run_blocks(DOCS / name, REPO, scratch=tmp_path)
        return
    shutil.copytree(demo_folder, tmp_path / "synth-demo")
    run_blocks(DOCS / name, tmp_path)


def test_the_privacy_building_blocks_example_never_fails(capsys):
    """Noise makes that block's outcome random: it must run whatever the draws (it once called
    AboveThreshold after it had halted, about one run in 200)."""
    [example] = [body for language, body in blocks((DOCS / "privacy.md").read_text(encoding="utf-8"))
                 if language == "python" and "AboveThreshold(" in body]
    code = compile(example, "docs/privacy.md building blocks", "exec")
    for _ in range(1500):
        exec(code, {})
    assert "above threshold:" in capsys.readouterr().out
