"""The query-key map's speed (goal: <= 1 s per head change, warm). Prints a table; asserts nothing.

  python bench/bench_qk_map.py              # the packaged model, the default text, both bundled languages
  python bench/bench_qk_map.py --heads 24   # more head changes

Two measurements, both after a first visit has read the bundled sentences' queries and keys (the cold figure is
printed too):
- compute: what a head change computes (slice one head of the cached queries and keys, stack, PCA, the figure);
- page: a whole Attention page rerun (AppTest, the 'Query–key map' view) after choosing another head, which is what
  the server does for a click in the browser (the browser's drawing is not in it: bench/bench_browser.py times
  page switches against a bare Streamlit app).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

TEXT = "The cat sat on the mat because it was tired."


def compute_times(n_heads: int) -> tuple[float, list[float]]:
    from viz_core.plots import qk_map as plots
    from viz_core.pretrained import bert_numpy, qk_map

    nb = bert_numpy.load_default()
    texts = [TEXT] + [s for lang in ("en", "zh") for s in qk_map.bundled_sentences()[lang]]
    t0 = time.perf_counter()
    read = nb.queries_keys(texts)  # the first visit: every sentence's queries and keys, all layers (then cached)
    cold = time.perf_counter() - t0
    times = []
    for i in range(n_heads):
        layer, head = divmod(i * 5, nb.n_heads)
        layer %= nb.n_layers
        t0 = time.perf_counter()
        parts = [(s, toks, q[layer:layer + 1, head:head + 1], k[layer:layer + 1, head:head + 1])
                 for s, (toks, q, k) in zip(texts, read) if qk_map.unknown_share(toks, "[UNK]") <= 0.25 or s == TEXT]
        points = qk_map.stack(parts)
        proj = qk_map.project(points.q[0, 0], points.k[0, 0])
        plots.qk_scatter(points, proj, user_sentence=0).to_json()
        times.append(time.perf_counter() - t0)
    return cold, times


def page_times(n_heads: int) -> tuple[float, list[float]]:
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.query_params.update({"lang": "en", "view": "qkmap"})
    t0 = time.perf_counter()
    at.run()
    cold = time.perf_counter() - t0
    box = next(w for w in at.selectbox if w.key.startswith("attention.head"))
    times = []
    for i in range(n_heads):
        box = next(w for w in at.selectbox if w.key.startswith("attention.head"))
        t0 = time.perf_counter()
        box.set_value((i * 5 + 1) % 12).run()
        times.append(time.perf_counter() - t0)
        assert not at.exception, at.exception
    return cold, times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--heads", type=int, default=12, help="head changes to time")
    args = parser.parse_args()
    print(f"query-key map, packaged all-MiniLM-L6-v2, {os.cpu_count()} cores, {args.heads} head changes")
    print(f"{'what':<44}{'cold s':>8}{'median s':>10}{'max s':>8}")
    for name, fn in (("compute (slice, PCA, figure to JSON)", compute_times),
                     ("page rerun after a head change (AppTest)", page_times)):
        cold, times = fn(args.heads)
        print(f"{name:<44}{cold:>8.2f}{statistics.median(times):>10.3f}{max(times):>8.3f}")


if __name__ == "__main__":
    main()
