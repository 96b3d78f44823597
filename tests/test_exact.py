import numpy as np
import pandas as pd

from synth.data.exact import exact_answers
from synth.data.schema import Schema
from synth.data.workload import Workload


def test_exact_answers_on_adult_equal_pandas_counts(adult_paths, rng):
    csv_path, domain = adult_paths
    schema = Schema.load(domain)
    frame = pd.read_csv(csv_path)
    queries, expected = [], []
    for _ in range(100):
        cols = rng.choice(schema.names, size=int(rng.integers(1, 5)), replace=False)
        where, mask = {}, np.ones(len(frame), dtype=bool)
        for name in cols:
            size = schema[name].size
            lo, hi = sorted(rng.integers(0, size, 2).tolist())
            where[name] = {"range": [lo, hi]}
            mask &= frame[name].between(lo, hi).to_numpy()
        queries.append({"where": where})
        expected.append(int(mask.sum()))
    workload = Workload.from_dict({"queries": queries}, schema)
    result = exact_answers(csv_path, schema, workload, chunk_rows=7_000)
    assert result.n_rows == len(frame)
    assert result.answers.tolist() == expected


def test_marginal_answers_sum_to_row_count_with_columns(adult_paths):
    csv_path, domain = adult_paths
    schema = Schema.load(domain)
    columns = "workclass,education-num,marital-status,relationship,race,sex,income>50K"
    workload = Workload.marginals(schema.select(columns), 3)
    result = exact_answers(csv_path, schema, workload, columns=columns)
    assert len(workload.subsets) == 35
    for subset, ids in workload.groups().items():
        assert len(ids) == np.prod([schema[c].size for c in subset])
        assert result.answers[ids].sum() == result.n_rows == 48_842
