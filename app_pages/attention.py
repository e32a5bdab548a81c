"""Attention page: a pretrained model's attention per layer and head (heatmap, grid, lines, aggregates, statistics).

Read top to bottom: helpers that take what they draw as arguments, then the script (at the end) calls them in order.
"""
from functools import partial

import numpy as np
import streamlit as st

from app_pages import _ui as ui
from app_pages._ui import attention as cached
from app_pages._ui.attention import Chosen, Source
from app_pages._ui import compare as compare_view
from app_pages._ui import decoder as decoder_view
from app_pages._ui import importance as importance_view
from app_pages._ui import model_picker, models
from app_pages._ui import qk_map as qk_view
from viz_core.io import export
from viz_core.errors import InputError
from viz_core.plots import attention as plots
from viz_core.plots.common import placeholder_figure
from viz_core.pretrained import catalog, head_analysis
from viz_core.pretrained.result import AttentionResult

VIEWS = ("head", "grid", "lines", "aggregate", "stats", "compare", "qkmap", "sinks", "heads", "lens", "importance",
         "export")
OPTIONS = {"compare": ("auto",), "qkmap": (), "heads": ()}  # the display options a view uses (others: hide, auto)
DECODER_VIEWS = ("heads", "lens")  # views only a decoder has (induction on repeats; next-token predictions)
GRID_THUMB = 32  # tiles are at most 32 x 32 cells: a 6 x 12 grid stays light at 512 tokens
t = ui.t


def error(exc: InputError) -> None:
    if "what" in exc.params:
        exc.params["what"] = t(f"attention.what_{exc.params['what']}")
    ui.show_error(exc)


# ---------------------------------------------------------------- model and text
def use_model(model_id: str) -> None:
    """Callback: put a model id into the picker (offered for a text the chosen model cannot read)."""
    model_picker.use(model_id, "attention.model_other")


def model_box():
    """The model picker, the model's info, and a placeholder that waits while the model loads: (name, info, waiting).

    The first visit after the server started draws a line of text as a chart, so the browser loads its chart library
    while the model loads, not after it. An unusable model falls back to the default.
    """
    name = model_picker.picker("attention.model_other")
    if not models.packaged_gate(name):  # a packaged decoder converting in the background: its progress, nothing else
        st.stop()
    waiting = st.empty()
    if not models.loaded(name):
        with waiting:
            ui.plot(placeholder_figure(t("attention.loading")), key="attention.waiting")
    try:
        with st.spinner(t("attention.loading")):
            m = models.info(name)
    except InputError as exc:
        error(exc)
        st.caption(t("attention.fallback"))
        name, m = "", models.info("")
    st.markdown(ui.glossed(t("attention.model_info", name=ui.plain_md(m.name), kind=t(f"attention.kind_{m.kind}"),
                             layers=m.n_layers, heads=m.n_heads, max_tokens=m.max_tokens)))
    if getattr(m, "architecture", None) is not None:
        decoder_view.architecture_box(m.architecture, n_layers=m.n_layers)
    decoder_view.packaged_note(name)
    return name, m, waiting


def text_boxes(m) -> tuple[str, str, str]:
    """(text, text B of a pair, decoder target): the boxes this model can use."""
    pair = target = ""
    if m.supports_pair:
        col_a, col_b = st.columns(2)
        text = ui.text(t("attention.text_a_pair"), "text", t("attention.default_text"), area=True, container=col_a,
                       height=90)
        pair = ui.text(t("attention.text_b"), "pair", "", area=True, container=col_b, height=90)
    elif m.kind == "encoder-decoder":
        col_a, col_b = st.columns(2)
        text = ui.text(t("attention.text_a"), "text", t("attention.default_text"), area=True, container=col_a,
                       height=90)
        target = ui.text(t("attention.target"), "target", t("attention.default_target"), area=True, container=col_b,
                         height=90)
    else:
        text = ui.text(t("attention.text_a"), "text", t("attention.default_text"), area=True, height=90)
    return text, pair, target


def load(src: Source, waiting) -> AttentionResult:
    """The attention of every layer and head; bad input stops the page with a message. Notes on the input."""
    try:
        r = cached.result(src.name, src.text, src.pair, src.target)
    except InputError as exc:
        waiting.empty()
        error(exc)
        st.stop()
    waiting.empty()
    if r.truncated:
        st.warning(t("attention.truncated", n=r.n_input_tokens, limit=len(r.tokens)))
    if r.decoder_truncated:
        st.warning(t("attention.decoder_truncated"))
    return r


def unknown_note(r: AttentionResult, src: Source, model_name: str) -> None:
    """A few unknown tokens: a short note. Many (catalog.many_unknown): a warning that names the cause (the model's
    vocabulary) and offers the allowed models that read this text, or says that they need the network."""
    if not r.n_unknown:
        return
    causes = unknown_causes(r)
    if not catalog.many_unknown(r.n_unknown, r.n_text_tokens):
        st.info(t("attention.unknown_tokens", n=r.n_unknown, total=r.n_text_tokens, unk=r.unk_token, causes=causes))
        return
    share = f"{catalog.unknown_share(r.n_unknown, r.n_text_tokens) * 100:.0f}"
    st.warning(t("attention.unknown_many", n=r.n_unknown, total=r.n_text_tokens, unk=r.unk_token, share=share,
                 name=ui.plain_md(model_name), causes=causes))
    if r.unknown is not None and not r.unknown.counts["script"]:
        return  # long words and symbols: another language's model would read them no better
    current = catalog.entry(src.name)
    offers = [e for e in catalog.models_for(f"{src.text} {src.pair}", models.policy()) if e is not current][:3]
    if not offers:
        st.caption(t("attention.unknown_no_model"))
        return
    online = models.hub_online()
    usable = [e for e in offers if online or catalog.is_cached(e.id)]
    if usable:
        st.caption(t("attention.unknown_offer") if online else t("attention.unknown_offer_cached"))
        for col, e in zip(st.columns(len(usable)), usable):
            col.button(t("attention.use_model", name=e.name, size=e.size_mb), key=f"attention.use.{e.id}",
                       on_click=use_model, args=(e.id,), width="stretch")
    missing = [e for e in offers if e not in usable]
    if missing:
        st.caption(t("attention.unknown_offline", models=t("attention.list_sep").join(
            t("attention.model_with_size", name=e.name, size=e.size_mb) for e in missing)))


def unknown_causes(r: AttentionResult) -> str:
    """One sentence per cause of the unknown tokens (UnknownCauses), the text's pieces shown as typed."""
    if r.unknown is None:
        return ""
    return ui.sentences(*(t(f"attention.unk_cause_{cause}", n=n, unk=r.unk_token, max=r.unknown.max_word_chars,
                            examples=ui.plain_md(t("attention.list_sep").join(r.unknown.examples[cause])))
                          for cause, n in r.unknown.counts.items() if n))


# ---------------------------------------------------------------- what to show
def follow_head() -> None:
    """The line view draws the chosen head: a new head in the dropdown replaces the heads to draw."""
    ui.set_value("heads", [ui.value("head")])


def choose(r: AttentionResult, view: str, has_pair: bool) -> Chosen:
    """Part, layer, head and the display options (the sentence-pair block only where a pair is drawn whole)."""
    parts = r.parts()
    part = ui.radio(t("attention.part"), parts, "part", format_func=lambda p: t(f"attention.part_{p}")) \
        if len(parts) > 1 else parts[0]
    weights, q_tokens, k_tokens, q_special, k_special = r.part(part)
    n_layers, n_heads = weights.shape[:2]
    c1, c2, c3 = st.columns([1, 1, 2])
    first_layer, first_head = head_analysis.clearest_head(weights)  # open on a head with a clear pattern
    layer = ui.selectbox(t("attention.layer"), range(n_layers), "layer", first_layer, container=c1)
    head = ui.selectbox(t("attention.head"), range(n_heads), "head", first_head, container=c2, on_change=follow_head)
    options = OPTIONS.get(view, ("hide", "auto"))
    with c3:
        hide = "hide" in options and ui.checkbox(t("attention.hide_special"), "hide", False)
        auto = "auto" in options and ui.checkbox(t("attention.auto_scale"), "auto", True,
                                                 help=t("attention.auto_scale_help"))
    block = "all"
    if has_pair and view in ("head", "aggregate"):
        block = ui.radio(t("attention.block"), head_analysis.SEGMENT_BLOCKS, "block",
                         format_func=lambda b: t("attention.block_all") if b == "all" else b)
    return Chosen(part, weights, q_tokens, k_tokens, q_special, k_special, r.segments, layer, head, hide, auto, block)


def shown(matrix: np.ndarray, c: Chosen) -> tuple[np.ndarray, list[str], list[str]]:
    """Apply 'hide special tokens' (renormalised) or the sentence-pair block to an (Nq, Nk) matrix."""
    if c.block != "all":
        rows, cols = head_analysis.segment_block(c.segments, c.block)
    elif c.hide and (c.q_special.any() or c.k_special.any()):
        rows, cols = ~c.q_special, ~c.k_special
        matrix = head_analysis.keep_tokens(matrix, rows, cols)
        return matrix, [x for x, k in zip(c.q_tokens, rows) if k], [x for x, k in zip(c.k_tokens, cols) if k]
    else:
        return matrix, c.q_tokens, c.k_tokens
    return (matrix[rows][:, cols], [x for x, k in zip(c.q_tokens, rows) if k],
            [x for x, k in zip(c.k_tokens, cols) if k])


def scale_note(top: float, auto: bool) -> str:
    """What the colours mean: the fixed 0..1 scale, or 0..top where top is a quantile of the weights shown."""
    if not auto:
        return t("attention.scale_fixed")
    return t("attention.scale_auto", top=f"{top:.3g}", q=f"{plots.COLOUR_QUANTILE * 100:.0f}")


def heatmap(matrix: np.ndarray, title: str, key: str, c: Chosen, skip_sink: bool = False) -> None:
    """One (Nq, Nk) map as shown (hidden tokens, pair block); skip_sink: the colours span the weights of every key
    but the first, so a head that parks most of its weight on token 0 still shows the rest of its pattern."""
    w, rows, cols = shown(matrix, c)
    if c.hide and c.block == "all":
        st.info(t("attention.hide_special_note"))
    zmax = None
    if skip_sink and w.shape[1] > 1:
        rest = w[:, 1:]
        zmax = plots.colour_top(rest, c.auto) if c.auto else max(float(rest.max()), 1e-6)
    ui.plot(plots.head_heatmap(w, rows, cols, title, query=t("attention.query"), key=t("attention.key"),
                               value=t("attention.weight"), auto_scale=c.auto, zmax=zmax), key=key)
    ticks = plots.token_ticks(len(rows), len(cols))
    if ticks.numbered:  # say that the axes may skip tokens, or the labels read as scrambled text
        i = min(max(ticks.step, 1), len(rows) - 1)
        st.caption(t("attention.labels_thinned" if ticks.step > 1 else "attention.labels_numbered",
                     step=ticks.step, example=ui.plain_md(f"{i}·{rows[i]}")))
    st.caption(scale_note(plots.colour_top(w, c.auto), c.auto) if zmax is None else
               t("attention.scale_no_sink", top=f"{zmax:.3g}", first=ui.plain_md(cols[0]) if cols else ""))


def row_sum_note(matrix: np.ndarray, how: str, c: Chosen) -> str:
    """What the rows shown sum to: hiding special tokens renormalises them, a sentence-pair block cuts them."""
    sums = shown(matrix, c)[0].sum(-1)
    if not np.allclose(sums, 1, atol=1e-3):
        return t("attention.rows_sum_range", lo=f"{sums.min():.2f}", hi=f"{sums.max():.2f}")
    renormalised = how == "max" and c.hide and c.block == "all"
    return t("attention.rows_sum_one_renorm") if renormalised else t("attention.rows_sum_one")


def open_head(chart_key: str, n_heads: int) -> None:
    """Chart click -> open that head in the 'One head' view."""
    points = st.session_state[chart_key].selection.get("points", [])
    if points and "point_index" in points[0] and points[0].get("curve_number", 1) == 1:
        idx = int(points[0]["point_index"])
        show_head(idx // n_heads, idx % n_heads)


def show_head(layer: int, head: int) -> None:
    """Open one head in the 'One head' view."""
    ui.set_value("layer", layer)
    ui.set_value("head", head)
    ui.set_value("heads", [head])
    ui.set_value("view", "head")


# ---------------------------------------------------------------- views
def view_head(src: Source, c: Chosen) -> None:
    skip_sink = len(c.k_tokens) > 1 and ui.checkbox(t("attention.skip_sink"), "nosink", False,
                                                    help=t("attention.skip_sink_help"))
    heatmap(c.weights[c.layer, c.head], t("attention.head_title", layer=c.layer, head=c.head), "head_fig", c,
            skip_sink=bool(skip_sink))
    if c.part in ("self", "decoder") and head_analysis.is_causal(c.weights):
        st.caption(t("attention.causal_seen"))
    window_note(src, c)
    st.caption(t("attention.head_explain") if c.block == "all" and not c.hide else
               ui.sentences(t("attention.head_explain_part"), row_sum_note(c.weights[c.layer, c.head], "mean", c)))
    ui.latex(r"w_{ij} = \mathrm{softmax}_j\!\left(\frac{q_i \cdot k_j}{\sqrt{d_k}}\right), \qquad \sum_j w_{ij} = 1")


def window_note(src: Source, c: Chosen) -> None:
    """On a sliding-window layer: whether this text is long enough for the window to show, and what it does."""
    arch = getattr(models.info(src.name), "architecture", None)
    if arch is None or not arch.sliding_window or c.layer not in arch.sliding_layers:
        return
    n, w = len(c.q_tokens), arch.sliding_window
    if n > w:
        blocked = head_analysis.outside_window(c.weights[c.layer, c.head], w)
        st.caption(t("attention.window_seen", w=w, w1=w - 1, n=n, zero=f"{blocked:.0%}"))
    else:
        st.caption(t("attention.window_short", w=w, n=n))


def view_grid(src: Source, c: Chosen) -> None:
    st.caption(ui.sentences(t("attention.grid_explain", size=min(GRID_THUMB, c.weights.shape[-1])),
                            t("attention.scale_auto_grid", q=f"{plots.COLOUR_QUANTILE * 100:.0f}") if c.auto
                            else t("attention.scale_fixed")))
    fig = plots.model_grid(c.weights, thumb=GRID_THUMB, layer_label=t("attention.layer"),
                           head_label=t("attention.head"), hover_hint=t("attention.grid_hover"),
                           selected=(c.layer, c.head), auto_scale=c.auto, value_name=t("attention.weight"))
    ui.plot(fig, key="grid_fig", on_select=partial(open_head, "grid_fig", c.n_heads), selection_mode="points")


def view_lines(src: Source, c: Chosen) -> None:
    c_heads, c_thr = st.columns([3, 1])
    heads = ui.multiselect(t("attention.lines_heads"), range(c.n_heads), "heads", default=[c.head], container=c_heads)
    threshold = ui.slider(t("attention.lines_threshold"), 0.0, 0.5, "thr", 0.02, step=0.01, container=c_thr)
    st.caption(t("attention.lines_explain", threshold=threshold))
    if not heads:
        st.info(t("attention.lines_none"))
        return
    w, rows, cols = shown(c.weights[c.layer], c) if c.block == "all" else (c.weights[c.layer], c.q_tokens,
                                                                          c.k_tokens)
    html = plots.line_view_html(rows, cols, w, heads, threshold=threshold,
                                labels={"query": t("attention.query"), "key": t("attention.key"),
                                        "head": t("attention.head"), "hint": t("attention.lines_hint")},
                                dark=st.context.theme.type == "dark")
    st.iframe(html, height=plots.line_view_height(max(len(rows), len(cols))))


def view_aggregate(src: Source, c: Chosen) -> None:
    how = ui.radio(t("attention.agg"), ("mean", "max", "rollout"), "agg", format_func=lambda a: t(f"attention.agg_{a}"))
    if how == "rollout" and c.part in ("self", "encoder"):
        rollout = cached.rollout(src.name, src.text, src.pair, src.target)
        heatmap(rollout[c.layer], f"{t('attention.agg_rollout')} · l = {c.layer}", "agg_fig", c)
        st.caption(t("attention.agg_explain_rollout"))
        ui.latex(r"\tilde A_l = \tfrac12 I + \tfrac12 \frac{1}{H}\sum_h A_{l,h}, \qquad R_l = \tilde A_l \, R_{l-1},"
                 r"\quad R_0 = I")
        return
    how = "mean" if how == "rollout" else how
    agg = head_analysis.aggregate(c.weights[c.layer:c.layer + 1], how)[0]
    heatmap(agg, f"{t(f'attention.agg_{how}')} · {t('attention.layer')} {c.layer}", "agg_fig", c)
    st.caption(ui.sentences(t(f"attention.agg_explain_{how}"), row_sum_note(agg, how, c)))


def view_stats(src: Source, c: Chosen) -> None:
    stat = ui.selectbox(t("attention.stat"), head_analysis.STAT_NAMES, "stat",
                        format_func=lambda s: t(f"attention.stat_{s}"))
    values = cached.stats(src.name, src.text, src.pair, src.target, c.part)[stat]
    fig = plots.stats_map(values, title=t(f"attention.stat_{stat}"), value_name=t(f"attention.stat_{stat}"),
                          layer_label=t("attention.layer"), head_label=t("attention.head"), selected=(c.layer, c.head))
    ui.plot(fig, key="stats_fig", on_select=partial(open_head, "stats_fig", c.n_heads), selection_mode="points")
    st.caption(t("attention.stats_explain"))
    if stat == "special" and not c.k_special.any():
        st.caption(t("attention.stats_special_note"))
    ui.latex(r"H_i = -\sum_j w_{ij}\log_2 w_{ij}, \qquad D_i = \sum_j w_{ij}\,|i-j|")


def view_compare(src: Source, c: Chosen) -> None:
    text2 = compare_view.variant_box()
    compare_view.draw(compare_view.Input(src.name, src.text, src.pair, src.target, c.part, c.layer, c.head, c.auto),
                      text2)


def view_qkmap(src: Source, c: Chosen) -> None:
    m = models.info(src.name)
    unk = cached.result(src.name, src.text, src.pair, src.target).unk_token or "[UNK]"
    qk_view.draw(src.name, src.kind, src.text, c.layer, c.head, unk=unk, model_name=m.name)


def view_sinks(src: Source, c: Chosen) -> None:
    shares = cached.sinks(src.name, src.text, src.pair, src.target, c.part)
    decoder_view.sinks_view(shares, getattr(models.info(src.name), "architecture", None), "sinks_fig",
                            selected=(c.layer, c.head), on_select=partial(open_head, "sinks_fig", c.n_heads),
                            encoder=src.kind != "decoder", causal=src.kind == "decoder" or c.part == "decoder")


def view_heads(src: Source, c: Chosen) -> None:
    from app_pages._ui import heads as heads_view  # torch: a decoder's view only (the encoder's page stays torch-free)
    heads_view.draw(src.name, c.layer, c.head, show_head)


def view_lens(src: Source, c: Chosen | None) -> None:
    try:
        with st.spinner(t("attention.lens_running")):
            lens = cached.lens(src.name, src.text)
    except InputError as exc:
        error(exc)
        return
    decoder_view.lens_view(lens, "lens_fig")


def view_importance(src: Source, c: Chosen) -> None:
    importance_view.draw(importance_view.Input(src.name, src.kind, src.text, src.pair, src.target, c.part),
                         c.layer, c.head)


def view_export(src: Source, c: Chosen) -> None:
    st.write(t("attention.export_explain"))
    ui.download(t("attention.download_npz"), partial(cached.npz, src.name, src.text, src.pair, src.target),
                "attention.npz", "application/octet-stream", key="dl_npz")
    w, rows, cols = shown(c.weights[c.layer, c.head], c)
    ui.download(t("attention.download_csv"), export.matrix_csv(w, rows, cols), f"attention_l{c.layer}_h{c.head}.csv",
                "text/csv", key="dl_csv")
    st.markdown(t("attention.npz_contents"))


VIEW_DRAWERS = {"head": view_head, "grid": view_grid, "lines": view_lines, "aggregate": view_aggregate,
                "stats": view_stats, "compare": view_compare, "qkmap": view_qkmap, "sinks": view_sinks,
                "heads": view_heads, "lens": view_lens, "importance": view_importance, "export": view_export}

# ---------------------------------------------------------------- page
ui.setup("attention")
# the root address opens this page: a newcomer is pointed to the learning path (as the session left it, like the
# sidebar's link, so a student's step and answers are kept)
ui.link("start", t("attention.start_hint"), ui.state.page_address("start", ui.lang()), icon=":material/school:")
name, m, waiting = model_box()
text, pair, target = text_boxes(m)
src = Source(name, m.kind, text, pair, target)
r = load(src, waiting)
unknown_note(r, src, m.name)
views = VIEWS if m.kind == "decoder" else tuple(v for v in VIEWS if v not in DECODER_VIEWS)
view = ui.radio(t("attention.view"), views, "view", format_func=lambda v: t(f"attention.view_{v}"))
if view == "lens":  # the lens reads every layer at once: no layer, head or colour options
    view_lens(src, None)
else:
    chosen = choose(r, view, bool(pair) and m.supports_pair)
    VIEW_DRAWERS[view](src, chosen)
st.caption(t("attention.share"))

# Between runs a session keeps its widget values and nothing of this run's arrays: they go now (a long sentence's
# attention result is large, unless the shared cache still keeps it), not when the session's next run replaces them.
for _name in ("r", "chosen"):
    globals().pop(_name, None)
