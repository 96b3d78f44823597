"""How long a run will take, roughly, from its size alone (no data is read).

The engines' cost is dominated by walks of the dense universe: a measured marginal costs one
walk to compute it from the estimate and one to multiply the estimate by its update. MWEM makes
``passes`` such steps per measurement per round while it selects, then at most
``final_passes`` over every measurement; PMW walks the universe once per update (per pass of
the workload). ``CELL_STEPS_PER_SECOND`` is what one core does on such walks (benchmarks/
bench_mwem.py's step timings, rounded down: the figure is for planning, not a promise).
"""

from __future__ import annotations

__all__ = ["CELL_STEPS_PER_SECOND", "Estimate", "mwem_estimate", "pmw_estimate", "practical_pmw_estimate"]

from dataclasses import dataclass

#: Universe cells per second for one marginal-and-multiply step over a dense table.
CELL_STEPS_PER_SECOND = 2e8


@dataclass(frozen=True)
class Estimate:
    """``seconds`` (an upper or a typical estimate, as ``kind`` says) and how it was reckoned."""

    seconds: float
    reckoning: str
    kind: str = "up to about"  # an upper estimate, or "about" for a typical one

    def describe(self) -> str:
        return f"{self.kind} {format_duration(self.seconds)} ({self.reckoning})"


def mwem_estimate(cells: int, candidates: int, rounds: int, passes: int, final_passes: int,
                  selecting: bool) -> Estimate:
    """MWEM on ``cells`` universe cells with ``candidates`` marginals or queries to measure."""
    rounds = min(rounds, candidates)
    steps = 0
    if selecting:  # round t fits t measurements ``passes`` times, after scoring every candidate
        steps += passes * rounds * (rounds + 1) // 2 + rounds
    steps += final_passes * rounds
    reckoning = f"{cells:,} cells x {rounds} rounds"
    if selecting:
        reckoning += f" x {passes} passes"
    if final_passes:
        reckoning += f", then at most {final_passes:,} fitting passes"
    return Estimate(cells * steps / CELL_STEPS_PER_SECOND, reckoning)


def pmw_estimate(cells: int, updates: int, passes: int = 1) -> Estimate:
    """PMW with at most ``updates`` updates, each a walk of the universe, per workload pass."""
    steps = updates * passes
    return Estimate(cells * steps / CELL_STEPS_PER_SECOND, f"{cells:,} cells x at most {updates:,} updates"
                    + (f" x {passes} passes" if passes > 1 else ""))


#: Measurement-passes per update of practical PMW (passes of its refit times the measurements
#: refit): about 690 on adult (7 columns, 35 three-way marginals, epsilon 1), most of them in the
#: first updates, which start far from the data.
PRACTICAL_STEPS_PER_UPDATE = 700


def practical_pmw_estimate(cells: int, updates: int) -> Estimate:
    """Practical PMW: each update refits every measurement so far, typically
    ``PRACTICAL_STEPS_PER_UPDATE`` measurement-passes (a typical figure, not a bound)."""
    seconds = cells * updates * PRACTICAL_STEPS_PER_UPDATE / CELL_STEPS_PER_SECOND
    return Estimate(seconds, f"{cells:,} cells x at most {updates:,} updates x about {PRACTICAL_STEPS_PER_UPDATE} "
                             "measurement-passes each", "about")


def format_duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
