"""Attention page benchmarks. Prints figures; asserts nothing.

  python bench/bench_attention.py            # extraction vs forward, page reruns, grid payload, app memory

1. extraction time (viz_core.pretrained.attention_for) vs the bare eager forward pass of the same model on the same
   tokens (goal <= 1.10x);
2. Attention page rerun with a new sentence, model warm (AppTest; goal <= 0.5 s at 24 tokens, <= 2.5 s at 500);
3. plotly JSON payload of the model grid at 64 and 512 tokens;
4. peak RSS of a `streamlit run app.py` server while one visitor clicks through every Attention view at 24 and
   500 tokens (goal <= 600 MB).
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


def _rss_sampler(ps, period_s: float = 0.05):
    """(thread, box): samples the process's RSS every period_s until box["stop"] is set; box["peak"] is the peak."""
    import threading
    box = {"peak": 0, "stop": threading.Event()}

    def sample():
        while not box["stop"].is_set():
            try:
                box["peak"] = max(box["peak"], ps.memory_info().rss)
            except Exception:  # noqa: BLE001 - the process ended
                return
            time.sleep(period_s)
    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    return thread, box


def _page_views() -> list[str]:
    """The Attention page's views of an encoder (VIEWS minus DECODER_VIEWS), read from its source: importing a page
    would run it."""
    import ast
    tree = ast.parse((ROOT / "app_pages" / "attention.py").read_text(encoding="utf-8"))
    found = {t.id: ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
             for t in node.targets if isinstance(t, ast.Name) and t.id in ("VIEWS", "DECODER_VIEWS")}
    return [v for v in found["VIEWS"] if v not in found["DECODER_VIEWS"]]


def bench_memory() -> None:
    """One visitor (one browser session per length) opens Attention with a sentence of 24, then 500 tokens and
    clicks through every view of the default (encoder) model, as a person would; the server's RSS is sampled every
    50 ms (its peak between samples of a view is what a small server must hold). Goal: <= 600 MB."""
    import psutil
    from playwright.sync_api import sync_playwright

    from viz_core import i18n
    views = _page_views()
    print("4. peak RSS of the app server: one visitor, default model, every Attention view "
          f"({', '.join(views)}) at 24 and 500 tokens (sampled every 50 ms; goal <= 600 MB)")
    port = 8765
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
                             "--server.port", str(port)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    done = "[data-testid='stApp'][data-test-script-state='notRunning']"
    ps = psutil.Process(proc.pid)
    sampler, box = _rss_sampler(ps)
    try:
        time.sleep(8)
        print(f"   server started, warm-up done, no visitor yet: {ps.memory_info().rss / 2**20:.0f} MB")
        with sync_playwright() as pw:
            b = pw.chromium.launch(executable_path="/usr/bin/chromium", args=[
                "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                "--disable-sync"])
            for n in (24, 500):
                page = b.new_page(viewport={"width": 1400, "height": 1000})
                page.goto(f"http://127.0.0.1:{port}/?lang=en&text={_sentence(n)}")
                page.wait_for_selector(done, timeout=180_000)
                for view in views:
                    before = box["peak"]
                    box["peak"] = ps.memory_info().rss
                    page.locator(".st-key-attention-view-en label").filter(
                        has_text=i18n.t(f"attention.view_{view}", "en")).first.click()
                    page.wait_for_url(lambda url, v=view: f"view={v}" in url or v == "head", timeout=180_000)
                    page.wait_for_timeout(300)
                    page.wait_for_selector(done, timeout=180_000)
                    page.wait_for_timeout(1000)
                    view_peak, box["peak"] = box["peak"], max(before, box["peak"])
                    print(f"   {n:3d} tokens, {view:10s}: peak {view_peak / 2**20:4.0f} MB, "
                          f"now {ps.memory_info().rss / 2**20:4.0f} MB")
                page.close()
            b.close()
        torch_loaded = any("libtorch" in m.path for m in ps.memory_maps())
        print(f"   peak RSS {box['peak'] / 2**20:.0f} MB (torch {'loaded' if torch_loaded else 'not loaded'})")
    finally:
        box["stop"].set()
        proc.terminate()
        proc.wait(timeout=20)


if __name__ == "__main__":
    which = sys.argv[1:] or ["extraction", "rerun", "payload", "memory"]
    for name in which:
        {"extraction": bench_extraction, "rerun": bench_page_rerun, "payload": bench_grid_payload,
         "memory": bench_memory}[name]()
