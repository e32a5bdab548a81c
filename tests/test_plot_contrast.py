"""Text on chart cells picks black or white from its own cell's colour (WCAG contrast), in every annotated heatmap;
the attention colour scale and the first head shown."""
import numpy as np
import pytest

from viz_core.pretrained import head_analysis
from viz_core.plots import attention as att_plots
from viz_core.plots import lm as lm_plots
from viz_core.plots import mechanics as mech_plots
from viz_core.plots import positions as pos_plots
from viz_core.plots.common import (NEUTRAL_CELL, PROB_SCALE, SIGNED_SCALE, cell_colours, contrast_ratio,
                                   parse_colour, scale_colour, text_colours)


def test_scale_colour_matches_plotly_ends():
    assert np.allclose(scale_colour(np.array([0.0, 1.0]), PROB_SCALE, 0, 1)[:, :3],
                       [parse_colour("rgb(247,251,255)")[:3], parse_colour("rgb(8,48,107)")[:3]])
    mid = scale_colour(np.array(0.0), SIGNED_SCALE, -1, 1)  # RdBu_r is near-white in the middle
    assert mid[:3].min() > 200


def test_black_or_white_by_contrast():
    cells = scale_colour(np.linspace(-1, 1, 41), SIGNED_SCALE, -1, 1)
    colours = text_colours(cells)
    for cell, text in zip(cells, colours):
        ratio = contrast_ratio(np.array(parse_colour(text)), cell)
        other = contrast_ratio(np.array(parse_colour("#ffffff" if text == "#000000" else "#000000")), cell)
        assert ratio >= other and ratio >= 4.5


def _text_and_cells(fig, heat_index=0):
    text = [d for d in fig.data if d.type == "scatter" and d.mode == "text"][-1]
    base = fig.data[heat_index]
    return text, base


@pytest.mark.parametrize("z, prob", [
    (np.array([[1.511, 1.0, 0.702], [0.18, 0.42, -0.39]]), False),
    (np.array([[0.9, 0.05], [0.5, 0.45]]), True),
    (np.array([[0.3, -np.inf], [np.nan, 2.0]]), False)])
def test_stage_matrix_text_readable(z, prob):
    mask = ~np.isfinite(z)
    fig = mech_plots.stage_matrix(z, "t", prob=prob, mask=mask if mask.any() else None)
    text, base = _text_and_cells(fig)
    cells = cell_colours(z, base.colorscale, base.zmin, base.zmax, mask if mask.any() else None)
    for x, y, colour in zip(text.x, text.y, text.textfont.color):
        assert contrast_ratio(np.array(parse_colour(colour)), cells[y, x]) >= 4.5
    if mask.any():  # the cells without a value get an opaque fill (the page behind differs by theme)
        assert any(d.type == "heatmap" and d.colorscale[0][1] == NEUTRAL_CELL for d in fig.data)
    assert all(t != "" for t in text.text)


def test_every_annotated_heatmap_uses_the_helper():
    """No heatmap writes its own text (plotly's texttemplate colours ignore the theme); a text trace does."""
    figs = [mech_plots.stage_matrix(np.eye(3), "t"),
            mech_plots.padded_batch([["a", "[PAD]"]], np.array([[False, True]]), "t", "x", "y", "pad"),
            pos_plots.weights_heatmap(np.eye(3), list("abc"), title="t", x_title="x", y_title="y", value_name="v"),
            pos_plots.worked_heatmap(np.ones((2, 4)), ["a", "b"], title="t", x_title="x", y_title="y",
                                     value_name="v"),
            pos_plots.rotation_heatmap(np.eye(4), title="t", axis_title="d", value_name="v"),
            lm_plots.score_map(np.eye(2), title="t", x_title="x", y_title="y", value_name="v")]
    for fig in figs:
        assert not any(d.type == "heatmap" and d.texttemplate for d in fig.data)
        assert any(d.type == "scatter" and d.mode == "text" for d in fig.data)


def test_padded_batch_cells_are_opaque():
    fig = mech_plots.padded_batch([["a", "[PAD]"]], np.array([[False, True]]), "t", "x", "y", "pad")
    assert all(parse_colour(c)[3] == 1 for _, c in fig.data[0].colorscale)


def test_colour_top_stretches_small_blocks():
    block = np.full((4, 4), 0.004)
    block[0, 1] = 0.006
    assert att_plots.colour_top(block) == pytest.approx(np.quantile(block, 0.99))
    assert att_plots.colour_top(block, auto_scale=False) == 1.0
    assert att_plots.colour_top(np.zeros((2, 2))) == 1.0


def test_clearest_head_is_a_previous_token_head():
    w = np.full((2, 3, 5, 5), 0.2)
    w[1, 2] = np.eye(5, k=-1)
    w[1, 2, 0, 0] = 1
    assert head_analysis.clearest_head(w) == (1, 2)
    assert head_analysis.clearest_head(np.ones((1, 1, 1, 1))) == (0, 0)
