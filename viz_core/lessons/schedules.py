"""Learning-rate schedules: constant, step decay, cosine annealing and the Transformer paper's warmup.

Steps are counted from t = 1 (the first update). A schedule is a multiplier s(t) on a base learning rate:
lr_t = lr * s(t). The step and cosine forms equal torch.optim.lr_scheduler.StepLR / CosineAnnealingLR.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InputError

SCHEDULES = ("constant", "step", "cosine", "warmup")


@dataclass(frozen=True)
class ScheduleConfig:
    kind: str = "constant"      # one of SCHEDULES
    step_size: int = 100        # step: multiply by gamma every step_size updates
    gamma: float = 0.5          # step: the decay factor
    min_ratio: float = 0.0      # cosine: final lr as a fraction of the base lr (eta_min / lr)
    warmup: int = 50            # warmup: steps of linear increase before the 1/sqrt(t) decay


def transformer_lr(t, d_model: int = 512, warmup: int = 4000):
    """The Transformer paper's schedule (Vaswani et al. 2017, eq. 3): d_model^-0.5 * min(t^-0.5, t * warmup^-1.5).

    t counts from 1; works on scalars and arrays. Peak d_model^-0.5 * warmup^-0.5 at t = warmup. A step below 1
    (or not a number) raises InputError: at t = 0 the formula divides by zero, and below it is undefined.
    """
    t = np.asarray(t, dtype=float)
    if t.size and not (np.all(np.isfinite(t)) and t.min() >= 1):
        bad = t[~(np.isfinite(t) & (t >= 1))].flat[0]
        raise InputError("optimizers.err_lr_step", f"steps count from 1; got {bad}", step=f"{bad:g}")
    if not (d_model >= 1 and warmup >= 1):
        raise InputError("optimizers.err_lr_args", f"d_model and warmup must be at least 1, got {d_model}, {warmup}",
                         d_model=d_model, warmup=warmup)
    return d_model ** -0.5 * np.minimum(t ** -0.5, t * warmup ** -1.5)


def _validate(cfg: ScheduleConfig) -> None:
    if cfg.kind not in SCHEDULES:
        raise InputError("optimizers.err_schedule", f"unknown schedule {cfg.kind!r}; use one of {SCHEDULES}",
                         name=str(cfg.kind)[:40])
    if cfg.step_size < 1 or cfg.warmup < 1:
        raise InputError("optimizers.err_schedule_steps", "step size and warmup must be at least 1 step")
    if not (0.0 < cfg.gamma <= 1.0) or not (0.0 <= cfg.min_ratio <= 1.0):
        raise InputError("optimizers.err_schedule_factor", "gamma must lie in (0, 1] and the cosine floor in [0, 1]")


def multipliers(cfg: ScheduleConfig, steps: int) -> np.ndarray:
    """s(t) for t = 1..steps -> (steps,).

    constant: 1;  step: gamma^floor((t-1) / step_size);
    cosine: r + (1 - r) (1 + cos(pi (t-1) / steps)) / 2 with r = min_ratio;
    warmup: the paper's schedule divided by its peak, min(t^-0.5, t w^-1.5) * w^0.5, so that s(warmup) = 1
    and the base lr is the peak lr (d_model only scales the curve, and the base lr takes that role).
    """
    _validate(cfg)
    t = np.arange(1, steps + 1, dtype=float)                       # (steps,)
    if cfg.kind == "step":
        return cfg.gamma ** np.floor((t - 1) / cfg.step_size)
    if cfg.kind == "cosine":
        return cfg.min_ratio + (1 - cfg.min_ratio) * (1 + np.cos(np.pi * (t - 1) / steps)) / 2
    if cfg.kind == "warmup":
        return transformer_lr(t, 1, cfg.warmup) / transformer_lr(cfg.warmup, 1, cfg.warmup)
    return np.ones_like(t)
