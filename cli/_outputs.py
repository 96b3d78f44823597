"""Where a command may write: never over one of its inputs, never two outputs into one file,
and never over an existing file unless ``--force`` says so.

Every command runs ``check_outputs`` before any work, so a refusal costs nothing and writes
nothing. Streams (``-`` for stdout, a FIFO, a character device such as ``/dev/null``) hold no
data to lose and need no ``--force``; a symbolic link is judged by the file it points to.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import click

force_option = click.option(
    "--force", is_flag=True,
    help="Replace output files that already exist (an input of the command is never replaced).",
)


def check_outputs(inputs: Mapping[str, object], outputs: Mapping[str, object], force: bool,
                  *, stdout_ok: tuple[str, ...] = ("-o",)) -> None:
    """Refuse, as a usage error naming the option, any output that would lose data.

    ``inputs`` and ``outputs`` map an option's name (``"DATA"``, ``"-o"``, ``"--model"``) to
    its path, or ``None`` when not given; ``stdout_ok`` names the outputs for which ``-``
    means stdout.
    """
    from synth._io import is_stream, writable_target
    from synth.errors import SynthError

    seen: dict[str, str] = {}
    for option, path in outputs.items():
        if path is None:
            continue
        path = os.fspath(path)
        if path == "-":
            if option not in stdout_ok:
                raise click.BadParameter("'-' (stdout) is not allowed here: name a file", param_hint=option)
            if "-" in seen:
                raise click.BadParameter(f"{seen['-']} already writes to stdout", param_hint=option)
            seen["-"] = option
            continue
        try:
            target = str(writable_target(path))
        except SynthError as exc:
            raise click.BadParameter(str(exc), param_hint=option) from None
        for name, source in inputs.items():
            if source is not None and os.fspath(source) != "-" and _same_file(os.fspath(source), target):
                raise click.BadParameter(f"{path} is also the input {name}: synth never writes over its input; "
                                         "choose another path", param_hint=option)
            if source is not None and os.path.isdir(source) and _inside(target, os.fspath(source)):
                raise click.BadParameter(f"{path} is inside the input folder {name} ({source}): the next read of the "
                                         "folder would take it for data; choose a path outside it", param_hint=option)
        if target in seen:
            raise click.BadParameter(f"{path} is also the output {seen[target]}: give each output its own path",
                                     param_hint=option)
        seen[target] = option
        if os.path.exists(target) and not is_stream(target) and not force:
            raise click.BadParameter(f"{path} exists: pass --force to replace it", param_hint=option)


def _inside(path: str, folder: str) -> bool:
    folder = os.path.realpath(folder)
    return os.path.commonpath([os.path.realpath(path), folder]) == folder


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)
