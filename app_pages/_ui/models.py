"""Cached access to pretrained models, shared by every session (read-only: eval mode, inference only)."""
from __future__ import annotations

import numpy as np
import streamlit as st

from viz_core import pretrained


@st.cache_resource(show_spinner=False, max_entries=3)
def model(name: str = "") -> pretrained.LoadedModel:
    """The loaded model for a hub id / folder ("" = the packaged all-MiniLM-L6-v2). Raises InputError."""
    return pretrained.load_model(name or None)


def default_model() -> pretrained.LoadedModel:
    return model("")


@st.cache_resource(show_spinner=False, max_entries=6)
def attention(name: str, text: str, text_pair: str = "", target_text: str = "") -> pretrained.AttentionResult:
    """Attention of one input (shared, read-only arrays: callers never modify them in place)."""
    return pretrained.attention_for(model(name), text, text_pair or None, target_text or None)


@st.cache_resource(show_spinner=False, max_entries=16)
def qkv(text: str, layer: int, name: str = "") -> pretrained.QKV:
    """Q, K, V (H, N, d_k) of one layer of the model for text."""
    return pretrained.qkv_for(model(name), text, layer)


@st.cache_data(show_spinner=False, max_entries=2)
def position_embeddings(name: str = "") -> np.ndarray | None:
    """Learned position embeddings (max_positions, d_model) of the model, or None."""
    return pretrained.position_embeddings(model(name))
