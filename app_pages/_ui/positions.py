"""Cached computations of the Positions page (st.cache_data: every result is a plain, picklable value).

Large tables are thinned here to what a heatmap can show (DRAW_ROWS x DRAW_COLS); downloads get the full arrays.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import streamlit as st

from viz_core import positional as P

DRAW_ROWS = 200     # most positions drawn in one heatmap
DRAW_COLS = 192     # most dimensions drawn in one heatmap (thinned by whole sin/cos pairs)
SIDE_ROWS = 128     # the same, for the three narrow side-by-side heatmaps of the learned/fixed/RoPE comparison
SIDE_COLS = 96


@dataclass
class TableView:
    rows: np.ndarray      # (R,) positions drawn
    cols: np.ndarray      # (C,) dimensions drawn
    values: np.ndarray    # (R, C) the table at those rows and columns
    shape: tuple          # shape of the full table


@dataclass
class SimilarityView:
    idx: np.ndarray         # (R,) positions drawn
    sim: np.ndarray         # (R, R) similarity between them
    deviation: float        # largest spread along a diagonal of sim (0 = depends on q - p only)
    profile_0: np.ndarray   # (N,) similarity of position 0 with positions 0..N-1
    profile_mid: np.ndarray  # (N - mid,) similarity of position mid with mid..N-1
    mid: int
    theory: np.ndarray      # (N,) sum_i cos(k w_i) over complete pairs (dot products only)


@dataclass
class RotationView:
    corner: np.ndarray      # (c, c) top-left corner of M_k
    pair_values: np.ndarray  # (N, 2) the chosen pair's (sin, cos) at every position
    dim_errors: np.ndarray  # (d,) max |M_k PE(pos) - PE(pos + k)| over positions, per dimension
    max_error: float


@st.cache_data(show_spinner=False, max_entries=8)
def encoding(max_len: int, d_model: int) -> np.ndarray:
    """The full table (max_len, d_model) as float32 (for downloads)."""
    return P.sinusoidal_encoding(max_len, d_model).astype(np.float32)


def _view(table: np.ndarray, row_limit: int, col_limit: int) -> TableView:
    rows, cols = P.thin_rows(table.shape[0], row_limit), P.thin_columns(table.shape[1], col_limit)
    return TableView(rows, cols, table[np.ix_(rows, cols)], table.shape)


@st.cache_data(show_spinner=False, max_entries=16)
def encoding_view(max_len: int, d_model: int) -> TableView:
    return _view(P.sinusoidal_encoding(max_len, d_model), DRAW_ROWS, DRAW_COLS)


@st.cache_data(show_spinner=False, max_entries=16)
def waves(max_len: int, d_model: int, dims: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x_dense (P,), dense (P, k), samples (max_len, k)) for the chosen columns."""
    x_dense = np.linspace(0, max(max_len - 1, 1), 1500)  # (P,)
    dense = P.encoding_at(x_dense, d_model)[:, list(dims)]  # (P, k)
    samples = P.encoding_at(np.arange(max_len), d_model)[:, list(dims)]  # (max_len, k)
    return x_dense, dense, samples


@st.cache_data(show_spinner=False, max_entries=16)
def similarity_view(max_len: int, d_model: int, cosine: bool) -> SimilarityView:
    pe = P.sinusoidal_encoding(max_len, d_model)  # (N, d)
    idx = P.thin_rows(max_len, DRAW_ROWS)
    sim = P.similarity(pe[idx], cosine)  # (R, R)
    mid = max_len // 2
    prof = _profile(pe, 0, cosine), _profile(pe, mid, cosine)
    theory = P.dot_by_offset(np.arange(max_len), d_model)
    return SimilarityView(idx, sim, P.toeplitz_deviation(sim), prof[0], prof[1], mid, theory)


def _profile(pe: np.ndarray, p: int, cosine: bool) -> np.ndarray:
    """Similarity of position p with positions p, p+1, ..., N-1: (N - p,)."""
    rest = pe[p:]  # (N - p, d)
    dots = rest @ pe[p]  # (N - p,)
    if cosine:
        dots = dots / np.maximum(np.linalg.norm(rest, axis=1) * np.linalg.norm(pe[p]), 1e-300)
    return dots


@st.cache_data(show_spinner=False, max_entries=16)
def rotation_view(max_len: int, d_model: int, k: int, pair: int, corner: int = 8) -> RotationView:
    pe = P.sinusoidal_encoding(max_len, d_model)  # (N, d)
    _, err = P.shift_by_rotation(pe, k)  # (N - k, d)
    c = min(corner, d_model)
    m = P.rotation_matrix(d_model, k)[:c, :c]
    return RotationView(m, pe[:, 2 * pair:2 * pair + 2], np.abs(err).max(axis=0), float(np.abs(err).max()))


@st.cache_data(show_spinner=False, max_entries=4)
def norm_study(d_models: tuple[int, ...]) -> P.NormStudy:
    return P.norm_study(d_models)


@st.cache_data(show_spinner=False, max_entries=4)
def nearest_accuracies(d_models: tuple[int, ...]) -> dict[int, tuple[float, float]]:
    """Nearest-token accuracy of x + PE (without, with the sqrt(d_model) factor) for every width at once, so that
    picking another width afterwards is a cache hit."""
    return {d: (P.nearest_token_accuracy(d, False), P.nearest_token_accuracy(d, True)) for d in d_models}


@dataclass
class Comparison:
    tables: dict            # name -> TableView of the (n, d) table (learned / sinusoidal / rope)
    sims: dict              # name -> (idx (R,), cosine similarity (R, R))
    profiles: dict          # name -> (N,) mean cosine similarity at offset k = 0..N-1
    deviations: dict        # name -> spread along diagonals of the full (N, N) cosine similarity
    norms: dict             # name -> (mean, min, max) row norms
    d_model: int


def _compare_one(table: np.ndarray) -> tuple:
    cos = P.cosine_similarity(table)  # (N, N)
    idx = P.thin_rows(len(table), SIDE_ROWS)
    norms = np.linalg.norm(table, axis=1)
    return (_view(table, SIDE_ROWS, SIDE_COLS), (idx, cos[np.ix_(idx, idx)]), P.mean_by_offset(cos)[1],
            P.toeplitz_deviation(cos), (float(norms.mean()), float(norms.min()), float(norms.max())))


@st.cache_data(show_spinner=False, max_entries=8)
def comparison(learned: np.ndarray, n_positions: int) -> Comparison:
    """Learned table (first n_positions rows) next to sinusoidal and RoPE tables of the same width."""
    learned = np.asarray(learned, dtype=np.float64)[:n_positions]  # (N, d)
    d = learned.shape[1]
    tables = {"learned": learned, "sinusoidal": P.sinusoidal_encoding(n_positions, d),
              "rope": P.rope_table(n_positions, d)}
    parts = {name: _compare_one(t) for name, t in tables.items()}
    return Comparison(*({n: p[i] for n, p in parts.items()} for i in range(5)), d_model=d)


@st.cache_data(show_spinner=False, max_entries=16)
def order(tokens: tuple[str, ...], kind: str, seed: int, d_model: int) -> tuple[P.OrderExperiment, P.OrderExperiment]:
    """The order experiment without and with PE."""
    perm = P.permutation(len(tokens), kind, seed)
    return (P.order_experiment(list(tokens), perm, d_model, use_pe=False),
            P.order_experiment(list(tokens), perm, d_model, use_pe=True))
