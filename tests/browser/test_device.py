"""Which device trains, and why, in Chromium: the Train and Language-model pages say it in the visitor's language,
with the memory a run needs against what one run may use on that device; a CPU server offers no GPU sizes. Every
wait is on the page's state."""
from __future__ import annotations

import re

import pytest

from tests.browser.conftest import assert_no_exception, go_to, open_tab, pick, switch_language, tick, wait_done
from viz_core.i18n import t

pytestmark = pytest.mark.browser


def main_text(page) -> str:
    return page.locator("[data-testid='stMain']").inner_text()


def parameters(page, unit: str) -> int:
    """The parameter count of the memory line ("168,640 parameters; ..." or "共 168,640 个参数；...")."""
    match = re.search(r"([\d,]+) ?" + unit, main_text(page))
    assert match, main_text(page)[:2000]
    return int(match.group(1).replace(",", ""))


def test_the_train_and_language_model_pages_say_which_device_trains_and_why(open_page):
    page = open_page("/train?lang=en")
    text = main_text(page)
    assert "Training runs on CPU (cpu), in float32." in text and "This server has no GPU" in text
    assert "MiB of the 1,024 MiB one run may use on this device." in text
    sizes = page.get_by_role("radiogroup", name="Model size", exact=True).inner_text()
    assert "GPU" not in sizes and "Medium" in sizes  # no GPU here: the GPU presets are not offered
    small = parameters(page, "parameters")
    pick(page, "Model size", "Medium")
    assert parameters(page, "parameters") > small  # the memory line follows the size chosen
    page.get_by_text(t("train.settings", "en"), exact=True).click()  # the training settings' section opens
    page.get_by_text("Time budget (s)", exact=True).wait_for()
    wait_done(page)
    tick(page, "Train on the CPU even if a GPU is available")
    assert "Training runs on CPU (cpu), in float32." in main_text(page)
    switch_language(page, "zh")
    text = main_text(page)
    assert "训练设备：CPU（cpu），精度：float32。" in text and "这台服务器没有 GPU" in text
    assert "每次训练最多可用 1,024 MiB" in text and parameters(page, "个参数") > small
    go_to(page, "语言模型")
    open_tab(page, "生成文本")
    page.get_by_text("训练设置（开始训练时固定下来）", exact=True).click()
    page.get_by_text("训练秒数", exact=True).wait_for()  # the settings are drawn: the fold is open
    wait_done(page)
    text = main_text(page)
    assert "训练设备：CPU（cpu），精度：float32。" in text and "每次训练最多可用 1,024 MiB" in text
    assert "模型规模" not in page.locator("[data-testid='stExpander']").filter(
        has_text="训练设置").first.inner_text()  # one size on a CPU server
    assert_no_exception(page)
