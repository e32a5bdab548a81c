"""Everything a page loads comes from the app's own server: no font, icon or script from a third party (a class
server must not make each visitor's browser contact one, and offline those requests fail)."""
from __future__ import annotations

from urllib.parse import urlparse

import pytest

from tests.browser.conftest import CHART, assert_no_exception, wait_done

pytestmark = pytest.mark.browser

LOCAL_SCHEMES = {"data", "blob", "about", "chrome-extension"}
PAGES = ["/?lang=en", "/mechanics?lang=zh", "/positions?lang=en", "/anatomy?lang=zh"]  # charts, formulas, both languages


def test_every_request_of_a_page_goes_to_the_apps_own_server(browser, server_url):
    ctx = browser.new_context(viewport={"width": 1400, "height": 1200})
    try:
        page = ctx.new_page()
        requested: list[str] = []
        page.on("request", lambda req: requested.append(req.url))
        own = urlparse(server_url).netloc
        for path in PAGES:
            page.goto(server_url + path, wait_until="domcontentloaded")
            wait_done(page)
            page.locator(CHART).first.wait_for()
            assert_no_exception(page)
            icon = page.evaluate("() => [...document.querySelectorAll(\"link[rel~='icon']\")].map(l => l.href)")
            assert icon and all(urlparse(h).netloc == own or urlparse(h).scheme == "data" for h in icon), icon
        outside = sorted({u for u in requested
                          if urlparse(u).scheme not in LOCAL_SCHEMES and urlparse(u).netloc != own})
        assert len(requested) > 10 and not outside, f"requests to other servers: {outside}"
    finally:
        ctx.close()
