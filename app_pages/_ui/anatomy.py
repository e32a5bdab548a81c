"""Cached wrappers for the Anatomy page (viz_core.lessons.blocks and viz_core.lessons.anatomy). Plain arguments in, so that
st.cache_data can hash them; the dataclass configs are built here."""
from __future__ import annotations

import numpy as np
import streamlit as st

from viz_core.lessons import anatomy, blocks
from viz_core.plots import anatomy as plots
from viz_core.plots import common

from . import SharedFigures


@st.cache_data(show_spinner=False, max_entries=64)
def compare_norms(batch: int, seq_len: int, d_model: int, n_pad: int, pad_side: str, gamma: float, beta: float,
                  seed: int = 0) -> dict:
    cfg = blocks.NormBatch(batch, seq_len, d_model, n_pad, pad_side, seed)
    return blocks.compare_norms(cfg, gamma, beta)


@st.cache_data(show_spinner=False, max_entries=16)
def eps_curve(d_model: int):
    return blocks.eps_placement_curve(d_model, np.logspace(-8, 1, 181))


@st.cache_data(show_spinner=False, max_entries=64)
def norm_placement(depth: int) -> dict:
    return blocks.norm_placement_at_init(depth)


@st.cache_data(show_spinner=False, max_entries=32)
def ffn_demo(d_model: int, mult: int, activation: str) -> dict:
    return blocks.ffn_demo(d_model, mult, activation)


@st.cache_data(show_spinner=False, max_entries=64)
def dropout_places(p: float, training: bool, seed: int) -> dict:
    return blocks.dropout_places_demo(p, training, seed=seed)


@st.cache_data(show_spinner=False, max_entries=32)
def dropout_statistics(p: float) -> dict:
    return blocks.dropout_statistics(p)


@st.cache_data(show_spinner=False, max_entries=64)
def next_token_path(text: str, vocab_size: int, d_model: int, n_layers: int, temperature: float, top_k: int,
                    top_p: float, sample_seed: int) -> anatomy.PathResult:
    cfg = anatomy.TinyLMConfig(vocab_size, d_model, 2, n_layers)
    return anatomy.next_token_path(text, cfg, anatomy.Sampling(temperature, top_k, top_p), sample_seed)


@st.cache_data(show_spinner=False, max_entries=32)
def smoothing_check(n_classes: int, eps: float) -> tuple[float, float]:
    return blocks.smoothing_check(n_classes, eps)


@st.cache_data(show_spinner=False, max_entries=32)
def parameter_counts(vocab: int, d_model: int, n_heads: int, d_ff: int, n_enc: int, n_dec: int,
                     sharing: str) -> tuple[dict[str, int], int]:
    """(count by part, torch reference total)."""
    cfg = anatomy.TransformerSizes(vocab, d_model, n_heads, d_ff, n_enc, n_dec, sharing)
    return anatomy.count_parameters(cfg), anatomy.reference_parameter_count(cfg)


# Figures cached by their inputs (see SharedFigures): figures.eps_figure(...) as in viz_core.plots.anatomy
figures = SharedFigures(plots)
matrix_heatmap = SharedFigures(common).matrix_heatmap
