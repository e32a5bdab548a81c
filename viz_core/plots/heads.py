"""Figures of a real decoder's head scores (viz_core.pretrained.heads): the per-layer attention sink and the logit
lens's rank of one answer row by row. The layer x head maps are attention.stats_map. Every label passes through
plain() (plotly reads a subset of HTML in labels)."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from .common import LINE_COLOURS, plain


def sink_by_layer(sink: np.ndarray, *, title: str, layer_label: str, value_name: str,
                  selected: int | None = None) -> go.Figure:
    """One bar per layer: the share of attention on the first token (0..1). sink (L,). The selected layer's bar is
    drawn in the accent colour."""
    n = len(sink)
    colours = [LINE_COLOURS[1] if i == selected else LINE_COLOURS[0] for i in range(n)]
    fig = go.Figure(go.Bar(x=np.arange(n), y=np.asarray(sink, dtype=float), marker_color=colours,
                           hovertemplate=f"{plain(layer_label)} %{{x}}<br>{plain(value_name)}: %{{y:.3f}}"
                                         "<extra></extra>"))
    fig.update_layout(title=dict(text=plain(title)), height=300, margin=dict(t=50, l=60, r=20, b=50),
                      xaxis=dict(title=dict(text=plain(layer_label)), tickmode="linear", dtick=1 if n <= 20 else 2),
                      yaxis=dict(title=dict(text=plain(value_name)), range=[0, 1]))
    return fig


def answer_rank(rank: np.ndarray, row_names: Sequence[str], *, title: str, row_label: str, rank_label: str,
                answer: str) -> go.Figure:
    """The rank of one answer token in each row of the logit lens (1 = top-1, log scale: ranks start in the
    thousands). rank (R,) zero-based, row_names (R,)."""
    shown = np.asarray(rank, dtype=float) + 1  # (R,) 1-based
    labels = [plain(r) for r in row_names]
    fig = go.Figure(go.Scatter(x=np.arange(len(shown)), y=shown, mode="lines+markers", line=dict(color=LINE_COLOURS[0]),
                               customdata=np.asarray(labels, dtype=object),
                               hovertemplate=f"%{{customdata}}<br>{plain(rank_label)} ({plain(answer)}): %{{y:d}}"
                                             "<extra></extra>"))
    fig.add_hline(y=5, line=dict(color=LINE_COLOURS[2], dash="dot", width=1))
    step = max(1, int(np.ceil(len(labels) / 20)))
    fig.update_layout(title=dict(text=plain(title)), height=320, margin=dict(t=50, l=60, r=20, b=80),
                      xaxis=dict(title=dict(text=plain(row_label)), tickmode="array",
                                 tickvals=list(range(0, len(labels), step)), ticktext=labels[::step], tickangle=-45),
                      yaxis=dict(title=dict(text=plain(rank_label)), type="log", autorange="reversed"))
    return fig
