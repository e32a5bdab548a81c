"""Start page, learning path (AppTest): every step in both languages, answered the way a student would (a prediction,
then the app's answer), the answers equal to what viz_core computes, every link opening its page in the promised
state, progress in the address, the summary and the teacher's ?step= link."""
from __future__ import annotations


from pathlib import Path

import numpy as np
import pytest

from app_pages._ui.training_job import shipped_path
from tests.conftest import assert_clean, assert_opens_in_state, figures, page_links, run_page, widget
from viz_core import i18n
from viz_core.learning import path
from viz_core.lm.training import load_lm
from viz_core.pretrained import packaged
from viz_core.seq2seq.training import load_checkpoint

N = len(path.STEPS)
ROOT = Path(__file__).resolve().parents[1]
REAL = packaged.status(packaged.GEMMA).state == "ready"  # the page reads Gemma for the induction and sink steps


def _key(step, part: str) -> str:
    """The words of a step as the page picks them: the real model's (start.<id>_<part>_real) where it reads it."""
    name = f"{step.id}_{part}"
    return f"{name}_real" if REAL and step.real is not None and f"{name}_real" in i18n.namespace("start") else name


@pytest.fixture(scope="module")
def answers() -> dict[str, path.Answer]:
    """Every step's answer computed straight from viz_core (the shipped models and MiniLM loaded here)."""
    from viz_core.pretrained import attention_for, load_model
    out = {k: f() for k, f in path.ANSWERS.items()}
    out["reverse"] = path.answer_reverse(load_checkpoint(shipped_path("reverse")))
    if REAL:
        from viz_core.pretrained import heads
        gemma = load_model(path.REAL_MODEL)
        weights, tokens = heads.repeated_attention(gemma, path.INDUCTION_SEGMENT, seed=0)
        out["induction"] = path.answer_induction_real(weights, tokens, path.INDUCTION_SEGMENT,
                                                      model=packaged.GEMMA.title)
        r = attention_for(gemma, path.SINK_TEXT)
        out["sinks"] = path.answer_sinks(r.tokens, r.weights, r.special, neighbour=-1)
        return out
    out["induction"] = path.answer_induction(load_lm(shipped_path("lm_induction")))
    r = attention_for(load_model(), path.SINK_TEXT)
    out["sinks"] = path.answer_sinks(r.tokens, r.weights, r.special)
    return out


def _links(at) -> list[tuple[str, dict]]:
    return [(page, query) for page, query, _ in page_links(at)]


def _prediction(at, step):
    return widget(at, "radio", f"start.p_{step.id}")


def _wrong(step, a) -> str:
    return next(o for o in step.options if o != a.correct)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_walk_the_whole_path(lang, answers):
    """Step 1 to the summary with Next: each step asks first (nothing chosen, no answer), then shows the app's
    answer for the prediction made (right on even steps, wrong on odd ones) and the link to its page."""
    at = run_page("start", {"lang": lang} if lang != "en" else {})
    assert_clean(at)
    tr = lambda key, **kw: i18n.t(f"start.{key}", lang, **kw)  # noqa: E731
    for i, step in enumerate(path.STEPS, start=1):
        assert widget(at, "selectbox", "start.step").value == i
        assert tr(f"{step.id}_title") in [h.value for h in at.subheader]
        radio = _prediction(at, step)
        assert radio.value is None and not at.success and not _links(at), f"step {i} answered before asked"
        a = answers[step.id]
        chosen = a.correct if i % 2 == 0 else _wrong(step, a)
        radio.set_value(chosen).run()
        assert_clean(at)
        verdict = (at.success if chosen == a.correct else at.info)[0].value
        assert tr(_key(step, f"opt_{a.correct}")) in verdict
        body = " ".join(m.value for m in at.markdown).replace("\\", "")
        for v in a.values.values():  # every number of the answer sentence is the app's own
            assert v in body, (step.id, v)
        [(page, query)] = [(p, q) for p, q in _links(at) if "glossary" not in q.get("part", "")]
        want_page, want_params = step.link(REAL)
        assert page == want_page and query == want_params | ({"lang": lang} if lang != "en" else {})
        assert at.query_params[f"p_{step.id}"] in (chosen, [chosen])
        if a.matrix is not None:
            [fig] = figures(at)
            assert fig["layout"]["yaxis"]["autorange"] == "reversed"  # row 0 at the top
        at.button(key="start.next").click().run()
    assert_clean(at)
    assert widget(at, "selectbox", "start.step").value == N + 1
    right = sum(i % 2 == 0 for i in range(1, N + 1))
    assert tr("summary_intro", right=right, done=N) in [m.value for m in at.markdown]
    table = at.table[0].value
    assert len(table) == N and list(table.iloc[:, -1]).count("✓") == right


def test_answers_follow_their_numbers(answers):
    """The correct option is read off the computed numbers, and those numbers say what the steps teach."""
    a = answers
    assert a["softmax"].correct == "p67" and float(a["softmax"].values["p"]) == pytest.approx(np.exp(2) / (np.exp([2, 1, 0]).sum()), rel=1e-3)
    assert a["saturation"].correct == "p1" and float(a["saturation"].values["raw"]) > 0.9 > float(a["saturation"].values["scaled"])
    assert a["causal"].correct == "above" and a["causal"].values["hidden"] == "10"
    assert a["padding"].correct == "zero" and a["padding"].values["max"] == "0"
    assert a["heads"].correct == "eighth" and a["heads"].values["ratio"] == "1/8"
    assert a["order"].correct == "moves"
    assert a["layernorm"].correct == "zero_one"
    assert a["residual"].correct == "larger"
    assert a["optimizer"].correct == "momentum"
    assert a["reverse"].correct == "anti" and a["reverse"].values["output"] == "5 1 4 1 3"
    assert a["induction"].correct == "next_after"
    assert a["sinks"].correct == "special"
    for step in path.STEPS:
        assert answers[step.id].correct in step.options


@pytest.mark.parametrize("step", path.STEPS, ids=[s.id for s in path.STEPS])
def test_each_link_opens_its_page_in_the_promised_state(step):
    assert_opens_in_state(step.page, step.link_params, lang="zh" if step.id in ("qk", "heads", "sinks") else "en")


def _attention_views() -> tuple[str, ...]:
    """The views the Attention page lists (its VIEWS tuple, read from the source: importing a page runs it)."""
    import ast
    import re
    found = re.search(r"^VIEWS = (\(.*?\))", (ROOT / "app_pages" / "attention.py").read_text("utf-8"), re.M | re.S)
    return ast.literal_eval(found[1]) if found else ()


@pytest.mark.parametrize("step_id", path.REAL_STEPS)
def test_each_real_model_link_opens_its_page_in_the_promised_state(step_id):
    step = path.step(step_id)
    page, params = step.link(real=True)
    if not REAL:
        pytest.skip("Gemma 3 270M is not converted here")
    if params.get("view") not in _attention_views():
        pytest.skip(f"the Attention page does not list its {params.get('view')!r} view yet")
    assert_opens_in_state(page, params, lang="zh" if step_id == "sinks" else "en")


def test_without_the_real_model_the_steps_read_the_small_ones(monkeypatch):
    """Gemma not converted (yet): the induction step asks about the shipped small model and links to Language
    model, as before."""
    from app_pages._ui import models
    monkeypatch.setattr(models, "packaged_ready", lambda name: name != path.REAL_MODEL)
    step = path.step("induction")
    i = path.STEPS.index(step) + 1
    at = run_page("start", {"step": str(i), "p_induction": "next_after"})
    assert_clean(at)
    body = " ".join(m.value for m in at.markdown)
    assert i18n.t("start.induction_text", "en") in body and "Gemma" not in body
    [(page, query)] = [(p, q) for p, q in _links(at) if "glossary" not in q.get("part", "")]
    assert (page, query) == (step.page, step.link_params)


def test_a_teacher_link_opens_a_step_and_the_address_keeps_answers():
    at = run_page("start", {"lang": "zh", "step": "5"})
    assert_clean(at)
    step = path.STEPS[4]
    assert widget(at, "selectbox", "start.step").value == 5
    assert i18n.t(f"start.{step.id}_title", "zh") in [h.value for h in at.subheader]
    assert _prediction(at, step).value is None
    # a reload of an address that holds answers: the step shows its answer, the progress counts them
    at = run_page("start", {"step": "5", "p_causal": "below", "p_qk": "self"})
    assert _prediction(at, step).value == "below" and at.info  # the wrong prediction, answered
    assert "2 of 15" in at.get("progress")[0].proto.text


def test_bad_addresses_fall_back_and_keep_working():
    at = run_page("start", {"step": "99", "p_qk": "<b>x</b>", "part": "nope"})
    assert_clean(at)
    assert widget(at, "selectbox", "start.step").value == 1
    assert _prediction(at, path.STEPS[0]).value is None


def test_summary_links_further_and_restart_clears(answers):
    query = {"step": str(N + 1)} | {f"p_{s.id}": answers[s.id].correct for s in path.STEPS}
    at = run_page("start", query)
    assert_clean(at)
    assert i18n.t("start.summary_intro", "en", right=N, done=N) in [m.value for m in at.markdown]
    pages = {p for p, _ in _links(at)}
    assert {"attention", "language_model", "train", "mechanics", "positions", "anatomy", "scaling"} <= pages
    at.button(key="start.to_glossary").click().run()
    assert widget(at, "segmented_control", "start.part").value == "glossary" and at.query_params["part"] in (
        "glossary", ["glossary"])
    at.switch_page("app_pages/start.py").run()  # back to the path: the summary, as it was
    widget(at, "segmented_control", "start.part").set_value("path").run()
    assert widget(at, "selectbox", "start.step").value == N + 1
    at.button(key="start.restart").click().run()
    assert_clean(at)
    assert widget(at, "selectbox", "start.step").value == 1
    assert not any(k.startswith("p_") for k in at.query_params)
    assert "0 of 15" in at.get("progress")[0].proto.text


def test_the_default_page_points_newcomers_to_the_path_as_they_left_it():
    """The root address still opens Attention (old shared links keep working); its pointer to the path carries the
    path's own address, so a student who wandered off comes back to their step and answers."""
    at = run_page("start", {"step": "5", "p_causal": "above"})
    at.query_params.clear()
    at.switch_page("app_pages/attention.py").run()
    assert_clean(at)
    [query] = [q for p, q in _links(at) if p == "start"]
    assert query == {"step": "5", "p_causal": "above"}
    at.query_params.clear()
    for k, v in query.items():
        at.query_params[k] = v
    at.switch_page("app_pages/start.py").run()
    assert widget(at, "selectbox", "start.step").value == 5 and _prediction(at, path.STEPS[4]).value == "above"
