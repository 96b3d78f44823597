"""Small file helpers: atomic writes and JSON reading with located errors."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from synth.errors import SynthError

__all__ = ["OutputGroup", "atomic_write", "is_stream", "output_group", "read_json", "writable_target"]


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w", **kwargs: Any) -> Iterator[IO]:
    """Open a temporary file beside ``path``; rename it over ``path`` only on success.

    A failure inside the ``with`` block (or a crash, or Ctrl-C) leaves any existing ``path``
    untouched and no partial file behind. ``path`` is written *through*, never replaced:
    a symbolic link keeps pointing where it did (its target gets the new content), and a
    FIFO or character device (``/dev/stdout``, a named pipe) is written to directly, as a
    stream. Any other kind of file (a block device, a socket, a folder) is refused.
    """
    target = writable_target(path)
    if is_stream(target):
        with open(target, mode, **kwargs) as handle:
            yield handle
        return
    try:
        fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as exc:  # name the file the caller asked for, not the temporary one
        raise type(exc)(exc.errno, exc.strerror, str(path)) from None
    try:
        os.chmod(tmp_name, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual mode
        with os.fdopen(fd, mode, **kwargs) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise


def writable_target(path: str | os.PathLike) -> Path:
    """The file a write to ``path`` must land in: symbolic links followed, kind checked.

    Returns the resolved path of a regular file (existing or not) or a stream (FIFO or
    character device); raises ``SynthError`` for anything else, so nothing but a regular
    file is ever replaced, and for an empty path or one ending in a separator (``out/``
    names a folder: resolved, it would have become the file ``out``).
    """
    text = os.fspath(path)
    if not text:
        raise SynthError("empty path: give a file name")
    if text.endswith(tuple(sep for sep in ("/", os.sep, os.altsep) if sep)):
        raise SynthError(f"{text}: names a folder (it ends in {text[-1]!r}); give a file name")
    target = Path(os.path.realpath(path))
    try:
        info = os.stat(target)
    except FileNotFoundError:
        return target
    except OSError as exc:
        raise SynthError(f"{path}: cannot write: {exc.strerror}") from None
    if stat.S_ISREG(info.st_mode) or stat.S_ISFIFO(info.st_mode) or stat.S_ISCHR(info.st_mode):
        return target
    kind = "a folder" if stat.S_ISDIR(info.st_mode) else "a block device" if stat.S_ISBLK(info.st_mode) \
        else "a socket" if stat.S_ISSOCK(info.st_mode) else "not a regular file"
    raise SynthError(f"{path}: is {kind}; synth writes only regular files, FIFOs and character devices")


def is_stream(path: str | os.PathLike) -> bool:
    """True for an existing FIFO or character device: written in place, never replaced."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def read_json(path: str | os.PathLike, error: type[SynthError] = SynthError) -> Any:
    """Parse a JSON file; a missing, empty or malformed file raises ``error`` naming it."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")  # a BOM (some Windows editors write one) is not content
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{path}: cannot read: {exc}") from None
    if not text.strip():
        raise error(f"{path}: file is empty (expected JSON)")
    try:
        return json.loads(text, object_pairs_hook=no_duplicate_keys)
    except json.JSONDecodeError as exc:
        raise error(f"{path}: malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except DuplicateKey as exc:
        raise error(f"{path}: key {exc.args[0]!r} appears twice in one JSON object") from None
    except RecursionError:
        raise error(f"{path}: JSON nested too deeply (lists or objects inside each other thousands of times)") from None


class DuplicateKey(Exception):
    """A key that appears twice in one JSON object (its ``args[0]``)."""


def no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``' ``object_pairs_hook`` that refuses a repeated key instead of keeping the last
    one silently (a second ``"where"`` would otherwise replace the first)."""
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise DuplicateKey(key)
        result[key] = value
    return result


class OutputGroup:
    """Several outputs of one command that appear together or not at all.

    ``stage(path)`` gives a temporary path beside ``path`` (same folder, same suffix) for a
    writer to fill; ``commit`` renames every temporary over its target, ``discard`` removes
    them. A stream target (FIFO, character device) is returned as is and written at once.
    """

    def __init__(self) -> None:
        self._staged: list[tuple[Path, Path]] = []

    def stage(self, path: str | os.PathLike) -> Path:
        target = writable_target(path)
        if is_stream(target):
            return target
        try:
            fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.",
                                            suffix=f".tmp{target.suffix}")
        except OSError as exc:
            raise type(exc)(exc.errno, exc.strerror, str(path)) from None
        os.close(fd)
        self._staged.append((Path(tmp_name), target))
        return Path(tmp_name)

    def commit(self) -> None:
        try:
            while self._staged:
                tmp, target = self._staged[0]
                os.replace(tmp, target)
                self._staged.pop(0)
        except BaseException:
            self.discard()
            raise

    def discard(self) -> None:
        for tmp, _ in self._staged:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        self._staged.clear()


@contextlib.contextmanager
def output_group() -> Iterator[OutputGroup]:
    """An ``OutputGroup`` committed when the block succeeds and discarded on any failure
    (an exception, Ctrl-C, or SIGTERM turned into ``SystemExit`` by the CLI)."""
    group = OutputGroup()
    try:
        yield group
    except BaseException:
        group.discard()
        raise
    group.commit()
