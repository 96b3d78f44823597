"""How long a run will take, roughly, from its size alone (no data is read).

The engines' cost is dominated by walks of the dense universe: a measured marginal costs one
walk to compute it from the estimate and one to multiply the estimate by its update. MWEM makes
``passes`` such steps per measurement per round while it selects, then at most
``final_passes`` over every measurement; PMW walks the universe once per update (per pass of
the workload). ``CELL_STEPS_PER_SECOND`` is what one core does on such walks (benchmarks/
bench_mwem.py's step timings, rounded down: the figure is for planning, not a promise).
"""

from __future__ import annotations

__all__ = ["CELL_STEPS_PER_SECOND", "Estimate", "factored_mwem_estimate", "mwem_estimate", "pmw_estimate",
           "practical_pmw_estimate"]

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


#: A factored model's fitting pass: seconds per cell of its junction tree, and per pass whatever its
#: size (the Python walk of its cliques and measurements). benchmarks/bench_wide.py, 2 shared
#: cores: 5.6 ns a cell on adult's 14 columns (2.2M cells), 8.4 on a 35-column table (1.35M).
FACTORED_CELL_SECONDS = 7e-9
FACTORED_PASS_SECONDS = 2.5e-3
#: A selecting round's scoring, per candidate (its marginal from the model, its score, whether it
#: fits): 0.9 ms on adult's 105 candidates, 1.6 ms on the 35-column table's 630.
FACTORED_SCORE_SECONDS = 1.2e-3
#: ... and on adaptive rounds' small models (8,000-20,000 cells): 0.1-0.26 ms.
ADAPTIVE_SCORE_SECONDS = 2e-4


def factored_mwem_estimate(model_cells: int, final_passes: int, rounds: int, candidates: int, passes: int,
                           selecting: bool, known_model: bool,
                           score_seconds: float = FACTORED_SCORE_SECONDS) -> Estimate:
    """MWEM on a factored model of about ``model_cells`` cells (exact when ``known_model``: every
    candidate measured; else a typical size for the cap): ``final_passes`` fitting passes, and
    while selecting, each of ``rounds`` rounds scores ``candidates`` and fits ``passes`` times a
    model half its final size, on average. A typical figure: the final fit may stop earlier."""
    pass_seconds = model_cells * FACTORED_CELL_SECONDS + FACTORED_PASS_SECONDS
    seconds = final_passes * pass_seconds
    reckoning = f"{'a' if known_model else 'a typical'} {model_cells:,}-cell model x {final_passes:,} fitting passes"
    if selecting:
        seconds += rounds * (candidates * score_seconds + passes * pass_seconds / 2)
        reckoning += f", after {rounds} rounds scoring {candidates:,} candidates each"
    return Estimate(seconds, reckoning, "about")


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
