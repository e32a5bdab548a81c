"""Shown parts add up to the shown whole (viz_core.rounding)."""
import numpy as np
import pytest

from viz_core.rounding import parts_that_add_up


def test_the_tour_example_adds_up():
    parts, total = parts_that_add_up([19.4, 15.45])  # naive rounding: 19 + 15 = 35 (34.85 -> 35)
    assert total == 35 and sum(parts) == 35 and parts == [19, 16]  # the larger remainder (0.45) gets the unit


@pytest.mark.parametrize("decimals", [0, 1, 2])
def test_random_parts_add_up_and_stay_within_one_unit(decimals):
    rng = np.random.default_rng(0)
    for _ in range(500):
        exact = rng.uniform(0, 60, size=rng.integers(2, 6))
        parts, total = parts_that_add_up(exact, decimals)
        assert round(sum(parts), decimals) == total
        assert abs(total - exact.sum()) <= 0.5 * 10 ** -decimals + 1e-9
        assert all(abs(p - e) < 10 ** -decimals + 1e-9 for p, e in zip(parts, exact))
