"""Cached derived data for the Attention page (statistics, rollout, export files)."""
from __future__ import annotations

import csv as _csv
import io

import numpy as np
import streamlit as st

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


def npz(name: str, text: str, pair: str, target: str) -> bytes:
    """Every layer and head of every map, plus tokens, as one .npz (built only when downloaded)."""
    r = result(name, text, pair, target)
    arrays = dict(weights=r.weights, tokens=np.array(r.tokens), special=r.special, segments=r.segments)
    if r.decoder_weights is not None:
        arrays.update(decoder_weights=r.decoder_weights, cross_weights=r.cross_weights,
                      decoder_tokens=np.array(r.decoder_tokens))
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


def csv(matrix: np.ndarray, q_tokens: list[str], k_tokens: list[str]) -> str:
    """One head as CSV: rows = queries, columns = keys, labelled 'index:token' (unique even when tokens repeat).

    Plain csv module, not pandas: importing pandas alone costs the server ~65 MB of its 690 MB budget.
    """
    buf = io.StringIO()
    writer = _csv.writer(buf)
    writer.writerow(["query \\ key"] + [f"{j}:{t}" for j, t in enumerate(k_tokens)])
    for i, (tok, row) in enumerate(zip(q_tokens, matrix)):
        writer.writerow([f"{i}:{tok}"] + [f"{v:.7g}" for v in row])
    return buf.getvalue()
