"""One measured call in its own process: its result, its peak resident memory, and a time limit.

``isolated(fn, args, limit_s)`` starts a fresh interpreter (multiprocessing, 'spawn'), which
calls ``fn(*args, started=...)``. ``fn`` does its setup (imports, building the data), calls
``started()`` just before the work to time, and returns a dict of figures (picklable); it reads
its own high-water mark with ``peak_mb()`` right after the work. On Linux ``started`` resets that
mark (``/proc/self/clear_refs``, after a garbage collection) and reports the resident set then
(interpreter, libraries, data), so the peak is the work's: what was resident at its start plus
what it added. Elsewhere the mark is ``ru_maxrss`` since the process began (setup included).
The limit counts from ``started``: past it the process is terminated and the answer is a
``Stopped``. A failure in the child is raised in the caller with the child's traceback.
"""

from __future__ import annotations

import gc
import multiprocessing
import resource
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass

#: How long the child may take to start, import and build its data before ``started``.
SETUP_LIMIT_S = 600


def _status_mb(field: str) -> float | None:
    """A ``/proc/self/status`` memory line (``VmHWM``, ``VmRSS``) in MB; None where there is none."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 2**10  # kB
    except OSError:
        pass
    return None


def peak_mb() -> float:
    """This process's peak resident memory, in MB: since ``start_mark`` on Linux (``VmHWM``),
    else since the process began (``ru_maxrss``: KB on Linux, bytes on macOS)."""
    peak = _status_mb("VmHWM")
    if peak is not None:
        return peak
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


def start_mark() -> float:
    """Reset the peak to the resident set now (Linux), and return that resident set in MB
    (elsewhere: the peak so far)."""
    gc.collect()
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")  # resets VmHWM to VmRSS
    except OSError:
        return peak_mb()
    return _status_mb("VmRSS") or peak_mb()


@dataclass(frozen=True)
class Stopped:
    """A call that ran past its limit: how long it ran (from ``started``), and the resident set at
    ``started`` (its peak is unknown)."""

    seconds: float
    start_mb: float


def _child(send, fn: Callable, args: tuple) -> None:
    try:
        result = fn(*args, started=lambda: send.send(("started", start_mark())))
        send.send(("done", result))
    except BaseException:  # the parent re-raises it
        send.send(("error", traceback.format_exc()))
    finally:
        send.close()


def isolated(fn: Callable, args: tuple, limit_s: float) -> dict | Stopped:
    """``fn(*args, started=...)``'s dict from a fresh process (with ``start_mb``: the resident set
    at ``started``), or a ``Stopped`` when the work ran past ``limit_s``."""
    context = multiprocessing.get_context("spawn")
    receive, send = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(send, fn, args), daemon=True)
    process.start()
    send.close()
    try:
        start_mb, start = None, time.perf_counter()
        while True:
            wait = SETUP_LIMIT_S if start_mb is None else limit_s - (time.perf_counter() - start)
            if not receive.poll(max(wait, 0)):
                if start_mb is None:
                    raise RuntimeError(f"{fn.__name__}{args}: no start within {SETUP_LIMIT_S} s")
                return Stopped(time.perf_counter() - start, start_mb)
            try:
                kind, value = receive.recv()
            except EOFError:
                died = f"the process died (exit code {process.exitcode})"
                raise RuntimeError(f"{fn.__name__}{args}: {died}") from None
            if kind == "started":
                start_mb, start = value, time.perf_counter()
            elif kind == "error":
                raise RuntimeError(f"{fn.__name__}{args} failed in its process:\n{value}")
            else:
                process.join(30)
                return {**value, "start_mb": start_mb}
    finally:
        if process.is_alive():
            process.terminate()
        process.join()
        receive.close()
