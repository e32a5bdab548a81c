"""An address that names no page (app_pages/_ui/nav.route_by_name): what was asked, in the visitor's language, and
the way to every page."""
import streamlit as st

from app_pages import _ui as ui
from app_pages._ui import state
from app_pages._ui.nav import ASKED, DEFAULT_PAGE, NOT_FOUND, PAGES

t = ui.t
state.begin(NOT_FOUND)
st.title(t("common.not_found_title"))
st.write(t("common.not_found_body"))
# The asked name stays in the address (?path=), so a reload or a browser that reconnects under load (a new session,
# or a rerun that no longer names the page) still shows what was asked.
asked = st.session_state.pop(ASKED, None)
if asked is None:
    asked = st.query_params.get("path", "")
state.set_value("path", asked, "")
st.code("/" + asked, language=None)  # the visitor's text, shown as text
lang = ui.lang()
st.page_link(f"app_pages/{DEFAULT_PAGE}.py", label=t("common.not_found_home"), icon=":material/home:",
             query_params=state.link_params(lang, {}))
st.caption(t("common.not_found_pages"))
for stem, icon in PAGES:
    st.page_link(f"app_pages/{stem}.py", label=t(f"common.nav_{stem}"), icon=icon,
                 query_params=state.link_params(lang, {}))
