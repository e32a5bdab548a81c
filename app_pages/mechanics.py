"""Mechanics: how attention computes its output, step by step; masks; MHA / GQA / MQA; cross and additive attention."""
from dataclasses import replace
from functools import partial

import numpy as np
import pandas as pd
import streamlit as st

from app_pages import _ui as ui
from app_pages._ui import mechanics as cached
from app_pages._ui.mechanics import figures
from viz_core.io import export
from viz_core.lessons import mechanics as mech
from viz_core.errors import InputError

ui.setup("mechanics")

SECTIONS = ("steps", "masks", "variants", "cross", "additive")
SOURCES = ("worked", "random", "real")
MATRICES = (("x", "X", mech.WORKED_X), ("wq", "W_q", mech.WORKED_WQ), ("wk", "W_k", mech.WORKED_WK),
            ("wv", "W_v", mech.WORKED_WV))
DEFAULT_BATCH = "the cat sat\na dog ran far away\nhi [PAD] there\n[PAD] [PAD] [PAD]"
SHAPE_NOTES = ("input", "proj", "view_split", "transpose_heads", "scores", "softmax", "mix", "transpose_back",
               "view_fails", "view_lucky", "contiguous", "merge", "out_proj")


# ---------------------------------------------------------------- small helpers
def _grid(figs: list, n_cols: int = 3, prefix: str = "fig") -> None:
    """Figures in rows of n_cols columns (they stack on a narrow screen)."""
    for start in range(0, len(figs), n_cols):
        cols = st.columns(n_cols)
        for col, (i, fig) in zip(cols, enumerate(figs[start:start + n_cols], start)):
            with col:
                ui.plot(fig, key=f"{prefix}_{i}")


def _reset_matrices() -> None:
    for param, _, default in MATRICES:
        st.session_state.pop(f"mechanics._base_{param}", None)
        st.session_state.pop(f"mechanics.ed_{param}", None)
        ui.set_value(param, mech.format_matrix(default))


def _matrix_editor(param: str, name: str, default: np.ndarray, rows: list[str]) -> np.ndarray:
    """A data editor for one matrix; its cells ('1,2;3,4') hold like any control; InputError names a bad cell.

    The editor keeps its edits relative to the table it was first drawn with (the base), so the base only moves
    when the editor starts afresh: first draw, after a page switch (Streamlit forgot its edits) or Back / Forward.
    """
    default_text = mech.format_matrix(default)
    base_key, editor_key = f"mechanics._base_{param}", f"mechanics.ed_{param}"
    if base_key not in st.session_state or editor_key not in st.session_state or ui.state.address_is_truth():
        st.session_state[base_key] = ui.value(param, default_text, str)
        st.session_state.pop(editor_key, None)
    cells = mech.split_matrix(st.session_state[base_key], default.shape)
    frame = pd.DataFrame(cells, index=rows, columns=[str(j) for j in range(default.shape[1])], dtype=object)
    st.markdown(f"**{name}**  ({default.shape[0]} × {default.shape[1]})")
    edited = st.data_editor(frame, key=editor_key, width="stretch")
    grid = [["" if c is None else str(c) for c in row] for row in edited.values.tolist()]
    ui.set_value(param, ";".join(",".join(row) for row in grid), default_text)
    return mech.parse_cells(grid, name)


def _mask_kind_name(kind: str) -> str:
    return ui.t(f"mechanics.mask_{kind}")


# ---------------------------------------------------------------- 1. step by step
def _step_options():
    c1, c2, c3, c4 = st.columns(4)
    scale = ui.checkbox(ui.t("mechanics.opt_scale"), "scale", True, container=c1)
    causal = ui.checkbox(ui.t("mechanics.opt_causal"), "causal", False, container=c2)
    train = ui.checkbox(ui.t("mechanics.opt_dropout"), "train", False, container=c3,
                        help=ui.t("mechanics.opt_dropout_help"))
    if not train:  # no greyed-out slider (its label read at contrast 2.3): say where p comes from instead
        c4.caption(ui.t("mechanics.opt_p_off"))
        return scale, causal, 0.0
    return scale, causal, ui.slider(ui.t("mechanics.opt_p"), 0.05, 0.9, "p", 0.2, step=0.05, container=c4)


def _worked_source(scale, causal, p, seed):
    """The notes' matrices, edited in a section that opens (a data grid is a heavy element for the browser on every
    page switch: drawn only while open); closed, the matrices are read from their stored cells."""
    st.caption(ui.t("mechanics.worked_intro"))
    opened, box = ui.fold(ui.t("mechanics.edit_inputs"), "edit")
    mats = {}
    if opened:
        with box:
            mats = _matrix_editors()
    else:
        for param, name, default in MATRICES:
            try:
                cells = mech.split_matrix(ui.value(param, mech.format_matrix(default), str), default.shape)
                mats[param] = mech.parse_cells(cells, name)
            except InputError as exc:
                ui.show_error(exc)
                st.caption(ui.t("mechanics.edit_to_fix"))
    if len(mats) < 4:
        return None
    return cached.worked_steps(mats["x"], mats["wq"], mats["wk"], mats["wv"], tuple(mech.WORKED_TOKENS), scale,
                               causal, p, seed)


def _matrix_editors() -> dict[str, np.ndarray]:
    """X on its own row, then W_q, W_k, W_v side by side, each a data grid; a reset button. {param: matrix}."""
    tokens = [f"{t} ({i})" for t, i in zip(mech.WORKED_TOKENS, mech.WORKED_IDS)]
    dims = [f"d{i}" for i in range(4)]
    cols = [st.container()] + st.columns([1, 1, 2])
    mats = {}
    for col, (param, name, default) in zip(cols, MATRICES):
        with col:
            try:
                mats[param] = _matrix_editor(param, name, default, tokens if param == "x" else dims)
            except InputError as exc:
                ui.show_error(exc)
    st.button(ui.t("mechanics.reset_matrices"), on_click=_reset_matrices, key="mechanics.reset")
    return mats


def _random_source(scale, causal, p, seed):
    c = st.columns(5)
    n = ui.slider(ui.t("mechanics.n_tokens"), 1, 10, "rn", 4, container=c[0])
    d_model = ui.slider("d_model", 1, 16, "rdm", 8, container=c[1])
    d_k = ui.slider("d_k", 1, 16, "rdk", 4, container=c[2])
    d_v = ui.slider("d_v", 1, 16, "rdv", 4, container=c[3])
    rseed = ui.number(ui.t("mechanics.seed"), 0, 9999, "rseed", 0, container=c[4])
    return cached.random_steps(n, d_model, d_k, d_v, int(rseed), scale, causal, p, seed)


def _real_source(scale, causal, p, seed):
    c1, c2, c3 = st.columns([4, 1, 1])
    text = ui.text(ui.t("mechanics.real_text"), "rtext", "The cat sat on the mat because it was tired.",
                   max_chars=200, container=c1)
    layer = ui.slider(ui.t("mechanics.layer"), 0, 5, "rlayer", 2, container=c2)
    head = ui.slider(ui.t("mechanics.head"), 0, 11, "rhead", 0, container=c3)
    with st.spinner(ui.t("mechanics.loading_model")):
        steps, model_w, n_layers, n_heads = cached.real_steps(text, layer, head, scale, causal, p, seed)
    diff = mech.max_abs_diff(steps.weights, model_w)
    if scale and not causal:
        st.success(ui.t("mechanics.real_check", diff=f"{diff:.1e}", layer=layer, head=head))
    else:
        st.info(ui.t("mechanics.real_check_off", diff=f"{diff:.2g}"))
    st.caption(ui.t("mechanics.real_note", layers=n_layers, heads=n_heads, d_k=steps.q.shape[1]))
    return steps


def _stage_figures(s: mech.AttentionSteps, inputs: bool = False) -> list:
    """Every stage as a labelled matrix: Q, K, V, QK^T, scaled, masked (if a mask), softmax, dropout, output; or,
    with inputs=True, the inputs X, W_q, W_k, W_v."""
    tok, fdim = s.tokens, ui.t("mechanics.ax_feature")
    q_ax, k_ax, tok_ax = ui.t("mechanics.ax_query"), ui.t("mechanics.ax_key"), ui.t("mechanics.ax_token")
    val = ui.t("mechanics.ax_value")

    def mat(z, title, rows=None, cols=None, x=fdim, y=tok_ax, **kw):
        return figures.stage_matrix(z, title, rows=rows, cols=cols, x_title=x, y_title=y, value_name=val, **kw)

    if inputs:  # X and the projections (the worked example shows them in its editors instead)
        return [mat(s.x, ui.t("mechanics.st_x"), tok)] + [
            mat(s.w[name], f"W_{name}", y="d_model", x=f"d_{'v' if name == 'v' else 'k'}") for name in ("q", "k", "v")]
    out = [mat(s.q, ui.t("mechanics.st_q"), tok, x="d_k"), mat(s.k, ui.t("mechanics.st_k"), tok, x="d_k"),
           mat(s.v, ui.t("mechanics.st_v"), tok, x="d_v")]
    kw = dict(rows=tok, cols=tok, x=k_ax, y=q_ax)
    out.append(mat(s.scores, "Q Kᵀ", **kw))
    out.append(mat(s.scaled, ui.t("mechanics.st_scaled", d=f"{s.divisor:.3g}") if s.divisor != 1
                   else ui.t("mechanics.st_unscaled"), **kw))
    if s.mask is not None:  # without a mask, + M adds 0: that stage would repeat the one before (a caption says so)
        out.append(mat(s.masked, ui.t("mechanics.st_masked"), mask=s.mask, **kw))
    out.append(mat(s.weights, ui.t("mechanics.st_softmax"), prob=True, mask=s.mask, **kw))
    if s.dropped is not None:
        top = float(s.dropped.max()) if s.dropped.size else 1.0
        out.append(mat(s.dropped, ui.t("mechanics.st_dropout"), prob=True, zmax=max(1.0, top), mask=s.mask, **kw))
    out.append(mat(s.out, ui.t("mechanics.st_out"), tok, x="d_v"))
    return out


def _batched_shapes():
    """How a batch of B sequences and H heads runs at once, shape by shape: a fold of its own, drawn only while open
    (a page's first view draws nothing below the stages that the reader did not ask for)."""
    opened, box = ui.fold(ui.t("mechanics.batched_title"), "shapes")
    if opened:
        with box:
            _batched_shapes_body()


def _batched_shapes_body():
    st.markdown(ui.t("mechanics.batched_intro"))
    ui.latex(r"\begin{gathered}(B, N, d_{model}) \xrightarrow{\text{view, transpose}} (B, H, N, d_k)"
             r" \\ \xrightarrow{QK^\top} (B, H, N, N) \xrightarrow{\cdot V} (B, H, N, d_k) \\"
             r" \xrightarrow{\text{transpose, contiguous, view}} (B, N, d_{model})\end{gathered}")
    c = st.columns(4)
    b = ui.slider("B", 1, 4, "bb", 2, container=c[0])
    n = ui.slider("N", 1, 8, "bn", 5, container=c[1])
    d_model = ui.slider("d_model", 4, 64, "bdm", 8, step=4, container=c[2])
    heads = ui.selectbox(ui.t("mechanics.heads"), mech.divisors(d_model), "bh", 2 if d_model % 2 == 0 else 1,
                         container=c[3])
    rows = cached.shape_walkthrough(b, n, d_model, heads)
    table = [{
        ui.t("mechanics.col_code"): ui.Md(ui.code_md(r.code)),
        ui.t("mechanics.col_shape"): str(r.shape) if r.shape else "✗",
        ui.t("mechanics.col_stride"): str(r.stride) if r.stride else "—",
        ui.t("mechanics.col_contiguous"): "—" if r.contiguous is None else ("✓" if r.contiguous else "✗"),
        ui.t("mechanics.col_note"): ui.Md(ui.plain_md(ui.t(f"mechanics.shape_{r.note}"))
                                          + (f" {ui.code_md(r.error)}" if r.error else "")),
    } for r in rows]
    ui.table(table)  # a static table wraps its long "what happens" notes (a data grid cuts them); markdown: #25


def section_steps():
    ui.prose(ui.glossed(ui.t("mechanics.steps_intro")))
    ui.latex(r"\begin{gathered}\mathrm{Attention}(Q,K,V) \\ =\mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}"
             r"+M\right)V \\ Q=XW_q,\quad K=XW_k,\quad V=XW_v\end{gathered}")
    source = ui.radio(ui.t("mechanics.source"), SOURCES, "src", format_func=lambda s: ui.t(f"mechanics.src_{s}"))
    scale, causal, p = _step_options()
    seed = 0
    if p > 0:
        seed = int(ui.number(ui.t("mechanics.drop_seed"), 0, 9999, "dseed", 0))
    try:
        steps = {"worked": _worked_source, "random": _random_source, "real": _real_source}[source](
            scale, causal, p, seed)
    except InputError as exc:
        ui.show_error(exc)
        steps = None
    if steps is not None:  # three figures a row while matrices are small; two from 7 tokens on, so labels fit
        n_cols = 3 if len(steps.tokens) <= 6 else 2
        if source == "random":  # X and the projections, in a section that opens (drawn only while open)
            opened, box = ui.fold(ui.t("mechanics.show_inputs"), "inputs")
            if opened:
                with box:
                    _grid(_stage_figures(steps, inputs=True), n_cols=n_cols, prefix="input")
        _grid(_stage_figures(steps), n_cols=n_cols, prefix="stage")
        if steps.mask is None:
            st.caption(ui.t("mechanics.no_mask_stage"))
        sums = ", ".join(f"{x:.3f}" for x in steps.weights.sum(-1))
        st.caption(ui.t("mechanics.row_sums", sums=sums))
        if steps.dropped is not None:
            st.caption(ui.t("mechanics.dropout_note", p=p, sums=", ".join(f"{x:.2f}" for x in
                                                                          steps.dropped.sum(-1))))
        ui.download(ui.t("mechanics.download_npz"), partial(export.npz_bytes,
            tokens=steps.tokens, q=steps.q, k=steps.k, v=steps.v, scores=steps.scores, scaled=steps.scaled,
            weights=steps.weights, out=steps.out), "attention_steps.npz", "application/octet-stream",
            key="mechanics.dl_steps")
    _batched_shapes()


# ---------------------------------------------------------------- 2. masks
def _mask_inputs():
    c1, c2 = st.columns([3, 2])
    text = ui.text(ui.t("mechanics.batch_text"), "batch", DEFAULT_BATCH, area=True, max_chars=600, container=c1,
                   help=ui.t("mechanics.batch_help"))
    with c2:
        side = ui.radio(ui.t("mechanics.pad_side"), ("end", "start"), "side",
                        format_func=lambda s: ui.t(f"mechanics.side_{s}"))
        kind = ui.selectbox(ui.t("mechanics.mask_kind"), mech.MASK_KINDS, "kind", "causal_padding",
                            format_func=_mask_kind_name)
        item = ui.slider(ui.t("mechanics.item"), 0, mech.MAX_BATCH - 1, "item", 2)
        query = ui.text(ui.t("mechanics.cross_query"), "mq", "le chat dort", max_chars=200) if kind == "cross" \
            else ui.value("mq", "le chat dort")  # drawn only where it counts (a greyed-out box is hard to read)
        window = ui.slider(ui.t("mechanics.window"), 1, mech.MAX_TOKENS, "win", mech.DEFAULT_WINDOW,
                           help=ui.t("mechanics.window_help")) if kind == "sliding" \
            else ui.value("win", mech.DEFAULT_WINDOW)
    return text, side, kind, item, query, int(window)


def _sliding_window_note(window: int, view: mech.MaskView) -> None:
    """The sliding window's rule and what it buys, in formulas, with the numbers of the chosen W."""
    ui.latex(r"\begin{gathered}M_{ij}=\begin{cases}0 & 0 \le i-j < W\\ -\infty & i-j < 0 \;\lor\; i-j \ge W"
             r"\end{cases} \\ O(N\,W) \ll O(N^2),\qquad \mathrm{reach}(l) = l\,(W-1)\end{gathered}")
    visible = int((~view.mask).sum())
    st.caption(ui.t("mechanics.sliding_numbers", w=window, visible=visible, cells=view.mask.size,
                    causal=len(view.k_tokens) * (len(view.k_tokens) + 1) // 2, reach=mech.sliding_reach(window, 5),
                    gemma=mech.sliding_reach(mech.GEMMA3_270M.window, 5)))


def _mask_figures(view: mech.MaskView) -> None:
    q_ax, k_ax, val = ui.t("mechanics.ax_query"), ui.t("mechanics.ax_key"), ui.t("mechanics.ax_value")
    kw = dict(rows=view.q_tokens, cols=view.k_tokens, x_title=k_ax, y_title=q_ax, value_name=val,
              dont_care=view.query_is_pad)
    _grid([figures.stage_matrix(view.mask.astype(float), ui.t("mechanics.fig_mask"), prob=True, fmt=".0f", **kw),
           figures.stage_matrix(view.masked, ui.t("mechanics.fig_masked_scores"), mask=view.mask, fmt=".2f",
                                **kw),
           figures.stage_matrix(view.weights["safe"], ui.t("mechanics.fig_weights"), prob=True, mask=view.mask,
                                fmt=".2f", **kw)],
          prefix="mask")
    if view.query_is_pad.any():
        st.caption(ui.t("mechanics.dont_care_note"))


def _method_comparison(view: mech.MaskView) -> None:
    st.markdown(ui.t("mechanics.methods_intro"))
    q_ax, k_ax, val = ui.t("mechanics.ax_query"), ui.t("mechanics.ax_key"), ui.t("mechanics.ax_value")
    _grid([figures.stage_matrix(view.weights[m], ui.t(f"mechanics.method_{m}"), rows=view.q_tokens,
                                cols=view.k_tokens, x_title=k_ax, y_title=q_ax, value_name=val, prob=True,
                                mask=view.mask, dont_care=view.query_is_pad, fmt=".2f")
           for m in mech.MASK_METHODS], n_cols=2, prefix="method")
    table = pd.DataFrame([{
        ui.t("mechanics.col_method"): ui.t(f"mechanics.method_{r['method']}"),
        ui.t("mechanics.col_nan"): r["nan_cells"],
        ui.t("mechanics.col_leak"): f"{r['max_blocked_weight']:.3g}",
        ui.t("mechanics.col_blocked_row"): ("—" if r["blocked_row_sum"] is None else
                                           "NaN" if np.isnan(r["blocked_row_sum"]) else
                                           f"{r['blocked_row_sum']:.3g}"),
    } for r in mech.method_summary(view)])
    st.dataframe(table, hide_index=True, width="stretch")
    if not view.fully_blocked.any():
        st.caption(ui.t("mechanics.no_blocked_rows"))
    fp16 = cached.fp16_fill_check()
    st.info(ui.t("mechanics.fp16_note", error=fp16["fill_1e9"], low=fp16["finfo_min"]))


def section_masks():
    ui.prose(ui.glossed(ui.t("mechanics.masks_intro")))
    # (in symbols only, the same in both languages: the words are in the text above)
    ui.latex(r"\begin{gathered}\mathrm{softmax}(S + M),\quad M_{ij}\in\{0,\,-\infty\} \\ "
             r"M^{\mathrm{causal}}_{ij}=\begin{cases}0 & j\le i\\ -\infty & j>i\end{cases}\end{gathered}")
    text, side, kind, item, query, window = _mask_inputs()
    try:
        batch, view = cached.mask_view(text, side, item, kind, query, 0, window)
    except InputError as exc:
        ui.show_error(exc)
        return
    ui.plot(figures.padded_batch(batch.tokens, batch.is_pad, ui.t("mechanics.fig_batch"),
                                 ui.t("mechanics.ax_position"), ui.t("mechanics.ax_sentence"), ui.t("mechanics.pad")),
            key="batch")
    if item >= len(batch.tokens):
        st.caption(ui.t("mechanics.item_clamped", item=len(batch.tokens) - 1))
    st.markdown(ui.t(f"mechanics.kind_{kind}_text"))
    if kind == "sliding":
        _sliding_window_note(window, view)
    st.caption(ui.t("mechanics.batch_mask_shape", shape=str(view.batch_mask_shape),
                    item_shape=str(view.mask.shape)))
    _mask_figures(view)
    _method_comparison(view)
    ui.download(ui.t("mechanics.download_npz"), partial(export.npz_bytes,
        mask=view.mask, scores=view.scores, weights=view.weights["safe"], q_tokens=view.q_tokens,
        k_tokens=view.k_tokens, is_pad=batch.is_pad), "masks.npz", "application/octet-stream", key="mechanics.dl_mask")


# ---------------------------------------------------------------- 3. MHA / GQA / MQA
def _shape_choice() -> mech.ModelShape:
    presets = list(mech.PRESETS) + ["custom"]
    c1, c2 = st.columns([3, 1])
    name = ui.selectbox(ui.t("mechanics.preset"), presets, "preset", "llama2_7b", container=c1,
                        format_func=lambda k: ui.t("mechanics.custom") if k == "custom" else _preset_label(k),
                        on_change=_own_kv_heads)
    dtype = ui.selectbox(ui.t("mechanics.dtype"), list(mech.DTYPE_BYTES), "dtype", "fp16", container=c2)
    if name != "custom":
        return replace(mech.PRESETS[name], bytes_per_value=mech.DTYPE_BYTES[dtype])  # window and d_head kept
    c = st.columns(3)
    d_model = int(ui.number("d_model", 1, 65536, "cdm", 4096, container=c[0]))
    heads = int(ui.number(ui.t("mechanics.heads"), 1, 256, "ch", 32, container=c[1]))
    layers = int(ui.number(ui.t("mechanics.layers"), 1, 200, "cl", 32, container=c[2]))
    return mech.custom_shape(d_model, heads, layers, mech.DTYPE_BYTES[dtype])


def _own_kv_heads() -> None:
    """A newly chosen model shape starts at the KV heads the real model uses (e.g. SmolLM2: 3 of 9)."""
    preset = mech.PRESETS.get(ui.value("preset"))
    if preset is not None:
        ui.set_value("kv", preset.n_kv_heads)


def _preset_label(key: str) -> str:
    s = mech.PRESETS[key]
    label = ui.t("mechanics.preset_label", name=s.name, heads=s.n_heads, d_model=s.d_model, layers=s.n_layers,
                 kv=s.n_kv_heads)
    return label + (ui.t("mechanics.preset_window", w=s.window) if s.window else "")


def _window_note(shape: mech.ModelShape, kv: int, ctx: int, batch: int) -> None:
    """A model with sliding layers keeps at most W tokens in each of them: the capped cache at this context and at
    4096 tokens, against every layer keeping every token."""
    kinds = shape.layer_kinds()
    full = [i for i, k in enumerate(kinds) if k == "full"]

    def figures(n: int) -> dict:
        return dict(ctx=n, tok_full=n, tok_sliding=min(n, shape.window), batch=batch,
                    capped=mech.format_bytes(mech.windowed_cache_bytes(shape, kv, n, batch)),
                    uncapped=mech.format_bytes(mech.kv_cache_bytes(shape, kv, n, batch)))

    st.caption(ui.t("mechanics.kv_window_note", name=shape.name, full=len(full), sliding=len(kinds) - len(full),
                    w=shape.window, layers=", ".join(map(str, full)), **figures(ctx)))
    if ctx != 4096:  # the reference figure of a 4096-token context
        st.caption(ui.t("mechanics.kv_window_ref", **figures(4096)))


def _kv_cache_part() -> None:
    st.subheader(ui.t("mechanics.kv_title"))
    ui.latex(r"\begin{gathered}\text{KV cache} = 2\, L\, H_{kv}\, d_{head} \cdot \text{bytes} \cdot N \cdot B"
             r" \\ \text{params}_{attn} = 2\, L\, d_{model}\, d_{head}\,(H + H_{kv})\end{gathered}")
    try:
        shape = _shape_choice()
    except InputError as exc:
        ui.show_error(exc)
        return
    c1, c2, c3 = st.columns(3)
    ctx = int(ui.number(ui.t("mechanics.context"), 1, 1_048_576, "ctx", 4096, container=c1))
    batch = int(ui.number(ui.t("mechanics.batch_size"), 1, 1024, "bs", 1, container=c2))
    with c3:
        options = mech.divisors(shape.n_heads)
        kv = ui.select_slider(ui.t("mechanics.kv_heads"), options, "kv",
                            shape.n_kv_heads if shape.n_kv_heads in options else options[-1],
                            help=ui.t("mechanics.kv_help"))
    view = mech.kv_cache_view(shape, ctx, batch, kv)
    r = view.rows[view.chosen]
    m = st.columns(4)
    m[0].metric(ui.t("mechanics.variant"), f"{r['variant']} ({kv}/{shape.n_heads})")
    m[1].metric(ui.t("mechanics.params_attn"), mech.format_count(r["params"]))
    m[2].metric(ui.t("mechanics.kv_per_token"), mech.format_bytes(r["bytes_per_token"]))
    m[3].metric(ui.t("mechanics.kv_total", ctx=ctx, batch=batch), mech.format_bytes(r["bytes_total"]))
    st.caption(ui.t("mechanics.kv_shape_note", d_head=shape.head_dim, layers=shape.n_layers,
                    bytes=shape.bytes_per_value))
    if kv != shape.n_heads:  # the same model as plain MHA: one K and V head per query head
        mha = view.rows[-1]
        st.caption(ui.t("mechanics.kv_vs_mha", heads=shape.n_heads, kv=kv, ratio=shape.n_heads // kv,
                        mha=mech.format_bytes(mha["bytes_per_token"]), ours=mech.format_bytes(r["bytes_per_token"])))
    if shape.window:
        _window_note(shape, kv, ctx, batch)
    c1, c2 = st.columns(2)
    with c1:
        ui.plot(figures.variant_bars(view.labels, view.total_gib, ui.t("mechanics.fig_kv"),
                                     ui.t("mechanics.kv_heads"), "GiB", view.chosen, view.total_text), key="kv_bars")
    with c2:
        ui.plot(figures.variant_bars(view.labels, view.params_millions, ui.t("mechanics.fig_params"),
                                     ui.t("mechanics.kv_heads"), ui.t("mechanics.millions"), view.chosen,
                                     view.params_text), key="param_bars")
    ui.plot(figures.head_groups(view.groups, kv, ui.t("mechanics.fig_groups"), ui.t("mechanics.q_heads"),
                                ui.t("mechanics.kv_heads_short")), key="groups")
    st.caption(ui.t("mechanics.groups_note", kv=kv, heads=shape.n_heads, g=shape.n_heads // kv))
    ui.download(ui.t("mechanics.download_csv"), export.records_csv(view.rows), "kv_cache.csv", "text/csv",
                key="mechanics.dl_kv")


def _variant_outputs() -> None:
    st.subheader(ui.t("mechanics.same_input_title"))
    st.markdown(ui.t("mechanics.same_input_intro"))
    c = st.columns(5)
    d_model = ui.slider("d_model", 4, 64, "vdm", 16, step=4, container=c[0])
    heads = ui.selectbox(ui.t("mechanics.heads"), mech.divisors(d_model), "vh", 4 if d_model % 4 == 0 else 1,
                         container=c[1])
    with c[2]:
        kv = ui.select_slider(ui.t("mechanics.kv_heads"), mech.divisors(heads), "vkv", max(1, heads // 2))
    n = ui.slider(ui.t("mechanics.n_tokens"), 1, 10, "vn", 6, container=c[3])
    head = ui.slider(ui.t("mechanics.head"), 0, heads - 1, "vhead", 0, container=c[4])
    res = cached.compare_variants(d_model, heads, kv, n, 0)
    tok = [f"t{i}" for i in range(n)]
    titles = [f"{name} (H_kv = {k})" for name, k in zip(res.names, res.kv_heads)]
    q_ax, k_ax, val = ui.t("mechanics.ax_query"), ui.t("mechanics.ax_key"), ui.t("mechanics.ax_value")
    _grid([figures.stage_matrix(o, ui.t("mechanics.fig_out", name=t), rows=tok,
                                x_title=ui.t("mechanics.ax_feature"), y_title=ui.t("mechanics.ax_token"),
                                value_name=val, fmt=".2f")
           for o, t in zip(res.outputs, titles)] +
          [figures.stage_matrix(w[head], ui.t("mechanics.fig_head_w", name=t, head=head), rows=tok, cols=tok,
                                x_title=k_ax, y_title=q_ax, value_name=val, prob=True, fmt=".2f")
           for w, t in zip(res.weights, titles)], prefix="variant")
    st.dataframe(pd.DataFrame({ui.t("mechanics.variant"): titles,
                               ui.t("mechanics.params_module"): res.params,
                               ui.t("mechanics.rel_diff"): [f"{x:.3f}" for x in res.rel_diff]}),
                 hide_index=True, width="stretch")
    eq = cached.equivalence_check(d_model, heads, 0)
    st.success(ui.t("mechanics.equivalence", mha=f"{max(eq['mha_out'], eq['mha_weights']):.1e}",
                    mqa=f"{eq['mqa_out']:.1e}"))
    data = partial(export.npz_bytes, outputs=res.outputs, weights=res.weights, kv_heads=res.kv_heads)
    ui.download(ui.t("mechanics.download_npz"), data, "mha_gqa_mqa.npz", "application/octet-stream",
                key="mechanics.dl_variants")


def section_variants():
    ui.prose(ui.glossed(ui.t("mechanics.variants_intro")))
    ui.latex(r"\begin{gathered}\mathrm{head}_i = \mathrm{Attention}\big(Q^{(i)}, K^{(g(i))}, V^{(g(i))}\big)"
             r" \\ g(i) = \left\lfloor i \,/\, (H / H_{kv}) \right\rfloor\end{gathered}")
    _kv_cache_part()
    _variant_outputs()


# ---------------------------------------------------------------- 4. cross attention
def section_cross():
    st.markdown(ui.t("mechanics.cross_intro"))
    ui.latex(r"\begin{gathered}Q = X_{dec} W_q \in \mathbb{R}^{N_q\times d_k} \\ K = X_{enc} W_k,\;"
             r" V = X_{enc} W_v \in \mathbb{R}^{N_k\times d_k} \\ \mathrm{softmax}\!\left(\frac{QK^\top}"
             r"{\sqrt{d_k}}\right)\in\mathbb{R}^{N_q\times N_k}\end{gathered}")
    c1, c2 = st.columns(2)
    q_text = ui.text(ui.t("mechanics.cross_q_text"), "cq", "le chat dort", max_chars=200, container=c1)
    k_text = ui.text(ui.t("mechanics.cross_k_text"), "ck", "the cat is sleeping [PAD] [PAD]", max_chars=200,
                     container=c2, help=ui.t("mechanics.cross_k_help"))
    c = st.columns(3)
    d_model = ui.slider("d_model", 2, 32, "xdm", 8, step=2, container=c[0])
    heads = ui.selectbox(ui.t("mechanics.heads"), mech.divisors(d_model), "xh", 2, container=c[1])
    head = ui.slider(ui.t("mechanics.head"), 0, heads - 1, "xhead", 0, container=c[2])
    try:
        res = cached.cross_attention(q_text, k_text, d_model, heads, 0)
    except InputError as exc:
        ui.show_error(exc)
        return
    ui.table(pd.DataFrame({ui.t("mechanics.col_tensor"): list(res.shapes),
                           ui.t("mechanics.col_shape"): [str(s) for s in res.shapes.values()]}))
    c1, c2 = st.columns(2)
    with c1:
        ui.plot(figures.stage_matrix(res.weights[head], ui.t("mechanics.fig_cross_w", head=head),
                                     rows=res.q_tokens, cols=res.k_tokens, x_title=ui.t("mechanics.ax_source_key"),
                                     y_title=ui.t("mechanics.ax_target_query"),
                                     value_name=ui.t("mechanics.ax_value"), prob=True, mask=res.pad_mask),
                key="cross_w")
    with c2:
        ui.plot(figures.stage_matrix(res.out, ui.t("mechanics.fig_cross_out"), rows=res.q_tokens,
                                     x_title=ui.t("mechanics.ax_feature"), y_title=ui.t("mechanics.ax_target_query"),
                                     value_name=ui.t("mechanics.ax_value"), fmt=".2f"), key="cross_out")
    st.caption(ui.t("mechanics.cross_note"))
    data = partial(export.npz_bytes, weights=res.weights, out=res.out, q_tokens=res.q_tokens, k_tokens=res.k_tokens)
    ui.download(ui.t("mechanics.download_npz"), data, "cross_attention.npz", "application/octet-stream",
                key="mechanics.dl_cross")


# ---------------------------------------------------------------- 5. additive vs dot product
def section_additive():
    st.markdown(ui.t("mechanics.additive_intro"))
    ui.latex(r"\begin{gathered}e^{dot}_{ij} = \frac{q_i\cdot k_j}{\sqrt{d_k}} \\ e^{add}_{ij} = v_a^\top"
             r" \tanh(W_q q_i + W_k k_j) \\ \alpha_{ij} = \mathrm{softmax}_j(e_{ij})\end{gathered}")
    c = st.columns(4)
    n = ui.slider(ui.t("mechanics.n_tokens"), 1, 10, "an", 3, container=c[0])
    d_k = ui.slider("d_k", 1, 64, "adk", 2, container=c[1])
    d_h = ui.slider(ui.t("mechanics.d_hidden"), 1, 64, "adh", 8, container=c[2])
    seed = int(ui.number(ui.t("mechanics.seed"), 0, 9999, "aseed", 0, container=c[3]))
    if n == 3 and d_k == 2:
        st.caption(ui.t("mechanics.additive_worked"))
        steps = cached.worked_steps(mech.WORKED_X, mech.WORKED_WQ, mech.WORKED_WK, mech.WORKED_WV,
                                    tuple(mech.WORKED_TOKENS), True, False, 0.0, 0)
    else:
        steps = cached.random_steps(n, 8, d_k, d_k, seed, True, False, 0.0, 0)
    res = cached.additive_vs_dot(steps.q, steps.k, steps.v, d_h, seed)
    tok = steps.tokens
    kw = dict(rows=tok, cols=tok, x_title=ui.t("mechanics.ax_key"), y_title=ui.t("mechanics.ax_query"),
              value_name=ui.t("mechanics.ax_value"))
    _grid([figures.stage_matrix(res.dot_scores, ui.t("mechanics.fig_dot_scores"), **kw),
           figures.stage_matrix(res.add_scores, ui.t("mechanics.fig_add_scores"), **kw),
           figures.stage_matrix(res.dot_weights, ui.t("mechanics.fig_dot_w"), prob=True, **kw),
           figures.stage_matrix(res.add_weights, ui.t("mechanics.fig_add_w"), prob=True, **kw)],
          n_cols=2, prefix="add")
    sweep = _additive_cost(n, d_k, d_h)
    st.caption(ui.t("mechanics.additive_note"))
    ui.download(ui.t("mechanics.download_npz"), partial(export.npz_bytes,
        tokens=tok, q=steps.q, k=steps.k, v=steps.v, dot_scores=res.dot_scores, add_scores=res.add_scores,
        dot_weights=res.dot_weights, add_weights=res.add_weights, **sweep.arrays()),
        "additive_vs_dot.npz", "application/octet-stream", key="mechanics.dl_additive")


def _additive_cost(n: int, d_k: int, d_h: int) -> mech.CostSweep:
    """The cost of both scores at this N (a table) and as N grows (curves); returns the sweep for the download."""
    cost = mech.attention_cost(n, n, d_k, d_h)
    st.dataframe(pd.DataFrame({
        ui.t("mechanics.col_method"): [ui.t("mechanics.dot"), ui.t("mechanics.additive")],
        ui.t("mechanics.col_macs"): [cost["dot"]["macs"], cost["additive"]["macs"]],
        ui.t("mechanics.col_tanh"): [0, cost["additive"]["tanh"]],
        ui.t("mechanics.col_memory"): [cost["dot"]["memory"], cost["additive"]["memory"]]}),
        hide_index=True, width="stretch")
    sweep = mech.cost_sweep(d_k, d_h)
    ui.plot(figures.cost_curves(sweep.n, {ui.t("mechanics.dot"): (sweep.dot_macs, sweep.dot_memory),
                                          ui.t("mechanics.additive"): (sweep.additive_macs, sweep.additive_memory)},
                                ui.t("mechanics.fig_cost", d_k=d_k, d_h=d_h), "N", ui.t("mechanics.col_macs"),
                                ui.t("mechanics.col_memory")), key="cost")
    return sweep


# ---------------------------------------------------------------- page
section = ui.radio(ui.t("mechanics.section"), SECTIONS, "section", format_func=lambda s: ui.t(f"mechanics.sec_{s}"))
st.divider()
{"steps": section_steps, "masks": section_masks, "variants": section_variants, "cross": section_cross,
 "additive": section_additive}[section]()
