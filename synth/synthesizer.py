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
import warnings
from pathlib import Path
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from synth.data.schema import INFERRED_DESCRIPTION, Categorical, Schema
from synth.data.workload import Workload
from synth.engines.registry import budget_after, derive_for_run, make_config, make_engine, options_of
from synth.engines.release import with_schema_cost
from synth.errors import DataError, PrivacyWarning, SynthError
from synth.data.constraints import as_constraint, fit_to_derived
from synth.models.constrained import constrain_model
from synth.models.model import Model
from synth.data.derive import DEFAULT_SCHEMA_SHARE
from synth.privacy.accounting import Budget
from synth.privacy.rng import make_rng
from synth.privacy.validation import check_budget_epsilon, check_delta, check_positive_int

__all__ = ["Synthesizer", "MECHANISMS"]

MECHANISMS = ("mwem", "pmw", "blr")
#: Public inputs an engine takes beside its config (a prior distribution over the universe).
_INPUTS = {"mwem": ("prior",), "pmw": ("prior",), "blr": ()}


def engine_options(mechanism: str) -> tuple[str, ...]:
    """The keyword options ``mechanism``'s engine takes (``rounds`` for MWEM, ``net`` for BLR...):
    its config's fields but ``rows`` (the Synthesizer's own), and its public inputs."""
    return tuple(name for name in options_of(mechanism) if name != "rows") + _INPUTS[mechanism]


class Synthesizer:
    """Fit a private model of a DataFrame for a workload, then sample or answer from it.

    One synthesizer makes one release: ``fit`` spends the whole budget, and a second ``fit``
    is refused (make a new synthesizer, and count both budgets).
    """

    def __init__(self, mechanism: str, epsilon: float, *, delta: float = 0.0, rows: int | None = None,
                 rng: np.random.Generator | int | None = None, **options: Any):
        if not isinstance(mechanism, str) or mechanism not in MECHANISMS:
            raise ValueError(f"mechanism ({mechanism!r}) must be one of: {', '.join(MECHANISMS)}")
        self.budget = Budget(check_budget_epsilon(epsilon), check_delta(delta))
        if delta and mechanism == "blr":
            raise ValueError("delta applies to mwem and pmw; blr is pure epsilon-DP")
        if rows is not None:
            rows = check_positive_int(rows, "rows")
        allowed = engine_options(mechanism)
        unknown = sorted(set(options) - set(allowed))
        if unknown:
            raise TypeError(f"{', '.join(map(repr, unknown))} is not an option of {mechanism}; its options are: "
                            f"{', '.join(allowed)}")
        self.inputs = {name: options.pop(name) for name in _INPUTS[mechanism] if name in options}
        self.config = make_config(mechanism, rows=rows, **options)  # every option checked now, before any data
        self.mechanism, self.epsilon, self.delta, self.rows = mechanism, self.budget.epsilon, self.budget.delta, rows
        self.options = options
        self._rng = rng
        self.model: Model | None = None

    @classmethod
    def create(cls, mechanism: str = "mwem", epsilon: float = 1.0, **kwargs: Any) -> Synthesizer:
        """A synthesizer for ``mechanism`` ("mwem", "pmw" or "blr"); other keywords go to the engine
        (for example ``rounds=`` for MWEM, ``net="sampled"`` for BLR, ``delta=`` for PMW).

        Every value is checked here, before any data is read: epsilon finite and > 0, delta in
        [0, 1), rows an integer >= 1, and each keyword an option of the engine.
        """
        return cls(mechanism, epsilon, **kwargs)

    # -- the private step ------------------------------------------------------------------
    def fit(self, data: pd.DataFrame | str | os.PathLike, schema: Schema | str | os.PathLike | None = None,
            workload: Workload | dict | str | os.PathLike | None = None, *,
            columns: str | list[str] | None = None, bad_rows: str = "error",
            bounds: dict[str, tuple[float, float]] | None = None, missing_tokens: tuple[str, ...] = (),
            schema_share: float = DEFAULT_SCHEMA_SHARE, constraints: list | None = None,
            categories: Mapping[str, Sequence] | None = None, missing: Mapping[str, bool] | None = None
            ) -> Synthesizer:
        """Read ``data`` once and release a model; spends the whole budget.

        ``data`` is a pandas or Dask DataFrame, or the path of a CSV file, a Parquet file or a
        folder of Parquet files; it is read once, counting only the tables the run needs.
        ``workload`` defaults to every 3-way marginal (every marginal of all columns if fewer).
        ``bad_rows="drop"`` leaves out rows with a value outside the schema (how many is never
        reported: it is private); ``"error"`` stops at the first, with a message that quotes
        it. A second ``fit`` is refused: this synthesizer's budget is spent.

        Without a ``schema`` one is derived under DP (``synth.data.derive``) with
        ``schema_share`` of the budget (delta must be > 0): of its rho when the run composes in
        zCDP (MWEM with Gaussian noise; the two parts then compose in rho), else of epsilon and
        delta. It takes what is known publicly, at no cost: ``bounds`` (numeric bounds,
        ``{"age": (0, 120)}``), ``categories`` (a column's complete list of values, ``{"sex":
        ["F", "M"]}``: no value is lost to "other"), ``missing`` (whether a column can hold a
        missing value, ``{"id_type": False}``; every derived column can by default) and
        ``missing_tokens``; the release's privacy record counts both parts, within the budget.

        ``constraints`` (public: ``synth.data.constraints``, as objects or their JSON forms, such
        as ``{"forbid": {"sex": "Male", "relationship": "Wife"}}``) are added to the schema's
        own, a derived one's too (where a derived column reads a value as "other" or clips it,
        that part of a constraint is left out, with a warning): the model gives the rows they
        rule out zero mass and no sampled row breaks one, at no privacy cost.
        """
        constraints = _constraints(constraints)  # malformed ones refused before any work
        if self.model is not None:
            raise SynthError(f"this synthesizer has already spent its budget (epsilon={self.epsilon:g}) on a fit; "
                             "create a new one for another release (and count both budgets)")
        total = budget = self.budget
        derivation = None
        if schema is None:
            if not isinstance(data, (pd.DataFrame, str, os.PathLike)):
                raise SynthError("a schema is derived from a pandas DataFrame or a file: give schema= for a Dask one")
            public = [Categorical(name, tuple(values), missing=(missing or {}).get(name, True))
                      for name, values in (categories or {}).items()]
            derivation, _ = derive_for_run(_data_source(data), self.config, total, schema_share,
                                           workload_given=workload is not None,
                                           columns=columns.split(",") if isinstance(columns, str) else columns,
                                           public=public, bounds=bounds, missing=missing,
                                           missing_tokens=missing_tokens, rng=_child(self._rng))
            schema = derivation.schema
            if constraints:
                constraints, notes = fit_to_derived(constraints, schema)
                for text in notes:
                    warnings.warn(text, stacklevel=2)
        elif categories is not None or missing is not None:
            raise SynthError("categories= and missing= describe columns of a schema to derive: with schema=, put them "
                             "in the schema")
        full = schema if isinstance(schema, Schema) else Schema.load(schema)
        full = full.with_constraints(constraints) if constraints else full
        selected = full.select(columns)
        queries = _workload(workload, selected)
        engine = make_engine(self.config, selected, queries, **self.inputs)
        if derivation is not None:
            engine, budget = budget_after(derivation, engine, total)
        engine.plan(budget)  # public checks of the budget against the plan, before the data is read
        from synth.data.dask_scan import is_dask_frame
        from synth.data.reading import check_bad_rows, scan

        check_bad_rows(bad_rows)
        if is_dask_frame(data):  # counted on the cluster (the current dask.distributed client, if any)
            from synth.data.dask_scan import scan_dask

            counts = scan_dask(data, full, queries.subsets, columns=columns, bad_rows=bad_rows)
        else:
            counts = scan(_data_source(data), full, queries.subsets, columns=columns, bad_rows=bad_rows)  # one pass
        if full.inferred:
            warnings.warn(f"the schema was {INFERRED_DESCRIPTION}", PrivacyWarning, stacklevel=2)
        release = engine.run(counts, budget, self._rng)
        # a schema derived under DP (here, or a derived schema file) counts in the release's record too
        self.model = with_schema_cost(constrain_model(release.model), selected, release.accountant, self.mechanism,
                                      total if derivation is not None else None)
        return self

    def fit_sample(self, data: pd.DataFrame | str | os.PathLike, schema: Schema | str | os.PathLike | None = None,
                   workload=None, *, n_rows: int | None = None, free_text: str = "drop",
                   **fit_options: Any) -> pd.DataFrame:
        """``fit`` (with ``fit_options``: ``columns``, ``bad_rows``, ``bounds``...) then ``sample``."""
        return self.fit(data, schema, workload, **fit_options).sample(n_rows, free_text=free_text)

    # -- post-processing -------------------------------------------------------------------
    def sample(self, n_rows: int | None = None, *, method: str = "round", numeric: str = "uniform",
               rng: np.random.Generator | int | None = None, free_text: str = "drop") -> pd.DataFrame:
        """Synthetic rows (default: n, the public or noisy row count) as a DataFrame: the
        schema's columns, and its identifier columns with fresh ids; its free-text columns left
        out (``free_text="drop"``) or filled with a placeholder (``"placeholder"``)."""
        from synth.models.synthetic import sample_model

        return sample_model(self._released(), n_rows, method=method, numeric=numeric, rng=rng, free_text=free_text)

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


def _child(rng: np.random.Generator | int | None) -> np.random.Generator | None:
    """A generator for the schema's derivation apart from the run's: a seed gets a child seed
    (so the two parts never draw the same noise), a generator is shared (it moves on)."""
    if rng is None or isinstance(rng, np.random.Generator):
        return rng
    return np.random.default_rng([int(make_rng(rng).integers(2**63)), 2])


def _constraints(constraints: Any) -> list:
    """``fit``'s ``constraints`` as a list of constraint objects (checked against the schema later)."""
    if constraints is None:
        return []
    if isinstance(constraints, (str, bytes, dict)) or not hasattr(constraints, "__iter__"):
        raise TypeError(f"constraints must be a list of constraints (objects or dicts), not "
                        f"{type(constraints).__name__}")
    return [as_constraint(c, i) for i, c in enumerate(constraints)]


def _workload(workload, schema: Schema) -> Workload:
    if workload is None:
        return Workload.default(schema)
    if isinstance(workload, Workload):
        if workload.schema.names != schema.names:
            raise SynthError(f"the workload's columns {list(workload.schema.names)} are not the schema's "
                             f"{list(schema.names)}")
        return workload
    if isinstance(workload, dict):
        return Workload.from_dict(workload, schema)
    return Workload.load(workload, schema)


def _data_source(data: object) -> pd.DataFrame | Path:
    """A DataFrame as is; a path (CSV, Parquet file or folder: ``synth.data.reading.iter_encoded``) as a Path."""
    if isinstance(data, pd.DataFrame):
        return data
    if not isinstance(data, (str, os.PathLike)):
        raise TypeError(f"data must be a pandas DataFrame or the path of a CSV file, a Parquet file or a folder of "
                        f"Parquet files, not {type(data).__name__}")
    path = Path(data)
    if not path.exists():
        raise DataError(f"{path}: no such file or folder")
    return path
