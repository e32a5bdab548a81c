"""Train page in Chromium: train with live curves, stop with the button, inspect every tab, upload checkpoints.
Screenshots (during and after training, each tab, English and Chinese) land in artifacts/screenshots/."""
from __future__ import annotations

import io
import zipfile

import pytest

from tests.browser.conftest import assert_no_exception, screenshot, wait_done

pytestmark = pytest.mark.browser


def button(page, key: str):
    return page.locator(f".st-key-train-{key} button")


def main_text(page) -> str:
    return page.locator("[data-testid='stMain']").inner_text()


def test_train_live_then_stop(open_page):
    page = open_page("/train?lang=en&task=reverse&preset=small&seconds=90")
    assert_no_exception(page)
    button(page, "go").click()
    page.wait_for_selector("[data-testid='stProgress']", timeout=60_000)
    page.wait_for_timeout(4000)  # let a few live redraws happen
    assert "step" in page.locator("[data-testid='stProgress']").inner_text()
    screenshot(page, "train-during-en")
    button(page, "stop").click()
    wait_done(page)
    assert_no_exception(page)
    text = main_text(page)
    assert "was stopped" in text and "Showing your model" in text
    screenshot(page, "train-after-en")


@pytest.mark.parametrize("tab", ["Decode", "Attention", "Snapshots", "Save / load", "Compare runs"])
def test_every_tab_draws(open_page, tab):
    page = open_page("/train?lang=en&task=reverse")
    page.get_by_role("tab", name=tab).click()
    page.wait_for_timeout(800)
    assert_no_exception(page)
    screenshot(page, f"train-tab-{tab.split()[0].lower()}-en")


def test_chinese_short_run_and_narrow(open_page):
    page = open_page("/train?lang=zh&task=copy&preset=tiny&seconds=3", width=420)
    button(page, "go").click()
    page.wait_for_timeout(1500)
    wait_done(page)
    assert_no_exception(page)
    assert "你训练的模型" in main_text(page)
    screenshot(page, "train-after-zh-420")
    page.get_by_role("tab", name="注意力").click()
    page.wait_for_timeout(800)
    screenshot(page, "train-tab-attention-zh-420")


def _upload(page, files):
    page.get_by_role("tab", name="Save / load").click()
    page.locator("[data-testid='stFileUploader'] input[type='file']").set_input_files(files)
    page.wait_for_timeout(1000)
    wait_done(page)


def test_corrupt_upload_shows_a_clear_error(open_page):
    page = open_page("/train?lang=en&task=reverse")
    _upload(page, [{"name": "model.safetensors", "mimeType": "application/octet-stream", "buffer": b"\x00junk" * 20},
                   {"name": "config.json", "mimeType": "application/json", "buffer": b"{broken"}])
    assert_no_exception(page)
    assert "not a checkpoint config" in main_text(page)
    screenshot(page, "train-upload-error-en")


def test_valid_zip_upload_switches_to_its_task(open_page, tmp_path):
    from viz_core.training import checkpoint_zip, load_checkpoint
    from app_pages._ui.train import CHECKPOINTS
    data = checkpoint_zip(load_checkpoint(CHECKPOINTS / "copy"))
    assert zipfile.ZipFile(io.BytesIO(data)).namelist()
    page = open_page("/train?lang=en&task=reverse")
    _upload(page, [{"name": "copy.zip", "mimeType": "application/zip", "buffer": data}])
    assert_no_exception(page)
    assert "checkpoint you uploaded" in main_text(page)


def test_causal_decoder_attention_is_hatched(open_page):
    page = open_page("/train?lang=en&task=reverse&kind=dec&layer=0")
    page.get_by_role("tab", name="Attention").click()
    page.wait_for_timeout(800)
    assert_no_exception(page)
    assert "causal mask hides the future" in main_text(page)
    screenshot(page, "train-tab-attention-decoder-en")
