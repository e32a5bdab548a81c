"""Anatomy page in headless Chromium: every section from its URL (en / zh, wide / narrow, dark), state restored
from the URL, switching sections by clicking, and bad input shown as a message.
Screenshots land in artifacts/screenshots/anatomy-*.png."""
from __future__ import annotations

import pytest

from tests.browser.conftest import (CHART, assert_no_exception, pick, picked, screenshot, switch_language,
                                    tick_labels, wait_done)

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


def test_pad_side_gamma_and_beta_open_with_a_click_and_hold_closed(open_page):
    """Where the pads sit, γ and β are in a section under the batch's sliders: a click opens it (nmore=1 in the
    address), its controls change the grids, the language switch keeps it open with the values, closing it keeps the
    values in the address, and reloading that address gives the same page."""
    page = open_page("/anatomy?lang=en&nb=2&nn=3&nd=4")
    _settle(page)
    assert page.locator("[data-testid='stMain'] [data-testid='stSlider']").count() == 4  # batch, N, D, pads
    fold = page.locator("[data-testid='stExpander'] summary").filter(has_text="Where the pads sit, γ and β")
    fold.click()
    page.wait_for_url(lambda url: "nmore=1" in url)
    _settle(page)
    pick(page, "Padding at", "the start")
    page.wait_for_url(lambda url: "side=start" in url)
    gamma = page.locator(".st-key-anatomy-gamma input[type='range']")
    gamma.focus()
    gamma.press("ArrowRight")  # 1.0 -> 1.1
    page.wait_for_url(lambda url: "gamma=1.1" in url)
    _settle(page)
    assert "s1·t0 (pad)" in " ".join(tick_labels(page, "y", ".st-key-norm_grid_layer"))  # pads at the start
    switch_language(page, "zh")
    assert picked(page, "填充位于") == "句首" and gamma.input_value() == "1.1"
    screenshot(page, "anatomy-norms-more-zh-clicked")
    page.locator("[data-testid='stExpander'] summary").filter(has_text="填充的位置").click()
    page.wait_for_url(lambda url: "nmore=1" not in url)
    _settle(page)
    assert gamma.count() == 0 and "gamma=1.1" in page.url and "side=start" in page.url
    page.goto(page.url)  # the address, opened again
    _settle(page)
    assert "句1·词0（填充）" in " ".join(tick_labels(page, "y", ".st-key-norm_grid_layer"))
    assert_no_exception(page)
