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
