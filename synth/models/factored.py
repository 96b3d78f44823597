"""A factored distribution: D(u) ∝ exp(Σ_S θ_S[u_S]), stored as one table per column subset.

This is exactly the form multiplicative weights produces: an update on a marginal S (or on a
query over S) multiplies D by a function of u_S, i.e. adds to θ_S. So MWEM's and PMW's D can
be kept this way on universes far past what a dense array holds (adult's 14 columns have
6.4·10¹⁷ cells); only the storage changes, never the mechanism.

Inference runs on a junction tree of the subsets (``synth.models.junction_tree``): sum-product
(log tables up, linear updates down) gives every clique's marginal (its belief) in one
calibration; a clique's log table is written in one pass from its potentials and messages by
a Numba kernel (``synth._kernels.calibration``). A marginal inside a clique sums its belief;
one across cliques is computed by variable elimination along the smallest subtree that covers
it. Clique tables are summed by the same Numba kernel that marginalizes dense tables
(``synth.data.tables.marginal_from_dense``). A counting query whose
marginal would be bigger than the largest clique is never given that table: one upward
sum-product pass over its covering subtree, with its allowed cells as evidence, sums it in
memory bounded by the cliques (``answer``), for any number of columns.

The model's size is the total cells of its junction tree's cliques; ``max_cells`` caps it,
and a subset that would grow the tree past the cap is refused (``ModelSizeError``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from synth._kernels.calibration import broadcast_sum
from synth.data.schema import Schema
from synth.data.tables import marginal_from_dense, marginals_from_dense
from synth.errors import SynthError
from synth.models.factored_sample import iter_factored, sample_factored
from synth.models.fit import MAX_STEP, measurement_weight
from synth.models.junction_tree import JunctionTree, junction_tree, least_cells

__all__ = ["DEFAULT_MAX_MODEL_CELLS", "FactoredModel", "ModelSizeError"]

#: A query's marginal table is built when it has at most this many cells (or fits the largest
#: clique); a wider query is answered by message passing with evidence, never by its table.
SMALL_TABLE_CELLS = 2**20
#: A marginal across cliques is built as a table (then cached until D moves) when that costs at
#: most this many evidence passes over its cover (``_Calibration.table_work``): the queries a
#: table must serve to pay for itself. ``answer_workload`` counts the queries it has.
TABLE_QUERIES = 8
#: A calibration keeps cliques summed onto the columns queries need (``_Calibration._clique_onto``)
#: up to this share of the model's cells (beyond it they are summed for each query again).
ONTO_SHARE = 1.0
#: Default cap on the junction tree's total clique cells (10^7 float64 cells = 80 MB a copy).
DEFAULT_MAX_MODEL_CELLS = 10**7
# The fit's step grows to ``synth.models.fit.MAX_STEP`` times MW's (kept only if it lowers the squared
# loss, else halved). MW's own step moves a cell of probability p by about difference/(2n), far
# less than the difference/(n p) it needs: on all 91 adult pairs (eps = 1) 1,000 passes at
# steps up to 16 give mean L1 0.084 against 0.088 at MW's step.

Subset = tuple[str, ...]


class ModelSizeError(SynthError):
    """A subset would grow the factored model's junction tree past its cap."""


class FactoredModel:
    """Log-potential tables θ_S over column subsets S of ``schema``; D ∝ exp(Σ θ_S).

    With no potentials D is uniform. Subsets are kept in schema column order; every method
    takes a subset in any order and returns tables with axes in the order it was given.
    """

    representation = "factored"

    def __init__(self, schema: Schema, *, max_cells: int = DEFAULT_MAX_MODEL_CELLS,
                 potentials: dict[Sequence[str], np.ndarray] | None = None):
        self.schema = schema
        self.max_cells = int(max_cells)
        self._sizes = dict(zip(schema.names, schema.shape))
        self._potentials: dict[Subset, np.ndarray] = {}
        self._tree = junction_tree(schema.names, [], self._sizes)
        self._calibration: _Calibration | None = None
        self._refused: set[tuple[Subset, int]] = set()  # (subset, cap) no triangulation fits: ``fits``
        self.last_step = 1.0  # the step ``fit`` ended with (the next pass's, had there been one)
        self._known: tuple[Subset, np.ndarray] | None = None  # ``fit_one``'s marginal, while uncalibrated
        for subset, table in (potentials or {}).items():
            self.add_log(subset, table)

    # -- structure -----------------------------------------------------------------------
    @property
    def subsets(self) -> list[Subset]:
        """The subsets that carry a potential, in the order they were added."""
        return list(self._potentials)

    @property
    def tree(self) -> JunctionTree:
        return self._tree

    @property
    def cells(self) -> int:
        """The model's size: total cells of its junction tree's cliques."""
        return self._tree.cells(self._sizes)

    def canonical(self, subset: Sequence[str]) -> Subset:
        """``subset`` in schema column order (unknown or repeated columns are refused)."""
        positions = sorted(self.schema.index(name) for name in subset)
        if len(set(positions)) != len(positions):
            raise SynthError(f"subset {list(subset)} names a column twice")
        return tuple(self.schema.names[p] for p in positions)

    def cells_with(self, subset: Sequence[str]) -> int:
        """The model's size if ``subset`` were added (its current size when already covered):
        min-fill's triangulation, or the least one where min-fill's passes ``max_cells``."""
        return self._cells_with(self.canonical(subset))[0]

    def _cells_with(self, subset: Subset) -> tuple[int, bool]:
        """``cells_with`` for a canonical subset, and whether no triangulation is smaller."""
        if self._tree.clique_containing(subset) is not None:
            return self.cells, False
        return least_cells(self.schema.names, [*self._potentials, subset], self._sizes, self.max_cells)

    def fits(self, subset: Sequence[str]) -> bool:
        """Whether ``subset`` can be added without growing the model past ``max_cells``: with
        some triangulation, not only min-fill's. A subset that no triangulation fits is
        remembered (potentials are only ever added, so it never fits later)."""
        subset = self.canonical(subset)
        if (subset, self.max_cells) in self._refused:
            return False
        cells, least = self._cells_with(subset)
        if cells > self.max_cells and least:
            self._refused.add((subset, self.max_cells))
        return cells <= self.max_cells

    def add_subset(self, subset: Sequence[str]) -> Subset:
        """Give ``subset`` a (zero) potential; re-triangulate only if no clique holds it."""
        subset = self.canonical(subset)
        if subset in self._potentials:
            return subset
        if self._tree.clique_containing(subset) is None:
            tree = junction_tree(self.schema.names, [*self._potentials, subset], self._sizes,
                                 limit=self.max_cells)
            cells = tree.cells(self._sizes)
            if cells > self.max_cells:
                raise ModelSizeError(
                    f"adding the subset {', '.join(subset)} would grow the model to {cells:,} cells, more than "
                    f"its cap of {self.max_cells:,}; raise it (--max-model-cells) or use fewer or smaller marginals")
            self._tree = tree
            self._calibration, self._known = None, None
        self._potentials[subset] = np.zeros([self._sizes[c] for c in subset])
        return subset

    # -- updates -------------------------------------------------------------------------
    def add_log(self, subset: Sequence[str], log_factors: np.ndarray) -> None:
        """θ_S += ``log_factors`` (axes in ``subset``'s order): D *= exp(log_factors[u_S])."""
        key = self.add_subset(subset)
        table = np.asarray(log_factors, dtype=np.float64)
        table = table.transpose(_axes_to(list(subset), key)) if len(subset) else table
        if table.shape != self._potentials[key].shape or not np.all(np.isfinite(table) | (table == -np.inf)):
            raise ValueError(f"log factors for {list(subset)} must be a table of shape "
                             f"{[self._sizes[c] for c in subset]} without nan or +inf")
        self._potentials[key] = self._potentials[key] + table
        self._calibration, self._known = None, None

    def multiply(self, subset: Sequence[str], factors: np.ndarray) -> None:
        """D *= ``factors``[u_S] (non-negative, axes in ``subset``'s order)."""
        factors = np.asarray(factors, dtype=np.float64)
        if np.any(factors < 0) or not np.all(np.isfinite(factors)):
            raise ValueError("factors must be finite and non-negative")
        with np.errstate(divide="ignore"):
            self.add_log(subset, np.log(factors))

    def scale_query(self, query, factor: float) -> None:
        """D *= ``factor`` on the query's cells (PMW's update on one counting query)."""
        factors = np.ones([self._sizes[c] for c in query.columns])
        if query.columns:
            factors[np.ix_(*query.allowed)] = factor
        else:
            factors = np.asarray(float(factor))
        self.multiply(query.columns, factors)

    def potential(self, subset: Sequence[str]) -> np.ndarray:
        """θ_S (a copy), axes in ``subset``'s order."""
        key = self.canonical(subset)
        return self._potentials[key].transpose(_axes_to(key, list(subset))).copy()

    def copy(self) -> FactoredModel:
        twin = FactoredModel(self.schema, max_cells=self.max_cells)
        twin._potentials = {s: t.copy() for s, t in self._potentials.items()}
        twin._tree = self._tree
        twin._refused = set(self._refused)
        return twin

    # -- inference -----------------------------------------------------------------------
    def calibrate(self) -> _Calibration:
        """The calibrated junction tree (cached until the potentials change)."""
        if self._calibration is None:
            self._calibration = _Calibration(self)
            self._known = None
        return self._calibration

    def marginal(self, subset: Sequence[str]) -> np.ndarray:
        """D's marginal on ``subset`` (probabilities summing to 1), axes in ``subset``'s order.

        Right after ``fit_one`` its own subset's marginal is known without a calibration."""
        if self._calibration is None and self._known is not None and self._known[0] == self.canonical(subset):
            key, table = self._known
            return table.transpose(_axes_to(key, list(subset))).copy() if len(subset) else table.copy()
        return self.calibrate().marginal(subset)

    def marginals(self, subsets: Sequence[Sequence[str]]) -> list[np.ndarray]:
        return self.calibrate().marginals(subsets)

    def marginal_fits(self, subset: Sequence[str]) -> bool:
        """Whether D's marginal on ``subset`` is built as a table: a subset inside one clique,
        or one whose table is no bigger than the largest clique (or ``SMALL_TABLE_CELLS``) and
        costs at most ``TABLE_QUERIES`` evidence passes to build (a table across a big
        separator can cost thousands: on adult's 14 columns one 3-way table took 16 s, where
        one query by evidence takes 2-9 ms). Other queries are answered by ``answer`` without
        their table."""
        return self.calibrate().marginal_fits(self.canonical(subset))

    def answer(self, query) -> float:
        """A query's probability under D (a ``synth.data.workload.Query``: columns and allowed codes).

        From the marginal on its columns when that table is small (``marginal_fits``); else
        by sum-product with the query's cells as evidence, in memory bounded by the cliques.
        """
        return self.calibrate().answer(query)

    def answer_workload(self, workload) -> np.ndarray:
        """Every query's probability under D (a ``synth.data.workload.Workload``, in its order):
        small subsets from their marginals (those inside one clique summed in one walk of it),
        wider ones query by query with evidence (``answer``)."""
        calibration = self.calibrate()
        counts: dict[Subset, int] = {}
        for item in workload.items:  # a whole marginal counts its cells
            counts[item.columns] = counts.get(item.columns, 0) + getattr(item, "cells", 1)
        small = {s: calibration.marginal_fits(self.canonical(s), max(TABLE_QUERIES, counts[s]))
                 for s in workload.subsets}
        calibration.marginals([s for s, fits in small.items() if fits])
        return workload.answer(lambda s: calibration.marginal(s) if small[s] else None, each=calibration.answer)

    def dense(self) -> np.ndarray:
        """The flat dense distribution over U (small universes only: for tests and checks)."""
        return self.marginal(self.schema.names).reshape(-1)

    def sample_codes(self, rows: int, method: str = "round", rng=None) -> np.ndarray:
        """``rows`` rows of codes by ancestral sampling along the junction tree."""
        return sample_factored(self, rows, method, rng)

    def iter_sample_codes(self, rows: int, method: str = "round", rng=None) -> Iterator[np.ndarray]:
        """``sample_codes``'s rows in blocks, holding one block at a time (for writing big tables)."""
        return iter_factored(self, rows, method, rng)

    def log_partition(self) -> float:
        """log Σ_u exp(Σ θ_S[u_S]) (over U; the uniform model has log |U|)."""
        return self.calibrate().log_z

    # -- fitting -------------------------------------------------------------------------
    def fit(self, measured: Sequence[tuple], n: float, passes: int, *, workload=None, stop_residual: float = 0.0,
            on_pass: Callable[[int], None] | None = None, max_exponent: float = 30.0,
            converged: float = 0.0, step: float = 1.0) -> tuple[int, float]:
        """Mirror-descent passes over every measurement at once (one calibration per pass).

        ``measured`` holds ``("marginal", subset, noisy table)`` or ``("query", index, noisy
        count)`` (``workload[index]`` is the query), as ``synth.models.fit.mw_fit`` takes them. A pass
        calibrates once, then moves every measured subset's potential by its multiplicative-
        weights step ``step * (noisy - n·estimate) / (2n)``. The step starts at MW's (1, or
        ``step``: a refit can start from the step the last fit ended with, ``last_step``) and
        grows by half while passes succeed, up to ``MAX_STEP``; a pass that would raise the
        squared loss Σ (noisy - n·estimate)² is undone and the step halved, so the loss never increases (the
        L1 residual, the stopping rule's measure, is not a descent objective of these steps).
        Stops after ``passes``, when the L1 residual reaches ``stop_residual``, when no step
        moves anything, or (``converged`` > 0) once a pass lowers the squared loss by at most
        ``converged`` of it, as the dense fit does (``synth.models.fit.CONVERGED``): where the
        noise dwarfs the counts the residual never reaches its target, and on adult's 14
        columns a PMW stream's fits otherwise ran their 1,000 passes with the residual still
        at 1.03 times the target after the first few dozen.

        Returns the passes run and the last residual.
        """
        targets = [self._target(*m[:3], workload) + (measurement_weight(m),) for m in measured]
        step, done = min(max(float(step), 2.0**-20), MAX_STEP), 0
        residual, loss, exponents = self._residual(targets, n, max_exponent)
        while done < passes and residual > stop_residual:
            largest = max((float(np.abs(e).max()) for e in exponents), default=0.0)
            if step * largest < 1e-9:
                break
            done += 1
            saved = {s: self._potentials[s] for s, *_ in targets}
            for (subset, *_), exponent in zip(targets, exponents):
                self._potentials[subset] = self._potentials[subset] + step * exponent
            self._calibration, self._known = None, None
            new_residual, new_loss, new_exponents = self._residual(targets, n, max_exponent)
            if new_loss <= loss:
                gained = loss - new_loss
                residual, loss, exponents = new_residual, new_loss, new_exponents
                if gained <= converged * (loss + gained):
                    break
                step = min(step * 1.5, MAX_STEP)
            else:
                self._potentials.update(saved)
                self._calibration, self._known = None, None
                step /= 2
            if on_pass is not None and done % 10 == 0:
                on_pass(done)
        self.last_step = step
        return done, residual

    def fit_one(self, measurement: tuple, n: float, passes: int, *, workload=None, stop_residual: float = 0.0,
                max_exponent: float = 30.0, converged: float = 0.0) -> tuple[int, float]:
        """``fit``'s passes on one measurement alone, without a calibration per pass.

        Multiplying D by a function of u_S multiplies D's marginal on S by that function (then
        normalizes), whatever the rest of the model: so the passes run on the marginal of S
        itself (one table, read once), and θ_S takes their sum at the end. Each pass is MW's
        step on that table, grown and halved as ``fit``'s is on the squared loss of this
        measurement; it stops at ``stop_residual`` (the L1 residual), after ``passes``, when
        no step moves anything, or once a pass gains at most ``converged`` of the loss. The
        other measurements' marginals move too (a later ``fit`` evens them out).

        Returns the passes run and the residual.
        """
        subset, noisy, mask = self._target(*measurement[:3], workload)
        weight = measurement_weight(measurement)
        estimate = self.calibrate().marginal(subset) * n  # fractions x n: counts
        within = None if mask is None else mask.astype(np.float64)

        def errors(estimate: np.ndarray) -> tuple[float, float, np.ndarray]:
            difference = noisy - (estimate if mask is None else float(estimate[mask].sum()))
            exponent = np.clip(weight * difference / (2 * n), -max_exponent, max_exponent)
            if mask is not None:
                exponent = float(exponent) * within
            return float(np.abs(difference).sum()), weight * float(np.square(difference).sum()), exponent

        residual, loss, exponent = errors(estimate)
        moved = np.zeros_like(estimate)
        step, done = 1.0, 0
        while (done < passes and residual > stop_residual
               and step * float(np.abs(exponent).max(initial=0.0)) >= 1e-9):
            done += 1
            trial = estimate * np.exp(step * exponent)
            total = float(trial.sum())
            if not 0 < total < math.inf:
                step /= 2
                continue
            trial *= n / total
            new_residual, new_loss, new_exponent = errors(trial)
            if new_loss <= loss:
                moved += step * exponent
                gained = loss - new_loss
                estimate, residual, loss, exponent = trial, new_residual, new_loss, new_exponent
                if gained <= converged * (loss + gained):
                    break
                step = min(step * 1.5, MAX_STEP)
            else:
                step /= 2
        if moved.any():
            self._potentials[subset] = self._potentials[subset] + moved
            self._calibration = None
            self._known = (subset, estimate / n)  # D's marginal on it now, until the next calibration
        return done, residual

    def _target(self, kind: str, key, noisy, workload) -> tuple[Subset, np.ndarray, np.ndarray | None]:
        """(canonical subset, noisy table or count, mask of the query's cells or None)."""
        if kind == "marginal":
            subset = self.add_subset(key)
            table = np.asarray(noisy, dtype=np.float64)
            return subset, table.transpose(_axes_to(list(key), subset)) if len(key) else table, None
        query = workload[key]
        subset = self.add_subset(query.columns)
        mask = np.zeros([self._sizes[c] for c in query.columns], dtype=bool)
        if query.columns:
            mask[np.ix_(*query.allowed)] = True
            mask = mask.transpose(_axes_to(list(query.columns), subset))
        else:
            mask = np.asarray(True)
        return subset, np.asarray(float(noisy)), mask

    def _residual(self, targets, n: float, max_exponent: float) -> tuple[float, float, list[np.ndarray]]:
        """Total |noisy - n·estimate| (the stopping rule's measure), the squared loss
        Σ (noisy - n·estimate)² the steps descend, and each measurement's MW exponent (on its
        subset's table)."""
        calibration = self.calibrate()
        residual, loss, exponents = 0.0, 0.0, []
        calibration.marginals([subset for subset, *_ in targets])  # cached: one walk of each clique
        for subset, noisy, mask, weight in targets:
            estimate = calibration.marginal(subset) * n
            if mask is None:
                difference = noisy - estimate
                residual += float(np.abs(difference).sum())
                loss += weight * float(np.square(difference).sum())
                exponents.append(np.clip(weight * difference / (2 * n), -max_exponent, max_exponent))
            else:
                difference = float(noisy) - float(estimate[mask].sum())
                residual += abs(difference)
                loss += weight * difference * difference
                exponents.append(np.where(mask, min(max(weight * difference / (2 * n), -max_exponent), max_exponent),
                                          0.0))
        return residual, loss, exponents


class _Calibration:
    """Sum-product over the junction tree: every clique's normalized belief (Hugin-style).

    Upward, each clique's table is exp(its log table - a shift), written in one pass from its
    potentials and its children's messages (``_exponentiated``); its sum onto the parent
    separator gives its message. The root's table, normalized, is its belief. Downward, a
    child's belief is its own table times, per separator cell, the parent belief's marginal
    there over the child's own separator sum: one multiply over the child, with no second log
    table or exponential (``_exact_belief`` recomputes in log space where the ratio is too big
    to keep precision). The ratio is taken as exp(parent's log message + shift - log Z), the
    log-space calibration's terms, so a model whose log-potentials swamp each other in float64
    (1e12 beside 1) still shows it in beliefs that do not sum to 1, which is how loading a
    model refuses one (``synth.models.model``); an exact ratio would hide it. A clique's
    messages to all its children are summed in one walk of it.
    So the root, the largest clique, is walked four times (write, exponential, sums onto its
    separators, normalization): on a 60-round MWEM model of adult's 14 columns (a 1.8M-cell
    root) a calibration takes 8 ms, against 27 ms in log space with one NumPy pass per table."""

    def __init__(self, model: FactoredModel):
        self.model = model
        self.tree = tree = model._tree
        sizes, schema = model._sizes, model.schema
        holders, children, separators = _layout(tree, tuple(model._potentials))
        held: list[list[tuple[Subset, np.ndarray]]] = [[] for _ in tree.cliques]
        for (subset, potential), i in zip(model._potentials.items(), holders):
            held[i].append((subset, potential))
        tables: list[np.ndarray] = [np.empty(0)] * len(tree.cliques)
        shifts = [0.0] * len(tree.cliques)  # tables[i] is exp(log table - shifts[i]) until it is the belief
        own: dict[int, np.ndarray] = {}  # clique -> its table summed onto its parent separator (linear)
        upward: dict[int, np.ndarray] = {}  # clique -> its message to its parent (log, over the separator)
        for i in reversed(tree.order):  # children first: a table then holds its subtree's evidence
            held[i] += [(separators[c], upward[c]) for c in children[i]]  # kept for ``_exact_belief``
            if tree.parent[i] < 0:
                continue
            tables[i], shifts[i] = _exponentiated(held[i], tree.cliques[i], sizes)
            own[i] = _sum_onto(tables[i], tree.cliques[i], separators[i], schema)
            if not float(own[i].sum()) >= _MIN_TOTAL:  # the shift was far above the largest entry
                tables[i], shifts[i] = _exponentiated(held[i], tree.cliques[i], sizes, exact=True)
                own[i] = _sum_onto(tables[i], tree.cliques[i], separators[i], schema)
            with np.errstate(divide="ignore"):
                upward[i] = np.log(own[i]) + shifts[i]
        root = tree.order[0]
        kids = [separators[c] for c in children[root]]
        table, shift = _exponentiated(held[root], tree.cliques[root], sizes)
        sums = _sums_onto(table, tree.cliques[root], kids, schema) if kids else []
        total = float(sums[0].sum()) if kids else float(table.sum())
        if not total >= _MIN_TOTAL:
            table, shift = _exponentiated(held[root], tree.cliques[root], sizes, exact=True)
            sums = _sums_onto(table, tree.cliques[root], kids, schema) if kids else []
            total = float(table.sum())
        self.log_z = shift + math.log(total)
        scale = math.exp(shift - self.log_z)
        table *= scale
        tables[root] = table
        self.beliefs = tables
        for i in tree.order:
            if i != root and children[i]:
                sums = _sums_onto(tables[i], tree.cliques[i], [separators[c] for c in children[i]], schema)
                scale = 1.0
            for c, above in zip(children[i], sums):
                above = above * scale  # the parent belief's marginal on the separator
                with np.errstate(divide="ignore", over="ignore"):  # log 0: no mass there, a ratio of 0
                    message = np.log(above) + (self.log_z - np.where(own[c] > 0, upward[c], math.inf))
                    ratio = np.exp(message + (shifts[c] - self.log_z))  # above / own, as it rounds in logs
                if ratio.size and not float(ratio.max()) <= _RATIO_LIMIT:
                    tables[c] = self._exact_belief(c, held[c], above, upward[c])
                else:
                    tables[c] *= _expand(ratio, separators[c], tree.cliques[c], sizes)
        self._cache: dict[Subset, np.ndarray] = {}
        self._separators: dict[int, np.ndarray] = {}  # clique -> marginal on its parent separator
        self._onto: dict[tuple[int, Subset], np.ndarray] = {}  # (clique, columns) -> its belief summed onto them
        self._fits: dict[Subset, tuple[bool, float, int]] = {}  # key -> ``_table_fits``
        self._asked: dict[Subset, int] = {}  # key -> queries answered by evidence (``marginal_fits``)
        self._plans: dict[Subset, list] = {}  # key -> ``_cover_plan``
        self._onto_cells = 0  # cells held by ``_onto`` (``_clique_onto``)
        self._holders = dict(zip(model._potentials, holders))  # potential's subset -> its clique

    def _exact_belief(self, clique: int, operands: list[tuple[Subset, np.ndarray]], above: np.ndarray,
                      upward: np.ndarray) -> np.ndarray:
        """The belief of a non-root ``clique`` in log space: its log table plus its parent's
        message (the parent belief's log marginal ``above`` on the separator, less the
        clique's own message ``upward``), exponentiated relative to its largest entry.

        Used where the linear update's ratio is so big that cells of the clique's own table,
        exponentiated relative to its own largest entry, could have underflowed and mattered."""
        tree, sizes = self.tree, self.model._sizes
        separator = tree.separator(clique, tree.parent[clique])
        with np.errstate(divide="ignore", invalid="ignore"):
            message = np.where(np.isfinite(upward), np.log(above) + self.log_z - upward, -math.inf)
        operands = operands + [(separator, message)]
        table, top = _exponentiated(operands, tree.cliques[clique], sizes, exact=True)
        table *= math.exp(top - self.log_z)
        return table

    def marginals(self, subsets: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """``marginal`` of each subset; those inside one clique are summed from its belief
        together, in one walk of it (``marginals_from_dense``), not one walk each."""
        tree, model = self.tree, self.model
        inside: dict[int, list[Subset]] = {}
        for subset in subsets:
            if type(subset) is tuple and subset in self._cache:  # a canonical subset, already summed
                continue
            if type(subset) is tuple and subset and subset in self._holders:  # a potential's (canonical)
                key, c = subset, self._holders[subset]
            else:
                key = model.canonical(subset)
                c = tree.clique_containing(key) if key and key not in self._cache else None
            if c is not None and key not in inside.setdefault(c, []):
                inside[c].append(key)
        for c, keys in inside.items():
            if len(keys) > 1:
                tables = marginals_from_dense(self.beliefs[c], model.schema.project(tree.cliques[c]), keys)
                self._cache.update(zip(keys, tables))
        return [self.marginal(subset) for subset in subsets]

    def marginal(self, subset: Sequence[str]) -> np.ndarray:
        if type(subset) is tuple:  # the cache's keys are canonical: a hit needs no transpose
            table = self._cache.get(subset)
            if table is not None:
                return table
        model = self.model
        key = model.canonical(subset)
        table = self._cache.get(key)
        if table is None:
            table = self._marginal(key)
            self._cache[key] = table
        return table.transpose(_axes_to(key, list(subset))) if len(subset) else table

    def _marginal(self, key: Subset) -> np.ndarray:
        tree, schema = self.tree, self.model.schema
        if not key:
            return np.asarray(1.0)
        c = tree.clique_containing(key)
        if c is not None:
            return _sum_onto(self.beliefs[c], tree.cliques[c], key, schema)
        # D on the cover's columns is the top clique's belief times each other clique's
        # conditional given its parent separator. A column of a clique that is neither wanted
        # nor in a separator to another clique of the cover is in no other clique of the cover
        # (running intersection), so each clique is first summed onto the columns it shares
        # (cached: the marginals of one scoring share most of them). Then each clique, children
        # first, sends its parent its conditional times all its children's messages, summed
        # onto its parent separator and the wanted columns below it, in one contraction whose
        # order einsum chooses: merging one child at a time had to carry the columns the other
        # children still needed (on adult's 14 columns a 25M-cell product for a 3-way marginal
        # of 77k cells: 0.8 s, against 15 ms so); one einsum over the whole cover could pick an
        # order that built a huge product (a 35-column model: 16 s for one pair).
        sent: dict[int, tuple[Subset, np.ndarray]] = {}
        for i, keep, above, kids, out in self._cover_plan(key):  # children before parents
            table = self._clique_onto(i, keep)
            if above:
                table = _conditional(table, keep, above, schema)
            sent[i] = (out, _contract([(keep, table)] + [sent.pop(j) for j in kids], out))
        (top,) = sent.values()
        return top[1]

    def _cover_plan(self, key: Subset) -> list[tuple[int, Subset, Subset, tuple[int, ...], Subset]]:
        """``_marginal``'s (and ``_evidence``'s) walk of the cover of ``key`` (children before
        parents): for each clique, the columns it is summed onto, its parent separator (empty
        for the top), its children in the cover, and the columns of the message it sends up
        (its separator and the wanted columns below it; ``key`` itself for the top). Cached."""
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = self._new_cover_plan(key)
        return plan

    def _new_cover_plan(self, key: Subset) -> list[tuple[int, Subset, Subset, tuple[int, ...], Subset]]:
        tree = self.tree
        cover = tree.covering_subtree(key)
        wanted = set(key)
        children = {i: tuple(j for j in cover if tree.parent[j] == i) for i in cover}
        below: dict[int, set[str]] = {}
        plan = []
        for i in reversed(cover):
            columns = tree.cliques[i]
            above = tree.separator(i, tree.parent[i]) if i != cover[0] else ()
            shared = set(above).union(*(tree.separator(j, i) for j in children[i]))
            keep = tuple(c for c in columns if c in wanted or c in shared)
            present = set(keep).union(*(below.pop(j) for j in children[i]))
            out = key if i == cover[0] else above + tuple(c for c in key if c in present and c not in above)
            below[i] = set(out)
            plan.append((i, keep, above, children[i], out))
        return plan

    def table_work(self, key: Subset) -> tuple[float, int]:
        """(multiply-adds to build the marginal on ``key`` across cliques, cells of its cover's
        cliques): each clique summed onto what it shares, then each contraction of the walk
        in the best order of its tables (``_contraction_work``). One evidence pass
        (``_evidence``) walks about the cover's cells."""
        sizes = self.model._sizes
        cover_cells = sum(self.tree.clique_cells[i] for i in self.tree.covering_subtree(key))
        outs: dict[int, Subset] = {}
        work = float(cover_cells)
        for i, keep, _, kids, out in self._cover_plan(key):
            work += _contraction_work([keep] + [outs.pop(j) for j in kids], out, sizes)
            outs[i] = out
        return work, cover_cells

    def _clique_onto(self, i: int, keep: Subset) -> np.ndarray:
        """Clique ``i``'s belief summed onto ``keep`` (its columns, in its order), cached while
        the cache holds at most ``ONTO_SHARE`` of the model's cells (then computed each time)."""
        table = self._onto.get((i, keep))
        if table is None:
            table = _sum_onto(self.beliefs[i], self.tree.cliques[i], keep, self.model.schema)
            extra = 0 if table is self.beliefs[i] else table.size
            if self._onto_cells + extra <= ONTO_SHARE * sum(self.tree.clique_cells):
                self._onto[(i, keep)] = table
                self._onto_cells += extra
        return table

    # -- counting queries ----------------------------------------------------------------
    def marginal_fits(self, key: Subset, queries: float = TABLE_QUERIES) -> bool:
        """Whether the marginal on ``key`` (schema order) is built as a table (see the model's),
        for ``queries`` queries on it (or as many as ``answer`` has already answered by
        evidence, if more): across cliques, only when building it takes at most the work of
        that many evidence passes (``table_work``) or ``SMALL_TABLE_CELLS`` multiply-adds. So
        a subset asked again and again gets its table once evidence has cost about as much
        (rent, then buy: at most twice the cheaper of the two)."""
        if key in self._cache or self.tree.clique_containing(key) is not None:
            return True
        found = self._fits.get(key)
        if found is None:
            found = self._fits[key] = self._table_fits(key)
        queries = max(queries, self._asked.get(key, 0))
        return found[0] and found[1] <= max(queries * found[2], SMALL_TABLE_CELLS)

    def _table_fits(self, key: Subset) -> tuple[bool, float, int]:
        """(whether the table is small enough, ``table_work``)."""
        sizes = self.model._sizes
        largest = max(self.tree.clique_cells, default=0)
        if math.prod(sizes[c] for c in key) > max(largest, SMALL_TABLE_CELLS):
            return False, 0.0, 0
        spanned = {c for i in self.tree.covering_subtree(key) for c in self.tree.cliques[i]}
        if len(spanned) > _EINSUM_AXES:  # ``_contract`` sums the cover with einsum
            return False, 0.0, 0
        return (True, *self.table_work(key))

    def answer(self, query) -> float:
        """A counting query's probability: its marginal's allowed cells summed when that table
        is small, else ``_evidence``."""
        if not query.columns:
            return 1.0
        key = self.model.canonical(query.columns)
        allowed = dict(zip(query.columns, query.allowed))
        if self.marginal_fits(key):
            table = self.marginal(key)
            return float(table[np.ix_(*(allowed[c] for c in key))].sum())
        self._asked[key] = self._asked.get(key, 0) + 1
        return self._evidence(key, allowed)

    def _evidence(self, key: Subset, allowed: dict[str, np.ndarray]) -> float:
        """Σ of D over the cells ``allowed`` admits, by one upward sum-product pass over the
        smallest subtree covering ``key``, with evidence.

        On the cover D is the top clique's belief times each other clique's belief over its
        parent separator's marginal. Restricting a query column to its allowed codes in every
        table that holds it (beliefs and separator marginals alike) sums over those codes only,
        which is its indicator applied once. Each clique's belief, restricted and summed onto
        the query's columns and its separators in the cover (``_cover_plan``), times its
        children's messages, is summed onto its parent separator and divided by the
        separator's restricted marginal; the top clique's total is the answer. A clique that
        holds no query column is summed onto its separators once and kept (``_clique_onto``),
        so later queries through it walk a small table: on adult's 14 columns, 4 ms a query
        went to 1-2 ms. Every table made is at most a clique's size, whatever the number of
        query columns.
        """
        if not key:
            return 1.0  # an empty cover: no query columns
        tree = self.tree
        sent: dict[int, tuple[Subset, np.ndarray]] = {}
        for i, keep, above, kids, _ in self._cover_plan(key):  # children before parents
            columns = tree.cliques[i]
            summed = self._onto.get((i, keep))
            if summed is not None or not any(c in allowed for c in columns):
                # the clique summed onto the separators the walk needs (cached: queries on the
                # same subset share them), or onto those and the query's columns, if cached
                table = _restrict(self._clique_onto(i, keep) if summed is None else summed, keep, allowed)
            else:  # cut down to the allowed codes first (a view where they are a range)
                table, keep = _restrict(self.beliefs[i], columns, allowed), columns
            # sum out what neither the parent nor a child needs before any product
            needed = set(above).union(*(tree.separator(j, i) for j in kids))
            if any(c not in needed for c in keep):
                table = table.sum(axis=tuple(a for a, c in enumerate(keep) if c not in needed))
                keep = tuple(c for c in keep if c in needed)
            for j in kids:
                separator, message = sent.pop(j)
                table = table * _broadcast(message, separator, keep)
            if not above:
                return float(table.sum())
            summed = table.sum(axis=tuple(a for a, c in enumerate(keep) if c not in above))
            below = _restrict(self._separator_marginal(i), above, allowed)
            sent[i] = (above, np.divide(summed, below, out=np.zeros_like(summed), where=below > 0))
        return 1.0

    def _separator_marginal(self, i: int) -> np.ndarray:
        """D's marginal on the separator of clique ``i`` and its parent (cached)."""
        tree = self.tree
        separator = tree.separator(i, tree.parent[i])
        table = self._separators.get(i)
        if table is None:
            table = _sum_onto(self.beliefs[i], tree.cliques[i], separator, self.model.schema)
            self._separators[i] = table
        return table


# -- table helpers ---------------------------------------------------------------------------


def _axes_to(source: Sequence[str], target: Sequence[str]) -> list[int]:
    """The transpose that takes a table with axes ``source`` to axes ``target`` (same columns)."""
    return [list(source).index(c) for c in target]


@functools.lru_cache(maxsize=64)
def _layout(tree: JunctionTree, subsets: tuple[Subset, ...]
            ) -> tuple[tuple[int, ...], tuple[tuple[int, ...], ...], tuple[Subset, ...]]:
    """The calibration's walk of ``tree`` (cached: it is the same for every pass of a fit):
    the clique holding each of ``subsets``, each clique's children, and each clique's
    separator with its parent (empty for the root)."""
    holders = tuple(tree.clique_containing(subset) for subset in subsets)
    children: list[list[int]] = [[] for _ in tree.cliques]
    for i in tree.order[1:]:
        children[tree.parent[i]].append(i)
    separators = tuple(tree.separator(i, p) if p >= 0 else () for i, p in enumerate(tree.parent))
    return holders, tuple(map(tuple, children)), separators


def _exponentiated(operands: list[tuple[Subset, np.ndarray]], columns: Subset, sizes: dict[str, int], *,
                   exact: bool = False) -> tuple[np.ndarray, float]:
    """A new clique table over ``columns``, exp(log table - shift), and the shift; the log
    table is the sum of the operands (log tables over subsets of it, schema order).

    They are summed in small groups first (``_grouped``), then the groups, less the shift, are
    written into the clique in one pass (``broadcast_sum``) and exponentiated in place. The
    shift is the sum of the groups' largest entries: at or above the clique's largest entry
    (no overflow), and found without a pass over the clique. A caller that finds the table's
    total too small (``_MIN_TOTAL``: the shift far above the largest entry) asks for the
    ``exact`` shift, the largest entry, as the log-space calibration used (two more passes).
    Raises ``SynthError`` when the clique has no mass at all (so no row of the model has any).
    """
    shape = tuple(sizes[c] for c in columns)
    subsets = tuple(subset for subset, _ in operands)
    parts = [operands[members[0]] if len(members) == 1
             else (union, _summed([operands[k] for k in members], union, sizes))
             for union, members in _grouped(columns, shape, subsets)]
    shift = 0.0 if exact else math.fsum(float(table.max()) if table.size else -math.inf for _, table in parts)
    if not exact and math.isfinite(shift):
        table = _summed(parts + [((), np.asarray(-shift))], columns, sizes)
    else:
        table = _summed(parts, columns, sizes)
        shift = float(table.max()) if table.size else -math.inf
        if math.isfinite(shift):
            table -= shift  # in place: no clique-sized temporary
    if not math.isfinite(shift):  # every cell -inf: the model gives every row zero mass
        raise SynthError("the factored model gives every row zero mass")
    np.exp(table, out=table)
    return table, shift


#: ``_exponentiated``'s shift is kept when the table's total is at least this, so at most 46 +
#: ln(cells) above the largest entry: entries within e^-640 of the largest keep every bit in
#: the exponential (exp(log table - largest entry), the log-space calibration's, keeps those
#: within e^-708). A smaller total asks for the exact shift. Adult's MWEM models: at most 11.
_MIN_TOTAL = 1e-20

#: The downward update multiplies a child's table (exponentiated relative to its own shift) by
#: parent marginal / own sum per separator cell. Up to this ratio a belief cell loses bits (its
#: own entry subnormal) only below 2.2e-308 x 1e20; past it the belief is recomputed in log
#: space. Adult's MWEM models: ratios up to 100.
_RATIO_LIMIT = 1e20


#: A clique's log tables are summed in groups whose union has at most this share of its cells.
GROUP_SHARE = 1 / 16


@functools.lru_cache(maxsize=256)
def _grouped(columns: Subset, shape: tuple[int, ...], subsets: tuple[Subset, ...]
             ) -> tuple[tuple[Subset, tuple[int, ...]], ...]:
    """The log tables of one clique over ``columns`` (sizes ``shape``), one over each of
    ``subsets``, in groups by position, each with the union of its columns (clique order) kept
    small (``GROUP_SHARE`` of the clique): each group is summed on its union, then the groups
    are added into the clique, so a clique holding dozens of pairs and messages costs one pass
    over its cells and a few over smaller tables. Best fit: a subset joins the group whose
    union grows least. Cached: a fit asks for the same grouping every pass."""
    sizes = dict(zip(columns, shape))
    limit = max(1, int(math.prod(shape) * GROUP_SHARE))
    groups: list[tuple[set[str], list[int]]] = []
    for k in sorted(range(len(subsets)), key=lambda k: -math.prod(sizes[c] for c in subsets[k])):
        best, best_cells = None, None
        for union, members in groups:
            cells = math.prod(sizes[c] for c in union | set(subsets[k]))
            if cells <= limit and (best_cells is None or cells < best_cells):
                best, best_cells = (union, members), cells
        if best is None:
            groups.append((set(subsets[k]), [k]))
        else:
            best[0].update(subsets[k])
            best[1].append(k)
    return tuple((tuple(c for c in columns if c in union), tuple(members)) for union, members in groups)


def _summed(parts: list[tuple[Subset, np.ndarray]], columns: Subset, sizes: dict[str, int]) -> np.ndarray:
    """A new table over ``columns``: the sum of ``parts`` (tables over subsets of it, schema
    order) broadcast to it, written in one pass (``broadcast_sum``); each cell adds its terms
    in the parts' order, as NumPy's ``add(t_0, t_1)`` then ``+= t_k`` would."""
    out = np.empty([sizes[c] for c in columns])
    if not columns:
        out[()] = sum((float(table) for _, table in parts), 0.0) if parts else 0.0
        return out
    plan = _broadcast_plan(columns, out.shape, tuple(subset for subset, _ in parts))
    flat = np.concatenate([np.ravel(table) for _, table in parts]).astype(np.float64, copy=False) if parts \
        else np.zeros(0)
    dims, strides, starts, tail, kinds, offsets = plan
    broadcast_sum(out.reshape(-1), dims, strides, starts, flat, tail, kinds, offsets)
    return out


#: ``broadcast_sum`` walks blocks of the clique's last axes of at least ``_BLOCK_CELLS`` cells
#: (when it has that many, and unless the next axis would take a block past ``_BLOCK_MOST``),
#: and adds a table row by row when the last axis has at least ``_ROW_CELLS`` cells, else by a
#: gather per cell. Measured on adult's largest clique and a 10^7-cell one: blocks of 256 to
#: 1,024 cells are equally fast; on 1.8M cells and three tables, rows of 4 cells take 2.8 ms
#: against 3.0 ms by gathers, rows of 8 1.8 ms against 2.9, rows of 3 3.9 ms against 3.1.
_BLOCK_CELLS, _BLOCK_MOST, _ROW_CELLS = 1024, 2**14, 4


@functools.lru_cache(maxsize=256)
def _broadcast_plan(columns: Subset, shape: tuple[int, ...], subsets: tuple[Subset, ...]
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, np.ndarray, np.ndarray]:
    """``broadcast_sum``'s walk for tables over ``subsets`` of ``columns`` (sizes ``shape``),
    given end to end in C order: the clique's axes (those of one cell dropped; neighbours
    merged where every table holds both or neither, so rows are long), each table's strides
    over them (0 where it lacks the axis), where each table starts, how many trailing axes
    form a block, and how each table is added to a block, with its offsets in the block (by
    row when the last axis has ``_ROW_CELLS`` cells, else by cell). Cached (its arrays
    read-only): a fit asks for the same walk every pass."""
    sizes = dict(zip(columns, shape))
    axes = [c for c in columns if sizes[c] > 1] or [columns[-1]]
    runs: list[list[str]] = []
    for c in axes:
        if runs and all((c in subset) == (runs[-1][-1] in subset) for subset in subsets):
            runs[-1].append(c)
        else:
            runs.append([c])
    dims = [math.prod(sizes[c] for c in run) for run in runs]
    strides = np.zeros((len(subsets), len(runs)), dtype=np.int64)
    for k, subset in enumerate(subsets):
        stride = 1
        for j in range(len(runs) - 1, -1, -1):
            if runs[j][0] in subset:
                strides[k, j] = stride
                stride *= dims[j]
    starts = np.cumsum([0] + [math.prod(sizes[c] for c in subset) for subset in subsets], dtype=np.int64)
    tail, block = 1, dims[-1]
    while tail < len(dims) and block < _BLOCK_CELLS and block * dims[-tail - 1] <= _BLOCK_MOST:
        tail += 1
        block *= dims[-tail]
    by_rows = dims[-1] >= _ROW_CELLS
    kinds = np.zeros(len(subsets), dtype=np.int64)
    offsets = np.zeros((len(subsets), block // dims[-1] if by_rows else block), dtype=np.int64)
    for k in range(len(subsets)):
        held = strides[k, -tail:]
        if not held.any():
            kinds[k] = 1
        elif (held == np.cumprod([1, *dims[:-tail - 1:-1]])[-2::-1]).all():
            kinds[k] = 0  # the block's axes, all of them in the table's order: contiguous
        else:
            kinds[k] = (3 - bool(held[-1])) if by_rows else 4
            axes_of = held[:-1] if by_rows else held
            grid = np.indices(dims[len(dims) - tail:len(dims) - tail + len(axes_of)], dtype=np.int64)
            offsets[k] = np.tensordot(axes_of, grid, axes=1).reshape(-1) if len(axes_of) else 0
    arrays = (np.asarray(dims, dtype=np.int64), strides.reshape(-1), starts[:len(subsets)], kinds, offsets)
    for array in arrays:
        array.flags.writeable = False
    return (*arrays[:3], tail, *arrays[3:])


def _expand(table: np.ndarray, columns: Subset, target: Subset, sizes: dict[str, int]) -> np.ndarray:
    """``table`` over ``columns`` (schema order, a subset of ``target``) reshaped to broadcast
    over ``target``'s axes."""
    return np.asarray(table).reshape([sizes[c] if c in columns else 1 for c in target])


#: ``_contract`` asks einsum for its optimal order up to this many tables (the search grows
#: factorially; a clique with more children in a cover takes its greedy order).
_OPTIMAL_OPERANDS = 6
#: einsum's limit on distinct axes (``_contract``); a wider cover answers queries by ``_evidence``.
_EINSUM_AXES = 52


def _restrict(table: np.ndarray, columns: Subset, allowed: dict[str, np.ndarray]) -> np.ndarray:
    """``table`` over ``columns`` with each column in ``allowed`` cut down to its allowed codes
    (sorted, distinct): a view where they run without a gap (a range, or one code), else a
    copy; the table itself when no column is cut."""
    index: list = []
    for column in columns:
        codes = allowed.get(column)
        if codes is None:
            index.append(slice(None))
        elif codes.size and int(codes[-1]) - int(codes[0]) + 1 == codes.size:
            index.append(slice(int(codes[0]), int(codes[-1]) + 1))
        else:
            index.append(codes)
    if all(isinstance(part, slice) for part in index):
        return table[tuple(index)]
    for axis, part in enumerate(index):  # one axis at a time: gathers do not broadcast together
        if not isinstance(part, slice):
            table = np.take(table, part, axis=axis)
        elif part != slice(None):
            table = table[(slice(None),) * axis + (part,)]
    return table


def _broadcast(message: np.ndarray, separator: Subset, columns: Subset) -> np.ndarray:
    """A (restricted) table over ``separator`` (schema order, inside ``columns``) reshaped to
    broadcast over a (restricted) table over ``columns``."""
    shape = iter(message.shape)
    return message.reshape([next(shape) if c in separator else 1 for c in columns])


def _sum_onto(table: np.ndarray, columns: Subset, keep: Subset, schema: Schema) -> np.ndarray:
    """Sum a table over ``columns`` onto ``keep`` (both in schema order), with the Numba kernel."""
    if keep == columns:
        return table
    if not keep:
        return np.asarray(table.sum())
    return marginal_from_dense(np.ascontiguousarray(table, dtype=np.float64), schema.project(columns), keep)


def _sums_onto(table: np.ndarray, columns: Subset, keeps: list[Subset], schema: Schema) -> list[np.ndarray]:
    """``_sum_onto`` for each of ``keeps``, in one walk of ``table`` when there are several."""
    if len(keeps) == 1:
        return [_sum_onto(table, columns, keeps[0], schema)]
    return marginals_from_dense(np.ascontiguousarray(table, dtype=np.float64), schema.project(columns), keeps)


def _conditional(belief: np.ndarray, columns: Subset, separator: Subset, schema: Schema) -> np.ndarray:
    """belief / (its marginal on ``separator``), 0 where that marginal is 0."""
    below = _expand(_sum_onto(belief, columns, separator, schema), separator, columns,
                    dict(zip(schema.names, schema.shape)))
    return np.divide(belief, below, out=np.zeros_like(belief), where=below > 0)


def _contraction_work(operands: list[Subset], keep: Subset, sizes: dict[str, int]) -> float:
    """Multiply-adds of summing the product of tables over ``operands`` (column tuples) onto
    ``keep``, two tables at a time in the best order (as einsum's optimal path counts: a pair
    costs the cells of its columns' union, and keeps what ``keep`` or another table needs);
    greedy (cheapest pair first) past ``_OPTIMAL_OPERANDS`` tables."""
    def cells(columns) -> float:
        return float(math.prod(sizes[c] for c in columns))

    def best(tables: tuple[frozenset, ...]) -> float:
        if len(tables) == 1:
            return 0.0 if tables[0] == frozenset(keep) else cells(tables[0])
        options = []
        for a in range(len(tables)):
            for b in range(a + 1, len(tables)):
                rest = tables[:a] + tables[a + 1:b] + tables[b + 1:]
                union = tables[a] | tables[b]
                needed = frozenset(keep).union(*rest)
                options.append((cells(union), rest + (union & needed,)))
        if len(tables) > _OPTIMAL_OPERANDS:
            cost, rest = min(options, key=lambda option: option[0])
            return cost + best(rest)
        return min(cost + best(rest) for cost, rest in options)

    return best(tuple(frozenset(columns) for columns in operands))


def _contract(operands: list[tuple[Subset, np.ndarray]], keep: Subset) -> np.ndarray:
    """Σ over the columns not in ``keep`` of the product of the operands (tables over columns)."""
    labels: dict[str, int] = {}
    for columns, _ in operands:
        for c in columns:
            labels.setdefault(c, len(labels))
    if len(labels) > _EINSUM_AXES:
        raise SynthError(f"a marginal across {len(labels)} columns of the model is too wide to compute")
    arguments: list = []
    for columns, table in operands:
        arguments += [table, [labels[c] for c in columns]]
    order = "optimal" if len(operands) <= _OPTIMAL_OPERANDS else "greedy"
    return np.einsum(*arguments, [labels[c] for c in keep], optimize=order)
