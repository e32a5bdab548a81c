"""AppTest of what a visitor can type or put in an address: no crash on a one-head cross attention or
an odd d_model, typed markup stays text in figures and messages, a run stopped while in line says so, a
checkpoint with an absurd config is refused with a message, and the Compare tab keeps the Train tab's budget."""
from __future__ import annotations


import pytest

from tests.conftest import assert_clean, figures, run_page, widget
from viz_core.runtime.jobs import default_slots

MARKUP = "<b>word</b> <i>x</i> & __class__"
ESCAPED = ["&lt;b&gt;word&lt;/b&gt;", "&lt;i&gt;x&lt;/i&gt;", "&amp;", "__class__"]


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # small models: one torch thread


def specs(at) -> list[dict]:
    return figures(at)


def figure_texts(at) -> list[str]:
    """Every tick label, trace text, hover value and title of the page's figures (what plotly reads as markup)."""
    out = []
    for spec in specs(at):
        for name, axis in spec["layout"].items():
            if name.startswith(("xaxis", "yaxis")) and isinstance(axis, dict):
                out += [str(x) for x in axis.get("ticktext") or []]
        for trace in spec["data"]:
            for key in ("text", "customdata", "x", "y"):
                value = trace.get(key)
                if isinstance(value, list):
                    out += [str(v) for v in _flat(value) if isinstance(v, str)]
    return out


def _flat(values):
    for v in values:
        if isinstance(v, list):
            yield from _flat(v)
        else:
            yield v


# ---------------------------------------------------------------- odd model shapes from the address
@pytest.mark.parametrize("query", [{"xh": "1"}, {"xdm": "3"}, {"xdm": "2", "xh": "1"}, {"xdm": "99"}])
def test_cross_attention_with_one_head_or_an_odd_width_draws(query):
    for lang in ("en", "zh"):
        at = run_page("mechanics", {"lang": lang, "section": "cross", **query})
        assert_clean(at)
        assert len(specs(at)) == 2  # the weights and the output


def test_one_head_is_stated_instead_of_a_slider():
    at = run_page("mechanics", {"lang": "en", "section": "cross", "xh": "1"})
    assert "Head: 0 (the only choice here)" in [c.value for c in at.caption]
    assert not [s for s in at.slider if s.key == "mechanics.xhead"]
    widget(at, "selectbox", "mechanics.xh").set_value(2).run()
    assert_clean(at)
    assert at.slider(key="mechanics.xhead").max == 1


def test_stopping_a_run_that_waits_in_line_says_so_and_keeps_the_page():
    slots = default_slots()
    held = [slots.acquire(-i - 1, lambda: False) for i in range(slots.limit)]  # every slot busy elsewhere
    try:
        at = run_page("train", {"lang": "en", "preset": "tiny", "cmp": "norm", "cmp_steps": "20", "tab": "compare"})
        at.button(key="train.cmp_go").click().run()
        assert "ahead of yours" in " ".join(i.value for i in at.info)
        at.button(key="train.queue_stop").click().run()
        at.session_state["_jobs.train"].join(10) if "_jobs.train" in at.session_state else None
        at.run()
        assert_clean(at)
        assert "Stopped before it started" in " ".join(i.value for i in at.info)
        assert len(at.tabs) == 6  # the page goes on
    finally:
        for i in range(len(held)):
            slots.release(-i - 1)


# ---------------------------------------------------------------- typed markup stays text
@pytest.mark.parametrize("page,query", [
    ("positions", {"part": "order", "tokens": MARKUP}),
    ("mechanics", {"section": "masks", "batch": MARKUP + "\nthe cat", "mq": MARKUP}),
    ("mechanics", {"section": "cross", "cq": MARKUP, "ck": MARKUP}),
])
def test_typed_markup_is_escaped_in_figures(page, query):
    at = run_page(page, {"lang": "en", **query})
    assert_clean(at)
    texts = figure_texts(at)
    assert any("&lt;b&gt;word&lt;/b&gt;" in x for x in texts), texts[:20]
    assert not any("<b>" in x or "<i>" in x for x in texts)


def test_typed_markup_is_escaped_on_the_attention_heatmap():
    at = run_page("attention", {"lang": "en", "text": "a <b>bold</b> & plain cat"})
    assert_clean(at)
    texts = figure_texts(at)
    assert "&lt;" in " ".join(texts) and not any("<b" in x for x in texts)


def test_typed_markdown_in_an_error_stays_text():
    at = run_page("positions", {"lang": "en", "part": "example", "vec": "1.0, __class__"})
    assert_clean(at)
    errors = [e.value for e in at.error]
    assert any("\\_\\_class\\_\\_" in e for e in errors), errors  # shown as "__class__", not a bold "class"


# ---------------------------------------------------------------- budgets
def test_compare_refuses_what_the_train_tab_refuses():
    at = run_page("train", {"lang": "en", "preset": "custom", "d_model": "1024", "layers": "8", "d_ff": "4096",
                            "batch": "4096", "tab": "compare", "cmp": "heads"})
    assert_clean(at)
    assert any("MiB" in e.value for e in at.error)
    assert at.button(key="train.cmp_go").disabled
