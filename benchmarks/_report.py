"""Report pieces for the benchmark scripts: figures as text, and markdown tables.

``table("@case|size|...", rows)`` is the one table builder (a title with a leading '@' is a
left-aligned column, '^' a centred one, any other right-aligned); ``comparison_table`` lays out
synth-vs-baseline figures (``_timing.Comparison``) with the medians and rates of both sides, and
``first_call_table`` the first-call (JIT) costs; ``document`` joins a report's blocks.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence

#: The closing note of a report measured on this shared machine.
SHARED_MACHINE = ("The machine is shared (see the load averages): figures are medians of samples taken in "
                  "turn, and ratios can move by tens of percent between runs; the best-sample figures are a "
                  "cross-check.")
#: A column of ``comparison_table``: its title and the function that writes a row's cell.
Column = tuple[str, Callable[[object], str]]


def rate(work: int, seconds: float, unit: str) -> str:
    """Human-readable rate, e.g. '52.3 M rows/s'."""
    value = work / seconds
    for scale, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:.1f} {prefix} {unit}/s"
    return f"{value:.0f} {unit}/s"


def duration(seconds: float) -> str:
    """Human-readable duration: s, ms, or microseconds below 1 ms."""
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} us"
    if seconds >= 10:
        return f"{seconds:.1f} s"
    return f"{seconds * 1e3:.1f} ms"


def fine(seconds: float) -> str:
    """``duration`` with two decimals below 10 microseconds."""
    return f"{seconds * 1e6:.2f} us" if seconds < 1e-5 else duration(seconds)


def seconds_text(seconds: float) -> str:
    """Seconds with two decimals below 10 s, one above."""
    return f"{seconds:.2f} s" if seconds < 10 else f"{seconds:.1f} s"


def power_text(size: int) -> str:
    """'10^6' for a power of ten, else '1,234'."""
    k = round(math.log10(size))
    return f"10^{k}" if 10**k == size else f"{size:,}"


def ns_each(seconds: float, items: int) -> str:
    """Nanoseconds per item: two decimals below 100."""
    value = seconds / items * 1e9
    return f"{value:.2f}" if value < 100 else f"{value:,.0f}"


def met(ok: bool) -> str:
    """Bold 'met' or 'not met'."""
    return "**met**" if ok else "**not met**"


def seeds_text(seeds: Iterable[int]) -> str:
    """'0, 1, 2'."""
    return ", ".join(map(str, seeds))


def document(*blocks: str | Sequence[str]) -> str:
    """A markdown report from its blocks (a heading, a paragraph, a table, a list as a sequence of
    lines, a report header), separated by blank lines; empty blocks are left out."""
    parts = [block if isinstance(block, str) else "\n".join(block).strip("\n") for block in blocks]
    return "\n\n".join(part for part in parts if part) + "\n"


def markdown_table(columns: Sequence[tuple[str, str]], rows: Iterable[Sequence[str]]) -> str:
    """A markdown table: ``columns`` are (title, rule) pairs such as ("size", "---:")."""
    lines = [
        "| " + " | ".join(title for title, _ in columns) + " |",
        "|" + "|".join(rule for _, rule in columns) + "|",
    ]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    return "\n".join(lines)


_RULES = {"@": "---", "^": ":---:"}


def table(titles: str | Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """``markdown_table`` from titles ('|'-separated in one string, or a list), right-aligned
    unless marked with a leading '@' (left) or '^' (centred); in the string form a literal bar
    is written '\\|' (and stays escaped, as markdown needs)."""
    if isinstance(titles, str):
        titles = [t.replace("\0", "\\|") for t in titles.replace("\\|", "\0").split("|")]
    columns = [(t[1:], _RULES[t[0]]) if t[:1] in _RULES else (t, "---:") for t in titles]
    return markdown_table(columns, rows)


def comparison_table(rows: Sequence, baseline: str, after: Sequence[Column], before: Sequence[Column] = ()
                     ) -> str:
    """A table of ``Comparison`` rows: case, size, the ``before`` columns, synth's and
    ``baseline``'s medians and rates, then the ``after`` columns ((title, cell function) pairs)."""
    columns: list[Column] = [
        ("@case", lambda r: r.case), ("size", lambda r: f"{r.work:,} {r.unit}"), *before,
        ("synth median", lambda r: duration(r.synth_s)),
        ("synth rate", lambda r: rate(r.work, r.synth_s, r.unit)),
        (f"{baseline} median", lambda r: duration(r.base_s)),
        (f"{baseline} rate", lambda r: rate(r.work, r.base_s, r.unit)), *after,
    ]
    return table([title for title, _ in columns], ([cell(r) for _, cell in columns] for r in rows))


def first_call_table(calls: Sequence) -> str:
    """Markdown table of first-call (JIT) costs (``_timing.FirstCall``)."""
    return table(
        ["@kernel", "first call via library", "@what it did", "cold compile, no cache"],
        ([c.kernel, f"{c.first_call_s * 1e3:.0f} ms", c.cache, f"{c.cold_compile_s * 1e3:.0f} ms"]
         for c in calls),
    )
