"""A tap (a phone, 390 px wide) or a click (1024 px) on a tile of the Attention page's clickable maps opens exactly
the head under the finger or pointer (tapping layer 3 head 5 of the grid opened layer 4 head 6; the
invisible click targets were bigger than the tiles and overlapped). The point tapped is computed from the figure
itself: the heatmap's cell edges (plotly's calcdata) through its axes (c2p), the tile's centre or a point near one
of its corners."""
from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.browser.conftest import assert_no_exception, chosen, screenshot, wait_done

pytestmark = pytest.mark.browser

N_LAYERS, N_HEADS = 6, 12  # the default model's
# (layer, head, where in the tile: fraction of its width, of its height from its first head / layer edge): centres
# and points near a corner (a phone's 13 px cell: 2 px inside it)
TARGETS = {390: [(3, 5, 0.5, 0.5), (0, 0, 0.5, 0.5), (4, 9, 0.15, 0.15), (3, 5, 0.85, 0.85), (5, 11, 0.85, 0.15)],
           1024: [(3, 5, 0.5, 0.5), (4, 9, 0.5, 0.06), (3, 5, 0.06, 0.5), (3, 5, 0.94, 0.94), (0, 11, 0.94, 0.06)]}

_TILE = """([layer, head, fx, fy, nl, nh]) => {
  const gd = [...document.querySelectorAll("[data-testid='stMain'] .js-plotly-plot")]
    .find((g) => g.calcdata && (g._fullData || []).some((t) => t.type === "heatmap"));
  if (!gd || !gd._fullLayout) return null;
  gd.scrollIntoView({ block: "center" });
  const i = gd._fullData.findIndex((t) => t.type === "heatmap"), cd = gd.calcdata[i][0];
  const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
  const rows = cd.z.length, cols = cd.z[0].length, sy = rows / nl, sx = cols / nh;
  if (sy !== Math.round(sy) || sx !== Math.round(sx)) return { error: `${rows} x ${cols} cells` };
  const x0 = xa.l2p(xa.c2l(cd.x[head * sx])), x1 = xa.l2p(xa.c2l(cd.x[(head + 1) * sx]));
  const y0 = ya.l2p(ya.c2l(cd.y[layer * sy])), y1 = ya.l2p(ya.c2l(cd.y[(layer + 1) * sy]));
  const svg = gd.querySelector(".main-svg").getBoundingClientRect();
  return { x: svg.left + xa._offset + x0 + fx * (x1 - x0), y: svg.top + ya._offset + y0 + fy * (y1 - y0),
           w: Math.abs(x1 - x0), h: Math.abs(y1 - y0) };
}"""
_DRAWN = """() => [...document.querySelectorAll("[data-testid='stMain'] .js-plotly-plot")]
  .some((g) => g._fullLayout && g.calcdata && (g._fullData || []).some((t) => t.type === "heatmap"))"""


def _tile(page, layer: int, head: int, fx: float, fy: float) -> dict:
    page.wait_for_function(_DRAWN, timeout=60_000)  # plotly draws after the script run has ended
    tile = page.evaluate(_TILE, [layer, head, fx, fy, N_LAYERS, N_HEADS])
    assert tile and "error" not in tile, tile
    return page.evaluate(_TILE, [layer, head, fx, fy, N_LAYERS, N_HEADS])  # again, once scrolled into view


def _hit(page, view: str, layer: int, head: int, fx: float, fy: float, touch: bool) -> dict | None:
    """Tap (touch) or click the tile of layer / head at (fx, fy) of it; wait for the page to leave the view. None
    when it stays (the tap hit nothing)."""
    tile = _tile(page, layer, head, fx, fy)
    if touch:
        page.touchscreen.tap(tile["x"], tile["y"])
    else:
        page.mouse.click(tile["x"], tile["y"])
    try:
        page.wait_for_function("(v) => new URLSearchParams(location.search).get('view') !== v", arg=view,
                               timeout=15_000)
    except PlaywrightTimeout:
        return None
    wait_done(page)
    return tile


def _opened(page) -> tuple[int, int]:
    """The head the page shows: its Layer / Head dropdowns, and its address where it names them (a default is left
    out of it)."""
    q = parse_qs(urlparse(page.url).query)
    assert "view" not in q, page.url  # the one-head view
    layer, head = int(chosen(page, "Layer")), int(chosen(page, "Head"))
    assert int(q.get("layer", [layer])[0]) == layer and int(q.get("head", [head])[0]) == head, page.url
    return layer, head


def _each_tile_opens_its_head(open_page, view: str, width: int, touch: bool) -> None:
    wrong = []
    for n, (layer, head, fx, fy) in enumerate(TARGETS[width]):
        page = open_page(f"/?view={view}&lang=en", width=width, height=844 if touch else 1000, touch=touch)
        assert_no_exception(page)
        tile = _hit(page, view, layer, head, fx, fy, touch)
        where = f"layer {layer} head {head} at ({fx}, {fy}) of its tile"
        if tile is None:
            wrong.append(f"{where}: nothing opened")
            continue
        got = _opened(page)
        if got != (layer, head):
            wrong.append(f"{where} ({tile['w']:.0f} x {tile['h']:.0f} px) opened layer {got[0]} head {got[1]}")
        if n == 0 and touch:
            screenshot(page, f"taps-{view}-{width}-opened")
        assert_no_exception(page)
        page.context.close()
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("view", ["grid", "stats"])
def test_phone_tap_opens_the_tapped_head(open_page, view):
    """390 px wide, a finger: every tapped tile opens its own head, layer 3 head 5 among them."""
    _each_tile_opens_its_head(open_page, view, 390, touch=True)


@pytest.mark.parametrize("view", ["grid", "stats"])
def test_mouse_click_opens_the_clicked_head(open_page, view):
    """1024 px wide, a mouse: the same, where the old targets already overlapped."""
    _each_tile_opens_its_head(open_page, view, 1024, touch=False)


# JS: the client point of the race figure's click grid (its invisible heatmap) at cell (row, col), near a corner
_RACE_CELL = """([row, col, fx, fy]) => {
  const gd = document.querySelector(".st-key-optimizers-race_chart .js-plotly-plot");
  if (!gd || !gd._fullLayout || !gd.calcdata) return null;
  gd.scrollIntoView({ block: "center" });
  const i = gd._fullData.findIndex((t) => t.type === "heatmap"), cd = gd.calcdata[i][0];
  const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
  const svg = gd.querySelector(".main-svg").getBoundingClientRect();
  const px = (a, edges, k, f) => a._offset + a.l2p(a.c2l(edges[k])) * (1 - f) + a.l2p(a.c2l(edges[k + 1])) * f;
  return { x: svg.left + px(xa, cd.x, col, fx), y: svg.top + px(ya, cd.y, row, fy), cx: gd._fullData[i].x[col],
           cy: gd._fullData[i].y[row], n: cd.z.length };
}"""


def test_phone_tap_on_the_race_sets_the_start_to_the_tapped_cell(open_page):
    """Optimizers, 390 px, a finger: a tap near a corner of a cell of the race figure's click grid starts the race
    at that cell's centre (what its hover label shows), not at a neighbour's."""
    page = open_page("/optimizers?lang=en&surface=bowl", width=390, height=844, touch=True)
    page.wait_for_function("() => { const g = document.querySelector('.st-key-optimizers-race_chart .js-plotly-plot');"
                           " return !!(g && g.calcdata); }", timeout=60_000)
    for row, col, fx, fy in ((15, 17, 0.1, 0.9), (4, 3, 0.9, 0.1)):
        page.evaluate(_RACE_CELL, [row, col, fx, fy])  # scrolled into view first
        cell = page.evaluate(_RACE_CELL, [row, col, fx, fy])
        assert cell and cell["n"] == 21, cell
        page.touchscreen.tap(cell["x"], cell["y"])
        want = (round(cell["cx"], 3), round(cell["cy"], 3))
        page.wait_for_function("""(w) => {
            const v = [...document.querySelectorAll("[data-testid='stNumberInput'] input")].slice(0, 2)
              .map((e) => parseFloat(e.value));
            return Math.abs(v[0] - w[0]) < 1e-3 && Math.abs(v[1] - w[1]) < 1e-3; }""",
                               arg=list(want), timeout=15_000)
        wait_done(page)
        start = page.locator("[data-testid='stNumberInput'] input").evaluate_all(
            "els => els.slice(0, 2).map(e => parseFloat(e.value))")
        assert start == pytest.approx(list(want), abs=1e-3), (start, want)
        assert_no_exception(page)
    screenshot(page, "taps-race-390")
