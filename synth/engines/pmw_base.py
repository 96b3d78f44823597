"""What both PMW variants share: the answer record and its round labels, and the stored
distribution D with the caches of the data's and D's marginals that each variant updates.

The textbook variant (``synth.engines.pmw``) and the practical one
(``synth.engines.pmw_practical``) both build on this module; neither imports the other's
class, and the front door (``open_pmw``/``run_pmw`` in ``synth.engines.pmw``) picks one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from synth.data.counts import Counts, Data, data_marginal, data_rows
from synth.data.schema import Schema
from synth.data.tables import count_matching
from synth.data.workload import Query, Workload
from synth.errors import SynthError
from synth.models.distribution import make_distribution
from synth.models.factored import SMALL_TABLE_CELLS
from synth.privacy.accounting import Accountant
from synth.privacy.mechanisms import AboveThreshold
from synth.privacy.rng import make_rng

__all__ = ["CAPPED", "HALTED", "LAZY", "UPDATE", "PMWAnswer", "StoredDistribution", "query_fraction", "query_value"]

LAZY, UPDATE, HALTED = "lazy", "update", "halted"
#: A lazy answer given without a test: an update on it would grow a factored D past its cap.
CAPPED = "lazy (model cap)"


@dataclass(frozen=True)
class PMWAnswer:
    """A released answer (a count of rows), how it was made, and its error bound: the true
    count lies within ``bound`` rows of ``value`` with probability at least 1 - beta
    (``synth.engines.pmw_bounds``)."""

    value: float
    round: str
    epoch: int
    bound: float = math.inf


def query_value(table: np.ndarray, query: Query) -> float:
    """``query``'s sum over ``table``, a table on exactly its columns (in its order)."""
    if not query.columns:
        return float(table)
    if query.is_cell:
        return float(table[tuple(int(a[0]) for a in query.allowed)])
    return float(table[np.ix_(*query.allowed)].sum())


def query_fraction(dist, query: Query, table_of: Callable[[tuple[str, ...]], np.ndarray] | None = None) -> float:
    """``query``'s fraction under ``dist``: from its marginal on the query's columns (``table_of``,
    a cache, or ``dist.marginal``) where that table is built, else by ``dist``'s own ``answer``."""
    if not dist.marginal_fits(query.columns):
        return dist.answer(query)
    return query_value((table_of or dist.marginal)(query.columns), query)


class StoredDistribution:
    """What both PMW variants share: their estimate D (``self._dist``), the caches of the
    data's and D's marginals, and the count of their rounds."""

    _dist: object

    def _open(self, data: Data, schema: Schema, plan, rng, accountant: Accountant | None, prior, monitor,
              max_cells: int, representation: str, max_model_cells: int) -> None:
        """The state every PMW starts from (D at the prior, no round yet)."""
        self._dist = make_distribution(schema, representation, prior=prior, max_cells=max_cells,
                                       max_model_cells=max_model_cells)
        if monitor is not None and self._dist.representation != "dense":
            raise SynthError("the KL monitor needs the dense distribution: leave out --monitor, or keep the universe "
                             "under the dense cap (--representation dense)")
        if plan.universe_size != schema.universe_size:
            raise ValueError(f"the plan is for |U|={plan.universe_size}, the schema has {schema.universe_size}")
        self.schema, self.plan = schema, plan
        self._data = data if isinstance(data, Counts) else np.ascontiguousarray(data)
        self._rng = make_rng(rng)
        self.accountant = accountant if accountant is not None else Accountant(plan.epsilon, plan.delta)
        self.monitor = monitor
        self._data_tables: dict[tuple[str, ...], np.ndarray] = {}
        self._model_tables: dict[tuple[str, ...], np.ndarray] = {}
        self.updates = 0
        self.selected = 0  # rounds run before the first query that select and measure (the practical variant's)
        self.rounds = {LAZY: 0, UPDATE: 0, HALTED: 0}
        self.capped = 0  # queries answered lazily because an update would grow D past its cap
        self._epoch: AboveThreshold | None = None

    @property
    def halted(self) -> bool:
        return self.updates >= self.plan.updates

    def updates_text(self) -> str:
        """What D has learned so far, for summary lines: '[N selected rounds, ]U updates of L=...'."""
        rounds = f"{self.selected:,} selected rounds, " if self.selected else ""
        return f"{rounds}{self.updates:,} updates of L={self.plan.updates:,}"

    @property
    def representation(self) -> str:
        """How D is stored: ``dense`` or ``factored``."""
        return self._dist.representation

    @property
    def model_cells(self) -> int:
        """Cells D holds: the universe (dense) or its junction tree's cliques (factored)."""
        return self._dist.cells

    def distribution(self):
        """D_t, the public model: a fresh normalized flat array, or a copy of the factored model."""
        return self._dist.normalized() if self._dist.representation == "dense" else self._dist.copy()

    def model_table(self, subset: tuple[str, ...]) -> np.ndarray:
        """The marginal of D_t on ``subset`` (fractions), cached until D moves (the variant
        empties ``_model_tables`` then)."""
        table = self._model_tables.get(subset)
        if table is None:
            table = self._dist.marginal(subset)
            self._model_tables[subset] = table
        return table

    def _data_table(self, subset: tuple[str, ...]) -> np.ndarray:
        table = self._data_tables.get(subset)
        if table is None:
            table = data_marginal(self._data, self.schema, subset)
            self._data_tables[subset] = table
        return table

    def model_answer(self, query: Query) -> float:
        """f(D_t) in rows: the plan's n times the query's fraction under D_t (from D_t's cached
        marginal on its columns, or, where that table is too big, by the model's own ``answer``)."""
        return self.plan.rows * query_fraction(self._dist, query, self.model_table)

    def model_fractions(self, workload: Workload) -> np.ndarray:
        """Every query's fraction under D_t, in workload order (cached marginals where they fit)."""
        dist = self._dist
        return workload.answer(lambda s: self.model_table(s) if dist.marginal_fits(s) else None, each=dist.answer)

    def _true_count(self, query: Query) -> float:
        """The query's true count: from the data's cached marginal on its columns when that
        table is small (at most ``SMALL_TABLE_CELLS`` cells, or the row count) or the data is a
        scan's counts, else by matching the rows column by column (no table at all)."""
        cells = math.prod(self.schema[c].size for c in query.columns)
        if isinstance(self._data, Counts) or cells <= max(SMALL_TABLE_CELLS, data_rows(self._data)):
            return query_value(self._data_table(query.columns), query)
        return float(count_matching(self._data, self.schema, query))
