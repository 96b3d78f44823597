"""The planned scan on Dask: the same tables as ``synth.data.reading.scan``, counted where the data lives.

Each partition is encoded and counted by the in-process code (``synth.data.reading.encode``, then
``synth.data.counts.count_encoded``: the same validation, the same Numba kernel), on the workers; a
CSV path is split by ``dask.bytes.read_bytes`` into blocks of whole lines, each read by the
in-process CSV reader (its fast integer path, pandas for the rest; any header, quoted or not),
and a Parquet path into pieces of its row groups, each read by the in-process Parquet reader;
the partitions' counts are then summed in a tree on the workers too (``FAN_IN`` at a time), and
only the final tables come back. Input: a Dask DataFrame, or a path (CSV, Parquet file or
folder; only the needed columns are decoded).

A bad value stops the scan with the in-process reader's one-line error, naming the source, the
partition and the row in the file (or frame): the first error in partition order, whichever
worker met it first; nothing is returned. A partition returns its ``DataError`` as a value
(``_Failed``) rather than raising it, so that no worker logs a traceback for bad data; other
exceptions propagate as Dask's do.

Dask is an optional extra (``pip install 'synth[dask]'``): ``require_dask`` says so in one line.
"""

from __future__ import annotations

import asyncio
import csv
import importlib
import importlib.util
import logging
import os
import re
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from synth.data.counts import Counts, ScanPlan, count_encoded, plan_scan
from synth.data.reading import (MAY_QUOTE, TELLS_EMPTY, Progress, _first_line, all_dropped, check_bad_rows, encode,
                   encode_csv_lines, is_parquet, parquet_chunks, parquet_row_groups)
from synth.data.reading import _check_header, _read_header
from synth.data.schema import Schema
from synth.data.tables import DEFAULT_MAX_CELLS
from synth.errors import DataError, SynthError, non_private

__all__ = ["CONNECT_TIMEOUT_S", "FAN_IN", "LOCAL", "connect", "is_dask_frame", "require_dask", "scan_dask"]

#: Partial counts merged per task of the tree sum.
FAN_IN = 8
#: ``--scheduler local``: start a LocalCluster on this machine.
LOCAL = "local"
#: Bytes of CSV per partition when Dask reads a CSV path.
CSV_BLOCK_BYTES = 64 * 2**20
#: Rows per partition (a file's consecutive row groups, at least one) when Dask reads Parquet:
#: about a CSV block's worth, so that a task's fixed costs stay small beside its work.
PARQUET_PIECE_ROWS = 4 * 2**20
#: Protocols ``--scheduler`` takes (``inproc://`` lives in one process: no use to a CLI).
SCHEMES = ("tcp", "tls", "ws", "wss", "ucx")
_ADDRESS_FORM = "tcp://HOST:PORT, or local"
#: Seconds ``connect`` waits for a scheduler to answer, its handshake included.
CONNECT_TIMEOUT_S = 10.0


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


def connect(scheduler: str, *, timeout: float | None = None):
    """A ``distributed.Client``: to the scheduler at ``scheduler``, or on a new LocalCluster
    for ``"local"`` (closed with the client; its logs silenced, so that a run prints nothing
    of distributed's, not even a worker's heartbeat failing while the cluster shuts down).

    ``SynthError`` in one line when no scheduler answers there within ``timeout`` seconds
    (default ``CONNECT_TIMEOUT_S``), even where something accepts the connection and never
    answers."""
    require_dask("--scheduler")
    timeout = CONNECT_TIMEOUT_S if timeout is None else float(timeout)
    from distributed import Client, LocalCluster

    if scheduler == LOCAL:
        cluster = LocalCluster(n_workers=min(2, os.cpu_count() or 1), threads_per_worker=1, processes=True,
                               dashboard_address=":0", silence_logs=logging.CRITICAL)
        client = Client(cluster)
        client._synth_cluster = cluster  # closed by ``close``
        return client
    _check_address(scheduler)
    _handshake(scheduler, timeout)
    try:
        return Client(scheduler, timeout=timeout)
    except OSError as exc:
        raise SynthError(f"--scheduler {scheduler}: cannot reach a Dask scheduler there ({exc})") from None
    except (TypeError, ValueError) as exc:  # distributed's words for an address or a setting it cannot use
        raise SynthError(f"--scheduler {scheduler!r}: cannot connect: {_first_line(exc)}") from None


def _handshake(scheduler: str, timeout: float) -> None:
    """Open a connection to ``scheduler`` and complete distributed's handshake within
    ``timeout`` seconds, else ``SynthError`` in one line. (``Client`` bounds the TCP connect
    by its timeout but then waits for the peer's handshake without limit: a port that accepts
    and never answers would hold a run until the peer closes.) Run on a thread of its own, so
    that it needs no event loop of the caller's."""
    from distributed.comm import connect as open_comm
    from distributed.security import Security

    async def shake() -> None:
        comm = await asyncio.wait_for(open_comm(scheduler, timeout=timeout,
                                                **Security().get_connection_args("client")), timeout)
        await comm.close()

    try:
        with ThreadPoolExecutor(1, thread_name_prefix="synth-connect") as pool:
            pool.submit(asyncio.run, shake()).result()
    except TimeoutError:  # before OSError, of which it is one
        raise SynthError(f"--scheduler {scheduler}: no Dask scheduler answered there within {timeout:g} s "
                         "(something may accept connections at that address without being one)") from None
    except OSError as exc:
        raise SynthError(f"--scheduler {scheduler}: cannot reach a Dask scheduler there ({exc})") from None
    except Exception:  # noqa: BLE001 - whatever a peer that is no scheduler makes the handshake raise
        raise SynthError(f"--scheduler {scheduler}: what answered there is not a Dask scheduler (its handshake "
                         "could not be read)") from None


def _check_address(scheduler: str) -> None:
    """``SynthError`` in one line naming ``scheduler`` and what is wrong with it, for an
    address Dask could not even try (distributed's own errors there are tracebacks)."""
    from distributed.comm.addressing import parse_address, parse_host_port

    scheme, location = parse_address(scheduler)
    if scheme not in SCHEMES:
        raise SynthError(f"--scheduler {scheduler!r}: unsupported protocol {scheme + '://'!r} ({_ADDRESS_FORM})")
    try:
        host, port = parse_host_port(location)
    except ValueError:
        raise SynthError(f"--scheduler {scheduler!r}: not a scheduler address ({_ADDRESS_FORM})") from None
    if not host:
        raise SynthError(f"--scheduler {scheduler!r}: no host before the port ({_ADDRESS_FORM})")
    if not 0 < port < 2**16:
        raise SynthError(f"--scheduler {scheduler!r}: port {port} is outside 1..65535")
    if scheme in ("tls", "wss") and not _tls_configured():
        raise SynthError(f"--scheduler {scheduler!r}: {scheme}:// needs TLS certificates in Dask's configuration "
                         "(distributed.comm.tls: ca-file, client.cert, client.key)")


def _tls_configured() -> bool:
    from distributed.security import Security

    return Security().get_connection_args("client").get("ssl_context") is not None


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
    """``synth.data.reading.scan`` on Dask: the row count and the tables of ``subsets``.

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
    if path is not None and is_parquet(path):
        name, pieces = str(path), _parquet_pieces(path, schema, selected)
        leaves = [dask.delayed(_count_parquet_piece)(*piece, plan, k, len(pieces), bad_rows)
                  for k, piece in enumerate(pieces)]
    elif path is not None:
        name, header, header_bytes, parts = _csv_blocks(path, schema, selected)
        leaves = [dask.delayed(_count_csv_block)(part, header, header_bytes if k == 0 else 0, plan, name, k,
                                                 len(parts), bad_rows)
                  for k, part in enumerate(parts)]
    else:
        frame, name = _frame(source, selected)
        parts = frame.to_delayed()
        leaves = [dask.delayed(_count_partition)(part, plan, name, k, len(parts), bad_rows)
                  for k, part in enumerate(parts)]
    if client is None:
        client = _current_client()
    if client is None:
        (total,) = dask.compute(_tree(leaves, dask.delayed(_merge)))
    else:
        total = _on_cluster(client, leaves, progress)
    if isinstance(total, _Failed):
        raise total.error()
    if total.n_rows == 0:
        raise DataError(all_dropped(name) if total.dropped else non_private(f"{name}: no data rows", TELLS_EMPTY))
    return total


@dataclass(frozen=True)
class _Failed:
    """A partition's ``DataError``, returned by its task as a value (a raised one is logged
    with its traceback by the worker). ``where``, when given, is the message's lead-in, after
    which its row numbers count from the partition's first row; ``rows_before`` (the rows of
    the partitions ahead of it, added up by the tree sum) makes them the file's (or frame's)."""

    message: str
    where: str | None = None
    rows_before: int = 0

    def after(self, rows: int) -> _Failed:
        """The same failure behind ``rows`` more rows."""
        return replace(self, rows_before=self.rows_before + rows) if rows and self.where else self

    def error(self) -> DataError:
        lead = f"{self.where}: "
        if self.where is None or not self.message.startswith(lead):
            return DataError(self.message)
        return DataError(lead + _shift_rows(self.message[len(lead):], self.rows_before))


#: The row (and line) numbers that open the in-process readers' messages: "row 4, column 'a'",
#: "malformed CSV: data row 4 (line 5) has ...", "not UTF-8 text (near data row 4)".
_ROWS = re.compile(r"^((?:malformed CSV: |not UTF-8 text \(near )?(?:data )?row )(\d+)(?:( \(line )(\d+))?")


def _shift_rows(detail: str, rows: int) -> str:
    """``detail`` with its leading row (and line) number moved on by ``rows``; the rest of the
    message, which may quote the data, is left alone."""
    def shifted(found: re.Match) -> str:
        line = f"{found[3]}{int(found[4]) + rows}" if found[3] else ""
        return f"{found[1]}{int(found[2]) + rows}{line}"

    return _ROWS.sub(shifted, detail, count=1)


def _first_failure(parts: Sequence) -> _Failed | None:
    """The first failure among partial results in partition order (``Counts`` or row counts),
    behind the rows of those ahead of it; None if there is none."""
    rows = 0
    for part in parts:
        if isinstance(part, _Failed):
            return part.after(rows)
        rows += part if isinstance(part, int) else part.n_rows + part.dropped
    return None


def _current_client():
    from distributed import default_client

    try:
        return default_client()
    except ValueError:
        return None


def _on_cluster(client, leaves, progress: Progress | None) -> Counts | _Failed:
    """Leaves as futures, each one's row count (for progress, as each finishes) and the tree
    sum all submitted at once, so the workers never wait on the client; the sum stays on the
    workers until it is whole. At a failed partition the ones after it are cancelled; the
    first failure of those before it and itself is the answer."""
    from distributed import as_completed

    futures = client.compute(leaves)
    sizes = client.map(_rows_of, futures, pure=False)
    order = {size.key: k for k, size in enumerate(sizes)}
    total = _tree(futures, lambda *parts: client.submit(_merge, *parts, pure=False))
    try:
        rows = done = 0
        for size in as_completed(sizes):
            value = size.result()
            if isinstance(value, _Failed):
                k = order[size.key]
                client.cancel([*futures[k + 1:], *sizes[k + 1:], total])
                return _first_failure([*client.gather(sizes[:k]), value])
            rows += value
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


def _rows_of(counts: Counts | _Failed) -> int | _Failed:
    """The rows a partition read (kept and dropped), or its failure."""
    return counts if isinstance(counts, _Failed) else counts.n_rows + counts.dropped


def _merge(*parts: Counts | _Failed) -> Counts | _Failed:
    failure = _first_failure(parts)
    if failure is not None:
        return failure
    total = parts[0]
    for part in parts[1:]:
        total = total.merge(part)
    return total


def _count_partition(frame, plan: ScanPlan, name: str, index: int, partitions: int,
                     bad_rows: str) -> Counts | _Failed:
    """One partition's counts (on a worker): encoded and checked as in-process chunks are."""
    where = f"{name} (partition {index + 1} of {partitions})"
    try:
        encoded = encode(frame, plan.schema, source=where, bad_rows=bad_rows)
    except DataError as exc:
        return _Failed(str(exc), where)
    except Exception as exc:  # noqa: BLE001 - pandas/pyarrow errors of a damaged block
        return _Failed(non_private(f"{where}: cannot read: {_first_line(exc)}", MAY_QUOTE))
    return count_encoded([encoded], plan, parts=1)  # the cluster runs tasks in parallel: no threads within one


def _csv_blocks(path: Path, schema: Schema, selected: Schema) -> tuple[str, list[str], int, list]:
    """A CSV's name, header, the header's length in bytes, and its blocks of whole lines
    (``dask.bytes.read_bytes``, ``CSV_BLOCK_BYTES`` each, the first holding the header), for
    the in-process CSV reader on each block."""
    from dask.bytes import read_bytes

    header = _read_header(path)
    _check_header(header, schema, selected, path)
    header_bytes = _header_bytes(path)
    _, (blocks,) = read_bytes(str(path), delimiter=b"\n", blocksize=max(CSV_BLOCK_BYTES, header_bytes),
                              sample=False)
    return str(path), header, header_bytes, blocks


def _header_bytes(path: Path) -> int:
    """The length in bytes of a CSV's header record, as ``csv`` reads it (``_read_header``):
    its first line, or more where a quoted name holds a line break."""
    lengths = []

    def lines(handle):
        for line in handle:
            lengths.append(len(line))
            yield line.decode("utf-8-sig" if len(lengths) == 1 else "utf-8", errors="replace")

    with open(path, "rb") as handle:
        next(csv.reader(lines(handle)), None)
    return sum(lengths)


def _count_csv_block(lines: bytes, header: list[str], header_bytes: int, plan: ScanPlan, name: str, index: int,
                     partitions: int, bad_rows: str) -> Counts | _Failed:
    """One block's counts (on a worker), read as ``synth.data.reading.scan`` reads a file, after the
    first ``header_bytes`` (the header, in the first block); its rows are numbered from the
    block's start, and a failure's by the tree sum from the file's."""
    where = f"{name} (partition {index + 1} of {partitions})"
    try:
        return count_encoded(encode_csv_lines(lines[header_bytes:], header, plan.schema, source=where,
                                              bad_rows=bad_rows),
                             plan, parts=1)  # the cluster runs tasks in parallel: no threads within one
    except DataError as exc:
        return _Failed(str(exc), where)


def _parquet_pieces(path: Path, schema: Schema, selected: Schema) -> list[tuple[str, list[int], list[int]]]:
    """A Parquet file's or folder's row groups gathered into pieces of up to
    ``PARQUET_PIECE_ROWS`` rows (a file's consecutive groups), each (file, groups, the first row
    in the file of each group), read on a worker by the in-process Parquet reader (Arrow's
    buffers straight to codes; ``dask.dataframe.read_parquet`` would build a pandas frame of
    every partition)."""
    pieces: list[tuple[str, list[int], list[int]]] = []
    held = 0  # rows of the last piece
    for file, group, first, rows in parquet_row_groups(path, schema, selected):
        if pieces and pieces[-1][0] == file and held + rows <= PARQUET_PIECE_ROWS:
            pieces[-1][1].append(group)
            pieces[-1][2].append(first)
            held += rows
        else:
            pieces.append((file, [group], [first]))
            held = rows
    if not pieces:
        raise DataError(non_private(f"{path}: has columns but no data rows", TELLS_EMPTY))
    return pieces


def _count_parquet_piece(file: str, groups: list[int], firsts: list[int], plan: ScanPlan, index: int, pieces: int,
                         bad_rows: str) -> Counts | _Failed:
    """One piece's counts (on a worker), read as ``synth.data.reading.scan`` reads the file. Its groups
    are read together (one at a time costs a parse of the file's metadata each); a read error
    then names the row its batch began at, so the piece is read again group by group, as
    in-process, to name the failing group's row."""
    where = f"{file} (partition {index + 1} of {pieces})"

    def counts(groups: list[int], first: int) -> Counts:
        return count_encoded(parquet_chunks(file, plan.schema, source=where, bad_rows=bad_rows, row_groups=groups,
                                            first_row=first, threads=False), plan, parts=1)  # tasks run side by side

    try:
        return counts(groups, firsts[0])
    except DataError as exc:
        failure = _Failed(str(exc))
    if len(groups) > 1 and f"{where}: cannot read Parquet near row " in failure.message:
        try:
            for group, first in zip(groups, firsts):
                counts([group], first)
        except DataError as exc:
            failure = _Failed(str(exc))
    return failure


def _frame(source: Any, selected: Schema):
    """A Dask DataFrame's selected columns, and the name errors give it."""
    if not is_dask_frame(source):
        raise TypeError(f"data must be a Dask DataFrame or a path, not {type(source).__name__}")
    missing = [c for c in selected.names if c not in source.columns]
    if missing:
        raise DataError(f"Dask DataFrame: column {missing[0]!r} is in the schema but missing from the data")
    return source[list(selected.names)], "Dask DataFrame"
