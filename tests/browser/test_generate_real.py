"""A real language model writes on from a typed prompt, in Chromium: on the Language-model page's generate tab a
person picks Gemma 3 270M (or SmolLM2 135M), types a Chinese prompt, sees the continuation, the licence and weights
notes and the step view (next-token bars and attention, with ▶ Play), moves the step slider, and switches the UI
language: the choice and the text hold, and no exception box appears. Screenshots land in
artifacts/screenshots/generate_real_*.png."""
from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import (DONE, assert_no_exception, charts_drawn, open_tab, pick, picked, screenshot,
                                    switch_language, type_text, typed)
from viz_core.pretrained import packaged

pytestmark = pytest.mark.browser

UI = {"en": {"tab": "Generate text", "model": "Model", "prompt": "Prompt", "licence": "Gemma Terms of Use",
             "step": "Step 1:", "play": "▶ Play"},
      "zh": {"tab": "生成文本", "model": "模型", "prompt": "提示词", "licence": "Gemma 使用条款",
             "step": "第 1 步", "play": "▶ 播放"}}
CJK = re.compile(r"[\u4e00-\u9fff]")
PROMPT = "我今天在图书馆"


def continuation(page, prompt: str) -> str:
    """The generated text once the page shows the one for this prompt."""
    code = page.locator("[data-testid='stCode']").first
    expect(code).to_contain_text(prompt, timeout=120_000)
    return code.inner_text().strip()


def step_view_shown(page, lang: str) -> None:
    """The step caption, the animated figure (its Play button) and a drawn chart."""
    expect(page.get_by_text(UI[lang]["step"]).first).to_be_visible(timeout=60_000)
    assert charts_drawn(page, 1) >= 1
    expect(page.locator(".js-plotly-plot .updatemenu-button").filter(has_text=UI[lang]["play"]).first) \
        .to_be_attached(timeout=60_000)


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_gemma_continues_a_typed_chinese_prompt_and_survives_a_language_switch(open_page, lang):
    if not packaged.installed(packaged.GEMMA):
        pytest.skip(f"{packaged.GEMMA.package} is not installed")
    ui = UI[lang]
    page = open_page(f"/language_model?lang={lang}&n_new=8", height=3000)
    open_tab(page, ui["tab"])
    pick(page, ui["model"], "Gemma 3 270M")
    expect(page.get_by_text(ui["licence"]).first).to_be_visible(timeout=120_000)  # before and after the load
    type_text(page, ui["prompt"], PROMPT)
    page.wait_for_selector(DONE, timeout=120_000)
    assert_no_exception(page)
    text = continuation(page, PROMPT)
    assert text.startswith(PROMPT) and len(text) > len(PROMPT), text
    assert CJK.search(text[len(PROMPT):]), text  # it writes on in Chinese
    step_view_shown(page, lang)
    screenshot(page, f"generate_real_gemma_{lang}")

    other = "en" if lang == "zh" else "zh"
    switch_language(page, other)
    assert_no_exception(page)
    assert picked(page, UI[other]["model"]) == "Gemma 3 270M"
    assert typed(page, UI[other]["prompt"]) == PROMPT
    assert continuation(page, PROMPT) == text  # the same settings and seed: the same (cached) text
    step_view_shown(page, other)
    expect(page.get_by_text(UI[other]["licence"]).first).to_be_visible()
    screenshot(page, f"generate_real_gemma_{lang}_then_{other}")


def test_smollm2_is_offered_and_writes_english(open_page):
    if not packaged.installed(packaged.SMOLLM2):
        pytest.skip(f"{packaged.SMOLLM2.package} is not installed")
    page = open_page("/language_model?lang=en&tab=generate&n_new=6", height=3000)
    pick(page, "Model", "SmolLM2 135M Instruct")
    type_text(page, "Prompt", "The cat sat on the")
    assert_no_exception(page)
    text = continuation(page, "The cat sat on the")
    assert len(text) > len("The cat sat on the"), text
    expect(page.get_by_text("Apache-2.0").first).to_be_visible()
    step_view_shown(page, "en")
    assert_no_exception(page)
