"""The README's CLI reference is the commands' current --help."""

from cli.reference import END, README, START, render, updated


def words(text: str) -> list[str]:
    """Whitespace-insensitive form: click versions may wrap lines differently."""
    return text.split()


def test_readme_cli_reference_is_current():
    text = README.read_text(encoding="utf-8")
    assert text.count(START) == 1 and text.count(END) == 1
    assert words(updated(text)) == words(text), "README's CLI reference is stale: run `python -m cli.reference`"


def test_every_command_has_an_example():
    for block in render().split("### ")[1:]:
        name = block.splitlines()[0]
        assert "Example" in block, f"{name} --help has no example"
