"""The engines by name: their configs, and the engine for a schema and workload. What the
command line and ``Synthesizer`` build; neither passes options through dicts of their own."""

from __future__ import annotations

import dataclasses
from typing import Any

from synth.data.schema import Schema
from synth.data.workload import Workload
from synth.engines.blr_engine import BLRConfig, BLREngine
from synth.engines.mwem import MWEMConfig, MWEMEngine
from synth.engines.pmw import PMWConfig, PMWEngine
from synth.engines.release import Engine

__all__ = ["CONFIGS", "MECHANISMS", "make_config", "make_engine", "options_of"]

CONFIGS = {"mwem": MWEMConfig, "pmw": PMWConfig, "blr": BLRConfig}
ENGINES = {"mwem": MWEMEngine, "pmw": PMWEngine, "blr": BLREngine}
MECHANISMS = tuple(CONFIGS)


def options_of(mechanism: str) -> tuple[str, ...]:
    """The options ``mechanism``'s config takes (``rounds`` for MWEM, ``net`` for BLR...)."""
    return tuple(f.name for f in dataclasses.fields(CONFIGS[_check(mechanism)]))


def make_config(mechanism: str, **options: Any) -> MWEMConfig | PMWConfig | BLRConfig:
    """``mechanism``'s config from keyword options, each checked now; an option it does not
    take is a ``TypeError`` that lists the ones it does."""
    unknown = sorted(set(options) - set(options_of(mechanism)))
    if unknown:
        raise TypeError(f"{', '.join(map(repr, unknown))} is not an option of {mechanism}; its options are: "
                        f"{', '.join(options_of(mechanism))}")
    return CONFIGS[mechanism](**options)


def make_engine(config: MWEMConfig | PMWConfig | BLRConfig, schema: Schema, workload: Workload,
                **inputs: Any) -> Engine:
    """The engine ``config`` is for, over ``schema`` and ``workload``; ``inputs`` are its other
    public inputs (a prior array, or for BLR a prior model)."""
    for name, cls in CONFIGS.items():
        if isinstance(config, cls):
            return ENGINES[name](config, schema, workload, **inputs)
    raise TypeError(f"config must be one of {', '.join(c.__name__ for c in CONFIGS.values())}, "
                    f"not {type(config).__name__}")


def _check(mechanism: str) -> str:
    if not isinstance(mechanism, str) or mechanism not in CONFIGS:
        raise ValueError(f"mechanism ({mechanism!r}) must be one of: {', '.join(CONFIGS)}")
    return mechanism
