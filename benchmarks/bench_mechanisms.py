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

The first (JIT) call of each kernel is reported apart. Every random draw comes from an explicit
``np.random.default_rng(seed)``.

Usage: ``python benchmarks/bench_mechanisms.py [--repeats N] [--quick] [--seed S] [--no-write]``
"""

from __future__ import annotations

import functools
import math
import os
import sys
from collections.abc import Callable, Sequence

import numba
import numpy as np
from _baselines import softmax_choice
from _harness import Session, session
from _report import document, comparison_table, first_call_table, met
from _timing import Comparison, FirstCall, Timed, compare, first_call, round_robin, timed

from synth import _kernels
from synth.privacy.mechanisms import (StreamingExponential, discrete_gaussian_noise, discrete_laplace_noise,
                                      exponential, laplace_ratio)
from synth.privacy.mechanisms.discrete import _BLOCK, _laplace_draws

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
#: Sizes, (full, quick): a tenth of the Laplace sizes and of the stream with --quick.
LAPLACE_SIZES = ((10**6, 10**7), (10**5, 10**6))
GAUSSIAN_N, STREAM_N = (10**6, 10**5), (10**7, 10**6)
CHUNK = ONESHOT_N = 10**6
PF_SIZES = (10**3, 10**4)
DEFAULT = f"{DEFAULT_THREADS} (default)"


def set_threads(threads: int | None) -> None:
    """Numba's thread count for the next calls (``None``: the default of this process)."""
    numba.set_num_threads(DEFAULT_THREADS if threads is None else threads)


def threaded(key: str, fn: Callable[[], object], threads: int | None = None) -> Timed:
    """A ``round_robin`` entry run with ``threads`` Numba threads (``None``: the default), set
    before its warm-up and each of its samples, outside the timing."""
    return Timed(key, fn, setup=functools.partial(set_threads, threads))


def generators(seed: int) -> tuple[np.random.Generator, np.random.Generator]:
    """synth's generator and the baseline's (seeds S and S + 1)."""
    return np.random.default_rng(seed), np.random.default_rng(seed + 1)


# -- 0. first calls -------------------------------------------------------------------------


def bench_first_calls(seed: int) -> list[FirstCall]:
    """First-call cost of the three sampling kernels through the library, on small inputs.

    Must run before any other call of the mechanisms.
    """
    rng = np.random.default_rng(seed)
    state = rng.integers(1, 2**63, size=4, dtype=np.uint64)
    s37, t37 = (np.uint64(v) for v in laplace_ratio(0.37))
    first_one = timed(lambda: discrete_laplace_noise(100, 1.0, 1, rng))  # one block: serial kernel
    calls = [first_call("fill_discrete_laplace (discrete_laplace_noise, 100 draws: one block)", first_one,
                        _kernels.fill_discrete_laplace,
                        (np.empty(100, dtype=np.int64), 0, 100, s37, t37, state.copy()))]
    n_blocks = 3
    first_blocks = timed(lambda: discrete_laplace_noise(n_blocks * _BLOCK, 0.37, 1, rng))  # parallel kernel
    blocks_args = (np.empty(n_blocks * _BLOCK, dtype=np.int64), _BLOCK, s37, t37,
                   rng.integers(1, 2**63, size=(n_blocks, 4), dtype=np.uint64),
                   np.empty(n_blocks, dtype=np.int64))
    label = f"fill_discrete_laplace_blocks (discrete_laplace_noise, {n_blocks} blocks: parallel)"
    calls.append(first_call(label, first_blocks, _kernels.fill_discrete_laplace_blocks, blocks_args,
                            parallel=True))
    scores = rng.normal(0.0, SCORE_SD, 100)

    def stream_small() -> int:
        chooser = StreamingExponential(EM_EPSILON, EM_SENSITIVITY, rng)
        chooser.feed(scores)
        return chooser.choose()

    calls.append(first_call("gumbel_argmax (StreamingExponential, 100 candidates)", timed(stream_small),
                            _kernels.gumbel_argmax, (scores, EM_EPSILON / 2, state.copy(), -np.inf, -1, 0)))
    return calls


# -- 1. discrete Laplace --------------------------------------------------------------------


def ratio_text(s: int, t: int) -> str:
    """'s/t' with a power-of-two t written as 2^k."""
    return f"{s}/2^{t.bit_length() - 1}" if t > 2 and t & (t - 1) == 0 else f"{s}/{t}"


def check_laplace(draws: np.ndarray, s: int, t: int, label: str) -> None:
    """Mean 0 and variance 2q/(1-q)^2 (q = exp(-s/t)) within 6 standard errors."""
    q = math.exp(-s / t)
    expected = 2 * q / (1 - q) ** 2
    x = draws.astype(np.float64)
    mean, var = x.mean(), x.var()
    var_se = math.sqrt(max(float(((x - mean) ** 4).mean()) - var**2, 0.0) / x.size)
    if abs(mean) > 6 * math.sqrt(var / x.size) or abs(var - expected) > 6 * var_se:
        raise AssertionError(f"discrete Laplace {label}: mean {mean:.4g}, variance {var:.6g} vs "
                             f"{expected:.6g}")


def bench_laplace(run: Session) -> tuple[list[Comparison], list[Comparison]]:
    """Discrete Laplace rows (per eps and size: default threads, then 1 thread) and the
    informational general-ratio rows."""
    rows: list[Comparison] = []
    threads_options: list[int | None] = [None] + ([1] if DEFAULT_THREADS > 1 else [])
    sizes = run.pick(*LAPLACE_SIZES)
    check_n = sizes[0]
    for eps in EPSILONS:
        s, t = laplace_ratio(eps, 1)
        # Correctness checks outside the timings: moments, and thread-count independence.
        draws = discrete_laplace_noise(check_n, eps, 1, np.random.default_rng(run.seed))
        check_laplace(draws, s, t, f"eps {eps}")
        set_threads(1)
        single = discrete_laplace_noise(check_n, eps, 1, np.random.default_rng(run.seed))
        set_threads(None)
        if not np.array_equal(draws, single):
            raise AssertionError(f"discrete Laplace eps {eps}: 1 thread and default threads disagree")
        for n in sizes:
            rng, base_rng = generators(run.seed)
            entries: list[Timed] = []
            for threads in threads_options:  # each synth entry followed by the shared baseline
                synth = threaded(f"synth/{threads}", lambda: discrete_laplace_noise(n, eps, 1, rng), threads)
                entries += [synth, threaded("base", lambda: base_rng.laplace(0.0, 1.0 / eps, n))]
            times = round_robin(entries, run.repeats)  # ends on "base": default threads again
            case = f"eps {eps:g} (s/t = {ratio_text(s, t)})"
            for threads in threads_options:
                label = DEFAULT if threads is None else str(threads)
                rows.append(Comparison.of(case, n, "counts", times[f"synth/{threads}"], times["base"], label))
    s, t = GENERAL_RATIO
    n = sizes[-1]
    check_laplace(_laplace_draws(check_n, s, t, np.random.default_rng(run.seed)), s, t, f"s/t = {s}/{t}")
    rng, base_rng = generators(run.seed)
    times = compare(lambda: _laplace_draws(n, s, t, rng), lambda: base_rng.laplace(0.0, t / s, n),
                    run.repeats)
    case = f"`_laplace_draws(n, {s}, {t})` (t not a power of two)"
    return rows, [Comparison.of(case, n, "counts", *times, DEFAULT)]


# -- 2. discrete Gaussian -------------------------------------------------------------------


def bench_gaussian(run: Session) -> list[Comparison]:
    """discrete_gaussian_noise vs rng.normal, one size."""
    n, sigma = run.pick(*GAUSSIAN_N), math.sqrt(SIGMA2)
    rng, base_rng = generators(run.seed)
    draws = discrete_gaussian_noise(n, SIGMA2, np.random.default_rng(run.seed)).astype(np.float64)
    if abs(draws.mean()) > 6 * sigma / math.sqrt(n) or abs(draws.var() / SIGMA2 - 1) > 6 * math.sqrt(2 / n):
        raise AssertionError(f"discrete Gaussian: mean {draws.mean():.4g}, variance {draws.var():.4g} "
                             f"vs ~{SIGMA2}")
    times = compare(lambda: discrete_gaussian_noise(n, SIGMA2, rng), lambda: base_rng.normal(0.0, sigma, n),
                    run.repeats)
    return [Comparison.of(f"sigma2 = {SIGMA2:g}", n, "counts", *times)]


# -- 3. exponential mechanism ---------------------------------------------------------------


def pf_mean_visits(scores: np.ndarray, scale: float, rng: np.random.Generator, trials: int = 500) -> float:
    """Mean number of candidates permute-and-flip visits before accepting one (simulated in
    floating point: a description of the workload, not a sample of the mechanism)."""
    p = np.exp(scale * (scores - scores.max()))
    visits = [int(np.argmax(rng.random(len(p)) < p[rng.permutation(len(p))])) + 1 for _ in range(trials)]
    return float(np.mean(visits))


def bench_exponential(run: Session) -> list[Comparison]:
    """Streaming Gumbel-max, one-shot Gumbel-max and permute-and-flip vs softmax sampling."""
    scale, stream_n = EM_EPSILON / (2 * EM_SENSITIVITY), run.pick(*STREAM_N)
    scores = np.random.default_rng(run.seed + 2).normal(0.0, SCORE_SD, stream_n)
    chunks = [scores[i : i + CHUNK] for i in range(0, len(scores), CHUNK)]

    def stream(rng: np.random.Generator) -> int:
        chooser = StreamingExponential(EM_EPSILON, EM_SENSITIVITY, rng)
        for chunk in chunks:
            chooser.feed(chunk)
        return chooser.choose()

    # Check: the stream over chunks picks what one-shot Gumbel-max picks from the same seed.
    streamed = stream(np.random.default_rng(run.seed))
    one_shot = exponential(scores, EM_EPSILON, EM_SENSITIVITY, np.random.default_rng(run.seed),
                           method="gumbel")
    if streamed != one_shot:
        raise AssertionError(f"StreamingExponential chose {streamed}, exponential(gumbel) {one_shot} "
                             "(same seed)")
    rng, base_rng = generators(run.seed)
    times = compare(lambda: stream(rng), lambda: softmax_choice(scores, scale, base_rng), run.repeats)
    case = f"StreamingExponential, {len(chunks)} chunk{'s' if len(chunks) > 1 else ''} of {CHUNK:,}"
    rows = [Comparison.of(case, stream_n, "candidates", *times, "1 (serial kernel)")]
    part = scores[:ONESHOT_N]
    times = compare(lambda: exponential(part, EM_EPSILON, EM_SENSITIVITY, rng, method="gumbel"),
                    lambda: softmax_choice(part, scale, base_rng), run.repeats)
    rows.append(Comparison.of('exponential(method="gumbel"), one shot', len(part), "candidates", *times,
                              "1 (serial kernel)"))
    for n in PF_SIZES:
        part = scores[:n]
        times = compare(lambda: exponential(part, EM_EPSILON, EM_SENSITIVITY, rng, method="permute_and_flip"),
                        lambda: softmax_choice(part, scale, base_rng), run.repeats,
                        min_sample_s=PF_MIN_SAMPLE_S)
        visits = pf_mean_visits(part, scale, np.random.default_rng(run.seed + 3))
        case = f'exponential(method="permute_and_flip"), visits ~{visits:,.0f} on average'
        rows.append(Comparison.of(case, n, "candidates", *times, "- (Python)"))
    return rows


# -- report ---------------------------------------------------------------------------------


def results_table(rows: Sequence[Comparison], baseline: str, target: float | None = None) -> str:
    """Markdown table of one section's rows (with a target column when ``target`` is set)."""
    after = [("synth time / baseline time", lambda r: f"{r.factor:.2f}x"),
             ("same, best samples", lambda r: f"{r.best_factor:.2f}x"),
             ("synth CPU / wall", lambda r: f"{r.synth_cpu:.2f}")]
    if target is not None:
        after.append((f"^<= {target:g}x?", lambda r: "yes" if r.factor <= target else "no"))
    return comparison_table(rows, baseline, after, before=[("@numba threads", lambda r: r.threads)])


def targets_note(laplace: Sequence[Comparison]) -> str:
    """The discrete Laplace target and whether this run met it (medians)."""
    default = [r for r in laplace if r.threads == DEFAULT]
    single = [r for r in laplace if r.threads != DEFAULT]

    def listing(rows: Sequence[Comparison]) -> str:
        return "; ".join(f"{r.case}, n = {r.work:,}: {r.factor:.2f}x (best {r.best_factor:.2f}x)"
                         for r in rows)

    lines = [
        "## Target (judged on the medians)",
        "",
        f"- Exact discrete sampling no slower than {LAPLACE_TARGET:g}x the unsafe continuous baseline "
        f"(`discrete_laplace_noise` time / `rng.laplace` time <= {LAPLACE_TARGET:g}), with Numba's default "
        f"{DEFAULT_THREADS} threads: {met(all(r.factor <= LAPLACE_TARGET for r in default))} "
        f"(worst {max(r.factor for r in default):.2f}x). {listing(default)}.",
    ]
    if single:
        pairs = [(r1, next(r for r in default if r.case == r1.case and r.work == r1.work)) for r1 in single]
        lines += [
            f"- The same with one Numba thread (for reference, not the target): "
            f"{met(all(r.factor <= LAPLACE_TARGET for r in single))} "
            f"(worst {max(r.factor for r in single):.2f}x). {listing(single)}.",
            f"- Speed-up of the parallel blocks ({DEFAULT_THREADS} threads over 1, synth medians): "
            + "; ".join(f"{rd.case}, n = {rd.work:,}: {r1.synth_s / rd.synth_s:.2f}x (CPU / wall "
                        f"{rd.synth_cpu:.2f})" for r1, rd in pairs) + ".",
        ]
        busy = 1 + 0.5 * (DEFAULT_THREADS - 1)
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


def render(run: Session, calls, laplace, laplace_extra, gaussian, em) -> str:
    """The full markdown report."""
    s_eps, t_eps = laplace_ratio(EPSILONS[0])
    try:
        layer = numba.threading_layer()
    except ValueError:  # no parallel kernel has run yet
        layer = "not initialised"
    threads = (f"\n- numba threads: {DEFAULT_THREADS} (numba.get_num_threads() at start; NUMBA_NUM_THREADS "
               f"{os.environ.get('NUMBA_NUM_THREADS', 'unset')}), threading layer: {layer}")
    return document(
        run.header("synth privacy mechanisms: benchmark results", (np, numba),
                    f"; seed {run.seed}, every draw from an explicit `np.random.default_rng`",
                    machine_extra=threads,
                    batching_extra=f", {PF_MIN_SAMPLE_S * 1e3:.0f} ms for permute-and-flip"),
        "**synth time / baseline time** on the medians: lower is better; 1.00x is the baseline's "
        "speed, 3.00x means synth takes three times as long. The column after it is the same factor on "
        "each side's fastest sample, a check against noise. **synth CPU / wall** is the process's CPU "
        "time over wall time during the synth samples (median): about 1.00 when one core did the "
        f"work, up to {DEFAULT_THREADS} when all of Numba's threads ran at once; well below "
        f"{DEFAULT_THREADS} on a default-thread row means the threads did not get their cores "
        "(other load on the machine, or too few blocks).",
        "## First calls (JIT)",
        "First call through the library on a small input (a Numba cache load when the on-disk cache is "
        "valid, else a compile), and a from-scratch compile of the same kernel with caching off (the "
        "kernels it calls are already compiled by then). The very first call also pays Numba's one-off "
        "start-up; the first parallel call also starts the thread pool. Not in any figure below.",
        first_call_table(calls),
        "## 1. Discrete Laplace noise (sensitivity 1)",
        "synth: `synth.privacy.mechanisms.discrete_laplace_noise(n, eps, 1, rng)` (exact, integer-only); "
        "baseline: `rng.laplace(0, 1/eps, n)` (NumPy Generator, floating point: unsafe to release). "
        "The rows with 1 thread set `numba.set_num_threads(1)` (outside the timed region) and share "
        "the baseline samples of their default-thread row. "
        f"`s/t` is `laplace_ratio(eps)`: eps = {EPSILONS[0]:g} is exactly {s_eps}/{t_eps}; the others "
        "are rounded down to a multiple of 2^-40, so their denominator is 2^40 and, like eps = 1, they "
        "take the kernel's power-of-two path (`bernoulli_exp_pow2`). Checked outside the timings: the "
        "sample mean and variance match the distribution (within 6 standard errors), and the same seed "
        "gives identical draws with 1 thread and with the default threads.",
        results_table(laplace, "NumPy laplace", LAPLACE_TARGET),
        "Informational, not part of the target: the kernel's general path (a denominator that is not a "
        "power of two: exact rejection sampling of u in [0, t) and the general Bernoulli(exp(-u/t))), called "
        "through the private `synth.privacy.mechanisms.discrete._laplace_draws`. "
        "`discrete_laplace_noise` never takes it; `discrete_gaussian_noise` does when "
        "floor(sqrt(sigma2)) + 1 is not a power of two.",
        results_table(laplace_extra, "NumPy laplace"),
        "## 2. Discrete Gaussian noise (informational)",
        f"synth: `discrete_gaussian_noise(n, {SIGMA2:g}, rng)` (CKS Algorithm 3 in the Numba kernel: "
        "discrete Laplace candidates and an exact integer acceptance, in parallel blocks); baseline: "
        f"`rng.normal(0, sqrt({SIGMA2:g}), n)`. Checked: sample mean and variance near 0 and sigma2.",
        results_table(gaussian, "NumPy normal"),
        "## 3. Exponential mechanism (candidates/s)",
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
        results_table(em, "softmax"),
        targets_note(laplace),
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run every benchmark, print the report and write its RESULTS.md section."""
    run = session(__doc__, "smaller sizes and 3 repeats (a smoke run)", argv)
    calls = bench_first_calls(run.seed)
    laplace, laplace_extra = bench_laplace(run)
    gaussian, em = bench_gaussian(run), bench_exponential(run)
    run.publish(SECTION, render(run, calls, laplace, laplace_extra, gaussian, em))
    return 0


if __name__ == "__main__":
    sys.exit(main())
