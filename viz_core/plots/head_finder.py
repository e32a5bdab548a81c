"""Figures of the head finder: where one head stands among all heads, the histogram of its largest weights, and
what a chosen token attends to and is attended by. Arrays and labels in, go.Figure out; typed tokens escaped, titles
under the toolbar (common.title_under_toolbar)."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from .common import LINE_COLOURS, fit_margins, plain, tick_labels, title_under_toolbar


def standing_bars(percentiles: Sequence[float], labels: Sequence[str], values: Sequence[str], ranks: Sequence[str], *,
                  title: str, x_title: str) -> go.Figure:
    """One bar per score: the share of the model's heads (%) that score at most this head's value. Hover: the
    score's value and the head's rank. labels / values / ranks: our own strings (the scores' names, formatted)."""
    y = [plain(s) for s in labels]
    fig = go.Figure(go.Bar(
        x=list(percentiles), y=y, orientation="h", marker_color=LINE_COLOURS[0],
        customdata=np.stack([np.asarray(values, dtype=object), np.asarray(ranks, dtype=object)], axis=-1),
        hovertemplate="%{y}: %{customdata[0]}<br>%{customdata[1]}<br>" + plain(x_title) + ": %{x:.0f}<extra></extra>"))
    fig.update_layout(height=120 + 30 * len(y), bargap=0.25,
                      xaxis=dict(title=dict(text=plain(x_title)), range=[0, 100]), yaxis=dict(autorange="reversed"), margin=dict(l=10, r=10, b=40))
    return fit_margins(title_under_toolbar(fig, title))


def max_weight_histogram(counts: np.ndarray, *, title: str, x_title: str, y_title: str) -> go.Figure:
    """counts (BINS,): queries whose largest weight falls in [b / BINS, (b + 1) / BINS)."""
    bins = len(counts)
    names = [f"{b / bins:.1f}–{(b + 1) / bins:.1f}" for b in range(bins)]
    fig = go.Figure(go.Bar(x=names, y=np.asarray(counts), marker_color=LINE_COLOURS[2],
                           hovertemplate=plain(x_title) + " %{x}<br>" + plain(y_title) + ": %{y}<extra></extra>"))
    fig.update_layout(height=320, bargap=0.1, xaxis=dict(title=dict(text=plain(x_title)), tickangle=-45),
                      yaxis=dict(title=dict(text=plain(y_title))), margin=dict(l=10, r=10, b=40))
    return fit_margins(title_under_toolbar(fig, title))


def token_bars(tokens: Sequence[str], weights: np.ndarray, chosen: int, *, title: str, x_title: str,
               value_name: str) -> go.Figure:
    """A weight per token (N,), the chosen token's bar marked; ticks are the tokens (escaped, thinned when many)."""
    n = len(tokens)
    colours = [LINE_COLOURS[3] if i == chosen else LINE_COLOURS[0] for i in range(n)]
    labels = [plain(t) for t in tokens]
    ticks, texts = tick_labels([f"{i}·{t}" for i, t in enumerate(tokens)])  # (tick_labels escapes them)
    fig = go.Figure(go.Bar(x=np.arange(n), y=np.asarray(weights, dtype=float), marker_color=colours,
                           customdata=np.asarray(labels, dtype=object),
                           hovertemplate="%{x} · %{customdata}<br>" + plain(value_name) + ": %{y:.4f}<extra></extra>"))
    fig.update_layout(height=340, bargap=0.15,
                      xaxis=dict(title=dict(text=plain(x_title)), tickmode="array", tickvals=ticks, ticktext=texts,
                                 tickangle=-60 if n > 6 else 0),
                      yaxis=dict(title=dict(text=plain(value_name)), rangemode="tozero"),
                      margin=dict(l=10, r=10, b=40))
    return fit_margins(title_under_toolbar(fig, title))
