"""What the Positions page draws, computed: thinned views of the encoding table, the waves of two columns, the
similarity and rotation studies, the learned / sinusoidal / rotary comparison and the order experiment.

The formulas live in viz_core.lessons.positional; this module arranges them into the page's figures. Every result is a
plain, picklable dataclass of numpy arrays, so the page's st.cache_data wrappers only pass arguments through.

Thinning: a heatmap cannot show more cells than it has pixels. A table of N positions is drawn at every s-th row,
s = ceil(N / limit), and at every s'-th (sin, cos) pair so both halves of a pair stay (see positional.thin_rows /
thin_columns); downloads get the full arrays.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import positional as P


@dataclass(frozen=True)
class ViewLimits:
    rows: int = 200     # most positions drawn in one heatmap
    cols: int = 192     # most dimensions drawn in one heatmap (thinned by whole sin/cos pairs)


DRAW = ViewLimits()                    # one wide heatmap
SIDE = ViewLimits(rows=128, cols=96)   # the three narrow side-by-side heatmaps of the learned/fixed/RoPE comparison
DENSE_POINTS = 1500                    # points of the continuous curves drawn under the integer positions


# ---------------------------------------------------------------- the table and two of its columns
@dataclass
class TableView:
    rows: np.ndarray      # (R,) positions drawn
    cols: np.ndarray      # (C,) dimensions drawn
    values: np.ndarray    # (R, C) the table at those rows and columns
    shape: tuple          # shape of the full table (N, d)


def download_table(max_len: int, d_model: int) -> np.ndarray:
    """The full sinusoidal table as float32, (max_len, d_model): what the download holds (half the bytes)."""
    return P.sinusoidal_encoding(max_len, d_model).astype(np.float32)


def table_view(table: np.ndarray, limits: ViewLimits = DRAW) -> TableView:
    """The cells of an (N, d) table that a heatmap shows: rows thinned to limits.rows, columns by whole pairs."""
    table = np.asarray(table)
    rows, cols = P.thin_rows(table.shape[0], limits.rows), P.thin_columns(table.shape[1], limits.cols)
    return TableView(rows, cols, table[np.ix_(rows, cols)], tuple(table.shape))  # values (R, C)


def encoding_view(max_len: int, d_model: int, limits: ViewLimits = DRAW) -> TableView:
    """The sinusoidal table PE (max_len, d_model), thinned for a heatmap."""
    return table_view(P.sinusoidal_encoding(max_len, d_model), limits)


@dataclass
class Waves:
    x_dense: np.ndarray     # (P,) a fine grid over 0 .. max_len - 1 (the continuous curves)
    dense: np.ndarray       # (P, k) the chosen columns of the formula on that grid
    positions: np.ndarray   # (max_len,) the integer positions 0 .. max_len - 1
    samples: np.ndarray     # (max_len, k) the chosen columns at those positions: the table's own values


def waves(max_len: int, d_model: int, dims: tuple[int, ...], n_dense: int = DENSE_POINTS) -> Waves:
    """Columns `dims` of PE as continuous curves sin(x w_i) / cos(x w_i) and as the samples at integer x."""
    dims = list(dims)
    x_dense = np.linspace(0, max(max_len - 1, 1), n_dense)  # (P,)
    positions = np.arange(max_len)  # (max_len,)
    return Waves(x_dense, P.encoding_at(x_dense, d_model)[:, dims], positions,
                 P.encoding_at(positions, d_model)[:, dims])  # (P, k), (max_len, k)


# ---------------------------------------------------------------- similarity between positions
@dataclass
class SimilarityView:
    idx: np.ndarray          # (R,) positions drawn
    sim: np.ndarray          # (R, R) similarity between them
    deviation: float         # largest spread along a diagonal of sim (0 = depends on q - p only)
    offsets: np.ndarray      # (N,) k = 0 .. N - 1, the x axis of the profiles
    profile_0: np.ndarray    # (N,) similarity of position 0 with position k
    profile_mid: np.ndarray  # (N,) similarity of position mid with mid + k; NaN where mid + k >= N
    mid: int                 # N // 2
    theory: np.ndarray       # (N,) sum_i cos(k w_i) over complete pairs (dot products only)


def similarity_profile(pe: np.ndarray, p: int, cosine: bool = False) -> np.ndarray:
    """Similarity of position p with positions p, p+1, ..., N-1: PE(p) . PE(p + k), divided by both norms when
    cosine. pe (N, d) -> (N - p,)."""
    pe = np.asarray(pe, dtype=np.float64)
    rest = pe[p:]  # (N - p, d)
    dots = rest @ pe[p]  # (N - p,)
    if cosine:
        dots = dots / np.maximum(np.linalg.norm(rest, axis=1) * np.linalg.norm(pe[p]), 1e-300)
    return dots


def similarity_view(max_len: int, d_model: int, cosine: bool, limits: ViewLimits = DRAW) -> SimilarityView:
    """PE(p) . PE(q) (or the cosine) between the drawn positions, its distance from a Toeplitz matrix, the profiles
    from positions 0 and N // 2, and the theory sum_i cos(k w_i)."""
    pe = P.sinusoidal_encoding(max_len, d_model)  # (N, d)
    idx = P.thin_rows(max_len, limits.rows)  # (R,)
    sim = P.similarity(pe[idx], cosine)  # (R, R)
    mid = max_len // 2
    offsets = np.arange(max_len)  # (N,)
    from_mid = np.r_[similarity_profile(pe, mid, cosine), np.full(mid, np.nan)]  # (N,)
    return SimilarityView(idx, sim, P.toeplitz_deviation(sim), offsets, similarity_profile(pe, 0, cosine),
                          from_mid, mid, P.dot_by_offset(offsets, d_model))


# ---------------------------------------------------------------- relative positions: a fixed rotation
@dataclass
class RotationView:
    corner: np.ndarray       # (c, c) top-left corner of M_k
    pair_values: np.ndarray  # (N, 2) the chosen pair's (sin, cos) at every position
    angle_deg: float         # k w_i of the chosen pair i, in degrees: how far M_k turns that pair
    dim_errors: np.ndarray   # (d,) max |M_k PE(pos) - PE(pos + k)| over positions, per dimension
    max_error: float


def rotation_view(max_len: int, d_model: int, k: int, pair: int, corner: int = 8) -> RotationView:
    """PE(pos + k) = M_k PE(pos): the corner of M_k, pair i on its circle, the angle k w_i and the error per column."""
    pe = P.sinusoidal_encoding(max_len, d_model)  # (N, d)
    _, err = P.shift_by_rotation(pe, k)  # (N - k, d)
    c = min(corner, d_model)
    dim_errors = np.abs(err).max(axis=0)  # (d,)
    return RotationView(P.rotation_matrix(d_model, k)[:c, :c], pe[:, 2 * pair:2 * pair + 2],
                        float(np.degrees(k * P.angular_frequencies(d_model)[pair])), dim_errors,
                        float(dim_errors.max()))


# ---------------------------------------------------------------- why embeddings are multiplied by sqrt(d_model)
def nearest_accuracies(d_models: tuple[int, ...]) -> dict[int, tuple[float, float]]:
    """Nearest-token accuracy of x + PE (without, with the sqrt(d_model) factor) for every width at once."""
    return {d: (P.nearest_token_accuracy(d, False), P.nearest_token_accuracy(d, True)) for d in d_models}


# ---------------------------------------------------------------- learned vs fixed vs rotary
@dataclass
class Comparison:
    tables: dict            # name -> TableView of the (N, d) table (learned / sinusoidal / rope)
    sims: dict              # name -> (idx (R,), cosine similarity (R, R))
    profiles: dict          # name -> (N,) mean cosine similarity at offset k = 0..N-1
    deviations: dict        # name -> spread along diagonals of the full (N, N) cosine similarity
    norms: dict             # name -> (mean, min, max) row norms
    d_model: int
    offsets: np.ndarray     # (N,) k = 0 .. N - 1, the x axis of the profiles


def _compare_one(table: np.ndarray, limits: ViewLimits) -> tuple:
    """(view, (idx, thinned cosine), mean cosine by offset, Toeplitz deviation, (mean, min, max) norm) of a table."""
    cos = P.cosine_similarity(table)  # (N, N)
    idx = P.thin_rows(len(table), limits.rows)  # (R,)
    norms = np.linalg.norm(table, axis=1)  # (N,)
    return (table_view(table, limits), (idx, cos[np.ix_(idx, idx)]), P.mean_by_offset(cos)[1],
            P.toeplitz_deviation(cos), (float(norms.mean()), float(norms.min()), float(norms.max())))


def comparison(learned: np.ndarray, n_positions: int, limits: ViewLimits = SIDE) -> Comparison:
    """The first n_positions rows of a learned table next to sinusoidal and RoPE tables of the same width."""
    learned = np.asarray(learned, dtype=np.float64)[:n_positions]  # (N, d)
    n, d = learned.shape
    tables = {"learned": learned, "sinusoidal": P.sinusoidal_encoding(n, d), "rope": P.rope_table(n, d)}
    parts = {name: _compare_one(t, limits) for name, t in tables.items()}
    return Comparison(*({name: p[i] for name, p in parts.items()} for i in range(5)), d_model=d,
                      offsets=np.arange(n))


# ---------------------------------------------------------------- order matters
def order_experiments(tokens: tuple[str, ...], kind: str, seed: int,
                      d_model: int) -> tuple[P.OrderExperiment, P.OrderExperiment]:
    """The order experiment on the same permutation, without and with PE."""
    perm = P.permutation(len(tokens), kind, seed)
    return (P.order_experiment(list(tokens), perm, d_model, use_pe=False),
            P.order_experiment(list(tokens), perm, d_model, use_pe=True))
