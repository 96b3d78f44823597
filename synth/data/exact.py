"""Exact (NON-PRIVATE) workload answers from the private data, for the data owner only."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from synth.data.reading import DEFAULT_CHUNK_ROWS, Progress, Source, scan
from synth.data.schema import Schema
from synth.data.tables import DEFAULT_MAX_CELLS
from synth.data.workload import Workload

__all__ = ["ExactAnswers", "exact_answers"]


@dataclass
class ExactAnswers:
    """True counts, one per query in workload order. Not differentially private."""

    answers: np.ndarray
    n_rows: int
    clipped: dict[str, int]
    dropped: int = 0  # rows left out by bad_rows="drop"


def exact_answers(
    source: Source,
    schema: Schema,
    workload: Workload,
    *,
    columns: str | Sequence[str] | None = None,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    max_cells: int = DEFAULT_MAX_CELLS,
    progress: Progress | None = None,
    bad_rows: str = "error",
) -> ExactAnswers:
    """Count every query of ``workload`` on the data in one streaming pass.

    ``workload`` must be built on ``schema.select(columns)``. One marginal table is built per
    column subset of the workload; the full universe is never materialized.
    """
    result = scan(
        source,
        schema,
        workload.subsets,
        columns=columns,
        chunk_rows=chunk_rows,
        max_cells=max_cells,
        progress=progress,
        bad_rows=bad_rows,
    )
    return ExactAnswers(workload.answer(result.tables), result.n_rows, result.clipped, result.dropped)
