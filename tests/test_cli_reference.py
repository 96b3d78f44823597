"""The README's CLI reference is the commands' current --help."""

import re

from cli.reference import END, README, START, render


def sections(text: str) -> dict[str, set[str]]:
    """Each command's options and example lines: what must not go stale. Formatting (which click
    versions may change: wrapping, default markers) is left out of the comparison."""
    out = {}
    for block in text.split("### `")[1:]:
        name, body = block.split("`", 1)
        examples = {line.strip() for line in body.splitlines() if line.strip().startswith("synth ")}
        out[name] = set(re.findall(r"--[a-z][a-z-]*", body)) | examples
    return out


def test_readme_cli_reference_is_current():
    text = README.read_text(encoding="utf-8")
    assert text.count(START) == 1 and text.count(END) == 1
    documented = text.split(START)[1].split(END)[0]
    assert sections(documented) == sections(render()), "README's CLI reference is stale: run `python -m cli.reference`"


def test_every_command_has_an_example():
    for name, items in sections(render()).items():
        assert any(item.startswith("synth ") for item in items), f"{name} --help has no example"
