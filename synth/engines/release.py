"""What every engine's run gives back, and the shape every engine has.

An engine is made from a frozen config of public options (checked when made, before any data
is read), the public schema and workload, and public inputs such as a prior; ``plan`` and
``estimate`` read only those and the budget; ``run(counts, budget, rng, progress)`` is the one
step that reads the data (a scan's counts) and spends the budget: plan, measure, fit. Its
``Release`` carries the model, the ledger and what the run did, all public.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from synth.data.counts import Data
from synth.data.schema import Schema
from synth.engines.estimate import Estimate
from synth.errors import SynthError
from synth.models.model import Model
from synth.privacy.accounting import Accountant, Budget, combined_record

__all__ = ["Engine", "Progress", "Release", "describe_representation", "report_phase", "with_schema_cost"]

#: ``progress(step, fraction_done)``: called as a run goes (the CLI's bar; never given the data).
#: A callback may also have a ``phase(name)`` method: ``report_phase`` tells it what the run is
#: doing ("selecting", "measuring", "fitting"), so a long step shows its phase.
Progress = Callable[[int, float], None]


def report_phase(progress: Progress | None, name: str) -> None:
    """Tell ``progress`` the run's phase, when it takes one (public: a name, never the data)."""
    phase = getattr(progress, "phase", None)
    if phase is not None:
        phase(name)


@dataclass(frozen=True)
class Release:
    """A run's release: the model (what ``synth sample``/``answer`` read), the accountant (its
    ledger of charges), lines saying what the run did, warnings for the user, and the engine's
    own record of the run (``MWEMResult``, ``PMWRun``, ``BLRResult``) for diagnostics."""

    model: Model
    accountant: Accountant
    summary: tuple[str, ...]
    warnings: tuple[str, ...]
    record: Any


class Engine(Protocol):
    """The shape of MWEM, PMW and BLR (``synth.engines.registry`` makes them by name)."""

    name: str

    def plan(self, budget: Budget) -> object:
        """Public checks (and, where it needs no n, the plan) of a run on ``budget``, before any data is read."""

    def estimate(self, budget: Budget) -> Estimate | None:
        """The run's time from public facts, or None where it cannot be told beforehand."""

    def run(self, counts: Data, budget: Budget, rng: np.random.Generator | int | None = None,
            progress: Progress | None = None) -> Release: ...


def with_schema_cost(model: Model, schema: Schema, accountant: Accountant, mechanism: str,
                     budget: Budget | None = None) -> Model:
    """``model`` with a privacy record that also counts the schema's derivation, when the schema
    was derived under DP (its ledger in ``schema.derivation``): the two releases compose
    (``combined_record``, within ``budget`` when they were planned in one). A public schema
    leaves the model as it is."""
    record = schema.derivation
    if not record:
        return model
    if not record.get("privacy"):
        raise SynthError("the schema says it was derived under DP but carries no ledger of what that spent: derive "
                         "it again with synth schema infer --epsilon")
    parts = [("schema derivation", Accountant.from_dict(record["privacy"])), (mechanism, accountant)]
    return dataclasses.replace(model, privacy=combined_record(parts, budget))


def describe_representation(representation: str, model_cells: int, universe: int) -> str:
    """One line on how a released distribution is stored."""
    if representation == "dense":
        return f"distribution: dense, {universe:,} cells"
    return f"distribution: factored, {model_cells:,} cells in its junction tree's cliques (universe: {universe:,} cells)"
