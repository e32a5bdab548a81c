"""Views of a decoder's insides, shared by the Attention page (Hugging Face decoders) and the Language model page
(our own): the logit lens, attention sinks, and what the model is made of (attention variant, positions, norms) with
links to the pages that teach each part, opened in the right state. Strings: locales/decoder.json."""
from __future__ import annotations

import math

import numpy as np
import streamlit as st

from viz_core.io import export
from viz_core.plots import attention as attention_plots
from viz_core.plots import decoder as plots
from viz_core.pretrained.architecture import Architecture
from viz_core.pretrained.head_analysis import SinkShares

from . import download, fold, glossed, latex, link, plain_md, plot, radio, sentences, t

SINK_THRESHOLD = 0.5  # a head that puts more than half its attention on the first token counts as a sink head


# ---------------------------------------------------------------- logit lens
def row_names(n_rows: int) -> list[str]:
    """'embeddings', 'block 0', ... : row r >= 1 is the residual stream after block r - 1."""
    return [t("decoder.row_embed")] + [t("decoder.row_block", i=i) for i in range(n_rows - 1)]


def lens_view(lens, key: str) -> None:
    """The logit lens grid of one text, its explanation and its numbers as CSV."""
    if lens.truncated:
        st.warning(t("decoder.lens_truncated", n=len(lens.tokens)))
    st.markdown(glossed(t("decoder.lens_intro")))
    latex(r"p_\ell = \mathrm{softmax}\big(W_U\,\mathrm{norm}_f(h_\ell)\big),\qquad "
          r"h_{\ell} = h_{\ell-1} + \mathrm{Attn}_\ell(\cdot) + \mathrm{MLP}_\ell(\cdot)")
    metric = radio(t("decoder.lens_metric"), plots.LENS_METRICS, "lens_metric", horizontal=True,
                   format_func=lambda m: t(f"decoder.metric_{m}"))
    names = row_names(lens.n_rows)
    nexts = lens.tokens[1:]  # the actual next tokens as typed
    short = [t("decoder.row_embed_short")] + [str(i) for i in range(lens.n_rows - 1)]
    fig = plots.lens_figure(lens.top_tokens, lens.top_probs, lens.next_prob, lens.next_rank, lens.first_top1,
                            lens.tokens, nexts, names, short_names=short, metric=metric, title=t("decoder.lens_title"),
                            x_title=t("decoder.row"), y_title=t("decoder.position"),
                            value_name=t(f"decoder.metric_{metric}"), top_name=t("decoder.top_k", k=lens.k),
                            next_name=t("decoder.actual_next"), rank_name=t("decoder.rank"),
                            settled_name=t("decoder.settled"))
    plot(fig, key=key)
    st.caption(t("decoder.lens_read"))
    lens_summary(lens, names)
    download(t("decoder.download_lens"), lens_csv(lens, names), "logit_lens.csv", "text/csv", key=f"{key}_csv")


def lens_summary(lens, names: list[str]) -> None:
    """Where the answers settle, and how good the last row is at the actual next tokens (computed, not typed)."""
    if len(lens.tokens) < 2:
        st.info(t("decoder.lens_one_token"))
        return
    settled = lens.first_top1[:-1]  # positions that have an actual next token
    last = lens.n_rows - 1
    hits = int((lens.next_rank[last] == 0).sum())
    early = int((settled < last).sum())
    st.markdown(t("decoder.lens_summary", hits=hits, n=len(settled), early=early,
                  median=names[int(np.median(settled))], last=names[last]))


def lens_csv(lens, names: list[str]) -> str:
    """One line per row and position: the top-1 guess, its probability, the actual next token, its probability
    and rank."""
    n_rows, n = lens.top_probs.shape[:2]
    rows, pos = np.meshgrid(np.arange(n_rows), np.arange(n), indexing="ij")  # (R, N) each
    rows, pos = rows.ravel(), pos.ravel()
    has_next = pos < n - 1
    nxt = np.minimum(pos, n - 2)  # where the next-token arrays are read (blank on the last position)
    return export.columns_csv({
        "row": rows, "row_name": [names[r] for r in rows], "position": pos,
        "token": [lens.tokens[i] for i in pos], "top1": lens.top_tokens[rows, pos, 0],
        "p_top1": np.round(lens.top_probs[rows, pos, 0], 6),
        "next_token": [lens.tokens[i + 1] if ok else "" for i, ok in zip(pos, has_next)],
        "p_next": [f"{lens.next_prob[r, i]:.6f}" if ok else "" for r, i, ok in zip(rows, nxt, has_next)],
        "rank_next": [int(lens.next_rank[r, i]) + 1 if ok else "" for r, i, ok in zip(rows, nxt, has_next)]})


# ---------------------------------------------------------------- attention sinks
def sinks_view(shares: SinkShares, arch: Architecture | None, key: str, selected=None, on_select=None,
               encoder: bool = False, causal: bool = True) -> None:
    """A layer x head map of the share of attention on the first token (or on the other special tokens).
    causal: whether query 0 of this map sees only token 0 (a decoder's self-attention); the caption under the
    formula says why query 0 is left out, truly for either kind."""
    st.markdown(glossed(t("decoder.sinks_intro")))
    if encoder:
        st.caption(t("decoder.sinks_encoder"))
    latex(r"s_{\ell,h} = \frac{1}{N-1}\sum_{i=1}^{N-1} A^{\ell,h}_{i,0},\qquad "
          r"A_{i,:} = \mathrm{softmax}\Big(\frac{q_i K^\top}{\sqrt{d_k}}\Big),\ \sum_j A_{ij} = 1")
    if causal or shares.first_every is None:
        st.caption(t("decoder.sinks_rule_causal"))
    else:
        st.caption(t("decoder.sinks_rule_open", delta=f"{np.abs(shares.first_every - shares.first).max():.3f}"))
    targets = ("first", "special", "rest") if shares.special.any() else ("first", "rest")
    target = radio(t("decoder.sink_target"), targets, "sink_of", horizontal=True,
                   format_func=lambda s: t(f"decoder.sink_{s}"))
    values = getattr(shares, target)
    fig = attention_plots.stats_map(values, title=t(f"decoder.sink_title_{target}"),
                                    value_name=t(f"decoder.sink_{target}"), layer_label=t("decoder.layer"),
                                    head_label=t("decoder.head"), selected=selected, zmin=0.0, zmax=1.0)
    if arch is not None and arch.n_heads == values.shape[1]:
        plots.group_shapes(fig, arch.groups(), values.shape[0])
    kw = dict(on_select=on_select, selection_mode="points") if on_select else {}
    plot(fig, key=key, **kw)
    n_sink = int((shares.first > SINK_THRESHOLD).sum())
    st.markdown(sentences(t("decoder.sinks_summary", mean=f"{shares.first.mean():.2f}", n=n_sink,
                            total=shares.first.size, share=f"{SINK_THRESHOLD:.1f}"),
                          t("decoder.sinks_click") if on_select else ""))
    if on_select:  # the Attention page: its head view can leave the sink out of the colour scale
        st.caption(t("decoder.sinks_why"))
    if arch is not None and arch.variant != "mha":
        st.caption(t("decoder.groups_outlined", kv=arch.n_kv_heads))
    download(t("decoder.download_sinks"), sinks_csv(shares), "attention_sinks.csv", "text/csv", key=f"{key}_csv")


def sinks_csv(shares: SinkShares) -> str:
    layers, heads = np.meshgrid(np.arange(shares.first.shape[0]), np.arange(shares.first.shape[1]), indexing="ij")
    return export.columns_csv({"layer": layers.ravel(), "head": heads.ravel(),
                               "first_token": np.round(shares.first.ravel(), 6),
                               "special_tokens": np.round(shares.special.ravel(), 6),
                               "other_tokens": np.round(shares.rest.ravel(), 6)})


# ---------------------------------------------------------------- what the model is made of
def architecture_line(arch: Architecture) -> str:
    """One line: attention variant with H and H_kv, positions, norm and where it sits."""
    return t("decoder.arch_line", variant=t(f"decoder.variant_{arch.variant}"), h=arch.n_heads, kv=arch.n_kv_heads,
             positions=t(f"decoder.pos_{arch.positions}"), norm=t(f"decoder.norm_{arch.norm}"),
             place=t(f"decoder.place_{arch.norm_place}"))


def mechanics_params(arch: Architecture) -> dict:
    """Mechanics' MHA / GQA / MQA section with this model's H and H_kv where its sliders can hold them (d_model a
    multiple of 4 up to 64 that H divides), else the section alone."""
    d_model = 4 * arch.n_heads // math.gcd(4, arch.n_heads)
    params = {"section": "variants"}
    if d_model <= 64:
        params |= {"vdm": d_model, "vh": arch.n_heads, "vkv": arch.n_kv_heads}
    return params


POSITION_PARTS = {"rope": "learned", "learned": "learned", "sinusoidal": "heatmap", "relative": "relative"}


def layer_ranges(layers) -> str:
    """(0, 1, 2, 3, 4, 6, 7) -> "0–4, 6–7" ("0–4、6–7" in Chinese): runs of consecutive layers."""
    runs: list[list[int]] = []
    for i in layers:
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return t("attention.list_sep").join(f"{r[0]}–{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


def attention_facts(arch: Architecture, n_layers: int) -> list[str]:
    """What else decides a score: the sliding window and its layers, QK-norm, the scale."""
    facts = []
    if arch.sliding_window:
        full = [i for i in range(n_layers) if i not in arch.sliding_layers]
        w = arch.sliding_window
        facts.append(t("decoder.arch_window", layers=layer_ranges(arch.sliding_layers), w=w, w1=w - 1,
                       full=layer_ranges(full)) if full else t("decoder.arch_window_all", w=w, w1=w - 1))
    if arch.qk_norm:
        facts.append(t("decoder.arch_qk_norm"))
    if arch.scale:
        den = round(arch.scale ** -2)
        facts.append(t("decoder.arch_scale", scale=f"{arch.scale:.4g}", den=den, dh=arch.head_dim))
    return facts


def packaged_note(model_id: str) -> None:
    """For a packaged decoder: that it works offline, is a quantized copy, and its licence (Gemma's notice)."""
    from viz_core.pretrained import packaged
    d = packaged.by_id(model_id)
    if d is None:
        return
    st.caption(t("decoder.packaged_note", title=d.title, package=d.package, quant=d.quantization, licence=d.licence,
                 url=d.licence_url))
    if d is packaged.GEMMA:
        st.caption(t("decoder.gemma_notice"))


def architecture_box(arch: Architecture, param: str = "arch", n_layers: int = 0) -> None:
    """The variant line, then (in a fold) what each part means, which query heads share a key/value head, and
    links to Mechanics (GQA), Positions and Anatomy (norms) opened at the right section."""
    st.markdown(architecture_line(arch))
    facts = attention_facts(arch, n_layers)
    if facts:
        st.markdown("\n\n".join(facts))
    opened, box = fold(t("decoder.arch_fold"), param)
    if not opened:
        return
    with box:
        st.markdown(t(f"decoder.variant_explain_{arch.variant}", h=arch.n_heads, kv=arch.n_kv_heads,
                      per=arch.n_heads // max(arch.n_kv_heads, 1)))
        if arch.variant != "mha":
            st.markdown("\n".join(t("decoder.group_line", g=g, heads=", ".join(map(str, heads)))
                                  for g, heads in enumerate(arch.groups())))
        st.markdown(t(f"decoder.pos_explain_{arch.positions}"))
        st.markdown(sentences(t(f"decoder.norm_explain_{arch.norm}"), t(f"decoder.place_explain_{arch.norm_place}")))
        link("mechanics", t("decoder.link_mechanics", variant=t(f"decoder.variant_{arch.variant}")),
             mechanics_params(arch))
        link("positions", t("decoder.link_positions", positions=t(f"decoder.pos_{arch.positions}")),
             {"part": POSITION_PARTS.get(arch.positions, "learned")})
        link("anatomy", t("decoder.link_anatomy"), {"section": "norms"})
        link("anatomy", t("decoder.link_placement"), {"section": "placement"})
        st.caption(t("decoder.family", family=plain_md(arch.family)))
