"""The release: a model file holding the public distribution and what it means.

One ``.npz`` file (NumPy's zip of arrays, read without pickle) with two arrays:

- ``distribution``: the distribution over the universe, flat little-endian float64 summing to 1;
- ``meta``: a JSON header as UTF-8 bytes (uint8): format and version, the schema, the mechanism
  and its parameters, the privacy spent (budget, total and ledger), the round log, the row count
  the model scales to (and whether it was public or a noisy count), the library version and
  whether the run was seeded. Nothing in it is computed from the data without noise.

Format version 2 adds ``distribution_sha256`` to the header: the SHA-256 (hex) of the
distribution's bytes exactly as saved (little-endian float64, C order). The zip's own CRC-32
catches most accidental damage; the checksum also catches a distribution that was changed and
re-saved (the zip is then rewritten with fresh CRCs, the header is not). It lives in the header,
not in a third array, so a version-1 reader's "two arrays" check still tells the formats apart by
version, not by a confusing list of arrays.

Format version 3 (this one) adds factored models (``synth.models.factored``), for universes no array
can hold: the header says ``"representation": "factored"``, lists the ``factors`` (column
subsets) and the ``max_model_cells`` cap, and each log-potential table is its own array
``theta_0``, ``theta_1``, ...; the checksum covers those tables in order. A dense model is
stored as in version 2. Versions 1-3 are read; a newer version is refused in one line.

``Model.load`` refuses, with one ``ModelError`` line naming the file, anything it cannot trust:
an unreadable archive, a header that is not the documented object (each field is type- and
value-checked), a checksum mismatch, or a distribution that is not finite, non-negative and of
positive sum over exactly the schema's universe. A factored model's log-potentials must be
finite (or -inf, no mass) and within +-2^52, and every clique's marginal must sum to 1, so its
answers sum to n: a file tampered with and its checksum recomputed is refused for what it
holds. Version 1 files (no checksum) are still read and checked the same way otherwise.
``Model.save`` runs the same checks first, so it never writes a file that ``load`` would refuse.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import zipfile
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from synth import __version__
from synth._io import DuplicateKey, atomic_write, no_duplicate_keys
from synth.data.schema import Schema
from synth.data.workload import Workload
from synth.errors import SynthError
from synth.models.distribution import as_distribution
from synth.models.factored import FactoredModel

__all__ = ["Model", "ModelError", "FORMAT", "FORMAT_VERSION", "model_summary"]

FORMAT = "synth-model"
FORMAT_VERSION = 3
_READABLE_VERSIONS = (1, 2, 3)
_CHECKSUM = "distribution_sha256"
_REQUIRED = ("format", "format_version", "mechanism", "schema", "rows", "rows_public")
_OPTIONAL = ("parameters", "privacy", "round_log", "seeded", "library_version")
_FACTORED = ("representation", "factors", "max_model_cells")  # version 3, a factored model
# A release sums to 1 up to rounding; this is far above the rounding of any universe that fits in
# memory (about size * 2.2e-16) and far below any edit worth making.
_SUM_TOLERANCE = 1e-6
#: The largest finite log-potential a factored model may hold: beyond 2^52 float64's spacing is
#: over 1, so a potential is not known to within a factor e (and sums with it lose the others).
MAX_LOG_POTENTIAL = float(2**52)


class ModelError(SynthError):
    """A model file is missing, damaged, foreign or from an unsupported version."""


@dataclass
class Model:
    """A released model: answering queries from it or sampling it is free post-processing."""

    schema: Schema
    mechanism: str
    distribution: Any  # a flat float64 array over the universe summing to 1, or a FactoredModel
    rows: float  # the n answers are scaled to
    rows_public: bool
    parameters: dict[str, Any] = field(default_factory=dict)
    privacy: dict[str, Any] = field(default_factory=dict)
    round_log: list[dict[str, Any]] = field(default_factory=list)
    seeded: bool = False
    library_version: str = ""

    def answer(self, workload: Workload) -> np.ndarray:
        """The workload's answers in rows (``rows`` times each query's fraction)."""
        return self.rows * as_distribution(self.distribution, self.schema).answer_workload(workload)

    def header(self) -> dict[str, Any]:
        """What the model means, as the file's JSON header holds it (less the checksum)."""
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "library_version": self.library_version or __version__,
            "mechanism": self.mechanism,
            "schema": self.schema.to_dict(),
            "rows": self.rows,
            "rows_public": self.rows_public,
            "parameters": self.parameters,
            "privacy": self.privacy,
            "round_log": self.round_log,
            "seeded": self.seeded,
        }

    def save(self, path: str | os.PathLike) -> None:
        """Write the model atomically (format version 3, with the stored tables' checksum).

        A dense distribution is written as little-endian float64, divided by its sum when that
        is not 1 (a release is a probability distribution); a factored one as its log-potential
        tables, one array each. ``ModelError`` if the model is not one
        ``load`` would accept; nothing is written then.
        """
        where = f"{path}: cannot save the model"
        header = self.header()
        _check_header(header, FORMAT_VERSION, where, what="model field", saving=True)
        if isinstance(self.distribution, FactoredModel):
            self._save_factored(path, header, where)
            return
        distribution = np.asarray(self.distribution)
        if distribution.dtype.kind in "iu":  # counts built by hand: the weights are what matter
            distribution = distribution.astype(np.float64)
        distribution = _check_distribution(distribution, self.schema.universe_size, where)
        total = float(distribution.sum())
        if abs(total - 1.0) > _SUM_TOLERANCE:
            distribution = distribution / total
        distribution = np.ascontiguousarray(distribution, dtype="<f8")
        header[_CHECKSUM] = _checksum(distribution)
        meta = np.frombuffer(json.dumps(header).encode("utf-8"), dtype=np.uint8)
        with atomic_write(path, "wb") as handle:
            np.savez_compressed(handle, distribution=distribution, meta=meta)

    def _save_factored(self, path, header: dict[str, Any], where: str) -> None:
        """Version 3, factored: each log-potential θ_S as its own array, never a dense one."""
        model = self.distribution
        if model.schema != self.schema:
            raise ModelError(f"{where}: the factored model is over another schema than the model's")
        tables = [np.ascontiguousarray(model.potential(s), dtype="<f8") for s in model.subsets]
        for subset, table in zip(model.subsets, tables):
            _check_log_potential(table, f"{where}: factor {', '.join(subset) or '(empty)'}")
        _check_cliques(model, where)
        header.update(representation="factored", factors=[list(s) for s in model.subsets],
                      max_model_cells=model.max_cells)
        header[_CHECKSUM] = _checksum_tables(tables)
        meta = np.frombuffer(json.dumps(header).encode("utf-8"), dtype=np.uint8)
        with atomic_write(path, "wb") as handle:
            np.savez_compressed(handle, meta=meta, **{f"theta_{i}": t for i, t in enumerate(tables)})

    @classmethod
    def load(cls, path: str | os.PathLike) -> Model:
        """Read and check a model file; ``ModelError`` names the file and what is wrong."""
        meta, arrays = _read_archive(path)
        return cls._from_archive(meta, arrays, path)

    @classmethod
    def _from_archive(cls, meta: dict[str, Any], arrays: dict[str, Any], path: str | os.PathLike) -> Model:
        """The model a read archive holds, every check of ``load`` made."""
        version = _check_version(meta, path)
        fields = _check_header(meta, version, path)
        representation = meta.get("representation", "dense")
        if representation not in ("dense", "factored"):
            raise ModelError(f"{path}: header field 'representation' must be 'dense' or 'factored', "
                             f"got {_shown(representation)}")
        if representation == "dense" and set(meta) & set(_FACTORED[1:]):
            raise ModelError(f"{path}: header field {sorted(set(meta) & set(_FACTORED[1:]))[0]!r} belongs to a "
                             "factored model, and the header does not say 'representation': 'factored'")
        if representation == "factored":
            schema = _schema(meta["schema"], path)
            return cls(schema=schema, mechanism=fields["mechanism"], distribution=_factored(meta, arrays, schema, path),
                       rows=float(fields["rows"]), rows_public=fields["rows_public"],
                       parameters=fields.get("parameters", {}), privacy=fields.get("privacy", {}),
                       round_log=fields.get("round_log", []), seeded=fields.get("seeded", False),
                       library_version=fields.get("library_version", ""))
        if set(arrays) != {"distribution"}:
            raise ModelError(f"{path}: not a synth model file (arrays {sorted([*arrays, 'meta'])})")
        distribution = _float_distribution(arrays["distribution"], path)
        if version >= 2 and _checksum(distribution) != meta[_CHECKSUM]:
            raise ModelError(
                f"{path}: damaged model file: checksum of the distribution does not match its header "
                "(the file was changed after it was written)"
            )
        schema = _schema(meta["schema"], path)
        distribution = _check_distribution(distribution, schema.universe_size, path)
        total = float(distribution.sum())
        if abs(total - 1.0) > _SUM_TOLERANCE:
            # Version 2: save always writes a distribution summing to 1 and the checksum above
            # matched, so this file was made outside synth; guessing what it meant would answer
            # "as if valid", so refuse. Version 1 files carry no checksum and were written as
            # given (a hand-built model need not have been normalised): the relative weights are
            # all a model means, so dividing by the sum keeps every answer's meaning (evaluate
            # already does the same). An edit to a version-1 file cannot be detected either way.
            if version >= 2:
                raise ModelError(
                    f"{path}: the distribution sums to {total:.6g}, not 1 (a synth model always sums to 1): "
                    "the file was not written by synth"
                )
            distribution = distribution / total
        return cls(
            schema=schema, mechanism=fields["mechanism"], distribution=distribution,
            rows=float(fields["rows"]), rows_public=fields["rows_public"],
            parameters=fields.get("parameters", {}), privacy=fields.get("privacy", {}),
            round_log=fields.get("round_log", []),
            seeded=fields.get("seeded", False), library_version=fields.get("library_version", ""),
        )


def model_summary(path: str | os.PathLike) -> dict[str, Any]:
    """What a model file holds, for a reader (``synth model show``): its format, mechanism and
    options, n and whether it is public, the privacy budget, what was spent and how (the
    ledger), the schema's columns, the representation and its size, the rounds logged and the
    checksum. The file is loaded, and so checked, in full first: a summary is never shown of a
    file that ``Model.load`` refuses. Everything in it is released (the model is public)."""
    meta, arrays = _read_archive(path)
    model = Model._from_archive(meta, arrays, path)
    distribution = model.distribution
    if isinstance(distribution, FactoredModel):
        storage = {"representation": "factored", "cells": int(distribution.cells),
                   "factors": [list(s) for s in distribution.subsets]}
    else:
        storage = {"representation": "dense", "cells": int(np.asarray(distribution).size)}
    return {
        "file": str(path),
        "format_version": meta["format_version"],
        "library_version": model.library_version,
        "checksum": meta.get(_CHECKSUM),
        "mechanism": model.mechanism,
        "seeded": model.seeded,
        "rows": model.rows,
        "rows_public": model.rows_public,
        "privacy": model.privacy,
        "parameters": model.parameters,
        "rounds_logged": len(model.round_log),
        "columns": [{"name": c.name, "kind": c.kind, "size": c.size} for c in model.schema],
        "universe_size": model.schema.universe_size,
        "storage": storage,
    }


def _checksum_tables(tables: list[np.ndarray]) -> str:
    """SHA-256 (hex) of the factored model's tables' bytes as saved, in order."""
    digest = hashlib.sha256()
    for table in tables:
        digest.update(np.ascontiguousarray(table, dtype="<f8").tobytes())
    return digest.hexdigest()


def _factored(meta: dict[str, Any], arrays: dict[str, Any], schema: Schema, path: object) -> FactoredModel:
    """The factored model a version-3 file holds, every table checked against the schema."""
    if meta["format_version"] < 3:
        raise ModelError(f"{path}: a factored model needs format version 3, the header says {meta['format_version']}")
    factors, cap = meta.get("factors"), meta.get("max_model_cells")
    if not isinstance(factors, list) or not all(isinstance(f, list) and all(isinstance(c, str) for c in f)
                                                for f in factors):
        raise ModelError(f"{path}: header field 'factors' must be a list of lists of column names")
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
        raise ModelError(f"{path}: header field 'max_model_cells' must be an integer >= 1, got {_shown(cap)}")
    expected = {f"theta_{i}" for i in range(len(factors))}
    if set(arrays) != expected:
        raise ModelError(f"{path}: damaged model file: arrays {sorted(arrays)} do not match its "
                         f"{len(factors)} factors")
    tables = [arrays[f"theta_{i}"] for i in range(len(factors))]
    if _checksum_tables(tables) != meta[_CHECKSUM]:
        raise ModelError(f"{path}: damaged model file: checksum of the tables does not match its header "
                         "(the file was changed after it was written)")
    model = FactoredModel(schema, max_cells=cap)
    for columns, table in zip(factors, tables):
        where = f"{path}: factor {', '.join(columns) or '(empty)'}"
        unknown = [c for c in columns if c not in schema]
        if unknown:
            raise ModelError(f"{where}: unknown column {unknown[0]!r}")
        shape = tuple(schema[c].size for c in columns)
        if not isinstance(table, np.ndarray) or table.dtype.kind != "f" or table.shape != shape:
            raise ModelError(f"{where}: the table must be floats of shape {shape}, got "
                             f"{getattr(table, 'dtype', type(table).__name__)} {getattr(table, 'shape', '')}")
        if np.isnan(table).any() or (table == np.inf).any():
            raise ModelError(f"{where}: the table holds nan or +inf")
        _check_log_potential(table, where)
        try:
            model.add_log(columns, table)
        except SynthError as exc:
            raise ModelError(f"{where}: {exc}") from None
    _check_cliques(model, path)
    return model


def _check_log_potential(table: np.ndarray, where: object) -> None:
    """Every finite log-potential within +-``MAX_LOG_POTENTIAL`` (-inf, no mass, is allowed)."""
    beyond = np.flatnonzero(np.isfinite(table) & (np.abs(table) > MAX_LOG_POTENTIAL))
    if beyond.size:
        cell = np.unravel_index(beyond[0], table.shape)
        raise ModelError(f"{where}: log-potential {float(table[cell]):.6g} at cell {tuple(int(c) for c in cell)} "
                         f"is beyond +-{MAX_LOG_POTENTIAL:.3g}, where float64 no longer holds a potential to "
                         "within a factor e (a synth model's are far smaller; -inf means no mass)")


def _check_cliques(model: FactoredModel, path: object) -> None:
    """Every clique's marginal finite, >= 0 and summing to 1, so answers sum to n: tables that
    float64 cannot combine (magnitudes that swamp each other) give sums far from 1."""
    try:
        model.log_partition()
    except SynthError:
        raise ModelError(f"{path}: the factored model gives every row zero mass: there is nothing to answer") from None
    for clique in model.tree.cliques:
        with np.errstate(all="ignore"):
            table = np.asarray(model.marginal(clique), dtype=np.float64)
            total = float(table.sum())
        if not (np.isfinite(table).all() and (table >= 0).all() and abs(total - 1.0) <= _SUM_TOLERANCE):
            raise ModelError(f"{path}: the factored model's marginal on {', '.join(clique)} sums to {total:.6g}, not "
                             "1 (or holds a negative or non-finite value): its tables cannot be computed in float64, "
                             "and its answers would not sum to n")


def _checksum(distribution: np.ndarray) -> str:
    """SHA-256 (hex) of the distribution's bytes as saved: little-endian float64, C order."""
    return hashlib.sha256(np.ascontiguousarray(distribution, dtype="<f8").tobytes()).hexdigest()


def _read_archive(path: str | os.PathLike) -> tuple[dict[str, Any], Any]:
    """The header (a JSON object) and the stored distribution, or ``ModelError`` naming the file."""
    if not os.path.exists(path):
        raise ModelError(f"{path}: no such file")
    if os.path.isdir(path):
        raise ModelError(f"{path}: is a folder, not a model file")
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:  # the file system's answer (permissions, ...), not damage
        raise ModelError(f"{path}: cannot read the model file: {exc.strerror or exc}") from None
    if os.path.isfile(path) and not zipfile.is_zipfile(path):
        raise ModelError(f"{path}: not a synth model file (not a .npz archive)")
    try:
        with np.load(path, allow_pickle=False) as archive:
            if "meta" not in archive.files:
                raise ModelError(f"{path}: not a synth model file (arrays {sorted(archive.files)})")
            raw_meta = archive["meta"]
            arrays = {name: archive[name] for name in archive.files if name != "meta"}
    except ModelError:
        raise
    except Exception as exc:  # noqa: BLE001 - see below
        # This block only reads the archive (the file was opened above). zipfile, zlib, bz2, lzma
        # and NumPy's .npy reader answer a damaged file with many unrelated types (BadZipFile,
        # zlib.error, EOFError, KeyError, NotImplementedError or RuntimeError for a flag bit read
        # as "encrypted", LZMAError, ValueError, OSError for a seek to a damaged offset,
        # MemoryError for a damaged shape, ...): each means the same thing here, and none may
        # escape as a traceback.
        reason = _shown(f"{type(exc).__name__}: {exc}", limit=120, quote=False)
        raise ModelError(f"{path}: damaged model file, cannot read it ({reason})") from None
    # NumPy returns a member without the .npy magic as raw bytes, not an array.
    if not isinstance(raw_meta, np.ndarray) or raw_meta.dtype != np.uint8 or raw_meta.ndim != 1:
        raise ModelError(f"{path}: damaged model file: the header is not stored as bytes")
    try:
        meta = json.loads(raw_meta.tobytes().decode("utf-8"), object_pairs_hook=no_duplicate_keys)
    except UnicodeDecodeError:
        raise ModelError(f"{path}: damaged model file: the header is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise ModelError(f"{path}: damaged model file: the header is not JSON ({exc})") from None
    except DuplicateKey as exc:
        raise ModelError(f"{path}: damaged model file: header field {exc.args[0]!r} appears twice") from None
    except RecursionError:
        raise ModelError(f"{path}: damaged model file: the header is nested too deeply") from None
    if not isinstance(meta, dict):
        raise ModelError(f"{path}: not a synth model file (the header is not a JSON object)")
    return meta, arrays


def _check_version(meta: dict[str, Any], path: object) -> int:
    if meta.get("format") != FORMAT:
        raise ModelError(f"{path}: not a synth model file (header format {_shown(meta.get('format'))})")
    if "format_version" not in meta:
        raise ModelError(f"{path}: header field 'format_version' is missing")
    version = meta["format_version"]
    if isinstance(version, bool) or version not in _READABLE_VERSIONS or not isinstance(version, int):
        readable = ", ".join(str(v) for v in _READABLE_VERSIONS[:-1]) + f" and {_READABLE_VERSIONS[-1]}"
        newer = isinstance(version, int) and not isinstance(version, bool) and version > FORMAT_VERSION
        raise ModelError(
            f"{path}: model format version {_shown(version)} is not supported "
            f"(this synth reads versions {readable}{'; a newer file needs a newer synth' if newer else ''})"
        )
    return version


def _check_header(
    meta: dict[str, Any], version: int, where: object, *, what: str = "header field", saving: bool = False
) -> dict[str, Any]:
    """Check every header field's presence, type and value; return the fields (schema unparsed).

    ``saving``: the header ``save`` is about to write, before it adds the checksum.
    """
    required = _REQUIRED + ((_CHECKSUM,) if version >= 2 and not saving else ())
    allowed = set(required) | set(_OPTIONAL) | (set(_FACTORED) if version >= 3 else set())
    unknown = sorted(set(meta) - allowed)
    if unknown:
        raise ModelError(
            f"{where}: unknown {what} {unknown[0]!r} "
            f"(a version {version} header has: {', '.join(sorted(allowed))})"
        )
    for key in required:
        if key not in meta:
            raise ModelError(f"{where}: {what} {key!r} is missing")

    def bad(key: str, expected: str) -> ModelError:
        return ModelError(f"{where}: {what} {key!r} must be {expected}, got {_shown(meta[key])}")

    mechanism = meta["mechanism"]
    if not isinstance(mechanism, str) or not mechanism:
        raise bad("mechanism", "a non-empty string")
    if not isinstance(meta["schema"], dict):
        raise bad("schema", "an object")
    if _finite_number(meta["rows"]) is None or meta["rows"] < 0:
        raise bad("rows", "a finite number >= 0")
    if not isinstance(meta["rows_public"], bool):
        raise bad("rows_public", "true or false")
    checksum = meta.get(_CHECKSUM)
    if _CHECKSUM in meta and (
        not isinstance(checksum, str) or len(checksum) != 64 or not set(checksum) <= set("0123456789abcdef")
    ):
        raise bad(_CHECKSUM, "64 lowercase hex digits (a SHA-256)")
    for key, kind, expected in (("parameters", dict, "an object"), ("privacy", dict, "an object"),
                                ("round_log", list, "a list"), ("seeded", bool, "true or false"),
                                ("library_version", str, "a string")):
        if key in meta and not isinstance(meta[key], kind):
            raise bad(key, expected)
    _check_privacy(meta.get("privacy", {}), where, what)
    return meta


def _check_privacy(privacy: dict[str, Any], where: object, what: str) -> None:
    """The parts of the ledger that commands print: ``spent`` and ``budget`` (epsilon, delta)."""
    for part in ("spent", "budget"):
        if part not in privacy:
            continue
        if not isinstance(privacy[part], dict):
            raise ModelError(
                f"{where}: {what} 'privacy.{part}' must be an object, got {_shown(privacy[part])}"
            )
        for key in ("epsilon", "delta"):
            value = privacy[part].get(key)
            # inf is a valid total ("no composition theorem fits"); nan and negatives are not.
            if key in privacy[part] and (
                isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0
            ):
                raise ModelError(
                    f"{where}: {what} 'privacy.{part}.{key}' must be a number >= 0, got {_shown(value)}"
                )


def _finite_number(value: Any) -> float | None:
    """``value`` as a float if it is a finite JSON number (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer beyond float range
        return None
    return number if math.isfinite(number) else None


def _schema(obj: dict[str, Any], path: object) -> Schema:
    try:
        return Schema.from_dict(obj, source=path)
    except SynthError:
        raise
    except Exception as exc:  # noqa: BLE001 - a malformed schema object must not escape as a traceback
        reason = _shown(f"{type(exc).__name__}: {exc}", limit=120, quote=False)
        raise ModelError(f"{path}: header field 'schema' is malformed ({reason})") from None


def _float_distribution(stored: Any, path: object) -> np.ndarray:
    if not isinstance(stored, np.ndarray):
        raise ModelError(f"{path}: damaged model file: the distribution is not stored as an array")
    if stored.dtype.kind != "f":
        raise ModelError(f"{path}: the distribution must hold floats (float64), got dtype {stored.dtype}")
    return stored


def _check_distribution(distribution: np.ndarray, cells: int, where: object) -> np.ndarray:
    """A flat float64 distribution over ``cells`` cells: finite, >= 0, with a finite positive sum."""
    if distribution.dtype.kind != "f":
        raise ModelError(
            f"{where}: the distribution must hold floats (float64), got dtype {distribution.dtype}"
        )
    if distribution.ndim != 1 or distribution.size != cells:
        raise ModelError(
            f"{where}: the distribution has shape {distribution.shape}, the schema's universe {cells:,} cells"
        )
    distribution = distribution.astype(np.float64, copy=False)
    bad = np.flatnonzero(~np.isfinite(distribution))
    if bad.size:
        raise ModelError(
            f"{where}: the distribution holds {bad.size:,} non-finite values "
            f"(cell {bad[0]}: {float(distribution[bad[0]])!r}); it must be finite and >= 0"
        )
    bad = np.flatnonzero(distribution < 0)
    if bad.size:
        raise ModelError(
            f"{where}: the distribution holds {bad.size:,} negative values "
            f"(cell {bad[0]}: {float(distribution[bad[0]])!r}); it must be finite and >= 0"
        )
    with np.errstate(over="ignore"):
        total = float(distribution.sum())
    if not math.isfinite(total):
        largest = float(distribution.max())
        raise ModelError(f"{where}: the distribution's sum overflows (largest cell {largest!r})")
    if not total > 0:
        raise ModelError(f"{where}: the distribution is all zero: there is nothing to answer or sample from")
    return distribution


def _shown(value: Any, limit: int = 60, quote: bool = True) -> str:
    """``repr(value)`` (or ``str`` with ``quote=False``) cut to ``limit`` characters."""
    text = repr(value) if quote else str(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
