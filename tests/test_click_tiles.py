"""Clickable maps resolve a click to the tile under it: every layer x head map (grid, statistics, sinks,
head scores, importance) and the ranking's bars mark their point trace with viz_core.plots.common.tiles(), and the
chart element's browser side (app_pages/_ui/chart.py, tileAt, run here in Node on the figure's own data and a stand-in
for plotly's axes) finds the tile under a point anywhere in it: centre, edges, corners, tiny tiles (a phone's 13 px
cells) and wide ones. The browser test (tests/browser/test_taps.py) taps the real pages."""
from __future__ import annotations

import json
import shutil
import subprocess

import numpy as np
import plotly.io as pio
import pytest

from app_pages._ui import chart
from viz_core.plots import attention, compare, importance
from viz_core.plots.common import tiles
from viz_core.pretrained.compare import Ranked

L, H = 6, 12
FRACTIONS = (0.02, 0.5, 0.98)  # where in a tile: near one edge, the centre, near the other


def _grid():
    return attention.model_grid(np.random.default_rng(0).random((L, H, 8, 8)), thumb=4)


def _stats():
    return attention.stats_map(np.random.default_rng(1).random((L, H)), title="t", value_name="v",
                               layer_label="layer", head_label="head", selected=(3, 5))


def _importance():
    return importance.importance_map(np.random.default_rng(2).normal(size=(L, H)), title="t", value_name="v",
                                     layer_label="layer", head_label="head", selected=(3, 5))


def _bars():
    ranked = Ranked(layer=np.arange(12) % L, head=(np.arange(12) * 5) % H, distance=np.linspace(1, 0.001, 12))
    return compare.ranking_bars(ranked, title="t", value="v", layer_label="layer", head_label="head")


MAPS = {"grid": _grid, "stats": _stats, "importance": _importance}

_NODE = r"""
const [js, spec] = JSON.parse(require("fs").readFileSync(0, "utf8"));
const tileAt = new Function(js + "\nreturn tileAt;")();
function axis(a, y) {  // plotly's axis as tileAt uses it: c2p in px from _offset (range[0] at the left / bottom)
  const [r0, r1] = a.range, cats = a.categories;
  return { _offset: a.offset, _length: a.length, d2c: (d) => (cats ? cats.indexOf(d) : d),
           c2p: (c) => (y ? (r1 - c) / (r1 - r0) : (c - r0) / (r1 - r0)) * a.length };
}
const layout = { xaxis: axis(spec.xaxis, false), yaxis: axis(spec.yaxis, true) };
const gd = { data: spec.data, _fullLayout: layout, querySelector: () => ({ getBoundingClientRect: () => ({ left: 7, top: 11 }) }),
  _fullData: spec.data.map((t) => Object.assign({ xaxis: "x", yaxis: "y", visible: true }, t)) };
console.log(JSON.stringify(spec.clicks.map(([x, y]) => tileAt(gd, { clientX: 7 + x, clientY: 11 + y }))));
"""


def _tile_js() -> str:
    """tileAt and what it needs, cut from the element's script."""
    start, end = chart.JS.find("const plain ="), chart.JS.find("function listenTaps")
    assert start >= 0 and end > start, "the chart element has no tileAt"
    return chart.JS[start:end]


def _resolve(fig, xaxis: dict, yaxis: dict, clicks: list[tuple[float, float]]) -> list[dict | None]:
    if not shutil.which("node"):
        pytest.skip("node is not installed")
    data = json.loads(pio.to_json(fig, validate=False))["data"]
    for t in data:  # plotly.js decodes numpy's binary arrays ("bdata") itself; here: plain lists
        for k in ("x", "y", "z", "customdata"):
            if isinstance(t.get(k), dict) and "bdata" in t[k]:
                t[k] = np.asarray(getattr(fig.data[data.index(t)], k)).tolist()
    spec = dict(data=data, xaxis=xaxis, yaxis=yaxis, clicks=clicks)
    out = subprocess.run(["node", "-e", _NODE], input=json.dumps([_tile_js(), spec]), capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _tiled(fig) -> int:
    marked = [i for i, t in enumerate(fig.data) if t.meta]
    assert len(marked) == 1 and fig.data[marked[0]].meta == tiles("xy" if fig.data[0].type == "heatmap" else "y")
    return marked[0]


def test_tiles_names_the_axes_of_the_lattice():
    assert tiles() == {"tiles": "xy"} and tiles("y") == {"tiles": "y"}
    with pytest.raises(ValueError):
        tiles("z")


@pytest.mark.parametrize("name", sorted(MAPS))
@pytest.mark.parametrize("px", [(13, 43), (24, 24), (60, 48)])  # a tile's width, height: a phone's to a desktop's
def test_a_click_anywhere_in_a_tile_opens_its_head(name, px):
    fig = MAPS[name]()
    curve = _tiled(fig)
    assert curve == 1  # the curve the pages read (attention.open_head, heads._clicked, importance._open_on_click)
    s = 4 if name == "grid" else 1  # data units per tile (the grid: 4 x 4 thumbnails)
    w, h = px
    xaxis = dict(range=[-0.5, H * s - 0.5], offset=30, length=H * w)
    yaxis = dict(range=[L * s - 0.5, -0.5], offset=50, length=L * h)  # layer 0 at the top
    cells = [(layer, head) for layer in range(L) for head in range(H)]
    clicks = [(30 + (head + fx) * w, 50 + (layer + fy) * h) for layer, head in cells for fx in FRACTIONS
              for fy in FRACTIONS]
    got = _resolve(fig, xaxis, yaxis, clicks)
    want = [layer * H + head for layer, head in cells for _ in FRACTIONS for _ in FRACTIONS]
    assert [p["point_index"] for p in got] == want
    assert {p["curve_number"] for p in got} == {curve}
    assert all(p["customdata"][:2] == [p["point_index"] // H, p["point_index"] % H] for p in got)
    off = _resolve(fig, xaxis, yaxis, [(29, 60), (40, 49), (31 + H * w, 60), (40, 51 + L * h)])
    assert off == [None] * 4  # off the plot: nothing


def test_a_tap_anywhere_in_a_bars_row_opens_its_head():
    """However short the bar: its row, across the plot (the smallest bar here is 0.1 % of the widest)."""
    fig = _bars()
    curve = _tiled(fig)
    labels = list(fig.data[curve].y)
    n = len(labels)
    xaxis = dict(range=[0, 1.18], offset=120, length=250)
    yaxis = dict(range=[n - 0.5, -0.5], offset=50, length=28 * n, categories=labels)  # the largest at the top
    clicks = [(120 + fx * 250, 50 + (i + fy) * 28) for i in range(n) for fx in (0.01, 0.5, 0.99) for fy in FRACTIONS]
    got = _resolve(fig, xaxis, yaxis, clicks)
    assert [p["point_index"] for p in got] == [i for i in range(n) for _ in range(3) for _ in FRACTIONS]
    assert all(p["y"] == labels[p["point_index"]] for p in got)


def test_a_click_anywhere_in_a_cell_of_the_race_grid_reports_the_cells_centre():
    """Optimizers' race figure: its click grid is an invisible heatmap (one picture, not a marker per point); a click
    anywhere in a cell reports that cell's centre, the start point the page sets (app_pages/optimizers.apply_click)."""
    from viz_core.lessons import optimizers as opt
    from viz_core.lessons import surfaces
    from viz_core.plots import optimizers as plots

    s = surfaces.SURFACES["bowl"]
    result = opt.race(opt.RaceConfig("bowl", s.start, 20, tuple(opt.RacerSpec(n, s.lr, ()) for n in opt.CLASSIC)))
    coarse = surfaces.surface_grid(s, 7)
    labels = {k: k for k in ("x", "y", "loss", "log_level", "minimum", "start", "click", "play", "pause", "step",
                             "contour_title", "fit_title")}
    fig = plots.race_figure(surfaces.surface_grid(s, 30), coarse, result.trajectories, {n: n for n in opt.CLASSIC},
                            labels, x_range=s.x_range, y_range=s.y_range, minima=s.minima, start=s.start)
    assert [i for i, t in enumerate(fig.data) if t.meta] == [1]  # the curve the page reads (CLICK_TRACE)
    xs, ys = coarse.xs, coarse.ys
    dx, dy = xs[1] - xs[0], ys[1] - ys[0]
    xaxis = dict(range=[xs[0] - dx / 2, xs[-1] + dx / 2], offset=60, length=7 * 50)
    yaxis = dict(range=[ys[0] - dy / 2, ys[-1] + dy / 2], offset=40, length=7 * 40)  # plotly's y grows upwards
    cells = [(r, c) for r in range(7) for c in range(7)]
    clicks = [(60 + (c + fx) * 50, 40 + (6 - r + fy) * 40) for r, c in cells for fx in FRACTIONS for fy in FRACTIONS]
    got = _resolve(fig, xaxis, yaxis, clicks)
    assert [tuple(p["point_index"]) for p in got] == [cell for cell in cells for _ in FRACTIONS for _ in FRACTIONS]
    assert all(p["curve_number"] == 1 for p in got)
    np.testing.assert_allclose([(p["x"], p["y"]) for p in got], [(xs[c], ys[r]) for r, c in cells
                                                                 for _ in FRACTIONS for _ in FRACTIONS], rtol=1e-6)


def test_tiled_maps_take_clicks_from_the_pointer_not_plotlys_hit_test():
    """The element listens to pointer events (mouse and finger alike), on the window for the release (plotly covers
    the page while a mouse button is down), and plotly selects nothing on a map of tiles."""
    js = chart.JS
    assert 'addEventListener("pointerdown"' in js and 'addEventListener("pointerup", up, true)' in js
    assert 'fig.layout.clickmode = "none"' in js


def test_a_cells_marker_fills_the_cell_less_a_border_whatever_its_count():
    """One size rule (common.cell_marker_size): the cell's shorter side (width estimated from a 700 px plot) less
    6 px, so neighbouring markers never overlap and the hover reaches the corners; 8 px at least, 60 at most."""
    from viz_core.plots.common import PLOT_WIDTH_PX, cell_marker_size
    assert PLOT_WIDTH_PX == 700
    assert cell_marker_size(12, 48) == 42           # 58 px wide, 48 tall: the height decides
    assert cell_marker_size(24, 48) == 23           # 29 px wide: the width decides
    assert cell_marker_size(200, 48) == 8           # 3.5 px cells: a marker still to hover
    assert cell_marker_size(1, 400) == 60           # one wide column: capped
    for n_cols in range(1, 40):
        for row_px in (10, 24, 44, 48, 90):
            size = cell_marker_size(n_cols, row_px)
            assert 8 <= size <= 60 and (size <= min(row_px, 700 / n_cols) - 6 or size in (8, 60))


@pytest.mark.parametrize("name, row_px, size", [("stats", 48, 42), ("importance", 44, 38), ("grid", 700 / H, 52)])
def test_every_clickable_map_sizes_its_markers_from_its_cells(name, row_px, size):
    """stats_map, importance_map and model_grid share common.clickable_cells: one marker per cell in layer-major
    order (point index = layer * heads + head) whose customdata starts [layer, head], sized by the cells' px (the
    figure's rows: its height less its margins; 700 px across H heads)."""
    fig = MAPS[name]()
    margins = {"stats": 120, "importance": 140, "grid": 140}[name]
    assert (fig.layout.height - margins) / L == pytest.approx(row_px, abs=0.5)
    markers = fig.data[_tiled(fig)]
    assert markers.marker.size == size and markers.marker.opacity == 0.0 and markers.marker.symbol == "square"
    data = np.asarray(markers.customdata)
    assert data.shape[0] == L * H and [tuple(row[:2]) for row in data.astype(int)] == [
        (layer, head) for layer in range(L) for head in range(H)]


def test_stats_and_importance_maps_carry_each_cells_value_in_the_same_hover():
    values = np.random.default_rng(1).random((L, H))
    for fig in (attention.stats_map(values, title="t", value_name="v", layer_label="layer", head_label="head"),
                importance.importance_map(values, title="t", value_name="v", layer_label="layer", head_label="head",
                                          value_format=".3f")):
        markers = fig.data[1]
        np.testing.assert_allclose(np.asarray(markers.customdata)[:, 2], values.ravel())
        assert markers.hovertemplate == ("layer %{customdata[0]} · head %{customdata[1]}<br>v: %{customdata[2]:.3f}"
                                         "<extra></extra>")
