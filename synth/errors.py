"""Errors raised on bad user input: files, schemas, data values and workloads.

Every one is a ``ValueError`` whose message names where the problem is (file, query,
row, column) and the offending value, so the CLI can show it as is, without a traceback.
"""

from __future__ import annotations

__all__ = ["SynthError", "SchemaError", "DataError", "WorkloadError", "PrivacyWarning", "locate", "non_private"]


class SynthError(ValueError):
    """Base class: a problem with the user's input, with a message fit to show as is."""


class SchemaError(SynthError):
    """The schema (or a domain file) is malformed or does not fit the request."""


class DataError(SynthError):
    """A data file or DataFrame does not match its schema."""


class WorkloadError(SynthError):
    """A workload is malformed or names columns or values the schema does not have."""


class PrivacyWarning(UserWarning):
    """Something about a run weakens what its release protects (e.g. an inferred schema)."""


def locate(
    message: str,
    *,
    file: object = None,
    query: int | str | None = None,
    row: int | None = None,
    column: str | None = None,
) -> str:
    """Prefix ``message`` with where it happened: ``"f.csv: row 3, column 'age': ..."``."""
    parts = []
    if query is not None:
        parts.append(f"query {query}")
    if row is not None:
        parts.append(f"row {row}")
    if column is not None:
        parts.append(f"column {column!r}")
    where = ", ".join(parts)
    prefix = f"{file}: " if file is not None else ""
    if where:
        prefix += f"{where}: "
    return prefix + message


def non_private(message: str, what: str = "quotes the private data") -> str:
    """``message`` labelled, in the line itself, as telling something of the private data (so
    the message is not private: keep it from a release): ``"message (NON-PRIVATE: this message
    quotes the private data)"``, ``what`` saying what it tells."""
    return f"{message} (NON-PRIVATE: this message {what})"
