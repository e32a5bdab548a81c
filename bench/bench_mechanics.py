"""Benchmark of the Mechanics page's computations; prints figures, asserts nothing.

    python bench/bench_mechanics.py [--quick]

1. dot-product vs additive (Bahdanau) scores + softmax + V, forward time and the size of the largest intermediate;
2. MHA / GQA / MQA forward time on the same input, and the KV cache of the preset shapes at 4096 tokens;
3. the uncached cost of what one page rerun computes (worked example, mask view, variant comparison).
Timings are medians of several runs on this machine's CPU; on a shared box they are noisy.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from viz_core.lessons import mechanics as mech  # noqa: E402
from viz_core.attention import AdditiveAttention, MultiHeadAttention, scaled_dot_product_attention  # noqa: E402
from viz_core.masks import causal_mask  # noqa: E402


def median_ms(fn, repeat: int = 7) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def bench_scores(ns, d_k: int = 64, d_h: int = 64) -> None:
    print(f"\n1. dot product vs additive attention, batch 1, d_k = {d_k}, d_h = {d_h} (ms, median)")
    print(f"{'N':>6} {'dot ms':>9} {'additive ms':>12} {'ratio':>7} {'dot interm.':>12} {'add interm.':>12}")
    add = AdditiveAttention(d_k, d_k, d_h).eval()
    for n in ns:
        q, k, v = torch.randn(n, d_k), torch.randn(n, d_k), torch.randn(n, d_k)
        with torch.inference_mode():
            t_dot = median_ms(lambda: scaled_dot_product_attention(q, k, v))
            t_add = median_ms(lambda: add(q, k, v), repeat=3)
        cost = mech.attention_cost(n, n, d_k, d_h)
        dot_mem, add_mem = (mech.format_bytes(4 * cost[k]["memory"]) for k in ("dot", "additive"))  # float32
        print(f"{n:>6} {t_dot:>9.3f} {t_add:>12.3f} {t_add / t_dot:>7.1f} {dot_mem:>12} {add_mem:>12}")


def bench_variants(n: int = 256, d_model: int = 512, heads: int = 8) -> None:
    print(f"\n2. MHA / GQA / MQA forward, B = 4, N = {n}, d_model = {d_model}, H = {heads} (ms, median)")
    x = torch.randn(4, n, d_model)
    for kv in mech.divisors(heads)[::-1]:
        m = MultiHeadAttention(d_model, heads, kv).eval()
        with torch.inference_mode():
            t = median_ms(lambda: m(x, mask=causal_mask(n), need_weights=False), repeat=5)
        params = sum(p.numel() for p in m.parameters())
        print(f"   H_kv = {kv:>2} ({mech.variant_name(heads, kv)}): {t:8.2f} ms, {params:,} parameters")
    print("\n   KV cache at 4096 tokens, batch 1, fp16 (preset shapes):")
    for key, shape in mech.PRESETS.items():
        rows = {r["kv_heads"]: r for r in mech.kv_table(shape, 4096, 1)}
        used = rows[shape.n_kv_heads]
        print(f"   {shape.name:<13} MHA {mech.format_bytes(rows[shape.n_heads]['bytes_total']):>9}   "
              f"as built (H_kv = {shape.n_kv_heads:>2}) {mech.format_bytes(used['bytes_total']):>9}   "
              f"MQA {mech.format_bytes(rows[1]['bytes_total']):>9}")


def bench_page_work() -> None:
    print("\n3. one uncached page computation (ms, median)")
    cases = {
        "worked example, all stages": lambda: mech.worked_steps(mech.WORKED_X, mech.WORKED_WQ, mech.WORKED_WK,
                                                                mech.WORKED_WV),
        "random 10 tokens + dropout": lambda: mech.worked_steps(*mech.random_inputs(10, 16, 16, 16), list("abcdefghij"),
                                                                mech.StepConfig(dropout=0.2, causal=True)),
        "batched shape walkthrough": lambda: mech.shape_walkthrough(2, 5, 8, 2),
        "mask view (4 methods)": lambda: mech.mask_view(mech.parse_batch("a b c\n[PAD] d e", "start"), 1,
                                                        "causal_padding"),
        "MHA/GQA/MQA comparison": lambda: mech.compare_variants(16, 4, 2, 6),
        "equivalence check vs torch": lambda: mech.equivalence_check(16, 4),
        "additive vs dot (3 tokens)": lambda: mech.additive_vs_dot(torch.randn(3, 2), torch.randn(3, 2),
                                                                   torch.randn(3, 4)),
    }
    for name, fn in cases.items():
        print(f"   {name:<30} {median_ms(fn):8.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    args = parser.parse_args()
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    bench_scores([64, 256] if args.quick else [64, 256, 512, 1024])
    bench_variants(64 if args.quick else 256)
    bench_page_work()


if __name__ == "__main__":
    main()
