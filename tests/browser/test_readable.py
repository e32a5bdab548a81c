"""Readable everywhere: every page in light and dark, at 1400 px and 390 px wide.

Each case opens a page, saves a screenshot to artifacts/screenshots/readable_*.png (the gallery to look at), and checks
- the axe-core audit: no serious or critical violation (a few rules inside Streamlit's own widgets, which the app
  cannot change, are excluded below, each with its reason);
- every number or token written on a chart cell is readable: from each drawn figure (plotly's resolved data in the
  page) the cell's colour is computed from its colour scale and value (masks and fills composited on top, the page
  background below), and the text's rendered SVG fill must reach WCAG contrast 4.5 against it;
- the page does not scroll sideways (a phone shows everything, formulas and tables scroll inside their own box);
- keyboard: Tab reaches every control of the main area (a radio group counts once: arrows move inside it).

axe-core comes from npm (scripts/test.sh installs it into .cache/axe); without it the audit is skipped (failed
under CI).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from viz_core.plots.common import contrast_ratio, over, parse_colour, scale_colour

from .conftest import ROOT, _unavailable, assert_no_exception, screenshot, wait_done

AXE_JS = Path(os.environ.get("AXE_JS", ROOT / ".cache" / "axe" / "node_modules" / "axe-core" / "axe.min.js"))
PAGES = ["start", "attention", "mechanics", "scaling", "positions", "optimizers", "anatomy", "train", "language_model"]
MIN_CONTRAST = 4.5  # WCAG AA for normal text

# (rule id, CSS selector): a violation on an element inside something matching the selector is left out, because it
# is Streamlit's own widget rendering, which the app cannot change, and not a barrier:
AXE_EXCLUDED = [
    # WCAG 1.4.3 exempts "text that is part of an inactive user interface component": Streamlit greys a disabled
    # widget on purpose (a Stop button while nothing runs). The app draws no disabled slider or text box
    # (a greyed-out label fails the contrast rule): a control that does nothing yet is not drawn.
    ("color-contrast", "[data-testid=stWidgetLabel][disabled], [data-disabled=true], [disabled]"),
]


def _path(page: str, lang: str, extra: str = "") -> str:
    stem = "" if page == "attention" else page
    return f"/{stem}?lang={lang}" + (f"&{extra}" if extra else "")


# ---------------------------------------------------------------- axe
def axe_violations(page) -> list[dict]:
    """Serious and critical axe-core violations on the page (WCAG 2.1 A/AA and best practice), minus AXE_EXCLUDED."""
    if not AXE_JS.exists():
        _unavailable(f"axe-core not found at {AXE_JS}; scripts/test.sh installs it (npm install --prefix .cache/axe)")
    page.add_script_tag(path=str(AXE_JS))
    result = page.evaluate("""async () => {
        const r = await axe.run(document, {resultTypes: ['violations'],
            runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice']}});
        const excluded = (id, target) => { const el = target.length === 1 && document.querySelector(target[0]);
            return !!el && excluded_rules.some(([rule, sel]) => rule === id && el.closest(sel)); };
        return r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
            nodes: v.nodes.map(n => ({target: n.target.join(' '), impact: n.impact, excluded: excluded(v.id, n.target),
                                      summary: (n.failureSummary || '').slice(0, 300)}))}));
    }""".replace("excluded_rules", json.dumps(AXE_EXCLUDED)))
    out = []
    for v in result:
        nodes = [n for n in v["nodes"] if (n["impact"] or v["impact"]) in ("serious", "critical") and not n["excluded"]]
        if nodes:
            out.append(dict(v, nodes=nodes))
    return out


# ---------------------------------------------------------------- text on chart cells
_FIGURES_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(gd => {
    const traces = (gd._fullData || []).filter(t => t.visible === true);
    const heat = traces.filter(t => t.type === 'heatmap').map(t => ({
        axes: t.xaxis + t.yaxis, z: t.z, x: t.x, y: t.y, zmin: t.zmin, zmax: t.zmax, colorscale: t.colorscale,
        opacity: t.opacity}));
    const text = traces.filter(t => t.type === 'scatter' && (t.mode || '').includes('text')).map(t => {
        const nodes = Array.from(gd.querySelectorAll('.trace' + t.uid + ' .textpoint text'));
        return {axes: t.xaxis + t.yaxis, x: t.x, y: t.y, text: t.text,
                fills: nodes.map(n => getComputedStyle(n).fill), shown: nodes.map(n => n.textContent)};
    });
    return {title: (gd.layout && gd.layout.title && gd.layout.title.text) || '', heat, text};
})"""


def _cell_colour(heatmaps: list[dict], xi: int, yi: int, background) -> np.ndarray:
    """The colour of cell (xi, yi): each heatmap's colour of its value there, composited in drawing order."""
    colour = np.array(background, dtype=float)
    for h in heatmaps:
        z = h["z"]
        if yi >= len(z) or xi >= len(z[yi]) or z[yi][xi] is None or not np.isfinite(z[yi][xi]):
            continue
        rgba = scale_colour(np.array(z[yi][xi]), h["colorscale"], h["zmin"], h["zmax"])
        rgba[3] *= h.get("opacity", 1) or 1
        colour = over(rgba, colour)
    return colour


def unreadable_cell_text(page) -> list[str]:
    """Every text on a heatmap cell whose rendered fill has contrast < MIN_CONTRAST with that cell's colour."""
    background = parse_colour(page.evaluate(
        "getComputedStyle(document.querySelector('[data-testid=\"stApp\"]')).backgroundColor"))
    bad: list[str] = []
    checked = 0
    for fig in page.evaluate(_FIGURES_JS):
        for tr in fig["text"]:
            heat = [h for h in fig["heat"] if h["axes"] == tr["axes"]]
            if not heat or not tr["fills"]:
                continue
            assert len(tr["fills"]) == len([s for s in tr["text"] if s != ""]), fig["title"]
            for x, y, fill, shown in zip(tr["x"], tr["y"], tr["fills"], tr["shown"]):
                cell = _cell_colour(heat, int(round(x)), int(round(y)), background)
                ratio = float(contrast_ratio(np.array(parse_colour(fill)), cell))
                checked += 1
                if ratio < MIN_CONTRAST:
                    bad.append(f"{fig['title']!r}: {shown!r} fill {fill} on {np.round(cell[:3]).tolist()} = "
                               f"{ratio:.2f}")
    page.cell_texts_checked = checked  # for the debugging eye: how many texts were measured
    return bad


def show_everything(page, width: int, max_height: int = 16_000) -> None:
    """Make the viewport as tall as the page's content (Streamlit scrolls inside its main box, so a full-page
    screenshot would show only the first screen), then let charts redraw."""
    height = page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
    page.set_viewport_size({"width": width, "height": int(min(max_height, max(height, 600)))})
    page.wait_for_timeout(800)
    wait_done(page)  # a new viewport can rerun the script (placeholders until it is done)
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stSkeleton\"]')", timeout=60_000)


# ---------------------------------------------------------------- keyboard
_MARK_FOCUS_JS = """() => { window.__focused = new Set(); document.addEventListener('focusin', e => {
    const el = e.composedPath()[0]; if (!el.dataset.focusId) el.dataset.focusId = String(Math.random());
    window.__focused.add(el.dataset.focusId); }, true); }"""
_UNREACHED_JS = """() => {
    const main = document.querySelector('[data-testid="stMain"]');
    const visible = el => { const box = (el.closest('label') || el).getBoundingClientRect();  // not in a closed expander
                            return box.width > 0 && box.height > 0 && !el.closest('details:not([open])'); };
    const seen = el => el.dataset.focusId && window.__focused.has(el.dataset.focusId);
    const missed = [];
    const controls = main.querySelectorAll(
        'input:not([type=radio]):not([type=hidden]), textarea, [role=slider], button:not([role=radio]), [role=combobox]');
    for (const el of controls) {
        if (el.disabled || el.getAttribute('aria-disabled') === 'true' || !visible(el)) continue;
        if (el.getAttribute('tabindex') === '-1') continue;  // a part of a widget that has one tab stop (a selectbox's arrow)
        if (el.closest('.modebar, [data-testid="stElementToolbar"], [data-testid="stFullScreenFrame"] > div > button'))
            continue;  // plotly / dataframe toolbars: shown on hover, reachable once the chart has focus
        if (el.matches('input') && el.closest('[role=combobox]') && seen(el.closest('[role=combobox]'))) continue;
        if (el.matches('button[data-variant]') && el.closest('[data-testid="stButtonGroup"]')) continue;  // below
        if (!seen(el)) missed.push((el.getAttribute('aria-label') || el.innerText || el.outerHTML).slice(0, 80)
                                   + ' in ' + (el.closest('[data-testid]') || el).getAttribute('data-testid'));
    }
    // pills / segmented controls: one tab stop per group, arrow keys move between its buttons (react-aria)
    for (const group of main.querySelectorAll('[data-testid="stButtonGroup"]')) {
        const buttons = Array.from(group.querySelectorAll('button[data-variant]'));
        if (buttons.length && !buttons.some(seen) && visible(group))
            missed.push('button group ' + group.innerText.trim().slice(0, 40));
    }
    for (const group of main.querySelectorAll('[role=radiogroup]')) {
        const radios = Array.from(group.querySelectorAll('input[type=radio], [role=radio], button'));
        if (radios.length && !radios.some(seen) && visible(group))
            missed.push('radio group ' + (group.getAttribute('aria-label') || ''));
    }
    return missed;
}"""


_TAB_STOPS_JS = """() => document.querySelectorAll(
    'a[href], button, input, textarea, select, summary, iframe, [tabindex]:not([tabindex="-1"])').length"""


def unreachable_controls(page) -> list[str]:
    """Press Tab once per possible tab stop of the page (and a few more), then list the controls never focused."""
    page.evaluate(_MARK_FOCUS_JS)
    page.evaluate("() => { document.activeElement && document.activeElement.blur(); window.scrollTo(0, 0); }")
    for _ in range(page.evaluate(_TAB_STOPS_JS) + 5):
        page.keyboard.press("Tab")
    return page.evaluate(_UNREACHED_JS)


# ---------------------------------------------------------------- the cases
def _check(open_page, page_name: str, *, dark: bool, width: int, lang: str, extra: str = "", keyboard: bool = False):
    theme = "dark" if dark else "light"
    page = open_page(_path(page_name, lang, extra), width=width, height=844 if width < 600 else 1000, dark=dark)
    tag = page_name + (f"_{extra.replace('=', '-').replace('&', '_')}" if extra else "")
    show_everything(page, width)
    screenshot(page, f"readable_{tag}_{theme}_{width}_{lang}")
    assert_no_exception(page)
    assert page.locator("[data-testid='stMain']").inner_text().strip(), "the page drew nothing"
    problems = {}
    text = unreadable_cell_text(page)
    if text:
        problems["chart text contrast"] = text
    overflow = page.evaluate("() => document.documentElement.scrollWidth - document.documentElement.clientWidth")
    if overflow > 2:
        problems["page scrolls sideways by px"] = overflow
    violations = axe_violations(page)
    if violations:
        problems["axe"] = json.dumps(violations, indent=1, ensure_ascii=False)[:6000]
    if keyboard:
        missed = unreachable_controls(page)
        if missed:
            problems["not reachable with Tab"] = missed
    assert not problems, problems


@pytest.mark.parametrize("page_name", PAGES)
@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
def test_wide_en(open_page, page_name, dark):
    """1400 px, English; keyboard checked in the light theme."""
    _check(open_page, page_name, dark=dark, width=1400, lang="en", keyboard=not dark)


@pytest.mark.parametrize("page_name", PAGES)
@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
def test_phone_zh(open_page, page_name, dark):
    """390 px (a phone), Chinese, both themes."""
    _check(open_page, page_name, dark=dark, width=390, lang="zh")


@pytest.mark.parametrize("extra, lang, width, dark", [
    ("step=13&p_reverse=diagonal", "en", 1400, True), ("step=9&p_waves=first", "zh", 390, False),
    ("step=16&p_qk=self&p_causal=below", "en", 1400, False), ("part=glossary&term=softmax", "zh", 390, True)])
def test_start_answers_and_glossary(open_page, extra, lang, width, dark):
    """The Start page with answers shown (a verdict, a figure, the why), its summary table and the glossary."""
    _check(open_page, "start", dark=dark, width=width, lang=lang, extra=extra, keyboard=not dark and width > 600)


@pytest.mark.parametrize("extra, dark", [("section=masks", False), ("section=masks", True),
                                         ("section=steps&src=random", True), ("section=cross", True)])
def test_mechanics_cells(open_page, extra, dark):
    """The annotated matrices of Mechanics (masks in both themes, a 4 x 8 X, cross attention)."""
    _check(open_page, "mechanics", dark=dark, width=1400, lang="en", extra=extra)


def test_positions_cells_dark(open_page):
    """Positions' annotated attention weights (the word-order experiment), dark."""
    _check(open_page, "positions", dark=True, width=1400, lang="en", extra="part=order")


@pytest.mark.parametrize("extra, lang, width, dark", [
    ("view=compare", "en", 1400, False), ("view=compare", "zh", 390, True),
    ("view=qkmap&qk_q=3", "en", 1400, True), ("view=qkmap", "zh", 390, False)])
def test_compare_and_query_key_map(open_page, extra, lang, width, dark):
    """The Attention page's views of two texts compared, and of the query-key map with a chosen query."""
    _check(open_page, "attention", dark=dark, width=width, lang=lang, extra=extra, keyboard=not dark and width > 600)


@pytest.mark.parametrize("page_name, extra", [("train", "tab=snapshots"), ("language_model", "tab=generate")])
def test_histories_that_play(open_page, page_name, extra):
    """The played histories' buttons and slider (plotly's own controls) on the dark theme. (The keyboard walk only on
    Train: the generate tab's text block has Streamlit's hover-only "copy" button, which Tab does not reach.)"""
    _check(open_page, page_name, dark=True, width=1400, lang="en", extra=extra, keyboard=page_name == "train")
