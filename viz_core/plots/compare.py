"""Figures of the Attention page's "Compare" view: the difference map of one head, and the heads ranked by how far
their attention moved (viz_core.pretrained.compare computes both)."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from ..pretrained.compare import Ranked
from .common import matrix_heatmap, plain, reserve_margins, tiles

RANKED_SHOWN = 12  # bars in the ranking: the heads that moved most
# The two maps side by side share one grid while it has at most this many cells: float32 weights take 5.33 bytes a
# cell in a figure's JSON (base64), so a map takes at most 2.2 MB, and both maps with the difference map (at most as
# many cells) 6.5 MB: under the 8 MiB of messages a browser may leave unread before the server closes its connection
# (app_pages/_ui/serving.py). Two texts that share few tokens make a grid of up to (N_A + N_B)^2 cells (two texts of
# 512 tokens: 1022^2, 5.6 MB a map); each text is then drawn on its own tokens (at most 512^2 cells: 1.4 MB).
SHARED_GRID_CELLS = 400_000


def shared_grid_fits(n_rows: int, n_cols: int) -> bool:
    """Whether the side-by-side maps can share a grid of n_rows x n_cols cells (SHARED_GRID_CELLS)."""
    return n_rows * n_cols <= SHARED_GRID_CELLS


def difference_map(d: np.ndarray, q_labels: Sequence[str], k_labels: Sequence[str], *, title: str, query: str,
                   key: str, value: str) -> go.Figure:
    """D = w' - w (M, P) on the diverging scale centred on 0 (red: more weight in A', blue: less), rows = the
    queries of both texts top to bottom, columns = every key of either text ("+word" only in A', "−word" only in A).
    Hover: query, key, the exact difference."""
    return matrix_heatmap(d, q_labels, k_labels, title=title, x_title=key, y_title=query, value_name=value,
                          signed=True, value_format="+.4f")


def bar_labels(ranked: Ranked, layer_label: str, head_label: str) -> list[str]:
    return [f"{layer_label} {int(layer)} · {head_label} {int(head)}" for layer, head in zip(ranked.layer, ranked.head)]


def ranking_bars(ranked: Ranked, *, title: str, value: str, layer_label: str, head_label: str,
                 selected: tuple[int, int] | None = None, shown: int = RANKED_SHOWN) -> go.Figure:
    """The `shown` heads whose attention moved most, largest at the top, one bar each (clickable: the page opens the
    clicked head: a click or tap anywhere in a bar's row, tiles("y"), however short the bar). The selected head's bar
    is drawn in the accent colour."""
    n = min(shown, len(ranked.distance))
    labels = bar_labels(ranked, layer_label, head_label)[:n]
    dist = np.nan_to_num(ranked.distance[:n].astype(float))
    is_selected = [(int(layer), int(head)) == selected for layer, head in zip(ranked.layer[:n], ranked.head[:n])]
    fig = go.Figure(go.Bar(
        x=dist, y=labels, orientation="h", meta=tiles("y"), customdata=np.stack([ranked.layer[:n], ranked.head[:n]], axis=-1),
        marker_color=["#e4572e" if s else "#1f77b4" for s in is_selected],
        text=[f"{v:.3f}" for v in dist], textposition="outside", cliponaxis=False,
        hovertemplate=f"%{{y}}<br>{plain(value)}: %{{x:.4f}}<extra></extra>"))
    fig.update_yaxes(autorange="reversed", type="category", title_text="")
    fig.update_xaxes(title_text=value, range=[0, max(1e-6, float(dist.max(initial=0.0))) * 1.18], rangemode="tozero")
    fig.update_layout(title=dict(text=title), height=90 + 28 * n, clickmode="event+select", dragmode=False,
                      margin=dict(l=10, r=30, t=50, b=10), showlegend=False)
    return reserve_margins(fig)
