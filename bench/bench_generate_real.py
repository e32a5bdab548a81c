"""Generation on the packaged real decoders (Gemma 3 270M, SmolLM2 135M): tokens per second with the KV cache (the
page's path) and without it (full recomputation each step), and the KV-cache bytes of the model's real shape.

    python bench/bench_generate_real.py [--models gemma3-270m smollm2-135m] [--threads 1 2] [--n-new 40]
                                        [--repeats 3] [--no-recompute]

For each model and thread budget (viz_core.runtime.threads.thread_budget), one warm-up generation, then the best of
--repeats of viz_core.pretrained.generate.generate_real on an English and a Chinese prompt with the page's default
settings (T 0.8, top-p 0.95, seed 0, --n-new tokens, no early stop counted: the rate is steps / seconds of the steps,
the model's first load not included). Goals: >= 10 tokens/s SmolLM2, >= 5 tokens/s Gemma, 40 new tokens in
about 2-4 s on Gemma. Run it on an otherwise idle machine: a busy 2-core one halves the figures.
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from viz_core.pretrained import load_model, packaged  # noqa: E402
from viz_core.pretrained.generate import RealGenSettings, generate_real, kv_shape_of  # noqa: E402
from viz_core.runtime.threads import thread_budget  # noqa: E402

PROMPTS = ("Once upon a time, a little robot", "从前有一座山，山里有一座庙，")


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=[d.id for d in packaged.DECODERS])
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--n-new", type=int, default=40)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--no-recompute", action="store_true", help="skip the run without the cache")
    return p.parse_args()


def best_rate(m, prompt: str, settings: RealGenSettings, use_cache: bool, repeats: int):
    """(best tokens/s, its seconds, steps) over repeats."""
    best = None
    for _ in range(repeats):
        trace = generate_real(m, prompt, settings, use_cache=use_cache)
        if best is None or trace.tokens_per_second > best.tokens_per_second:
            best = trace
    return best.tokens_per_second, best.seconds, len(best.steps)


def kv_lines(m, tokens: int) -> None:
    shape = kv_shape_of(m.model.config)
    print(f"  KV cache: L={shape.n_layers} H={shape.n_heads} H_kv={shape.n_kv_heads} ({shape.variant}) "
          f"d_head={shape.head_dim}: {shape.bytes_per_token():,} B/token in float32 "
          f"(MHA of the same size: {shape.mha_bytes_per_token():,}, x{shape.n_heads // shape.n_kv_heads}); "
          f"{tokens} tokens: {shape.cache_bytes(tokens) / 2**20:.2f} MiB")


def bench_model(model_id: str, args: argparse.Namespace) -> None:
    d = packaged.by_id(model_id)
    if d is None or not packaged.installed(d):
        print(f"{model_id}: not installed, skipped")
        return
    t0 = time.perf_counter()
    m = load_model(model_id)
    print(f"{d.title}: loaded in {time.perf_counter() - t0:.1f} s")
    settings = replace(RealGenSettings(), n_new=args.n_new)
    for threads in args.threads:
        with thread_budget(threads):
            generate_real(m, PROMPTS[0], replace(settings, n_new=4))  # warm-up
            for prompt in PROMPTS:
                rate, seconds, steps = best_rate(m, prompt, settings, True, args.repeats)
                line = f"  threads={threads} cache    {steps:3d} tokens in {seconds:5.2f} s = {rate:5.1f} tokens/s"
                if not args.no_recompute:
                    slow, s_seconds, s_steps = best_rate(m, prompt, settings, False, 1)
                    line += f" | recomputed {s_steps:3d} in {s_seconds:5.2f} s = {slow:5.1f} tokens/s"
                print(line + f"  ({prompt[:12]}...)")
    kv_lines(m, 96 + args.n_new)


def main() -> None:
    args = parse_args()
    for model_id in args.models:
        bench_model(model_id, args)


if __name__ == "__main__":
    main()
