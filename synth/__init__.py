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
    "Schema": "data.schema",
    "Categorical": "data.schema",
    "Numeric": "data.schema",
    "Coded": "data.schema",
    "Query": "data.workload",
    "Workload": "data.workload",
    "read": "data.reading",
    "scan": "data.reading",
    "encode": "data.reading",
    "decode": "data.reading",
    "iter_encoded": "data.reading",
    "histogram": "data.tables",
    "marginal": "data.tables",
    "marginal_from_dense": "data.tables",
    "exact_answers": "data.exact",
    "infer_schema": "data.infer",
    "derive_schema": "data.derive",
    "Function": "data.constraints",
    "Forbid": "data.constraints",
    "Accountant": "privacy.accounting",
    "Budget": "privacy.accounting",
    "BudgetExceeded": "privacy.accounting",
    "make_rng": "privacy.rng",
    "PMW": "engines.pmw",
    "run_pmw": "engines.pmw",
    "plan_pmw": "engines.pmw_plan",
    "Model": "models.model",
    "Synthesizer": "synthesizer",
    "MWEMConfig": "engines.mwem",
    "PMWConfig": "engines.pmw",
    "BLRConfig": "engines.blr_engine",
    "make_engine": "engines.registry",
    "Release": "engines.release",
    "round_counts": "models.sampling",
    "sample_codes": "models.sampling",
    "decode_rows": "models.synthetic",
    "write_synthetic": "models.synthetic",
    "sample_model": "models.synthetic",
    "bundled": "data.bundled",
    "BundledTable": "data.bundled",
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
