"""Cached derived data for the Attention page (statistics, rollout, the export archive)."""
from __future__ import annotations

import numpy as np
import streamlit as st

from viz_core import export
from viz_core.pretrained import head_analysis
from viz_core.pretrained.result import AttentionResult

from . import models


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
