"""Attention page benchmarks. Prints figures; asserts nothing.

  python bench/bench_attention.py            # extraction vs forward, page reruns, grid payload, app memory

1. extraction time (viz_core.pretrained.attention_for) vs the bare eager forward pass of the same model on the same
   tokens (goal <= 1.10x);
2. Attention page rerun with a new sentence, model warm (AppTest; goal <= 0.5 s at 24 tokens, <= 2.5 s at 500);
3. plotly JSON payload of the model grid at 64 and 512 tokens;
4. peak RSS of a `streamlit run app.py` server while a browser opens the Attention page (goal <= 650 MB).
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _sentence(n_tokens: int) -> str:
    words = "the quick brown fox jumps over a lazy dog while seven curious cats watch it".split()
    return " ".join(words[i % len(words)] for i in range(n_tokens - 2))  # + [CLS], [SEP]


def _median_time(fn, reps: int) -> float:
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench_extraction() -> None:
    """Interleaved runs (bare, extraction, bare, ...) so that both see the same machine state; medians."""
    import numpy as np
    import torch

    from viz_core.pretrained import attention_for, load_model
    m = load_model()
    print("1. extraction vs the bare forward pass (all-MiniLM-L6-v2, eager, CPU, median of interleaved runs)")
    print("   bare = tokenizer + model(**enc) without attentions; extraction = attention_for(model, text)")
    for n in (24, 128, 500):
        text = _sentence(n)

        def bare():
            enc = m.tokenizer(text, return_tensors="pt")
            with torch.inference_mode():
                m.model(**enc)

        reps = 40 if n < 200 else 20
        t_bare, t_ext = [], []
        for i in range(reps + 3):
            t0 = time.perf_counter()
            bare()
            t1 = time.perf_counter()
            attention_for(m, text)
            t2 = time.perf_counter()
            if i >= 3:  # warm-up
                t_bare.append(t1 - t0)
                t_ext.append(t2 - t1)
        b, e = float(np.median(t_bare)), float(np.median(t_ext))
        print(f"   {n:4d} tokens: bare {b * 1e3:7.1f} ms   extraction {e * 1e3:7.1f} ms   ratio {e / b:5.2f}x")


def bench_page_rerun() -> None:
    from tests.conftest import run_page
    print("2. Attention page rerun with a new sentence, model warm (AppTest, one head view, median of 5)")
    at = run_page("attention", {"lang": "en"})
    for n in (24, 500):
        times = []
        for rep in range(6):
            text = f"{rep} " + _sentence(n - 1)
            t0 = time.perf_counter()
            at.text_area(key="attention.text").set_value(text).run()
            times.append(time.perf_counter() - t0)
            assert not at.exception
        print(f"   {n:4d} tokens: {statistics.median(times[1:]):.3f} s")
        for view in ("grid", "stats"):
            at.radio(key="attention.view").set_value(view).run()
            t0 = time.perf_counter()
            at.text_area(key="attention.text").set_value("x " + _sentence(n - 1)).run()
            print(f"   {n:4d} tokens, {view} view: {time.perf_counter() - t0:.3f} s")
        at.radio(key="attention.view").set_value("head").run()


def bench_grid_payload() -> None:
    from viz_core.plots.attention import model_grid
    from viz_core.pretrained import attention_for, load_model
    m = load_model()
    print("3. model grid figure payload (plotly JSON)")
    for n in (64, 512):
        r = attention_for(m, _sentence(n))
        fig = model_grid(r.weights, thumb=32)
        t0 = time.perf_counter()
        payload = fig.to_json()
        print(f"   {len(r.tokens):4d} tokens: {len(payload) / 1024:7.1f} KiB  (serialised in "
              f"{(time.perf_counter() - t0) * 1e3:.0f} ms)")


def bench_memory() -> None:
    import psutil
    from playwright.sync_api import sync_playwright
    print("4. peak RSS of the app server (default model, Attention page at 24 and 500 tokens, all views)")
    port = 8765
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
                             "--server.port", str(port)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    peak = 0
    try:
        ps = psutil.Process(proc.pid)
        time.sleep(5)
        print(f"   server started, no session yet: {ps.memory_info().rss / 2**20:.0f} MB")
        with sync_playwright() as pw:
            b = pw.chromium.launch(executable_path="/usr/bin/chromium", args=[
                "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                "--disable-sync"])
            page = b.new_page()
            for n in (24, 500):
                for view in ("head", "grid", "lines", "aggregate", "stats", "export"):
                    page.goto(f"http://127.0.0.1:{port}/?view={view}&text={_sentence(n)}")
                    page.wait_for_selector("[data-testid='stApp'][data-test-script-state='notRunning']",
                                           timeout=120_000)
                    page.wait_for_timeout(1500)
                    rss = ps.memory_info().rss
                    peak = max(peak, rss)
                    print(f"   {n:3d} tokens, {view:9s} view: {rss / 2**20:.0f} MB")
            b.close()
        print(f"   peak RSS {peak / 2**20:.0f} MB")
    finally:
        proc.terminate()
        proc.wait(timeout=20)


if __name__ == "__main__":
    which = sys.argv[1:] or ["extraction", "rerun", "payload", "memory"]
    for name in which:
        {"extraction": bench_extraction, "rerun": bench_page_rerun, "payload": bench_grid_payload,
         "memory": bench_memory}[name]()
