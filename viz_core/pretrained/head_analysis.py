"""Numbers derived from attention weights (layers, heads, N, N): aggregates, rollout, per-head statistics,
hiding special tokens, sentence-pair blocks, thumbnails and attention-sink shares. Plain numpy in, numpy out."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SEGMENT_BLOCKS = ("all", "A->A", "A->B", "B->A", "B->B")


def aggregate(weights: np.ndarray, how: str = "mean") -> np.ndarray:
    """Mean or max over heads: (L, H, N, N) -> (L, N, N). The max is not a distribution (rows need not sum to 1)."""
    if how == "mean":
        return weights.mean(axis=1)
    if how == "max":
        return weights.max(axis=1)
    raise ValueError(f"how must be 'mean' or 'max', got {how!r}")


def rollout(weights: np.ndarray, residual: float = 0.5) -> np.ndarray:
    """Attention rollout (Abnar & Zuidema, 2020): how much each input token flows into each position after l layers.

    A_l = residual * I + (1 - residual) * mean_h(W_l), rows renormalised;  R_l = A_l R_{l-1},  R_0 = I.
    Returns (L, N, N): R_1 .. R_L; every row sums to 1.
    """
    n_layers, _, n, _ = weights.shape
    eye = np.eye(n, dtype=np.float64)
    out = np.empty((n_layers, n, n), dtype=np.float32)
    acc = eye
    for layer in range(n_layers):
        a = residual * eye + (1 - residual) * weights[layer].mean(axis=0)  # (N, N)
        a /= a.sum(axis=-1, keepdims=True)
        acc = a @ acc
        out[layer] = acc
    return out


def keep_tokens(weights: np.ndarray, keep_rows: np.ndarray, keep_cols: np.ndarray | None = None) -> np.ndarray:
    """Drop the rows (queries) and columns (keys) not kept and renormalise each row to sum to 1 again.

    (..., Nq, Nk) -> (..., Kq, Kk). keep_cols defaults to keep_rows (self-attention). A row with no weight left on
    the kept keys becomes uniform.
    """
    keep_cols = keep_rows if keep_cols is None else keep_cols
    sub = weights[..., keep_rows, :][..., :, keep_cols]  # (..., Kq, Kk)
    sums = sub.sum(axis=-1, keepdims=True)
    k = sub.shape[-1]
    return np.where(sums > 0, sub / np.where(sums > 0, sums, 1), 1.0 / max(k, 1)).astype(np.float32)


def segment_block(segments: np.ndarray, block: str) -> tuple[np.ndarray, np.ndarray]:
    """Row (query) and column (key) selections for a sentence-pair block "A->B" (queries in A attending to B)."""
    if block not in SEGMENT_BLOCKS:
        raise ValueError(f"block must be one of {SEGMENT_BLOCKS}")
    if block == "all":
        everything = np.ones(len(segments), dtype=bool)
        return everything, everything
    src, dst = block.split("->")
    return segments == "AB".index(src), segments == "AB".index(dst)


@dataclass
class HeadStats:
    """Per-head statistics, each (L, H), averaged over query rows."""
    entropy: np.ndarray        # bits: -sum_j w_ij log2 w_ij
    distance: np.ndarray       # tokens: sum_j w_ij |i - j|
    special: np.ndarray        # weight on special tokens ([CLS]/[SEP], or the first token if there are none)
    previous: np.ndarray       # weight on the previous token (w_{i, i-1}, rows i >= 1)
    self: np.ndarray           # weight on itself (w_ii)

    def as_dict(self) -> dict[str, np.ndarray]:
        return dict(entropy=self.entropy, distance=self.distance, special=self.special, previous=self.previous,
                    self=self.self)


STAT_NAMES = ("entropy", "distance", "special", "previous", "self")


def head_statistics(weights: np.ndarray, special: np.ndarray | None = None) -> HeadStats:
    """Entropy, mean attention distance and where the weight goes, for every head: (L, H, N, N) -> (L, H) each.

    Computed one layer at a time in float32, so a 512-token input needs no full-size temporaries.
    """
    n = weights.shape[-1]
    idx = np.arange(n)
    dist = np.abs(idx[:, None] - idx[None, :]).astype(np.float32)  # (N, N)
    targets = special if special is not None and special.any() else (idx == 0)
    rows = []
    for w in weights:  # (H, N, N)
        entropy = -(w * np.log2(np.maximum(w, 1e-12))).sum(-1).mean(-1)
        distance = (w * dist).sum(-1).mean(-1)
        on_special = w[..., targets].sum(-1).mean(-1)
        previous = np.diagonal(w, offset=-1, axis1=-2, axis2=-1).mean(-1) if n > 1 else np.zeros(w.shape[0])
        on_self = np.diagonal(w, axis1=-2, axis2=-1).mean(-1)
        rows.append((entropy, distance, on_special, previous, on_self))
    return HeadStats(*(np.stack(col).astype(np.float32) for col in zip(*rows)))


def thumbnail(matrix: np.ndarray, size: int) -> np.ndarray:
    """Shrink an (Nq, Nk) attention matrix to at most (size, size), so a grid of many heads stays light.

    Cell (a, b) = the mean over the queries of block a of their total weight on the keys of block b: query rows are
    averaged, key columns summed, so each thumbnail row still sums to 1 and sharp patterns stay visible.
    """
    n_r, n_c = matrix.shape
    if n_r <= size and n_c <= size:
        return matrix.astype(np.float32)
    r_edges = np.linspace(0, n_r, min(size, n_r) + 1).astype(int)
    c_edges = np.linspace(0, n_c, min(size, n_c) + 1).astype(int)
    rows = np.add.reduceat(matrix, r_edges[:-1], axis=0) / np.diff(r_edges)[:, None]
    return np.add.reduceat(rows, c_edges[:-1], axis=1).astype(np.float32)


def is_causal(weights: np.ndarray, tol: float = 1e-6) -> bool:
    """Whether every head gives zero weight above the diagonal (a decoder's causal pattern)."""
    n = weights.shape[-1]
    return bool(n < 2 or np.all(weights[..., np.triu_indices(n, 1)[0], np.triu_indices(n, 1)[1]] <= tol))


def clearest_head(weights: np.ndarray) -> tuple[int, int]:
    """(layer, head) of the strongest previous-token head, a good first head to show: its diagonal band reads at a
    glance, unlike layer 0 head 0, which is often diffuse. (L, H, N, N) -> the argmax of mean w_{i, i-1}."""
    if weights.shape[-1] < 2:
        return 0, 0
    previous = np.diagonal(weights, offset=-1, axis1=-2, axis2=-1).mean(-1)  # (L, H)
    layer, head = np.unravel_index(int(np.argmax(previous)), previous.shape)
    return int(layer), int(head)


@dataclass
class SinkShares:
    """Where each head puts its attention, averaged over queries 1..N-1 for every kind of map: query 0 of a causal
    map can see only token 0 (its share there is 1 by construction), and one rule for all maps keeps them comparable.
    first_every says what including query 0 would give (it differs where query 0 sees every key: an encoder, cross
    attention)."""
    first: np.ndarray      # (L, H): mean weight on token 0 (the attention sink of Xiao et al. 2023)
    special: np.ndarray    # (L, H): mean total weight on the other special tokens ([SEP], </s>, ...)
    rest: np.ndarray       # (L, H): mean total weight on every other token; first + special + rest = 1
    first_every: np.ndarray | None = None  # (L, H): mean weight on token 0 over every query 0..N-1


def sink_shares(weights: np.ndarray, special: np.ndarray) -> SinkShares:
    """Split each head's attention into token 0, the other special tokens and the rest, averaged over the queries:

        first   = mean_i w_i0
        special = mean_i sum_{j > 0, j special} w_ij
        rest    = mean_i sum_{j > 0, j not special} w_ij

    over queries i = 1..Nq-1 (i = 0 alone when Nq = 1). weights (L, H, Nq, Nk), special bool (Nk,) -> (L, H) each.
    """
    rows = weights[..., 1:, :] if weights.shape[-2] > 1 else weights[..., :1, :]  # (L, H, Nq', Nk)
    other = np.asarray(special, dtype=bool).copy()
    other[0] = False  # token 0 counts as "first" whatever it is
    keep = ~other
    keep[0] = False
    first = rows[..., 0].mean(-1)  # (L, H)
    on_special = rows[..., other].sum(-1).mean(-1)  # (L, H)
    on_rest = rows[..., keep].sum(-1).mean(-1)  # (L, H)
    every = weights[..., 0].mean(-1)  # (L, H)
    return SinkShares(*(a.astype(np.float32) for a in (first, on_special, on_rest, every)))


# ---------------------------------------------------------------- what attention says about token attribution
def reading_rows(kind: str, n: int) -> np.ndarray:
    """The query rows whose attention is read: all rows for an encoder (mean pooling reads every position), the
    last row for a decoder-only model (the position that predicts the next token)."""
    rows = np.zeros(n, dtype=bool)
    if kind == "next":
        rows[-1] = True
    else:
        rows[:] = True
    return rows


def attention_received(weights: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(raw, rollout) per key token: (L, H, N, N) -> (N,) each, averaged over the reading rows.

    raw = mean_h W_{L,h}[rows].mean(0), the last layer; rollout = R_L[rows].mean(0) (see rollout).
    Both sum to 1 over the tokens.
    """
    raw = weights[-1].mean(0)[rows].mean(0)                       # (N,)
    roll = rollout(weights)[-1][rows].mean(0)                     # (N,)
    return raw.astype(np.float32), roll.astype(np.float32)


def outside_window(weights: np.ndarray, window: int) -> float:
    """The share of the causal (query, key) pairs of an (N, N) map that lie outside a sliding window of W keys
    (i - j >= W) and carry zero weight: 1.0 on a sliding layer, near 0 on a full one."""
    n = weights.shape[-1]
    i, j = np.indices((n, n))
    outside = i - j >= window  # (N, N)
    return float((weights[..., outside] == 0).mean()) if outside.any() else 0.0
