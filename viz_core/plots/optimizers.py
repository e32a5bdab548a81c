"""Figures of the optimizer race: the animated contour race, loss / distance curves, the optimizers' inner state
and learning-rate schedules. Data in (numpy arrays, Trajectory records), go.Figure out; labels come translated."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import base64
import re
import struct
import zlib

import numpy as np
import plotly.graph_objects as go
from plotly.colors import sample_colorscale
from plotly.subplots import make_subplots

from .common import (LEGEND_GROUP_GAP_PX, LEGEND_ROW_PX, LINE_COLOURS, fit_margins_legend_below, set_frames,
                     tiles)

ORDER = ("sgd", "momentum", "adagrad", "rmsprop", "adam", "adamw", "nadam")
COLOURS = {name: LINE_COLOURS[i] for i, name in enumerate(ORDER)}
LOG_FLOOR = 1e-16      # a loss gap of exactly 0 cannot sit on a log axis: it is drawn at this floor
TRAIL_POINTS = 400     # the race's own trails (its last frame) draw at most this many points (beyond: thinned)
FRAME_TRAIL_POINTS = 80  # the frames before the last, played in passing, at most this many (the full path stays faint)
SURFACE_SCALE = "Viridis"   # colours of the loss surface (dark = low loss)
N_BANDS = 24                # the surface picture is cut into this many colour bands (a filled-contour look)
CURVES_HEIGHT = 640         # px: the loss and distance panels, about 210 px of plot each, and the legend below
# The race's legend and colour bar are drawn just after its first paint (the chart element, layout.meta.after_paint):
# plotly measures their labels one at a time, which took a fifth of the race's first draw; its margins keep their room.
AFTER_PAINT = ("legend", "colorbars")


def colour(name: str) -> str:
    return COLOURS.get(name, LINE_COLOURS[-1])


# ---------------------------------------------------------------- race figure
def frame_steps(n_max: int, n_frames: int = 40) -> np.ndarray:
    """The steps shown by the animation frames: 0, ..., n_max, evenly spread, at most n_frames + 1 of them."""
    return np.unique(np.round(np.linspace(0, n_max, min(n_frames, n_max) + 1)).astype(int))


def trail_indices(s: int, points: int) -> np.ndarray:
    """The k = min(s + 1, points) indices of path[:s + 1] a trail keeps: round(i s / (k - 1)) for i = 0 .. k - 1,
    halves rounded up, in integers: (2 i s + k - 1) // (2 (k - 1)). They start at 0, end exactly at s and never repeat
    (s / (k - 1) >= 1). The chart element repeats this rule in the browser (race_figure's meta.trail_frames)."""
    k = min(s + 1, points)
    if k < 2:
        return np.zeros(1, dtype=int)
    i = np.arange(k)
    return (2 * i * s + k - 1) // (2 * (k - 1))                                   # (k,)


def _trail(path: np.ndarray, s: int, points: int = TRAIL_POINTS) -> np.ndarray:
    """path[:s + 1], thinned to at most `points` points but always ending exactly at path[s] -> (k, 2)."""
    return path[trail_indices(min(s, len(path) - 1), points)]


def png_data_uri(rgb: np.ndarray) -> str:
    """An (H, W, 3) uint8 image as a data: URI holding a PNG (zlib only, no imaging library)."""
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + row.tobytes() for row in np.ascontiguousarray(rgb, dtype=np.uint8))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def banded_image(level: np.ndarray, n_bands: int = N_BANDS) -> tuple[np.ndarray, float, float]:
    """Filled-contour picture of level (ny, nx), y ascending: n_bands Viridis bands with light lines between them.

    Returns (rgb (ny, nx, 3) uint8 with row 0 = top = largest y, level min, level max).
    """
    finite = level[np.isfinite(level)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    band = np.clip(((level - lo) / max(hi - lo, 1e-12) * n_bands).astype(int), 0, n_bands - 1)   # (ny, nx)
    lut = np.array([[int(float(c)) for c in re.findall(r"[\d.]+", col)[:3]]
                    for col in sample_colorscale(SURFACE_SCALE, list(np.linspace(0, 1, n_bands)))], dtype=np.int16)
    rgb = lut[band]                                                                        # (ny, nx, 3)
    edge = np.zeros(band.shape, dtype=bool)
    edge[1:, :] |= band[1:, :] != band[:-1, :]
    edge[:, 1:] |= band[:, 1:] != band[:, :-1]
    rgb[edge] = (rgb[edge] * 0.6 + 255 * 0.4).astype(np.int16)                             # contour lines
    return np.flipud(rgb).astype(np.uint8), lo, hi


def _surface_background(fig, grid, x_range, y_range, labels, log_levels: bool, in_gap: bool = False) -> None:
    """The surface as a layout image (plotly's animation without redraw drops contour traces, but keeps images),
    plus a colour bar carried by an invisible two-point scatter. in_gap: the bar stands in the gap between two
    panels, drawn narrower (thinner, smaller text, no padding) so that its title clears the next panel on a phone."""
    rgb, lo, hi = banded_image(grid.level)
    fig.add_layout_image(source=png_data_uri(rgb), xref="x", yref="y", x=x_range[0], y=y_range[1],
                         sizex=x_range[1] - x_range[0], sizey=y_range[1] - y_range[0], sizing="stretch",
                         layer="below", opacity=1.0)
    title = labels["log_level"] if log_levels else labels["loss"]
    fig.add_trace(go.Scatter(
        x=[x_range[0]] * 2, y=[y_range[0]] * 2, mode="markers", hoverinfo="skip", showlegend=False,
        marker=dict(size=0.1, opacity=0, color=[lo, hi], colorscale=SURFACE_SCALE, cmin=lo, cmax=hi, showscale=True,
                    colorbar=dict(title=dict(text=title, side="right", font=dict(size=12) if in_gap else None),
                                  thickness=10 if in_gap else 12, xpad=2 if in_gap else 10,
                                  tickfont=dict(size=11) if in_gap else None,
                                  x=fig.layout.xaxis.domain[1] + (0.005 if in_gap else 0.01), xanchor="left"))),
        row=1, col=1)


def _static_traces(fig, grid, hover_grid, x_range, y_range, minima, start, labels, log_levels: bool,
                   in_gap: bool = False) -> None:
    """Surface picture, the invisible click / hover grid, minima, start point: what never moves (left panel)."""
    _surface_background(fig, grid, x_range, y_range, labels, log_levels, in_gap)
    # An invisible heatmap of the coarse grid: one picture for the browser to lay out, not one invisible SVG marker per
    # point. Its cells show the loss on hover; a click or tap anywhere in one reports the cell's centre (meta: tiles,
    # read by the chart element).
    fig.add_trace(go.Heatmap(
        x=hover_grid.xs.astype(np.float32), y=hover_grid.ys.astype(np.float32),
        z=hover_grid.loss.astype(np.float32), name="click", opacity=0, showscale=False, meta=tiles("xy"),
        hovertemplate=(f"{labels['x']}: %{{x:.2f}}<br>{labels['y']}: %{{y:.2f}}<br>{labels['loss']}: "
                       f"%{{z:.4g}}<br><i>{labels['click']}</i><extra></extra>")), row=1, col=1)
    mins = np.asarray(minima)
    fig.add_trace(go.Scatter(
        x=mins[:, 0], y=mins[:, 1], mode="markers", name=labels["minimum"],
        marker=dict(symbol="star", size=16, color="white", line=dict(color="black", width=1.5)),
        hovertemplate=f"{labels['minimum']} (%{{x:.3f}}, %{{y:.3f}})<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Scatter(
        x=[start[0]], y=[start[1]], mode="markers", name=labels["start"],
        marker=dict(symbol="circle", size=13, color="white", line=dict(color="black", width=2)),
        hovertemplate=f"{labels['start']} (%{{x:.3f}}, %{{y:.3f}})<extra></extra>"), row=1, col=1)


def _path_traces(trajs, names: Mapping[str, str], s: int) -> list[go.Scatter]:
    """For every racer: the trail up to step s and its current position (the moving head)."""
    traces = []
    for tr in trajs:
        trail = _trail(tr.path, s)                                      # (k, 2)
        traces.append(go.Scatter(x=trail[:, 0], y=trail[:, 1], mode="lines", line=dict(color=colour(tr.name),
                                 width=2.5), name=names[tr.name], legendgroup=tr.name, hoverinfo="skip"))
    for tr in trajs:
        k = min(s, tr.n_steps)
        traces.append(go.Scatter(
            x=[tr.path[k, 0]], y=[tr.path[k, 1]], mode="markers", legendgroup=tr.name, showlegend=False,
            marker=dict(size=11, color=colour(tr.name), line=dict(color="white", width=1.5)),
            hovertemplate=f"{names[tr.name]}<br>t = {k}<br>(%{{x:.4f}}, %{{y:.4f}})<extra></extra>"))
    return traces


def _fit_traces(trajs, names, s: int, fit_x: np.ndarray) -> list[go.Scatter]:
    """Line-fit panel: each racer's current line w x + b at step s."""
    xs = np.array([fit_x.min() - 0.5, fit_x.max() + 0.5])
    out = []
    for tr in trajs:
        w, b = tr.path[min(s, tr.n_steps)]
        out.append(go.Scatter(x=xs, y=w * xs + b, mode="lines", line=dict(color=colour(tr.name), width=2),
                              legendgroup=tr.name, showlegend=False,
                              hovertemplate=f"{names[tr.name]}: y = {w:.3f} x + {b:.3f}<extra></extra>"))
    return out


def race_figure(grid, hover_grid, trajs: Sequence, names: Mapping[str, str], labels: Mapping[str, str], *,
                x_range, y_range, minima, start, log_levels: bool = True,
                fit: tuple[np.ndarray, np.ndarray] | None = None,
                n_frames: int = 40, frame_ms: int = 60, height: int = 620) -> go.Figure:
    """The surface (grid: a fine SurfaceGrid, drawn as a banded picture) with every trajectory, animated: play /
    pause buttons and a step slider. hover_grid (a coarse SurfaceGrid) is an invisible heatmap whose cells show the
    loss on hover and can be clicked (the chart element's selection, x and y of the cell's centre) to choose a start
    point.

    The full paths are drawn faintly; the frames move each racer's head and redraw its trail up to that step.
    fit=(x, y) adds a second panel with the data points and each racer's current line (the line-fit surface).
    The figure opens on the last frame (the whole race); Play replays it from step 0.
    """
    cols = 2 if fit is not None else 1
    fig = make_subplots(rows=1, cols=cols, column_widths=[0.6, 0.4] if fit is not None else None,
                        subplot_titles=(labels["contour_title"], labels["fit_title"]) if fit is not None else None,
                        horizontal_spacing=0.23)  # (the gap holds the surface's colour bar)
    _static_traces(fig, grid, hover_grid, x_range, y_range, minima, start, labels, log_levels, in_gap=fit is not None)
    faint = list(range(len(fig.data), len(fig.data) + len(trajs)))       # the full paths' traces, in racer order
    for tr in trajs:
        fig.add_trace(go.Scatter(x=tr.path[:, 0], y=tr.path[:, 1], mode="lines", opacity=0.3, hoverinfo="skip",
                                 line=dict(color=colour(tr.name), width=1.5), showlegend=False,
                                 legendgroup=tr.name), row=1, col=1)
    if fit is not None:
        fx, fy = fit
        # white with a black outline, as the minimum and the start: seen on the light and the dark theme alike
        fig.add_trace(go.Scatter(x=fx, y=fy, mode="markers", name=labels["data"],
                                 marker=dict(size=11, color="white", symbol="x", line=dict(color="black", width=1))),
                      row=1, col=2)
    n_static = len(fig.data)
    n_max = max((tr.n_steps for tr in trajs), default=0)
    for trace in _path_traces(trajs, names, n_max):
        fig.add_trace(trace, row=1, col=1)
    if fit is not None:
        for trace in _fit_traces(trajs, names, n_max, fit[0]):
            fig.add_trace(trace, row=1, col=2)
    steps = frame_steps(n_max, n_frames)
    # every trace is in every frame, the static ones unchanged ({}): plotly recomputes all traces when it animates
    # but re-plots only those of the frame, and a click on a trace left un-plotted fails (no start point after Play)
    unchanged = [{} for _ in range(n_static)]
    # the frames a play passes through carry thinner trails (FRAME_TRAIL_POINTS); the last frame, where a play stops,
    # draws them as the figure does
    set_frames(fig, [go.Frame(data=unchanged + _frame_xy(trajs, int(s), fit,
                                                         TRAIL_POINTS if s == steps[-1] else FRAME_TRAIL_POINTS),
                               traces=list(range(len(fig.data))), name=str(int(s)), _validate=False) for s in steps])
    _animation_controls(fig, steps, labels, frame_ms)
    _race_axes(fig, x_range, y_range, labels, fit)
    top = 100 if fit is not None else 60      # room for the subplot titles under the legend
    # margins as wide as Chromium's automargin makes them (tick labels, colour bar, buttons and step slider under
    # the plot), so the browser draws this heavy figure once instead of twice
    fig.update_layout(height=height, margin=dict(l=74, r=70 if fit is not None else 100, t=top,
                                                 b=180 if fit is not None else 188), hovermode="closest",
                      legend=dict(orientation="h", yanchor="bottom", y=1.1 if fit is not None else 1.02, x=0),
                      # the legend above wraps on a narrow chart: the chart element gives its rows room first
                      meta=dict(legend_row_px=LEGEND_ROW_PX + LEGEND_GROUP_GAP_PX,
                                trail_frames=trail_frames(steps, faint, n_static, fit),
                                after_paint=list(AFTER_PAINT)), dragmode="pan",
                      title=dict(text=labels.get("title", "")))
    return fig


def trail_frames(steps: np.ndarray, faint: list[int], first: int, fit) -> dict:
    """How every frame follows from the figure's own faint full paths (traces `faint`, in racer order), so the chart
    element can make the frames in the browser instead of receiving them (two thirds of the figure's bytes, sent on
    every page switch). Frame s (named str(s)) updates every trace: the `first` static ones unchanged ({}), then each
    racer's trail path[trail_indices(e, k)] with e = min(s, n - 1) for a path of n points and k = `points`
    (`last_points` in the last frame), then each racer's head path[e], then on the line-fit surface each racer's
    line y = w x + b at x = line_x, with (w, b) its head. As _frame_xy makes them (with float32 trails)."""
    line_x = None if fit is None else [float(fit[0].min() - 0.5), float(fit[0].max() + 0.5)]
    return dict(steps=[int(s) for s in steps], paths=list(faint), first=int(first), points=FRAME_TRAIL_POINTS,
                last_points=TRAIL_POINTS, line_x=line_x)


def _frame_xy(trajs, s: int, fit, points: int = TRAIL_POINTS) -> list[dict]:
    """The moving traces of one frame, coordinates only (styles stay from the figure): trails (at most `points`
    points each), heads, fit lines."""
    trails = [_trail(tr.path, s, points) for tr in trajs]                         # each (k, 2)
    heads = [tr.path[min(s, tr.n_steps)] for tr in trajs]                         # each (2,)
    data = [dict(type="scatter", x=tr[:, 0].astype(np.float32), y=tr[:, 1].astype(np.float32)) for tr in trails]
    data += [dict(type="scatter", x=[float(h[0])], y=[float(h[1])]) for h in heads]
    if fit is not None:
        xs = np.array([fit[0].min() - 0.5, fit[0].max() + 0.5])
        data += [dict(type="scatter", x=xs, y=w * xs + b) for w, b in heads]
    return data


def _animation_controls(fig: go.Figure, steps: np.ndarray, labels, frame_ms: int) -> None:
    play = dict(frame=dict(duration=frame_ms, redraw=False), transition=dict(duration=0), fromcurrent=False,
                mode="immediate")
    pause = dict(frame=dict(duration=0, redraw=False), transition=dict(duration=0), mode="immediate")
    fig.update_layout(
        updatemenus=[dict(type="buttons", direction="left", x=0, y=-0.15, xanchor="left", yanchor="top",
                          pad=dict(t=0, r=10), showactive=False,
                          buttons=[dict(label="▶ " + labels["play"], method="animate", args=[None, play]),
                                   dict(label="■ " + labels["pause"], method="animate", args=[[None], pause])])],
        sliders=[dict(active=len(steps) - 1, x=0, len=1.0, y=-0.27, yanchor="top", pad=dict(t=0, b=0),
                      currentvalue=dict(prefix=labels["step"] + labels.get("colon", ": "), visible=True, xanchor="right"),
                      steps=[dict(label=str(int(s)), method="animate",
                                  args=[[str(int(s))], dict(mode="immediate", frame=dict(duration=0, redraw=False),
                                                            transition=dict(duration=0))]) for s in steps])])


def _race_axes(fig, x_range, y_range, labels, fit) -> None:
    fig.update_xaxes(title_text=labels["x"], range=list(x_range), row=1, col=1, showgrid=False, zeroline=False)
    fig.update_yaxes(title_text=labels["y"], range=list(y_range), row=1, col=1, showgrid=False, zeroline=False)
    if fit is not None:
        fx, fy = fit
        fig.update_xaxes(title_text=labels["fit_x"], range=[fx.min() - 0.5, fx.max() + 0.5], row=1, col=2)
        # the fitted line's y axis on its right: the gap between the panels holds the surface's colour bar
        fig.update_yaxes(title_text=labels["fit_y"], range=[min(fy.min(), 0) - 2, fy.max() + 3], row=1, col=2,
                         side="right")


# ---------------------------------------------------------------- curves over the steps
def _add_divergence_mark(fig, tr, x: int, y: float, label: str, **where) -> None:
    fig.add_trace(go.Scatter(x=[x], y=[y], mode="markers", marker=dict(symbol="x", size=12, color=colour(tr.name)),
                             legendgroup=tr.name, showlegend=False, name=label,
                             hovertemplate=f"{label}: t = {x}<extra></extra>"), **where)


def _over_steps(t: np.ndarray, y: np.ndarray) -> dict:
    """A curve's x and y as the figure carries them: steps 0, 1, ..., n as x0 = 0, dx = 1, not an array of steps
    that every visit of the page would send. Other steps stay an array."""
    if np.array_equal(t, np.arange(len(t))):
        return dict(x0=0, dx=1, y=y)
    return dict(x=t, y=y)


def curves_figure(trajs: Sequence, names: Mapping[str, str], f_min: float, distances: Mapping[str, np.ndarray],
                  labels: Mapping[str, str]) -> go.Figure:
    """Two panels over the same steps t, one legend: the loss above the minimum f(theta_t) - f* (top) and the
    distance ||theta_t - theta*|| to the nearest minimum (bottom), both on log axes. A racer whose loss overflowed
    ends at its last finite value, with a crossed mark. One figure, not two side by side: the steps line up, a
    phone shows one legend, and the browser lays out one chart instead of two on every visit."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.14,
                        subplot_titles=(labels["loss_title"], labels["dist_title"]))
    for tr in trajs:
        gap = np.maximum(tr.loss - f_min, LOG_FLOOR)                     # (n + 1,), inf where it overflowed
        ok = np.isfinite(gap)
        t = np.arange(len(gap))
        fig.add_trace(go.Scatter(**_over_steps(t[ok], gap[ok]), mode="lines", name=names[tr.name],
                                 legendgroup=tr.name, line=dict(color=colour(tr.name), width=2),
                                 hovertemplate="%{y:.3e}"), row=1, col=1)
        d = np.maximum(distances[tr.name], LOG_FLOOR)                    # (n + 1,)
        fig.add_trace(go.Scatter(**_over_steps(np.arange(len(d)), d), mode="lines", name=names[tr.name],
                                 legendgroup=tr.name, showlegend=False, line=dict(color=colour(tr.name), width=2),
                                 hovertemplate="%{y:.3e}"), row=2, col=1)
        if tr.diverged_at is not None:
            if ok.any():
                _add_divergence_mark(fig, tr, int(t[ok][-1]), float(gap[ok][-1]), labels["diverged"], row=1, col=1)
            _add_divergence_mark(fig, tr, len(d) - 1, float(d[-1]), labels["diverged"], row=2, col=1)
    fig.update_yaxes(type="log", exponentformat="power")
    fig.update_yaxes(title_text=labels["loss_gap"], row=1, col=1)
    fig.update_yaxes(title_text=labels["distance"], row=2, col=1)
    fig.update_xaxes(title_text=labels["step"], row=2, col=1)
    # margins as wide as Chromium's automargin makes them (log tick labels, the legend below): the browser draws
    # once. The legend sits at the figure's bottom edge, in pixels: under the axis title at every width (placed at a
    # fraction of the plot's height, its first row fell on the title)
    fig.update_layout(height=CURVES_HEIGHT, margin=dict(l=86, r=24, t=40, b=125), hovermode="x unified",
                      legend=dict(orientation="h", yref="container", yanchor="bottom", y=0, x=0))
    return fig


def step_size_figure(trajs: Sequence, names: Mapping[str, str], labels: Mapping[str, str]) -> go.Figure:
    """2 x 2 panels: rows = coordinate (x, y); columns = effective learning rate, length of the step taken."""
    fig = make_subplots(rows=2, cols=2, shared_xaxes=True, vertical_spacing=0.1, horizontal_spacing=0.1,
                        subplot_titles=(f"{labels['eff_lr']} ({labels['x']})", f"|Δθ| ({labels['x']})",
                                        f"{labels['eff_lr']} ({labels['y']})", f"|Δθ| ({labels['y']})"))
    for tr in trajs:
        t = np.arange(1, tr.n_steps + 1)
        for row in (1, 2):
            for col, values in ((1, tr.eff_lr[:, row - 1]), (2, np.abs(tr.deltas[:, row - 1]))):
                fig.add_trace(go.Scatter(
                    x=t, y=np.maximum(values, LOG_FLOOR), mode="lines", name=names[tr.name], legendgroup=tr.name,
                    showlegend=(row, col) == (1, 1), line=dict(color=colour(tr.name), width=2),
                    hovertemplate=f"{names[tr.name]}: %{{y:.3e}}<extra></extra>"), row=row, col=col)
    fig.update_yaxes(type="log", exponentformat="power")
    fig.update_xaxes(title_text=labels["step"], row=2)
    fig.update_layout(height=560, margin=dict(l=10, r=10, t=70, b=10),
                      legend=dict(orientation="h", yanchor="bottom", y=1.06, x=0))
    return fig


# Which buffers to draw for each optimizer, as (panel, [(state key, dash)]) rows below the gradient row.
STATE_ROWS = {
    "sgd": [],
    "momentum": [("velocity", [("velocity", "solid")])],
    "adagrad": [("sum_sq", [("sum_sq", "solid")])],
    "rmsprop": [("square_avg", [("square_avg", "solid")])],
    "adam": [("m", [("m", "dot"), ("m_hat", "solid")]), ("v", [("v", "dot"), ("v_hat", "solid")])],
    "adamw": [("m", [("m", "solid")]), ("v", [("v", "dot"), ("v_hat", "solid")])],
    "nadam": [("m", [("m", "solid")]), ("v", [("v", "dot"), ("v_hat", "solid")])],
}
LOG_STATES = {"sum_sq", "square_avg", "v"}    # positive buffers: log axis


def state_figure(tr, state_names: Mapping[str, str], labels: Mapping[str, str]) -> go.Figure:
    """One racer's inner state over the steps: gradient, its buffers, effective learning rate; one panel each.

    Colour = coordinate (x blue, y orange); in a panel with two buffers the dotted one is before bias correction.
    """
    rows = [("grad", [("grad", "solid")])] + STATE_ROWS[tr.name] + [("eff_lr", [("eff_lr", "solid")])]
    fig = make_subplots(rows=len(rows), cols=1, shared_xaxes=True, vertical_spacing=0.07,
                        subplot_titles=[" / ".join(state_names[k] for k, _ in keys) for _, keys in rows])
    t = np.arange(1, tr.n_steps + 1)
    series = {"grad": tr.grads, "eff_lr": tr.eff_lr, **tr.state}
    for r, (panel, keys) in enumerate(rows, start=1):
        for key, dash in keys:
            for c, coord in enumerate((labels["x"], labels["y"])):
                fig.add_trace(go.Scatter(
                    x=t, y=series[key][:, c], mode="lines", name=coord, showlegend=r == 1,
                    line=dict(color=LINE_COLOURS[c], dash=dash, width=2), legendgroup=str(c),
                    hovertemplate=f"{state_names[key]} ({coord}): %{{y:.4g}}<extra></extra>"), row=r, col=1)
        if panel in LOG_STATES or panel == "eff_lr":
            fig.update_yaxes(type="log", exponentformat="power", row=r, col=1)
    fig.update_xaxes(title_text=labels["step"], row=len(rows), col=1)
    fig.update_layout(height=120 + 200 * len(rows), margin=dict(l=10, r=10, t=70, b=10),
                      title=dict(text=labels["state_title"]),
                      legend=dict(orientation="h", y=1.0, x=1, xanchor="right", yanchor="bottom"))
    return fig


# ---------------------------------------------------------------- schedules
def schedule_figure(curves: Mapping[str, np.ndarray], chosen: str, labels: Mapping[str, str]) -> go.Figure:
    """Learning rate against the step for every schedule (label -> (steps,)); the chosen one drawn bold."""
    fig = go.Figure()
    for i, (name, lr) in enumerate(curves.items()):
        bold = name == chosen
        fig.add_trace(go.Scatter(x=np.arange(1, len(lr) + 1), y=lr, mode="lines", name=name,
                                 line=dict(color=LINE_COLOURS[i], width=4 if bold else 1.5,
                                           dash="solid" if bold else "dot")))
    fig.update_layout(title=dict(text=labels["sched_title"]), height=340, margin=dict(l=10, r=10, t=50, b=10),
                      hovermode="x unified")
    fig.update_xaxes(title_text=labels["step"])
    fig.update_yaxes(title_text=labels["lr"], rangemode="tozero")
    return fit_margins_legend_below(fig)


def transformer_schedule_figure(steps: np.ndarray, curves: Mapping[str, np.ndarray],
                                labels: Mapping[str, str]) -> go.Figure:
    """The paper's lr = d_model^-0.5 min(t^-0.5, t warmup^-1.5) for a few (d_model, warmup) pairs."""
    fig = go.Figure()
    for i, (name, lr) in enumerate(curves.items()):
        fig.add_trace(go.Scatter(x=steps, y=lr, mode="lines", name=name, line=dict(color=LINE_COLOURS[i], width=2)))
    fig.update_layout(title=dict(text=labels["paper_title"]), height=340, margin=dict(l=10, r=10, t=50, b=10),
                      hovermode="x unified")
    fig.update_xaxes(title_text=labels["step"])
    fig.update_yaxes(title_text=labels["lr"], rangemode="tozero", exponentformat="e")
    return fit_margins_legend_below(fig)
