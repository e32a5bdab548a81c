"""viz_core.plots.attention.head_heatmap's token labels: every token named while there is room, else
every step-th one numbered with its position, never a thinned list that reads as a scrambled sentence."""
from __future__ import annotations

import numpy as np
import pytest

from viz_core.plots import attention as plots


def _figure(tokens):
    n = len(tokens)
    return plots.head_heatmap(np.full((n, n), 1 / n), tokens, tokens, "t", query="q", key="k", value="w")


def test_short_input_names_every_token_as_typed():
    tokens = ["[CLS]", "the", "cat", "the", "<b>mat</b>", "[SEP]"]
    fig = _figure(tokens)
    assert list(fig.layout.yaxis.ticktext) == ["[CLS]", "the", "cat", "the", "&lt;b&gt;mat&lt;/b&gt;", "[SEP]"]
    assert list(fig.layout.xaxis.ticktext) == list(fig.layout.yaxis.ticktext) and fig.layout.xaxis.tickmode == "array"
    assert len(set(fig.data[0].x)) == len(tokens)  # repeated tokens stay separate columns
    assert fig.layout.yaxis.tickfont.size == 12


@pytest.mark.parametrize("n", [30, 67, 80])
def test_long_input_names_every_query_with_its_position_in_a_smaller_font(n):
    tokens = [f"w{i % 7}" for i in range(n)]
    fig = _figure(tokens)
    ticks = plots.token_ticks(n, n)
    assert ticks.step == 1 and ticks.numbered and 8 <= ticks.font <= 12
    assert list(fig.layout.yaxis.ticktext) == [f"{i}·w{i % 7}" for i in range(n)]
    assert fig.layout.xaxis.tickmode == "auto" and list(fig.data[0].x) == [f"{i}·w{i % 7}" for i in range(n)]
    assert fig.layout.yaxis.tickfont.size == ticks.font == fig.layout.xaxis.tickfont.size


@pytest.mark.parametrize("n, step", [(100, 2), (194, 3), (512, 7)])
def test_very_long_input_names_every_step_th_query_numbered(n, step):
    tokens = [f"<i>t{i}</i>" for i in range(n)]
    fig = _figure(tokens)
    assert plots.token_ticks(n, n).step == step
    text = list(fig.layout.yaxis.ticktext)
    assert len(text) == len(range(0, n, step)) and text[1] == f"{step}·&lt;i&gt;t{step}&lt;/i&gt;"
    rows_px = (plots.heatmap_height(n) - plots._AXIS_BAND) / n
    assert step * rows_px >= plots.LABEL_FONTS[0] + 1  # each named row has room for its label


def test_font_shrinks_before_labels_are_skipped():
    fonts = [plots.token_ticks(n).font for n in range(30, 85)]
    steps = [plots.token_ticks(n).step for n in range(30, 85)]
    assert fonts == sorted(fonts, reverse=True) and set(steps) == {1}
    assert plots.token_ticks(85).step == 2 and plots.token_ticks(85).font == 12  # then the full font again
