"""Attention page in the browser: clicking a tile of the grid opens that head; the line view isolates a token's
lines on hover; a long input stays usable; hostile text is shown as text."""
from __future__ import annotations

import pytest

from tests.browser.conftest import assert_no_exception, choose, chosen, pick, screenshot, wait_done

pytestmark = pytest.mark.browser


def test_grid_click_opens_head(open_page):
    page = open_page("/?view=grid&lang=en")
    assert_no_exception(page)
    # plotly draws after the script run has ended (late on a busy machine): wait for the grid's points
    page.wait_for_selector(".js-plotly-plot .scatterlayer .point", timeout=60_000)
    points = page.locator(".js-plotly-plot .scatterlayer .point")
    assert points.count() == 6 * 12
    box = points.nth(2 * 12 + 3).bounding_box()  # layer 2, head 3
    # plotly takes the clicked point from its last hover: rest on the cell first, as a person's pointer does
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2, steps=3)
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.wait_for_timeout(500)
    wait_done(page)
    assert page.get_by_text("Layer 2, head 3").count() >= 1
    screenshot(page, "attention-grid-click-opened")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_statistics_click_opens_head(open_page, lang):
    """The statistics map promises that clicking a cell opens that head: it does, in both languages."""
    page = open_page(f"/?view=stats&lang={lang}")
    page.wait_for_selector(".js-plotly-plot .scatterlayer .point", timeout=60_000)
    points = page.locator(".js-plotly-plot .scatterlayer .point")
    assert points.count() == 6 * 12
    box = points.nth(4 * 12 + 9).bounding_box()  # layer 4, head 9
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2, steps=3)
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.wait_for_timeout(500)
    wait_done(page)
    assert "view=" not in page.url and "layer=4" in page.url and "head=9" in page.url   # the one-head view
    layer, head = ("Layer", "Head") if lang == "en" else ("层", "头")
    assert chosen(page, layer) == "4" and chosen(page, head) == "9"
    assert_no_exception(page)


def _heads_to_draw(page) -> list[str]:
    tags = page.locator("[data-testid='stMultiSelect'] .react-aria-ComboBox [data-tag]")
    return [tags.nth(i).get_attribute("aria-label") for i in range(tags.count())]


def test_lines_follow_the_head_dropdown(open_page):
    """'Heads to draw' follows the Head dropdown, and the line view draws that head."""
    page = open_page("/?view=lines&lang=en&head=0")  # (without a head, the page opens on the clearest head)
    page.get_by_role("combobox", name="Heads to draw", exact=True).wait_for(timeout=60_000)
    assert _heads_to_draw(page) == ["0"]
    choose(page, "Head", "5")
    assert _heads_to_draw(page) == ["5"]
    assert page.frame_locator("iframe").first.locator("line").count() > 0
    pick(page, "View", "One head")
    pick(page, "View", "Lines")
    assert _heads_to_draw(page) == ["5"] and chosen(page, "Head") == "5"
    assert_no_exception(page)


def test_line_view_hover_isolates(open_page):
    page = open_page("/?view=lines&lang=en&head=1")
    frame = page.frame_locator("iframe").first
    lines = frame.locator("line")
    n_lines = lines.count()
    assert n_lines > 10
    frame.locator("text.tok").nth(2).hover()  # the query token "the"... isolates its lines
    page.wait_for_timeout(200)
    visible = frame.locator("line:not([stroke-opacity='0'])").count()
    assert 0 < visible < n_lines
    screenshot(page, "attention-lines-hover")


def test_long_input_and_hostile_text(open_page):
    long_text = " ".join(["word"] * 700)
    page = open_page(f"/?view=grid&lang=zh&text={long_text}", width=1200)
    assert_no_exception(page)
    assert page.get_by_text("截断").count() >= 1  # the truncation note
    screenshot(page, "attention-long-grid-zh")
    hostile = "<script>alert(1)</script> <b>bold</b> [SEP] 🙂 مرحبا 你好"
    page = open_page("/?lang=en&text=" + hostile.replace(" ", "%20").replace("<", "%3C").replace(">", "%3E"))
    assert_no_exception(page)
    assert page.locator("b", has_text="bold").count() == 0  # never rendered as HTML
    screenshot(page, "attention-hostile-text")
