"""Typed text is shown as typed in every figure: plotly reads <b>, <i>, <br>, <a href> and <span style>
in tick labels, hover values, cell text and annotations, so every builder that takes user-derived strings writes
them through plots.common.plain (entities, which plotly draws as the characters)."""
from __future__ import annotations

import json

import numpy as np

from viz_core.plots import anatomy, attention, common, importance, lm, mechanics, train

TYPED = ["<b>word</b>", "a&b", "<a href='x'>link</a>", "plain"]


def strings(fig) -> list[str]:
    """Every string of a figure's JSON (ticks, text, customdata, annotations, titles)."""
    out = []

    def walk(value):
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)
    walk(json.loads(fig.to_json()))
    return out


def assert_escaped(fig) -> None:
    texts = strings(fig)
    assert any("&lt;b&gt;word&lt;/b&gt;" in x for x in texts), "the typed token is missing"
    assert not any("<b>" in x or "<a " in x for x in texts), [x for x in texts if "<b>" in x or "<a " in x]
    assert any("a&amp;b" in x for x in texts)


def test_plain_writes_entities_plotly_decodes():
    assert common.plain("<b>x</b> & y") == "&lt;b&gt;x&lt;/b&gt; &amp; y"
    assert common.plain("你好 ·3") == "你好 ·3"
    assert common.label_px(common.plain("<b>")) == common.label_px("<b>")  # margins measure what is drawn


def test_matrix_heatmaps_and_ticks():
    z = np.full((4, 4), 0.25)
    assert_escaped(common.matrix_heatmap(z, TYPED, TYPED))
    assert_escaped(attention.head_heatmap(z, TYPED, TYPED, "t", query="q", key="k", value="w"))
    assert_escaped(train.attention_matrix(z, TYPED, TYPED))


def test_cells_bars_and_annotations():
    assert_escaped(mechanics.padded_batch([TYPED, ["x", "<pad>", "<pad>", "<pad>"]], np.zeros((2, 4), bool),
                                          "batch", "position", "sentence", "pad"))
    probs = np.array([0.4, 0.3, 0.2, 0.1])
    assert_escaped(anatomy.distribution_figure(probs, probs, TYPED, 0, names=["a", "b"], top_n=4, title="",
                                               x_title="", y_title=""))
    assert_escaped(anatomy.flow_figure(TYPED, [False] * 4, title=""))
    assert_escaped(lm.next_token_bars(probs, probs, TYPED, 1, title="", x_title="", y_title="", model_name="m",
                                      sampled_name="s"))
    assert_escaped(train.next_token_bars(probs, TYPED, 0))
    assert_escaped(importance.attribution_bars(TYPED, {"ig": probs}, token_label="token", share_label="share"))


def test_head_finder_figures_show_typed_tokens_and_titles_as_typed():
    from viz_core.plots import head_finder
    w = np.full(len(TYPED), 1 / len(TYPED))
    fig = head_finder.token_bars(TYPED, w, 1, title=f"“{TYPED[0]}” attends to", x_title="key", value_name="weight")
    assert_escaped(fig)
    assert "&lt;b&gt;word&lt;/b&gt;" in fig.layout.title.text
    assert_escaped(head_finder.standing_bars([10, 90], TYPED[:2], ["0.1", "0.9"], ["1 of 2", "2 of 2"], title=TYPED[1],
                                             x_title="share"))


def test_a_title_under_the_toolbar_is_wrapped_escaped_and_below_it():
    fig = common.title_under_toolbar(go_figure(), "Largest weight per query (histogram over the corpus) <b>", gap=10)
    lines = fig.layout.title.text.split("<br>")
    assert len(lines) == 2 and all(common._width(x.replace("&lt;", "<").replace("&gt;", ">")) <= common.TITLE_CHARS
                                   for x in lines), lines
    assert lines[-1].endswith("&lt;b&gt;")
    assert fig.layout.title.yref == "container" and fig.layout.title.yanchor == "top" and fig.layout.title.pad.t == 40
    assert fig.layout.margin.t == 40 + 22 * 2 + 10  # toolbar, two title lines, the gap


def go_figure():
    import plotly.graph_objects as go
    return go.Figure(go.Bar(x=[0, 1], y=[1, 2]))
