"""Attention Explorer: the router. Page setup, language in the sidebar, navigation; every page lives in app_pages/.

The sidebar links are drawn here (st.navigation's own menu is hidden) so that each link carries its page's state:
a page comes back as the user left it, and a page switch is exactly one browser-history entry (see _ui/state.py).

`streamlit run app.py` imports this file once as the server starts and finds `app` (an st.App): its lifespan starts
the warm-up of the default model before the first visitor arrives, and its middleware and lifespan keep
what one visitor can make the server hold bounded (app_pages/_ui/serving.py). Each visit then runs this file as a
script (__name__ == "__main__"), which is the router below.

pandas is imported at the top of every script run, before any page: plotly looks pandas up in sys.modules without
importing it, so while one session's first page imported it, another session's figure could meet a half-initialised
module and fail (bench/bench_load.py found this). Imported there, a concurrent first import waits on Python's import
lock instead. Not at this module's top: there it would delay the moment the server listens (bench/bench_browser.py's cold row); the
warm-up thread imports it right after the server starts.

numpy's matrix products run on one OpenBLAS thread here (OPENBLAS_NUM_THREADS, read when numpy loads, which is
below: set first, unless the environment sets it). Several visitors' script runs, a training and the browsers of a
class share the server's cores; OpenBLAS's second thread waits for a core at every product and made the numpy
model's passes slower, not faster: "Which heads matter" on a new sentence is slower with two threads than with one
while a browser draws on the same two cores, and barely faster with nothing else running
(`python bench/bench_browser.py --rows importance` measures it). torch keeps its own threads (viz_core.runtime.threads).
"""
import os
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy's first import (app_pages below)

import streamlit as st
from streamlit.runtime.scriptrunner import StopException, get_script_run_ctx

from app_pages import _ui as ui
from app_pages._ui import chart, leaving, memory, serving, state, warmup
from app_pages._ui.nav import DEFAULT_PAGE, NOT_FOUND, PAGES, reask_lost_page, route_by_name
from viz_core.runtime.cancel import Cancelled
from viz_core.i18n import LANGUAGE_NAMES, LANGUAGES, normalise_lang

# The browser tab's icon is a file of the app: for a Material icon name Streamlit points the favicon at Google's font
# server, which every visitor's browser would contact (and which fails offline).
ICON = Path(__file__).resolve().parent / "app_pages" / "assets" / "icon.png"
PRELOADED = "_plotly_preloaded"  # session state: this session's browser was told to load plotly.js


def main() -> None:
    import pandas  # noqa: F401 - before any page (see the module's docstring); at once after the first import
    ui.pin_lang(None)  # until the sidebar's radio settles this run's language (a context can serve several runs)
    st.set_page_config(page_title="Attention Explorer", page_icon=str(ICON), layout="wide")
    ui.page_style()  # readable on phones and in both themes (captions' contrast, formulas that scroll)

    if not st.session_state.get(PRELOADED):  # a session's first run: plotly.js on its way before anything else
        st.session_state[PRELOADED] = True
        with st.sidebar:
            chart.preload()
    nav_box = st.sidebar.container(key="nav")  # page links on top, filled once the language is known
    route_by_name()  # /attention and unknown names (see nav.py)
    st.session_state[state.REOPENED] = reask_lost_page() is not None  # (see nav.py)
    if state.address_is_truth():  # Back / Forward (or a lost first run): the address says which language was shown
        st.session_state[ui.LANG_KEY] = normalise_lang(st.query_params.get(ui.LANG_KEY))
    ui.lang()  # seeds the radio's state from ?lang= before the widget exists
    st.sidebar.radio("Language / 语言", LANGUAGES, index=LANGUAGES.index(ui.lang()), format_func=LANGUAGE_NAMES.get,
                     key=ui.LANG_KEY, horizontal=True)  # (its default is its value: see app_pages/_ui widgets)
    lang = ui.lang()
    ui.pin_lang(lang)

    pages = {stem: st.Page(f"app_pages/{stem}.py", title=ui.t(f"common.nav_{stem}"), icon=icon, url_path=stem,
                           default=(stem == DEFAULT_PAGE))
             for stem, icon in PAGES}
    not_found = st.Page(f"app_pages/{NOT_FOUND}.py", title=ui.t("common.not_found_title"), url_path=NOT_FOUND,
                        visibility="hidden")
    nav = st.navigation([*pages.values(), not_found], position="hidden")
    with nav_box:
        for stem, (_, icon) in zip(pages, PAGES):
            st.page_link(pages[stem], label=ui.t(f"common.nav_{stem}"), icon=icon,
                         query_params=state.page_address(stem, lang))
    st.sidebar.caption(ui.t("common.theme_hint"))
    completed = False
    ctx = get_script_run_ctx()
    try:
        with leaving.running(ctx.session_id if ctx else None), state.early_address():  # (a long run: see state.py)
            nav.run()
        completed = True
    except StopException:  # st.stop(): the run ends here, complete
        completed = True
        raise
    except Cancelled:  # the visitor has gone (leaving.py): nobody is there to read a message
        pass
    finally:  # also after st.stop(): the address follows the page's state, in one history entry
        state.sync_address()
        warmup.page_served.set()
        state.forget_stale_widgets(completed)  # what Streamlit keeps of widgets gone from the page stays bounded
        memory.settle()  # earlier runs' page data is garbage now: collected once the process has grown


if __name__ == "__main__":  # a visitor's script run (also AppTest's)
    main()
else:  # imported by `streamlit run app.py` (or `uvicorn app:app`) to serve it
    app = st.App(__file__, lifespan=serving.lifespan, middleware=serving.middleware())
