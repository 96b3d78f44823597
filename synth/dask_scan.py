"""The planned scan on Dask: the same tables as ``synth.data.scan``, counted where the data lives.

Each partition is encoded and counted by the in-process code (``synth.data.encode``, then
``synth.counts.count_encoded``: the same validation, the same Numba kernel), on the workers; a
CSV path is split by ``dask.bytes.read_bytes`` into blocks of whole lines, each read by the
in-process CSV reader (its fast integer path, pandas for the rest), and a Parquet path into its
row groups, each read by the in-process Parquet reader; the partitions' counts are then summed in a tree on the workers too (``FAN_IN`` at a time),
and only the final tables come back. Input: a Dask DataFrame, or a path that Dask reads
(CSV, Parquet file or folder; only the needed columns). A bad value stops the scan with one
error naming the source, the partition and the row within it; nothing is returned.

Dask is an optional extra (``pip install 'synth[dask]'``): ``require_dask`` says so in one line.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from .counts import Counts, ScanPlan, count_encoded, plan_scan
from .data import (Progress, _first_line, check_bad_rows, encode, encode_csv_lines, is_parquet, parquet_chunks,
                   parquet_row_groups)
from .errors import DataError, SynthError
from .schema import Categorical, Schema
from .tables import DEFAULT_MAX_CELLS

__all__ = ["FAN_IN", "LOCAL", "connect", "is_dask_frame", "require_dask", "scan_dask"]

#: Partial counts merged per task of the tree sum.
FAN_IN = 8
#: ``--scheduler local``: start a LocalCluster on this machine.
LOCAL = "local"
#: Bytes of CSV per partition when Dask reads a CSV path.
CSV_BLOCK_BYTES = 64 * 2**20
#: Rows per partition (a file's consecutive row groups, at least one) when Dask reads Parquet:
#: about a CSV block's worth, so that a task's fixed costs stay small beside its work.
PARQUET_PIECE_ROWS = 4 * 2**20


def require_dask(what: str = "the Dask scan") -> None:
    """``SynthError`` in one line when dask.distributed is not installed."""
    try:
        for module in ("dask", "distributed"):
            importlib.import_module(module)
        if importlib.util.find_spec("dask.dataframe") is None:  # found, not imported: 0.7 s a path scan never needs
            raise ImportError("dask.dataframe")
    except (ImportError, ValueError):  # ValueError: find_spec of a module set to None
        raise SynthError(f"{what} needs Dask: pip install 'synth[dask]' (from a checkout: pip install -e \".[dask]\")"
                         ) from None


def is_dask_frame(data: object) -> bool:
    """Whether ``data`` is a Dask DataFrame (without importing Dask when it is not loaded)."""
    module = type(data).__module__ or ""
    return module.startswith("dask") and hasattr(data, "to_delayed") and hasattr(data, "columns")


def connect(scheduler: str):
    """A ``distributed.Client``: to the scheduler at ``scheduler``, or on a new LocalCluster
    for ``"local"`` (closed with the client)."""
    require_dask("--scheduler")
    from distributed import Client, LocalCluster

    if scheduler == LOCAL:
        cluster = LocalCluster(n_workers=min(2, os.cpu_count() or 1), threads_per_worker=1, processes=True,
                               dashboard_address=":0")
        client = Client(cluster)
        client._synth_cluster = cluster  # closed by ``close``
        return client
    try:
        return Client(scheduler, timeout="10s")
    except OSError as exc:
        raise SynthError(f"--scheduler {scheduler}: cannot reach a Dask scheduler there ({exc})") from None


def close(client) -> None:
    """Close a client from ``connect`` (and its LocalCluster, if it started one)."""
    cluster = getattr(client, "_synth_cluster", None)
    client.close()
    if cluster is not None:
        cluster.close()


def scan_dask(
    source: Any,
    schema: Schema,
    subsets: Iterable[Sequence[str]],
    *,
    columns: str | Sequence[str] | None = None,
    client=None,
    max_cells: int = DEFAULT_MAX_CELLS,
    progress: Progress | None = None,
    bad_rows: str = "error",
) -> Counts:
    """``synth.data.scan`` on Dask: the row count and the tables of ``subsets``.

    ``source`` is a Dask DataFrame or a path (CSV, Parquet file or folder); ``client`` a
    ``distributed.Client`` (None: the current one, else Dask's local scheduler, without
    progress). ``progress(rows_done, fraction)`` after each partition.
    """
    require_dask()
    check_bad_rows(bad_rows)
    selected = schema.select(columns)
    plan = plan_scan(selected, subsets, max_cells=max_cells)
    import dask

    path = Path(source) if isinstance(source, (str, os.PathLike)) and not is_dask_frame(source) else None
    blocks = _csv_blocks(path, schema, selected) if path is not None and not is_parquet(path) else None
    if path is not None and is_parquet(path):
        name, pieces = str(path), _parquet_pieces(path, schema, selected)
        leaves = [dask.delayed(_count_parquet_piece)(*piece, plan, k, len(pieces), bad_rows)
                  for k, piece in enumerate(pieces)]
    elif blocks is not None:
        name, header, parts = blocks
        leaves = [dask.delayed(_count_csv_block)(part, header, plan, name, k, len(parts), bad_rows)
                  for k, part in enumerate(parts)]
    else:  # a Dask DataFrame, or a CSV whose header Dask's reader must parse
        frame, name = _frame(source, schema, selected)
        parts = frame.to_delayed()
        leaves = [dask.delayed(_count_partition)(part, plan, name, k, len(parts), bad_rows)
                  for k, part in enumerate(parts)]
    if client is None:
        client = _current_client()
    if client is None:
        (total,) = dask.compute(_tree(leaves, dask.delayed(_merge)))
    else:
        total = _on_cluster(client, leaves, progress)
    if total.n_rows == 0:
        raise DataError(f"{name}: no row fits the schema (every row was dropped by --bad-rows drop)"
                        if bad_rows == "drop" else f"{name}: no data rows")
    return total


def _current_client():
    from distributed import default_client

    try:
        return default_client()
    except ValueError:
        return None


def _on_cluster(client, leaves, progress: Progress | None) -> Counts:
    """Leaves as futures, each one's row count (for progress, as each finishes) and the tree
    sum all submitted at once, so the workers never wait on the client; the sum stays on the
    workers until it is whole."""
    from distributed import as_completed

    futures = client.compute(leaves)
    sizes = client.map(_rows_of, futures, pure=False)
    total = _tree(futures, lambda *parts: client.submit(_merge, *parts, pure=False))
    try:
        rows = done = 0
        for size in as_completed(sizes):
            rows += size.result()  # re-raises the partition's error
            done += 1
            if progress is not None:
                progress(rows, done / len(futures))
        return total.result()
    except BaseException:
        client.cancel([*futures, *sizes, total])
        raise


def _tree(leaves: list, merge) -> Any:
    """The sum of ``leaves`` by ``merge`` of up to ``FAN_IN`` at a time (delayed objects or futures)."""
    level = leaves
    while len(level) > 1:
        level = [merge(*level[i: i + FAN_IN]) for i in range(0, len(level), FAN_IN)]
    return level[0]


def _rows_of(counts: Counts) -> int:
    return counts.n_rows


def _merge(*parts: Counts) -> Counts:
    total = parts[0]
    for part in parts[1:]:
        total = total.merge(part)
    return total


def _count_partition(frame, plan: ScanPlan, name: str, index: int, partitions: int, bad_rows: str) -> Counts:
    """One partition's counts (on a worker): encoded and checked as in-process chunks are."""
    where = f"{name} (partition {index + 1} of {partitions})"
    try:
        encoded = encode(frame, plan.schema, source=where, bad_rows=bad_rows)
    except DataError:
        raise
    except Exception as exc:  # noqa: BLE001 - pandas/pyarrow errors of a damaged block
        raise DataError(f"{where}: cannot read: {_first_line(exc)}") from None
    return count_encoded([encoded], plan, parts=1)  # the cluster runs tasks in parallel: no threads within one


def _csv_blocks(path: Path, schema: Schema, selected: Schema):
    """For a CSV with a plain header: its name, header and blocks of whole lines
    (``dask.bytes.read_bytes``, ``CSV_BLOCK_BYTES`` each, the first holding the header),
    for the in-process CSV reader on each block; else None (Dask's own reader)."""
    from dask.bytes import read_bytes

    from .data import _check_header, _read_header

    header = _read_header(path)
    _check_header(header, schema, selected, path)
    with open(path, "rb") as handle:
        if b'"' in handle.readline():
            return None
    _, (blocks,) = read_bytes(str(path), delimiter=b"\n", blocksize=CSV_BLOCK_BYTES, sample=False)
    return str(path), header, blocks


def _count_csv_block(lines: bytes, header: list[str], plan: ScanPlan, name: str, index: int, partitions: int,
                     bad_rows: str) -> Counts:
    """One block's counts (on a worker), read as ``synth.data.scan`` reads a file."""
    where = f"{name} (partition {index + 1} of {partitions})"
    if index == 0:
        lines = lines[lines.find(b"\n") + 1:] if b"\n" in lines else b""  # the header
    return count_encoded(encode_csv_lines(lines, header, plan.schema, source=where, bad_rows=bad_rows), plan,
                         parts=1)  # the cluster runs tasks in parallel: no threads within one


def _parquet_pieces(path: Path, schema: Schema, selected: Schema) -> list[tuple[str, list[int], int]]:
    """A Parquet file's or folder's row groups gathered into pieces of up to
    ``PARQUET_PIECE_ROWS`` rows (a file's consecutive groups), each (file, groups, first row in
    the file), read on a worker by the in-process Parquet reader (Arrow's buffers straight to
    codes; ``dask.dataframe.read_parquet`` would build a pandas frame of every partition)."""
    pieces: list[tuple[str, list[int], int]] = []
    held = 0  # rows of the last piece
    for file, group, first, rows in parquet_row_groups(path, schema, selected):
        if pieces and pieces[-1][0] == file and held + rows <= PARQUET_PIECE_ROWS:
            pieces[-1][1].append(group)
            held += rows
        else:
            pieces.append((file, [group], first))
            held = rows
    if not pieces:
        raise DataError(f"{path}: has columns but no data rows")
    return pieces


def _count_parquet_piece(file: str, groups: list[int], first_row: int, plan: ScanPlan, index: int, pieces: int,
                         bad_rows: str) -> Counts:
    """One piece's counts (on a worker), read as ``synth.data.scan`` reads the file."""
    where = f"{file} (partition {index + 1} of {pieces})"
    return count_encoded(parquet_chunks(file, plan.schema, source=where, bad_rows=bad_rows, row_groups=groups,
                                        first_row=first_row, threads=False), plan, parts=1)  # tasks run side by side


def _frame(source: Any, schema: Schema, selected: Schema):
    """A Dask DataFrame of the selected columns, and the name errors give it."""
    import dask.dataframe as dd

    if is_dask_frame(source):
        missing = [c for c in selected.names if c not in source.columns]
        if missing:
            raise DataError(f"Dask DataFrame: column {missing[0]!r} is in the schema but missing from the data")
        return source[list(selected.names)], "Dask DataFrame"
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(f"data must be a Dask DataFrame or a path, not {type(source).__name__}")
    path = Path(source)
    names = list(selected.names)
    from .data import _check_header, _read_header

    _check_header(_read_header(path), schema, selected, path)
    dtypes = {c.name: "category" for c in selected if isinstance(c, Categorical) and not c.numeric_labels}
    frame = dd.read_csv(str(path), usecols=names, dtype=dtypes, na_values=[""], keep_default_na=False,
                        blocksize=CSV_BLOCK_BYTES, encoding="utf-8")
    return frame, str(path)

