"""The pages of the app, in sidebar order: (file stem in pages/, icon). Titles: locales/common.json "nav_<stem>".

The root address (/) opens DEFAULT_PAGE, Attention, as it always has: addresses shared before the Start page existed
(/?text=...) keep opening what they showed."""

PAGES = [
    ("start", ":material/school:"),  # first in the sidebar; Attention stays the default address (DEFAULT_PAGE)
    ("attention", ":material/grid_on:"),
    ("head_finder", ":material/manage_search:"),
    ("mechanics", ":material/calculate:"),
    ("scaling", ":material/straighten:"),
    ("positions", ":material/waves:"),
    ("optimizers", ":material/landscape:"),
    ("anatomy", ":material/account_tree:"),
    ("train", ":material/model_training:"),
    ("language_model", ":material/text_fields:"),
]

DEFAULT_PAGE = "attention"
NOT_FOUND = "not_found"  # a hidden page: what an address that names no page shows (in the visitor's language)
ASKED = "_ui.asked_path"  # session state: the page name an unknown address asked for (shown by NOT_FOUND)


def _pages_manager():
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    return getattr(get_script_run_ctx(), "pages_manager", None)


# ---------------------------------------------------------------- every page by its name
def route_by_name() -> None:
    """Open the page an address names, in the visitor's language, whatever the name.

    Streamlit knows the default page only as the root address (/): /attention named no page, and an unknown name got
    Streamlit's own "Page not found" dialog, in English. Here, before st.navigation resolves the page, a run that
    asks for a page by name (a typed or shared address; a link or Back names the page by its id instead) is pointed
    at the default page for its own name, and at the hidden NOT_FOUND page for a name no page has. Reads Streamlit
    1.67's pages manager (tests/test_app.py notices a change)."""
    manager = _pages_manager()
    if manager is None or manager.intended_page_script_hash or not manager.intended_page_name:
        return
    name = manager.intended_page_name.strip("/")
    if name == DEFAULT_PAGE:
        manager.set_script_intent("", "")  # no name: st.navigation opens its default page
    elif name not in dict(PAGES) and name != NOT_FOUND:
        import streamlit as st

        st.session_state[ASKED] = name
        manager.set_script_intent("", NOT_FOUND)


# ---------------------------------------------------------------- a reconnected browser that forgot its page
def reask_lost_page() -> str | None:
    """Ask for the page of the browser's address when a rerun names none; returns that page's stem, if any.

    Streamlit's browser side names the page it wants in every rerun, and learns the page's id from the server's first
    answer. When the connection drops before that answer (a busy server or browser: seen under load), the browser
    reconnects and asks for the app's main script instead of a page, and st.navigation opens DEFAULT_PAGE: a student
    who opened /train?task=date got Attention, and the address kept Train's parameters. The rerun still carries the
    browser's URL (its context info), so the page named by the URL's last path segment is asked for, exactly as the
    browser's first request asked for it. Reads Streamlit 1.67's pages manager (tests/test_app.py notices a change).
    """
    from urllib.parse import urlparse

    from streamlit.runtime.context import _context_info_field

    manager = _pages_manager()
    if manager is None or manager.intended_page_name or \
            manager.intended_page_script_hash not in ("", None, manager.main_script_hash):
        return None  # the rerun names its page (a link, a widget on a known page, Back / Forward)
    stem = urlparse(_context_info_field("url") or "").path.rstrip("/").rsplit("/", 1)[-1]
    if stem not in dict(PAGES) or stem == DEFAULT_PAGE:
        return None  # the root address or the default page's name, or a name of no page: as a first visit decides
    manager.set_script_intent("", stem)
    return stem
