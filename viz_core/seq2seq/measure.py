"""Command line: the held-out accuracy of checkpoints at every input length (greedy decoding, exact sequences).

    python -m viz_core.seq2seq.measure                       # the five shipped checkpoints, 1000 inputs per length
    python -m viz_core.seq2seq.measure DIR_OR_ZIP --per-length 300 --seed 7

Calls viz_core.seq2seq.training.accuracy_by_length, as a benchmark would; prints one table per checkpoint.
"""
from __future__ import annotations

import argparse
import sys
import time

from .. import CHECKPOINTS_DIR
from ..errors import InputError
from ..runtime.threads import thread_budget
from .__main__ import length_table
from .training import accuracy_by_length, load_checkpoint, worst_length

SHIPPED = ("reverse", "copy", "date", "sort", "addition")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m viz_core.seq2seq.measure", description=__doc__.split("\n\n")[0])
    p.add_argument("checkpoints", nargs="*", help="checkpoint directories or .zip files (default: the shipped ones)")
    p.add_argument("--per-length", type=int, default=1000, help="held-out inputs of every length (default 1000)")
    p.add_argument("--seed", type=int, default=12345, help="seed of the held-out draw (default 12345)")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    paths = args.checkpoints or [str(CHECKPOINTS_DIR / name) for name in SHIPPED]
    print(f"held-out exact-sequence accuracy per input length (greedy, {args.per_length} inputs per length, "
          f"seed {args.seed})")
    for path in paths:
        try:
            model = load_checkpoint(path)
        except InputError as exc:
            print(f"error: {path}: {exc}", file=sys.stderr)
            return 2
        start = time.perf_counter()
        with thread_budget(1):
            by_length = accuracy_by_length(model, n_per_length=args.per_length, seed=args.seed)
        n, worst = worst_length(by_length)
        print(f"\n{model.task.name} ({path}): worst length {n}: {worst:.4f}, mean over lengths "
              f"{sum(by_length.values()) / len(by_length):.4f}  ({time.perf_counter() - start:.1f} s)")
        print(length_table(by_length))
    return 0


if __name__ == "__main__":
    sys.exit(main())
