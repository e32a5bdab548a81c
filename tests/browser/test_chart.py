"""The house chart element in Chromium (app_pages/_ui/chart.py): charts are drawn by plotly.js loaded once from the
app's static folder, in the theme's colours (Streamlit's plotly template, its placeholders replaced), redrawn in the
other theme's colours when the visitor's theme changes, as wide as their column when the window changes, with the
PNG button; charts that report clicks are the element too."""
from __future__ import annotations

import pytest

from tests.browser.conftest import CHART, assert_no_exception, charts_drawn, screenshot, wait_done
from viz_core import i18n

pytestmark = pytest.mark.browser

_LOOK = """() => [...document.querySelectorAll("[data-testid='stMain'] .js-plotly-plot")].map(gd => ({
  element: gd.classList.contains('ae-chart'), paper: gd._fullLayout.paper_bgcolor, font: gd._fullLayout.font.color,
  colorway: gd._fullLayout.colorway, width: gd._fullLayout.width,
  tick: Object.keys(gd._fullLayout).filter(k => /^xaxis[0-9]*$/.test(k))  // (an axis without tick labels has no font)
    .map(k => gd._fullLayout[k].tickfont).find(Boolean).color,
  box: Math.round(gd.parentElement.getBoundingClientRect().width),
  buttons: [...gd.querySelectorAll('.modebar-btn')].map(b => b.getAttribute('data-title'))}))"""
_APP_BACKGROUND = "() => getComputedStyle(document.querySelector('[data-testid=\"stApp\"]')).backgroundColor"


def _hex(rgb: str) -> str:
    """'rgb(14, 17, 23)' -> '#0e1117' (plotly keeps the colours as given, Streamlit's CSS gives rgb())."""
    if rgb.startswith("#"):
        return rgb.lower()
    r, g, b = (int(float(v)) for v in rgb[rgb.index("(") + 1:rgb.index(")")].split(",")[:3])
    return f"#{r:02x}{g:02x}{b:02x}"


def _settled_look(page, predicate, what: str) -> list[dict]:
    """The charts' look once `predicate(look)` holds (a redraw follows the theme or the window within moments)."""
    for _ in range(100):
        look = page.evaluate(_LOOK)
        if look and predicate(look):
            return look
        page.wait_for_timeout(100)
    raise AssertionError(f"{what}: {look}")


def _is_placeholder(colour: str) -> bool:
    return colour.lower().startswith("#0000") and len(colour) == 7


def test_charts_follow_the_theme_and_the_window(open_page):
    page = open_page("/scaling?lang=en", width=1400, height=1400)
    assert_no_exception(page)
    assert charts_drawn(page, 3) == 3
    light = page.evaluate(_LOOK)
    assert all(c["element"] for c in light)
    for c in light:  # the PNG button, and no "Share chart" (it would send the figure to Chart Studio)
        assert "Download plot as a PNG" in c["buttons"] and not any("Share" in b for b in c["buttons"]), c["buttons"]
    background = _hex(page.evaluate(_APP_BACKGROUND))
    for c in light:
        assert _hex(c["paper"]) == background
        assert not any(map(_is_placeholder, [c["font"], c["tick"], *c["colorway"]])), c
        assert abs(c["width"] - c["box"]) <= 1, c  # as wide as its column
    screenshot(page, "chart-element-light")

    page.emulate_media(color_scheme="dark")  # the visitor's system theme changes: Streamlit follows it
    dark = _settled_look(page, lambda look: all(c["paper"] != light[0]["paper"] for c in look), "no redraw in dark")
    background = _hex(page.evaluate(_APP_BACKGROUND))
    for before, c in zip(light, dark):
        assert _hex(c["paper"]) == background and c["font"] != before["font"]
        assert not any(map(_is_placeholder, [c["font"], c["tick"], *c["colorway"]])), c
    screenshot(page, "chart-element-dark")

    page.set_viewport_size({"width": 900, "height": 1400})
    narrow = _settled_look(page, lambda look: all(abs(c["width"] - c["box"]) <= 1 and c["width"] < b["width"]
                                                  for b, c in zip(dark, look)), "width did not follow the window")
    assert len(narrow) == 3
    assert_no_exception(page)


def test_every_chart_is_the_element_clickable_ones_included(open_page):
    """Optimizers' race figure reports clicks (they set the start point: tests/browser/test_optimizers.py): it is the
    house element too, so no page makes the browser load Streamlit's own plotly bundle as well."""
    page = open_page("/optimizers?lang=en")
    assert charts_drawn(page, 2) == 2
    assert [c["element"] for c in page.evaluate(_LOOK)] == [True, True]  # race (clickable); loss and distance
    assert page.locator(CHART).count() == 2 and page.locator("[data-testid='stPlotlyChart']").count() == 0
    assert_no_exception(page)


def test_plotly_js_is_loaded_once_per_tab_gzipped_and_kept_by_the_browser(browser, server_url):
    """The page's HTML asks for plotly.js with its own scripts (rel=preload, chart.head_tags), and it is run once (one
    script element, whichever of the page's load event, the hidden preloader or a chart comes first); the server
    sends its gzipped copy (chart.PlotlyAsset) with a year's caching, at an address that names plotly's version; a
    page switch asks for it no more."""
    import plotly

    from app_pages._ui import chart
    chart.compress()  # (the server's warm-up writes the same file; on a fresh checkout a first visit can come first)
    ctx = browser.new_context(viewport={"width": 1400, "height": 1400})
    try:
        page = ctx.new_page()
        got = []
        page.on("response", lambda r: "plotly.min.js" in r.url and got.append(r))
        page.goto(server_url + "/optimizers?lang=en", wait_until="domcontentloaded")
        wait_done(page)
        assert charts_drawn(page, 2) == 2
        assert len(got) == 1 and got[0].url.endswith(f"/app/static/plotly.min.js?v={plotly.__version__}")
        headers = got[0].all_headers()
        assert headers["content-encoding"] == "gzip" and "immutable" in headers["cache-control"], headers
        fetched_by = page.evaluate("""() => performance.getEntriesByType('resource')
            .filter(e => e.name.includes('plotly.min.js')).map(e => e.initiatorType)""")
        assert fetched_by == ["link"]  # by the page's HTML, before any element of the first run
        assert page.locator("script[src*='plotly.min.js']").count() == 1  # run once
        preloader = page.locator(f".st-key-{chart.PRELOAD_KEY}")
        assert preloader.count() == 1 and preloader.is_hidden()  # it takes no room in the sidebar
        page.locator("[data-testid='stSidebar'] [data-testid='stPageLink-NavLink']").filter(has_text="Scaling").click()
        page.locator("[data-testid='stMain'] h1").filter(has_text="Scaling").wait_for()
        wait_done(page)
        assert charts_drawn(page, 1) >= 1 and len(got) == 1
        assert preloader.count() == 0  # a session's later runs do not send it
        assert_no_exception(page)
    finally:
        ctx.close()


def test_widget_code_is_fetched_before_the_first_page_that_shows_it(browser, server_url):
    """Once the tab has drawn its first chart, the code of the widgets other pages show (chart.LAZY_ELEMENTS, and
    what it imports) is fetched in the background: the first visit to Optimizers (its number boxes) then fetches no
    script, where it used to wait for two."""
    from app_pages._ui import chart
    ctx = browser.new_context(viewport={"width": 1400, "height": 1400})
    try:
        page = ctx.new_page()
        fetched: list[str] = []
        page.on("request", lambda r: fetched.append(r.url.split("?")[0].rsplit("/", 1)[-1]))
        page.goto(server_url + "/?lang=en", wait_until="domcontentloaded")
        wait_done(page)
        assert charts_drawn(page, 1) >= 1
        names = chart.lazy_chunks()
        assert any(n.startswith("NumberInput.") for n in names)
        page.wait_for_function("""(names) => names.every(n => performance.getEntriesByType('resource')
            .some(e => e.name.split('?')[0].endsWith('/' + n)))""", arg=names, timeout=60_000)
        page.wait_for_load_state("networkidle")
        fetched.clear()
        page.locator("[data-testid='stSidebar'] [data-testid='stPageLink-NavLink']").filter(
            has_text="Optimizers").click()
        page.locator("[data-testid='stMain'] h1").filter(has_text="Optimizers").wait_for()
        wait_done(page)
        assert charts_drawn(page, 2) == 2
        page.locator("[data-testid='stMain'] [data-testid='stNumberInput']").first.wait_for()
        assert [n for n in fetched if n.endswith(".js")] == []
        assert_no_exception(page)
    finally:
        ctx.close()


def test_a_played_history_gets_its_controls_and_every_frame(open_page):
    """A played history's slider, play buttons and frames are added just after its chart is painted: they all come,
    and the slider steps through every frame (Optimizers' race)."""
    page = open_page("/optimizers?lang=en")
    assert charts_drawn(page, 2) == 2
    race = page.locator(".st-key-optimizers-race_chart .js-plotly-plot")
    race.locator(".slider-container").wait_for()
    frames, steps, buttons = page.evaluate("""() => {
        const gd = document.querySelector('.st-key-optimizers-race_chart .js-plotly-plot');
        return [gd._transitionData._frames.length, gd.layout.sliders[0].steps.length,
                gd.querySelectorAll('.updatemenu-button').length]; }""")
    assert frames == steps > 10 and buttons == 2
    assert_no_exception(page)


# Every chart drawn from now on: when (ms from now), whether the page's script was still running then, and whether the
# chart was on screen (the charts already drawn are left out)
_WATCH_DRAWS = """() => { window.__draws = []; const t0 = performance.now();
  const app = document.querySelector("[data-testid='stApp']");
  const seen = new Set(document.querySelectorAll('.js-plotly-plot'));
  new MutationObserver(() => {
    for (const gd of document.querySelectorAll("[data-testid='stMain'] .js-plotly-plot")) {
      if (seen.has(gd) || !gd.querySelector('.main-svg')) continue;
      seen.add(gd);
      const r = gd.getBoundingClientRect();
      window.__draws.push({at: performance.now() - t0, running: app.getAttribute('data-test-script-state') === 'running',
                           on_screen: r.bottom > 0 && r.top < innerHeight}); }
  }).observe(document.body, {childList: true, subtree: true}); }"""


def test_charts_off_screen_wait_for_the_end_of_the_run(open_page):
    """On a page switch, a chart below the window is drawn once the page's script has run (the rest of the page first,
    not behind charts nobody sees yet), unless it has waited a second. The Language model's charts are all below a
    1000 px window."""
    page = open_page("/train?lang=en", height=1000)
    page.evaluate(_WATCH_DRAWS)
    page.locator("[data-testid='stSidebar'] [data-testid='stPageLink-NavLink']").filter(
        has_text=i18n.t("common.nav_language_model", "en")).click()
    wait_done(page)
    assert charts_drawn(page, 3) >= 3
    page.wait_for_function("() => window.__draws.length >= 3", timeout=60_000)
    draws = page.evaluate("() => window.__draws")
    assert any(not d["on_screen"] for d in draws), draws
    early = [d for d in draws if d["running"] and not d["on_screen"] and d["at"] < 1000]
    assert early == [], draws
    assert_no_exception(page)


# Every trace the page drew, and a figure of the trace types and array attributes our pages do not draw (arrays in
# nested containers, containers linked to arrays, a colour bar's tick values, which plotly leaves out): the list of
# array attributes the chart element's quicker function gives (app_pages/_ui/chart.py, quick) against plotly's own.
_ARRAY_LISTS = """async () => {
  const PS = window.Plotly.PlotSchema, fast = PS.findArrayAttributes;
  if (!fast.__ae) return "plotly's own function is in use";
  const probe = document.createElement('div'); probe.style.width = '600px'; document.body.appendChild(probe);
  const n = [1, 2, 3], s = new Float32Array([1, 2, 3]);
  await window.Plotly.newPlot(probe, [
    {type: 'scatter', x: n, y: s, mode: 'markers+text', text: ['a', 'b', 'c'], customdata: [[1], [2], [3]],
     marker: {color: n, size: s, line: {width: n}, colorbar: {tickvals: n, ticktext: ['a', 'b', 'c']}, showscale: true},
     hoverlabel: {bgcolor: ['red', 'blue', 'green'], font: {size: n}}, ids: ['p', 'q', 'r']},
    {type: 'bar', x: n, y: n, marker: {pattern: {shape: ['/', '', 'x']}}, width: n, xaxis: 'x2', yaxis: 'y2'},
    {type: 'heatmap', z: [s, s], text: [['a', 'b', 'c'], ['d', 'e', 'f']], xaxis: 'x2', yaxis: 'y2'},
    {type: 'splom', dimensions: [{values: n, label: 'u'}, {values: s, label: 'v'}, {label: 'w'}]},
    {type: 'parcoords', dimensions: [{values: n, ticktext: ['a', 'b', 'c'], tickvals: n}, {values: s}],
     line: {color: n}, domain: {x: [0, 0.4], y: [0.6, 1]}},
  ], {grid: {rows: 2, columns: 2}}, {responsive: false});
  const charts = [...document.querySelectorAll('.js-plotly-plot')];
  const diff = [];
  let traces = 0;
  for (const gd of charts) for (const t of gd._fullData || []) {
    traces++;
    const ours = fast.call(PS, t), theirs = fast.theirs.call(PS, t);
    if (JSON.stringify(ours) !== JSON.stringify(theirs)) diff.push([t.type, ours, theirs]);
  }
  window.Plotly.purge(probe); probe.remove();
  return {traces, diff, still: PS.findArrayAttributes === fast};
}"""


@pytest.mark.parametrize("address, charts", [("/optimizers?lang=en", 2), ("/language_model?lang=en", 3),
                                             ("/mechanics?lang=zh", 7), ("/?view=grid", 1), ("/anatomy?lang=en", 4)])
def test_plotly_lists_each_traces_arrays_as_before(open_page, address, charts):
    """The quicker list of a trace's array attributes (plotly reads it on every draw and every played frame) is
    plotly's own list, in its order, for every trace of the page's charts and of a probe figure of other types."""
    page = open_page(address)
    assert_no_exception(page)
    assert charts_drawn(page, charts) >= charts
    got = page.evaluate(_ARRAY_LISTS)
    assert isinstance(got, dict), got
    assert got["diff"] == [] and got["still"], got
    assert got["traces"] >= charts + 5


# The look of a markdown table of Streamlit 1.67 (its markdown's CSS, read in Chromium at 1400 px): the table
# element's tables have the same spacing, borders, font and weight.
_TABLE_LOOK = """(box) => { const t = box.querySelector('table'), th = t.querySelector('th'), td = t.querySelector('td');
  const pick = (e, ks) => ks.map(k => getComputedStyle(e).getPropertyValue(k));
  const cell = ['font-size', 'line-height', 'padding-top', 'padding-left', 'border-top-width', 'border-left-style',
                'text-align', 'vertical-align'];
  return {table: pick(t, ['border-collapse']), th: pick(th, [...cell, 'font-weight']), td: pick(td, [...cell, 'font-weight']),
          family: getComputedStyle(td).fontFamily, border: getComputedStyle(td).borderTopColor,
          cells: [...t.querySelectorAll('th, td')].map(c => [c.tagName, c.children.length, c.textContent]),
          scope: th.getAttribute('scope')}; }"""


def test_the_table_element_draws_text_with_markdowns_look(open_page):
    """Optimizers' results tables are the table element's: a header row and a row per racer, every cell plain text
    (no child node), in the look of Streamlit's markdown tables and the theme's border colour."""
    from app_pages._ui.static_table import BOX
    page = open_page("/optimizers?lang=en&racers=sgd,adam&numbers=1")
    assert_no_exception(page)
    box = page.locator(f"[data-testid='stMain'] .{BOX}").first
    box.wait_for()
    look = box.evaluate(_TABLE_LOOK)
    assert look["table"] == ["collapse"] and look["scope"] == "col"
    assert look["th"] == ["16px", "25.6px", "6px", "12px", "1px", "solid", "left", "middle", "700"]
    assert look["td"] == ["16px", "25.6px", "6px", "12px", "1px", "solid", "left", "middle", "400"]
    assert "Source Sans" in look["family"] and look["border"] != "rgb(0, 0, 0)"
    assert all(children == 0 for _, children, _ in look["cells"])
    assert [text for tag, _, text in look["cells"] if tag == "TD"][::4] == ["SGD", "Adam"]
    assert box.locator("table").count() == 2
