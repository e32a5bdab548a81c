"""The page's language: which one is shown (the sidebar's choice, else ?lang=, else English) and its strings (t)."""
from __future__ import annotations

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from viz_core import i18n

from . import state

LANG_KEY = state.LANG
_RUN_LANG = "attention_explorer_lang"  # the run's language, pinned on its script-run context (pin_lang)
_last_lang = "en"  # only read outside a script run (AppTest formats widget options in its own thread)


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
    from the run's context instead of reading the session state, which t() would otherwise read for every string
    through Streamlit's session-state proxy. A fragment's rerun keeps the language its page's last full run settled.
    None unpins."""
    ctx = get_script_run_ctx()
    if ctx is not None:
        setattr(ctx, _RUN_LANG, settled)


def t(key: str, **kwargs) -> str:
    """Translated UI string for the current language."""
    return i18n.t(key, lang(), **kwargs)


def sentences(*parts: str) -> str:
    """Sentences one after another in the current language (i18n.sentences: no space after a Chinese full stop)."""
    return i18n.sentences(parts, lang())
