"""Scaling page in headless Chromium: every part from its URL (English and Chinese, wide and narrow, dark), switching
parts by click, the training button. Screenshots land in artifacts/screenshots/scaling-*.png."""
from __future__ import annotations

import pytest

from tests.browser.conftest import CHART, assert_no_exception, screenshot, wait_done

pytestmark = pytest.mark.browser

PARTS = ("dist", "softmax", "model", "train")
ERROR = "[data-testid='stAlert'] [data-testid='stAlertContentError']"


def _settle(page, selector: str = CHART, timeout_ms: int = 120_000) -> None:
    """wait_done can return before a slow first run has started on a busy machine: wait for content as well."""
    page.wait_for_selector(selector, timeout=timeout_ms)
    wait_done(page)
    page.wait_for_timeout(500)


def _main(page) -> str:
    return page.locator("[data-testid='stMain']").inner_text()


@pytest.mark.parametrize("part", PARTS[:3])
@pytest.mark.parametrize("lang,width,dark", [("en", 1400, False), ("zh", 1400, True), ("zh", 420, False)])
def test_part_renders(open_page, part, lang, width, dark):
    page = open_page(f"/scaling?lang={lang}&part={part}", width=width, dark=dark)
    _settle(page)
    assert_no_exception(page)
    assert page.locator(ERROR).count() == 0
    assert page.locator(CHART).count() >= 3
    screenshot(page, f"scaling-{part}-{lang}-{width}{'-dark' if dark else ''}")


def test_switch_part_by_click_updates_url(open_page):
    page = open_page("/scaling?lang=en&dk=1024")
    _settle(page)
    assert "1024" in _main(page)
    page.get_by_text("2 · Softmax saturation", exact=True).click()
    _settle(page, "text=Size of the softmax Jacobian")
    assert "part=softmax" in page.url and "dk=1024" in page.url
    assert_no_exception(page)


@pytest.mark.parametrize("lang,width,dark", [("en", 1400, False), ("zh", 420, True)])
def test_training_button(open_page, lang, width, dark):
    page = open_page(f"/scaling?lang={lang}&part=train&exp_dk=512&exp_steps=200", width=width, dark=dark)
    _settle(page, "[data-testid='stButton']")
    assert page.locator(CHART).count() == 0
    page.locator("[data-testid='stButton'] button").first.click()
    _settle(page, CHART, timeout_ms=180_000)
    assert_no_exception(page)
    assert page.locator(ERROR).count() == 0
    assert page.locator("[data-testid='stMetric']").count() == 3
    screenshot(page, f"scaling-train-{lang}-{width}{'-dark' if dark else ''}")


def test_empty_sentence_is_explained(open_page):
    page = open_page("/scaling?lang=zh&part=model&text=%20")
    _settle(page, ERROR)
    assert_no_exception(page)
    assert page.locator(CHART).count() == 0
    screenshot(page, "scaling-model-bad-input-zh")
