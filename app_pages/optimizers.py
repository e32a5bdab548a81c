"""Optimizers: SGD, Momentum, AdaGrad, RMSProp and Adam race across a loss surface; look inside each one."""
import numpy as np
import pandas as pd
import streamlit as st

from app_pages import _ui as ui
from app_pages._ui import optimizers as cached
from app_pages._ui.optimizers import figures
from viz_core.lessons import optimizers as opt
from viz_core.io import export
from viz_core.lessons import schedules, surfaces
from viz_core.errors import InputError

NS = "optimizers"
CHART_KEY = "optimizers.race_chart"
CLICK_TRACE = 1                 # index of the invisible click grid in the race figure
LAST_CLICK = "optimizers._last_click"
EPS_CHOICES = [1e-10, 1e-8, 1e-6, 1e-4, 1e-2]
ALPHA_CHOICES = [0.5, 0.9, 0.99, 0.999]
BETA2_CHOICES = [0.9, 0.99, 0.999, 0.9999]
WD_CHOICES = [0.0, 0.001, 0.01, 0.1]
ALL = opt.CLASSIC + opt.EXTRAS
MAX_STEPS = 2000                # the steps box's bound (its help says "1 to 2000"; the engine allows opt.MAX_STEPS)

ui.setup(NS)


def names() -> dict[str, str]:
    return {n: ui.t(f"optimizers.name_{n}") for n in ALL}


# ---------------------------------------------------------------- controls
def reset_for_surface() -> None:
    """A new surface: put the start point and learning rate back to the ones that suit it."""
    surface = surfaces.get_surface(ui.value("surface"))
    ui.set_value("x0", float(surface.start[0]))
    ui.set_value("y0", float(surface.start[1]))
    ui.set_value("lr", float(surface.lr))


def apply_click() -> None:
    """A click on the race figure's invisible grid sets the start point (before the number inputs exist)."""
    event = st.session_state.get(CHART_KEY)
    points = [p for p in ((event or {}).get("selection") or {}).get("points", [])
              if p.get("curve_number") == CLICK_TRACE]
    if not points:
        return
    xy = (round(float(points[0]["x"]), 3), round(float(points[0]["y"]), 3))
    if st.session_state.get(LAST_CLICK) != xy:
        st.session_state[LAST_CLICK] = xy
        ui.set_value("x0", xy[0])
        ui.set_value("y0", xy[1])


def surface_controls():
    c1, c2, c3, c4, c5 = st.columns([2, 1, 1, 1, 1])
    key = ui.selectbox(ui.t("optimizers.surface"), list(surfaces.SURFACES), "surface", default="bowl",
                       format_func=lambda k: ui.t(f"optimizers.surface_{k}"), container=c1, on_change=reset_for_surface)
    surface = surfaces.get_surface(key)
    (x_lo, x_hi), (y_lo, y_hi) = surface.x_range, surface.y_range
    x_name, y_name = surface.axis_names
    x0 = ui.number(ui.t("optimizers.start_x", name=x_name), x_lo, x_hi, "x0", float(surface.start[0]), step=0.1,
                   container=c2, help=ui.t("optimizers.start_help"))
    y0 = ui.number(ui.t("optimizers.start_y", name=y_name), y_lo, y_hi, "y0", float(surface.start[1]), step=0.1,
                   container=c3, help=ui.t("optimizers.start_help"))
    lr = ui.number(ui.t("optimizers.lr"), 0.0, opt.MAX_LR, "lr", float(surface.lr), step=0.001, format="%g",
                   container=c4, help=ui.t("optimizers.lr_help", max=opt.MAX_LR))
    steps = ui.number(ui.t("optimizers.steps"), 1, MAX_STEPS, "steps", 300, step=50, container=c5,
                      help=ui.t("optimizers.steps_help"))
    return surface, (x0, y0), lr, steps


def racer_picks() -> list[str]:
    """The racers, in ALL's order: one row of pills (one element for the browser to draw, not a checkbox each)."""
    return ui.pills(ui.t("optimizers.racers"), ALL, "racers", opt.CLASSIC, format_func=names().__getitem__,
                    help=ui.t("optimizers.racers_help"))


def own_lr(name: str, lr: float, col) -> float:
    if ui.checkbox(ui.t("optimizers.own_lr"), f"own_{name}", default=False, container=col):
        return ui.number(ui.t("optimizers.lr_of", name=names()[name]), 0.0, opt.MAX_LR, f"lr_{name}", lr, step=0.001,
                         format="%g", container=col)
    return lr


def hyper_controls(picked: list[str], lr: float, where) -> tuple[opt.RacerSpec, ...]:
    """Each optimizer's own hyperparameters (and, optionally, its own learning rate), in `where` (the section of
    more settings, or ui.HIDDEN while it is closed: they hold their values)."""
    cols = where.columns(len(opt.CLASSIC))
    nm = names()
    for c, n in zip(cols, opt.CLASSIC):
        c.markdown(f"**{nm[n]}**")
    hyper = {"sgd": {}, "momentum": {
        "momentum": ui.slider(ui.t("optimizers.momentum"), 0.0, 0.99, "mom", 0.9, step=0.01, container=cols[1])}}
    hyper["adagrad"] = {"eps": ui.selectbox("ε", EPS_CHOICES, "ada_eps", 1e-8, container=cols[2])}
    hyper["rmsprop"] = {"alpha": ui.selectbox("α", ALPHA_CHOICES, "rms_alpha", 0.9, container=cols[3]),
                        "eps": ui.selectbox("ε", EPS_CHOICES, "rms_eps", 1e-8, container=cols[3])}
    adam = {"beta1": ui.slider("β₁", 0.0, 0.99, "beta1", 0.9, step=0.01, container=cols[4]),
            "beta2": ui.selectbox("β₂", BETA2_CHOICES, "beta2", 0.999, container=cols[4]),
            "eps": ui.selectbox("ε", EPS_CHOICES, "adam_eps", 1e-8, container=cols[4])}
    hyper["adam"] = adam
    lrs = {n: own_lr(n, lr, c) for n, c in zip(opt.CLASSIC, cols)}
    where.caption(ui.t("optimizers.extras_caption"))
    wd = ui.selectbox(ui.t("optimizers.weight_decay"), WD_CHOICES, "wd", 0.01, container=where.columns(3)[0])
    hyper["adamw"] = {**adam, "weight_decay": wd}
    hyper["nadam"] = dict(adam)
    return tuple(opt.RacerSpec(n, lrs.get(n, lr), tuple(sorted(hyper[n].items()))) for n in picked)


def schedule_controls() -> schedules.ScheduleConfig:
    """The learning-rate schedule: drawn only while its section is open, holding its values while closed."""
    opened, box = ui.fold(ui.t("optimizers.sched_header"), "sched_open")
    where = box if opened else ui.HIDDEN
    c1, c2, c3 = where.columns(3)
    kind = ui.selectbox(ui.t("optimizers.schedule"), schedules.SCHEDULES, "sched", "constant",
                        format_func=lambda k: ui.t(f"optimizers.sched_{k}"), container=c1)
    step_size = ui.number(ui.t("optimizers.step_size"), 1, 2000, "sched_every", 100, step=10, container=c2)
    gamma = ui.slider(ui.t("optimizers.gamma"), 0.05, 1.0, "sched_gamma", 0.5, step=0.05, container=c2)
    warmup = ui.number(ui.t("optimizers.warmup"), 1, 2000, "sched_warmup", 50, step=10, container=c3)
    floor = ui.slider(ui.t("optimizers.min_ratio"), 0.0, 1.0, "sched_floor", 0.0, step=0.05, container=c3)
    where.caption(ui.t("optimizers.sched_caption"))
    return schedules.ScheduleConfig(kind, int(step_size), float(gamma), float(floor), int(warmup))


def more_settings():
    """The section of settings past the race's own (fair race, gradient noise, each optimizer's hyperparameters):
    drawn only while open, so the page's first view draws the controls most races need and no more (every control
    costs the browser time on a page switch); the address keeps it open (hyper=1). Its container, or ui.HIDDEN."""
    opened, box = ui.fold(ui.t("optimizers.hyper_header"), "hyper")
    return box if opened else ui.HIDDEN


def extra_controls(where) -> tuple[bool, float, int]:
    c1, c2, c3 = where.columns([2, 1, 1])
    fair = ui.checkbox(ui.t("optimizers.fair"), "fair", default=False, container=c1, toggle=True,
                       help=ui.t("optimizers.fair_help"))
    noise = ui.slider(ui.t("optimizers.noise"), 0.0, 5.0, "noise", 0.0, step=0.1, container=c2,
                      help=ui.t("optimizers.noise_help"))
    seed = ui.number(ui.t("optimizers.seed"), 0, 10_000, "seed", 0, container=c3)
    return fair, float(noise), int(seed)


# ---------------------------------------------------------------- labels for the figures
def fig_labels(surface) -> dict[str, str]:
    x, y = surface.axis_names
    keys = ("loss", "log_level", "minimum", "start", "click", "play", "pause", "step", "loss_title", "loss_gap",
            "dist_title", "distance", "diverged", "eff_lr", "sched_title", "paper_title", "lr",
            "data", "fit_x", "fit_y", "contour_title", "fit_title")
    return {"x": x, "y": y, "colon": ui.t("common.colon"), **{k: ui.t(f"optimizers.fig_{k}") for k in keys}}


def state_names() -> dict[str, str]:
    keys = ("grad", "velocity", "sum_sq", "square_avg", "m", "m_hat", "v", "v_hat", "eff_lr")
    return {k: ui.t(f"optimizers.state_{k}") for k in keys}


# ---------------------------------------------------------------- the race tab
def show_messages(result: opt.RaceResult, rows: list[opt.RaceRow]) -> None:
    nm = names()
    for row in rows:
        if row.diverged_at is not None:
            st.warning(ui.t("optimizers.diverged_msg", name=nm[row.name], step=row.diverged_at, lr=f"{row.lr:.3g}"))
        elif row.left_box_at is not None:
            st.info(ui.t("optimizers.left_box_msg", name=nm[row.name], step=row.left_box_at))
    if result.tuned:
        st.info(ui.t("optimizers.fair_msg", grid_lo=f"{opt.LR_GRID[0]:g}", grid_hi=f"{opt.LR_GRID[-1]:g}",
                     n=len(opt.LR_GRID)))


def results_tables(rows: list[opt.RaceRow], tuned: bool) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Where each racer ended (learning rate, loss gap, distance), and when (the step it got close, or diverged): two
    tables of four and three columns, not one of six, so that each fits a phone's width."""
    nm = names()
    fmt = lambda v: "—" if v is None else str(v)      # noqa: E731
    finite = lambda v, text: f"{v:.3e}" if np.isfinite(v) else text      # noqa: E731
    who = {ui.t("optimizers.col_optimizer"): [nm[r.name] for r in rows]}
    return pd.DataFrame({
        **who,
        ui.t("optimizers.col_lr_tuned") if tuned else ui.t("optimizers.col_lr"): [f"{r.lr:.3g}" for r in rows],
        ui.t("optimizers.col_final_gap"): [finite(r.final_gap, ui.t("optimizers.diverged")) for r in rows],
        ui.t("optimizers.col_distance"): [finite(r.final_distance, "—") for r in rows],
    }), pd.DataFrame({
        **who,
        ui.t("optimizers.col_reached"): [fmt(r.reached_at) for r in rows],
        ui.t("optimizers.col_diverged"): [fmt(r.diverged_at) for r in rows],
    })


# On a phone the app's tables have columns of equal width and wrap even inside a word: one table of six columns read
# "Mom/entu/m" and "1.102/e-05" at 390 px. The two tables fit 390 px in a "whole_words" container, whose
# tables keep their names and numbers whole (app_pages/_ui PAGE_CSS).
RESULTS_KEY = "whole_words_optimizers"


def downloads(result: opt.RaceResult) -> None:
    """The race's files, written when their button is clicked, not on every run (no run pays for a file nobody
    asked for). Both buttons in one row that wraps on a narrow screen (one container, not a column each)."""
    with st.container(horizontal=True):
        ui.download(ui.t("optimizers.download_npz"), lambda: export.npz_bytes(**cached.race_arrays(result)),
                    "optimizer_race.npz", "application/octet-stream", key="optimizers.dl_npz")
        ui.download(ui.t("optimizers.download_csv"), lambda: cached.race_csv(result), "optimizer_race.csv",
                    "text/csv", key="optimizers.dl_csv")


def race_tab(cfg: opt.RaceConfig, result: opt.RaceResult, surface, labels) -> None:
    ui.prose(ui.glossed(ui.t("optimizers.race_intro")))
    ui.latex(surface.latex)
    rows = opt.race_summary(result)
    show_messages(result, rows)
    fig = cached.race_figure(cfg, names(), labels)
    ui.plot(fig, key=CHART_KEY, on_select="rerun", selection_mode="points")
    st.caption(ui.t("optimizers.click_caption"))
    dist = {tr.name: surface.distance(tr.path) for tr in result.trajectories}
    ui.plot(figures.curves_figure(result.trajectories, names(), surface.f_min, dist, labels),
            key="optimizers.curves_chart")
    race_numbers(result, rows)


def race_numbers(result: opt.RaceResult, rows: list[opt.RaceRow]) -> None:
    """The results tables and the race's files, in a section drawn only while open (the address keeps it open,
    numbers=1): the charts above show the same race, and every element of a first view costs the browser time on a
    page switch."""
    opened, box = ui.fold(ui.t("optimizers.numbers_header"), "numbers")
    if not opened:
        return
    with box:
        with st.container(key=RESULTS_KEY):
            ui.tables(results_tables(rows, bool(result.tuned)))
        downloads(result)


# ---------------------------------------------------------------- the inside tab
def inside_tab(result: opt.RaceResult, labels) -> None:
    ui.prose(ui.glossed(ui.t("optimizers.inside_intro")))
    for n in opt.CLASSIC:
        st.markdown(f"**{names()[n]}**{ui.t('common.colon')}{ui.t(f'optimizers.explain_{n}')}")
        ui.latex(opt.LATEX[n])
    nm = names()
    ui.plot(figures.step_size_figure(result.trajectories, nm, labels), key="optimizers.step_chart")
    st.caption(ui.t("optimizers.step_caption"))
    state_viewer(result, labels)


@st.fragment
def state_viewer(result: opt.RaceResult, labels) -> None:
    """One racer's inner state (a fragment: choosing another racer redraws only this part)."""
    nm = names()
    racers = [tr.name for tr in result.trajectories]
    who = ui.selectbox(ui.t("optimizers.inspect"), racers, "inspect", default="adam" if "adam" in racers else racers[0],
                       format_func=nm.get)
    tr = next(tr for tr in result.trajectories if tr.name == who)
    title = ui.t("optimizers.fig_state_title", name=nm[who])
    ui.plot(figures.state_figure(tr, state_names(), {**labels, "state_title": title}), key="optimizers.state_chart")
    st.caption(ui.t("optimizers.state_caption"))


# ---------------------------------------------------------------- the schedules tab
def schedules_tab(sched: schedules.ScheduleConfig, steps: int, lr: float, labels) -> None:
    ui.prose(ui.glossed(ui.t("optimizers.sched_intro")))
    ui.latex(r"\mathrm{lr}_t = d_{\mathrm{model}}^{-0.5}\,\min\!\left(t^{-0.5},\; t\cdot "
             r"\mathrm{warmup}^{-1.5}\right)")
    curves = cached.schedule_curves(sched, steps, lr)
    named = {ui.t(f"optimizers.sched_{k}"): v for k, v in curves.items()}
    ui.plot(figures.schedule_figure(named, ui.t(f"optimizers.sched_{sched.kind}"), labels),
            key="optimizers.sched_chart")
    paper_schedule(labels)


@st.fragment
def paper_schedule(labels) -> None:
    """The paper's own schedule for a few (d_model, warmup) pairs and the user's (a fragment, like state_viewer)."""
    c1, c2 = st.columns(2)
    d_model = ui.number("d_model", 16, 4096, "tf_dmodel", 512, step=16, container=c1)
    warmup = ui.number(ui.t("optimizers.warmup"), 1, 50_000, "tf_warmup", 4000, step=500, container=c2)
    steps = np.unique(np.concatenate([np.arange(1, 20_001, 20), [512, 4000, 8000, int(warmup)]]))   # (S,)
    pairs = [(512, 4000), (512, 8000), (256, 4000), (int(d_model), int(warmup))]
    try:
        paper = {f"d_model={d}, warmup={w}": schedules.transformer_lr(steps, d, w) for d, w in dict.fromkeys(pairs)}
        peak = float(schedules.transformer_lr(warmup, d_model, warmup))
    except InputError as exc:  # a fragment rerun is outside the page's try: say what is wrong here
        ui.show_error(exc)
        return
    ui.plot(figures.transformer_schedule_figure(steps, paper, labels), key="optimizers.paper_chart")
    st.caption(ui.t("optimizers.paper_caption", peak=f"{peak:.3e}", warmup=warmup))


# ---------------------------------------------------------------- page
apply_click()
surface, start, lr, steps = surface_controls()
picked = racer_picks()
more = more_settings()
fair, noise, seed = extra_controls(more)
specs = hyper_controls(picked, lr, more)
sched = schedule_controls()

result, error = None, None
try:
    cfg = opt.RaceConfig(surface.key, (float(start[0]), float(start[1])), int(steps), specs, sched, noise, seed, fair)
    opt.validate_race(cfg)
    with st.spinner(ui.t("optimizers.running")):
        result = cached.race(cfg)
except InputError as exc:
    error = exc

labels = fig_labels(surface)
tab, tabs = ui.tabs(("race", "inside", "schedules"), "tab", format_func=lambda k: ui.t(f"optimizers.tab_{k}"))
with tabs[tab]:  # only the open tab is drawn
    if tab == "schedules":
        try:
            schedules_tab(sched, max(int(steps), 1), lr, labels)
        except InputError as exc:
            ui.show_error(exc)
    elif error:
        ui.show_error(error)
    elif tab == "race":
        race_tab(cfg, result, surface, labels)
    else:
        inside_tab(result, labels)
