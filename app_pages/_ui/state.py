"""Page state that holds: every control's value survives reruns, page switches, language switches, Back / Forward,
reloads and shared links.

Three facts of Streamlit shape this module:
- Streamlit forgets the state of a widget it did not draw in a run (a page switch draws none of the old page's), so
  values live in a session-wide *store*, keyed by page and parameter, that is not widget state.
- An option widget's value comes back from the browser as its displayed label, so after a language switch an
  English label would not match the Chinese options. Option widgets are therefore keyed per language (a new widget
  after a switch, seeded from the store), and the store only ever holds stable ids, never labels.
- Every change of the address pushes one browser-history entry, so the address is written only when it differs: at
  the end of a script run, or once earlier in a run that works for long (early_address after 0.25 s, wait_for when
  its progress bar appears; the end then finds it written), so that a reload during the wait comes back to what was
  asked. It holds only non-default values (a first visit writes nothing). Sidebar links carry each page's address,
  so a page switch is one entry too.

The address (the query string) of a page is the text form of its non-default values. It is read when a page opens for
the first time in a session (a shared link, a reload), and on Back / Forward (the address is then the truth: a missing
parameter means its default; so too after a reconnect that lost the first run, see nav.reask_lost_page); otherwise the
store is the truth and the address follows it.

Two verbs for a page's values: value() reads one, set_value() writes one (from a callback, such as a chart click or a
reset button, or for a value no widget shows, such as an edited matrix). The widget helpers (widgets.py) draw a
control between bind() (seed its widget) and commit() (record what it returned).
"""
from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import streamlit as st
from streamlit.runtime.scriptrunner import add_script_run_ctx, get_script_run_ctx

from viz_core.i18n import LANGUAGES

STORE = "_ui.store"      # {page: {param: value}}: typed values of the params seen so far
ADDRESS = "_ui.address"  # {page: {param: text}}: the non-default values, as the page's address carries them
PAGE = "_ui.page"        # the page of the current (or last) full script run
PINNED = "_ui.pinned"    # {page: {param: text}}: values a link gave, kept in the address even where they are defaults
REOPENED = "_ui.reopened"  # this run asks again for the page of a browser that never saw its first run (nav.py)
LANG = "lang"            # the language parameter (sidebar radio key and address parameter)
DEFAULT_LANG = "en"


def page() -> str:
    return st.session_state.get(PAGE, "page")


def _table(name: str, ns: str) -> dict:
    return st.session_state.setdefault(name, {}).setdefault(ns, {})


def is_history_navigation() -> bool:
    ctx = get_script_run_ctx()
    return bool(ctx is not None and getattr(ctx, "is_history_navigation", False))


def address_is_truth() -> bool:
    """Back / Forward, or a browser that reconnected before it saw its page's first run (nav.reask_lost_page): the
    browser shows the address, so the address, not the store, says the page's state. The second case also re-seeds
    every widget: the values seeded in the lost run never reached the browser, which would send its defaults back."""
    return is_history_navigation() or bool(st.session_state.get(REOPENED))


def in_fragment_run() -> bool:
    ctx = get_script_run_ctx()
    return bool(ctx is not None and getattr(ctx, "fragment_ids_this_run", None))


def begin(ns: str) -> None:
    """Start a page's full run: on its first visit in this session, on Back / Forward, and when a link from another
    page opens it in a given state (a deep link: its parameters differ from what the page's own sidebar link
    carries), the address is the truth."""
    previous = st.session_state.get(PAGE)
    st.session_state[PAGE] = ns
    visited = ns in st.session_state.setdefault(STORE, {})
    linked = previous not in (None, ns) and not address_is_truth() and _linked_in(ns)
    if not visited or address_is_truth() or linked:
        st.session_state[STORE][ns] = {}
        st.session_state.setdefault(ADDRESS, {})[ns] = {
            k: v for k, v in st.query_params.to_dict().items() if k != LANG}
        # a link's values stay in the address until changed, defaults too: dropping them would write a second
        # address, and Back would then land on the link's own address instead of the page the link was on
        st.session_state.setdefault(PINNED, {})[ns] = dict(st.session_state[ADDRESS][ns]) if linked else {}


def _linked_in(ns: str) -> bool:
    """Whether this page was entered through a link that sets its state: the sidebar's links carry exactly the
    page's address as the session left it, so other parameters mean a link (link_params) chose them."""
    asked = {k: v for k, v in st.query_params.to_dict().items() if k != LANG}
    return asked != st.session_state.get(ADDRESS, {}).get(ns, {})


def link_params(lang: str, params: dict[str, Any]) -> dict[str, str]:
    """The query parameters of a link that opens a page in a given state (its own parameters, as text)."""
    return ({LANG: lang} if lang != DEFAULT_LANG else {}) | {k: to_text(v) for k, v in params.items()}


def widget_key(param: str, lang: str | None = None) -> str:
    """The widget key of a parameter: '<page>.<param>', plus '.<lang>' for option widgets (see the module doc)."""
    return f"{page()}.{param}" + (f".{lang}" if lang else "")


def bind(param: str, default: Any, parse: Callable[[str], Any], valid: Callable[[Any], bool],
         lang: str | None = None, to_widget: Callable[[Any], Any] | None = None,
         from_widget: Callable[[Any], Any] | None = None) -> str:
    """Seed the widget of `param` before it is drawn; return its key.

    A parameter seen for the first time (this session, or since Back / Forward) takes its value from the address,
    else the default. A widget Streamlit forgot (page or language switch) is re-seeded from the store. A stored value
    that is no longer valid (its range depends on another control) falls back to the default. to_widget /
    from_widget convert between the stored id and the widget's own value where they differ (tabs hold labels).
    """
    ns, key = page(), widget_key(param, lang)
    to_widget = to_widget or (lambda v: v)
    from_widget = from_widget or (lambda v: v)
    values = _table(STORE, ns)
    if param not in values:
        values[param] = _from_text(_table(ADDRESS, ns).get(param), default, parse, valid)
        st.session_state[key] = to_widget(values[param])
    elif not valid(values[param]):
        values[param] = default
        st.session_state[key] = to_widget(default)
    elif key not in st.session_state or not _valid_widget(st.session_state[key], from_widget, valid):
        st.session_state[key] = to_widget(values[param])
    return key


def _valid_widget(raw: Any, from_widget: Callable[[Any], Any], valid: Callable[[Any], bool]) -> bool:
    try:
        return valid(from_widget(raw))
    except (KeyError, TypeError, ValueError):
        return False


def _from_text(raw: str | None, default: Any, parse: Callable[[str], Any], valid: Callable[[Any], bool]) -> Any:
    if raw is None:
        return default
    try:
        value = parse(raw)
    except (TypeError, ValueError, KeyError):
        return default
    return value if value is not None and valid(value) else default


def to_text(value: Any) -> str:
    """A value's text in the address: 1/0 for booleans, comma-joined lists, str() otherwise."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (list, tuple)):
        return ",".join(to_text(v) for v in value)
    return str(value)


def commit(param: str, value: Any, default: Any) -> None:
    """Record the value a widget returned when drawn: in the store, and in the address unless it is the default."""
    _table(STORE, page())[param] = value
    _address(param, value, default)


def _address(param: str, value: Any, default: Any) -> None:
    """Write a value's text into the open page's address (dropped where it is the default, kept as a link gave it)."""
    ns = page()
    address = _table(ADDRESS, ns)
    text = to_text(value)
    pinned = _table(PINNED, ns)
    if pinned.get(param) == text:  # as a link gave it (see begin)
        address[param] = text
        return _fragment_sync()
    pinned.pop(param, None)
    if text == to_text(default):
        address.pop(param, None)
    else:
        address[param] = text
    _fragment_sync()


def _fragment_sync() -> None:
    if in_fragment_run():  # a fragment rerun does not reach the end of the script: write the address now
        sync_address()


def address_text(param: str) -> str | None:
    """The text the open page's address holds for `param` (None: none): what a link, a reload or Back / Forward
    gave when the address was the truth (begin), else what this session last committed."""
    return _table(ADDRESS, page()).get(param)


_UNSET = object()  # set_value without a default: the address is left to the control's widget


def value(param: str, default: Any = None, parse: Callable[[str], Any] | None = None,
          valid: Callable[[Any], bool] | None = None, fresh: bool = True) -> Any:
    """A parameter's current value, the one read verb: its widget's fresh value where the browser holds one (also
    inside a callback, before the widget is drawn again), else the store's, else, given `parse`, the address's
    text parsed (kept in the store, so later reads agree), else `default`. `valid` refuses a stored or an address
    value (the default is taken instead). fresh=False skips the widget: the value the page last used."""
    if fresh:
        for lang in (None, st.session_state.get(LANG)):
            key = widget_key(param, lang)
            if key in st.session_state:
                return st.session_state[key]
    values = _table(STORE, page())
    if param in values and (valid is None or valid(values[param])):
        return values[param]
    if parse is None:
        return default
    values[param] = _from_text(_table(ADDRESS, page()).get(param), default, parse, valid or (lambda _v: True))
    return values[param]


def set_value(param: str, value: Any, default: Any = _UNSET) -> None:
    """Set a parameter, the one write verb: the store takes the value and any widget of it forgets its own, so the
    control shows the value when next drawn. Given the parameter's default, the address is written now too (a value
    no widget shows); without it, the control writes the address when it is drawn."""
    _table(STORE, page())[param] = value
    for key in [widget_key(param, lang) for lang in (None, *LANGUAGES)]:
        if key in st.session_state:
            del st.session_state[key]
    if default is not _UNSET:
        _address(param, value, default)


def page_address(ns: str, lang: str) -> dict[str, str]:
    """The query parameters of a page as the user left it (for sidebar links and the address bar)."""
    params = {LANG: lang} if lang != DEFAULT_LANG else {}
    return params | st.session_state.get(ADDRESS, {}).get(ns, {})


_WRITING = threading.Lock()  # the run's thread and its early-address timer never write the address at once


def sync_address() -> None:
    """Write the open page's address, in one message and only if it changed (one browser-history entry)."""
    if PAGE not in st.session_state:
        return
    with _WRITING:
        target = page_address(page(), st.session_state.get(LANG, DEFAULT_LANG))
        if st.query_params.to_dict() != target:
            st.query_params.from_dict(target)


EARLY_ADDRESS_S = 0.25  # a run that takes longer has its address written while it still works


@contextmanager
def early_address(after_s: float = EARLY_ADDRESS_S) -> Iterator[None]:
    """Around a page's script run: once the run has taken after_s, the address is written with the values committed
    so far (the controls are drawn first, the long work comes after them), from a timer thread that carries the
    run's context, as Streamlit shows its spinner. A reload or a shared link while the page still works (a model's
    forward pass over a long text, the logit lens, a head map) then comes back to what the visitor asked for; the
    end of the run writes again only what changed since. A run that ends sooner writes nothing early."""
    timer = threading.Timer(after_s, sync_address)
    add_script_run_ctx(timer)
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        timer.join()  # (a write under way ends before the run's own)


# ---------------------------------------------------------------- what a session keeps of its widgets
_log = logging.getLogger(__name__)


DRAWN = "_ui.drawn"  # the widget ids of this session's last completed run
# A st.components.v2 element (the house chart element) registers a second widget beside its own id, the aggregator of
# its trigger events: "$$STREAMLIT_INTERNAL_KEY_" + id + "__events". It is not among the run's widget ids; it lives as
# long as its element does (its metadata holds the callbacks a click calls).
_TRIGGERS = re.compile(r"^\$\$STREAMLIT_INTERNAL_KEY_(?P<id>.+)__events$")


def _component_of(widget_id: str) -> str | None:
    """The element id whose trigger aggregator `widget_id` is, or None."""
    m = _TRIGGERS.match(widget_id)
    return m and m.group("id")


def forget_stale_widgets(completed: bool) -> int:
    """Drop what Streamlit keeps of widgets that are no longer on the page; returns how many were dropped.

    Streamlit (1.67) removes a stale widget's value at the end of a run but keeps its metadata (serialiser,
    deserialiser and callbacks) for the life of the session. A widget whose id changes from run to run (a
    selectable chart: its id hashes its figure) thus left one entry per run, and its callback and format functions
    held that run's page globals, and with them the run's attention result: a session's memory would grow with every
    run. What a session keeps must not grow with the number of runs.

    Called by the router at the end of every full run. After a completed run, every widget on the page was drawn
    in it: the metadata of any other id goes. A run cut short by a rerun (a visitor who types faster than the page
    runs) drew only some: the widgets of the last completed run stay too, since the browser may still show them.
    """
    ctx = get_script_run_ctx()
    try:
        drawn = ctx.shared.widget_ids_this_run.snapshot()
        safe = ctx.session_state                # SafeSessionState (a lock around the SessionState)
        inner = safe._state                     # SessionState
        metadata = inner._new_widget_state.widget_metadata
        key_to_id, id_to_key = inner._key_id_mapper._key_id_mapping, inner._key_id_mapper._id_key_mapping
    except AttributeError:  # another Streamlit version: nothing dropped (tests/test_serving.py notices)
        _log.warning("forget_stale_widgets: this Streamlit version keeps its widget metadata elsewhere")
        return 0
    with safe._lock:
        keep = set(drawn) if completed else set(drawn) | inner._old_state.get(DRAWN, frozenset())
        if completed:
            inner._old_state[DRAWN] = frozenset(drawn)
        stale = [wid for wid in metadata if wid not in keep and _component_of(wid) not in keep]
        for wid in stale:
            del metadata[wid]
        for wid, key in list(id_to_key.items()):  # old ids of keys that now name another widget id
            if wid not in keep and key_to_id.get(key) != wid:
                del id_to_key[wid]
    return len(stale)
