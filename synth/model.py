"""The release: a model file holding the public distribution and what it means.

One ``.npz`` file (NumPy's zip of arrays, read without pickle) with the distribution over the
universe and a JSON header: format and version, the schema, the mechanism and its
parameters, the privacy spent (budget, total and ledger), the round log, the row count the
model scales to (and whether it was public or a noisy count), the library version and
whether the run was seeded. Nothing in it is computed from the data without noise.
"""

from __future__ import annotations

import json
import os
import zipfile
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._io import atomic_write
from .errors import SynthError
from .schema import Schema
from .tables import marginal_from_dense
from .workload import Workload

__all__ = ["Model", "ModelError", "FORMAT", "FORMAT_VERSION"]

FORMAT = "synth-model"
FORMAT_VERSION = 1


class ModelError(SynthError):
    """A model file is missing, damaged, foreign or from an unsupported version."""


@dataclass
class Model:
    """A released model: answering queries from it or sampling it is free post-processing."""

    schema: Schema
    mechanism: str
    distribution: np.ndarray  # flat float64 over the universe, sums to 1
    rows: float  # the n answers are scaled to
    rows_public: bool
    parameters: dict[str, Any] = field(default_factory=dict)
    privacy: dict[str, Any] = field(default_factory=dict)
    round_log: list[dict[str, Any]] = field(default_factory=list)
    seeded: bool = False
    library_version: str = ""

    def answer(self, workload: Workload) -> np.ndarray:
        """The workload's answers in rows (``rows`` times each query's fraction)."""
        return self.rows * workload.answer(lambda subset: marginal_from_dense(self.distribution, self.schema, subset))

    def header(self) -> dict[str, Any]:
        from . import __version__

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
        """Write the model atomically."""
        meta = np.frombuffer(json.dumps(self.header()).encode("utf-8"), dtype=np.uint8)
        with atomic_write(path, "wb") as handle:
            np.savez_compressed(handle, distribution=self.distribution, meta=meta)

    @classmethod
    def load(cls, path: str | os.PathLike) -> Model:
        """Read a model file; ``ModelError`` names the file and what is wrong."""
        if os.path.isfile(path) and not zipfile.is_zipfile(path):
            raise ModelError(f"{path}: not a synth model file (not a .npz archive)")
        try:
            with np.load(path, allow_pickle=False) as archive:
                if set(archive.files) != {"distribution", "meta"}:
                    raise ModelError(f"{path}: not a synth model file (arrays {sorted(archive.files)})")
                meta = json.loads(archive["meta"].tobytes().decode("utf-8"))
                distribution = np.asarray(archive["distribution"], dtype=np.float64)
        except FileNotFoundError:
            raise ModelError(f"{path}: no such file") from None
        except (zipfile.BadZipFile, ValueError, OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            if isinstance(exc, ModelError):
                raise
            raise ModelError(f"{path}: not a synth model file or damaged ({exc})") from None
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise ModelError(f"{path}: not a synth model file")
        if meta.get("format_version") != FORMAT_VERSION:
            raise ModelError(
                f"{path}: model format version {meta.get('format_version')!r} is not supported "
                f"(this synth reads version {FORMAT_VERSION})"
            )
        schema = Schema.from_dict(meta["schema"], source=path)
        if distribution.ndim != 1 or distribution.size != schema.universe_size:
            raise ModelError(f"{path}: the distribution has {distribution.size} cells, the schema {schema.universe_size}")
        if not np.all(np.isfinite(distribution)) or distribution.min() < 0:
            raise ModelError(f"{path}: the distribution has negative or non-finite values")
        return cls(
            schema=schema, mechanism=meta["mechanism"], distribution=distribution, rows=meta["rows"],
            rows_public=meta["rows_public"], parameters=meta.get("parameters", {}), privacy=meta.get("privacy", {}),
            round_log=meta.get("round_log", []), seeded=meta.get("seeded", False),
            library_version=meta.get("library_version", ""),
        )
