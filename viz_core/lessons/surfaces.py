"""Two-parameter loss surfaces for the optimizer race, each with its analytic gradient and known minima.

Every loss f(x, y) and gradient grad(x, y) works elementwise on numpy arrays of any shape (a contour grid, a batch of
points, a single point) and on torch tensors (so tests can check the gradient against autograd).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..errors import InputError

LINE_X = (0.0, 1.0, 2.0, 3.0, 4.0)                 # the five inputs of the line-fit example (the study notes)
LINE_Y = tuple(2.0 * x + 1.0 for x in LINE_X)       # targets on the true line y = 2x + 1


def _trig(name: str, v):
    """np.cos / torch.cos (or sin) for whatever v is, so one formula serves numpy and autograd."""
    if hasattr(v, "requires_grad"):
        import torch
        return getattr(torch, name)(v)
    return getattr(np, name)(v)


# ---------------------------------------------------------------- the formulas
def bowl(x, y):
    """Ill-conditioned quadratic bowl f = 0.1 x^2 + 2 y^2 (curvatures 0.2 and 4: condition number 20)."""
    return 0.1 * x ** 2 + 2.0 * y ** 2


def bowl_grad(x, y):
    return 0.2 * x, 4.0 * y


def rosenbrock(x, y):
    """Rosenbrock's banana valley f = (1 - x)^2 + 100 (y - x^2)^2, minimum f(1, 1) = 0."""
    return (1.0 - x) ** 2 + 100.0 * (y - x ** 2) ** 2


def rosenbrock_grad(x, y):
    return -2.0 * (1.0 - x) - 400.0 * x * (y - x ** 2), 200.0 * (y - x ** 2)


_BEALE_C = (1.5, 2.25, 2.625)


def beale(x, y):
    """Beale's function f = sum_i (c_i - x + x y^i)^2, i = 1..3, c = (1.5, 2.25, 2.625); minimum f(3, 0.5) = 0."""
    return sum((c - x + x * y ** i) ** 2 for i, c in enumerate(_BEALE_C, start=1))


def beale_grad(x, y):
    gx, gy = 0.0 * x, 0.0 * y
    for i, c in enumerate(_BEALE_C, start=1):
        r = c - x + x * y ** i
        gx = gx + 2.0 * r * (y ** i - 1.0)
        gy = gy + 2.0 * r * x * i * y ** (i - 1)
    return gx, gy


def saddle(x, y):
    """A saddle at the origin, f = x^2 - y^2 + y^4 / 4, walled in by the quartic: minima f(0, +-sqrt 2) = -1."""
    return x ** 2 - y ** 2 + 0.25 * y ** 4


def saddle_grad(x, y):
    return 2.0 * x, -2.0 * y + y ** 3


def rastrigin(x, y):
    """Rastrigin f = 20 + x^2 - 10 cos(2 pi x) + y^2 - 10 cos(2 pi y): a local minimum near every integer point."""
    return 20.0 + x ** 2 - 10.0 * _trig("cos", 2 * math.pi * x) + y ** 2 - 10.0 * _trig("cos", 2 * math.pi * y)


def rastrigin_grad(x, y):
    return (2.0 * x + 20.0 * math.pi * _trig("sin", 2 * math.pi * x),
            2.0 * y + 20.0 * math.pi * _trig("sin", 2 * math.pi * y))


def line_fit(w, b):
    """Mean squared error of the line w x + b on the five points (x, 2x + 1): f = mean_i (w x_i + b - y_i)^2."""
    return sum((w * xi + b - yi) ** 2 for xi, yi in zip(LINE_X, LINE_Y)) / len(LINE_X)


def line_fit_grad(w, b):
    n = len(LINE_X)
    residuals = [w * xi + b - yi for xi, yi in zip(LINE_X, LINE_Y)]
    return (sum(2.0 * r * xi for r, xi in zip(residuals, LINE_X)) / n, sum(2.0 * r for r in residuals) / n)


# ---------------------------------------------------------------- the catalogue
@dataclass(frozen=True)
class Surface:
    """One race track: loss, gradient, the plotted box, known minima and sensible starting settings."""
    key: str                                   # "bowl", "rosenbrock", ...
    f: Callable                                # (x, y) -> loss, elementwise
    grad: Callable                             # (x, y) -> (df/dx, df/dy), elementwise
    x_range: tuple[float, float]               # plotted box (the start point must lie inside)
    y_range: tuple[float, float]
    minima: tuple[tuple[float, float], ...]    # global minima (distance is measured to the nearest)
    f_min: float                               # loss at the minima
    start: tuple[float, float]                 # default start point
    lr: float                                  # default common learning rate (stable for SGD)
    latex: str                                 # the formula, for st.latex
    log_contours: bool = True                  # contour levels on log10(f - f_min): for steep-walled surfaces
    axis_names: tuple[str, str] = field(default=("x", "y"))

    def gap(self, xy: np.ndarray) -> np.ndarray:
        """f - f_min at points xy (..., 2) -> (...): the distance in loss to the optimum, >= 0."""
        return self.f(xy[..., 0], xy[..., 1]) - self.f_min

    def distance(self, xy: np.ndarray) -> np.ndarray:
        """Euclidean distance from points xy (..., 2) to the nearest global minimum -> (...)."""
        mins = np.asarray(self.minima)                                         # (M, 2)
        d = np.linalg.norm(np.asarray(xy)[..., None, :] - mins, axis=-1)       # (..., M)
        return d.min(axis=-1)

    def contains(self, x: float, y: float) -> bool:
        return self.x_range[0] <= x <= self.x_range[1] and self.y_range[0] <= y <= self.y_range[1]

    @property
    def span(self) -> float:
        """The larger side of the plotted box: the yardstick for 'the path left the plot'."""
        return max(self.x_range[1] - self.x_range[0], self.y_range[1] - self.y_range[0])


SURFACES: dict[str, Surface] = {s.key: s for s in (
    Surface("bowl", bowl, bowl_grad, (-5.0, 5.0), (-3.0, 3.0), ((0.0, 0.0),), 0.0, (-4.5, 2.0), 0.1,
            r"f(x, y) = 0.1\,x^2 + 2\,y^2"),
    Surface("rosenbrock", rosenbrock, rosenbrock_grad, (-2.0, 2.0), (-1.0, 3.0), ((1.0, 1.0),), 0.0,
            (-1.2, 1.0), 0.001, r"f(x, y) = (1 - x)^2 + 100\,(y - x^2)^2"),
    Surface("beale", beale, beale_grad, (-4.5, 4.5), (-4.5, 4.5), ((3.0, 0.5),), 0.0, (0.5, 2.0), 0.002,
            r"f(x, y) = (1.5 - x + xy)^2 + (2.25 - x + xy^2)^2 + (2.625 - x + xy^3)^2"),
    Surface("saddle", saddle, saddle_grad, (-2.0, 2.0), (-2.5, 2.5), ((0.0, math.sqrt(2)), (0.0, -math.sqrt(2))),
            -1.0, (-1.8, 0.001), 0.05, r"f(x, y) = x^2 - y^2 + \tfrac{1}{4} y^4", log_contours=False),
    Surface("rastrigin", rastrigin, rastrigin_grad, (-5.12, 5.12), (-5.12, 5.12), ((0.0, 0.0),), 0.0,
            (-3.3, 2.6), 0.002, r"f(x, y) = 20 + \sum_{u \in \{x, y\}} \left(u^2 - 10 \cos 2\pi u\right)",
            log_contours=False),
    Surface("line_fit", line_fit, line_fit_grad, (-1.0, 5.0), (-3.0, 5.0), ((2.0, 1.0),), 0.0, (0.0, 0.0), 0.01,
            r"L(w, b) = \frac{1}{5} \sum_{i=1}^{5} (w x_i + b - y_i)^2,\quad y_i = 2 x_i + 1",
            axis_names=("w", "b")),
)}


def get_surface(key: str) -> Surface:
    if key not in SURFACES:
        raise InputError("optimizers.err_surface", f"unknown surface {key!r}; pick one of {sorted(SURFACES)}",
                         name=str(key)[:40])
    return SURFACES[key]


@dataclass
class SurfaceGrid:
    """The surface sampled on a regular grid for contour plots."""
    xs: np.ndarray        # (nx,)
    ys: np.ndarray        # (ny,)
    loss: np.ndarray      # (ny, nx): row = y, column = x (plotly's contour convention)
    level: np.ndarray     # (ny, nx): what the contour colours, log10(f - f_min + floor) or f itself


def surface_grid(surface: Surface, n: int = 120) -> SurfaceGrid:
    """Sample f on an n x n grid over the plotted box."""
    xs = np.linspace(*surface.x_range, n)
    ys = np.linspace(*surface.y_range, n)
    gx, gy = np.meshgrid(xs, ys)                                   # (ny, nx) each
    loss = surface.f(gx, gy)                                       # (ny, nx)
    level = np.log10(loss - surface.f_min + 1e-3) if surface.log_contours else loss
    return SurfaceGrid(xs, ys, loss, level)
