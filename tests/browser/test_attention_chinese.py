"""Attention page in Chromium: a student types Chinese on the English default model and is told why it
reads [UNK] and which models read it; with bert-base-chinese on the server, one click shows the sentence read;
long input says that the axes name only some tokens."""
from __future__ import annotations

import pytest

from tests.browser.conftest import (DONE, assert_no_exception, pick, screenshot, streamlit_server, tick_labels,
                                    type_text, wait_done)
from tests.pretrained.tiny_models import SENTENCE, fake_hub_cache
from viz_core import i18n

pytestmark = pytest.mark.browser

WARNING = {"en": "17 of 23 tokens are [UNK] (74 %)", "zh": "23 个词元中有 17 个是 [UNK]（74%）"}
CAUSE = {"en": "letters of a script the vocabulary lacks", "zh": "词表里没有的文字"}
PICKER_ZH = {"en": "bert-base-chinese · Chinese · encoder (BERT) · ~410 MB download, needs the network",
             "zh": "bert-base-chinese · 中文 · 编码器 (BERT) · 需联网下载约 410 MB"}


def alerts(page) -> str:
    return " ".join(page.locator("[data-testid='stAlert']").all_inner_texts())


def main_text(page) -> str:
    return page.locator("[data-testid='stMain']").inner_text()


def picker_options(page, lang: str) -> list[str]:
    """Open the model picker and read its options (then close it again)."""
    page.get_by_role("combobox", name=i18n.t("attention.model", lang), exact=True).click()
    options = page.get_by_role("option")
    options.first.wait_for()
    texts = options.all_inner_texts()
    page.keyboard.press("Escape")
    return texts


def test_chinese_sentence_explains_unknown_tokens_in_both_languages(open_page):
    page = open_page("/?lang=en")
    type_text(page, i18n.t("attention.text_a_pair", "en"), SENTENCE)
    assert_no_exception(page)
    assert WARNING["en"] in alerts(page) and CAUSE["en"] in alerts(page)
    text = main_text(page)
    assert "bert-base-chinese (~410 MB)" in text and "need the network" in text  # the test server is offline
    assert PICKER_ZH["en"] in picker_options(page, "en")
    screenshot(page, "attention-chinese-unk-en")

    pick(page, "Language / 语言", "中文")  # the sidebar's language switch
    page.get_by_text(WARNING["zh"]).first.wait_for()
    assert CAUSE["zh"] in alerts(page)
    assert "bert-base-chinese（约 410 MB）" in main_text(page)
    assert PICKER_ZH["zh"] in picker_options(page, "zh")
    assert_no_exception(page)
    screenshot(page, "attention-chinese-unk-zh")


@pytest.fixture(scope="module")
def server_with_chinese_model(tmp_path_factory):
    """A second server, offline too, whose hub cache holds bert-base-chinese (a tiny random one)."""
    cache = fake_hub_cache(tmp_path_factory.mktemp("hub"))
    with streamlit_server({"HF_HUB_CACHE": str(cache)}) as (url, _proc):
        yield url


def test_one_click_switches_to_the_chinese_model(browser, server_with_chinese_model):
    ctx = browser.new_context(viewport={"width": 1400, "height": 2000})
    try:
        page = ctx.new_page()
        page.goto(server_with_chinese_model + "/?lang=zh", wait_until="domcontentloaded")
        wait_done(page)
        type_text(page, i18n.t("attention.text_a_pair", "zh"), SENTENCE)
        assert WARNING["zh"] in alerts(page) and "已在此服务器上" in main_text(page)
        page.get_by_role("button", name="改用 bert-base-chinese（约 410 MB）", exact=True).click()
        page.get_by_text("2 层 × 4 个头").first.wait_for(timeout=60_000)  # the tiny Chinese BERT's info line
        page.wait_for_selector(DONE)
        assert "[UNK]" not in alerts(page) and "model=bert-base-chinese" in page.url
        ticks = tick_labels(page, "y")
        assert ticks[1:6] == list("我今天在图")  # its own tokens: one character each, none unknown
        assert_no_exception(page)
        screenshot(page, "attention-chinese-model-zh")
    finally:
        ctx.close()


def _n_tokens(text: str) -> int:
    from viz_core.pretrained.bert_numpy import load_default
    return len(load_default().attention(text).tokens)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_long_input_names_every_label_or_says_it_skips(open_page, lang):
    words = "every token looks at the other tokens and attention lets each one pick what matters".split()
    page = open_page(f"/?lang={lang}", width=1400)
    box = i18n.t("attention.text_a_pair", lang)
    sixty = " ".join((words * 4)[:60])
    type_text(page, box, sixty)  # 60 words: every query named (smaller font), each with its position
    ticks = tick_labels(page, "y")
    assert len(ticks) == _n_tokens(sixty) and ticks[:4] == ["0·[CLS]", "1·every", "2·token", "3·looks"]
    keys = tick_labels(page, "x")
    assert keys[0] == "0·[CLS]" and set(keys) <= set(ticks) and 2 * len(keys) >= len(ticks)  # as many as fit
    note = "each label carries its token's position" if lang == "en" else "每个标签都注明词元的位置"
    assert note in main_text(page)
    screenshot(page, f"attention-60-words-{lang}")

    long = " ".join((words * 12)[:180])
    type_text(page, box, long)  # 180 words (194 tokens): one label in 3, numbered, and said so
    ticks = tick_labels(page, "y")
    assert ticks[:3] == ["0·[CLS]", "3·looks", "6·other"] and len(ticks) == -(-_n_tokens(long) // 3)
    note = "the query axis names one token in 3" if lang == "en" else "查询轴每 3 个词元只标出一个"
    assert note in main_text(page)
    assert_no_exception(page)
    screenshot(page, f"attention-180-words-{lang}")


def test_narrow_screen_names_fewer_keys_with_their_positions(open_page):
    """A phone has no room for 67 key labels: plotly names every k-th key, and the positions show the gaps."""
    words = "every token looks at the other tokens and attention lets each one pick what matters".split()
    sixty = " ".join((words * 4)[:60])
    page = open_page("/?lang=en&text=" + sixty.replace(" ", "%20"), width=420, height=3000)
    keys = tick_labels(page, "x")
    positions = [int(k.split("·")[0]) for k in keys]
    assert 4 < len(keys) < _n_tokens(sixty) and positions[0] == 0
    gaps = {b - a for a, b in zip(positions, positions[1:])}
    assert len(gaps) == 1 and gaps.pop() > 1  # evenly spaced, some keys skipped
    assert "the key axis names as many tokens as the screen's width has room for" in main_text(page)
    assert_no_exception(page)
    screenshot(page, "attention-60-words-en-narrow")
