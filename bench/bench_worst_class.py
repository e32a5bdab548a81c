"""A class and its worst visitors at the same time, on one local server. Prints figures; asserts nothing.

  python bench/bench_worst_class.py                     # 30 readers, 2 trainings, 4 hostile uploads, 20 non-readers
  python bench/bench_worst_class.py --visitors 10 --slow 5 --seconds 60 --after 60    # a shorter probe

Everything at once, the way a public server meets it (each part is the same client as in bench_load.py and
bench_uploads.py, through bench/st_protocol.py: a websocket speaking Streamlit's protocol, no browser):
- --visitors readers on the Attention page (the packaged encoder, or --model). Each one, with 1-3 s of thinking
  between actions, changes the layer or the head, moves to another view (any the page's view menu offers: the heatmap,
  the grid, lines, aggregates, statistics, export, sinks, which heads matter, ...), or types a new text of --words
  random words (100-400 by default, so the long inputs of every view). An action whose page shows an error or an
  exception, or lacks the element asked for, is a failed action; the visitor goes on.
- --trainers sessions training the reverse task on the Train page, pressing Train again whenever a run ends.
- --uploads visitors who, a third of the way in, each send a 47 MB zip whose end record claims 65,535+ members, at the
  same moment, through the Train page's uploader.
- --slow clients who, halfway in, open Attention, stop reading their websocket and ask for --requests reruns of
  400-word texts every 0.2 s.

Prints the RSS of the warmed-up server (before anyone else arrives, one visitor has opened every view of the
readers' page on its own text, so their code and the model are loaded, and run one 5 s training, so torch is), the
peak, and the RSS 60 and 150 s (--after) after the last visitor left (Streamlit ends a closed tab's session after
server.disconnectedSessionTTL, 120 s; the reaper runs every 15 s); the readers' rerun p50 / p95 / max for a layer or
head change, for a view change and for new texts; failed actions (and how many were the memory budget's "the server
is busy": a reader refused retries with a new text); the uploads' HTTP statuses and the trainings'
runs; and what the server logged once the last session had ended and it had emptied its caches: where its memory is
(files, glibc's heap, anonymous mappings; app_pages/_ui/memory.report). `--env KEY=VALUE ...` sets the server's
environment (e.g. MALLOC_ARENA_MAX=16 to compare glibc's defaults). Bounded: a run past --timeout ends that visitor (counted); the script stops by itself after --deadline s.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from bench_browser import WORDS, Server  # noqa: E402
from bench_load import (LAYER_KEY, TEXT_KEY, Memory, _settled, check, dist, new_stats, pct, rss,  # noqa: E402
                        shown_error, train)
from bench_uploads import hostile_zip, visitor as upload_visitor  # noqa: E402
from st_protocol import ProtocolError, Session  # noqa: E402

HEAD_KEY, VIEW_KEY = "attention.head.en", "attention.view.en"
MEMORY_LINE = "memory once the last session ended"  # what the server logs when it has emptied its caches
MB = 2**20
BUSY = "The server is busy"  # the start of common.server_busy, the memory budget's refusal


def _fine(s: Session, what: str) -> None:
    """The page after an action shows no error box and no exception (ProtocolError otherwise)."""
    shown = shown_error(s)
    check(not shown, f"{what} ({shown})")


async def _act(s: Session, rng: random.Random, words: tuple[int, int], stats: dict) -> None:
    """One reader's action: a layer, a head, a view, or a new long text; its latency goes to stats."""
    action = rng.choices(("layer", "head", "view", "text"), weights=(3, 2, 2, 2))[0]
    if BUSY in shown_error(s):  # refused by the memory budget: the page has no views to change; a person tries
        action = "text"         # again, with a text
        stats["retries"] = stats.get("retries", 0) + 1
    if action in ("layer", "head"):
        box = s.widget(LAYER_KEY if action == "layer" else HEAD_KEY, "selectbox").proto
        choice = rng.choice([o for i, o in enumerate(box.options) if i != box.default])  # the app draws a widget
        # with its current value as its default
        run = await s.set_widget(box.id, string_value=choice)
        stats["small"].append(run.latency)
    elif action == "view":
        radio = s.widget(VIEW_KEY, "radio").proto
        choice = rng.choice([o for i, o in enumerate(radio.options) if i != radio.default])
        run = await s.set_widget(radio.id, string_value=choice)
        now = s.widget(VIEW_KEY, "radio").proto
        check(now.options[now.default] == choice, f"the view {choice!r}")
        stats["view"].append(run.latency)
    else:
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(*words)))
        run = await s.set_widget(s.widget(TEXT_KEY, "text_area").id, string_value=text)
        stats["text"].append(run.latency)
    _fine(s, action)


async def reader(url: str, end: float, rng: random.Random, stats: dict, args) -> None:
    """One honest visitor on the Attention page until `end`."""
    query = "lang=en" + (f"&model={args.model}" if args.model else "")
    try:
        async with Session(url, timeout=args.timeout, auto_reruns=True) as s:
            stats["open"].append((await s.open("/", query)).latency)
            while True:
                await asyncio.sleep(rng.uniform(1.0, 3.0))
                if time.monotonic() >= end:
                    break
                try:
                    await _act(s, rng, args.words, stats)
                    stats["actions"] += 1
                except ProtocolError as exc:
                    stats["failed"].append(str(exc)[:200])
    except Exception as exc:  # noqa: BLE001 - a stuck visitor is counted, the others go on
        stats["errors"].append(f"{type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}")


async def uploaders(url: str, n: int, delay: float, stats: dict) -> None:
    """n visitors on the Train page, each sending the hostile zip at the same moment after `delay` seconds."""
    if n <= 0:
        return
    tabs = []
    try:
        for _ in range(n):
            s = Session(url, timeout=180)
            await s.connect()
            await s.open("train", "lang=en&tab=save")
            tabs.append(s)
        await asyncio.sleep(delay)
        data = hostile_zip(47 * MB)
        results = await asyncio.gather(*(upload_visitor(url, s, data) for s in tabs), return_exceptions=True)
        stats["uploads"] = sorted(r[0] if isinstance(r, tuple) else type(r).__name__ for r in results)
    except Exception as exc:  # noqa: BLE001
        stats["errors"].append(f"uploader {type(exc).__name__}: {str(exc)[:120]}")
    finally:
        for s in tabs:
            await s.close()


async def non_reader(url: str, i: int, delay: float, args, stats: dict) -> None:
    """A client that opens Attention, stops reading, and asks for reruns of 400-word texts every 0.2 s."""
    await asyncio.sleep(delay + 0.1 * i)
    s = Session(url, timeout=args.timeout)
    try:
        await s.connect()
        await s.open("/", "lang=en")
        box, rng = s.widget(TEXT_KEY, "text_area").id, random.Random(args.seed + 500 + i)
        s._reader.cancel()  # from now on this client reads nothing
        for _ in range(args.requests):
            s._set(box, string_value=" ".join(rng.choice(WORDS) for _ in range(400)))
            try:
                await s.rerun(wait=False)
            except Exception:  # noqa: BLE001 - the server closed the connection
                stats["slow_cut"] += 1
                break
            await asyncio.sleep(0.2)
    except Exception as exc:  # noqa: BLE001
        stats["errors"].append(f"non-reader {type(exc).__name__}: {str(exc)[:120]}")
    finally:
        try:
            await s.close()
        except Exception:  # noqa: BLE001 - already cut by the server
            pass


async def _ended(pid: int, marks: tuple[float, ...]) -> dict[float, int]:
    """The server's RSS at each mark (seconds after now), and the lowest reading up to the last one."""
    start, out, low = time.monotonic(), {}, rss(pid)
    for mark in sorted(marks):
        while time.monotonic() - start < mark:
            await asyncio.sleep(min(5.0, mark - (time.monotonic() - start)))
            low = min(low, rss(pid))
        out[mark] = rss(pid)
    out["low"] = low
    return out


async def scenario(args) -> dict:
    stats = new_stats() | {"small": [], "view": [], "text": [], "uploads": [], "slow_cut": 0}
    log = Path(tempfile.mkdtemp()) / "server.log"
    server = Server(dict(kv.split("=", 1) for kv in args.env), log=log)
    try:
        await asyncio.to_thread(server.__enter__)
        pid = server.proc.pid
        async with Session(server.url, timeout=300) as first:  # the warm-up, as an earlier visitor would have done:
            await first.open("/", "lang=en" + (f"&model={args.model}" if args.model else ""))  # the readers' model,
            radio = first.widget(VIEW_KEY, "radio").proto
            for view in radio.options:  # every view once (each loads its code), on the page's own text
                await first.set_widget(first.widget(VIEW_KEY, "radio").id, string_value=view)
            if args.trainers:  # and torch, which a training loads (the packaged encoder's pages run without it)
                await train(server.url, time.monotonic() + 1, new_stats(), args.timeout, 5)
            stats["warm"] = await _settled(pid)
        mem = Memory(pid)
        mem.start()
        t0 = time.monotonic()
        end = t0 + args.arrival + args.seconds
        jobs = [train(server.url, end, stats, args.timeout, args.train_seconds) for _ in range(args.trainers)]
        jobs += [reader(server.url, end, random.Random(args.seed + i), stats, args) for i in range(args.visitors)]
        staggered = [_later(job, args.arrival * i / max(1, len(jobs))) for i, job in enumerate(jobs)]
        staggered.append(uploaders(server.url, args.uploads, args.arrival + args.seconds / 3, stats))
        staggered += [non_reader(server.url, i, args.arrival + args.seconds / 2, args, stats) for i in range(args.slow)]
        await asyncio.gather(*staggered)
        stats["wall"] = time.monotonic() - t0
        stats["rss_left"] = rss(pid)
        stats["after"] = await _ended(pid, (min(60.0, args.after), args.after))
        stats["rss_peak"] = mem.stop()
    finally:
        await asyncio.to_thread(server.__exit__)
        said = [line for line in log.read_text(errors="replace").splitlines() if MEMORY_LINE in line]
        stats["server_said"] = said[-1].split(MEMORY_LINE)[-1].strip(": ") if said else "(nothing yet)"
    return stats


async def _later(coro, delay: float):
    await asyncio.sleep(delay)
    return await coro


def report(args, s: dict) -> None:
    mb = lambda b: f"{b / MB:,.0f} MB"  # noqa: E731
    print(f"\n{time.strftime('%Y-%m-%d %H:%M')}: {args.visitors} readers ({args.words[0]}-{args.words[1]}-word texts, "
          f"every view, on {args.model or 'the packaged encoder'}), {args.trainers} trainings, {args.uploads} hostile "
          f"uploads, {args.slow} non-readers; arrivals over {args.arrival:.0f} s, then {args.seconds:.0f} s; "
          f"{psutil.cpu_count()} cores")
    print("\n| warmed up | peak | when the last left | 60 s after | "
          f"{args.after:.0f} s after (lowest) | layer or head p50 / p95 / max | view p50 / p95 / max | "
          "new text p50 / p95 / max | "
          "actions (failed; refused as busy) | visitors ended early |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    after = s["after"]
    busy = sum(BUSY in line for line in s["failed"])  # refused by the server's memory budget (viz_core.runtime.budget)
    print(f"| {mb(s['warm'])} | {mb(s['rss_peak'])} | {mb(s['rss_left'])} | {mb(after[min(60.0, args.after)])} | "
          f"{mb(after[args.after])} ({mb(after['low'])}; +{(after['low'] - s['warm']) / MB:.0f} MB) | "
          f"{dist(s['small'])} | {dist(s['view'])} | {dist(s['text'])} | {s['actions']} ({len(s['failed'])}; {busy}) | "
          f"{len(s['errors'])} |")
    print(f"\nretries after a refusal: {s.get('retries', 0)}; uploads: HTTP {s['uploads']}; "
          f"non-readers cut by the server: {s['slow_cut']} of {args.slow}; "
          f"trainings: {s['runs']} runs started, {s['queued']} queued first; first open of the readers "
          f"p50 / p95 {pct(s['open'], .5):.2f} / {pct(s['open'], .95):.2f} s")
    print(f"the server, once the last session ended: {s['server_said']}")
    for line in [f for f in s["failed"] if BUSY not in f][:5]:
        print(f"  failed: {line}")
    for line in sorted(set(s["errors"]))[:5]:
        print(f"  ended early: {line}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--visitors", type=int, default=30, help="honest readers on the Attention page")
    p.add_argument("--words", type=lambda v: tuple(int(x) for x in v.split("-")), default=(100, 400),
                   help="a new text's length in random words, as LO-HI")
    p.add_argument("--trainers", type=int, default=2)
    p.add_argument("--train-seconds", type=int, default=20, help="each training run's time limit")
    p.add_argument("--uploads", type=int, default=4, help="hostile 47 MB zips sent at once")
    p.add_argument("--slow", type=int, default=20, help="clients that never read")
    p.add_argument("--requests", type=int, default=30, help="reruns each non-reader asks for")
    p.add_argument("--model", default="", help="the readers' model (default: the packaged encoder)")
    p.add_argument("--arrival", type=float, default=20, help="the readers arrive spread over this many seconds")
    p.add_argument("--seconds", type=float, default=120, help="length of the class after the arrivals")
    p.add_argument("--after", type=float, default=150, help="seconds to watch the RSS after the last visitor left")
    p.add_argument("--timeout", type=float, default=120, help="seconds one action may take before it counts")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--env", nargs="*", default=[], help="KEY=VALUE settings of the server's environment")
    p.add_argument("--deadline", type=float, default=900, help="the whole script stops by itself after this")
    args = p.parse_args(argv)

    async def bounded():
        return await asyncio.wait_for(scenario(args), timeout=args.deadline)
    report(args, asyncio.run(bounded()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
