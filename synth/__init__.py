"""synth: differentially private synthetic data and workload answers.

Importing ``synth`` is instant: every public name loads its module on first use, so the
command-line app starts fast and only the work that needs Numba pays for it.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "SynthError": "errors",
    "SchemaError": "errors",
    "DataError": "errors",
    "WorkloadError": "errors",
    "PrivacyWarning": "errors",
    "Schema": "schema",
    "Categorical": "schema",
    "Numeric": "schema",
    "Coded": "schema",
    "Query": "workload",
    "Workload": "workload",
    "read": "data",
    "scan": "data",
    "encode": "data",
    "decode": "data",
    "iter_encoded": "data",
    "histogram": "tables",
    "marginal": "tables",
    "marginal_from_dense": "tables",
    "exact_answers": "exact",
    "infer_schema": "infer",
    "Accountant": "accounting",
    "Budget": "accounting",
    "BudgetExceeded": "accounting",
    "make_rng": "rng",
    "PMW": "pmw",
    "run_pmw": "pmw",
    "plan_pmw": "pmw_plan",
    "Model": "model",
    "Synthesizer": "synthesizer",
    "round_counts": "sample",
    "sample_codes": "sample",
    "decode_rows": "sample",
    "write_synthetic": "sample",
    "sample_model": "sample",
    "bundled": "bundled",
    "BundledTable": "bundled",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'synth' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
