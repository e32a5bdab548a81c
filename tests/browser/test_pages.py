"""Every page opens in headless Chromium, in English and Chinese, wide and narrow, light and dark, without an
exception box; a screenshot of each view lands in artifacts/screenshots/ to be looked at."""
from __future__ import annotations

import pytest

from app_pages._ui.nav import DEFAULT_PAGE, PAGES
from tests.browser.conftest import assert_no_exception, screenshot
from tests.browser.test_readable import PAGES as READABLE_PAGES

pytestmark = pytest.mark.browser

VIEWS = [  # (lang, width, dark)
    ("en", 1400, False),
    ("zh", 1400, False),
    ("en", 420, False),
    ("zh", 1400, True),
]


# English at 1400 px in the light theme is opened, drawn, screenshot and audited by test_readable.test_wide_en for the
# pages it lists: here only for the others.
CASES = [(lang, width, dark, stem) for lang, width, dark in VIEWS for stem, _ in PAGES
         if not ((lang, width, dark) == ("en", 1400, False) and stem in READABLE_PAGES)]


@pytest.mark.parametrize("lang,width,dark,stem", CASES)
def test_page_renders(open_page, stem, lang, width, dark):
    path = "" if stem == DEFAULT_PAGE else stem  # the default page is served at the root URL
    page = open_page(f"/{path}?lang={lang}", width=width, dark=dark)
    assert_no_exception(page)
    main = page.locator("[data-testid='stMain']")
    assert main.count() == 1 and main.inner_text().strip(), "the page drew nothing"
    screenshot(page, f"{stem}-{lang}-{width}{'-dark' if dark else ''}")
