"""Placeholder while the page is built."""
import streamlit as st

from app_pages import _ui as ui

st.session_state["_page_ns"] = "scaling"
st.info(ui.t("common.under_construction"))
