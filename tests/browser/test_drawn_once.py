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
         "/optimizers?lang=en": (3, 3), "/?lang=en": (1, 1), "/positions?lang=zh": (3, 3),
         "/language_model?lang=en": (3, 3), "/train?lang=zh": (1, 1)}

_PUSHED = """() => [...document.querySelectorAll("[data-testid='stMain'] .js-plotly-plot")].map(gd => {
  const m = gd.layout.margin || {}, s = gd._fullLayout._size;
  return ['l', 'r', 'b'].filter(k => Math.round(s[k]) > (m[k] ?? 0)).map(k => `${k}: ${m[k]} -> ${Math.round(s[k])}`)
    .join(', ');
})"""


@pytest.mark.parametrize("address, charts", PAGES.items())
def test_no_margin_is_pushed_after_the_first_draw(open_page, address, charts):
    n, checked = charts
    page = open_page(address)
    assert_no_exception(page)
    assert charts_drawn(page, n) >= n
    pushed = page.evaluate(_PUSHED)
    assert len(pushed) >= n and not any(pushed[:checked]), pushed
