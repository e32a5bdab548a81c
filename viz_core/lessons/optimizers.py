"""The five classic optimizers, written out from their formulas, and the race that runs them on a 2-D surface.

Each update rule is written once, as a function on arrays, and serves two callers:
  * the public classes SGD, Momentum, AdaGrad, RMSProp, Adam (torch tensors: constructor(params, lr, ...),
    zero_grad(), step(), step for step the same as torch.optim.SGD / SGD(momentum) / Adagrad / RMSprop / Adam);
  * the race (numpy float64 arrays of shape (..., 2)): fast, and vectorised over a grid of learning rates.

The rules, with g the gradient, t the step (from 1) and all operations per coordinate:
  SGD       theta <- theta - lr g
  Momentum  v <- mu v + g;                 theta <- theta - lr v
  AdaGrad   G <- G + g^2;                  theta <- theta - lr g / (sqrt(G) + eps)
  RMSProp   s <- alpha s + (1 - alpha) g^2; theta <- theta - lr g / (sqrt(s) + eps)
  Adam      m <- b1 m + (1 - b1) g;  v <- b2 v + (1 - b2) g^2;  m_hat = m / (1 - b1^t);  v_hat = v / (1 - b2^t);
            theta <- theta - lr m_hat / (sqrt(v_hat) + eps)
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from ..errors import InputError
from .schedules import ScheduleConfig, multipliers
from .surfaces import Surface, get_surface

CLASSIC = ("sgd", "momentum", "adagrad", "rmsprop", "adam")   # the five hand-written optimizers
EXTRAS = ("adamw", "nadam")                                   # torch.optim racers, optional
MAX_LR = 100.0          # a larger learning rate is refused (anything above ~10 diverges on every surface here)
MAX_STEPS = 5000        # race length bound
DIVERGE_FACTOR = 1e3    # a path farther than this many plot widths from the box is called diverged
LR_GRID = tuple(float(v) for v in np.logspace(-4, 1, 16))    # fair race: 1e-4 .. 10, three values per decade

# Hyperparameters besides lr, with the lessons' defaults (not all of torch's: RMSprop alpha 0.9, eps 1e-8).
DEFAULTS: dict[str, dict[str, float]] = {
    "sgd": {},
    "momentum": {"momentum": 0.9},
    "adagrad": {"eps": 1e-8},
    "rmsprop": {"alpha": 0.9, "eps": 1e-8},
    "adam": {"beta1": 0.9, "beta2": 0.999, "eps": 1e-8},
    "adamw": {"beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.01},
    "nadam": {"beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "momentum_decay": 4e-3},
}


# ---------------------------------------------------------------- validation
def check_lr(lr: float) -> None:
    if not isinstance(lr, (int, float)) or not math.isfinite(lr) or lr <= 0:
        raise InputError("optimizers.err_lr", f"the learning rate must be a positive number, got {lr}", lr=lr)
    if lr > MAX_LR:
        raise InputError("optimizers.err_lr_huge", f"learning rate {lr} is above {MAX_LR}; choose a smaller one",
                         lr=lr, max=MAX_LR)


def _check_fraction(name: str, value: float) -> None:
    if not 0.0 <= value < 1.0:
        raise InputError("optimizers.err_fraction", f"{name} must lie in [0, 1), got {value}", name=name, value=value)


def check_hyper(name: str, hyper: dict[str, float]) -> None:
    """Momentum, alpha and betas in [0, 1); eps and weight decay >= 0; no unknown names."""
    unknown = set(hyper) - set(DEFAULTS[name])
    if unknown:
        raise TypeError(f"{name} does not take {sorted(unknown)}; it takes {sorted(DEFAULTS[name])}")
    for key in ("momentum", "alpha", "beta1", "beta2"):
        if key in hyper:
            _check_fraction(key, hyper[key])
    for key in ("eps", "weight_decay", "momentum_decay"):
        if key in hyper and not hyper[key] >= 0:
            raise InputError("optimizers.err_negative", f"{key} must be >= 0, got {hyper[key]}", name=key,
                             value=hyper[key])


# ---------------------------------------------------------------- the update rules (numpy or torch)
def _sqrt(x):
    return x.sqrt() if isinstance(x, torch.Tensor) else np.sqrt(x)


def _zeros(x):
    return torch.zeros_like(x) if isinstance(x, torch.Tensor) else np.zeros(np.shape(x))


def sgd_rule(p, g, state, lr):
    """theta <- theta - lr g. Returns (new theta, effective per-coordinate learning rate)."""
    return p - lr * g, lr + 0 * g


def momentum_rule(p, g, state, lr, momentum=0.9):
    """Heavy ball: v <- mu v + g, theta <- theta - lr v (torch.optim.SGD with momentum, dampening 0)."""
    v = state["velocity"] * momentum + g if "velocity" in state else g + 0
    state["velocity"] = v
    return p - lr * v, lr + 0 * g


def adagrad_rule(p, g, state, lr, eps=1e-8):
    """G <- G + g^2 (sum of every squared gradient so far), theta <- theta - lr g / (sqrt(G) + eps)."""
    state["sum_sq"] = (state["sum_sq"] if "sum_sq" in state else _zeros(g)) + g * g
    denom = _sqrt(state["sum_sq"]) + eps
    return p - lr * g / denom, lr / denom


def rmsprop_rule(p, g, state, lr, alpha=0.9, eps=1e-8):
    """s <- alpha s + (1 - alpha) g^2 (moving average), theta <- theta - lr g / (sqrt(s) + eps)."""
    s = state["square_avg"] if "square_avg" in state else _zeros(g)
    state["square_avg"] = s * alpha + (1 - alpha) * g * g
    denom = _sqrt(state["square_avg"]) + eps
    return p - lr * g / denom, lr / denom


def adam_rule(p, g, state, lr, beta1=0.9, beta2=0.999, eps=1e-8):
    """m, v moving averages of g and g^2, bias-corrected by 1 - beta^t; theta <- theta - lr m_hat/(sqrt(v_hat)+eps).

    eps is added after the square root, as in torch.optim.Adam.
    """
    t = state["step"]
    m, v = (state["m"], state["v"]) if "m" in state else (_zeros(g), _zeros(g))
    state["m"] = m * beta1 + (1 - beta1) * g
    state["v"] = v * beta2 + (1 - beta2) * g * g
    state["m_hat"] = state["m"] / (1 - beta1 ** t)
    state["v_hat"] = state["v"] / (1 - beta2 ** t)
    denom = _sqrt(state["v_hat"]) + eps
    return p - lr * state["m_hat"] / denom, lr / denom


RULES = {"sgd": sgd_rule, "momentum": momentum_rule, "adagrad": adagrad_rule, "rmsprop": rmsprop_rule,
         "adam": adam_rule}


def rule_step(name: str, p, g, state: dict, lr, hyper: dict):
    """One update of optimizer `name`: bumps state['step'] and applies its rule. Returns (new p, effective lr)."""
    state["step"] = state.get("step", 0) + 1
    return RULES[name](p, g, state, lr, **hyper)


# ---------------------------------------------------------------- the public classes (torch tensors)
class _Optimizer:
    """Shared plumbing: the parameter list, per-parameter state and zero_grad(); subclasses name their rule."""
    name = ""

    def __init__(self, params, lr: float, **hyper):
        self.params = list(params)
        if not self.params:
            raise ValueError("the optimizer got an empty parameter list")
        check_lr(lr)
        check_hyper(self.name, hyper)
        self.lr, self.hyper = lr, hyper
        self.state: list[dict] = [{} for _ in self.params]   # per parameter: step count and buffers

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Forget the gradients of the last backward() (as torch: set them to None, or to zero)."""
        for p in self.params:
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                p.grad.zero_()

    @torch.no_grad()
    def step(self) -> None:
        """Apply the update rule once to every parameter that has a gradient."""
        for p, state in zip(self.params, self.state):
            if p.grad is not None:
                new_p, _ = rule_step(self.name, p, p.grad, state, self.lr, self.hyper)
                p.copy_(new_p)


class SGD(_Optimizer):
    """Plain gradient descent: theta <- theta - lr g (torch.optim.SGD(params, lr))."""
    name = "sgd"

    def __init__(self, params, lr: float = 0.01):
        super().__init__(params, lr)


class Momentum(_Optimizer):
    """Gradient descent with momentum: v <- mu v + g, theta <- theta - lr v (torch.optim.SGD(momentum=mu))."""
    name = "momentum"

    def __init__(self, params, lr: float = 0.01, momentum: float = 0.9):
        super().__init__(params, lr, momentum=momentum)


class AdaGrad(_Optimizer):
    """AdaGrad: G <- G + g^2, theta <- theta - lr g / (sqrt(G) + eps) (torch.optim.Adagrad(eps=eps))."""
    name = "adagrad"

    def __init__(self, params, lr: float = 0.01, eps: float = 1e-8):
        super().__init__(params, lr, eps=eps)


class RMSProp(_Optimizer):
    """RMSProp: s <- alpha s + (1-alpha) g^2, theta <- theta - lr g / (sqrt(s) + eps) (torch.optim.RMSprop(alpha))."""
    name = "rmsprop"

    def __init__(self, params, lr: float = 0.01, alpha: float = 0.9, eps: float = 1e-8):
        super().__init__(params, lr, alpha=alpha, eps=eps)


class Adam(_Optimizer):
    """Adam: bias-corrected moving averages m_hat, v_hat; theta <- theta - lr m_hat / (sqrt(v_hat) + eps)."""
    name = "adam"

    def __init__(self, params, lr: float = 0.01, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        super().__init__(params, lr, beta1=betas[0], beta2=betas[1], eps=eps)


# ---------------------------------------------------------------- the race
@dataclass(frozen=True)
class RacerSpec:
    """One racer: which optimizer, its base learning rate and its other hyperparameters (hashable for caching)."""
    name: str                                    # one of CLASSIC + EXTRAS
    lr: float                                    # base learning rate (a schedule multiplies it)
    hyper: tuple[tuple[str, float], ...] = ()    # e.g. (("momentum", 0.9),); missing names take DEFAULTS

    def hyper_dict(self) -> dict[str, float]:
        return {**DEFAULTS[self.name], **dict(self.hyper)}


@dataclass(frozen=True)
class RaceConfig:
    surface: str = "bowl"                         # key of viz_core.lessons.surfaces.SURFACES
    start: tuple[float, float] = (-4.5, 2.0)      # start point, inside the surface's box
    steps: int = 300                              # number of updates
    racers: tuple[RacerSpec, ...] = ()            # who races
    schedule: ScheduleConfig = ScheduleConfig()   # learning-rate schedule shared by all racers
    noise: float = 0.0                            # std of Gaussian noise added to every gradient (0 = exact)
    seed: int = 0                                 # seed of that noise: same seed, same race
    fair: bool = False                            # tune each racer's lr on LR_GRID first


@dataclass
class Trajectory:
    """One racer's run. Arrays stop at divergence, so they hold finite numbers only."""
    name: str
    lr: float                                     # the base lr used (tuned when the race is fair)
    path: np.ndarray                              # (n + 1, 2) positions, path[0] = start
    loss: np.ndarray                              # (n + 1,) f at each position (inf where it overflowed)
    grads: np.ndarray                             # (n, 2) gradient used at each update
    deltas: np.ndarray                            # (n, 2) the step taken, theta_t - theta_{t-1}
    eff_lr: np.ndarray                            # (n, 2) effective learning rate per coordinate
    state: dict[str, np.ndarray] = field(default_factory=dict)   # name -> (n, 2) buffers after each update
    diverged_at: int | None = None                # the update at which the run blew up, if it did

    @property
    def n_steps(self) -> int:
        return len(self.path) - 1


@dataclass
class RaceResult:
    config: RaceConfig
    trajectories: list[Trajectory]
    tuned: dict[str, float] = field(default_factory=dict)       # name -> tuned lr (fair race only)
    lr_schedule: np.ndarray = field(default_factory=lambda: np.ones(0))   # (steps,) the multiplier s(t)


def _noise(cfg: RaceConfig) -> np.ndarray:
    """Gradient noise for every step, (steps, 2): zeros, or N(0, noise^2) drawn from the seed."""
    if cfg.noise <= 0:
        return np.zeros((cfg.steps, 2))
    return cfg.noise * np.random.default_rng(cfg.seed).standard_normal((cfg.steps, 2))


def _is_off(surface: Surface, p: np.ndarray) -> np.ndarray:
    """True where p (..., 2) is not finite or lies absurdly far outside the plotted box -> (...)."""
    centre = np.array([sum(surface.x_range) / 2, sum(surface.y_range) / 2])
    far = np.linalg.norm(p - centre, axis=-1) > DIVERGE_FACTOR * surface.span
    return ~np.isfinite(p).all(axis=-1) | far


def _grad(surface: Surface, p: np.ndarray) -> np.ndarray:
    gx, gy = surface.grad(p[..., 0], p[..., 1])
    return np.stack([gx, gy], axis=-1)                                  # (..., 2)


def _point_checker(surface: Surface):
    """A fast test for one point (2,): True if it is not finite or absurdly far outside the box (see _is_off)."""
    cx, cy = sum(surface.x_range) / 2, sum(surface.y_range) / 2
    bound = DIVERGE_FACTOR * surface.span

    def off(p: np.ndarray) -> bool:
        x, y = p.tolist()
        return not (math.isfinite(x) and math.isfinite(y)) or math.hypot(x - cx, y - cy) > bound
    return off


def simulate(surface: Surface, spec: RacerSpec, start, lrs: np.ndarray, noise: np.ndarray) -> Trajectory:
    """Run a classic optimizer with the shared rule on numpy float64: lrs (steps,) is the lr at each update."""
    if spec.name in EXTRAS:
        return simulate_torch(surface, spec, start, lrs, noise)
    hyper, state, off = spec.hyper_dict(), {}, _point_checker(surface)
    p = np.asarray(start, dtype=float)                                  # (2,)
    path, grads, deltas, effs, states, diverged = [p], [], [], [], [], None
    with np.errstate(all="ignore"):
        for t, lr in enumerate(lrs.tolist(), start=1):
            g = np.array(surface.grad(p[0], p[1])) + noise[t - 1]      # (2,)
            new_p, eff = rule_step(spec.name, p, g, state, lr, hyper)
            blown = off(new_p)
            if blown and not np.isfinite(new_p).all():    # overflow: keep the last finite point only
                diverged = t
                break
            path.append(new_p), grads.append(g), deltas.append(new_p - p), effs.append(eff)
            states.append({k: v for k, v in state.items() if k != "step"})
            p = new_p
            if blown:                                      # finite but far away: drawn, leaving the plot
                diverged = t
                break
        return _trajectory(surface, spec, path, grads, deltas, effs, states, diverged)


def _trajectory(surface, spec, path, grads, deltas, effs, states, diverged) -> Trajectory:
    path = np.array(path)                                                # (n + 1, 2)
    with np.errstate(all="ignore"):
        loss = surface.f(path[:, 0], path[:, 1])                         # (n + 1,)
    loss = np.where(np.isfinite(loss), loss, np.inf)
    state = {k: np.array([s[k] for s in states]) for k in (states[0] if states else {})}   # name -> (n, 2)
    as2 = lambda rows: np.array(rows).reshape(-1, 2)                     # noqa: E731  (n, 2) even when n = 0
    return Trajectory(spec.name, spec.lr, path, loss, as2(grads), as2(deltas), as2(effs), state, diverged)


def _torch_optimizer(spec: RacerSpec, params: list[torch.Tensor], lrs: list[float]) -> torch.optim.Optimizer:
    """torch.optim.AdamW or NAdam over params, one parameter group (with its own lr) per tensor."""
    hp = spec.hyper_dict()
    groups = [{"params": [p], "lr": float(lr)} for p, lr in zip(params, lrs)]
    kw = dict(betas=(hp["beta1"], hp["beta2"]), eps=hp["eps"])
    if spec.name == "adamw":
        return torch.optim.AdamW(groups, weight_decay=hp["weight_decay"], **kw)
    return torch.optim.NAdam(groups, momentum_decay=hp["momentum_decay"], **kw)


def simulate_torch(surface: Surface, spec: RacerSpec, start, lrs: np.ndarray, noise: np.ndarray) -> Trajectory:
    """Run torch.optim.AdamW or NAdam on a float64 tensor (2,) with the analytic gradient."""
    hp = spec.hyper_dict()
    p = torch.tensor(np.asarray(start, dtype=float), dtype=torch.float64)   # (2,)
    opt = _torch_optimizer(spec, [p], [spec.lr])
    path, grads, deltas, effs, states, diverged = [p.numpy().copy()], [], [], [], [], None
    with np.errstate(all="ignore"):
        for t, lr in enumerate(lrs, start=1):
            old = p.numpy().copy()
            g = _grad(surface, old) + noise[t - 1]
            p.grad = torch.from_numpy(g)
            opt.param_groups[0]["lr"] = float(lr)
            opt.step()
            new_p = p.numpy().copy()
            if not np.isfinite(new_p).all():
                diverged = t
                break
            s = opt.state[p]
            v_hat = s["exp_avg_sq"].numpy() / (1 - hp["beta2"] ** t)
            path.append(new_p), grads.append(g), deltas.append(new_p - old)
            effs.append(lr / (np.sqrt(v_hat) + hp["eps"]))
            states.append({"m": s["exp_avg"].numpy().copy(), "v": s["exp_avg_sq"].numpy().copy(), "v_hat": v_hat})
            if _is_off(surface, new_p):
                diverged = t
                break
        return _trajectory(surface, spec, path, grads, deltas, effs, states, diverged)


def _tune_torch(surface: Surface, spec: RacerSpec, start, mults, noise, grid) -> np.ndarray:
    """Final loss gaps (L,) of a torch.optim racer for every lr of grid: one parameter group per lr."""
    P = torch.tensor(np.tile(np.asarray(start, dtype=float), (len(grid), 1)))   # (L, 2)
    rows = list(P.unbind(0))                                                    # L views (2,) into P
    opt = _torch_optimizer(spec, rows, grid)
    off = np.zeros(len(grid), dtype=bool)
    with np.errstate(all="ignore"):
        for t, m in enumerate(mults, start=1):
            G = torch.from_numpy(_grad(surface, P.numpy()) + noise[t - 1])     # (L, 2)
            for row, g, group, lr in zip(rows, G.unbind(0), opt.param_groups, grid):
                row.grad, group["lr"] = g, lr * float(m)
            opt.step()
            off |= _is_off(surface, P.numpy())
        gaps = surface.gap(P.numpy())                                          # (L,)
    return np.where(off | ~np.isfinite(gaps), np.inf, gaps)


def tune_lr(surface: Surface, spec: RacerSpec, start, mults: np.ndarray, noise: np.ndarray,
            grid: tuple[float, ...] = LR_GRID) -> tuple[float, np.ndarray]:
    """Fair race: the lr from `grid` whose run ends with the lowest loss (a diverged run never wins).

    Runs the whole grid at once: p has shape (L, 2), lr (L, 1). Returns (best lr, final loss gap per lr (L,)).
    """
    lrs = np.asarray(grid)[:, None]                                      # (L, 1)
    if spec.name in EXTRAS:
        gaps = _tune_torch(surface, spec, start, mults, noise, grid)
        return float(grid[int(np.argmin(gaps))]), gaps
    p = np.tile(np.asarray(start, dtype=float), (len(grid), 1))          # (L, 2)
    hyper, state, off = spec.hyper_dict(), {}, np.zeros(len(grid), dtype=bool)
    with np.errstate(all="ignore"):
        for t, m in enumerate(mults, start=1):
            p, _ = rule_step(spec.name, p, _grad(surface, p) + noise[t - 1], state, lrs * m, hyper)
            off |= _is_off(surface, p)                                   # (L,)
        gaps = surface.gap(p)                                            # (L,)
    gaps = np.where(off | ~np.isfinite(gaps), np.inf, gaps)
    return float(grid[int(np.argmin(gaps))]), gaps


def validate_race(cfg: RaceConfig) -> Surface:
    """Check a race config; raise InputError with a message the page can show."""
    surface = get_surface(cfg.surface)
    if not (1 <= cfg.steps <= MAX_STEPS):
        raise InputError("optimizers.err_steps", f"steps must be between 1 and {MAX_STEPS}, got {cfg.steps}",
                         steps=cfg.steps, max=MAX_STEPS)
    x, y = cfg.start
    if not surface.contains(x, y):
        raise InputError("optimizers.err_start", f"start ({x}, {y}) lies outside the plotted box "
                         f"x {surface.x_range}, y {surface.y_range}", x=x, y=y, x0=surface.x_range[0],
                         x1=surface.x_range[1], y0=surface.y_range[0], y1=surface.y_range[1])
    if not cfg.racers:
        raise InputError("optimizers.err_no_racers", "pick at least one optimizer")
    if cfg.noise < 0:
        raise InputError("optimizers.err_negative", "noise must be >= 0", name="noise", value=cfg.noise)
    for spec in cfg.racers:
        if spec.name not in DEFAULTS:
            raise InputError("optimizers.err_optimizer", f"unknown optimizer {spec.name!r}", name=str(spec.name)[:40])
        check_lr(spec.lr)
        check_hyper(spec.name, dict(spec.hyper))
    return surface


def race(cfg: RaceConfig) -> RaceResult:
    """Run every racer of cfg from the same start on the same surface (with the same gradient noise)."""
    surface = validate_race(cfg)
    mults, noise = multipliers(cfg.schedule, cfg.steps), _noise(cfg)      # (steps,), (steps, 2)
    tuned, trajectories = {}, []
    for spec in cfg.racers:
        if cfg.fair:
            lr, _ = tune_lr(surface, spec, cfg.start, mults, noise)
            spec = RacerSpec(spec.name, lr, spec.hyper)
            tuned[spec.name] = lr
        trajectories.append(simulate(surface, spec, cfg.start, spec.lr * mults, noise))
    return RaceResult(cfg, trajectories, tuned, mults)


# ---------------------------------------------------------------- summaries
@dataclass
class RaceRow:
    """One line of the results table."""
    name: str
    lr: float                      # base lr used
    final_gap: float               # f(theta_T) - f*  (inf if diverged)
    final_distance: float          # distance to the nearest minimum at the end (inf if diverged)
    reached_at: int | None         # first step with f - f* < tol, if any
    left_box_at: int | None        # first step outside the plotted box, if any
    diverged_at: int | None


def race_summary(result: RaceResult, tol: float = 1e-3) -> list[RaceRow]:
    """Per racer: where it ended, when it first came within tol of the minimum loss, when it left the plot."""
    surface = get_surface(result.config.surface)
    rows = []
    for tr in result.trajectories:
        gap = tr.loss - surface.f_min                                        # (n + 1,)
        close = np.flatnonzero(gap < tol)
        inside = (tr.path[:, 0] >= surface.x_range[0]) & (tr.path[:, 0] <= surface.x_range[1]) & \
                 (tr.path[:, 1] >= surface.y_range[0]) & (tr.path[:, 1] <= surface.y_range[1])   # (n + 1,)
        outside = np.flatnonzero(~inside)
        diverged = tr.diverged_at is not None
        rows.append(RaceRow(
            tr.name, tr.lr, np.inf if diverged else float(gap[-1]),
            np.inf if diverged else float(surface.distance(tr.path[-1])),
            int(close[0]) if close.size else None, int(outside[0]) if outside.size else None, tr.diverged_at))
    return rows


# The update rules as LaTeX, for the page (the same formulas as the rule functions above).
LATEX = {
    "sgd": r"\theta_t = \theta_{t-1} - \eta\, g_t",
    "momentum": r"v_t = \mu\, v_{t-1} + g_t, \qquad \theta_t = \theta_{t-1} - \eta\, v_t",
    "adagrad": r"G_t = G_{t-1} + g_t^2, \qquad \theta_t = \theta_{t-1} - \frac{\eta}{\sqrt{G_t} + \epsilon}\, g_t",
    "rmsprop": r"s_t = \alpha\, s_{t-1} + (1-\alpha)\, g_t^2, \qquad "
               r"\theta_t = \theta_{t-1} - \frac{\eta}{\sqrt{s_t} + \epsilon}\, g_t",
    "adam": r"\begin{aligned} m_t &= \beta_1 m_{t-1} + (1-\beta_1)\, g_t, \quad v_t = \beta_2 v_{t-1} + (1-\beta_2)\, g_t^2"
            r"\\ \hat m_t &= \frac{m_t}{1-\beta_1^t}, \quad \hat v_t = \frac{v_t}{1-\beta_2^t}"
            r"\\ \theta_t &= \theta_{t-1} - \frac{\eta\, \hat m_t}{\sqrt{\hat v_t} + \epsilon} \end{aligned}",
}
