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
   and as a Parquet null). A numeric column with ``digits`` gets values with that many decimal
   places, and one with a ``time`` unit whole days or seconds written as ISO texts.

A table also gets the ignored columns the schema gives a role (``Schema.roles``): fresh ids
made from the row number alone (never a value of the data), and free text left out or filled
with ``PLACEHOLDER`` (``free_text``), each in its place in the data's column order when the
schema records it (``Schema.order``).

``write_synthetic`` runs all three and writes a CSV (or Parquet) file atomically, sampling one
block and decoding one chunk at a time.

No synthetic row breaks one of the schema's public constraints (``synth.data.constraints``):
a dense distribution is sampled with the cells they rule out at zero mass; a factored model
gets them as factors where they fit (``synth.models.constrained``), and any row that still
breaks one (a constraint past the model's cap, or a value moved by pair matching) is dropped
and replaced by a fresh draw (rejection), so the rows follow the model conditioned on the
constraints. Decoding writes a numeric column that is a function of a categorical or coded
column as the mapped number itself, not a draw inside its bin. All of it is post-processing. Every random step takes ``rng: Generator | int | None`` (see ``synth.privacy.rng``);
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
from synth.data.constraints import Function, compile_constraints, keeps_all
from synth.data.reading import code_dtype, decode
from synth.data.schema import Categorical, Numeric, Schema
from synth.data.values import format_times
from synth.errors import SynthError
from synth.models.matching import all_pairs, match_pairs
from synth.models.sampling import METHODS, SAMPLE_BLOCK_ROWS, check_choice, check_rows, iter_codes, repair_functions
from synth.privacy.rng import child_rng, make_rng

if TYPE_CHECKING:
    from synth.models.model import Model

__all__ = ["check_capacity", "check_output_format", "decode_rows", "estimated_row_bytes", "output_columns",
           "sample_model", "write_synthetic", "FREE_TEXT", "PLACEHOLDER"]

NUMERIC_MODES = ("uniform", "midpoint")
#: What a synthetic table does with the free-text columns the schema names (role "text").
FREE_TEXT = ("drop", "placeholder")
#: The text every cell of a free-text column holds with ``free_text="placeholder"``.
PLACEHOLDER = "[free text]"
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

    A column with ``digits`` gives values with that many decimal places (integers for 0),
    drawn uniformly among those inside the bin (with ``numeric="midpoint"``: the one nearest
    the midpoint); a column with a ``time`` unit gives whole days or seconds the same way,
    as ISO texts (``2024-03-01``, ``2024-03-01T12:30:00``; None when missing).

    The uniform draws take one double per numeric cell, row by row, so decoding a table in
    chunks with one generator gives the same values as decoding it at once. A numeric column
    that a schema constraint makes a function of a categorical or coded column gets, in either
    mode, the mapped number itself where that column's value is mapped (``_mapped_numbers``).
    """
    check_choice("numeric", numeric, NUMERIC_MODES)
    frame = decode(codes, schema)  # validates the codes
    codes = np.asarray(codes)
    if numeric == "uniform":
        positions = [j for j, column in enumerate(schema) if isinstance(column, Numeric)]
        draws = make_rng(rng).random((codes.shape[0], len(positions)))
        for k, j in enumerate(positions):
            frame[schema[j].name] = _uniform_in_bins(schema[j], codes[:, j].astype(np.int64), draws[:, k])
    else:  # midpoints, but on a column's grid (digits, whole days or seconds) when it has one
        for j, column in enumerate(schema):
            if isinstance(column, Numeric) and column.grid is not None:
                frame[column.name] = _grid_values(column, codes[:, j].astype(np.int64), None)
    _mapped_numbers(frame, codes, schema)
    return frame


def _mapped_numbers(frame: pd.DataFrame, codes: np.ndarray, schema: Schema) -> None:
    """Write, in place, the exact mapped value of each function constraint whose column is
    numeric and whose ``of`` is not (a numeric ``of`` names only a bin, so its rows keep their
    draw, which lies in the mapped bin): the rows of a mapped value of ``of`` get the number
    it maps to (none where it maps to null, nor a fraction in a column of integer draws, nor
    in a time column, whose draws are dates in the mapped bin)."""
    for constraint in schema.constraints:
        if not (isinstance(constraint, Function) and isinstance(schema[constraint.column], Numeric)
                and not isinstance(schema[constraint.of], Numeric)
                and getattr(schema[constraint.column], "time", None) is None):  # a time column writes texts
            continue
        of, name = schema[constraint.of], constraint.column
        series = frame[name].copy()
        for key, value in constraint.mapping:
            whole = pd.api.types.is_integer_dtype(series.dtype)
            if value is None or (whole and not float(value).is_integer()):
                continue  # an integer column keeps its draw (in the mapped bin) for a fraction
            rows = codes[:, schema.index(constraint.of)] == of.code_of(key)
            series[rows] = int(value) if whole else float(value)
        frame[name] = series


def _integer_edges(column: Numeric) -> bool:
    return all(isinstance(e, (int, np.integer)) and not isinstance(e, bool) for e in column.edges)


def _uniform_in_bins(column: Numeric, codes: np.ndarray, u: np.ndarray):
    """A value per row uniform in its bin, from ``u`` uniform in [0, 1) (a draw is taken for
    every row, so a missing one does not shift the others'). The missing code gives a null:
    NaN among floats, ``pd.NA`` in a nullable integer column (``Int64``) for integer edges."""
    if column.grid is not None:
        return _grid_values(column, codes, u)
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


def _integer_output(column: Numeric, numeric: str) -> bool:
    """Whether a numeric column's synthetic values are integers (int64): ``digits`` 0 (within
    the int64 range), or, without digits or time, integer edges drawn uniformly."""
    if column.time is not None:
        return False
    if column.digits is not None:
        return column.digits == 0 and float(np.abs(column.edge_array).max()) < 2.0**62
    return numeric == "uniform" and _integer_edges(column)


def _grid_values(column: Numeric, codes: np.ndarray, u: np.ndarray | None):
    """Values on a column's grid (``Numeric.grid``: ``digits`` decimal places, or whole days or
    seconds), one per row inside its bin: uniform among the bin's grid values by ``u``, or, for
    ``u`` None, the one nearest the bin's midpoint. A time column's as ISO texts (None when
    missing); integers for ``digits`` 0; floats else (NaN when missing)."""
    absent = codes == column.missing_code if column.missing else np.zeros(len(codes), dtype=bool)
    codes = np.where(absent, 0, codes)
    first, last = column.grid_codes
    low, high = first[codes], last[codes]
    if u is None:
        k = np.clip(np.rint(column.midpoints()[codes] * column.grid), low, high)
    else:
        k = low + np.minimum(np.floor(u * (high - low + 1)), high - low)
    if column.time is not None:
        texts = format_times(k, column.time)
        texts[absent] = None
        return texts
    if _integer_output(column, "uniform"):
        values = k.astype(np.int64)
        return pd.arrays.IntegerArray(values, absent) if column.missing else values
    values = k / column.grid  # the float nearest the decimal k / 10**digits
    edges = column.edge_array
    top = np.where(codes == column.n_values - 1, edges[codes + 1], np.nextafter(edges[codes + 1], -np.inf))
    values = np.clip(values, edges[codes], top)  # a grid of more values than floats hold stays inside too
    values[absent] = np.nan
    return values


def output_columns(schema: Schema, free_text: str = "drop") -> list[str]:
    """The columns of a synthetic table, in order: the schema's, in its order, and the ignored
    columns with a role (``Schema.roles``; free text only with ``free_text="placeholder"``),
    each placed where the data's column order (``Schema.order``) puts it among the schema's
    columns; without one, identifiers first and free text last."""
    check_choice("free_text", free_text, FREE_TEXT)
    extra = [name for name, role in schema.roles.items() if role != "text" or free_text == "placeholder"]
    out = list(schema.names)
    known = [name for name in schema.order if name in extra]
    for name in known:  # before the first schema column that follows it in the data
        after = schema.order[schema.order.index(name) + 1:]
        following = next((n for n in after if n in schema), None)
        out.insert(out.index(following) if following is not None else len(out), name)
    unknown = [name for name in extra if name not in known]
    ids = [name for name in unknown if schema.roles[name] != "text"]
    return ids + out + [name for name in unknown if name not in ids]


def _with_roles(frame: pd.DataFrame, schema: Schema, free_text: str, first_row: int, rows: int) -> pd.DataFrame:
    """``frame`` (rows ``first_row``, ``first_row + 1``, ... of ``rows``, from 1) with the role
    columns filled in (``output_columns``): ids from the row numbers alone, the placeholder."""
    names = output_columns(schema, free_text)
    if len(names) == len(schema):
        return frame
    numbers = np.arange(first_row, first_row + len(frame), dtype=np.int64)
    width = max(6, len(str(rows)))
    for name in names:
        role = schema.roles.get(name) if name not in schema else None
        if role == "integer-identifier":
            frame[name] = numbers
        elif role == "identifier":
            frame[name] = np.array([f"syn-{i:0{width}d}" for i in numbers.tolist()], dtype=object)
        elif role == "text":
            frame[name] = np.full(len(frame), PLACEHOLDER, dtype=object)
    return frame[names]


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
        elif isinstance(column, Numeric) and column.time is not None:
            width += 10 if column.time == "date" else 19
        elif isinstance(column, Numeric):
            width += max(len(str(e)) for e in column.edges) + (0 if _integer_edges(column) else 12)
        else:
            width += len(str(column.n_values - 1))
    roles = [role for role in schema.roles.values() if role != "text"]  # a placeholder is not counted
    width += sum(11 if role == "identifier" else 7 for role in roles)
    return width + len(schema) + len(roles)


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
    free_text: str = "drop",
) -> int:
    """Write ``rows`` synthetic rows to a CSV file (Parquet if ``path`` ends in ``.parquet``),
    or as CSV to an open text stream (e.g. stdout).

    The header is the schema's column names. The file appears only when complete (an error
    leaves no partial file). Rows are sampled ``SAMPLE_BLOCK_ROWS`` at a time (``iter_codes``)
    and decoded and written ``chunk_rows`` at a time, so memory does not grow with ``rows``;
    for a given seed the file does not depend on ``chunk_rows``.
    ``progress(rows_done, fraction_done)`` is called after each chunk. Returns the rows
    written. The ignored columns with a role are filled in (``output_columns``; free text
    left out, or ``PLACEHOLDER`` with ``free_text="placeholder"``). Parquet needs pyarrow; without it ``SynthError`` is raised before any work, as it
    is when the rows cannot fit in memory or on the disk (``check_capacity``).
    """
    stream = hasattr(path, "write")
    parquet = False if stream else check_output_format(path)
    rows = check_rows(rows)
    check_capacity(None if stream else path, schema, rows, distribution)
    check_choice("method", method, METHODS)
    check_choice("numeric", numeric, NUMERIC_MODES)
    check_choice("free_text", free_text, FREE_TEXT)
    if not isinstance(chunk_rows, numbers.Integral) or isinstance(chunk_rows, bool):
        raise TypeError(f"chunk_rows ({chunk_rows!r}) must be an integer")
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows ({chunk_rows}) must be >= 1")
    rng = make_rng(rng)
    sampling = child_rng(rng)  # blocks are sampled between chunks: their draws must not shift the decoding's
    blocks = _rechunk(_code_blocks(distribution, schema, rows, method, sampling), chunk_rows, len(schema),
                      code_dtype(schema))
    chunks = _decoded_chunks(blocks, schema, numeric, rng, free_text, rows)
    done = 0
    mode, options = ("wb", {}) if parquet else ("w", {"newline": "", "encoding": "utf-8"})
    opened = contextlib.nullcontext(path) if stream else atomic_write(path, mode, **options)
    with opened as handle:
        write = _parquet_writer(handle, schema, numeric, free_text) if parquet else _csv_writer(handle, schema)
        for frame in chunks:
            write(frame)
            done += len(frame)
            if progress is not None:
                progress(done, done / rows if rows else 1.0)
        if parquet:
            write(None)
    return done


def _decoded_chunks(blocks: Iterable[np.ndarray], schema: Schema, numeric: str, rng: np.random.Generator,
                    free_text: str, rows: int) -> Iterator[pd.DataFrame]:
    """Each block of codes decoded (``decode_rows``), with its role columns (``_with_roles``)."""
    done = 0
    for codes in blocks:
        frame = _with_roles(decode_rows(codes, schema, numeric, rng), schema, free_text, done + 1, rows)
        done += len(frame)
        yield frame


def _csv_writer(handle, schema: Schema) -> Callable[[pd.DataFrame], None]:
    """Writes frames as CSV under one header; a missing value as an empty cell, or as the
    schema's first missing token (the table then reads as the one the schema was written for)."""
    first = [True]
    missing = schema.missing_tokens[0] if schema.missing_tokens else ""

    def write(frame: pd.DataFrame) -> None:
        frame.to_csv(handle, header=first[0], index=False, lineterminator="\n", na_rep=missing)
        first[0] = False

    return write


def _parquet_writer(handle, schema: Schema, numeric: str, free_text: str = "drop"
                    ) -> Callable[[pd.DataFrame | None], None]:
    """Writes frames as row groups under one Arrow schema fixed by ``schema`` (not by the data);
    ``write(None)`` closes the file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    fields, as_text = [], []
    for name in output_columns(schema, free_text):
        if name not in schema:  # a role column: ids and the placeholder
            fields.append(pa.field(name, pa.int64() if schema.roles[name] == "integer-identifier" else pa.string()))
            continue
        column = schema[name]
        if isinstance(column, Categorical):
            if all(isinstance(v, (int, np.integer)) for v in column.values):
                kind = pa.int64()
            elif column.numeric_labels:
                kind = pa.float64()
            else:
                kind = pa.string()
                if not all(isinstance(v, str) for v in column.values):
                    as_text.append(column.name)  # labels of both kinds: all written as text
        elif isinstance(column, Numeric) and column.time is not None:
            kind = pa.string()  # ISO texts, as in a CSV
        elif isinstance(column, Numeric):
            kind = pa.int64() if _integer_output(column, numeric) else pa.float64()
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
    free_text: str = "drop",
) -> pd.DataFrame:
    """Synthetic rows of a ``Model`` as a DataFrame; ``rows`` defaults to ``model.rows``, rounded.
    The ignored columns with a role are filled in as ``write_synthetic`` fills them."""
    check_choice("free_text", free_text, FREE_TEXT)
    if rows is None:
        rows = int(np.rint(model.rows))
    check_capacity(None, model.schema, check_rows(rows), model.distribution, streamed=False)
    rng = make_rng(rng)
    sampling = child_rng(rng)  # as write_synthetic draws: the same seed gives the same rows
    codes = np.concatenate([*_code_blocks(model.distribution, model.schema, rows, method, sampling)])
    return _with_roles(decode_rows(codes, model.schema, numeric, rng), model.schema, free_text, 1, rows)


#: Pair matching is skipped past this many pairs, or this many cells in their tables, or
#: this many rows (a sweep costs about 10 s a million rows of 14 columns; past a few million
#: rows the sampler's own gap to the model is a fraction of what it is at n ~ 50,000).
MATCH_MAX_PAIRS = 1000
MATCH_MAX_CELLS = 10**7
MATCH_MAX_ROWS = 2 * 10**6


def _code_blocks(distribution, schema: Schema, rows: int, method: str, rng: np.random.Generator
                 ) -> Iterator[np.ndarray]:
    """The rows' codes in blocks (a factored model samples its own, and each of its blocks is
    then moved toward the model's two-way marginals: ``synth.models.matching``), none of them
    breaking a constraint of the schema (``_kept_blocks``)."""
    if schema.constraints:
        return _kept_blocks(distribution, schema, rows, method, rng)
    return _model_blocks(distribution, schema, rows, method, rng)


#: Most rounds of fresh draws that replace rows dropped for breaking a constraint.
MAX_REDRAWS = 100


def _kept_blocks(distribution, schema: Schema, rows: int, method: str, rng: np.random.Generator
                 ) -> Iterator[np.ndarray]:
    """``_model_blocks`` of the distribution with the constraints applied (``synth.models.constrained``),
    each block less its rows that break a constraint; as many rows as were dropped are then
    drawn afresh, and kept only where they break none, until ``rows`` are given (rejection
    sampling: the rows follow the model conditioned on the constraints). A dense
    distribution never gives such a row; a factored model may (a constraint past its cap, a
    value moved by pair matching). ``SynthError`` when the model all but never gives a row
    that keeps them."""
    from synth.models.constrained import constrain_distribution

    compiled = compile_constraints(schema)
    if _is_factored(distribution):
        distribution = constrain_distribution(distribution, schema)
    short, drawn, kept = 0, 0, 0
    for block in _model_blocks(distribution, schema, rows, method, rng):
        keep = keeps_all(repair_functions(block, schema), compiled)
        drawn, kept = drawn + block.shape[0], kept + int(keep.sum())
        short += block.shape[0] - int(keep.sum())
        yield block if keep.all() else block[keep]
    for _ in range(MAX_REDRAWS):
        if short == 0:
            return
        rate = max(kept / drawn if drawn else 1.0, 1e-3)
        draw = min(max(short, int(np.ceil(1.2 * short / rate))), max(short, SAMPLE_BLOCK_ROWS))
        for block in _model_blocks(distribution, schema, draw, method, rng):
            keep = keeps_all(repair_functions(block, schema), compiled)
            drawn, kept = drawn + block.shape[0], kept + int(keep.sum())
            block = block[keep][:short]
            short -= block.shape[0]
            if block.shape[0]:
                yield block
    if short:
        raise SynthError(f"the model all but never gives a row that keeps the schema's constraints ({kept:,} of "
                         f"{drawn:,} rows drawn kept them): check them against the data")


def _model_blocks(distribution, schema: Schema, rows: int, method: str, rng: np.random.Generator
                  ) -> Iterator[np.ndarray]:
    """The model's rows in blocks (a factored model's moved toward its two-way marginals)."""
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


