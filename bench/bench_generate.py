"""The server's CPU time for the Language-model page's generation and KV-cache actions, without a browser: what each
visitor's action costs a shared server.

  python bench/bench_generate.py                           # this tree
  python bench/bench_generate.py --app-root /tmp/old .     # two trees, rounds interleaved (old, new, new, old, ...)

Two sessions per tree (bench/st_protocol.py, the protocol a browser tab speaks) open /language_model at its generate
and its KV-cache tab; per round, the first types --actions new prompts of 3-8 random words (40 new characters each, the page's default, every
step's frames drawn), the second switches MHA -> GQA -> MQA -> ... --actions times. Prints, per
tree and action, the server process's CPU time per action (user + system, psutil) and the median rerun ->
script_finished latency. The first round is a warm-up (a switch to a variant not yet seen runs its model once).
Nothing else should run on the machine meanwhile.
"""
from __future__ import annotations

import argparse
import asyncio
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

import bench_browser as bb  # noqa: E402 - the same server start / stop
from bench_rerun_cpu import interleaved, print_table  # noqa: E402 - the same runner and table
from st_protocol import Session  # noqa: E402

ACTIONS = ("prompt", "kv_switch")
PROMPT_KEY, KV_KEY = "language_model.prompt", "language_model.cache_kv.en"


async def one_action(s: Session, kind: str, rng: random.Random, step: int) -> float:
    if kind == "prompt":
        words = " ".join(rng.choice(bb.WORDS) for _ in range(rng.randint(3, 8)))
        run = await s.set_widget(s.widget(PROMPT_KEY).id, string_value=words + " ")  # a text box (area or input)
    else:
        radio = s.widget(KV_KEY, "radio")  # an option widget's value is its label, as a browser sends it
        run = await s.set_widget(radio.id, string_value=radio.proto.options[(step + 1) % 3])
    return run.latency


async def run(roots: list[Path], rounds: int, n: int) -> dict:
    async def open_tabs(url: str) -> dict:  # one tab per action, each opened at its own tab of the page
        tabs = {}
        for kind in ACTIONS:
            tabs[kind] = s = Session(url, timeout=180)
            await s.connect()
            await s.open("/language_model", "lang=en&tab=" + ("generate" if kind == "prompt" else "cache"))
        return tabs

    # settle: the warm-up and the background timing measurement end before anything is timed
    return await interleaved(roots, ACTIONS, rounds, n, open_tabs, one_action, settle_s=15)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--app-root", nargs="+", default=[str(ROOT)], help="one or two trees whose app.py to run")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--actions", type=int, default=10, help="new prompts and variant switches per round")
    args = p.parse_args(argv)
    roots = [Path(r).resolve() for r in args.app_root]
    out = asyncio.run(run(roots, args.rounds, args.actions))
    print_table(out, roots, ACTIONS, f"server CPU per action (user + system), medians of {args.rounds} rounds of "
                f"{args.actions}; rerun -> script_finished median")
    return 0


if __name__ == "__main__":
    sys.exit(main())
