"""How the app looks beyond Streamlit's theme: the page's few CSS rules (page_style, drawn by app.py on every run)
and the house settings every figure is drawn with (figure_style, applied by figures.py to each figure's dict; plotly's
global templates are left as they are)."""
from __future__ import annotations

import re

import streamlit as st

# ---------------------------------------------------------------- figures
COLORBAR_TRACES = ("heatmap", "contour", "histogram2d")  # the trace kinds whose colour bars are axes too
# ": " right after a Chinese character or punctuation mark: the builders write "<label>: <value>" in their hover
# templates whatever the label's language, and Chinese takes its own colon ("层：3", not "层: 3")
_CHINESE_COLON = re.compile(r"(?<=[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]): ")


def figure_style(spec: dict) -> dict:
    """A figure's dict (fig.to_dict(), a copy: changed in place and returned) with the house settings in its template:
    tick labels may overflow their axis (`ticklabeloverflow='allow'`), on the axes and on the colour bars; and in hover
    templates a Chinese label takes the Chinese colon (_CHINESE_COLON).

    Plotly's default on numeric axes ('hide past div') measures every tick label in the browser after each draw, a
    forced layout per label, which a page of many small matrices pays on every switch. Our margins already make
    room for the labels (automargin), so nothing is hidden either way."""
    template = spec.setdefault("layout", {}).setdefault("template", {})
    for axis in ("xaxis", "yaxis"):
        template.setdefault("layout", {}).setdefault(axis, {})["ticklabeloverflow"] = "allow"
    for kind in COLORBAR_TRACES:
        traces = template.get("data", {}).get(kind)
        if traces:
            traces[0].setdefault("colorbar", {})["ticklabeloverflow"] = "allow"
    for trace in spec.get("data") or ():
        hover = trace.get("hovertemplate")
        if isinstance(hover, str):
            trace["hovertemplate"] = _CHINESE_COLON.sub("：", hover)
        elif isinstance(hover, list):
            trace["hovertemplate"] = [_CHINESE_COLON.sub("：", h) if isinstance(h, str) else h for h in hover]
    return spec


# ---------------------------------------------------------------- the page
# Readable everywhere (phones, both themes): drawn once per run by app.py. Colours derive from the theme's own text
# colour (currentColor), so they hold in light and dark.
PAGE_CSS = """
<style>
/* captions: Streamlit's faded grey reaches only 3.8:1; the theme's text colour at 80 % reaches 6:1 in both themes */
[data-testid="stCaptionContainer"] { color: inherit !important; opacity: 0.8; }
/* formulas and wide tables scroll inside their own box on a narrow screen instead of running off the page */
.formula { overflow-x: auto; overflow-y: hidden; max-width: 100%; padding: 0.1em 0; }
.formula .katex-display { overflow: visible !important; width: max-content; min-width: 100%; }
.formula:focus-visible { outline: 2px solid currentColor; outline-offset: 2px; }
/* a display of several equations (the formula element's parts): side by side where there is room, else one under the
   other; "safe" keeps an equation wider than the box reachable by scrolling from its start */
.formula.ae-parts { display: flex; flex-wrap: wrap; justify-content: safe center; align-items: center; column-gap: 2em; }
.formula.ae-parts .katex-display { min-width: 0; margin: 0.5em 0; }
/* a formula of the formula element stands as one in markdown, whose container takes back 1rem below its content */
.ae-formula { margin-bottom: -1rem; }
[data-testid="stTable"] { overflow-x: auto; }
/* where plotly shows its toolbar all the time (a touch screen: nothing hovers), the toolbar stands in a strip of
   its own above the chart, not over the chart's title and legend */
.ae-chart:has(.modebar:not(.modebar--hover)) { margin-top: 30px; }
.ae-chart:has(.modebar:not(.modebar--hover)) .modebar { top: -30px; }
/* the element that starts loading plotly.js (chart.preload) takes no room */
.st-key-ae_plotly_preload { display: none; }
/* the table element (app_pages/_ui/static_table.py): Streamlit's markdown tables' look, in the theme's colours */
.ae-tables { font-family: var(--st-font); font-size: 1rem; line-height: 1.6; overflow-wrap: break-word; }
.ae-tables p { margin: 0 0 1rem; font-size: 1rem; }
.ae-tables table { border-collapse: collapse; margin: 0 0 1rem; }
.ae-tables table:last-child { margin-bottom: 0; }
.ae-tables tr { border-top: 1px solid var(--st-dataframe-border-color); }
.ae-tables :is(th, td) { padding: 0.375rem 0.75rem; border: 1px solid var(--st-dataframe-border-color);
  text-align: left; vertical-align: middle; }
.ae-tables th { font-weight: 700; }
/* the prose element (app_pages/_ui/paragraphs.py): Streamlit's markdown paragraphs' look, in the theme's colours */
.ae-prose { font-family: var(--st-font); font-size: 1rem; line-height: 1.6; overflow-wrap: break-word;
  margin-bottom: -1rem; }
.ae-prose p { word-break: break-word; }
.ae-prose :is(p, ul) { margin: 0 0 1rem; }  /* (the last one's margin: the box takes it back, as markdown's does) */
.ae-prose ul { padding: 0; list-style: disc outside; }
.ae-prose li { margin: 0.2em 0 0.2em 1.15em; padding: 0 0 0 0.3em; }
.ae-prose strong { font-weight: 600; }
.ae-prose a { color: var(--st-link-color); text-decoration: underline; }
.ae-prose code { font-family: var(--st-code-font); font-size: 0.75em; font-weight: var(--st-code-font-weight);
  color: var(--st-code-text-color); background-color: var(--st-code-background-color); padding: 0.2em 0.4em;
  border-radius: 0.25rem; white-space: pre-wrap; }
/* links to other pages in the page itself wrap on a narrow screen instead of being cut with an ellipsis */
[data-testid="stMain"] [data-testid="stPageLink-NavLink"] > span:last-child,
[data-testid="stMain"] [data-testid="stPageLink-NavLink"] [data-testid="stMarkdownContainer"],
[data-testid="stMain"] [data-testid="stPageLink-NavLink"] p { white-space: normal; overflow: visible; }
@media (max-width: 640px) {
  .katex-display > .katex { font-size: 0.95em; }
  /* a table's cells wrap (even inside a word) rather than make a scrolling box that a keyboard cannot reach */
  [data-testid="stTable"] table, :is([data-testid="stMarkdownContainer"], .ae-tables) table { table-layout: fixed;
    width: 100%; }
  [data-testid="stTable"] td, [data-testid="stTable"] th,
  :is([data-testid="stMarkdownContainer"], .ae-tables) :is(td, th),
  [data-testid="stTable"] td *, [data-testid="stTable"] th * { white-space: normal !important;
    overflow-wrap: anywhere !important; word-break: break-word !important; min-width: 0; max-width: 100%; }
  /* except tables made to fit a phone, in a container keyed "whole_words...": their columns take the widths their
     names and numbers need (kept whole, a header wraps at its spaces), with less padding (Optimizers' results);
     one still wider than the screen scrolls in its own box */
  [class*="st-key-whole_words"] :is([data-testid="stMarkdownContainer"], .ae-tables) { overflow-x: auto; }
  [class*="st-key-whole_words"] :is([data-testid="stMarkdownContainer"], .ae-tables) table { table-layout: auto; }
  [class*="st-key-whole_words"] :is([data-testid="stMarkdownContainer"], .ae-tables) :is(th, td) {
    overflow-wrap: normal !important; word-break: normal !important; padding-left: 0.375rem;
    padding-right: 0.375rem; }
  [class*="st-key-whole_words"] :is([data-testid="stMarkdownContainer"], .ae-tables) td {
    white-space: nowrap !important; }
  /* (a row's name, in the first column, may wrap at a space or between Chinese characters, as a header does) */
  [class*="st-key-whole_words"] :is([data-testid="stMarkdownContainer"], .ae-tables) td:first-child {
    white-space: normal !important; }
  [data-testid="stMainBlockContainer"] { padding-left: 0.75rem; padding-right: 0.75rem; }
  /* a section (expander) that holds such tables, or a display formula, gives them its side padding too (a formula
     as wide as the column would otherwise scroll in its box) */
  [data-testid="stExpanderDetails"]:has([class*="st-key-whole_words"], .ae-formula) { padding-left: 0.375rem;
    padding-right: 0.375rem; }
}
</style>
"""


# Dark theme: white on the light-blue primary colour reaches only 2.5:1; near-black text on it reaches 8:1.
# (A darker primary would fail instead as text on the dark background: selected segments, links.)
_DARK_PRIMARY = ('[data-testid="stBaseButton-primary"], [data-testid="stBaseButton-primary"] p, '
                 '[data-testid="stBaseButton-primaryFormSubmit"] p, '
                 '[data-testid="stMultiSelect"] span[title], [data-testid="stMultiSelect"] [role="presentation"] svg '
                 '{ color: #111318 !important; fill: #111318; }')  # (multiselect chips sit on the primary colour)


def page_style() -> None:
    """The app's few CSS rules (see PAGE_CSS); called by the router on every run. The theme Streamlit reports
    decides the dark-only rules (before it is known, the system preference does)."""
    kind = getattr(getattr(st.context, "theme", None), "type", None)
    dark = _DARK_PRIMARY if kind == "dark" else \
        "" if kind == "light" else f"@media (prefers-color-scheme: dark) {{ {_DARK_PRIMARY} }}"
    st.html(PAGE_CSS.replace("</style>", dark + "\n</style>"))
