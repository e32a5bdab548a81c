"""Language model -> Your sequence, in Chromium, as a student would use it: type a sentence with a
repeated phrase (English, Chinese), make a repeated sequence with the button, switch language; the induction head
is found on each (score >= 0.5) and the page says which rule of the score it used."""
from __future__ import annotations

import re

import pytest

from tests.browser.conftest import (assert_no_exception, open_tab, screenshot, switch_language, type_text, typed,
                                    wait_done)

pytestmark = pytest.mark.browser

INPUT = {"en": "Your sequence (numbers or words)", "zh": "你的序列（数字或词语）"}
TAB = {"en": "Your sequence", "zh": "你的序列"}


def main_text(page) -> str:
    return page.locator("[data-testid='stMain']").inner_text()


def best_score(page) -> float:
    """The score in "Best induction head on your sequence: layer l, head h, score s." (either language)."""
    found = re.search(r"(?:score|分数)\s*([01]\.\d\d)", main_text(page))
    assert found, main_text(page)[:2000]
    return float(found.group(1))


@pytest.mark.parametrize("lang, text, words", [
    ("en", "I went to the park and then I went to the park again.", "Read as words: 9 different words"),
    ("zh", "我今天在图书馆学习注意力机制，明天我还要在图书馆学习注意力机制。", "按词读取：19 个不同的词"),
])
def test_a_typed_sentence_with_a_repeated_phrase_lights_the_induction_head(open_page, lang, text, words):
    page = open_page(f"/language_model?lang={lang}")
    open_tab(page, TAB[lang])
    type_text(page, INPUT[lang], text)
    assert_no_exception(page)
    assert words in main_text(page)
    assert best_score(page) >= 0.5
    assert page.locator("[data-testid='stAlert']").filter(has_text="Traceback").count() == 0
    screenshot(page, f"lm_own_sentence_{lang}_1400")


def test_the_button_makes_a_repeated_sequence_and_the_rule_follows_it(open_page):
    page = open_page("/language_model?lang=en&tab=sequence&repeat_len=20")
    before = typed(page, INPUT["en"])
    page.get_by_role("button", name="Make a repeated sequence").click()
    wait_done(page)
    assert_no_exception(page)
    ids = typed(page, INPUT["en"]).split()
    assert len(ids) == 40 and ids[:20] == ids[20:] and " ".join(ids) != before
    assert "a segment of 20 tokens typed twice" in main_text(page)
    assert best_score(page) >= 0.5
    switch_language(page, "zh")  # the same sequence, described in Chinese
    assert_no_exception(page)
    assert typed(page, INPUT["zh"]).split() == ids
    assert "一段 20 个词元连写两遍" in main_text(page)
    assert best_score(page) >= 0.5
    screenshot(page, "lm_own_repeat_zh_1400")


def test_too_many_words_are_refused_in_words_and_the_page_keeps_working(open_page):
    page = open_page("/language_model?lang=en&tab=sequence")
    type_text(page, INPUT["en"], " ".join(f"w{i}" for i in range(70)))
    assert_no_exception(page)
    assert "70 different words, but the model has only 64 symbols" in main_text(page)
    type_text(page, INPUT["en"], "5 9 2 7 5 9 2 7")
    assert_no_exception(page)
    assert "a segment of 4 tokens typed twice" in main_text(page)
