"""Controls whose value holds (see state.py for how): their values are stable ids (never translated labels), kept for
the whole session, written to the address, and restored by Back / Forward and shared links. Also the start of a page
(setup) and links to another page in a given state.

Each widget is drawn with its held value as its default too (index=, value=, default=). A browser that has lost a
widget's state takes the default of the element it got last, so any other default would send a different value back
on the next click. (.streamlit/config.toml silences the server-log warning about a default next to a session value.)
Not for tabs and expanders: their default is part of their identity (a new default would make a new widget).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import streamlit as st

from . import state
from .language import lang, t


def setup(namespace: str) -> None:
    """Start a page: its state (see state.py: from the address on a first visit or Back / Forward, else the
    session's store), then its title and one-line summary from locales/<namespace>.json."""
    state.begin(namespace)
    st.title(t(f"{namespace}.title"))
    st.caption(t(f"{namespace}.subtitle"))


class _Hidden:
    """A container that draws nothing (ui.HIDDEN): a control given it is not drawn and returns the value it holds.

    For the controls of a closed fold (fold()): every element drawn costs the browser time on a page switch, and a
    closed section's controls still decide the page (e.g. Optimizers' hyperparameters). Their values hold as if
    drawn: the store, else the address, else the default. Any other call on it (columns, caption, markdown) draws
    nothing; columns returns as many hidden containers."""

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
    held = state.value(param, default, parse, valid)
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
    comma-separated. One element for a row of on / off choices: every element drawn costs the browser time on a page
    switch, a checkbox each would be one element per choice."""
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
    the browser nothing on a page switch (every chart drawn costs the browser time there). Its state holds like
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
    current = state.value(param)
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


def span(label: str, min_value: int, max_value: int, param: str, parts: tuple[str, str], default: tuple[int, int],
         container=st, **kw) -> tuple[int, int]:
    """One st.slider with two handles for a range lo <= hi of two whole-number parameters (`parts`, e.g. the shortest
    and the longest input), each held and written to the address under its own name, as two sliders would be; the
    pair is held under `param` (the widget's key, never in the address). The handles cannot cross, and neither
    handle's range moves with the other's value (as a second slider bounded by the first would)."""
    lo_p, hi_p = parts

    def whole(v) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and min_value <= v <= max_value

    def pair(v) -> bool:
        return isinstance(v, (tuple, list)) and len(v) == 2 and all(map(whole, v)) and v[0] <= v[1]

    lo = state.value(lo_p, default[0], int, whole, fresh=False)  # the store, else the address, else the default
    hi = state.value(hi_p, default[1], int, whole, fresh=False)
    held = (lo, hi) if lo <= hi else tuple(default)
    if container is HIDDEN:
        value = held
    else:
        key = state.bind(param, held, lambda _raw: held, pair)
        value = tuple(container.slider(label, min_value, max_value, tuple(st.session_state[key]), key=key, **kw))
    state.commit(param, value, value)  # (its own default: the pair is never written to the address)
    state.commit(lo_p, value[0], default[0])
    state.commit(hi_p, value[1], default[1])
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
    in_use = state.value(param, fresh=False)
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


def link(page: str, label: str, params: dict[str, Any] | None = None, container=st, icon: str | None = None) -> None:
    """A link to another page of the app that opens it in a given state (e.g. Mechanics at its GQA section with 9
    query heads and 3 key/value heads): a page switch in the same session, one browser-history entry, the language
    kept. The other page's controls not named in params start at their defaults."""
    container.page_link(f"app_pages/{page}.py", label=label, icon=icon or ":material/arrow_outward:",
                        query_params=state.link_params(lang(), params or {}))
