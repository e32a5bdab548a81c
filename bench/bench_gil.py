"""A model's forward pass beside other Python threads: what the GIL's switch interval costs it. Prints a table;
asserts nothing.

  python bench/bench_gil.py                      # the packaged Gemma 3 270M (converted), 12 passes per cell
  python bench/bench_gil.py --model smollm2-135m --passes 20

A forward pass gives the GIL up at every torch operation and takes it back before the next one. On a server, the
other sessions' scripts run Python meanwhile; each take-back can then wait out a whole switch interval (Python's
default: 5 ms). viz_core.runtime.priority.foreground(), which every visitor's model computation runs inside, shortens
the interval to ATTN_FOREGROUND_SWITCH_S (1 ms) while one runs. Per cell: the median wall time of a pass on a
sentence of about 24 tokens, with torch's threads as a lone visitor's computation gets them (one per core), alone
and beside 1 and 3 threads that run Python half of every 20 ms (a script building figures) and one training-like
thread (a small network's steps, at niceness 10 as jobs run), once with the interval left at 5 ms and once inside
foreground(). The rows are interleaved so that the machine's drift falls on both columns alike.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from viz_core import pretrained  # noqa: E402
from viz_core.runtime import priority  # noqa: E402
from viz_core.runtime.jobs import lower_priority  # noqa: E402
from viz_core.runtime.threads import thread_budget  # noqa: E402

TEXT = "the quick brown fox jumps over the lazy dog while students read notes about attention in the library"


def python_work(stop: threading.Event, duty: float = 0.5, period: float = 0.02) -> None:
    """Pure Python for `duty` of every `period` seconds, asleep for the rest."""
    while not stop.is_set():
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < duty * period:
            sum(i * i for i in range(200))
        time.sleep((1 - duty) * period)


def training_work(stop: threading.Event) -> None:
    """A small network's training steps on one thread, at a job's niceness (many tiny torch operations)."""
    lower_priority()
    net = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(8)])
    opt = torch.optim.Adam(net.parameters())
    x = torch.randn(32, 64)
    with thread_budget(1):
        while not stop.is_set():
            loss = net(x).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()


def passes(m, n: int, foreground: bool) -> float:
    """Median seconds of n forward passes, each on a new sentence."""
    times = []
    for i in range(n):
        with thread_budget(os.cpu_count() or 1), (priority.foreground() if foreground else contextlib.nullcontext()):
            t0 = time.perf_counter()
            pretrained.attention_for(m, f"{TEXT} {i} {foreground}")
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


SCENES = {"alone": (0, False), "1 Python thread": (1, False), "3 Python threads": (3, False),
          "2 Python threads + a training": (2, True)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="gemma3-270m", help="a model id (default: the packaged Gemma 3 270M)")
    p.add_argument("--passes", type=int, default=12, help="passes per cell")
    p.add_argument("--rounds", type=int, default=2, help="each scene this many times, interleaved")
    args = p.parse_args()
    m = pretrained.load_model(args.model)
    for _ in range(3):
        pretrained.attention_for(m, TEXT)
    got: dict[tuple[str, bool], list[float]] = {}
    for r in range(args.rounds):
        for scene, (n_python, training) in SCENES.items():
            for fg in ((False, True) if r % 2 == 0 else (True, False)):
                stop = threading.Event()
                workers = [threading.Thread(target=python_work, args=(stop,), daemon=True) for _ in range(n_python)]
                if training:
                    workers.append(threading.Thread(target=training_work, args=(stop,), daemon=True))
                for w in workers:
                    w.start()
                try:
                    got.setdefault((scene, fg), []).append(passes(m, args.passes, fg))
                finally:
                    stop.set()
                    for w in workers:
                        w.join()
    print(f"\n{args.model}, {os.cpu_count()} cores, a pass on about 24 tokens (median of {args.passes} passes, "
          f"then of {args.rounds} rounds)\n")
    print("| beside the pass | switch interval 5 ms | inside foreground() "
          f"({priority.FOREGROUND_SWITCH_S * 1000:g} ms) |")
    print("|---|---|---|")
    for scene in SCENES:
        a, b = (statistics.median(got[(scene, fg)]) for fg in (False, True))
        print(f"| {scene} | {a:.3f} s | {b:.3f} s |")


if __name__ == "__main__":
    main()
