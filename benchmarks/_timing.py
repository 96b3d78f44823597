"""Measuring, for the benchmark scripts: timing samples, synth-vs-baseline figures, runs over
seeds, peak memory and first-call (JIT) costs.

``round_robin`` (and its two-function form ``compare``) samples functions in turn after one
warm-up call each, batching fast calls; ``Comparison`` is one synth-vs-baseline figure built from
those samples, ``medians`` the median of each key's. ``alternating`` makes an update step that
undoes itself every other call (the weights stay bounded over many samples); ``Stopwatch``
times the calls of a few methods of an object. ``traced_peaks`` is the peak memory
(tracemalloc) of a sequence of steps. Runs over seeds: ``over_seeds`` (seeds outermost) and
``Spread`` (median and range over the seeds). First calls: ``first_call`` measures a Numba
kernel's JIT cost and ``first_run`` a whole library call's.
"""

from __future__ import annotations

import importlib
import math
import pkgutil
import statistics
import time
import tracemalloc
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass

import numba
from _report import duration

#: Fast calls are repeated back to back until one timing sample lasts this long.
MIN_SAMPLE_S = 0.02


def timed(fn: Callable[[], object]) -> float:
    """Seconds taken by one call of ``fn``."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def with_time(fn: Callable[[], object]) -> tuple[object, float]:
    """``fn()``'s result and the seconds it took."""
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def sample(fn: Callable[[], object], number: int) -> tuple[float, float]:
    """Mean seconds per call over ``number`` back-to-back calls of ``fn``, and the process's
    CPU time over that wall time (about 1 when one core worked, up to the thread count)."""
    cpu_start = time.process_time()
    start = time.perf_counter()
    for _ in range(number):
        fn()
    wall = time.perf_counter() - start
    return wall / number, (time.process_time() - cpu_start) / max(wall, 1e-9)


@dataclass
class Samples:
    """Timing samples of one function: seconds per call, and CPU time / wall time."""

    seconds: list[float]
    cpu: list[float]


@dataclass(frozen=True)
class Timed:
    """One function to time: its key (samples of equal keys are pooled), and an optional
    ``setup`` run before its warm-up and before each of its samples, outside the timing."""

    key: str
    fn: Callable[[], object]
    setup: Callable[[], object] | None = None


def round_robin(
    entries: Sequence[Timed], repeats: int, min_sample_s: float = MIN_SAMPLE_S
) -> dict[str, Samples]:
    """Samples of each entry's key, ``repeats`` per listing of the key, taken in turn.

    Each distinct key is called once first (warm-up, and to size its batches: fast calls
    are batched so one sample lasts at least ``min_sample_s``; 0 means one call a sample).
    Then every repeat samples the entries in order, so machine noise hits all alike; a key
    listed twice (a shared baseline) pools its samples.
    """
    numbers: dict[str, int] = {}
    for entry in entries:
        if entry.key not in numbers:
            if entry.setup is not None:
                entry.setup()
            numbers[entry.key] = max(1, math.ceil(min_sample_s / max(timed(entry.fn), 1e-9)))
    times = {key: Samples([], []) for key in numbers}
    for _ in range(repeats):
        for entry in entries:
            if entry.setup is not None:
                entry.setup()
            seconds, cpu = sample(entry.fn, numbers[entry.key])
            times[entry.key].seconds.append(seconds)
            times[entry.key].cpu.append(cpu)
    return times


def compare(
    synth_fn: Callable[[], object], base_fn: Callable[[], object], repeats: int,
    min_sample_s: float = MIN_SAMPLE_S,
) -> tuple[Samples, Samples]:
    """Samples of ``synth_fn`` and of ``base_fn``, taken alternately (``round_robin``)."""
    times = round_robin([Timed("synth", synth_fn), Timed("base", base_fn)], repeats, min_sample_s)
    return times["synth"], times["base"]


def medians(times: dict[str, Samples]) -> dict[str, float]:
    """The median seconds per call of each key of ``round_robin``'s samples."""
    return {key: statistics.median(samples.seconds) for key, samples in times.items()}


def alternating(step: Callable[[object], object], a: object, b: object) -> Callable[[], object]:
    """A call of ``step(a)``, then of ``step(b)``, and so on (an update with a factor, then with
    its inverse: the weights stay bounded however many samples are taken)."""
    state = [b, a]

    def call() -> object:
        state.reverse()
        return step(state[0])

    return call


@dataclass(frozen=True)
class Comparison:
    """One figure: synth vs its baseline on the same work (``work`` items of ``unit``)."""

    case: str
    work: int
    unit: str
    synth_s: float  # median seconds per call
    base_s: float
    synth_best_s: float  # fastest sample
    base_best_s: float
    synth_cpu: float  # median CPU time / wall time of the synth samples
    threads: str  # bench_mechanisms' Numba thread count column ("-" where it does not apply)

    @classmethod
    def of(cls, case: str, work: int, unit: str, synth: Samples, base: Samples, threads: str = "-"
           ) -> Comparison:
        """The figure from the synth and baseline samples: medians and minimums."""
        return cls(case, work, unit, statistics.median(synth.seconds), statistics.median(base.seconds),
                   min(synth.seconds), min(base.seconds), statistics.median(synth.cpu), threads)

    @property
    def ratio(self) -> float:
        """Speed ratio synth / baseline on medians (> 1: synth faster)."""
        return self.base_s / self.synth_s

    @property
    def best_ratio(self) -> float:
        """Speed ratio synth / baseline on the fastest samples (less sensitive to noise)."""
        return self.base_best_s / self.synth_best_s

    @property
    def factor(self) -> float:
        """synth time / baseline time on the medians (> 1: synth slower)."""
        return self.synth_s / self.base_s

    @property
    def best_factor(self) -> float:
        """synth time / baseline time on the fastest samples (less sensitive to noise)."""
        return self.synth_best_s / self.base_best_s


class Stopwatch:
    """Calls and seconds spent inside some functions of an object or a module, counting only the
    outermost call when one of them calls another: ``Stopwatch(accountant, "check", "spend")``.
    As a context manager, it puts the original functions back on exit."""

    def __init__(self, target: object, *names: str):
        self.seconds, self.calls, self._inside = 0.0, dict.fromkeys(names, 0), False
        self._target, self._originals = target, {name: getattr(target, name) for name in names}
        for name, original in self._originals.items():
            setattr(target, name, self._wrap(name, original))

    def __enter__(self) -> Stopwatch:
        return self

    def __exit__(self, *_) -> None:
        for name, original in self._originals.items():
            setattr(self._target, name, original)

    def _wrap(self, name: str, method: Callable) -> Callable:
        def call(*args, **kwargs):
            if self._inside:
                return method(*args, **kwargs)
            self.calls[name] += 1
            self._inside, start = True, time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start
                self._inside = False

        return call


def traced_peaks(*steps: Callable[[object], object]) -> tuple[list[int], list[object]]:
    """Peak bytes traced by ``tracemalloc`` during each of ``steps``, run in order in one tracing
    session (NumPy reports its array buffers to tracemalloc; memory allocated before the session is
    not counted), and their results. Each step is called with the previous step's result (None for
    the first); a step's peak includes what earlier steps' results hold."""
    peaks, results = [], []
    tracemalloc.start()
    try:
        for step in steps:
            tracemalloc.reset_peak()
            results.append(step(results[-1] if results else None))
            peaks.append(tracemalloc.get_traced_memory()[1])
    finally:
        tracemalloc.stop()
    return peaks, results


# -- runs over seeds -------------------------------------------------------------------------


@dataclass(frozen=True)
class Spread:
    """One figure over seeds: the median, the range, how many values and their sum."""

    median: float
    low: float
    high: float
    count: int
    total: float

    @classmethod
    def of(cls, values: Iterable[float]) -> Spread:
        values = list(values)
        return cls(statistics.median(values), min(values), max(values), len(values), sum(values))

    def text(self, digits: int = 3) -> str:
        """'0.037 [0.036, 0.038]' (just the median when every value is the same)."""
        return self.shown(f"{{:.{digits}f}}")

    def shown(self, form: str) -> str:
        """The median in ``form`` (a ``str.format`` pattern), and the range when the values differ."""
        mid = form.format(self.median)
        return mid if self.low == self.high else f"{mid} [{form.format(self.low)}, {form.format(self.high)}]"


def over_seeds(
    keys: Iterable[Hashable], seeds: Sequence[int], run: Callable[[Hashable, int], dict[str, float]]
) -> dict[Hashable, dict[str, Spread]]:
    """``run(key, seed)`` (named figures) for every key and seed, seeds outermost so that load
    changes on the shared machine hit every key alike; each figure's ``Spread`` per key."""
    keys = list(keys)
    figures: dict[Hashable, dict[str, list[float]]] = {key: {} for key in keys}
    for seed in seeds:
        for key in keys:
            for name, value in run(key, seed).items():
                figures[key].setdefault(name, []).append(value)
    return {key: {name: Spread.of(v) for name, v in named.items()} for key, named in figures.items()}


# -- first calls (JIT) ----------------------------------------------------------------------


@dataclass(frozen=True)
class FirstCall:
    """First-call (JIT) cost of one kernel."""

    kernel: str
    first_call_s: float
    cache: str
    cold_compile_s: float


def cache_status(dispatcher) -> str:
    """'cache load' or 'compile', from a Numba dispatcher's cache counters."""
    stats = dispatcher.stats
    if sum(stats.cache_misses.values()):
        return "compile (cache miss)"
    if sum(stats.cache_hits.values()):
        return "cache load"
    return "compile (no cache)"


def first_call(kernel: str, first_call_s: float, dispatcher, args: tuple, **jit_options) -> FirstCall:
    """The ``FirstCall`` of ``dispatcher`` whose library call took ``first_call_s``: its cache
    status, then a from-scratch compile + first call of its Python function on ``args`` (no
    cache; ``jit_options`` as the kernel's, e.g. parallel; the kernels it calls are compiled)."""
    fresh = numba.njit(cache=False, **jit_options)(dispatcher.py_func)
    return FirstCall(kernel, first_call_s, cache_status(dispatcher), timed(lambda: fresh(*args)))


def synth_kernels() -> dict[str, object]:
    """synth's Numba kernels (dispatchers) by name, from every module of ``synth._kernels``."""
    import synth._kernels as package

    found = {}
    names = [f"{package.__name__}.{m.name}" for m in pkgutil.iter_modules(package.__path__)]
    for module in [package] + [importlib.import_module(name) for name in names]:
        found.update({n: k for n in dir(module) if hasattr(k := getattr(module, n), "py_func")})
    return found


@dataclass(frozen=True)
class FirstRun:
    """A library call's first-call cost: the first call, the same call again, and the kernels
    the first call loaded from the on-disk cache or compiled."""

    what: str
    first_s: float
    second_s: float
    loaded: tuple[tuple[str, str], ...]  # (kernel, cache status)

    def text(self) -> str:
        kernels = ", ".join(f"`{k}` ({status})" for k, status in self.loaded) or "none"
        extra = self.first_s - self.second_s
        one_off = f"one-off about {duration(extra)}" if extra > 0 else "no one-off cost above the noise"
        return (f"{self.what}: first call {duration(self.first_s)}, again {duration(self.second_s)} "
                f"({one_off}; kernels it loaded: {kernels})")


def first_run(what: str, fn: Callable[[], object]) -> FirstRun:
    """Time ``fn``'s first call and a second one, and list the kernels the first call used
    that no earlier call had (with their cache status)."""
    kernels = synth_kernels()
    before = {name for name, k in kernels.items() if k.signatures}
    first, second = timed(fn), timed(fn)
    loaded = tuple(
        (name, cache_status(k)) for name, k in sorted(kernels.items()) if k.signatures and name not in before
    )
    return FirstRun(what, first, second, loaded)
