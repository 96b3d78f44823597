"""``Synthesizer``: the Python front door, in the shape people know from smartnoise-synth.

::

    synth = Synthesizer.create("mwem", epsilon=1.0)
    synthetic = synth.fit_sample(df, schema="schema.json")      # pandas in, pandas out
    synth.answer(workload)                                      # counts, from the release
    synth.save("model.npz"); Synthesizer.load("model.npz").sample(1000)

``fit`` is the only step that reads the private data and spends the budget; ``sample``,
``answer`` and ``save`` are post-processing of the release (the ``Model``). The schema is
public knowledge and must be given: ``synth.infer_schema`` builds one from the data, but that
is NOT private. n is public only when given (``rows=`` or rows in the schema); otherwise a
noisy count is bought from the budget.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pandas as pd

from .errors import SynthError
from .model import Model
from .rng import is_seeded
from .schema import Schema
from .workload import Workload

__all__ = ["Synthesizer", "MECHANISMS"]

MECHANISMS = ("mwem", "pmw", "blr")


class Synthesizer:
    """Fit a private model of a DataFrame for a workload, then sample or answer from it."""

    def __init__(self, mechanism: str, epsilon: float, *, delta: float = 0.0, rows: int | None = None,
                 rng: np.random.Generator | int | None = None, **options: Any):
        if mechanism not in MECHANISMS:
            raise ValueError(f"mechanism ({mechanism!r}) must be one of: {', '.join(MECHANISMS)}")
        if delta and mechanism != "pmw":
            raise ValueError(f"delta applies to pmw only; {mechanism} is pure epsilon-DP")
        self.mechanism, self.epsilon, self.delta, self.rows = mechanism, epsilon, delta, rows
        self.options = options
        self._rng = rng
        self.model: Model | None = None

    @classmethod
    def create(cls, mechanism: str = "mwem", epsilon: float = 1.0, **kwargs: Any) -> Synthesizer:
        """A synthesizer for ``mechanism`` ("mwem", "pmw" or "blr"); other keywords go to the engine
        (for example ``rounds=`` for MWEM, ``net="sampled"`` for BLR, ``delta=`` for PMW)."""
        return cls(mechanism, epsilon, **kwargs)

    # -- the private step ------------------------------------------------------------------
    def fit(self, data: pd.DataFrame, schema: Schema | str | os.PathLike, workload: Workload | dict | str |
            os.PathLike | None = None, *, columns: str | list[str] | None = None) -> Synthesizer:
        """Read ``data`` once and release a model; spends the whole budget.

        ``workload`` defaults to every 3-way marginal (every marginal of all columns if fewer).
        """
        full = schema if isinstance(schema, Schema) else Schema.load(schema)
        selected = full.select(columns)
        from .data import encode

        encoded = encode(data, full, columns=columns)
        queries = _workload(workload, selected)
        seeded = is_seeded(self._rng)
        if self.mechanism == "mwem":
            from .mwem import mwem

            result = mwem(encoded.codes, selected, queries, self.epsilon, rows=self.rows, rng=self._rng,
                          **self.options)
            self.model = result.to_model(selected, seeded=seeded)
        elif self.mechanism == "blr":
            from .blr import blr

            result = blr(encoded.codes, selected, queries, self.epsilon, rows=self.rows, rng=self._rng,
                         **self.options)
            self.model = result.to_model(seeded=seeded)
        else:
            from .pmw import run_pmw

            run = run_pmw(encoded.codes, selected, queries, self.epsilon, self.delta, rows=self.rows,
                          rng=self._rng, **self.options)
            self.model = run.pmw.to_model(seeded=seeded)
        return self

    def fit_sample(self, data: pd.DataFrame, schema: Schema | str | os.PathLike, workload=None, *,
                   columns: str | list[str] | None = None, n_rows: int | None = None) -> pd.DataFrame:
        """``fit`` then ``sample``."""
        return self.fit(data, schema, workload, columns=columns).sample(n_rows)

    # -- post-processing -------------------------------------------------------------------
    def sample(self, n_rows: int | None = None, *, method: str = "round", numeric: str = "uniform",
               rng: np.random.Generator | int | None = None) -> pd.DataFrame:
        """Synthetic rows (default: n, the public or noisy row count) as a DataFrame."""
        from .sample import sample_model

        return sample_model(self._released(), n_rows, method=method, numeric=numeric, rng=rng)

    def answer(self, workload: Workload | dict | str | os.PathLike) -> np.ndarray:
        """The workload's answers (counts, scaled to n) from the release."""
        model = self._released()
        return model.answer(_workload(workload, model.schema))

    def save(self, path: str | os.PathLike) -> None:
        """Write the release (the model file ``synth answer --model`` and ``synth sample`` read)."""
        self._released().save(path)

    @classmethod
    def load(cls, path: str | os.PathLike) -> Synthesizer:
        """A fitted synthesizer from a model file (it can sample and answer, not fit again)."""
        model = Model.load(path)
        spent = model.privacy.get("spent", {})
        synthesizer = cls(model.mechanism, spent.get("epsilon", 0.0), delta=spent.get("delta", 0.0))
        synthesizer.model = model
        return synthesizer

    @property
    def privacy_spent(self) -> dict:
        """epsilon, delta and how they compose, from the release's ledger."""
        return dict(self._released().privacy.get("spent", {}))

    def _released(self) -> Model:
        if self.model is None:
            raise SynthError("call fit() first: there is no release yet")
        return self.model


def _workload(workload, schema: Schema) -> Workload:
    if workload is None:
        return Workload.marginals(schema, min(3, len(schema)))
    if isinstance(workload, Workload):
        if workload.schema.names != schema.names:
            raise SynthError(f"the workload's columns {list(workload.schema.names)} are not the schema's "
                             f"{list(schema.names)}")
        return workload
    if isinstance(workload, dict):
        return Workload.from_dict(workload, schema)
    return Workload.load(workload, schema)
