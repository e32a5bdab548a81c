"""Head importance benchmarks. Prints figures; asserts nothing.

  python bench/bench_importance.py            # add --naive to time 72 separate forwards too (slow)

1. all 72 ablations of all-MiniLM-L6-v2 (6 layers x 12 heads) on a 24-token pair (12 + 12 tokens, each text encoded
   on its own), zero and mean ablation: the growing batch (what head_importance uses), the plain 72-row batch (and
   with --naive 72 separate forwards) (goal: <= 1.5 s on a 2-core CPU); wall-clock and process CPU time, medians;
2. integrated gradients (32 steps) on the same pair;
3. the same ablations at 128 tokens of a single text;
4. "Which heads matter" at 400 tokens (--long: only this): the packaged model in numpy as the server runs it (one
   OpenBLAS thread per product, the work split over the cores), the map and integrated gradients alone; then the view
   in a server as one visitor's tab sees it (the websocket protocol, no browser on this machine's cores): seconds to
   the map (the view's first chart) and to the whole view (goal: map <= 5 s, whole <= 15 s). Medians of 3 texts.
"""
from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _sentence(n_tokens: int, shift: int = 0) -> str:
    words = "the quick brown fox jumps over a lazy dog while seven curious cats watch it".split()
    return " ".join(words[(i + shift) % len(words)] for i in range(n_tokens - 2))  # + [CLS], [SEP]


def _median(fn, reps: int) -> tuple[float, float]:
    """(median wall seconds, median CPU seconds of this process) after one warm-up call."""
    fn()
    wall, cpu = [], []
    for _ in range(reps):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return statistics.median(wall), statistics.median(cpu)


def bench_ablation(m, reps: int) -> None:
    from viz_core.pretrained import ablation as hi
    a, b = _sentence(12), "a lazy dog sleeps while the quick brown fox runs"
    n = [len(m.tokenizer(x)["input_ids"]) for x in (a, b)]
    print(f"1. 72 head ablations of {m.name}, pair of {n[0]} + {n[1]} tokens "
          f"(torch threads: {__import__('torch').get_num_threads()}, median of {reps})")
    obj = hi.objective(m, a, b)
    plan = [(layer, head) for layer in range(m.n_layers) for head in range(m.n_heads)]
    for method in hi.METHODS:
        rows = {
            "head_importance (growing batch)": lambda: hi.head_importance(m, a, b, method=method),
            "plain 72-row batch": lambda: hi.ablated_scores(m, obj, plan, "self", method),
        }
        if method == "zero" and "--naive" in sys.argv:  # for scale: one forward per head (slow, so timed once)
            rows["72 separate forwards"] = lambda: [hi.ablated_scores(m, obj, [p], "self", method) for p in plan]
        for label, fn in rows.items():
            wall, cpu = _median(fn, reps if "separate" not in label else 1)
            print(f"   {method:4s}  {label:32s} {wall:6.3f} s wall   {cpu:6.3f} s CPU")


def bench_attribution(m, reps: int) -> None:
    from viz_core.pretrained.attribution import token_attribution
    a, b = _sentence(12), "a lazy dog sleeps while the quick brown fox runs"
    for steps in (16, 32, 64):
        wall, cpu = _median(lambda: token_attribution(m, a, b, steps=steps), reps)
        gap = token_attribution(m, a, b, steps=steps).completeness_gap
        print(f"2. integrated gradients, {steps:3d} steps, same pair: {wall:6.3f} s wall  {cpu:6.3f} s CPU  "
              f"completeness gap {gap:+.1e}")


def bench_long(m) -> None:
    from viz_core.pretrained.ablation import head_importance
    text = _sentence(128)
    wall, cpu = _median(lambda: head_importance(m, text), 3)
    print(f"3. 72 ablations, single text of 128 tokens: {wall:6.3f} s wall  {cpu:6.3f} s CPU")


def bench_view_long(n_tokens: int = 400, texts: int = 3) -> None:
    """Section 4, in a child process with OPENBLAS_NUM_THREADS=1 (as app.py sets it) for the numpy parts."""
    import subprocess
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    subprocess.run([sys.executable, __file__, "--numpy-long", str(n_tokens), str(texts)], env=env, check=True)
    import asyncio
    from urllib.parse import urlencode

    from bench.bench_browser import free_port, start_server, stop_server, wait_healthy
    from bench.st_protocol import Session

    url = f"http://127.0.0.1:{free_port()}"
    proc = start_server(int(url.rsplit(":", 1)[1]), {"HF_HUB_OFFLINE": "1"})
    try:
        wait_healthy(url)

        async def visit(text: str) -> tuple[float, float, int]:
            async with Session(url, timeout=300) as s:  # a tab opened on the view's address
                run = await s.open("/", urlencode({"lang": "en", "view": "importance", "text": text}))
                assert not any(el.type == "exception" for el in s.elements.values()), "the view failed"
                return run.charts_at[0] - run.sent, run.latency, len(run.charts_at)

        asyncio.run(visit(_sentence(40)))  # the server's first view (imports, the model read)
        got = [asyncio.run(visit(_sentence(n_tokens, shift=i))) for i in range(texts)]
    finally:
        stop_server(proc)
    first, whole = statistics.median(g[0] for g in got), statistics.median(g[1] for g in got)
    print(f"4. the view in a server, {n_tokens} tokens, one visitor: the map in {first:5.2f} s, the whole view "
          f"({got[0][2]} charts) in {whole:5.2f} s (median of {texts} texts)")


def numpy_long(n_tokens: int, texts: int) -> None:
    from viz_core.pretrained.attribution_numpy import NumpyAttribution
    from viz_core.pretrained.bert_numpy import NumpyAblation, ablation_threads, load_default
    nb = load_default()
    ab, at = NumpyAblation(nb), NumpyAttribution(nb)
    times = {"map": [], "ig": []}
    for i in range(texts):
        text = _sentence(n_tokens, shift=i)
        t0 = time.perf_counter()
        ab.head_importance(text)
        t1 = time.perf_counter()
        at.token_attribution(text, steps=32)
        times["map"].append(t1 - t0)
        times["ig"].append(time.perf_counter() - t1)
    print(f"4. {n_tokens} tokens in numpy ({ablation_threads()} threads): map {statistics.median(times['map']):5.2f} s,"
          f" integrated gradients (32 steps) {statistics.median(times['ig']):5.2f} s (median of {texts} texts)")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--numpy-long"]:
        numpy_long(int(sys.argv[2]), int(sys.argv[3]))
        sys.exit(0)
    if "--long" in sys.argv:
        bench_view_long()
        sys.exit(0)
    from viz_core.pretrained import load_model
    model = load_model()
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    bench_ablation(model, reps=5)
    bench_attribution(model, reps=5)
    bench_long(model)
    bench_view_long()
    print(f"load average after: {os.getloadavg()[0]:.2f}")
