"""Shared page helpers, the ONLY place (with its sibling modules app_pages/_ui/*.py) that wraps viz_core in
st.cache_* calls. Pages call `ui.setup("attention")` first, then `ui.<name>` for everything below.

This file is an index: each name lives in the module of its concern and is re-exported here.

    language.py   the page's language and its strings               lang, pin_lang, t, sentences, LANG_KEY
    widgets.py    controls whose value holds (see state.py), links  setup, selectbox, radio, segmented, select_slider,
                                                                    multiselect, pills, tabs, fold, slider, span,
                                                                    number, checkbox, text, HIDDEN, link
    state.py      a page's values: one read verb, one write verb    value, set_value (and the module itself: state)
    markdown.py   typed text shown as typed, tables, formulas,      plain_md, code_md, Md, table, tables, latex,
                  glossary links                                    glossed, glossary_href
    paragraphs.py our own paragraphs, drawn without Streamlit's     prose
                  markdown where they are plain enough
    figures.py    figures drawn with the house settings, shared     plot, share, SharedFigures, play_labels
                  figures cached by their arguments
    feedback.py   bad input, progress, results to take away         show_error, safe, wait_for, download
    style.py      the page's CSS and the figures' house settings    page_style, PAGE_CSS

Importing any of them changes nothing global (plotly's templates included): the house figure settings are applied to
each figure where it is drawn (figures.spec), the CSS by app.py's call of page_style() on every run.
"""
from __future__ import annotations

from . import chart, state
from .feedback import download, safe, show_error, wait_for
from .figures import SharedFigures, play_labels, plot, share
from .language import LANG_KEY, lang, pin_lang, sentences, t
from .markdown import Md, code_md, glossary_href, glossed, latex, plain_md, table, tables
from .paragraphs import prose
from .state import set_value, value
from .style import PAGE_CSS, page_style
from .widgets import (HIDDEN, checkbox, fold, link, multiselect, number, pills, radio, segmented, select_slider,
                      selectbox, setup, slider, span, tabs, text)

__all__ = [
    "chart", "state",
    "download", "safe", "show_error", "wait_for",
    "SharedFigures", "play_labels", "plot", "share",
    "LANG_KEY", "lang", "pin_lang", "t",
    "Md", "code_md", "glossary_href", "glossed", "latex", "plain_md", "table", "tables", "prose",
    "set_value", "value",
    "PAGE_CSS", "page_style",
    "HIDDEN", "checkbox", "fold", "link", "multiselect", "number", "pills", "radio", "segmented", "select_slider",
    "selectbox", "setup", "slider", "span", "tabs", "text",
]
