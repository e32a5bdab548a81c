"""Charts the browser draws once (issue #25): on these pages every figure's margins already hold its labels
(viz_core.plots.common.reserve_margins / fit_margins), so plotly's automargin has nothing to push and does not draw
a figure a second time. Seen from plotly's own layout: the margins it drew with equal the ones the figure asked for."""
from __future__ import annotations

import pytest

from tests.browser.conftest import assert_no_exception, charts_drawn

pytestmark = pytest.mark.browser

# page address -> charts on it (each one-panel, no legend outside the plot)
PAGES = {"/scaling?lang=en": 3, "/mechanics?lang=en": 7, "/anatomy?lang=zh": 4, "/optimizers?lang=en": 3,
         "/?lang=en": 1}

_PUSHED = """() => [...document.querySelectorAll("[data-testid='stMain'] .js-plotly-plot")].map(gd => {
  const m = gd.layout.margin || {}, s = gd._fullLayout._size;
  return ['l', 'r', 'b'].filter(k => Math.round(s[k]) > (m[k] ?? 0)).map(k => `${k}: ${m[k]} -> ${Math.round(s[k])}`)
    .join(', ');
})"""


@pytest.mark.parametrize("address, n", PAGES.items())
def test_no_margin_is_pushed_after_the_first_draw(open_page, address, n):
    page = open_page(address)
    assert_no_exception(page)
    assert charts_drawn(page, n) >= n
    pushed = page.evaluate(_PUSHED)
    assert len(pushed) >= n and not any(pushed), pushed
