"""Run a Markdown document's code blocks in order, as a reader would (the README and docs/*.md).

A document's ``bash`` and ``python`` blocks run one after another from a folder of the test's
(a block starting with ``cd`` starts from that folder, any other goes on where the block before
it ended), in one shell session (variables a block sets stay set), with ``synth`` being this
interpreter's ``python -m synth``. ``json`` blocks must parse. ``text`` blocks are output
samples and help text: not run. Any other block (or one with no language) is refused, so a
new example cannot slip past the tests.

A few lines are replaced when run (``REPLACED``): installing synth and running the whole test
suite (this is the test suite).
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from .conftest import REPO

#: What a block may be fenced as. ``text`` is never run.
LANGUAGES = ("bash", "python", "json", "text")

#: Lines replaced when a document is run: installing and running the whole test suite (this is
#: the test suite). Every key must still be a line of some document (a test checks).
REPLACED = {
    "python -m pip install -e . && synth demo": "synth demo",
    'python -m pip install -e ".[test]" && python -m pytest': "",
    'python -m pip install -e ".[test]"': "",
    "python -m pytest": "",
}

#: Options that say where a run writes, not what it plans.
OUTPUT_OPTIONS = {"-o", "--save-model", "--monitor", "--force", "--quiet", "-q", "--seed"}


def blocks(text: str) -> list[tuple[str, str]]:
    """A document's fenced code blocks: (language, body)."""
    return re.findall(r"^```(\S*)\n(.*?)^```", text, re.S | re.M)


def lines(document: Path) -> set[str]:
    """Every line of every code block of ``document``, stripped."""
    return {line.strip() for _, body in blocks(document.read_text(encoding="utf-8")) for line in body.splitlines()}


def links(document: Path) -> list[str]:
    """The relative link targets of ``document`` (web addresses and in-page anchors left out)."""
    targets = re.findall(r"\]\(([^)\s]+)\)", document.read_text(encoding="utf-8"))
    return [target.split("#")[0] for target in targets
            if not re.match(r"[a-z]+:", target) and not target.startswith("#")]


def _run(command: list[str], cwd: Path, what: str) -> None:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{what} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert "bug in synth" not in done.stderr and "Traceback" not in done.stderr, f"{what}:\n{done.stderr[-3000:]}"


def run_blocks(document: Path, folder: Path, scratch: Path | None = None,
               replaced: Mapping[str, str] = REPLACED) -> None:
    """Run ``document``'s blocks in order from ``folder`` (see the module's docstring); the shell
    session's state (its folder and variables between blocks) is kept in ``scratch`` (default:
    ``folder``)."""
    text = document.read_text(encoding="utf-8")
    name = document.relative_to(REPO) if document.is_relative_to(REPO) else document
    here = folder
    scratch = folder if scratch is None else scratch
    state, variables = scratch / ".doc-cwd", scratch / ".doc-variables"
    variables.write_text("")
    for number, (language, body) in enumerate(blocks(text)):
        first = (body.strip().splitlines() or [""])[0]
        what = f"{name} block {number} ({language or 'no language'}, first line {first[:60]!r})"
        assert language in LANGUAGES, f"{what}: fence it as one of {', '.join(LANGUAGES)}"
        start = folder if body.lstrip().startswith("cd ") else here
        if language == "bash":
            commands = [replaced.get(line.strip(), line) for line in body.splitlines()]
            script = ("set -euo pipefail -a\n"
                      f"source {shlex.quote(str(variables))}\n"
                      f"synth() {{ {shlex.quote(sys.executable)} -m synth \"$@\"; }}\n"
                      f"python() {{ {shlex.quote(sys.executable)} \"$@\"; }}\n"
                      + "\n".join(commands)
                      + f"\npwd > {shlex.quote(str(state))}\nexport -p > {shlex.quote(str(variables))}\n")
            _run(["bash", "-c", script], start, what)
            here = Path(state.read_text().strip())
        elif language == "python":
            _run([sys.executable, "-c", body], start, what)
        elif language == "json":
            json.loads(body)


def _options(command: str) -> dict[str, str | None]:
    """A command's options and their values (None for a flag), less where it writes."""
    words = command.split()
    found = {}
    for i, word in enumerate(words):
        if word.startswith("-"):
            value = words[i + 1] if i + 1 < len(words) and not words[i + 1].startswith("-") else None
            found[word] = value
    return {option: value for option, value in found.items() if option not in OUTPUT_OPTIONS}


def plan_mismatches(document: Path) -> list[str]:
    """``--plan`` examples whose options differ from the run beside them (their L depends on them)."""
    wrong = []
    for language, body in blocks(document.read_text(encoding="utf-8")):
        if language != "bash":
            continue
        commands = [" ".join(shlex.split(command.replace("\\\n", " "), comments=True))
                    for command in re.split(r"(?<!\\)\n", body) if command.startswith("synth ")]
        for index, command in enumerate(commands):
            if "--plan" not in command.split():
                continue
            runs = [c for c in commands[index + 1:] if c.split()[:2] == command.split()[:2]]
            if not runs:
                wrong.append(f"{command}: no run beside it")
                continue
            planned, run = _options(command), _options(runs[0])
            planned.pop("--plan")
            if planned != run:
                wrong.append(f"{command} plans other options than {runs[0]}")
    return wrong
