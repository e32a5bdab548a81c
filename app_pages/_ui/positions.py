"""Cached computations of the Positions page: st.cache_data around viz_core.lessons.position_demos and viz_core.lessons.positional
(every result is a plain, picklable value; the math and its tests live in viz_core).

Large tables are thinned there to what a heatmap can show (position_demos.DRAW / SIDE); downloads get the full arrays.
"""
from __future__ import annotations

import numpy as np
import streamlit as st

from viz_core.lessons import position_demos as demos
from viz_core.lessons import positional as P


@st.cache_data(show_spinner=False, max_entries=8)
def encoding(max_len: int, d_model: int) -> np.ndarray:
    """The full table (max_len, d_model) as float32 (for downloads)."""
    return demos.download_table(max_len, d_model)


@st.cache_data(show_spinner=False, max_entries=16)
def encoding_view(max_len: int, d_model: int) -> demos.TableView:
    return demos.encoding_view(max_len, d_model)


@st.cache_data(show_spinner=False, max_entries=16)
def waves(max_len: int, d_model: int, dims: tuple[int, ...]) -> demos.Waves:
    return demos.waves(max_len, d_model, dims)


@st.cache_data(show_spinner=False, max_entries=16)
def similarity_view(max_len: int, d_model: int, cosine: bool) -> demos.SimilarityView:
    return demos.similarity_view(max_len, d_model, cosine)


@st.cache_data(show_spinner=False, max_entries=16)
def rotation_view(max_len: int, d_model: int, k: int, pair: int) -> demos.RotationView:
    return demos.rotation_view(max_len, d_model, k, pair)


@st.cache_data(show_spinner=False, max_entries=4)
def norm_study(d_models: tuple[int, ...]) -> P.NormStudy:
    return P.norm_study(d_models)


@st.cache_data(show_spinner=False, max_entries=4)
def nearest_accuracies(d_models: tuple[int, ...]) -> dict[int, tuple[float, float]]:
    """Every width at once, so that picking another width afterwards is a cache hit."""
    return demos.nearest_accuracies(d_models)


@st.cache_data(show_spinner=False, max_entries=8)
def comparison(learned: np.ndarray, n_positions: int) -> demos.Comparison:
    return demos.comparison(learned, n_positions)


@st.cache_data(show_spinner=False, max_entries=16)
def order(tokens: tuple[str, ...], kind: str, seed: int, d_model: int) -> tuple[P.OrderExperiment, P.OrderExperiment]:
    """The order experiment without and with PE."""
    return demos.order_experiments(tokens, kind, seed, d_model)
