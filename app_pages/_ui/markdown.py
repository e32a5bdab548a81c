"""Markdown the pages write: typed text shown as typed (plain_md, code_md), small static tables (table, tables), display
formulas (latex) and our own texts with glossary marks turned into links (glossed).

Typed text never reaches HTML: latex is the app's one markdown with unsafe_allow_html, and only formulas written in
this code reach it (tests/test_html_safety.py checks every call)."""
from __future__ import annotations

import html
import re
from urllib.parse import urlencode

import streamlit as st

from viz_core import i18n
from viz_core.learning.glossary import term as glossary_term  # (app_pages._ui.glossary is the view)

from . import formula as formula_element
from . import static_table as table_element
from . import state
from .language import lang, t


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
    """A small static table (a DataFrame, or a list of row dicts, of our own numbers and labels), drawn at once by the
    browser, where st.table would first decode an Arrow table on every page switch: by the table element
    (static_table.py), every cell and header as text, or, where a cell is an Md (row dicts only: a DataFrame may
    store it as a plain string), as a markdown table whose other cells are escaped (plain_md): nothing in one is read
    as markup, and a '|' stays in its cell. A title (plain text) goes in bold above it, in the same element. Read
    back in tests with tests/conftest.md_tables."""
    tables([frame], title)


def tables(frames, title: str | None = None) -> None:
    """Several small tables (as table() draws each) one under the other, in one element: each element costs the
    browser time on every page switch. `title` goes above the first."""
    frames = list(frames)
    cells = [_cells(frame) for frame in frames]
    marked = any(isinstance(c, Md) for _, rows in cells for row in rows for c in row)
    if table_element.available() and not marked:  # (markup in a cell: markdown draws it)
        table_element.draw([{"title": title if i == 0 else None, "columns": [str(c) for c in columns],
                             "rows": [[str(c) for c in row] for row in rows]}
                            for i, (columns, rows) in enumerate(cells)])
        return
    st.markdown("\n\n".join(table_md(frame, title if i == 0 else None) for i, frame in enumerate(frames)))


def _cells(frame) -> tuple[list, list[list]]:
    """(column names, rows of cells) of a DataFrame or a list of row dicts."""
    if isinstance(frame, list):
        return list(frame[0]), [list(r.values()) for r in frame]
    return list(frame.columns), [list(r) for r in frame.itertuples(index=False)]


def table_md(frame, title: str | None = None) -> str:
    """The markdown of table(frame, title)."""
    columns, rows = _cells(frame)

    def cell(c) -> str:
        return c if isinstance(c, Md) else plain_md(str(c))

    def row(cells) -> str:
        return "| " + " | ".join(cell(c) for c in cells) + " |"
    head = [f"**{plain_md(title)}**", ""] if title else []
    return "\n".join([*head, row(columns), "|" + " --- |" * len(columns), *(row(r) for r in rows)])


def latex(formula: str) -> None:
    """A display formula in a box that scrolls sideways when the screen is narrower than the formula; the box can
    take keyboard focus (so it can be scrolled without a mouse) and reads out as the LaTeX source.

    Drawn by the formula element (app_pages/_ui/formula.py: the same KaTeX, without React's node per KaTeX node)
    where the installed Streamlit allows it. Otherwise in markdown: the app's one markdown with unsafe_allow_html,
    and only formulas written in this code reach it (tests/test_html_safety.py checks every call). Even so, whatever
    the formula, nothing in it can leave the math block: "<" / ">" become KaTeX's \\lt / \\gt (no tag can open), "$"
    becomes \\$ and line breaks spaces (no "$$" can end the block and start markdown), and the aria-label is
    HTML-escaped."""
    formula = " ".join(formula.split())  # one line: a blank line would end the HTML block (label) or the math (body)
    if formula_element.available():
        formula_element.draw(formula, label=formula)
        return
    label = html.escape(formula, quote=True)
    body = formula.replace("<", r"\lt ").replace(">", r"\gt ").replace("$", r"\$")
    st.markdown(f'<div class="formula" tabindex="0" role="math" aria-label="{label}">\n\n$$\n{body}\n$$\n\n</div>',
                unsafe_allow_html=True)


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
