"""Every code block of the README runs, in order, as a reader would run them.

The bash and Python blocks run one after another in a scratch folder (a block starting with
``cd`` starts from the scratch folder, any other goes on where the one before it ended), with
``synth`` being this interpreter's ``python -m synth``. The README's only downloads (adult from
private-pgm) are replaced by copies of ``../shared/datasets``, and the few blocks that show a
command on the reader's own files (``tiny.csv``, ``parts/``, ``big.csv``) get small stand-ins
first. JSON blocks must parse. The help-text blocks are checked by ``test_cli_reference``.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from .conftest import REPO

README = REPO / "README.md"
SHARED = REPO.parent / "shared" / "datasets"

#: Lines of the README replaced when the test runs them: installing and running the test suite
#: (this is the test suite), and downloads (no network here; the same files are in shared/).
REPLACED = {
    "python -m pip install -e . && synth demo": "synth demo",
    'python -m pip install -e ".[test]" && python -m pytest': "",
    "curl -L -o data/adult.csv https://raw.githubusercontent.com/ryan112358/private-pgm/master/data/adult.csv":
        f"cp {shlex.quote(str(SHARED / 'adult.csv'))} data/adult.csv",
    "curl -L -o data/adult-domain.json "
    "https://raw.githubusercontent.com/ryan112358/private-pgm/master/data/adult-domain.json":
        f"cp {shlex.quote(str(SHARED / 'adult-domain.json'))} data/adult-domain.json",
}


def blocks(text: str) -> list[tuple[str, str]]:
    """The README's fenced code blocks: (language, body)."""
    return re.findall(r"^```(\w*)\n(.*?)^```", text, re.S | re.M)


#: What a block names to get the stand-ins made in its folder first.
STAND_INS = ("tiny.csv", "parts/", "big.csv")


def _stand_ins(folder: Path) -> None:
    """The reader's own files that some blocks name: a tiny table, a Parquet folder, a CSV."""
    rng = np.random.default_rng(0)
    tiny = pd.DataFrame({"a": rng.integers(0, 2, 500), "b": rng.integers(0, 2, 500)})
    tiny.to_csv(folder / "tiny.csv", index=False)
    (folder / "tiny.json").write_text(json.dumps({"a": 2, "b": 2}))
    (folder / "w.json").write_text(json.dumps({"queries": [{"marginal": ["a", "b"]}]}))
    (folder / "s.json").write_text(json.dumps({"a": 2, "b": 2}))
    (folder / "parts").mkdir(exist_ok=True)
    for part in range(2):
        tiny.to_parquet(folder / "parts" / f"part-{part}.parquet", index=False)
    tiny.to_csv(folder / "big.csv", index=False)


def _run(command: list[str], cwd: Path, what: str) -> None:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"README {what} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert "bug in synth" not in done.stderr and "Traceback" not in done.stderr, done.stderr[-3000:]


def test_the_replaced_lines_are_still_in_the_readme():
    """A README edit must not leave the runner replacing lines that are gone."""
    lines = {line.strip() for _, body in blocks(README.read_text(encoding="utf-8")) for line in body.splitlines()}
    assert set(REPLACED) <= lines


#: Options that say where a run writes, not what it plans.
OUTPUT_OPTIONS = {"-o", "--save-model", "--monitor", "--force", "--quiet", "--seed"}


def _options(command: str) -> dict[str, str | None]:
    """A command's options and their values (None for a flag), less where it writes."""
    words = command.split()
    found = {}
    for i, word in enumerate(words):
        if word.startswith("-"):
            value = words[i + 1] if i + 1 < len(words) and not words[i + 1].startswith("-") else None
            found[word] = value
    return {option: value for option, value in found.items() if option not in OUTPUT_OPTIONS}


def test_every_plan_example_plans_the_run_beside_it():
    """A --plan example takes the options of the run it plans (its L depends on them)."""
    for _, body in blocks(README.read_text(encoding="utf-8")):
        commands = [" ".join(shlex.split(command.replace("\\\n", " "), comments=True))
                    for command in re.split(r"(?<!\\)\n", body) if command.startswith("synth ")]
        for index, command in enumerate(commands):
            if "--plan" not in command.split():
                continue
            runs = [c for c in commands[index + 1:] if c.split()[:2] == command.split()[:2]]
            assert runs, f"{command}: no run beside it"
            planned, run = _options(command), _options(runs[0])
            planned.pop("--plan")
            assert planned == run, f"{command} plans other options than {runs[0]}"


@pytest.mark.slow
def test_every_readme_block_runs(tmp_path):
    text = README.read_text(encoding="utf-8")
    here = tmp_path
    state, variables = tmp_path / ".cwd", tmp_path / ".variables"
    variables.write_text("")
    for number, (language, body) in enumerate(blocks(text)):
        what = f"block {number} ({language}, first line {body.strip().splitlines()[0][:60]!r})"
        start = tmp_path if body.lstrip().startswith("cd ") else here
        if any(name in body for name in STAND_INS):
            _stand_ins(start)
        if language == "bash":
            # one shell session, as a reader has: variables set by a block (D, COLS) stay set
            lines = [REPLACED.get(line.strip(), line) for line in body.splitlines()]
            script = ("set -euo pipefail -a\n"
                      f"source {shlex.quote(str(variables))}\n"
                      f"synth() {{ {shlex.quote(sys.executable)} -m synth \"$@\"; }}\n"
                      + "\n".join(lines)
                      + f"\npwd > {shlex.quote(str(state))}\nexport -p > {shlex.quote(str(variables))}\n")
            _run(["bash", "-c", script], start, what)
            here = Path(state.read_text().strip())
        elif language == "python":
            _run([sys.executable, "-c", body], start, what)
        elif language == "json":
            json.loads(body)


def test_the_privacy_building_blocks_example_never_fails(capsys):
    """Noise makes that block's outcome random: it must run whatever the draws (it once called
    AboveThreshold after it had halted, about one run in 200)."""
    [example] = [body for language, body in blocks(README.read_text(encoding="utf-8"))
                 if language == "python" and "AboveThreshold(" in body]
    code = compile(example, "README building blocks", "exec")
    for _ in range(1500):
        exec(code, {})
    assert "above threshold:" in capsys.readouterr().out
