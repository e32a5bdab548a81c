"""The model picker of the pages that read a pretrained model (Attention, Head finder): the models this server allows,
each with its language, kind and download size, and, where the operator allows any id, a box for one more."""
from __future__ import annotations

import streamlit as st

from viz_core.pretrained import catalog

from . import attention as cached
from . import models
from . import lang, selectbox, set_value, t, value

MAX_ID = 200  # characters of a model id


def label(model_id: str) -> str:
    """A picker line: "name · language · kind (family) · ~size MB"; an id the catalog does not describe as typed."""
    e = catalog.entry(model_id)
    if e is None:
        return model_id
    where = "model_packaged" if e.packaged else "model_cached" if catalog.is_cached(e.id) else \
        "model_size_offline" if catalog.hub_offline_forced() else "model_size"
    return cached.model_line(e, f"attention.{where}", lang())


def use(model_id: str, other_key: str | None = None) -> None:
    """Callback: put a model id into the picker (typed in the free box, or offered for a text it cannot read)."""
    set_value("model", model_id.strip()[:MAX_ID])
    if other_key:
        st.session_state.pop(other_key, None)


def picker(other_key: str) -> str:
    """The picker's chosen id (stripped). An id from a shared link that is not in the list is listed too (and refused
    with a message when it loads). other_key: the session key of this page's free box."""
    policy = models.policy()
    ids = catalog.picker_ids(policy)
    current = value("model", "", str, lambda v: isinstance(v, str) and len(v) <= MAX_ID)
    ids += [current] if current not in ids else []
    name = selectbox(t("attention.model"), ids, "model", "", format_func=label, help=t("attention.model_help"))
    if catalog.free_ids(policy):
        st.text_input(t("attention.model_other"), key=other_key, max_chars=MAX_ID, help=t("attention.model_other_help"),
                      placeholder="org/model", on_change=lambda: use(st.session_state.get(other_key) or "", other_key))
    return name.strip()
