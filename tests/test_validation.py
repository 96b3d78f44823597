import math

import numpy as np
import pytest

from synth.privacy.validation import (
    check_delta, check_epsilon, check_positive_int, check_probability, check_sensitivity,
)


@pytest.mark.parametrize("value", [1, 0.5, np.float64(2.0), np.int64(3)])
def test_good_epsilons_pass_as_floats(value):
    assert check_epsilon(value) == float(value)
    assert isinstance(check_epsilon(value), float)


@pytest.mark.parametrize("value, message", [(0, r"epsilon \(0\) must be finite and > 0"), (-1.0, r"epsilon \(-1.0\) must be"),
                                            (math.inf, r"epsilon \(inf\)"), (math.nan, r"epsilon \(nan\)")])
def test_bad_epsilon_values(value, message):
    with pytest.raises(ValueError, match=message):
        check_epsilon(value)


@pytest.mark.parametrize("value", ["1", None, True, [1.0], 1 + 2j])
def test_wrong_types_raise_type_error_naming_the_parameter(value):
    with pytest.raises(TypeError, match=r"epsilon \(.*\) must be a real number"):
        check_epsilon(value)
    with pytest.raises(TypeError, match=r"sensitivity"):
        check_sensitivity(value)


def test_delta_and_probability_ranges():
    assert check_delta(0) == 0.0
    with pytest.raises(ValueError, match=r"delta \(1\) must be in \[0, 1\)"):
        check_delta(1)
    with pytest.raises(ValueError, match=r"beta \(0\) must be in \(0, 1\)"):
        check_probability(0, "beta")
    with pytest.raises(ValueError, match=r"sensitivity \(-2\) must be finite and > 0"):
        check_sensitivity(-2)


def test_positive_int():
    assert check_positive_int(np.int64(3), "rounds") == 3
    with pytest.raises(TypeError, match=r"rounds \(2.0\) must be an integer"):
        check_positive_int(2.0, "rounds")
    with pytest.raises(ValueError, match=r"rounds \(0\) must be >= 1"):
        check_positive_int(0, "rounds")
