"""Shared page helpers: language, translated strings, widgets whose state lives in the URL, figures, downloads,
errors. The ONLY place (with its sibling modules pages/_ui/*.py) that wraps viz_core in st.cache_* calls.

Pages call `ui.setup("attention")` first; it remembers the page's namespace for widget keys and URL params.
"""
from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from viz_core import i18n
from viz_core.errors import InputError
from viz_core.plots.common import PLOTLY_CONFIG

LANG_KEY = "lang"


# ---------------------------------------------------------------- language
_last_lang = "en"  # only read outside a script run (AppTest formats widget options in its own thread)


def lang() -> str:
    """Current UI language ('en' or 'zh'): the sidebar choice, else ?lang=, else English."""
    global _last_lang
    if get_script_run_ctx() is None:
        return _last_lang
    if LANG_KEY not in st.session_state:
        st.session_state[LANG_KEY] = i18n.normalise_lang(st.query_params.get(LANG_KEY))
    _last_lang = st.session_state[LANG_KEY]
    return _last_lang


def t(key: str, **kwargs) -> str:
    """Translated UI string for the current language."""
    return i18n.t(key, lang(), **kwargs)


def setup(namespace: str) -> None:
    """Start a page: remember its namespace, draw its title and one-line summary from locales/<namespace>.json."""
    st.session_state["_page_ns"] = namespace
    st.title(t(f"{namespace}.title"))
    st.caption(t(f"{namespace}.subtitle"))


# ---------------------------------------------------------------- URL-backed widget state
def _key(param: str) -> str:
    return f"{st.session_state.get('_page_ns', 'page')}.{param}"


def _initial(param: str, default: Any, parse: Callable[[str], Any], valid: Callable[[Any], bool]) -> str:
    """Seed the widget's session state from ?param= once (falling back to default if absent or invalid)."""
    key = _key(param)
    if key not in st.session_state:
        value = default
        raw = st.query_params.get(param)
        if raw is not None:
            try:
                parsed = parse(raw)
                value = parsed if valid(parsed) else default
            except (TypeError, ValueError):
                value = default
        st.session_state[key] = value
    elif not valid(st.session_state[key]):
        st.session_state[key] = default
    return key


def _publish(param: str, value: Any) -> None:
    text = ("1" if value else "0") if isinstance(value, bool) else str(value)
    if st.query_params.get(param) != text:
        st.query_params[param] = text


def selectbox(label: str, options: Sequence, param: str, default: Any = None,
              format_func: Callable = str, container=st, **kw):
    """st.selectbox whose value is restored from and written to ?param=."""
    options = list(options)
    default = options[0] if default is None and options else default
    by_text = {str(o): o for o in options}
    key = _initial(param, default, lambda raw: by_text[raw] if raw in by_text else None, lambda v: v in options)
    value = container.selectbox(label, options, key=key, format_func=format_func, **kw)
    _publish(param, value)
    return value


def radio(label: str, options: Sequence, param: str, default: Any = None,
          format_func: Callable = str, container=st, horizontal: bool = True, **kw):
    """st.radio backed by ?param= (see selectbox)."""
    options = list(options)
    default = options[0] if default is None and options else default
    by_text = {str(o): o for o in options}
    key = _initial(param, default, lambda raw: by_text.get(raw), lambda v: v in options)
    value = container.radio(label, options, key=key, format_func=format_func, horizontal=horizontal, **kw)
    _publish(param, value)
    return value


def slider(label: str, min_value, max_value, param: str, default, step=None, container=st, **kw):
    """st.slider backed by ?param=; a URL value outside [min, max] falls back to the default."""
    cast = float if isinstance(default, float) else int
    key = _key(param)
    if isinstance(st.session_state.get(key), (int, float)):  # the range moved (it depends on another widget): clamp
        st.session_state[key] = min(max(st.session_state[key], min_value), max_value)
    key = _initial(param, default, cast, lambda v: isinstance(v, (int, float)) and min_value <= v <= max_value)
    value = container.slider(label, min_value, max_value, key=key, step=step, **kw)
    _publish(param, value)
    return value


def number(label: str, min_value, max_value, param: str, default, step=None, container=st, **kw):
    """st.number_input backed by ?param=; bounded by min/max."""
    cast = float if isinstance(default, float) else int
    key = _initial(param, default, cast, lambda v: isinstance(v, (int, float)) and min_value <= v <= max_value)
    value = container.number_input(label, min_value, max_value, key=key, step=step, **kw)
    _publish(param, value)
    return value


def checkbox(label: str, param: str, default: bool = False, container=st, toggle: bool = False, **kw) -> bool:
    """st.checkbox (or st.toggle) backed by ?param= as 1/0."""
    key = _initial(param, default, lambda raw: raw in ("1", "true", "True"), lambda v: isinstance(v, bool))
    widget = container.toggle if toggle else container.checkbox
    value = widget(label, key=key, **kw)
    _publish(param, value)
    return value


def text(label: str, param: str, default: str = "", area: bool = False, max_chars: int | None = None,
         container=st, **kw) -> str:
    """st.text_input / st.text_area backed by ?param=. Returns the raw text: validate it in viz_core."""
    limit = max_chars or 100_000
    key = _initial(param, default, str, lambda v: isinstance(v, str) and len(v) <= limit)
    widget = container.text_area if area else container.text_input
    value = widget(label, key=key, max_chars=max_chars, **kw)
    _publish(param, value)
    return value


# ---------------------------------------------------------------- output
def plot(fig, key: str | None = None, **kw):
    """st.plotly_chart with the house settings (theme-aware colours, PNG export button, full width)."""
    return st.plotly_chart(fig, key=key, config=PLOTLY_CONFIG, theme="streamlit", width="stretch", **kw)


def latex(formula: str) -> None:
    st.latex(formula)


def show_error(exc: Exception) -> None:
    """A translated, friendly message for bad input; any other exception is reported without a traceback."""
    if isinstance(exc, InputError):
        try:
            st.error(t(exc.code, **exc.params))
            return
        except KeyError:
            pass
    st.error(t("common.unexpected_error", error=str(exc)[:300]))


def npz_bytes(**arrays) -> bytes:
    """Arrays (numpy or lists of strings) as one .npz file in memory."""
    buf = io.BytesIO()
    np.savez_compressed(buf, **{k: np.asarray(v) for k, v in arrays.items()})
    return buf.getvalue()


def download(label: str, data: bytes | str, file_name: str, mime: str, key: str | None = None) -> None:
    st.download_button(label, data=data, file_name=file_name, mime=mime, key=key, on_click="ignore")


def set_state(param: str, value: Any) -> None:
    """Set a ui.* widget's value from a callback (e.g. a chart click), before the widget is drawn again."""
    st.session_state[_key(param)] = value
