"""Rounded numbers that still add up: shown parts of a whole must sum to the shown whole ("19 % + 15 % = 35 %" is a
rounding artefact a reader cannot tell from an error)."""
from __future__ import annotations

import math
from collections.abc import Sequence


def parts_that_add_up(parts: Sequence[float], decimals: int = 0) -> tuple[list[float], float]:
    """(rounded parts, rounded total) with sum(rounded parts) == rounded total, each part within one last-digit unit
    of its exact value: the largest-remainder method (Hamilton's apportionment). The total is the exact sum rounded
    half up; the units it leaves over go to the parts with the largest remainders (ties: the earlier part)."""
    unit = 10.0 ** -decimals
    scaled = [p / unit for p in parts]
    total = math.floor(sum(scaled) + 0.5)
    floors = [math.floor(s) for s in scaled]
    left = total - sum(floors)
    order = sorted(range(len(scaled)), key=lambda i: (-(scaled[i] - floors[i]), i))
    for i in order[:max(0, left)]:
        floors[i] += 1
    return [round(f * unit, decimals) for f in floors], round(total * unit, decimals)
