"""A visitor's forward pass beside a training, with the training standing aside between its steps only and within
them (viz_core.runtime.step_aside). Prints a table; asserts nothing.

  python bench/bench_step_aside.py                    # the packaged Gemma 3 270M (converted), 4 rounds of 25 passes
  python bench/bench_step_aside.py --rounds 6 --python 0,1

Per cell: the wall time of a pass on a sentence of about 24 tokens, with torch's threads as a lone visitor's
computation gets them (one per core), inside priority.foreground() as every visitor's computation runs; beside it
the Train page's default run (the reverse task, one thread at a job's niceness, through the one training loop) and
0 or 1 threads running Python half of every 20 ms (another session's script). The passes come 0.05-0.25 s apart, so
that training steps run between them and a pass often starts while a step is under way. "between steps" is the
training loop with step_aside's budget set to 0 (a step under way runs to its end); "within steps" is the loop as
it is. The cells are interleaved round by round so that the machine's drift falls on both columns alike.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bench_gil import TEXT, python_work  # noqa: E402
from viz_core import pretrained  # noqa: E402
from viz_core.runtime import priority, training_loop  # noqa: E402
from viz_core.runtime.jobs import lower_priority  # noqa: E402
from viz_core.runtime.threads import thread_budget  # noqa: E402
from viz_core.seq2seq.tasks import make_task  # noqa: E402
from viz_core.seq2seq.training import TrainConfig, Trainer  # noqa: E402

WITHIN = training_loop.step_aside


def between_steps_only(budget_s: float, every_op: bool = False):
    return WITHIN(0.0, every_op)


def training(stop: threading.Event) -> None:
    """The Train page's default run as a job runs it (its own thread, niceness 10), until stopped."""
    lower_priority()
    trainer = Trainer(make_task("reverse"), train_cfg=TrainConfig(max_seconds=3600, target_accuracy=None))
    for _ in trainer.run():
        if stop.is_set():
            break


def passes(m, n: int, tag: str) -> list[float]:
    times = []
    for i in range(n):
        with thread_budget(os.cpu_count() or 1), priority.foreground():
            t0 = time.perf_counter()
            pretrained.attention_for(m, f"{TEXT} {tag} {i}")
            times.append(time.perf_counter() - t0)
        time.sleep(0.05 + 0.1 * (i % 3))  # the visitor reads; the training steps meanwhile
    return times


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="gemma3-270m", help="a model id (default: the packaged Gemma 3 270M)")
    p.add_argument("--passes", type=int, default=25, help="passes per cell and round")
    p.add_argument("--rounds", type=int, default=4, help="rounds, the two columns' order alternating")
    p.add_argument("--python", default="0,1", help="Python threads beside the pass, comma-separated")
    args = p.parse_args()
    m = pretrained.load_model(args.model)
    for _ in range(3):
        pretrained.attention_for(m, TEXT)
    n_python = [int(x) for x in args.python.split(",")]
    got: dict[tuple[int, str], list[float]] = {}
    for r in range(args.rounds):
        for n in n_python:
            for mode in (("within", "between") if r % 2 == 0 else ("between", "within")):
                training_loop.step_aside = WITHIN if mode == "within" else between_steps_only
                stop = threading.Event()
                workers = [threading.Thread(target=training, args=(stop,), daemon=True)]
                workers += [threading.Thread(target=python_work, args=(stop,), daemon=True) for _ in range(n)]
                for w in workers:
                    w.start()
                try:
                    time.sleep(1.5)  # the training is past its first snapshot
                    got.setdefault((n, mode), []).extend(passes(m, args.passes, f"{r}{mode}"))
                finally:
                    stop.set()
                    for w in workers:
                        w.join()
    training_loop.step_aside = WITHIN
    print(f"\n{args.model}, {os.cpu_count()} cores, a pass on about 24 tokens beside the reverse task's training "
          f"({args.rounds} x {args.passes} passes per cell)\n")
    print("| beside the pass | training stands aside between steps: median / p90 / max | within steps |")
    print("|---|---|---|")
    for n in n_python:
        cells = []
        for mode in ("between", "within"):
            v = sorted(got[(n, mode)])
            cells.append(f"{statistics.median(v):.3f} / {v[int(0.9 * (len(v) - 1))]:.3f} / {v[-1]:.3f} s")
        print(f"| the training + {n} Python thread{'s' if n != 1 else ''} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
