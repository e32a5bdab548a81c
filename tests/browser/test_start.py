"""Start here, the learning path, in Chromium, as a student walks it: in English and in Chinese, every step answered
by clicking a prediction, the app's answer checked, every step's link followed (the page it opens holds the link's
state, in the address and on screen), Back to the step as it was, Next; then the summary. And a teacher's link to one
step, a jump in the step list, a language switch and a reload."""
from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlparse

import pytest

from app_pages._ui.nav import DEFAULT_PAGE
from app_pages._ui.training_job import shipped_path
from tests.browser.conftest import (assert_no_exception, choose, chosen, screenshot, switch_language, wait_done)
from viz_core import i18n
from viz_core.learning import path
from viz_core.pretrained import packaged

N = len(path.STEPS)
REAL = packaged.installed(packaged.GEMMA)  # then the induction and sink steps read Gemma (converted by _gemma below)


@pytest.fixture(scope="module", autouse=True)
def _gemma(real_decoders):
    """The server's path reads Gemma once its cache is converted: convert it before the walk."""
    assert REAL == (path.REAL_MODEL in real_decoders)


@pytest.fixture(scope="module")
def correct() -> dict[str, str]:
    """The option each step's numbers point to, computed here from viz_core (not read off the page)."""
    from viz_core.lm.training import load_lm
    from viz_core.pretrained import attention_for, load_model
    from viz_core.seq2seq.training import load_checkpoint
    out = {k: f().correct for k, f in path.ANSWERS.items()}
    out["reverse"] = path.answer_reverse(load_checkpoint(shipped_path("reverse"))).correct
    if REAL:  # the server's induction and sink steps read Gemma (its cache is converted)
        from viz_core.pretrained import heads
        gemma = load_model(path.REAL_MODEL)
        weights, tokens = heads.repeated_attention(gemma, path.INDUCTION_SEGMENT, seed=0)
        out["induction"] = path.answer_induction_real(weights, tokens, path.INDUCTION_SEGMENT).correct
        r = attention_for(gemma, path.SINK_TEXT)
        out["sinks"] = path.answer_sinks(r.tokens, r.weights, r.special, neighbour=-1).correct
        return out
    out["induction"] = path.answer_induction(load_lm(shipped_path("lm_induction"))).correct
    r = attention_for(load_model(), path.SINK_TEXT)
    out["sinks"] = path.answer_sinks(r.tokens, r.weights, r.special).correct
    return out


def shown(markdown: str) -> str:
    """A short markdown string as the browser shows it (code spans lose their backticks)."""
    return markdown.replace("`", "")


def key(step: path.Step, part: str) -> str:
    """The step's string as the server shows it: its _real variant where the step reads Gemma."""
    name = f"{step.id}_{part}"
    real = REAL and step.real is not None and f"{name}_real" in i18n.namespace("start")
    return f"start.{name}_real" if real else f"start.{name}"


def _query(url: str) -> dict[str, str]:
    return dict(parse_qsl(urlparse(url).query))


def _page_of(url: str) -> str:
    return urlparse(url).path.strip("/") or DEFAULT_PAGE


def _predict(page, lang: str, step: path.Step, option: str) -> None:
    group = page.get_by_role("radiogroup", name=i18n.t("start.predict", lang), exact=True)
    group.get_by_text(shown(i18n.t(key(step, f"opt_{option}"), lang)), exact=True).click()
    wait_done(page)


def _verdict(page) -> str:
    return page.locator("[data-testid='stMain'] [data-testid='stAlert']").first.inner_text()


def _follow_link(page, lang: str, step: path.Step) -> None:
    """Click the step's link, check the page it opens, come back with Back."""
    page.get_by_role("link", name=i18n.t(key(step, "link"), lang), exact=True).click()
    target, params = step.link(real=REAL)
    page.wait_for_url(re.compile(rf"/{'' if target == DEFAULT_PAGE else target}\?"))
    wait_done(page)
    assert_no_exception(page)
    assert _page_of(page.url) == target
    held = _query(page.url)
    for k, v in params.items():  # the page wrote its state back to the address: the link's values held
        assert held.get(k) == v, (step.id, k, v, page.url)
    title = i18n.t(f"{target}.title", lang)
    assert page.locator("h1").first.inner_text().strip() == title
    page.go_back()
    wait_done(page)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_walk_the_whole_path_and_follow_every_link(open_page, lang, correct):
    page = open_page("/start" + ("?lang=zh" if lang == "zh" else ""))
    assert_no_exception(page)
    for i, step in enumerate(path.STEPS, start=1):
        assert _query(page.url).get("step", "1") == str(i)
        page.get_by_role("heading", name=i18n.t(f"start.{step.id}_title", lang), exact=True).wait_for()
        assert page.get_by_role("link", name=i18n.t(key(step, "link"), lang), exact=True).count() == 0
        option = correct[step.id] if i % 2 else next(o for o in step.options if o != correct[step.id])
        _predict(page, lang, step, option)
        assert_no_exception(page)
        verdict = _verdict(page)
        assert shown(i18n.t(key(step, f"opt_{correct[step.id]}"), lang)) in verdict
        assert (i18n.t("start.verdict_right", lang, answer="").split("**")[0].strip() in verdict) == (option ==
                                                                                                 correct[step.id])
        assert _query(page.url)[f"p_{step.id}"] == option
        if i in (1, 9, 13, 15):
            screenshot(page, f"start_{lang}_step{i}")
        _follow_link(page, lang, step)
        # back on the path: the same step, the prediction still made
        assert _query(page.url).get("step", "1") == str(i) and _query(page.url)[f"p_{step.id}"] == option
        assert shown(i18n.t(key(step, f"opt_{correct[step.id]}"), lang)) in _verdict(page)
        page.get_by_role("button", name=i18n.t("start.finish" if i == N else "start.next", lang)).click()
        wait_done(page)
    assert_no_exception(page)
    right = sum(1 for i in range(1, N + 1) if i % 2)
    intro = i18n.t("start.summary_intro", lang, right=right, done=N).replace("**", "")
    assert intro in page.locator("[data-testid='stMain']").inner_text()
    cells = page.locator("[data-testid='stTable'] td").all_inner_texts()
    assert cells.count("✓") == right and cells.count("✗") == N - right
    screenshot(page, f"start_{lang}_summary")


def test_a_teachers_link_the_step_list_language_and_reload(open_page):
    page = open_page("/start?step=5&lang=zh", width=390, dark=True)
    assert_no_exception(page)
    step = path.STEPS[4]
    page.get_by_role("heading", name=i18n.t(f"start.{step.id}_title", "zh"), exact=True).wait_for()
    _predict(page, "zh", step, "above")
    screenshot(page, "start_zh_390_dark_step5")
    choose(page, "步骤", i18n.t("start.step_option", "zh", i=8, title=i18n.t("start.order_title", "zh")))
    assert _query(page.url)["step"] == "8" and _query(page.url)["p_causal"] == "above"
    page.locator("[data-testid='stExpandSidebarButton']").click()  # on a phone the sidebar starts folded
    switch_language(page, "en")
    assert chosen(page, "Step") == i18n.t("start.step_option", "en", i=8, title=i18n.t("start.order_title", "en"))
    page.go_back()  # the language switch, undone
    wait_done(page)
    page.go_back()  # step 5 again, answered
    wait_done(page)
    assert _query(page.url)["step"] == "5"
    assert i18n.t("start.causal_opt_above", "zh") in _verdict(page)
    page.reload()
    wait_done(page)
    assert_no_exception(page)
    assert _query(page.url)["step"] == "5" and i18n.t("start.causal_opt_above", "zh") in _verdict(page)
    assert i18n.t("start.progress", "zh", done=1, total=N) in page.locator("[data-testid='stMain']").inner_text()
