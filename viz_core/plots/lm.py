"""Figures of the Language-model page: the induction phase change, head-score maps, attention with the induction
targets marked, next-token distributions, KV-cache growth and generation timings.

Data in (lists, numpy arrays, token strings, already-translated labels), go.Figure out; builders never see a model.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from plotly.subplots import make_subplots

from .common import (LINE_COLOURS, MASK_COLOUR, PROB_SCALE, PlayLabels, add_mask_overlay, animated, annotate_cells,
                     fit_margins, fit_margins_legend_above, fit_margins_legend_below, fit_panel_margins, head_trace,
                     matrix_heatmap, plain, reserve_margins, tick_labels)
from .decoder import short


def _evals(history: Sequence[dict], key: str) -> tuple[list, list]:
    rows = [h for h in history if h.get("evaluated") and h.get(key) is not None]
    return [h["step"] for h in rows], [h[key] for h in rows]


def phase_panels(history: Sequence[dict], *, x_title: str, loss_title: str, first_name: str, repeat_name: str,
                 score_title: str, prev_name: str, ind_name: str, marker_x: float | None = None,
                 phase_x: float | None = None, phase_name: str = "", height: int = 340) -> tuple[go.Figure, go.Figure]:
    """(losses, scores): the loss on the unpredictable tokens vs the repeated tokens, and the best previous-token
    and induction score over heads. A dashed line at marker_x (the snapshot shown), a dotted one at phase_x (the
    phase change). Two figures, so that a narrow screen stacks them."""
    panels = []
    top = max([y for key in ("first_loss", "repeat_loss") for y in _evals(history, key)[1]] or [1.0])
    loss_range = [0, 1.2 * top]  # head room for the phase-change label
    for title, series, y_range in ((loss_title, (("first_loss", first_name, 0), ("repeat_loss", repeat_name, 1)),
                                    loss_range),
                                   (score_title, (("prev_token", prev_name, 2), ("induction", ind_name, 3)), [0, 1.02])):
        fig = go.Figure()
        for key, name, colour in series:
            x, y = _evals(history, key)
            fig.add_trace(go.Scatter(x=x, y=y, mode="lines", name=name, line=dict(color=LINE_COLOURS[colour]),
                                     hovertemplate=f"{x_title}: %{{x}}<br>{name}: %{{y:.3f}}<extra></extra>"))
        _step_lines(fig, marker_x, phase_x, phase_name)
        fig.update_xaxes(title_text=x_title)
        fig.update_yaxes(title_text=title, rangemode="tozero", range=y_range)
        # the legend in a row above the plot (below the axis title it pushed the bottom margin after the first draw)
        fig.update_layout(height=height, margin=dict(l=10, r=10, t=10, b=10))
        panels.append(fit_margins_legend_above(fig))
    return panels[0], panels[1]


def _step_lines(fig: go.Figure, marker_x, phase_x, phase_name: str) -> None:
    if marker_x is not None:
        fig.add_vline(x=marker_x, line=dict(color=MASK_COLOUR, dash="dash"))
    if phase_x is not None:
        fig.add_vline(x=phase_x, line=dict(color=MASK_COLOUR, dash="dot"), annotation_text=phase_name,
                      annotation_position="top right", annotation_font_size=11)


def score_map(z: np.ndarray, *, title: str, x_title: str, y_title: str, value_name: str,
              height: int = 260) -> go.Figure:
    """One layer x head map of a head score, layer 0 on top, fixed 0..1 scale, each cell labelled with its value."""
    z = np.asarray(z, dtype=float)
    fig = go.Figure(go.Heatmap(z=z, x=np.arange(z.shape[1]), y=np.arange(z.shape[0]), zmin=0, zmax=1,
                               colorscale=PROB_SCALE, showscale=False,  # each cell carries its value
                               hovertemplate=(f"{y_title}: %{{y}}<br>{x_title}: %{{x}}<br>{value_name}: "
                                              f"%{{z:.3f}}<extra></extra>")))
    annotate_cells(fig, z, np.char.mod("%.2f", z), colorscale=PROB_SCALE, zmin=0, zmax=1)
    fig.update_xaxes(title_text=x_title, tickmode="linear", dtick=1)
    fig.update_yaxes(title_text=y_title, tickmode="linear", dtick=1, autorange="reversed")
    fig.update_layout(title=dict(text=title), height=height, margin=dict(l=10, r=10, t=50, b=10))
    return reserve_margins(fig)


def attention_marked(weights: np.ndarray, labels: Sequence[str], *, title: str, x_title: str, y_title: str,
                     value_name: str, marks: Sequence[tuple[int, int]] = (), mark_name: str = "") -> go.Figure:
    """One head's causal attention (N, N), query rows top to bottom, the future hatched; `marks` (row, col)
    circled (e.g. where an induction head should look)."""
    n = len(labels)
    mask = np.triu(np.ones((n, n), dtype=bool), 1)
    fig = matrix_heatmap(weights, labels, labels, title=title, x_title=x_title, y_title=y_title,
                         value_name=value_name, mask=mask, height=min(680, 200 + 12 * n))
    xt, xl = tick_labels([f"{j}:{tok}" for j, tok in enumerate(labels)], max_ticks=12)  # apart on a phone
    yt, yl = tick_labels([f"{i}:{tok}" for i, tok in enumerate(labels)], max_ticks=40)
    fig.update_xaxes(tickvals=xt, ticktext=xl, tickangle=-90, tickfont=dict(size=9))
    fig.update_yaxes(tickvals=yt, ticktext=yl, tickfont=dict(size=9))
    if marks:
        rows, cols = zip(*marks)
        fig.add_trace(go.Scatter(x=list(cols), y=list(rows), mode="markers", name=mark_name, hoverinfo="skip",
                                 marker=dict(symbol="circle-open", size=9, color=LINE_COLOURS[1], line=dict(width=2))))
        fig.update_layout(showlegend=True, legend=dict(orientation="h", yanchor="bottom", y=1.0, x=1,
                                                       xanchor="right"))
    return reserve_margins(fig)


def patterns_history(maps: np.ndarray, steps: Sequence[int], active: int, labels: Sequence[str],
                     titles: Sequence[Sequence[str]], marks: Sequence[Sequence[tuple[int, int]]], *, x_title: str,
                     y_title: str, value_name: str, mark_names: Sequence[str],
                     play: PlayLabels = PlayLabels(), slider: bool = True) -> go.Figure:
    """Two heads' causal attention side by side at every training snapshot, played in the browser.
    slider=False where the page has its own slider of the snapshots (see common.animated).

    maps (S, 2, N, N): the two heads (e.g. previous-token and induction) at each snapshot; titles (S, 2): each
    panel's title at each snapshot (its score then), a newline where it breaks; marks: per panel, the (row, col)
    cells circled (where the head should look); the future hatched, query rows top to bottom. Opens on snapshot
    `active`.

    It reads on a phone's 390 px as on a wide screen: the two maps share their axes (each named once, on the left
    map), each title is two short lines, and the legend sits at the top of the figure, above the titles."""
    n = len(labels)
    mask = np.triu(np.ones((n, n), dtype=bool), 1)
    fig = make_subplots(rows=1, cols=2, subplot_titles=[_lines(x) for x in titles[active]], shared_yaxes=True,
                        horizontal_spacing=0.05)
    heads = []
    for p in range(2):
        heads.append(len(fig.data))
        fig.add_trace(head_trace(maps[active, p], labels, labels, x_title, y_title, value_name, p == 1), row=1,
                      col=p + 1)
        add_mask_overlay(fig, mask, row=1, col=p + 1)
        if marks[p]:
            rows, cols = zip(*marks[p])
            fig.add_trace(go.Scatter(x=list(cols), y=list(rows), mode="markers", name=mark_names[p],
                                     hoverinfo="skip", marker=dict(symbol="circle-open", size=8,
                                                                   color=LINE_COLOURS[1 + p], line=dict(width=2))),
                          row=1, col=p + 1)
    # keys: at most 6 labels, each clear of the next on a phone's narrow map (every key is named on hover)
    xt, xl = tick_labels([f"{j}:{tok}" for j, tok in enumerate(labels)], max_ticks=6)
    yt, yl = tick_labels([f"{i}:{tok}" for i, tok in enumerate(labels)], max_ticks=40)
    fig.update_xaxes(tickmode="array", tickvals=xt, ticktext=xl, tickangle=-90, tickfont=dict(size=9), showgrid=False)
    fig.update_yaxes(tickmode="array", tickvals=yt, ticktext=yl, tickfont=dict(size=9), autorange="reversed",
                     showgrid=False)
    # the same keys and queries in both maps: each axis named once (two key titles overlap on a phone's panels)
    fig.update_xaxes(title_text=x_title, row=1, col=1)
    fig.update_yaxes(title_text=y_title, row=1, col=1)
    fig.update_yaxes(ticks="", row=1, col=2)
    # the panel titles: two lines of at most a narrow panel's width (at 390 px, with the margins below, the longest
    # English line at 12 px reached over the next panel's title)
    fig.update_annotations(font_size=11)
    height = min(700, 320 + 12 * n)
    fig.update_layout(height=height, showlegend=True, margin=dict(l=10, r=10, t=130, b=10),  # legend 30 px down:
                      legend=dict(orientation="h", yref="container", yanchor="top", y=1 - 30 / height, x=0,
                                  xanchor="left"))  # clear of the toolbar, which a touch screen always shows
    # margins that hold the labels and the colour bar: the browser draws this heavy figure once, not twice
    below = fit_panel_margins(fig)["b"]
    panel_titles = [a.to_plotly_json() for a in fig.layout.annotations]  # make_subplots's two panel titles
    frames = [{"data": [dict(type="heatmap", z=maps[s, p].astype(np.float32)) for p in range(2)], "traces": heads,
               "layout": {"annotations": [a | {"text": _lines(titles[s][p])} for p, a in enumerate(panel_titles)]}}
              for s in range(len(steps))]
    return animated(fig, frames, [str(int(x)) for x in steps], active, play, slider=slider, below=int(below))


def _lines(text: str) -> str:
    """A title as typed (see plain), its newlines drawn as line breaks."""
    return "<br>".join(plain(line) for line in str(text).split("\n"))


def next_token_bars(probs: np.ndarray, sampled: np.ndarray, labels: Sequence[str], chosen: int, *, top: int = 10,
                    title: str, x_title: str, y_title: str, model_name: str, sampled_name: str) -> go.Figure:
    """The top next-token probabilities: the model's softmax(z / T) and the filtered distribution drawn from;
    the chosen token's label in brackets."""
    probs, sampled = np.asarray(probs, float), np.asarray(sampled, float)
    order = np.argsort(-probs)[:top]
    names = [f"[{plain(labels[i])}]" if i == chosen else plain(labels[i]) for i in order]
    fig = go.Figure()
    for values, name, colour in ((probs, model_name, 0), (sampled, sampled_name, 1)):
        fig.add_trace(go.Bar(x=values[order], y=names, orientation="h", name=name,
                             marker_color=LINE_COLOURS[colour],
                             hovertemplate=f"{y_title}: %{{y}}<br>{name}: %{{x:.4f}}<extra></extra>"))
    fig.update_yaxes(title_text=y_title, autorange="reversed", type="category")
    fig.update_xaxes(title_text=x_title, range=[0, 1])
    fig.update_layout(title=dict(text=title), barmode="group", height=max(260, 80 + 36 * len(order)),
                      margin=dict(l=10, r=10, t=50, b=10),
                      legend=dict(orientation="h", yanchor="top", y=-0.25, x=0))
    return fig


def attention_row(rows: np.ndarray, labels: Sequence[str], *, title: str, x_title: str, y_title: str,
                  value_name: str) -> go.Figure:
    """The new token's attention over the tokens so far: one row per (layer, head), (L * H, T)."""
    rows = np.asarray(rows, float)
    n_layers, n_heads, n = rows.shape
    names = [f"L{layer} H{head}" for layer in range(n_layers) for head in range(n_heads)]
    fig = matrix_heatmap(rows.reshape(-1, n), names, labels, title=title, x_title=x_title, y_title=y_title,
                         value_name=value_name, height=int(160 + 26 * len(names)))
    fig.update_xaxes(tickangle=0)  # one character per column: upright labels read best
    return reserve_margins(fig)


def generation_history(probs: np.ndarray, sampled: np.ndarray, chosen: Sequence[int], rows: Sequence[np.ndarray],
                       vocab: Sequence[str], keys: Sequence[str], active: int, *, titles: Sequence[str],
                       bars_title: str, x_prob: str, y_token: str, model_name: str, sampled_name: str,
                       x_key: str, y_head: str, value_name: str, top: int = 10,
                       play: PlayLabels = PlayLabels(), slider: bool = True) -> go.Figure:
    """Every step of a generation in one figure, played in the browser: above, the top next-token probabilities (the
    model's softmax(z / T) and the filtered distribution drawn from; the chosen token in brackets); below, the new
    token's attention over the tokens so far, one row per (layer, head).

    probs, sampled (K, V); chosen (K,); rows: K arrays (L, H, T_k) with T_k = T_1 + k; keys: the labels of the
    longest T. Later keys are empty (NaN) at earlier steps, so the columns stay where they are while it plays."""
    n_layers, n_heads, _ = rows[-1].shape
    orders = [np.argsort(-np.asarray(probs[k]))[:top] for k in range(len(rows))]  # K x (top,)
    return generation_steps(
        np.stack([np.asarray(probs[k])[o] for k, o in enumerate(orders)]),
        np.stack([np.asarray(sampled[k])[o] for k, o in enumerate(orders)]),
        [[vocab[i] for i in o] for o in orders], [_position(o, chosen[k]) for k, o in enumerate(orders)],
        [r.reshape(n_layers * n_heads, -1) for r in rows],
        [f"L{layer} H{head}" for layer in range(n_layers) for head in range(n_heads)], keys, active,
        titles=titles, bars_title=bars_title, x_prob=x_prob, y_token=y_token, model_name=model_name,
        sampled_name=sampled_name, x_key=x_key, y_head=y_head, value_name=value_name, play=play, slider=slider)


def _position(order: np.ndarray, token: int) -> int:
    """Where token stands in order, or -1."""
    hits = np.flatnonzero(np.asarray(order) == token)
    return int(hits[0]) if hits.size else -1


def generation_steps(top_probs: np.ndarray, top_sampled: np.ndarray, top_labels: Sequence[Sequence[str]],
                     chosen_at: Sequence[int], rows: Sequence[np.ndarray], row_names: Sequence[str],
                     keys: Sequence[str], active: int, *, titles: Sequence[str], bars_title: str, x_prob: str,
                     y_token: str, model_name: str, sampled_name: str, x_key: str, y_head: str, value_name: str,
                     play: PlayLabels = PlayLabels(), slider: bool = True) -> go.Figure:
    """generation_history from each step's top tokens only (a real model's vocabulary is too large to send).

    top_probs, top_sampled (K, n): the model's softmax(z / T) and the filtered distribution at each step's n most
    likely tokens, top_labels their labels (K x n), chosen_at the chosen token's place among them (-1: not among
    them); rows: K arrays (R, T_k), one row per name of row_names (a layer and head, or a layer's mean over its
    heads); keys: the labels of the longest T (earlier steps' later keys are NaN)."""
    names, t_max = list(row_names), len(keys)
    padded = np.full((len(rows), len(names), t_max), np.nan, dtype=np.float32)  # (K, R, T_max)
    for k, r in enumerate(rows):
        padded[k, :, :r.shape[-1]] = r

    def bar_labels(k: int) -> list[str]:
        return [f"[{plain(x)}]" if i == chosen_at[k] else plain(x) for i, x in enumerate(top_labels[k])]

    layout = _StepsLayout(len(top_labels[active]), len(names))
    fig = make_subplots(rows=2, cols=1, row_heights=layout.row_heights, vertical_spacing=layout.spacing,
                        subplot_titles=[plain(bars_title.format(step=active + 1)), _lines(titles[active])])
    for values, name, colour in ((top_probs, model_name, 0), (top_sampled, sampled_name, 1)):
        fig.add_trace(go.Bar(x=np.asarray(values[active], dtype=np.float32), y=np.arange(len(top_labels[active])),
                             orientation="h", name=name, marker_color=LINE_COLOURS[colour],
                             hovertemplate=f"{name}: %{{x:.4f}}<extra></extra>"), row=1, col=1)
    hover = np.asarray([plain(x) for x in keys], dtype=object)
    heat_domain = fig.layout.yaxis2.domain  # the colour bar stands beside the attention rows only
    fig.add_trace(go.Heatmap(z=padded[active], x=np.arange(t_max), y=np.arange(len(names)), zmin=0.0, zmax=1.0,
                             colorscale=PROB_SCALE, customdata=np.repeat(hover[None, :], len(names), 0),
                             colorbar=dict(title=dict(text=value_name, side="right"), thickness=12,
                                           y=sum(heat_domain) / 2, len=heat_domain[1] - heat_domain[0],
                                           yanchor="middle"),
                             hovertemplate=(f"{y_head}: %{{y}}<br>{x_key}: %{{customdata}} (%{{x}})<br>"
                                            f"{value_name}: %{{z:.4f}}<extra></extra>")), row=2, col=1)
    _steps_axes(fig, bar_labels(active), names, keys, x_prob=x_prob, y_token=y_token, x_key=x_key, y_head=y_head)
    fig.update_annotations(font_size=12)  # the panel titles: at most two lines of a phone's width each
    fig.update_layout(height=layout.height, margin=dict(l=10, r=10, t=layout.top, b=10),
                      legend=dict(orientation="h", yref="container", yanchor="top", y=1 - 30 / layout.height, x=0,
                                  xanchor="left"))  # 30 px down: clear of the toolbar a touch screen always shows
    panel_titles = [a.to_plotly_json() for a in fig.layout.annotations]
    frames = [{"data": [dict(type="bar", x=np.asarray(top_probs[k], dtype=np.float32)),
                        dict(type="bar", x=np.asarray(top_sampled[k], dtype=np.float32)),
                        dict(type="heatmap", z=padded[k])],
               "traces": [0, 1, 2],
               "layout": {"yaxis": {"ticktext": bar_labels(k), "tickvals": list(range(len(top_labels[k])))},
                          "annotations": [panel_titles[0] | {"text": plain(bars_title.format(step=k + 1))},
                                          panel_titles[1] | {"text": _lines(titles[k])}]}}
              for k in range(len(rows))]
    return animated(fig, frames, [str(k + 1) for k in range(len(rows))], active, play, slider=slider,
                    below=KEYS_BELOW_PX)


KEY_TICKS = 10       # key labels under the attention rows: at most this many (each key is named on hover), so that
#                      they stand clear of each other on a phone's narrow plot
KEY_CHARS = 8        # a longer key label is cut to this many characters (decoder.short)
KEYS_BELOW_PX = 100  # key labels of KEY_CHARS on end, and the axis title under them


class _StepsLayout:
    """generation_steps's panels stacked, in pixels: the bars above, the attention rows under them, so that both
    take the whole width of a phone (side by side, the titles ran into each other at 390 px and the attention rows
    were a few pixels wide)."""
    BAR_PX = 24     # per token of the bars (two bars each)
    ROW_PX = 20     # per attention row
    GAP_PX = 120    # between the panels: the bars' x tick labels and title, then the attention's two-line title
    TOP_PX = 115    # above the bars: the figure's title, the legend (two rows on a phone) and the bars' title

    def __init__(self, n_bars: int, n_rows: int):
        bars, heat = self.BAR_PX * max(n_bars, 3), self.ROW_PX * max(n_rows, 8)
        plot = bars + self.GAP_PX + heat
        self.row_heights = [bars / (bars + heat), heat / (bars + heat)]
        self.spacing = self.GAP_PX / plot
        self.top = self.TOP_PX
        self.height = self.TOP_PX + plot + 10


def _steps_axes(fig: go.Figure, bar_labels: list[str], names: list[str], keys: Sequence[str], *, x_prob: str,
                y_token: str, x_key: str, y_head: str) -> None:
    """The axes of generation_steps: bars with their token labels (top to bottom), the attention rows and keys."""
    fig.update_xaxes(title_text=x_prob, range=[0, 1], row=1, col=1)
    fig.update_yaxes(title_text=y_token, autorange="reversed", tickmode="array", tickvals=list(range(len(bar_labels))),
                     ticktext=bar_labels, row=1, col=1)
    labels = [short(k, KEY_CHARS) for k in keys]
    kt, kl = tick_labels(labels, max_ticks=KEY_TICKS)
    upright = max(map(len, labels), default=0) <= 2  # characters read upright; words stand on end
    fig.update_xaxes(title_text=x_key, tickmode="array", tickvals=kt, ticktext=kl, tickangle=0 if upright else -90,
                     showgrid=False, row=2, col=1)
    fig.update_yaxes(title_text=y_head, tickmode="array", tickvals=list(range(len(names))),
                     ticktext=[plain(x) for x in names], autorange="reversed", showgrid=False, row=2, col=1)
    fig.update_layout(barmode="group")


def loss_curves(history: Sequence[dict], *, x_title: str, y_title: str, train_name: str, val_name: str,
                height: int = 300) -> go.Figure:
    """Training loss and held-out loss of the character model over steps."""
    fig = go.Figure()
    x = [h["step"] for h in history]
    fig.add_trace(go.Scatter(x=x, y=[h["loss"] for h in history], mode="lines", name=train_name,
                             line=dict(color=LINE_COLOURS[0])))
    vx, vy = _evals(history, "val_loss")
    fig.add_trace(go.Scatter(x=vx, y=vy, mode="lines+markers", name=val_name, line=dict(color=LINE_COLOURS[1])))
    fig.update_xaxes(title_text=x_title)
    fig.update_yaxes(title_text=y_title, rangemode="tozero")
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=20, b=10),
                      legend=dict(orientation="h", yanchor="top", y=-0.3, x=0))
    return fig


def lines(x: Sequence, series: Sequence[tuple[str, Sequence[float]]], *, x_title: str, y_title: str,
          title: str = "", log_y: bool = False, height: int = 320, markers_only: Sequence[str] = ()) -> go.Figure:
    """Several named lines over the same x (cache bytes per variant, time per token with / without cache); the
    series named in markers_only are drawn as open markers (e.g. a measurement on top of a formula's line)."""
    fig = go.Figure()
    for i, (name, y) in enumerate(series):
        dots = name in markers_only
        fig.add_trace(go.Scatter(x=list(x), y=list(y), mode="markers" if dots else "lines+markers", name=name,
                                 line=dict(color=LINE_COLOURS[i % len(LINE_COLOURS)]),
                                 marker=dict(symbol="circle-open", size=9) if dots else None,
                                 hovertemplate=f"{x_title}: %{{x}}<br>{name}: %{{y:.4g}}<extra></extra>"))
    fig.update_xaxes(title_text=x_title)
    fig.update_yaxes(title_text=y_title, type="log" if log_y else "linear", rangemode="tozero")
    fig.update_layout(title=dict(text=title), height=height, margin=dict(l=10, r=10, t=50 if title else 20, b=10))
    return fit_margins_legend_below(fig)
