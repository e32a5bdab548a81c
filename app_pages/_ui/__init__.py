"""Shared page helpers: language, translated strings, widgets whose state holds, figures, downloads, errors. The ONLY
place (with its sibling modules app_pages/_ui/*.py) that wraps viz_core in st.cache_* calls.

Pages call `ui.setup("attention")` first. Every control a person sets goes through the widget helpers below: their
values are stable ids (never translated labels), kept for the whole session, written to the address, and restored by
Back / Forward and shared links (see state.py for how).
"""
from __future__ import annotations

import html
import re
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any
from urllib.parse import urlencode

import plotly.io as pio
import streamlit as st
from plotly.basedatatypes import BaseFigure
from streamlit.runtime.scriptrunner import get_script_run_ctx

from viz_core import i18n
from viz_core.learning.glossary import term as glossary_term  # (app_pages._ui.glossary is the view)
from viz_core.cancel import Cancelled, requested as cancel_requested
from viz_core.errors import InputError, report_unexpected
from viz_core.flights import Flight
from viz_core.plots.common import PLOTLY_CONFIG, PlayLabels

from . import chart, state
from .caches import ByteBoundedCache, arg_key

LANG_KEY = state.LANG


def _fast_tick_labels() -> None:
    """Tick labels may overflow their axis (`ticklabeloverflow='allow'`) in the template every figure carries.

    Plotly's default on numeric axes ('hide past div') measures every tick label with getBoundingClientRect after
    each draw, a forced browser layout per label: on Mechanics' 12 small matrices it was 0.3 s of the switch. Our
    margins already make room for the labels (automargin), so nothing is hidden either way.
    """
    template = pio.templates[pio.templates.default]  # "streamlit", set when streamlit is imported
    for axis in (template.layout.xaxis, template.layout.yaxis):
        axis.ticklabeloverflow = "allow"
    for kind in ("heatmap", "contour", "histogram2d"):  # their colour bars are axes too
        traces = getattr(template.data, kind)
        if traces:
            traces[0].colorbar.ticklabeloverflow = "allow"


_fast_tick_labels()


# ---------------------------------------------------------------- language
_last_lang = "en"  # only read outside a script run (AppTest formats widget options in its own thread)


_RUN_LANG = "attention_explorer_lang"  # the run's language, pinned on its script-run context (pin_lang)


def lang() -> str:
    """Current UI language ('en' or 'zh'): the sidebar choice, else ?lang=, else English."""
    global _last_lang
    ctx = get_script_run_ctx()
    if ctx is None:
        return _last_lang
    pinned = getattr(ctx, _RUN_LANG, None)
    if pinned is not None:
        return pinned
    if LANG_KEY not in st.session_state:
        st.session_state[LANG_KEY] = i18n.normalise_lang(st.query_params.get(LANG_KEY))
    _last_lang = st.session_state[LANG_KEY]
    return _last_lang


def pin_lang(settled: str | None) -> None:
    """app.py: once the sidebar's language radio is drawn, the language is settled for the run (it changes only
    through the radio or the address, and either starts a new full run, which unpins it first): lang() then returns it
    from the run's context instead of reading the session state, about 120 times a run (t() calls it for every
    string; each read through Streamlit's session-state proxy costs 50-80 us). A fragment's rerun keeps the language
    its page's last full run settled. None unpins."""
    ctx = get_script_run_ctx()
    if ctx is not None:
        setattr(ctx, _RUN_LANG, settled)


def t(key: str, **kwargs) -> str:
    """Translated UI string for the current language."""
    return i18n.t(key, lang(), **kwargs)


def setup(namespace: str) -> None:
    """Start a page: its state (see state.py: from the address on a first visit or Back / Forward, else the
    session's store), then its title and one-line summary from locales/<namespace>.json."""
    state.begin(namespace)
    st.title(t(f"{namespace}.title"))
    st.caption(t(f"{namespace}.subtitle"))


# ---------------------------------------------------------------- widgets whose state holds (see state.py)
# Each widget is drawn with its held value as its default too (index=, value=, default=). A browser that has lost a
# widget's state (seen in Chromium right after a page's first run: the next rerun came without the Train page's task
# menu) takes the default of the element it got last; with the menu's first option as default, "Date" became "Copy"
# on the next click. (.streamlit/config.toml silences the server-log warning about a default next to a session value.)
# Not for tabs and expanders: their default is part of their identity (a new default would make a new widget).
class _Hidden:
    """A container that draws nothing (ui.HIDDEN): a control given it is not drawn and returns the value it holds.

    For the controls of a closed fold (fold()): every element drawn costs the browser time on a page switch (issue
    #25), and a closed section's controls still decide the page (e.g. Optimizers' hyperparameters). Their values
    hold as if drawn: the store, else the address, else the default. Any other call on it (columns, caption,
    markdown) draws nothing; columns returns as many hidden containers."""

    def columns(self, spec, **_kw) -> list:
        return [self] * (spec if isinstance(spec, int) else len(spec))

    def __getattr__(self, _name: str):
        return lambda *_a, **_kw: self

    def __enter__(self):
        return self

    def __exit__(self, *_exc) -> None:
        return None


HIDDEN = _Hidden()


def _held(param: str, default: Any, parse: Callable[[str], Any], valid: Callable[[Any], bool]) -> Any:
    """The value of a control that is not drawn (container=HIDDEN), kept in the store and the address."""
    held = value(param, default, parse, valid)
    state.commit(param, held, default)
    return held


def _options_widget(draw: Callable, label: str, options: Sequence, param: str, default: Any,
                    format_func: Callable, container, **kw):
    """An option widget (selectbox, radio, segmented control, select slider) over stable ids, keyed per language."""
    options = list(options)
    default = options[0] if default not in options and options else default  # (the options may depend on others)
    by_text = {state.to_text(o): o for o in options}
    if container is HIDDEN:
        return _held(param, default, by_text.__getitem__, lambda v: v in options)
    key = state.bind(param, default, by_text.__getitem__, lambda v: v in options, lang=lang())
    value = draw(container, options.index(st.session_state[key]))(label, options, key=key, format_func=format_func,
                                                                  **kw)
    state.commit(param, value, default)
    return value


def selectbox(label: str, options: Sequence, param: str, default: Any = None,
              format_func: Callable = str, container=st, **kw):
    """st.selectbox over stable ids whose value holds (session, language switch, address)."""
    return _options_widget(lambda c, i: partial(c.selectbox, index=i), label, options, param, default, format_func,
                           container, **kw)


def radio(label: str, options: Sequence, param: str, default: Any = None,
          format_func: Callable = str, container=st, horizontal: bool = True, **kw):
    """st.radio over stable ids (see selectbox)."""
    return _options_widget(lambda c, i: partial(c.radio, index=i), label, options, param, default, format_func,
                           container, horizontal=horizontal, **kw)


def segmented(label: str, options: Sequence, param: str, default: Any = None,
              format_func: Callable = str, container=st, **kw):
    """st.segmented_control with exactly one choice always selected (see selectbox)."""
    return _options_widget(lambda c, i: lambda lab, opts, **k: c.segmented_control(
        lab, opts, selection_mode="single", required=True, default=opts[i], **k), label, options, param, default,
        format_func, container, **kw)


def select_slider(label: str, options: Sequence, param: str, default: Any = None,
                  format_func: Callable = str, container=st, **kw):
    """st.select_slider over a list of allowed values (e.g. a log scale) (see selectbox)."""
    return _options_widget(lambda c, i: lambda lab, opts, **k: c.select_slider(lab, options=opts, value=opts[i], **k),
                           label, options, param, default, format_func, container, **kw)


def _several(draw: Callable, label: str, options: Sequence, param: str, default: Sequence, format_func: Callable,
             container, in_order: bool = False, **kw) -> list:
    """A widget of several choices over stable ids (multiselect, pills), keyed per language; the address holds them
    comma-separated (in_order: in the options' order, whatever the order they were picked in)."""
    options = list(options)
    by_text = {state.to_text(o): o for o in options}
    default = [o for o in default if o in options]

    def parse(raw: str) -> list:
        return [by_text[x] for x in raw.split(",") if x] if raw else []

    key = state.bind(param, default, parse, lambda v: isinstance(v, list) and all(x in options for x in v),
                     lang=lang())
    value = list(draw(container)(label, options, default=st.session_state[key], key=key, format_func=format_func,
                                 **kw) or [])
    if in_order:
        value = [o for o in options if o in value]
    state.commit(param, value, default)
    return value


def multiselect(label: str, options: Sequence, param: str, default: Sequence = (),
                format_func: Callable = str, container=st, **kw) -> list:
    """st.multiselect over stable ids; the address holds them comma-separated."""
    return _several(lambda c: c.multiselect, label, options, param, default, format_func, container, **kw)


def pills(label: str, options: Sequence, param: str, default: Sequence = (),
          format_func: Callable = str, container=st, **kw) -> list:
    """st.pills with any number picked, over stable ids, in the options' order; the address holds them
    comma-separated. One element for a row of on / off choices: a checkbox each costs a page switch about 2 ms in the
    browser (issue #25: Optimizers' seven racers, 14 ms)."""
    return _several(lambda c: partial(c.pills, selection_mode="multi"), label, options, param, default, format_func,
                    container, in_order=True, **kw)


def tabs(options: Sequence, param: str, format_func: Callable, default: Any = None) -> tuple[Any, dict]:
    """st.tabs whose open tab is a stable id that holds; returns (open id, {id: container}).

    The tabs rerun the page when switched, so a page draws only the open tab (the others stay empty until opened).
    """
    options = list(options)
    default = options[0] if default is None else default
    labels = {o: format_func(o) for o in options}
    by_label = {v: k for k, v in labels.items()}
    by_text = {state.to_text(o): o for o in options}
    key = state.bind(param, default, by_text.__getitem__, lambda v: v in options, lang=lang(),
                     to_widget=labels.__getitem__, from_widget=by_label.__getitem__)
    containers = st.tabs([labels[o] for o in options], key=key, on_change="rerun", default=labels[default])
    chosen = by_label.get(st.session_state.get(key), default)
    state.commit(param, chosen, default)
    return chosen, dict(zip(options, containers))


def _parse_bool(raw: str) -> bool:
    """An address's 1 / 0 (or true / false) as a bool."""
    return raw in ("1", "true", "True")


def fold(label: str, param: str, default: bool = False):
    """A section that opens and closes (st.expander) and is drawn only while open: returns (open, container).

    Opening or closing it reruns the page, and the page draws the contents only when open, so a closed section costs
    the browser nothing on a page switch (issue #25: every chart drawn costs about 40 ms there). Its state holds like
    any control's (the address says 1 / 0). Keyed per language, as tabs are: a translated label is a new expander to
    Streamlit, which would start closed. Controls that decide the page while it is closed are given
    container=HIDDEN then (see _Hidden): `where = box if opened else ui.HIDDEN`."""
    key = state.bind(param, default, _parse_bool, lambda v: isinstance(v, bool), lang=lang())
    box = st.expander(label, key=key, on_change="rerun")
    opened = bool(box.open)
    state.commit(param, opened, default)
    return opened, box


def slider(label: str, min_value, max_value, param: str, default, step=None, container=st, **kw):
    """st.slider whose value holds; a value outside [min, max] (the range moved with another control) is clamped.
    A range of one value (e.g. the head of a one-head model) is no slider (Streamlit refuses min == max): the
    label and that value are written instead."""
    cast = float if isinstance(default, float) else int
    if max_value <= min_value:
        state.commit(param, cast(min_value), default)
        container.caption(t("common.only_value", label=label, value=cast(min_value)))
        return cast(min_value)
    current = state.stored(param)
    if isinstance(current, (int, float)) and not isinstance(current, bool):
        clamped = min(max(current, min_value), max_value)
        if clamped != current:
            state.set_value(param, cast(clamped))
    def valid(v) -> bool:
        return isinstance(v, (int, float)) and min_value <= v <= max_value and _on_step(v, min_value, step)

    if container is HIDDEN:
        return _held(param, default, cast, valid)
    key = state.bind(param, default, cast, valid)
    # a slider's identity includes its range: a new range is a new widget, which starts at its minimum unless
    # its value is re-stated through the session state
    st.session_state[key] = st.session_state[key]
    value = container.slider(label, min_value, max_value, st.session_state[key], key=key, step=step, **kw)
    state.commit(param, value, default)
    return value


def _on_step(value, min_value, step) -> bool:
    """Whether a whole-number slider's value lies on its steps (an address may say d_model=3 where steps are 2)."""
    return not (isinstance(step, int) and step > 1 and isinstance(value, int)) or (value - min_value) % step == 0


def number(label: str, min_value, max_value, param: str, default, step=None, container=st, **kw):
    """st.number_input whose value holds; bounded by min/max.

    The bounds are checked here, not in the browser: Streamlit's own check there keeps a number out of range from
    ever reaching the script (the page went on with, and its messages named, an earlier value) and explains only in
    English. A number typed out of range is refused with a message in the page's language that names it
    and the range, and the box goes back to the value in use."""
    cast = float if isinstance(default, float) else int
    def valid(v) -> bool:
        return isinstance(v, (int, float)) and min_value <= v <= max_value

    if container is HIDDEN:
        return _held(param, default, cast, valid)
    typed = st.session_state.get(state.widget_key(param))  # what the browser sent, before bind re-seeds the box
    in_use = state._table(state.STORE, state.page()).get(param)
    key = state.bind(param, default, cast, valid)
    value = container.number_input(label, None, None, st.session_state[key], key=key, step=step, **kw)
    if isinstance(typed, (int, float)) and not valid(typed) and typed != in_use:  # (not a range another control moved)
        container.error(t("common.out_of_range", label=label, min=_num(min_value), max=_num(max_value),
                          value=_num(typed), kept=_num(value)))
    state.commit(param, value, default)
    return value


def _num(v) -> str:
    """A number as a message shows it: as typed, without a float's trailing '.0' or a thousands separator."""
    return f"{v:.10g}" if isinstance(v, float) else str(v)


def checkbox(label: str, param: str, default: bool = False, container=st, toggle: bool = False, **kw) -> bool:
    """st.checkbox (or st.toggle) whose value holds; the address says 1/0."""
    if container is HIDDEN:
        return _held(param, default, _parse_bool, lambda v: isinstance(v, bool))
    key = state.bind(param, default, _parse_bool, lambda v: isinstance(v, bool))
    widget = container.toggle if toggle else container.checkbox
    value = widget(label, st.session_state[key], key=key, **kw)
    state.commit(param, value, default)
    return value


def text(label: str, param: str, default: str = "", area: bool = False, max_chars: int | None = None,
         container=st, **kw) -> str:
    """st.text_input / st.text_area whose text holds. Returns the raw text: validate it in viz_core."""
    limit = max_chars or 100_000
    key = state.bind(param, default, str, lambda v: isinstance(v, str) and len(v) <= limit)
    widget = container.text_area if area else container.text_input
    value = widget(label, st.session_state[key], key=key, max_chars=max_chars, **kw)
    state.commit(param, value, default)
    return value


def value(param: str, default: Any, parse: Callable[[str], Any] = str,
          valid: Callable[[Any], bool] = lambda v: True) -> Any:
    """A page value that is not a widget (e.g. an edited matrix): from the store, else the address, else default."""
    values = state._table(state.STORE, state.page())
    if param not in values or not valid(values[param]):
        values[param] = state._from_text(state._table(state.ADDRESS, state.page()).get(param), default, parse,
                                         valid)
    return values[param]


def set_value(param: str, new, default: Any) -> None:
    """Record a non-widget page value (see value())."""
    state.commit(param, new, default)


def set_state(param: str, new: Any) -> None:
    """Set a control's value from a callback (e.g. a chart click), before the widget is drawn again."""
    state.set_value(param, new)


def stored(param: str, default: Any = None) -> Any:
    """A control's current value, also inside a callback (its fresh value)."""
    return state.stored(param, default)


# ---------------------------------------------------------------- output
def link(page: str, label: str, params: dict[str, Any] | None = None, container=st, icon: str | None = None) -> None:
    """A link to another page of the app that opens it in a given state (e.g. Mechanics at its GQA section with 9
    query heads and 3 key/value heads): a page switch in the same session, one browser-history entry, the language
    kept. The other page's controls not named in params start at their defaults."""
    container.page_link(f"app_pages/{page}.py", label=label, icon=icon or ":material/arrow_outward:",
                        query_params=state.link_params(lang(), params or {}))


def glossary_href(term: str) -> str:
    """The address of a glossary entry (the Start page's glossary, that term first), in the current language."""
    return "start?" + urlencode({"part": "glossary", "term": term} | state.link_params(lang(), {}))


def glossed(text: str) -> str:
    """Our own markdown with glossary marks: [[softmax]] or [[softmax|the softmax]] becomes a link to that entry of
    the glossary (it opens in a new tab, as Streamlit opens every markdown link, so this page stays as it is).
    Only for texts we write (locale strings): a typed text goes through plain_md."""
    def link(m: re.Match) -> str:
        term = glossary_term(m[1])  # KeyError for a term the glossary lacks (tests/test_glossary.py reads every mark)
        shown = m[2] or t(f"glossary.{term.id}_name")
        return f"[{shown}]({glossary_href(term.id)})"
    return i18n.GLOSSARY_MARK.sub(link, text)


def play_labels() -> PlayLabels:
    """The words of a played history's controls (viz_core.plots.common.animated) in the current language."""
    return PlayLabels(play=t("common.play"), pause=t("common.pause"), prefix=t("common.step"))


def plot(fig, key: str | None = None, on_select=None, selection_mode: str = "points"):
    """A figure with the house settings (theme-aware colours, PNG export button, full width), drawn by the house
    chart element (chart.py: plotly.js in the page, one layout per chart), or by st.plotly_chart where the element is
    not available. `on_select` (a callback or "rerun"): a click on a point is reported as
    `st.session_state[key].selection["points"]`. A shared figure (share()) goes as the JSON / dict it was turned into
    once, not copied and converted again on every run."""
    if chart.available():
        payload = getattr(fig, _JSON, None) or chart.to_bytes(fig.to_dict())
        return chart.draw(payload if on_select is None else chart.selectable(payload), key=key, on_select=on_select)
    spec = getattr(fig, _SPEC, None)
    kw = {} if on_select is None else {"on_select": on_select, "selection_mode": selection_mode}
    return st.plotly_chart(fig if spec is None else _Serialised(spec), key=key, config=PLOTLY_CONFIG,
                           theme="streamlit", width="stretch", **kw)


_JSON = "_viz_json"  # the attribute a shared figure carries: the chart element's JSON, made once (share)
_SPEC = "_viz_spec"  # ... or, where there is no chart element, its to_dict() for st.plotly_chart, made once


def share(fig):
    """Mark a figure as shared read-only (cached for every session: nobody modifies it after this) and serialise it
    once: the chart element's JSON (or plotly's dict where every chart goes through st.plotly_chart). Otherwise each
    run would call fig.to_dict(): a deep copy of every trace and frame and a conversion of every array (Optimizers'
    race figure: 0.1-0.2 s of each page switch, issue #25)."""
    # (a figure's own __setattr__ accepts plotly properties only)
    if chart.available():
        object.__setattr__(fig, _JSON, chart.to_bytes(fig.to_dict()))
    else:
        object.__setattr__(fig, _SPEC, fig.to_dict())
    return fig


class _Serialised(BaseFigure):
    """What st.plotly_chart gets for a shared figure: a figure whose to_dict() is the dict share() made. Streamlit
    reads that dict only (it writes its JSON, sizes the chart from its layout), so it is handed over without a copy.
    BaseFigure's constructor is skipped on purpose: nothing is validated or copied again."""

    def __init__(self, spec: dict):  # noqa: D107 - see the class
        object.__setattr__(self, "_spec", spec)

    def to_dict(self) -> dict:
        return self._spec


def latex(formula: str) -> None:
    """A display formula in a box that scrolls sideways when the screen is narrower than the formula; the box can
    take keyboard focus (so it can be scrolled without a mouse) and reads out as the LaTeX source.

    This is the app's one markdown with unsafe_allow_html, and only formulas written in this code reach it
    (tests/test_html_safety.py checks every call). Even so, whatever the formula, nothing in it can leave the
    math block: "<" / ">" become KaTeX's \\lt / \\gt (no tag can open), "$" becomes \\$ and line breaks spaces (no
    "$$" can end the block and start markdown), and the aria-label is HTML-escaped."""
    formula = " ".join(formula.split())  # one line: a blank line would end the HTML block (label) or the math (body)
    label = html.escape(formula, quote=True)
    body = formula.replace("<", r"\lt ").replace(">", r"\gt ").replace("$", r"\$")
    st.markdown(f'<div class="formula" tabindex="0" role="math" aria-label="{label}">\n\n$$\n{body}\n$$\n\n</div>',
                unsafe_allow_html=True)


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
[data-testid="stTable"] { overflow-x: auto; }
/* the element that starts loading plotly.js (chart.preload) takes no room */
.st-key-ae_plotly_preload { display: none; }
/* links to other pages in the page itself wrap on a narrow screen instead of being cut with an ellipsis */
[data-testid="stMain"] [data-testid="stPageLink-NavLink"] > span:last-child,
[data-testid="stMain"] [data-testid="stPageLink-NavLink"] [data-testid="stMarkdownContainer"],
[data-testid="stMain"] [data-testid="stPageLink-NavLink"] p { white-space: normal; overflow: visible; }
@media (max-width: 640px) {
  .katex-display > .katex { font-size: 0.95em; }
  /* a table's cells wrap (even inside a word) rather than make a scrolling box that a keyboard cannot reach */
  [data-testid="stTable"] table, [data-testid="stMarkdownContainer"] table { table-layout: fixed; width: 100%; }
  [data-testid="stTable"] td, [data-testid="stTable"] th,
  [data-testid="stMarkdownContainer"] td, [data-testid="stMarkdownContainer"] th,
  [data-testid="stTable"] td *, [data-testid="stTable"] th * { white-space: normal !important;
    overflow-wrap: anywhere !important; word-break: break-word !important; min-width: 0; max-width: 100%; }
  /* except tables made to fit a phone, in a container keyed "whole_words...": their columns take the widths their
     names and numbers need (kept whole, a header wraps at its spaces), with less padding (Optimizers' results);
     one still wider than the screen scrolls in its own box */
  [class*="st-key-whole_words"] [data-testid="stMarkdownContainer"] { overflow-x: auto; }
  [class*="st-key-whole_words"] [data-testid="stMarkdownContainer"] table { table-layout: auto; }
  [class*="st-key-whole_words"] [data-testid="stMarkdownContainer"] :is(th, td) { overflow-wrap: normal !important;
    word-break: normal !important; padding-left: 0.375rem; padding-right: 0.375rem; }
  [class*="st-key-whole_words"] [data-testid="stMarkdownContainer"] td { white-space: nowrap !important; }
  [data-testid="stMainBlockContainer"] { padding-left: 0.75rem; padding-right: 0.75rem; }
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


MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>$:~|{}#])")  # what can open markup anywhere in a line
LIST_START = re.compile(r"^(\s*)(?:([-+=])(?=\s)|(\d+)([.)]))")  # what opens a list or a heading at a line's start


def plain_md(text: str) -> str:
    """Text shown as typed in Streamlit's markdown: every character that markdown (or Streamlit's own
    :color[...], :icon:, $math$) could read as markup is escaped with a backslash, and line breaks become
    spaces, so no typed word turns bold, into a link, a list or a formula."""
    one_line = str(text).replace("\r", " ").replace("\n", " ")
    escaped = MARKDOWN_SPECIAL.sub(r"\\\1", one_line)
    return LIST_START.sub(lambda m: m[1] + ("\\" + m[2] if m[2] else m[3] + "\\" + m[4]), escaped)


class Md(str):
    """A table cell that is already safe markdown (built from plain_md / code_md and our own markup): ui.table
    writes it as it is."""


def code_md(text: str) -> str:
    """Text as inline code in a markdown table cell, shown as typed: the fence is one backtick longer than any run of
    backticks inside, and a '|' is escaped (a table splits cells on it even inside code)."""
    one_line = str(text).replace("\r", " ").replace("\n", " ")
    fence = "`" * (max((len(run) for run in re.findall(r"`+", one_line)), default=0) + 1)
    return f"{fence} {one_line} {fence}".replace("|", r"\|")


def table(frame, title: str | None = None) -> None:
    """A small static table (a DataFrame, or a list of row dicts, of our own numbers and labels) as a markdown table:
    the browser draws it at once, where st.table first decodes an Arrow table (about 25 ms of Optimizers' page switch
    in Chromium, measured interleaved, issue #25). Every cell and header is escaped (plain_md): nothing in one is read
    as markup, and a '|' stays in its cell; a cell that is an Md is written as it is (row dicts only: a DataFrame may
    store it as a plain string). A title (plain text) goes in bold above it, in the same element. Read back in tests
    with tests/conftest.md_tables."""
    if isinstance(frame, list):
        columns, rows = list(frame[0]), [list(r.values()) for r in frame]
    else:
        columns, rows = list(frame.columns), list(frame.itertuples(index=False))

    def cell(c) -> str:
        return c if isinstance(c, Md) else plain_md(str(c))

    def row(cells) -> str:
        return "| " + " | ".join(cell(c) for c in cells) + " |"
    head = [f"**{plain_md(title)}**", ""] if title else []
    st.markdown("\n".join([*head, row(columns), "|" + " --- |" * len(columns), *(row(r) for r in rows)]))


def show_error(exc: Exception) -> None:
    """A translated, friendly message for bad input. Anything else (or an InputError without a translation) shows
    a generic translated message with a short error id; the traceback goes to the server's log under that id.
    Never str(exc): it can hold server paths and library messages. The error's values (a typed word, a file
    name) are shown as typed, never as markdown (a "__class__" stays "__class__", not a bold "class")."""
    if isinstance(exc, InputError):
        try:
            params = {k: plain_md(v) if isinstance(v, str) else v for k, v in exc.params.items()}
            st.error(t(exc.code, **params))
            return
        except (KeyError, IndexError, ValueError):  # no such key, or its placeholders do not match the params
            pass
    st.error(t("common.unexpected_error", error_id=report_unexpected(exc, state.page())))


def safe(fn, *args, **kw):
    """(fn(*args, **kw), None), or (None, error) for bad input (InputError): the page shows the error with
    show_error and keeps working."""
    try:
        return fn(*args, **kw), None
    except InputError as exc:
        # a page may keep the error in its state: without these links it would keep every frame it was raised
        # through, and their locals (an upload's bytes) with them
        exc.__traceback__ = exc.__context__ = exc.__cause__ = None
        return None, exc


WAIT_REFRESH_S = 0.25  # how often a progress bar is redrawn while a flight runs
WAIT_RETRIES = 3  # a flight started for a visitor who has since left is started again for this one


def wait_for(flight: Callable[[], Flight], label: Callable[[int, int], str]) -> Any:
    """The result of a computation that runs as a flight (viz_core.flights), with a progress bar while it runs:
    label(percent done, seconds so far). A click meanwhile stops only this wait (the rerun finds the same flight and
    waits on). Raises the computation's error (InputError for bad input); a flight cancelled because the visitor it
    was started for left is started again."""
    for attempt in range(WAIT_RETRIES):
        running = flight()
        if not running.wait(WAIT_REFRESH_S):  # a short computation never shows a bar
            bar = st.empty()
            while not running.wait(WAIT_REFRESH_S):
                bar.progress(running.progress, text=label(round(100 * running.progress), round(running.elapsed_s)))
            bar.empty()
        try:
            return running.value()
        except Cancelled:
            if cancel_requested() or attempt == WAIT_RETRIES - 1:
                raise


def download(label: str, data: bytes | str | Callable[[], bytes | str], file_name: str, mime: str,
             key: str | None = None) -> None:
    """A download button that leaves the page as it is. `data` may be a function that writes the file: it is then
    called when the button is clicked (in a thread of its own), not on every run."""
    st.download_button(label, data=data, file_name=file_name, mime=mime, key=key, on_click="ignore")


# ---------------------------------------------------------------- figures cached by their inputs
FIGURE_CACHE_BYTES = 32 * 2**20  # every shared figure of every page together, counted as twice its JSON (_figure_bytes)


@st.cache_resource(show_spinner=False)
def _figure_cache() -> ByteBoundedCache:
    return ByteBoundedCache(FIGURE_CACHE_BYTES, size=_figure_bytes)


def _figure_bytes(fig) -> int:
    """A shared figure's size, counted as twice its JSON: the figure itself and the form share() keeps beside it
    (the chart element's JSON; or the dict for st.plotly_chart, measured by its JSON: orjson, milliseconds, once)."""
    payload = getattr(fig, _JSON, None)
    return 2 * len(pio.to_json(getattr(fig, _SPEC), validate=False) if payload is None else payload)


class SharedFigures:
    """The figure builders of a viz_core.plots module, each cached by its arguments (labels included, so one figure
    per language): `plots = ui.SharedFigures(viz_core.plots.anatomy)`, then `plots.eps_figure(...)` as before.

    Building a plotly figure (every property validated) is most of a page's script time, and a page switch or a
    rerun asks for the same figures again. The figures of all pages share one least-recently-used cache bounded by
    FIGURE_CACHE_BYTES (a visitor who types 100 sentences cannot make it grow past that). The figures are shared
    read-only; callers must not modify them (plot() sends what share() made when it was cached). Arguments
    that cannot be keyed (caches.arg_key) are built uncached.
    """

    def __init__(self, module):
        self._module, self._cached = module, {}

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        if name not in self._cached:
            builder = getattr(self._module, name)

            def call(*args, **kwargs):
                try:
                    key = (self._module.__name__, name, arg_key(args), arg_key(kwargs))
                except TypeError:  # an argument that cannot be keyed: build it uncached
                    return builder(*args, **kwargs)
                return _figure_cache().get(key, lambda: share(builder(*args, **kwargs)))
            self._cached[name] = call
        return self._cached[name]
