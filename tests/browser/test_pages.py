"""Every page opens in headless Chromium, in English and Chinese, wide and narrow, light and dark, without an
exception box; a screenshot of each view lands in artifacts/screenshots/ to be looked at."""
from __future__ import annotations

import pytest

from app_pages._ui.nav import DEFAULT_PAGE, PAGES
from tests.browser.conftest import assert_no_exception, screenshot

pytestmark = pytest.mark.browser

VIEWS = [  # (lang, width, dark)
    ("en", 1400, False),
    ("zh", 1400, False),
    ("en", 420, False),
    ("zh", 1400, True),
]


@pytest.mark.parametrize("stem", [stem for stem, _ in PAGES])
@pytest.mark.parametrize("lang,width,dark", VIEWS)
def test_page_renders(open_page, stem, lang, width, dark):
    path = "" if stem == DEFAULT_PAGE else stem  # the default page is served at the root URL
    page = open_page(f"/{path}?lang={lang}", width=width, dark=dark)
    assert_no_exception(page)
    main = page.locator("[data-testid='stMain']")
    assert main.count() == 1 and main.inner_text().strip(), "the page drew nothing"
    screenshot(page, f"{stem}-{lang}-{width}{'-dark' if dark else ''}")
