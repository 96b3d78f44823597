"""The engines by name: their configs, and the engine for a schema and workload. What the
command line and ``Synthesizer`` build; neither passes options through dicts of their own."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from synth.data.derive import Derivation, derivation_budget, derive_schema, modelled_names
from synth.data.schema import Categorical, Schema
from synth.data.workload import Workload
from synth.engines.blr_engine import BLRConfig, BLREngine
from synth.engines.mwem import MWEMConfig, MWEMEngine
from synth.engines.pmw import PMWConfig, PMWEngine
from synth.engines.release import Engine
from synth.privacy.accounting import Budget

__all__ = ["CONFIGS", "MECHANISMS", "make_config", "make_engine", "options_of", "plans_in_zcdp",
           "composes_in_zcdp", "budget_after", "derive_for_run"]

CONFIGS = {"mwem": MWEMConfig, "pmw": PMWConfig, "blr": BLRConfig}
ENGINES = {"mwem": MWEMEngine, "pmw": PMWEngine, "blr": BLREngine}
MECHANISMS = tuple(CONFIGS)


def options_of(mechanism: str) -> tuple[str, ...]:
    """The options ``mechanism``'s config takes (``rounds`` for MWEM, ``net`` for BLR...)."""
    return tuple(f.name for f in dataclasses.fields(CONFIGS[_check(mechanism)]))


def make_config(mechanism: str, **options: Any) -> MWEMConfig | PMWConfig | BLRConfig:
    """``mechanism``'s config from keyword options, each checked now; an option it does not
    take is a ``TypeError`` that lists the ones it does."""
    unknown = sorted(set(options) - set(options_of(mechanism)))
    if unknown:
        raise TypeError(f"{', '.join(map(repr, unknown))} is not an option of {mechanism}; its options are: "
                        f"{', '.join(options_of(mechanism))}")
    return CONFIGS[mechanism](**options)


def make_engine(config: MWEMConfig | PMWConfig | BLRConfig, schema: Schema, workload: Workload,
                **inputs: Any) -> Engine:
    """The engine ``config`` is for, over ``schema`` and ``workload``; ``inputs`` are its other
    public inputs (a prior array, or for BLR a prior model)."""
    for name, cls in CONFIGS.items():
        if isinstance(config, cls):
            return ENGINES[name](config, schema, workload, **inputs)
    raise TypeError(f"config must be one of {', '.join(c.__name__ for c in CONFIGS.values())}, "
                    f"not {type(config).__name__}")


def plans_in_zcdp(config: MWEMConfig | PMWConfig | BLRConfig, names: Sequence[str], budget: Budget,
                  workload_given: bool = False) -> bool:
    """Whether a run of ``config`` on columns ``names`` at ``budget`` will account in rho-zCDP
    (MWEM with Gaussian noise), judged before any schema exists: MWEM's plan for the default
    workload over those columns, each taken as two-valued (its noise choice follows the number
    of measurements, not the domain sizes); with a workload of the caller's, whenever MWEM may
    choose the Gaussian. A schema derived for such a run shares its rho
    (``synth.data.derive.derivation_budget``). Public: names and options only."""
    if not (isinstance(config, MWEMConfig) and config.noise != "laplace" and budget.delta > 0 and names):
        return False
    if workload_given or config.noise == "gaussian":
        return True
    placeholder = Schema(tuple(Categorical(name, ("a", "b")) for name in names))
    return composes_in_zcdp(make_engine(config, placeholder, Workload.default(placeholder)), budget)


def derive_for_run(source, config: MWEMConfig | PMWConfig | BLRConfig, total: Budget, share: float, *,
                   workload_given: bool = False, columns: Sequence[str] | None = None,
                   **options: Any) -> tuple[Derivation, bool]:
    """A schema of ``source`` derived under DP for a run of ``config`` in ``total``: ``share``
    of its rho when the run will compose in zCDP (``plans_in_zcdp``), else of its epsilon and
    delta (``derivation_budget``); ``options`` go to ``derive_schema``. The derivation, and
    whether it took the share of rho. What ``synth generate`` and ``Synthesizer.fit`` do
    without a schema."""
    zcdp = plans_in_zcdp(config, modelled_names(source, columns), total, workload_given)
    share_of, rho = derivation_budget(total, share, zcdp)
    return derive_schema(source, share_of.epsilon, share_of.delta, rho=rho, columns=columns, **options), zcdp


def composes_in_zcdp(engine: Engine, budget: Budget) -> bool:
    """Whether ``engine``'s plan for ``budget`` accounts in rho-zCDP (public: the plan reads no data)."""
    return bool(getattr(engine.plan(budget), "zcdp", False))


def budget_after(derivation: Derivation, engine: Engine, total: Budget) -> tuple[Engine, Budget]:
    """The engine and budget of a run after ``derivation`` spent its part of ``total``: the rho
    it left, when the engine composes in zCDP there (the two then compose in rho), else the
    epsilon and delta it left (basic composition). An MWEM engine left to choose its noise
    (``noise="auto"``) that would choose Laplace in the rho left is held to the Gaussian when
    the Gaussian there adds less noise than the Laplace in the epsilon left, which is less
    (the derivation's rho costs more as epsilon than as rho). Public: plans read no data."""
    in_rho, in_epsilon = derivation.left_of(total, zcdp=True), derivation.left_of(total)
    choice = engine.plan(in_rho)
    if getattr(choice, "zcdp", False):
        return engine, in_rho
    laplace, gaussian = getattr(choice, "laplace", math.nan), getattr(choice, "gaussian", math.nan)
    if (isinstance(engine, MWEMEngine) and engine.config.noise == "auto" and in_epsilon.epsilon > 0
            and gaussian < laplace * in_rho.epsilon / in_epsilon.epsilon):  # Laplace noise scales as 1 / epsilon
        held = make_engine(dataclasses.replace(engine.config, noise="gaussian"), engine.schema, engine.workload,
                           prior=engine.prior)
        return held, in_rho
    return engine, in_epsilon


def _check(mechanism: str) -> str:
    if not isinstance(mechanism, str) or mechanism not in CONFIGS:
        raise ValueError(f"mechanism ({mechanism!r}) must be one of: {', '.join(CONFIGS)}")
    return mechanism
