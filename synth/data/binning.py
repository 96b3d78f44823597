"""Bin edges for a numeric column from noisy counts, by post-processing only.

A derived numeric column (``synth.data.derive``) releases two noisy histograms: its values'
magnitudes over fixed power-of-two buckets (``private_bounds``' buckets, which also give the
bounds), and its values over a finer grid inside the bounds. This module builds that grid and
cuts the bins from it; it reads nothing but those noisy counts and public parameters.

* ``fine_grid``: the magnitude buckets that fall inside the bounds, each cut into equal cells,
  as many as its noisy count holds ``CELL_SIGMAS`` noise deviations of the fine histogram
  (at most ``MAX_CELLS_PER_BUCKET``; integer columns: never finer than one integer). Where
  the mass is, the grid is fine; an empty stretch of a long tail is a single cell, so the
  fine histogram's noise does not pile up phantom mass there.
* ``equal_mass_edges``: bins of similar noisy mass from the grid; a cell that alone holds more
  than a bin's share (a spike, such as capital-gain's zeros) becomes a bin of its own, and the
  bins after it share what is left, so a long tail gets its own bins.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["CELL_SIGMAS", "MAX_CELLS_PER_BUCKET", "fine_grid", "refined_grid", "combined_counts", "equal_mass_edges",
           "grid_cells", "extend_bounds"]

#: A grid cell is made to hold about this many standard deviations of the fine histogram's noise.
CELL_SIGMAS = 4.0
#: The most cells one magnitude bucket is cut into.
MAX_CELLS_PER_BUCKET = 64
#: Cells at the ends of the bounds whose noisy counts stay under this many noise deviations are empty.
EMPTY_SIGMAS = 3.0
#: Real columns: magnitudes below this are the zero bucket (as ``synth.privacy.mechanisms.quantiles``).
_REAL_ZERO = 2.0 ** -20


def _breakpoints(low: float, high: float, integer: bool) -> list[float]:
    """The magnitude buckets' boundaries inside (low, high): 0, +-2^k (and for reals +-2^-20)."""
    k_min = 0 if integer else -20
    points = {low, high}
    if low < 0 < high:
        points.add(0.0)
    top = max(abs(low), abs(high))
    k = k_min
    while k <= 62 and 2.0 ** k <= top:
        for p in (2.0 ** k, -(2.0 ** k)):
            if low < p < high:
                points.add(p)
        k += 1
    return sorted(points)


def _cut(a: float, b: float, cells: int, integer: bool) -> list[float]:
    """The inner edges that cut [a, b) into ``cells`` equal cells (integers: whole, at most b - a)."""
    if integer:
        cells = min(cells, max(int(b - a), 1))
        return [float(x) for x in np.unique(np.floor(np.linspace(a, b, cells + 1)[1:-1])) if a < x < b]
    return [float(x) for x in np.linspace(a, b, cells + 1)[1:-1] if a < x < b]


def _cells_for(count: float, sigma: float) -> int:
    return int(min(max(max(count, 0.0) // (CELL_SIGMAS * sigma), 1), MAX_CELLS_PER_BUCKET))


def fine_grid(low: float, high: float, integer: bool, bucket_count, sigma: float) -> np.ndarray:
    """Cell edges over [low, high]: each magnitude bucket's stretch cut into cells of about
    ``CELL_SIGMAS * sigma`` noisy rows. ``bucket_count(x)`` gives the noisy count of the
    bucket holding the value x (public: a noisy histogram already released)."""
    points = _breakpoints(low, high, integer)
    edges: list[float] = [points[0]]
    for a, b in zip(points, points[1:]):
        edges.extend(_cut(a, b, _cells_for(float(bucket_count((a + b) / 2)), sigma), integer))
        edges.append(b)
    return np.asarray(edges, dtype=np.float64)


def refined_grid(edges: np.ndarray, noisy: np.ndarray, bins: int, integer: bool, sigma: float) -> np.ndarray:
    """``edges`` with every cell whose noisy count passes a bin's share cut again into cells of
    about ``CELL_SIGMAS * sigma`` noisy rows: where the values crowd into a small part of a
    magnitude bucket (years, dates, prices near one level), the first grid is too coarse."""
    mass = np.maximum(np.asarray(noisy, dtype=np.float64), 0.0)
    share = mass.sum() / max(int(bins), 1)
    out: list[float] = [float(edges[0])]
    for i, count in enumerate(mass):
        a, b = float(edges[i]), float(edges[i + 1])
        if count > share:
            out.extend(_cut(a, b, _cells_for(count, sigma), integer))
        out.append(b)
    return np.asarray(out, dtype=np.float64)


def combined_counts(grid: np.ndarray, first: np.ndarray, finer: np.ndarray, second: np.ndarray) -> np.ndarray:
    """The counts over ``finer`` (with its cells below and above) from two noisy histograms of
    equal noise: ``first`` over ``grid``, ``second`` over ``finer`` (``grid`` with some cells
    cut): a cell of both grids gets the mean of its two counts, a cut cell its own."""
    out = np.asarray(second, dtype=np.float64).copy()
    position = {float(e): i for i, e in enumerate(grid)}
    for j in range(len(finer) - 1):
        i = position.get(float(finer[j]))
        if i is not None and i + 1 < len(grid) and float(grid[i + 1]) == float(finer[j + 1]):
            out[j + 1] = (out[j + 1] + first[i + 1]) / 2
    out[0], out[-1] = (out[0] + first[0]) / 2, (out[-1] + first[-1]) / 2
    return out


def grid_cells(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Counts per cell of ``edges`` with one cell below and one above: length len(edges) + 1.
    Cell i (1..k) is [edges[i-1], edges[i]), the last closed; 0 is below edges[0], k+1 above
    edges[-1]. One value lies in one cell, so the counts move by 1 in L2 per row."""
    index = np.searchsorted(edges, values, side="right")  # 0: below; len(edges): at or above the top
    index = np.where(values == edges[-1], len(edges) - 1, index)  # the top edge closes the last cell
    return np.bincount(index, minlength=len(edges) + 1)


def equal_mass_edges(edges: np.ndarray, noisy: np.ndarray, bins: int, integer: bool, sigma: float = 0.0
                     ) -> list[float]:
    """Bin edges from the grid ``edges`` and its cells' noisy counts ``noisy`` (one per cell,
    without the outside cells). A cell under ``EMPTY_SIGMAS * sigma`` is taken as empty; a run
    of empty cells at an end of the grid, or of two or more inside it, is one bin of its own (so
    no bin that holds values stretches over a gap, and a synthetic value is never spread over
    it). The stretches between share ``bins`` by their mass, each cut into bins of about equal
    mass (``_cut_equal``)."""
    mass = np.maximum(np.asarray(noisy, dtype=np.float64), 0.0)
    if sigma > 0:
        mass = np.where(mass >= EMPTY_SIGMAS * sigma, mass, 0.0)
    cells = len(mass)
    empty = mass == 0
    segments: list[tuple[int, int, bool]] = []  # [start, stop) and whether it is a gap
    start = 0
    for i in range(1, cells + 1):
        if i == cells or empty[i] != empty[start]:
            segments.append((start, i, bool(empty[start])))
            start = i
    merged: list[list] = []
    for first, stop, gap in segments:  # a one-cell gap inside is noise in a stretch of values
        if gap and stop - first < 2 and 0 < first and stop < cells:
            gap = False
        if merged and merged[-1][2] == gap:
            merged[-1][1] = stop
        else:
            merged.append([first, stop, gap])
    total = float(mass.sum())
    full = [seg for seg in merged if not seg[2]]
    left = max(int(bins) - (len(merged) - len(full)), len(full), 1)
    out = {float(edges[0]), float(edges[-1])}
    for first, stop, gap in merged:
        out |= {float(edges[first]), float(edges[stop])}
        if not gap and total > 0:
            share = max(1, round(left * float(mass[first:stop].sum()) / total))
            out |= set(_cut_equal(edges[first:stop + 1], mass[first:stop], share))
    ordered = _split_skewed(sorted(out), edges, mass)
    if integer:
        ordered = sorted({math.floor(e) for e in ordered[:-1]} | {ordered[-1]})
    return ordered


def _split_skewed(bins: list[float], edges: np.ndarray, mass: np.ndarray) -> list[float]:
    """``bins`` with each bin whose mass sits far to one side (the grid cell where its noisy
    mass crosses half lies outside the middle third of its width) cut at that cell's edge: a
    synthetic value is drawn uniformly inside its bin, so a wide bin whose values crowd at one
    end (the last bins of a long tail: ages 64 to 96 where most are under 75) would spread
    them. Each bin is cut at most once; the cut follows noisy counts only."""
    out = list(bins)
    index = {float(e): i for i, e in enumerate(edges)}
    for lo, hi in zip(bins, bins[1:]):
        first, last = index.get(float(lo)), index.get(float(hi))
        if first is None or last is None or last - first < 2:
            continue
        part = mass[first:last]
        total = float(part.sum())
        if total <= 0:
            continue
        cut = first + int(np.searchsorted(np.cumsum(part), total / 2)) + 1  # the edge after the median cell
        where = (float(edges[cut]) - lo) / (hi - lo) if first < cut < last else 0.5
        if where < 1 / 3 or where > 2 / 3:
            out.append(float(edges[cut]))
    return sorted(set(out))


def _cut_equal(edges: np.ndarray, mass: np.ndarray, bins: int) -> list[float]:
    """Edges of about ``bins`` bins of equal mass over cells ``edges``: a cell heavier than a
    bin's share alone (a spike), and the remaining bins sharing the remaining mass after each cut."""
    cells = len(mass)
    out = [float(edges[0])]
    left_mass, left_bins = float(mass.sum()), max(int(bins), 1)
    acc = 0.0

    def target() -> float:
        return left_mass / max(left_bins, 1)

    for i in range(cells):
        if acc > 0 and mass[i] > target() and left_bins > 1:  # a spike: close the bin before it
            out.append(float(edges[i]))
            left_mass, left_bins, acc = left_mass - acc, left_bins - 1, 0.0
        acc += mass[i]
        if acc >= target() and i < cells - 1 and left_bins > 1:
            out.append(float(edges[i + 1]))
            left_mass, left_bins, acc = left_mass - acc, left_bins - 1, 0.0
    out.append(float(edges[-1]))
    return out


#: A bucket past the bounds joins them when its noisy count reaches this many noise deviations...
EXTEND_SIGMAS = 1.5
#: ... and lies at most this many buckets past the last one that did (a thin tail, such as a
#: column's few values at its cap, is found; a lone false positive far out is not reached).
EXTEND_GAP = 3


def extend_bounds(noisy: np.ndarray, first: int, last: int, sigma: float, zero: int) -> tuple[int, int]:
    """The bucket range ``first..last`` (a noisy magnitude histogram's passing buckets) widened
    over neighbouring buckets whose noisy counts reach ``EXTEND_SIGMAS * sigma``, across gaps of
    at most ``EXTEND_GAP`` buckets: the thin tails a strict threshold misses. It never crosses
    the ``zero`` bucket into the other sign (a column of counts must not gain negative values
    from a false positive: the strict threshold alone decides that). Post-processing."""
    noisy = np.asarray(noisy, dtype=np.float64)

    def walk(start: int, step: int) -> int:
        low, high = (zero, len(noisy) - 1) if start >= zero and step < 0 else \
            (0, zero) if start <= zero and step > 0 else (0, len(noisy) - 1)
        reached, gap, i = start, 0, start + step
        while low <= i <= high and gap < EXTEND_GAP:
            if noisy[i] >= EXTEND_SIGMAS * sigma:
                reached, gap = i, 0
            else:
                gap += 1
            i += step
        return reached

    return walk(first, -1), walk(last, 1)
