"""The server's CPU time for one Attention rerun, without a browser: what each visitor's action costs a shared server
(20 visitors + 2 trainings on 2 cores queue for Python's lock, so this is what their p95 waits on).

  python bench/bench_rerun_cpu.py                          # this tree
  python bench/bench_rerun_cpu.py --app-root /tmp/old .    # two trees, rounds interleaved (old, new, new, old, ...)
  python bench/bench_rerun_cpu.py --model gemma3-270m      # on a packaged real decoder

One session per tree (bench/st_protocol.py, the protocol a browser tab speaks) opens Attention, waits for the warm-up,
then each round makes --actions layer changes (the heatmap of another layer) and --actions new sentences of 10-30
random words, one after the other. Prints, per tree and action, the server process's CPU time per action (user +
system, psutil, numpy's and the event loop's work included) and the median rerun -> script_finished latency.
Nothing else should run on the machine meanwhile.
"""
from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

import bench_browser as bb  # noqa: E402 - the same server start / stop
from bench_load import LAYER_KEY, TEXT_KEY, heatmap  # noqa: E402
from st_protocol import Session  # noqa: E402

ACTIONS = ("layer", "sentence")


async def one_action(s: Session, kind: str, rng: random.Random) -> float:
    """A layer other than the one shown, or a new sentence; returns the rerun's latency."""
    if kind == "layer":
        box = s.widget(LAYER_KEY, "selectbox").proto
        title, _ = heatmap(s)
        layer = rng.choice([o for o in box.options if f"Layer {o}," not in title])
        run = await s.set_widget(box.id, string_value=layer)
    else:
        words = [rng.choice(bb.WORDS) for _ in range(rng.randint(10, 30))]
        run = await s.set_widget(s.widget(TEXT_KEY, "text_area").id, string_value=" ".join(words))
    return run.latency


async def interleaved(roots: list[Path], actions: tuple[str, ...], rounds: int, n: int, open_tabs, act,
                      settle_s: float = 10) -> dict:
    """One server per tree; open_tabs(url) -> {action: an opened Session}; act(session, action, rng, i) -> a rerun's
    latency. After settle_s (the warm-up) and a warm-up round of 3, `rounds` rounds of n actions each, the trees in
    alternating order; returns {root: {action: {"cpu": [per round, per action], "lat": [per action]}}}, the CPU being
    the server process's user + system time."""
    servers = {r: bb.Server(root=r) for r in roots}
    out = {r: {k: {"cpu": [], "lat": []} for k in actions} for r in roots}

    async def measure(order: list, count: int, into: dict) -> None:
        for root in order:
            for kind in actions:
                before = sum(procs[root].cpu_times()[:2])
                lat = [await act(tabs[root][kind], kind, rng, i) for i in range(count)]
                into[root][kind]["cpu"].append((sum(procs[root].cpu_times()[:2]) - before) / count)
                into[root][kind]["lat"] += lat

    try:
        for server in servers.values():
            bb.wait_healthy(server.url, 120)
        procs = {r: psutil.Process(servers[r].proc.pid) for r in roots}
        tabs = {r: await open_tabs(servers[r].url) for r in roots}
        await asyncio.sleep(settle_s)  # the warm-up (imports, the model) ends before the first action is timed
        rng = random.Random(0)
        await measure(roots, 3, {r: {k: {"cpu": [], "lat": []} for k in actions} for r in roots})
        for i in range(rounds):
            await measure(roots if i % 2 == 0 else roots[::-1], n, out)
        for by_kind in tabs.values():
            for s in {id(s): s for s in by_kind.values()}.values():  # a tab shared by actions closes once
                await s.close()
    finally:
        for server in servers.values():
            bb.stop_server(server.proc)
    return out


async def run(roots: list[Path], rounds: int, n: int, model: str = "") -> dict:
    async def open_tabs(url: str) -> dict:
        s = Session(url, timeout=120)
        await s.connect()
        await s.open("/", "lang=en" + (f"&model={model}" if model else ""))
        return {kind: s for kind in ACTIONS}  # one tab for both actions

    return await interleaved(roots, ACTIONS, rounds, n, open_tabs, lambda s, kind, rng, _i: one_action(s, kind, rng))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--app-root", nargs="+", default=[str(ROOT)], help="one or two trees whose app.py to run")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--actions", type=int, default=20, help="layer changes and new sentences per round")
    p.add_argument("--model", default="", help="the Attention page's model (default: the packaged encoder)")
    args = p.parse_args(argv)
    roots = [Path(r).resolve() for r in args.app_root]
    out = asyncio.run(run(roots, args.rounds, args.actions, args.model))
    print_table(out, roots, ACTIONS, f"server CPU per Attention rerun (user + system), medians of {args.rounds} "
                f"rounds of {args.actions}; rerun -> script_finished median")
    return 0


def print_table(out: dict, roots: list[Path], actions: tuple[str, ...], heading: str) -> None:
    """A markdown table, a row per action and a column per tree: the median CPU per action (its rounds' range) and
    the median latency. out: {root: {action: {"cpu": [per round], "lat": [per action]}}}."""
    print(f"\n{heading}")
    print("\n| action | " + " | ".join(str(r) for r in roots) + " |\n|---|" + "---|" * len(roots))
    for kind in actions:
        cells = (f"{statistics.median(out[r][kind]['cpu']) * 1000:.0f} ms CPU "
                 f"({min(out[r][kind]['cpu']) * 1000:.0f}–{max(out[r][kind]['cpu']) * 1000:.0f}); "
                 f"{statistics.median(out[r][kind]['lat']) * 1000:.0f} ms" for r in roots)
        print(f"| {kind} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    sys.exit(main())
