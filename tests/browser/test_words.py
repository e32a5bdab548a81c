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
PAGES = {"/": 1, "/mechanics": 7, "/scaling": 3, "/positions": 3, "/optimizers": 3, "/optimizers?tab=schedules": 2,
         "/anatomy": 4, "/anatomy?section=placement": 1, "/train": 1, "/train?tab=attention": 1,
         "/train?tab=snapshots": 2, "/language_model": 3, "/language_model?tab=sequence": 3,
         "/language_model?tab=cache": 1, "/language_model?tab=generate": 1,
         "/language_model?tab=generate&gen_model=gemma3-270m": 1, "/head_finder": 1}

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
