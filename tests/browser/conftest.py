"""Browser end-to-end fixtures: one Streamlit server for the session, Debian's Chromium driven by Playwright.

Under CI (CI=true) a browser that cannot start is a failure, not a skip.
"""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "artifacts" / "screenshots"
CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-quic", "--no-first-run", "--disable-dev-shm-usage"]
DONE = "[data-testid='stApp'][data-test-script-state='notRunning']"
# A chart of the page, drawn or not yet: the house chart element's box (app_pages/_ui/chart.py) or st.plotly_chart's
# (the charts that report clicks). Once drawn, both hold plotly's ".js-plotly-plot".
CHART = "[data-testid='stPlotlyChart'], .ae-chart"
# One log per pytest-xdist worker (PYTEST_XDIST_WORKER: gw0, gw1, ...; unset in a serial run), so that a test that reads
# its server's log from an offset reads only its own server's lines.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
SERVER_LOG = ROOT / "artifacts" / (f"streamlit-server-{_WORKER}.log" if _WORKER else "streamlit-server.log")
SERVER: dict = {}  # "pid" of the Streamlit server of this test session (for tests that watch its CPU use)


TEST_LIMIT_S = 480  # no browser test takes a minute and a half; one that hangs fails instead of stalling the suite


@pytest.fixture(autouse=True)
def _time_limit():
    """Fail a browser test that runs past TEST_LIMIT_S. A call into the browser (evaluate, count) has no timeout of
    its own and once waited forever on a renderer that stopped answering: the whole suite stalled."""
    def expire(_signum, _frame):
        raise TimeoutError(f"this browser test ran past {TEST_LIMIT_S} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(TEST_LIMIT_S)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _unavailable(reason: str):
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"browser tests must run under CI: {reason}")
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def streamlit_server(extra_env: dict | None = None):
    """`streamlit run app.py` on a free port of 127.0.0.1, as deployed (.streamlit/config.toml) but with full error
    details; yields (url, process), stops it at the end."""
    port = _free_port()
    env = dict(os.environ, STREAMLIT_BROWSER_GATHER_USAGE_STATS="false", HF_HUB_OFFLINE="1",
               STREAMLIT_CLIENT_SHOW_ERROR_DETAILS="full", **(extra_env or {}))
    SHOTS.parent.mkdir(parents=True, exist_ok=True)
    log = open(SERVER_LOG, "ab")  # what the server says (a websocket it closed, a traceback): read it after a failure
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true", "--server.port", str(port),
         "--server.address", "127.0.0.1"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    log.close()  # the child holds its own handle
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(url + "/_stcore/health", timeout=1)
                break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("streamlit server did not start within 60 s")
        yield url, proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture(scope="session")
def server_url():
    with streamlit_server() as (url, proc):
        SERVER["pid"] = proc.pid
        yield url


@pytest.fixture(scope="session")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        _unavailable(f"playwright is not installed ({exc}); run the README's test command")
    if not Path(CHROMIUM).exists():
        _unavailable(f"Chromium not found at {CHROMIUM}; the README's test command installs Debian's chromium")
    pw = sync_playwright().start()
    try:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
    except Exception as exc:  # noqa: BLE001 - any launch failure means "no browser"
        pw.stop()
        _unavailable(f"Chromium failed to start: {exc}")
    yield b
    b.close()
    pw.stop()


@pytest.fixture
def open_page(browser, server_url):
    """open_page(path, width=1400, height=1000, dark=False, touch=False) -> a loaded Playwright page with the script
    finished. touch: a phone's context (touch events, a tap is a finger's)."""
    contexts = []

    def _open(path: str, width: int = 1400, height: int = 2000, dark: bool = False, timeout_ms: int = 120_000,
              touch: bool = False):
        ctx = browser.new_context(viewport={"width": width, "height": height},
                                  color_scheme="dark" if dark else "light",
                                  **(dict(has_touch=True, is_mobile=True) if touch else {}))
        contexts.append(ctx)
        page = ctx.new_page()
        sockets = []  # a page that opened more than one had its connection dropped (printed with a failure)
        page.on("websocket", lambda ws: sockets.append(ws.url) if "_stcore/stream" in ws.url else None)
        page.on("close", lambda _: len(sockets) > 1 and print(f"{path}: {len(sockets)} websocket connections "
                                                              f"(dropped and reconnected; see {SERVER_LOG})"))
        page.goto(server_url + path, wait_until="domcontentloaded")
        wait_done(page, timeout_ms)
        return page

    yield _open
    for ctx in contexts:
        ctx.close()


def wait_done(page, timeout_ms: int = 120_000) -> None:
    """Wait until the script run has finished (and the page has settled a little)."""
    page.wait_for_selector("[data-testid='stApp']", timeout=timeout_ms)
    # a slow first run may not have started yet: wait for the page to draw something before trusting "notRunning"
    page.wait_for_selector("[data-testid='stMain'] [data-testid='stElementContainer']", timeout=timeout_ms)
    page.wait_for_timeout(300)
    page.wait_for_selector(DONE, timeout=timeout_ms)
    page.wait_for_timeout(500)
    page.wait_for_selector(DONE, timeout=timeout_ms)


# JS: every chart of the house chart element in the page is drawn whole (its parts drawn after its first paint too:
# app_pages/_ui/chart.py marks it data-drawn="whole")
_WHOLE = """() => [...document.querySelectorAll('.ae-chart')].every(g => !g.isConnected || g.dataset.drawn === 'whole')"""


def charts_drawn(page, at_least: int) -> int:
    """How many plotly charts the page shows, once at least `at_least` are drawn, each with all its parts: plotly
    draws after the script run has ended (its script loads per tab: seen 3 s after the run on a busy machine), and
    a chart's legend, colour bars and controls may come just after its first paint."""
    page.locator(".js-plotly-plot").nth(at_least - 1).wait_for()
    page.wait_for_function(_WHOLE, timeout=60_000)
    return page.locator(".js-plotly-plot").count()


def tick_labels(page, axis: str, chart: str = "") -> list[str]:
    """Tick labels on `axis` ("x" or "y") of `chart` (a CSS selector; default: the page's first chart), read once
    plotly has drawn them: plotly draws after the script run has ended."""
    ticks = page.locator(f"{chart} .{axis}axislayer-above .{axis}tick text".strip())
    ticks.first.wait_for()
    return ticks.all_text_contents()


# JS: the boxes of a figure's words (panel titles, axis titles, legend entries, colour-bar title, each axis's tick
# labels), as [name, left, top, right, bottom], read in the page as drawn
TEXT_BOXES_JS = """sel => { const gd = document.querySelector(sel); const out = [];
  const add = (name, el) => { const r = el.getBoundingClientRect();
    if (r.width > 0 && r.height > 0) out.push([name, r.left, r.top, r.right, r.bottom]); };
  gd.querySelectorAll('.annotation-text-g').forEach((el, i) => add('title ' + i, el));
  gd.querySelectorAll('[class*="title"] > text, .cbtitle text').forEach(el => add(el.getAttribute('class'), el));
  gd.querySelectorAll('.legend .traces .legendtext').forEach((el, i) => add('legend ' + i, el));
  gd.querySelectorAll('g[class^="x"][class$="tick"] > text').forEach(el => {  // every x axis's tick labels
    const turn = /rotate\((-?[0-9.]+)/.exec(el.getAttribute('transform') || '');
    const slanted = turn && Math.abs(Math.abs(+turn[1]) - 90) > 1;  // a slanted label's box is wider than its ink
    add((slanted ? 'slanted ' : 'tick ') + el.parentNode.getAttribute('class') + ' ' + el.textContent, el); });
  return out; }"""


# The cells of a table (those matching `cells`) whose text takes more than one line.
_WRAPPED = """(t, cells) => [...t.querySelectorAll(cells)].filter(c => {
  const r = document.createRange();
  r.selectNodeContents(c);
  return r.getBoundingClientRect().height > 1.5 * parseFloat(getComputedStyle(c).lineHeight);
}).map(c => c.innerText)"""


def wrapped_cells(table, cells: str = "td") -> list[str]:
    """The texts of `table`'s cells (a locator of a table; `cells`: which) laid out on more than one line."""
    return table.evaluate(_WRAPPED, cells)


def overlapping_words(page, chart: str) -> list[tuple[str, str]]:
    """Pairs of a figure's words drawn over each other (a pixel of slack: glyph boxes touch). Two slanted tick
    labels are not compared: their boxes overlap where their letters do not."""
    boxes = page.evaluate(TEXT_BOXES_JS, chart)
    return [(a[0], b[0]) for i, a in enumerate(boxes) for b in boxes[i + 1:]
            if not (a[0].startswith("slanted") and b[0].startswith("slanted"))
            and min(a[3], b[3]) - max(a[1], b[1]) > 1 and min(a[4], b[4]) - max(a[2], b[2]) > 1]


def read_page(browser, url: str, script: str, arg=None, dark: bool = False, ready: str | None = None):
    """page.evaluate(script, arg) on `url` opened in a context of its own (1400 x 1200, light or dark), once its run
    is done (and `ready`, a JS predicate, holds) without an exception."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 1200}, color_scheme="dark" if dark else "light")
    try:
        page = ctx.new_page()
        page.goto(url, wait_until="domcontentloaded")
        wait_done(page)
        if ready:
            page.wait_for_function(ready, timeout=60_000)
        assert_no_exception(page)
        return page.evaluate(script, arg)
    finally:
        ctx.close()


def screenshot(page, name: str) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def assert_no_exception(page) -> None:
    """No exception box, and no 'page not found' dialog."""
    assert page.locator("[data-testid='stException']").count() == 0, page.locator(
        "[data-testid='stException']").first.inner_text()
    assert page.get_by_text("Page not found").count() == 0, "the URL did not match a page"


# ---------------------------------------------------------------- acting like a person (labels, not keys)
def choose(page, label: str, option: str) -> None:
    """Open the dropdown named `label` and click `option`."""
    page.get_by_role("combobox", name=label, exact=True).click()
    page.get_by_role("option", name=option, exact=True).click()
    wait_done(page)


def chosen(page, label: str) -> str:
    return page.get_by_role("combobox", name=label, exact=True).input_value()


def pick(page, group: str, option: str) -> None:
    """Click `option` in the radio group (or segmented control) named `group`."""
    page.get_by_role("radiogroup", name=group, exact=True).get_by_text(option, exact=True).click()
    wait_done(page)


def picked(page, group: str) -> str:
    return page.get_by_role("radiogroup", name=group, exact=True).locator("[data-selected='true']").first.inner_text()


def type_text(page, label: str, text: str) -> None:
    """Replace the text of the text box named `label` and commit it (Ctrl+Enter, as the box's hint says)."""
    box = page.get_by_label(label, exact=True)
    box.fill(text)
    box.press("Control+Enter")
    wait_done(page)


def typed(page, label: str) -> str:
    return page.get_by_label(label, exact=True).input_value()


def open_tab(page, label: str) -> None:
    page.get_by_role("tab", name=label, exact=True).click()
    wait_done(page)


def the_open_tab(page) -> str:
    return page.locator("[role='tab'][aria-selected='true']").first.inner_text()


def tick(page, label: str) -> None:
    """Click the checkbox named `label` (its visible label: the input itself is hidden)."""
    page.locator("[data-testid='stCheckbox'] label").filter(
        has=page.get_by_text(label, exact=True)).first.click()
    wait_done(page)


def ticked(page, label: str) -> bool:
    return page.get_by_role("checkbox", name=label, exact=True).is_checked()


def _pill(page, label: str):
    return page.locator("[data-testid='stMain'] [data-testid='stButtonGroup'] button[data-variant]").filter(
        has_text=label).first


def pill(page, label: str) -> None:
    """Click the pill named `label` (st.pills, several may be picked): it is picked if it was not, and dropped if it
    was."""
    _pill(page, label).click()
    wait_done(page)


def pilled(page, label: str) -> bool:
    return _pill(page, label).get_attribute("aria-pressed") == "true"


def switch_language(page, lang: str) -> None:
    pick(page, "Language / 语言", {"en": "English", "zh": "中文"}[lang])


def go_to(page, title: str) -> None:
    """Click a page's link in the sidebar."""
    page.locator("[data-testid='stSidebar'] [data-testid='stPageLink-NavLink']").filter(
        has_text=title).first.click()
    wait_done(page)
