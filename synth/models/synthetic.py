"""Synthetic rows from a released distribution: post-processing, so it costs no privacy.

Three steps, each usable alone:

1. ``round_counts``: integer counts per cell that sum to the requested row count, by
   controlled rounding (largest remainder, ties broken at random) or a multinomial draw;
2. ``sample_codes``: those counts as rows of integer codes, in random order (the order of
   synthetic rows must not reveal the cell order); ``iter_codes`` gives them in blocks of
   about ``SAMPLE_BLOCK_ROWS`` (``split_counts`` deals the counts into blocks), so writing
   10^8 rows holds one block, not every row;
3. ``decode_rows``: codes back to values: labels, integer codes, and for numeric columns a
   value drawn uniformly inside the row's bin (or the bin midpoint, as ``synth.data.reading.decode``);
   a missing code is a null (written as an empty CSV cell, or the schema's first missing token,
   and as a Parquet null).

``write_synthetic`` runs all three and writes a CSV (or Parquet) file atomically, sampling one
block and decoding one chunk at a time. Every random step takes ``rng: Generator | int | None`` (see ``synth.privacy.rng``);
a seeded run repeats exactly, whatever the chunk size.
"""

from __future__ import annotations

import contextlib
import numbers
import os
import shutil
from collections.abc import Callable, Iterable, Iterator
from typing import IO, TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from synth._io import atomic_write
from synth.data.reading import code_dtype, decode
from synth.data.schema import Categorical, Numeric, Schema
from synth.errors import SynthError
from synth.models.matching import all_pairs, match_pairs
from synth.models.sampling import METHODS, SAMPLE_BLOCK_ROWS, check_choice, check_rows, iter_codes
from synth.privacy.rng import child_rng, make_rng

if TYPE_CHECKING:
    from synth.models.model import Model

__all__ = ["check_capacity", "check_output_format", "decode_rows", "estimated_row_bytes", "sample_model", "write_synthetic"]

NUMERIC_MODES = ("uniform", "midpoint")
DEFAULT_CHUNK_ROWS = 100_000

Progress = Callable[[int, float], None]


# -- values ---------------------------------------------------------------------------------


def decode_rows(
    codes: np.ndarray,
    schema: Schema,
    numeric: str = "uniform",
    rng: np.random.Generator | int | None = None,
) -> pd.DataFrame:
    """Rows of codes as a DataFrame of values, with the schema's column names.

    Categorical columns give their labels and coded columns their codes. A numeric column
    gives, with ``numeric="midpoint"``, its bin's midpoint (as ``synth.data.reading.decode``); with
    ``numeric="uniform"``, a value drawn uniformly inside the row's bin ``[lo, hi)``. When
    every edge of the column is written as an integer (``18``, not ``18.0``; ``synth infer``
    writes integer edges for integer data), the draw is an integer, uniform over
    ``lo .. hi - 1`` (``lo .. hi`` in the last bin, which is closed). Every value read back
    under the schema lands in its own bin. A column's missing code gives a null: None among
    labels, NaN among float values, ``pd.NA`` in a nullable integer column (``Int64``: coded
    columns and integer-edged draws, so their values stay integers).

    The uniform draws take one double per numeric cell, row by row, so decoding a table in
    chunks with one generator gives the same values as decoding it at once.
    """
    check_choice("numeric", numeric, NUMERIC_MODES)
    frame = decode(codes, schema)  # validates the codes
    if numeric == "midpoint":
        return frame
    codes = np.asarray(codes)
    positions = [j for j, column in enumerate(schema) if isinstance(column, Numeric)]
    draws = make_rng(rng).random((codes.shape[0], len(positions)))
    for k, j in enumerate(positions):
        frame[schema[j].name] = _uniform_in_bins(schema[j], codes[:, j].astype(np.int64), draws[:, k])
    return frame


def _integer_edges(column: Numeric) -> bool:
    return all(isinstance(e, (int, np.integer)) and not isinstance(e, bool) for e in column.edges)


def _uniform_in_bins(column: Numeric, codes: np.ndarray, u: np.ndarray):
    """A value per row uniform in its bin, from ``u`` uniform in [0, 1) (a draw is taken for
    every row, so a missing one does not shift the others'). The missing code gives a null:
    NaN among floats, ``pd.NA`` in a nullable integer column (``Int64``) for integer edges."""
    absent = codes == column.missing_code if column.missing else None
    if absent is not None:
        codes = np.where(absent, 0, codes)
    edges = column.edge_array
    lo, hi = edges[codes], edges[codes + 1]
    if _integer_edges(column):
        width = hi - lo + (codes == column.n_values - 1)  # the last bin is closed
        values = (lo + np.minimum(np.floor(u * width), width - 1)).astype(np.int64)
        return values if absent is None else pd.arrays.IntegerArray(values, absent)
    values = lo + u * (hi - lo)
    values = np.minimum(values, np.nextafter(hi, lo))  # rounding could reach hi, which is the next bin
    if absent is not None:
        values[absent] = np.nan
    return values


# -- files ----------------------------------------------------------------------------------


def check_output_format(path: str | os.PathLike) -> bool:
    """True for a Parquet path (``.parquet``), False for CSV; ``SynthError`` when Parquet is
    asked for without pyarrow. Cheap: callers run it before any work."""
    if not str(path).lower().endswith(".parquet"):
        return False
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise SynthError(f"{path}: Parquet output needs pyarrow (pip install pyarrow); write .csv instead") from None
    return True


#: Bytes of memory per synthetic row while sampling (its cell index, shuffled in place).
_MEMORY_PER_ROW = 8
#: Bytes of memory per universe cell while rounding (probabilities, counts, remainders).
_MEMORY_PER_CELL = 24
#: Per-row arrays of ancestral sampling besides the codes (groups, ranks, values, order).
_FACTORED_ROW_ARRAYS = 6


def _is_factored(distribution: Any) -> bool:
    """A model that samples its own rows (``FactoredModel``), not a flat array over U."""
    return distribution is not None and not isinstance(distribution, np.ndarray) and hasattr(distribution,
                                                                                             "sample_codes")


def estimated_row_bytes(schema: Schema) -> float:
    """The mean length of a synthetic CSV row under ``schema``, from its labels and edges
    alone (no data): each column's mean value width, plus separators and the newline."""
    width = 0.0
    for column in schema:
        if isinstance(column, Categorical):
            width += float(np.mean([len(str(v)) for v in column.values]))
        elif isinstance(column, Numeric):
            width += max(len(str(e)) for e in column.edges) + (0 if _integer_edges(column) else 12)
        else:
            width += len(str(column.n_values - 1))
    return width + len(schema)


def check_capacity(path: object, schema: Schema, rows: int, distribution: Any = None, *, streamed: bool = True
                   ) -> None:
    """``SynthError`` before any work when ``rows`` synthetic rows cannot fit: in this
    machine's available memory (sampling holds one block's cell indices, the occupied cells
    and a table per universe cell; from a factored ``distribution``, a block's codes and a
    table per model cell; not ``streamed``, every row's values too), or on the disk that
    holds ``path`` (a regular file; streams are not checked)."""
    held = min(rows, SAMPLE_BLOCK_ROWS) if streamed else rows
    if _is_factored(distribution):
        needed = (_MEMORY_PER_ROW * (len(schema) + _FACTORED_ROW_ARRAYS) * held
                  + _MEMORY_PER_CELL * distribution.cells)
    else:
        needed = (_MEMORY_PER_ROW * (held + min(rows, schema.universe_size))
                  + _MEMORY_PER_CELL * schema.universe_size)
    if not streamed:
        needed += _MEMORY_PER_ROW * len(schema) * rows  # every row's values, at once
    available = _available_memory()
    if available is not None and needed > available:
        raise SynthError(f"{rows:,} synthetic rows need about {_size(needed)} of memory while sampling; this "
                         f"machine has {_size(available)} available: ask for fewer rows")
    if isinstance(path, (str, os.PathLike)) and str(path) != "-":
        from synth._io import is_stream

        if is_stream(path):
            return
        folder = os.path.dirname(os.path.abspath(path))
        try:
            free = shutil.disk_usage(folder).free
        except OSError:
            return
        size = estimated_row_bytes(schema) * rows
        if size > free:
            raise SynthError(f"{path}: {rows:,} synthetic rows need about {_size(size)} on disk, and {folder} has "
                             f"{_size(free)} free: ask for fewer rows")


def _available_memory() -> int | None:
    """MemAvailable from /proc/meminfo (Linux), else None (no check)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _size(size: float) -> str:
    for unit in ("bytes", "KB", "MB", "GB", "TB"):
        if size < 1000 or unit == "TB":
            return f"{size:,.0f} {unit}" if unit == "bytes" else f"{size:,.1f} {unit}"
        size /= 1000
    raise AssertionError("unreachable")


def write_synthetic(
    path: str | os.PathLike | IO[str],
    distribution,
    schema: Schema,
    rows: int,
    *,
    method: str = "round",
    numeric: str = "uniform",
    rng: np.random.Generator | int | None = None,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    progress: Progress | None = None,
) -> int:
    """Write ``rows`` synthetic rows to a CSV file (Parquet if ``path`` ends in ``.parquet``),
    or as CSV to an open text stream (e.g. stdout).

    The header is the schema's column names. The file appears only when complete (an error
    leaves no partial file). Rows are sampled ``SAMPLE_BLOCK_ROWS`` at a time (``iter_codes``)
    and decoded and written ``chunk_rows`` at a time, so memory does not grow with ``rows``;
    for a given seed the file does not depend on ``chunk_rows``.
    ``progress(rows_done, fraction_done)`` is called after each chunk. Returns the rows
    written. Parquet needs pyarrow; without it ``SynthError`` is raised before any work, as it
    is when the rows cannot fit in memory or on the disk (``check_capacity``).
    """
    stream = hasattr(path, "write")
    parquet = False if stream else check_output_format(path)
    rows = check_rows(rows)
    check_capacity(None if stream else path, schema, rows, distribution)
    check_choice("method", method, METHODS)
    check_choice("numeric", numeric, NUMERIC_MODES)
    if not isinstance(chunk_rows, numbers.Integral) or isinstance(chunk_rows, bool):
        raise TypeError(f"chunk_rows ({chunk_rows!r}) must be an integer")
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows ({chunk_rows}) must be >= 1")
    rng = make_rng(rng)
    sampling = child_rng(rng)  # blocks are sampled between chunks: their draws must not shift the decoding's
    chunks = (decode_rows(codes, schema, numeric, rng)
              for codes in _rechunk(_code_blocks(distribution, schema, rows, method, sampling), chunk_rows,
                                    len(schema), code_dtype(schema)))
    done = 0
    mode, options = ("wb", {}) if parquet else ("w", {"newline": "", "encoding": "utf-8"})
    opened = contextlib.nullcontext(path) if stream else atomic_write(path, mode, **options)
    with opened as handle:
        write = _parquet_writer(handle, schema, numeric) if parquet else _csv_writer(handle, schema)
        for frame in chunks:
            write(frame)
            done += len(frame)
            if progress is not None:
                progress(done, done / rows if rows else 1.0)
        if parquet:
            write(None)
    return done


def _csv_writer(handle, schema: Schema) -> Callable[[pd.DataFrame], None]:
    """Writes frames as CSV under one header; a missing value as an empty cell, or as the
    schema's first missing token (the table then reads as the one the schema was written for)."""
    first = [True]
    missing = schema.missing_tokens[0] if schema.missing_tokens else ""

    def write(frame: pd.DataFrame) -> None:
        frame.to_csv(handle, header=first[0], index=False, lineterminator="\n", na_rep=missing)
        first[0] = False

    return write


def _parquet_writer(handle, schema: Schema, numeric: str) -> Callable[[pd.DataFrame | None], None]:
    """Writes frames as row groups under one Arrow schema fixed by ``schema`` (not by the data);
    ``write(None)`` closes the file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    fields, as_text = [], []
    for column in schema:
        if isinstance(column, Categorical):
            if all(isinstance(v, (int, np.integer)) for v in column.values):
                kind = pa.int64()
            elif column.numeric_labels:
                kind = pa.float64()
            else:
                kind = pa.string()
                if not all(isinstance(v, str) for v in column.values):
                    as_text.append(column.name)  # labels of both kinds: all written as text
        elif isinstance(column, Numeric):
            kind = pa.int64() if numeric == "uniform" and _integer_edges(column) else pa.float64()
        else:
            kind = pa.int64()
        fields.append(pa.field(column.name, kind))
    arrow_schema = pa.schema(fields)
    writer = pq.ParquetWriter(handle, arrow_schema)

    def write(frame: pd.DataFrame | None) -> None:
        if frame is None:
            writer.close()
            return
        for name in as_text:
            frame[name] = frame[name].map(str, na_action="ignore")  # a missing label stays null
        writer.write_table(pa.Table.from_pandas(frame, schema=arrow_schema, preserve_index=False))

    return write


def sample_model(
    model: Model,
    rows: int | None = None,
    *,
    method: str = "round",
    numeric: str = "uniform",
    rng: np.random.Generator | int | None = None,
) -> pd.DataFrame:
    """Synthetic rows of a ``Model`` as a DataFrame; ``rows`` defaults to ``model.rows``, rounded."""
    if rows is None:
        rows = int(np.rint(model.rows))
    check_capacity(None, model.schema, check_rows(rows), model.distribution, streamed=False)
    rng = make_rng(rng)
    sampling = child_rng(rng)  # as write_synthetic draws: the same seed gives the same rows
    codes = np.concatenate([*_code_blocks(model.distribution, model.schema, rows, method, sampling)])
    return decode_rows(codes, model.schema, numeric, rng)


#: Pair matching is skipped past this many pairs, or this many cells in their tables, or
#: this many rows (a sweep costs about 10 s a million rows of 14 columns; past a few million
#: rows the sampler's own gap to the model is a fraction of what it is at n ~ 50,000).
MATCH_MAX_PAIRS = 1000
MATCH_MAX_CELLS = 10**7
MATCH_MAX_ROWS = 2 * 10**6


def _code_blocks(distribution, schema: Schema, rows: int, method: str, rng: np.random.Generator
                 ) -> Iterator[np.ndarray]:
    """The rows' codes in blocks (a factored model samples its own, and each of its blocks is
    then moved toward the model's two-way marginals: ``synth.models.matching``)."""
    if _is_factored(distribution):
        blocks = distribution.iter_sample_codes(rows, method, rng)
        pairs = all_pairs(schema)
        if (method != "round" or rows > MATCH_MAX_ROWS or not 0 < len(pairs) <= MATCH_MAX_PAIRS
                or sum(schema[a].size * schema[b].size for a, b in pairs) > MATCH_MAX_CELLS):
            return blocks  # the cells are counted before the model computes any table
        tables = dict(zip(pairs, distribution.marginals(pairs)))
        return (_matched(block, schema, tables, rng) for block in blocks)
    return iter_codes(distribution, schema, rows, method, rng)


def _matched(block: np.ndarray, schema: Schema, tables: dict, rng: np.random.Generator) -> np.ndarray:
    match_pairs(block, schema, tables, rng)
    return block


def _rechunk(blocks: Iterable[np.ndarray], chunk_rows: int, width: int, dtype) -> Iterator[np.ndarray]:
    """Rows of ``blocks`` regrouped into chunks of ``chunk_rows`` (the last shorter; one empty
    chunk when there are no rows, so a file still gets its header)."""
    pending: list[np.ndarray] = []
    held = 0
    sent = False
    for block in blocks:
        start = 0
        while start < block.shape[0]:
            piece = block[start:start + chunk_rows - held]
            pending.append(piece)
            held += piece.shape[0]
            start += piece.shape[0]
            if held == chunk_rows:
                yield pending[0] if len(pending) == 1 else np.concatenate(pending)
                pending, held, sent = [], 0, True
    if held or not sent:
        yield np.concatenate(pending) if pending else np.zeros((0, width), dtype=dtype)


