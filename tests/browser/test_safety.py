"""What a visitor types that the server must refuse or explain, done the way a person does it in Chromium: a server
folder and an id off the allowlist in the model box (Chinese, no path shown), Chinese text on the English default
model, toy-task input that is malformed or outside the trained range, and a checkpoint with an absurd
config, a one-head cross attention chosen in the menu, typed markup, and a comparison stopped while in line."""
from __future__ import annotations

import json
import zipfile
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.browser.conftest import (assert_no_exception, charts_drawn, choose, open_tab, pick, screenshot,
                                    the_open_tab, tick_labels, wait_done)
from viz_core import i18n
from viz_core.seq2seq.checkpoint import checkpoint_files, load_checkpoint

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
    """The default policy has no free id box (the picker lists the allowed models): such a name arrives in a link."""
    page = open_page("/?lang=zh&model=" + quote(typed, safe=""))
    assert_no_exception(page)
    alert = page.locator("[data-testid='stAlert']").first.inner_text()
    assert words in alert and "bert-base-uncased" in alert
    assert "/tmp" not in alert and "/root" not in alert and "Traceback" not in alert
    assert "all-MiniLM-L6-v2" in main_text(page)  # the default model keeps working
    assert charts_drawn(page, 1) >= 1
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


# ---------------------------------------------------------------- uploads, crashes, typed markup
def absurd_checkpoint(tmp_path, info: dict | None = None, first_step=None, **model) -> str:
    """The shipped reverse checkpoint as a zip whose config.json asks for an absurd model, or carries odd values in
    info or as the first history record's step."""
    files = checkpoint_files(load_checkpoint(Path(__file__).resolve().parents[2] / "viz_core/checkpoints/reverse"))
    config = json.loads(files["config.json"])
    config["model"].update(model)
    config["info"].update(info or {})
    if first_step is not None:
        config["history"][0]["step"] = first_step
    files["config.json"] = json.dumps(config).encode()
    path = tmp_path / "reverse-checkpoint.zip"
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return str(path)


@pytest.mark.parametrize("lang, model, words", [
    ("en", {"d_model": 16384}, "outside what this app builds (1 to 1024)"),   # the kernel killed the server before
    ("zh", {"n_enc_layers": 100000}, "超出了本应用能构建的范围（1 到 8）"),
    ("en", {"d_model": 64.0}, "must be a whole number"),
])
def test_an_absurd_checkpoint_is_refused_and_the_page_goes_on(open_page, tmp_path, lang, model, words):
    page = open_page(f"/train?lang={lang}")
    open_tab(page, i18n.t("train.tab_save", lang))
    page.locator("[data-testid='stFileUploaderDropzoneInput']").set_input_files(absurd_checkpoint(tmp_path, **model))
    page.locator("[data-testid='stAlert']").filter(has_text=words).wait_for(timeout=60_000)
    wait_done(page)
    assert_no_exception(page)
    open_tab(page, i18n.t("train.tab_decode", lang))  # the server is alive and the shipped model still answers
    assert "3 5 6 2 9 5 1 4 1 3" in main_text(page)
    screenshot(page, f"safety-absurd-checkpoint-{lang}")


@pytest.mark.parametrize("lang, odd, words", [
    ("en", {"info": {"device": "[pwnlink](https://evil.example/)", "steps": 5}}, "“info.device” must be one of"),
    ("zh", {"first_step": 10**300}, "“history[0].step” 为 1.000e+300"),
    ("en", {"info": {"val_exact": "high"}}, "“info.val_exact” must be a finite number"),
])
def test_a_checkpoint_with_odd_info_or_history_is_refused_and_shows_no_markup(open_page, tmp_path, lang, odd, words):
    """The values a page shows from a checkpoint are typed: a link or bold typed into them never reaches the page."""
    page = open_page(f"/train?lang={lang}")
    open_tab(page, i18n.t("train.tab_save", lang))
    page.locator("[data-testid='stFileUploaderDropzoneInput']").set_input_files(absurd_checkpoint(tmp_path, **odd))
    page.locator("[data-testid='stAlert']").filter(has_text=words).wait_for(timeout=60_000)
    wait_done(page)
    assert_no_exception(page)
    assert page.locator("a[href*='evil.example']").count() == 0
    open_tab(page, i18n.t("train.tab_decode", lang))  # the shipped model still answers
    assert "3 5 6 2 9 5 1 4 1 3" in main_text(page)
    assert page.locator("a[href*='evil.example']").count() == 0 and "pwnlink" not in main_text(page)


def test_cross_attention_with_one_head_chosen_in_the_menu(open_page):
    page = open_page("/mechanics?lang=en")
    pick(page, i18n.t("mechanics.section", "en"), i18n.t("mechanics.sec_cross", "en"))
    choose(page, i18n.t("mechanics.heads", "en"), "1")
    assert_no_exception(page)
    assert "Head: 0 (the only choice here)" in main_text(page)
    assert charts_drawn(page, 2) >= 2
    screenshot(page, "safety-cross-one-head-en")


def test_typed_markup_is_drawn_as_text(open_page):
    page = open_page("/positions?lang=en")
    pick(page, i18n.t("positions.part", "en"), i18n.t("positions.part_order", "en"))
    type_into(page, i18n.t("positions.tokens", "en"), "<b>word</b> <i>x</i> & __class__ cat")
    assert_no_exception(page)
    ticks = tick_labels(page, "y", ".js-plotly-plot")
    assert "<b>word</b>" in ticks and "<i>x</i>" in ticks and "&" in ticks, ticks
    assert page.locator(".js-plotly-plot .ytick text b, .js-plotly-plot .ytick text [style*='bold']").count() == 0
    screenshot(page, "safety-typed-markup-en")


def test_a_comparison_stopped_while_in_line_says_so(open_page):
    busy = open_page("/train?lang=en&seconds=60")  # another visitor trains: the only slot of this 2-core server
    busy.get_by_role("button", name=i18n.t("train.go", "en"), exact=True).click()
    busy.locator("[data-testid='stProgress']").first.wait_for(timeout=30_000)
    try:
        page = open_page("/train?lang=en&preset=tiny&cmp_steps=20&tab=compare")
        page.get_by_role("button", name=i18n.t("train.cmp_go", "en"), exact=True).click()
        page.get_by_text("ahead of yours").wait_for(timeout=30_000)
        page.locator("[data-testid='stMain']").get_by_role(
            "button", name=i18n.t("train.stop", "en"), exact=True).first.click()
        page.get_by_text("Stopped before it started").wait_for(timeout=30_000)
        wait_done(page)
        assert_no_exception(page)
        assert page.get_by_role("tab").count() == 6  # the tabs are there, the page goes on
        screenshot(page, "safety-queued-stop-en")
    finally:
        busy.get_by_role("button", name=i18n.t("train.stop", "en"), exact=True).click()
        wait_done(busy)
