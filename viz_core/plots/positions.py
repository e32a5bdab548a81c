"""Figures of the Positions page: encodings as heatmaps, waves, similarity, rotations, norms, order experiment.

Data in (numpy arrays, labels already translated), go.Figure out. Matrices go through matrix_heatmap: row 0 on top.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from .common import LINE_COLOURS, annotate_cells, fit_margins_legend_below, matrix_heatmap

MARGIN = dict(l=10, r=10, t=50, b=10)


def _labels(idx: Sequence[int]) -> list[str]:
    return [str(int(i)) for i in idx]


def _sparse_ticks(fig: go.Figure, rows: Sequence[int], cols: Sequence[int], max_ticks: int = 16) -> go.Figure:
    """Index axes need few ticks: at most max_ticks per axis, upright, labelled with the real index.

    The hover's row/column labels become an integer array (R, C, 2) of real indices instead of strings: the same
    hover text, sent as a compact typed array (10x faster to serialise for the large tables of this page).
    """
    r, c = np.broadcast_arrays(np.asarray(rows, dtype=np.int32)[:, None], np.asarray(cols, dtype=np.int32)[None, :])
    fig.update_traces(customdata=np.stack([r, c], axis=-1), selector=dict(type="heatmap"))  # (R, C, 2)
    for axis, idx in (("y", rows), ("x", cols)):
        step = max(1, int(np.ceil(len(idx) / max_ticks)))
        where = list(range(0, len(idx), step))
        fig.update(layout={f"{axis}axis": dict(tickvals=where, ticktext=[str(int(idx[i])) for i in where],
                                               tickangle=0)})
    return fig


def encoding_heatmap(values: np.ndarray, rows: Sequence[int], cols: Sequence[int], *, title: str, x_title: str,
                     y_title: str, value_name: str, height: int | None = None, max_ticks: int = 16) -> go.Figure:
    """An encoding table (positions x dimensions), signed colours; rows/cols are the real indices drawn.

    The colour range is the 99.5th percentile of |value| so that a few outlying cells (a learned table's first
    row) do not wash out the rest; hover still shows the exact value.
    """
    finite = np.abs(values[np.isfinite(values)])
    bound = float(np.percentile(finite, 99.5)) if finite.size and finite.max() > 0 else 1.0
    fig = matrix_heatmap(values, _labels(rows), _labels(cols), title=title, x_title=x_title, y_title=y_title,
                         value_name=value_name, signed=True, zmin=-bound, zmax=bound,
                         height=height or _height(len(rows)))
    return _sparse_ticks(fig, rows, cols, max_ticks)


def similarity_heatmap(sim: np.ndarray, idx: Sequence[int], *, title: str, axis_title: str, value_name: str,
                       height: int | None = None, max_ticks: int = 16) -> go.Figure:
    """Position-by-position similarity (rows p top to bottom, columns q), signed colours centred on 0."""
    fig = matrix_heatmap(sim, _labels(idx), _labels(idx), title=title, x_title=axis_title, y_title=axis_title,
                         value_name=value_name, signed=True, height=height or _height(len(idx), square=True))
    fig.update_yaxes(scaleanchor="x", scaleratio=1, constrain="domain")  # square cells, whatever the width
    return _sparse_ticks(fig, idx, idx, max_ticks)


def _height(n_rows: int, square: bool = False) -> int:
    return int(min(640 if square else 600, max(380, 160 + 6 * n_rows)))


def lines_figure(x: np.ndarray, series: Mapping[str, np.ndarray], *, title: str, x_title: str, y_title: str,
                 log_x: bool = False, log_y: bool = False, markers: bool = True, dash: Mapping[str, str] | None = None,
                 height: int = 380) -> go.Figure:
    """One line per named series over a shared x axis."""
    fig = go.Figure()
    for n, (name, y) in enumerate(series.items()):
        fig.add_trace(go.Scatter(x=x, y=y, name=name, mode="lines+markers" if markers else "lines",
                                 line=dict(color=LINE_COLOURS[n % len(LINE_COLOURS)],
                                           dash=(dash or {}).get(name, "solid"))))
    fig.update_xaxes(title_text=x_title, type="log" if log_x else "linear", tickvals=list(x) if log_x else None)
    fig.update_yaxes(title_text=y_title, type="log" if log_y else "linear", dtick=1 if log_y else None)
    return _finish(fig, title, height)


def _finish(fig: go.Figure, title: str, height: int) -> go.Figure:
    """Title on top, the legend under the axis title (common.fit_margins_legend_below). height: the figure's
    height without the legend's room."""
    fig.update_layout(title=dict(text=title), height=height, margin=MARGIN, hovermode="x unified")
    return fit_margins_legend_below(fig)


def waves_figure(x_dense: np.ndarray, dense: np.ndarray, x_int: np.ndarray, samples: np.ndarray,
                 names: Sequence[str], *, title: str, x_title: str, y_title: str) -> go.Figure:
    """Chosen columns of PE as continuous curves (thin) with the values at whole positions (markers).

    x_dense (P,), dense (P, k); x_int (N,), samples (N, k); names (k,) legend entries.
    """
    fig = go.Figure()
    for j, name in enumerate(names):
        colour = LINE_COLOURS[j % len(LINE_COLOURS)]
        fig.add_trace(go.Scatter(x=x_dense, y=dense[:, j], mode="lines", line=dict(color=colour, width=1),
                                 legendgroup=name, showlegend=False, hoverinfo="skip"))
        fig.add_trace(go.Scatter(x=x_int, y=samples[:, j], mode="markers", name=name, legendgroup=name,
                                 marker=dict(color=colour, size=6)))
    fig.update_xaxes(title_text=x_title)
    fig.update_yaxes(title_text=y_title, range=[-1.15, 1.15])
    return _finish(fig, title, 400)


def wavelength_figure(wavelengths: np.ndarray, highlight: Sequence[int], *, title: str, x_title: str,
                      y_title: str, name: str, highlight_name: str) -> go.Figure:
    """Wavelength (positions, log scale) of every pair i, the pairs of the chosen dimensions highlighted."""
    pairs = np.arange(len(wavelengths))
    fig = go.Figure(go.Scatter(x=pairs, y=wavelengths, mode="lines+markers", name=name,
                               marker=dict(size=4, color=LINE_COLOURS[0]),
                               hovertemplate="i = %{x}<br>λ = %{y:.4g}<extra></extra>"))
    hi = np.asarray(sorted(set(highlight)), dtype=int)
    fig.add_trace(go.Scatter(x=hi, y=wavelengths[hi], mode="markers", name=highlight_name,
                             marker=dict(size=12, color=LINE_COLOURS[1], symbol="diamond"),
                             hovertemplate="i = %{x}<br>λ = %{y:.4g}<extra></extra>"))
    fig.update_xaxes(title_text=x_title)
    fig.update_yaxes(title_text=y_title, type="log", dtick=1)
    return _finish(fig, title, 360)


def rotation_heatmap(m: np.ndarray, *, title: str, axis_title: str, value_name: str) -> go.Figure:
    """The block-diagonal rotation M_k (or its top-left corner), values printed in the cells when small."""
    fig = matrix_heatmap(m, title=title, x_title=axis_title, y_title=axis_title, value_name=value_name,
                         signed=True, zmin=-1.0, zmax=1.0, height=_height(len(m), square=True))
    fig.update_yaxes(scaleanchor="x", scaleratio=1, constrain="domain")
    if len(m) <= 12:  # numbers in the non-zero cells only, so the 2x2 blocks stand out
        text = np.where(m != 0, np.char.mod("%.2f", m), "")
        _annotate(fig, m, text)
    fig.update_xaxes(tickangle=0)
    return fig


def circle_figure(pair_values: np.ndarray, pos: int, k: int, *, title: str, x_title: str, y_title: str,
                  all_name: str, from_name: str, to_name: str) -> go.Figure:
    """One (sin, cos) pair across positions: points on the unit circle; PE(pos) -> PE(pos + k) as an arrow.

    pair_values (N, 2): column 2i (x) and 2i+1 (y) of PE for positions 0..N-1.
    """
    t = np.linspace(0, 2 * np.pi, 200)
    fig = go.Figure(go.Scatter(x=np.sin(t), y=np.cos(t), mode="lines", line=dict(color="gray", width=1),
                               hoverinfo="skip", showlegend=False))
    n = len(pair_values)
    fig.add_trace(go.Scatter(x=pair_values[:, 0], y=pair_values[:, 1], mode="markers", name=all_name,
                             text=[str(p) for p in range(n)], marker=dict(size=5, color=LINE_COLOURS[0], opacity=0.5),
                             hovertemplate="pos %{text}<br>(%{x:.4f}, %{y:.4f})<extra></extra>"))
    for name, p, colour in ((from_name, pos, LINE_COLOURS[2]), (to_name, pos + k, LINE_COLOURS[3])):
        fig.add_trace(go.Scatter(x=[pair_values[p, 0]], y=[pair_values[p, 1]], mode="markers", name=name,
                                 marker=dict(size=13, color=colour),
                                 hovertemplate=f"pos {p}<br>(%{{x:.4f}}, %{{y:.4f}})<extra></extra>"))
    fig.add_annotation(x=pair_values[pos + k, 0], y=pair_values[pos + k, 1], ax=pair_values[pos, 0],
                       ay=pair_values[pos, 1], xref="x", yref="y", axref="x", ayref="y", showarrow=True,
                       arrowhead=3, arrowwidth=2, arrowcolor=LINE_COLOURS[3])
    fig.update_xaxes(title_text=x_title, range=[-1.2, 1.2], zeroline=True)
    fig.update_yaxes(title_text=y_title, range=[-1.2, 1.2], scaleanchor="x", scaleratio=1, zeroline=True)
    fig = _finish(fig, title, 440)
    fig.update_layout(hovermode="closest")
    return fig


def error_figure(errors: np.ndarray, *, title: str, x_title: str, y_title: str, floor: float = 1e-18) -> go.Figure:
    """Largest |M_k PE(pos) - PE(pos + k)| per dimension (log scale; exact zeros drawn at the floor)."""
    fig = go.Figure(go.Bar(x=np.arange(len(errors)), y=np.maximum(errors, floor), marker_color=LINE_COLOURS[0],
                           customdata=errors, hovertemplate="%{x}: %{customdata:.3e}<extra></extra>"))
    fig.update_xaxes(title_text=x_title)
    fig.update_yaxes(title_text=y_title, type="log", exponentformat="e", dtick=1)
    fig = _finish(fig, title, 320)
    fig.update_layout(hovermode="closest")
    return fig


def worked_heatmap(rows: np.ndarray, row_names: Sequence[str], *, title: str, x_title: str, y_title: str,
                   value_name: str) -> go.Figure:
    """The worked example as a small table of colours with the numbers written in the cells: (R, d)."""
    fig = matrix_heatmap(rows, row_names, [str(j) for j in range(rows.shape[1])], title=title, x_title=x_title,
                         y_title=y_title, value_name=value_name, signed=True, height=120 + 48 * len(rows))
    if rows.shape[1] <= 16:
        _annotate(fig, rows, np.char.mod("%.4f", rows))
    return fig


def weights_heatmap(weights: np.ndarray, tokens: Sequence[str], *, title: str, x_title: str, y_title: str,
                    value_name: str) -> go.Figure:
    """Attention weights (query rows x key columns), probability scale 0..1, numbers in the cells."""
    fig = matrix_heatmap(weights, tokens, tokens, title=title, x_title=x_title, y_title=y_title,
                         value_name=value_name, height=160 + 34 * len(tokens))
    _annotate(fig, weights, np.char.mod("%.2f", weights))
    return fig


def _annotate(fig: go.Figure, z: np.ndarray, text: np.ndarray) -> None:
    """Numbers on the cells of a matrix_heatmap, each black or white by contrast with its own cell."""
    base = fig.data[0]
    annotate_cells(fig, z, text, colorscale=base.colorscale, zmin=base.zmin, zmax=base.zmax)


def difference_heatmap(diff: np.ndarray, tokens: Sequence[str], *, title: str, x_title: str, y_title: str,
                       value_name: str, floor: float = 1e-3) -> go.Figure:
    """out_perm - out[perm] (N, d), signed; the colour range is at least +-floor so float noise stays white."""
    bound = max(floor, float(np.max(np.abs(diff))) if diff.size else floor)
    fig = matrix_heatmap(diff, tokens, [str(j) for j in range(diff.shape[1])], title=title, x_title=x_title,
                         y_title=y_title, value_name=value_name, signed=True, zmin=-bound, zmax=bound,
                         height=160 + 34 * len(tokens), value_format=".2e")
    fig.update_xaxes(tickangle=0)
    return fig
