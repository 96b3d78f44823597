"""Tables that ship with synth (package data), so examples work from any install.

* ``demo``: a SYNTHETIC household survey (30,000 rows, 8 columns; no real people), drawn by
  ``datasets/make_demo.py`` in the source tree. ``synth demo`` runs on it.
* ``grades``: a ten-row toy table with a schema of every column kind and a small workload.

::

    table = synth.data.bundled("demo")
    people = pandas.read_csv(table.data)
    synth.Synthesizer.create("mwem", epsilon=1.0).fit_sample(people, schema=table.schema)
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from synth.errors import SynthError

__all__ = ["BundledTable", "bundled", "BUNDLED_TABLES"]

BUNDLED_TABLES = ("demo", "grades")


@dataclass(frozen=True)
class BundledTable:
    """Paths of a bundled table's CSV, its schema and (if it has one) its workload."""

    name: str
    data: Path
    schema: Path
    workload: Path | None


def bundled(name: str = "demo") -> BundledTable:
    """The bundled table ``name`` ("demo" or "grades"); ``SynthError`` if the install lacks it."""
    if name not in BUNDLED_TABLES:
        raise ValueError(f"name ({name!r}) must be one of: {', '.join(BUNDLED_TABLES)}")
    folder = Path(str(resources.files("synth") / "datasets"))
    data, schema, workload = (folder / f"{name}{suffix}" for suffix in (".csv", "-schema.json", "-workload.json"))
    if not data.is_file() or not schema.is_file():
        raise SynthError(f"the bundled {name!r} table is missing from {folder}: this install of synth is broken; "
                         "reinstall it (pip install --force-reinstall synth)")
    return BundledTable(name, data, schema, workload if workload.is_file() else None)
