"""Attention Explorer: the router. Page setup, language in the sidebar, navigation; every page lives in app_pages/."""
import streamlit as st

from app_pages import _ui as ui
from app_pages._ui.nav import PAGES
from viz_core.i18n import LANGUAGE_NAMES, LANGUAGES


st.set_page_config(page_title="Attention Explorer", page_icon=":material/visibility:", layout="wide")

ui.lang()  # seeds the radio's state from ?lang= before the widget exists
st.sidebar.radio("Language / 语言", LANGUAGES, format_func=LANGUAGE_NAMES.get, key=ui.LANG_KEY, horizontal=True)
lang = ui.lang()
st.query_params[ui.LANG_KEY] = lang

nav = st.navigation([
    st.Page(f"app_pages/{stem}.py", title=ui.t(f"common.nav_{stem}"), icon=icon, url_path=stem, default=(i == 0))
    for i, (stem, icon) in enumerate(PAGES)
])
st.sidebar.caption(ui.t("common.theme_hint"))
nav.run()
