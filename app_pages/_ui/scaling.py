"""Scaling page: cached viz_core calls."""
from __future__ import annotations

import numpy as np
import streamlit as st

from viz_core.runtime.device import pick_device

from app_pages._ui import models
from viz_core.lessons import scaling

N_SAMPLES = 10_000  # q.k samples per d_k (the API default)


# ---------------------------------------------------------------- cached computations
@st.cache_data(show_spinner=False, max_entries=4)
def variance_sweep(n_samples: int = N_SAMPLES, seed: int = 0) -> scaling.VarianceSweep:
    """q.k samples for d_k = 1..4096 (one shared stream of draws, about a second once, then instant)."""
    return scaling.variance_sweep(scaling.DK_GRID, n_samples, seed)


@st.cache_data(show_spinner=False, max_entries=32)
def saturation_sweep(n_keys: int, temperature: float) -> scaling.SaturationSweep:
    cfg = scaling.SaturationConfig(n_keys=n_keys, temperature=temperature, n_rows=scaling.rows_for(n_keys))
    return scaling.saturation_sweep(cfg)


@st.cache_data(show_spinner=False, max_entries=64)
def example_row(d_k: int, n_keys: int, seed: int = 0) -> np.ndarray:
    return scaling.example_row(d_k, n_keys, seed)


def model_shape() -> tuple[str, int, int]:
    """(name, layers, heads) of the default pretrained model. Raises InputError if it cannot be loaded."""
    m = models.info()  # the packaged model's shape, without loading it in transformers
    return m.name, m.n_layers, m.n_heads


@st.cache_data(show_spinner=False, max_entries=32)
def head_scores(text: str, layer: int, head: int) -> tuple[list[str], scaling.HeadScores, np.ndarray, np.ndarray]:
    """(tokens, the head's scores with and without the scale, the model's own weights of that head, q and k).

    q and k come back stacked as (2, N, d_k) for the download. Raises InputError for bad text or indices.
    """
    qkv = models.qkv(text, layer)
    scores = scaling.head_scores(qkv.q, qkv.k, head)
    return list(qkv.tokens), scores, np.array(qkv.weights[head]), np.stack([qkv.q[head], qkv.k[head]])


@st.cache_data(show_spinner=False, max_entries=16)
def experiment(d_k: int, steps: int) -> scaling.ExperimentResult:
    """Train the tiny model twice (a few seconds; on the GPU when there is one); the same settings never train
    again."""
    return scaling.train_experiment(scaling.ExperimentConfig(d_k=d_k, steps=steps), pick_device())
