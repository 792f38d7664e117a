"""make bench-quick's verdicts: a figure worse than its target fails the run."""

from __future__ import annotations

from tests.bench.quick import Target


def test_an_upper_bound_holds_up_to_its_limit():
    assert Target("Redis CPU per page (µs)", 30.0, 30.0, at_most=True).holds
    assert not Target("Redis CPU per page (µs)", 30.1, 30.0, at_most=True).holds


def test_a_lower_bound_holds_from_its_limit():
    assert Target("items/s", 100_000, 100_000, at_most=False).holds
    assert not Target("items/s", 99_999, 100_000, at_most=False).holds


def test_the_line_says_which_target_is_missed():
    line = Target("Redis commands per page", 17.5, 12.0, at_most=True).line()
    assert line.split()[0] == "MISS" and "≤ 12.0" in line and "17.5" in line
