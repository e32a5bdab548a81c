"""Anatomy: everything in a Transformer block that is not attention, and the path from tokens to the next token."""
from functools import partial

import numpy as np
import pandas as pd
import streamlit as st

from app_pages import _ui as ui
from app_pages._ui import anatomy as cached
from app_pages._ui.anatomy import figures, matrix_heatmap
from viz_core.lessons import blocks
from viz_core.io import export
from viz_core.lessons.anatomy import SHARING, readable_count
from viz_core.errors import InputError

ui.setup("anatomy")
t = ui.t
SECTIONS = ("norms", "placement", "ffn", "dropout", "smoothing", "path")


def _formulas(*tex: str) -> None:
    """Formulas side by side on a wide screen, one under the other on a narrow one (a long line would be cut)."""
    for col, formula in zip(st.columns(len(tex)), tex):
        with col:
            ui.latex(formula)


def _fmt(x: float) -> str:
    return f"{x:.3g}" if abs(x) >= 1e-3 or x == 0 else f"{x:.2e}"


# ================================================================ 1. norms
def _norm_controls() -> dict:
    """The batch's shape in view; where the pads sit, γ and β in a section drawn only while open (closed, they hold
    their values: every control drawn costs the browser time on each visit to the page)."""
    c1, c2, c3, c4 = st.columns(4)
    b = ui.slider(t("anatomy.batch"), 1, 6, "nb", 3, container=c1, help=t("anatomy.batch_help"))
    n = ui.slider(t("anatomy.seq_len"), 1, 8, "nn", 4, container=c2)
    d = ui.slider(t("anatomy.d_model"), 2, 16, "nd", 6, container=c3, help=t("anatomy.d_norm_help"))
    pads = 0
    if n > 1:
        pads = ui.slider(t("anatomy.pads"), 0, n - 1, "pads", min(1, n - 1), container=c4, help=t("anatomy.pads_help"))
    opened, box = ui.fold(t("anatomy.norm_more"), "nmore")
    c5, c6, c7 = box.columns(3) if opened else (ui.HIDDEN,) * 3
    side = ui.radio(t("anatomy.pad_side"), ["end", "start"], "side", container=c5,
                    format_func=lambda s: t(f"anatomy.side_{s}"))
    gamma = ui.slider(t("anatomy.gamma"), -2.0, 3.0, "gamma", 1.0, step=0.1, container=c6)
    beta = ui.slider(t("anatomy.beta"), -2.0, 2.0, "beta", 0.0, step=0.1, container=c7)
    return dict(batch=b, seq_len=n, d_model=d, n_pad=pads, pad_side=side, gamma=gamma, beta=beta)


def _norm_grids(res: dict, p: dict) -> None:
    valid = res["valid"]
    rows = [t("anatomy.row_label", s=b, t=i) + ("" if valid[b, i] else t("anatomy.pad_suffix"))
            for b in range(p["batch"]) for i in range(p["seq_len"])]
    cols = [f"f{j}" for j in range(p["d_model"])]
    common = dict(x_title=t("anatomy.feature_axis"), y_title=t("anatomy.token_axis"), value_name=t("anatomy.value"))
    grids = [("x", res["x"], True, t("anatomy.grid_input"), t("anatomy.note_input")),
             ("layer", res["out"]["layer"], True, "LayerNorm", t("anatomy.note_layer")),
             ("batch", res["out"]["batch"], False, "BatchNorm", t("anatomy.note_batch")),
             ("rms", res["out"]["rms"], True, "RMSNorm", t("anatomy.note_rms"))]
    for i in range(0, 4, 2):
        for col, (key, y, over_rows, title, note) in zip(st.columns(2), grids[i:i + 2]):
            with col:
                ui.plot(figures.norm_grid_figure(y, valid, rows, cols, over_rows=over_rows, group=0, title=title,
                                               note=note, **common), key=f"norm_grid_{key}")


def _norm_checks(res: dict, p: dict) -> None:
    """The four checks (ours against torch, the notes' variant, and what pads and batch mates do to BatchNorm), each
    with what it measures, then what the settings show: one list in one element. On a phone what a number means is
    in view, not behind a help icon, and the browser draws one element where four metrics and their help took it
    longer on every visit."""
    c = res["checks"]
    checks = [(t(f"anatomy.m_{k}"), _fmt(c[key]), t(f"anatomy.m_{k}_help"))
              for k, key in (("torch", "torch_max_diff"), ("std", "std_max_diff"), ("pad", "bn_pad_shift"),
                             ("batch", "bn_batch_shift"))]
    parts = ["\n".join(t("anatomy.check_line", label=label, value=value, meaning=meaning)
                       for label, value, meaning in checks),
             t("anatomy.std_explain", ratio=f"{c['std_ratio']:.4f}", pct=f"{100 * (1 - c['std_ratio']):.1f}",
               d=p["d_model"])]
    if p["n_pad"]:
        parts.append(t("anatomy.pad_explain", shift=_fmt(c["bn_pad_shift"])))
    ui.prose("\n\n".join(parts))
    if c["single_token"]:
        st.warning(t("anatomy.single_token"))
    elif p["batch"] == 1:
        st.info(t("anatomy.batch_one"))


def _norm_stats(res: dict) -> None:
    names = {"x": t("anatomy.grid_input"), "layer": "LayerNorm", "batch": "BatchNorm", "rms": "RMSNorm",
             "std_variant": t("anatomy.std_variant")}
    arrays = {"x": res["x"], **res["out"]}
    stats = {names[k]: blocks.norm_statistics(arrays[k], res["valid"]) for k in names}
    fig = figures.norm_stats_figure(
        stats, panel_titles=[t(f"anatomy.panel_{k}") for k in ("token_mean", "token_std", "feature_mean",
                                                                 "feature_std")],
        token_title=t("anatomy.real_token_axis"), feature_title=t("anatomy.feature_axis"),
        value_title=t("anatomy.value"))
    ui.plot(fig, key="norm_stats")
    st.caption(t("anatomy.stats_caption"))


def _std_variant(d_model: int) -> None:
    """The notes' LayerNorm (unbiased std, epsilon added to the std) against torch's, as epsilon grows."""
    _formulas(r"\gamma\odot\frac{x-\mu}{s+\epsilon}+\beta",
              r"s=\sqrt{\tfrac{1}{D-1}\textstyle\sum_j(x_j-\mu)^2}=\sigma\sqrt{\tfrac{D}{D-1}}")
    curve = cached.eps_curve(d_model)
    ui.plot(figures.eps_figure(curve, names={"layer": "LayerNorm (torch)", "std_variant": t("anatomy.std_variant")},
                             title=t("anatomy.eps_title", d=d_model), x_title=t("anatomy.eps_x"),
                             y_title=t("anatomy.eps_y")), key="eps_fig")
    st.caption(t("anatomy.eps_caption"))


def section_norms() -> None:
    ui.prose(ui.glossed(t("anatomy.norms_intro")))
    # the two norms of a row (left), the statistics they use and the norm of a column (right): two formulas one
    # under the other in each display, one element each for the browser to draw
    _formulas(r"\begin{gathered}\text{LN}(x)=\gamma\odot\frac{x-\mu}{\sqrt{\sigma^2+\epsilon}}+\beta \\[14pt] "
              r"\text{RMS}(x)=\gamma\odot\frac{x}{\sqrt{\tfrac1D\sum_j x_j^2+\epsilon}}\end{gathered}",
              r"\begin{gathered}\mu=\tfrac1D\textstyle\sum_j x_j,\ \ \sigma^2=\tfrac1D\textstyle\sum_j(x_j-\mu)^2"
              r" \\[14pt] \text{BN}(x_{bn,j})=\gamma_j\frac{x_{bn,j}-\mu_j}{\sqrt{\sigma_j^2+\epsilon}}+\beta_j"
              r"\end{gathered}")
    p = _norm_controls()
    try:
        res = cached.compare_norms(**p)
    except InputError as e:
        ui.show_error(e)
        return
    _norm_grids(res, p)
    _norm_checks(res, p)
    opened, box = ui.fold(t("anatomy.stats_fold"), "nstats")  # drawn only while open
    if opened:
        with box:
            _norm_stats(res)
    opened, box = ui.fold(t("anatomy.std_title"), "nstd")
    if opened:
        with box:
            _std_variant(p["d_model"])
    ui.download(t("anatomy.download_npz"), partial(export.npz_bytes, x=res["x"], valid=res["valid"], **res["out"]),
                "norms.npz", "application/octet-stream", key="dl_norms")


# ================================================================ 2. residuals and norm placement
def section_placement() -> None:
    ui.prose(ui.glossed(t("anatomy.placement_intro")))
    _formulas(r"\text{post: } x_{l+1}=\text{LN}\big(x_l+F(x_l)\big)",
              r"\text{pre: } x_{l+1}=x_l+F\big(\text{LN}(x_l)\big)")
    depth = ui.slider(t("anatomy.depth"), 2, 48, "depth", 12, help=t("anatomy.depth_help"))
    res = cached.norm_placement(depth)
    names = {"pre": t("anatomy.pre"), "post": t("anatomy.post")}
    ui.plot(figures.placement_figure(res, names=names, panel_titles=[t("anatomy.grad_panel"), t("anatomy.act_panel")],
                                   layer_title=t("anatomy.layer_axis"), grad_title=t("anatomy.grad_axis"),
                                   act_title=t("anatomy.act_axis")), key="placement_fig")
    c1, c2, c3 = st.columns(3)
    c1.metric(t("anatomy.m_pre_act"), f"{res['pre_act'][-1]:.2f}", help=t("anatomy.m_pre_act_help"))
    c2.metric(t("anatomy.m_last_grad_pre"), f"{res['pre_grad'][-1]:.3f}")
    c3.metric(t("anatomy.m_last_grad_post"), f"{res['post_grad'][-1]:.3f}")
    st.markdown(t("anatomy.placement_explain"))
    st.caption(t("anatomy.placement_setup"))
    table = export.columns_csv({k: res[k] for k in ("layer", "pre_grad", "post_grad", "pre_act", "post_act")})
    ui.download(t("anatomy.download_csv"), table, f"norm_placement_{depth}.csv", "text/csv",
                key="dl_placement")


# ================================================================ 3. FFN
def section_ffn() -> None:
    ui.prose(ui.glossed(t("anatomy.ffn_intro")))
    _formulas(r"\text{FFN}(x)=\max(0,\ xW_1+b_1)\,W_2+b_2",
              r"W_1\in\mathbb{R}^{d_{model}\times d_{ff}},\ \ d_{ff}=4\,d_{model}")
    c1, c2, c3 = st.columns(3)
    d = ui.selectbox(t("anatomy.d_model"), [4, 8, 16, 32, 64], "fd", 8, container=c1)
    mult = ui.slider(t("anatomy.mult"), 1, 8, "mult", 4, container=c2)
    act = ui.radio(t("anatomy.activation"), ["relu", "gelu"], "act", container=c3,
                   format_func={"relu": "ReLU", "gelu": "GELU"}.get)
    x, curves = blocks.activation_curves()
    ui.plot(figures.activation_figure(x, curves, title=t("anatomy.act_title"), x_title="x", y_title=t("anatomy.value")),
            key="act_fig")
    demo = cached.ffn_demo(d, mult, act)
    rows = [t("anatomy.token_n", n=i) for i in range(demo["hidden"].shape[0])]
    ui.plot(matrix_heatmap(demo["hidden"], rows, [str(j) for j in range(demo["hidden"].shape[1])],
                           title=t("anatomy.hidden_title", d_ff=mult * d), x_title=t("anatomy.hidden_axis"),
                           y_title=t("anatomy.token_axis"), value_name=t("anatomy.value"), signed=True,
                           value_format=".3f"), key="hidden_fig")
    m1, m2 = st.columns(2)
    m1.metric(t("anatomy.m_zero"), f"{100 * demo['zero_share']:.0f}%", help=t("anatomy.m_zero_help"))
    m2.metric(t("anatomy.m_positionwise"), _fmt(demo["positionwise_diff"]), help=t("anatomy.m_positionwise_help"))
    _ffn_share(d, mult)


def _ffn_share(d: int, mult: int) -> None:
    rows = {t("anatomy.enc_block"): blocks.block_parameter_split(d, mult * d),
            t("anatomy.dec_block"): blocks.block_parameter_split(d, mult * d, decoder=True),
            t("anatomy.base_enc_block"): blocks.block_parameter_split(512, 2048),
            t("anatomy.base_dec_block"): blocks.block_parameter_split(512, 2048, decoder=True)}
    parts = {k: t(f"anatomy.part_{k}") for k in ("attention", "ffn", "norm")}
    ui.plot(figures.share_figure(rows, parts, title=t("anatomy.share_title"), x_title=t("anatomy.share_axis")),
            key="share_fig")
    _formulas(r"\frac{\text{FFN}}{\text{attn}+\text{FFN}}\approx\frac{2\,d\,d_{ff}}{4d^2+2\,d\,d_{ff}}",
              r"=\frac{8d^2}{12d^2}=\frac23\quad (d_{ff}=4d)")
    frame = pd.DataFrame(rows).T.rename(columns=parts)
    st.dataframe(frame, width="stretch")
    table = export.csv_text(["", *parts.values()], ([name, *(split[k] for k in parts)] for name, split in rows.items()))
    ui.download(t("anatomy.download_csv"), table, "block_parameters.csv", "text/csv", key="dl_share")


# ================================================================ 4. dropout
PLACES = ("embedding", "attention", "sublayer")


def _dropout_flow(place: str) -> None:
    boxes = [("anatomy.flow_embed", None), ("anatomy.flow_pe", None), ("anatomy.flow_drop_embedding", "embedding"),
             ("anatomy.flow_softmax", None), ("anatomy.flow_drop_attention", "attention"), ("anatomy.flow_v", None),
             ("anatomy.flow_drop_sublayer", "sublayer"), ("anatomy.flow_addnorm", None), ("anatomy.flow_ffn", None),
             ("anatomy.flow_drop_sublayer", "sublayer"), ("anatomy.flow_addnorm", None)]
    fig = figures.flow_figure([t(k) for k, _ in boxes], [p == place for _, p in boxes],
                            title=t("anatomy.flow_title"), box_height=40)
    ui.plot(fig, key="dropout_flow")


def section_dropout() -> None:
    ui.prose(ui.glossed(t("anatomy.dropout_intro")))
    _formulas(r"y=\frac{m\odot x}{1-p},\quad m_i\sim\text{Bernoulli}(1-p)",
              r"\mathbb{E}[y]=x;\qquad \text{eval: } y=x")
    c1, c2, c3, c4 = st.columns(4)
    p = ui.slider(t("anatomy.p"), 0.0, 0.9, "p", 0.1, step=0.05, container=c1, help=t("anatomy.p_help"))
    place = ui.radio(t("anatomy.place"), PLACES, "place", container=c2, horizontal=False,
                     format_func=lambda s: t(f"anatomy.place_{s}"))
    training = ui.checkbox(t("anatomy.training"), "train", True, container=c3, toggle=True)
    seed = ui.number(t("anatomy.seed"), 0, 9999, "dseed", 0, container=c4)
    col_flow, col_maps = st.columns([1, 2])
    with col_flow:
        _dropout_flow(place)
    with col_maps:
        _dropout_maps(cached.dropout_places(p, training, seed)[place], place, p, training)
    if p > 0:
        stats = cached.dropout_statistics(p)
        names = {"ours_mean": t("anatomy.ours"), "torch_mean": "torch.nn.Dropout"}
        ui.plot(figures.dropout_stats_figure(stats, names=names, title=t("anatomy.drop_stats_title"),
                                           x_title=t("anatomy.drop_stats_x"), y_title=t("anatomy.count")),
                key="drop_stats")
        st.caption(t("anatomy.drop_stats_caption", ours=f"{stats['ours_keep'].mean():.4f}",
                     ref=f"{stats['torch_keep'].mean():.4f}", keep=f"{1 - p:.2f}"))


def _dropout_maps(d: dict, place: str, p: float, training: bool) -> None:
    n_rows, n_cols = d["before"].shape
    rows = [t("anatomy.token_n", n=i) for i in range(n_rows)]
    cols = rows if place == "attention" else [f"f{j}" for j in range(n_cols)]
    kw = dict(x_title=t("anatomy.key_axis") if place == "attention" else t("anatomy.feature_axis"),
              y_title=t("anatomy.query_axis") if place == "attention" else t("anatomy.token_axis"),
              value_name=t("anatomy.value"), signed=place != "attention", value_format=".3f")
    if place == "attention":
        kw["zmax"] = float(max(1.0, d["after"].max()))
    else:  # one colour scale for before and after, so the 1/(1 - p) boost is visible
        bound = float(max(np.abs(d["before"]).max(), np.abs(d["after"]).max()))
        kw.update(zmin=-bound, zmax=bound)
    ui.plot(matrix_heatmap(d["before"], rows, cols, title=t("anatomy.before"), **kw), key="drop_before")
    ui.plot(matrix_heatmap(d["after"], rows, cols, mask=~d["keep"], title=t("anatomy.after"), **kw),
            key="drop_after")
    kept = float(d["keep"].mean())
    msg = t("anatomy.drop_summary", kept=f"{100 * kept:.0f}", scale=f"{1 / (1 - p):.3f}") if training and p > 0 \
        else t("anatomy.drop_eval")
    st.markdown(msg)
    if place == "attention" and training and p > 0:
        sums = ", ".join(f"{s:.2f}" for s in d["after"].sum(1))
        st.caption(t("anatomy.row_sums", sums=sums))
    ui.download(t("anatomy.download_npz"), partial(export.npz_bytes, **d), f"dropout_{place}.npz",
                "application/octet-stream", key="dl_drop")


# ================================================================ 5. label smoothing
def section_smoothing() -> None:
    ui.prose(ui.glossed(t("anatomy.smoothing_intro")))
    _formulas(r"q_k=(1-\epsilon)\,[k=y]+\frac{\epsilon}{K}",
              r"\mathcal{L}=-\sum_k q_k\log p_k",
              r"=-\sum_k q_k\,\big(z_k-\log\textstyle\sum_j e^{z_j}\big)")
    c1, c2 = st.columns(2)
    eps = ui.slider(t("anatomy.eps"), 0.0, 1.0, "eps", 0.1, step=0.01, container=c1, help=t("anatomy.eps_help"))
    k = ui.slider(t("anatomy.k"), 2, 100, "k", 10, container=c2)
    q = blocks.target_distribution(k, eps)
    c_star = blocks.optimal_confidence(k, eps)
    left, right = st.columns(2)
    with left:
        ui.plot(figures.target_figure(q, title=t("anatomy.target_title", k=k, eps=eps), x_title=t("anatomy.class_axis"),
                                    y_title=t("anatomy.target_axis")), key="target_fig")
    with right:
        c = np.linspace(1.0 / k, 1.0, 400)
        losses = {t("anatomy.no_smoothing"): blocks.loss_vs_confidence(k, 0.0, c),
                  t("anatomy.with_smoothing", eps=eps): blocks.loss_vs_confidence(k, eps, c)}
        ui.plot(figures.confidence_figure(c, losses, c_star, star_label=t("anatomy.c_star", c=f"{c_star:.3f}"),
                                        title=t("anatomy.conf_title"), x_title=t("anatomy.conf_axis"),
                                        y_title=t("anatomy.loss_axis")), key="conf_fig")
    ours, ref = cached.smoothing_check(k, eps)
    st.markdown(t("anatomy.smoothing_explain", c=f"{c_star:.3f}", ours=f"{ours:.6f}", ref=f"{ref:.6f}"))
    _margin_plot(k, eps)


def _margin_plot(k: int, eps: float) -> None:
    res = blocks.loss_vs_margin(k, eps, np.linspace(-5, 130, 271))
    names = {"safe": t("anatomy.safe"), "naive": t("anatomy.naive")}
    ui.plot(figures.margin_figure(res, names=names, inf_label=t("anatomy.inf_label"), title=t("anatomy.margin_title"),
                                x_title=t("anatomy.margin_axis"), y_title=t("anatomy.loss_axis")), key="margin_fig")
    bad = ~np.isfinite(res["naive"])
    first = f"{res['margin'][bad][0]:.1f}" if bad.any() else "-"
    st.markdown(t("anatomy.margin_explain", m=first))
    ui.download(t("anatomy.download_csv"), export.columns_csv(res), "label_smoothing_margin.csv", "text/csv",
                key="dl_margin")


# ================================================================ 6. tokens to the next token
def _path_controls() -> dict:
    text = ui.text(t("anatomy.text"), "prompt", "哈基咪 南北", max_chars=200, help=t("anatomy.text_help"))
    c1, c2, c3 = st.columns(3)
    vocab = ui.selectbox(t("anatomy.vocab"), [200, 1000, 5000, 37000], "vocab", 1000, container=c1)
    d = ui.selectbox(t("anatomy.d_model"), [4, 8, 16, 32, 64], "pd", 4, container=c2)
    layers = ui.slider(t("anatomy.layers"), 0, 6, "layers", 2, container=c3)
    c4, c5, c6, c7 = st.columns(4)
    temp = ui.slider(t("anatomy.temperature"), 0.0, 3.0, "temp", 1.0, step=0.05, container=c4,
                     help=t("anatomy.temperature_help"))
    top_k = ui.number(t("anatomy.top_k"), 0, vocab, "top_k", 0, container=c5, help=t("anatomy.top_k_help"))
    top_p = ui.slider(t("anatomy.top_p"), 0.05, 1.0, "top_p", 1.0, step=0.05, container=c6,
                      help=t("anatomy.top_p_help"))
    seed = ui.number(t("anatomy.sample_seed"), 0, 9999, "sseed", 0, container=c7)
    return dict(text=text, vocab_size=vocab, d_model=d, n_layers=layers, temperature=temp, top_k=int(top_k),
                top_p=top_p, sample_seed=int(seed))


def _step_rows(r, text: str) -> list[tuple[str, str, tuple, str]]:
    """(step label, formula, shape, preview) for the table and the flow figure."""
    names = {"ids": ("anatomy.step_ids", "x_i"), "embedding": ("anatomy.step_embedding", "E[x_i]"),
             "scaled": ("anatomy.step_scaled", "E[x_i]·√d"), "positions": ("anatomy.step_positions", "PE"),
             "sum": ("anatomy.step_sum", "E[x_i]·√d + PE"), "logits": ("anatomy.step_logits", "h Eᵀ"),
             "softmax": ("anatomy.step_softmax", "softmax"), "last": ("anatomy.step_last", "z_N")}
    rows = [(t("anatomy.step_text"), "", None, text),
            (t("anatomy.step_tokens"), "", (len(r.tokens),), " | ".join(r.tokens))]
    for name, shape, values in r.steps:
        key, formula = names.get(name, ("anatomy.step_block", "Block"))
        label = t(key, i=name[5:]) if key == "anatomy.step_block" else t(key)
        preview = " ".join(f"{v:.3f}" if isinstance(v, float) else str(v) for v in values.reshape(-1)[:6].tolist())
        rows.append((label, formula, shape, preview + (" …" if values.size > 6 else "")))
    rows.append((t("anatomy.step_filtered"), "T, top-k, top-p", r.filtered.shape, ""))
    rows.append((t("anatomy.step_next"), "~ p", (), f"{r.vocab[r.next_id]} ({r.next_id})"))
    return rows


def section_path() -> None:
    ui.prose(ui.glossed(t("anatomy.path_intro")))
    _formulas(r"h_0=E[x]\sqrt{d_{model}}+PE,\quad h_l=\text{Block}_l(h_{l-1})",
              r"p(x_{N+1}\mid x_{\le N})=\text{softmax}\!\big(h_L[N]\,E^\top/T\big)")
    p = _path_controls()
    try:
        r = cached.next_token_path(**p)
    except InputError as e:
        ui.show_error(e)
        _parameter_section()
        return
    rows = _step_rows(r, p["text"])
    left, right = st.columns([1, 2])
    with left:
        boxes = [f"{lab}  {'' if shape is None else shape}" for lab, _, shape, _ in rows]
        boxes[-1] = f"{rows[-1][0]}{t('common.colon')}{r.vocab[r.next_id]}"
        ui.plot(figures.flow_figure(boxes, [i == len(rows) - 1 for i in range(len(rows))],
                                  title=t("anatomy.path_flow_title"), box_height=38), key="path_flow")
    with right:
        frame = pd.DataFrame([(lab, f, "" if s is None else str(s), v) for lab, f, s, v in rows],
                             columns=[t("anatomy.col_step"), t("anatomy.col_op"), t("anatomy.col_shape"),
                                      t("anatomy.col_values")])
        st.dataframe(frame, width="stretch", hide_index=True, height=38 + 35 * len(frame))
        st.caption(t("anatomy.path_caption", v=p["vocab_size"], d=p["d_model"], n=len(r.tokens),
                     params=f"{r.n_params:,}"))
    _distribution(r, p)
    _parameter_section()


def _distribution(r, p: dict) -> None:
    fig = figures.distribution_figure(r.probs, r.filtered, r.vocab, r.next_id,
                                    names=[t("anatomy.model_p"), t("anatomy.filtered_p")], top_n=20,
                                    title=t("anatomy.dist_title"), x_title=t("anatomy.token_id_axis"),
                                    y_title=t("anatomy.prob_axis"))
    ui.plot(fig, key="dist_fig")
    kept = int((r.filtered > 0).sum())
    st.markdown(t("anatomy.sampled", tok=r.vocab[r.next_id], id=r.next_id, kept=kept, v=len(r.vocab),
                  p=f"{r.filtered[r.next_id]:.4f}"))
    order = np.argsort(-r.filtered)[:kept][:1000]
    table = export.columns_csv({"id": order, "token": [r.vocab[i] for i in order], "p_model": r.probs[order],
                                "p_filtered": r.filtered[order]})
    ui.download(t("anatomy.download_csv"), table, "next_token.csv", "text/csv", key="dl_dist")


def _parameter_section() -> None:
    st.subheader(t("anatomy.params_title"))
    ui.prose(ui.glossed(t("anatomy.params_intro")))
    c1, c2, c3, c4 = st.columns(4)
    vocab = ui.number(t("anatomy.vocab"), 1, 1_000_000, "pv", 37000, container=c1)
    d = ui.number(t("anatomy.d_model"), 1, 8192, "pdm", 512, container=c2)
    heads = ui.number(t("anatomy.heads"), 1, 128, "ph", 8, container=c3, help=t("anatomy.heads_help"))
    d_ff = ui.number(t("anatomy.d_ff"), 1, 65536, "pff", 2048, container=c4)
    c5, c6, c7 = st.columns([1, 1, 2])
    n_enc = ui.number(t("anatomy.n_enc"), 0, 48, "penc", 6, container=c5)
    n_dec = ui.number(t("anatomy.n_dec"), 0, 48, "pdec", 6, container=c6)
    sharing = ui.radio(t("anatomy.sharing"), SHARING, "share", container=c7,
                       format_func=lambda s: t(f"anatomy.share_{s}"))
    try:
        parts, ref = cached.parameter_counts(int(vocab), int(d), int(heads), int(d_ff), int(n_enc), int(n_dec),
                                             sharing)
    except InputError as e:
        ui.show_error(e)
        return
    total = sum(parts.values())
    m1, m2 = st.columns(2)
    m1.metric(t("anatomy.total"), f"{total:,}", f"≈ {readable_count(total)}", delta_color="off", delta_arrow="off")
    m2.metric(t("anatomy.torch_total"), f"{ref:,}", t("anatomy.match") if ref == total else t("anatomy.mismatch"),
              delta_color="normal" if ref == total else "inverse", delta_arrow="off")
    labels = {t(f"anatomy.pp_{k}"): v for k, v in parts.items()}
    ui.plot(figures.parameter_figure(labels, title=t("anatomy.params_fig_title"), x_title=t("anatomy.params_axis")),
            key="params_fig")
    st.caption(t("anatomy.params_caption"))
    table = export.columns_csv({"part": list(parts), "label": list(labels), "parameters": list(parts.values())})
    ui.download(t("anatomy.download_csv"), table, "parameters.csv", "text/csv", key="dl_params")


# ================================================================ page
section = ui.radio(t("anatomy.section"), SECTIONS, "section", format_func=lambda s: t(f"anatomy.sec_{s}"),
                   label_visibility="collapsed")
{"norms": section_norms, "placement": section_placement, "ffn": section_ffn, "dropout": section_dropout,
 "smoothing": section_smoothing, "path": section_path}[section]()
