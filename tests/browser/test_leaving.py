"""A visitor whose connection drops in the middle of a long computation (app_pages/_ui/leaving.py): the server
abandons the run once the session has had no connection for a second, and when the browser reconnects the page is
run again, so it does not wait for ever for a run that ended. The connection is cut from inside the page (its
WebSockets closed, and new ones refused for a few seconds, as on a train going through a tunnel). A computation that
another visitor still waits for goes on when the one who started it leaves."""
from __future__ import annotations

import random

import pytest

from tests.browser.conftest import DONE, assert_no_exception, wait_done

pytestmark = pytest.mark.browser

# Keep the page's WebSockets reachable, and let a test make new ones fail until window.__blockUntil.
CUTTABLE = """(() => { const W = window.WebSocket; window.__ws = []; window.__blockUntil = 0;
  window.WebSocket = function(...a) {
    const w = Date.now() < window.__blockUntil ? new W('ws://127.0.0.1:9/') : new W(...a);
    window.__ws.push(w); return w; };
  window.WebSocket.prototype = W.prototype; Object.assign(window.WebSocket, W); })();"""
WORDS = "the quick brown fox jumps over a lazy dog while seven curious cats watch".split()


def test_a_dropped_connection_mid_computation_ends_with_the_page_drawn(browser, server_url):
    ctx = browser.new_context(viewport={"width": 1400, "height": 1200})
    ctx.add_init_script(CUTTABLE)
    try:
        page = ctx.new_page()
        page.goto(server_url + "/?lang=en&view=importance", wait_until="domcontentloaded")
        wait_done(page)
        text = " ".join(random.Random(11).choice(WORDS) for _ in range(300))
        box = page.locator("[data-testid='stMain'] textarea").first
        box.fill(text)
        box.press("Control+Enter")
        page.wait_for_selector("[data-testid='stApp'][data-test-script-state='running']", timeout=30_000)
        page.evaluate("() => { window.__blockUntil = Date.now() + 3000; window.__ws.forEach(w => w.close()); }")
        # reconnected: a socket opened after the cut
        page.wait_for_function("() => Date.now() > window.__blockUntil && window.__ws.some(w => w.readyState === 1)",
                               timeout=60_000, polling=200)
        page.wait_for_selector(DONE, timeout=180_000)
        wait_done(page)
        assert_no_exception(page)
        main = page.locator("[data-testid='stMain']").inner_text()
        assert "Effect of knocking out each head" in main
        assert page.locator("[data-testid='stMain'] textarea").first.input_value() == text
    finally:
        ctx.close()


BAR = "Integrated gradients along the path"
PERCENT = f"""() => {{ const el = [...document.querySelectorAll("[data-testid='stProgress']")]
  .find(e => e.innerText.includes("{BAR}"));
  const m = el && el.innerText.match(/(\\d+) %/); return m ? +m[1] : null; }}"""  # the bar's share done, or null


def test_a_classmate_who_leaves_does_not_restart_the_computation_another_waits_for(browser, server_url):
    """Two visitors ask for "Which tokens matter" on the same long text: the second waits on the computation the
    first started. The first closes the tab: the server stops computing for them, yet the second's progress goes on
    (it never falls back to the start) and their page stays free of errors."""
    text = " ".join(random.Random(23).choice(WORDS) for _ in range(400))
    tabs = []
    try:
        for _ in range(2):
            ctx = browser.new_context(viewport={"width": 1400, "height": 1100})
            page = ctx.new_page()
            page.goto(server_url + "/?lang=en&view=importance&isteps=128", wait_until="domcontentloaded")
            wait_done(page)
            box = page.locator("[data-testid='stMain'] textarea").first
            box.fill(text)
            box.press("Control+Enter")
            page.wait_for_function(f"() => ({PERCENT})() !== null", timeout=120_000, polling=100)
            tabs.append((ctx, page))
        (first, _), (_, second) = tabs
        second.wait_for_function(f"() => ({PERCENT})() > 0", timeout=60_000, polling=100)
        # the second page records its share done every 100 ms from now on
        second.evaluate(f"() => {{ window.__seen = []; window.__t0 = Date.now();"
                        f"  setInterval(() => window.__seen.push(({PERCENT})()), 100); }}")
        first.close()
        tabs.pop(0)
        # 4 s: past the grace (1 s) and the watcher's next look, the first visitor has been marked as gone
        second.wait_for_function("() => Date.now() - window.__t0 > 4000 && window.__seen.length > 30",
                                 timeout=120_000, polling=200)
        seen = second.evaluate("() => window.__seen")
        running = [p for p in seen if p is not None]
        assert running and running[-1] > running[0], seen[:: max(1, len(seen) // 20)]  # it went on
        assert running == sorted(running), seen                                       # ... and never began again
        if seen[-1] is None:  # it ended: the page drew the result
            wait_done(second)
            assert "Integrated gradients" in second.locator("[data-testid='stMain']").inner_text()
        assert_no_exception(second)
    finally:
        for ctx, _ in tabs:
            ctx.close()
