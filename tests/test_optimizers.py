"""viz_core.lessons.optimizers / surfaces / schedules against torch.optim, autograd, the paper's formula and known minima."""
import base64
import math
import warnings

import numpy as np
import pytest
import torch

from viz_core.lessons import optimizers as opt
from viz_core import i18n
from viz_core.lessons import schedules, surfaces
from viz_core.errors import InputError
from viz_core.plots import optimizers as plots

# (ours, our kwargs, torch class, torch kwargs): the same update with matching hyperparameters
PAIRS = {
    "sgd": (opt.SGD, {}, torch.optim.SGD, {}),
    "momentum": (opt.Momentum, {}, torch.optim.SGD, {"momentum": 0.9}),
    "adagrad": (opt.AdaGrad, {}, torch.optim.Adagrad, {"eps": 1e-8}),
    "rmsprop": (opt.RMSProp, {}, torch.optim.RMSprop, {"alpha": 0.9, "eps": 1e-8}),
    "adam": (opt.Adam, {}, torch.optim.Adam, {"betas": (0.9, 0.999), "eps": 1e-8}),
}
CUSTOM = {  # non-default hyperparameters, to be sure they are honoured
    "sgd": ({}, {}),
    "momentum": ({"momentum": 0.5}, {"momentum": 0.5}),
    "adagrad": ({"eps": 1e-3}, {"eps": 1e-3}),
    "rmsprop": ({"alpha": 0.99, "eps": 1e-4}, {"alpha": 0.99, "eps": 1e-4}),
    "adam": ({"betas": (0.8, 0.99), "eps": 1e-4}, {"betas": (0.8, 0.99), "eps": 1e-4}),
}
TRACKS = ["bowl", "rosenbrock", "beale", "line_fit", "saddle"]


def _run(cls, kw, surface, lr, steps=120, dtype=torch.float64):
    """Optimise the surface with autograd; return the (steps + 1, 2) path."""
    p = torch.tensor(surface.start, dtype=dtype, requires_grad=True)
    o = cls([p], lr=lr, **kw)
    path = [p.detach().clone()]
    for _ in range(steps):
        o.zero_grad()
        surface.f(p[0], p[1]).backward()
        o.step()
        path.append(p.detach().clone())
    return torch.stack(path)


@pytest.mark.parametrize("track", TRACKS)
@pytest.mark.parametrize("name", list(PAIRS))
def test_equals_torch_optim(name, track):
    s = surfaces.SURFACES[track]
    ours, okw, ref, rkw = PAIRS[name]
    ours_path, ref_path = _run(ours, okw, s, s.lr), _run(ref, rkw, s, s.lr)
    assert torch.isfinite(ours_path).all()
    assert (ours_path[-1] - ours_path[0]).abs().max() > 1e-3, "the optimizer did not move: the test would be void"
    torch.testing.assert_close(ours_path, ref_path, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", list(PAIRS))
def test_custom_hyperparameters_and_float32(name):
    s = surfaces.SURFACES["rosenbrock"]
    ours, _, ref, _ = PAIRS[name]
    okw, rkw = CUSTOM[name]
    torch.testing.assert_close(_run(ours, okw, s, 1e-3, 150), _run(ref, rkw, s, 1e-3, 150), rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(_run(ours, okw, s, 1e-3, 100, torch.float32),
                               _run(ref, rkw, s, 1e-3, 100, torch.float32), rtol=1e-4, atol=1e-5)


def test_defaults_are_the_lessons_not_all_of_torchs():
    p = [torch.zeros(2, requires_grad=True)]
    assert opt.Momentum(p).hyper == {"momentum": 0.9}
    assert opt.RMSProp(p).hyper == {"alpha": 0.9, "eps": 1e-8}
    assert opt.Adam(p).hyper == {"beta1": 0.9, "beta2": 0.999, "eps": 1e-8}


def test_several_parameters_and_missing_grads_like_torch():
    """Two tensors of different shapes; the second has no gradient on some steps (its state must not advance)."""
    torch.manual_seed(0)
    x = torch.randn(8, 3, dtype=torch.float64)
    y = torch.randn(8, dtype=torch.float64)
    results = []
    for cls, kw in [(opt.Adam, {}), (torch.optim.Adam, {})]:
        w = torch.zeros(3, dtype=torch.float64, requires_grad=True)
        b = torch.zeros(1, dtype=torch.float64, requires_grad=True)
        o = cls([w, b], lr=0.05, **kw)
        for step in range(100):
            o.zero_grad()
            pred = x @ w + (b if step % 3 else 0.0)          # b gets no gradient on every third step
            ((pred - y) ** 2).mean().backward()
            o.step()
        results.append(torch.cat([w.detach(), b.detach()]))
    torch.testing.assert_close(results[0], results[1], rtol=1e-10, atol=1e-12)


def test_line_fit_reproduces_the_study_notes():
    """SGD, lr 0.01, w = b = 0, 100 steps on y = 2x + 1: the notes print w=1.98, b=0.73 after step 20."""
    w = torch.tensor([0.0], requires_grad=True)
    b = torch.tensor([0.0], requires_grad=True)
    x = torch.tensor(surfaces.LINE_X).reshape(-1, 1)
    y = 2 * x + 1
    o = opt.SGD([w, b], lr=0.01)
    seen = {}
    for step in range(100):
        loss = ((w * x + b - y) ** 2).mean()
        o.zero_grad()
        loss.backward()
        o.step()
        seen[step] = (round(w.item(), 2), round(b.item(), 2), round(loss.item(), 3))
    assert seen[0] == (0.28, 0.10, 33.0)
    assert seen[20][:2] == (1.98, 0.73) and seen[80][:2] == (2.06, 0.84)


def test_zero_grad_and_bad_arguments():
    p = torch.ones(2, requires_grad=True)
    o = opt.SGD([p], lr=0.1)
    (p ** 2).sum().backward()
    o.zero_grad(set_to_none=False)
    assert torch.equal(p.grad, torch.zeros(2))
    o.zero_grad()
    assert p.grad is None
    o.step()                                           # no gradient: nothing happens
    assert torch.equal(p.detach(), torch.ones(2))
    for bad in (-0.1, 0.0, float("nan"), 1e9):
        with pytest.raises(InputError):
            opt.Adam([p], lr=bad)
    with pytest.raises(InputError, match="momentum"):
        opt.Momentum([p], lr=0.1, momentum=1.0)
    with pytest.raises(InputError):
        opt.Adam([p], lr=0.1, betas=(0.9, -0.1))
    with pytest.raises(ValueError, match="empty"):
        opt.SGD([], lr=0.1)


# ---------------------------------------------------------------- the race path
def _race(track="bowl", names=opt.CLASSIC, lr=None, **kw):
    s = surfaces.SURFACES[track]
    specs = tuple(opt.RacerSpec(n, lr or s.lr) for n in names)
    return opt.race(opt.RaceConfig(track, s.start, kw.pop("steps", 200), specs, **kw))


@pytest.mark.parametrize("name", opt.CLASSIC)
def test_race_path_equals_the_classes_with_a_schedule(name):
    """The numpy race (shared rule, per-step lr) gives the same path as the tensor class driven step by step."""
    s = surfaces.SURFACES["beale"]
    sched = schedules.ScheduleConfig("warmup", warmup=20)
    result = _race("beale", (name,), steps=150, schedule=sched)
    ours, _, _, _ = PAIRS[name]
    p = torch.tensor(s.start, dtype=torch.float64, requires_grad=True)
    o = ours([p], lr=s.lr)
    path = [p.detach().clone()]
    for m in schedules.multipliers(sched, 150):
        o.lr = s.lr * m
        o.zero_grad()
        s.f(p[0], p[1]).backward()
        o.step()
        path.append(p.detach().clone())
    np.testing.assert_allclose(result.trajectories[0].path, torch.stack(path).numpy(), rtol=1e-9, atol=1e-12)


def test_race_records_state_and_effective_lr():
    tr = {t.name: t for t in _race("bowl").trajectories}
    assert set(tr["adam"].state) == {"m", "v", "m_hat", "v_hat"} and set(tr["momentum"].state) == {"velocity"}
    ada = tr["adagrad"].eff_lr
    assert np.all(np.diff(ada, axis=0) <= 1e-15), "AdaGrad's effective learning rate can only fall"
    np.testing.assert_allclose(tr["sgd"].eff_lr, 0.1)
    np.testing.assert_allclose(tr["adam"].deltas, np.diff(tr["adam"].path, axis=0))
    a = tr["adam"]   # Adam's first step has length lr per coordinate (m_hat / sqrt(v_hat) = sign(g))
    np.testing.assert_allclose(np.abs(a.deltas[0]), 0.1, rtol=1e-6)


def test_extras_run_torch_optim():
    result = _race("rosenbrock", ("adamw", "nadam"), steps=100)
    s = surfaces.SURFACES["rosenbrock"]
    p = torch.tensor(s.start, dtype=torch.float64, requires_grad=True)
    o = torch.optim.AdamW([p], lr=s.lr, eps=1e-8, weight_decay=0.01)
    for _ in range(100):
        o.zero_grad()
        s.f(p[0], p[1]).backward()
        o.step()
    np.testing.assert_allclose(result.trajectories[0].path[-1], p.detach().numpy(), rtol=1e-9)
    assert result.trajectories[1].path.shape == (101, 2)


def test_reproducible_for_a_seed():
    a, b = _race(noise=1.0, seed=3), _race(noise=1.0, seed=3)
    c = _race(noise=1.0, seed=4)
    for ta, tb, tc in zip(a.trajectories, b.trajectories, c.trajectories):
        np.testing.assert_array_equal(ta.path, tb.path)
        assert not np.allclose(ta.path, tc.path)


def test_divergence_is_reported_without_nan_or_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = _race("rosenbrock", lr=0.5, steps=300)
    rows = opt.race_summary(result)
    assert any(r.diverged_at is not None for r in rows)
    for tr, row in zip(result.trajectories, rows):
        assert np.isfinite(tr.path).all() and not np.isnan(tr.loss).any()
        if row.diverged_at is not None:
            assert row.final_gap == np.inf and row.left_box_at is not None
            assert tr.n_steps == row.diverged_at or tr.n_steps == row.diverged_at - 1


def test_fair_race_tunes_on_the_grid():
    result = _race("rosenbrock", names=("sgd", "adam"), steps=200, fair=True)
    assert set(result.tuned) == {"sgd", "adam"} and all(lr in opt.LR_GRID for lr in result.tuned.values())
    assert result.tuned["adam"] > result.tuned["sgd"]
    s = surfaces.SURFACES["rosenbrock"]
    mults, noise = np.ones(200), np.zeros((200, 2))
    best, gaps = opt.tune_lr(s, opt.RacerSpec("sgd", 1.0), s.start, mults, noise)
    for lr, gap in zip(opt.LR_GRID[:6], gaps[:6]):   # the vectorised grid equals one run per lr
        tr = opt.simulate(s, opt.RacerSpec("sgd", lr), s.start, lr * mults, noise)
        expected = np.inf if tr.diverged_at else tr.loss[-1] - s.f_min
        assert gap == pytest.approx(expected, rel=1e-9) if np.isfinite(expected) else gap == np.inf
    assert best == opt.LR_GRID[int(np.argmin(gaps))]


def test_torch_grid_equals_single_runs():
    s = surfaces.SURFACES["bowl"]
    mults, noise, grid = np.ones(60), np.zeros((60, 2)), (0.01, 0.1, 1.0)
    gaps = opt._tune_torch(s, opt.RacerSpec("nadam", 0.1), s.start, mults, noise, grid)
    single = [opt.simulate_torch(s, opt.RacerSpec("nadam", lr), s.start, lr * mults, noise).loss[-1] for lr in grid]
    np.testing.assert_allclose(gaps, single, rtol=1e-9)


@pytest.mark.parametrize("change, code", [
    (dict(steps=0), "optimizers.err_steps"),
    (dict(start=(10.0, 0.0)), "optimizers.err_start"),
    (dict(racers=()), "optimizers.err_no_racers"),
    (dict(racers=(opt.RacerSpec("sgd", -1.0),)), "optimizers.err_lr"),
    (dict(racers=(opt.RacerSpec("sgd", 1e4),)), "optimizers.err_lr_huge"),
    (dict(surface="moon"), "optimizers.err_surface"),
])
def test_bad_race_input(change, code):
    cfg = opt.RaceConfig(**{**dict(surface="bowl", start=(1.0, 1.0), steps=10,
                                   racers=(opt.RacerSpec("sgd", 0.1),)), **change})
    with pytest.raises(InputError) as err:
        opt.race(cfg)
    assert err.value.code == code


# ---------------------------------------------------------------- surfaces
@pytest.mark.parametrize("key", list(surfaces.SURFACES))
def test_gradient_matches_autograd(key):
    s = surfaces.SURFACES[key]
    rng = np.random.default_rng(0)
    for _ in range(20):
        x0 = rng.uniform(*s.x_range)
        y0 = rng.uniform(*s.y_range)
        x = torch.tensor(x0, dtype=torch.float64, requires_grad=True)
        y = torch.tensor(y0, dtype=torch.float64, requires_grad=True)
        s.f(x, y).backward()
        gx, gy = s.grad(x0, y0)
        assert gx == pytest.approx(x.grad.item(), rel=1e-9, abs=1e-9)
        assert gy == pytest.approx(y.grad.item(), rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("key", list(surfaces.SURFACES))
def test_known_minima(key):
    s = surfaces.SURFACES[key]
    for mx, my in s.minima:
        assert s.f(mx, my) == pytest.approx(s.f_min, abs=1e-12)
        assert np.allclose(s.grad(mx, my), 0.0, atol=1e-9)
        assert s.contains(mx, my) and s.contains(*s.start)
    grid = surfaces.surface_grid(s, 201)
    assert grid.loss.min() >= s.f_min - 1e-12, "a grid point is below the stated global minimum"
    assert grid.loss.shape == (201, 201) and np.isfinite(grid.level).all()
    assert s.distance(np.array(s.minima)).max() == pytest.approx(0.0)


def test_saddle_and_rastrigin_shapes():
    s = surfaces.SURFACES["saddle"]
    assert s.grad(0.0, 0.0) == (0.0, 0.0) and s.f(0.0, 0.0) > s.f_min          # a stationary point, not a minimum
    r = surfaces.SURFACES["rastrigin"]
    assert r.f(1.0, 1.0) == pytest.approx(2.0) and np.allclose(r.grad(0.0, 0.0), 0)   # near-integer local minima


# ---------------------------------------------------------------- schedules
def _torch_lrs(make, steps):
    p = torch.zeros(1, requires_grad=True)
    o = torch.optim.SGD([p], lr=1.0)
    sched = make(o)
    lrs = []
    for _ in range(steps):
        lrs.append(o.param_groups[0]["lr"])
        o.step()
        sched.step()
    return np.array(lrs)


@pytest.mark.parametrize("steps", [0, -5, 0.5, [1, 2, 0], np.array([3.0, np.nan]), float("inf")])
def test_transformer_lr_rejects_steps_below_one(steps):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no divide-by-zero warning on the way: a clear error instead
        with pytest.raises(InputError) as err:
            schedules.transformer_lr(steps, 512, 4000)
    assert err.value.code == "optimizers.err_lr_step"
    assert "1" in i18n.t(err.value.code, "zh", **err.value.params)


@pytest.mark.parametrize("d_model, warmup", [(0, 4000), (512, 0), (512, -1)])
def test_transformer_lr_rejects_bad_sizes(d_model, warmup):
    with pytest.raises(InputError) as err:
        schedules.transformer_lr(10, d_model, warmup)
    assert err.value.code == "optimizers.err_lr_args"


def test_schedules_equal_torch_schedulers():
    cfg = schedules.ScheduleConfig("step", step_size=30, gamma=0.3)
    np.testing.assert_allclose(schedules.multipliers(cfg, 200),
                               _torch_lrs(lambda o: torch.optim.lr_scheduler.StepLR(o, 30, 0.3), 200), rtol=1e-12)
    cfg = schedules.ScheduleConfig("cosine", min_ratio=0.1)
    ref = _torch_lrs(lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=200, eta_min=0.1), 200)
    np.testing.assert_allclose(schedules.multipliers(cfg, 200), ref, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(schedules.multipliers(schedules.ScheduleConfig(), 5), np.ones(5))


def test_transformer_warmup_formula():
    assert schedules.transformer_lr(4000, 512, 4000) == pytest.approx(512 ** -0.5 * 4000 ** -0.5)
    assert schedules.transformer_lr(100, 512, 4000) == pytest.approx(512 ** -0.5 * 100 * 4000 ** -1.5)
    assert schedules.transformer_lr(10_000, 512, 4000) == pytest.approx(512 ** -0.5 * 10_000 ** -0.5)
    m = schedules.multipliers(schedules.ScheduleConfig("warmup", warmup=50), 300)
    assert m.argmax() == 49 and m.max() == pytest.approx(1.0)              # peak at t = warmup (index warmup - 1)
    assert np.all(np.diff(m[:49]) > 0) and np.all(np.diff(m[49:]) < 0)
    with pytest.raises(InputError):
        schedules.multipliers(schedules.ScheduleConfig("warmup", warmup=0), 10)


# ---------------------------------------------------------------- figures
def _labels():
    keys = ("x", "y", "loss", "log_level", "minimum", "start", "click", "play", "pause", "step", "loss_title",
            "loss_gap", "dist_title", "distance", "diverged", "eff_lr", "state_title", "sched_title", "paper_title",
            "lr", "data", "fit_x", "fit_y", "contour_title", "fit_title")
    return {k: k.upper() for k in keys}


def test_race_figure_animation():
    result = _race("line_fit", steps=120)
    s = surfaces.SURFACES["line_fit"]
    names = {n: n for n in opt.CLASSIC}
    fig = plots.race_figure(surfaces.surface_grid(s, 50), surfaces.surface_grid(s, 11), result.trajectories, names,
                            _labels(), x_range=s.x_range, y_range=s.y_range, minima=s.minima, start=s.start,
                            fit=(np.array(surfaces.LINE_X), np.array(surfaces.LINE_Y)), n_frames=30)
    d = fig.to_dict()
    assert len(d["frames"]) == 31 and d["frames"][-1]["name"] == "120"
    every = d["frames"][0]["traces"]
    assert every == list(range(len(d["data"]))) and all(len(f["data"]) == len(d["data"]) for f in d["frames"])
    n_static = len(d["data"]) - 15                                               # 15 moving: trails, heads, lines
    assert all(f["data"][i] == {} for f in d["frames"] for i in range(n_static))  # static traces: re-plotted only
    assert len(d["layout"]["updatemenus"][0]["buttons"]) == 2 and len(d["layout"]["sliders"][0]["steps"]) == 31
    click = d["data"][1]                           # the click grid: an invisible heatmap of the coarse grid's loss
    assert click["type"] == "heatmap" and click["opacity"] == 0 and click["meta"] == {"tiles": "xy"}
    assert _values(click["z"]).size == 11 * 11 and "%{z" in click["hovertemplate"]
    assert d["layout"]["images"][0]["source"].startswith("data:image/png;base64,")
    png = base64.b64decode(d["layout"]["images"][0]["source"].split(",", 1)[1])
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    last_head = d["frames"][-1]["data"][n_static + 5]   # SGD's head in the last frame is the end of its path
    assert last_head["x"][0] == pytest.approx(result.trajectories[0].path[-1, 0])
    assert fig.to_json()                         # serialisable as st.plotly_chart will do it


def _values(v) -> np.ndarray:
    """A figure array as to_dict gives it: a list, an array, or plotly's base64 typed array {dtype, bdata}."""
    if isinstance(v, dict):
        return np.frombuffer(base64.b64decode(v["bdata"]), dtype=v["dtype"])
    return np.asarray(v)


def test_race_frames_thin_passing_trails_and_end_on_the_figure():
    """Frames a play passes through carry at most FRAME_TRAIL_POINTS points per trail, each ending exactly at the
    racer's position at that step; the last frame is the figure itself (its trails at full resolution)."""
    result = _race("rosenbrock", lr=0.001, steps=600)
    s = surfaces.SURFACES["rosenbrock"]
    names = {n: n for n in opt.CLASSIC}
    fig = plots.race_figure(surfaces.surface_grid(s, 40), surfaces.surface_grid(s, 7), result.trajectories, names,
                            _labels(), x_range=s.x_range, y_range=s.y_range, minima=s.minima, start=s.start)
    trajs, d = result.trajectories, fig.to_dict()
    first_trail = len(d["data"]) - 2 * len(trajs)                               # trails, then heads
    steps = [int(f["name"]) for f in d["frames"]]
    for frame, step in zip(d["frames"][:-1], steps[:-1]):
        for tr, trace in zip(trajs, frame["data"][first_trail:first_trail + len(trajs)]):
            x, y = _values(trace["x"]), _values(trace["y"])
            assert len(x) <= plots.FRAME_TRAIL_POINTS
            k = min(step, tr.n_steps)
            assert (x[-1], y[-1]) == pytest.approx((tr.path[k, 0], tr.path[k, 1]), rel=1e-6)
            assert (x[0], y[0]) == pytest.approx((tr.path[0, 0], tr.path[0, 1]), rel=1e-6)
    last = d["frames"][-1]["data"][first_trail:first_trail + len(trajs)]
    for trace, own in zip(last, d["data"][first_trail:first_trail + len(trajs)]):
        x, own_x = _values(trace["x"]), _values(own["x"])
        assert len(x) == len(own_x) > plots.FRAME_TRAIL_POINTS
        np.testing.assert_allclose(x, own_x, rtol=1e-6)


def _frames_from_recipe(d: dict) -> list[dict]:
    """The frames as meta.trail_frames says to make them from the figure's own faint paths (the chart element's rule,
    written out here independently of race_figure's frames)."""
    r = d["layout"]["meta"]["trail_frames"]
    paths = [(_values(d["data"][i]["x"]), _values(d["data"][i]["y"])) for i in r["paths"]]
    frames = []
    for f, s in enumerate(r["steps"]):
        points = r["last_points"] if f == len(r["steps"]) - 1 else r["points"]
        trails, heads = [], []
        for x, y in paths:
            e = min(s, len(x) - 1)
            k = min(e + 1, points)
            idx = [0] if k < 2 else [(2 * i * e + k - 1) // (2 * (k - 1)) for i in range(k)]
            trails.append((x[idx], y[idx]))
            heads.append((x[e], y[e]))
        lines = [] if r["line_x"] is None else [(np.array(r["line_x"]), w * np.array(r["line_x"]) + b)
                                                for w, b in heads]
        moving = trails + [(np.array([hx]), np.array([hy])) for hx, hy in heads] + lines
        frames.append(dict(name=str(s), data=[{}] * r["first"] + [dict(x=x, y=y) for x, y in moving]))
    return frames


@pytest.mark.parametrize("track,lr,steps", [("line_fit", None, 120), ("rosenbrock", 0.5, 100), ("beale", None, 1)])
def test_race_frames_follow_from_the_recipe(track, lr, steps):
    """meta.trail_frames (what the browser makes the frames from) gives the figure's own frames: every trace of
    every frame, a racer that diverged (a shorter path) and a race of one step included."""
    result = _race(track, lr=lr, steps=steps)
    s = surfaces.SURFACES[track]
    fit = (np.array(surfaces.LINE_X), np.array(surfaces.LINE_Y)) if track == "line_fit" else None
    fig = plots.race_figure(surfaces.surface_grid(s, 30), surfaces.surface_grid(s, 7), result.trajectories,
                            {n: n for n in opt.CLASSIC}, _labels(), x_range=s.x_range, y_range=s.y_range,
                            minima=s.minima, start=s.start, fit=fit)
    d = fig.to_dict()
    if track == "rosenbrock":
        assert any(tr.diverged_at is not None for tr in result.trajectories), "a racer must diverge here"
    faint = [d["data"][i] for i in d["layout"]["meta"]["trail_frames"]["paths"]]
    for tr, trace in zip(result.trajectories, faint):
        np.testing.assert_array_equal(_values(trace["x"]), tr.path[:, 0])  # the recipe's sources are the paths
    made = _frames_from_recipe(d)
    assert [f["name"] for f in made] == [f["name"] for f in d["frames"]]
    for ours, theirs in zip(made, d["frames"]):
        assert len(ours["data"]) == len(theirs["data"]) == len(d["data"]) == len(theirs["traces"])
        for a, b in zip(ours["data"], theirs["data"]):
            assert (a == {}) == (b == {})
            if a:  # the figure's trails are float32: equal to that precision
                np.testing.assert_allclose(a["x"], _values(b["x"]), rtol=1e-6, atol=1e-30)
                np.testing.assert_allclose(a["y"], _values(b["y"]), rtol=1e-6, atol=1e-30)


def test_trail_indices():
    """round(i s / (k - 1)), halves up: from 0 to s, k of them, never repeated."""
    assert plots.trail_indices(0, 80).tolist() == [0]
    assert plots.trail_indices(3, 80).tolist() == [0, 1, 2, 3]
    assert plots.trail_indices(5, 3).tolist() == [0, 3, 5]            # 2.5 rounds up
    for s in (1, 79, 80, 81, 300, 1999):
        idx = plots.trail_indices(s, 80)
        assert len(idx) == min(s + 1, 80) and idx[0] == 0 and idx[-1] == s and (np.diff(idx) > 0).all()
        np.testing.assert_allclose(idx, np.arange(len(idx)) * s / max(len(idx) - 1, 1), atol=0.5)


def test_banded_image_orientation():
    level = np.tile(np.linspace(0, 1, 30)[:, None], (1, 20))          # grows with y (row index)
    rgb, lo, hi = plots.banded_image(level, n_bands=5)
    assert rgb.shape == (30, 20, 3) and (lo, hi) == (0.0, 1.0)
    assert rgb[0].mean() > rgb[-1].mean(), "the top row (largest y) must be the bright end of Viridis"


def test_curve_figures_drop_overflow():
    result = _race("rosenbrock", lr=0.5, steps=100)
    names = {n: n for n in opt.CLASSIC}
    surface = surfaces.get_surface("rosenbrock")
    dist = {tr.name: surface.distance(tr.path) for tr in result.trajectories}
    fig = plots.curves_figure(result.trajectories, names, 0.0, dist, _labels())
    loss = [tr for tr in fig.data if tr.yaxis == "y"]
    for trace in loss:
        assert np.isfinite(np.asarray(trace.y, dtype=float)).all()
    diverged = [tr for tr in result.trajectories if tr.diverged_at is not None]
    assert diverged, "the race must have a racer that diverged"
    for panel in ("y", "y2"):  # a crossed mark in both panels, at the last finite value
        marks = [tr for tr in fig.data if tr.yaxis == panel and tr.mode == "markers"]
        assert len(marks) == len(diverged) and all(m.marker.symbol == "x" for m in marks)


def test_curves_figure_two_panels_one_legend():
    """Loss gap on top, distance below, over the same steps, each racer one legend entry for both panels."""
    result = _race("bowl", steps=50)
    names = {n: n.upper() for n in opt.CLASSIC}
    surface = surfaces.get_surface("bowl")
    dist = {tr.name: surface.distance(tr.path) for tr in result.trajectories}
    fig = plots.curves_figure(result.trajectories, names, surface.f_min, dist, _labels())
    lines = [tr for tr in fig.data if tr.mode == "lines"]
    assert [tr.name for tr in lines if tr.showlegend is not False] == [names[n] for n in opt.CLASSIC]
    for tr_, top, bottom in zip(result.trajectories, lines[0::2], lines[1::2]):
        assert (top.yaxis, bottom.yaxis) == ("y", "y2") and top.legendgroup == bottom.legendgroup == tr_.name
        np.testing.assert_allclose(top.y, np.maximum(tr_.loss - surface.f_min, plots.LOG_FLOOR))
        np.testing.assert_allclose(bottom.y, np.maximum(dist[tr_.name], plots.LOG_FLOOR))
        assert top.x is None and bottom.x is None and (top.x0, top.dx) == (bottom.x0, bottom.dx) == (0, 1)
        assert len(top.y) == len(bottom.y) == tr_.n_steps + 1  # steps 0 .. n, as x0 and dx
    assert fig.layout.xaxis2.matches == "x" or fig.layout.xaxis.matches == "x2"  # shared steps
    assert fig.layout.yaxis.type == fig.layout.yaxis2.type == "log"
    assert [a.text for a in fig.layout.annotations] == ["LOSS_TITLE", "DIST_TITLE"]
    state = plots.state_figure(result.trajectories[-1], {k: k for k in (
        "grad", "velocity", "sum_sq", "square_avg", "m", "m_hat", "v", "v_hat", "eff_lr")}, _labels())
    assert len(state.data) == 2 * (1 + 4 + 1)                                  # g, m, m_hat, v, v_hat, eff lr
    assert math.isclose(len(plots.frame_steps(500, 40)), 41)
