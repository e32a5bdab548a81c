"""The Attention page's "Compare two texts" view: text A and a variant A', the same head of both on one grid where
their tokens line up, the difference map, and every head ranked by how far its attention moved
(viz_core.pretrained.compare). Clicking a ranked head opens it here."""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np
import streamlit as st

import app_pages._ui as ui
from viz_core.io import export
from viz_core.errors import InputError
from viz_core.plots import attention as attention_plots
from viz_core.plots import compare as compare_plots
from viz_core.pretrained import compare

from . import attention as cached

t = ui.t
plots = ui.SharedFigures(compare_plots)


@dataclass
class Input:
    """The page's input: model name ("" = default), text A, its sentence-pair text B and decoder target (the same for
    both texts), the part of the model (self / encoder / decoder / cross) and the head looked at."""
    name: str
    text: str
    pair: str
    target: str
    part: str
    layer: int
    head: int
    auto: bool


def variant_box() -> str:
    return ui.text(t("attention.text_variant"), "text2", t("attention.default_variant"), area=True, height=90,
                   help=t("attention.variant_help"))


def open_ranked(chart_key: str, layers: np.ndarray, heads: np.ndarray) -> None:
    """Bar click -> that head (the view stays)."""
    points = st.session_state[chart_key].selection.get("points", [])
    if points and "point_index" in points[0]:
        i = int(points[0]["point_index"])
        if 0 <= i < len(layers):
            ui.set_value("layer", int(layers[i]))
            ui.set_value("head", int(heads[i]))
            ui.set_value("heads", [int(heads[i])])


def draw(inp: Input, text2: str) -> None:
    """Both maps, their difference and the ranking; bad input says what is wrong and stops here."""
    a = cached.result(inp.name, inp.text, inp.pair, inp.target)  # the page has read text A already
    try:
        b = cached.result(inp.name, text2, inp.pair, inp.target)
    except InputError as exc:
        if "what" in exc.params:  # the variant stands where text A stood: name it "text A′"
            what = exc.params["what"]
            exc.params["what"] = t("attention.what_variant" if what == "text" else f"attention.what_{what}")
        ui.show_error(exc)
        return
    wa, qa_tok, ka_tok = a.part(inp.part)[:3]
    wb, qb_tok, kb_tok = b.part(inp.part)[:3]
    q, k = compare.align(qa_tok, qb_tok), compare.align(ka_tok, kb_tok)
    if not q.both.any():
        st.info(t("attention.compare_nothing_aligned"))
        return
    if inp.pair:
        st.caption(t("attention.compare_pair_note"))
    if qa_tok == qb_tok and ka_tok == kb_tok:
        st.info(t("attention.compare_same"))
    q_labels, k_labels = q.labels(qa_tok, qb_tok), k.labels(ka_tok, kb_tok)
    _side_by_side(inp, wa[inp.layer, inp.head], wb[inp.layer, inp.head], q, k, q_labels, k_labels,
                  ((qa_tok, ka_tok), (qb_tok, kb_tok)))
    d = compare.difference(wa[inp.layer, inp.head], wb[inp.layer, inp.head], q, k)  # (M, P_k)
    rows = [label for label, both in zip(q_labels, q.both) if both]
    ui.plot(plots.difference_map(d, rows, k_labels, title=t("attention.compare_diff", layer=inp.layer, head=inp.head),
                                 query=t("attention.query"), key=t("attention.key"),
                                 value=t("attention.compare_diff_value")), key="compare_diff_fig")
    distances = cached.head_distances(inp.name, inp.text, text2, inp.pair, inp.target, inp.part)  # (L, H)
    st.caption(t("attention.compare_diff_explain", d=f"{distances[inp.layer, inp.head]:.3f}"))
    ui.latex(r"D_{ij} = w'_{ij} - w_{ij}, \qquad d = \frac{1}{M}\sum_{i=1}^{M} \tfrac12 \sum_j \lvert D_{ij} \rvert"
             r"\;\in [0, 1]")
    _ranking(inp, distances)
    ui.download(t("attention.download_diff"), export.matrix_csv(d, rows, k_labels),
                f"difference_l{inp.layer}_h{inp.head}.csv", "text/csv", key="dl_compare_diff")


def _side_by_side(inp: Input, wa: np.ndarray, wb: np.ndarray, q: compare.Alignment, k: compare.Alignment,
                  q_labels: list[str], k_labels: list[str], own: tuple) -> None:
    """Text A's and A''s map of the head on the shared grid, one colour scale for both (so equal colours are equal
    weights); an empty row or column is a token the text does not have. A grid too large for one message
    (compare_plots.shared_grid_fits: texts that share few tokens) gives way to each text on its own tokens
    (`own`: (query tokens, key tokens) of A and of A'), and the page says so."""
    n_rows, n_cols = len(q_labels), len(k_labels)
    shared = compare_plots.shared_grid_fits(n_rows, n_cols)
    if shared:  # (P_q, P_k), NaN = not in this text
        maps = [(compare.on_grid(w, rows, cols), q_labels, k_labels) for w, rows, cols in ((wa, q.a, k.a),
                                                                                          (wb, q.b, k.b))]
    else:
        maps = [(wa, *own[0]), (wb, *own[1])]
    top = max(attention_plots.colour_top(wa, inp.auto), attention_plots.colour_top(wb, inp.auto))
    for col, (grid, rows, cols), title, key in zip(st.columns(2), maps, ("attention.compare_a", "attention.compare_b"),
                                                   ("compare_a_fig", "compare_b_fig")):
        with col:
            ui.plot(attention_plots.head_heatmap(grid, rows, cols, t(title, layer=inp.layer, head=inp.head),
                                                 query=t("attention.query"), key=t("attention.key"),
                                                 value=t("attention.weight"), zmax=top), key=key)
    st.caption(t("attention.compare_explain") if shared else
               t("attention.compare_own_tokens", rows=n_rows, cols=n_cols))


def _ranking(inp: Input, distances: np.ndarray) -> None:
    ranked = compare.rank_heads(distances)
    labels = compare_plots.bar_labels(ranked, t("attention.layer"), t("attention.head"))
    ui.plot(plots.ranking_bars(ranked, title=t("attention.compare_rank_title"), value=t("attention.compare_distance"),
                               layer_label=t("attention.layer"), head_label=t("attention.head"),
                               selected=(inp.layer, inp.head)),
            key="compare_rank_fig", on_select=partial(open_ranked, "compare_rank_fig", ranked.layer, ranked.head),
            selection_mode="points")
    st.caption(t("attention.compare_rank_explain"))
    finite = np.isfinite(ranked.distance)
    if finite.any():
        last = int(np.flatnonzero(finite)[-1])
        st.caption(t("attention.compare_top", heads=t("attention.list_sep").join(
            f"{labels[i]} ({ranked.distance[i]:.3f})" for i in range(min(3, int(finite.sum())))),
            least=labels[last], d_least=f"{ranked.distance[last]:.3f}"))
    ui.download(t("attention.download_compare"), export.columns_csv(
        {"rank": np.arange(1, len(ranked.layer) + 1), "layer": ranked.layer, "head": ranked.head,
         "distance": ranked.distance}), "heads_ranked_by_change.csv", "text/csv", key="dl_compare_rank")
