"""Cached wrappers of viz_core.lessons.mechanics for the Mechanics page (the only place it is wrapped in st.cache_*)."""
from __future__ import annotations

import numpy as np
import streamlit as st

from viz_core.lessons import mechanics as mech
from viz_core.plots import mechanics as plots

from . import SharedFigures


@st.cache_data(max_entries=64, show_spinner=False)
def worked_steps(x: np.ndarray, wq: np.ndarray, wk: np.ndarray, wv: np.ndarray, tokens: tuple[str, ...],
                 scale: bool, causal: bool, dropout: float, seed: int) -> mech.AttentionSteps:
    cfg = mech.StepConfig(scale=scale, causal=causal, dropout=dropout, seed=seed)
    return mech.worked_steps(x, wq, wk, wv, tokens, cfg)


@st.cache_data(max_entries=64, show_spinner=False)
def random_steps(n: int, d_model: int, d_k: int, d_v: int, seed: int, scale: bool, causal: bool, dropout: float,
                 drop_seed: int) -> mech.AttentionSteps:
    x, wq, wk, wv = mech.random_inputs(n, d_model, d_k, d_v, seed)
    tokens = tuple(f"t{i}" for i in range(n))
    cfg = mech.StepConfig(scale=scale, causal=causal, dropout=dropout, seed=drop_seed)
    return mech.worked_steps(x, wq, wk, wv, tokens, cfg)


def real_qkv(text: str, layer: int):
    """Q, K, V of one layer of the default pretrained model (lead's cached loader in app_pages/_ui/models.py)."""
    from app_pages._ui import models
    return models.qkv(text, layer)


@st.cache_data(max_entries=32, show_spinner=False)
def real_steps(text: str, layer: int, head: int, scale: bool, causal: bool, dropout: float, seed: int):
    """(steps of one head, the model's own weights of that head (N, N), n_layers, n_heads)."""
    qkv = real_qkv(text, layer)
    head = min(head, qkv.n_heads - 1)
    cfg = mech.StepConfig(scale=scale, causal=causal, dropout=dropout, seed=seed)
    steps = mech.attention_steps(qkv.q[head], qkv.k[head], qkv.v[head], qkv.tokens, cfg)
    return steps, np.asarray(qkv.weights[head]), qkv.n_layers, qkv.n_heads


@st.cache_data(max_entries=32, show_spinner=False)
def shape_walkthrough(b: int, n: int, d_model: int, n_heads: int) -> list[mech.ShapeStep]:
    return mech.shape_walkthrough(b, n, d_model, n_heads)


@st.cache_data(max_entries=64, show_spinner=False)
def mask_view(text: str, pad_side: str, item: int, kind: str, query_text: str, seed: int,
              window: int = mech.DEFAULT_WINDOW):
    batch = mech.parse_batch(text, pad_side)
    item = min(item, len(batch.tokens) - 1)
    return batch, mech.mask_view(batch, item, kind, query_text, seed=seed, window=window)


@st.cache_data(max_entries=1, show_spinner=False)
def fp16_fill_check() -> dict[str, str]:
    return mech.fp16_fill_check()


@st.cache_data(max_entries=32, show_spinner=False)
def compare_variants(d_model: int, n_heads: int, n_kv: int, n_tokens: int, seed: int) -> mech.VariantComparison:
    return mech.compare_variants(d_model, n_heads, n_kv, n_tokens, seed)


@st.cache_data(max_entries=32, show_spinner=False)
def equivalence_check(d_model: int, n_heads: int, seed: int) -> dict[str, float]:
    return mech.equivalence_check(d_model, n_heads, seed=seed)


@st.cache_data(max_entries=64, show_spinner=False)
def cross_attention(q_text: str, k_text: str, d_model: int, n_heads: int, seed: int) -> mech.CrossResult:
    q_tokens = mech.parse_tokens(q_text, "query")
    batch = mech.parse_batch(k_text, "end")
    return mech.cross_attention(q_tokens, batch.tokens[0], d_model, n_heads, seed, batch.is_pad[0].tolist())


@st.cache_data(max_entries=64, show_spinner=False)
def additive_vs_dot(q: np.ndarray, k: np.ndarray, v: np.ndarray, d_hidden: int, seed: int):
    return mech.additive_vs_dot(q, k, v, d_hidden, seed)


# Figures cached by their inputs (see SharedFigures): figures.stage_matrix(...) as in viz_core.plots.mechanics
figures = SharedFigures(plots)
