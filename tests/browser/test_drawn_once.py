"""Charts the browser draws once: on these pages every figure's margins already hold its labels
(viz_core.plots.common.reserve_margins / fit_margins), so plotly's automargin has nothing to push and does not draw
a figure a second time. Seen from plotly's own layout: the margins it drew with equal the ones the figure asked for."""
from __future__ import annotations

import pytest

from tests.browser.conftest import assert_no_exception, charts_drawn, wait_done

pytestmark = pytest.mark.browser

# page address -> (charts on it, how many of them from the top are checked: figures whose legend sits in a margin
# the figure sets, above the plot or under the axis title, and the figures of panels side by side, Train's curves and
# the Language model's two played maps, through viz_core.plots.common.fit_panel_margins)
PAGES = {"/scaling?lang=en": (3, 3), "/mechanics?lang=en": (7, 7), "/anatomy?lang=zh": (4, 4),
         "/optimizers?lang=en": (2, 2), "/?lang=en": (1, 1), "/positions?lang=zh&part=waves": (2, 2),
         "/language_model?lang=en": (3, 3), "/train?lang=zh": (1, 1)}

_PUSHED = """() => [...document.querySelectorAll("[data-testid='stMain'] .js-plotly-plot")].map(gd => {
  const m = gd.layout.margin || {}, s = gd._fullLayout._size;
  return ['l', 'r', 't', 'b'].filter(k => Math.round(s[k]) > (m[k] ?? 0))
    .map(k => `${k}: ${m[k]} -> ${Math.round(s[k])}`)
    .join(', ');
})"""


# every page on a phone too, where legends wrap into rows (viz_core.plots.common.legend_rows: plotly's own rule) and
# the margin beside them holds them all; and the Language model at 1280 px, where its two panels side by side wrap
# their legends above the plot. Optimizers' race has its legend of racers above the plot: the chart element gives
# the rows it wraps into room before the first draw (meta.legend_row_px, app_pages/_ui/chart.py), 4 rows on a phone,
# 3 on the line-fit surface's two panels, 2 at 1000 px beside the sidebar, 1 at 1400 px.
PHONE = 390
WIDTHS = {address: (1400, PHONE) for address in PAGES} | {"/language_model?lang=en": (1400, 1280, PHONE),
                                                           "/language_model?lang=zh": (PHONE,),
                                                           "/scaling?lang=zh": (PHONE,),
                                                           "/positions?lang=en&part=waves": (PHONE,),
                                                           "/optimizers?lang=en": (1400, 1000, PHONE),
                                                           "/optimizers?lang=zh&surface=line_fit": (PHONE, 1000)}


@pytest.mark.parametrize("address, width", [(a, w) for a, ws in WIDTHS.items() for w in ws])
def test_no_margin_is_pushed_after_the_first_draw(open_page, address, width):
    path = address.split("?")[0]  # PAGES names each page once, in one language
    n, checked = next(charts for named, charts in PAGES.items() if named.split("?")[0] == path)
    page = open_page(address, width=width)
    assert_no_exception(page)
    assert charts_drawn(page, n) >= n
    pushed = page.evaluate(_PUSHED)
    assert len(pushed) >= n and not any(pushed[:checked]), pushed


_RACE = """() => { const gd = document.querySelector('.st-key-optimizers-race_chart .js-plotly-plot');
  return [Math.round(gd._fullLayout.width), gd.layout.margin.t, Math.round(gd._fullLayout._size.t)]; }"""


def test_the_race_legend_gets_its_rows_room_again_when_the_window_changes(open_page):
    """A window made narrow and then wide again: the race's top margin follows the rows of its legend (4 on a phone,
    1 at 1400 px) as the chart is resized, never widened by plotly."""
    page = open_page("/optimizers?lang=en", width=1400)
    assert charts_drawn(page, 2) >= 2
    wide = page.evaluate(_RACE)
    assert wide[1] == wide[2], wide
    page.set_viewport_size({"width": PHONE, "height": 1000})
    page.wait_for_function(f"() => ({_RACE})()[0] < {PHONE}", timeout=30_000)
    narrow = page.evaluate(_RACE)
    assert narrow[1] == narrow[2] > wide[1], narrow  # more rows, their room given, nothing pushed
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.wait_for_function(f"() => ({_RACE})()[0] > {wide[0] - 2}", timeout=30_000)
    assert page.evaluate(_RACE)[1:] == wide[1:]  # one row again: no empty band above the plot
    assert_no_exception(page)


# JS (before the page's own scripts): once plotly.js is in, records what the race chart shows when its first draw is
# done (legend, colour bar), and the plot's box before and after each later update of the figure
_FIRST_DRAW = """(() => { window.__race = { drawn: [], updated: [] };
  const race = (gd) => gd.closest && gd.closest('.st-key-optimizers-race_chart');
  const box = (gd) => JSON.stringify(gd._fullLayout._size);
  const wrap = (P) => {
    const draw = P.newPlot, update = P.update;
    P.newPlot = function (gd) { return draw.apply(this, arguments).then((r) => {
      if (race(gd)) window.__race.drawn.push({ legend: !!gd.querySelector('.legend'),
                                               bar: !!gd.querySelector('.colorbar') });
      return r; }); };
    P.update = function (gd) { const before = race(gd) && box(gd); return update.apply(this, arguments).then((r) => {
      if (before) window.__race.updated.push([before, box(gd)]);
      return r; }); }; };
  let plotly;
  Object.defineProperty(window, 'Plotly', { configurable: true, get: () => plotly,
    set: (P) => { plotly = P; if (P && P.newPlot) wrap(P); } }); })()"""
_NOW = """() => { const gd = document.querySelector('.st-key-optimizers-race_chart .js-plotly-plot');
  return { legend: gd.querySelectorAll('.legend .traces').length, bar: !!gd.querySelector('.colorbar .cbtitle') }; }"""


# the legend: the minimum, the start and the five racers (and the data points, on the line-fit surface)
@pytest.mark.parametrize("address, width, entries", [("/optimizers?lang=en", 1400, 7), ("/optimizers?lang=zh", PHONE, 7),
                                                     ("/optimizers?lang=en&surface=line_fit", PHONE, 8)])
def test_the_race_legend_and_colour_bar_come_after_its_first_paint_and_move_nothing(browser, server_url, address,
                                                                                    width, entries):
    """The race's legend and colour bar are drawn just after its first paint (layout.meta.after_paint): the first draw
    has neither, and when they come (one update of the figure) the plot keeps its box, to the pixel: the margins held
    their room."""
    ctx = browser.new_context(viewport={"width": width, "height": 1000})
    try:
        ctx.add_init_script(_FIRST_DRAW)
        page = ctx.new_page()
        page.goto(server_url + address, wait_until="domcontentloaded")
        wait_done(page)
        assert charts_drawn(page, 2) >= 2
        seen = page.evaluate("() => window.__race")
        assert len(seen["drawn"]) == 1 and not seen["drawn"][0]["legend"] and not seen["drawn"][0]["bar"], seen
        assert len(seen["updated"]) == 1 and seen["updated"][0][0] == seen["updated"][0][1], seen
        now = page.evaluate(_NOW)
        assert now["legend"] == entries and now["bar"], now
        assert_no_exception(page)
    finally:
        ctx.close()
