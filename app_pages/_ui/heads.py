"""The Attention page's "heads" view of a real decoder: induction and previous-token scores per head on repeated random
tokens, the attention sink of each layer, and where the logit lens settles on " Paris". Strings: locales/heads.json.

    draw(name, layer, head, on_open)    on_open(layer, head) is called when a cell of a head map is clicked
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import streamlit as st

from viz_core.io import export
from viz_core.errors import InputError
from viz_core.plots import attention as attention_plots
from viz_core.plots import heads as plots
from viz_core.pretrained import heads
from viz_core.runtime.threads import thread_budget

from . import download, fold, glossed, latex, plain_md, plot, radio, show_error, t, table
from . import models

SCORES = ("induction", "previous")
TOP_K = 5
STRONG = 0.5  # a head scoring above this counts as an induction (or previous-token) head
THREADS = 1   # torch threads of one computation: on a busy 2-core server 1.8 s for Gemma's 4 x 81 tokens, against
#               3-10 s with two threads fighting other work (measured); an idle machine loses little


# ---------------------------------------------------------------- cached computations (shared by every visitor)
@st.cache_data(show_spinner=False, max_entries=8)
def scores(name: str, seq_len: int = heads.SEQ_LEN, n_seqs: int = heads.N_SEQS, seed: int = 0) -> heads.HeadScores:
    """Induction, previous-token and sink scores of a model on repeated random tokens (one batched pass)."""
    m = models.model(name)
    with models.heavy(long=True), thread_budget(THREADS):
        return heads.head_scores(m, seq_len, n_seqs, seed)


@st.cache_data(show_spinner=False, max_entries=8)
def settling(name: str, prompt: str = heads.LENS_PROMPT, answer: str = heads.LENS_ANSWER) -> heads.Settling:
    """The logit lens's rank of the answer after the prompt, row by row."""
    m = models.model(name)
    with models.heavy(), thread_budget(THREADS):
        return heads.answer_settling(m, prompt, answer)


# ---------------------------------------------------------------- clicks
def _clicked(chart_key: str, n_heads: int, on_open: Callable[[int, int], None]) -> None:
    """A click on a head map's cell (its marker trace, curve 1) -> on_open(layer, head)."""
    points = st.session_state[chart_key].selection.get("points", [])
    if points and "point_index" in points[0] and points[0].get("curve_number", 1) == 1:
        idx = int(points[0]["point_index"])
        on_open(idx // n_heads, idx % n_heads)


# ---------------------------------------------------------------- the view
def draw(name: str, layer: int, head: int, on_open: Callable[[int, int], None]) -> None:
    """The view: explanation and formulas, a layer x head map of the chosen score, the top heads, the sink per layer,
    the logit lens's answer in a fold, and the numbers as CSV."""
    st.markdown(glossed(t("heads.intro")))
    latex(r"x = [\mathrm{bos}]\, r_1 \dots r_T\, r_1 \dots r_T,\qquad "
          r"\mathrm{ind}_{\ell,h} = \frac{1}{T}\sum_{i=T+1}^{2T} A^{\ell,h}_{i,\; i-T+1},\qquad "
          r"\mathrm{prev}_{\ell,h} = \frac{1}{N-1}\sum_{i=1}^{N-1} A^{\ell,h}_{i,\; i-1}")
    try:
        with st.spinner(t("heads.running")):
            s = scores(name)
    except InputError as exc:
        show_error(exc)
        return
    st.caption(t("heads.read", seqs=s.n_seqs, half=s.seq_len, tokens=f"{s.n_tokens:,}"))
    score_map(s, layer, head, on_open)
    top_tables(s)
    sink_chart(s, layer)
    lens_fold(name)
    download(t("heads.download"), scores_csv(s), "head_scores.csv", "text/csv", key="heads_csv")


def score_map(s: heads.HeadScores, layer: int, head: int, on_open: Callable[[int, int], None]) -> None:
    """The chosen score as a clickable layer x head map (0..1), and a one-line summary of it."""
    which = radio(t("heads.score"), SCORES, "hscore", horizontal=True, format_func=lambda k: t(f"heads.score_{k}"))
    values = getattr(s, which)  # (L, H)
    n_layers, n_heads = values.shape
    selected = (layer, head) if 0 <= layer < n_layers and 0 <= head < n_heads else None
    fig = attention_plots.stats_map(values, title=t(f"heads.map_{which}"), value_name=t(f"heads.score_{which}"),
                                    layer_label=t("heads.layer"), head_label=t("heads.head"), selected=selected,
                                    zmin=0.0, zmax=1.0)
    key = "heads_fig"
    plot(fig, key=key, on_select=lambda: _clicked(key, n_heads, on_open), selection_mode="points")
    (best_l, best_h, best), = heads.top_heads(values, 1)
    st.markdown(t(f"heads.summary_{which}", layer=best_l, head=best_h, score=f"{best:.2f}",
                  n=int((values > STRONG).sum()), total=values.size, strong=f"{STRONG:.1f}"))
    st.caption(t("heads.click"))


def top_tables(s: heads.HeadScores) -> None:
    """The TOP_K heads of each score, with both scores side by side."""
    for col, which in zip(st.columns(len(SCORES)), SCORES):
        rows = [{t("heads.col_rank"): str(i + 1), t("heads.col_layer"): str(ly), t("heads.col_head"): str(hd),
                 t("heads.score_induction"): f"{s.induction[ly, hd]:.3f}",
                 t("heads.score_previous"): f"{s.previous[ly, hd]:.3f}"}
                for i, (ly, hd, _) in enumerate(heads.top_heads(getattr(s, which), TOP_K))]
        with col:
            table(rows, title=t(f"heads.top_{which}", k=TOP_K))


def sink_chart(s: heads.HeadScores, layer: int) -> None:
    """The share of attention on the first token, layer by layer."""
    st.markdown(glossed(t("heads.sink_intro")))
    latex(r"\mathrm{sink}_\ell = \frac{1}{H}\sum_h \frac{1}{N-1}\sum_{i=1}^{N-1} A^{\ell,h}_{i,0}")
    fig = plots.sink_by_layer(s.sink, title=t("heads.sink_title"), layer_label=t("heads.layer"),
                              value_name=t("heads.sink_value"), selected=layer)
    plot(fig, key="heads_sink_fig")
    top = int(np.argmax(s.sink))
    st.caption(t("heads.sink_summary", top=top, share=f"{s.sink[top]:.2f}", mean=f"{s.sink.mean():.2f}",
                 even=f"{even_share(s.n_tokens // s.n_seqs):.3f}"))


def even_share(n: int) -> float:
    """What token 0 would get if each query i = 1..N-1 spread its weight evenly over the i + 1 keys it sees."""
    return float(np.mean(1.0 / np.arange(2, n + 1)))


def lens_fold(name: str) -> None:
    """Where the logit lens settles on the answer after the prompt: computed only while the fold is open."""
    opened, box = fold(t("heads.lens_fold"), "hlens")
    if not opened:
        return
    with box:
        try:
            with st.spinner(t("heads.lens_running")):
                r = settling(name)
        except InputError as exc:
            show_error(exc)
            return
        except ValueError:  # the answer is not a token of its own after the prompt (another tokenizer)
            st.info(t("heads.lens_failed", answer=plain_md(heads.LENS_ANSWER)))
            return
        names = [t("heads.row_embed")] + [t("heads.row_block", i=i) for i in range(len(r.rank) - 1)]
        st.markdown(lens_sentence(r, names))
        fig = plots.answer_rank(r.rank, names, title=t("heads.lens_title", answer=r.answer),
                                row_label=t("heads.lens_row"), rank_label=t("heads.lens_rank"), answer=r.answer)
        plot(fig, key="heads_lens_fig")
        st.caption(t("heads.lens_read"))


def lens_sentence(r: heads.Settling, names: list[str]) -> str:
    """One sentence: from which block on the answer is top-1 / in the top 5, and the last row's guesses."""
    guesses = ", ".join(plain_md(g) for g in r.top_last)
    common = dict(prompt=plain_md(r.prompt), answer=plain_md(r.answer), p=f"{r.prob[-1]:.2f}",
                  rank=int(r.rank[-1]) + 1, guesses=guesses)
    if r.top1_from is not None:
        return t("heads.lens_top1", row=names[r.top1_from], **common)
    if r.top5_from is not None:
        return t("heads.lens_top5", row=names[r.top5_from], **common)
    return t("heads.lens_never", **common)


def scores_csv(s: heads.HeadScores) -> str:
    """One line per head: its induction and previous-token scores and its layer's sink size."""
    layers, hs = np.meshgrid(np.arange(s.induction.shape[0]), np.arange(s.induction.shape[1]), indexing="ij")
    return export.columns_csv({"layer": layers.ravel(), "head": hs.ravel(),
                               "induction": np.round(s.induction.ravel(), 6),
                               "previous_token": np.round(s.previous.ravel(), 6),
                               "layer_sink": np.round(s.sink[layers.ravel()], 6)})

