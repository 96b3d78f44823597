import math

import pytest

from synth.privacy.composition import advanced_epsilon, zcdp_delta, zcdp_epsilon, zcdp_epsilon_standard


def test_advanced_matches_the_homogeneous_theorem():
    k, eps, dp = 50, 0.1, 1e-6
    expected = math.sqrt(2 * k * math.log(1 / dp)) * eps + k * eps * (math.exp(eps) - 1)
    assert advanced_epsilon([eps] * k, dp) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("rho, delta", [(0.005, 1e-6), (0.5, 1e-6), (2.0, 1e-9), (10.0, 1e-3)])
def test_tight_zcdp_conversion_is_valid_and_never_worse(rho, delta):
    eps = zcdp_epsilon(rho, delta)
    assert eps <= zcdp_epsilon_standard(rho, delta)
    assert zcdp_delta(rho, eps) <= delta
    assert zcdp_delta(rho, eps * 0.999) > delta  # and it is (nearly) the smallest such epsilon


def test_zcdp_delta_matches_a_brute_force_minimum():
    rho, eps = 0.3, 3.0
    grid = [1 + i / 1000 for i in range(1, 40000)]
    brute = min(math.exp((a - 1) * (a * rho - eps)) * (1 - 1 / a) ** a / (a - 1) for a in grid)
    assert zcdp_delta(rho, eps) == pytest.approx(brute, rel=1e-4)
    assert zcdp_delta(rho, eps) <= brute * (1 + 1e-9)


def test_known_conversion_value():
    # rho = 0.5, delta = 1e-6: the standard bound is 5.7565; the tight one is smaller
    assert zcdp_epsilon_standard(0.5, 1e-6) == pytest.approx(5.756521769756932)
    assert 5.0 < zcdp_epsilon(0.5, 1e-6) < 5.3


@pytest.mark.parametrize("epsilon, delta", [(1.0, 1e-6), (0.3, 1e-9), (5.0, 1e-3)])
def test_rho_limit_inverts_the_conversion(epsilon, delta):
    from synth.privacy.composition import zcdp_rho_limit

    rho = zcdp_rho_limit(epsilon, delta)
    assert zcdp_epsilon(rho, delta) <= epsilon * (1 + 1e-9)
    assert zcdp_epsilon(rho * 1.001, delta) > epsilon
