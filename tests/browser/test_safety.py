"""What a visitor types that the server must refuse or explain, done the way a person does it in Chromium: a server
folder and an id off the allowlist in the model box (Chinese, no path shown), Chinese text on the English default
model, and toy-task input that is malformed or outside the trained range."""
from __future__ import annotations

import pytest

from tests.browser.conftest import open_tab, the_open_tab, assert_no_exception, screenshot, wait_done
from viz_core import i18n

pytestmark = pytest.mark.browser


def main_text(page) -> str:
    return page.locator("[data-testid='stMain']").inner_text()


def type_into(page, label: str, text: str, area: bool = False) -> None:
    box = page.get_by_label(label, exact=True)
    box.fill(text)
    box.press("Control+Enter" if area else "Enter")
    page.wait_for_timeout(500)
    wait_done(page)


@pytest.mark.parametrize("typed, words", [("/tmp", "服务器上的文件夹"),
                                          ("meta-llama/Llama-2-70b-hf", "不在此服务器允许的模型列表中")])
def test_model_box_refuses_in_chinese_without_paths(open_page, typed, words):
    page = open_page("/?lang=zh")
    type_into(page, i18n.t("attention.model", "zh"), typed)
    assert_no_exception(page)
    alert = page.locator("[data-testid='stAlert']").first.inner_text()
    assert words in alert and "bert-base-uncased" in alert
    assert "/tmp" not in alert and "/root" not in alert and "Traceback" not in alert
    assert "all-MiniLM-L6-v2" in main_text(page)  # the default model keeps working
    assert page.locator(".js-plotly-plot").count() >= 1
    screenshot(page, f"safety-model-refused-{'path' if typed.startswith('/') else 'id'}-zh")


def test_chinese_text_on_the_default_model_explains_unknown_tokens(open_page):
    page = open_page("/?lang=en")
    type_into(page, i18n.t("attention.text_a_pair", "en"), "我爱自然语言处理，注意力机制很有趣。", area=True)
    assert_no_exception(page)
    text = main_text(page)
    assert "13 of 18 tokens are [UNK]" in text and "bert-base-chinese" in text
    screenshot(page, "safety-unknown-tokens-en")


@pytest.mark.parametrize("task, typed, words", [
    ("copy", "2", "outside the trained range (3–10)"),
    ("addition", "536+36", "outside the trained range (1–2 digits)"),
    ("addition", "1+2+3", "exactly two non-negative whole numbers"),
    ("date", "2023-02-30", "has only 28 days"),
])
def test_toy_task_input_refused_or_flagged(open_page, task, typed, words):
    page = open_page(f"/train?lang=en&task={task}")
    open_tab(page, "Decode")
    type_into(page, i18n.t("train.input", "en"), typed)
    assert_no_exception(page)
    assert the_open_tab(page) == "Decode"
    assert words in main_text(page)
    screenshot(page, f"safety-train-{task}-{typed.replace('+', 'p')}")
