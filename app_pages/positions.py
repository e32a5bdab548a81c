"""Positions: the sinusoidal positional encoding, what its geometry buys, and how it compares with learned and
rotary encodings. Eight parts, one drawn at a time (the choice lives in the URL)."""
from functools import partial

import pandas as pd
import streamlit as st

from app_pages import _ui as ui
from app_pages._ui import positions as cached
from viz_core.io import export
from viz_core.lessons import position_demos as demos
from viz_core.lessons import positional as P
from viz_core.errors import InputError
from viz_core.plots import positions as plots

PARTS = ("heatmap", "waves", "similarity", "relative", "example", "scale", "learned", "order")
NORM_DS = (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)

ui.setup("positions")
figures = ui.SharedFigures(plots)  # the figures, cached by their inputs (shared read-only)


def _npz_button(label_key: str, file_name: str, key: str, **arrays) -> None:
    ui.download(ui.t(label_key), partial(export.npz_bytes, **arrays), file_name, "application/octet-stream", key=key)


def _ranged_slider(label: str, lo: int, hi: int, param: str, default: int, container=st, **kw) -> int:
    """ui.slider whose range depends on other widgets (ui.slider clamps the kept value into the new range)."""
    if hi <= lo:  # a one-value range cannot be a slider
        return lo
    return ui.slider(label, lo, hi, param, min(max(default, lo), hi), container=container, **kw)


# ---------------------------------------------------------------- shared sizes (parts 1-4)
def _sizes() -> tuple[int, int]:
    c1, c2 = st.columns(2)
    max_len = ui.slider(ui.t("positions.max_len"), 0, 1024, "max_len", 64, container=c1,
                        help=ui.t("positions.max_len_help"))
    d_model = ui.slider(ui.t("positions.d_model"), 1, 1024, "d_model", 128, container=c2,
                        help=ui.t("positions.d_model_help"))
    return max_len, d_model


def _thinned_caption(view: demos.TableView) -> None:
    if (len(view.rows), len(view.cols)) != tuple(view.shape):
        st.caption(ui.t("positions.thinned", rows=len(view.rows), cols=len(view.cols), n=view.shape[0],
                        d=view.shape[1]))


# ---------------------------------------------------------------- 1. heatmap
def part_heatmap() -> None:
    ui.prose(ui.glossed(ui.t("positions.heatmap_intro")))
    ui.latex(r"\begin{aligned}PE_{(pos,\,2i)} &= \sin\!\left(pos / 10000^{2i/d_{model}}\right)\\ "
             r"PE_{(pos,\,2i+1)} &= \cos\!\left(pos / 10000^{2i/d_{model}}\right)\end{aligned}")
    max_len, d_model = _sizes()
    if max_len == 0:
        st.info(ui.t("positions.empty_len"))
        return
    view = cached.encoding_view(max_len, d_model)
    ui.plot(figures.encoding_heatmap(view.values, view.rows, view.cols, title=ui.t("positions.heatmap_title"),
                                   x_title=ui.t("positions.dimension"), y_title=ui.t("positions.position"),
                                   value_name=ui.t("positions.value"), max_ticks=10), key="pe_heatmap")
    _thinned_caption(view)
    _npz_button("positions.download_pe", f"sinusoidal_pe_{max_len}x{d_model}.npz", "dl_pe",
                pe=cached.encoding(max_len, d_model))


# ---------------------------------------------------------------- 2. every column a wave
def part_waves() -> None:
    """The table's columns as waves, a part of its own (the same max_len and d_model as the table's): a page's first
    view draws one part's figures and controls, and each costs the browser time on every page switch."""
    max_len, d_model = _sizes()
    if max_len == 0:
        st.info(ui.t("positions.empty_len"))
        return
    _waves(max_len, d_model)


def _dim_name(j: int, d_model: int) -> str:
    i = j // 2
    kind = ui.t("positions.sin") if j % 2 == 0 else ui.t("positions.cos")
    return ui.t("positions.dim_name", j=j, kind=kind, i=i, wl=f"{P.wavelengths(d_model)[i]:.4g}")


def _waves(max_len: int, d_model: int) -> None:
    st.subheader(ui.t("positions.waves_header"))
    st.markdown(ui.t("positions.waves_intro"))
    ui.latex(r"\begin{aligned}\omega_i &= 10000^{-2i/d_{model}}\\ \lambda_i &= 2\pi / \omega_i = "
             r"2\pi \cdot 10000^{2i/d_{model}}\end{aligned}")
    c1, c2 = st.columns(2)
    dim_a = _ranged_slider(ui.t("positions.dim_a"), 0, d_model - 1, "dim_a", 0, container=c1)
    dim_b = _ranged_slider(ui.t("positions.dim_b"), 0, d_model - 1, "dim_b", d_model // 2, container=c2)
    dims = tuple(dict.fromkeys((dim_a, dim_b)))
    w = cached.waves(max_len, d_model, dims)
    ui.plot(figures.waves_figure(w.x_dense, w.dense, w.positions, w.samples, [_dim_name(j, d_model) for j in dims],
                               title=ui.t("positions.waves_title"), x_title=ui.t("positions.position"),
                               y_title=ui.t("positions.value")), key="waves")
    st.caption(ui.t("positions.waves_caption"))
    ui.plot(figures.wavelength_figure(P.wavelengths(d_model), [j // 2 for j in dims],
                                    title=ui.t("positions.wavelength_title"), x_title=ui.t("positions.pair"),
                                    y_title=ui.t("positions.wavelength"), name=ui.t("positions.all_pairs"),
                                    highlight_name=ui.t("positions.chosen_pairs")), key="wavelengths")
    st.caption(ui.t("positions.wavelength_caption", lo=f"{P.wavelengths(d_model)[0]:.3f}",
                    hi=f"{P.wavelengths(d_model)[-1]:,.0f}"))


# ---------------------------------------------------------------- 3. similarity
def part_similarity() -> None:
    st.markdown(ui.t("positions.sim_intro"))
    ui.latex(r"\begin{aligned}PE(p)\cdot PE(q) &= \textstyle\sum_i \big[\sin(p\,\omega_i)\sin(q\,\omega_i)\\ "
             r"&\qquad + \cos(p\,\omega_i)\cos(q\,\omega_i)\big]\\ "
             r"&= \textstyle\sum_i \cos\big((p-q)\,\omega_i\big)\end{aligned}")
    max_len, d_model = _sizes()
    if max_len == 0:
        st.info(ui.t("positions.empty_len"))
        return
    cosine = ui.radio(ui.t("positions.measure"), ("dot", "cosine"), "measure",
                      format_func=lambda m: ui.t(f"positions.measure_{m}")) == "cosine"
    v = cached.similarity_view(max_len, d_model, cosine)
    value_name = ui.t("positions.measure_cosine") if cosine else ui.t("positions.measure_dot")
    ui.plot(figures.similarity_heatmap(v.sim, v.idx, title=ui.t("positions.sim_title"),
                                     axis_title=ui.t("positions.position"), value_name=value_name, max_ticks=10),
            key="sim")
    if len(v.idx) < max_len:
        st.caption(ui.t("positions.sim_thinned", rows=len(v.idx), n=max_len))
    st.metric(ui.t("positions.deviation"), f"{v.deviation:.2e}", help=ui.t("positions.deviation_help"))
    if d_model % 2:
        st.info(ui.t("positions.odd_similarity", d=d_model))
    _similarity_profile(v, max_len, cosine, value_name)
    _npz_button("positions.download_sim", f"pe_similarity_{max_len}x{d_model}.npz", "dl_sim",
                positions=v.idx, similarity=v.sim)


def _similarity_profile(v: demos.SimilarityView, max_len: int, cosine: bool, value_name: str) -> None:
    series = {ui.t("positions.from_pos", p=0): v.profile_0, ui.t("positions.from_pos", p=v.mid): v.profile_mid}
    if not cosine:
        series[ui.t("positions.theory")] = v.theory
    ui.plot(figures.lines_figure(v.offsets, series, title=ui.t("positions.profile_title"),
                               x_title=ui.t("positions.offset"), y_title=value_name, markers=max_len <= 80,
                               dash={ui.t("positions.theory"): "dot", ui.t("positions.from_pos", p=v.mid): "dash"}),
            key="sim_profile")
    st.caption(ui.t("positions.profile_caption"))


# ---------------------------------------------------------------- 4. relative positions
def part_relative() -> None:
    st.markdown(ui.t("positions.rel_intro"))
    ui.latex(r"\begin{pmatrix}\sin((pos+k)\,\omega_i)\\ \cos((pos+k)\,\omega_i)\end{pmatrix} = R(k\,\omega_i)"
             r"\begin{pmatrix}\sin(pos\,\omega_i)\\ \cos(pos\,\omega_i)\end{pmatrix}")
    ui.latex(r"R(\theta) = \begin{pmatrix}\cos\theta & \sin\theta\\ -\sin\theta & \cos\theta\end{pmatrix}")
    max_len, d_model = _sizes()
    if max_len < 2 or d_model < 2:
        st.info(ui.t("positions.rel_too_small"))
        return
    c1, c2, c3 = st.columns(3)
    k = _ranged_slider(ui.t("positions.shift"), 1, min(max_len - 1, 256), "shift", 4, container=c1)
    pair = _ranged_slider(ui.t("positions.pair_pick"), 0, d_model // 2 - 1, "pair", 0, container=c2)
    pos = _ranged_slider(ui.t("positions.pos_pick"), 0, max_len - 1 - k, "pos", 0, container=c3)
    v = cached.rotation_view(max_len, d_model, k, pair)
    left, right = st.columns(2)
    with left:
        ui.plot(figures.circle_figure(v.pair_values, pos, k, title=ui.t("positions.circle_title", i=pair),
                                    x_title=ui.t("positions.circle_x", j=2 * pair),
                                    y_title=ui.t("positions.circle_y", j=2 * pair + 1),
                                    all_name=ui.t("positions.all_positions"), from_name=f"PE({pos})",
                                    to_name=f"PE({pos + k})"), key="circle")
        st.metric(ui.t("positions.angle", i=pair), f"{v.angle_deg:.3f}°", help=ui.t("positions.angle_help"))
    with right:
        ui.plot(figures.rotation_heatmap(v.corner, title=ui.t("positions.rot_title", k=k, c=len(v.corner)),
                                       axis_title=ui.t("positions.dimension"), value_name=ui.t("positions.value")),
                key="rotation")
    _rotation_error(v, d_model, k)
    _npz_button("positions.download_rel", f"pe_rotation_k{k}_pair{pair}.npz", "dl_rel", shift=k, pair=pair,
                pair_values=v.pair_values, rotation_corner=v.corner, max_error_per_dimension=v.dim_errors)


def _rotation_error(v: demos.RotationView, d_model: int, k: int) -> None:
    st.metric(ui.t("positions.max_error"), f"{v.max_error:.2e}", help=ui.t("positions.max_error_help"))
    ui.plot(figures.error_figure(v.dim_errors, title=ui.t("positions.error_title", k=k),
                               x_title=ui.t("positions.dimension"), y_title=ui.t("positions.error")), key="rot_err")
    if d_model % 2:
        st.info(ui.t("positions.odd_rotation", d=d_model, err=f"{v.dim_errors[-1]:.2e}"))
    st.caption(ui.t("positions.rel_caption"))


# ---------------------------------------------------------------- 5. worked example
def part_example() -> None:
    st.markdown(ui.t("positions.example_intro"))
    ui.latex(r"x_{pos} = e_{token} + PE(pos)")
    text = ui.text(ui.t("positions.embedding"), "vec", "1.0, 0.5, 0.8, 0.3", max_chars=400,
                   help=ui.t("positions.embedding_help"))
    c1, c2, c3 = st.columns(3)
    p0 = ui.slider(ui.t("positions.first_pos"), 0, 511, "p0", 0, container=c1)
    p1 = ui.slider(ui.t("positions.second_pos"), 0, 511, "p1", 4, container=c2)
    scale = ui.checkbox(ui.t("positions.scale_first"), "scale", False, container=c3)
    try:
        ex = P.worked_example(P.parse_vector(text), (p0, p1), scale=scale)
    except InputError as e:
        ui.show_error(e)
        return
    names = [ui.t("positions.row_e"), f"PE({p0})", ui.t("positions.row_sum", p=p0), f"PE({p1})",
             ui.t("positions.row_sum", p=p1)]
    rows = ex.rows  # (5, d)
    ui.plot(figures.worked_heatmap(rows, names, title=ui.t("positions.example_title"),
                                 x_title=ui.t("positions.dimension"), y_title="", value_name=ui.t("positions.value")),
            key="example")
    dims = [str(j) for j in range(rows.shape[1])]
    st.dataframe(pd.DataFrame(rows, index=names, columns=dims).round(4))
    ui.download(ui.t("positions.download_example"),
                export.csv_text(["", *dims], ([name, *row] for name, row in zip(names, rows))),
                f"pe_example_{p0}_{p1}.csv", "text/csv", key="dl_example")
    st.metric(ui.t("positions.example_cos", p0=p0, p1=p1), f"{ex.cosine:.4f}", help=ui.t("positions.example_cos_help"))
    st.caption(ui.t("positions.example_caption"))


# ---------------------------------------------------------------- 6. sqrt(d_model)
def part_scale() -> None:
    ui.prose(ui.glossed(ui.t("positions.scale_intro")))
    ui.latex(r"\begin{aligned}e_j \sim \mathcal{N}\!\left(0, \tfrac{1}{d_{model}}\right) &\Rightarrow "
             r"\lVert e\rVert \approx 1\\ \lVert \sqrt{d_{model}}\, e\rVert &\approx \sqrt{d_{model}}\\ "
             r"\lVert PE(pos)\rVert &= \sqrt{d_{model}/2}\end{aligned}")
    s = cached.norm_study(NORM_DS)
    d_name = {"raw": ui.t("positions.norm_token"), "scaled": ui.t("positions.norm_scaled"),
              "pe": ui.t("positions.norm_pe")}
    left, right = st.columns(2)
    with left:
        ui.plot(figures.lines_figure(s.d_models, {d_name["raw"]: s.token_norm, d_name["scaled"]: s.scaled_norm,
                                                d_name["pe"]: s.pe_norm},
                                   title=ui.t("positions.norms_title"), x_title=ui.t("positions.d_axis"),
                                   y_title=ui.t("positions.norm"), log_x=True, log_y=True), key="norms")
    with right:
        ui.plot(figures.lines_figure(s.d_models, {ui.t("positions.cos_raw"): s.cos_raw,
                                                ui.t("positions.cos_scaled"): s.cos_scaled},
                                   title=ui.t("positions.cos_title"), x_title=ui.t("positions.d_axis"),
                                   y_title=ui.t("positions.cos_axis"), log_x=True), key="cos_share")
    d = ui.selectbox(ui.t("positions.scale_d"), NORM_DS[3:], "sd", default=512)
    i = list(s.d_models).index(d)
    acc_raw, acc_scaled = cached.nearest_accuracies(NORM_DS[3:])[d]
    cols = st.columns(4)
    cols[0].metric(d_name["raw"], f"{s.token_norm[i]:.3f}")
    cols[1].metric(d_name["scaled"], f"{s.scaled_norm[i]:.2f}")
    cols[2].metric(d_name["pe"], f"{s.pe_norm[i]:.2f}")
    cols[3].metric(ui.t("positions.nearest"), f"{acc_raw:.0%} → {acc_scaled:.0%}", help=ui.t("positions.nearest_help"))
    st.caption(ui.t("positions.scale_caption"))
    _npz_button("positions.download_norms", "embedding_vs_pe_norms.npz", "dl_norms", d_model=s.d_models,
                token_norm=s.token_norm, scaled_norm=s.scaled_norm, pe_norm=s.pe_norm, cos_raw=s.cos_raw,
                cos_scaled=s.cos_scaled)


# ---------------------------------------------------------------- 7. learned vs fixed vs rotary
def part_learned() -> None:
    st.markdown(ui.t("positions.learned_intro"))
    ui.latex(r"\begin{aligned}q_p &= R_p\, q,\quad k_r = R_r\, k\\ q_p\cdot k_r &= q^\top R_p^\top R_r\, k "
             r"= q^\top R_{r-p}\, k\end{aligned}")
    try:
        from app_pages._ui import models  # imported here: loading transformers is only needed for this part

        with st.spinner(ui.t("positions.loading_model")):
            learned = models.position_embeddings()
    except Exception as e:  # noqa: BLE001 - a model that cannot load must not break the page
        ui.show_error(e)
        return
    if learned is None:
        st.info(ui.t("positions.no_learned"))
        return
    n = _ranged_slider(ui.t("positions.n_positions"), 8, int(learned.shape[0]), "n_pos", 128)
    c = cached.comparison(learned, n)
    names = {"learned": ui.t("positions.kind_learned"), "sinusoidal": ui.t("positions.kind_sinusoidal"),
             "rope": ui.t("positions.kind_rope")}
    _comparison_row(c, names, tables=True)
    _comparison_row(c, names, tables=False)
    ui.plot(figures.lines_figure(c.offsets, {names[k]: c.profiles[k] for k in names},
                               title=ui.t("positions.cmp_profile_title"), x_title=ui.t("positions.offset"),
                               y_title=ui.t("positions.mean_cos"), markers=False), key="cmp_profile")
    st.dataframe(pd.DataFrame({ui.t("positions.col_kind"): list(names.values()),
                               ui.t("positions.col_deviation"): [f"{c.deviations[k]:.2e}" for k in names],
                               ui.t("positions.col_norm"): [f"{c.norms[k][0]:.3f} ({c.norms[k][1]:.3f} – "
                                                            f"{c.norms[k][2]:.3f})" for k in names]}),
                 hide_index=True)
    st.caption(ui.t("positions.learned_caption", d=c.d_model))
    _npz_button("positions.download_learned", "minilm_position_embeddings.npz", "dl_learned",
                learned=learned)


def _comparison_row(c: demos.Comparison, names: dict, tables: bool) -> None:
    for col, kind in zip(st.columns(3), names):
        with col:
            if tables:
                v = c.tables[kind]
                fig = figures.encoding_heatmap(v.values, v.rows, v.cols, title=names[kind],
                                             x_title=ui.t("positions.dimension"), y_title=ui.t("positions.position"),
                                             value_name=ui.t("positions.value"), height=420, max_ticks=6)
            else:
                idx, sim = c.sims[kind]
                fig = figures.similarity_heatmap(sim, idx, title=ui.t("positions.cmp_sim_title", kind=names[kind]),
                                               axis_title=ui.t("positions.position"),
                                               value_name=ui.t("positions.measure_cosine"), height=420,
                                               max_ticks=6)
            ui.plot(fig, key=f"cmp_{kind}_{'table' if tables else 'sim'}")


# ---------------------------------------------------------------- 8. order matters
def part_order() -> None:
    st.markdown(ui.t("positions.order_intro"))
    ui.latex(r"\begin{aligned}\mathrm{Attn}(P X) &= P\,\mathrm{Attn}(X)\\ "
             r"\mathrm{Attn}(P X + PE) &\neq P\,\mathrm{Attn}(X + PE)\end{aligned}")
    text = ui.text(ui.t("positions.tokens"), "tokens", "the cat sat on the mat", max_chars=300,
                   help=ui.t("positions.tokens_help", limit=P.MAX_TOKENS))
    c1, c2, c3 = st.columns([2, 1, 1])
    kind = ui.radio(ui.t("positions.perm"), P.PERMUTATIONS, "perm", container=c1,
                    format_func=lambda k: ui.t(f"positions.perm_{k}"))
    # the seed only where it counts (a greyed-out box is hard to read)
    seed = ui.number(ui.t("positions.seed"), 0, 9999, "seed", 0, container=c2) if kind == "shuffle" \
        else ui.value("seed", 0)
    d_model = ui.slider(ui.t("positions.order_d"), 2, 64, "od", 8, container=c3)
    try:
        no_pe, with_pe = cached.order(tuple(P.parse_tokens(text)), kind, int(seed), d_model)
    except InputError as e:
        ui.show_error(e)
        return
    st.text(ui.t("positions.permuted_sentence", text=" ".join(no_pe.permuted_tokens)))
    if no_pe.permuted_tokens == no_pe.tokens:
        st.info(ui.t("positions.same_sentence"))
    m1, m2 = st.columns(2)
    m1.metric(ui.t("positions.diff_no_pe"), f"{no_pe.max_diff:.2e}")
    m2.metric(ui.t("positions.diff_pe"), f"{with_pe.max_diff:.2e}")
    _order_table(no_pe, with_pe)
    _order_figures(no_pe, with_pe)


def _order_table(no_pe: P.OrderExperiment, with_pe: P.OrderExperiment) -> None:
    st.dataframe(pd.DataFrame({
        ui.t("positions.col_token"): no_pe.permuted_tokens,
        ui.t("positions.col_new_pos"): range(len(no_pe.perm)),
        ui.t("positions.col_old_pos"): no_pe.perm,
        ui.t("positions.col_out0"): [f"{a:+.4f} / {b:+.4f}"
                                     for a, b in zip(no_pe.out_perm[:, 0], no_pe.expected[:, 0])],
        ui.t("positions.col_diff_no_pe"): [f"{x:.1e}" for x in no_pe.row_difference],
        ui.t("positions.col_diff_pe"): [f"{x:.3f}" for x in with_pe.row_difference],
    }), hide_index=True)
    st.caption(ui.t("positions.order_caption"))


def _order_figures(no_pe: P.OrderExperiment, with_pe: P.OrderExperiment) -> None:
    case = ui.radio(ui.t("positions.inspect"), ("pe", "no_pe"), "inspect",
                    format_func=lambda c: ui.t(f"positions.inspect_{c}"))
    r = with_pe if case == "pe" else no_pe
    permuted = r.permuted_tokens
    labels = dict(x_title=ui.t("positions.key"), y_title=ui.t("positions.query"), value_name=ui.t("positions.weight"))
    left, right = st.columns(2)
    with left:
        ui.plot(figures.weights_heatmap(r.weights, r.tokens, title=ui.t("positions.w_orig"), **labels), key="w_orig")
    with right:
        ui.plot(figures.weights_heatmap(r.weights_perm, permuted, title=ui.t("positions.w_perm"), **labels),
                key="w_perm")
    ui.plot(figures.difference_heatmap(r.difference, permuted, title=ui.t("positions.diff_title"),
                                     x_title=ui.t("positions.dimension"), y_title=ui.t("positions.col_token"),
                                     value_name=ui.t("positions.difference")), key="out_diff")
    _npz_button("positions.download_order", "order_experiment.npz", "dl_order", tokens=r.tokens, perm=r.perm,
                out=r.out, out_perm=r.out_perm, weights=r.weights, weights_perm=r.weights_perm)


# ---------------------------------------------------------------- page
part = ui.radio(ui.t("positions.part"), PARTS, "part", format_func=lambda p: ui.t(f"positions.part_{p}"))
st.divider()
try:
    {"heatmap": part_heatmap, "waves": part_waves, "similarity": part_similarity, "relative": part_relative,
     "example": part_example, "scale": part_scale, "learned": part_learned, "order": part_order}[part]()
except InputError as err:
    ui.show_error(err)
