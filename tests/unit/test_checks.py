"""checks.py: the one check of a count, as every layer's callers see it."""

import re

import pytest

from checks import finite_number, int_at_least, positive_int


def test_a_positive_int_is_returned_as_it_is():
    assert positive_int("n", 1) == 1 and int_at_least("vocab_size", 256, 256) == 256


@pytest.mark.parametrize("value", [0, -3, True, 2.0, "2", None])
def test_anything_else_is_a_value_error_that_names_it(value):
    with pytest.raises(ValueError, match=rf"^n .*positive integer.*{re.escape(repr(value))}"):
        positive_int("n", value)


def test_a_higher_minimum_and_a_note_are_said():
    note = (
        "the 256 byte tokens come first"  # said as given, with the name, the minimum and the value
    )
    with pytest.raises(ValueError, match=rf"^bpe vocab_size .*>= 256.*{re.escape(note)}.*\b255\b"):
        int_at_least("bpe vocab_size", 255, 256, note=note)


def test_positive_int_is_at_least_one_and_its_third_argument_is_the_note():
    with pytest.raises(ValueError, match=r"^n must be a positive integer \(or None\), got 0$"):
        positive_int("n", 0, "or None")


def test_did_you_mean_names_the_nearest_or_nothing():
    from checks import did_you_mean

    assert did_you_mean("lenght", ["length", "width"]) == "did you mean length?"
    assert did_you_mean("hook_patern", ["hook_pattern", "hook_pattern2", "zz"], n=2) == (
        "did you mean hook_pattern or hook_pattern2?"
    )
    assert did_you_mean("qqqq", ["length", "width"]) == ""


def test_a_finite_number_is_a_real_that_is_not_a_bool_nan_or_infinite():
    assert finite_number(3) and finite_number(0.25) and finite_number(-1e300)
    bad = [True, False, float("nan"), float("inf"), -float("inf"), "0.5", None, [0.5]]
    assert not any(finite_number(x) for x in bad)
