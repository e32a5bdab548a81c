"""Every figure a page sends at its input limits fits one message of at most MESSAGE_BYTES (4 MB), measured as the
house chart element sends it (app_pages/_ui/chart.py to_bytes). The figures are built by the builders the pages call,
on inputs as large as the pages take: 512 tokens (the models' limit: Scaling's 2,000 characters, Attention's text
and its variant), Mechanics' real model at its 200 characters, Positions at 1024 x 1024. bench/bench_messages.py
measures the same through a running server, page by page."""
from __future__ import annotations

import json

import numpy as np
import pytest

from app_pages._ui.chart import to_bytes
from viz_core.lessons import position_demos as demos
from viz_core.plots import attention as attention_plots
from viz_core.plots import compare as compare_plots
from viz_core.plots import mechanics as mechanics_plots
from viz_core.plots import positions as positions_plots
from viz_core.plots import scaling as scaling_plots
from viz_core.plots.common import MESSAGE_BYTES, cell_label_bytes, compact_values, matrix_heatmap, shown_decimals
from viz_core.pretrained.result import DISPLAY_TOKEN_LIMIT

N = DISPLAY_TOKEN_LIMIT  # 512: the most tokens a pretrained model's map has
HANZI = "注意力机制让模型在处理每个词时看向句子中的其他词并按相关程度加权求和得到新的表示"


def sent(fig) -> int:
    """Bytes of the figure as the chart element gets it."""
    return len(to_bytes(fig.to_dict()))


def tokens(lang: str, n: int = N) -> list[str]:
    """n tokens as a tokenizer gives them for a long text: [CLS] ... [SEP], Chinese characters or word pieces."""
    body = [HANZI[i % len(HANZI)] for i in range(n - 2)] if lang == "zh" else \
        [("##" if i % 3 else "") + f"internationalisation{i % 7}" for i in range(n - 2)]
    return ["[CLS]", *body, "[SEP]"]


def weights(n_rows: int, n_cols: int, seed: int = 0) -> np.ndarray:
    """Rows of softmax weights in float64 (every digit random: the most a number can cost)."""
    return np.random.default_rng(seed).dirichlet(np.ones(n_cols), size=n_rows)


# ---------------------------------------------------------------- the pages' largest figures
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_scaling_weight_maps_at_512_tokens(lang):
    """Scaling, part 3: 2,000 typed characters are 512 tokens; each of its two maps fits in half a message."""
    fig = scaling_plots.weights_map(weights(N, N), tokens(lang), title="Scaled weights", x_title="key token",
                                    y_title="query token", value_name="weight")
    assert sent(fig) <= MESSAGE_BYTES / 2


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_attention_head_map_at_512_tokens(lang):
    fig = attention_plots.head_heatmap(weights(N, N).astype(np.float32), tokens(lang), tokens(lang), "Layer 0, head 0",
                                       query="query", key="key", value="weight")
    assert sent(fig) <= MESSAGE_BYTES


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_compare_difference_map_at_512_tokens(lang):
    """Attention, Compare: two texts of 512 tokens that line up everywhere (the largest difference map: 7 MB)."""
    labels = tokens(lang)
    d = weights(N, N, 1) - weights(N, N, 2)
    fig = compare_plots.difference_map(d, labels, labels, title="Difference", query="query", key="key",
                                       value="w′ − w")
    assert sent(fig) <= MESSAGE_BYTES / 2


def test_compare_maps_side_by_side_share_a_grid_only_while_it_fits():
    """The largest shared grid that is drawn fits; two texts that line up nowhere (a grid of 1022^2 cells, 5.6 MB a
    map) are drawn on their own tokens instead (512^2 cells each)."""
    side = int(np.sqrt(compare_plots.SHARED_GRID_CELLS))
    assert compare_plots.shared_grid_fits(side, side)
    assert not compare_plots.shared_grid_fits(2 * N - 2, 2 * N - 2)
    grid = np.full((side, side), np.nan, dtype=np.float32)
    grid[: side // 2, : side // 2] = weights(side // 2, side // 2)
    labels = [f"+{tok}" for tok in tokens("en", side)]
    fig = attention_plots.head_heatmap(grid, labels, labels, "Text A", query="query", key="key", value="weight",
                                       zmax=1.0)
    both_and_difference = 3 * sent(fig)  # (the difference map has at most as many cells)
    assert both_and_difference <= 8 * 2**20  # the unread messages after which the server drops a browser


def test_mechanics_real_model_stages_at_200_characters():
    """Mechanics, step by step on the real model: 200 Chinese characters are 202 tokens; the causal, dropped
    weights are its largest stage."""
    n = 202
    labels = tokens("zh", n)
    mask = np.triu(np.ones((n, n), dtype=bool), 1)
    fig = mechanics_plots.stage_matrix(np.where(mask, 0.0, weights(n, n)), "dropout", rows=labels, cols=labels,
                                       prob=True, mask=mask, zmax=10.0)
    assert sent(fig) <= MESSAGE_BYTES


def test_mechanics_whole_run_at_200_characters_stays_well_under_what_a_client_may_leave_unread():
    """All of Mechanics' step-by-step charts of one run (200 Chinese characters on the real model, causal mask and
    dropout): a slow reader is cut off past UNREAD_LIMIT_BYTES unread, so one run must send far less (it was
    8.95 MB: per-cell labels on every 202 x 202 stage and a stroke per masked cell)."""
    from app_pages._ui.serving import UNREAD_LIMIT_BYTES
    from tests.conftest import charts, run_page
    at = run_page("mechanics", {"lang": "zh", "section": "steps", "src": "real", "causal": "1", "train": "1",
                                "p": "0.9", "rtext": HANZI * 5}, timeout=120)
    assert not at.exception and not at.error
    sizes = [len(c.proto.bytes if c.type != "plotly_chart" else c.proto.spec) for c in charts(at)]
    assert len(sizes) >= 9 and sum(sizes) <= UNREAD_LIMIT_BYTES // 3, sizes


def test_positions_tables_at_1024():
    view = demos.encoding_view(1024, 1024)
    fig = positions_plots.encoding_heatmap(view.values, view.rows, view.cols, title="PE", x_title="dimension",
                                           y_title="position", value_name="value", max_ticks=10)
    assert sent(fig) <= MESSAGE_BYTES
    sim = demos.similarity_view(1024, 1024, cosine=True)
    fig = positions_plots.similarity_heatmap(sim.sim, sim.idx, title="similarity", axis_title="position",
                                             value_name="cosine")
    assert sent(fig) <= MESSAGE_BYTES


# ---------------------------------------------------------------- what a large matrix keeps
def spec(fig) -> dict:
    return json.loads(to_bytes(fig.to_dict()))


def test_large_matrix_names_rows_and_columns_once_and_hovers_as_a_small_one():
    """Past LABEL_BYTES of per-cell labels: no per-cell labels; category axes named "label (i)", so "%{y}" reads as
    the small figure's "%{customdata[0]} (%{y})"; ticks at the same rows and columns, named as typed (escaped)."""
    small = spec(matrix_heatmap(np.eye(3), ["a<b>", "b", "a<b>"], ["x", "y", "z"], y_title="query"))["data"][0]
    assert "customdata" in small and small["hovertemplate"].startswith("query: %{customdata[0]} (%{y})")
    labels = [f"t<i>{i % 5}" for i in range(N)]
    fig = spec(matrix_heatmap(weights(N, N), labels, labels, y_title="query", x_title="key"))
    trace, layout = fig["data"][0], fig["layout"]
    assert "customdata" not in trace and layout["xaxis"]["type"] == layout["yaxis"]["type"] == "category"
    assert trace["y"][7] == "t&lt;i&gt;2 (7)" and len(set(trace["x"])) == N  # repeated tokens: a column each
    assert trace["hovertemplate"].startswith("query: %{y}<br>key: %{x}<br>weight: %{z:.4f}")
    assert layout["yaxis"]["tickvals"][1] == trace["y"][8] and layout["yaxis"]["ticktext"][1] == "t&lt;i&gt;3"


def test_large_matrix_values_show_the_digits_of_the_exact_ones():
    """Rounded to the hover's decimals, then float32: each cell's hover shows what the exact value shows."""
    z = weights(N, N)
    sent_z = compact_values(z, ".4f")
    assert sent_z.dtype == np.float32
    assert np.array_equal(np.char.mod("%.4f", sent_z.astype(float)), np.char.mod("%.4f", np.round(z, 4)))
    signed = compact_values(z - 0.5, "+.4f")
    assert np.array_equal(np.char.mod("%+.4f", signed.astype(float)), np.char.mod("%+.4f", np.round(z - 0.5, 4)))


def test_values_float32_cannot_hold_stay_float64():
    big = np.array([[12_345.678_9, 1.0]])
    assert compact_values(big, ".4f").dtype == np.float64                # float32 would change the 4th decimal
    assert compact_values(big, ".3g") is big                             # not a fixed-point format: as it is
    assert shown_decimals("+.4f") == 4 and shown_decimals(".2f") == 2 and shown_decimals(".3g") is None


def test_label_bytes_counts_every_cell():
    assert cell_label_bytes(["ab", "c"], ["注"]) == 1 * 3 + 2 * 3 + 7 * 2  # rows' bytes x columns, and back
