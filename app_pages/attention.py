"""Attention page: a pretrained model's attention per layer and head (heatmap, grid, lines, aggregates, statistics)."""
import numpy as np
import streamlit as st

from app_pages import _ui as ui
from app_pages._ui import attention as data
from app_pages._ui import importance as importance_view
from app_pages._ui import models
from viz_core.pretrained import head_analysis
from viz_core.errors import InputError
from viz_core.plots import attention as plots
from viz_core.plots.common import placeholder_figure

VIEWS = ("head", "grid", "lines", "aggregate", "stats", "importance", "export")
GRID_THUMB = 32  # tiles are at most 32 x 32 cells: a 6 x 12 grid stays light at 512 tokens

ui.setup("attention")
t = ui.t


def error(exc: InputError) -> None:
    if "what" in exc.params:
        exc.params["what"] = t(f"attention.what_{exc.params['what']}")
    ui.show_error(exc)


# ---------------------------------------------------------------- model and text
name = ui.text(t("attention.model"), "model", "", help=t("attention.model_help"), max_chars=200).strip()
waiting = st.empty()  # the first visit after the server started: a line of text drawn as a chart, so the browser
if not models.loaded(name):  # loads its chart library while the model loads, not after (about 1 s of a cold start)
    with waiting:
        ui.plot(placeholder_figure(t("attention.loading")), key="attention.waiting")
try:
    with st.spinner(t("attention.loading")):
        m = models.info(name)
except InputError as exc:
    error(exc)
    st.caption(t("attention.fallback"))
    name, m = "", models.info("")
st.markdown(t("attention.model_info", name=ui.plain_md(m.name), kind=t(f"attention.kind_{m.kind}"), layers=m.n_layers,
              heads=m.n_heads, max_tokens=m.max_tokens))

pair = target = ""
if m.supports_pair:
    col_a, col_b = st.columns(2)
    text = ui.text(t("attention.text_a_pair"), "text", t("attention.default_text"), area=True, container=col_a,
                   height=90)
    pair = ui.text(t("attention.text_b"), "pair", "", area=True, container=col_b, height=90)
elif m.kind == "encoder-decoder":
    col_a, col_b = st.columns(2)
    text = ui.text(t("attention.text_a"), "text", t("attention.default_text"), area=True, container=col_a, height=90)
    target = ui.text(t("attention.target"), "target", t("attention.default_target"), area=True, container=col_b,
                     height=90)
else:
    text = ui.text(t("attention.text_a"), "text", t("attention.default_text"), area=True, height=90)

try:
    r = data.result(name, text, pair, target)
except InputError as exc:
    waiting.empty()
    error(exc)
    st.stop()
waiting.empty()
if r.truncated:
    st.warning(t("attention.truncated", n=r.n_input_tokens, limit=len(r.tokens)))
if r.decoder_truncated:
    st.warning(t("attention.decoder_truncated"))
if r.n_unknown:
    st.info(t("attention.unknown_tokens", n=r.n_unknown, total=r.n_text_tokens, unk=r.unk_token))

# ---------------------------------------------------------------- what to show
view = ui.radio(t("attention.view"), VIEWS, "view", format_func=lambda v: t(f"attention.view_{v}"))
parts = r.parts()
part = ui.radio(t("attention.part"), parts, "part", format_func=lambda p: t(f"attention.part_{p}")) \
    if len(parts) > 1 else parts[0]
weights, q_tokens, k_tokens, q_special, k_special = r.part(part)
n_layers, n_heads = weights.shape[:2]



def follow_head() -> None:
    """The line view draws the chosen head: a new head in the dropdown replaces the heads to draw."""
    ui.set_state("heads", [ui.stored("head")])


c1, c2, c3 = st.columns([1, 1, 2])
first_layer, first_head = head_analysis.clearest_head(weights)  # open on a head with a clear pattern
layer = ui.selectbox(t("attention.layer"), range(n_layers), "layer", first_layer, container=c1)
head = ui.selectbox(t("attention.head"), range(n_heads), "head", first_head, container=c2, on_change=follow_head)
with c3:
    hide = ui.checkbox(t("attention.hide_special"), "hide", False)
    auto = ui.checkbox(t("attention.auto_scale"), "auto", True, help=t("attention.auto_scale_help"))
block = "all"
if pair and m.supports_pair and view in ("head", "aggregate"):
    block = ui.radio(t("attention.block"), head_analysis.SEGMENT_BLOCKS, "block",
                     format_func=lambda b: t("attention.block_all") if b == "all" else b)


def shown(matrix: np.ndarray) -> tuple[np.ndarray, list[str], list[str]]:
    """Apply 'hide special tokens' (renormalised) or the sentence-pair block to an (Nq, Nk) matrix."""
    if block != "all":
        rows, cols = head_analysis.segment_block(r.segments, block)
    elif hide and (q_special.any() or k_special.any()):
        rows, cols = ~q_special, ~k_special
        matrix = head_analysis.keep_tokens(matrix, rows, cols)
        return matrix, [x for x, k in zip(q_tokens, rows) if k], [x for x, k in zip(k_tokens, cols) if k]
    else:
        return matrix, q_tokens, k_tokens
    return matrix[rows][:, cols], [x for x, k in zip(q_tokens, rows) if k], [x for x, k in zip(k_tokens, cols) if k]


def heatmap(matrix: np.ndarray, title: str, key: str) -> None:
    w, rows, cols = shown(matrix)
    if hide and block == "all":
        st.info(t("attention.hide_special_note"))
    ui.plot(plots.head_heatmap(w, rows, cols, title, query=t("attention.query"), key=t("attention.key"),
                               value=t("attention.weight"), auto_scale=auto), key=key)
    st.caption(scale_note(plots.colour_top(w, auto)))


def scale_note(top: float) -> str:
    """What the colours mean: the fixed 0..1 scale, or 0..top where top is a quantile of the weights shown."""
    if not auto:
        return t("attention.scale_fixed")
    return t("attention.scale_auto", top=f"{top:.3g}", q=f"{plots.COLOUR_QUANTILE * 100:.0f}")


def row_sum_note(matrix: np.ndarray, how: str) -> str:
    """What the rows shown sum to: hiding special tokens renormalises them, a sentence-pair block cuts them."""
    sums = shown(matrix)[0].sum(-1)
    if not np.allclose(sums, 1, atol=1e-3):
        return t("attention.rows_sum_range", lo=f"{sums.min():.2f}", hi=f"{sums.max():.2f}")
    renormalised = how == "max" and hide and block == "all"
    return t("attention.rows_sum_one_renorm") if renormalised else t("attention.rows_sum_one")


def open_head(chart_key: str) -> None:
    """Chart click -> open that head in the 'One head' view."""
    points = st.session_state[chart_key].selection.get("points", [])
    if points and "point_index" in points[0] and points[0].get("curve_number", 1) == 1:
        idx = int(points[0]["point_index"])
        ui.set_state("layer", idx // n_heads)
        ui.set_state("head", idx % n_heads)
        ui.set_state("heads", [idx % n_heads])
        ui.set_state("view", "head")


# ---------------------------------------------------------------- views
if view == "head":
    heatmap(weights[layer, head], t("attention.head_title", layer=layer, head=head), "head_fig")
    if part in ("self", "decoder") and head_analysis.is_causal(weights):
        st.caption(t("attention.causal_seen"))
    st.caption(t("attention.head_explain") if block == "all" and not hide else
               t("attention.head_explain_part") + " " + row_sum_note(weights[layer, head], "mean"))
    ui.latex(r"w_{ij} = \mathrm{softmax}_j\!\left(\frac{q_i \cdot k_j}{\sqrt{d_k}}\right), \qquad \sum_j w_{ij} = 1")

elif view == "grid":
    st.caption(t("attention.grid_explain", size=min(GRID_THUMB, weights.shape[-1])) + " "
               + (t("attention.scale_auto_grid", q=f"{plots.COLOUR_QUANTILE * 100:.0f}") if auto
                  else t("attention.scale_fixed")))
    fig = plots.model_grid(weights, thumb=GRID_THUMB, layer_label=t("attention.layer"),
                           head_label=t("attention.head"), hover_hint=t("attention.grid_hover"),
                           selected=(layer, head), auto_scale=auto)
    ui.plot(fig, key="grid_fig", on_select=lambda: open_head("grid_fig"), selection_mode="points")

elif view == "lines":
    c_heads, c_thr = st.columns([3, 1])
    heads = ui.multiselect(t("attention.lines_heads"), range(n_heads), "heads", default=[head], container=c_heads)
    threshold = ui.slider(t("attention.lines_threshold"), 0.0, 0.5, "thr", 0.02, step=0.01, container=c_thr)
    st.caption(t("attention.lines_explain", threshold=threshold))
    if not heads:
        st.info(t("attention.lines_none"))
    else:
        w, rows, cols = shown(weights[layer]) if block == "all" else (weights[layer], q_tokens, k_tokens)
        html = plots.line_view_html(rows, cols, w, heads, threshold=threshold,
                                    labels={"query": t("attention.query"), "key": t("attention.key"),
                                            "head": t("attention.head"), "hint": t("attention.lines_hint")},
                                    dark=st.context.theme.type == "dark")
        st.iframe(html, height=plots.line_view_height(max(len(rows), len(cols))))

elif view == "aggregate":
    how = ui.radio(t("attention.agg"), ("mean", "max", "rollout"), "agg", format_func=lambda a: t(f"attention.agg_{a}"))
    if how == "rollout" and part in ("self", "encoder"):
        heatmap(data.rollout(name, text, pair, target)[layer], f"{t('attention.agg_rollout')} · l = {layer}", "agg_fig")
        st.caption(t("attention.agg_explain_rollout"))
        ui.latex(r"\tilde A_l = \tfrac12 I + \tfrac12 \frac{1}{H}\sum_h A_{l,h}, \qquad R_l = \tilde A_l \, R_{l-1},"
                 r"\quad R_0 = I")
    else:
        how = "mean" if how == "rollout" else how
        agg = head_analysis.aggregate(weights[layer:layer + 1], how)[0]
        heatmap(agg, f"{t(f'attention.agg_{how}')} · {t('attention.layer')} {layer}", "agg_fig")
        st.caption(t(f"attention.agg_explain_{how}") + " " + row_sum_note(agg, how))

elif view == "stats":
    stat = ui.selectbox(t("attention.stat"), head_analysis.STAT_NAMES, "stat", format_func=lambda s: t(f"attention.stat_{s}"))
    values = data.stats(name, text, pair, target, part)[stat]
    fig = plots.stats_map(values, title=t(f"attention.stat_{stat}"), value_name=t(f"attention.stat_{stat}"),
                          layer_label=t("attention.layer"), head_label=t("attention.head"), selected=(layer, head))
    ui.plot(fig, key="stats_fig", on_select=lambda: open_head("stats_fig"), selection_mode="points")
    st.caption(t("attention.stats_explain"))
    if stat == "special" and not k_special.any():
        st.caption(t("attention.stats_special_note"))
    ui.latex(r"H_i = -\sum_j w_{ij}\log_2 w_{ij}, \qquad D_i = \sum_j w_{ij}\,|i-j|")

elif view == "importance":
    importance_view.draw(importance_view.Input(name, m.kind, text, pair, target, part), layer, head)

else:  # export
    st.write(t("attention.export_explain"))
    ui.download(t("attention.download_npz"), lambda: data.npz(name, text, pair, target), "attention.npz",
                "application/octet-stream", key="dl_npz")
    w, rows, cols = shown(weights[layer, head])
    ui.download(t("attention.download_csv"), data.csv(w, rows, cols), f"attention_l{layer}_h{head}.csv", "text/csv",
                key="dl_csv")
    st.markdown(t("attention.npz_contents"))

st.caption(t("attention.share"))

# Between runs a session keeps its widget values and nothing of this run's arrays: they go now (75 MB per visitor at
# 512 tokens, unless the shared cache still keeps them), not when the session's next run replaces them (issue #19).
for _name in ("r", "weights", "w", "agg", "fig", "values"):
    globals().pop(_name, None)
