"""The formula element in Chromium (app_pages/_ui/formula.py): every display formula is the KaTeX that Streamlit's
markdown draws for it, node for node, in a box that reads out as its source and takes keyboard focus; a display of
several equations stands them side by side where there is room and one under the other on a phone."""
from __future__ import annotations

import re

import pytest

from tests.browser.conftest import assert_no_exception, read_page, streamlit_server

pytestmark = pytest.mark.browser

# pages with display formulas in view, in both languages (Chinese text inside \text{} included)
PAGES = ("/anatomy?lang=en", "/language_model?lang=zh&scores=1", "/mechanics?lang=en")

_FORMULAS = """() => [...document.querySelectorAll("[data-testid='stMain'] .formula")].map(f => ({
  html: (f.querySelector('.katex-html') || {}).outerHTML || null, label: f.getAttribute('aria-label'),
  parts: f.querySelectorAll('.katex-html').length,
  text: [...f.querySelectorAll('.katex-html')].map(k => k.textContent).join(''),
  role: f.getAttribute('role'), tab: f.tabIndex, element: f.classList.contains('ae-formula'),
  errors: f.querySelectorAll('.katex-error').length, height: f.getBoundingClientRect().height,
  svg: [...f.querySelectorAll('svg')].every(s => s.namespaceURI === 'http://www.w3.org/2000/svg') }))"""
_DRAWN = """() => { const f = [...document.querySelectorAll("[data-testid='stMain'] .formula")];
  return f.length > 0 && f.every(x => x.querySelector('.katex-html')); }"""


def _as_drawn(html: str) -> str:
    """KaTeX's HTML up to how it was written: a style attribute as the page keeps it (React writes it through the
    element's style, which spaces it "a: b; c: d;"; the element sets it as KaTeX wrote it, "a:b;c:d;": the same
    declarations), and an svg's xmlns attribute, which markdown sometimes keeps and which is inert in HTML (an svg
    in the page is in the SVG namespace either way; the element makes it so)."""
    html = re.sub(r' xmlns="[^"]*"', "", html)
    return re.sub(r'style="([^"]*)"', lambda m: 'style="' + m[1].replace(" ", "").rstrip(";") + '"', html)


def _formulas(browser, url: str, path: str) -> list[dict]:
    return read_page(browser, url + path, _FORMULAS, ready=_DRAWN)


@pytest.fixture(scope="module")
def markdown_server():
    """A second server whose formulas are drawn by Streamlit's markdown (the formula element switched off)."""
    with streamlit_server({"ATTN_FORMULA_ELEMENT": "0"}) as (url, _proc):
        yield url


@pytest.mark.parametrize("path", PAGES)
def test_formulas_are_the_katex_of_streamlits_markdown(browser, server_url, markdown_server, path):
    ours, theirs = _formulas(browser, server_url, path), _formulas(browser, markdown_server, path)
    assert len(ours) == len(theirs) >= 1
    assert all(f["element"] for f in ours) and not any(f["element"] for f in theirs)
    for mine, reference in zip(ours, theirs):
        assert mine["errors"] == 0 and mine["role"] == "math" and mine["tab"] == 0 and mine["svg"]
        assert mine["label"] == reference["label"] and "\\" in mine["label"]  # it reads out as its LaTeX source
        if mine["parts"] == 1:
            assert _as_drawn(mine["html"]) == _as_drawn(reference["html"])
            assert abs(mine["height"] - reference["height"]) < 1  # the same box: nothing below moves
        else:  # several equations, each its own display: the same symbols, in the same order
            assert reference["parts"] == 1 and mine["text"] == reference["text"]


# JS: per display of several equations, how many rows its equations stand in (by their centres) and whether its box
# scrolls
_PARTS = """() => [...document.querySelectorAll('.formula.ae-parts')].map(b => ({
  rows: new Set([...b.querySelectorAll('.katex-display')].map(k => { const r = k.getBoundingClientRect();
    return Math.round((r.top + r.bottom) / 2); })).size,
  parts: b.querySelectorAll('.katex-display').length, scrolls: b.scrollWidth > b.clientWidth + 1 }))"""


def test_several_equations_stand_side_by_side_and_one_under_the_other_on_a_phone(open_page):
    """The Language model page's display of the decoder's three equations (and the sampling formula of its
    generation tab): on one line in a wide window, one under the other at 390 px, where nothing scrolls."""
    path = "/language_model?lang=zh&tab=generate"
    wide = open_page(path)
    wide.wait_for_function(_DRAWN, timeout=60_000)
    rows = wide.evaluate(_PARTS)
    assert len(rows) == 2 and all(r["parts"] == 3 and r["rows"] == 1 and not r["scrolls"] for r in rows), rows
    phone = open_page(path, width=390, touch=True)
    phone.wait_for_function(_DRAWN, timeout=60_000)
    rows = phone.evaluate(_PARTS)
    assert len(rows) == 2 and all(r["rows"] >= 2 and not r["scrolls"] for r in rows), rows
    widths = phone.evaluate("() => [...document.querySelectorAll('.formula')].map(f => [f.scrollWidth, f.clientWidth])")
    assert all(scroll <= client + 1 for scroll, client in widths), widths  # no formula of the page scrolls
    assert_no_exception(phone)


def test_a_formula_box_scrolls_on_a_narrow_phone_and_takes_focus(open_page):
    """On a phone narrower than an equation (Adam's aligned updates at 320 px) the formula scrolls inside its box (the
    page does not), and Tab reaches it."""
    page = open_page("/optimizers?lang=en&tab=inside", width=320, touch=True)
    page.wait_for_function(_DRAWN, timeout=60_000)
    widths = page.evaluate("""() => [...document.querySelectorAll('.formula')].map(f => [f.scrollWidth,
                                                                                         f.clientWidth])""")
    wide = [i for i, (scroll, client) in enumerate(widths) if scroll > client]
    assert wide, widths
    assert page.evaluate("document.documentElement.scrollWidth") <= 320
    box = page.locator(".formula").nth(wide[0])
    box.focus()
    assert page.evaluate("() => document.activeElement.classList.contains('formula')")
    page.keyboard.press("ArrowRight")  # a focused box scrolls with the keyboard
    page.wait_for_function("(i) => document.querySelectorAll('.formula')[i].scrollLeft > 0", arg=wide[0],
                           timeout=10_000)
    assert_no_exception(page)
