"""Every page is reachable by its name, / keeps opening the default page, and an address that names no page says so
in the visitor's language with a link home (app_pages/_ui/nav.route_by_name)."""
from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import expect

from app_pages._ui.nav import DEFAULT_PAGE, PAGES
from tests.browser.conftest import assert_no_exception, screenshot, wait_done
from viz_core.i18n import t

pytestmark = pytest.mark.browser


def _title(page) -> str:
    return page.locator("[data-testid='stMain'] h1").first.inner_text().strip()


@pytest.mark.parametrize("stem", [stem for stem, _ in PAGES])
def test_every_page_opens_by_its_name(open_page, stem):
    page = open_page(f"/{stem}?lang=zh")
    assert_no_exception(page)  # also: no Streamlit "Page not found" dialog
    assert _title(page) == t(f"{stem}.title", "zh")


def test_the_root_address_opens_the_default_page(open_page):
    page = open_page("/")
    assert_no_exception(page)
    assert _title(page) == t(f"{DEFAULT_PAGE}.title")


def test_the_default_page_by_name_keeps_its_parameters(open_page):
    page = open_page(f"/{DEFAULT_PAGE}?lang=zh&text=Cats+purr+loudly")
    assert_no_exception(page)
    assert _title(page) == t(f"{DEFAULT_PAGE}.title", "zh")
    shown = ("() => [...document.querySelectorAll(\"textarea, input[type='text']\")]"
             ".some(e => e.value === 'Cats purr loudly')")
    try:  # (on a loaded machine the text box can come after the run's end is first seen)
        page.wait_for_function(shown, timeout=30_000)
    except Exception:  # noqa: BLE001 - the assertion below says what is missing
        pass
    assert page.evaluate(shown), "the address's sentence was not shown"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_an_unknown_address_says_so_in_the_visitors_language(open_page, lang):
    page = open_page(f"/no-such-page?lang={lang}")
    assert_no_exception(page)
    assert _title(page) == t("common.not_found_title", lang)
    expect(page.get_by_text("/no-such-page")).to_have_count(1)  # the asked address is shown
    assert parse_qs(urlparse(page.url).query).get("path") == ["no-such-page"], "the address forgot what was asked"
    page.reload()  # a reload (a new session) still says what was asked
    wait_done(page)
    assert_no_exception(page)
    assert _title(page) == t("common.not_found_title", lang)
    expect(page.get_by_text("/no-such-page")).to_have_count(1)
    screenshot(page, f"not-found-{lang}")
    page.locator("[data-testid='stMain'] [data-testid='stPageLink-NavLink']").filter(
        has_text=t("common.not_found_home", lang)).click()
    page.wait_for_function("() => !location.pathname.includes('no-such-page')")
    wait_done(page)
    assert_no_exception(page)
    assert _title(page) == t(f"{DEFAULT_PAGE}.title", lang)
    assert urlparse(page.url).path in ("/", f"/{DEFAULT_PAGE}")
