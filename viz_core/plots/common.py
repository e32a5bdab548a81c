"""Shared look of every figure: colour scales, matrix heatmaps the right way up, export settings."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

PROB_SCALE = "Blues"      # one sequential scale for probabilities (0..1), the same on every page
SIGNED_SCALE = "RdBu_r"   # one diverging scale for signed values (logits, encodings), centred on 0
MASK_COLOUR = "rgba(128,128,128,0.55)"  # masked cells: grey with a diagonal stroke, readable in both themes
HATCH_FILL = "rgba(128,128,128,0.35)"
LINE_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd")

# Options for st.plotly_chart(config=...): the PNG export button stays, plotly's logo goes.
PLOTLY_CONFIG = {"displaylogo": False, "toImageButtonOptions": {"format": "png", "scale": 2}}


def tick_labels(labels: Sequence[str], max_ticks: int = 64) -> tuple[list[int], list[str]]:
    """Numeric tick positions with text labels (positions, so duplicate tokens are not merged into one column).

    Beyond max_ticks labels, only every k-th one is shown.
    """
    n = len(labels)
    step = max(1, int(np.ceil(n / max_ticks)))
    idx = list(range(0, n, step))
    return idx, [str(labels[i]) for i in idx]


def matrix_heatmap(z: np.ndarray, row_labels: Sequence[str] | None = None, col_labels: Sequence[str] | None = None,
                   *, title: str = "", x_title: str = "key", y_title: str = "query", value_name: str = "weight",
                   signed: bool = False, zmin: float | None = None, zmax: float | None = None,
                   mask: np.ndarray | None = None, height: int | None = None, colorscale: str | None = None,
                   value_format: str = ".4f") -> go.Figure:
    """A matrix drawn as it is written: row 0 at the top, column 0 at the left.

    Hover shows row label, column label and the exact value. signed=True uses the diverging scale centred on 0;
    otherwise the probability scale, fixed to 0..1 unless zmin/zmax are given. mask (bool, True = masked) cells
    are drawn grey and hatched on top.
    """
    z = np.asarray(z, dtype=float)
    n_rows, n_cols = z.shape
    rows = list(row_labels) if row_labels is not None else [str(i) for i in range(n_rows)]
    cols = list(col_labels) if col_labels is not None else [str(j) for j in range(n_cols)]
    hover_rows = np.repeat(np.asarray(rows, dtype=object)[:, None], n_cols, axis=1)
    hover_cols = np.repeat(np.asarray(cols, dtype=object)[None, :], n_rows, axis=0)
    if signed:
        finite = np.abs(z[np.isfinite(z)])
        bound = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
        zmin = -bound if zmin is None else zmin
        zmax = bound if zmax is None else zmax
        scale = SIGNED_SCALE
    else:
        zmin = 0.0 if zmin is None else zmin
        zmax = 1.0 if zmax is None else zmax
        scale = PROB_SCALE
    fig = go.Figure(go.Heatmap(
        z=z, x=np.arange(n_cols), y=np.arange(n_rows), zmin=zmin, zmax=zmax,
        colorscale=colorscale or scale,
        customdata=np.stack([hover_rows, hover_cols], axis=-1),
        hovertemplate=(f"{y_title}: %{{customdata[0]}} (%{{y}})<br>{x_title}: %{{customdata[1]}} (%{{x}})"
                       f"<br>{value_name}: %{{z:{value_format}}}<extra></extra>"),
        colorbar=dict(title=dict(text=value_name, side="right"), thickness=12),
    ))
    if mask is not None and np.any(mask):
        add_mask_overlay(fig, np.asarray(mask, dtype=bool))
    _matrix_axes(fig, rows, cols, x_title, y_title)
    fig.update_layout(title=dict(text=title), height=height or _auto_height(n_rows), margin=dict(l=10, r=10, t=50, b=10))
    return fig


def add_mask_overlay(fig: go.Figure, mask: np.ndarray) -> None:
    """Masked cells: grey and cell-sized (a second heatmap) with a diagonal stroke (one line trace), so they scale
    with the figure; two traces whatever the number of cells. Hover still reports the value underneath."""
    n_rows, n_cols = mask.shape
    fig.add_trace(go.Heatmap(z=np.where(mask, 1.0, np.nan), x=np.arange(n_cols), y=np.arange(n_rows),
                             colorscale=[[0, HATCH_FILL], [1, HATCH_FILL]], showscale=False, hoverinfo="skip"))
    xs: list = []
    ys: list = []
    for i, j in zip(*np.nonzero(mask)):
        xs += [j - 0.5, j + 0.5, None]
        ys += [i + 0.5, i - 0.5, None]
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line=dict(width=1, color=MASK_COLOUR), hoverinfo="skip",
                             showlegend=False))


def _matrix_axes(fig: go.Figure, rows: Sequence[str], cols: Sequence[str], x_title: str, y_title: str) -> None:
    xt, xl = tick_labels(cols)
    yt, yl = tick_labels(rows)
    fig.update_xaxes(title_text=x_title, tickmode="array", tickvals=xt, ticktext=xl, side="bottom",
                     tickangle=-60 if len(cols) > 6 else 0, showgrid=False, constrain="domain")
    fig.update_yaxes(title_text=y_title, tickmode="array", tickvals=yt, ticktext=yl, autorange="reversed",
                     showgrid=False)


def _auto_height(n_rows: int) -> int:
    return int(min(900, max(320, 160 + 22 * n_rows)))
