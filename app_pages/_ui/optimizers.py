"""Cached wrappers around viz_core.lessons.optimizers for the Optimizers page (the race, the contour grid, the figures)."""
from __future__ import annotations

import numpy as np
import streamlit as st

from viz_core.io import export
from viz_core.lessons import optimizers as opt
from viz_core.lessons import schedules, surfaces
from viz_core.plots import optimizers as plots

from . import SharedFigures, share


@st.cache_data(max_entries=64, show_spinner=False)
def race(cfg: opt.RaceConfig) -> opt.RaceResult:
    """The race for one configuration (a fair race includes its learning-rate grid search)."""
    return opt.race(cfg)


HOVER_POINTS = 21  # the race's invisible hover / click points per axis


@st.cache_data(max_entries=16, show_spinner=False)
def grid(surface_key: str, n: int = 300) -> surfaces.SurfaceGrid:
    """The surface sampled on n x n points (300 for the picture, 21 for the hover / click points: each is an SVG
    element the browser styles and lays out on every page switch, so 21 x 21 = 441 of them, not 41 x 41; a click
    anywhere still lands within plotly's 20 px hover distance of one)."""
    return surfaces.surface_grid(surfaces.get_surface(surface_key), n)


@st.cache_resource(max_entries=24, show_spinner=False)
def race_figure(cfg: opt.RaceConfig, names: dict, labels: dict):
    """The animated contour figure of a race (labels are part of the key: one figure per language).

    cache_resource, not cache_data: a pickled plotly figure re-validates every animation frame when it is loaded,
    which costs more than building it. The figure is shared read-only (share): callers must not modify it.
    """
    result, surface = race(cfg), surfaces.get_surface(cfg.surface)
    fit = (np.array(surfaces.LINE_X), np.array(surfaces.LINE_Y)) if cfg.surface == "line_fit" else None
    return share(plots.race_figure(grid(cfg.surface), grid(cfg.surface, HOVER_POINTS), result.trajectories, names,
                                   labels, x_range=surface.x_range, y_range=surface.y_range, minima=surface.minima,
                                   start=cfg.start, log_levels=surface.log_contours, fit=fit))


@st.cache_data(max_entries=32, show_spinner=False)
def schedule_curves(cfg: schedules.ScheduleConfig, steps: int, lr: float) -> dict[str, np.ndarray]:
    """lr_t for every schedule kind with cfg's parameters: kind -> (steps,)."""
    return {kind: lr * schedules.multipliers(schedules.ScheduleConfig(**{**cfg.__dict__, "kind": kind}), steps)
            for kind in schedules.SCHEDULES}


def race_arrays(result: opt.RaceResult) -> dict[str, np.ndarray]:
    """Every racer's path, loss, gradients, steps, effective lr and inner state, and the schedule: the .npz file."""
    arrays = {}
    for tr in result.trajectories:
        arrays.update({f"{tr.name}_path": tr.path, f"{tr.name}_loss": tr.loss, f"{tr.name}_grad": tr.grads,
                       f"{tr.name}_step": tr.deltas, f"{tr.name}_eff_lr": tr.eff_lr,
                       **{f"{tr.name}_{k}": v for k, v in tr.state.items()}})
    arrays["lr_multiplier"] = result.lr_schedule
    return arrays


def race_csv(result: opt.RaceResult) -> str:
    """Step, then each racer's x, y and loss (NaN after a racer stopped): the .csv file."""
    n = max(len(tr.loss) for tr in result.trajectories)
    return export.columns_csv({"step": np.arange(n), **{
        f"{tr.name}_{c}": np.pad(v, (0, n - len(v)), constant_values=np.nan)
        for tr in result.trajectories for c, v in (("x", tr.path[:, 0]), ("y", tr.path[:, 1]), ("loss", tr.loss))}})


# The other figures, cached by their inputs (see SharedFigures): figures.curves_figure(...) as in
# viz_core.plots.optimizers
figures = SharedFigures(plots)
