"""Cached derived data for the Attention page (statistics, rollout, the export archive)."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import streamlit as st

from viz_core.io import export
from viz_core import i18n
from viz_core.pretrained import compare, head_analysis, qk_map
from viz_core.pretrained.catalog import CatalogEntry
from viz_core.pretrained.result import AttentionResult

from . import models


# The page's two records live here, in a module imported once: a dataclass defined in a page script is built again
# on every run (dataclasses compile its methods with exec each time).
@dataclass
class Source:
    """What the maps are computed from (the arguments of every cached call)."""
    name: str       # model name; "" = the packaged default
    kind: str       # "encoder", "decoder" or "encoder-decoder"
    text: str
    pair: str       # text B of a sentence pair ("" = none)
    target: str     # the decoder's text of an encoder-decoder model ("" = none)


@dataclass
class Chosen:
    """The map looked at and how: one part's weights and tokens, the layer and head, and the display options."""
    part: str                 # "self", or "encoder" / "decoder" / "cross"
    weights: np.ndarray       # (L, H, Nq, Nk)
    q_tokens: list[str]       # (Nq,)
    k_tokens: list[str]       # (Nk,)
    q_special: np.ndarray     # bool (Nq,)
    k_special: np.ndarray     # bool (Nk,)
    segments: np.ndarray      # (N,) of the input: 0 = text A, 1 = text B, -1 = special
    layer: int
    head: int
    hide: bool                # hide special tokens (rows renormalised)
    auto: bool                # colours up to a quantile of the weights shown instead of 0..1
    block: str                # "all" or a sentence-pair block such as "A->B"

    @property
    def n_heads(self) -> int:
        return self.weights.shape[1]


@lru_cache(maxsize=256)
def model_line(e: CatalogEntry, where: str, lang: str) -> str:
    """The model picker's line for catalog entry e (immutable) in one language; `where` is the locale key of its
    last part (packaged, cached, download size). Cached here, in a module imported once (a page script's own
    functions are made again on every run): the picker formats every model on every run of the Attention page, and
    these few dozen translated strings were a tenth of a layer change's time."""
    langs = " + ".join(i18n.t(f"attention.lang_{code}", lang) for code in e.languages)
    return f"{e.name} · {langs} · {i18n.t(f'attention.kind_short_{e.kind}', lang)} ({e.family}) · " \
           f"{i18n.t(where, lang, size=e.size_mb)}"


def result(name: str, text: str, pair: str, target: str) -> AttentionResult:
    return models.attention(name, text, pair, target)


@st.cache_data(show_spinner=False, max_entries=16)
def stats(name: str, text: str, pair: str, target: str, part: str) -> dict[str, np.ndarray]:
    weights, _, _, _, k_special = result(name, text, pair, target).part(part)
    return head_analysis.head_statistics(weights, k_special).as_dict()


@st.cache_data(show_spinner=False, max_entries=8)
def rollout(name: str, text: str, pair: str, target: str) -> np.ndarray:
    return head_analysis.rollout(result(name, text, pair, target).weights)


@st.cache_data(show_spinner=False, max_entries=16)
def sinks(name: str, text: str, pair: str, target: str, part: str) -> head_analysis.SinkShares:
    weights, _, _, _, k_special = result(name, text, pair, target).part(part)
    return head_analysis.sink_shares(weights, k_special)


@st.cache_data(show_spinner=False, max_entries=8)
def lens(name: str, text: str):
    """The logit lens of a decoder for a text (viz_core.pretrained.lens): torch, and the model's unembedding."""
    from viz_core.pretrained.lens import logit_lens_for
    return logit_lens_for(models.model(name), text)


def npz(name: str, text: str, pair: str, target: str) -> bytes:
    """Every layer and head of every map, plus tokens, as one .npz (built only when downloaded)."""
    r = result(name, text, pair, target)
    arrays = dict(weights=r.weights, tokens=r.tokens, special=r.special, segments=r.segments)
    if r.decoder_weights is not None:
        arrays.update(decoder_weights=r.decoder_weights, cross_weights=r.cross_weights,
                      decoder_tokens=r.decoder_tokens)
    return export.npz_bytes(**arrays)


@st.cache_data(show_spinner=False, max_entries=16)
def head_distances(name: str, text: str, text2: str, pair: str, target: str, part: str) -> np.ndarray:
    """(L, H) distance of every head between text A and its variant A' (viz_core.pretrained.compare)."""
    wa, qa, ka = result(name, text, pair, target).part(part)[:3]
    wb, qb, kb = result(name, text2, pair, target).part(part)[:3]
    return compare.head_distances(wa, wb, compare.align(qa, qb), compare.align(ka, kb))


@st.cache_data(show_spinner=False, max_entries=16)
def qk_head(name: str, text: str, langs: tuple[str, ...], layer: int, head: int,
            unk: str) -> tuple[qk_map.QKSet, qk_map.Projection, dict[str, int]]:
    """The query-key map of one head: the user's text (sentence 0) and the bundled sentences of `langs` that the
    model reads (at most a quarter of their tokens unknown), their projection, and how many were left out per
    language. Raises InputError for a model whose queries and keys cannot be read."""
    bundled = qk_map.bundled_sentences()
    (tokens, q, k), = models.queries_keys((text,), name)
    parts = [(text, tokens, q[layer:layer + 1, head:head + 1], k[layer:layer + 1, head:head + 1])]
    left_out = {}
    for lang in langs:
        read = models.queries_keys(bundled[lang], name)
        kept = [(s, toks, qs[layer:layer + 1, head:head + 1], ks[layer:layer + 1, head:head + 1])
                for s, (toks, qs, ks) in zip(bundled[lang], read)
                if qk_map.unknown_share(toks, unk) <= qk_map.MAX_UNKNOWN_SHARE]
        left_out[lang] = len(read) - len(kept)
        parts += kept
    points = qk_map.stack(parts)  # q, k (1, 1, N, d_k)
    return points, qk_map.project(points.q[0, 0], points.k[0, 0]), left_out


@st.cache_data(show_spinner=False, max_entries=16)
def qk_closeness(name: str, text: str, langs: tuple[str, ...], layer: int, head: int, unk: str) -> qk_map.Closeness:
    """How often this head's nearest key is its heaviest, over the map's sentences (qk_map.closeness)."""
    points, _, _ = qk_head(name, text, langs, layer, head, unk)
    return qk_map.closeness(points.q[0, 0], points.k[0, 0], points.sentence)
