"""Figures of head importance (ablation) and token attribution. Inputs are arrays and strings only."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .attention import TokenTicks
from .common import LINE_COLOURS, cell_hover, clickable_cells, matrix_heatmap, plain

SELECTED = "#e4572e"
ROW_PX = 44  # importance_map: px of height per layer row (its cells' height)


def importance_map(effect: np.ndarray, *, title: str, value_name: str, layer_label: str, head_label: str,
                   selected: tuple[int, int] | None = None, value_format: str = ".4f") -> go.Figure:
    """(layers, heads) signed effects on the diverging scale centred on 0, layer 0 at the top.

    A transparent square marker per cell (trace 1, point index = layer * heads + head) carries the hover and
    makes the cell clickable (it owns the cell: tiles()).
    """
    n_layers, n_heads = effect.shape
    rows, cols = [f"{layer_label} {i}" for i in range(n_layers)], [f"{head_label} {j}" for j in range(n_heads)]
    fig = matrix_heatmap(effect, rows, cols, title=title, x_title=head_label, y_title=layer_label,
                         value_name=value_name, signed=True, value_format=value_format,
                         height=140 + ROW_PX * n_layers)
    fig.update_traces(hoverinfo="skip", hovertemplate=None, selector=dict(type="heatmap"))
    fig.add_trace(clickable_cells(n_layers, n_heads, cell_hover(layer_label, head_label, value_name, value_format),
                                  row_px=ROW_PX, values=effect))
    short_axes(fig, n_layers, n_heads)
    if selected is not None:
        fig.add_shape(type="rect", x0=selected[1] - 0.5, x1=selected[1] + 0.5, y0=selected[0] - 0.5,
                      y1=selected[0] + 0.5, line=dict(color=SELECTED, width=3))
    fig.update_layout(clickmode="event+select", dragmode=False)
    return fig


def short_axes(fig: go.Figure, n_layers: int, n_heads: int) -> None:
    """Numbers only on the ticks (the axis titles say layer / head), so 12 heads fit on a phone; past 10 heads every
    other head is numbered (on a phone, 12 heads' "10" and "11" touched), and the hover names each one."""
    heads = list(range(0, n_heads, 2 if n_heads > 10 else 1))
    fig.update_xaxes(tickvals=heads, ticktext=[str(j) for j in heads], tickangle=0)
    fig.update_yaxes(tickvals=list(range(n_layers)), ticktext=[str(i) for i in range(n_layers)])


def peak_vs_importance(peak: np.ndarray, effect: np.ndarray, *, peak_name: str, effect_name: str, layer_label: str,
                       head_label: str, title: str = "", selected: tuple[int, int] | None = None) -> go.Figure:
    """One point per head: how peaked its attention is (x) against the effect of knocking it out (y).

    One trace, points in layer-major order (point index = layer * heads + head), coloured by layer on a sequential
    scale with a colour bar: a legend entry per layer took nine rows on a phone for Gemma's 18 layers and ran into
    the axis, and ten line colours repeated past layer 9.
    """
    n_layers, n_heads = effect.shape
    ll, hh = np.meshgrid(np.arange(n_layers), np.arange(n_heads), indexing="ij")
    traces = [go.Scatter(
        x=peak.ravel(), y=effect.ravel(), mode="markers", showlegend=False,
        customdata=np.stack([ll.ravel(), hh.ravel()], axis=-1),
        marker=dict(size=10, color=ll.ravel(), colorscale=LAYER_SCALE, cmin=0, cmax=max(n_layers - 1, 1),
                    line=dict(width=0.5, color="rgba(0,0,0,0.4)"),
                    colorbar=dict(title=dict(text=layer_label, side="right"), thickness=12,
                                  tickvals=_layer_ticks(n_layers))),
        hovertemplate=f"{layer_label} %{{customdata[0]}} · {head_label} %{{customdata[1]}}<br>{peak_name}: "
                      f"%{{x:.4f}}<br>{effect_name}: %{{y:.5f}}<extra></extra>")]
    if selected is not None:
        traces.append(go.Scatter(x=[peak[selected]], y=[effect[selected]], mode="markers", showlegend=False,
                                 hoverinfo="skip", marker=dict(size=18, color="rgba(0,0,0,0)",
                                                               line=dict(width=3, color=SELECTED))))
    zero = dict(type="line", x0=0, x1=1, xref="x domain", y0=0, y1=0, yref="y",
                line=dict(color="rgba(128,128,128,0.6)", width=1))  # what add_hline(y=0) adds
    return go.Figure(traces, layout=dict(  # one call: add_trace / add_hline / update_* each walk the figure again
        xaxis=dict(title=dict(text=peak_name)), yaxis=dict(title=dict(text=effect_name), zeroline=False),
        title=dict(text=title), height=420, margin=dict(l=10, r=10, t=50, b=10), showlegend=False,
        clickmode="event+select", dragmode=False, shapes=[zero]))


LAYER_SCALE = "Viridis"  # the layer of a point: first (dark) to last (yellow)


def _layer_ticks(n_layers: int) -> list[int]:
    """Whole layers on the colour bar, at most six of them: every step-th from the first, and the last (which takes
    the place of a step-th one less than half a step before it)."""
    step = max(1, int(np.ceil((n_layers - 1) / 5)))
    ticks = list(range(0, max(n_layers - 1, 1), step))
    if len(ticks) > 1 and n_layers - 1 - ticks[-1] < step / 2:
        ticks.pop()
    return sorted({*ticks, n_layers - 1})


def attribution_bars(tokens: Sequence[str], series: dict[str, np.ndarray], *, token_label: str, share_label: str,
                     signed: Sequence[str] = (), title: str = "", boundaries: Sequence[float] = ()) -> go.Figure:
    """One bar row per method over the same tokens, each normalised to a share: s_i / sum_j |s_j|.

    series: {method name: (N,) scores}; names in signed are drawn red (+) / blue (-) from the diverging scale.
    Hover shows the token, its position, the share and the raw score. boundaries: x positions of dashed lines
    between separately encoded texts (e.g. 7.5 between text A's 8 tokens and text B).
    """
    names = list(series)
    fig = make_subplots(rows=len(names), cols=1, shared_xaxes=True, vertical_spacing=0.06, subplot_titles=names)
    x = np.arange(len(tokens))
    labels = [f"{plain(tok)} ·{i}" for i, tok in enumerate(tokens)]
    for row, name in enumerate(names, start=1):
        raw = np.asarray(series[name], dtype=float)
        share = raw / max(float(np.abs(raw).sum()), 1e-12)
        colour = np.where(share >= 0, "#b2182b", "#2166ac") if name in signed else LINE_COLOURS[row - 1]
        fig.add_trace(go.Bar(x=x, y=share, marker_color=colour, showlegend=False, name=name,
                             customdata=np.stack([np.asarray(labels, dtype=object), raw], axis=-1),
                             hovertemplate=f"{name}<br>%{{customdata[0]}}<br>{share_label}: %{{y:.4f}}"
                                           f"<br>= %{{customdata[1]:.6g}}<extra></extra>"), row=row, col=1)
        fig.update_yaxes(title_text=share_label, row=row, col=1, zeroline=True,
                         zerolinecolor="rgba(128,128,128,0.6)")
    for x_line in boundaries:
        fig.add_vline(x=float(x_line), line=dict(color="rgba(128,128,128,0.8)", width=1, dash="dash"))
    step = max(1, -(-len(tokens) // 64))  # at most 64 labels; thinned ones carry their position ("12·token")
    ticks = list(range(0, len(tokens), step))
    text = [TokenTicks(step, 12, numbered=step > 1).name(i, tokens[i]) for i in ticks]
    fig.update_xaxes(tickmode="array", tickvals=ticks, ticktext=text, tickangle=-60 if len(tokens) > 6 else 0,
                     row=len(names), col=1, title_text=token_label)
    fig.update_layout(title=dict(text=title), height=140 + 170 * len(names), margin=dict(l=10, r=10, t=60, b=10),
                      bargap=0.15)
    return fig

