"""Inside the decoder in Chromium, as a person does it: open the Language model page's "Inside the decoder" tab, type a
text, read the logit lens, switch to the attention sinks, open the model's make-up, follow its link to Mechanics (which
opens at the GQA section with this model's heads), press Back, switch language, reload. Screenshots in
artifacts/screenshots/decoder_*.png."""
from __future__ import annotations

import re

import pytest

from tests.browser.conftest import (assert_no_exception, open_tab, pick, picked, screenshot, switch_language, tick,
                                    tick_labels, ticked, type_text, wait_done)

pytestmark = pytest.mark.browser

LENS = ".st-key-lm-lens .js-plotly-plot"
SINKS = ".st-key-lm-sinks .js-plotly-plot"


def y_ticks(page, chart: str) -> list[str]:
    return tick_labels(page, "y", chart)


def x_ticks(page, chart: str) -> list[str]:
    return tick_labels(page, "x", chart)


def test_lens_sinks_and_a_link_into_mechanics(open_page):
    page = open_page("/language_model?lang=en")
    open_tab(page, "Inside the decoder")
    page.wait_for_selector(LENS)
    assert_no_exception(page)
    ticks = x_ticks(page, LENS)
    assert ticks == ["emb", "0", "1", "2", "3"], ticks  # the embeddings, then after each of the 4 blocks
    type_text(page, "Text", "A dog runs. 狗在跑。")
    page.wait_for_selector(LENS)
    assert "狗" in y_ticks(page, LENS) and "dog" not in " ".join(y_ticks(page, LENS))  # one character per token
    assert "tab=decoder" in page.url and "dec_text_chars=" in page.url
    page.locator(LENS).locator(".nsewdrag").first.hover(position={"x": 40, "y": 40})
    page.wait_for_selector(".hoverlayer .hovertext")
    assert "top 5 guesses" in page.locator(".hoverlayer").text_content()  # the hover lists the top 5
    screenshot(page, "decoder_lens_en_1400")

    pick(page, "View", "Attention sinks")
    page.wait_for_selector(SINKS)
    assert_no_exception(page)
    assert "dec_view=sinks" in page.url
    screenshot(page, "decoder_sinks_en_1400")

    pick(page, "Model", "induction model (first tab)")
    page.wait_for_selector(SINKS)
    page.get_by_text("What this model is made of", exact=False).first.click()
    wait_done(page)
    link = page.get_by_role("link", name="multi-head (MHA) in Mechanics")
    link.wait_for()
    screenshot(page, "decoder_arch_en_1400")
    link.click()
    wait_done(page)
    assert_no_exception(page)
    assert re.search(r"/mechanics\?.*section=variants", page.url) and "vdm=4" in page.url and "vkv=4" in page.url
    assert picked(page, "Section") == "MHA / GQA / MQA"
    page.get_by_text("MHA, GQA and MQA on the same input", exact=True).wait_for()

    page.go_back()
    wait_done(page)
    assert "/language_model" in page.url and "tab=decoder" in page.url
    page.wait_for_selector(SINKS)
    assert picked(page, "Model") == "induction model (first tab)"

    switch_language(page, "zh")
    page.wait_for_selector(SINKS)
    assert picked(page, "视图") == "注意力汇聚点"
    page.reload()
    wait_done(page)
    page.wait_for_selector(SINKS)
    assert_no_exception(page)
    assert picked(page, "模型") == "归纳头模型（第一个标签页）"
    screenshot(page, "decoder_sinks_zh_1400")


@pytest.mark.parametrize("lang, dark", [("zh", True), ("en", False)])
def test_lens_on_a_phone(open_page, lang, dark):
    page = open_page(f"/language_model?lang={lang}&tab=decoder", width=390, height=2400, dark=dark)
    page.wait_for_selector(LENS)
    assert_no_exception(page)
    box = page.locator(LENS).bounding_box()
    assert box["width"] <= 390
    screenshot(page, f"decoder_lens_{lang}_390{'_dark' if dark else ''}")


def test_attention_sinks_of_the_default_model_then_a_head_without_its_sink(open_page):
    """Attention page, default (offline) model: pick "Attention sinks", click the head that parks most of its weight
    on [CLS], and in the opened head leave the first token out of the colour scale; the Chinese page says the same."""
    page = open_page("/?lang=en&text=a%20dog%20runs%20home")
    pick(page, "View", "Attention sinks")
    chart = ".st-key-sinks_fig .js-plotly-plot"
    page.wait_for_selector(f"{chart} .scatterlayer .point")
    assert_no_exception(page)
    assert "heads put more than 0.5 of their attention there" in page.locator("[data-testid='stMain']").inner_text()
    points = page.locator(f"{chart} .scatterlayer .point")
    assert points.count() == 6 * 12
    box = points.nth(4 * 12 + 5).bounding_box()  # layer 4, head 5: 0.95 of its weight on [CLS]
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2, steps=3)
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.wait_for_function("() => location.search.includes('head=5') && !location.search.includes('view=')")
    wait_done(page)
    assert "layer=4" in page.url
    tick(page, "Colour scale without the first token")
    assert "nosink=1" in page.url
    page.get_by_text("set by every key except the first", exact=False).wait_for()
    screenshot(page, "decoder_attention_nosink_en_1400")
    switch_language(page, "zh")
    assert ticked(page, "颜色范围不含第一个词元")
    page.get_by_text("由除第一个键", exact=False).wait_for()
    assert_no_exception(page)
