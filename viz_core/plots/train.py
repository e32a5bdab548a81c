"""Figures of the Train page: training curves, greedy-decoding probabilities, attention grids per head.

Data in (lists, numpy arrays, token strings, already-translated labels), go.Figure out; builders never see a model.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .common import (HATCH_FILL, LEGEND_ROW_PX, LINE_COLOURS, MASK_COLOUR, PROB_SCALE, PlayLabels, animated,
                     fit_margins, fit_panel_margins, head_trace, legend_px, matrix_heatmap, plain, tick_labels)


def _column(history: Sequence[dict], key: str) -> list:
    return [h.get(key) for h in history]


def training_curves(runs: Sequence[tuple[str, Sequence[dict]]], *, x_key: str = "step", x_title: str = "step",
                    loss_title: str = "loss", acc_title: str = "accuracy", loss_name: str = "loss",
                    train_acc_name: str = "token accuracy (train)", val_name: str = "exact match (held-out)",
                    marker_x: float | None = None, height: int = 360) -> go.Figure:
    """Loss (left) and accuracies (right) of one or more runs, side by side; one colour per run.

    runs: (name, history) with history a list of metric dicts (keys step, seconds, loss, token_acc, val_exact).
    marker_x draws a vertical line on both panels (e.g. the step of the snapshot being shown).
    """
    multi = len(runs) > 1
    acc_panel = acc_title
    if multi:  # one legend entry per run (its colour); the line styles are named under the right panel's title
        acc_panel = f"{acc_title}<br><sup>··· {train_acc_name}</sup><br><sup>━● {val_name}</sup>"
    fig = make_subplots(rows=1, cols=2, subplot_titles=(loss_title, acc_panel), horizontal_spacing=0.12)
    for i, (name, history) in enumerate(runs):
        colour = LINE_COLOURS[i % len(LINE_COLOURS)]
        x = _column(history, x_key)
        prefix = f"{name}: " if multi else ""
        fig.add_trace(go.Scatter(x=x, y=_column(history, "loss"), mode="lines", name=name if multi else loss_name,
                                 line=dict(color=colour), legendgroup=name), row=1, col=1)
        fig.add_trace(go.Scatter(x=x, y=_column(history, "token_acc"), mode="lines", name=f"{prefix}{train_acc_name}",
                                 line=dict(color=colour, dash="dot"), legendgroup=name, showlegend=not multi),
                      row=1, col=2)
        evals = [h for h in history if h.get("evaluated") and h.get("val_exact") is not None]
        fig.add_trace(go.Scatter(x=_column(evals, x_key), y=_column(evals, "val_exact"), mode="lines+markers",
                                 name=f"{prefix}{val_name}", line=dict(color=colour), marker=dict(size=5),
                                 legendgroup=name, showlegend=not multi), row=1, col=2)
    if marker_x is not None:
        for col in (1, 2):
            fig.add_vline(x=marker_x, line=dict(color=MASK_COLOUR, dash="dash"), row=1, col=col)
    fig.update_xaxes(title_text=x_title)
    fig.update_yaxes(title_text=loss_title, rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text=acc_title, range=[0, 1.02], row=1, col=2)
    # the legend sits under the figure (container coordinates), in a bottom margin of its own: never on an axis title;
    # the margins hold the outer labels and the rows the legend takes on a phone, so plotly draws the figure once
    fig.update_layout(margin=dict(l=10, r=10, t=100 if multi else 40, b=10),
                      legend=dict(orientation="h", yref="container", yanchor="bottom", y=0.0, x=0))
    below = int(np.ceil(fit_panel_margins(fig)["b"])) + max(LEGEND_ROW_PX, legend_px(fig))
    fig.update_layout(height=height + (60 if multi else 0) + below, margin_b=below)
    return fig


def schedule_curve(steps: Sequence[int], lr: Sequence[float], *, warmup: int | None = None,
                   x_title: str = "step", y_title: str = "learning rate", height: int = 260) -> go.Figure:
    """The learning rate over steps, with a dashed line at the end of the warmup."""
    fig = go.Figure(go.Scatter(x=list(steps), y=list(lr), mode="lines", line=dict(color=LINE_COLOURS[0]),
                               hovertemplate=f"{x_title}: %{{x}}<br>{y_title}: %{{y:.3e}}<extra></extra>"))
    if warmup is not None:
        fig.add_vline(x=warmup, line=dict(color=MASK_COLOUR, dash="dash"))
    fig.update_xaxes(title_text=x_title)
    fig.update_yaxes(title_text=y_title, rangemode="tozero", exponentformat="e")
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=20, b=10), showlegend=False)
    return fit_margins(fig)


def decoding_heatmap(probs: np.ndarray, step_labels: Sequence[str], vocab: Sequence[str], *, title: str = "",
                     x_title: str = "next token", y_title: str = "decoding step",
                     value_name: str = "probability") -> go.Figure:
    """p(y_t = v | y_<t, x) as a matrix: one row per decoding step (top to bottom), one column per token."""
    return matrix_heatmap(probs, step_labels, vocab, title=title, x_title=x_title, y_title=y_title,
                          value_name=value_name)


def next_token_bars(probs: np.ndarray, vocab: Sequence[str], chosen: int, *, top_k: int = 8, title: str = "",
                    x_title: str = "probability", y_title: str = "token") -> go.Figure:
    """The top_k next-token probabilities of one step as horizontal bars; the chosen (argmax) token highlighted."""
    probs = np.asarray(probs, dtype=float)
    order = np.argsort(-probs)[:top_k]
    colours = [LINE_COLOURS[1] if i == chosen else LINE_COLOURS[0] for i in order]
    fig = go.Figure(go.Bar(x=probs[order], y=[plain(vocab[i]) for i in order], orientation="h",
                           marker_color=colours, text=[f"{probs[i]:.3f}" for i in order], textposition="auto",
                           hovertemplate=f"{y_title}: %{{y}}<br>{x_title}: %{{x:.4f}}<extra></extra>"))
    fig.update_yaxes(title_text=y_title, autorange="reversed", type="category")
    fig.update_xaxes(title_text=x_title, range=[0, 1])
    fig.update_layout(title=dict(text=title), height=max(220, 60 + 28 * len(order)),
                      margin=dict(l=10, r=10, t=50, b=10))
    return fig


def attention_heads(maps: np.ndarray, row_labels: Sequence[str], col_labels: Sequence[str],
                    head_titles: Sequence[str], *, x_title: str = "key", y_title: str = "query",
                    value_name: str = "weight", mask: np.ndarray | None = None, cols: int = 4) -> go.Figure:
    """Small multiples: one heatmap per head of maps (H, Nq, Nk), drawn as written (query rows top to bottom),
    on the shared probability scale 0..1; masked cells (mask True) hatched grey."""
    maps = np.asarray(maps, dtype=float)
    n_heads = maps.shape[0]
    cols = max(1, min(cols, n_heads))
    rows = int(np.ceil(n_heads / cols))
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=list(head_titles), horizontal_spacing=0.04,
                        vertical_spacing=0.12 if rows > 1 else 0.05)
    for h in range(n_heads):
        r, c = divmod(h, cols)
        fig.add_trace(head_trace(maps[h], row_labels, col_labels, x_title, y_title, value_name, h == 0),
                      row=r + 1, col=c + 1)
        if mask is not None and np.any(mask):
            for trace in _mask_traces(np.asarray(mask, dtype=bool)):
                fig.add_trace(trace, row=r + 1, col=c + 1)
    xt, xl = tick_labels(col_labels)
    yt, yl = tick_labels(row_labels)
    fig.update_xaxes(tickmode="array", tickvals=xt, ticktext=xl, tickangle=0, showgrid=False, tickfont=dict(size=9))
    fig.update_yaxes(tickmode="array", tickvals=yt, ticktext=yl, autorange="reversed", showgrid=False,
                     tickfont=dict(size=9))
    for h in range(n_heads):  # each axis named once, on the bottom left panel: a key title under every panel ran
        r, c = divmod(h, cols)  # into its neighbours' on a phone, and into the head titles of the row under it
        bottom = h + cols >= n_heads
        fig.update_yaxes(showticklabels=c == 0, title_text=y_title if c == 0 else None, row=r + 1, col=c + 1)
        fig.update_xaxes(title_text=x_title if bottom and c == 0 else None, row=r + 1, col=c + 1)
    fig.update_annotations(font_size=12)  # the head titles: short enough for four panels on a phone
    fig.update_layout(height=int(80 + rows * max(220, 20 * len(row_labels) + 80)), margin=dict(l=10, r=10, t=40, b=10))
    return fig


def attention_heads_history(maps: np.ndarray, steps: Sequence[int], active: int, row_labels: Sequence[str],
                            col_labels: Sequence[str], head_titles: Sequence[str], *, title: str = "",
                            x_title: str = "key", y_title: str = "query", value_name: str = "weight",
                            mask: np.ndarray | None = None, play: PlayLabels = PlayLabels()) -> go.Figure:
    """attention_heads of every training snapshot, played in the browser: maps (S, H, Nq, Nk), steps (S,) the
    training step of each snapshot; the figure opens on snapshot `active`; title has a {step} placeholder."""
    fig = attention_heads(maps[active], row_labels, col_labels, head_titles, x_title=x_title, y_title=y_title,
                          value_name=value_name, mask=mask)
    heads = [i for i, tr in enumerate(fig.data) if tr.type == "heatmap" and tr.hoverinfo != "skip"]  # (H,)
    fig.update_layout(title=dict(text=title.format(step=steps[active])), margin=dict(t=70))
    frames = [{"data": [dict(type="heatmap", z=maps[s, h].astype(np.float32)) for h in range(len(heads))],
               "traces": heads, "layout": {"title": {"text": title.format(step=steps[s])}}}
              for s in range(len(steps))]
    return animated(fig, frames, [str(int(x)) for x in steps], active, play)


def _mask_traces(mask: np.ndarray) -> list:
    """The house mask look (grey cell-sized fill + one diagonal stroke per cell) as traces for one subplot."""
    n_rows, n_cols = mask.shape
    fill = go.Heatmap(z=np.where(mask, 1.0, np.nan), x=np.arange(n_cols), y=np.arange(n_rows), showscale=False,
                      colorscale=[[0, HATCH_FILL], [1, HATCH_FILL]], hoverinfo="skip")
    xs: list = []
    ys: list = []
    for i, j in zip(*np.nonzero(mask)):
        xs += [j - 0.5, j + 0.5, None]
        ys += [i + 0.5, i - 0.5, None]
    stroke = go.Scatter(x=xs, y=ys, mode="lines", line=dict(width=1, color=MASK_COLOUR), hoverinfo="skip",
                        showlegend=False)
    return [fill, stroke]


def attention_matrix(weights: np.ndarray, row_labels: Sequence[str], col_labels: Sequence[str], *, title: str = "",
                     x_title: str = "key", y_title: str = "query", value_name: str = "weight",
                     mask: np.ndarray | None = None) -> go.Figure:
    """One head's attention (Nq, Nk) with the house heatmap (probability scale, masked cells hatched)."""
    return matrix_heatmap(weights, row_labels, col_labels, title=title, x_title=x_title, y_title=y_title,
                          value_name=value_name, mask=mask)


def compare_bars(names: Sequence[str], values: Sequence[float], *, title: str = "", x_title: str = "",
                 y_title: str = "") -> go.Figure:
    """One bar per run (e.g. final held-out accuracy or tokens per second)."""
    big = max((abs(v) for v in values), default=0) >= 1000  # e.g. tokens per second: 43,812, not 4.38e+04
    fig = go.Figure(go.Bar(x=list(names), y=list(values), marker_color=list(LINE_COLOURS[: len(names)]),
                           text=[f"{v:,.0f}" if big else f"{v:.3g}" for v in values], textposition="auto",
                           hovertemplate=f"{x_title}: %{{x}}<br>{y_title}: %{{y:{',.0f' if big else '.4g'}}}"
                                         "<extra></extra>"))
    fig.update_xaxes(title_text=x_title, type="category")
    fig.update_yaxes(title_text=y_title, rangemode="tozero", tickformat=",~r" if big else None,
                     title_font=dict(size=12), automargin=True)
    fig.update_layout(title=dict(text=title), height=380, margin=dict(l=10, r=10, t=50, b=10))
    return fig
