"""The packaged real decoders (Gemma 3 270M, SmolLM2-135M). Prints figures; asserts nothing.

  python bench/bench_real_decoder.py [convert] [load] [maps] [lens] [importance] [memory]

convert: the one-time GGUF -> float16 conversion in a fresh cache folder: seconds and the converter's peak RSS
         (goal <= 1.5 GB);
load:    a fresh process loading the converted cache: import of torch + transformers, then load_model (goal <= 5 s);
maps:    a new sentence -> every layer x head's attention and the all-heads grid figure, 24 and 256 tokens, model warm
         (goals <= 1.0 s and <= 4 s);
lens:    the logit lens at the positions the page reads on each model and at 64 positions (goal <= 2 s);
importance: "Which heads matter" at 128 tokens, model warm: every head knocked out, then integrated gradients (32
         steps), each with the growth of this process's RSS at its peak;
memory:  a `streamlit run app.py` server's RSS while one visitor opens every Attention view of each decoder at 128
         tokens in Chromium, the packaged encoder used first (goals <= 1.5 GB with Gemma, <= 1.2 GB with SmolLM2).
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bench.bench_attention import _median_time, _rss_sampler  # noqa: E402

MODELS = ("gemma3-270m", "smollm2-135m")


def _installed() -> list[str]:
    from viz_core.pretrained import packaged
    return [m for m in MODELS if packaged.installed(packaged.by_id(m))]


def _peak_of(cmd: list[str], env: dict | None = None) -> tuple[float, float, str]:
    """(seconds, peak RSS MB of the process and its children, stdout) of a command, sampled every 20 ms."""
    import psutil
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    ps, peak = psutil.Process(proc.pid), 0
    while proc.poll() is None:
        try:
            peak = max(peak, sum(p.memory_info().rss for p in [ps, *ps.children(recursive=True)]))
        except psutil.Error:
            pass
        time.sleep(0.02)
    return time.perf_counter() - t0, peak / 2**20, proc.stdout.read()


def bench_convert() -> None:
    print("convert: GGUF -> float16 safetensors cache, a fresh folder (goal: peak <= 1.5 GB)")
    for model_id in _installed():
        with tempfile.TemporaryDirectory() as tmp:
            seconds, peak, _ = _peak_of([sys.executable, "-m", "viz_core.pretrained.convert", model_id,
                                         str(Path(tmp) / model_id)])
        print(f"   {model_id:13s}: {seconds:5.1f} s, peak {peak:5.0f} MB")


LOAD = """
import time; t0 = time.perf_counter()
import torch, transformers  # noqa
t1 = time.perf_counter()
from viz_core.pretrained import load_model
m = load_model({model!r})
t2 = time.perf_counter()
import psutil
print(f"{{t1 - t0:.2f}} {{t2 - t1:.2f}} {{psutil.Process().memory_info().rss / 2**20:.0f}}")
"""


def bench_load() -> None:
    print("load: a fresh process loads the converted cache (goal <= 5 s); median of 3")
    for model_id in _installed():
        runs = []
        for _ in range(3):
            _, peak, out = _peak_of([sys.executable, "-c", LOAD.format(model=model_id)],
                                    env=dict(os.environ, PYTHONPATH=str(ROOT)))
            imports, load, rss = (float(x) for x in out.split()[-3:])
            runs.append((imports, load, rss, peak))
        imports, load, rss, peak = (statistics.median(r[i] for r in runs) for i in range(4))
        print(f"   {model_id:13s}: import torch + transformers {imports:4.1f} s, then load_model {load:4.1f} s "
              f"(together {imports + load:4.1f} s); RSS after {rss:4.0f} MB, peak {peak:4.0f} MB")


def _words(n_words: int) -> str:
    words = "the students read the notes about attention in the library after class while".split()
    return " ".join(words[i % len(words)] for i in range(n_words))


def bench_maps() -> None:
    from viz_core.plots import attention as plots
    from viz_core.pretrained import attention_for, load_model
    print("maps: a new sentence -> every layer x head and the all-heads grid figure (model warm; median of 5)")
    for model_id in _installed():
        m = load_model(model_id)
        for n in (24, 256):
            text = _words(n - 1)
            counter = [0]

            def new_sentence():  # a different sentence every time: nothing cached
                counter[0] += 1
                r = attention_for(m, f"{counter[0]} {text}")
                plots.model_grid(r.weights, thumb=32, layer_label="layer", head_label="head", hover_hint="")
                return r
            tokens = len(new_sentence().tokens)
            print(f"   {model_id:13s} {tokens:4d} tokens: {_median_time(new_sentence, 5):5.2f} s")


def bench_lens() -> None:
    from viz_core.pretrained import load_model
    from viz_core.pretrained.lens import lens_positions, logit_lens_for
    print("lens: the logit lens (vocabulary read in slices), model warm; median of 3")
    for model_id in _installed():
        m = load_model(model_id)
        text = _words(80)
        for n in sorted({lens_positions(m), 64}):
            seconds = _median_time(lambda: logit_lens_for(m, text, max_tokens=n), 3)
            note = " (the page's default here)" if n == lens_positions(m) else ""
            print(f"   {model_id:13s} {n:3d} positions: {seconds:5.2f} s{note}")


MEMORY_GOALS = {"gemma3-270m": ("18 layers × 4 heads", 1.5), "smollm2-135m": ("30 layers × 9 heads", 1.2)}


def bench_importance() -> None:
    import threading

    import psutil

    from viz_core.pretrained import attention_for, load_model
    from viz_core.pretrained.ablation import head_importance
    from viz_core.pretrained.attribution import token_attribution
    from viz_core.pretrained.load import release_memory
    print("importance: 'Which heads matter' at 128 tokens (model warm): seconds, RSS growth at the peak")
    proc, box = psutil.Process(), {"peak": 0, "stop": False}

    def sample():
        while not box["stop"]:
            box["peak"] = max(box["peak"], proc.memory_info().rss)
            time.sleep(0.005)
    threading.Thread(target=sample, daemon=True).start()
    for model_id in _installed():
        m = load_model(model_id)
        text = _words(127)
        attention_for(m, text)
        m.model.get_input_embeddings().weight[:].sum()  # the embedding resident, as after the page's lens
        for name, run in (("knock out every head", lambda: head_importance(m, text)),
                          ("integrated gradients", lambda: token_attribution(m, text, steps=32))):
            release_memory()
            base = box["peak"] = proc.memory_info().rss
            t0 = time.perf_counter()
            run()
            seconds = time.perf_counter() - t0
            print(f"   {model_id:13s} {name:22s}: {seconds:5.1f} s, +{(box['peak'] - base) / 2**20:4.0f} MB")
    box["stop"] = True


def bench_memory() -> None:
    for model_id in _installed():
        _memory_of(model_id)


def _memory_of(model_id: str) -> None:
    """One visitor: the default page (packaged encoder), then the decoder at 128 tokens through every view."""
    import psutil
    from playwright.sync_api import sync_playwright

    from viz_core import i18n
    views = ("head", "grid", "lines", "aggregate", "stats", "compare", "qkmap", "sinks", "heads", "lens",
             "importance", "export")
    shape, goal = MEMORY_GOALS[model_id]
    print(f"memory: server RSS, one visitor: the encoder's default page, then {model_id} at 128 tokens through every "
          f"view (goal <= {goal} GB)")
    port = 8766
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
                             "--server.port", str(port)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    done = "[data-testid='stApp'][data-test-script-state='notRunning']"
    ps = psutil.Process(proc.pid)
    sampler, box = _rss_sampler(ps)
    try:
        time.sleep(8)
        with sync_playwright() as pw:
            b = pw.chromium.launch(executable_path="/usr/bin/chromium", args=[
                "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                "--disable-sync"])
            page = b.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"http://127.0.0.1:{port}/?lang=en")
            page.wait_for_selector(done, timeout=180_000)
            print(f"   the encoder's page: {ps.memory_info().rss / 2**20:.0f} MB")
            page.goto(f"http://127.0.0.1:{port}/?lang=en&model={model_id}&text={_words(127)}")
            page.get_by_text(shape).first.wait_for(timeout=300_000)
            page.wait_for_selector(done, timeout=180_000)
            for view in views:
                page.locator(".st-key-attention-view-en label").filter(
                    has_text=i18n.t(f"attention.view_{view}", "en")).first.click()
                page.wait_for_url(lambda url, v=view: f"view={v}" in url or v == "head", timeout=180_000)
                page.wait_for_timeout(300)
                page.wait_for_selector(done, timeout=300_000)
                page.wait_for_timeout(1000)
                print(f"   {view:10s}: now {ps.memory_info().rss / 2**20:5.0f} MB, peak so far "
                      f"{box['peak'] / 2**20:5.0f} MB")
            b.close()
        print(f"   peak RSS {box['peak'] / 2**20:.0f} MB")
    finally:
        box["stop"].set()
        proc.terminate()
        proc.wait(timeout=20)


if __name__ == "__main__":
    rows = {"convert": bench_convert, "load": bench_load, "maps": bench_maps, "lens": bench_lens,
            "importance": bench_importance, "memory": bench_memory}
    for name in sys.argv[1:] or list(rows):
        rows[name]()
