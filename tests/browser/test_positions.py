"""Positions page in headless Chromium: every part draws without an exception (English and Chinese, wide, narrow
and dark), a slider move lands in the URL, and the URL restores the view. Screenshots go to artifacts/screenshots/."""
from __future__ import annotations

import pytest

from tests.browser.conftest import CHART, assert_no_exception, screenshot, wait_done

pytestmark = pytest.mark.browser

PARTS = ("heatmap", "waves", "similarity", "relative", "example", "scale", "learned", "order")


def _plots(page) -> int:
    """Number of plotly figures, once the first one has mounted (plotly's code loads lazily)."""
    page.wait_for_selector(CHART, timeout=60_000)
    return page.locator(CHART).count()


def _wait_plots(page, n: int) -> None:
    """Until exactly n plotly figures are in the main column (a part's figures, none of the part before)."""
    page.wait_for_function(f"() => document.querySelectorAll(\"[data-testid='stMain'] .js-plotly-plot\").length == {n}",
                           timeout=60_000)


@pytest.mark.parametrize("part", PARTS)
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_part_renders(open_page, part, lang):
    page = open_page(f"/positions?lang={lang}&part={part}")
    assert_no_exception(page)
    assert page.locator("[data-testid='stAlert']").filter(has_text="Something went wrong").count() == 0
    assert _plots(page) >= 1
    screenshot(page, f"positions-{part}-{lang}")


@pytest.mark.parametrize("part,width,dark", [("heatmap", 420, False), ("relative", 420, False),
                                             ("order", 420, True), ("learned", 1400, True)])
def test_narrow_and_dark(open_page, part, width, dark):
    page = open_page(f"/positions?lang=zh&part={part}", width=width, dark=dark)
    assert_no_exception(page)
    assert _plots(page) >= 1
    screenshot(page, f"positions-{part}-zh-{width}{'-dark' if dark else ''}")


def test_slider_move_is_in_the_url_and_the_url_restores_it(open_page, server_url):
    page = open_page("/positions?lang=en&part=heatmap&max_len=32&d_model=16")
    thumb = page.locator("[data-testid='stSlider'] input[type='range']").nth(1)  # d_model
    thumb.focus()
    thumb.press("ArrowRight")
    wait_done(page)
    assert "d_model=17" in page.url
    assert_no_exception(page)
    again = open_page("/positions?lang=en&part=heatmap&max_len=32&d_model=17")
    assert again.locator("[data-testid='stSlider'] input[type='range']").nth(1).input_value() == "17"
    screenshot(again, "positions-heatmap-en-odd")


def test_bad_vector_shows_a_message(open_page):
    page = open_page("/positions?lang=zh&part=example&vec=1,%20x,%203")
    assert_no_exception(page)
    assert page.locator("[data-testid='stAlert']").filter(has_text="不是数字").count() == 1
    screenshot(page, "positions-example-zh-error")


def test_waves_are_the_next_part_with_the_same_sizes(open_page):
    """The table's columns as waves are part 2, reached with a click on its radio: the same max_len and d_model as
    the table's, two figures, the part in the address; Back returns to the table."""
    page = open_page("/positions?lang=en&max_len=32&d_model=16")
    assert _plots(page) == 1
    page.locator("[data-testid='stRadio'] label").filter(has_text="2 · Waves").click()
    page.wait_for_url(lambda url: "part=waves" in url)
    wait_done(page)
    _wait_plots(page, 2)
    sliders = page.locator("[data-testid='stSlider'] input[type='range']")
    assert [sliders.nth(i).input_value() for i in range(2)] == ["32", "16"]
    assert_no_exception(page)
    screenshot(page, "positions-waves-en-clicked")
    page.go_back()
    page.wait_for_url(lambda url: "part=waves" not in url)
    wait_done(page)
    _wait_plots(page, 1)
    assert_no_exception(page)
