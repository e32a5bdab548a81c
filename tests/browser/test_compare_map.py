"""Comparing, mapping and playing in Chromium, as a student does it: compare two sentences (type a variant, click the
head that moved most, Back, switch language, reload), the query-key map (click a query of your sentence, see its row,
Back), and the histories that play (Train snapshots, the language model's training story, a generation) without touching
the address. Screenshots in artifacts/screenshots/compare_*.png, qkmap_*.png, play_*.png."""
from __future__ import annotations

import re

import pytest

from tests.browser.conftest import (assert_no_exception, charts_drawn, choose, chosen, open_tab, pick, screenshot,
                                    switch_language, type_text, wait_done)
from viz_core import i18n

pytestmark = pytest.mark.browser

RANK = ".st-key-compare_rank_fig .js-plotly-plot"
QK = ".st-key-qk_fig .js-plotly-plot"


def click_centre(page, locator) -> None:
    """Click the middle of an SVG element of a chart (scrolled into view first: the mouse clicks in the viewport)."""
    locator.scroll_into_view_if_needed()
    box = locator.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2, steps=3)
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    wait_done(page)


def wait_address(page, part: str) -> None:
    """Wait until the address holds `part` (the app rewrites it with history.pushState: no navigation event)."""
    page.wait_for_function("p => new URLSearchParams(location.search).toString().split('&').includes(p)", arg=part)


def bar_labels(page) -> list[str]:
    """The ranking's bar names from the top bar down (plotly writes the tick elements in no fixed screen order)."""
    ticks = page.locator(f"{RANK} .yaxislayer-above .ytick text")
    ticks.first.wait_for()
    return page.eval_on_selector_all(f"{RANK} .yaxislayer-above .ytick text", """els => els
        .map(e => [e.getBoundingClientRect().top, e.textContent]).sort((a, b) => a[0] - b[0]).map(x => x[1])""")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_compare_a_variant_and_open_the_head_that_moved_most(open_page, lang):
    page = open_page(f"/?lang={lang}")
    pick(page, i18n.t("attention.view", lang), i18n.t("attention.view_compare", lang))
    type_text(page, i18n.t("attention.text_variant", lang), "The mat sat on the cat because it was tired.")
    assert_no_exception(page)
    assert charts_drawn(page, 4) >= 4  # A, A′, the difference, the ranking
    top = bar_labels(page)[0]  # "Layer 5 · Head 9": the head whose attention moved most
    layer, head = re.findall(r"\d+", top)
    click_centre(page, page.locator(f"{RANK} .barlayer .point").first)
    wait_address(page, f"head={head}")  # the click's rerun wrote the head into the address
    wait_done(page)
    layer_label, head_label = i18n.t("attention.layer", lang), i18n.t("attention.head", lang)
    assert chosen(page, layer_label) == layer and chosen(page, head_label) == head
    assert f"layer={layer}" in page.url and f"head={head}" in page.url and "text2=" in page.url
    diff_title = i18n.t("attention.compare_diff", lang, layer=layer, head=head)
    assert page.get_by_text(diff_title).count() >= 1
    screenshot(page, f"compare_clicked_{lang}")

    page.go_back()
    wait_done(page)
    assert f"head={head}" not in page.url or f"layer={layer}" not in page.url
    page.go_forward()
    wait_done(page)
    assert chosen(page, head_label) == head

    other = "zh" if lang == "en" else "en"
    switch_language(page, other)
    assert page.get_by_text(i18n.t("attention.compare_diff", other, layer=layer, head=head)).count() >= 1
    page.reload()
    wait_done(page)
    assert chosen(page, i18n.t("attention.head", other)) == head
    assert page.get_by_role("textbox", name=i18n.t("attention.text_variant", other)).input_value().startswith(
        "The mat sat")
    assert_no_exception(page)
    screenshot(page, f"compare_reloaded_{other}")


def test_compare_on_a_phone_in_the_dark(open_page):
    variant = "The cat sat quietly on the mat because it was tired.".replace(" ", "%20")
    page = open_page(f"/?lang=zh&view=compare&text2={variant}", width=390, height=2600, dark=True)
    assert_no_exception(page)
    assert charts_drawn(page, 4) >= 4
    assert "+quietly" in page.locator(".st-key-compare_diff_fig").inner_text()
    screenshot(page, "compare_phone_dark_zh")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_qk_map_click_a_query_of_your_sentence(open_page, lang):
    page = open_page(f"/?lang={lang}")
    pick(page, i18n.t("attention.view", lang), i18n.t("attention.view_qkmap", lang))
    page.locator(f"{QK} .scatterlayer .point").first.wait_for(timeout=120_000)
    assert_no_exception(page)
    n_mine = page.locator(f"{QK} .scatterlayer .trace").nth(0).locator(".point").count()  # your queries: trace 0
    # hover a point of your sentence, read the label plotly shows (in a dense map the closest point may be another
    # sentence's), click: the page opens that query's row (or, for a key, says to click a query)
    point = page.locator(f"{QK} .scatterlayer .trace").nth(0).locator(".point").nth(2)
    point.scroll_into_view_if_needed()
    box = point.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2, steps=3)
    label = page.locator(f"{QK} .hoverlayer .hovertext")
    label.first.wait_for()
    shown = label.first.text_content()  # "query the position 2 sentence: ..." or "key ..."
    assert shown.startswith((i18n.t("attention.qk_query", lang), i18n.t("attention.qk_key", lang)))
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    # plotly's click may pick another point than the label it showed where points overlap (seen in zh: the label of a
    # key, the click on a query of another sentence): what the page does is read from the page itself, once the
    # click's rerun has done one or the other (on a busy machine it starts after wait_done has returned)
    key_clicked = i18n.t("attention.qk_key_clicked", lang)
    page.wait_for_function("([text]) => location.search.includes('qk_q=') || document.body.innerText.includes(text)",
                           arg=[key_clicked], timeout=60_000)
    wait_done(page)
    if "qk_q=" not in page.url:
        page.get_by_text(key_clicked).wait_for()
    else:
        row_title = page.locator(".st-key-qk_row_fig .gtitle")
        row_title.wait_for()
        title = re.escape(i18n.t("attention.qk_row_title", lang, token="@T", pos="@P", sentence="@S"))
        title = title.replace("@T", ".+").replace("@P", r"\d+").replace("@S", ".+")
        assert re.fullmatch(title, row_title.text_content()), row_title.text_content()  # a query's row, named
    # the drop-down picks a query of your text exactly (and from the keyboard)
    choose(page, i18n.t("attention.qk_pick", lang), "3 · sat")
    wait_address(page, "qk_q=3")
    page.locator(".st-key-qk_row_fig .js-plotly-plot").wait_for()
    assert page.locator(f"{QK} .scatterlayer .trace").filter(has=page.locator("path.js-line")).count() >= 3
    screenshot(page, f"qkmap_query_{lang}")
    page.go_back()
    wait_done(page)
    assert "qk_q=3" not in page.url
    assert_no_exception(page)


# the moment a played figure shows: plotly's slider readout ("step: 400"), or, where the page has its own slider of
# the moments and the figure none, the figure's title, which names the moment shown
MOMENT_JS = ("sel => { const el = document.querySelector(sel); const label = el.querySelector("
             "'.slider-container .slider-group > text.slider-label') || el.querySelector('.gtitle');"
             " return label ? label.textContent : null; }")


def moment(page, chart: str) -> str:
    return page.evaluate(MOMENT_JS, chart)


def play_and_pause(page, chart: str, lang: str) -> None:
    """Press Play, wait until the moment shown has moved on, press Pause: the address stays as it was."""
    url = page.url
    before = moment(page, chart)
    assert before, "the figure names no moment"
    page.locator(f"{chart} .updatemenu-button").filter(has_text=i18n.t("common.play", lang)).click()
    page.wait_for_function(f"([sel, v]) => ({MOMENT_JS})(sel) !== v", arg=[chart, before], timeout=30_000)
    page.locator(f"{chart} .updatemenu-button").filter(has_text=i18n.t("common.pause", lang)).click()
    assert page.url == url  # played in the browser: no rerun, the slider's address state kept
    assert page.locator("[data-testid='stApp'][data-test-script-state='running']").count() == 0


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_histories_play_in_the_browser(open_page, lang):
    page = open_page(f"/train?lang={lang}&tab=snapshots&snap=0")
    chart = ".st-key-train-snap_fig .js-plotly-plot"
    page.locator(chart).wait_for()
    play_and_pause(page, chart, lang)
    screenshot(page, f"play_train_{lang}")

    page = open_page(f"/language_model?lang={lang}&snap=0")
    chart = ".st-key-lm-patterns .js-plotly-plot"
    page.locator(chart).wait_for()
    play_and_pause(page, chart, lang)
    screenshot(page, f"play_lm_{lang}")

    page = open_page(f"/language_model?lang={lang}&tab=generate&n_new=10&temp=0.0")
    open_tab(page, i18n.t("lm.tab_generate", lang))
    chart = ".st-key-lm-generation .js-plotly-plot"
    page.locator(chart).wait_for()
    play_and_pause(page, chart, lang)
    assert_no_exception(page)
    screenshot(page, f"play_generation_{lang}")
