"""Figures of the Mechanics page: labelled stage matrices, padded batches, head-to-group wiring, KV-cache bars,
cost curves. Data in, go.Figure out; every label arrives already translated."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .common import LINE_COLOURS, add_mask_overlay, annotate_cells, matrix_heatmap, plain, reserve_margins

ANNOTATE_MAX_CELLS = 120      # write the value in each cell of matrices this small ...
ANNOTATE_MAX_COLS = 10        # ... and this narrow
HATCH_MAX_CELLS = 2500        # masked cells drawn as cell-sized hatched squares up to this many (else markers)
DONT_CARE_COLOUR = "rgba(255,170,0,0.18)"
TOKEN_CELL = "#c6dbef"        # padded batch: a real token (light blue) ...
PAD_CELL = "#8c8c8c"          # ... and a pad (mid grey)


def _cell_text(z: np.ndarray, fmt: str) -> np.ndarray:
    """Cell strings, with -inf / +inf / NaN written out (plotly would show them blank)."""
    def one(x: float) -> str:
        if np.isnan(x):
            return "NaN"
        if np.isinf(x):
            return "−∞" if x < 0 else "+∞"
        return format(x, fmt)
    return np.vectorize(one, otypes=[object])(z)


def stage_matrix(z: np.ndarray, title: str, *, rows: Sequence[str] | None = None, cols: Sequence[str] | None = None,
                 x_title: str = "key", y_title: str = "query", value_name: str = "value", prob: bool = False,
                 mask: np.ndarray | None = None, dont_care: np.ndarray | None = None, fmt: str = ".3f",
                 zmax: float | None = None, height: int | None = None) -> go.Figure:
    """One stage of the computation, titled with its shape ('title  (R × C)'); values written in small matrices.

    prob=True: probability scale 0..1 (0..zmax if given); else the signed scale. Small matrices have their values
    written in the cells and no colour bar; larger ones have a colour bar and values on hover. -inf cells are drawn
    blank with '−∞' written in them, NaN cells blank with 'NaN'. mask: grey hatched blocked cells.
    dont_care: bool (R,), rows shaded as 'not used'.
    """
    z = np.asarray(z, dtype=float)
    if z.ndim == 1:
        z = z[None, :]
    shown = np.where(np.isfinite(z), z, np.nan)
    mask = None if mask is None else np.asarray(mask, bool)
    hatch = mask is not None and mask.sum() <= HATCH_MAX_CELLS
    fig = matrix_heatmap(shown, rows, cols, title=f"{title}  ({z.shape[0]} × {z.shape[1]})", x_title=x_title,
                         y_title=y_title, value_name=value_name, signed=not prob, mask=None if hatch else mask,
                         zmax=zmax, height=height or _height(z.shape[0]))
    if hatch:
        add_mask_overlay(fig, mask)
    if z.size <= ANNOTATE_MAX_CELLS and z.shape[1] <= ANNOTATE_MAX_COLS:
        if z.shape[1] > 6 and fmt == ".3f":  # wide rows: fewer digits, so neighbouring numbers do not touch
            fmt = ".2f"
        base = fig.data[0]
        annotate_cells(fig, z, _cell_text(z, fmt), colorscale=base.colorscale, zmin=base.zmin, zmax=base.zmax,
                       mask=mask if hatch else None, size=11 if z.shape[1] <= 6 else 10)
        base.showscale = False  # every cell carries its number: a colour bar would repeat it (and cost the browser)
    labels = [str(c) for c in (cols if cols is not None else [])]
    if labels and len(labels) >= 4 and max(map(len, labels)) >= 4:
        fig.update_xaxes(tickangle=-45)
    elif not labels and z.shape[1] > 12:  # plain column numbers: a few evenly spaced ones are enough
        fig.update_xaxes(tickmode="linear", tick0=0, dtick=int(np.ceil(z.shape[1] / 8)), tickangle=0)
    if dont_care is not None:
        _shade_rows(fig, np.asarray(dont_care, bool), z.shape[1])
    return reserve_margins(fig)


def _height(n_rows: int) -> int:
    return int(min(700, max(240, 130 + 34 * n_rows)))


def _shade_rows(fig: go.Figure, rows: np.ndarray, n_cols: int) -> None:
    """Orange band over rows whose result is thrown away (padded queries)."""
    line = dict(color="rgba(255,140,0,0.9)", width=2, dash="dot")
    bands = [dict(type="rect", x0=-0.5, x1=n_cols - 0.5, y0=i - 0.5, y1=i + 0.5, fillcolor=DONT_CARE_COLOUR,
                  line=line, layer="above") for i in np.nonzero(rows)[0]]
    fig.update_layout(shapes=bands)


def padded_batch(tokens: Sequence[Sequence[str]], is_pad: np.ndarray, title: str, x_title: str, y_title: str,
                 pad_name: str) -> go.Figure:
    """The (B, N) grid of a padded batch: pads shaded, each cell showing its token."""
    is_pad = np.asarray(is_pad, bool)
    cells = np.asarray([[plain(tok) for tok in row] for row in tokens], dtype=object)  # typed words, as typed
    scale = [[0, TOKEN_CELL], [1, PAD_CELL]]  # opaque, so the text colour does not depend on the theme
    fig = go.Figure(go.Heatmap(
        z=is_pad.astype(float), x=np.arange(is_pad.shape[1]), y=np.arange(is_pad.shape[0]), zmin=0, zmax=1,
        colorscale=scale, showscale=False, xgap=2, ygap=2, text=cells,
        hovertemplate=f"{y_title} %{{y}}, {x_title} %{{x}}: %{{text}}<br>{pad_name}: %{{z}}<extra></extra>"))
    annotate_cells(fig, is_pad.astype(float), cells, colorscale=scale, zmin=0, zmax=1,
                   size=12)
    fig.update_xaxes(title_text=x_title, tickmode="array", tickvals=list(range(is_pad.shape[1])), showgrid=False)
    fig.update_yaxes(title_text=y_title, tickmode="array", tickvals=list(range(is_pad.shape[0])), showgrid=False,
                     autorange="reversed")
    fig.update_layout(title=dict(text=f"{title}  ({is_pad.shape[0]} × {is_pad.shape[1]})"),
                      height=_height(is_pad.shape[0]), margin=dict(l=10, r=10, t=50, b=10))
    return reserve_margins(fig)


def head_groups(groups: Sequence[int], n_kv: int, title: str, q_label: str, kv_label: str) -> go.Figure:
    """Query heads (top row) wired to the key/value head they share (bottom row); one colour per group."""
    n_heads = len(groups)
    xq = np.arange(n_heads, dtype=float)
    xkv = (np.arange(n_kv) + 0.5) * n_heads / n_kv - 0.5  # centre each KV head under its group
    fig = go.Figure()
    for c, colour in enumerate(LINE_COLOURS):  # one line trace per colour, however many heads
        xs: list = []
        for i, g in enumerate(groups):
            if g % len(LINE_COLOURS) == c:
                xs += [xq[i], xkv[g], None]
        if xs:
            fig.add_trace(go.Scatter(x=xs, y=[1, 0, None] * (len(xs) // 3), mode="lines", hoverinfo="skip",
                                     showlegend=False, line=dict(color=colour, width=1.5)))
    labelled = n_heads <= 16  # beyond that the numbers would overlap on a phone; hover still names each head
    fig.add_trace(go.Scatter(
        x=xq, y=np.ones(n_heads), mode="markers+text" if labelled else "markers", name=q_label,
        text=[str(i) for i in range(n_heads)], textposition="top center",
        marker=dict(size=max(5, min(12, 240 // n_heads)), symbol="circle",
                    color=[LINE_COLOURS[g % len(LINE_COLOURS)] for g in groups]),
        hovertemplate=f"{q_label} %{{text}}<extra></extra>"))
    fig.add_trace(go.Scatter(
        x=xkv, y=np.zeros(n_kv), mode="markers+text" if n_kv <= 16 else "markers", name=kv_label,
        text=[str(g) for g in range(n_kv)],
        textposition="bottom center", hovertemplate=f"{kv_label} %{{text}}<extra></extra>",
        marker=dict(size=max(6, min(18, 300 // n_kv)), symbol="square",
                    color=[LINE_COLOURS[g % len(LINE_COLOURS)] for g in range(n_kv)])))
    fig.update_xaxes(visible=False, range=[-1, n_heads])
    fig.update_yaxes(tickmode="array", tickvals=[0, 1], ticktext=[kv_label, q_label], range=[-0.5, 1.5],
                     showgrid=False, zeroline=False)
    fig.update_layout(title=dict(text=title), height=260, margin=dict(l=10, r=10, t=50, b=10), showlegend=False)
    return fig


def variant_bars(labels: Sequence[str], values: Sequence[float], title: str, x_title: str, y_title: str,
                 highlight: int | None = None, text: Sequence[str] | None = None, log: bool = False) -> go.Figure:
    """One bar per variant (KV-head count); the chosen one is drawn darker."""
    colours = [LINE_COLOURS[0] if i == highlight else "rgba(31,119,180,0.45)" for i in range(len(labels))]
    fig = go.Figure(go.Bar(x=list(labels), y=list(values), marker_color=colours, text=list(text) if text else None,
                           textposition="outside", cliponaxis=False,
                           hovertemplate=f"{x_title}: %{{x}}<br>{y_title}: %{{y:,.4g}}<extra></extra>"))
    fig.update_xaxes(title_text=x_title, type="category")
    fig.update_yaxes(title_text=y_title, type="log" if log else "linear", rangemode="tozero")
    fig.update_layout(title=dict(text=title), height=340, margin=dict(l=10, r=10, t=60, b=10))
    return fig


def cost_curves(ns: Sequence[int], series: dict[str, tuple[Sequence[float], Sequence[float]]], title: str,
                x_title: str, ops_title: str, mem_title: str) -> go.Figure:
    """Two panels over sequence length N: multiply-adds and largest intermediate, one line per method (log y)."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=(ops_title, mem_title), horizontal_spacing=0.12)
    for i, (name, (ops, mem)) in enumerate(series.items()):
        colour = LINE_COLOURS[i % len(LINE_COLOURS)]
        for col, ys in ((1, ops), (2, mem)):
            fig.add_trace(go.Scatter(x=list(ns), y=list(ys), name=name, mode="lines+markers", legendgroup=name,
                                     showlegend=col == 1, line=dict(color=colour),
                                     hovertemplate=f"{name}<br>N=%{{x}}: %{{y:,.0f}}<extra></extra>"), row=1, col=col)
    fig.update_xaxes(title_text=x_title, type="log")
    fig.update_yaxes(type="log")  # the panel titles name the y quantities
    fig.update_layout(title=dict(text=title), height=360, margin=dict(l=10, r=10, t=80, b=10),
                      legend=dict(orientation="h", y=-0.25))
    return fig
