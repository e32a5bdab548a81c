"""Many users at once: real Streamlit sessions against one local server. Prints figures; asserts
nothing.

  python bench/bench_load.py                          # 20 browsing sessions, with 2 and then 0 training sessions
  python bench/bench_load.py --browsers 3 --seconds 20 --trainers 1
  python bench/bench_load.py --chromium 2             # plus 2 real Chromium tabs changing the layer
  python bench/bench_load.py --model gemma3-270m      # the class on a packaged real decoder
  python bench/bench_load.py --mode long              # one visitor types 24 sentences of 400 words, every view
  python bench/bench_load.py --mode slow              # 20 clients that ask for reruns and never read the answers

All of these at once, a class with its worst visitors (long texts through every view, trainings, hostile uploads,
non-readers), and the memory after they left: bench/bench_worst_class.py.

--mode long: one session opens Attention, waits for the warm-up, then types --sentences sentences of --words random
words, moving to the next view (head, grid, lines, aggregate, stats, export) with each; the server's RSS is
sampled throughout. Prints the RSS before the first sentence, the peak, the RSS after the last sentence, and the
RSS once the tab has closed and its session has ended (server.disconnectedSessionTTL + the reaper's period).
--mode slow: --slow clients each open Attention, then stop reading and send --requests reruns with new long
sentences every 0.2 s; meanwhile one reading visitor opens Attention (its wait is printed). Prints the RSS peak, the
RSS while the slow clients are still connected, and after they have left.

Each session is what a browser tab is to the server: one websocket to /_stcore/stream speaking Streamlit's protocol
(bench/st_protocol.py: rerun_script BackMsgs with the page, query string and widget states; ForwardMsgs back), with no
browser, so 20 + 2 sessions fit on the 2 cores the server runs on. A browsing session opens the Attention page (on --model) and
then, until the time is up, changes the layer (the layer selectbox's widget state), types a new sentence of 10-30
random words (the text area's state), and now and then follows a sidebar link to another page and comes back, with
1-3 s of think time between actions (a classroom, not a denial of service). Every rerun is checked: after a layer
change the heatmap's title must name the new layer, after a new sentence its key tokens must be the new words, after
a page switch the page's title must be the new page's; a page not as expected (e.g. an error shown instead) is a
failed action, left out of the timings, and the session goes on. The Attention rerun latency (layer changes and new
sentences) is the time from sending the BackMsg to receiving its script_finished: the server's whole work for that
rerun, every delta sent, nothing of the browser's drawing. A training session opens the Train page (reverse task, --train-seconds
per run), presses Train, answers the progress fragment's auto reruns every 0.5 s as a browser does, and presses Train
again whenever its run has ended; it reports whether its run started or queued (the server allows one training job
per two cores: viz_core.runtime.jobs, ATTN_MAX_TRAINING_JOBS) and how long it waited. A thread samples the server's RSS
(psutil: the server process and its children) every 0.25 s.

Bounded: sessions arrive spread over --arrival s, then run --seconds; one action may take --timeout s (past that,
or on a lost connection, that session ends and is counted); the whole script stops by itself after --deadline s (a watchdog stops the server and
exits). The server listens on 127.0.0.1 only, every connection goes to it, and it is stopped at the end.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import random
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

from bench_browser import WORDS, Server  # noqa: E402
from st_protocol import ProtocolError, Session  # noqa: E402
from viz_core.i18n import t  # noqa: E402

OTHER_PAGES = ("positions", "scaling", "anatomy", "mechanics", "optimizers")
LAYER_KEY, TEXT_KEY, FIG_KEY = "attention.layer.en", "attention.text", "head_fig"
GO_KEY, STOP_KEYS = "train.go", ("train.stop", "train.queue_stop")


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


def new_stats() -> dict:
    stats = {k: [] for k in ("open", "layer", "sentence", "page", "back", "errors", "failed", "first_progress",
                             "queue_wait", "run_s", "chromium")}
    return stats | {"queued": 0, "runs": 0, "actions": 0, "sessions_done": 0}


# ---------------------------------------------------------------- what the page shows
def heatmap(s: Session) -> tuple[str, list[str]]:
    """The one-head heatmap's title and key tokens, from the plotly spec the server sent."""
    spec = next(el for el in s.charts() if el.id.endswith("-" + FIG_KEY)).figure
    title = spec["layout"].get("title", {})
    return str(title.get("text", "") if isinstance(title, dict) else title), list(spec["data"][0].get("x") or [])


def token_of(key: str) -> str:
    """The token of a heatmap key category: "token ·7" for short input, "7·token" from NUMBERED_FROM tokens on."""
    head, sep, rest = key.partition("·")
    return rest if sep and head.isdigit() else key.rsplit(" ·", 1)[0]


def page_title(s: Session) -> str:
    heads = s.find("heading")
    return heads[0].proto.body if heads else ""


def check(ok: bool, what: str) -> None:
    if not ok:
        raise ProtocolError(f"wrong page after {what}")


def shown_error(s: Session) -> str:
    """What an error element on the page says (st.exception / st.error), if any."""
    for el in s.find("exception"):
        return f"exception {el.proto.type}: {el.proto.message[:80]}"
    for el in s.find("alert"):
        if el.proto.format == 1:  # ERROR
            return f"error: {el.proto.body[:80]}"
    return ""


# ---------------------------------------------------------------- sessions
async def browse(url: str, end: float, rng: random.Random, stats: dict, timeout: float, query: str,
                 headers: dict | None = None) -> None:
    """One visitor: change the layer, type a sentence, sometimes another page and back, until `end`. A page not as
    expected (an error shown, a missing widget, the wrong layer) counts as a failed action and the visitor goes on;
    a rerun past --timeout or a lost connection ends the visit."""
    attention = t("common.nav_attention", "en")
    action, s, t0 = "open", None, time.monotonic()
    try:
        async with Session(url, timeout=timeout, auto_reruns=True, headers=headers or {}) as s:
            run = await s.open("/", query)
            stats["open"].append(run.latency)
            title = ""
            while True:
                await asyncio.sleep(rng.uniform(1.0, 3.0))  # a person reads, then acts
                if time.monotonic() >= end:
                    break
                action = rng.choices(("layer", "sentence", "page"), weights=(4, 4, 1))[0]
                try:
                    title = await _act(s, action, rng, title, stats, attention)
                    stats["actions"] += 1
                except ProtocolError as exc:  # the page is not as expected: counted, and the visitor goes on
                    stats["failed"].append(f"{action} at {time.monotonic() - t0:.0f} s: {exc} {shown_error(s)}"
                                           .strip())
        stats["sessions_done"] += 1
    except Exception as exc:  # noqa: BLE001 - a stuck session is counted, the others go on
        msg = str(exc).splitlines()[0][:120] if str(exc) else ""
        stats["errors"].append(f"{type(exc).__name__} ({action}): {msg}")


async def _act(s: Session, action: str, rng: random.Random, title: str, stats: dict, attention: str) -> str:
    """One action of a visitor on the Attention page; returns the heatmap's title after it."""
    if action == "layer":
        box = s.widget(LAYER_KEY, "selectbox").proto
        layer = rng.choice([o for o in box.options if f"Layer {o}," not in title])
        run = await s.set_widget(box.id, string_value=layer)
        title, _ = heatmap(s)
        check(title.startswith(f"Layer {layer},"), f"layer {layer} (title {title!r})")
        stats["layer"].append(run.latency)
    elif action == "sentence":
        words = [rng.choice(WORDS) for _ in range(rng.randint(10, 30))]
        run = await s.set_widget(s.widget(TEXT_KEY, "text_area").id, string_value=" ".join(words))
        title, keys = heatmap(s)
        shown = "".join(token_of(k).lstrip("▁Ġ ").removeprefix("##") for k in keys)  # WordPiece, SentencePiece and
        check("".join(words) in shown, "a new sentence")  # byte-level labels; a word in one token or several
        stats["sentence"].append(run.latency)
    else:
        stem = rng.choice(OTHER_PAGES)
        run = await s.follow(t(f"common.nav_{stem}", "en"))
        check(page_title(s) == t(f"{stem}.title", "en"), f"opening {stem}")
        stats["page"].append(run.latency)
        await asyncio.sleep(rng.uniform(1.0, 3.0))
        run = await s.follow(attention)
        check(page_title(s) == t("attention.title", "en"), "coming back to Attention")
        title, _ = heatmap(s)
        stats["back"].append(run.latency)
    return title


async def train(url: str, end: float, stats: dict, timeout: float, seconds: int, headers: dict | None = None) -> None:
    """One trainer: press Train, wait for the run to end, press again, until `end` (then Stop)."""
    try:
        async with Session(url, timeout=timeout, auto_reruns=True, headers=headers or {}) as s:
            await s.open("/train", f"lang=en&task=reverse&seconds={seconds}")
            while time.monotonic() < end:
                if s.widget(GO_KEY, "button").proto.disabled:  # a run of ours is still going
                    await asyncio.sleep(0.25)
                    continue
                run = await s.click(s.widget(GO_KEY, "button").id)
                clicked = run.sent
                if s.find("progress"):
                    first = run.latency
                else:  # queued: the page says so, with a Stop button for the queue
                    check(any(el.id.endswith("-train.queue_stop") for el in s.find("button")), "pressing Train")
                    stats["queued"] += 1
                    while not s.find("progress") and time.monotonic() < end:
                        await asyncio.sleep(0.1)
                    if not s.find("progress"):
                        break  # still in line when the time is up
                    stats["queue_wait"].append(time.perf_counter() - run.finished)
                    first = time.perf_counter() - clicked
                stats["runs"] += 1
                stats["first_progress"].append(first)
                started = time.perf_counter()
                while time.monotonic() < end + 2 * timeout and s.widget(GO_KEY, "button").proto.disabled:
                    await asyncio.sleep(0.25)  # the fragment draws progress; the page reruns once the run ends
                if not s.widget(GO_KEY, "button").proto.disabled:
                    stats["run_s"].append(time.perf_counter() - started)
            for key in STOP_KEYS:  # time is up: stop a run in progress or leave the queue, as a person would
                live = [el for el in s.find("button") if el.id.endswith("-" + key) and not el.proto.disabled]
                if live:
                    await s.click(live[0].id)
                    break
    except Exception as exc:  # noqa: BLE001
        stats["errors"].append(f"trainer {type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}")


async def chromium_tabs(url: str, n: int, end: float, seed: int, stats: dict, timeout: float) -> None:
    """Optional: a few real Chromium tabs (Playwright) doing the same as `browse`, timed in the browser."""
    if n <= 0:
        return
    from playwright.async_api import async_playwright

    from bench_browser import CHROMIUM, CHROMIUM_ARGS
    ready = """([title]) => { const app = document.querySelector("[data-testid='stApp']");
      if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
      const gd = document.querySelector(".st-key-head_fig .js-plotly-plot");
      return !!gd && !!gd.layout && String((gd.layout.title || {}).text || '').startsWith(title); }"""

    async def tab(browser, rng):
        ctx = await browser.new_context(viewport={"width": 1400, "height": 1000})
        page = await ctx.new_page()
        try:
            await page.goto(url + "/?lang=en", wait_until="domcontentloaded", timeout=timeout * 1000)
            await page.wait_for_function(ready, arg=["Layer "], timeout=timeout * 1000)
            layer = None
            while True:
                await page.wait_for_timeout(rng.randint(1000, 3000))
                if time.monotonic() >= end:
                    break
                layer = rng.choice([x for x in range(6) if x != layer])
                await page.get_by_role("combobox", name=t("attention.layer", "en"), exact=True).click()
                t0 = time.perf_counter()
                await page.get_by_role("option", name=str(layer), exact=True).click()
                await page.wait_for_function(ready, arg=[f"Layer {layer},"], timeout=timeout * 1000, polling=50)
                stats["chromium"].append(time.perf_counter() - t0)
        except Exception as exc:  # noqa: BLE001
            stats["errors"].append(f"chromium {type(exc).__name__}: {str(exc).splitlines()[0][:100]}")
        finally:
            await ctx.close()

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            await asyncio.gather(*(tab(browser, random.Random(seed + 1000 + i)) for i in range(n)))
        finally:
            await browser.close()


async def _staggered(coro, delay: float):
    await asyncio.sleep(delay)
    return await coro


async def scenario(args, n_trainers: int) -> dict:
    stats = new_stats()
    server = Server()
    try:
        await asyncio.to_thread(server.__enter__)
        mem = Memory(server.proc.pid)
        mem.start()
        # warm the model once (as any earlier visitor would have), then everybody arrives within --arrival seconds
        query = "lang=en" + (f"&model={args.model}" if args.model else "")
        async with Session(server.url, timeout=300) as first:
            stats["cold_open"] = (await first.open("/", query)).latency
        rss_idle = mem.peak
        server_cpu0, me0 = _cpu(server.proc.pid), _cpu(os.getpid(), children=False)
        t0 = time.monotonic()
        end = t0 + args.arrival + args.seconds
        jobs = [train(server.url, end, stats, args.timeout, args.train_seconds) for _ in range(n_trainers)]
        jobs += [browse(server.url, end, random.Random(args.seed + i), stats, args.timeout, query)
                 for i in range(args.browsers)]
        staggered = [_staggered(job, args.arrival * i / max(1, len(jobs))) for i, job in enumerate(jobs)]
        staggered.append(chromium_tabs(server.url, args.chromium, end, args.seed, stats, args.timeout))
        await asyncio.gather(*staggered)
        stats["wall"] = time.monotonic() - t0
        stats["server_cpu"] = _cpu(server.proc.pid) - server_cpu0
        stats["driver_cpu"] = _cpu(os.getpid(), children=False) - me0
        stats["rss_peak"], stats["rss_idle"] = mem.stop(), rss_idle
    finally:
        await asyncio.to_thread(server.__exit__)
    return stats


def _cpu(pid: int, children: bool = True) -> float:
    """CPU seconds (user + system) of a process (and its live children)."""
    try:
        procs = [psutil.Process(pid)]
        procs += procs[0].children(recursive=True) if children else []
        return sum(sum(p.cpu_times()[:2]) for p in procs)
    except psutil.Error:
        return float("nan")


# ---------------------------------------------------------------- report
def pct(xs: list[float], q: float) -> float:
    """Nearest-rank percentile."""
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))] if xs else float("nan")


def dist(xs: list[float]) -> str:
    return f"{pct(xs, .5):.2f} / {pct(xs, .95):.2f} / {max(xs):.2f} s (n={len(xs)})" if xs else "–"


def report(args, results: list[tuple[int, dict]]) -> None:
    print(f"\n{args.browsers} browsing sessions on {args.model or 'the packaged encoder'} (arrivals over "
          f"{args.arrival:.0f} s, then {args.seconds:.0f} s; think time 1-3 s), server on 127.0.0.1, "
          f"{psutil.cpu_count()} cores")
    print("\n| trainers | actions done | failed actions | sessions ended early (timeouts) | Attention rerun "
          "p50 / p95 / max | page switch p50 / p95 | back to Attention p50 / p95 | server peak RSS | training |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n_trainers, s in results:
        rerun = s["layer"] + s["sentence"]
        ended = len(s["errors"])
        timeouts = sum("Timeout" in e for e in s["errors"])
        training = "–"
        if n_trainers:
            training = (f"{s['runs']} runs started, {s['queued']} queued first"
                        + (f" (waited {min(s['queue_wait']):.0f}–{max(s['queue_wait']):.0f} s)"
                           if s["queue_wait"] else ""))
        print(f"| {n_trainers} | {s['actions']} | {len(s['failed'])} | {ended} ({timeouts}) | {dist(rerun)} | "
              f"{pct(s['page'], .5):.2f} / {pct(s['page'], .95):.2f} s | "
              f"{pct(s['back'], .5):.2f} / {pct(s['back'], .95):.2f} s | {s['rss_peak'] / 2**20:.0f} MiB | "
              f"{training} |")
    for n_trainers, s in results:
        print(f"\n{n_trainers} trainers: layer change {dist(s['layer'])}; new sentence {dist(s['sentence'])}; "
              f"first open {dist(s['open'])} (the very first, cold: {s['cold_open']:.1f} s)")
        print(f"  RSS after the first page {s['rss_idle'] / 2**20:.0f} MiB, peak {s['rss_peak'] / 2**20:.0f} MiB; "
              f"CPU over {s['wall']:.0f} s: server {s['server_cpu']:.0f} s, this driver {s['driver_cpu']:.0f} s")
        if n_trainers:
            print(f"  training: Train -> first progress {dist(s['first_progress'])}; run lengths {dist(s['run_s'])}")
        if s["chromium"]:
            print(f"  Chromium tabs, layer change -> heatmap drawn: {dist(s['chromium'])}")
        if s["errors"]:
            print(f"  sessions ended early: {sorted(set(s['errors']))[:4]}")
        if s["failed"]:
            print(f"  failed actions: {len(s['failed'])} (the page was not as expected; left out of the timings):")
            for line in s["failed"][:4]:
                print(f"    {line[:200]}")


async def amain(args) -> None:
    start = time.monotonic()
    results = []
    for n_trainers in args.trainers:
        budget = args.deadline - (time.monotonic() - start)
        if budget < args.arrival + args.seconds + 60:
            print(f"(deadline: the scenario with {n_trainers} trainers was skipped)")
            continue
        try:
            results.append((n_trainers, await asyncio.wait_for(scenario(args, n_trainers), timeout=budget - 10)))
        except asyncio.TimeoutError:
            print(f"(deadline: the scenario with {n_trainers} trainers did not finish)")
    report(args, results)


# ---------------------------------------------------------------- memory of one visitor, and clients that never read
def rss(pid: int) -> int:
    try:
        proc = psutil.Process(pid)
        return sum(p.memory_info().rss for p in [proc] + proc.children(recursive=True))
    except psutil.Error:
        return 0


async def _settled(pid: int, seconds: float = 60) -> int:
    """The server's RSS once it stops moving (the warm-up loads torch behind the first page)."""
    end, last = time.monotonic() + seconds, rss(pid)
    while time.monotonic() < end:
        await asyncio.sleep(3)
        now = rss(pid)
        if abs(now - last) < 8 * 2**20:
            return now
        last = now
    return last


async def _after_leaving(pid: int, seconds: float) -> int:
    """The server's RSS once the ended sessions are gone: the lowest reading within `seconds`."""
    low, end = rss(pid), time.monotonic() + seconds
    while time.monotonic() < end:
        await asyncio.sleep(5)
        low = min(low, rss(pid))
    return low


VIEWS = ("head", "grid", "lines", "aggregate", "stats", "export")
VIEW_KEYS = {"head": "head_fig", "grid": "grid_fig", "aggregate": "agg_fig", "stats": "stats_fig", "export": "dl_npz"}


async def long_sentences(args) -> dict:
    rng = random.Random(args.seed)
    out = {"latency": []}
    server = Server()
    try:
        await asyncio.to_thread(server.__enter__)
        pid = server.proc.pid
        mem = Memory(pid)
        async with Session(server.url, timeout=args.timeout) as s:
            await s.open("/", "lang=en" + (f"&model={args.model}" if args.model else ""))
            out["before"] = await _settled(pid)
            mem.start()
            for i in range(args.sentences):
                view = VIEWS[i % len(VIEWS)]
                await s.set_widget(s.widget("attention.view.en", "radio").id, string_value=t(f"attention.view_{view}", "en"))
                text = " ".join(rng.choice(WORDS) for _ in range(args.words))
                run = await s.set_widget(s.widget(TEXT_KEY, "text_area").id, string_value=text)
                out["latency"].append(run.latency)
                if view in VIEW_KEYS:
                    s.widget(VIEW_KEYS[view])  # the view is the one asked for (ProtocolError otherwise)
                else:
                    check(bool(s.find("iframe")), f"the {view} view")
            out["last"] = rss(pid)
        out["peak"] = mem.stop()
        out["ended"] = await _after_leaving(pid, args.after)
    finally:
        await asyncio.to_thread(server.__exit__)
    return out


async def slow_clients(args) -> dict:
    out = {}
    server = Server()
    try:
        await asyncio.to_thread(server.__enter__)
        pid = server.proc.pid
        async with Session(server.url, timeout=args.timeout) as first:
            await first.open("/", "lang=en")
            out["before"] = await _settled(pid)
        mem = Memory(pid)
        mem.start()

        async def hostile(i: int) -> Session:
            s = Session(server.url, timeout=args.timeout)
            await s.connect()
            await s.open("/", "lang=en")
            box, rng = s.widget(TEXT_KEY, "text_area").id, random.Random(args.seed + i)
            s._reader.cancel()  # from now on this client reads nothing
            for _ in range(args.requests):
                s._set(box, string_value=" ".join(rng.choice(WORDS) for _ in range(args.words)))
                try:
                    await s.rerun(wait=False)
                except Exception:  # noqa: BLE001 - the server closed the connection
                    break
                await asyncio.sleep(0.2)
            return s

        slow = await asyncio.gather(*(_staggered(hostile(i), 0.1 * i) for i in range(args.slow)))
        t0 = time.perf_counter()
        async with Session(server.url, timeout=args.timeout) as visitor:
            await visitor.open("/", "lang=en")
        out["visitor_open"] = time.perf_counter() - t0
        await asyncio.sleep(10)
        out["connected"] = rss(pid)
        for s in slow:
            await s.close()
        out["peak"] = mem.stop()
        out["ended"] = await _after_leaving(pid, args.after)
    finally:
        await asyncio.to_thread(server.__exit__)
    return out


def report_long(args, r: dict) -> None:
    mb = lambda b: f"{b / 2**20:.0f} MB"  # noqa: E731
    print(f"\none visitor, {args.sentences} sentences of {args.words} random words, a new view with each "
          f"({', '.join(VIEWS)}), server on 127.0.0.1, {psutil.cpu_count()} cores")
    print("\n| RSS before the first sentence | peak | after the last sentence | peak - before | after the session "
          "ended | rerun p50 / max |")
    print("|---|---|---|---|---|---|")
    print(f"| {mb(r['before'])} | {mb(r['peak'])} | {mb(r['last'])} | {mb(r['peak'] - r['before'])} | "
          f"{mb(r['ended'])} | {pct(r['latency'], .5):.2f} / {max(r['latency']):.2f} s |")


def report_slow(args, r: dict) -> None:
    mb = lambda b: f"{b / 2**20:.0f} MB"  # noqa: E731
    print(f"\n{args.slow} clients that never read, each sending {args.requests} reruns with {args.words}-word "
          f"sentences every 0.2 s; server on 127.0.0.1, {psutil.cpu_count()} cores")
    print("\n| RSS before | peak | while they are connected | after they left | a reading visitor's first page |")
    print("|---|---|---|---|---|")
    print(f"| {mb(r['before'])} | {mb(r['peak'])} | {mb(r['connected'])} | {mb(r['ended'])} | "
          f"{r['visitor_open']:.2f} s |")


def class_options(p: argparse.ArgumentParser) -> None:
    """The options of a class's timing (this script's and bench_replicas.py's)."""
    p.add_argument("--seconds", type=float, default=60, help="length of each scenario after the arrivals (≤ 600)")
    p.add_argument("--arrival", type=float, default=15, help="the sessions arrive spread over this many seconds")
    p.add_argument("--train-seconds", type=int, default=20, help="each training run's time limit (the page's slider)")
    p.add_argument("--timeout", type=float, default=60, help="seconds one action may take before it counts as failed")
    p.add_argument("--seed", type=int, default=0)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--browsers", type=int, default=20, help="browsing sessions (at most 60)")
    p.add_argument("--trainers", type=lambda s: [int(x) for x in s.split(",")], default=[2, 0],
                   help="training sessions per scenario, comma-separated (default 2,0)")
    class_options(p)
    p.add_argument("--chromium", type=int, default=0, help="also this many real Chromium tabs (layer changes only)")
    p.add_argument("--deadline", type=float, default=480, help="the whole script stops by itself after this")
    p.add_argument("--model", default="", help="the Attention page's model for the browsing sessions (default: the "
                   "packaged encoder; e.g. gemma3-270m, smollm2-135m: the packaged decoders)")
    p.add_argument("--app-root", default=None, help="run the app of another tree (e.g. an older checkout)")
    p.add_argument("--mode", choices=("class", "long", "slow"), default="class",
                   help="class: many browsing visitors (default); long: one visitor's long sentences; slow: clients "
                        "that never read")
    p.add_argument("--sentences", type=int, default=24, help="--mode long: sentences typed")
    p.add_argument("--words", type=int, default=400, help="--mode long / slow: words per sentence")
    p.add_argument("--slow", type=int, default=20, help="--mode slow: clients that never read")
    p.add_argument("--requests", type=int, default=30, help="--mode slow: reruns each of them asks for")
    p.add_argument("--after", type=float, default=150,
                   help="--mode long / slow: seconds to watch the RSS after the sessions closed (their sessions "
                        "end 120 s later)")
    args = p.parse_args(argv)
    args.browsers, args.seconds = min(args.browsers, 60), min(args.seconds, 600)
    if args.app_root:
        import bench_browser
        bench_browser.APP_ROOT = Path(args.app_root).resolve()
    watchdog = threading.Timer(args.deadline + 30, _give_up)
    watchdog.daemon = True
    watchdog.start()
    if args.mode == "long":
        report_long(args, asyncio.run(long_sentences(args)))
    elif args.mode == "slow":
        report_slow(args, asyncio.run(slow_clients(args)))
    else:
        asyncio.run(amain(args))
    watchdog.cancel()
    return 0


def _give_up() -> None:
    """The hard stop: past the deadline, stop every server this script started and exit."""
    me = psutil.Process()
    for child in me.children(recursive=True):
        try:
            child.terminate()
        except psutil.Error:
            pass
    print("(hard deadline reached: stopped)", flush=True)
    os._exit(2)


if __name__ == "__main__":
    sys.exit(main())
