"""Head finder benchmarks. Prints figures; asserts nothing.

  python bench/bench_head_finder.py              # MiniLM: bundled pass, 2,000 pasted words, page reruns
  python bench/bench_head_finder.py --decoders   # + the packaged real decoders' passes and their memory

1. corpus pass over the bundled sentences (100, English + Chinese) + 4 repeated random sequences: MiniLM in numpy
   (goal <= 5 s), Gemma 3 270M and SmolLM2-135M through transformers (goal <= 30 s), with the process's RSS before,
   at its peak and after (the result itself is well under a megabyte);
2. a pasted text of 2,000 words on MiniLM (goal <= 10 s);
3. the page once the pass is done (AppTest script runs, which include AppTest's own overhead): the first full run,
   then opening another head and sorting by another score (goal <= 0.5 s each);
4. memory: the process's RSS over 30 more page runs (heads and scores in turn), then over 12 passes of different
   pasted texts (the server keeps 8 finished results: the RSS must level off, not grow with every text).
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as app.py sets it for the server


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def timed_pass(src, corpus) -> tuple[float, object]:
    from viz_core.pretrained.head_finder import run_pass
    out = {}
    start = time.perf_counter()
    for _ in run_pass(corpus, src.n_layers, src.n_heads, src.attend_text, src.attend_ids,
                      lambda r: out.setdefault("r", r), src.unk):
        pass
    return time.perf_counter() - start, out["r"]


def words_2000() -> str:
    from viz_core.pretrained.qk_map import SENTENCES
    import json
    data = json.loads(SENTENCES.read_text(encoding="utf-8"))
    pool = list(data["en"]) + [s for s in data.get("about", []) if s.isascii()]
    words, i = [], 0
    while len(words) < 2000:
        words += pool[i % len(pool)].split()
        i += 1
    return " ".join(words[:2000])


def minilm() -> None:
    from viz_core.pretrained import bert_numpy, finder_sources
    nb = bert_numpy.load_default()
    src = finder_sources.of_numpy_bert(nb)
    times = []
    for _ in range(3):
        s, r = timed_pass(src, finder_sources.bundled_corpus(src))
        times.append(s)
    read = r.read_by_source()
    print(f"MiniLM bundled pass: median {statistics.median(times):.2f} s of 3 ({', '.join(f'{t:.2f}' for t in times)})"
          f"; read {read}, left out {r.skipped}")
    text = words_2000()
    s, r = timed_pass(src, finder_sources.own_corpus(src, text))
    n, tokens = r.read_by_source()["own"]
    print(f"MiniLM pasted text of {len(text.split())} words: {s:.2f} s ({n} sentences, {tokens} tokens)")


def decoders() -> None:
    from viz_core.pretrained import finder_sources, load_model, packaged
    for d in (packaged.GEMMA, packaged.SMOLLM2):
        if not packaged.installed(d):
            print(f"{d.id}: not installed")
            continue
        before = rss_mb()
        m = load_model(d.id)
        loaded = rss_mb()
        src = finder_sources.of_loaded(m)
        s, r = timed_pass(src, finder_sources.bundled_corpus(src))
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"{d.id} bundled pass: {s:.1f} s; RSS {before:.0f} MB -> {loaded:.0f} MB loaded -> {rss_mb():.0f} MB "
              f"after (process peak {peak:.0f} MB); read {r.read_by_source()}, left out {r.skipped}")
        del m, src, r


def page() -> None:
    from tests.conftest import run_page
    from app_pages._ui import head_finder as finder

    def run(at) -> float:
        start = time.perf_counter()
        at.run()
        return time.perf_counter() - start

    at = run_page("head_finder", {"lang": "en"})
    finder.runs().wait(finder.key("", None), timeout=120)
    first = run(at)
    heads, scores = [], []
    for layer, head in ((3, 5), (1, 7), (5, 0), (2, 2)):
        next(sb for sb in at.selectbox if sb.label == "Layer").set_value(layer)
        next(sb for sb in at.selectbox if sb.label == "Head").set_value(head)
        heads.append(run(at))
    for score in ("induction", "entropy", "first", "previous"):
        next(sb for sb in at.selectbox if sb.label.startswith("Score")).set_value(score)
        scores.append(run(at))
    print(f"page, pass done (AppTest script runs): first {first:.2f} s; another head median "
          f"{statistics.median(heads):.2f} s (max {max(heads):.2f}); another score median {statistics.median(scores):.2f}"
          f" s (max {max(scores):.2f})")
    memory(at)


def memory(at) -> None:
    from app_pages._ui import head_finder as finder
    rss = [rss_mb()]
    for i in range(30):
        next(sb for sb in at.selectbox if sb.label == "Layer").set_value(i % 6)
        next(sb for sb in at.selectbox if sb.label == "Head").set_value((5 * i) % 12)
        if i % 3 == 0:
            next(sb for sb in at.selectbox if sb.label.startswith("Score")).set_value(
                ("previous", "induction", "entropy", "max", "first")[i // 3 % 5])
        at.run()
        rss.append(rss_mb())
    print(f"RSS over 30 page runs: {rss[0]:.0f} MB -> {rss[10]:.0f} after 10 -> {rss[20]:.0f} after 20 -> "
          f"{rss[30]:.0f} MB after 30")
    text = words_2000()
    rss = [rss_mb()]
    for i in range(12):
        own = f"Text number {i}. " + text[: 3000 + 200 * i]
        finder.run("", own)
        finder.runs().wait(finder.key("", own), timeout=120)
        rss.append(rss_mb())
    print(f"RSS over 12 passes of different pasted texts: {' '.join(f'{v:.0f}' for v in rss)} MB; results kept "
          f"{len(finder.runs()._runs)} (at most {finder.runs().max_results})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decoders", action="store_true", help="also the packaged real decoders' passes")
    args = parser.parse_args()
    minilm()
    page()
    if args.decoders:
        decoders()


if __name__ == "__main__":
    main()
