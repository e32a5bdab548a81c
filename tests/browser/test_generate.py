"""Generate text from what a person types, in Chromium: on the Language-model page's generate tab, a Chinese and an
English prompt (and one with an emoji) are taken, the model writes new characters after each, and nothing is
refused; English and Chinese UI. Screenshots land in artifacts/screenshots/generate_*.png."""
from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import assert_no_exception, open_tab, screenshot, type_text, wait_done

pytestmark = pytest.mark.browser

UI = {"en": {"tab": "Generate text", "prompt": "Prompt", "refused": "does not know", "unknown": "unknown token"},
      "zh": {"tab": "生成文本", "prompt": "提示词", "refused": "不认识", "unknown": "未知词元"}}
CJK = re.compile(r"[\u4e00-\u9fff]")


def generated(page, prompt: str) -> str:
    """The generated text once the page shows the one for this prompt."""
    code = page.locator("[data-testid='stCode']").first
    expect(code).to_contain_text(prompt, timeout=60_000)
    return code.inner_text().strip()


def refusals(page, words: str) -> int:
    return page.locator("[data-testid='stAlert']").filter(has_text=words).count()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_typed_chinese_and_english_prompts_are_continued(open_page, lang):
    ui = UI[lang]
    page = open_page(f"/language_model?lang={lang}", height=3000)
    open_tab(page, ui["tab"])
    for prompt, want_cjk in (("你好", True), ("Hello", False)):
        type_text(page, ui["prompt"], prompt)
        assert_no_exception(page)
        text = generated(page, prompt)
        assert text.startswith(prompt), text
        new = text[len(prompt):]
        assert len(new) >= 10, text  # new characters, not just the prompt
        letters = [c for c in new.split("\n")[0] if c.isalpha()]  # the rest of the prompt's line
        assert len(letters) >= 3, text
        share = sum(bool(CJK.match(c)) for c in letters) / len(letters)
        assert share > 0.5 if want_cjk else share == 0, text  # it writes on in the prompt's language
        assert refusals(page, ui["refused"]) == 0
        screenshot(page, f"generate_{lang}_{'zh' if want_cjk else 'en'}_prompt")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_an_unknown_character_is_replaced_and_named_not_refused(open_page, lang):
    ui = UI[lang]
    page = open_page(f"/language_model?lang={lang}&tab=generate", height=3000)
    type_text(page, ui["prompt"], "I like 🙂")
    note = page.locator("[data-testid='stAlert']").filter(has_text=ui["unknown"])
    expect(note).to_contain_text("🙂", timeout=60_000)
    assert generated(page, "I like").startswith("I like \ufffd")
    assert refusals(page, ui["refused"]) == 0
    assert_no_exception(page)


PARAGRAPH = {  # longer than the prompt box's old 80-character limit, and than the model's 128 positions
    "en": ("The little robot walked along the river every morning. It counted the stones, listened to the birds, "
           "and wrote down the colour of the water. One day the water was green, and the robot"),
    "zh": ("小机器人每天早上沿着河边散步。它数石头，听鸟叫，还把河水的颜色记在本子上。有一天，河水变成了绿色，"
           "小机器人停下脚步，想了很久，然后决定沿着河一直走到源头去看看。它走过小桥，走过田野，走过一片竹林，"
           "天黑的时候，它终于听见了"),
}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_pasted_paragraph_is_taken_and_continued_from_its_end(open_page, lang):
    """A paste longer than the box's limit is taken, never dropped without a word (the box keeping its old text)."""
    ui, text = UI[lang], PARAGRAPH[lang]
    page = open_page(f"/language_model?lang={lang}&tab=generate", height=3000)
    box = page.get_by_label(ui["prompt"], exact=True)
    box.fill("")
    box.focus()
    page.keyboard.insert_text(text)  # what a paste does: the whole text arrives in one input event
    box.press("Control+Enter")
    note = page.locator("[data-testid='stAlert']").filter(has_text=str(len(text)))
    expect(note).to_have_count(1, timeout=60_000)  # says how much of the prompt the model reads
    wait_done(page)
    assert_no_exception(page)
    assert box.input_value() == text
    kept = 128 - 40  # the model's positions minus the new characters asked for (the page's defaults)
    code = page.locator("[data-testid='stCode']").first
    expect(code).to_contain_text(text[-5:], timeout=60_000)  # an end of the prompt without an unknown character
    continued = code.inner_text().strip()
    read = continued[:kept]  # characters the model never read show as the unknown token
    assert len(read) == kept and all(a == b or a == "\ufffd" for a, b in zip(read, text[-kept:])), continued
    assert len(continued) > kept, continued
    screenshot(page, f"generate_{lang}_paragraph")
