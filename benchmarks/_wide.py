"""Wide tables for the benchmarks (issue 29): one built from public data, two sampled from seeded
random Bayesian networks. Each builder returns a ``Schema`` of ``Coded`` columns and the codes
(``(n, columns)``, the schema's smallest dtype); none writes anything.

- ``adult_fine(data_dir)``: ``adult-raw.csv`` (the raw UCI training file, 32,561 rows, 15
  columns) finely binned: age by year (17..90), hours-per-week by hour (1..99), fnlwgt in 100
  quantile bins (quantiles of the file itself: the benchmark's own encoding, public by
  construction), capital-gain and capital-loss in 5 bins (0, then up to 2,000, 5,000, 10,000,
  above), education-num as its 16 values, every text column as its sorted categories ('?' is a
  value). Its big pairs: hours x fnlwgt 9,900 cells, age x fnlwgt 7,400, age x hours 7,326.
- ``census35(seed)``: 170,000 rows of 35 columns, domain sizes 2..181 (most small, a few large:
  ``2 + 179 u^5``, with the largest forced to 181), each column after the first with 1-2
  parents among the earlier ones.
- ``trip10(seed)``: 226,000 rows of 10 columns: four of 78..101 values and six of 2..8, with
  two small columns each bound to another small one by a near-deterministic table (the
  strongly related small pairs of trip data: payment type and tip, say).

The networks (``bayes_net``): a column's conditional table for each configuration of its parents
is a Dirichlet draw with concentration ``concentration * size * base`` around a column-wide
skewed base distribution (itself Dirichlet(1)); a concentration well below 1 per value makes
each conditional spiky, so every child-parent pair is clearly dependent (``DEPENDENT``). Rows
are sampled column by column in order, vectorised (inverse CDF on the rows' parent
configurations), about a second for 170,000 rows.

``TABLES`` names the three, smallest first; ``build(name, data_dir)`` makes one.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from synth.data.reading import code_dtype
from synth.data.schema import Coded, Schema

#: The seed of the two sampled tables: fixed, so every run seed sees the same data.
DATA_SEED = 29
#: Dirichlet concentration per value of a child-given-parents table (below 1: spiky, dependent).
DEPENDENT = 0.3
#: Capital gain / loss bins: 0, (0, 2000], (2000, 5000], (5000, 10000], above.
CAPITAL_EDGES = (0, 2000, 5000, 10000)


def adult_fine(data_dir: Path) -> tuple[Schema, np.ndarray]:
    """``adult-raw.csv`` finely binned, as the module docstring says."""
    frame = pd.read_csv(Path(data_dir) / "adult-raw.csv", skipinitialspace=True)
    columns, codes = [], []

    def add(name: str, code: np.ndarray, size: int) -> None:
        columns.append(Coded(name, size))
        codes.append(np.asarray(code, dtype=np.int64))

    for name in frame.columns:
        values = frame[name]
        if name == "age":
            add(name, values - 17, 90 - 17 + 1)
        elif name == "hours-per-week":
            add(name, values - 1, 99)
        elif name == "fnlwgt":
            edges = np.quantile(values, np.linspace(0, 1, 101))[1:-1]
            add(name, np.searchsorted(edges, values, side="right"), 100)
        elif name in ("capital-gain", "capital-loss"):
            add(name, np.searchsorted(CAPITAL_EDGES, values, side="left"), len(CAPITAL_EDGES) + 1)
        else:  # text, and education-num: its sorted distinct values
            categories = np.sort(values.astype(str).unique())
            add(name, np.searchsorted(categories, values.astype(str)), len(categories))
    schema = Schema(tuple(columns))
    return schema, np.ascontiguousarray(np.column_stack(codes), dtype=code_dtype(schema))


def bayes_net(sizes: Sequence[int], parents: Sequence[Sequence[int]], rows: int, rng: np.random.Generator,
              concentration: Sequence[float] | float = DEPENDENT) -> np.ndarray:
    """``rows`` rows (int64 codes) of the network: column i has ``sizes[i]`` values and the
    earlier columns ``parents[i]`` as parents; its conditional tables are Dirichlet draws with
    ``concentration[i] * sizes[i] * base_i`` (``base_i``: a Dirichlet(1) draw per column)."""
    rate = np.broadcast_to(np.asarray(concentration, dtype=float), (len(sizes),))
    codes = np.zeros((rows, len(sizes)), dtype=np.int64)
    for i, (size, up) in enumerate(zip(sizes, parents)):
        if any(p >= i for p in up):
            raise ValueError(f"column {i}'s parents ({list(up)}) must come before it")
        base = rng.dirichlet(np.ones(size))
        configs = int(np.prod([sizes[p] for p in up], dtype=np.int64))
        alpha = np.maximum(rate[i] * size * base, 1e-3)
        tables = rng.dirichlet(alpha, size=configs)  # (configs, size)
        cumulative = np.cumsum(tables, axis=1)
        cumulative[:, -1] = 1.0
        config = (np.ravel_multi_index(tuple(codes[:, p] for p in up), [sizes[p] for p in up])
                  if up else np.zeros(rows, dtype=np.int64))
        draws = rng.random(rows)
        # inverse CDF, a chunk of rows at a time (rows x size booleans)
        for start in range(0, rows, 20_000):
            part = slice(start, start + 20_000)
            codes[part, i] = (cumulative[config[part]] < draws[part, None]).sum(axis=1)
    return np.minimum(codes, np.asarray(sizes) - 1)


def _net_table(sizes: Sequence[int], parents, rows: int, rng, concentration=DEPENDENT,
               prefix: str = "c") -> tuple[Schema, np.ndarray]:
    schema = Schema(tuple(Coded(f"{prefix}{i}", int(s)) for i, s in enumerate(sizes)))
    codes = bayes_net(sizes, parents, rows, rng, concentration)
    return schema, np.ascontiguousarray(codes, dtype=code_dtype(schema))


def _random_parents(count: int, rng: np.random.Generator, most: int = 2) -> list[list[int]]:
    """Column 0 none, column 1 column 0, then 1..``most`` parents among the earlier columns."""
    parents: list[list[int]] = [[]]
    for i in range(1, count):
        k = min(i, int(rng.integers(1, most + 1)))
        parents.append(sorted(int(p) for p in rng.choice(i, size=k, replace=False)))
    return parents


def census35(seed: int = DATA_SEED, rows: int = 170_000) -> tuple[Schema, np.ndarray]:
    """35 census-like columns (sizes 2..181, most small), 1-2 parents each."""
    rng = np.random.default_rng([seed, 35])
    sizes = (2 + np.floor(179 * rng.random(35) ** 5)).astype(int)
    sizes[int(np.argmax(sizes))] = 181
    return _net_table(sizes, _random_parents(35, rng), rows, rng)


def trip10(seed: int = DATA_SEED, rows: int = 226_000) -> tuple[Schema, np.ndarray]:
    """10 trip-like columns: four large (78..101 values), six small (2..8), two small pairs
    near-deterministic."""
    rng = np.random.default_rng([seed, 10])
    large = rng.integers(78, 102, size=4)
    small = rng.integers(2, 9, size=6)
    # order: s0, L0, L1, s1, L2, s2, L3, s3, s4, s5
    sizes = [small[0], large[0], large[1], small[1], large[2], small[2], large[3], *small[3:]]
    parents = [[], [0], [1], [0, 1], [1, 2], [3], [4, 5], [5], [3], [6, 8]]
    concentration = np.full(10, DEPENDENT)
    concentration[[7, 8]] = 0.02  # s3 from s2, s4 from s1: near-deterministic small pairs
    return _net_table([int(s) for s in sizes], parents, rows, rng, concentration)


#: The tables, smallest first: name -> (description, builder of (schema, codes) from data_dir).
TABLES = {
    "adult-fine": ("adult-raw finely binned", adult_fine),
    "trip10": ("trip-like network", lambda data_dir: trip10()),
    "census35": ("census-like network", lambda data_dir: census35()),
}


def build(name: str, data_dir: Path) -> tuple[Schema, np.ndarray]:
    """The table ``name`` (a key of ``TABLES``)."""
    if name not in TABLES:
        raise ValueError(f"table ({name!r}) must be one of: {', '.join(TABLES)}")
    return TABLES[name][1](data_dir)
