"""The Attention page's "Which heads matter" view: head ablation map, head statistics, peaked-vs-important scatter,
and token attribution (integrated gradients vs raw attention vs rollout). Kept per model name + input + method."""
from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import streamlit as st

import app_pages._ui as ui
from viz_core.io import export
from viz_core.errors import InputError
from viz_core.runtime.flights import Flight, Flights, Progress
from viz_core.pretrained import head_analysis
from viz_core.plots import attention as attention_plots
from viz_core.plots import importance as plots

from . import models

if TYPE_CHECKING:  # torch: imported for a model other than the packaged one (see importance(), attribution())
    from viz_core.pretrained.result import HeadImportance, TokenAttribution

METHODS = ("zero", "mean")
PEAK_STATS = ("max", "entropy")
STEPS = (8, 16, 32, 64, 128)
t = ui.t


@dataclass
class Input:
    """What the page was given: model name (\"\" = default), texts, and which attention (part) the heads are in."""
    name: str
    kind: str
    text: str
    pair: str
    target: str
    part: str


# ---------------------------------------------------------------- numbers
# The map and the attribution take seconds on a long text: each runs as a flight (viz_core.runtime.flights), in a thread of
# its own, so a click while it runs does not start it again; results are kept by input, shared by every visitor.
_maps = Flights(keep=32)
_attributions = Flights(keep=32)


def importance_work(name: str, kind: str, text: str, pair: str, target: str, part: str,
                    method: str) -> Callable[[Progress], HeadImportance]:
    """All L x H ablations of one input (see viz_core.pretrained.ablation), as work(progress) for a flight; the
    model is found here, in the page's thread. The packaged model answers in numpy until transformers has loaded it
    (the same numbers within 2e-6, tested): no torch in the server for it. Raises InputError (an unknown model)."""
    numpy_ablation = models.numpy_ablation() if not name else None
    if numpy_ablation is not None:
        def in_numpy(progress: Progress) -> HeadImportance:
            with models.heavy(long=True):
                return numpy_ablation.head_importance(text, pair or None, method=method, progress=progress)
        return in_numpy
    from viz_core.pretrained.ablation import head_importance  # torch: imported when this view is opened, not with the page

    loaded = models.model(name)

    def in_torch(progress: Progress) -> HeadImportance:
        with models.heavy(long=True):
            return head_importance(loaded, text, pair or None, method=method, target=_target(kind, target), part=part)
    return in_torch


def attribution_work(name: str, kind: str, text: str, pair: str, target: str,
                     steps: int) -> Callable[[Progress], TokenAttribution]:
    """Integrated gradients per token (see viz_core.pretrained.attribution) as work(progress) for a flight; the
    packaged model in numpy, as above."""
    numpy_attribution = models.numpy_attribution() if not name else None
    if numpy_attribution is not None:
        def in_numpy(progress: Progress) -> TokenAttribution:
            with models.heavy(long=True):
                return numpy_attribution.token_attribution(text, pair or None, steps=steps, progress=progress)
        return in_numpy
    from viz_core.pretrained.attribution import token_attribution  # torch: imported for another model only

    loaded = models.model(name)

    def in_torch(progress: Progress) -> TokenAttribution:
        with models.heavy(long=True):
            return token_attribution(loaded, text, pair or None, steps=steps, target=_target(kind, target))
    return in_torch


def _flight(flights: Flights, work: Callable[..., Callable[[Progress], Any]], *key) -> Flight:
    return flights.lookup(key) or flights.get(key, work(*key))


@st.cache_data(show_spinner=False, max_entries=32)
def peakedness(name: str, text: str, pair: str, target: str, part: str, stat: str) -> np.ndarray:
    """(L, H) how peaked each head is on the same input the ablation sees (A and B encoded on their own: mean)."""
    texts = [text] + ([pair] if pair.strip() else [])
    values = [_peak(models.attention(name, x, "", target).part(part)[0], stat) for x in texts]
    return np.mean(values, axis=0).astype(np.float32)


def _peak(weights: np.ndarray, stat: str) -> np.ndarray:
    """Mean over query rows of the largest weight (max) or of the entropy in bits: (L, H, Nq, Nk) -> (L, H)."""
    if stat == "max":
        return weights.max(-1).mean(-1)
    return head_analysis.head_statistics(weights).entropy


def _target(kind: str, target: str) -> str | None:
    """Decoder-only: the next token to score (None = top prediction); encoder-decoder: the target text."""
    return target if target.strip() and kind != "encoder" else None


# ---------------------------------------------------------------- files
def importance_csv(r: HeadImportance) -> str:
    """One row per head: layer, head, effect, the ablated score, the baseline, method and part."""
    return export.csv_text(["layer", "head", f"effect ({r.metric})", "ablated", "baseline", "method", "part"],
                           ([layer, head, effect, r.ablated[layer, head], r.baseline, r.method, r.part]
                            for (layer, head), effect in np.ndenumerate(r.effect)))


def attribution_csv(a: TokenAttribution) -> str:
    """One row per token: index, token, segment and its three scores."""
    return export.columns_csv({"index": range(len(a.tokens)), "token": a.tokens, "segment": a.segments,
                               "integrated_gradients": a.scores, "attention": a.attention, "rollout": a.rollout})


# ---------------------------------------------------------------- drawing
def _open_on_click(chart_key: str, curve: int, n_cells: int, n_heads: int) -> None:
    """Chart click on a head's cell / point -> open that head in the 'One head' view."""
    points = st.session_state[chart_key].selection.get("points", [])
    if points and "point_index" in points[0] and points[0].get("curve_number", curve) == curve:
        idx = int(points[0]["point_index"])
        if idx < n_cells:
            ui.set_value("layer", idx // n_heads)
            ui.set_value("head", idx % n_heads)
            ui.set_value("heads", [idx % n_heads])
            ui.set_value("view", "head")


def _clickable(fig, key: str, curve: int, shape: tuple[int, int], container=None) -> None:
    with container if container is not None else contextlib.nullcontext():
        ui.plot(fig, key=key, selection_mode="points",
                on_select=lambda: _open_on_click(key, curve, shape[0] * shape[1], shape[1]))


def draw(inp: Input, layer: int, head: int) -> None:
    """The whole view: controls, the ablation map next to the statistics map, the scatter, then attribution."""
    c1, c2, c3 = st.columns([2, 1, 2])
    method = ui.radio(t("importance.method"), METHODS, "imethod", container=c1,
                      format_func=lambda v: t(f"importance.method_{v}"))
    stat = ui.selectbox(t("importance.peak"), PEAK_STATS, "ipeak", container=c2,
                        format_func=lambda v: t(f"importance.peak_{v}"))
    if inp.kind == "decoder":
        inp.target = ui.text(t("importance.next_token"), "inext", "", max_chars=50, container=c3).strip()
    key = (inp.name, inp.kind, inp.text, inp.pair, inp.target, inp.part, method)
    try:
        r = ui.wait_for(lambda: _flight(_maps, importance_work, *key),
                        lambda percent, seconds: t("importance.progress_map", percent=percent, seconds=seconds))
        with st.spinner(t("importance.computing")):
            peak = peakedness(inp.name, inp.text, inp.pair, inp.target if inp.kind == "encoder-decoder" else "",
                              inp.part, stat)
    except InputError as exc:
        ui.show_error(exc)
        return
    _draw_heads(r, peak, stat, layer, head)
    _draw_attribution(inp)


def _draw_heads(r: HeadImportance, peak: np.ndarray, stat: str, layer: int, head: int) -> None:
    st.markdown(t(f"importance.baseline_{r.metric}", value=f"{r.baseline:.4f}", token=r.target_token))
    effect_name, peak_name = t(f"importance.effect_{r.metric}"), t(f"importance.peak_{stat}")
    layer_label, head_label = t("attention.layer"), t("attention.head")
    selected = (layer, head) if layer < r.shape[0] and head < r.shape[1] else None
    left, right = st.columns(2)
    _clickable(plots.importance_map(r.effect, title=t("importance.map_title"), value_name=effect_name,
                                    layer_label=layer_label, head_label=head_label, selected=selected),
               "imp_map", 1, r.shape, left)
    peak_fig = attention_plots.stats_map(peak, title=t("importance.peak_title"), value_name=peak_name,
                                         layer_label=layer_label, head_label=head_label, selected=selected)
    plots.short_axes(peak_fig, *r.shape)  # numbers on the ticks, like the map beside it
    _clickable(peak_fig, "imp_peak", 1, r.shape, right)
    _clickable(plots.peak_vs_importance(peak, r.effect, peak_name=peak_name, effect_name=effect_name,
                                        layer_label=layer_label, head_label=head_label,
                                        title=t("importance.scatter_title"), selected=selected),
               "imp_scatter", 0, r.shape)
    st.caption(t("importance.click_hint"))
    st.write(t("importance.explain_ablation"))
    ui.latex(r"\mathrm{MHA}_l(x) = [\,o_{l,1};\dots;o_{l,H}\,]\,W_O")  # two short lines: they fit a phone
    ui.latex(r"\Delta_{l,h} = f\big(x;\; o_{l,h} \leftarrow 0 \text{ or } \bar o_{l,h}\big) - f(x)")
    d1, d2 = st.columns(2)
    with d1:
        ui.download(t("importance.download_npz"), export.npz_bytes(
            effect=r.effect, ablated=r.ablated, baseline=r.baseline, metric=r.metric, method=r.method, part=r.part,
            peak=peak, peak_stat=stat), f"head_importance_{r.method}.npz", "application/octet-stream", key="dl_imp_npz")
    with d2:
        ui.download(t("importance.download_csv"), importance_csv(r), f"head_importance_{r.method}.csv", "text/csv",
                    key="dl_imp_csv")


def _draw_attribution(inp: Input) -> None:
    st.subheader(t("importance.attr_header"))
    steps = ui.select_slider(t("importance.steps"), STEPS, "isteps", 32)
    key = (inp.name, inp.kind, inp.text, inp.pair, inp.target, steps)
    try:
        a = ui.wait_for(lambda: _flight(_attributions, attribution_work, *key),
                        lambda percent, seconds: t("importance.progress_attr", percent=percent, seconds=seconds))
    except InputError as exc:
        ui.show_error(exc)
        return
    names = {t("importance.series_ig"): a.scores, t("importance.series_attention"): a.attention,
             t("importance.series_rollout"): a.rollout}
    ui.plot(plots.attribution_bars(a.tokens, names, token_label=t("importance.token"),
                                   share_label=t("importance.share"), signed=[t("importance.series_ig")],
                                   title=t("importance.attr_title"), boundaries=np.cumsum(a.lengths[:-1]) - 0.5),
            key="imp_attr")
    diff = a.value - a.baseline_value
    st.caption(t(f"importance.attr_f_{a.metric}", token=a.target_token))
    st.caption(t("importance.completeness", total=f"{a.scores.sum():.4f}", value=f"{a.value:.4f}",
                 baseline=f"{a.baseline_value:.4f}", diff=f"{diff:.4f}", gap=f"{a.completeness_gap:.1e}"))
    if abs(a.completeness_gap) > 0.05 * max(abs(diff), 1e-6):
        st.warning(t("importance.completeness_off"))
    st.write(t("importance.explain_attr"))
    ui.latex(r"\mathrm{IG}_i = (x_i - x'_i)\cdot\frac{1}{S}\sum_{k=1}^{S}\nabla_{x_i} f\Big(x' + \tfrac{k-1/2}{S}"
             r"(x - x')\Big)")
    ui.latex(r"\sum_i \mathrm{IG}_i \approx f(x) - f(x')")
    d1, d2 = st.columns(2)
    with d1:
        ui.download(t("importance.download_attr_npz"), export.npz_bytes(
            tokens=a.tokens, integrated_gradients=a.scores, attention=a.attention, rollout=a.rollout,
            segments=a.segments, value=a.value, baseline_value=a.baseline_value, metric=a.metric, steps=a.steps),
            "token_attribution.npz", "application/octet-stream", key="dl_attr_npz")
    with d2:
        ui.download(t("importance.download_attr_csv"), attribution_csv(a), "token_attribution.csv", "text/csv",
                    key="dl_attr_csv")
