"""Train page in Chromium: train with live curves, stop with the button, touch every control during a run (the run
goes on: it lives in its own thread), close the tab mid-run (the server stops the work), inspect every tab, upload
checkpoints. Screenshots (during and after training, each tab, English and Chinese) land in artifacts/screenshots/."""
from __future__ import annotations

import io
import zipfile

import pytest

import time

import psutil

from tests.browser.conftest import (SERVER, assert_no_exception, go_to, open_tab, pick, screenshot, switch_language, tick,
                                    type_text, wait_done)
from viz_core.i18n import t

pytestmark = pytest.mark.browser


def button(page, key: str):
    return page.locator(f".st-key-train-{key} button")


def main_text(page) -> str:
    return page.locator("[data-testid='stMain']").inner_text()


def progress(page) -> str:
    return page.locator("[data-testid='stProgress']").inner_text()


def step_of(text: str) -> int:
    """The step number in the progress line "Run 1/1 · step 120 · ..." (or "第 1/1 次运行 · 第 120 步 · ...")."""
    part = text.split("·")[1]
    return int("".join(ch for ch in part if ch.isdigit()))


def wait_finished(page, words: str, timeout_s: float = 90) -> None:
    """Wait until the page says `words` (the run ended and the page took its result)."""
    page.wait_for_function("w => document.querySelector(\"[data-testid='stMain']\").innerText.includes(w)", arg=words,
                           timeout=timeout_s * 1000)
    wait_done(page)


def test_train_live_then_stop(open_page):
    page = open_page("/train?lang=en&task=reverse&preset=small&seconds=90")
    assert_no_exception(page)
    button(page, "go").click()
    page.wait_for_selector("[data-testid='stProgress']", timeout=60_000)
    page.wait_for_timeout(2500)  # let a few live redraws happen
    first = step_of(progress(page))
    page.wait_for_timeout(1500)
    assert step_of(progress(page)) > first  # the progress is live
    screenshot(page, "train-during-en")
    button(page, "stop").click()
    wait_finished(page, "was stopped", 20)
    assert_no_exception(page)
    assert "Showing your model" in main_text(page)
    screenshot(page, "train-after-en")


def test_a_run_survives_every_click(open_page):
    """During one run: move the target slider, tick "Train on the CPU", open Decode and type, switch the language
    both ways, leave the page and come back. The run goes on to its end and its model is kept."""
    page = open_page("/train?lang=en&task=sort&preset=tiny&seconds=20&target=1.0")
    button(page, "go").click()
    page.wait_for_selector("[data-testid='stProgress']", timeout=60_000)
    before = step_of(progress(page))
    slider = page.locator(".st-key-train-target input[type='range']")
    slider.focus()
    slider.press("ArrowLeft")
    wait_done(page)
    tick(page, t("train.force_cpu", "en"))
    pick(page, t("train.preset", "en"), t("train.preset_small", "en"))
    assert_no_exception(page)
    open_tab(page, "Decode")
    type_text(page, t("train.input", "en"), "1 2 3 4")
    assert_no_exception(page)
    switch_language(page, "zh")
    assert_no_exception(page)
    switch_language(page, "en")
    go_to(page, "Positions")
    page.wait_for_timeout(1000)
    go_to(page, "Train")
    assert_no_exception(page)
    if page.locator("[data-testid='stProgress']").count():  # still running: it went on while we were away
        assert step_of(progress(page)) > before
    wait_finished(page, "Showing your model", 60)
    assert_no_exception(page)
    assert "1 2 3 4" in main_text(page)  # Decode still shows the text typed during the run, now with the new model
    screenshot(page, "train-after-clicks-en")


def _server_cpu_seconds(window_s: float = 2.0) -> float:
    """CPU seconds the Streamlit server used during window_s (all its threads)."""
    proc = psutil.Process(SERVER["pid"])
    before = sum(proc.cpu_times()[:2])
    time.sleep(window_s)
    return sum(proc.cpu_times()[:2]) - before


def test_closing_the_tab_stops_its_training(browser, server_url):
    ctx = browser.new_context(viewport={"width": 1400, "height": 1600})
    page = ctx.new_page()
    page.goto(server_url + "/train?lang=en&task=reverse&preset=small&seconds=120", wait_until="domcontentloaded")
    wait_done(page)
    button(page, "go").click()
    page.wait_for_selector("[data-testid='stProgress']", timeout=60_000)
    page.wait_for_timeout(1500)
    busy = _server_cpu_seconds()
    assert busy > 0.8, f"training should keep a core busy, the server used {busy:.2f} s of CPU in 2 s"
    ctx.close()  # the visitor closes the tab mid-run
    time.sleep(6)  # the job notices within its grace period (3 s)
    idle = _server_cpu_seconds()
    assert idle < 0.4, f"the server still used {idle:.2f} s of CPU in 2 s after the tab was closed"


@pytest.mark.parametrize("tab", ["Decode", "Attention", "Snapshots", "Save / load", "Compare runs"])
def test_every_tab_draws(open_page, tab):
    page = open_page("/train?lang=en&task=reverse")
    open_tab(page, tab)
    assert_no_exception(page)
    screenshot(page, f"train-tab-{tab.split()[0].lower()}-en")


def test_chinese_short_run_and_narrow(open_page):
    page = open_page("/train?lang=zh&task=copy&preset=tiny&seconds=3", width=420)
    button(page, "go").click()
    wait_finished(page, "你训练的模型", 60)
    assert_no_exception(page)
    screenshot(page, "train-after-zh-420")
    open_tab(page, "注意力")
    screenshot(page, "train-tab-attention-zh-420")


def _upload(page, files, outcome: str):
    """Upload `files` on Save / load and wait until the page says `outcome` (the run the upload starts has ended)."""
    open_tab(page, "Save / load")
    page.locator("[data-testid='stFileUploader'] input[type='file']").set_input_files(files)
    page.get_by_text(outcome).first.wait_for(timeout=60_000)
    wait_done(page)


def test_corrupt_upload_shows_a_clear_error(open_page):
    page = open_page("/train?lang=en&task=reverse")
    _upload(page, [{"name": "model.safetensors", "mimeType": "application/octet-stream", "buffer": b"\x00junk" * 20},
                   {"name": "config.json", "mimeType": "application/json", "buffer": b"{broken"}],
            "is not readable JSON")
    assert_no_exception(page)
    assert "config.json is not readable JSON" in main_text(page)
    screenshot(page, "train-upload-error-en")


def test_valid_zip_upload_switches_to_its_task(open_page, tmp_path):
    from viz_core.seq2seq.training import checkpoint_zip, load_checkpoint
    from app_pages._ui.training_job import CHECKPOINTS
    data = checkpoint_zip(load_checkpoint(CHECKPOINTS / "copy"))
    assert zipfile.ZipFile(io.BytesIO(data)).namelist()
    page = open_page("/train?lang=en&task=reverse")
    _upload(page, [{"name": "copy.zip", "mimeType": "application/zip", "buffer": data}], "checkpoint you uploaded")
    assert_no_exception(page)
    assert "checkpoint you uploaded" in main_text(page)


def test_causal_decoder_attention_is_hatched(open_page):
    page = open_page("/train?lang=en&task=reverse&kind=dec&layer=0")
    open_tab(page, "Attention")
    assert_no_exception(page)
    assert "causal mask hides the future" in main_text(page)
    screenshot(page, "train-tab-attention-decoder-en")
