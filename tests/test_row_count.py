"""The row count n: the noise of a bought count, from public quantities only."""

import math

import numpy as np
import pytest

from synth.privacy.accounting import Accountant
from synth.privacy.mechanisms import discrete_gaussian_noise, discrete_laplace_noise
from synth.privacy.row_count import count_noise_sd, ledger_count_noise_sd, row_count


@pytest.mark.parametrize("epsilon", [2.0, 0.5, 0.05])
def test_the_laplace_count_noise_sd_is_the_sampled_one(epsilon):
    draws = discrete_laplace_noise(200_000, epsilon, rng=7)
    assert count_noise_sd(epsilon=epsilon) == pytest.approx(draws.std(), rel=0.02)


def test_the_gaussian_count_noise_sd_is_the_sampled_one():
    draws = discrete_gaussian_noise(200_000, 1 / (2 * 0.001), rng=7)
    assert count_noise_sd(rho=0.001) == pytest.approx(draws.std(), rel=0.02)


def test_a_tiny_epsilon_keeps_its_precision():
    """epsilon 5e-8 (--epsilon 1e-6 at the default 5% share): sqrt(2)/epsilon, not 1/(1 - e^-eps) rounded."""
    assert count_noise_sd(epsilon=5e-8) == pytest.approx(math.sqrt(2) / 5e-8, rel=1e-6)


def test_the_ledger_gives_the_bought_counts_noise_and_none_for_a_public_n():
    generator = np.random.default_rng(1)
    accountant = Accountant(1.0)
    count = row_count(300, None, accountant, generator, count_share=0.1)
    assert ledger_count_noise_sd(accountant.ledger()) == count.noise_sd == count_noise_sd(epsilon=0.1)
    public = Accountant(1.0)
    assert row_count(300, 300, public, generator).noise_sd == 0.0
    assert ledger_count_noise_sd(public.ledger()) is None
    zcdp = Accountant(1.0, 1e-9)
    row_count(300, None, zcdp, generator, rho=0.002)
    assert ledger_count_noise_sd(zcdp.ledger()) == pytest.approx(math.sqrt(1 / 0.004))
