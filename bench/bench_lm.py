"""The decoder-only LM: time until an induction head forms, and the cost of one new token with and without the KV
cache at several lengths (MHA / GQA / MQA).

    python bench/bench_lm.py [--seeds 0 1 2] [--max-seconds 60] [--threads 1] [--lengths 16 64 128 256 511]
                             [--device cpu]

Part 1 trains the page's default induction run (2 layers x 4 heads, attention-only, d_model 64, batch 32, AdamW
1e-3, sequences of 64 random tokens in which a segment of 2..32 tokens occurs 2-3 times at random places) once per
seed and prints the training time and step of the phase change (the in-context loss 1 nat below the loss on
unpredictable tokens, viz_core.lm.induction.phase_change_step) and at which the best induction score first exceeds
0.5 (evaluations every 50 steps, on held-out x = s s with |s| = 4, 8, 15, 30), and the losses at the end.
Part 2 times one new token (best of --repeats) after `length` tokens for an untrained decoder (2 layers, 4 query
heads, d_model 64, MLP 256): without the cache the model reruns all length + 1 positions; with it, one position.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from viz_core.lm import DecoderLM, LMConfig  # noqa: E402
from viz_core.lm.generate import cache_difference, time_per_token  # noqa: E402
from viz_core.lm.induction import phase_change_step  # noqa: E402
from viz_core.lm.training import LMTrainConfig, LMTrainer  # noqa: E402


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--max-seconds", type=float, default=60.0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default=None, help="cpu or cuda (default: the best available)")
    p.add_argument("--lengths", type=int, nargs="+", default=[16, 64, 128, 256, 511])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--skip-training", action="store_true")
    return p.parse_args()


def time_to_induction(seed: int, max_seconds: float, threads: int, device) -> None:
    """Train until the budget ends; report when the induction score first passed 0.5."""
    cfg = LMTrainConfig(task="induction", max_seconds=max_seconds, seed=seed, threads=threads,
                        force_cpu=device == "cpu")
    trainer = LMTrainer(cfg, device=device)
    wall0, hit, phase = time.perf_counter(), None, None
    for m in trainer.run():
        now = (m.seconds, time.perf_counter() - wall0, m.step)
        if hit is None and m.evaluated and (m.induction or 0) > 0.5:
            hit = now
        if phase is None and m.evaluated and phase_change_step(trainer.history) is not None:
            phase = now
    last = [h for h in trainer.history if h.get("evaluated")][-1]
    told = lambda t: "never" if t is None else f"{t[0]:5.1f} s training ({t[1]:5.1f} s wall), step {t[2]}"  # noqa: E731
    print(f"seed {seed} on {trainer.device}: phase change after {told(phase)}; induction > 0.5 after {told(hit)}; "
          f"at the end ({trainer.step} steps) loss unpredictable {last['first_loss']:.2f}, in-context "
          f"{last['repeat_loss']:.2f}, induction {last['induction']:.2f}, previous-token {last['prev_token']:.2f}",
          flush=True)


def cache_timing(lengths: list[int], repeats: int) -> None:
    print(f"\nms per new token after T tokens (best of {repeats}); untrained 2-layer decoder, d_model 64, 4 heads")
    print(f"{'variant':8s} {'T':>5s} {'with cache':>11s} {'without':>9s} {'speed-up':>9s} {'max|dlogit|':>12s}")
    for name, kv in (("MHA", None), ("GQA-2", 2), ("MQA", 1)):
        torch.manual_seed(0)
        model = DecoderLM(LMConfig(vocab=128, d_ff=256, max_len=max(lengths) + 1, n_kv_heads=kv)).eval()
        diff = cache_difference(model, list(range(64)))
        with_cache = time_per_token(model, lengths, True, repeats)
        without = time_per_token(model, lengths, False, repeats)
        for n, a, b in zip(lengths, with_cache, without):
            print(f"{name:8s} {n:5d} {1000 * a:11.3f} {1000 * b:9.3f} {b / a:8.1f}x {diff:12.1e}")


def main() -> None:
    args = parse_args()
    torch.set_num_threads(max(1, args.threads))
    if not args.skip_training:
        for seed in args.seeds:
            time_to_induction(seed, args.max_seconds, args.threads, args.device)
    cache_timing(args.lengths, args.repeats)


if __name__ == "__main__":
    main()
