"""Words in figures on a phone: on every page's charts at 390 px, in English and Chinese, no title, axis name, legend
entry or tick label is drawn over another. (Seen on phones: legends above a plot that wrapped into rows rose over the
figure's title, legends placed a fraction of the plot's height below it fell on the axis title, and panels side by
side (the Language model's two heads and its generation steps, Train's heads, Anatomy's norm placement) had their
titles and axis names on each other.)"""
from __future__ import annotations

import pytest

from tests.browser.conftest import assert_no_exception, charts_drawn, overlapping_words

pytestmark = pytest.mark.browser

# page address -> the charts it draws (at least; the KV-cache tab's timing chart comes later, when measured)
PAGES = {"/": 1, "/mechanics": 7, "/scaling": 3, "/positions": 1, "/positions?part=waves": 2, "/optimizers": 2,
         "/optimizers?tab=schedules": 2,
         "/anatomy": 4, "/anatomy?section=placement": 1, "/train": 1, "/train?tab=attention": 1,
         "/train?tab=snapshots": 2, "/language_model": 3, "/language_model?tab=sequence": 3,
         "/language_model?tab=cache": 1, "/language_model?tab=generate": 1,
         "/language_model?tab=generate&gen_model=gemma3-270m": 1, "/head_finder": 1, "/?view=importance": 3,
         "/?model=gemma3-270m&view=lens": 1, "/?model=gemma3-270m&view=importance": 3}

_MARK = """() => [...document.querySelectorAll("[data-testid='stMain'] .js-plotly-plot")]
  .map((gd, i) => { gd.setAttribute('data-words', i); return i; })"""


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("address, charts", PAGES.items())
def test_no_word_in_a_figure_is_drawn_over_another_on_a_phone(open_page, address, charts, lang):
    page = open_page(f"{address}{'&' if '?' in address else '?'}lang={lang}", width=390, height=6000)
    assert charts_drawn(page, charts) >= charts
    found = {i: overlapping_words(page, f"[data-words='{i}']") for i in page.evaluate(_MARK)}
    assert len(found) >= charts
    assert {i: pairs for i, pairs in found.items() if pairs} == {}
    assert_no_exception(page)


_TOOLBAR = """sel => { const gd = document.querySelector(sel); const bar = gd.querySelector('.modebar').getBoundingClientRect();
  const svg = gd.querySelector('.main-svg').getBoundingClientRect();
  const title = gd.querySelector('.gtitle').getBoundingClientRect();
  const over = !(bar.right <= title.left || title.right <= bar.left || bar.bottom <= title.top || title.bottom <= bar.top);
  return {below: svg.top - bar.bottom, over_title: over, margin: getComputedStyle(gd).marginTop,
          range: gd._fullLayout.xaxis.range.slice()}; }"""


def test_a_touch_screen_shows_the_toolbar_above_the_chart_not_over_its_title(open_page):
    """Plotly shows its toolbar all the time where nothing hovers (a touch screen); over the chart it covered the end
    of the title and the legend. On a touch screen it stands above the chart, and its buttons still work; with a
    mouse it stays where plotly puts it, shown on hover."""
    chart = ".st-key-head_fig .js-plotly-plot"
    page = open_page("/?lang=zh", width=390, height=3000, touch=True)
    assert charts_drawn(page, 1) >= 1
    page.locator(f"{chart} .modebar").wait_for()
    seen = page.evaluate(_TOOLBAR, chart)
    assert seen["below"] >= 0 and not seen["over_title"] and seen["margin"] == "30px"
    page.locator(f"{chart} .modebar-btn[data-title='Zoom in']").tap()
    page.wait_for_function("([sel, before]) => document.querySelector(sel)._fullLayout.xaxis.range[0] !== before",
                           arg=[chart, seen["range"][0]])
    desk = open_page("/?lang=zh", width=1400)
    assert charts_drawn(desk, 1) >= 1
    assert desk.evaluate(_TOOLBAR, chart)["margin"] == "0px"
    assert_no_exception(page)
