"""Figures of the Anatomy page: norms, norm placement, FFN, dropout, label smoothing, the path to the next token.

Data in (numpy arrays, strings already translated by the page), go.Figure out.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .common import LINE_COLOURS, matrix_heatmap, plain

HIGHLIGHT = "#e4572e"  # outlines and the picked token: one accent colour, visible on light and dark
_MARGIN = dict(l=10, r=10, t=60, b=10)


def _legend_top(fig: go.Figure, above_titles: bool = False) -> go.Figure:
    """Title, then a horizontal legend under it, both in the top margin (container coordinates), so that a legend
    wrapping onto two lines on a narrow screen never covers the title or the subplot titles."""
    h = fig.layout.height or 450
    fig.update_layout(title=dict(yref="container", y=1 - 10 / h, yanchor="top"),
                      legend=dict(orientation="h", yref="container", y=1 - 38 / h, yanchor="top", xanchor="left",
                                  x=0, traceorder="normal"),
                      # left / right / bottom as wide as Chromium's automargin makes them for these line charts'
                      # tick labels and axis titles: the browser draws each once, not twice
                      margin=dict(l=70, r=18, b=68, t=100 + (25 if above_titles else 0)))
    return fig


# ---------------------------------------------------------------- norms
def norm_grid_figure(y: np.ndarray, valid: np.ndarray, row_labels: Sequence[str], col_labels: Sequence[str], *,
                     over_rows: bool, group: int, title: str, x_title: str, y_title: str, value_name: str,
                     note: str) -> go.Figure:
    """Token vectors y (B, N, D) drawn as a (B*N, D) matrix (row = token, column = feature), pads hatched; the set
    of numbers one normalisation group uses is outlined: a row (over_rows=True: LayerNorm, RMSNorm) or a column
    (BatchNorm). note, under the title, says what the outline means."""
    flat, pads = y.reshape(-1, y.shape[-1]), ~valid.reshape(-1)[:, None].repeat(y.shape[-1], 1)
    heading = f"{title}<br><span style='font-size:12px;color:{HIGHLIGHT}'>▭ {note}</span>"
    fig = matrix_heatmap(flat, row_labels, col_labels, title=heading, x_title=x_title, y_title=y_title,
                         value_name=value_name, signed=True, mask=pads, value_format=".3f",
                         height=min(560, 190 + 24 * flat.shape[0]))
    n_rows, n_cols = flat.shape
    if over_rows:
        box = dict(x0=-0.5, x1=n_cols - 0.5, y0=group - 0.5, y1=group + 0.5)
    else:
        box = dict(x0=group - 0.5, x1=group + 0.5, y0=-0.5, y1=n_rows - 0.5)
    fig.add_shape(type="rect", line=dict(color=HIGHLIGHT, width=3), **box)
    fig.update_layout(margin=dict(t=70))  # two-line title; left, right and bottom as matrix_heatmap reserved them
    return fig


def norm_stats_figure(stats: Mapping[str, Mapping[str, np.ndarray]], *, panel_titles: Sequence[str],
                      token_title: str, feature_title: str, value_title: str) -> go.Figure:
    """2 x 2 panels: per-token mean and std (over features), per-feature mean and std (over real tokens), one line
    per norm (stats: name -> norm_statistics output)."""
    keys = ("token_mean", "token_std", "feature_mean", "feature_std")
    fig = make_subplots(2, 2, subplot_titles=list(panel_titles), vertical_spacing=0.18, horizontal_spacing=0.1)
    for i, (name, s) in enumerate(stats.items()):
        for j, k in enumerate(keys):
            fig.add_trace(go.Scatter(y=s[k], mode="lines+markers", name=name, legendgroup=name,
                                     showlegend=j == 0, line=dict(color=LINE_COLOURS[i % len(LINE_COLOURS)]),
                                     hovertemplate=f"{name}<br>%{{x}}: %{{y:.4f}}<extra></extra>"),
                          row=j // 2 + 1, col=j % 2 + 1)
    for c in (1, 2):
        fig.update_xaxes(title_text=token_title, row=1, col=c)
        fig.update_xaxes(title_text=feature_title, row=2, col=c)
        for r in (1, 2):
            fig.update_yaxes(title_text=value_title, row=r, col=c)
    fig.update_layout(height=640)
    return _legend_top(fig, above_titles=True)


def eps_figure(curve: Mapping[str, np.ndarray], *, names: Mapping[str, str], title: str, x_title: str,
               y_title: str) -> go.Figure:
    """Output std of LayerNorm and of the std variant against the input's std (log x)."""
    fig = go.Figure()
    for i, key in enumerate(("layer", "std_variant")):
        fig.add_trace(go.Scatter(x=curve["scale"], y=curve[key], mode="lines", name=names[key],
                                 line=dict(color=LINE_COLOURS[i], dash="solid" if i == 0 else "dash"),
                                 hovertemplate="%{x:.2e} -> %{y:.4f}<extra></extra>"))
    fig.update_xaxes(type="log", title_text=x_title)
    fig.update_yaxes(title_text=y_title, rangemode="tozero")
    fig.update_layout(title=dict(text=title), height=380)
    return _legend_top(fig)


# ---------------------------------------------------------------- norm placement
def placement_figure(res: Mapping[str, np.ndarray], *, names: Mapping[str, str], panel_titles: Sequence[str],
                     layer_title: str, grad_title: str, act_title: str) -> go.Figure:
    """One above the other, over the same layers: gradient norm of each layer's parameters (log y) and RMS of the
    residual stream after each layer, pre-norm vs post-norm (res from blocks.norm_placement_at_init). Stacked, not
    side by side: two panels in a phone's width had their titles and layer axes' names on each other."""
    fig = make_subplots(2, 1, subplot_titles=list(panel_titles), shared_xaxes=True, vertical_spacing=0.16)
    for i, kind in enumerate(("pre", "post")):
        style = dict(color=LINE_COLOURS[i], dash="solid" if i == 0 else "dash")
        for row, key in ((1, "grad"), (2, "act")):
            fig.add_trace(go.Scatter(x=res["layer"], y=res[f"{kind}_{key}"], mode="lines+markers",
                                     name=names[kind], legendgroup=kind, showlegend=row == 1, line=style,
                                     hovertemplate=f"{names[kind]}<br>%{{x}}: %{{y:.4f}}<extra></extra>"),
                          row=row, col=1)
    fig.update_xaxes(title_text=layer_title, row=2, col=1)
    fig.update_yaxes(title_text=grad_title, type="log", row=1, col=1)
    fig.update_yaxes(title_text=act_title, rangemode="tozero", row=2, col=1)
    fig.update_layout(height=620)
    return _legend_top(fig, above_titles=True)


# ---------------------------------------------------------------- FFN
def activation_figure(x: np.ndarray, curves: Mapping[str, np.ndarray], *, title: str, x_title: str,
                      y_title: str) -> go.Figure:
    fig = go.Figure()
    for i, (name, y) in enumerate(curves.items()):
        fig.add_trace(go.Scatter(x=x, y=y, mode="lines", name=name, line=dict(color=LINE_COLOURS[i])))
    fig.update_xaxes(title_text=x_title, zeroline=True)
    fig.update_yaxes(title_text=y_title, zeroline=True)
    fig.update_layout(title=dict(text=title), height=340)
    return _legend_top(fig)


def share_figure(rows: Mapping[str, Mapping[str, int]], part_names: Mapping[str, str], *, title: str,
                 x_title: str) -> go.Figure:
    """One horizontal 100 % bar per row (e.g. encoder block, decoder block) split into parts, labelled with the
    percentage and the exact count."""
    fig = go.Figure()
    for i, (part, label) in enumerate(part_names.items()):
        counts = np.array([rows[r][part] for r in rows], dtype=float)
        totals = np.array([sum(rows[r].values()) for r in rows], dtype=float)
        share = 100 * counts / totals
        fig.add_trace(go.Bar(y=list(rows), x=share, name=label, orientation="h",
                             marker_color=LINE_COLOURS[i], text=[f"{s:.1f}%" for s in share],
                             textposition="inside", customdata=counts,
                             hovertemplate=f"{label}: %{{customdata:,.0f}} (%{{x:.2f}}%)<extra></extra>"))
    fig.update_layout(barmode="stack", title=dict(text=title), height=150 + 60 * len(rows))
    fig.update_xaxes(title_text=x_title, range=[0, 100])
    fig.update_yaxes(autorange="reversed")
    return _legend_top(fig)


# ---------------------------------------------------------------- flows (dropout places, token path)
def flow_figure(boxes: Sequence[str], highlight: Sequence[bool], *, title: str, box_height: int = 46) -> go.Figure:
    """A top-to-bottom chain of labelled boxes joined by arrows; highlighted boxes in the accent colour."""
    n = len(boxes)
    shapes, notes = [], []  # set at once below: add_shape / add_annotation re-validate every earlier one
    for i, (text, hot) in enumerate(zip(boxes, highlight)):
        y = n - 1 - i
        shapes.append(dict(type="rect", x0=0.02, x1=0.98, y0=y - 0.36, y1=y + 0.36,
                           line=dict(color=HIGHLIGHT if hot else "rgba(128,128,128,0.8)", width=2.5 if hot else 1),
                           fillcolor="rgba(228,87,46,0.12)" if hot else "rgba(128,128,128,0.08)"))
        notes.append(dict(x=0.5, y=y, text=plain(text), showarrow=False, font=dict(size=13)))  # may hold a typed token
        if i:
            notes.append(dict(x=0.5, y=y + 0.36, ax=0.5, ay=y + 0.64, xref="x", yref="y", axref="x", ayref="y",
                              showarrow=True, arrowhead=2, arrowwidth=1.5, arrowcolor="rgba(128,128,128,0.9)",
                              text=""))
    fig = go.Figure(layout=dict(shapes=shapes, annotations=notes))
    fig.update_xaxes(visible=False, range=[0, 1], fixedrange=True)
    fig.update_yaxes(visible=False, range=[-0.6, n - 0.4], fixedrange=True)
    fig.update_layout(title=dict(text=title), height=80 + box_height * n, margin=_MARGIN, showlegend=False)
    return fig


# ---------------------------------------------------------------- dropout
def dropout_stats_figure(stats: Mapping[str, np.ndarray], *, names: Mapping[str, str], title: str,
                         x_title: str, y_title: str) -> go.Figure:
    """Histograms over many draws of mean(output) / mean(input) for ours and torch.nn.Dropout (should centre on 1).
    stats from blocks.dropout_statistics (with its "step", the spacing of the possible values)."""
    fig = go.Figure()
    values = np.concatenate([stats["ours_mean"], stats["torch_mean"]])
    step = float(stats["step"])  # the ratio moves in steps of 1 / (size (1 - p)): bins hold whole steps
    size = step * max(1, round((values.max() - values.min()) / step / 40))
    for i, key in enumerate(("ours_mean", "torch_mean")):
        fig.add_trace(go.Histogram(x=stats[key], name=names[key], opacity=0.6, marker_color=LINE_COLOURS[i],
                                   xbins=dict(start=values.min() - step / 2, end=values.max() + step, size=size)))
    fig.add_vline(x=1.0, line=dict(color=HIGHLIGHT, dash="dot"))
    fig.update_layout(barmode="overlay", title=dict(text=title), height=340)
    fig.update_xaxes(title_text=x_title)
    fig.update_yaxes(title_text=y_title)
    return _legend_top(fig)


# ---------------------------------------------------------------- label smoothing
def target_figure(q: np.ndarray, *, title: str, x_title: str, y_title: str, true_class: int = 0) -> go.Figure:
    colours = [HIGHLIGHT if k == true_class else LINE_COLOURS[0] for k in range(len(q))]
    fig = go.Figure(go.Bar(x=np.arange(len(q)), y=q, marker_color=colours,
                           hovertemplate="%{x}: %{y:.4f}<extra></extra>"))
    fig.update_xaxes(title_text=x_title)
    fig.update_yaxes(title_text=y_title, range=[0, 1])
    fig.update_layout(title=dict(text=title), height=320, margin=_MARGIN)
    return fig


def _finite_or_none(y: np.ndarray) -> list:
    return [float(v) if np.isfinite(v) else None for v in y]


def confidence_figure(c: np.ndarray, losses: Mapping[str, np.ndarray], c_star: float, *, star_label: str,
                      title: str, x_title: str, y_title: str) -> go.Figure:
    """Loss against the probability the model gives the true class, one line per smoothing; c_star marked."""
    fig = go.Figure()
    for i, (name, y) in enumerate(losses.items()):
        fig.add_trace(go.Scatter(x=c, y=_finite_or_none(y), mode="lines", name=name,
                                 line=dict(color=LINE_COLOURS[i], dash="solid" if i == 0 else "dash"),
                                 hovertemplate="%{x:.4f} -> %{y:.4f}<extra></extra>"))
    fig.add_vline(x=c_star, line=dict(color=HIGHLIGHT, dash="dot"), annotation_text=star_label,
                  annotation_position="top left")
    fig.update_xaxes(title_text=x_title, range=[0, 1])
    fig.update_yaxes(title_text=y_title, rangemode="tozero")
    fig.update_layout(title=dict(text=title), height=380)
    return _legend_top(fig)


def margin_figure(res: Mapping[str, np.ndarray], *, names: Mapping[str, str], inf_label: str, title: str,
                  x_title: str, y_title: str) -> go.Figure:
    """Naive (log of softmax) and safe (log_softmax) loss against the logit margin; where the naive loss is inf
    or nan a marker row at the top says so."""
    fig = go.Figure()
    for i, key in enumerate(("safe", "naive")):
        fig.add_trace(go.Scatter(x=res["margin"], y=_finite_or_none(res[key]), mode="lines", name=names[key],
                                 line=dict(color=LINE_COLOURS[i], width=3 if i == 0 else 2,
                                           dash="solid" if i == 0 else "dash")))
    bad = ~np.isfinite(res["naive"])
    if bad.any():
        top = float(np.nanmax(np.where(np.isfinite(res["safe"]), res["safe"], np.nan))) * 1.05 + 0.05
        fig.add_trace(go.Scatter(x=res["margin"][bad], y=np.full(bad.sum(), top), mode="markers",
                                 name=inf_label, marker=dict(symbol="x", color=HIGHLIGHT, size=7)))
    fig.update_xaxes(title_text=x_title)
    fig.update_yaxes(title_text=y_title, rangemode="tozero")
    fig.update_layout(title=dict(text=title), height=380)
    return _legend_top(fig)


# ---------------------------------------------------------------- next token and parameters
def distribution_figure(probs: np.ndarray, filtered: np.ndarray, vocab: Sequence[str], picked: int, *,
                        names: Sequence[str], top_n: int, title: str, x_title: str, y_title: str) -> go.Figure:
    """The top_n tokens by model probability: model probability next to the probability after temperature /
    top-k / top-p; the sampled token's label in the accent colour. Tokens as numeric ticks with text labels."""
    order = list(np.argsort(-probs, kind="stable")[:top_n])
    if picked not in order:
        order.append(picked)
    labels = [f"{plain(vocab[i])} ({i})" for i in order]  # the tokens of typed text, shown as typed
    fig = go.Figure()
    for i, (name, p) in enumerate(zip(names, (probs, filtered))):
        fig.add_trace(go.Bar(x=np.arange(len(order)), y=p[order], name=name, marker_color=LINE_COLOURS[i],
                             customdata=labels, hovertemplate="%{customdata}: %{y:.5f}<extra></extra>"))
    pos = order.index(picked)
    fig.add_annotation(x=pos, y=float(max(probs[picked], filtered[picked])), text="▼", showarrow=False,
                       yshift=12, font=dict(color=HIGHLIGHT, size=16))
    fig.update_xaxes(title_text=x_title, tickmode="array", tickvals=np.arange(len(order)), ticktext=labels,
                     tickangle=-50)
    fig.update_yaxes(title_text=y_title, rangemode="tozero")
    fig.update_layout(title=dict(text=title), height=420, barmode="group")
    return _legend_top(fig)


def parameter_figure(parts: Mapping[str, int], *, title: str, x_title: str) -> go.Figure:
    """Horizontal bars: parameters per part (label -> exact count), with the count and share as text."""
    labels, counts = list(parts), np.array(list(parts.values()), dtype=float)
    total = counts.sum() or 1.0
    text = [f"{int(c):,} ({100 * c / total:.1f}%)" for c in counts]
    fig = go.Figure(go.Bar(y=labels, x=counts, orientation="h", text=text, textposition="auto",
                           marker_color=LINE_COLOURS[0], hovertemplate="%{y}: %{x:,.0f}<extra></extra>"))
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(title_text=x_title)
    fig.update_layout(title=dict(text=title), height=140 + 34 * len(labels), margin=_MARGIN)
    return fig
