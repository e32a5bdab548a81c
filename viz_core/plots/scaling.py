"""Figures of the Scaling page: data in, go.Figure out. Every label arrives already translated."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..lessons.scaling import normal_pdf
from .common import LINE_COLOURS, fit_margins_legend_below, matrix_heatmap

UNSCALED_COLOUR, SCALED_COLOUR = LINE_COLOURS[3], LINE_COLOURS[0]  # red: q.k as is; blue: q.k / sqrt(d_k)
REFERENCE_COLOUR = "#7f7f7f"
JACOBIAN_BOUND = 0.25  # |J_ij| <= 1/4 for every softmax: p(1 - p) <= 1/4 and p_i p_j <= 1/4


def _layout(fig: go.Figure, title: str, height: int = 360, x_title_px: int | None = None) -> go.Figure:
    """Title at the top; the legend under the x axis title (common.fit_margins_legend_below). height: the figure's
    height without the legend's room.

    x_title_px: the room under the plot for the x axis's tick labels and title where fit_margins cannot judge it
    (several panels); None lets fit_margins measure it."""
    fig.update_layout(title=dict(text=title), height=height, margin=dict(l=10, r=10, t=50, b=x_title_px or 10))
    return fit_margins_legend_below(fig)


def density_bars(values: np.ndarray, bins: int, *, name: str, colour: str, x_title: str, y_title: str) -> go.Bar:
    """The histogram as bars binned here (np.histogram, density=True: the bar areas sum to 1): the browser gets
    `bins` heights instead of every sample (10,000 samples are about 107 KB of JSON per chart, binned again in the
    browser)."""
    density, edges = np.histogram(values, bins=max(int(bins), 1), density=True) if values.size else (np.zeros(0),
                                                                                                  np.zeros(1))
    centres, widths = (edges[:-1] + edges[1:]) / 2, np.diff(edges)
    ranges = [f"[{lo:.3g}, {hi:.3g})" for lo, hi in zip(edges[:-1], edges[1:])]
    return go.Bar(x=centres, y=density, width=widths, name=name, marker=dict(color=colour, line=dict(width=0)),
                  opacity=0.75, customdata=ranges,
                  hovertemplate=f"{x_title}: %{{customdata}}<br>{y_title}: %{{y:.4g}}<extra></extra>")


def histogram(values: np.ndarray, *, name: str, colour: str, x_title: str, y_title: str, title: str,
              theory_variance: float | None = None, theory_name: str = "", bins: int = 60,
              x_range: float | None = None) -> go.Figure:
    """Histogram of values as a probability density, with the N(0, theory_variance) density drawn over it.

    x_range: a fixed x axis [-x_range, x_range] (the same for every d_k and for both histograms of a pair, so a
    wider distribution looks wider); None fits the axis to the data."""
    values = np.asarray(values, dtype=float).ravel()
    fig = go.Figure(density_bars(values, bins, name=name, colour=colour, x_title=x_title, y_title=y_title))
    fig.update_layout(bargap=0)
    if theory_variance is not None and values.size:
        half = max(np.abs(values).max(), 4 * np.sqrt(theory_variance), x_range or 0.0)
        x = np.linspace(-half, half, 1201 if x_range else 301)  # fine enough for a narrow curve on a wide axis
        fig.add_trace(go.Scatter(x=x, y=normal_pdf(x, theory_variance), mode="lines", name=theory_name, line=dict(color=REFERENCE_COLOUR,
                                 dash="dash", width=2), hovertemplate=f"{x_title}: %{{x:.3g}}<extra></extra>"))
    fig.update_xaxes(title_text=x_title, range=[-x_range, x_range] if x_range else None)
    fig.update_yaxes(title_text=y_title)
    return _layout(fig, title)


def variance_curve(d_ks: np.ndarray, var_unscaled: np.ndarray, var_scaled: np.ndarray, current_dk: int, *,
                   names: tuple[str, str, str, str], x_title: str, y_title: str, title: str) -> go.Figure:
    """Measured Var(q.k) and Var(q.k / sqrt(d_k)) over d_k (log-log), with the theory lines d_k and 1.

    names: (measured unscaled, theory d_k, measured scaled, theory 1).
    """
    d = np.asarray(d_ks, dtype=float)
    fig = go.Figure()
    for y, name, colour in ((var_unscaled, names[0], UNSCALED_COLOUR), (var_scaled, names[2], SCALED_COLOUR)):
        fig.add_trace(go.Scatter(x=d, y=y, mode="markers", name=name, marker=dict(color=colour, size=9),
                                 hovertemplate="d_k = %{x}<br>Var = %{y:.4g}<extra></extra>"))
    for y, name, colour in ((d, names[1], UNSCALED_COLOUR), (np.ones_like(d), names[3], SCALED_COLOUR)):
        fig.add_trace(go.Scatter(x=d, y=y, mode="lines", name=name, line=dict(color=colour, dash="dash"),
                                 hoverinfo="skip"))
    fig.add_vline(x=current_dk, line=dict(color=REFERENCE_COLOUR, dash="dot"))
    fig.update_xaxes(title_text=x_title, type="log", dtick=np.log10(2) * 2, tickformat="d")
    fig.update_yaxes(title_text=y_title, type="log", dtick=1)
    return _layout(fig, title, height=400)


def saturation_curve(d_ks: np.ndarray, unscaled: np.ndarray, scaled: np.ndarray, current_dk: int, *,
                     names: tuple[str, str], x_title: str, y_title: str, title: str,
                     reference: float | None = None, reference_name: str = "",
                     threshold: float | None = None, threshold_name: str = "") -> go.Figure:
    """One softmax statistic (mean over rows) against d_k on a log axis, unscaled vs scaled.

    reference: the value for a uniform row (dashed); threshold: the saturation level (dotted), if any.
    """
    d = np.asarray(d_ks, dtype=float)
    fig = go.Figure()
    for y, name, colour in ((unscaled, names[0], UNSCALED_COLOUR), (scaled, names[1], SCALED_COLOUR)):
        fig.add_trace(go.Scatter(x=d, y=y, mode="lines+markers", name=name, line=dict(color=colour),
                                 hovertemplate=f"d_k = %{{x}}<br>{y_title} = %{{y:.4f}}<extra></extra>"))
    for level, name, dash in ((reference, reference_name, "dash"), (threshold, threshold_name, "dot")):
        if level is not None:
            fig.add_trace(go.Scatter(x=[d[0], d[-1]], y=[level, level], mode="lines", name=name,
                                     line=dict(color=REFERENCE_COLOUR, dash=dash), hoverinfo="skip"))
    fig.add_vline(x=current_dk, line=dict(color=REFERENCE_COLOUR, dash="dot", width=1))
    fig.update_xaxes(title_text=x_title, type="log", dtick=np.log10(2) * 2, tickformat="d")
    fig.update_yaxes(title_text=y_title, rangemode="tozero")
    return _layout(fig, title, height=380)


def probability_bars(p_unscaled: np.ndarray, p_scaled: np.ndarray, *, names: tuple[str, str],
                     x_title: str, y_title: str, title: str) -> go.Figure:
    """The softmax of one row of logits, unscaled and scaled, as grouped bars over the key index (y fixed 0..1)."""
    j = np.arange(len(p_unscaled))
    fig = go.Figure()
    for p, name, colour in ((p_unscaled, names[0], UNSCALED_COLOUR), (p_scaled, names[1], SCALED_COLOUR)):
        fig.add_trace(go.Bar(x=j, y=p, name=name, marker_color=colour,
                             hovertemplate=f"{x_title} %{{x}}<br>{y_title} = %{{y:.4f}}<extra></extra>"))
    fig.update_layout(barmode="group", bargap=0.15)
    fig.update_xaxes(title_text=x_title)
    fig.update_yaxes(title_text=y_title, range=[0, 1.02])
    return _layout(fig, title, height=320)


def weights_map(weights: np.ndarray, tokens: Sequence[str], *, title: str, x_title: str, y_title: str,
                value_name: str) -> go.Figure:
    """A head's (N, N) attention weights, queries top to bottom, keys left to right, on the 0..1 scale; hover: the
    query, the key and the weight to 4 decimals. Up to the model's 512 tokens (2,000 typed characters) in one
    message of at most 1.5 MB (common.matrix_heatmap names a long text's tokens once per row and column)."""
    return matrix_heatmap(weights, tokens, tokens, title=title, x_title=x_title, y_title=y_title,
                          value_name=value_name)


def loss_curves(unscaled: Sequence[float], scaled: Sequence[float], unscaled_w: Sequence[float],
                scaled_w: Sequence[float], *, panel_titles: tuple[str, str], x_title: str, loss_title: str,
                weight_title: str, chance: float, chance_name: str, title: str) -> go.Figure:
    """Training loss (top) and mean largest attention weight (bottom) per step, unscaled left, scaled right.

    Both columns share their y axes so the curves compare directly; chance = log(n_values), the loss of a guess.
    """
    fig = make_subplots(rows=2, cols=2, shared_yaxes="rows", shared_xaxes=True, subplot_titles=panel_titles,
                        vertical_spacing=0.08, horizontal_spacing=0.04, row_heights=[0.65, 0.35])
    for col, (loss, w, colour) in enumerate(((unscaled, unscaled_w, UNSCALED_COLOUR),
                                              (scaled, scaled_w, SCALED_COLOUR)), start=1):
        steps = np.arange(1, len(loss) + 1)
        fig.add_trace(go.Scatter(x=steps, y=loss, mode="lines", line=dict(color=colour), showlegend=False,
                                 name=panel_titles[col - 1],
                                 hovertemplate=f"{x_title} %{{x}}<br>{loss_title} = %{{y:.4f}}<extra></extra>"),
                      row=1, col=col)
        fig.add_trace(go.Scatter(x=steps, y=w, mode="lines", line=dict(color=colour, dash="dot"), showlegend=False,
                                 name=panel_titles[col - 1],
                                 hovertemplate=f"{x_title} %{{x}}<br>{weight_title} = %{{y:.3f}}<extra></extra>"),
                      row=2, col=col)
        fig.add_trace(go.Scatter(x=[1, max(len(loss), 1)], y=[chance, chance], mode="lines", name=chance_name,
                                 line=dict(color=REFERENCE_COLOUR, dash="dash"), showlegend=col == 1,
                                 hoverinfo="skip"), row=1, col=col)
        fig.update_xaxes(title_text=x_title, row=2, col=col)
    fig.update_annotations(font_size=13)                                  # the two panel titles
    fig.update_yaxes(title_text=loss_title, rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text=weight_title, range=[0, 1.05], row=2, col=1)
    return _layout(fig, title, height=560, x_title_px=60)
