"""Timings of the Anatomy page's computations (no pass/fail). Run: python -m bench.bench_anatomy

Prints the median of a few runs per item, in milliseconds. On a shared machine the figures are noisy.
"""
from __future__ import annotations

import statistics
import time

from viz_core.lessons import anatomy as A
from viz_core.lessons import blocks as B


def _ms(fn, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(1000 * (time.perf_counter() - t0))
    return statistics.median(times)


def main() -> None:
    items = {
        "compare_norms (3 x 4 x 6)": lambda: B.compare_norms(B.NormBatch()),
        "norm_placement_at_init depth 12": lambda: B.norm_placement_at_init(12),
        "norm_placement_at_init depth 24": lambda: B.norm_placement_at_init(24),
        "norm_placement_at_init depth 48": lambda: B.norm_placement_at_init(48),
        "ffn_demo d_model 64": lambda: B.ffn_demo(64),
        "dropout_statistics p 0.1": lambda: B.dropout_statistics(0.1),
        "next_token_path V 1000 d 4": lambda: A.next_token_path("哈基咪 南北", A.TinyLMConfig(), A.Sampling(), 0),
        "next_token_path V 37000 d 64 6 blocks": lambda: A.next_token_path(
            "the cat sat on the mat", A.TinyLMConfig(37000, 64, 2, 6), A.Sampling(0.8, 50, 0.9), 0),
        "reference_parameter_count base (meta)": lambda: A.reference_parameter_count(A.TransformerSizes()),
    }
    width = max(map(len, items))
    for name, fn in items.items():
        print(f"{name:<{width}}  {_ms(fn):8.1f} ms")


if __name__ == "__main__":
    main()
