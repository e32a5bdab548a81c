"""A class through a real load balancer: replicas of the app behind HAProxy (deploy/replicas.py), on loopback. Prints
figures; asserts nothing.

  python bench/bench_replicas.py                    # 20 visitors on 1 replica, 40 on 1, 40 on 2; 2 trainers each
  python bench/bench_replicas.py --scenarios 1x20,2x40 --seconds 60
  python bench/bench_replicas.py --quick            # a smoke run: 1x4, 2x6, 20 s each

Every visitor is what a browser tab is to the servers: first a GET of the page through HAProxy, which answers with
the affinity cookie (AE_REPLICA=<replica>), then one websocket (bench/st_protocol.py) that carries the cookie, so
HAProxy sends it to that replica. The visitors and trainers are bench/bench_load.py's: a browsing visitor changes
the layer, types a 10-30-word sentence and now and then visits another page and comes back, with 1-3 s of think
time, and every rerun is checked (a page not as expected is a failed action); a trainer trains the reverse task
again and again. For each scenario "RxV" (R replicas, V visitors, --trainers trainers) it prints the actions done,
failed actions, sessions ended early, the Attention rerun p50 / p95 (a layer change or a new sentence, BackMsg to
script_finished), the throughput (checked actions per second), how the visitors spread over the replicas, and each
replica's peak RSS.

Then, on 2 replicas, a replica is killed (SIGKILL, as a crash) while visitors look at their own view of Attention and a
trainer trains on it. Every visitor of the killed replica reconnects as Streamlit's frontend does (a new websocket at
the address it shows, with its cookie: HAProxy sends it to a live replica and sets a new cookie): the bench checks
that its view came back from the address, that the trainer's page says its run was lost, and that the other
replica's visitors noticed nothing. Last, process start -> healthy for a replica and for a bare Streamlit app
(bench/floor_app) in the same run, and the throughput N machines would give at the measured p95.

All servers listen on 127.0.0.1 only and are stopped at the end; the whole script stops by itself after --deadline s.
On one 2-core machine the replicas share the same two cores (and the driver runs there too): the 2-replica figure
shows what affinity and balancing cost and that the load spreads, not what a second machine adds.
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "deploy"))
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import bench_load  # noqa: E402
from bench_browser import free_port, start_server, stop_server  # noqa: E402
from bench_load import Memory, dist, new_stats, pct  # noqa: E402
from replicas import Replicas, free_base_port, replica_of, sticky_cookie, wait_healthy  # noqa: E402
from st_protocol import Session  # noqa: E402
from viz_core.i18n import t  # noqa: E402

LOST_KEY = "train.lost"   # the Train page's warning for a run its server no longer has


async def cookie_for(url: str, old: str = "") -> str:
    """The affinity cookie a browser gets (or keeps) on its GET of the page."""
    return await asyncio.to_thread(sticky_cookie, url, old)


async def warm(lb: Replicas, query: str) -> None:
    """Open the page once on every replica (as earlier visitors would have), so no scenario times a cold model."""
    for replica in lb.replicas:
        async with Session(replica.url, timeout=300) as s:
            await s.open("/", query)


async def class_scenario(args, n_replicas: int, n_visitors: int) -> dict:
    """n_visitors browsing and args.trainers training through HAProxy in front of n_replicas."""
    stats = new_stats() | {"spread": {}}
    with Replicas(n_replicas, port=free_base_port(n_replicas)) as lb:
        mems = {r.name: Memory(r.proc.pid) for r in lb.replicas}
        for mem in mems.values():
            mem.start()
        query = "lang=en"
        await warm(lb, query)
        t0 = time.monotonic()
        end = t0 + args.arrival + args.seconds

        async def visitor(i: int, job: str) -> None:
            await asyncio.sleep(args.arrival * i / max(1, n_visitors + args.trainers))
            cookie = await cookie_for(lb.url)
            stats["spread"][replica_of(cookie)] = stats["spread"].get(replica_of(cookie), 0) + 1
            headers = {"Cookie": cookie}
            if job == "train":
                await bench_load.train(lb.url, end, stats, args.timeout, args.train_seconds, headers)
            else:
                await bench_load.browse(lb.url, end, random.Random(args.seed + i), stats, args.timeout, query,
                                        headers)

        jobs = ["train"] * args.trainers + ["browse"] * n_visitors
        await asyncio.gather(*(visitor(i, job) for i, job in enumerate(jobs)))
        stats["wall"] = time.monotonic() - t0
        stats["rss_peaks"] = {name: mem.stop() for name, mem in mems.items()}
    return stats


# ---------------------------------------------------------------- a replica dies
async def failover(args) -> dict:
    """Visitors on their own views and a trainer on 2 replicas; the trainer's replica is killed; everyone of it
    reconnects through HAProxy. Returns what came back."""
    out = {"reconnect_s": [], "view_back": 0, "view_lost": [], "survivors_ok": 0, "survivors_failed": [],
           "training_reported_lost": False}
    with Replicas(2, port=free_base_port(2)) as lb:
        await warm(lb, "lang=en")
        tabs = []  # (session, cookie, path)
        for i in range(args.failover_visitors):
            cookie = await cookie_for(lb.url)
            s = Session(lb.url, timeout=args.timeout, headers={"Cookie": cookie})
            await s.connect()
            view = ("grid", "head", "stats")[i % 3]
            await s.open("/", f"lang=en&view={view}&layer={i % 6}")
            s.widget(bench_load.VIEW_KEYS[view])  # the view asked for is drawn (ProtocolError otherwise)
            tabs.append((s, cookie, view))
        cookie = await cookie_for(lb.url)
        trainer = Session(lb.url, timeout=args.timeout, auto_reruns=True, headers={"Cookie": cookie})
        await trainer.connect()
        await trainer.open("/train", "lang=en&task=reverse&seconds=120")
        await trainer.click(trainer.widget(bench_load.GO_KEY, "button").id)
        victim = replica_of(cookie)
        out["victim"], out["spread"] = victim, sorted(replica_of(c) for _, c, _ in tabs)
        out["trainer_address"] = trainer.query
        await asyncio.sleep(2)  # it trains
        lb.kill(victim)
        killed_at = time.perf_counter()
        for s, old, view in tabs:
            if replica_of(old) != victim:  # the other replica's visitor: still there, and still working
                try:
                    await s.set_widget(s.widget(bench_load.LAYER_KEY, "selectbox").id, string_value="5")
                    out["survivors_ok"] += 1
                except Exception as exc:  # noqa: BLE001
                    out["survivors_failed"].append(f"{type(exc).__name__}: {exc}"[:120])
                await s.close()
                continue
            before = s.query
            await s.close()
            fresh, seconds = await reconnect(lb.url, old, "/", before, args.timeout, killed_at)
            out["reconnect_s"].append(seconds)
            drawn = any(el.id.endswith("-" + bench_load.VIEW_KEYS[view]) for el in fresh.elements.values())
            if fresh.query == before and drawn and replica_of(fresh.headers["Cookie"]) != victim:
                out["view_back"] += 1
            else:
                out["view_lost"].append(f"{before} -> {fresh.query} (view drawn: {drawn})")
            await fresh.close()
        address = trainer.query  # the address the page showed when its replica died
        await trainer.close()
        fresh, _ = await reconnect(lb.url, cookie, "/train", address, args.timeout, killed_at)
        out["trainer_address_before"] = address
        lost = t(LOST_KEY, "en")
        out["training_reported_lost"] = any(lost[:40] in el.proto.body for el in fresh.find("alert"))
        out["new_replica"] = replica_of(fresh.headers["Cookie"])
        await fresh.close()
    return out


async def reconnect(url: str, old: str, path: str, query: str, timeout: float, since: float) -> tuple[Session, float]:
    """A browser tab whose websocket dropped: it tries again (with its cookie) until a replica answers, and opens a
    new session at the address it shows. Returns the session and the seconds since `since`."""
    end = time.monotonic() + timeout
    while True:
        try:
            cookie = await cookie_for(url, old)
            s = Session(url, timeout=timeout, headers={"Cookie": cookie})
            await s.connect()
            await s.open(path, query)
            return s, time.perf_counter() - since
        except (OSError, ConnectionError) as exc:
            if time.monotonic() > end:
                raise TimeoutError("no replica answered") from exc
            await asyncio.sleep(0.5)  # the frontend's reconnect backoff starts about here


# ---------------------------------------------------------------- start to healthy
def start_times(runs: int) -> dict:
    """Process start -> /_stcore/health for a replica of the app and for the bare floor app, alternating."""
    times = {"app": [], "floor": []}
    for _ in range(runs):
        for kind, root in (("app", ROOT), ("floor", ROOT / "bench" / "floor_app")):
            port = free_port()
            t0 = time.perf_counter()
            proc = start_server(port, root=root)
            try:
                wait_healthy(f"http://127.0.0.1:{port}", 120, proc)
                times[kind].append(time.perf_counter() - t0)
            finally:
                stop_server(proc)
    return times


# ---------------------------------------------------------------- report
def report_class(args, results: list[tuple[int, int, dict]]) -> None:
    print(f"\nA class through HAProxy ({args.trainers} trainers each; arrivals over {args.arrival:.0f} s, then "
          f"{args.seconds:.0f} s; think time 1-3 s; {os.cpu_count()} cores shared by every replica and this driver)")
    print("\n| replicas | visitors | actions done | failed actions | ended early | Attention rerun p50 / p95 / max | "
          "checked actions / s | visitors per replica | peak RSS per replica | training runs |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n, v, s in results:
        rerun = s["layer"] + s["sentence"]
        spread = ", ".join(f"{k} {c}" for k, c in sorted(s["spread"].items()))
        rss = ", ".join(f"{m / 2**20:.0f}" for _, m in sorted(s["rss_peaks"].items()))
        print(f"| {n} | {v} | {s['actions']} | {len(s['failed'])} | {len(s['errors'])} | {dist(rerun)} | "
              f"{s['actions'] / s['wall']:.2f} | {spread} | {rss} MiB | {s['runs']} ({s['queued']} queued) |")
    for n, v, s in results:
        if s["errors"] or s["failed"]:
            print(f"  {n}x{v}: ended early {sorted(set(s['errors']))[:3]}; failed {s['failed'][:3]}")
    singles = [(v, s) for n, v, s in results if n == 1]
    if not singles:
        return
    v1, base = min(singles, key=lambda vs: vs[0])
    p95 = pct(base["layer"] + base["sentence"], .95)
    print()
    for n, v, s in results:
        if s is not base:
            ratio = pct(s["layer"] + s["sentence"], .95) / p95
            print(f"{n} replica(s), {v} visitors: rerun p95 {ratio:.2f}x that of {v1} visitors on 1 replica")
    per = base["actions"] / base["wall"]
    print(f"\nScaling to N machines, one replica each (extrapolated from {v1} visitors on 1 replica: each machine "
          f"serves its visitors at that p95 of {p95:.2f} s; HAProxy adds a few ms per request):")
    print("| machines | visitors | checked actions / s |")
    print("|---|---|---|")
    for machines in (1, 2, 4, 8):
        print(f"| {machines} | {machines * v1} | {machines * per:.1f} |")


def report_failover(r: dict) -> None:
    print(f"\nA replica killed (SIGKILL) on 2 replicas: visitors spread {r['spread']}, the trainer's replica "
          f"{r['victim']} killed")
    print("| its visitors' view back from the address | reconnect p50 / max | other replica's visitors unaffected | "
          "training reported lost on the new replica |")
    print("|---|---|---|---|")
    n = r["view_back"] + len(r["view_lost"])
    rec = r["reconnect_s"]
    print(f"| {r['view_back']} of {n} | {pct(rec, .5):.2f} / {max(rec, default=float('nan')):.2f} s | "
          f"{r['survivors_ok']} of {r['survivors_ok'] + len(r['survivors_failed'])} | "
          f"{'yes' if r['training_reported_lost'] else 'NO'} (on {r['new_replica']}) |")
    for line in r["view_lost"][:3] + r["survivors_failed"][:3]:
        print(f"  {line}")


def report_start(times: dict) -> None:
    app, floor = times["app"], times["floor"]
    if app and floor:
        print(f"\nProcess start -> healthy: a replica {pct(app, .5):.2f} s (n={len(app)}), a bare Streamlit app "
              f"{pct(floor, .5):.2f} s: {pct(app, .5) / pct(floor, .5):.2f}x (medians; models warm in the background)")


async def amain(args) -> None:
    results = []
    for spec in args.scenarios:
        n, v = (int(x) for x in spec.split("x"))
        results.append((n, v, await class_scenario(args, n, v)))
    report_class(args, results)
    if args.failover_visitors:
        report_failover(await failover(args))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scenarios", type=lambda s: s.split(","), default=["1x20", "1x40", "2x40"],
                   help="REPLICASxVISITORS, comma-separated (default 1x20,1x40,2x40)")
    p.add_argument("--trainers", type=int, default=2, help="training sessions in every scenario")
    bench_load.class_options(p)
    p.add_argument("--failover-visitors", type=int, default=6, help="visitors in the kill-a-replica run (0: skip)")
    p.add_argument("--start-runs", type=int, default=3, help="start -> healthy runs of a replica and of the floor")
    p.add_argument("--deadline", type=float, default=1500, help="the whole script stops by itself after this")
    p.add_argument("--quick", action="store_true", help="a smoke run: 1x4 and 2x6 for 20 s, 1 trainer")
    args = p.parse_args(argv)
    if args.quick:
        args.scenarios, args.seconds, args.arrival, args.trainers, args.start_runs = ["1x4", "2x6"], 20, 5, 1, 1
    watchdog = threading.Timer(args.deadline, bench_load._give_up)
    watchdog.daemon = True
    watchdog.start()
    report_start(start_times(args.start_runs))
    asyncio.run(amain(args))
    watchdog.cancel()
    return 0


if __name__ == "__main__":
    sys.exit(main())
