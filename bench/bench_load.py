"""Many users at once (issue #12): real browser sessions against one local server. Prints figures; asserts nothing.

  python bench/bench_load.py                          # 20 browsing sessions, with 2 and then 0 training sessions
  python bench/bench_load.py --browsers 10 --seconds 60 --trainers 2

Each browsing session is a Playwright context in one Chromium: it opens the Attention page and then, until the time is
up, changes the layer, types a new sentence, and now and then visits another page and comes back. The Attention
page's rerun latency is timed from the action (option clicked / Ctrl+Enter) to the heatmap showing the new layer or
the new tokens with the script done. Training sessions open the Train page and press Train again whenever their run
has ended. A thread samples the server's RSS (psutil: the server process and its children) every 0.25 s.

Bounded: --seconds per scenario (after the sessions have opened), a hard --deadline for the whole script; the server
listens on 127.0.0.1 only and is stopped at the end. The server keeps its default training limit
(viz_core.jobs: ATTN_MAX_TRAINING_JOBS, one job per two cores), so on a 2-core machine the second trainer queues.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from bench_browser import CHROMIUM, CHROMIUM_ARGS, WORDS, Server  # noqa: E402
from viz_core.i18n import t  # noqa: E402

ARRIVAL_S = 15.0  # the sessions arrive spread over this many seconds
OTHER_PAGES = ("positions", "scaling", "anatomy", "mechanics", "optimizers")
_TITLE = """() => { const gd = document.querySelector(".st-key-head_fig .js-plotly-plot");
  return gd && gd.layout && gd.layout.title ? String(gd.layout.title.text || '') : null; }"""
_X = """() => { const gd = document.querySelector(".st-key-head_fig .js-plotly-plot");
  return gd && gd.data && gd.data.length ? (gd.data[0].x || []).join('|') : null; }"""
_READY = """([kind, value]) => {
  const app = document.querySelector("[data-testid='stApp']");
  if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
  const gd = document.querySelector(".st-key-head_fig .js-plotly-plot");
  if (!gd || !gd.data || !gd.data.length || !gd.querySelector('.main-svg')) return false;
  if (kind === 'title') return String((gd.layout.title || {}).text || '').includes(value);
  if (kind === 'x') return (gd.data[0].x || []).join('|') !== value;
  return true;
}"""
_PAGE = """([title]) => {
  const app = document.querySelector("[data-testid='stApp']");
  const h1 = document.querySelector("[data-testid='stMain'] h1");
  return !!app && app.getAttribute('data-test-script-state') === 'notRunning' && !!h1 && h1.innerText.includes(title)
    && !document.querySelector("[data-testid='stMain'] [data-stale='true']");
}"""


class Memory(threading.Thread):
    """Peak RSS of a process and its children, sampled every `every` seconds until stopped."""

    def __init__(self, pid: int, every: float = 0.25):
        super().__init__(daemon=True)
        self.proc, self.every, self.peak, self._halt = psutil.Process(pid), every, 0, threading.Event()

    def run(self):
        while not self._halt.is_set():
            try:
                procs = [self.proc] + self.proc.children(recursive=True)
                self.peak = max(self.peak, sum(p.memory_info().rss for p in procs if p.is_running()))
            except psutil.Error:
                pass
            self._halt.wait(self.every)

    def stop(self) -> int:
        self._halt.set()
        self.join(5)
        return self.peak


async def open_attention(page, url: str, timeout_ms: int) -> None:
    await page.goto(url + "/?lang=en", wait_until="domcontentloaded", timeout=timeout_ms)
    await page.wait_for_function(_READY, arg=["any", ""], timeout=timeout_ms)


async def browse(browser, url: str, end: float, rng: random.Random, stats: dict, timeout_ms: int) -> None:
    """One visitor: change the layer, type a sentence, sometimes another page and back, until `end`."""
    ctx = await browser.new_context(viewport={"width": 1400, "height": 1000})
    ctx.set_default_timeout(timeout_ms)
    page = await ctx.new_page()
    try:
        t0 = time.perf_counter()
        await open_attention(page, url, timeout_ms)
        stats["open"].append(time.perf_counter() - t0)
        layer = 0
        while time.monotonic() < end:
            action = rng.choices(("layer", "sentence", "page"), weights=(4, 4, 1))[0]
            t0 = time.perf_counter()
            if action == "layer":
                layer = rng.choice([x for x in range(6) if x != layer])
                await page.get_by_role("combobox", name=t("attention.layer", "en"), exact=True).click()
                await page.get_by_role("option", name=str(layer), exact=True).click()
                t0 = time.perf_counter()
                await page.wait_for_function(_READY, arg=["title", f"Layer {layer},"], timeout=timeout_ms,
                                             polling=50)
            elif action == "sentence":
                prev = await page.evaluate(_X)
                n = rng.randint(8, 40)
                box = page.locator(".st-key-attention-text textarea")
                await box.fill(" ".join(rng.choice(WORDS) for _ in range(n)))
                t0 = time.perf_counter()
                await box.press("Control+Enter")
                await page.wait_for_function(_READY, arg=["x", prev], timeout=timeout_ms, polling=50)
            else:
                stem = rng.choice(OTHER_PAGES)
                await page.locator("[data-testid='stSidebar'] [data-testid='stPageLink-NavLink']").filter(
                    has_text=t(f"common.nav_{stem}", "en")).first.click()
                await page.wait_for_function(_PAGE, arg=[t(f"{stem}.title", "en")], timeout=timeout_ms, polling=50)
                stats["page"].append(time.perf_counter() - t0)
                await page.wait_for_timeout(rng.randint(500, 1500))
                await page.locator("[data-testid='stSidebar'] [data-testid='stPageLink-NavLink']").filter(
                    has_text=t("common.nav_attention", "en")).first.click()
                t0 = time.perf_counter()
                await page.wait_for_function(_READY, arg=["any", ""], timeout=timeout_ms, polling=50)
                action = "back"
            if time.monotonic() < end + 5:
                stats[action].append(time.perf_counter() - t0)
            await page.wait_for_timeout(rng.randint(300, 1200))  # a person reads a little
    except Exception as exc:  # noqa: BLE001 - a stuck session is counted, the others go on
        stats["errors"].append(f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}")
    finally:
        await ctx.close()


async def train(browser, url: str, end: float, stats: dict, timeout_ms: int) -> None:
    """One trainer: press Train, wait for the run to end, press again, until `end` (then Stop)."""
    ctx = await browser.new_context(viewport={"width": 1400, "height": 1000})
    ctx.set_default_timeout(timeout_ms)
    page = await ctx.new_page()
    queued_text = t("train.queued", "en", n=1).split(":")[0]
    try:
        await page.goto(url + "/train?lang=en&task=reverse&seconds=30", wait_until="domcontentloaded")
        await page.wait_for_selector(".st-key-train-go button:not([disabled])", timeout=timeout_ms)
        while time.monotonic() < end:
            await page.wait_for_selector(".st-key-train-go button:not([disabled])", timeout=timeout_ms)
            t0 = time.perf_counter()
            await page.locator(".st-key-train-go button").click()
            await page.wait_for_function(
                """([q]) => !!document.querySelector("[data-testid='stProgress']")
                   || document.querySelector("[data-testid='stMain']").innerText.includes(q)""",
                arg=[queued_text], timeout=timeout_ms, polling=50)
            if await page.locator("[data-testid='stProgress']").count() == 0:
                stats["queued"] += 1
                qt = time.perf_counter()
                while time.monotonic() < end and await page.locator("[data-testid='stProgress']").count() == 0:
                    await page.wait_for_timeout(250)
                stats["queue_wait"].append(time.perf_counter() - qt)
            stats["runs"] += 1
            stats["first_progress"].append(time.perf_counter() - t0)
            while time.monotonic() < end and not await page.locator(
                    ".st-key-train-go button:not([disabled])").count():
                await page.wait_for_timeout(500)
        if await page.locator(".st-key-train-stop button:not([disabled]), .st-key-train-queue_stop button").count():
            await page.locator(".st-key-train-stop button:not([disabled]), "
                               ".st-key-train-queue_stop button").first.click()
    except Exception as exc:  # noqa: BLE001
        stats["errors"].append(f"trainer {type(exc).__name__}: {str(exc).splitlines()[0][:120]}")
    finally:
        await ctx.close()


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))] if xs else float("nan")


async def scenario(pw, n_browsers: int, n_trainers: int, seconds: float, timeout_ms: int, seed: int) -> dict:
    stats = {k: [] for k in ("open", "layer", "sentence", "page", "back", "errors", "first_progress", "queue_wait")}
    stats |= {"queued": 0, "runs": 0}
    browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
    server = Server()
    try:
        await asyncio.to_thread(server.__enter__)
        mem = Memory(server.proc.pid)
        mem.start()
        # warm the model once (as any earlier visitor would have), then everybody arrives within ARRIVAL_S
        ctx = await browser.new_context()
        page = await ctx.new_page()
        await open_attention(page, server.url, max(timeout_ms, 300_000))  # a cold start may take long
        await ctx.close()
        rss_idle = mem.peak
        end = time.monotonic() + seconds + ARRIVAL_S
        tasks = [train(browser, server.url, end, stats, timeout_ms) for _ in range(n_trainers)]
        for i in range(n_browsers):
            tasks.append(browse(browser, server.url, end, random.Random(seed + i), stats, timeout_ms))
        await asyncio.gather(*(_staggered(task, ARRIVAL_S * i / max(1, len(tasks))) for i, task in enumerate(tasks)))
        stats["rss_peak"], stats["rss_idle"] = mem.stop(), rss_idle
    finally:
        await asyncio.to_thread(server.__exit__)
        await browser.close()
    return stats


async def _staggered(coro, delay: float):
    await asyncio.sleep(delay)
    return await coro


def report(name: str, s: dict) -> None:
    rerun = s["layer"] + s["sentence"]
    print(f"\n{name}")
    print(f"  Attention reruns: {len(rerun)} (layer {len(s['layer'])}, sentence {len(s['sentence'])}); "
          f"p50 {pct(rerun, .5):.2f} s, p95 {pct(rerun, .95):.2f} s")
    for k in ("open", "layer", "sentence", "page", "back"):
        if s[k]:
            print(f"    {k:9s} n={len(s[k]):4d}  p50 {pct(s[k], .5):.2f} s  p95 {pct(s[k], .95):.2f} s")
    if s["runs"] or s["queued"]:
        print(f"  training runs started: {s['runs']}, of which queued first: {s['queued']}"
              + (f" (waited p50 {statistics.median(s['queue_wait']):.1f} s)" if s["queue_wait"] else "")
              + (f"; click -> progress p50 {pct(s['first_progress'], .5):.2f} s" if s["first_progress"] else ""))
    print(f"  server RSS (process + children): peak {s['rss_peak'] / 2**20:.0f} MiB "
          f"(after the first page: {s['rss_idle'] / 2**20:.0f} MiB)")
    if s["errors"]:
        print(f"  sessions that failed: {len(s['errors'])}: {sorted(set(s['errors']))[:3]}")


async def amain(args) -> None:
    from playwright.async_api import async_playwright
    start = time.monotonic()
    async with async_playwright() as pw:
        for n_trainers in args.trainers:
            if time.monotonic() - start + args.seconds + 60 > args.deadline:
                print(f"(deadline: the scenario with {n_trainers} trainers was skipped)")
                continue
            s = await asyncio.wait_for(
                scenario(pw, args.browsers, n_trainers, args.seconds, int(args.timeout * 1000), args.seed),
                timeout=args.seconds + 600)
            report(f"{args.browsers} browsing sessions + {n_trainers} training sessions, {args.seconds:.0f} s", s)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--browsers", type=int, default=20, help="browsing sessions (at most 40)")
    p.add_argument("--trainers", type=lambda s: [int(x) for x in s.split(",")], default=[2, 0],
                   help="training sessions per scenario, comma-separated (default 2,0)")
    p.add_argument("--seconds", type=float, default=90, help="length of each scenario (at most 600)")
    p.add_argument("--timeout", type=float, default=60, help="seconds one action may take before it counts as failed")
    p.add_argument("--deadline", type=float, default=900, help="the whole script stops starting scenarios after this")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    args.browsers, args.seconds = min(args.browsers, 40), min(args.seconds, 600)
    asyncio.run(amain(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
