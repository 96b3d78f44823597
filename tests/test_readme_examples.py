"""Every code block of the README runs, in order, as a reader would run them (``doc_blocks``).

The README starts from an empty folder: its first block runs ``synth demo``, and the rest work
on the files the demo leaves in ``synth-demo/``. The docs' blocks are run by
``test_docs_examples``; the CLI reference (docs/cli.md) is checked by ``test_cli_reference``.
"""

from __future__ import annotations

import pytest

from .conftest import REPO
from .doc_blocks import REPLACED, blocks, lines, links, plan_mismatches, run_blocks

README = REPO / "README.md"
DOCS = REPO / "docs"


def test_the_readme_is_short():
    """Read in five minutes: the issue's limit."""
    assert len(README.read_text(encoding="utf-8")) <= 15_000


def test_the_readme_starts_with_the_two_set_up_commands():
    language, body = blocks(README.read_text(encoding="utf-8"))[0]
    assert language == "bash"
    assert [line for line in body.splitlines() if line and not line.startswith("#")] == [
        "python -m pip install -e . && synth demo", 'python -m pip install -e ".[test]" && python -m pytest']


def test_every_replaced_line_is_still_in_a_document():
    """An edit must not leave the runner replacing lines that are gone."""
    documented = lines(README).union(*(lines(doc) for doc in DOCS.glob("*.md")))
    assert set(REPLACED) <= documented


def test_the_readme_links_every_doc_and_every_link_resolves():
    targets = links(README)
    for doc in DOCS.glob("*.md"):
        assert f"docs/{doc.name}" in targets, f"the README's table of contents leaves out docs/{doc.name}"
    for target in targets:
        assert (REPO / target).exists(), f"README links to {target}, which is not there"


def test_every_plan_example_plans_the_run_beside_it():
    """A --plan example takes the options of the run it plans (its L depends on them)."""
    assert plan_mismatches(README) == []


@pytest.mark.slow
def test_every_readme_block_runs(tmp_path):
    run_blocks(README, tmp_path)
