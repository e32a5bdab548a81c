"""Language-model page in Chromium: every tab draws, training shows live progress, a language switch during
training keeps the run going, no exception anywhere. Screenshots (English and Chinese, 1400 px and 390 px wide)
land in artifacts/screenshots/lm_*.png."""
from __future__ import annotations

import pytest

from tests.browser.conftest import (CHART, assert_no_exception, open_tab, overlapping_words, screenshot,
                                    switch_language, wait_done)

pytestmark = pytest.mark.browser

TABS = {"en": ["Induction heads", "Your sequence", "Generate text", "KV cache"],
        "zh": ["归纳头", "你的序列", "生成文本", "KV 缓存"]}


def main_text(page) -> str:
    return page.locator("[data-testid='stMain']").inner_text()


@pytest.mark.parametrize("lang, width", [("en", 1400), ("zh", 1400), ("en", 390), ("zh", 390)])
def test_every_tab_draws(open_page, lang, width):
    page = open_page(f"/language_model?lang={lang}", width=width, height=5200 if width < 800 else 3600)
    assert_no_exception(page)
    for i, label in enumerate(TABS[lang]):
        if i:
            open_tab(page, label)
        # at least two charts (Generate text: one, its training curves are drawn only while their section is open):
        # plotly draws after the run, and the KV-cache tab's time-per-token chart comes when its background
        # measurement is done (a fragment polls for it; later on a busy machine)
        page.locator(CHART).nth((2, 2, 1, 2)[i] - 1).wait_for(timeout=120_000)
        assert_no_exception(page)
        screenshot(page, f"lm_{['induction', 'sequence', 'generate', 'cache'][i]}_{lang}_{width}")


def test_train_live_and_switch_language_during_the_run(open_page):
    page = open_page("/language_model?lang=en&induction_seconds=90")
    assert_no_exception(page)
    page.locator(".st-key-lm-go_induction button").click()
    page.wait_for_selector("[data-testid='stProgress']", timeout=60_000)
    page.wait_for_timeout(3000)
    first = page.locator("[data-testid='stProgress']").inner_text()
    assert "Training the induction heads: step" in first
    screenshot(page, "lm_training_en_1400")
    switch_language(page, "zh")
    page.wait_for_timeout(3000)
    assert_no_exception(page)
    progress = page.locator("[data-testid='stProgress']").inner_text()
    assert "正在训练归纳头" in progress  # the same run, now described in Chinese
    step_zh = int(progress.split("第 ")[1].split(" 步")[0])
    step_en = int(first.split("step ")[1].split(",")[0])
    assert step_zh > step_en  # it kept going through the switch
    open_tab(page, "KV 缓存")  # another tab: the progress stays in view
    page.wait_for_selector("[data-testid='stProgress']", timeout=15_000)
    screenshot(page, "lm_training_zh_1400")
    page.locator(".st-key-lm-live_stop button").click()
    # the run ends after its current step; the fragment then reruns the page, which keeps the model and says why
    page.get_by_text("的训练在第", exact=False).first.wait_for(timeout=60_000)
    wait_done(page)
    assert_no_exception(page)
    assert "被停止" in main_text(page)
    assert page.locator("[data-testid='stProgress']").count() == 0
    open_tab(page, "归纳头")
    assert "你训练的模型" in main_text(page)
    screenshot(page, "lm_after_stop_zh_1400")


@pytest.mark.parametrize("lang, width", [("en", 390), ("zh", 390), ("en", 1400)])
def test_the_two_heads_side_by_side_read_on_a_phone(open_page, lang, width):
    """The previous-token and induction heads' maps: no title, axis name, legend entry or tick label drawn over
    another, and the query axis named once, on the left map (on a phone the right map's name fell on the left map)."""
    page = open_page(f"/language_model?lang={lang}&snap=0", width=width, height=3600)
    chart = ".st-key-lm-patterns .js-plotly-plot"
    page.locator(f"{chart} .annotation-text-g").nth(1).wait_for(timeout=60_000)
    page.locator(chart).scroll_into_view_if_needed()
    assert overlapping_words(page, chart) == []
    assert page.locator(f"{chart} .g-ytitle text").count() == 1 and page.locator(f"{chart} .g-y2title text").count() == 0
    assert page.locator(f"{chart} .y2tick text").count() == 0  # the right map shares the left map's query labels
    assert_no_exception(page)
    screenshot(page, f"lm_patterns_{lang}_{width}")


_FRAMES = """() => { const gd = document.querySelector('.st-key-lm-patterns .js-plotly-plot');
  const frames = gd && gd._transitionData && gd._transitionData._frames;
  if (!frames || !frames.length) return null;
  const rows = (z) => Array.from(z, (r) => Array.from(r));
  return frames.map((f) => f.data.map((d) => rows(d.z))); }"""
_SHOWN = """() => { const gd = document.querySelector('.st-key-lm-patterns .js-plotly-plot');
  return [gd.data[0].z, gd.data[3].z].map((z) => Array.from(z, (r) => Array.from(r))); }"""


def test_the_played_heads_are_the_snapshots_to_the_last_digit(open_page):
    """The snapshots' maps travel as bytes in 1/255 steps (a quarter of float32's): every frame the browser plays
    holds exactly the float32 the shipped model's snapshots hold, and Play ends on the last one drawn."""
    import numpy as np

    from app_pages._ui.training_job import shipped_path
    from viz_core.lm.training import load_lm
    snaps = load_lm(shipped_path("lm_induction")).snapshots
    final = snaps[-1]
    heads = [np.unravel_index(np.argmax(final.prev), final.prev.shape),
             np.unravel_index(np.argmax(final.induction), final.induction.shape)]
    page = open_page("/language_model?lang=en&snap=0", height=3600)
    page.wait_for_function(f"() => ({_FRAMES})() !== null", timeout=60_000)
    frames = page.evaluate(_FRAMES)
    assert len(frames) == len(snaps)
    for frame, snap in zip(frames, snaps):
        for z, (layer, head) in zip(frame, heads):
            np.testing.assert_array_equal(np.asarray(z, dtype=np.float64), snap.maps[layer, head].astype(np.float64))
    chart = page.locator(".st-key-lm-patterns .js-plotly-plot")
    chart.scroll_into_view_if_needed()
    chart.locator(".updatemenu-button").first.click()  # ▶ Play
    chart.locator(".gtitle").filter(has_text=f": {final.step}").wait_for(timeout=60_000)
    shown = page.evaluate(_SHOWN)
    for z, (layer, head) in zip(shown, heads):
        np.testing.assert_array_equal(np.asarray(z, dtype=np.float64), final.maps[layer, head].astype(np.float64))
    assert_no_exception(page)


def test_the_scores_definitions_open_with_a_click_and_close_with_back(open_page):
    """The two scores' formulas are in a section of the first tab: closed, one formula (the architecture's); a click
    opens it (scores=1 in the address) and draws prev(h), the rules' text and the two rules; Back closes it."""
    page = open_page("/language_model?lang=en")
    formulas = page.locator("[data-testid='stMain'] .ae-formula")
    assert formulas.count() == 1
    page.locator("[data-testid='stExpander'] summary").filter(has_text="How the two scores are computed").click()
    page.wait_for_url(lambda url: "scores=1" in url)
    wait_done(page)
    page.locator("[data-testid='stMain'] .ae-formula .katex").nth(2).wait_for()
    assert formulas.count() == 3 and "detect_head" in main_text(page)
    assert_no_exception(page)
    screenshot(page, "lm_scores_open_en")
    page.go_back()
    page.wait_for_url(lambda url: "scores=1" not in url)
    wait_done(page)
    page.wait_for_function("() => document.querySelectorAll(\"[data-testid='stMain'] .ae-formula\").length === 1")
    assert "detect_head" not in main_text(page)
    assert_no_exception(page)


def test_the_scores_formulas_fit_a_phone_inside_their_section(open_page):
    """At 390 px the section gives its formulas its side padding (style.PAGE_CSS): the two rules, the widest display
    of the page, fit their box instead of scrolling in it."""
    page = open_page("/language_model?lang=zh&scores=1", width=390, height=2400)
    page.locator("[data-testid='stMain'] .ae-formula .katex").nth(2).wait_for()
    overflow = page.evaluate("""() => [...document.querySelectorAll("[data-testid='stMain'] .ae-formula")].map(
        f => f.scrollWidth - f.clientWidth)""")
    assert len(overflow) == 3 and max(overflow) <= 1, overflow
    assert_no_exception(page)
