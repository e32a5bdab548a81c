"""Anatomy page in headless Chromium: every section from its URL (en / zh, wide / narrow, dark), state restored
from the URL, switching sections by clicking, and bad input shown as a message.
Screenshots land in artifacts/screenshots/anatomy-*.png."""
from __future__ import annotations

import pytest

from tests.browser.conftest import CHART, assert_no_exception, screenshot, wait_done

pytestmark = pytest.mark.browser

SECTIONS = ("norms", "placement", "ffn", "dropout", "smoothing", "path")


def _settle(page, selector: str = CHART) -> None:
    """wait_done can return before a slow first run has even started on a busy machine: wait for content too."""
    page.wait_for_selector(selector, timeout=120_000)
    wait_done(page)


@pytest.mark.parametrize("section", SECTIONS)
@pytest.mark.parametrize("lang,width,dark", [("en", 1400, False), ("zh", 1400, False), ("zh", 420, False),
                                             ("en", 1400, True)])
def test_section_renders(open_page, section, lang, width, dark):
    page = open_page(f"/anatomy?lang={lang}&section={section}", width=width, height=3200, dark=dark)
    _settle(page)
    assert_no_exception(page)
    assert page.locator(CHART).count() >= 1, "the section drew no figure"
    assert page.locator("[data-testid='stAlert'] [data-testid='stAlertContentError']").count() == 0
    screenshot(page, f"anatomy-{section}-{lang}-{width}{'-dark' if dark else ''}")


def test_path_shapes_from_url(open_page):
    page = open_page("/anatomy?lang=en&section=path&vocab=1000&pd=4&prompt=哈基咪%20南北")
    _settle(page, "text=63,084,544")
    assert_no_exception(page)
    main = page.locator("[data-testid='stMain']").inner_text()
    assert "(2, 1000)" in main and "(2, 4)" in main
    assert "63,084,544" in main  # the base model's exact count with three-way sharing


def test_switch_section_by_click_updates_url(open_page):
    page = open_page("/anatomy?lang=en")
    _settle(page)
    page.get_by_text("Label smoothing", exact=True).click()
    _settle(page, "text=Computing the loss safely (float32)")
    assert "section=smoothing" in page.url
    assert page.get_by_text("Computing the loss safely (float32)").count() >= 1
    assert_no_exception(page)


def test_empty_text_is_explained(open_page):
    page = open_page("/anatomy?lang=zh&section=path&prompt=%20")
    _settle(page, "text=请至少输入一个词")
    assert_no_exception(page)
    assert page.get_by_text("请至少输入一个词").count() >= 1
    screenshot(page, "anatomy-path-bad-input-zh")
