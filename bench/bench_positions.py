"""Positions page: how long a rerun takes after a slider move, and what the core computations cost.

    python bench/bench_positions.py            # prints figures, no pass/fail

A "rerun" is one AppTest script run of the page after a widget change (the work a Streamlit server does before it
sends the page to the browser; the browser's own drawing time is not included). "new" = values not seen before
(cache miss), "again" = a value seen before (cache hit). Timings on a shared machine are noisy: take the median.
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conftest import run_page  # noqa: E402
from viz_core.lessons import positional as P  # noqa: E402

# part -> (widget kind, key, values to move through)
MOVES = {
    "heatmap": ("slider", "positions.d_model", [96, 160, 256, 512, 1024]),
    "similarity": ("slider", "positions.max_len", [100, 200, 400, 800, 1024]),
    "relative": ("slider", "positions.shift", [2, 8, 16, 32, 60]),
    "example": ("slider", "positions.p1", [1, 7, 20, 100, 300]),
    "scale": ("selectbox", "positions.sd", [16, 64, 128, 256, 1024]),
    "learned": ("slider", "positions.n_pos", [32, 64, 256, 384, 512]),
    "order": ("slider", "positions.od", [4, 12, 16, 32, 64]),
}


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def bench_reruns() -> None:
    print("page rerun after a widget move (seconds): median new / max new / median again")
    for part, (kind, key, values) in MOVES.items():
        at = run_page("positions", {"lang": "en", "part": part})  # first run: imports, model load, warm caches
        widget = getattr(at, kind)(key=key)
        new = [_timed(lambda v=v: getattr(at, kind)(key=key).set_value(v).run()) for v in values]
        again = [_timed(lambda v=v: getattr(at, kind)(key=key).set_value(v).run()) for v in values]
        assert not at.exception, [e.value for e in at.exception]
        del widget
        print(f"  {part:<11} {key:<20} {statistics.median(new):6.3f} {max(new):6.3f} {statistics.median(again):6.3f}")


def bench_core() -> None:
    print("core computations (seconds, median of 5)")
    cases = {
        "sinusoidal_encoding(1024, 1024)": lambda: P.sinusoidal_encoding(1024, 1024),
        "similarity(200 positions, d 1024)": lambda: P.similarity(P.sinusoidal_encoding(200, 1024)),
        "shift_by_rotation(1024 x 1024, k=60)": lambda: P.shift_by_rotation(P.sinusoidal_encoding(1024, 1024), 60),
        "norm_study(2..1024)": lambda: P.norm_study((2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)),
        "nearest_token_accuracy(1024)": lambda: P.nearest_token_accuracy(1024, True),
        "cosine + toeplitz_deviation(512 x 384)": lambda: P.toeplitz_deviation(
            P.cosine_similarity(P.sinusoidal_encoding(512, 384))),
    }
    for name, fn in cases.items():
        print(f"  {name:<42} {statistics.median(_timed(fn) for _ in range(5)):.4f}")


if __name__ == "__main__":
    bench_core()
    bench_reruns()
