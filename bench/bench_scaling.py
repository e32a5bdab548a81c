"""Scaling page benchmark: cold cost of each computation, and the page rerun time after a slider move.

    python bench/bench_scaling.py            # prints figures; no pass/fail

Part A times the viz_core calls uncached (what the first visitor waits for, once per server).
Part B drives the page with AppTest (the whole script: app.py router + page) and times reruns after slider moves,
once the caches are warm: what every later slider move costs. AppTest adds its own overhead, so this is an upper
bound of the server-side work; the browser's drawing time is not included.
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from viz_core.lessons import scaling  # noqa: E402


def timed(fn, *args, repeat: int = 1, **kwargs) -> float:
    """Median wall time of fn(*args) in seconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn(*args, **kwargs)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def cold_computations() -> None:
    print("A. cold computations (uncached), median of 3 unless noted")
    row = "   {:48s}{:7.3f} s"
    print(row.format("dot_product_variance(4096)", timed(scaling.dot_product_variance, 4096, repeat=3)))
    print(row.format("variance_sweep(d_k = 1..4096, 10,000 samples)", timed(scaling.variance_sweep, repeat=3)))
    for n in (16, 128, 512):
        cfg = scaling.SaturationConfig(n_keys=n, n_rows=scaling.rows_for(n))
        label = f"saturation_sweep(N = {n}, {cfg.n_rows} rows x 13 d_k)"
        print(row.format(label, timed(scaling.saturation_sweep, cfg, repeat=3)))
    print(row.format("example_row(d_k = 4096, N = 512)", timed(scaling.example_row, 4096, 512, repeat=3)))
    for d_k in (16, 512, 1024):
        r = scaling.train_experiment(scaling.ExperimentConfig(d_k=d_k, steps=200))
        total = r.unscaled.seconds + r.scaled.seconds
        print(row.format(f"train_experiment(d_k = {d_k}, 200 steps x 2)", total),
              f"(truncated: {r.unscaled.truncated or r.scaled.truncated})")


def page_reruns() -> None:
    from tests.conftest import run_page
    print("B. page reruns after a slider move (AppTest, caches warm), median of the moves listed")
    cases = [
        ("dist", "select_slider", "scaling.dk", [4096, 16, 1024, 64, 256]),
        ("softmax", "select_slider", "scaling.dk", [4096, 16, 1024, 64, 256]),
        ("softmax", "select_slider", "scaling.temp", [0.5, 2.0, 1.0]),
        ("model", "slider", "scaling.head", [3, 7, 0]),
        ("model", "slider", "scaling.layer", [2, 5, 0]),
    ]
    for part, kind, key, values in cases:
        at = run_page("scaling", {"lang": "en", "part": part})
        for v in values:  # warm every cache the moves will hit
            getattr(at, kind)(key=key).set_value(v).run()
        times = []
        for v in values:
            start = time.perf_counter()
            getattr(at, kind)(key=key).set_value(v).run()
            times.append(time.perf_counter() - start)
        assert not at.exception, [e.value for e in at.exception]
        print(f"   part={part:8s} move {key:14s} median {statistics.median(times) * 1000:6.0f} ms, "
              f"max {max(times) * 1000:6.0f} ms")
    at = run_page("scaling", {"lang": "en", "part": "train", "exp_dk": "512", "exp_steps": "200"})
    at.button(key="scaling.train").click().run()
    times = []
    for v in (100, 200, 100, 200):
        start = time.perf_counter()
        at.select_slider(key="scaling.exp_steps").set_value(v).run()
        times.append(time.perf_counter() - start)
    print(f"   part=train    move exp_steps away and back     median {statistics.median(times) * 1000:6.0f} ms")


if __name__ == "__main__":
    print(f"torch threads: {torch.get_num_threads()}; CPU load (1 min): {open('/proc/loadavg').read().split()[0]}")
    cold_computations()
    page_reruns()
