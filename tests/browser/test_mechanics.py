"""Mechanics page in headless Chromium: every section opens from its URL (English and Chinese, wide and narrow, dark),
and the URL state drives what is drawn. Screenshots land in artifacts/screenshots/mechanics-*.png."""
from __future__ import annotations

import pytest

from tests.browser.conftest import (CHART, assert_no_exception, choose, chosen, screenshot, switch_language,
                                    wait_done)

pytestmark = pytest.mark.browser

SECTIONS = ["steps", "masks", "variants", "cross", "additive"]


def _plots(page) -> int:
    """Number of plotly charts once the first one has mounted (they appear a moment after the script ends)."""
    page.wait_for_selector(CHART, timeout=30_000)
    page.wait_for_timeout(500)
    return page.locator(CHART).count()


@pytest.mark.parametrize("section", SECTIONS)
@pytest.mark.parametrize("lang,width,dark", [("en", 1400, False), ("zh", 1400, True), ("zh", 420, False)])
def test_section_renders(open_page, section, lang, width, dark):
    page = open_page(f"/mechanics?lang={lang}&section={section}", width=width, dark=dark)
    assert_no_exception(page)
    assert page.locator("[data-testid='stAlert'] [data-testid='stAlertContentError']").count() == 0
    assert _plots(page) >= 1
    screenshot(page, f"mechanics-{section}-{lang}-{width}{'-dark' if dark else ''}")


def test_worked_example_values_and_bad_cell(open_page):
    page = open_page("/mechanics?lang=en&section=steps")
    assert _plots(page) == 7  # Q, K, V, QK^T, scaled, softmax, output (the inputs: in a section that opens)
    assert "1.000, 1.000, 1.000" in page.locator("[data-testid='stMain']").inner_text()
    assert page.locator("[data-testid='stDataFrame']").count() == 0  # no editor drawn while the section is closed
    page.get_by_text("See and edit X, W_q, W_k, W_v", exact=True).click()  # a person opens it
    page.wait_for_function("() => document.querySelectorAll(\"[data-testid='stDataFrame']\").length === 4")
    wait_done(page)
    assert "edit=1" in page.url and _plots(page) == 7
    assert_no_exception(page)
    page.reload(wait_until="domcontentloaded")  # the address reopens it
    page.wait_for_function("() => document.querySelectorAll(\"[data-testid='stDataFrame']\").length === 4")
    wait_done(page)
    page.go_back()  # one history entry: Back closes it again
    page.wait_for_function("() => !location.search.includes('edit=1') && "
                           "document.querySelectorAll(\"[data-testid='stDataFrame']\").length === 0")
    wait_done(page)
    assert _plots(page) == 7 and "1.000, 1.000, 1.000" in page.locator("[data-testid='stMain']").inner_text()
    assert_no_exception(page)
    bad = open_page("/mechanics?lang=zh&section=steps&wk=0.1,0.3;x,0.4;0.5,0.7;0.1,0.2")
    assert_no_exception(bad)
    main = bad.locator("[data-testid='stMain']").inner_text()
    assert "不是数字" in main and "展开“查看并修改 X、W_q、W_k、W_v”来修正这个单元格" in main
    assert bad.locator(CHART).count() == 0  # nothing drawn from a bad matrix
    bad.get_by_text("查看并修改 X、W_q、W_k、W_v", exact=True).click()
    bad.wait_for_function("() => document.querySelectorAll(\"[data-testid='stDataFrame']\").length === 4")
    wait_done(bad)
    assert "不是数字" in bad.locator("[data-testid='stMain']").inner_text()  # the editor names the same cell
    screenshot(bad, "mechanics-bad-cell-zh")


def test_nan_row_demo_and_real_model(open_page):
    page = open_page("/mechanics?lang=en&section=masks&kind=causal_padding&side=start&item=0")
    text = page.locator("[data-testid='stMain']").inner_text()
    assert "NaN" in text and "(4, 1, 5, 5)" in text
    assert _plots(page) == 8  # batch, mask, masked scores, weights, four masking methods
    screenshot(page, "mechanics-masks-nan-en")
    real = open_page("/mechanics?lang=en&section=steps&src=real&rlayer=3&rhead=5", timeout_ms=240_000)
    assert_no_exception(real)
    assert "layer 3, head 5" in real.locator("[data-testid='stMain']").inner_text()
    assert _plots(real) == 7  # Q, K, V, QK^T, scaled, softmax, output of that head (no mask: no "+ M" stage)
    screenshot(real, "mechanics-real-en")


def test_switch_section_updates_url(open_page):
    page = open_page("/mechanics?lang=en&section=steps")
    page.get_by_text("MHA / GQA / MQA", exact=True).first.click()
    wait_done(page)
    assert "section=variants" in page.url
    assert "KV cache" in page.locator("[data-testid='stMain']").inner_text()


def test_an_open_section_stays_open_in_the_other_language(open_page):
    """A translated label is a new expander to Streamlit: the section is keyed per language so it stays open."""
    page = open_page("/mechanics?lang=en&section=steps")
    page.get_by_text("See and edit X, W_q, W_k, W_v", exact=True).click()
    page.wait_for_function("() => document.querySelectorAll(\"[data-testid='stDataFrame']\").length === 4")
    wait_done(page)
    switch_language(page, "zh")
    page.get_by_text("查看并修改 X、W_q、W_k、W_v", exact=True).wait_for()
    wait_done(page)
    assert page.locator("[data-testid='stDataFrame']").count() == 4 and "edit=1" in page.url
    assert_no_exception(page)


def _window(page, label: str):
    """The window slider's range input, found by its visible label."""
    return page.locator("[data-testid='stSlider']").filter(has_text=label).locator("input[type='range']").first


def _sliding_state_holds(page, lang: str) -> None:
    """The sliding-window mask with W = 2 on sentence 1 (5 tokens): in the address, the controls and the caption."""
    mask, window, numbers = {"en": ("Mask", "Window W", "W = 2: 9 of the 25 cells"),
                             "zh": ("掩码类型", "窗口 W", "W = 2：这里 25 个格子中有 9 个可见")}[lang]
    assert "kind=sliding" in page.url and "win=2" in page.url
    assert chosen(page, mask) == {"en": "Sliding window", "zh": "滑动窗口"}[lang]
    assert _window(page, window).input_value() == "2"
    assert numbers in page.locator("[data-testid='stMain']").inner_text()
    assert _plots(page) == 8  # batch, mask, masked scores, weights, four masking methods
    assert_no_exception(page)


def test_sliding_window_by_hand(open_page):
    """A person picks the sliding-window mask, narrows the window, switches to Chinese, presses Back and reloads:
    the mask and its window hold throughout, and nothing raises."""
    page = open_page("/mechanics?lang=en&section=masks&item=1")
    assert page.locator("[data-testid='stSlider']").filter(has_text="Window W").count() == 0  # only for this mask
    choose(page, "Mask", "Sliding window")
    assert "kind=sliding" in page.url
    thumb = _window(page, "Window W")
    assert thumb.input_value() == "3"  # the default W
    thumb.focus()
    thumb.press("ArrowLeft")
    wait_done(page)
    _sliding_state_holds(page, "en")
    switch_language(page, "zh")
    assert "lang=zh" in page.url
    _sliding_state_holds(page, "zh")
    screenshot(page, "mechanics-sliding-zh")
    page.go_back()  # Back undoes the language switch only
    wait_done(page)
    assert "lang=zh" not in page.url
    _sliding_state_holds(page, "en")
    page.reload(wait_until="domcontentloaded")  # the address alone restores it
    wait_done(page)
    _sliding_state_holds(page, "en")
    screenshot(page, "mechanics-sliding-en")
