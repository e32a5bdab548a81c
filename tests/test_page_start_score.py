"""Start page, learning path (AppTest): the score counts each step's first prediction. A student who
changes a wrong prediction to the right one after the answer was shown gets no green verdict and no point, through
reruns, a language switch, a page switch and a reload of the address; and step 1 shows the numbers it asks about
before the prediction."""
from __future__ import annotations

import pytest

from tests.conftest import APP_TIMEOUT_S, assert_clean, run_page, widget
from viz_core import i18n
from viz_core.learning import path

N = len(path.STEPS)
TIMEOUT = 2 * APP_TIMEOUT_S  # a 2-core machine shared with other test runs


def _summary_says(at, lang: str, right: int, done: int) -> bool:
    return i18n.t("start.summary_intro", lang, right=right, done=done) in [m.value for m in at.markdown]


def _qk_match(at) -> str:
    return at.table[0].value.iloc[0, -1]  # the first step's row, the "match" column


def test_changing_a_wrong_prediction_after_the_answer_scores_nothing():
    step = path.step("qk")
    correct = path.answer_qk().correct
    wrong = next(o for o in step.options if o != correct)
    at = run_page("start", timeout=TIMEOUT)
    assert_clean(at)
    widget(at, "radio", "start.p_qk").set_value(wrong).run()
    assert at.info and not at.success  # the wrong first prediction, answered
    widget(at, "radio", "start.p_qk").set_value(correct).run()  # the answer is on screen: change to it
    assert_clean(at)
    assert not at.success, "a prediction changed after the answer was shown must not turn green"
    label = lambda o: i18n.t(f"start.qk_opt_{o}", "en")  # noqa: E731
    assert at.info[0].value == i18n.t("start.verdict_changed_right", "en", answer=label(correct),
                                      chosen=label(correct), first=label(wrong))
    assert at.query_params["f_qk"] in (wrong, [wrong])  # a reload keeps the first prediction

    widget(at, "selectbox", "start.step").set_value(N + 1).run()
    assert_clean(at)
    assert _summary_says(at, "en", right=0, done=1) and _qk_match(at) == "✗"

    at.sidebar.radio(key="lang").set_value("zh").run()  # a language switch
    assert_clean(at)
    assert _summary_says(at, "zh", right=0, done=1) and _qk_match(at) == "✗"

    at.switch_page("app_pages/mechanics.py").run()  # a page switch, and back
    at.switch_page("app_pages/start.py").run()
    assert_clean(at)
    assert widget(at, "selectbox", "start.step").value == N + 1
    assert _summary_says(at, "zh", right=0, done=1) and _qk_match(at) == "✗"

    reloaded = run_page("start", {k: at.query_params[k] for k in at.query_params}, timeout=TIMEOUT)  # a new session
    assert_clean(reloaded)
    assert _summary_says(reloaded, "zh", right=0, done=1) and _qk_match(reloaded) == "✗"


def test_a_first_right_prediction_counts_and_going_back_to_it_clears_the_note():
    step = path.step("qk")
    correct = path.answer_qk().correct
    wrong = next(o for o in step.options if o != correct)
    at = run_page("start", timeout=TIMEOUT)
    widget(at, "radio", "start.p_qk").set_value(correct).run()
    assert at.success and not at.info
    widget(at, "radio", "start.p_qk").set_value(wrong).run()
    assert not at.success and "f_qk" in at.query_params
    widget(at, "radio", "start.p_qk").set_value(correct).run()  # back to the first: as if never changed
    assert at.success and "f_qk" not in at.query_params
    at.button(key="start.next").click().run()
    widget(at, "selectbox", "start.step").set_value(N + 1).run()
    assert _summary_says(at, "en", right=1, done=1) and _qk_match(at) == "✓"
    at.button(key="start.restart").click().run()  # a restart forgets the first predictions too
    assert_clean(at)
    assert not any(k.startswith(("p_", "f_")) for k in at.query_params)
    widget(at, "radio", "start.p_qk").set_value(wrong).run()
    assert at.info and not at.success


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_step_one_shows_its_numbers_before_the_prediction(lang):
    at = run_page("start", {"lang": lang} if lang != "en" else {}, timeout=TIMEOUT)
    assert_clean(at)
    assert widget(at, "radio", "start.p_qk").value is None  # nothing predicted yet
    given = path.given_qk()
    body = " ".join(m.value for m in at.markdown)
    assert i18n.t("start.qk_given", lang, **given) in body
    for numbers in given.values():  # the query of 哈基咪 and the three keys
        assert f"({numbers})" in body
