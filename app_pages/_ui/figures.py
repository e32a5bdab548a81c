"""Figures on the page: drawn with the house settings (plot), serialised once when shared read-only (share), and the
figure builders of a viz_core.plots module cached by their arguments for every session (SharedFigures).

Every figure is drawn from its dict with style.figure_style applied to it: the house template settings travel with
each figure, and plotly's global templates are never changed."""
from __future__ import annotations

import plotly.io as pio
import streamlit as st
from plotly.basedatatypes import BaseFigure

from viz_core.plots.common import PLOTLY_CONFIG, PlayLabels, frames_in_floats

from . import chart
from .caches import ByteBoundedCache, arg_key
from .language import t
from .style import figure_style

_JSON = "_viz_json"  # the attribute a shared figure carries: the chart element's JSON, made once (share)
_SPEC = "_viz_spec"  # ... or, where there is no chart element, its styled dict for st.plotly_chart, made once


def spec(fig) -> dict:
    """The dict a figure is drawn from: fig.to_dict() (a copy) with the house settings (style.figure_style)."""
    return figure_style(fig.to_dict())


def plain_spec(fig) -> dict:
    """spec(fig) for st.plotly_chart, which draws frames as they come: a played history's frames sent in bytes
    (viz_core.plots.common.animated) back in floats, as the chart element turns them in the browser."""
    return frames_in_floats(spec(fig))


def plot(fig, key: str | None = None, on_select=None, selection_mode: str = "points"):
    """A figure with the house settings (theme-aware colours, PNG export button, full width), drawn by the house
    chart element (chart.py: plotly.js in the page, one layout per chart), or by st.plotly_chart where the element is
    not available. `on_select` (a callback or "rerun"): a click on a point is reported as
    `st.session_state[key].selection["points"]`. A shared figure (share()) goes as the JSON / dict it was turned into
    once, not copied and converted again on every run."""
    if chart.available():
        payload = getattr(fig, _JSON, None) or chart.to_bytes(spec(fig))
        return chart.draw(payload if on_select is None else chart.selectable(payload), key=key, on_select=on_select)
    drawn = getattr(fig, _SPEC, None) or plain_spec(fig)
    kw = {} if on_select is None else {"on_select": on_select, "selection_mode": selection_mode}
    return st.plotly_chart(_Serialised(drawn), key=key, config=PLOTLY_CONFIG, theme="streamlit", width="stretch",
                           **kw)


def share(fig):
    """Mark a figure as shared read-only (cached for every session: nobody modifies it after this) and serialise it
    once: the chart element's JSON (or the styled dict where every chart goes through st.plotly_chart). Otherwise
    each run would call fig.to_dict(): a deep copy of every trace and frame and a conversion of every array, the
    largest part of a page switch on a page of big figures."""
    # (a figure's own __setattr__ accepts plotly properties only)
    if chart.available():
        object.__setattr__(fig, _JSON, chart.to_bytes(spec(fig)))
    else:
        object.__setattr__(fig, _SPEC, plain_spec(fig))
    return fig


class _Serialised(BaseFigure):
    """What st.plotly_chart gets: a figure whose to_dict() is a dict already made (spec(), or the one share() made).
    Streamlit reads that dict only (it writes its JSON, sizes the chart from its layout), so it is handed over without
    a copy. BaseFigure's constructor is skipped on purpose: nothing is validated or copied again."""

    def __init__(self, spec: dict):  # noqa: D107 - see the class
        object.__setattr__(self, "_spec", spec)

    def to_dict(self) -> dict:
        return self._spec


def play_labels() -> PlayLabels:
    """The words of a played history's controls (viz_core.plots.common.animated) in the current language."""
    return PlayLabels(play=t("common.play"), pause=t("common.pause"), prefix=t("common.step"), colon=t("common.colon"))


# ---------------------------------------------------------------- figures cached by their inputs
FIGURE_CACHE_BYTES = 32 * 2**20  # every shared figure of every page together, counted as twice its JSON (_figure_bytes)


@st.cache_resource(show_spinner=False)
def _figure_cache() -> ByteBoundedCache:
    return ByteBoundedCache(FIGURE_CACHE_BYTES, size=_figure_bytes)


def _figure_bytes(fig) -> int:
    """A shared figure's size, counted as twice its JSON: the figure itself and the form share() keeps beside it
    (the chart element's JSON; or the dict for st.plotly_chart, measured by its JSON: orjson, once)."""
    payload = getattr(fig, _JSON, None)
    return 2 * len(pio.to_json(getattr(fig, _SPEC), validate=False) if payload is None else payload)


class SharedFigures:
    """The figure builders of a viz_core.plots module, each cached by its arguments (labels included, so one figure
    per language): `plots = ui.SharedFigures(viz_core.plots.anatomy)`, then `plots.eps_figure(...)` as before.

    Building a plotly figure (every property validated) is most of a page's script time, and a page switch or a
    rerun asks for the same figures again. The figures of all pages share one least-recently-used cache bounded by
    FIGURE_CACHE_BYTES (a visitor who types 100 sentences cannot make it grow past that). The figures are shared
    read-only; callers must not modify them (plot() sends what share() made when it was cached). Arguments
    that cannot be keyed (caches.arg_key) are built uncached.
    """

    def __init__(self, module):
        self._module, self._cached = module, {}

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        if name not in self._cached:
            builder = getattr(self._module, name)

            def call(*args, **kwargs):
                try:
                    key = (self._module.__name__, name, arg_key(args), arg_key(kwargs))
                except TypeError:  # an argument that cannot be keyed: build it uncached
                    return builder(*args, **kwargs)
                return _figure_cache().get(key, lambda: share(builder(*args, **kwargs)))
            self._cached[name] = call
        return self._cached[name]
