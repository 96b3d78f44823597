"""Run the quick set: every ``benchmarks/bench_*.py`` but the slow ones (``SLOW``: run them by
name) with ``--quick``, one after the other, each in
its own process (first-call costs are measured per process), so each rewrites its own section of
``benchmarks/RESULTS.md``.

Progress goes to stderr (each script's own stage lines, then its status and time); the reports
go to stdout. The exit status is 1 when a script failed (the others still run), 0 otherwise.

Usage: ``python benchmarks/run_all.py [--no-write] [--seed S] [--repeats N] [--data-dir DIR] [--list]
[NAME ...]`` (names such as ``bench_pmw`` or ``pmw``: only those scripts; the options are passed on).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: Scripts left out of the default set (minutes even with --quick): run them by name.
SLOW = {"bench_wide"}


def scripts(names: list[str]) -> list[Path]:
    """The benchmark scripts, in name order: only those named, when names are given, else all
    but the ``SLOW`` ones."""
    found = sorted(HERE.glob("bench_*.py"))
    if not names:
        return [path for path in found if path.stem not in SLOW]
    wanted = {name if name.startswith("bench_") else f"bench_{name}" for name in names}
    unknown = wanted - {path.stem for path in found}
    if unknown:
        raise SystemExit(f"run_all: no such benchmark: {', '.join(sorted(unknown))}")
    return [path for path in found if path.stem in wanted]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="only these scripts (bench_pmw or pmw); default: all")
    parser.add_argument("--list", action="store_true", help="list the scripts and stop")
    parser.add_argument("--no-write", action="store_true", help="passed on: leave RESULTS.md as it is")
    for option in ("--seed", "--repeats", "--data-dir"):
        parser.add_argument(option, help="passed on to every script")
    args = parser.parse_args(argv)
    chosen = scripts([name.removesuffix(".py") for name in args.names])
    if args.list:
        print("\n".join(path.stem for path in chosen))
        return 0
    passed = ["--no-write"] if args.no_write else []
    passed += [item for option in ("seed", "repeats", "data_dir") if getattr(args, option) is not None
               for item in (f"--{option.replace('_', '-')}", getattr(args, option))]
    failed, started = [], time.perf_counter()
    for i, path in enumerate(chosen, 1):
        command = [sys.executable, str(path), "--quick", *passed]
        shown = ["python", str(path.relative_to(HERE.parent)), *command[2:]]
        print(f"[{i}/{len(chosen)}] {' '.join(shown)}", file=sys.stderr, flush=True)
        start = time.perf_counter()
        code = subprocess.run(command, cwd=HERE.parent).returncode
        status = "ok" if code == 0 else f"FAILED (exit status {code})"
        print(f"[{i}/{len(chosen)}] {path.stem}: {status} in {time.perf_counter() - start:.0f} s",
              file=sys.stderr, flush=True)
        if code != 0:
            failed.append(path.stem)
    total = time.perf_counter() - started
    summary = f"failed: {', '.join(failed)}" if failed else "all passed"
    print(f"run_all: {len(chosen)} scripts in {total:.0f} s; {summary}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
