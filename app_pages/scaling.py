"""Scaling page: why attention divides q.k by sqrt(d_k). Four parts, one shown at a time (?part= in the URL)."""
from functools import partial

import numpy as np
import streamlit as st

from app_pages import _ui as ui
from app_pages._ui import scaling as cached
from viz_core.io import export
from viz_core.lessons import scaling
from viz_core.errors import InputError
from viz_core.plots import scaling as plots
from viz_core.plots.common import matrix_heatmap

PARTS = ("dist", "softmax", "model", "train")
TEMPERATURES = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)
EXP_DKS = (16, 64, 256, 512, 1024)
EXP_STEPS = (100, 200, 300)
JACOBIAN_MAX_N = 32  # the Jacobian heatmaps are drawn up to this row length
DEFAULT_DK = 256

ui.setup("scaling")
figures = ui.SharedFigures(plots)  # the figures, cached by their inputs (shared read-only)
t = ui.t


def fmt(x: float) -> str:
    """A number for metrics: 4 significant digits."""
    return f"{x:.4g}"


def pair(a: float, b: float) -> str:
    return f"{fmt(a)} / {fmt(b)}"


def dk_slider(container=st) -> int:
    return ui.select_slider(t("scaling.dk_label"), scaling.DK_GRID, "dk", DEFAULT_DK, container=container,
                              format_func=lambda d: f"{d}", help=t("scaling.dk_help"))


# ---------------------------------------------------------------- part 1: distribution of q.k
def part_distribution() -> None:
    ui.prose(ui.glossed(t("scaling.dist_intro")))
    ui.latex(r"\operatorname{Var}(q\cdot k)=\sum_{i=1}^{d_k}\operatorname{Var}(q_i k_i)=d_k")
    ui.latex(r"\operatorname{Var}\!\left(\frac{q\cdot k}{\sqrt{d_k}}\right)=\frac{d_k}{d_k}=1")
    d_k = dk_slider()
    with st.spinner(t("scaling.computing")):
        sweep = cached.variance_sweep()
    i = sweep.index(d_k)
    raw = sweep.samples[i]
    c1, c2, c3 = st.columns(3)
    c1.metric(t("scaling.metric_var_unscaled"), pair(sweep.var_unscaled[i], d_k))
    c2.metric(t("scaling.metric_var_scaled"), pair(sweep.var_scaled[i], 1))
    c3.metric(t("scaling.metric_max_abs"), pair(np.abs(raw).max(), np.abs(raw).max() / np.sqrt(d_k)))
    left, right = st.columns(2)
    # one fixed x axis for both histograms and every d_k: the left one widens as d_k grows, the right one stays
    common = dict(x_title=t("scaling.axis_score"), y_title=t("scaling.axis_density"),
                  x_range=4 * float(np.sqrt(max(sweep.d_ks))))
    with left:
        ui.plot(figures.histogram(raw, name=t("scaling.name_unscaled"), colour=plots.UNSCALED_COLOUR,
                                title=t("scaling.hist_unscaled", d_k=d_k), theory_variance=float(d_k),
                                theory_name=t("scaling.theory_normal", var=d_k), **common), key="hist_raw")
    with right:
        ui.plot(figures.histogram(raw / np.sqrt(d_k), name=t("scaling.name_scaled"), colour=plots.SCALED_COLOUR,
                                title=t("scaling.hist_scaled", d_k=d_k), theory_variance=1.0,
                                theory_name=t("scaling.theory_normal", var=1), **common), key="hist_scaled")
    names = (t("scaling.measured_unscaled"), t("scaling.theory_dk"), t("scaling.measured_scaled"),
             t("scaling.theory_one"))
    ui.plot(figures.variance_curve(sweep.d_ks, sweep.var_unscaled, sweep.var_scaled, d_k, names=names,
                                 x_title=t("scaling.axis_dk"), y_title=t("scaling.axis_variance"),
                                 title=t("scaling.curve_title", n=f"{cached.N_SAMPLES:,}")), key="var_curve")
    st.caption(t("scaling.dist_note"))
    table = export.columns_csv({"d_k": sweep.d_ks, "var_unscaled": sweep.var_unscaled, "var_scaled": sweep.var_scaled})
    c1, c2 = st.columns(2)
    with c1:
        ui.download(t("scaling.download_curve"), table, "scaling_variance.csv", "text/csv",
                    key="dl_curve")
    with c2:
        ui.download(t("scaling.download_samples"),
                    partial(export.npz_bytes, d_k=d_k, q_dot_k=raw, scaled=raw / np.sqrt(d_k)),
                    f"scaling_samples_dk{d_k}.npz", "application/octet-stream", key="dl_samples")


# ---------------------------------------------------------------- part 2: softmax saturation
def saturation_controls() -> tuple[int, int, float]:
    c1, c2, c3 = st.columns([2, 1, 1])
    d_k = dk_slider(c1)
    n = ui.slider(t("scaling.n_label"), 2, 512, "n", 16, container=c2, help=t("scaling.n_help"))
    temp = ui.select_slider(t("scaling.temp_label"), TEMPERATURES, "temp", 1.0, container=c3,
                              help=t("scaling.temp_help"))
    return d_k, n, temp


def saturation_figures(sweep: scaling.SaturationSweep, d_k: int) -> None:
    ref = scaling.uniform_reference(sweep.n_keys)
    names = (t("scaling.name_unscaled"), t("scaling.name_scaled"))
    common = dict(names=names, x_title=t("scaling.axis_dk"), reference_name=t("scaling.uniform"))
    figs = [
        figures.saturation_curve(sweep.d_ks, *sweep.max_p, d_k, y_title=t("scaling.axis_max_p"),
                               title=t("scaling.sat_max_p"), reference=float(ref.max_p),
                               threshold=scaling.SATURATION_MAX_P,
                               threshold_name=t("scaling.threshold", level=scaling.SATURATION_MAX_P), **common),
        figures.saturation_curve(sweep.d_ks, *sweep.entropy, d_k, y_title=t("scaling.axis_entropy"),
                               title=t("scaling.sat_entropy"), reference=float(ref.entropy), **common),
        figures.saturation_curve(sweep.d_ks, *sweep.jacobian_norm, d_k, y_title=t("scaling.axis_jacobian"),
                               title=t("scaling.sat_jacobian"), reference=float(ref.jacobian_norm), **common),
    ]
    for col, fig, key in zip(st.columns(3), figs, ("sat_max_p", "sat_entropy", "sat_jacobian")):
        with col:
            ui.plot(fig, key=key)


def onset_captions(sweep: scaling.SaturationSweep) -> None:
    level = scaling.SATURATION_MAX_P
    for s, which in enumerate(("unscaled", "scaled")):
        onset = scaling.saturation_onset(sweep.d_ks, sweep.max_p[s], level)
        if onset is None:
            st.markdown(t(f"scaling.onset_{which}_none", level=level, max_dk=int(sweep.d_ks[-1])))
        else:
            st.markdown(t(f"scaling.onset_{which}", level=level, d_k=onset))


def example_row_view(d_k: int, n: int, temp: float) -> None:
    z = cached.example_row(d_k, n)
    p = [scaling.softmax(scaling.row_logits(z, d_k, scaled, temp)) for scaled in (False, True)]
    st.subheader(t("scaling.example_header", n=n, d_k=d_k))
    ui.plot(figures.probability_bars(*p, names=(t("scaling.name_unscaled"), t("scaling.name_scaled")),
                                   x_title=t("scaling.axis_key"), y_title=t("scaling.axis_weight"),
                                   title=t("scaling.example_title")), key="example_bars")
    if n > JACOBIAN_MAX_N:
        st.caption(t("scaling.jac_too_big", limit=JACOBIAN_MAX_N))
        return
    cols = st.columns(2)
    for col, probs, which in zip(cols, p, ("unscaled", "scaled")):
        norm = float(scaling.jacobian_frobenius(probs))
        fig = matrix_heatmap(scaling.softmax_jacobian(probs), signed=True, zmin=-plots.JACOBIAN_BOUND,
                             zmax=plots.JACOBIAN_BOUND, x_title=t("scaling.axis_jac_col"),
                             y_title=t("scaling.axis_jac_row"), value_name=t("scaling.jac_value"),
                             title=t(f"scaling.jac_{which}", norm=fmt(norm)))
        with col:
            ui.plot(fig, key=f"jac_{which}")
    st.caption(t("scaling.jac_note"))


def part_softmax() -> None:
    ui.prose(ui.glossed(t("scaling.softmax_intro")))
    ui.latex(r"p=\operatorname{softmax}\!\left(\frac{z}{s\,T}\right),\quad s\in\{1,\sqrt{d_k}\}")
    ui.latex(r"J=\frac{\partial p}{\partial (z/sT)}=\operatorname{diag}(p)-p\,p^{\top}")
    ui.latex(r"\|J\|_F^2=\sum_i p_i^2(1-p_i)^2+\sum_{i\ne j} p_i^2\,p_j^2")
    d_k, n, temp = saturation_controls()
    sweep = cached.saturation_sweep(n, temp)
    i = int(np.flatnonzero(sweep.d_ks == d_k)[0])
    c1, c2, c3 = st.columns(3)
    c1.metric(t("scaling.metric_max_p"), pair(*sweep.max_p[:, i]))
    c2.metric(t("scaling.metric_entropy"), pair(*sweep.entropy[:, i]))
    c3.metric(t("scaling.metric_jacobian"), pair(*sweep.jacobian_norm[:, i]))
    onset_captions(sweep)
    saturation_figures(sweep, d_k)
    st.caption(t("scaling.softmax_note", rows=scaling.rows_for(n)))
    table = export.columns_csv({"d_k": sweep.d_ks, "max_p_unscaled": sweep.max_p[0], "max_p_scaled": sweep.max_p[1],
                                "entropy_unscaled": sweep.entropy[0], "entropy_scaled": sweep.entropy[1],
                                "jacobian_unscaled": sweep.jacobian_norm[0], "jacobian_scaled": sweep.jacobian_norm[1]})
    ui.download(t("scaling.download_sweep"), table, f"scaling_softmax_N{n}_T{temp}.csv",
                "text/csv", key="dl_sweep")
    example_row_view(d_k, n, temp)


# ---------------------------------------------------------------- part 3: the pretrained model
def model_controls() -> tuple[str, int, int] | None:
    try:
        with st.spinner(t("scaling.loading")):
            name, n_layers, n_heads = cached.model_shape()
    except InputError as exc:
        ui.show_error(exc)
        return None
    text = ui.text(t("scaling.text_label"), "text", t("scaling.default_text"), max_chars=2000)
    c1, c2 = st.columns(2)
    layer = ui.slider(t("scaling.layer_label"), 0, n_layers - 1, "layer", 0, container=c1)
    head = ui.slider(t("scaling.head_label"), 0, n_heads - 1, "head", 0, container=c2)
    st.markdown(t("scaling.model_intro_shape", name=name, layers=n_layers, heads=n_heads))
    return text, layer, head


def model_metrics(s: scaling.HeadScores, model_weights: np.ndarray) -> None:
    c1, c2, c3 = st.columns(3)
    c1.metric(t("scaling.metric_var_scores"), pair(s.raw.var(), s.scaled.var()))
    c2.metric(t("scaling.metric_max_p_model"), pair(s.stats_raw.max_p.mean(), s.stats_scaled.max_p.mean()))
    c3.metric(t("scaling.metric_entropy_model"), pair(s.stats_raw.entropy.mean(), s.stats_scaled.entropy.mean()))
    diff = scaling.max_abs_difference(s.weights_scaled, model_weights)
    if diff < 1e-3:
        st.caption(t("scaling.model_check", diff=f"{diff:.1e}"))
    else:
        st.warning(t("scaling.model_check_off", diff=f"{diff:.3g}"))


def model_figures(tokens: list[str], s: scaling.HeadScores) -> None:
    left, right = st.columns(2)
    common = dict(x_title=t("scaling.axis_score"), y_title=t("scaling.axis_density"), bins=40)
    heat = dict(x_title=t("scaling.axis_key_token"), y_title=t("scaling.axis_query_token"),
                value_name=t("scaling.axis_weight"))
    with left:
        ui.plot(figures.histogram(s.raw, name=t("scaling.name_unscaled"), colour=plots.UNSCALED_COLOUR,
                                title=t("scaling.model_hist_raw", var=fmt(s.raw.var())), **common), key="m_hist_raw")
        ui.plot(figures.weights_map(s.weights_raw, tokens, title=t("scaling.model_heat_raw"), **heat),
                key="m_heat_raw")
    with right:
        ui.plot(figures.histogram(s.scaled, name=t("scaling.name_scaled"), colour=plots.SCALED_COLOUR,
                                title=t("scaling.model_hist_scaled", d_k=s.d_k, var=fmt(s.scaled.var())), **common),
                key="m_hist_scaled")
        ui.plot(figures.weights_map(s.weights_scaled, tokens, title=t("scaling.model_heat_scaled"), **heat),
                key="m_heat_scaled")


def part_model() -> None:
    ui.prose(ui.glossed(t("scaling.model_intro")))
    ui.latex(r"S = Q_h K_h^{\top}")
    ui.latex(r"A=\operatorname{softmax}\!\left(\frac{S}{s}\right),\quad s\in\{1,\sqrt{d_k}\}")
    chosen = model_controls()
    if chosen is None:
        return
    text, layer, head = chosen
    try:
        with st.spinner(t("scaling.loading")):
            tokens, s, model_weights, qk = cached.head_scores(text, layer, head)
    except InputError as exc:
        if "what" in exc.params:  # the model's text check names the box; say it in the user's language
            exc.params["what"] = t(f"attention.what_{exc.params['what']}")
        ui.show_error(exc)
        return
    model_metrics(s, model_weights)
    model_figures(tokens, s)
    ui.download(t("scaling.download_model"),
                partial(export.npz_bytes, tokens=tokens, q=qk[0], k=qk[1], scores=s.raw, weights_unscaled=s.weights_raw,
                             weights_scaled=s.weights_scaled, model_weights=model_weights),
                f"scaling_layer{layer}_head{head}.npz", "application/octet-stream", key="dl_model")


# ---------------------------------------------------------------- part 4: training experiment
def first_step_below(loss: np.ndarray, level: float) -> str:
    hits = np.flatnonzero(np.asarray(loss) < level)
    return str(int(hits[0]) + 1) if hits.size else t("scaling.never")


def experiment_results(r: scaling.ExperimentResult) -> None:
    cfg, u, s = r.config, r.unscaled, r.scaled
    c1, c2, c3 = st.columns(3)
    c1.metric(t("scaling.metric_accuracy"), f"{u.accuracy:.0%} / {s.accuracy:.0%}")
    c2.metric(t("scaling.metric_init_weight"), pair(u.init_max_weight, s.init_max_weight))
    c3.metric(t("scaling.metric_first_below", level=1.0),
              f"{first_step_below(u.loss, 1.0)} / {first_step_below(s.loss, 1.0)}")
    ui.plot(figures.loss_curves(u.loss, s.loss, u.max_weight, s.max_weight,
                              panel_titles=(t("scaling.name_unscaled"), t("scaling.name_scaled")),
                              x_title=t("scaling.axis_step"), loss_title=t("scaling.axis_loss"),
                              weight_title=t("scaling.axis_attn_max"), chance=float(np.log(cfg.n_values)),
                              chance_name=t("scaling.chance", n=cfg.n_values),
                              title=t("scaling.train_title", d_k=cfg.d_k)), key="loss_curves")
    st.caption(t("scaling.train_time", seconds=f"{u.seconds + s.seconds:.1f}", steps=cfg.steps, seed=cfg.seed))
    for run in (u, s):
        if run.truncated:
            st.warning(t("scaling.truncated", limit=cfg.max_seconds, step=len(run.loss)))
    st.markdown(t("scaling.train_reading"))
    n = max(len(u.loss), len(s.loss))
    pad = lambda v: np.pad(v, (0, n - len(v)), constant_values=np.nan)      # noqa: E731 - shorter run: empty cells
    table = export.columns_csv({"step": np.arange(1, n + 1), "loss_unscaled": pad(u.loss), "loss_scaled": pad(s.loss),
                                "max_weight_unscaled": pad(u.max_weight), "max_weight_scaled": pad(s.max_weight)})
    ui.download(t("scaling.download_curves"), table, f"scaling_training_dk{cfg.d_k}.csv",
                "text/csv", key="dl_train")


def part_train() -> None:
    cfg = scaling.ExperimentConfig()
    ui.prose(ui.glossed(t("scaling.train_intro", n=cfg.n_pairs, symbols=cfg.n_symbols, values=cfg.n_values,
                             lr=cfg.lr, batch=cfg.batch)))
    ui.latex(r"\text{logits} = W_o\,\operatorname{softmax}\!\left(\frac{q K^{\top}}{s}\right)V")
    ui.latex(r"s \in \{1, \sqrt{d_k}\}")
    c1, c2 = st.columns(2)
    d_k = ui.select_slider(t("scaling.exp_dk"), EXP_DKS, "exp_dk", 512, container=c1)
    steps = ui.select_slider(t("scaling.exp_steps"), EXP_STEPS, "exp_steps", 200, container=c2)
    done = st.session_state.setdefault("_scaling_trained", set())
    if st.button(t("scaling.train_button"), key="scaling.train", type="primary"):
        with st.spinner(t("scaling.training")):
            cached.experiment(d_k, steps)
        done.add((d_k, steps))
    if (d_k, steps) not in done:
        st.info(t("scaling.train_prompt"))
        return
    with st.spinner(t("scaling.training")):
        experiment_results(cached.experiment(d_k, steps))


# ---------------------------------------------------------------- page
part = ui.segmented(t("scaling.part_label"), PARTS, "part", "dist", format_func=lambda p: t(f"scaling.part_{p}"))
{"dist": part_distribution, "softmax": part_softmax, "model": part_model, "train": part_train}[part]()
st.caption(t("common.download_png_hint"))
