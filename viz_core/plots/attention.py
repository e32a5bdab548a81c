"""Figures of a pretrained model's attention: one head, the grid of all heads, the head-statistics map, and the
HTML line view. Inputs are arrays and token strings only."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from ..pretrained.head_analysis import thumbnail
from .common import (LINE_COLOURS, PLOT_WIDTH_PX, PROB_SCALE, cell_hover, clickable_cells, label_margins, matrix_heatmap,
                     plain, widened)

_LINE_VIEW_TEMPLATE = Path(__file__).with_name("line_view.html")
COLOUR_QUANTILE = 0.99  # auto scale: the darkest colour is this quantile of the weights shown
STATS_ROW_PX = 48       # stats_map: px of height per layer row (its cells' height)


LABEL_FONTS = (8, 12)        # smallest and largest tick font, px: smaller first, thinning only below 8 px
_AXIS_BAND = 140             # px of the figure's height that are not rows: title, margins, the key labels
NUMBERED_FROM = 30           # from this many tokens on, labels carry their position ("12·token"): a phone cannot
                             # name every key, and a numbered label shows where the named ones sit


@dataclass(frozen=True)
class TokenTicks:
    """How a heatmap names its tokens. Queries (rows): every `step`-th one in a `font`-px font, computed here as the
    height is known. Keys (columns): the width is only known in the browser, so for long input (numbered) plotly
    names as many as fit the screen; otherwise every one."""
    step: int                  # every step-th query is named (1 = all)
    font: int                  # tick font, px
    numbered: bool             # labels read "12·token"

    def name(self, i: int, token: str) -> str:
        """A token's axis name: as typed (escaped for plotly, see plain), with its position for long input."""
        return f"{i}·{plain(token)}" if self.numbered else plain(token)


def heatmap_height(n_q: int) -> int:
    """Figure height in px: 22 px a row between 320 and 900."""
    return int(min(900, max(320, 160 + 22 * n_q)))


def token_ticks(n_q: int, n_k: int | None = None) -> TokenTicks:
    """Every query is named while a label gets at least (smallest font + 1) px of height, the font shrinking from 12
    to 8 px as rows get more; beyond that every step-th one, the smallest step that gives the labels that room."""
    small, large = LABEL_FONTS
    px = (heatmap_height(n_q) - _AXIS_BAND) / max(n_q, 1)  # px of height a row
    step = max(1, int(np.ceil((small + 1) / px)))
    return TokenTicks(step=step, font=int(min(large, max(small, step * px - 1))),
                      numbered=max(n_q, n_k if n_k is not None else n_q) >= NUMBERED_FROM)


def head_heatmap(w: np.ndarray, q_tokens: Sequence[str], k_tokens: Sequence[str], title: str, *,
                 query: str, key: str, value: str, auto_scale: bool = False,
                 zmax: float | None = None) -> go.Figure:
    """One head (or an aggregate): (Nq, Nk), rows = queries top to bottom, hover = query, key and exact weight.

    The axes are categorical with one unique name per position (the token, or "12·token" for long input, see
    TokenTicks), so the hover names the tokens without a per-cell label array: 512 tokens cost 2 x 512 labels, not
    512 x 512. Short input: every token named on both axes. Long input: the rows named as token_ticks says, the
    columns as many as the screen's width has room for (plotly's own choice of category ticks).
    """
    n_q, n_k = w.shape
    ticks = token_ticks(n_q, n_k)
    rows = [ticks.name(i, tok) for i, tok in enumerate(q_tokens)]
    cols = [ticks.name(j, tok) for j, tok in enumerate(k_tokens)]
    if not ticks.numbered:  # short input: names need not be unique, so the categories carry the position
        rows, cols = [f"{r} ·{i}" for i, r in enumerate(rows)], [f"{c} ·{j}" for j, c in enumerate(cols)]
    zmax = colour_top(w, auto_scale) if zmax is None else zmax  # given: e.g. a scale without the sink column
    shown = range(0, n_q, ticks.step)
    y_text = [ticks.name(i, q_tokens[i]) for i in shown]
    x_ticks = dict(tickmode="auto") if ticks.numbered else dict(
        tickmode="array", tickvals=cols, ticktext=[plain(tok) for tok in k_tokens])
    angle = -60 if n_k > 6 else 0
    # the margins fit_margins would find, from the labels known here: one constructor call, no walk through plotly's
    # objects afterwards (a layer change redraws this figure, so it stays cheap for a class on one server)
    need = label_margins(y_text, x_ticks.get("ticktext", cols[:256]), y_size=ticks.font, x_size=ticks.font,
                         x_angle=angle, colour_bar=True)
    axis = dict(type="category", showgrid=False, tickfont=dict(size=ticks.font))
    return go.Figure(go.Heatmap(
        z=np.asarray(w, dtype=np.float32), x=cols, y=rows, zmin=0.0, zmax=zmax, colorscale=PROB_SCALE,
        hovertemplate=f"{query}: %{{y}}<br>{key}: %{{x}}<br>{value}: %{{z:.6f}}<extra></extra>",
        colorbar=dict(title=dict(text=value, side="right"), thickness=12)), layout=dict(
        xaxis=dict(axis, title=dict(text=key), tickangle=angle, **x_ticks),
        yaxis=dict(axis, title=dict(text=query), tickmode="array", tickvals=[rows[i] for i in shown],
                   ticktext=y_text, autorange="reversed"),
        title=dict(text=title), height=heatmap_height(n_q),
        margin=widened(dict(l=10, r=10, t=50, b=10), need)))


def colour_top(w: np.ndarray, auto_scale: bool = True, quantile: float = COLOUR_QUANTILE) -> float:
    """The weight drawn in the darkest colour: 1 on the fixed scale; with auto_scale, the `quantile` of the weights
    shown (so one very large weight, e.g. on [CLS], does not wash out every other cell, and a block whose weights
    are all tiny still shows its structure); larger weights are drawn in the darkest colour too."""
    w = np.asarray(w, dtype=np.float32)
    if not auto_scale or not w.size:
        return 1.0
    top = float(np.quantile(w, quantile))
    top = top if top > 0 else float(w.max())
    return top if top > 0 else 1.0


def _mosaic(weights: np.ndarray, size: int, zmax: float) -> np.ndarray:
    """(L, H, N, N) -> one (L*s, H*s) uint8 image of thumbnails, 255 = zmax: 1 byte a cell keeps the page light."""
    n_layers, n_heads = weights.shape[:2]
    s = min(size, weights.shape[-1])
    img = np.zeros((n_layers * s, n_heads * s), dtype=np.float32)
    for layer in range(n_layers):
        for head in range(n_heads):
            img[layer * s:(layer + 1) * s, head * s:(head + 1) * s] = thumbnail(weights[layer, head], s)
    return np.round(np.clip(img / zmax, 0, 1) * 255).astype(np.uint8)


def model_grid(weights: np.ndarray, *, thumb: int = 32, layer_label: str = "layer", head_label: str = "head",
               hover_hint: str = "", selected: tuple[int, int] | None = None, auto_scale: bool = False,
               value_name: str = "attention weight") -> go.Figure:
    """Every layer x head as a small heatmap, drawn as one light image (thumbnails of at most thumb x thumb cells,
    quantised to 256 colour levels) with grey separators.

    A transparent marker sits on each tile (trace 1, point index = layer * heads + head) so hovering names the head;
    a click or tap on a tile reports its marker (tiles(): the chart element finds the tile under the pointer).
    """
    n_layers, n_heads, n, _ = weights.shape
    s = min(thumb, n)
    zmax = 1.0
    if auto_scale:
        zmax = colour_top(np.stack([thumbnail(weights[i, j], s) for i in range(n_layers) for j in range(n_heads)]))
    img = _mosaic(weights, s, zmax)
    centre = lambda i: i * s + (s - 1) / 2  # noqa: E731
    ticks = np.linspace(0, 255, 6)
    # the colour bar lies under the grid (not beside it), so a phone's width goes to the tiles
    fig = go.Figure(go.Heatmap(z=img, colorscale=PROB_SCALE, zmin=0, zmax=255, hoverinfo="skip",
                               colorbar=dict(thickness=10, tickvals=ticks, ticktext=[f"{v:.2g}" for v in
                                                                                      ticks / 255 * zmax],
                                             orientation="h", y=-0.04, yanchor="top", len=0.6, x=0, xanchor="left",
                                             title=dict(text=plain(value_name), side="right"))))
    height = int(min(1100, 140 + PLOT_WIDTH_PX * n_layers / max(n_heads, 1)))  # square tiles, 140 px of margins
    fig.add_trace(clickable_cells(n_layers, n_heads, f"{layer_label} %{{customdata[0]}} · {head_label} "
                                  f"%{{customdata[1]}}<br>{hover_hint}<extra></extra>",
                                  row_px=(height - 140) / n_layers, centre=centre))
    separator = dict(color="rgba(128,128,128,0.85)", width=2)
    shapes = [dict(type="line", x0=h * s - 0.5, x1=h * s - 0.5, y0=-0.5, y1=n_layers * s - 0.5, line=separator)
              for h in range(1, n_heads)]
    shapes += [dict(type="line", y0=layer * s - 0.5, y1=layer * s - 0.5, x0=-0.5, x1=n_heads * s - 0.5,
                    line=separator) for layer in range(1, n_layers)]
    if selected is not None:
        l_sel, h_sel = selected
        shapes.append(dict(type="rect", x0=h_sel * s - 0.5, x1=(h_sel + 1) * s - 0.5, y0=l_sel * s - 0.5,
                           y1=(l_sel + 1) * s - 0.5, line=dict(color="#e4572e", width=3)))
    fig.update_layout(shapes=shapes)  # at once: add_shape validates every earlier shape again (quadratic)
    fig.update_xaxes(tickmode="array", tickvals=[centre(h) for h in range(n_heads)],
                     ticktext=[str(h) for h in range(n_heads)], title_text=head_label, side="top", showgrid=False,
                     zeroline=False, title_standoff=4, constrain="domain", range=[-0.5, n_heads * s - 0.5])
    fig.update_yaxes(tickmode="array", tickvals=[centre(layer) for layer in range(n_layers)],
                     ticktext=[str(layer) for layer in range(n_layers)], title_text=layer_label,
                     range=[n_layers * s - 0.5, -0.5], showgrid=False, zeroline=False, scaleanchor="x",
                     constrain="domain")  # tight to the tiles (layer 0 on top): no empty band on a phone
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=90, b=50),
                      clickmode="event+select", dragmode=False)
    return fig


def stats_map(values: np.ndarray, *, title: str, value_name: str, layer_label: str, head_label: str,
              value_format: str = ".3f", selected: tuple[int, int] | None = None, zmin: float | None = None,
              zmax: float | None = None) -> go.Figure:
    """A (layers, heads) map of one statistic; a transparent marker per cell (trace 1, point index = layer * heads +
    head, owning its cell: tiles()) makes it clickable. The colours span the values' range unless zmin / zmax fix it
    (e.g. 0..1 for shares)."""
    n_layers, n_heads = values.shape
    rows, cols = [str(i) for i in range(n_layers)], [str(j) for j in range(n_heads)]  # the axis titles name them
    zmin = float(np.nanmin(values)) if zmin is None else zmin
    zmax = (float(np.nanmax(values)) or 1.0) if zmax is None else zmax
    fig = matrix_heatmap(values, rows, cols, title=title, x_title=head_label, y_title=layer_label,
                         value_name=value_name, zmin=zmin, zmax=zmax,
                         colorscale="Viridis", value_format=value_format, height=120 + STATS_ROW_PX * n_layers)
    # the markers carry the hover (a point that cannot be hovered cannot be clicked either); the heatmap's is off
    fig.update_traces(hoverinfo="skip", hovertemplate=None, selector=dict(type="heatmap"))
    fig.add_trace(clickable_cells(n_layers, n_heads, cell_hover(layer_label, head_label, value_name, value_format),
                                  row_px=STATS_ROW_PX, values=values))
    if selected is not None:
        fig.add_shape(type="rect", x0=selected[1] - 0.5, x1=selected[1] + 0.5, y0=selected[0] - 0.5,
                      y1=selected[0] + 0.5, line=dict(color="#e4572e", width=3))
    # upright head numbers that stay apart on a phone (9+ heads: a smaller font); the colour bar leaves its title to
    # the figure's, which names the same value, so the cells keep the width
    fig.update_xaxes(tickangle=0, tickfont=dict(size=10) if n_heads > 8 else None, zeroline=False)
    fig.update_yaxes(zeroline=False)
    fig.update_traces(colorbar=dict(title=None), selector=dict(type="heatmap"))
    fig.update_layout(margin=dict(r=64))  # the bar and its numbers, without a title
    fig.update_layout(clickmode="event+select", dragmode=False)
    return fig


def line_view_html(q_tokens: Sequence[str], k_tokens: Sequence[str], weights: np.ndarray, heads: Sequence[int], *,
                   threshold: float = 0.01, labels: dict[str, str] | None = None, dark: bool = False) -> str:
    """BertViz-style head view as a self-contained HTML page (SVG + a little JavaScript).

    weights: (H, Nq, Nk) of one layer; only the listed heads are drawn, each in its own colour, line opacity =
    weight. Hovering a token on the left shows only its lines (that query); on the right, the lines into that key.
    Tokens are inserted as text (textContent), never as HTML. Weights below threshold are dropped to keep it light.
    """
    edges = []
    for h in heads:
        qi, kj = np.nonzero(weights[h] >= threshold)
        edges.append([[int(a), int(b), round(float(weights[h, a, b]), 4)] for a, b in zip(qi, kj)])
    data = {"left": [str(t) for t in q_tokens], "right": [str(t) for t in k_tokens], "heads": [int(h) for h in heads],
            "colours": [LINE_COLOURS[h % len(LINE_COLOURS)] for h in heads], "edges": edges,
            "labels": labels or {}, "dark": dark}
    payload = json.dumps(data, ensure_ascii=False).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return _LINE_VIEW_TEMPLATE.read_text(encoding="utf-8").replace("__DATA__", payload)


def line_view_height(n_tokens: int) -> int:
    return int(min(900, 70 + 22 * n_tokens))

