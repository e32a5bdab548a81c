"""Start page: the glossary. Every term in the order of learning, each with its name in both languages, a one-line
definition (with a formula where one helps) and a link that opens the page where the app shows it, in that state.

The pages link the first use of a term here (ui.glossed: start?part=glossary&term=<id>): the chosen term (?term=,
the "Jump to a term" picker's value, which holds through a reload and a language switch) is drawn first,
highlighted, above the whole list. Text only, no charts: the whole glossary is about 120 small elements.
Strings: locales/glossary.json (the definitions hold LaTeX braces: they are looked up without format arguments)."""
from __future__ import annotations

import streamlit as st

from viz_core import i18n
from viz_core.learning import glossary

from . import lang, link, selectbox, t

NONE = ""  # the "no term chosen" option of the picker (and the absent ?term=)


def other_lang() -> str:
    """The language not shown (the glossary names every term in both)."""
    return next(x for x in i18n.LANGUAGES if x != lang())


def name(term_id: str, language: str | None = None) -> str:
    """A term's name in a language (the current one by default)."""
    return i18n.t(f"glossary.{term_id}_name", language or lang())


def entry(term: glossary.Term) -> None:
    """One entry: the name (the other language's name beside it, small), the definition, the link to the page."""
    st.markdown(f"**{name(term.id)}** · :small[{name(term.id, other_lang())}]")
    st.markdown(t(f"glossary.{term.id}_def"))
    link(term.page, t(f"glossary.{term.id}_where"), term.link_params)


def chosen_term() -> str:
    """The term the address or the picker chose ("" for none); an unknown ?term= counts as none."""
    options = (NONE,) + glossary.ids()
    return selectbox(t("glossary.jump_label"), options, "term", NONE, help=t("glossary.jump_help"),
                     format_func=lambda i: t("glossary.jump_none") if i == NONE else name(i))


def view() -> None:
    """The glossary part of the Start page."""
    st.markdown(t("glossary.intro"))
    chosen = chosen_term()
    if chosen != NONE:
        with st.container(border=True, gap="xsmall", key="glossary_chosen"):
            entry(glossary.term(chosen))
    st.subheader(t("glossary.all_title"), anchor="glossary-all")
    st.caption(t("glossary.count", n=len(glossary.TERMS)))
    with st.container(gap="medium"):  # room between entries, little inside one: each reads as one block
        for term in glossary.TERMS:
            with st.container(gap="xsmall", key=f"glossary_{term.id}"):
                entry(term)
