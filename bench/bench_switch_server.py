"""The server's share of a page switch, without a browser: a sidebar link's rerun -> the script_finished message
(bench/st_protocol.py speaks the websocket protocol a browser tab speaks). Steadier than the browser's switch times
(bench_browser.py --floor), which add the browser's drawing, and comparable between two trees in one run.

  python bench/bench_switch_server.py                          # this tree
  python bench/bench_switch_server.py --app-root /tmp/old .    # two trees, rounds interleaved (old, new, new, old, ...)

Each round is a fresh session (Attention -> every page in sidebar order -> Attention), one warm-up round per tree
first; as in bench_browser.py, a session's end leaves Streamlit's script cache empty when it was the last one.
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

import bench_browser as bb  # noqa: E402 - the same server start / stop
from st_protocol import Session  # noqa: E402

PAGES = bb.SWITCH_PAGES


async def one_round(url: str) -> dict[str, float]:
    """One fresh session: open Attention, then each page's sidebar link in turn: {page: seconds}."""
    out = {}
    async with Session(url, timeout=120) as s:
        await s.open("/", "lang=en")
        for stem in PAGES:
            run = await s.switch_page(stem if stem in s.pages else "", "lang=en")  # (the default page: "")
            out[stem] = run.latency
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--app-root", nargs="+", default=[str(ROOT)], help="one or two trees whose app.py to run")
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args(argv)
    roots = [Path(r).resolve() for r in args.app_root]
    times = {r: {s: [] for s in PAGES} for r in roots}
    servers = {r: bb.Server(root=r) for r in roots}
    try:
        for server in servers.values():
            bb.wait_healthy(server.url, 120)
        for r in range(args.rounds + 1):
            for root in (roots if r % 2 == 0 else roots[::-1]):
                got = asyncio.run(one_round(servers[root].url))
                if r > 0:
                    for stem, dt in got.items():
                        times[root][stem].append(dt)
    finally:
        for server in servers.values():
            bb.stop_server(server.proc)
    print(f"\nserver's share of a sidebar switch (rerun sent -> script_finished), medians of {args.rounds} rounds")
    print("\n| page | " + " | ".join(str(r) for r in roots) + " |\n|---|" + "---|" * len(roots))
    for stem in PAGES:
        cells = (f"{statistics.median(times[r][stem]):.3f} s ({min(times[r][stem]):.3f}–{max(times[r][stem]):.3f})"
                 for r in roots)
        print(f"| {stem} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
