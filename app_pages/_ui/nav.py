"""The pages of the app, in sidebar order: (file stem in pages/, icon). Titles: locales/common.json "nav_<stem>".

The root address (/) opens DEFAULT_PAGE, Attention, as it always has: addresses shared before the Start page existed
(/?text=...) keep opening what they showed."""

PAGES = [
    ("start", ":material/school:"),  # first in the sidebar; Attention stays the default address (DEFAULT_PAGE)
    ("attention", ":material/grid_on:"),
    ("mechanics", ":material/calculate:"),
    ("scaling", ":material/straighten:"),
    ("positions", ":material/waves:"),
    ("optimizers", ":material/landscape:"),
    ("anatomy", ":material/account_tree:"),
    ("train", ":material/model_training:"),
    ("language_model", ":material/text_fields:"),
]

DEFAULT_PAGE = "attention"


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
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    manager = getattr(ctx, "pages_manager", None)
    if manager is None or manager.intended_page_name or \
            manager.intended_page_script_hash not in ("", None, manager.main_script_hash):
        return None  # the rerun names its page (a link, a widget on a known page, Back / Forward)
    stem = urlparse(_context_info_field("url") or "").path.rstrip("/").rsplit("/", 1)[-1]
    if stem not in dict(PAGES):
        return None  # the root address, or a path that names no page: st.navigation decides as always
    manager.set_script_intent("", stem)
    return stem
