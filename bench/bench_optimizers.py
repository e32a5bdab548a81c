"""Benchmark of the optimizer race: five optimizers x 500 steps (target < 0.2 s), the fair race's grid search, and
the animated figure. Prints figures (median of several runs); no pass / fail.

    python bench/bench_optimizers.py [--steps 500] [--repeat 7]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from viz_core.lessons import optimizers as opt  # noqa: E402
from viz_core.lessons import surfaces  # noqa: E402
from app_pages._ui import chart  # noqa: E402
from app_pages._ui.figures import spec  # noqa: E402
from viz_core.plots import optimizers as plots  # noqa: E402

CLASSES = {"sgd": opt.SGD, "momentum": opt.Momentum, "adagrad": opt.AdaGrad, "rmsprop": opt.RMSProp,
           "adam": opt.Adam}


def timed(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def race(track: str, steps: int, fair: bool = False, names=opt.CLASSIC):
    s = surfaces.SURFACES[track]
    cfg = opt.RaceConfig(track, s.start, steps, tuple(opt.RacerSpec(n, s.lr) for n in names), fair=fair)
    return opt.race(cfg)


def classes_on_tensors(track: str, steps: int) -> None:
    """The public torch-tensor classes on a (2,) tensor with the analytic gradient (no autograd)."""
    s = surfaces.SURFACES[track]
    for cls in CLASSES.values():
        p = torch.tensor(s.start, dtype=torch.float64)
        o = cls([p], lr=s.lr)
        for _ in range(steps):
            gx, gy = s.grad(float(p[0]), float(p[1]))
            p.grad = torch.tensor([gx, gy], dtype=torch.float64)
            o.step()


def figure(track: str, steps: int):
    s = surfaces.SURFACES[track]
    result = race(track, steps)
    labels = {k: k for k in ("x", "y", "loss", "log_level", "minimum", "start", "click", "play", "pause", "step",
                             "data", "fit_x", "fit_y", "contour_title", "fit_title")}
    fig = plots.race_figure(surfaces.surface_grid(s, 300), surfaces.surface_grid(s, 41), result.trajectories,
                            {n: n for n in opt.CLASSIC}, labels, x_range=s.x_range, y_range=s.y_range,
                            minima=s.minima, start=s.start, fit=None)
    return fig


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    n, r = args.steps, args.repeat
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, numpy {np.__version__}, {torch.get_num_threads()} torch thread(s)")
    print(f"median of {r} runs, {n} steps each\n")
    for track in ("bowl", "rosenbrock", "rastrigin", "line_fit"):
        print(f"race, 5 classic optimizers, {track:<10}: {timed(lambda: race(track, n), r) * 1e3:7.1f} ms")
    print(f"race, 5 classic + AdamW + NAdam     : "
          f"{timed(lambda: race('rosenbrock', n, names=opt.CLASSIC + opt.EXTRAS), r) * 1e3:7.1f} ms")
    tensors = timed(lambda: classes_on_tensors("rosenbrock", n), r)
    print(f"public classes on tensors, 5 x {n}  : {tensors * 1e3:7.1f} ms")
    print(f"fair race (grid of {len(opt.LR_GRID)} lrs), 5 classic: "
          f"{timed(lambda: race('rosenbrock', n, fair=True), max(1, r // 2)) * 1e3:7.1f} ms")
    print(f"fair race, 5 classic + 2 torch      : "
          f"{timed(lambda: race('rosenbrock', n, fair=True, names=opt.CLASSIC + opt.EXTRAS), 1) * 1e3:7.1f} ms")
    fig_s = timed(lambda: figure("bowl", n), max(1, r // 2))
    fig = figure("bowl", n)
    size, sent = len(fig.to_json()), len(chart.to_bytes(spec(fig)))
    print(f"animated race figure (41 frames)    : {fig_s * 1e3:7.1f} ms, JSON {size / 1e3:.0f} kB, "
          f"{sent / 1e3:.0f} kB sent to the browser (the frames are made there)")


if __name__ == "__main__":
    main()
