"""Shared writer of ``benchmarks/RESULTS.md``: each benchmark script owns one section.

A section is the text between ``<!-- name:start -->`` and ``<!-- name:end -->``;
``write_section(name, markdown)`` replaces that text (or appends the section when the file
has none yet), keeping the common header at the top and every other section as it is.
The file is replaced atomically (a temporary file in the same folder, then ``os.replace``),
under an advisory lock on the folder where the platform has one, so two scripts finishing
at once cannot drop each other's section.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no lock, the replace is still atomic
    fcntl = None  # type: ignore[assignment]

RESULTS_PATH = Path(__file__).resolve().parent / "RESULTS.md"

#: Written at the top of a new (or header-less) RESULTS.md.
HEADER = (
    "# synth benchmark results\n"
    "\n"
    "Each section below is written by one script in `benchmarks/` (named in its markers and "
    "its command line); re-running a script replaces only its own section.\n"
)

_NAME = re.compile(r"[A-Za-z0-9_.-]+")


def markers(name: str) -> tuple[str, str]:
    """The start and end marker lines of section ``name``."""
    if not _NAME.fullmatch(name):
        raise ValueError(f"section name ({name!r}) must be letters, digits, '_', '.' or '-'")
    return f"<!-- {name}:start -->", f"<!-- {name}:end -->"


def replace_section(text: str, name: str, markdown: str) -> str:
    """``text`` with section ``name`` holding ``markdown`` (appended if absent).

    Raises ``ValueError`` when the file's markers for ``name`` are not exactly one start
    line followed by one end line, or when ``markdown`` contains them itself.
    """
    start, end = markers(name)
    if start in markdown or end in markdown:
        raise ValueError(f"the markdown of section {name!r} contains its own markers")
    body = markdown if markdown.endswith("\n") else markdown + "\n"
    block = f"{start}\n{body}{end}\n"
    if not text.strip():
        return f"{HEADER}\n{block}"
    if not text.startswith(HEADER.split("\n", 1)[0]):
        text = f"{HEADER}\n{text}"
    starts = [m.start() for m in re.finditer(f"^{re.escape(start)}[ \t]*$", text, re.MULTILINE)]
    ends = [m.end() for m in re.finditer(f"^{re.escape(end)}[ \t]*$", text, re.MULTILINE)]
    if not starts and not ends:
        return f"{text.rstrip()}\n\n{block}"
    if len(starts) != 1 or len(ends) != 1 or ends[0] < starts[0]:
        raise ValueError(
            f"the results file has {len(starts)} start and {len(ends)} end markers for section {name!r} "
            "(expected one of each, in order): fix the file by hand"
        )
    tail = text[ends[0] :]
    tail = tail[1:] if tail.startswith("\n") else tail
    return text[: starts[0]] + block + tail


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """An exclusive advisory lock on ``folder`` (no lock file left behind), where available."""
    if fcntl is None:  # pragma: no cover
        yield
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def write_text_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` in one step (keeping its permission bits if it exists)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)  # the umask applies
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_section(name: str, markdown: str, path: Path = RESULTS_PATH) -> Path:
    """Put ``markdown`` in section ``name`` of ``path`` (RESULTS.md), leaving the rest as is."""
    path = Path(path)
    with _locked(path.parent):
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        write_text_atomic(path, replace_section(text, name, markdown))
    return path
