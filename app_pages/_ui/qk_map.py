"""The Attention page's "Query–key map" view: the queries and keys of one head for the user's text and the bundled
sentences in one PCA map (viz_core.pretrained.qk_map); a clicked query shows its attention row."""
from __future__ import annotations

from functools import partial

import numpy as np
import streamlit as st

import app_pages._ui as ui
from viz_core.io import export
from viz_core.errors import InputError
from viz_core.plots import qk_map as qk_plots
from viz_core.rounding import parts_that_add_up
from viz_core.pretrained import qk_map

from . import attention as cached

t = ui.t
plots = ui.SharedFigures(qk_plots)
LANGS = ("en", "zh")
COLOURS = ("kind", "position")
NO_QUERY = -1
KEY_CLICKED = "attention.qk_key_clicked"  # session flag: the last click hit a key, not a query (until the next pick)


def labels() -> qk_plots.Labels:
    return qk_plots.Labels(query=t("attention.qk_query"), key=t("attention.qk_key"), yours=t("attention.qk_yours"),
                           position=t("attention.qk_position"), sentence=t("attention.qk_sentence"),
                           weight=t("attention.weight"), axis=t("attention.qk_axis"))


def chosen_query() -> int:
    """The token index (into the map's points) of the query whose row is shown; NO_QUERY = none."""
    return ui.value("qk_q", NO_QUERY, int, lambda v: isinstance(v, int) and v >= NO_QUERY)


def pick_point(chart_key: str, traces: list[tuple[str, bool]], rows: list[np.ndarray]) -> None:
    """Chart click -> the clicked query becomes the chosen one (a key: nothing chosen, and the page says why)."""
    points = st.session_state[chart_key].selection.get("points", [])
    if not points or "point_index" not in points[0]:
        return
    curve = int(points[0].get("curve_number", -1))
    if not 0 <= curve < len(traces):  # the lines and the ring of a chosen query: not points
        return
    kind, _ = traces[curve]
    index = int(points[0]["point_index"])
    is_query = kind == "q" and index < len(rows[curve])
    ui.set_value("qk_q", int(rows[curve][index]) if is_query else NO_QUERY, NO_QUERY)
    st.session_state[KEY_CLICKED] = not is_query


def draw(name: str, kind: str, text: str, layer: int, head: int, unk: str, model_name: str) -> None:
    c1, c2 = st.columns([3, 2])
    langs = ui.multiselect(t("attention.qk_sentences"), LANGS, "qk_langs", default=list(LANGS), container=c1,
                           format_func=lambda lang: t(f"attention.qk_lang_{lang}"))
    colour = ui.radio(t("attention.qk_colour"), COLOURS, "qk_colour", container=c2, horizontal=True,
                      format_func=lambda c: t(f"attention.qk_colour_{c}"))
    if kind != "encoder":
        st.info(t("attention.qk_unsupported", name=ui.plain_md(model_name)))
        return
    try:
        with st.spinner(t("attention.qk_computing")):
            points, proj, left_out = cached.qk_head(name, text, tuple(langs), layer, head, unk)
    except InputError as exc:
        if exc.code == "attention.qkv_unsupported":
            st.info(t("attention.qk_unsupported", name=ui.plain_md(model_name)))
        else:
            ui.show_error(exc)
        return
    for lang, n in left_out.items():
        if n:
            total = len(qk_map.bundled_sentences()[lang])
            st.caption(t("attention.qk_left_out", n=n, total=total, kept=total - n,
                         language=t(f"attention.qk_lang_name_{lang}"), unk=ui.plain_md(unk)))
    chosen = chosen_query()
    chosen = chosen if 0 <= chosen < len(points.tokens) else None
    own_query_picker(points, chosen)
    row = _row(points, chosen) if chosen is not None else None
    traces = qk_plots.trace_order(0)
    rows = [qk_plots.point_rows(points, 0, mine) for _, mine in traces]
    fig = plots.qk_scatter(points, proj, user_sentence=0, colour=colour, chosen=chosen, row=row, labels=labels(),
                           title=t("attention.qk_layer_head", layer=layer, head=head, n=len(points.texts)))
    ui.plot(fig, key="qk_fig", on_select=partial(pick_point, "qk_fig", traces, rows), selection_mode="points")
    (a, b), total = parts_that_add_up(proj.kept[:2] * 100)  # shown so that the parts add up to the shown sum
    st.caption(t("attention.qk_kept", a=f"{a:.0f}", b=f"{b:.0f}", total=f"{total:.0f}",
                 n=2 * len(points.tokens), rest=points.q.shape[-1] - 2))
    if chosen is None:
        st.caption(t("attention.qk_key_clicked") if st.session_state.get(KEY_CLICKED) else t("attention.qk_click"))
    else:
        _row_view(points, proj, chosen, row)
    st.markdown(ui.glossed(t("attention.qk_explain")))
    near = cached.qk_closeness(name, text, tuple(langs), layer, head, unk)
    if near.n:
        st.caption(t("attention.qk_closeness", hit=f"{near.hit * 100:.0f}", chance=f"{near.chance * 100:.0f}",
                     corr=f"{near.rank_corr:.2f}", n=near.n, layer=layer, head=head))
    ui.latex(r"k_j \to \frac{k_j - \bar k + \bar q}{a},\quad q_i \to a\,q_i:\qquad "
             r"\lVert q_i - k_j \rVert^2 = \lVert q_i \rVert^2 + \lVert k_j \rVert^2 - 2\, q_i \cdot k_j")
    ui.download(t("attention.download_qk"), _points_csv(points, proj), f"qk_map_l{layer}_h{head}.csv", "text/csv",
                key="dl_qk")


def own_query_picker(points: qk_map.QKSet, chosen: int | None) -> None:
    """A drop-down of your sentence's queries: the same choice as a click on the map, exact (in a dense map a click
    picks the point plotly finds closest, which may be another sentence's) and reachable with the keyboard."""
    mine = [int(i) for i in points.rows(0)]
    key = "attention.qk_pick"
    st.session_state[key] = chosen if chosen in mine else NO_QUERY  # follows the address, a click and Back
    st.selectbox(t("attention.qk_pick"), [NO_QUERY] + mine, index=([NO_QUERY] + mine).index(st.session_state[key]),
                 key=key,
                 format_func=lambda i: t("attention.qk_pick_none") if i == NO_QUERY else f"{i} · {points.tokens[i]}",
                 on_change=_picked, args=(key,))


def _picked(key: str) -> None:
    ui.set_value("qk_q", st.session_state[key], NO_QUERY)
    st.session_state[KEY_CLICKED] = False


def _row(points: qk_map.QKSet, chosen: int) -> np.ndarray:
    """The chosen query's attention over the keys of its own sentence: (N_s,)."""
    keys = points.rows(int(points.sentence[chosen]))
    return qk_map.attention_row(points.q[0, 0, chosen], points.k[0, 0, keys])


def _row_view(points: qk_map.QKSet, proj: qk_map.Projection, chosen: int, row: np.ndarray) -> None:
    s = int(points.sentence[chosen])
    keys = points.rows(s)
    tokens = [points.tokens[j] for j in keys]
    heaviest = int(np.argmax(row))
    nearest = int(np.argmin(np.linalg.norm(proj.k[keys] - proj.q[chosen], axis=1)))
    ui.plot(qk_plots.attention_row_bars(tokens, row, title=t(
        "attention.qk_row_title", token=qk_plots.plain(points.tokens[chosen]), pos=int(points.position[chosen]),
        sentence=qk_plots.plain(points.texts[s][:qk_plots.SENTENCE_CHARS])), key=t("attention.key"),
        weight=t("attention.weight")), key="qk_row_fig")
    st.caption(t("attention.qk_row_explain", n=min(qk_plots.LINES_TO, len(keys)), near=ui.plain_md(tokens[nearest]),
                 top=ui.plain_md(tokens[heaviest]), w=f"{row[heaviest]:.3f}"))
    st.button(t("attention.qk_clear"), key="qk_clear", on_click=ui.set_value, args=("qk_q", NO_QUERY, NO_QUERY))


def _points_csv(points: qk_map.QKSet, proj: qk_map.Projection) -> str:
    n = len(points.tokens)
    return export.columns_csv({
        "kind": ["query"] * n + ["key"] * n, "sentence": np.tile(points.sentence, 2),
        "position": np.tile(points.position, 2), "token": list(points.tokens) * 2,
        "x": np.concatenate([proj.q[:, 0], proj.k[:, 0]]), "y": np.concatenate([proj.q[:, 1], proj.k[:, 1]]),
        "sentence_text": [points.texts[s] for s in points.sentence] * 2})
