"""A connection that drops while a page opens (a busy server or a starved browser) must not change the page.

Streamlit's browser side learns its page's id from the server's first answer; a connection dropped before that answer
made the reconnected browser ask for no page, and the app opened Attention with Train's parameters in the address
(seen in this suite under load: a test that opened /train?task=date found task=copy). app.py asks for the page of the
browser's URL in that case (app_pages/_ui/nav.reask_lost_page). Here Playwright stands between browser and server
and closes the websocket after the server's first few messages; the browser reconnects as it would after a real drop.
"""
from __future__ import annotations

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.browser.conftest import assert_no_exception, chosen, open_tab, wait_done
from viz_core import i18n

pytestmark = pytest.mark.browser


ATTEMPTS = 3          # drops tried before the test gives up (see open_with_a_drop)
DRAWN_WITHIN_MS = 40_000


def open_with_a_drop(browser, url: str, drop_after: int, heading: str):
    """Open `url` with the first websocket closed (both ways) after `drop_after` server messages and wait for the page
    named `heading`; returns (context, page, seen). seen["connections"] counts the browser's connections.

    When the drop falls just as the server finishes the first run, Streamlit (1.67) can lose the reconnected browser's
    rerun (its answer stops after new_session: seen with a message log, without and with our reask) and the tab stays
    blank: a loss of Streamlit's that this test does not test (the app cannot prevent it). Such an attempt
    is tried again with a fresh tab, up to ATTEMPTS times; a page that is drawn is the one the assertions read, so a
    wrong page (Attention for Train, the address lost) still fails."""
    for attempt in range(ATTEMPTS):
        ctx = browser.new_context(viewport={"width": 1400, "height": 1600})
        page = ctx.new_page()
        seen = {"connections": 0, "messages": 0}

        def relay(ws, seen=seen):
            seen["connections"] += 1
            first = seen["connections"] == 1
            server = ws.connect_to_server()

            def to_browser(message):
                ws.send(message)
                if first:
                    seen["messages"] += 1
                    if seen["messages"] == drop_after:  # a real drop ends both sides of the connection
                        ws.close()
                        server.close()
            server.on_message(to_browser)

        page.route_web_socket("**/_stcore/stream", relay)
        page.goto(url, wait_until="domcontentloaded")
        try:
            page.get_by_role("heading").first.wait_for(timeout=DRAWN_WITHIN_MS)
        except PlaywrightTimeout:
            print(f"attempt {attempt + 1}: the tab stayed blank after the drop (Streamlit lost the rerun); again")
            ctx.close()
            continue
        wait_done(page)
        page.get_by_role("heading", name=heading).wait_for(timeout=60_000)
        return ctx, page, seen
    pytest.fail(f"the tab stayed blank after a drop in all {ATTEMPTS} attempts")


@pytest.mark.parametrize("drop_after", [1, 2, 4])
def test_a_drop_while_train_opens_keeps_its_page_task_and_language(browser, server_url, drop_after):
    ctx, page, seen = open_with_a_drop(browser, server_url + "/train?lang=zh&task=date", drop_after,
                                       i18n.t("train.title", "zh"))
    try:
        assert seen["connections"] >= 2, "the connection was not dropped: this test did not test a reconnect"
        assert page.evaluate("location.pathname").endswith("/train")
        open_tab(page, i18n.t("train.tab_decode", "zh"))
        assert_no_exception(page)
        search = page.evaluate("location.search")
        assert "task=date" in search and "lang=zh" in search and "tab=decode" in search, search
        assert chosen(page, i18n.t("train.task", "zh")) == i18n.t("train.task_date", "zh")
    finally:
        ctx.close()


def test_a_drop_while_a_page_opens_in_english_keeps_its_state(browser, server_url):
    ctx, page, seen = open_with_a_drop(browser, server_url + "/scaling?dk=512", 2, i18n.t("scaling.title", "en"))
    try:
        assert seen["connections"] >= 2
        assert_no_exception(page)
        assert page.evaluate("location.pathname").endswith("/scaling")
        assert "dk=512" in page.evaluate("location.search")
    finally:
        ctx.close()
