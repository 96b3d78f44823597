"""docs/cli.md, the CLI reference, is the commands' current --help."""

from __future__ import annotations

from synth_cli.reference import REFERENCE, main, render, sections, stale

from .doc_blocks import blocks


def test_docs_cli_reference_is_current():
    assert stale(REFERENCE.read_text(encoding="utf-8")) == [], \
        "docs/cli.md is stale: run `python -m synth_cli.reference`"


def test_the_reference_is_only_help_text():
    """Its blocks are --help output (`text`): nothing in it for the docs runner to run."""
    found = blocks(REFERENCE.read_text(encoding="utf-8"))
    assert found and {language for language, _ in found} == {"text"}


def test_every_command_has_an_example():
    for name, items in sections(render()).items():
        assert any(item.startswith("synth ") for item in items), f"{name} --help has no example"


def test_check_and_rewrite(tmp_path, capsys):
    path = tmp_path / "cli.md"
    main([str(path)])
    assert path.read_text(encoding="utf-8") == render()
    main(["--check", str(path)])
    path.write_text(render().replace("--epsilon", "--epsilom"), encoding="utf-8")
    try:
        main(["--check", str(path)])
    except SystemExit as stop:
        assert "stale" in str(stop) and "synth generate" in str(stop)
    else:
        raise AssertionError("--check passed a stale reference")
