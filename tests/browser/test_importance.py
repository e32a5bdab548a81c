"""'Which heads matter' in the browser: a person opens the view, switches language (the view is kept), clicks a
cell of the importance map and lands on that head in the one-head view. Screenshots in both languages, wide and
phone-sized, under artifacts/screenshots/importance_*.png."""
from __future__ import annotations

import pytest

from tests.browser.conftest import (assert_no_exception, chosen, pick, picked, screenshot, switch_language, type_text,
                                    wait_done)

pytestmark = pytest.mark.browser
CELLS = ".js-plotly-plot .scatterlayer .point"


def _click_cell(page, layer: int, head: int, n_heads: int = 12) -> None:
    """Click the cell (layer, head) of the first chart of the view: the importance map."""
    page.wait_for_selector(CELLS, timeout=240_000)
    cells = page.locator(".js-plotly-plot").first.locator(".scatterlayer .point")
    assert cells.count() == 6 * n_heads
    box = cells.nth(layer * n_heads + head).bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2, steps=3)
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.wait_for_timeout(500)
    wait_done(page)


def test_open_switch_language_click_a_head(open_page):
    page = open_page("/?lang=en")
    type_text(page, "Text B (optional: a second sentence for sentence-pair models)", "A dog lay on the rug.")
    pick(page, "View", "Which heads matter")
    page.wait_for_selector(CELLS, timeout=240_000)
    page.get_by_text("Completeness check", exact=False).wait_for(timeout=240_000)  # attribution comes after the maps
    wait_done(page)
    assert page.get_by_text("Which tokens matter").count() == 1
    assert_no_exception(page)

    switch_language(page, "zh")
    assert picked(page, "视图") == "哪些头重要"
    page.get_by_text("哪些词元重要").wait_for(timeout=240_000)
    assert_no_exception(page)

    _click_cell(page, 3, 7)
    assert "layer=3" in page.url and "head=7" in page.url and "view=" not in page.url  # the one-head view
    assert chosen(page, "层") == "3" and chosen(page, "头") == "7"
    assert picked(page, "视图") == "单个头"
    assert_no_exception(page)


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("width", [1400, 390])
def test_screenshots(open_page, lang, width):
    page = open_page(f"/?view=importance&lang={lang}&pair=A%20dog%20lay%20on%20the%20rug.", width=width,
                     height=4200 if width < 600 else 3000)  # tall enough for the whole view (the page scrolls inside)
    page.wait_for_selector(CELLS, timeout=240_000)
    page.wait_for_timeout(800)
    assert_no_exception(page)
    screenshot(page, f"importance_{lang}_{width}")
