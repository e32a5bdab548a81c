"""What a person waits for in the browser. Prints a table; asserts nothing.

  python bench/bench_browser.py                    # every row, 3 cold starts, 4 rounds of the rest
  python bench/bench_browser.py --rows switch,sentence --rounds 5
  python bench/bench_browser.py --rows cli --cli-runs 3
  python bench/bench_browser.py --floor            # cold start and page switches as ratios to the floor app
  python bench/bench_browser.py --rows importance  # "Which heads matter", first time after the server started

Rows (medians; each bounded by --row-timeout, the whole script by --deadline):
  cold      process start of `streamlit run app.py` -> the first heatmap of the Attention page visible in Chromium
  late      the same, but the visitor arrives 6 s after the server answers; timed from the visit (not in the default)
  switch    click a sidebar link -> the new page's script done and its first figure visible (warm server, fresh
            session per round after one warm-up round)
  again     per page, in one fresh session: Attention -> the page -> Attention -> the page; the first and the second
            visit (click -> page ready, as in switch) and the websocket bytes each brought (not in the default): the
            second visit's figures come from the browser's copy of messages it has seen (Streamlit's message cache)
  sentence  type a new sentence in the Attention text box + Ctrl+Enter -> the heatmap shows the new tokens
  train     click Train -> the first progress bar; click Stop -> the progress gone and "was stopped" shown
  cli       `python -m viz_core.seq2seq --task reverse --max-seconds 30 --out DIR`, whole command, wall
  importance  a fresh server; the first visitor opens Attention, and as soon as its heatmap is drawn picks the view
            "Which heads matter" -> its head-importance map drawn; then, in that view, a new sentence of 24 tokens ->
            the map of the new sentence drawn (medians over --cold-runs servers)

--floor: the floor is bench/floor_app/app.py, a bare Streamlit app with the same sidebar of eight pages
and one plotly heatmap per page (no model, no torch): what any Streamlit app costs on this machine now. The cold row
and the switch row then run the app and the floor interleaved (app, floor, floor, app, ...), with the same browser,
and print each of our medians as a ratio to the floor's median of the same step in the same run, so the machine's
drift (25 % an hour here) cancels out. Below the table, each page's switch is also given as a ratio to the floor's
median over all its pages (they are the same page: a steadier denominator than one page's rounds). --before DIR adds the app of another tree (a checkout of an earlier commit:
`git worktree add /tmp/before HEAD~1`) to the switch row, interleaved with the two: a change measured in one run.

The server listens on 127.0.0.1 on a free port; Chromium is Debian's /usr/bin/chromium driven by Playwright.
"""
from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FLOOR_ROOT = ROOT / "bench" / "floor_app"  # the bare Streamlit app the ratios are taken against
APP_ROOT = ROOT  # the tree whose app.py the server runs (--app-root: compare two versions of the app, interleaved)
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from viz_core.i18n import t  # noqa: E402

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-quic", "--no-first-run", "--disable-dev-shm-usage"]
DONE = "[data-testid='stApp'][data-test-script-state='notRunning']"
SWITCH_PAGES = ("mechanics", "scaling", "positions", "optimizers", "anatomy", "train", "language_model", "attention")
WORDS = ("the quick brown fox jumps over a lazy dog while seven curious cats watch it from an old red barn near "
         "the river bank and three small birds sing loud songs in tall green trees every warm summer day").split()

# JS: the script has finished and the page's first figure is drawn (plotly or, for pages without one, an iframe/img)
_PAGE_READY = """([title]) => {
  const app = document.querySelector("[data-testid='stApp']");
  if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
  const main = document.querySelector("[data-testid='stMain']");
  const h1 = main && main.querySelector('h1');
  if (!h1 || !h1.innerText.includes(title)) return false;
  if (main.querySelector("[data-stale='true']")) return false;
  const fig = main.querySelector(".js-plotly-plot .main-svg, [data-testid='stIFrame'], "
                                 + "[data-testid='stImage'] img");
  return !!fig && fig.getBoundingClientRect().height > 0;
}"""
# JS: the Attention page's heatmap is drawn with key categories different from `prev`
_HEATMAP = """([prev]) => {
  const app = document.querySelector("[data-testid='stApp']");
  if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
  const gd = document.querySelector(".st-key-head_fig .js-plotly-plot");
  if (!gd || !gd.data || !gd.data.length || !gd.querySelector('.main-svg')) return false;
  const x = (gd.data[0].x || []).join('|');
  return prev === null ? x.length > 0 : x !== prev;
}"""
FAILED: list[str] = []  # steps that ran past --row-timeout (reported under the table)
_HEATMAP_X = """() => { const gd = document.querySelector(".st-key-head_fig .js-plotly-plot");
  return gd && gd.data && gd.data.length ? (gd.data[0].x || []).join('|') : null; }"""


# ---------------------------------------------------------------- server and browser
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(port: int, extra_env: dict | None = None, root: Path | None = None,
                 log: Path | None = None) -> subprocess.Popen:
    """`streamlit run app.py` in `root` (default: the app's tree, --app-root); its output goes to `log` if given."""
    env = dict(os.environ, STREAMLIT_BROWSER_GATHER_USAGE_STATS="false", **(extra_env or {}))
    out = open(log, "wb") if log else subprocess.DEVNULL  # noqa: SIM115 - the child holds it; closed below
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true", "--server.port",
             str(port), "--server.address", "127.0.0.1"], cwd=root or APP_ROOT, env=env, stdout=out,
            stderr=subprocess.STDOUT)
    finally:
        if log:
            out.close()


def wait_healthy(url: str, timeout_s: float = 60) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        try:
            urllib.request.urlopen(url + "/_stcore/health", timeout=1)
            return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError("the server did not answer /_stcore/health")


def stop_server(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


class Server:
    def __init__(self, extra_env: dict | None = None, root: Path | None = None, log: Path | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.t0 = time.perf_counter()
        self.proc = start_server(self.port, extra_env, root, log)

    def __enter__(self):
        wait_healthy(self.url)
        return self

    def __exit__(self, *exc):
        stop_server(self.proc)


def launch(pw):
    return pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)


def new_page(browser, width: int = 1400, height: int = 1000):
    ctx = browser.new_context(viewport={"width": width, "height": height})
    return ctx, ctx.new_page()


def wait_done(page, timeout_ms: int) -> None:
    page.wait_for_selector("[data-testid='stMain'] [data-testid='stElementContainer']", timeout=timeout_ms)
    page.wait_for_timeout(300)
    page.wait_for_selector(DONE, timeout=timeout_ms)


# ---------------------------------------------------------------- rows
def row_cold(pw, runs: int, timeout_s: float, arrive_after_s: float = 0.0) -> list[float]:
    """Process start -> the first heatmap visible (browser already running; it asks for the page as soon as the
    server answers its health check, as a person reloading would). With arrive_after_s, the visitor comes that many
    seconds after the health check instead, and the time counts from the visit (the server's warm-up had time)."""
    browser = launch(pw)
    out = []
    try:
        for _ in range(runs):
            out += cold_once(browser, timeout_s, arrive_after_s)
    finally:
        browser.close()
    return out


def cold_once(browser, timeout_s: float, arrive_after_s: float = 0.0, root: Path | None = None) -> list[float]:
    """One cold start of the app in `root`: [seconds], or [] when it ran past the timeout (reported)."""
    server = Server(root=root)
    try:
        wait_healthy(server.url, timeout_s)
        time.sleep(arrive_after_s)
        t0 = server.t0 if not arrive_after_s else time.perf_counter()
        ctx, page = new_page(browser)
        page.goto(server.url + "/?lang=en", wait_until="commit")
        page.wait_for_function(_HEATMAP, arg=[None], timeout=timeout_s * 1000, polling=50)
        dt = time.perf_counter() - t0
        ctx.close()
        return [dt]
    except Exception as exc:  # noqa: BLE001 - a run past the timeout is reported, the others go on
        FAILED.append(f"cold start{' (floor)' if root == FLOOR_ROOT else ''}: {type(exc).__name__}")
        return []
    finally:
        stop_server(server.proc)


_WATCH = """() => { window.__t0 = performance.now(); window.__done = null;
  const app = document.querySelector("[data-testid='stApp']");
  if (window.__obs) window.__obs.disconnect();
  window.__obs = new MutationObserver(() => {
    if (app.getAttribute('data-test-script-state') === 'notRunning') window.__done = performance.now(); });
  window.__obs.observe(app, {attributes: true, attributeFilter: ['data-test-script-state']}); }"""


def switch_to(page, stem: str, timeout_s: float) -> tuple[float, float]:
    """(click -> page ready, click -> the server's script run done as the browser saw it), in seconds."""
    link = page.locator("[data-testid='stSidebar'] [data-testid='stPageLink-NavLink']").filter(
        has_text=t(f"common.nav_{stem}", "en")).first
    page.evaluate(_WATCH)
    t0 = time.perf_counter()
    link.click()
    page.wait_for_function(_PAGE_READY, arg=[t(f"{stem}.title", "en")], timeout=timeout_s * 1000, polling=20)
    total = time.perf_counter() - t0
    script = page.evaluate("() => window.__done === null ? null : (window.__done - window.__t0) / 1000")
    return total, script if script is not None else float("nan")


def row_switch(browser, url: str, rounds: int, timeout_s: float,
               pages: tuple[str, ...] = SWITCH_PAGES) -> dict[str, list[tuple[float, float]]]:
    """One warm-up round, then `rounds` rounds, each in a fresh session: Attention -> every page in sidebar order
    -> back to Attention (or: Attention -> each of `pages`, with Attention between two of them)."""
    if pages != SWITCH_PAGES:
        pages = tuple(x for stem in pages for x in ((stem, "attention") if stem != "attention" else (stem,)))
    times: dict[str, list[tuple[float, float]]] = {s: [] for s in pages}
    for r in range(rounds + 1):
        for stem, dt in switch_round(browser, url, pages, timeout_s, f"switch round {r}").items():
            if r > 0:
                times[stem].append(dt)
    return times


def switch_round(browser, url: str, pages: tuple[str, ...], timeout_s: float,
                 what: str) -> dict[str, tuple[float, float]]:
    """One fresh session: open the first page, then follow the sidebar link to each of `pages` in turn."""
    out: dict[str, tuple[float, float]] = {}
    ctx, page = new_page(browser)
    try:
        page.goto(url + "/?lang=en", wait_until="domcontentloaded")
        page.wait_for_function(_HEATMAP, arg=[None], timeout=timeout_s * 1000)
        page.wait_for_timeout(300)
        for stem in pages:
            out[stem] = switch_to(page, stem, timeout_s)
            page.wait_for_timeout(300)
    except Exception as exc:  # noqa: BLE001 - this round ends; the next one starts afresh
        FAILED.append(f"{what}: {type(exc).__name__}")
    finally:
        ctx.close()
    return out


def row_again(browser, url: str, rounds: int, timeout_s: float,
              pages: tuple[str, ...]) -> dict[str, list[tuple[float, float, float, float]]]:
    """Per page and round, one fresh session: (first visit s, its KiB, second visit s, its KiB), after one warm-up
    round. The KiB are what the websocket brought between the click and the page ready."""
    out: dict[str, list[tuple[float, float, float, float]]] = {s: [] for s in pages}
    for r in range(rounds + 1):
        for stem in pages:
            ctx, page = new_page(browser)
            got: list[int] = []
            page.on("websocket", lambda ws: ws.on("framereceived", lambda f: got.append(len(f))))
            try:
                page.goto(url + "/?lang=en", wait_until="domcontentloaded")
                page.wait_for_function(_HEATMAP, arg=[None], timeout=timeout_s * 1000)
                visits = []
                for target in (stem, "attention", stem):
                    page.wait_for_timeout(300)
                    got.clear()
                    total, _ = switch_to(page, target, timeout_s)
                    if target == stem:
                        visits += [total, sum(got) / 1024]
                if r > 0:
                    out[stem].append(tuple(visits))
            except Exception as exc:  # noqa: BLE001 - this round ends; the next one starts afresh
                FAILED.append(f"again round {r} {stem}: {type(exc).__name__}")
            finally:
                ctx.close()
    return out


# JS: the importance view's map is drawn with values other than `prev` (the token attribution below it may still be
# computing: the map is what the person looks at first)
_IMPORTANCE = """([prev]) => {
  const gd = document.querySelector(".st-key-imp_map .js-plotly-plot");
  if (!gd || !gd.data || !gd.data.length || !gd.querySelector('.main-svg')) return false;
  const z = JSON.stringify(gd.data.map(d => d.z || d.marker && d.marker.color || null));
  return prev === null ? true : z !== prev;
}"""
_SCRIPT_DONE = """() => document.querySelector("[data-testid='stApp']").getAttribute('data-test-script-state')
  === 'notRunning' && !document.querySelector("[data-testid='stMain'] [data-stale='true']")"""
_IMPORTANCE_Z = """() => { const gd = document.querySelector(".st-key-imp_map .js-plotly-plot");
  return gd && gd.data ? JSON.stringify(gd.data.map(d => d.z || d.marker && d.marker.color || null)) : null; }"""


def row_importance(pw, runs: int, timeout_s: float, rng: random.Random) -> tuple[list[float], ...]:
    """Per fresh server: the view picked -> its map drawn, and -> the whole view done (token attribution below the
    map included); a new 24-token sentence in the view -> its map drawn, and -> the whole view done."""
    browser = launch(pw)
    first, first_all, again, again_all = [], [], [], []
    try:
        for _ in range(runs):
            with Server() as server:
                ctx, page = new_page(browser)
                try:
                    page.goto(server.url + "/?lang=en", wait_until="commit")
                    page.wait_for_function(_HEATMAP, arg=[None], timeout=timeout_s * 1000, polling=50)
                    option = page.get_by_role("radiogroup", name=t("attention.view", "en"), exact=True).get_by_text(
                        t("attention.view_importance", "en"), exact=True)
                    t0 = time.perf_counter()
                    option.click()
                    page.wait_for_function(_IMPORTANCE, arg=[None], timeout=timeout_s * 1000, polling=20)
                    first.append(time.perf_counter() - t0)
                    page.wait_for_function(_SCRIPT_DONE, timeout=timeout_s * 1000, polling=20)
                    first_all.append(time.perf_counter() - t0)
                    page.wait_for_timeout(300)
                    prev = page.evaluate(_IMPORTANCE_Z)
                    box = page.locator(".st-key-attention-text textarea")
                    box.fill(sentence(24, rng))
                    t0 = time.perf_counter()
                    box.press("Control+Enter")
                    page.wait_for_function(_IMPORTANCE, arg=[prev], timeout=timeout_s * 1000, polling=20)
                    again.append(time.perf_counter() - t0)
                    page.wait_for_function(_SCRIPT_DONE, timeout=timeout_s * 1000, polling=20)
                    again_all.append(time.perf_counter() - t0)
                except Exception as exc:  # noqa: BLE001
                    FAILED.append(f"importance: {type(exc).__name__}")
                finally:
                    ctx.close()
    finally:
        browser.close()
    return first, first_all, again, again_all


# ---------------------------------------------------------------- against the floor
def ratio_cold(pw, runs: int, timeout_s: float) -> tuple[list[float], list[float]]:
    """Cold starts of the app and of the floor, interleaved (app, floor, floor, app, ...): (app, floor) seconds."""
    browser = launch(pw)
    ours, floor = [], []
    try:
        for i in range(runs):
            for root in ((APP_ROOT, FLOOR_ROOT) if i % 2 == 0 else (FLOOR_ROOT, APP_ROOT)):
                (ours if root == APP_ROOT else floor).extend(cold_once(browser, timeout_s, root=root))
    finally:
        browser.close()
    return ours, floor


def ratio_switch(browser, rounds: int, timeout_s: float, before: Path | None = None) -> dict[str, dict]:
    """Warm sidebar switches of the app and the floor (and of the app of the tree `before`), all servers up, rounds
    interleaved after one warm-up round each (the order reversed every round): {"ours" / "floor" / "before": {stem:
    [seconds]}}."""
    roots = {"ours": APP_ROOT, "floor": FLOOR_ROOT, **({"before": before} if before else {})}
    times: dict[str, dict[str, list[float]]] = {k: {s: [] for s in SWITCH_PAGES} for k in roots}
    servers = {k: Server(root=root) for k, root in roots.items()}
    try:
        for server in servers.values():
            server.__enter__()
        for r in range(rounds + 1):
            for k in (list(roots) if r % 2 == 0 else list(roots)[::-1]):
                got = switch_round(browser, servers[k].url, SWITCH_PAGES, timeout_s, f"switch round {r} ({k})")
                for stem, (total, _script) in got.items():
                    if r > 0:
                        times[k][stem].append(total)
    finally:
        for server in servers.values():
            server.__exit__(None, None, None)
    return times


def ratio_row(what: str, ours: list[float], floor: list[float], goal: str) -> tuple[str, str, str, str, str]:
    if not ours or not floor:
        return what, fmt(ours), fmt(floor), "–", goal
    return what, fmt(ours), fmt(floor), f"{statistics.median(ours) / statistics.median(floor):.2f}x", goal


def print_ratios(pw, args) -> None:
    rows = []
    if "cold" in args.rows.split(","):
        ours, floor = ratio_cold(pw, args.cold_runs, args.row_timeout)
        rows.append(ratio_row("cold start: `streamlit run` → first heatmap", ours, floor, "≤ 1.3x"))
    if "switch" in args.rows.split(","):
        browser = launch(pw)
        try:
            times = ratio_switch(browser, args.rounds, args.row_timeout, args.before)
        finally:
            browser.close()
        for stem in SWITCH_PAGES:
            page = t(f"common.nav_{stem}", "en")
            rows.append(ratio_row(f"warm sidebar switch → {page}", times["ours"][stem], times["floor"][stem],
                                  "≤ 1.5x"))
            if args.before:
                rows.append(ratio_row(f"… the same, the app of {args.before}", times["before"][stem],
                                      times["floor"][stem], ""))
    print(f"\n{time.strftime('%Y-%m-%d %H:%M')}, `python bench/bench_browser.py --floor` (medians; runs, min–max)")
    print("\n| what the person does | ours | the floor | ratio | goal |\n|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    if "switch" in args.rows.split(","):
        pooled_ratios(times)


def pooled_ratios(times: dict[str, dict]) -> None:
    """Every page of the floor is the same page (a title and one heatmap), so the median of all its switches of the
    run is a steadier denominator than one page's eight (whose medians spread 0.15-0.24 s in one run). Printed
    beside the table's ratios, which stay the measure the goals are given in."""
    pooled = statistics.median(x for runs in times["floor"].values() for x in runs)
    print(f"\nThe same switches as ratios to the floor's median over all its pages ({pooled:.3f} s, "
          f"n={sum(map(len, times['floor'].values()))}):")
    for stem in SWITCH_PAGES:
        cells = [f"{k} {statistics.median(times[k][stem]) / pooled:.2f}x" for k in ("ours", "before")
                 if k in times and times[k][stem]]
        print(f"  {t(f'common.nav_{stem}', 'en'):16s} " + ", ".join(cells))


def sentence(n_tokens: int, rng: random.Random) -> str:
    """n_tokens MiniLM tokens ([CLS] + n - 2 one-token words + [SEP]), different every call."""
    return " ".join(rng.choice(WORDS) for _ in range(n_tokens - 2))


def row_sentence(browser, url: str, n_tokens: int, runs: int, timeout_s: float, rng: random.Random) -> list[float]:
    ctx, page = new_page(browser)
    out = []
    try:
        page.goto(url + "/?lang=en", wait_until="domcontentloaded")
        page.wait_for_function(_HEATMAP, arg=[None], timeout=timeout_s * 1000)
        box = page.locator(".st-key-attention-text textarea")
        for i in range(runs + 1):  # the first one warms this length's code paths
            prev = page.evaluate(_HEATMAP_X)
            box.fill(sentence(n_tokens, rng))
            t0 = time.perf_counter()
            box.press("Control+Enter")
            page.wait_for_function(_HEATMAP, arg=[prev], timeout=timeout_s * 1000, polling=20)
            if i > 0:
                out.append(time.perf_counter() - t0)
            page.wait_for_timeout(300)
    except Exception as exc:  # noqa: BLE001
        FAILED.append(f"sentence {n_tokens}: {type(exc).__name__}")
    finally:
        ctx.close()
    return out


def row_train(browser, url: str, runs: int, timeout_s: float) -> tuple[list[float], list[float]]:
    """Train -> first progress bar; after 2 s of training, Stop -> no progress bar and "was stopped" shown."""
    first, stop = [], []
    stopped = t("train.reason_stopped", "en", step=0).split(" after ")[0]  # "Training was stopped"
    for _ in range(runs):
        ctx, page = new_page(browser)
        try:
            page.goto(url + "/train?lang=en&task=reverse", wait_until="domcontentloaded")
            wait_done(page, int(timeout_s * 1000))
            page.wait_for_timeout(500)
            go = page.locator(".st-key-train-go button")
            go.scroll_into_view_if_needed()  # the person scrolls to the button first: the clock starts at the click
            page.wait_for_timeout(500)
            t0 = time.perf_counter()
            go.click()
            page.wait_for_selector("[data-testid='stProgress']", timeout=timeout_s * 1000)
            first.append(time.perf_counter() - t0)
            page.wait_for_timeout(2000)
            stop_button = page.locator(".st-key-train-live_stop button")  # the live panel's one Stop
            stop_button.scroll_into_view_if_needed()
            page.wait_for_timeout(300)
            t0 = time.perf_counter()
            stop_button.click()
            page.wait_for_function(
                """([w]) => !document.querySelector("[data-testid='stProgress']")
                    && document.querySelector("[data-testid='stMain']").innerText.includes(w)""",
                arg=[stopped], timeout=timeout_s * 1000, polling=20)
            stop.append(time.perf_counter() - t0)
            page.wait_for_timeout(500)
        except Exception as exc:  # noqa: BLE001
            FAILED.append(f"train: {type(exc).__name__}")
        finally:
            ctx.close()
    return first, stop


def row_cli(runs: int, timeout_s: float) -> tuple[list[float], list[str]]:
    out, accs = [], []
    for _ in range(runs):
        d = tempfile.mkdtemp(prefix="bench_rev_")
        try:
            t0 = time.perf_counter()
            res = subprocess.run([sys.executable, "-m", "viz_core.seq2seq", "--task", "reverse", "--max-seconds", "30",
                                  "--out", d], cwd=APP_ROOT, capture_output=True, text=True, timeout=timeout_s)
            out.append(time.perf_counter() - t0)
            acc = re.search(r"worst length (\d+): ([0-9.]+)", res.stdout.split("fresh sequences each")[-1])
            stop = re.search(r"stopped: (\w+) after (\d+) steps", res.stdout)
            accs.append(f"worst length {acc.group(1)}: {float(acc.group(2)) * 100:.1f} % "
                        f"({stop.group(1)}, {stop.group(2)} steps)" if acc and stop else "?")
        finally:
            shutil.rmtree(d, ignore_errors=True)
    return out, accs


# ---------------------------------------------------------------- report
def fmt(xs: list[float]) -> str:
    if not xs:
        return "–"
    med = statistics.median(xs)
    return f"{med:.2f} s (n={len(xs)}, {min(xs):.2f}–{max(xs):.2f})"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", default="cold,switch,sentence,train,cli")
    p.add_argument("--cold-runs", type=int, default=3)
    p.add_argument("--rounds", type=int, default=4, help="page-switch rounds and new sentences per length")
    p.add_argument("--train-runs", type=int, default=3)
    p.add_argument("--cli-runs", type=int, default=3)
    p.add_argument("--row-timeout", type=float, default=90, help="seconds one step of a row may take")
    p.add_argument("--deadline", type=float, default=900, help="the whole script stops by itself after this")
    p.add_argument("--pages", default=",".join(SWITCH_PAGES),
                   help="switch and again rows: these pages only (each reached from Attention)")
    p.add_argument("--app-root", type=Path, default=ROOT, help="run the app (and the CLI) of this tree")
    p.add_argument("--floor", action="store_true",
                   help="rows cold and switch (of --rows) as ratios to the floor app, interleaved with it")
    p.add_argument("--before", type=Path, default=None,
                   help="with --floor: the switch row also for the app of this tree (a checkout of an earlier "
                        "commit), interleaved with the other two")
    args = p.parse_args(argv)
    global APP_ROOT
    APP_ROOT = args.app_root.resolve()
    if args.floor:
        from playwright.sync_api import sync_playwright
        with sync_playwright() as pw:
            print_ratios(pw, args)
        if FAILED:
            print(f"\nsteps past the timeout (left out of the medians): {FAILED}")
        return 0
    rows = set(args.rows.split(","))
    end = time.monotonic() + args.deadline
    table: list[tuple[str, str, str]] = []
    rng = random.Random(0)

    def left() -> bool:
        if time.monotonic() > end:
            print("(deadline reached: the remaining rows were skipped)")
            return False
        return True

    from playwright.sync_api import sync_playwright
    with sync_playwright() as pw:
        if "cold" in rows and left():
            table.append(("open the app right after `streamlit run` (cold)", fmt(row_cold(pw, args.cold_runs,
                                                                                        args.row_timeout)), "≤ 4 s"))
        if "late" in rows and left():
            table.append(("first visit 6 s after `streamlit run` → first heatmap (from the visit)",
                          fmt(row_cold(pw, args.cold_runs, args.row_timeout, arrive_after_s=6.0)), ""))
        if "importance" in rows and left():
            first, first_all, again, again_all = row_importance(pw, args.cold_runs, args.row_timeout, rng)
            table.append(("first visit after `streamlit run`: pick \"Which heads matter\" → its map", fmt(first),
                          "≤ 2 s"))
            table.append(("… → the whole view (token attribution included: torch loads here)", fmt(first_all), ""))
            table.append(("in that view, a new sentence of 24 tokens → its map", fmt(again), "≤ 1 s"))
            table.append(("… → the whole view", fmt(again_all), ""))
        if rows & {"switch", "again", "sentence", "train"} and left():
            browser = launch(pw)
            try:
                with Server() as server:
                    if "switch" in rows and left():
                        pages = tuple(args.pages.split(","))
                        sw = row_switch(browser, server.url, args.rounds, args.row_timeout, pages)
                        for stem in sw:
                            script = [x[1] for x in sw[stem]]
                            table.append((f"switch page in the sidebar → {t(f'common.nav_{stem}', 'en')}",
                                          fmt([x[0] for x in sw[stem]]) + (
                                              f"; script done at {statistics.median(script):.2f} s"
                                              if script else ""), "≤ 0.8 s"))
                    if "again" in rows and left():
                        for stem, runs in row_again(browser, server.url, args.rounds, args.row_timeout,
                                                    tuple(p for p in args.pages.split(",") if p != "attention")
                                                    ).items():
                            if runs:
                                first, first_kib, second, second_kib = zip(*runs)
                                table.append((f"{t(f'common.nav_{stem}', 'en')}: first visit in a session / "
                                              "the second",
                                              f"{fmt(list(first))}, {statistics.median(first_kib):.0f} KiB / "
                                              f"{fmt(list(second))}, {statistics.median(second_kib):.0f} KiB", ""))
                    if "sentence" in rows:
                        for n, goal in ((24, "≤ 0.5 s"), (512, "≤ 1.0 s")):
                            if left():
                                table.append((f"new sentence on Attention, {n} tokens",
                                              fmt(row_sentence(browser, server.url, n, args.rounds, args.row_timeout,
                                                               rng)), goal))
                    if "train" in rows and left():
                        first, stop = row_train(browser, server.url, args.train_runs, args.row_timeout)
                        table.append(("press Train → first progress", fmt(first), "≤ 1 s"))
                        table.append(("press Stop → progress gone, 'was stopped'", fmt(stop), "≤ 0.5 s"))
            finally:
                browser.close()
    if "cli" in rows and left():
        wall, accs = row_cli(args.cli_runs, max(args.row_timeout, 120))
        table.append(("reverse task to ≥ 99 % at every length (CLI, whole command)", fmt(wall) + "; " + ", ".join(accs), "≤ 15 s"))

    print("\n| what the person does | median (runs, min–max) | goal |\n|---|---|---|")
    for what, fig, goal in table:
        print(f"| {what} | {fig} | {goal} |")
    if FAILED:
        print(f"\nsteps past the timeout (left out of the medians): {FAILED}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
