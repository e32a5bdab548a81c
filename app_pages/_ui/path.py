"""Start page: the learning path. One step at a time (?step=), each a question, the student's prediction (?p_<step>=),
then the answer the app computes (viz_core.learning.path), a figure and a link that opens the page where the step's
experiment lives, in that state. The last step (len(STEPS) + 1) is the summary.

The summary counts each step's first prediction, the one made before the answer was shown (path.counted): a later
change shows its own verdict but scores nothing. The first is kept like the page's other state (the store, and the
address as ?f_<step>= where it differs from the current prediction, so a reload keeps it) and in the session's FIRST
record, which Back / Forward (where the address is the truth) cannot undo.

The induction and sink steps read the real Gemma 3 270M (path.REAL_MODEL) once its converted cache is ready, and the
shipped induction model / MiniLM until then (or where it is not installed); `real(step)` decides, and their words are
the start.<step>_<key>_real strings where those exist."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from viz_core import i18n
from viz_core.errors import InputError
from viz_core.learning import path
from viz_core.plots import common

from . import SharedFigures, glossed, lang, latex, link, plain_md, plot, selectbox, set_value, state, t, value

N_STEPS = len(path.STEPS)
SUMMARY = N_STEPS + 1                   # the step number of the summary
ROW_WORDS = {"no_scale", "scaled", "p"}  # row labels of answers that are words (start.row_<id>), not tokens
EXPLORE = (  # where to go further: (id, page, params); labels start.explore_<id>
    ("grid", "attention", {"view": "grid"}),
    ("importance", "attention", {"view": "importance"}),
    ("lens", "language_model", {"tab": "decoder", "dec_view": "lens"}),
    ("train", "train", {"tab": "train"}),
    ("cross", "mechanics", {"section": "cross"}),
    ("rope", "positions", {"part": "relative"}),
    ("smoothing", "anatomy", {"section": "smoothing"}),
    ("scale_train", "scaling", {"part": "train"}),
)

FIRST = "_start.first"   # session state: {step id: the first prediction}, at most one entry per step

figures = SharedFigures(common)


# ---------------------------------------------------------------- answers (computed once, shared read-only)
@st.cache_data(show_spinner=False, max_entries=len(path.ANSWERS))
def _plain_answer(step_id: str) -> path.Answer:
    return path.ANSWERS[step_id]()


@st.cache_data(show_spinner=False, max_entries=3)
def _model_answer(step_id: str) -> path.Answer:
    """The steps that read a trained model: the shipped reverse translator and induction LM, the packaged MiniLM."""
    if step_id == "reverse":
        from .train import shipped
        return path.answer_reverse(shipped("reverse"))
    if step_id == "induction":
        from .language_model import shipped
        return path.answer_induction(shipped("induction"))
    from . import models
    r = models.attention("", path.SINK_TEXT)
    return path.answer_sinks(r.tokens, r.weights, r.special)


@st.cache_data(show_spinner=False, max_entries=len(path.REAL_STEPS))
def _real_answer(step_id: str) -> path.Answer:
    """The induction and sink steps on the real decoder (the shared model, read only: one forward pass each)."""
    from . import models
    if step_id == "induction":
        from viz_core.pretrained import heads
        m = models.model(path.REAL_MODEL)
        from viz_core.runtime.threads import thread_budget
        with models.heavy(), thread_budget(1):  # one thread: steadier on a shared server (17 tokens)
            weights, tokens = heads.repeated_attention(m, path.INDUCTION_SEGMENT, seed=0)
        return path.answer_induction_real(weights, tokens, path.INDUCTION_SEGMENT, model=_real_title())
    r = models.attention(path.REAL_MODEL, path.SINK_TEXT)
    return path.answer_sinks(r.tokens, r.weights, r.special, neighbour=-1)  # a decoder sees only the word before


def _real_title() -> str:
    from viz_core.pretrained import packaged
    return packaged.by_id(path.REAL_MODEL).title


def real(step: path.Step) -> bool:
    """Whether this step reads the real decoder now: it has a real variant and the model loads without converting."""
    if step.real is None:
        return False
    from . import models
    return models.packaged_ready(path.REAL_MODEL)  # its converted cache is there (so its package is installed)


def text_key(step: path.Step, part: str, use_real: bool = False) -> str:
    """The locale key of a step's text part: start.<id>_<part>_real for the real model where it exists."""
    name = f"{step.id}_{part}"
    return f"start.{name}_real" if use_real and f"{name}_real" in i18n.namespace("start") else f"start.{name}"


def answer(step: path.Step) -> path.Answer | None:
    """The step's answer; None when the model it reads cannot be loaded here (the page says so)."""
    if not step.needs:
        return _plain_answer(step.id)
    try:
        return _real_answer(step.id) if real(step) else _model_answer(step.id)
    except (InputError, OSError):
        return None


# ---------------------------------------------------------------- predictions (one per step, in the address)
def _param(step: path.Step) -> str:
    return f"p_{step.id}"


def _valid_for(step: path.Step):
    return lambda v: v is None or v in step.options


def prediction(step: path.Step) -> str | None:
    """The student's prediction for a step: a radio with nothing chosen until they choose. Its value holds like
    every control's (session, language switch, address p_<step>=<option>)."""
    param = _param(step)
    key = state.bind(param, None, lambda raw: raw if raw in step.options else None, _valid_for(step), lang=lang())
    held = st.session_state[key]
    use_real = real(step)
    chosen = st.radio(t("start.predict"), step.options, index=None if held is None else step.options.index(held),
                      key=key, format_func=lambda o: option_label(step, o, use_real))
    state.commit(param, chosen, None)
    return chosen


def stored_prediction(step: path.Step) -> str | None:
    """A step's prediction without drawing its radio (the step list, the summary)."""
    return value(_param(step), None, lambda raw: raw if raw in step.options else None, _valid_for(step))


def first_prediction(step: path.Step, chosen: str | None) -> str | None:
    """The prediction the summary counts: the first one made for this step (recorded now if `chosen` is the first),
    None while the step has none. Kept in the session's FIRST record and the page's store, and in the address
    (f_<step>) only where it differs from `chosen`."""
    record = st.session_state.setdefault(FIRST, {})
    held = record.get(step.id) or value(f"f_{step.id}", None, lambda raw: raw if raw in step.options else None,
                                        _valid_for(step))
    first = path.counted(held, chosen)
    if first is not None:
        record[step.id] = first
    set_value(f"f_{step.id}", first, chosen)
    return first


def option_label(step: path.Step, option: str, use_real: bool = False) -> str:
    return t(text_key(step, f"opt_{option}", use_real))


def restart() -> None:
    """Clear every prediction and go back to step 1."""
    for s in path.STEPS:
        for param in (_param(s), f"f_{s.id}"):
            set_value(param, None, None)
    st.session_state.pop(FIRST, None)
    set_value("step", 1)


# ---------------------------------------------------------------- one step
def step_label(i: int) -> str:
    if i == SUMMARY:
        return t("start.summary_option", i=i)
    return t("start.step_option", i=i, title=t(f"start.{path.STEPS[i - 1].id}_title"))


def step_view(i: int) -> None:
    step = path.STEPS[i - 1]
    use_real = real(step)
    st.caption(t("start.step_of", i=i, n=N_STEPS, topic=t(f"start.topic_{step.topic}")))
    st.subheader(t(f"start.{step.id}_title"))
    st.markdown(glossed(t(text_key(step, "text", use_real))))
    if step.id == "sinks":
        st.markdown("> " + plain_md(path.SINK_TEXT))
    if step.formula:
        latex(step.formula)
    if step.id in path.GIVENS:  # the numbers the question reasons from, before the prediction
        st.markdown(t(f"start.{step.id}_given", **path.GIVENS[step.id]()))
    chosen = prediction(step)
    first = first_prediction(step, chosen)
    if chosen is None:
        st.caption(t("start.predict_hint"))
        return
    with st.spinner(t("start.computing_real") if use_real else t("start.computing")):
        a = answer(step)
    if a is None:
        st.warning(t("start.model_missing"))
    else:
        answer_view(step, a, chosen, first, use_real)
    page, params = step.link(use_real)
    link(page, t(text_key(step, "link", use_real)), params)


def answer_view(step: path.Step, a: path.Answer, chosen: str, first: str, use_real: bool = False) -> None:
    verdict(step, a.correct, chosen, first, use_real)
    st.markdown(t(text_key(step, "answer", use_real), **{k: plain_md(v) for k, v in a.values.items()}))
    if a.matrix is not None:
        plot(answer_figure(step, a, use_real), key=f"start.fig_{step.id}")
    st.markdown(f"**{t('start.why')}:** " + glossed(t(text_key(step, "why", use_real))))


def verdict(step: path.Step, correct: str, chosen: str, first: str, use_real: bool = False) -> None:
    """Green only for a first prediction that is right; a later change says whether it would be, and that the first
    one counts."""
    label = lambda o: option_label(step, o, use_real)  # noqa: E731
    if chosen == first == correct:
        st.success(t("start.verdict_right", answer=label(correct)))
    elif chosen == first:
        st.info(t("start.verdict_wrong", answer=label(correct), chosen=label(chosen)))
    else:
        key = "start.verdict_changed_right" if chosen == correct else "start.verdict_changed_wrong"
        st.info(t(key, answer=label(correct), chosen=label(chosen), first=label(first)))


def answer_figure(step: path.Step, a: path.Answer, use_real: bool = False):
    rows = [t(f"start.row_{r}") if r in ROW_WORDS else r for r in a.rows]
    x, y = a.axes
    value_name = {"sinks": "start.value_share", "waves": "start.value_pe"}.get(step.id, "start.value_weight")
    return figures.matrix_heatmap(a.matrix, rows, a.cols, title=t(text_key(step, "fig", use_real)),
                                  x_title=t(f"start.axis_{x}"), y_title=t(f"start.axis_{y}"), value_name=t(value_name),
                                  signed=a.signed, mask=a.mask, height=_height(a.matrix.shape[0]))


def _height(n_rows: int) -> int | None:
    """Short matrices (one to three rows) get a short figure, long ones (the encoding's 64 positions) a bounded one;
    the rest take the builder's own height."""
    return 170 + 30 * n_rows if n_rows <= 3 else 480 if n_rows > 16 else None


# ---------------------------------------------------------------- the summary
def summary_view() -> None:
    st.subheader(t("start.summary_title"))
    rows, counted, correct = [], {}, {}
    for i, s in enumerate(path.STEPS, start=1):
        chosen = stored_prediction(s)
        first = counted[s.id] = first_prediction(s, chosen)  # the first prediction counts, not a later change
        a = answer(s) if first is not None else None
        correct[s.id] = a and a.correct
        cells = {"col_step": step_label(i), "col_topic": t(f"start.topic_{s.topic}"),
                 "col_yours": yours(s, first, chosen),
                 "col_app": option_label(s, a.correct, real(s)) if a is not None else "–",
                 "col_match": "–" if a is None else "✓" if a.correct == first else "✗"}
        # st.table reads its cells as markdown: "10. Layer normalisation" would turn into a numbered list
        rows.append({t(f"start.{k}"): plain_md(v) for k, v in cells.items()})
    right, done = path.score(counted, correct)
    st.markdown(t("start.summary_intro", right=right, done=done) if done else t("start.summary_none"))
    st.table(pd.DataFrame(rows), hide_index=True)
    st.subheader(t("start.explore_title"))
    for key, page, params in EXPLORE:
        link(page, t(f"start.explore_{key}"), params)
    # this page's own glossary: a button, since a link to the page already open would not change its state
    st.button(t("start.explore_glossary"), key="start.to_glossary", on_click=set_value, args=("part", "glossary"),
              icon=":material/menu_book:", type="tertiary")
    st.button(t("start.restart"), key="start.restart", on_click=restart)


def yours(step: path.Step, first: str | None, chosen: str | None) -> str:
    """The summary's cell of the student's prediction: the first one, and the later one where it changed."""
    if first is None:
        return t("start.not_answered")
    use_real = real(step)
    if chosen == first:
        return option_label(step, first, use_real)
    return t("start.changed_to", first=option_label(step, first, use_real), chosen=option_label(step, chosen, use_real))


# ---------------------------------------------------------------- the page
def answered() -> int:
    return sum(stored_prediction(s) is not None for s in path.STEPS)


def go(i: int) -> None:
    set_value("step", i)


def nav_buttons(i: int) -> None:
    left, _, right = st.columns([1, 2, 1])
    if i > 1:
        left.button(t("start.prev"), key="start.prev", on_click=go, args=(i - 1,), icon=":material/arrow_back:",
                    width="stretch")
    if i < SUMMARY:
        right.button(t("start.finish") if i == N_STEPS else t("start.next"), key="start.next", on_click=go,
                     args=(i + 1,), icon=":material/arrow_forward:", type="primary", width="stretch")


def view() -> None:
    """The learning path: the step list, the open step (or the summary), Previous / Next."""
    i = selectbox(t("start.step_label"), list(range(1, SUMMARY + 1)), "step", 1, format_func=step_label)
    progress = st.empty()  # filled once the open step has recorded its prediction (a click counts at once)
    if i == 1:
        st.markdown(t("start.intro"))
    if i == SUMMARY:
        summary_view()
    else:
        step_view(i)
    done = answered()
    progress.progress(done / N_STEPS, text=t("start.progress", done=done, total=N_STEPS))
    nav_buttons(i)
    if i != SUMMARY:
        st.caption(t("start.share_step", i=i))
