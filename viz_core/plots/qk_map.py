"""The query-key map of one head (viz_core.pretrained.qk_map): queries and keys of many sentences as points in one
2-D PCA map, the user's own sentence on top; a clicked query draws lines to the keys it attends to."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from ..pretrained.qk_map import Projection, QKSet
from .common import TITLE_CHARS, _width, plain, title_under_toolbar, wrap_title  # noqa: F401 (re-exported)

QUERY_COLOUR, KEY_COLOUR = "#1f77b4", "#e4572e"   # blue queries, red-orange keys (both readable on dark and light)
SELECTED_COLOUR = "#2ca02c"
LINES_TO = 3            # a chosen query is joined to its 3 heaviest keys
SENTENCE_CHARS = 60     # hover shows this much of a sentence
# where a token's label may sit around its point: (plotly textposition, its box's offset in label heights / widths)
LABEL_PLACES = (("top center", (-0.5, 0.5)), ("bottom center", (-0.5, -1.5)), ("middle right", (0.05, -0.5)),
                ("middle left", (-1.05, -0.5)), ("top right", (0.05, 0.5)), ("top left", (-1.05, 0.5)),
                ("bottom right", (0.05, -1.5)), ("bottom left", (-1.05, -1.5)))


@dataclass(frozen=True)
class Labels:
    query: str = "query"
    key: str = "key"
    yours: str = "your text"
    position: str = "position"
    sentence: str = "sentence"
    weight: str = "weight"
    axis: str = "PCA axis"


def trace_order(user_sentence: int | None) -> list[tuple[str, bool]]:
    """The order of the point traces: (kind, is the user's sentence). The page maps a clicked point back through it.

    The user's sentence comes first: where two points coincide (the same token at the same position in two
    sentences), plotly's hover and click pick the earlier trace, so a click on your point picks yours."""
    mine = [("q", True), ("k", True)] if user_sentence is not None else []
    return mine + [("q", False), ("k", False)]


def point_rows(s: QKSet, user_sentence: int | None, kind_is_user: bool) -> np.ndarray:
    """Token indices (into N) of a trace: the user's sentence, or every other sentence."""
    mine = s.sentence == user_sentence if user_sentence is not None else np.zeros(len(s.sentence), bool)
    return np.flatnonzero(mine if kind_is_user else ~mine)


def label_places(xy: np.ndarray, texts: list[str], span: tuple[float, float], size: tuple[float, float] = (640, 560),
                 font_px: float = 11) -> list[str]:
    """A textposition per point so that labels overlap as little as they can: each label, in order, takes the
    first place of LABEL_PLACES whose box meets no box placed before it (else the least covered one). xy (n, 2) in
    data units, span: the axes' data ranges (x, y), size: the plot's size in px; a character is 0.6 em wide."""
    per_px = (span[0] / size[0], span[1] / size[1])
    height = 1.3 * font_px * per_px[1]
    placed: list[tuple[float, float, float, float]] = []
    out = []
    for (x, y), text in zip(np.asarray(xy, dtype=float), texts):
        width = max(1, _width(text)) * 0.6 * font_px * per_px[0]
        best, best_cover, best_box = LABEL_PLACES[0][0], float("inf"), None
        for place, (dx, dy) in LABEL_PLACES:
            box = (x + dx * width, y + dy * height, x + dx * width + width, y + dy * height + height)
            cover = sum(max(0.0, min(box[2], b[2]) - max(box[0], b[0])) * max(0.0, min(box[3], b[3]) - max(box[1], b[1]))
                        for b in placed)
            if cover < best_cover:
                best, best_cover, best_box = place, cover, box
            if cover == 0:
                break
        placed.append(best_box)
        out.append(best)
    return out


def _hover(s: QKSet, rows: np.ndarray, kind: str, labels: Labels) -> tuple[np.ndarray, str]:
    text = [plain(s.texts[i][:SENTENCE_CHARS] + ("…" if len(s.texts[i]) > SENTENCE_CHARS else ""))
            for i in s.sentence[rows]]
    custom = np.stack([np.asarray([plain(s.tokens[r]) for r in rows], dtype=object),
                       s.position[rows].astype(object), np.asarray(text, dtype=object)], axis=-1) \
        if len(rows) else np.empty((0, 3), dtype=object)
    name = labels.query if kind == "q" else labels.key
    return custom, (f"<b>{name}</b> %{{customdata[0]}}<br>{plain(labels.position)} %{{customdata[1]}}"
                    f"<br>{plain(labels.sentence)}: %{{customdata[2]}}<extra></extra>")


def qk_scatter(s: QKSet, p: Projection, *, user_sentence: int | None, colour: str = "kind",
               chosen: int | None = None, row: np.ndarray | None = None, labels: Labels = Labels(),
               title: str = "", height: int = 620) -> go.Figure:
    """Queries (circles) and keys (triangles) of every sentence; the user's sentence larger, with its tokens written
    beside the points. colour: "kind" (queries blue, keys red) or "position" (the token's position in its sentence).
    chosen: a query's token index (into N) whose attention `row` (over its sentence's keys) is drawn as lines from
    the query to its heaviest keys, the line width proportional to the weight."""
    fig = go.Figure()
    top_position = max(1, int(s.position.max(initial=1)))
    every = np.concatenate([p.q, p.k])  # (2N, 2): the map's extent, for placing the labels
    span = tuple(float(v) if v > 0 else 1.0 for v in every.max(0) - every.min(0)) if len(every) else (1.0, 1.0)
    for kind, mine in trace_order(user_sentence):
        rows = point_rows(s, user_sentence, mine)
        xy = (p.q if kind == "q" else p.k)[rows]
        custom, hover = _hover(s, rows, kind, labels)
        base = QUERY_COLOUR if kind == "q" else KEY_COLOUR
        marker = dict(symbol=("circle" if kind == "q" else "triangle-up") + ("" if mine else "-open"),
                      size=11 if mine else 6, line=dict(width=1.5 if mine else 1))
        if colour == "position":
            marker.update(color=s.position[rows], colorscale="Viridis", cmin=0, cmax=top_position,
                          showscale=kind == "q" and not mine,
                          colorbar=dict(title=dict(text=labels.position, side="right"), thickness=12))
        else:
            marker.update(color=base)
        name = (labels.query if kind == "q" else labels.key) + (f" · {labels.yours}" if mine else "")
        fig.add_trace(go.Scatter(
            x=xy[:, 0], y=xy[:, 1], mode="markers+text" if mine else "markers", name=plain(name),
            text=[plain(s.tokens[r]) for r in rows] if mine else None,
            textposition=label_places(xy, [s.tokens[r] for r in rows], span, (640, height - 120)) if mine else None,
            textfont=dict(size=11, color=base), marker=marker, customdata=custom, hovertemplate=hover,
            opacity=1.0 if mine else 0.55))
    if chosen is not None and row is not None:
        _lines_to_keys(fig, s, p, chosen, row, labels)
    fig.update_xaxes(title_text=f"{labels.axis} 1", zeroline=False)
    fig.update_yaxes(title_text=f"{labels.axis} 2", zeroline=False, scaleanchor="x", scaleratio=1)
    fig.update_layout(height=height, clickmode="event+select", dragmode="pan", legend=dict(orientation="h", y=-0.12),
                      margin=dict(l=10, r=10, b=10))
    return title_under_toolbar(fig, title, gap=26)


def _lines_to_keys(fig: go.Figure, s: QKSet, p: Projection, chosen: int, row: np.ndarray, labels: Labels) -> None:
    """Lines from the chosen query to the LINES_TO keys of its sentence with the largest weights, each key ringed
    too (not clickable). The query's ring goes under the lines and the keys' rings, so that a heavy key close to its
    query stays visible."""
    keys = s.rows(int(s.sentence[chosen]))  # (N_s,) token indices of the query's sentence
    top = np.argsort(-row)[:LINES_TO]
    q_xy = p.q[chosen]
    fig.add_trace(go.Scatter(
        x=[q_xy[0]], y=[q_xy[1]], mode="markers", showlegend=False, hoverinfo="skip",
        marker=dict(symbol="circle-open", size=22, color=SELECTED_COLOUR, line=dict(width=3))))
    for j in top[::-1]:  # the heaviest drawn last: on top
        k_xy = p.k[keys[j]]
        fig.add_trace(go.Scatter(
            x=[q_xy[0], k_xy[0]], y=[q_xy[1], k_xy[1]], mode="lines", showlegend=False, hoverinfo="skip",
            line=dict(color=SELECTED_COLOUR, width=1 + 7 * float(row[j]))))
        fig.add_trace(go.Scatter(
            x=[k_xy[0]], y=[k_xy[1]], mode="markers", showlegend=False, hoverinfo="skip",
            marker=dict(symbol="triangle-up-open", size=12 + 14 * float(row[j]), color=SELECTED_COLOUR,
                        line=dict(width=2))))


def attention_row_bars(tokens: list[str], row: np.ndarray, *, title: str, key: str, weight: str) -> go.Figure:
    """One query's attention over the keys of its sentence (in reading order): a bar per key, hover = exact weight."""
    cats = [f"{plain(t)} ·{j}" for j, t in enumerate(tokens)]
    fig = go.Figure(go.Bar(x=cats, y=row, marker_color=KEY_COLOUR,
                           hovertemplate=f"{plain(key)}: %{{x}}<br>{plain(weight)}: %{{y:.4f}}<extra></extra>"))
    fig.update_xaxes(type="category", title_text=key, tickmode="array", tickvals=cats,
                     ticktext=[plain(t) for t in tokens], tickangle=-60 if len(tokens) > 8 else 0)
    fig.update_yaxes(title_text=weight, range=[0, 1])
    fig.update_layout(title=dict(text=title), height=300, margin=dict(l=10, r=10, t=50, b=10))
    return fig
