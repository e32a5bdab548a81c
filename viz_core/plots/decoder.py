"""Figures of a decoder's insides: the logit lens grid (rows = positions, columns = the residual stream after each
block) with the column where each position's final answer settles, and GQA groups of a layer x head map.

Data in (numpy arrays and token strings of a viz_core.pretrained.lens.LogitLens), go.Figure out; every token label
goes through plain(), so typed markup is drawn as typed.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from .common import PROB_SCALE, annotate_cells, plain, reserve_margins, tick_labels

LENS_METRICS = ("top", "next")  # colour = probability of the row's top-1 guess / of the token that actually follows
CELL_TEXT_UP_TO = 40            # positions up to which each cell shows its top-1 token (beyond: hover only)
CELL_TEXT_CHARS = 6             # a cell shows at most this many characters of its token
LENS_TICKS = 7                  # the lens's column names on its axis: at most this many (every k-th column)
# the ring where a row's final guess settles: red, apart from the blue probability scale (the page's words call it the
# red ring). An open symbol is stroked in marker.color (its line colour is not used): set that, or it takes the
# theme's first colour, a blue lost in the scale.
SETTLE_RING = "#e4572e"


def short(label: str, chars: int = CELL_TEXT_CHARS) -> str:
    """A token cut to fit a cell: 'embeddings' -> 'embed…'."""
    label = str(label)
    return label if len(label) <= chars else label[: chars - 1] + "…"


def _hover_lists(top_tokens: np.ndarray, top_probs: np.ndarray) -> np.ndarray:
    """(R, N) strings: each cell's top-k guesses, one per line, 'token  0.423'."""
    r, n, k = top_tokens.shape
    out = np.empty((r, n), dtype=object)
    for i in range(r):
        for j in range(n):
            out[i, j] = "<br>".join(f"{m + 1}. {plain(repr(str(top_tokens[i, j, m]))[1:-1])}  "
                                    f"{top_probs[i, j, m]:.3f}" for m in range(k))
    return out


def lens_figure(top_tokens: np.ndarray, top_probs: np.ndarray, next_prob: np.ndarray, next_rank: np.ndarray,
                first_top1: np.ndarray, tokens: Sequence[str], next_tokens: Sequence[str], row_names: Sequence[str],
                *, short_names: Sequence[str] | None = None, metric: str = "top", title: str, x_title: str, y_title: str, value_name: str, top_name: str,
                next_name: str, rank_name: str, settled_name: str) -> go.Figure:
    """The logit lens as a (positions x depth) grid: one row per input position, top to bottom as the text reads;
    one column per place the residual stream is read, from the embeddings (left) to the last block (right).

    Colour: p(top-1 guess) (metric "top") or p(actual next token) (metric "next"; the last position has no next
    token and is grey). Cell text: the top-1 guess (inputs up to CELL_TEXT_UP_TO positions). Hover: the top-k list
    and the actual next token's probability and rank. A ring marks, per position, the first column from which the
    final answer stays top-1. Lens arrays come as (R, N, ...) and are drawn transposed.
    """
    if metric not in LENS_METRICS:
        raise ValueError(f"metric must be one of {LENS_METRICS}")
    n_rows, n = top_probs.shape[:2]
    nan_col = np.full((n_rows, 1), np.nan, dtype=np.float32)
    p_next = np.concatenate([next_prob, nan_col], axis=1)  # (R, N)
    z = (top_probs[:, :, 0] if metric == "top" else p_next).T  # (N, R)
    rank = np.concatenate([next_rank.astype(float) + 1, nan_col], axis=1)  # (R, N), 1 = top-1
    following = [plain(repr(str(x))[1:-1]) for x in next_tokens] + ["–"]
    lists = _hover_lists(top_tokens, top_probs)
    hover = np.empty((n, n_rows), dtype=object)  # (N, R)
    for r in range(n_rows):
        for j in range(n):
            nxt = (f"{next_name}: {following[j]}  p = {p_next[r, j]:.3f} · {rank_name} {int(rank[r, j])}"
                   if j < n - 1 else f"{next_name}: –")
            hover[j, r] = f"{top_name}:<br>{lists[r, j]}<br>{nxt}"
    positions = [f"{plain(tok)} ·{j}" for j, tok in enumerate(tokens)]
    depth = [plain(r) for r in row_names]
    fig = go.Figure(go.Heatmap(
        z=z, x=np.arange(n_rows), y=np.arange(n), zmin=0.0, zmax=1.0, colorscale=PROB_SCALE,
        customdata=np.stack([np.repeat(np.asarray(positions, dtype=object)[:, None], n_rows, axis=1),
                             np.repeat(np.asarray(depth, dtype=object)[None, :], n, axis=0), hover], axis=-1),
        hovertemplate=(f"{y_title}: %{{customdata[0]}}<br>{x_title}: %{{customdata[1]}}<br>{value_name}: "
                       f"%{{z:.3f}}<br>%{{customdata[2]}}<extra></extra>"),
        colorbar=dict(title=dict(text=value_name, side="right"), thickness=12)))
    if n <= CELL_TEXT_UP_TO and n_rows <= 16:
        text = np.vectorize(lambda s: plain(short(str(s).strip() or repr(str(s))[1:-1])), otypes=[object])(
            top_tokens[:, :, 0].T)
        annotate_cells(fig, z, text, colorscale=PROB_SCALE, zmin=0.0, zmax=1.0, size=11 if n_rows <= 8 else 9)
    fig.add_trace(go.Scatter(x=np.asarray(first_top1, dtype=float), y=np.arange(n), mode="markers",
                             name=settled_name, hoverinfo="skip",
                             marker=dict(symbol="circle-open", size=16, color=SETTLE_RING, line=dict(width=2.5))))
    # the columns' names as ticks, at most LENS_TICKS of them (the hover names every column whole): a phone's map
    # is about 165 px wide, where 19 columns' names ran into each other
    tick_at, ticks = tick_labels(list(short_names or row_names), max_ticks=LENS_TICKS)
    fig.update_xaxes(title_text=x_title, tickmode="array", tickvals=tick_at, ticktext=ticks,
                     tickangle=0, showgrid=False, side="top", title_standoff=4)
    fig.update_yaxes(title_text=y_title, tickmode="array", tickvals=list(range(n)),
                     ticktext=[plain(tok) for tok in tokens], autorange="reversed", showgrid=False)
    fig.update_layout(title=dict(text=title, yref="container", y=1.0, yanchor="top", pad=dict(t=12)),
                      height=int(min(1700, 230 + 24 * n)), margin=dict(l=10, r=10, t=120, b=50),
                      legend=dict(orientation="h", yanchor="top", y=-0.01, xanchor="left", x=0.0))
    return reserve_margins(fig)


def group_shapes(fig: go.Figure, groups: Sequence[Sequence[int]], n_layers: int) -> None:
    """Outline the query heads that share one key/value head (GQA / MQA) on a layer x head map."""
    if len(groups) <= 1 or all(len(g) == 1 for g in groups):
        return
    fig.update_layout(shapes=list(fig.layout.shapes) + [  # at once: add_shape re-validates every earlier shape
        dict(type="rect", x0=min(g) - 0.5, x1=max(g) + 0.5, y0=-0.5, y1=n_layers - 0.5,
             line=dict(color="#888888", width=1, dash="dot"), layer="above") for g in groups])
