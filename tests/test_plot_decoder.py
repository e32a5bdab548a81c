"""The decoder figures (viz_core.plots.decoder): the logit lens grid is drawn positions x depth with the lens's own
numbers, typed markup is shown as typed, the settle rings sit where first_top1 says; GQA groups are outlined."""
from __future__ import annotations

import numpy as np
import pytest

from tests.test_plot_markup import assert_escaped
from viz_core.plots import attention, decoder
from viz_core.pretrained.lens import lens_from_readout

import torch

TOKENS = ["<b>word</b>", "a&b", "<a href='x'>link</a>", "plain"]


def _lens(seed: int = 0):
    """A lens over 3 rows of random logits (vocabulary = the four typed tokens)."""
    g = torch.Generator().manual_seed(seed)
    logits = [torch.randn(4, 4, generator=g) * 3 for _ in range(3)]  # 3 rows of (N, V)
    return lens_from_readout(lambda r: logits[r], 3, [0, 1, 2, 3], TOKENS, lambda ids: [TOKENS[i] for i in ids], k=3)


def _figure(lens, metric="top"):
    return decoder.lens_figure(lens.top_tokens, lens.top_probs, lens.next_prob, lens.next_rank, lens.first_top1,
                               lens.tokens, lens.tokens[1:], ["emb", "after 0", "after 1"], metric=metric,
                               title="lens", x_title="depth", y_title="position", value_name="p", top_name="top",
                               next_name="next", rank_name="rank", settled_name="settles")


@pytest.mark.parametrize("metric", decoder.LENS_METRICS)
def test_lens_grid_is_positions_by_depth_with_the_lens_numbers(metric):
    lens = _lens()
    fig = _figure(lens, metric)
    z = np.asarray(fig.data[0].z, dtype=float)  # (N, R)
    assert z.shape == (4, 3)
    if metric == "top":
        np.testing.assert_allclose(z, lens.top_probs[:, :, 0].T, atol=1e-7)
    else:
        np.testing.assert_allclose(z[:-1], lens.next_prob.T, atol=1e-7)
        assert np.isnan(z[-1]).all()  # the last position has nothing after it
    assert fig.layout.yaxis.autorange == "reversed" and list(fig.layout.xaxis.ticktext) == ["emb", "after 0", "after 1"]
    rings = next(tr for tr in fig.data if tr.name == "settles")
    assert list(rings.x) == list(lens.first_top1) and list(rings.y) == [0, 1, 2, 3]
    # the page calls it the red ring: plotly strokes an open symbol in marker.color (not marker.line.color)
    assert rings.marker.symbol == "circle-open" and rings.marker.color == decoder.SETTLE_RING
    r, g, b = (int(decoder.SETTLE_RING[i:i + 2], 16) for i in (1, 3, 5))
    assert r > 200 and g < 120 and b < 120
    assert_escaped(fig)


def test_lens_hover_lists_the_top_guesses_and_the_rank_of_the_next_token():
    lens = _lens(1)
    hover = _figure(lens).data[0].customdata[1, 2, 2]  # position 1, last row
    assert hover.count("<br>") >= lens.k + 1
    assert f"rank {lens.next_rank[2, 1] + 1}" in hover and f"{lens.next_prob[2, 1]:.3f}" in hover


def test_gqa_groups_are_outlined_only_when_heads_share():
    fig = attention.stats_map(np.zeros((2, 6)), title="t", value_name="v", layer_label="l", head_label="h",
                              zmin=0.0, zmax=1.0)
    decoder.group_shapes(fig, [[0, 1, 2], [3, 4, 5]], 2)
    boxes = [s for s in fig.layout.shapes if s.line.dash == "dot"]
    assert [(b.x0, b.x1) for b in boxes] == [(-0.5, 2.5), (2.5, 5.5)]
    mha = attention.stats_map(np.zeros((2, 3)), title="t", value_name="v", layer_label="l", head_label="h")
    decoder.group_shapes(mha, [[0], [1], [2]], 2)
    assert not mha.layout.shapes


def test_a_deep_lens_names_at_most_seven_columns_from_the_embeddings_to_the_last_block():
    """19 columns (Gemma: the embeddings and 18 blocks) on a phone's 165 px map: every name ran into the next."""
    g = torch.Generator().manual_seed(0)
    logits = [torch.randn(4, 4, generator=g) for _ in range(19)]
    lens = lens_from_readout(lambda r: logits[r], 19, [0, 1, 2, 3], TOKENS, lambda ids: [TOKENS[i] for i in ids], k=3)
    names = ["emb", *map(str, range(18))]
    fig = decoder.lens_figure(lens.top_tokens, lens.top_probs, lens.next_prob, lens.next_rank, lens.first_top1,
                              lens.tokens, lens.tokens[1:], [f"after block {b}" for b in range(18)] + ["x"],
                              short_names=names, title="lens", x_title="depth", y_title="position", value_name="p",
                              top_name="top", next_name="next", rank_name="rank", settled_name="settles")
    assert list(fig.layout.xaxis.ticktext) == ["emb", "2", "5", "8", "11", "14", "17"]
    assert list(fig.layout.xaxis.tickvals) == [0, 3, 6, 9, 12, 15, 18]
    assert fig.data[0].z.shape == (4, 19)  # every column is still drawn (and named on hover)


def test_the_peak_against_importance_scatter_colours_layers_on_one_scale_with_a_colour_bar():
    """A legend entry per layer took nine rows on a phone for 18 layers and ran into the axis; ten colours repeated
    past layer 9. One scale, a colour bar with whole layers, and each point's own layer."""
    from viz_core.plots import importance
    effect = np.linspace(-1, 1, 18 * 4).reshape(18, 4)
    fig = importance.peak_vs_importance(np.abs(effect), effect, peak_name="peak", effect_name="effect",
                                        layer_label="layer", head_label="head", selected=(3, 1))
    points = fig.data[0]
    assert list(points.marker.color[:8]) == [0, 0, 0, 0, 1, 1, 1, 1] and points.marker.cmax == 17
    assert points.marker.colorbar.title.text == "layer"
    assert list(points.marker.colorbar.tickvals) == [0, 4, 8, 12, 17]
    assert not fig.layout.showlegend and len(fig.data) == 2  # the points and the selected head's ring
    map12 = importance.importance_map(np.zeros((6, 12)), title="t", value_name="v", layer_label="layer",
                                      head_label="head")
    assert list(map12.layout.xaxis.ticktext) == ["0", "2", "4", "6", "8", "10"]
    map8 = importance.importance_map(np.zeros((6, 8)), title="t", value_name="v", layer_label="layer",
                                     head_label="head")
    assert list(map8.layout.xaxis.ticktext) == [str(h) for h in range(8)]
