"""A server whose memory budget is spent (viz_core/runtime/budget.py) refuses new heavy work with a message and keeps
working: on a server of its own whose budget (ATTN_MEMORY_BUDGET_MB=1) is smaller than the server itself, a visitor
in Chromium opens the Attention page, types a sentence, switches to Chinese and goes on to a page that computes no
model (Positions); every model computation is refused with "the server is busy" in the visitor's language, nothing
breaks, and an upload is answered with HTTP 503 before its body is read."""
from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from tests.browser.conftest import (assert_no_exception, go_to, screenshot, streamlit_server,
                                    switch_language, type_text, wait_done)
from viz_core.i18n import t

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def full_server():
    with streamlit_server({"ATTN_MEMORY_BUDGET_MB": "1"}) as (url, _proc):
        yield url


@pytest.fixture
def page(browser, full_server):
    ctx = browser.new_context(viewport={"width": 1400, "height": 1600})
    p = ctx.new_page()
    p.goto(full_server + "/attention?lang=en", wait_until="domcontentloaded")
    wait_done(p)
    yield p
    ctx.close()


def busy_message(page) -> str:
    alerts = page.locator("[data-testid='stAlertContentError']")
    alerts.first.wait_for(timeout=30_000)
    return "\n".join(alerts.all_inner_texts())


def test_a_full_server_says_it_is_busy_and_keeps_working(page, full_server):
    assert "The server is busy" in busy_message(page)
    assert_no_exception(page)
    type_text(page, t("attention.text_a_pair", "en"), "A sentence of my own, typed while the server is full.")
    wait_done(page)
    assert "The server is busy" in busy_message(page)
    assert_no_exception(page)
    switch_language(page, "zh")
    wait_done(page)
    assert "服务器正忙" in busy_message(page)
    assert_no_exception(page)
    screenshot(page, "memory_budget_attention_zh")
    go_to(page, t("common.nav_positions", "zh"))  # a page that computes no model is served as usual
    assert page.locator("[data-testid='stAlertContentError']").count() == 0
    assert page.locator(".js-plotly-plot").count() >= 1
    assert_no_exception(page)


def test_an_upload_to_a_full_server_is_refused_before_it_is_read(full_server):
    request = urllib.request.Request(full_server + "/_stcore/upload_file/some-session/some-file", method="PUT",
                                     data=b"x" * 1000, headers={"Content-Type": "application/octet-stream"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 503
    assert b"busy" in refused.value.read()
