"""Charts the browser draws once: on these pages every figure's margins already hold its labels
(viz_core.plots.common.reserve_margins / fit_margins), so plotly's automargin has nothing to push and does not draw
a figure a second time. Seen from plotly's own layout: the margins it drew with equal the ones the figure asked for."""
from __future__ import annotations

import pytest

from tests.browser.conftest import assert_no_exception, charts_drawn

pytestmark = pytest.mark.browser

# page address -> (charts on it, how many of them from the top are checked: figures whose legend sits in a margin
# the figure sets, above the plot or under the axis title, and the figures of panels side by side, Train's curves and
# the Language model's two played maps, through viz_core.plots.common.fit_panel_margins)
PAGES = {"/scaling?lang=en": (3, 3), "/mechanics?lang=en": (7, 7), "/anatomy?lang=zh": (4, 4),
         "/optimizers?lang=en": (2, 2), "/?lang=en": (1, 1), "/positions?lang=zh": (3, 3),
         "/language_model?lang=en": (3, 3), "/train?lang=zh": (1, 1)}

_PUSHED = """() => [...document.querySelectorAll("[data-testid='stMain'] .js-plotly-plot")].map(gd => {
  const m = gd.layout.margin || {}, s = gd._fullLayout._size;
  return ['l', 'r', 't', 'b'].filter(k => Math.round(s[k]) > (m[k] ?? 0))
    .map(k => `${k}: ${m[k]} -> ${Math.round(s[k])}`)
    .join(', ');
})"""


# every page on a phone too, where legends wrap into rows (viz_core.plots.common.legend_rows: plotly's own rule) and
# the margin beside them holds them all; and the Language model at 1280 px, where its two panels side by side wrap
# their legends above the plot. On a phone the first chart of Optimizers is left out: its legend of racers above the
# plot takes three rows there, and the figure keeps the room of the one row it takes elsewhere (reserving three rows
# would leave a band of 74 px empty above every race on a wider screen), so plotly widens that margin on a phone.
PHONE = 390
WIDTHS = {address: (1400, PHONE) for address in PAGES} | {"/language_model?lang=en": (1400, 1280, PHONE),
                                                           "/language_model?lang=zh": (PHONE,),
                                                           "/scaling?lang=zh": (PHONE,), "/positions?lang=en": (PHONE,)}
SKIPPED_ON_A_PHONE = {"/optimizers?lang=en": 1}  # charts from the top not checked at PHONE


@pytest.mark.parametrize("address, width", [(a, w) for a, ws in WIDTHS.items() for w in ws])
def test_no_margin_is_pushed_after_the_first_draw(open_page, address, width):
    path = address.split("?")[0]  # PAGES names each page once, in one language
    n, checked = next(charts for named, charts in PAGES.items() if named.split("?")[0] == path)
    skipped = SKIPPED_ON_A_PHONE.get(address, 0) if width == PHONE else 0
    page = open_page(address, width=width)
    assert_no_exception(page)
    assert charts_drawn(page, n) >= n
    pushed = page.evaluate(_PUSHED)
    assert len(pushed) >= n and not any(pushed[skipped:checked]), pushed
