"""The BLR net mechanism (Blum, Ligett and Roth 2008): the exponential mechanism over small databases.

The range is a net N of databases of m rows from the universe U, each row standing for n/m
rows of the data. A candidate y scores ``-max_q |x_q - n y_q / m|`` over the workload's
queries (x_q the true count, y_q y's count, n the public or noisy row count): sensitivity 1,
since n is public. One candidate is released, with probability proportional to
``exp(epsilon * score / 2)``. Two nets:

* ``"exact"``: every multiset of m cells, C(|U|+m-1, m) of them, enumerated in a Numba loop
  that moves one element at a time and samples by streaming Gumbel-max, never storing N.
  Refused (``NetTooLarge``, with the size) when N is larger than ``max_net``.
* ``"sampled"``: K candidates whose m rows are drawn i.i.d. from a public prior (uniform by
  default) by a generator split off before the data is touched, so the range is independent
  of the data and the mechanism is still exactly epsilon-DP; its utility bound is weaker.
  Its default m (``sampled_net_size``) makes each candidate a faithful sample of the prior.
  A uniform prior rarely helps: random databases scatter around the uniform distribution by
  more than the best of K can gain by chance on all but tiny marginals (``uniform_net_outlook``),
  and the result then warns. The useful prior is a released model: ``synth.engines.blr_prior``
  spends a share of epsilon on MWEM or PMW and draws the candidates from its release by
  controlled rounding (``draw_candidates``).

Utility (fractions of n, probability >= 1 - beta): the exact net holds a database within
``alpha(m) = sqrt(ln(2|C|) / (2m))`` of the data (Hoeffding plus a union bound over the
|C| queries), and the exponential mechanism loses at most ``2 (ln|N| + ln(1/beta)) / (epsilon n)``
against the best candidate of its range. A sampled net only promises the second term on top
of its best candidate's error, which depends on the data and is not released; with
probability >= 1 - beta its first candidate (hence its best) is within
``sqrt(ln(2|C|/beta) / (2m))`` of the prior's answers (Hoeffding and a union bound).

A bound of 1 or more (in fractions of n) says nothing, since no answer can be off by more
than n: the result's ``warnings`` (also in ``parameters``) then say so, and also when m = 1
(the synthetic data is one row repeated n times).
"""

from __future__ import annotations

import math
from decimal import Decimal
from dataclasses import dataclass, field

import numpy as np
from scipy import sparse

from synth._kernels.net import sample_exact_net
from synth.data.counts import Data, data_marginal, data_rows
from synth.data.schema import Schema
from synth.data.tables import DEFAULT_MAX_CELLS, _check_cells
from synth.data.workload import Workload
from synth.errors import SynthError
from synth.models.model import Model
from synth.privacy.accounting import Accountant, subtract_epsilon
from synth.privacy.mechanisms import StreamingExponential
from synth.privacy.rng import kernel_state, make_rng
from synth.privacy.row_count import DEFAULT_COUNT_SHARE, row_count
from synth.privacy.validation import (
    check_budget_epsilon, check_positive_int, check_probability, check_real, normalized_prior,
)

__all__ = [
    "BLRResult",
    "NetTooLarge",
    "blr",
    "log_net_size",
    "net_alpha",
    "net_size_for_alpha",
    "choose_net_size",
    "sampled_net_size",
    "draw_candidates",
    "uniform_net_outlook",
    "DRAWS",
    "DEFAULT_CANDIDATES",
    "DEFAULT_MAX_NET",
    "DEFAULT_SAMPLING_ALPHA",
]

#: Candidates of a sampled net unless the caller says otherwise.
DEFAULT_CANDIDATES = 10_000
#: Largest exact net enumerated unless the caller raises it (seconds at typical speeds).
DEFAULT_MAX_NET = 10**7
#: Target accuracy (fraction of n) of a sampled-net candidate against its prior: the default m.
DEFAULT_SAMPLING_ALPHA = 0.1
#: Largest (universe x queries) indicator the exact net builds.
_MAX_INDICATOR = 5 * 10**7
#: Largest (column subsets x universe) table of each cell's index in each subset's marginal.
_MAX_LOOKUP = 1 << 24
#: Largest chosen database listed cell by cell in the model's round log.
_LOGGED_CELLS = 10_000
_STEPS_PER_CALL = 1 << 22  # exact-net candidates per kernel call, between progress reports
_MAX_COUNT = 2**63 - 1  # the most candidates K or rows m NumPy can count (int64)
#: How a candidate's m rows are drawn from a prior: i.i.d. rows, or controlled rounding.
DRAWS = ("iid", "systematic")


class NetTooLarge(SynthError):
    """The exact net is larger than the enumeration cap."""


def log_net_size(universe: int, m: int) -> float:
    """ln C(|U| + m - 1, m): the natural log of the number of m-row multisets over U."""
    return math.lgamma(universe + m) - math.lgamma(m + 1) - math.lgamma(universe)


def net_alpha(m: int, queries: int) -> float:
    """The accuracy (fraction of n) some m-row database is guaranteed to reach on every query."""
    return math.sqrt(math.log(2 * max(queries, 1)) / (2 * m))


def net_size_for_alpha(alpha: float, queries: int) -> int:
    """m = ceil(ln|C| / alpha^2), the net size the lecture notes give for accuracy alpha.

    ``NetTooLarge`` when that m is beyond 64-bit integers (a tiny alpha).
    """
    m = math.log(max(queries, 2)) / alpha / alpha  # not / alpha**2, which underflows to 0 for a tiny alpha
    if not m <= _MAX_COUNT:
        raise NetTooLarge(f"alpha ({alpha:g}) asks for m = ln|C| / alpha^2 = {m:.3g} rows per database, more than "
                          "2^63 - 1: ask for a larger alpha, or set the net size (--net-size)")
    return max(1, math.ceil(m))


def _exact_bound(m: int, universe: int, queries: int, epsilon: float, rows: int, beta: float) -> float:
    return net_alpha(m, queries) + 2 * (log_net_size(universe, m) - math.log(beta)) / (epsilon * rows)


def choose_net_size(universe: int, queries: int, epsilon: float, rows: int, beta: float = 0.05,
                    max_net: float | None = None, largest: int = 100_000) -> int:
    """The m in 1..largest that minimizes the exact net's error bound (within ``max_net`` if given).

    Uses only public quantities (|U|, |C|, epsilon, n, beta). Raises ``NetTooLarge`` when even
    m = 1 does not fit.
    """
    best, best_bound = 0, math.inf
    for m in range(1, largest + 1):
        if max_net is not None and not _fits(universe, m, max_net):
            break
        bound = _exact_bound(m, universe, queries, epsilon, rows, beta)
        if bound < best_bound:
            best, best_bound = m, bound
        elif m > 2 * best:  # the bound is unimodal in m: stop well past the minimum
            break
    if best == 0:
        raise NetTooLarge(f"even 1-row databases number {universe:,}, more than the cap of {max_net:,.0f}")
    return best


def sampled_net_size(queries: int, rows: int, beta: float = 0.05,
                     alpha: float = DEFAULT_SAMPLING_ALPHA) -> int:
    """The default m of a sampled net: the smallest m whose random candidates answer every query
    within ``alpha`` (fraction of n) of their prior with probability >= 1 - beta, at most n.

    m = ceil(ln(2|C| / beta) / (2 alpha^2)) (Hoeffding and a union bound over the |C| queries),
    capped at ``rows`` (a row of the release then stands for at least one row of the data).
    The exact net's bound does not apply: the range is the K candidates whatever m is, so the
    selection loss 2 (ln K + ln(1/beta)) / (epsilon n) does not grow with m, while a small m
    makes every candidate a coarse, noisy sample (m = 1: one row repeated n times). The cost,
    K x m rows counted per column subset, grows with m; alpha = 0.1 keeps it to about 600
    rows for thousands of queries. Uses only public quantities.
    """
    queries, rows = check_positive_int(queries, "queries"), check_positive_int(rows, "rows")
    beta, alpha = check_probability(beta, "beta"), check_probability(alpha, "alpha")
    return max(1, min(math.ceil((math.log(2 * queries) - math.log(beta)) / (2 * alpha**2)), rows))


def draw_candidates(prior: np.ndarray, m: int, size: int, rng: np.random.Generator,
                    method: str = "systematic") -> np.ndarray:
    """``size`` candidate databases of ``m`` rows from the distribution ``prior``: an int64
    ``(size, m)`` array of cell indices (sorted within each row for ``"systematic"``).

    ``"iid"``: m independent rows (a multinomial histogram). ``"systematic"``: controlled
    rounding by systematic sampling: one uniform offset u per candidate, rows at the quantiles
    (u + j) / m, j = 0..m-1, of the prior in cell order. Every cell then holds the floor or the
    ceiling of m times its probability (unbiased), so a candidate of m = n rows is as close to
    the prior as a rounded synthetic table, while i.i.d. rows add multinomial noise (on adult's
    7 columns at m = n, 0.046 against 0.053 mean L1 per 3-way marginal). Cells of probability
    0 never appear. Draws ``size`` (systematic) or ``size * m`` (iid) uniforms from ``rng``
    in order, so drawing in batches gives the same candidates as one call.
    """
    if method not in DRAWS:
        raise ValueError(f"method ({method!r}) must be one of: {', '.join(DRAWS)}")
    m, size = check_positive_int(m, "m"), check_positive_int(size, "size")
    return _draw(np.cumsum(normalized_prior(prior, np.asarray(prior).size)), m, size, rng, method)


def _draw(cumulative: np.ndarray, m: int, size: int, rng: np.random.Generator, method: str) -> np.ndarray:
    """``draw_candidates`` from the prior's cumulative sums (computed once per net)."""
    if method == "iid":
        draws = rng.random((size, m)) * cumulative[-1]
    else:
        draws = (rng.random((size, 1)) + np.arange(m, dtype=np.float64)[None, :]) * (cumulative[-1] / m)
    cells = np.searchsorted(cumulative, draws, side="right")
    # (u + m - 1) / m can round up to 1: keep to the last cell of positive probability
    return np.minimum(cells, np.searchsorted(cumulative, cumulative[-1], side="left")).astype(np.int64)


def uniform_net_outlook(cells: list[int] | np.ndarray, m: int, candidates: int) -> tuple[float, float]:
    """``(noise, gain)`` of a net of K candidates of m uniform random rows, in L1 per marginal
    averaged over the workload's marginals of ``cells`` cells each (public quantities only).

    noise: how far a candidate scatters around the uniform distribution by chance, about
    sqrt(2 (c - 1) / (pi m)) on a table of c cells (at most 2: m rows on far more than m cells).
    gain: about how much closer to the data than the uniform distribution the best of K random
    candidates can get by chance, sqrt(2 ln K / m) (the largest of K draws of a sum whose
    spread is 1 / sqrt(m)). When the noise is larger, the net can hardly beat uniform rows:
    its candidates never resemble the data (adult's 7 columns: 1.72 mean L1 against uniform
    rows' 1.45). The ratio does not depend on m: it is about sqrt((c - 1) / (pi ln K)).
    """
    sizes = np.asarray(cells, dtype=np.float64)
    noise = float(np.mean(np.minimum(2.0, np.sqrt(2 * (sizes - 1) / (math.pi * m))))) if sizes.size else 0.0
    return noise, math.sqrt(2 * math.log(max(candidates, 1)) / m)


def _fits(universe: int, m: int, max_net: float) -> bool:
    """C(|U|+m-1, m) <= max_net, exactly (the float log only rules out the far-off cases)."""
    if log_net_size(universe, m) > math.log(max_net) + 1e-6:
        return False
    return math.comb(universe + m - 1, m) <= max_net


def _scientific(number: int) -> str:
    """An integer of any size as 1.234e+56 (floats overflow past 1e308)."""
    if number < 10**6:
        return f"{number:,}"
    if number < 10**300:
        return f"{number:.3e}"
    mantissa, exponent = format(Decimal(number), ".3e").split("e")
    return f"{mantissa}e{exponent}"


@dataclass
class BLRResult:
    """The released m-row database and how it was chosen (all public)."""

    cells: np.ndarray  # the chosen multiset: m cell indices, sorted
    schema: Schema
    rows: float
    rows_public: bool
    accountant: Accountant
    parameters: dict = field(default_factory=dict)
    prior_log: list = field(default_factory=list)  # where the candidates came from (``blr_prior``), for the round log

    @property
    def warnings(self) -> list[str]:
        """Plain-text warnings about this release (``parameters["warnings"]``): a vacuous
        error bound, a one-row database."""
        return list(self.parameters.get("warnings", []))

    @property
    def distribution(self) -> np.ndarray:
        """The chosen database as a distribution over U: each row weighs 1/m."""
        counts = np.bincount(self.cells, minlength=self.schema.universe_size)
        return counts / self.cells.size

    def to_model(self, *, seeded: bool = False):
        entry = {"net": self.parameters["net"]}
        if self.cells.size <= _LOGGED_CELLS:
            entry["chosen_cells"] = self.cells.tolist()
        else:  # n-row candidates would fill the header: the distribution holds the same counts
            entry["chosen_database"] = f"the distribution times m = {self.cells.size:,} gives its count per cell"
        log = [*self.prior_log, entry]
        return Model(schema=self.schema, mechanism="blr", distribution=self.distribution, rows=self.rows,
                     rows_public=self.rows_public, parameters=self.parameters, privacy=self.accountant.to_dict(),
                     round_log=log, seeded=seeded)


class _QueryCounts:
    """Counts of every workload query on many small databases at once, through their marginals.

    For each column subset S of the workload, a sparse (cells of S) x (queries on S) 0/1 matrix
    turns a database's marginal table on S into its query counts.
    """

    def __init__(self, schema: Schema, workload: Workload):
        self.schema, self.n_queries = schema, len(workload)
        self.groups = []
        self._lookups: list[np.ndarray] | None = None
        for subset, ids in workload.groups().items():
            positions = np.array([schema.index(c) for c in subset], dtype=np.int64)
            shape = tuple(schema[c].size for c in subset)
            strides = np.array([int(np.prod(shape[i + 1:])) for i in range(len(shape))], dtype=np.int64)
            columns = []
            for i in ids:
                member = np.zeros(shape, dtype=bool)
                member[np.ix_(*workload[i].allowed)] = True
                columns.append(np.flatnonzero(member))
            matrix = sparse.csc_matrix(
                (np.ones(sum(c.size for c in columns), dtype=np.int64),
                 np.concatenate(columns), np.cumsum([0] + [c.size for c in columns])),
                shape=(int(np.prod(shape)), len(ids)))
            self.groups.append((ids, positions, strides, matrix))

    def _marginal_cells(self) -> list[np.ndarray] | None:
        """Per column subset, each cell's index in the subset's marginal table (int32), when
        the tables fit in ``_MAX_LOOKUP`` entries: one gather then replaces decoding every row."""
        universe = self.schema.universe_size
        if self._lookups is None and len(self.groups) * universe <= _MAX_LOOKUP:
            codes = self.schema.cell_codes(np.arange(universe, dtype=np.int64))
            self._lookups = [(codes[:, positions] @ strides).astype(np.int32)
                             for _, positions, strides, _ in self.groups]
        return self._lookups

    def counts(self, cells: np.ndarray) -> np.ndarray:
        """``(k, Q)`` int64 counts for ``k`` databases given as a ``(k, m)`` array of cell indices."""
        k, m = cells.shape
        flat = cells.reshape(-1)
        lookups = self._marginal_cells()
        codes = self.schema.cell_codes(flat) if lookups is None else None
        out = np.zeros((self.n_queries, k), dtype=np.int64)  # returned transposed: rows written whole
        owner = np.repeat(np.arange(k, dtype=np.int64), m)
        for g, (ids, positions, strides, matrix) in enumerate(self.groups):
            size = matrix.shape[0]
            local = codes[:, positions] @ strides if lookups is None else lookups[g][flat]
            index = owner * size + local
            tables = np.bincount(index, minlength=k * size).reshape(k, size)
            out[ids] = matrix.T @ tables.T
        return out.T

    def batch(self, m: int) -> int:
        """How many m-row databases to count at once: about 2^20 rows and 2^23 table cells."""
        widest = max(matrix.shape[0] for *_, matrix in self.groups)
        return max(1, min((1 << 20) // m, (1 << 23) // widest))

    def indicator(self) -> np.ndarray:
        """``(U, Q)`` int64: 1 where cell u satisfies query q (for the exact net)."""
        universe = self.schema.universe_size
        chunk = self.batch(1)
        return np.concatenate([self.counts(np.arange(start, min(start + chunk, universe), dtype=np.int64)[:, None])
                               for start in range(0, universe, chunk)])


def blr(
    data: Data,
    schema: Schema,
    workload: Workload,
    epsilon: float,
    *,
    net: str = "exact",
    net_size: int | None = None,
    alpha: float | None = None,
    candidates: int = DEFAULT_CANDIDATES,
    beta: float = 0.05,
    rows: int | None = None,
    count_share: float = DEFAULT_COUNT_SHARE,
    prior: np.ndarray | None = None,
    rng: np.random.Generator | int | None = None,
    max_net: int = DEFAULT_MAX_NET,
    max_cells: int = DEFAULT_MAX_CELLS,
    progress=None,
) -> BLRResult:
    """Release one m-row database by the net mechanism; epsilon-DP in total.

    m is ``net_size``, else ``net_size_for_alpha(alpha, |C|)``, else for the exact net the m
    minimizing its error bound (``choose_net_size``) among the m whose net has at most
    ``max_net`` members, and for the sampled net ``sampled_net_size(|C|, n, beta)``: the
    smallest m (at most n) whose random candidates answer every query within 0.1 of n of
    their prior (with probability 1 - beta). The exact net's bound is beside the point for a
    sampled net, whose range is K candidates whatever m is; a small m only makes every
    candidate coarse (on adult's 7 columns the exact-net rule gave m = 1, one row repeated n
    times, worse than the uniform distribution). Scoring costs K x m rows per column subset.

    ``parameters["warnings"]`` lists plain-text warnings: the stated error bound (the exact
    net's, or the sampled net's selection loss) is 1 or more of n, hence vacuous; m = 1; a
    uniform sampled net whose candidates scatter more than they can gain (``uniform_net_outlook``).
    To draw the candidates from a released model (MWEM, PMW or a model file) instead, see
    ``synth.engines.blr_prior.blr_prior``.
    """
    epsilon = check_budget_epsilon(epsilon)
    beta = check_probability(beta, "beta")
    if net not in ("exact", "sampled"):
        raise ValueError(f"net ({net!r}) must be 'exact' or 'sampled'")
    if len(workload) == 0:
        raise ValueError("the workload has no queries: the net mechanism needs something to score")
    candidates = check_positive_int(candidates, "candidates")
    if candidates > _MAX_COUNT:
        raise NetTooLarge(f"candidates K ({candidates:,}) is more than 2^63 - 1: ask for fewer (--candidates)")
    if rows is not None:
        rows = check_positive_int(rows, "rows")
    if prior is not None and net == "exact":
        raise ValueError("prior applies to the sampled net only (the exact net holds every database)")
    universe = schema.universe_size
    _check_cells(universe, "the BLR release over the universe", max_cells)
    generator = make_rng(rng)
    # Split off the candidates' generator before anything reads the data: the range stays public.
    candidate_rng = np.random.default_rng(generator.integers(0, 2**63 - 1, size=4))
    accountant = Accountant(epsilon)
    count = row_count(data_rows(data), rows if rows is not None else schema.rows, accountant, generator, count_share)
    eps_select = subtract_epsilon(epsilon, count.epsilon)
    return _release(data, schema, workload, accountant, count, eps_select, net=net, net_size=net_size, alpha=alpha,
                    candidates=candidates, beta=beta, prior=prior, candidate_rng=candidate_rng, generator=generator,
                    max_net=max_net, progress=progress)


def _release(data, schema, workload, accountant, count, eps_select, *, net, net_size, alpha, candidates, beta,
             prior, candidate_rng, generator, max_net=DEFAULT_MAX_NET, draw="iid", progress=None) -> BLRResult:
    """Choose m, score the net with ``eps_select`` on ``accountant`` and build the result.

    Shared by ``blr`` and ``synth.engines.blr_prior.blr_prior`` (which has already charged its prior
    engine and the row count to the same accountant, and draws by controlled rounding).
    """
    universe = schema.universe_size
    n_queries = len(workload)
    if net_size is not None:
        m = check_positive_int(net_size, "net_size")
        if m > _MAX_COUNT:
            raise NetTooLarge(f"net size m ({m:,}) is more than 2^63 - 1 rows: ask for fewer (--net-size)")
    elif alpha is not None:
        alpha = check_real(alpha, "alpha")
        if not 0 < alpha < 1:
            raise SynthError(f"alpha ({alpha:g}) must be in (0, 1): the target accuracy is a fraction of n")
        m = net_size_for_alpha(alpha, n_queries)
    elif net == "exact":
        m = choose_net_size(universe, n_queries, eps_select, count.rows, beta, max_net)
    else:
        m = sampled_net_size(n_queries, count.rows, beta)
    query_counts = _QueryCounts(schema, workload)
    true_counts = workload.answer({s: data_marginal(data, schema, s) for s in workload.subsets}).astype(np.int64)
    if net == "exact":
        chosen, scored = _sample_exact(query_counts, true_counts, count.rows, m, eps_select, max_net, generator,
                                       accountant, progress)
        log_range = log_net_size(universe, m)
    else:
        if draw == "iid":  # positional, as ever: tests stand in for it with the same signature
            chosen = _sample_net(query_counts, true_counts, count.rows, m, candidates, eps_select, prior,
                                 candidate_rng, generator, accountant, progress)
        else:
            chosen = _sample_net(query_counts, true_counts, count.rows, m, candidates, eps_select, prior,
                                 candidate_rng, generator, accountant, progress, draw=draw)
        scored, log_range = candidates, math.log(candidates)
    selection_loss = 2 * (log_range - math.log(beta)) / (eps_select * count.rows)
    parameters = {
        "net": net, "net_size": m, "candidates": int(scored), "epsilon_select": eps_select,
        "epsilon_count": count.epsilon, "beta": beta,
        "bound_exact_net": _exact_bound(m, universe, n_queries, eps_select, count.rows, beta),
        "net_alpha": net_alpha(m, n_queries), "selection_loss": selection_loss,
    }
    if net == "sampled":
        parameters["draw"] = draw
        if draw == "iid":  # Hoeffding holds for independent rows only
            parameters["sampling_alpha"] = math.sqrt((math.log(2 * n_queries) - math.log(beta)) / (2 * m))
        if prior is None:
            cells = [math.prod(schema[c].size for c in subset) for subset in workload.subsets]
            parameters["uniform_net_noise"], parameters["uniform_net_gain"] = uniform_net_outlook(cells, m, candidates)
    parameters["warnings"] = _warnings(net, m, parameters, count.rows)
    return BLRResult(np.sort(chosen), schema, float(count.rows), count.public, accountant, parameters)


def _warnings(net: str, m: int, parameters: dict, rows: int) -> list[str]:
    """Plain-text warnings about a release: a vacuous error bound, a one-row database."""
    found = []
    selection = parameters["selection_loss"]
    if net == "exact" and parameters["bound_exact_net"] >= 1:
        alpha = parameters["net_alpha"]
        fix = ("raise epsilon, or use a smaller net (--net-size)" if selection >= alpha else
               "raise --max-net so that a larger m fits, or use fewer columns or queries")
        found.append(f"the exact net's error bound ({alpha + selection:.3g} of n: {alpha:.3g} for {m}-row "
                     f"databases plus {selection:.3g} for the selection) is vacuous: every answer can be off "
                     f"by at most n anyway; {fix}")
    if net == "sampled" and selection >= 1:
        found.append(f"the sampled net's error bound (its best candidate's error plus {selection:.3g} of n "
                     "for the selection) is vacuous: every answer can be off by at most n anyway; "
                     "raise epsilon, or use fewer candidates (--candidates)")
    noise, gain = parameters.get("uniform_net_noise"), parameters.get("uniform_net_gain")
    if noise is not None and noise > gain:
        found.append(f"a uniform net can hardly beat uniform rows on this universe: each candidate's {m:,} random rows "
                     f"scatter about {noise:.2f} (L1 per marginal) around the uniform distribution, more than the best "
                     f"of {parameters['candidates']:,} can gain by chance (about {gain:.2f}); draw the candidates "
                     "from a released model instead (--prior mwem or --prior pmw)")
    if m == 1:
        fix = ("raise --max-net, use fewer columns, or --net sampled" if net == "exact"
               else "set --net-size above 1")
        found.append(f"m = 1: the released database is a single row, so the synthetic data is that row "
                     f"repeated {rows:,} times; {fix}")
    return found


def _sample_exact(query_counts, true_counts, n_rows, m, epsilon, max_net, generator, accountant, progress):
    universe = query_counts.schema.universe_size
    if not _fits(universe, m, max_net):
        largest = 0
        while largest + 1 < m and _fits(universe, largest + 1, max_net):
            largest += 1
        hint = f"--net-size {largest} fits" if largest else "no net size fits"
        size = _scientific(math.comb(universe + m - 1, m)) if m < 10**5 else f"about e^{log_net_size(universe, m):.4g}"
        raise NetTooLarge(
            f"the exact net of {m}-row databases over {universe:,} cells has {size} candidates, more than the "
            f"cap of {max_net:,}; {hint}, or use --net sampled --candidates K, or fewer columns"
        )
    size = math.comb(universe + m - 1, m)
    if universe * query_counts.n_queries > _MAX_INDICATOR:
        raise NetTooLarge(f"the exact net needs a {universe:,} x {query_counts.n_queries:,} indicator table, more "
                          f"than {_MAX_INDICATOR:,} entries; use --net sampled or fewer columns or queries")
    indicator = np.ascontiguousarray(query_counts.indicator())
    accountant.check(epsilon)
    state = kernel_state(generator)
    cells = np.zeros(m, dtype=np.int64)
    counts = m * indicator[0].copy()
    best = np.array([-np.inf, 0.0])
    best_cells = np.zeros(m, dtype=np.int64)
    seen, done = 0, False
    while not done:
        steps, done = sample_exact_net(indicator, m * true_counts, n_rows, epsilon / 2, state, cells, counts,
                                       _STEPS_PER_CALL, best, best_cells)
        seen += steps
        if progress is not None:
            progress(seen, seen / size)
    accountant.spend(epsilon, mechanism="exponential (gumbel, exact net)", note=f"BLR exact net, m={m}, |N|={size:,}")
    return best_cells, seen


def _sample_net(query_counts, true_counts, n_rows, m, k, epsilon, prior, candidate_rng, generator, accountant,
                progress, draw="iid"):
    universe = query_counts.schema.universe_size
    if draw != "iid" and prior is None:
        prior = np.ones(universe)
    cumulative = None if prior is None else np.cumsum(normalized_prior(prior, universe))
    chooser = StreamingExponential(epsilon, 1.0, generator, accountant=accountant,
                                   note=f"BLR sampled net, m={m}, K={k:,}")
    chunk = query_counts.batch(m)
    chosen = None
    for start in range(0, k, chunk):
        size = min(chunk, k - start)
        if draw != "iid":
            cells = _draw(cumulative, m, size, candidate_rng, draw)
        elif cumulative is None:
            cells = candidate_rng.integers(0, universe, size=(size, m), dtype=np.int64)
        else:
            draws = candidate_rng.random((size, m)) * cumulative[-1]
            cells = np.minimum(np.searchsorted(cumulative, draws, side="right"), universe - 1).astype(np.int64)
        gaps = query_counts.counts(cells) * n_rows  # |m x_q - n y_q|, in place on one (size, Q) array
        np.subtract(m * true_counts[None, :], gaps, out=gaps)
        chooser.feed(-np.abs(gaps, out=gaps).max(axis=1) / m)
        if chooser.leader >= start:
            chosen = cells[chooser.leader - start].copy()
        if progress is not None:
            progress(start + size, (start + size) / k)
    chooser.choose()
    return chosen

