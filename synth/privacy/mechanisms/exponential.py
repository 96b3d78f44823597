"""The exponential mechanism: pick a candidate with probability proportional to
exp(epsilon * score / (2 * sensitivity)).

Two samplers with the same privacy:

* ``"gumbel"`` (Gumbel-max): argmax of ``epsilon * score / (2 sensitivity) + Gumbel noise``,
  in Numba, streaming (``StreamingExponential``) over any number of candidates without
  storing them. Its documented failure mode: the Gumbel noise and the scaled scores are
  floats, so the selection probabilities are those of the exact mechanism up to rounding
  (relative error around 1e-15 in the scaled scores); only an index is released, never a
  noisy float, so the low-bit attacks on floating-point noise have nothing to read.
* ``"permute_and_flip"`` (McKenna and Sheldon 2020): visit candidates in random order and
  stop at one with probability exp(epsilon (score - best) / (2 sensitivity)), drawn exactly
  in rational arithmetic. Same epsilon, never worse expected score; Python speed (use it
  for up to tens of thousands of candidates).

Scores of ``-inf`` exclude a candidate. Scores are shifted by their maximum before scaling,
so huge score ranges cannot overflow.
"""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from synth import _kernels
from synth.privacy.mechanisms._exact import bernoulli_exp
from synth.privacy.rng import kernel_state, make_rng
from synth.privacy.validation import check_epsilon, check_sensitivity

if TYPE_CHECKING:
    from synth.privacy.accounting import Accountant

__all__ = ["exponential", "StreamingExponential", "METHODS"]

METHODS = ("gumbel", "permute_and_flip")


def _check_scores(scores) -> np.ndarray:
    values = np.asarray(scores, dtype=np.float64)
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"scores must be a non-empty 1-D array, got shape {values.shape}")
    bad = np.isnan(values) | (values == np.inf)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"scores[{i}] ({float(values[i])!r}) must be finite or -inf (excluded)")
    return values


def exponential(
    scores,
    epsilon: float,
    sensitivity: float,
    rng: np.random.Generator | int | None = None,
    method: str = "gumbel",
    *,
    accountant: Accountant | None = None,
    note: str = "",
) -> int:
    """The index of one candidate, chosen epsilon-DP by the exponential mechanism.

    ``sensitivity`` is how much any score can change between neighbouring datasets.
    """
    values = _check_scores(scores)
    epsilon = check_epsilon(epsilon)
    sensitivity = check_sensitivity(sensitivity)
    if method not in METHODS:
        raise ValueError(f"method ({method!r}) must be one of: {', '.join(METHODS)}")
    finite = values > -np.inf
    if not finite.any():
        raise ValueError("every score is -inf: no candidate to choose")
    if accountant is not None:
        accountant.check(epsilon)
    generator = make_rng(rng)
    best = values[finite].max()
    if method == "gumbel":
        chooser = StreamingExponential(epsilon, sensitivity, generator)
        with np.errstate(over="ignore"):  # a gap past the float range is -inf: weight 0
            chooser.feed(values - best)
        choice = chooser._best_index
    else:
        choice = _permute_and_flip(values, best, epsilon, sensitivity, generator)
    if accountant is not None:
        accountant.spend(epsilon, mechanism=f"exponential ({method})", note=note)
    return int(choice)


def _permute_and_flip(values, best, epsilon, sensitivity, rng) -> int:
    scale = Fraction(epsilon) / (2 * Fraction(sensitivity))
    top = Fraction(float(best))
    for i in rng.permutation(np.flatnonzero(values > -np.inf)):
        gamma = scale * (top - Fraction(float(values[i])))
        if bernoulli_exp(gamma, rng):
            return int(i)
    raise AssertionError("unreachable: the best candidate is always accepted")  # pragma: no cover


class StreamingExponential:
    """Gumbel-max selection over candidates fed in chunks, never all held at once.

    Feed every candidate's score (in any number of chunks, in a fixed order), then call
    ``choose()``. Equivalent to ``exponential(all_scores, ..., method="gumbel")``; Numba
    kernels can do the same with ``synth._kernels.gumbel`` on their own state.
    Keep ``|epsilon * score / (2 sensitivity)|`` below 1e300 (shift scores if needed).
    """

    def __init__(
        self,
        epsilon: float,
        sensitivity: float,
        rng: np.random.Generator | int | None = None,
        *,
        accountant: Accountant | None = None,
        note: str = "",
    ):
        self.epsilon = check_epsilon(epsilon)
        self.sensitivity = check_sensitivity(sensitivity)
        self.scale = self.epsilon / (2 * self.sensitivity)
        self._state = kernel_state(make_rng(rng))
        self._accountant = accountant
        self._note = note
        if accountant is not None:
            accountant.check(self.epsilon)
        self._best_key = -np.inf
        self._best_index = -1
        self._seen = 0
        self._chosen = False

    @property
    def candidates_seen(self) -> int:
        return self._seen

    @property
    def leader(self) -> int:
        """Index of the current leader (-1 before any finite score); only ``choose()`` releases it.

        Lets a caller keep the leading candidate's data without storing every candidate.
        """
        return self._best_index

    def feed(self, scores) -> None:
        """Add the next chunk of candidates (their indices continue from the last chunk)."""
        if self._chosen:
            raise RuntimeError("choose() was called: start a new StreamingExponential")
        values = _check_scores(scores)
        with np.errstate(over="ignore"):
            scaled = self.scale * values[values > -np.inf]
        if scaled.size and not np.isfinite(scaled).all():
            raise ValueError("scale * score overflows: shift the scores so they stay below 1e300")
        self._best_key, self._best_index = _kernels.gumbel_argmax(
            values, self.scale, self._state, self._best_key, self._best_index, self._seen
        )
        self._seen += values.size

    def choose(self) -> int:
        """The chosen index (charged to the accountant, if any, now)."""
        if self._best_index < 0:
            raise ValueError("no candidate with a finite score was fed")
        if not self._chosen and self._accountant is not None:
            self._accountant.spend(self.epsilon, mechanism="exponential (gumbel, streaming)", note=self._note)
        self._chosen = True
        return int(self._best_index)
