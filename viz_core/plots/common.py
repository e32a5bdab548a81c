"""Shared look of every figure: colour scales, matrix heatmaps the right way up, export settings."""
from __future__ import annotations

import base64
import html
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

PROB_SCALE = "Blues"      # one sequential scale for probabilities (0..1), the same on every page
SIGNED_SCALE = "RdBu_r"   # one diverging scale for signed values (logits, encodings), centred on 0
MASK_COLOUR = "rgba(128,128,128,0.55)"  # masked cells: grey with a diagonal stroke, readable in both themes
HATCH_FILL = "rgba(128,128,128,0.35)"
LINE_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd")

# Options for st.plotly_chart(config=...): the PNG export button stays, plotly's logo goes.
PLOTLY_CONFIG = {"displaylogo": False, "toImageButtonOptions": {"format": "png", "scale": 2}}


TITLE_CHARS = 34  # a title line at most this long (in half-width characters): a phone's width, whole words


def _width(text: str) -> int:
    """Display width in half-width characters (a CJK character counts two)."""
    return sum(2 if ord(c) > 0x2E80 else 1 for c in text)


def wrap_title(text: str, width: int = TITLE_CHARS) -> str:
    """A title escaped (plain) and broken into lines of at most `width` (half-width characters) at spaces, or after
    a colon or comma in Chinese: plotly never wraps a title, and a long one was cut mid-word on a phone."""
    words = [w for w in text.replace("：", "：\n").replace("，", "，\n").replace(" ", " \n").split("\n") if w]
    lines, line = [], ""
    for w in words:
        if line and _width(line + w) > width:
            lines.append(line.rstrip())
            line = ""
        line += w
    lines.append(line.rstrip())
    return "<br>".join(plain(x) for x in lines if x)


def title_under_toolbar(fig: go.Figure, title: str, gap: int = 10) -> go.Figure:
    """The figure's title (escaped, wrapped for a phone: wrap_title) starts under the toolbar (plotly's modebar, which
    a phone shows at all times and draws over a title at the top): top margin = 40 px of toolbar + 22 px per title
    line + gap above the plot."""
    wrapped = wrap_title(title)
    lines = 1 + wrapped.count("<br>")
    fig.update_layout(title=dict(text=wrapped, yref="container", y=1, yanchor="top", pad=dict(t=40)),
                      margin=dict(t=40 + 22 * lines + gap))
    return fig


def tiles(axes: str = "xy") -> dict:
    """The `meta` of a clickable map's point trace whose points own tiles: each point owns the cell around its
    centre, up to halfway to its neighbours along `axes` ("xy": a layer x head map's cells; "y": a bar chart's
    rows, across the plot). The house chart element (app_pages/_ui/chart.py) reports a click or a tap as the point
    whose tile holds it, exactly, at any width. Plotly's own hit test on invisible markers is not exact: markers
    sized in px overlap where the tiles are smaller (a phone), and a finger on one tile opened another."""
    if not axes or set(axes) - {"x", "y"}:
        raise ValueError(f"axes must be 'x', 'y' or 'xy', not {axes!r}")
    return {"tiles": axes}


PLOT_WIDTH_PX = 700  # a map's plot width in a laptop's page column: what a cell's width is estimated from


def cell_marker_size(n_cols: int, row_px: float) -> int:
    """The side in px of the invisible square marker over each cell of a map n_cols wide whose rows are row_px tall:
    the cell's shorter side (its width estimated as PLOT_WIDTH_PX / n_cols) less a 3 px border, so the hover reaches
    the cell's corners and neighbouring markers do not overlap; at least 8 px, at most 60. Where cells are smaller
    (a phone) the hover still names the nearest centre, and a click is found by the cell it falls in (tiles())."""
    cell = min(row_px, PLOT_WIDTH_PX / max(n_cols, 1))
    return int(max(8, min(60, cell - 6)))


def clickable_cells(n_rows: int, n_cols: int, hovertemplate: str, *, row_px: float, values: np.ndarray | None = None,
                    centre=None) -> go.Scatter:
    """Invisible square markers over the cells of an (n_rows, n_cols) map, so that hovering names a cell and a click
    selects it: one point per cell in row-major order (point index = row * n_cols + col: layer * heads + head), each
    owning its cell (tiles("xy")), sized by cell_marker_size. Each point's customdata is [row, col], then the cell's
    value when values (n_rows, n_cols) is given: hovertemplate reads them as %{customdata[0]}, ... centre maps a row
    or column index to its axis coordinate (default: the index itself)."""
    rows, cols = np.meshgrid(np.arange(n_rows), np.arange(n_cols), indexing="ij")  # (n_rows, n_cols) each
    data = [rows.ravel(), cols.ravel()] + ([np.asarray(values).ravel()] if values is not None else [])
    at = centre or (lambda i: i)
    return go.Scatter(x=at(cols.ravel()), y=at(rows.ravel()), mode="markers", showlegend=False, meta=tiles("xy"),
                      customdata=np.stack(data, axis=-1), hovertemplate=hovertemplate,
                      marker=dict(symbol="square", size=cell_marker_size(n_cols, row_px), opacity=0.0))


def cell_hover(row_label: str, col_label: str, value_name: str, value_format: str) -> str:
    """The hover of a clickable_cells point that carries its value: "layer 3 · head 5<br>entropy: 0.123"."""
    return (f"{row_label} %{{customdata[0]}} · {col_label} %{{customdata[1]}}<br>{value_name}: "
            f"%{{customdata[2]:{value_format}}}<extra></extra>")


def plain(text) -> str:
    """Text as typed in a plotly label (tick, hover, title, cell text). Plotly reads a subset of HTML in every label
    (<b>, <i>, <br>, <sub>, <a href>, <span style>): a typed "<b>word</b>" would be drawn bold. '&', '<' and '>'
    become entities, which plotly draws as the characters themselves."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def tick_labels(labels: Sequence[str], max_ticks: int = 64) -> tuple[list[int], list[str]]:
    """Numeric tick positions with text labels (positions, so duplicate tokens are not merged into one column),
    shown as typed (see plain).

    Beyond max_ticks labels, only every k-th one is shown.
    """
    n = len(labels)
    step = max(1, int(np.ceil(n / max_ticks)))
    idx = list(range(0, n, step))
    return idx, [plain(labels[i]) for i in idx]


# ---------------------------------------------------------------- matrices of any size, in messages of bounded size
MESSAGE_BYTES = 4_000_000  # the most one figure may take in a page's message, at any input the page takes
LABEL_BYTES = 250_000      # per-cell hover labels while they cost at most this; beyond, rows and columns are named
                           # once each (category axes), so a figure's size grows with its cells' values only (a page
                           # of nine 200-token matrices sends about 2 MB per run, under the 8 MiB a client may leave
                           # unread: a slow reader is not cut off)
STROKE_MAX_CELLS = 2500    # masked cells get a hatch stroke each up to this many; beyond, a cell is a few pixels wide
                           # and the grey alone shows it (20,000 strokes were 460 KB of a figure)
_CELL_JSON_BYTES = 7       # quotes, comma and brackets of one cell's [row, column] pair in a figure's JSON


def cell_label_bytes(rows: Sequence[str], cols: Sequence[str]) -> int:
    """What per-cell hover labels cost in a figure's JSON (every cell repeats its row's and its column's label):
    n_cols * sum(bytes of row labels) + n_rows * sum(bytes of column labels) + 7 * n_rows * n_cols (UTF-8)."""
    row_bytes, col_bytes = (sum(len(str(x).encode()) for x in labels) for labels in (rows, cols))
    return len(cols) * row_bytes + len(rows) * col_bytes + _CELL_JSON_BYTES * len(rows) * len(cols)


def shown_decimals(value_format: str) -> int | None:
    """The decimals a fixed-point hover format shows (".4f", "+.4f" -> 4); None for any other format."""
    _, dot, tail = value_format.rpartition(".")
    return int(tail[:-1]) if dot and tail.endswith("f") and tail[:-1].isdigit() else None


def compact_values(z: np.ndarray, value_format: str) -> np.ndarray:
    """A large matrix's values as sent: rounded to the decimals the hover shows (a fixed-point format), then as
    float32 where float32 still holds those decimals (its error, |z| * 2^-24, under a quarter of the last decimal
    shown), else float64. A cell's hover thus shows the same digits as the exact value (4 bytes a cell, not 8)."""
    decimals = shown_decimals(value_format)
    if decimals is None:
        return z
    z = np.round(z, decimals)
    finite = np.abs(z[np.isfinite(z)])
    top = float(finite.max()) if finite.size else 0.0
    return z.astype(np.float32) if top * 2.0 ** -24 < 0.25 * 10.0 ** -decimals else z


def _cells_labelled(rows: list[str], cols: list[str]) -> tuple[dict, str, str, list, list]:
    """Index axes, each cell carrying its row's and column's label (customdata): (trace arguments, row hover,
    column hover, row tick positions, column tick positions)."""
    n_rows, n_cols = len(rows), len(cols)
    hover_rows = np.repeat(np.asarray(rows, dtype=object)[:, None], n_cols, axis=1)
    hover_cols = np.repeat(np.asarray(cols, dtype=object)[None, :], n_rows, axis=0)
    trace = dict(x=np.arange(n_cols), y=np.arange(n_rows), customdata=np.stack([hover_rows, hover_cols], axis=-1))
    return trace, "%{customdata[0]} (%{y})", "%{customdata[1]} (%{x})", list(range(n_rows)), list(range(n_cols))


def _axes_named(rows: list[str], cols: list[str]) -> tuple[dict, str, str, list, list]:
    """Category axes whose names read as the per-cell hover does ("label (i)": unique, so repeated tokens keep a
    row and a column each): the same hover, with 2 labels a row or column instead of 2 a cell. Positions (shapes,
    annotations) are still the row and column numbers; a trace drawn on top takes the names (the trace's x / y)."""
    y = [f"{label} ({i})" for i, label in enumerate(rows)]
    x = [f"{label} ({j})" for j, label in enumerate(cols)]
    return dict(x=x, y=y), "%{y}", "%{x}", y, x


def _value_scale(z: np.ndarray, signed: bool, zmin: float | None, zmax: float | None) -> tuple[float, float, str]:
    """(zmin, zmax, colour scale): signed = diverging, centred on 0, as wide as the largest |value| unless given;
    otherwise the probability scale, 0..1 unless given."""
    if not signed:
        return (0.0 if zmin is None else zmin), (1.0 if zmax is None else zmax), PROB_SCALE
    finite = np.abs(z[np.isfinite(z)])
    bound = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
    return (-bound if zmin is None else zmin), (bound if zmax is None else zmax), SIGNED_SCALE


def matrix_heatmap(z: np.ndarray, row_labels: Sequence[str] | None = None, col_labels: Sequence[str] | None = None,
                   *, title: str = "", x_title: str = "key", y_title: str = "query", value_name: str = "weight",
                   signed: bool = False, zmin: float | None = None, zmax: float | None = None,
                   mask: np.ndarray | None = None, height: int | None = None, colorscale: str | None = None,
                   value_format: str = ".4f") -> go.Figure:
    """A matrix drawn as it is written: row 0 at the top, column 0 at the left.

    Hover shows row label, column label and the exact value. signed=True uses the diverging scale centred on 0;
    otherwise the probability scale, fixed to 0..1 unless zmin/zmax are given. mask (bool, True = masked) cells
    are drawn grey and hatched on top.

    Size: while per-cell hover labels cost at most LABEL_BYTES (cell_label_bytes), each cell carries them and the
    axes are the row and column numbers. A larger matrix (a long text's tokens) names its rows and columns once each
    on category axes (_axes_named: the same hover) and sends its values as compact_values (rounded to the digits the
    hover shows, float32): 512 x 512 tokens take 1.4 MB instead of 5 to 8 MB.
    """
    z = np.asarray(z, dtype=float)
    n_rows, n_cols = z.shape
    raw_rows = list(row_labels) if row_labels is not None else [str(i) for i in range(n_rows)]
    raw_cols = list(col_labels) if col_labels is not None else [str(j) for j in range(n_cols)]
    rows, cols = [plain(r) for r in raw_rows], [plain(c) for c in raw_cols]
    named = cell_label_bytes(rows, cols) > LABEL_BYTES
    where, row_hover, col_hover, row_at, col_at = (_axes_named if named else _cells_labelled)(rows, cols)
    zmin, zmax, scale = _value_scale(z, signed, zmin, zmax)
    traces, shapes = [go.Heatmap(
        z=compact_values(z, value_format) if named else z, zmin=zmin, zmax=zmax, colorscale=colorscale or scale,
        hovertemplate=(f"{y_title}: {row_hover}<br>{x_title}: {col_hover}"
                       f"<br>{value_name}: %{{z:{value_format}}}<extra></extra>"),
        colorbar=dict(title=dict(text=value_name, side="right"), thickness=12), **where,
    )], []
    if mask is not None and np.any(mask):
        hatch, stroke = mask_overlay(np.asarray(mask, dtype=bool), x=where["x"], y=where["y"])
        traces.append(hatch)
        shapes += [stroke] if stroke else []
    (xt, xl), (yt, yl) = tick_labels(raw_cols), tick_labels(raw_rows)
    angle = -60 if len(cols) > 6 else 0
    axis = dict(type="category") if named else {}  # (names that read as numbers or dates stay names)
    # reserve_margins' margins from the labels known here: the figure is built in one call, with no second
    # walk through plotly's objects
    need = label_margins(yl, xl, x_angle=angle, colour_bar=True)
    layout = dict(xaxis=dict(axis, title=dict(text=x_title), tickmode="array", tickvals=[col_at[j] for j in xt],
                             ticktext=xl, side="bottom", tickangle=angle, showgrid=False, constrain="domain"),
                  yaxis=dict(axis, title=dict(text=y_title), tickmode="array", tickvals=[row_at[i] for i in yt],
                             ticktext=yl, autorange="reversed", showgrid=False),
                  title=dict(text=title), height=height or _auto_height(n_rows),
                  margin=dict(t=50, **{k: int(np.ceil(v)) for k, v in need.items()}))
    return go.Figure(traces, layout=dict(layout, shapes=shapes) if shapes else layout)


def placeholder_figure(text: str, height: int = 90) -> go.Figure:
    """A figure with nothing but a line of text, shown while the data of the real one is computed: the browser
    fetches and starts its chart library meanwhile instead of after."""
    fig = go.Figure()
    fig.add_annotation(text=text, x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False, font=dict(size=14))
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    fig.update_layout(height=height, margin=dict(l=0, r=0, t=0, b=0))
    return fig


# ---------------------------------------------------------------- margins known before the browser draws
TICK_FONT_PX = 12  # the Streamlit theme's tick font


def label_px(text: str, size: float = TICK_FONT_PX) -> float:
    """About how wide a tick label is drawn (a little wider, never narrower, than the theme's sans-serif font):
    CJK characters a full em, capitals 2/3 em, anything else 0.55 em."""
    em = 0.0
    for ch in html.unescape(str(text)):
        em += 1.05 if unicodedata.east_asian_width(ch) in "WF" else 0.67 if ch.isupper() else 0.55
    return em * size


def reserve_margins(fig: go.Figure) -> go.Figure:
    """Left, right and bottom margins that already fit the tick labels, axis titles and colour bar of a one-panel
    matrix figure.

    Plotly's automargin measures what the labels need only after a first draw and then draws the whole figure
    again with the wider margins: every matrix on a page was drawn twice. A margin at least as wide as the need
    leaves automargin nothing to push, so the browser draws once (automargin stays on for anything missed here).
    Measured in Chromium with the Streamlit theme: the y title and ticks take 61 px besides the labels, the x title
    and ticks 62 px, a colour bar with its title 92 px; we ask for 64, 64 and 100 px (a little slack, never short).
    """
    need = _margins_needed(fig)  # (shared with fit_margins, which only widens what a figure already asks for)
    fig.update_layout(margin={k: int(np.ceil(v)) for k, v in need.items()})
    return fig


PLOTLY_MARGIN = {"l": 80, "r": 80, "t": 100, "b": 80}  # plotly's margins where a figure sets none


def fit_margins(fig: go.Figure) -> go.Figure:
    """Widen fig's margins (in place: call it on a figure being built) to what its tick labels, axis titles and
    colour bar need; returns fig.

    The same reason as reserve_margins, for any one-panel figure (line charts, bars, matrices; numeric or category
    axes): a margin narrower than what the labels need makes plotly's automargin widen it after the first draw and
    draw the whole figure again. Figures it cannot judge (several panels, sliders or buttons, a legend outside the
    plot) keep their margins, and automargin stays on for whatever is missed."""
    lay = fig.layout
    axes = {k for k in lay.to_plotly_json() if k.startswith(("xaxis", "yaxis"))}
    if axes - {"xaxis", "yaxis"} or lay.sliders or lay.updatemenus or _legend_outside(fig):
        return fig
    need = _margins_needed(fig)
    have = {k: getattr(lay.margin, k) for k in need}
    have = {k: PLOTLY_MARGIN[k] if v is None else v for k, v in have.items()}
    if any(have[k] < need[k] for k in need):
        fig.update_layout(margin={k: max(have[k], int(np.ceil(need[k]))) for k in need})
    return fig


def fit_panel_margins(fig: go.Figure) -> dict[str, float]:
    """Widen the margins of a figure of panels (make_subplots), in place, to what its outer labels need; returns
    that need (l, r, b in px), for what the caller adds under the x axis (a legend's rows).

    fit_margins' rule for several panels: the left margin holds the tick labels and title of every y axis of the
    leftmost panels, the bottom margin those of every x axis of the lowest panels, the right margin a colour bar (or
    half the last numeric label of the rightmost panels). Inner axes sit in the spacing between panels, which no
    margin holds. With the margins wide enough, plotly's automargin has nothing to push and the browser draws the
    figure once, not twice (Train's loss and accuracy panels took 37 ms to draw instead of 20)."""
    lay = fig.layout
    plotted = lay.to_plotly_json()
    need = {"l": 0.0, "r": 0.0, "b": 0.0}
    for name in (k for k in plotted if k.startswith("xaxis")):
        x_axis = lay[name]
        ref = "x" + name[5:]
        y_name = "yaxis" + (x_axis.anchor or "y")[1:]
        y_axis = lay[y_name]
        data = [d for d in fig.data if (getattr(d, "xaxis", None) or "x") == ref]
        x_dom = x_axis.domain or (0, 1)
        y_dom = y_axis.domain or (0, 1)
        cols = _tick_texts(x_axis, data, "x") if x_axis.showticklabels is not False else []
        rows = _tick_texts(y_axis, data, "y") if y_axis.showticklabels is not False else []
        panel = label_margins(rows, cols, y_size=y_axis.tickfont.size or TICK_FONT_PX,
                              x_size=x_axis.tickfont.size or TICK_FONT_PX, x_angle=float(x_axis.tickangle or 0),
                              numeric_x=bool(cols) and x_axis.ticktext is None and _is_number(cols[-1]))
        if x_dom[0] <= 0.001:
            need["l"] = max(need["l"], panel["l"])
        if y_dom[0] <= 0.001:
            need["b"] = max(need["b"], panel["b"])
        if x_dom[1] >= 0.999:
            need["r"] = max(need["r"], panel["r"] + 2)  # a numeric label's half: plotly's reached 1 px further
    if _has_colour_bar(fig):
        need["r"] = max(need["r"], 100)
    have = {k: PLOTLY_MARGIN[k] if getattr(lay.margin, k) is None else getattr(lay.margin, k) for k in need}
    fig.update_layout(margin=widened(have, need))
    return need


LEGEND_ROW_PX = 22    # the height of one row of a horizontal legend (plotly's is 19 px with its 12 px font)
LEGEND_GROUP_GAP_PX = 10  # plotly's tracegroupgap: between the rows of a legend whose traces name a legendgroup
PHONE_FIGURE_PX = 366  # a chart's width on a 390 px phone (the page's side padding taken off)
LEGEND_ABOVE_PX = 20  # above a legend in a row over the plot: measured, one row needs 41 px, two rows 60


def legend_px(fig: go.Figure) -> int:
    """The room (px) a horizontal legend takes on a phone: LEGEND_ROW_PX a row of legend_rows, and plotly's gap
    between rows where the traces name legend groups (plotly then orders the legend by group). 0 without a legend."""
    rows = legend_rows(fig)
    grouped = any(getattr(d, "legendgroup", None) for d in fig.data) and fig.layout.legend.traceorder is None
    return LEGEND_ROW_PX * rows + (LEGEND_GROUP_GAP_PX * (rows - 1) if grouped and rows else 0)


def fit_margins_legend_above(fig: go.Figure) -> go.Figure:
    """fit_margins, with a horizontal legend in a row right above the plot (left-aligned) and a top margin that holds
    as many rows as the legend takes on a phone: t = LEGEND_ABOVE_PX + legend_px, or the figure's own if larger.
    Returns fig (changed in place).

    A legend above the plot pushes the top margin by its height after the first draw, and plotly then draws the whole
    figure again; on the Language model page a 40 px margin was pushed to 41 px at 1400 px and to 60 px where the
    legend wraps. For a figure without a title (a title would need its own room above the legend)."""
    fig.update_layout(legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="left", x=0))
    fit_margins(fig)
    room = legend_px(fig)
    top = fig.layout.margin.t
    if room and (PLOTLY_MARGIN["t"] if top is None else top) < LEGEND_ABOVE_PX + room:
        fig.update_layout(margin_t=LEGEND_ABOVE_PX + room)
    return fig


def fit_margins_legend_below(fig: go.Figure) -> go.Figure:
    """fit_margins, with the legend at the figure's bottom edge, under the x axis's tick labels and title.

    Placed in pixels from the edge: at a fraction of the plot's height below it, or in a row above the plot, a legend
    that wraps into rows on a phone ran into the axis title or the figure's title. The figure grows by the room the
    legend takes on a phone's width (legend_px), added to the margin fit_margins finds for the labels."""
    fig.update_layout(legend=dict(orientation="h", yref="container", yanchor="bottom", y=0, xanchor="left", x=0))
    fit_margins(fig)
    room = legend_px(fig)
    if room:
        lay = fig.layout
        fig.update_layout(height=(lay.height or 450) + room,
                          margin_b=(PLOTLY_MARGIN["b"] if lay.margin.b is None else lay.margin.b) + room)
    return fig


def legend_rows(fig: go.Figure, width: float | None = None) -> int:
    """The rows plotly draws a horizontal legend in, in a plot `width` px wide (by default the plot's width on a
    phone: PHONE_FIGURE_PX less the figure's left and right margins). 0 where plotly draws no legend.

    Plotly's rule: the entries stand in one row if they fit; otherwise every entry takes the widest one's width, and
    a row holds as many as fit (a legend of 4 names of 100-163 px took 4 rows in a 242 px plot, not 3). An entry is
    its symbol and gap (40 px), its name (12 px font: a wide character 13 px, any other 8 px, generously) and 5 px to
    the next. A legend of groups of one entry each plotly packs in turn, a new row when the next does not fit
    (Optimizers' race: 4 rows in a 192 px plot), in no more rows than this counts. The chart element counts a legend
    above the plot that way at the chart's own width, names measured, for a figure that asks it to
    (app_pages/_ui/chart.py, legendRows); tests/browser/test_drawn_once.py checks every page's figures."""
    if fig.layout.showlegend is False:
        return 0
    names = [str(d.name) for d in fig.data if d.showlegend is not False and d.name]
    if len(names) < 2 and not fig.layout.showlegend:
        return 0
    if width is None:
        sides = [getattr(fig.layout.margin, k) for k in ("l", "r")]
        width = PHONE_FIGURE_PX - sum(PLOTLY_MARGIN[k] if v is None else v for k, v in zip(("l", "r"), sides))
    widths = [40 + sum(13 if unicodedata.east_asian_width(c) in "WF" else 8 for c in name) + 5 for name in names]
    if sum(widths) - 5 < width:
        return 1
    per_row = max(1, int(width // max(widths)))
    return -(-len(names) // per_row)


def _legend_outside(fig: go.Figure) -> bool:
    """Whether plotly draws a legend placed beyond the plot's edges (x or y outside [0, 1], or plotly's default place
    right of the plot): it pushes a margin by its own size, which is not estimated here. A legend anchored at an
    edge (e.g. a row above the plot: y = 1, yanchor "bottom") sits in the margin the figure sets for it."""
    lay = fig.layout
    shown = [d for d in fig.data if d.showlegend is not False and (d.name or lay.showlegend)]
    if lay.showlegend is False or (lay.showlegend is None and len(shown) < 2):
        return False
    x, y = lay.legend.x, lay.legend.y
    return not (x is not None and y is not None and 0 <= x <= 1 and 0 <= y <= 1)


def _margins_needed(fig: go.Figure) -> dict[str, float]:
    """Left, right and bottom margins (px) that hold a one-panel figure's labels (label_margins, read off fig)."""
    lay = fig.layout
    cols = _tick_texts(lay.xaxis, fig.data, "x")
    return label_margins(_tick_texts(lay.yaxis, fig.data, "y"), cols,
                         y_size=lay.yaxis.tickfont.size or TICK_FONT_PX, x_size=lay.xaxis.tickfont.size or TICK_FONT_PX,
                         x_angle=float(lay.xaxis.tickangle or 0), colour_bar=_has_colour_bar(fig),
                         numeric_x=bool(cols) and lay.xaxis.ticktext is None and _is_number(cols[-1]))


def label_margins(rows: Sequence[str], cols: Sequence[str], *, y_size: float = TICK_FONT_PX,
                  x_size: float = TICK_FONT_PX, x_angle: float = 0.0, colour_bar: bool = False,
                  numeric_x: bool = False) -> dict[str, float]:
    """Left, right and bottom margins (px) for these tick labels: the constants of reserve_margins (measured in
    Chromium with the Streamlit theme) plus the widest label; a colour bar takes 100 px on the right.

    left = 64 + max_i w(row_i);  bottom = 64 + max_j w(col_j) sin(angle) + x_size cos(angle), w = label_px.
    A builder that knows its labels calls this directly instead of fit_margins (no walk through plotly's objects)."""
    angle = np.radians(abs(x_angle))
    x_px = max((label_px(c, x_size) for c in cols), default=0.0)
    left = 64 + max((label_px(r, y_size) for r in rows), default=0.0)
    bottom = 64 + x_px * np.sin(angle) + x_size * np.cos(angle)
    # a numeric axis can end on a tick whose label reaches half its width past the plot (categories sit inside)
    right = 100 if colour_bar else 10 + (label_px(cols[-1], x_size) / 2 if numeric_x and not angle else 0)
    return {"l": left, "r": right, "b": bottom}


def widened(margin: dict[str, int], need: dict[str, float]) -> dict[str, int]:
    """margin with each side in need raised to ceil(need) where it is smaller (fit_margins' rule, on a dict)."""
    return {**margin, **{k: max(margin[k], int(np.ceil(v))) for k, v in need.items() if margin[k] < v}}


def _is_number(text: str) -> bool:
    try:
        float(text.replace("\u2212", "-"))
    except ValueError:
        return False
    return True


def _has_colour_bar(fig: go.Figure) -> bool:
    for d in fig.data:
        if d.type in ("heatmap", "contour") and d.showscale is not False and d.hoverinfo != "skip":
            return True
        marker = getattr(d, "marker", None)
        if marker is not None and getattr(marker, "showscale", None):
            return True
    return False


def _tick_texts(axis, data, letter: str) -> list[str]:
    """The tick labels plotly will about draw on an axis: its ticktext, the categories of a category axis, or,
    for a numeric axis, round numbers over the data's range at a fine step (never narrower than plotly's)."""
    if axis.ticktext is not None:
        return [str(x) for x in axis.ticktext]
    values = [np.asarray(_coords(d, letter)).ravel() for d in data if getattr(d, "visible", None) is not False]
    values = [v for v in values if v.size]
    if not values:
        return []
    if axis.type == "category" or any(v.dtype.kind in "OUS" for v in values):
        return [str(v) for v in np.concatenate([v[:256] for v in values])]
    v = np.concatenate([np.asarray(x, dtype=float) for x in values])
    v = v[np.isfinite(v)]
    lo, hi = (float(v.min()), float(v.max())) if v.size else (0.0, 1.0)
    if axis.range is not None:
        lo, hi = sorted(float(r) for r in axis.range)
        if axis.type == "log":
            lo, hi = 10 ** lo, 10 ** hi
    if axis.type == "log":
        v = v[v > 0]
        lo, hi = (max(lo, float(v.min())), float(v.max())) if v.size else (1.0, 10.0)
        return [f"{10.0 ** k:g}" for k in range(int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi))) + 1)]
    span = (hi - lo) or abs(hi) or 1.0
    lo, hi = lo - 0.1 * span, hi + 0.1 * span   # room for plotly's padding
    step = 10 ** np.floor(np.log10(span / 10))
    decimals = max(0, int(-np.floor(np.log10(step) + 1e-9)))
    ticks = np.arange(np.floor(lo / step), np.ceil(hi / step) + 1) * step
    return [f"{t:.{decimals}f}".replace("-", "−") for t in ticks[:: max(1, len(ticks) // 64)]]


def _coords(trace, letter: str):
    """A trace's x or y coordinates (a heatmap without them: the indices of z's columns or rows)."""
    values = getattr(trace, letter, None)
    if values is not None:
        return values
    z = getattr(trace, "z", None)
    if z is None:
        return []
    z = np.asarray(z)
    return np.arange(z.shape[1] if letter == "x" and z.ndim > 1 else z.shape[0])


# ---------------------------------------------------------------- text on cells that stays readable
NEUTRAL_CELL = "#d9d9d9"  # cells with no finite value (−∞, NaN) are drawn in this opaque grey, so their text is known
_ColourLike = str | Sequence[float]


def parse_colour(colour: _ColourLike) -> tuple[float, float, float, float]:
    """'#rrggbb', 'rgb(r,g,b)', 'rgba(r,g,b,a)' or an (r, g, b[, a]) tuple -> (r, g, b, a), r/g/b in 0..255."""
    if not isinstance(colour, str):
        r, g, b, *a = colour
        return float(r), float(g), float(b), float(a[0]) if a else 1.0
    c = colour.strip().lower()
    if c.startswith("#"):
        c = c[1:]
        if len(c) == 3:
            c = "".join(ch * 2 for ch in c)
        return float(int(c[0:2], 16)), float(int(c[2:4], 16)), float(int(c[4:6], 16)), 1.0
    nums = [float(x) for x in c[c.index("(") + 1:c.index(")")].split(",")]
    return nums[0], nums[1], nums[2], nums[3] if len(nums) > 3 else 1.0


def colour_stops(colorscale: str | Sequence) -> list[tuple[float, tuple[float, float, float, float]]]:
    """A plotly colour scale (a name such as 'Blues' or 'RdBu_r', or [[v, colour], ...]) as sorted RGBA stops."""
    if isinstance(colorscale, str):
        from plotly.colors import get_colorscale
        colorscale = get_colorscale(colorscale)
    return sorted((float(v), parse_colour(c)) for v, c in colorscale)


def scale_colour(values: np.ndarray, colorscale: str | Sequence, zmin: float, zmax: float) -> np.ndarray:
    """The colour plotly gives each value (linear between stops, clipped to [zmin, zmax]): (..., 4) RGBA."""
    stops = colour_stops(colorscale)
    pos = np.array([v for v, _ in stops])
    cols = np.array([c for _, c in stops])
    v = np.asarray(values, dtype=float)
    span = (zmax - zmin) or 1.0
    f = np.clip((np.nan_to_num(v, nan=zmin) - zmin) / span, 0.0, 1.0)
    return np.stack([np.interp(f, pos, cols[:, i]) for i in range(4)], axis=-1)


def over(top: np.ndarray, bottom: np.ndarray) -> np.ndarray:
    """Alpha-composite RGBA colours (..., 4) `top` over `bottom`; the result is opaque where bottom is."""
    a = top[..., 3:4]
    rgb = top[..., :3] * a + bottom[..., :3] * (1 - a)
    return np.concatenate([rgb, a + bottom[..., 3:4] * (1 - a)], axis=-1)


def relative_luminance(rgb: np.ndarray) -> np.ndarray:
    """WCAG 2 relative luminance of sRGB colours (..., >=3), channels 0..255."""
    c = np.asarray(rgb, dtype=float)[..., :3] / 255.0
    lin = np.where(c <= 0.03928, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    return lin @ np.array([0.2126, 0.7152, 0.0722])


def contrast_ratio(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """WCAG contrast ratio (1..21) between two colours (or arrays of them)."""
    la, lb = relative_luminance(a), relative_luminance(b)
    return (np.maximum(la, lb) + 0.05) / (np.minimum(la, lb) + 0.05)


BLACK, WHITE = "#000000", "#ffffff"


def text_colours(cell_rgba: np.ndarray) -> np.ndarray:
    """Black or white for text on each (opaque) cell colour (..., 4): whichever has the higher WCAG contrast."""
    black = contrast_ratio(cell_rgba, np.array([0.0, 0.0, 0.0]))
    white = contrast_ratio(cell_rgba, np.array([255.0, 255.0, 255.0]))
    return np.where(black >= white, BLACK, WHITE)


def cell_colours(z: np.ndarray, colorscale: str | Sequence, zmin: float, zmax: float,
                 mask: np.ndarray | None = None) -> np.ndarray:
    """The colour each cell is drawn in (RGBA (R, C, 4)): the scale's colour of its value, NEUTRAL_CELL where the
    value is not finite, and the hatch fill of add_mask_overlay on top of masked cells."""
    z = np.asarray(z, dtype=float)
    rgba = scale_colour(z, colorscale, zmin, zmax)
    rgba[~np.isfinite(z)] = parse_colour(NEUTRAL_CELL)
    if mask is not None:
        hatched = over(np.broadcast_to(np.array(parse_colour(HATCH_FILL)), rgba.shape), rgba)
        rgba = np.where(np.asarray(mask, bool)[..., None], hatched, rgba)
    return rgba


def annotate_cells(fig: go.Figure, z: np.ndarray, text: np.ndarray, *, colorscale: str | Sequence, zmin: float,
                   zmax: float, mask: np.ndarray | None = None, size: int = 11, row: int | None = None,
                   col: int | None = None) -> None:
    """Write text[i, j] on cell (i, j) of a heatmap drawn with x = column index, y = row index, each string in
    black or white, chosen by WCAG contrast against that cell's own colour (so it reads in both themes).

    Cells whose value is not finite get an opaque NEUTRAL_CELL fill first (plotly leaves them transparent, and
    the page behind is white or black depending on the theme). One text trace, whatever the number of cells.
    """
    z = np.asarray(z, dtype=float)
    text = np.asarray(text, dtype=object)
    where = dict(row=row, col=col) if row is not None else {}
    bad = ~np.isfinite(z)
    if bad.any():
        fig.add_trace(go.Heatmap(z=np.where(bad, 1.0, np.nan), x=np.arange(z.shape[1]), y=np.arange(z.shape[0]),
                                 colorscale=[[0, NEUTRAL_CELL], [1, NEUTRAL_CELL]], showscale=False,
                                 hoverinfo="skip"), **where)
        if row is None:  # right above the value heatmap (trace 0), under any mask hatch drawn since
            traces = list(fig.data)
            fig.data = tuple(traces[:1] + traces[-1:] + traces[1:-1])
    colours = text_colours(cell_colours(z, colorscale, zmin, zmax, mask))
    ys, xs = np.nonzero(np.vectorize(lambda s: bool(str(s)), otypes=[bool])(text))
    if not len(ys):
        return
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="text", text=[str(s) for s in text[ys, xs]], hoverinfo="skip",
                             showlegend=False, textfont=dict(size=size, color=colours[ys, xs].tolist()),
                             name="cell text"), **where)


def add_mask_overlay(fig: go.Figure, mask: np.ndarray, row: int | None = None, col: int | None = None) -> None:
    """Masked cells: grey and cell-sized (a second heatmap) with a diagonal stroke in each, so they scale with the
    figure. Hover still reports the value underneath. row, col: the panel of a figure made with make_subplots.

    The strokes are ONE layout shape (an SVG path 'M x0 y0 L x1 y1 M ...' in data coordinates): a line trace with
    gaps would be one SVG element per cell, and drawing hundreds of them was most of a causal heatmap's draw time.
    """
    panel = dict(row=row, col=col) if row is not None else {}
    base = fig.data[0] if fig.data and not panel else None
    named = base is not None and fig.layout.xaxis.type == "category"  # a large matrix_heatmap: cells by name
    hatch, stroke = mask_overlay(mask, x=base.x, y=base.y) if named else mask_overlay(mask)
    fig.add_trace(hatch, **panel)
    if stroke and panel:  # the panel's own axes: plotly sets xref / yref from row and col
        fig.add_shape({k: v for k, v in stroke.items() if k not in ("xref", "yref")}, **panel)
    elif stroke:
        fig.add_shape(stroke)


def mask_overlay(mask: np.ndarray, x: Sequence | None = None,
                 y: Sequence | None = None) -> tuple[go.Heatmap, dict | None]:
    """add_mask_overlay's parts: the grey cells (a heatmap trace) and the strokes (one path shape on the axes x and
    y; None without masked cells or past STROKE_MAX_CELLS of them), for a figure built in one call. x, y: the
    matrix trace's own (its category names where its axes are named), else the column and row numbers; the strokes
    use the numbers either way."""
    n_rows, n_cols = mask.shape
    # 1 = masked (grey), 0 = clear: one byte a cell (a float NaN for "clear" took four, 160 KB at 200 tokens)
    hatch = go.Heatmap(z=np.asarray(mask, dtype=np.uint8), x=np.arange(n_cols) if x is None else x,
                       y=np.arange(n_rows) if y is None else y, zmin=0, zmax=1,
                       colorscale=[[0, "rgba(0,0,0,0)"], [0.5, "rgba(0,0,0,0)"], [0.5, HATCH_FILL], [1, HATCH_FILL]],
                       showscale=False, hoverinfo="skip")
    rows, cols = np.nonzero(mask)
    if not len(rows) or len(rows) > STROKE_MAX_CELLS:
        return hatch, None
    path = " ".join(f"M{j - 0.5:g},{i + 0.5:g}L{j + 0.5:g},{i - 0.5:g}" for i, j in zip(rows, cols))
    return hatch, dict(type="path", path=path, line=dict(width=1, color=MASK_COLOUR), layer="above", xref="x",
                       yref="y")


def head_trace(z, row_labels, col_labels, x_title, y_title, value_name, show_scale: bool) -> go.Heatmap:
    """One (Nq, Nk) probability heatmap for a panel of a grid of panels (0..1 scale, index axes); hover names the
    query and key tokens (escaped for plotly's markup) and the exact weight."""
    n_rows, n_cols = z.shape
    hover = np.stack([np.repeat(np.asarray([plain(r) for r in row_labels], dtype=object)[:, None], n_cols, 1),
                      np.repeat(np.asarray([plain(c) for c in col_labels], dtype=object)[None, :], n_rows, 0)], axis=-1)
    return go.Heatmap(z=z, x=np.arange(n_cols), y=np.arange(n_rows), zmin=0.0, zmax=1.0, colorscale=PROB_SCALE,
                      customdata=hover, showscale=show_scale,
                      colorbar=dict(title=dict(text=value_name, side="right"), thickness=12),
                      hovertemplate=(f"{y_title}: %{{customdata[0]}} (%{{y}})<br>{x_title}: %{{customdata[1]}}"
                                     f" (%{{x}})<br>{value_name}: %{{z:.4f}}<extra></extra>"))


def _auto_height(n_rows: int) -> int:
    return int(min(900, max(320, 160 + 22 * n_rows)))


# ---------------------------------------------------------------- histories that play in the browser
PLAY_FRAME_MS = 450  # one frame of a played history: slow enough to read a map, fast enough to see it learn


@dataclass(frozen=True)
class PlayLabels:
    """The words of a played history's controls."""
    play: str = "Play"
    pause: str = "Pause"
    prefix: str = "step"   # the slider's current value reads "<prefix><colon><frame name>"
    colon: str = ": "      # the language's colon ("：" in Chinese, where ": " reads as a slip)


def set_frames(fig: go.Figure, frames: list[go.Frame]) -> None:
    """Attach frames without plotly re-validating every point of every frame (about 1 s for a race; the frames
    hold plain arrays built by the caller). Falls back to the public, validating setter if plotly's internals move."""
    if isinstance(getattr(fig, "_frame_objs", None), (list, tuple)):
        fig._frame_objs = list(frames)
    else:  # pragma: no cover - other plotly versions
        fig.frames = frames


BYTE_STEPS = 255  # a matrix stored in 1/255 steps (a training snapshot's attention) goes to a played history as bytes


def byte_steps(z) -> np.ndarray | None:
    """The bytes k (uint8) of a float32 matrix whose every entry is exactly float32(k / 255), k in 0..255 (a matrix
    stored in 1/255 steps and read back, as viz_core.lm.training keeps snapshots); None for any other matrix.

    The browser's k / 255 (a double, stored in a Float32Array) is the same float32 for every k, so what is drawn and
    hovered does not change; the bytes are a quarter of float32's."""
    z = np.asarray(z)
    if z.dtype != np.float32 or not z.size or not np.isfinite(z).all():
        return None
    k = np.rint(z * BYTE_STEPS)
    if k.min() < 0 or k.max() > BYTE_STEPS:
        return None
    k = k.astype(np.uint8)
    return k if np.array_equal(k.astype(np.float32) / np.float32(BYTE_STEPS), z) else None


def _frames_in_bytes(frames: Sequence[dict]) -> list[dict] | None:
    """frames with every trace's z as its bytes (byte_steps), or None unless every z of every frame has them (then no
    frame is changed: the browser reads the figure's frames one way)."""
    out = []
    for f in frames:
        data = []
        for d in f["data"]:
            k = byte_steps(d["z"]) if "z" in d else None
            if "z" in d and k is None:
                return None
            data.append(d | {"z": k} if k is not None else d)
        out.append(f | {"data": data})
    return out if any("z" in d for f in frames for d in f["data"]) else None


def frames_in_floats(figure: dict) -> dict:
    """A figure dict (fig.to_dict()) whose frames came in bytes (layout.meta.frame_bytes, see animated) with each z
    back in float32, k / 255: for a drawing that does not turn them back itself (st.plotly_chart). Any other figure is
    returned as it is."""
    per = ((figure.get("layout") or {}).get("meta") or {})
    per = per.get("frame_bytes") if isinstance(per, dict) else None
    if not per:
        return figure
    frames = []
    for f in figure.get("frames") or []:
        data = []
        for d in f.get("data") or []:
            z = d.get("z")
            if isinstance(z, dict) and z.get("dtype") == "u1":
                shape = [int(n) for n in str(z.get("shape", "-1")).split(",")]
                k = np.frombuffer(base64.b64decode(z["bdata"]), np.uint8).reshape(shape)
                d = d | {"z": k.astype(np.float32) / np.float32(per)}
            elif isinstance(z, np.ndarray) and z.dtype == np.uint8:
                d = d | {"z": z.astype(np.float32) / np.float32(per)}
            data.append(d)
        frames.append(f | {"data": data})
    return figure | {"frames": frames}


def animated(fig: go.Figure, frames: Sequence[dict], names: Sequence[str], active: int,
             labels: PlayLabels = PlayLabels(), frame_ms: int = PLAY_FRAME_MS, slider: bool = True,
             below: int = 70) -> go.Figure:
    """A copy of fig that plays a history in the browser, without a server round trip per frame.

    fig shows one moment (a training snapshot, a generation step): frames[active]. frames: one dict per moment,
    {"data": [trace updates, e.g. {"type": "heatmap", "z": ...}], "traces": [the indices they update],
    "layout": {...} (optional: e.g. the title)}. Under the figure, ▶ / ❚❚ buttons and a slider of the moments
    (names); the slider opens at `active`. slider=False: the buttons alone, where the page has its own slider of
    the same moments (two sliders of one thing would disagree); the figure's title then names the moment shown.
    below: the pixels under the plot area that its lowest x axis takes (tick labels and title); the controls go
    under them."""
    fig = go.Figure(fig)  # a copy: a shared figure stays as it is
    in_bytes = _frames_in_bytes(frames)
    if in_bytes is not None:  # the chart element turns them back (app_pages/_ui/chart.py, frameBytes)
        frames = in_bytes
        meta = fig.layout.meta if isinstance(fig.layout.meta, dict) else {}
        fig.update_layout(meta=meta | {"frame_bytes": BYTE_STEPS})
    moment = (lambda name: {"title": {"text": f"{plain(labels.prefix)}{plain(labels.colon)}{name}"}}) if not slider \
        else (lambda _: {})
    set_frames(fig, [go.Frame(name=str(name), data=f["data"], traces=f["traces"],
                              layout=(f.get("layout") or {}) | moment(name)) for f, name in zip(frames, names)])
    if not slider:
        fig.update_layout(moment(names[active]))
    play = dict(frame=dict(duration=frame_ms, redraw=True), transition=dict(duration=0), fromcurrent=True,
                mode="immediate")
    pause = dict(frame=dict(duration=0, redraw=False), transition=dict(duration=0), mode="immediate")
    jump = dict(mode="immediate", frame=dict(duration=0, redraw=True), transition=dict(duration=0))
    fig.update_layout(
        margin=dict(b=max(fig.layout.margin.b or 0, below) + 70), height=(fig.layout.height or 450) + 70,
        updatemenus=[dict(type="buttons", direction="left", x=0, y=0, xanchor="left", yanchor="top",
                          pad=dict(t=below, r=10), showactive=False,
                          buttons=[dict(label="▶ " + plain(labels.play), method="animate", args=[None, play]),
                                   dict(label="❚❚ " + plain(labels.pause), method="animate",
                                        args=[[None], pause])])],
        sliders=[dict(active=int(active), x=0.2, len=0.8, y=0, yanchor="top", pad=dict(t=below - 10, b=0),
                      currentvalue=dict(prefix=plain(labels.prefix) + plain(labels.colon), visible=True, xanchor="right"),
                      steps=[dict(label=str(name), method="animate", args=[[str(name)], jump]) for name in names])]
        if slider else [])
    return fig
