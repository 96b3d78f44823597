"""Benchmark synth's privacy mechanisms against the unsafe floating-point baselines.

Three groups, each measured against its baseline in the same run:

1. discrete Laplace noise (counts/s): ``synth.privacy.mechanisms.discrete_laplace_noise(n, eps, 1, rng)``
   vs NumPy's continuous ``rng.laplace(0, 1 / eps, n)``, with Numba's default thread count
   and with one thread (target: synth time / baseline time <= 3 with the default threads);
2. discrete Gaussian noise (counts/s): ``discrete_gaussian_noise(n, sigma2, rng)`` vs
   ``rng.normal(0, sqrt(sigma2), n)`` (informational: exact integers cost a few times floats);
3. exponential mechanism (candidates/s): ``StreamingExponential`` fed chunks then
   ``choose()``, ``exponential(..., method="gumbel")`` and ``method="permute_and_flip"``, vs
   softmax sampling ``rng.choice(n, p=softmax(scale * scores))`` on the same scores.

Every figure is the median of several repeats after a warm-up; the first (JIT) call of
each kernel is reported separately. Prints a markdown report and writes it to its own
section of ``benchmarks/RESULTS.md`` (``_results.write_section``; other sections are kept).
Every random draw comes from an explicit ``np.random.default_rng(seed)``.

Usage: ``python benchmarks/bench_mechanisms.py [--repeats N] [--quick] [--seed S]``
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numba
import numpy as np

from synth import _kernels
from synth.privacy.mechanisms import (
    StreamingExponential,
    discrete_gaussian_noise,
    discrete_laplace_noise,
    exponential,
    laplace_ratio,
)
from synth.privacy.mechanisms.discrete import _BLOCK, _laplace_draws

from _harness import (  # benchmarks/ is on sys.path when run as a script
    Comparison,
    FirstCall,
    Timed,
    compare,
    first_call,
    first_call_table,
    machine_info,
    markdown_table,
    met,
    option_parser,
    parse_options,
    publish,
    repeats_note,
    report_header,
    round_robin,
    timed,
    timing_cells,
    timing_columns,
)

SECTION = "bench_mechanisms"
#: Permute-and-flip stops at a random candidate: longer samples average that out.
PF_MIN_SAMPLE_S = 0.25
#: The discrete Laplace target: synth time / baseline time at most this (default threads).
LAPLACE_TARGET = 3.0

#: Numba's thread count when the script starts (NUMBA_NUM_THREADS, else the core count).
DEFAULT_THREADS = numba.get_num_threads()

#: eps for the discrete Laplace (sensitivity 1): an exact ratio, then two that are rounded
#: down to a multiple of 2^-40.
EPSILONS = (1.0, 0.1, 0.37)
#: An informational kernel case whose denominator is not a power of two (the general
#: Bernoulli(exp(-u/t)) path); ``discrete_laplace_noise`` never produces one.
GENERAL_RATIO = (37, 100)
SIGMA2 = 10.0
EM_EPSILON = 1.0
EM_SENSITIVITY = 1.0
#: Scores of the exponential-mechanism cases: N(0, SCORE_SD^2), from the seeded generator.
SCORE_SD = 10.0


@dataclass(frozen=True)
class Settings:
    """Sizes and repeat counts of one run."""

    repeats: int
    laplace_sizes: tuple[int, ...]
    gaussian_n: int
    stream_n: int
    chunk: int
    oneshot_n: int
    pf_sizes: tuple[int, ...]
    seed: int


# -- timing ---------------------------------------------------------------------------------


def set_threads(threads: int | None) -> None:
    """Numba's thread count for the next calls (``None``: the default of this process)."""
    numba.set_num_threads(DEFAULT_THREADS if threads is None else threads)


def threaded(key: str, fn: Callable[[], object], threads: int | None = None) -> Timed:
    """A ``round_robin`` entry run with ``threads`` Numba threads (``None``: the default), set
    before its warm-up and each of its samples, outside the timing."""
    return Timed(key, fn, setup=functools.partial(set_threads, threads))


# -- 0. first calls -------------------------------------------------------------------------


def bench_first_calls(seed: int) -> list[FirstCall]:
    """First-call cost of the three sampling kernels through the library, on small inputs.

    Must run before any other call of the mechanisms.
    """
    rng = np.random.default_rng(seed)
    state = rng.integers(1, 2**63, size=4, dtype=np.uint64)
    s37, t37 = (np.uint64(v) for v in laplace_ratio(0.37))

    first_one = timed(lambda: discrete_laplace_noise(100, 1.0, 1, rng))  # one block: serial kernel
    one_args = (np.empty(100, dtype=np.int64), 0, 100, s37, t37, state.copy())
    calls = [
        first_call(
            "fill_discrete_laplace (discrete_laplace_noise, 100 draws: one block)",
            first_one,
            _kernels.fill_discrete_laplace,
            one_args,
        )
    ]
    n_blocks = 3
    first_blocks = timed(lambda: discrete_laplace_noise(n_blocks * _BLOCK, 0.37, 1, rng))  # parallel kernel
    blocks_args = (
        np.empty(n_blocks * _BLOCK, dtype=np.int64),
        _BLOCK,
        s37,
        t37,
        rng.integers(1, 2**63, size=(n_blocks, 4), dtype=np.uint64),
        np.empty(n_blocks, dtype=np.int64),
    )
    calls.append(
        first_call(
            f"fill_discrete_laplace_blocks (discrete_laplace_noise, {n_blocks} blocks: parallel)",
            first_blocks,
            _kernels.fill_discrete_laplace_blocks,
            blocks_args,
            parallel=True,
        )
    )
    scores = rng.normal(0.0, SCORE_SD, 100)

    def stream_small() -> int:
        chooser = StreamingExponential(EM_EPSILON, EM_SENSITIVITY, rng)
        chooser.feed(scores)
        return chooser.choose()

    first_gumbel = timed(stream_small)
    gumbel_args = (scores, EM_EPSILON / 2, state.copy(), -np.inf, -1, 0)
    label = "gumbel_argmax (StreamingExponential, 100 candidates)"
    calls.append(first_call(label, first_gumbel, _kernels.gumbel_argmax, gumbel_args))
    return calls


# -- 1. discrete Laplace --------------------------------------------------------------------


def ratio_text(s: int, t: int) -> str:
    """'s/t' with a power-of-two t written as 2^k."""
    if t > 2 and t & (t - 1) == 0:
        return f"{s}/2^{t.bit_length() - 1}"
    return f"{s}/{t}"


def check_laplace(draws: np.ndarray, s: int, t: int, label: str) -> None:
    """Mean 0 and variance 2q/(1-q)^2 (q = exp(-s/t)) within 6 standard errors."""
    q = math.exp(-s / t)
    expected = 2 * q / (1 - q) ** 2
    x = draws.astype(np.float64)
    n = x.size
    mean, var = x.mean(), x.var()
    var_se = math.sqrt(max(float(((x - mean) ** 4).mean()) - var**2, 0.0) / n)
    if abs(mean) > 6 * math.sqrt(var / n) or abs(var - expected) > 6 * var_se:
        raise AssertionError(
            f"discrete Laplace {label}: mean {mean:.4g}, variance {var:.6g} vs {expected:.6g}"
        )


def bench_laplace(settings: Settings) -> tuple[list[Comparison], list[Comparison]]:
    """Discrete Laplace rows (per eps and size: default threads, then 1 thread) and the
    informational general-ratio rows."""
    rows: list[Comparison] = []
    threads_options: list[int | None] = [None] + ([1] if DEFAULT_THREADS > 1 else [])
    check_n = settings.laplace_sizes[0]
    for eps in EPSILONS:
        s, t = laplace_ratio(eps, 1)
        # Correctness checks outside the timings: moments, and thread-count independence.
        draws = discrete_laplace_noise(check_n, eps, 1, np.random.default_rng(settings.seed))
        check_laplace(draws, s, t, f"eps {eps}")
        set_threads(1)
        single = discrete_laplace_noise(check_n, eps, 1, np.random.default_rng(settings.seed))
        set_threads(None)
        if not np.array_equal(draws, single):
            raise AssertionError(f"discrete Laplace eps {eps}: 1 thread and default threads disagree")
        for n in settings.laplace_sizes:
            rng = np.random.default_rng(settings.seed)
            base_rng = np.random.default_rng(settings.seed + 1)

            def synth_fn() -> np.ndarray:
                return discrete_laplace_noise(n, eps, 1, rng)

            def base_fn() -> np.ndarray:
                return base_rng.laplace(0.0, 1.0 / eps, n)

            entries: list[Timed] = []
            for threads in threads_options:  # each synth entry followed by the shared baseline
                entries += [threaded(f"synth/{threads}", synth_fn, threads), threaded("base", base_fn)]
            times = round_robin(entries, settings.repeats)  # ends on "base": default threads again
            case = f"eps {eps:g} (s/t = {ratio_text(s, t)})"
            for threads in threads_options:
                label = f"{DEFAULT_THREADS} (default)" if threads is None else str(threads)
                rows.append(Comparison.of(case, n, "counts", times[f"synth/{threads}"], times["base"], label))

    s, t = GENERAL_RATIO
    n = settings.laplace_sizes[-1]
    check_laplace(_laplace_draws(check_n, s, t, np.random.default_rng(settings.seed)), s, t, f"s/t = {s}/{t}")
    rng = np.random.default_rng(settings.seed)
    base_rng = np.random.default_rng(settings.seed + 1)
    times = compare(
        lambda: _laplace_draws(n, s, t, rng), lambda: base_rng.laplace(0.0, t / s, n), settings.repeats
    )
    case = f"`_laplace_draws(n, {s}, {t})` (t not a power of two)"
    extra = [Comparison.of(case, n, "counts", *times, f"{DEFAULT_THREADS} (default)")]
    return rows, extra


# -- 2. discrete Gaussian -------------------------------------------------------------------


def bench_gaussian(settings: Settings) -> list[Comparison]:
    """discrete_gaussian_noise vs rng.normal, one size."""
    n = settings.gaussian_n
    rng = np.random.default_rng(settings.seed)
    base_rng = np.random.default_rng(settings.seed + 1)
    sigma = math.sqrt(SIGMA2)
    draws = discrete_gaussian_noise(n, SIGMA2, np.random.default_rng(settings.seed)).astype(np.float64)
    if abs(draws.mean()) > 6 * sigma / math.sqrt(n) or abs(draws.var() / SIGMA2 - 1) > 6 * math.sqrt(2 / n):
        raise AssertionError(
            f"discrete Gaussian: mean {draws.mean():.4g}, variance {draws.var():.4g} vs ~{SIGMA2}"
        )
    times = compare(
        lambda: discrete_gaussian_noise(n, SIGMA2, rng),
        lambda: base_rng.normal(0.0, sigma, n),
        settings.repeats,
    )
    return [Comparison.of(f"sigma2 = {SIGMA2:g}", n, "counts", *times)]


# -- 3. exponential mechanism ---------------------------------------------------------------


def softmax_choice(scores: np.ndarray, scale: float, rng: np.random.Generator) -> int:
    """The baseline: sample an index with probability proportional to exp(scale * score)."""
    p = np.exp(scale * (scores - scores.max()))
    p /= p.sum()
    return int(rng.choice(len(scores), p=p))


def pf_mean_visits(scores: np.ndarray, scale: float, rng: np.random.Generator, trials: int = 500) -> float:
    """Mean number of candidates permute-and-flip visits before accepting one (simulated in
    floating point: a description of the workload, not a sample of the mechanism)."""
    p = np.exp(scale * (scores - scores.max()))
    visits = [int(np.argmax(rng.random(len(p)) < p[rng.permutation(len(p))])) + 1 for _ in range(trials)]
    return float(np.mean(visits))


def bench_exponential(settings: Settings) -> list[Comparison]:
    """Streaming Gumbel-max, one-shot Gumbel-max and permute-and-flip vs softmax sampling."""
    scale = EM_EPSILON / (2 * EM_SENSITIVITY)
    scores = np.random.default_rng(settings.seed + 2).normal(0.0, SCORE_SD, settings.stream_n)
    chunks = [scores[i : i + settings.chunk] for i in range(0, len(scores), settings.chunk)]

    def stream(rng: np.random.Generator) -> int:
        chooser = StreamingExponential(EM_EPSILON, EM_SENSITIVITY, rng)
        for chunk in chunks:
            chooser.feed(chunk)
        return chooser.choose()

    # Check: the stream over chunks picks what one-shot Gumbel-max picks from the same seed.
    streamed = stream(np.random.default_rng(settings.seed))
    seeded = np.random.default_rng(settings.seed)
    one_shot = exponential(scores, EM_EPSILON, EM_SENSITIVITY, seeded, method="gumbel")
    if streamed != one_shot:
        raise AssertionError(
            f"StreamingExponential chose {streamed}, exponential(gumbel) {one_shot} (same seed)"
        )

    rng = np.random.default_rng(settings.seed)
    base_rng = np.random.default_rng(settings.seed + 1)
    times = compare(lambda: stream(rng), lambda: softmax_choice(scores, scale, base_rng), settings.repeats)
    plural = "s" if len(chunks) > 1 else ""
    case = f"StreamingExponential, {len(chunks)} chunk{plural} of {settings.chunk:,}"
    rows = [Comparison.of(case, settings.stream_n, "candidates", *times, "1 (serial kernel)")]

    part = scores[: settings.oneshot_n]
    times = compare(
        lambda: exponential(part, EM_EPSILON, EM_SENSITIVITY, rng, method="gumbel"),
        lambda: softmax_choice(part, scale, base_rng),
        settings.repeats,
    )
    case = 'exponential(method="gumbel"), one shot'
    rows.append(Comparison.of(case, len(part), "candidates", *times, "1 (serial kernel)"))

    for n in settings.pf_sizes:
        part = scores[:n]
        times = compare(
            lambda: exponential(part, EM_EPSILON, EM_SENSITIVITY, rng, method="permute_and_flip"),
            lambda: softmax_choice(part, scale, base_rng),
            settings.repeats,
            min_sample_s=PF_MIN_SAMPLE_S,
        )
        visits = pf_mean_visits(part, scale, np.random.default_rng(settings.seed + 3))
        case = f'exponential(method="permute_and_flip"), visits ~{visits:,.0f} on average'
        rows.append(Comparison.of(case, n, "candidates", *times, "- (Python)"))
    return rows


# -- report ---------------------------------------------------------------------------------


def results_table(rows: Sequence[Comparison], baseline: str, target: float | None = None) -> str:
    """Markdown table of one section's rows (with a target column when ``target`` is set)."""
    columns = [
        ("case", "---"),
        ("size", "---:"),
        ("numba threads", "---"),
        *timing_columns(baseline),
        ("synth time / baseline time", "---:"),
        ("same, best samples", "---:"),
        ("synth CPU / wall", "---:"),
    ]
    if target is not None:
        columns.append((f"<= {target:g}x?", ":---:"))
    body = []
    for r in rows:
        cells = [r.case, f"{r.work:,} {r.unit}", r.threads, *timing_cells(r)]
        cells += [f"{r.factor:.2f}x", f"{r.best_factor:.2f}x", f"{r.synth_cpu:.2f}"]
        if target is not None:
            cells.append("yes" if r.factor <= target else "no")
        body.append(cells)
    return markdown_table(columns, body)


def is_default(row: Comparison) -> bool:
    """Whether a discrete Laplace row ran with Numba's default thread count."""
    return row.threads.endswith("(default)")


def targets_note(laplace: Sequence[Comparison]) -> str:
    """The discrete Laplace target and whether this run met it (medians)."""
    default = [r for r in laplace if is_default(r)]
    single = [r for r in laplace if not is_default(r)]

    def listing(rows: Sequence[Comparison]) -> str:
        return "; ".join(
            f"{r.case}, n = {r.work:,}: {r.factor:.2f}x (best {r.best_factor:.2f}x)" for r in rows
        )

    lines = [
        "## Target (judged on the medians)",
        "",
        f"- Exact discrete sampling no slower than {LAPLACE_TARGET:g}x the unsafe continuous baseline "
        f"(`discrete_laplace_noise` time / `rng.laplace` time <= {LAPLACE_TARGET:g}), with Numba's default "
        f"{DEFAULT_THREADS} threads: {met(all(r.factor <= LAPLACE_TARGET for r in default))} "
        f"(worst {max(r.factor for r in default):.2f}x). {listing(default)}.",
    ]
    if single:
        lines.append(
            f"- The same with one Numba thread (for reference, not the target): "
            f"{met(all(r.factor <= LAPLACE_TARGET for r in single))} "
            f"(worst {max(r.factor for r in single):.2f}x). {listing(single)}."
        )
        gains = []
        for r1 in single:
            rd = next(r for r in default if r.case == r1.case and r.work == r1.work)
            gains.append(
                f"{rd.case}, n = {rd.work:,}: {r1.synth_s / rd.synth_s:.2f}x (CPU / wall {rd.synth_cpu:.2f})"
            )
        lines.append(
            f"- Speed-up of the parallel blocks ({DEFAULT_THREADS} threads over 1, synth medians): "
            + "; ".join(gains)
            + "."
        )
        busy = 1 + 0.5 * (DEFAULT_THREADS - 1)
        pairs = [(r1, next(r for r in default if r.case == r1.case and r.work == r1.work)) for r1 in single]
        slower = [rd for r1, rd in pairs if rd.synth_s > r1.synth_s and rd.synth_cpu >= busy]
        if slower:
            lines.append(
                f"- {DEFAULT_THREADS} threads were slower than 1 although the threads were running "
                f"(CPU / wall >= {busy:.1f}) at: "
                + "; ".join(f"{r.case}, n = {r.work:,} ({-(-r.work // _BLOCK)} blocks)" for r in slower)
                + ": the parallel blocks slow each other down at these sizes."
            )
        starved = [r for r in default if r.synth_cpu < busy]
        if starved:
            lines.append(
                f"- On {len(starved)} of {len(default)} default-thread rows the synth samples used under "
                f"{busy:.1f} cores on average (CPU / wall): Numba's threads did "
                "not get their cores (other load on this shared machine, see the load average above, or "
                "too few 2^16-draw blocks), so those rows understate what the parallel blocks give on an "
                "idle machine."
            )
    lines.append(
        "- The machine is shared and noisy: figures are medians of alternating synth / baseline samples, "
        "and factors can move by tens of percent between runs; the best-sample factors are a cross-check."
    )
    return "\n".join(lines)


def load_average() -> str:
    """The 1-, 5- and 15-minute load averages, where the platform has them."""
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except (AttributeError, OSError):  # pragma: no cover - not Unix
        return "unavailable"


def machine_and_load_info(loads: tuple[str, str]) -> str:
    """Cores, platform, library versions, Numba's threads and the load around the run."""
    try:
        layer = numba.threading_layer()
    except ValueError:  # no parallel kernel has run yet
        layer = "not initialised"
    return (
        f"{machine_info(np, numba)}\n"
        f"- numba threads: {DEFAULT_THREADS} (numba.get_num_threads() at start; NUMBA_NUM_THREADS "
        f"{os.environ.get('NUMBA_NUM_THREADS', 'unset')}), threading layer: {layer}\n"
        f"- load average (1, 5, 15 min) at start: {loads[0]}; at end: {loads[1]} "
        "(other processes' load: the cores are shared)"
    )


def render(
    settings: Settings,
    calls: Sequence[FirstCall],
    laplace: Sequence[Comparison],
    laplace_extra: Sequence[Comparison],
    gaussian: Sequence[Comparison],
    em: Sequence[Comparison],
    total_s: float,
    loads: tuple[str, str],
) -> str:
    """The full markdown report."""
    s_eps, t_eps = laplace_ratio(EPSILONS[0])
    title = "synth privacy mechanisms: benchmark results"
    pf_note = f", {PF_MIN_SAMPLE_S * 1e3:.0f} ms for permute-and-flip"
    return "\n".join(
        [
            *report_header(title, machine_and_load_info(loads), total_s),
            f"{repeats_note(settings.repeats, pf_note)}; seed {settings.seed}, "
            "every draw from an explicit `np.random.default_rng`",
            "",
            "**synth time / baseline time** on the medians: lower is better; 1.00x is the baseline's "
            "speed, 3.00x means synth takes three times as long. The column after it is the same factor on "
            "each side's fastest sample, a check against noise. **synth CPU / wall** is the process's CPU "
            "time over wall time during the synth samples (median): about 1.00 when one core did the "
            f"work, up to {DEFAULT_THREADS} when all of Numba's threads ran at once; well below "
            f"{DEFAULT_THREADS} on a default-thread row means the threads did not get their cores "
            "(other load on the machine, or too few blocks).",
            "",
            "## First calls (JIT)",
            "",
            "First call through the library on a small input (a Numba cache load when the on-disk cache is "
            "valid, else a compile), and a from-scratch compile of the same kernel with caching off (the "
            "kernels it calls are already compiled by then). The very first call also pays Numba's one-off "
            "start-up; the first parallel call also starts the thread pool. Not in any figure below.",
            "",
            first_call_table(calls),
            "",
            "## 1. Discrete Laplace noise (sensitivity 1)",
            "",
            "synth: `synth.privacy.mechanisms.discrete_laplace_noise(n, eps, 1, rng)` (exact, integer-only); "
            "baseline: `rng.laplace(0, 1/eps, n)` (NumPy Generator, floating point: unsafe to release). "
            "The rows with 1 thread set `numba.set_num_threads(1)` (outside the timed region) and share "
            "the baseline samples of their default-thread row. "
            f"`s/t` is `laplace_ratio(eps)`: eps = {EPSILONS[0]:g} is exactly {s_eps}/{t_eps}; the others "
            "are rounded down to a multiple of 2^-40, so their denominator is 2^40 and, like eps = 1, they "
            "take the kernel's power-of-two path (`bernoulli_exp_pow2`). Checked outside the timings: the "
            "sample mean and variance match the distribution (within 6 standard errors), and the same seed "
            "gives identical draws with 1 thread and with the default threads.",
            "",
            results_table(laplace, "NumPy laplace", LAPLACE_TARGET),
            "",
            "Informational, not part of the target: the kernel's general path (a denominator that is not a "
            "power of two: exact rejection sampling of u in [0, t) and the general "
            "Bernoulli(exp(-u/t))), called through the private `synth.privacy.mechanisms.discrete._laplace_draws`. "
            "`discrete_laplace_noise` never takes it; `discrete_gaussian_noise` does when "
            "floor(sqrt(sigma2)) + 1 is not a power of two.",
            "",
            results_table(laplace_extra, "NumPy laplace"),
            "",
            "## 2. Discrete Gaussian noise (informational)",
            "",
            f"synth: `discrete_gaussian_noise(n, {SIGMA2:g}, rng)` (CKS Algorithm 3 in the Numba kernel: "
            "discrete Laplace candidates and an exact integer acceptance, in parallel blocks); baseline: "
            f"`rng.normal(0, sqrt({SIGMA2:g}), n)`. Checked: sample mean and variance near 0 and sigma2.",
            "",
            results_table(gaussian, "NumPy normal"),
            "",
            "## 3. Exponential mechanism (candidates/s)",
            "",
            f"Scores: N(0, {SCORE_SD:g}^2) from a seeded Generator, made before timing; eps = "
            f"{EM_EPSILON:g}, sensitivity {EM_SENSITIVITY:g} (scale eps / (2 sensitivity) = "
            f"{EM_EPSILON / (2 * EM_SENSITIVITY):g}). Baseline on the same scores, same run: "
            "`p = np.exp(scale*(s - s.max())); p /= p.sum(); rng.choice(len(s), p=p)` (holds every "
            "candidate and a float probability vector). synth: `StreamingExponential(eps, 1.0, rng)` fed "
            "the chunks (views of the score array) then `choose()`; `exponential(scores, eps, 1.0, rng, "
            'method="gumbel")` in one shot; `method="permute_and_flip"` (exact, Python speed: its time '
            "depends on how many candidates it visits before accepting one, random and score-dependent: "
            "the case column gives the mean from a float simulation of 500 runs, and the rate counts all "
            "candidates, visited or not). Checked: the stream over chunks "
            "picks the same index as one-shot Gumbel-max from the same seed.",
            "",
            results_table(em, "softmax"),
            "",
            targets_note(laplace),
            "",
        ]
    )


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options (``--repeats`` filled in)."""
    parser = option_parser(__doc__, quick_help="smaller sizes and 3 repeats (a smoke run)")
    parser.add_argument("--seed", type=int, default=0, help="seed of every generator")
    args = parse_options(parser, argv)
    if args.seed < 0:
        parser.error("--seed must be >= 0")
    return args


def settings_from(args: argparse.Namespace) -> Settings:
    """Sizes for a default or a quick run (a tenth of the Laplace sizes and of the stream)."""
    return Settings(
        repeats=args.repeats,
        laplace_sizes=(10**5, 10**6) if args.quick else (10**6, 10**7),
        gaussian_n=10**5 if args.quick else 10**6,
        stream_n=10**6 if args.quick else 10**7,
        chunk=10**6,
        oneshot_n=10**6,
        pf_sizes=(10**3, 10**4),
        seed=args.seed,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run every benchmark, print the report and write its RESULTS.md section."""
    args = parse_args(argv)
    settings = settings_from(args)
    started = time.perf_counter()
    load_start = load_average()
    calls = bench_first_calls(settings.seed)
    laplace, laplace_extra = bench_laplace(settings)
    gaussian = bench_gaussian(settings)
    em = bench_exponential(settings)
    total_s = time.perf_counter() - started
    loads = (load_start, load_average())
    report = render(settings, calls, laplace, laplace_extra, gaussian, em, total_s, loads)
    publish(SECTION, report, total_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
