"""Optimizers page in Chromium: the race animation plays (frames captured), a click on the contour moves the start,
the inner-state and schedule tabs draw, divergence shows a message; English and Chinese."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from app_pages._ui.static_table import BOX
from tests.browser.conftest import CHART, SHOTS, assert_no_exception, screenshot, wait_done, wrapped_cells
from viz_core import i18n
from viz_core.lessons import surfaces
from viz_core.plots import optimizers as plots

pytestmark = pytest.mark.browser
TABLES = BOX  # the class of the table element's box
SIX = "sgd,momentum,adagrad,rmsprop,adam,adamw"  # the five classic racers and AdamW


def _racer_rows(page) -> list[str]:
    """The first column of the results table (the table element's), as shown."""
    table = page.locator(f"[data-testid='stMain'] .{TABLES} table").first
    table.wait_for(timeout=30_000)
    return [c.strip() for c in table.locator("tbody tr td:first-child").all_inner_texts()]


def test_racers_are_picked_with_the_keyboard(open_page):
    """The pills are one tab stop (react-aria's group): Tab reaches the first, the arrow keys the others, and Space
    picks the one that has focus."""
    page = open_page("/optimizers?lang=en&steps=60&numbers=1")
    pills = page.locator("[data-testid='stButtonGroup'] button[data-variant]")
    pills.first.wait_for(timeout=30_000)
    pills.first.focus()
    for _ in range(6):
        page.keyboard.press("ArrowRight")
    assert page.evaluate("() => document.activeElement.innerText") == "NAdam"
    page.keyboard.press("Space")
    page.wait_for_url(lambda url: "nadam" in url)
    wait_done(page)
    assert _racer_rows(page) == ["SGD", "Momentum", "AdaGrad", "RMSProp", "Adam", "NAdam"]
    assert_no_exception(page)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_racers_are_picked_by_clicking_their_pills(open_page, lang):
    """The racers are one row of pills. Click Momentum off and NAdam on, the way a person would: the race,
    its table and the address follow; Back undoes the last click; a reload of the address keeps the pick."""
    page = open_page(f"/optimizers?lang={lang}&steps=60&numbers=1")
    assert _racer_rows(page) == ["SGD", "Momentum", "AdaGrad", "RMSProp", "Adam"]
    pills = page.locator("[data-testid='stButtonGroup']").first
    pills.get_by_role("button", name="Momentum", exact=True).click()
    page.wait_for_url(lambda url: "racers=" in url)  # (the default five are not written: no racers= until now)
    wait_done(page)
    pills.get_by_role("button", name="NAdam", exact=True).click()
    page.wait_for_url(lambda url: "nadam" in url)
    wait_done(page)
    assert _racer_rows(page) == ["SGD", "AdaGrad", "RMSProp", "Adam", "NAdam"]
    page.go_back()
    page.wait_for_url(lambda url: "nadam" not in url)
    wait_done(page)
    assert _racer_rows(page) == ["SGD", "AdaGrad", "RMSProp", "Adam"]
    page.reload()
    wait_done(page)
    assert _racer_rows(page) == ["SGD", "AdaGrad", "RMSProp", "Adam"]
    assert_no_exception(page)
    screenshot(page, f"optimizers-pills-{lang}")


def _chart_shots(page, name: str, expected: int = 1) -> int:
    """Element screenshots of every visible plotly chart (the full-page shot stops at the window height).

    Waits (up to 60 s) for `expected` charts: on a busy machine they appear a little after the script run ends.
    """
    charts = page.locator(CHART).filter(visible=True)
    for _ in range(120):
        if charts.count() >= expected:
            break
        page.wait_for_timeout(500)
    for i in range(charts.count()):
        charts.nth(i).scroll_into_view_if_needed()
        page.wait_for_timeout(300)
        charts.nth(i).screenshot(path=str(SHOTS / f"{name}-chart{i}.png"))
    return charts.count()


def _number(page, label: str) -> float:
    return float(page.get_by_label(label, exact=True).first.input_value())


def test_animation_frames(open_page):
    page = open_page("/optimizers?lang=en&surface=line_fit&x0=0.0&y0=0.0&lr=0.01")
    assert_no_exception(page)
    chart = page.locator(CHART).first
    chart.locator(".slider-container").wait_for(timeout=60_000)       # the race figure has its step slider
    assert chart.locator(".updatemenu-button").count() == 2           # play and pause
    _frames_made_as_the_figure_makes_them(page)
    screenshot(page, "optimizers-anim-end")
    chart.locator(".updatemenu-button").first.click()           # Play: restarts from step 0
    page.wait_for_timeout(700)
    chart.screenshot(path=str(screenshot(page, "optimizers-anim-mid").with_name("optimizers-anim-mid-chart.png")))
    page.wait_for_timeout(4000)
    chart.screenshot(path=str(screenshot(page, "optimizers-anim-done").with_name("optimizers-anim-done-chart.png")))
    label = chart.locator("text.slider-label").first.text_content()
    assert label.strip().endswith("300"), label               # back at the last frame after playing


def _frames_made_as_the_figure_makes_them(page) -> None:
    """The race comes without frames (meta.trail_frames): the frames the browser made from the drawn faint paths
    are the ones race_figure makes from those paths (viz_core's _frame_xy, the line-fit lines included)."""
    got = page.evaluate("""() => {
        const gd = document.querySelector("[data-testid='stMain'] .js-plotly-plot");
        const r = gd.layout.meta.trail_frames, arr = (v) => Array.from(v);
        return { r, paths: r.paths.map((i) => [arr(gd._fullData[i].x), arr(gd._fullData[i].y)]),
                 frames: gd._transitionData._frames.map((f) => ({ name: f.name, traces: f.traces,
                     data: f.data.map((d) => (d.x ? { x: arr(d.x), y: arr(d.y) } : {})) })) };
    }""")
    r = got["r"]
    trajs = [SimpleNamespace(path=np.column_stack(p), n_steps=len(p[0]) - 1) for p in got["paths"]]
    fit = (np.array(surfaces.LINE_X), np.array(surfaces.LINE_Y))
    assert [f["name"] for f in got["frames"]] == [str(s) for s in r["steps"]] and len(r["steps"]) > 10
    for f, (frame, s) in enumerate(zip(got["frames"], r["steps"])):
        last = f == len(r["steps"]) - 1
        want = plots._frame_xy(trajs, s, fit, plots.TRAIL_POINTS if last else plots.FRAME_TRAIL_POINTS)
        assert frame["data"][:r["first"]] == [{}] * r["first"] and len(frame["traces"]) == r["first"] + len(want)
        for ours, theirs in zip(frame["data"][r["first"]:], want, strict=True):
            np.testing.assert_allclose(ours["x"], np.asarray(theirs["x"], dtype=float), rtol=1e-6)
            np.testing.assert_allclose(ours["y"], np.asarray(theirs["y"], dtype=float), rtol=1e-6)


_GAP = """() => { const gd = document.querySelector('.st-key-optimizers-race_chart .js-plotly-plot');
  const svg = gd.querySelector('.main-svg').getBoundingClientRect();
  const bar = gd.querySelector('.colorbar').getBoundingClientRect();
  const title = gd.querySelector('.colorbar .cbtitle').getBoundingClientRect();
  const L = gd._fullLayout;
  return {surfaceRight: L.xaxis._offset + L.xaxis._length, barLeft: bar.left - svg.left,
          titleRight: title.right - svg.left, fitLeft: L.xaxis2._offset}; }"""


@pytest.mark.parametrize("width", [390, 480, 1000])
def test_line_fit_colour_bar_stands_clear_of_both_panels(open_page, width):
    """The line-fit race has the surface's colour bar in the gap between its two panels: on a phone its title once
    ran over the fitted line's panel. Its bar starts right of the surface and its title ends left of the line's
    panel, at a phone's width, a small tablet's, and beside the sidebar."""
    page = open_page("/optimizers?lang=en&surface=line_fit", width=width)
    page.locator(".st-key-optimizers-race_chart .js-plotly-plot .colorbar .cbtitle").wait_for(timeout=60_000)
    got = page.evaluate(_GAP)
    assert got["surfaceRight"] <= got["barLeft"] and got["titleRight"] + 3 <= got["fitLeft"], got
    assert_no_exception(page)


def test_click_sets_start(open_page):
    page = open_page("/optimizers?lang=en&surface=bowl&x0=-4.5&y0=2.0")
    before = _number(page, "Start x")
    drag = page.locator(CHART).first.locator(".nsewdrag").first
    drag.wait_for(timeout=60_000)
    box = drag.bounding_box()
    drag.click(position={"x": box["width"] * 0.8, "y": box["height"] * 0.8})
    wait_done(page)
    after = _number(page, "Start x")
    assert after != before and after > 0, (before, after)
    assert_no_exception(page)
    screenshot(page, "optimizers-click")


def _click_contour(page, fx: float, fy: float) -> float:
    drag = page.locator(CHART).first.locator(".nsewdrag").first
    drag.wait_for(timeout=60_000)
    box = drag.bounding_box()
    x, y = box["x"] + box["width"] * fx, box["y"] + box["height"] * fy
    page.mouse.move(x, y, steps=4)
    # plotly takes the clicked point from its last (throttled) hover: rest on the spot first, as a person's pointer
    # does, or a click right after a fast move reports a point on the way there
    page.wait_for_timeout(400)
    page.mouse.move(x + 1, y)
    page.wait_for_timeout(200)
    page.mouse.click(x, y)
    page.wait_for_timeout(500)
    wait_done(page)
    return _number(page, "Start x")


def test_click_sets_start_after_play_and_after_scrubbing(open_page):
    """Play and the step slider animate the figure; a click on the contour must still set the start."""
    page = open_page("/optimizers?lang=en&surface=bowl&x0=-4.5&y0=2.0")
    chart = page.locator(CHART).first
    chart.locator(".slider-container").wait_for(timeout=60_000)
    chart.locator(".updatemenu-button").first.click()                  # Play
    page.wait_for_timeout(4500)
    after_play = _click_contour(page, 0.8, 0.8)
    assert after_play > 0, after_play
    chart = page.locator(CHART).first
    chart.locator(".slider-container").wait_for(timeout=60_000)
    rail = chart.locator(".slider-rail-rect").first.bounding_box()     # scrub the step slider to a third
    page.mouse.click(rail["x"] + rail["width"] / 3, rail["y"] + rail["height"] / 2)
    page.wait_for_timeout(800)
    after_scrub = _click_contour(page, 0.2, 0.3)
    assert after_scrub < 0 and after_scrub != after_play, (after_play, after_scrub)
    assert_no_exception(page)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_tabs_and_divergence(open_page, lang):
    page = open_page(f"/optimizers?lang={lang}&surface=rosenbrock&lr=0.01&steps=200&sched=warmup&racers={SIX}")
    assert_no_exception(page)
    assert page.locator("[data-testid='stAlertContentWarning']").count() >= 1, "divergence gave no message"
    screenshot(page, f"optimizers-diverge-{lang}")
    assert _chart_shots(page, f"optimizers-race-{lang}", 2) == 2            # race; loss and distance
    tabs = page.get_by_role("tab")
    tabs.nth(1).click()
    wait_done(page)
    screenshot(page, f"optimizers-inside-{lang}")
    assert _chart_shots(page, f"optimizers-inside-{lang}", 2) == 2          # step sizes, one optimizer's state
    tabs.nth(2).click()
    wait_done(page)
    assert_no_exception(page)
    screenshot(page, f"optimizers-schedules-{lang}")
    assert _chart_shots(page, f"optimizers-schedules-{lang}", 2) == 2       # the schedules, the paper's curve


@pytest.mark.parametrize("lang,width,dark", [("en", 1400, False), ("zh", 420, True)])
def test_controls_open(open_page, lang, width, dark):
    """Both expanders open (every optimizer's hyperparameters, the schedule), wide and narrow, light and dark."""
    page = open_page(f"/optimizers?lang={lang}&racers={SIX}&own_adam=1&lr_adam=0.02", width=width, dark=dark)
    fair = i18n.t("optimizers.fair", lang)
    assert page.get_by_label("β₁").count() == 0 and page.get_by_text(fair).count() == 0  # closed: not drawn
    summaries = page.locator("[data-testid='stExpander'] summary")
    assert summaries.count() == 3  # the two sections of settings, then the race's numbers under the charts
    for i in range(2):
        summaries.nth(i).click()  # each opening reruns the page, which then draws the section
        wait_done(page)
    page.wait_for_url(lambda url: "hyper=1" in url and "sched_open=1" in url)
    assert_no_exception(page)
    assert page.get_by_label("β₁").count() >= 1 and page.get_by_text(fair).count() >= 1  # (the fair race's toggle)
    assert page.get_by_label(i18n.t("optimizers.lr_of", lang, name=i18n.t("optimizers.name_adam", lang)), exact=True).input_value() == "0.02"
    screenshot(page, f"optimizers-controls-{lang}-{width}{'-dark' if dark else ''}")
    _chart_shots(page, f"optimizers-controls-{lang}-{width}{'-dark' if dark else ''}")



# The words of a table's cells that the browser broke over two lines: the characters of one word lie on more than one
# line box (its range has client rects at different heights).
BROKEN_WORDS = """t => [...t.querySelectorAll('th, td')].flatMap(cell => {
  const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT), broken = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    for (const m of n.data.matchAll(/\\S+/g)) {
      const r = document.createRange();
      r.setStart(n, m.index);
      r.setEnd(n, m.index + m[0].length);
      if (new Set([...r.getClientRects()].filter(q => q.width > 0).map(q => Math.round(q.top))).size > 1)
        broken.push(m[0]);
    }
  }
  return broken;
})"""


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_results_tables_keep_words_whole_on_a_phone(open_page, lang):
    """At 390 px the six-column results table read "Mom/entu/m" and "1.102/e-05". The results are two
    tables (where each racer ended; when) that fit the width: names and numbers stay whole, each data cell on one
    line (a header wraps at its spaces only), nothing is cut off and nothing scrolls sideways. Seven racers on a fair
    race: the widest names and numbers (a tuned learning rate, numbers like "6.565e-290")."""
    page = open_page(f"/optimizers?lang={lang}&fair=1&racers={SIX},nadam&numbers=1", width=390, height=1400)
    rows = _racer_rows(page)
    assert rows == ["SGD", "Momentum", "AdaGrad", "RMSProp", "Adam", "AdamW", "NAdam"]
    tables = page.locator(f"[data-testid='stMain'] .{TABLES} table")
    for i in range(tables.count()):
        table = tables.nth(i)
        if lang == "en":  # (Chinese breaks a line between any two characters of a header, as it should)
            assert table.evaluate(BROKEN_WORDS) == []
        assert wrapped_cells(table) == []
        assert table.locator("tbody td:first-child").all_inner_texts() == rows
        right = table.evaluate("t => [t.getBoundingClientRect().right, t.parentElement.getBoundingClientRect().right,"
                               " t.parentElement.scrollWidth - t.parentElement.clientWidth]")
        assert right[0] <= right[1] + 0.5 and right[1] <= 390 and right[2] == 0, right  # fits its box, and the screen
    assert tables.count() == 2
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
    assert_no_exception(page)
    box = page.locator(".st-key-whole_words_optimizers")
    box.scroll_into_view_if_needed()
    box.screenshot(path=str(SHOTS / f"optimizers-results-390-{lang}.png"))
