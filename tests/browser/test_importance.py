"""'Which heads matter' in the browser: a person opens the view, switches language (the view is kept), clicks a
cell of the importance map and lands on that head in the one-head view. Screenshots in both languages, wide and
phone-sized, under artifacts/screenshots/importance_*.png."""
from __future__ import annotations

import re
import time
from urllib.parse import quote

import pytest

from tests.browser.conftest import (assert_no_exception, chosen, pick, picked, screenshot, switch_language, type_text,
                                    wait_done)

pytestmark = pytest.mark.browser
CELLS = ".js-plotly-plot .scatterlayer .point"
BAR = "[data-testid='stProgress']"
WORDS = "the quick brown fox jumps over a lazy dog while seven curious cats watch it".split()
LONG = " ".join(WORDS[i % len(WORDS)] for i in range(398))  # 400 tokens with [CLS] and [SEP]


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


def _bar(page) -> tuple[str, int, int] | None:
    """(what, percent, seconds) the progress bar says ("map" or "attribution"), or None when there is none."""
    try:
        said = page.locator(BAR).first.inner_text(timeout=1_000)
    except Exception:  # noqa: BLE001 - gone between the count and the read
        return None
    found = re.search(r"(\d+) % done, (\d+) s", said)
    what = "map" if "Knocking out" in said else "attribution"
    return (what, int(found[1]), int(found[2])) if found else None


def test_a_long_text_shows_its_map_first_with_progress_and_a_click_keeps_the_work(open_page, server_url):
    """At 400 tokens: a progress bar while every head is knocked out, the map, then a second bar while integrated
    gradients run. A click meanwhile (another statistic) reruns the page: the map is there at once (no bar), and the
    attribution goes on where it was (its bar never goes back) and ends with its completeness check."""
    page = open_page("/?lang=en")
    page.goto(f"{server_url}/?lang=en&view=importance&text={quote(LONG)}", wait_until="domcontentloaded")
    page.get_by_text("Knocking out every head in turn", exact=False).wait_for(timeout=120_000)
    page.wait_for_selector(CELLS, timeout=120_000)
    page.get_by_text("Integrated gradients along the path", exact=False).wait_for(timeout=120_000)
    assert page.get_by_text("Completeness check", exact=False).count() == 0  # the map came first
    before = None
    while before is None or before[0] != "attribution" or before[2] < 3:  # 3 s into the attribution
        before = _bar(page) or before
        page.wait_for_timeout(100)
    page.get_by_role("combobox", name="How peaked a head is", exact=True).click()
    page.get_by_role("option", name="Entropy (bits)", exact=True).click()
    seen, end = [], time.monotonic() + 3
    while time.monotonic() < end and page.get_by_text("Completeness check", exact=False).count() == 0:
        now = _bar(page)
        if now is not None:
            seen.append(now)
        page.wait_for_timeout(100)
    assert seen and {what for what, _, _ in seen} == {"attribution"}, (before, seen)  # the map was kept
    assert min(sec for _, _, sec in seen) >= before[2], (before, seen)  # never a new computation's first seconds
    assert min(pct for _, pct, _ in seen) >= before[1], (before, seen)
    wait_done(page)
    page.get_by_text("Completeness check", exact=False).wait_for(timeout=60_000)
    assert page.locator(BAR).count() == 0
    assert chosen(page, "How peaked a head is") == "Entropy (bits)"
    assert_no_exception(page)


def test_a_reload_during_a_long_computation_comes_back_to_the_typed_text(open_page):
    """A person types a long text, presses Ctrl+Enter, and reloads while the page still works on it (the map, then
    the attribution: 128 steps, about a minute). The address already holds the text, in one new history entry, so
    the reloaded page shows what they typed, not the page before it."""
    page = open_page("/?lang=en&view=importance&isteps=128")
    box = page.get_by_label("Text A", exact=True)
    start = page.evaluate("history.length")
    mine = LONG.replace("lazy dog", "sleepy wombat", 1)  # not the page's default nor any earlier test's text
    box.fill(mine)
    box.press("Control+Enter")
    # the attribution's bar: the run has passed the map and waits on a computation that lasts far longer than this test
    page.get_by_text("Integrated gradients along the path", exact=False).wait_for(timeout=240_000)
    assert page.get_by_test_id("stApp").get_attribute("data-test-script-state") == "running"
    assert "sleepy+wombat" in page.url, page.url[:200]
    assert page.evaluate("history.length") == start + 1
    page.reload(wait_until="domcontentloaded")
    page.get_by_label("Text A", exact=True).wait_for(timeout=120_000)
    assert page.get_by_label("Text A", exact=True).input_value() == mine
    assert_no_exception(page)
