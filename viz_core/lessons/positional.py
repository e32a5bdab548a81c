"""Positional encodings: the Transformer's sinusoids and their geometry, with learned tables and rotary (RoPE)
for comparison.

PE(pos, 2i)   = sin(pos / base^(2i / d_model))
PE(pos, 2i+1) = cos(pos / base^(2i / d_model))          (Vaswani et al. 2017, section 3.5; base = 10000)

Columns 2i and 2i+1 form "pair i" with angular frequency w_i = base^(-2i / d_model) and wavelength 2 pi / w_i.
For an odd d_model the last column is a sine with its own pair index (d_model - 1) / 2 and no cosine partner.
Everything here is numpy (float64) except order_experiment, which runs viz_core.attention on torch tensors.
"""
from __future__ import annotations

import math
import operator
import zlib
from dataclasses import dataclass

import numpy as np

from ..errors import InputError

BASE = 10_000.0          # the paper's base of the geometric frequency ladder
MAX_CELLS = 4_000_000    # largest max_len * d_model computed at once (32 MB of float64); larger asks raise InputError
MAX_TOKENS = 16          # longest token list for the order experiment
MAX_VECTOR = 64          # longest hand-typed embedding for the worked example


# ---------------------------------------------------------------- validation
def _as_int(value, code: str, what: str) -> int:
    try:
        return operator.index(value)
    except TypeError:
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise InputError(code, f"{what} must be a whole number, got {value!r}", value=value) from None


def _check_sizes(max_len, d_model) -> tuple[int, int]:
    """Validated (max_len, d_model): d_model >= 1, max_len >= 0, max_len * d_model <= MAX_CELLS."""
    d_model = _as_int(d_model, "positions.bad_d_model", "d_model")
    max_len = _as_int(max_len, "positions.bad_max_len", "max_len")
    if d_model < 1:
        raise InputError("positions.bad_d_model", f"d_model must be at least 1, got {d_model}", value=d_model)
    if max_len < 0:
        raise InputError("positions.bad_max_len", f"max_len must be 0 or more, got {max_len}", value=max_len)
    if max_len * d_model > MAX_CELLS:
        raise InputError("positions.too_large", f"max_len x d_model = {max_len * d_model:,} is over the limit of "
                         f"{MAX_CELLS:,} values; lower max_len or d_model", cells=max_len * d_model, limit=MAX_CELLS)
    return max_len, d_model


# ---------------------------------------------------------------- the sinusoidal encoding
def pair_index(d_model: int) -> np.ndarray:
    """Pair index i of every column j: i = j // 2, shape (d_model,)."""
    return np.arange(d_model) // 2


def angular_frequencies(d_model: int, base: float = BASE) -> np.ndarray:
    """w_i = base^(-2i / d_model) for i = 0 .. ceil(d_model / 2) - 1, shape (n_pairs,)."""
    i = np.arange((d_model + 1) // 2, dtype=np.float64)
    return base ** (-2.0 * i / d_model)


def wavelengths(d_model: int, base: float = BASE) -> np.ndarray:
    """Wavelength (in positions) of each pair: 2 pi / w_i = 2 pi base^(2i / d_model), from 2 pi up to ~2 pi base."""
    return 2.0 * np.pi / angular_frequencies(d_model, base)


def encoding_at(positions: np.ndarray, d_model: int, base: float = BASE) -> np.ndarray:
    """The sinusoidal formula at arbitrary (also fractional) positions: (P,) -> (P, d_model)."""
    _, d_model = _check_sizes(0, d_model)
    pos = np.asarray(positions, dtype=np.float64).reshape(-1, 1)  # (P, 1)
    angles = pos * angular_frequencies(d_model, base)[pair_index(d_model)]  # (P, d_model)
    return np.where(np.arange(d_model) % 2 == 0, np.sin(angles), np.cos(angles))  # (P, d_model)


def sinusoidal_encoding(max_len: int, d_model: int, base: float = BASE) -> np.ndarray:
    """The paper's positional encoding table, float64 (max_len, d_model); row = position, column = dimension.

    PE(pos, 2i) = sin(pos / base^(2i/d_model)), PE(pos, 2i+1) = cos(pos / base^(2i/d_model)). Any d_model >= 1
    (odd: the last column is a sine with pair index (d_model-1)/2). max_len 0 gives an empty (0, d_model) array.
    Raises InputError for d_model < 1, max_len < 0, or more than MAX_CELLS values.
    """
    max_len, d_model = _check_sizes(max_len, d_model)
    return encoding_at(np.arange(max_len), d_model, base)  # (max_len, d_model)


# ---------------------------------------------------------------- similarity between positions
def similarity(pe: np.ndarray, cosine: bool = False) -> np.ndarray:
    """PE(p) . PE(q) for every pair of rows, (N, d) -> (N, N); cosine=True divides by both norms."""
    pe = np.asarray(pe, dtype=np.float64)
    if cosine:
        norms = np.linalg.norm(pe, axis=1, keepdims=True)  # (N, 1)
        pe = pe / np.where(norms > 0, norms, 1.0)
    return pe @ pe.T  # (N, N)


def dot_by_offset(offsets: np.ndarray, d_model: int, base: float = BASE) -> np.ndarray:
    """Theory: for complete (sin, cos) pairs, PE(p) . PE(p + k) = sum_i cos(k w_i), whatever p. (K,) -> (K,).

    sin(a) sin(b) + cos(a) cos(b) = cos(a - b). A lone sine column (odd d_model) is not included: its product
    sin(p w) sin((p + k) w) also depends on p.
    """
    w = angular_frequencies(d_model, base)[: d_model // 2]  # (n_full_pairs,)
    return np.cos(np.outer(np.asarray(offsets, dtype=np.float64), w)).sum(axis=1)  # (K,)


def toeplitz_deviation(matrix: np.ndarray) -> float:
    """How far a square matrix is from depending on q - p only: the largest spread (max - min) along a diagonal."""
    m = np.asarray(matrix, dtype=np.float64)
    n = m.shape[0]
    spreads = [np.ptp(np.diagonal(m, k)) for k in range(-(n - 1), n)]
    return float(max(spreads, default=0.0))


def mean_by_offset(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Average of a square matrix along each diagonal k = q - p >= 0: (offsets (N,), means (N,))."""
    m = np.asarray(matrix, dtype=np.float64)
    n = m.shape[0]
    return np.arange(n), np.array([np.diagonal(m, k).mean() for k in range(n)])


def thin_rows(n: int, limit: int) -> np.ndarray:
    """Every s-th index of range(n) so that at most limit remain (s = ceil(n / limit)): which rows to draw."""
    return np.arange(0, n, max(1, math.ceil(n / max(1, limit))))


def thin_columns(d_model: int, limit: int) -> np.ndarray:
    """Column indices to draw, at most ~limit, thinned by whole (sin, cos) pairs so both halves of a pair stay."""
    if d_model <= limit:
        return np.arange(d_model)
    pairs = thin_rows((d_model + 1) // 2, max(1, limit // 2))  # (n_kept_pairs,)
    cols = np.stack([2 * pairs, 2 * pairs + 1], axis=1).ravel()  # (2 * n_kept_pairs,)
    return cols[cols < d_model]


# ---------------------------------------------------------------- relative positions: a fixed rotation
def rotation_blocks(d_model: int, k: int, base: float = BASE) -> np.ndarray:
    """The 2x2 blocks that map pair i of PE(pos) to pair i of PE(pos + k), shape (d_model // 2, 2, 2).

    [sin((p+k)w), cos((p+k)w)] = [[cos kw, sin kw], [-sin kw, cos kw]] @ [sin(pw), cos(pw)] (angle-sum formulas):
    the block depends on k and w_i only, never on pos.
    """
    angle = k * angular_frequencies(d_model, base)[: d_model // 2]  # (n_full_pairs,)
    c, s = np.cos(angle), np.sin(angle)
    return np.stack([np.stack([c, s], -1), np.stack([-s, c], -1)], -2)  # (n_full_pairs, 2, 2)


def rotation_matrix(d_model: int, k: int, base: float = BASE) -> np.ndarray:
    """Block-diagonal M_k (d_model, d_model) with PE(pos + k) = M_k PE(pos).

    For odd d_model the lone last sine column has no cosine partner, so no exact linear map exists for it; M_k keeps
    it unchanged (1 on the diagonal) and the reconstruction error shows what that costs (about k w, tiny).
    """
    _, d_model = _check_sizes(0, d_model)
    m = np.eye(d_model)
    for i, block in enumerate(rotation_blocks(d_model, k, base)):
        m[2 * i:2 * i + 2, 2 * i:2 * i + 2] = block
    return m  # (d_model, d_model)


def shift_by_rotation(pe: np.ndarray, k: int, base: float = BASE) -> tuple[np.ndarray, np.ndarray]:
    """Predict PE(pos + k) as M_k PE(pos) for every pos with pos + k < N, applying the 2x2 blocks pair by pair
    (the same as multiplying by rotation_matrix, in O(N d) instead of O(N d^2)).

    Returns (predicted (N - k, d), error = predicted - PE(pos + k) (N - k, d)). k must be in 0 .. N - 1.
    """
    pe = np.asarray(pe, dtype=np.float64)
    n, d_model = pe.shape
    if not 0 <= k < n:
        raise InputError("positions.bad_shift", f"the shift k must be between 0 and max_len - 1 = {n - 1}; got {k}",
                         k=k, max_k=n - 1)
    blocks = rotation_blocks(d_model, k, base)  # (n_full_pairs, 2, 2)
    pairs = pe[: n - k, : 2 * len(blocks)].reshape(n - k, len(blocks), 2)  # (N - k, n_full_pairs, 2)
    predicted = pe[: n - k].copy()  # the lone sine column of an odd d_model stays as it is
    predicted[:, : 2 * len(blocks)] = np.einsum("pab,npb->npa", blocks, pairs).reshape(n - k, -1)  # (N - k, 2m)
    return predicted, predicted - pe[k:]


# ---------------------------------------------------------------- worked example
@dataclass
class WorkedExample:
    embedding: np.ndarray   # (d,) the token's embedding as typed (times sqrt(d) when scaled)
    positions: np.ndarray   # (2,) the two positions
    pe: np.ndarray          # (2, d) PE at those positions
    inputs: np.ndarray      # (2, d) embedding + PE: what the first layer sees
    cosine: float           # cosine similarity of the two inputs (1.0 would mean "the same vector")

    @property
    def rows(self) -> np.ndarray:
        """The five rows the page shows: e, PE(p0), e + PE(p0), PE(p1), e + PE(p1), shape (5, d)."""
        return np.stack([self.embedding, self.pe[0], self.inputs[0], self.pe[1], self.inputs[1]])  # (5, d)


def parse_vector(text: str, max_dims: int = MAX_VECTOR) -> np.ndarray:
    """'1.0, 0.5, 0.8, 0.3' (commas and/or spaces) -> float64 (d,), 1 <= d <= max_dims. Raises InputError."""
    parts = [p for p in str(text).replace(",", " ").replace("，", " ").split() if p]
    if not parts:
        raise InputError("positions.empty_vector", "type the embedding as numbers separated by commas")
    try:
        values = np.array([float(p) for p in parts], dtype=np.float64)
    except ValueError:
        bad = next(p for p in parts if not _is_number(p))
        raise InputError("positions.bad_number", f"{bad!r} is not a number", value=bad[:20]) from None
    if len(values) > max_dims or not np.all(np.isfinite(values)):
        raise InputError("positions.bad_vector", f"use 1 to {max_dims} finite numbers", limit=max_dims)
    return values


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def worked_example(embedding: np.ndarray, positions=(0, 4), scale: bool = False,
                   base: float = BASE) -> WorkedExample:
    """x + PE(p) for the same token x at two positions; scale=True first multiplies x by sqrt(d_model)."""
    x = np.asarray(embedding, dtype=np.float64)  # (d,)
    x = x * math.sqrt(len(x)) if scale else x
    pos = np.asarray(positions, dtype=np.int64)  # (2,)
    pe = encoding_at(pos, len(x), base)  # (2, d)
    inputs = x[None, :] + pe  # (2, d)
    norms = np.linalg.norm(inputs, axis=1)
    cos = float(inputs[0] @ inputs[1] / (norms[0] * norms[1])) if np.all(norms > 0) else float("nan")
    return WorkedExample(x, pos, pe, inputs, cos)


# ---------------------------------------------------------------- why embeddings are multiplied by sqrt(d_model)
@dataclass
class NormStudy:
    d_models: np.ndarray      # (M,) model widths studied
    token_norm: np.ndarray    # (M,) mean ||e|| of token embeddings drawn with std 1/sqrt(d_model)
    scaled_norm: np.ndarray   # (M,) mean ||sqrt(d_model) e||
    pe_norm: np.ndarray       # (M,) mean ||PE(pos)|| over the positions studied (sqrt(d_model / 2) for even d)
    cos_raw: np.ndarray       # (M,) mean cosine(e + PE, e): how much the sum still points along the token
    cos_scaled: np.ndarray    # (M,) mean cosine(sqrt(d) e + PE, sqrt(d) e)


@dataclass
class NormConfig:
    n_tokens: int = 256       # vocabulary rows sampled
    n_positions: int = 128    # positions 0 .. n_positions - 1 averaged over
    seed: int = 0             # random seed of the embedding table


def token_table(n_tokens: int, d_model: int, seed: int = 0) -> np.ndarray:
    """Token embeddings e ~ N(0, 1/d_model) per entry (the small init of a table shared with the output layer,
    so ||e|| ~ 1), shape (n_tokens, d_model)."""
    rng = np.random.default_rng([seed, d_model])
    return rng.standard_normal((n_tokens, d_model)) / math.sqrt(d_model)  # (V, d)


def _sum_geometry(e: np.ndarray, pe: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The geometry of every sum x_t + PE(p) without building the (V, P, d) sums: gram (V, V) = x_t . x_j,
    cross (P, V) = PE(p) . x_j (so (x_t + PE(p)) . x_j = gram[t, j] + cross[p, j]) and norms (V, P)."""
    gram = e @ e.T  # (V, V)
    cross = pe @ e.T  # (P, V)
    sq = np.diag(gram)[:, None] + 2 * cross.T + (pe ** 2).sum(1)[None, :]  # (V, P) = ||x_t + PE(p)||^2
    return gram, cross, np.sqrt(sq)


def _mean_cosine(e: np.ndarray, pe: np.ndarray) -> float:
    """Mean over tokens t and positions p of cosine(x_t + PE(p), x_t)."""
    gram, cross, norms = _sum_geometry(e, pe)
    dots = np.diag(gram)[:, None] + cross.T  # (V, P) = (x_t + PE(p)) . x_t
    return float(np.mean(dots / (norms * np.sqrt(np.diag(gram))[:, None])))


def norm_study(d_models, cfg: NormConfig | None = None, base: float = BASE) -> NormStudy:
    """Norms of token embeddings with and without the sqrt(d_model) factor, against the norm of PE."""
    cfg = cfg or NormConfig()
    rows = []
    for d in d_models:
        e = token_table(cfg.n_tokens, int(d), cfg.seed)  # (V, d)
        pe = sinusoidal_encoding(cfg.n_positions, int(d), base)  # (P, d)
        es = e * math.sqrt(d)
        rows.append((np.linalg.norm(e, axis=1).mean(), np.linalg.norm(es, axis=1).mean(),
                     np.linalg.norm(pe, axis=1).mean(), _mean_cosine(e, pe), _mean_cosine(es, pe)))
    cols = np.array(rows, dtype=np.float64).reshape(-1, 5).T  # (5, M)
    return NormStudy(np.asarray(d_models, dtype=np.int64), *cols)


def nearest_token_accuracy(d_model: int, scale: bool, cfg: NormConfig | None = None, base: float = BASE) -> float:
    """Share of (token, position) sums x_t + PE(p) whose most similar table row (dot product) is still token t."""
    cfg = cfg or NormConfig()
    e = token_table(cfg.n_tokens, d_model, cfg.seed)  # (V, d)
    e = e * math.sqrt(d_model) if scale else e
    pe = sinusoidal_encoding(cfg.n_positions, d_model, base)  # (P, d)
    gram, cross = e @ e.T, pe @ e.T  # (V, V), (P, V)
    hits = [np.mean((gram + cross[p][None, :]).argmax(-1) == np.arange(len(e))) for p in range(len(pe))]
    return float(np.mean(hits)) if hits else float("nan")


# ---------------------------------------------------------------- learned and rotary, for comparison
def rope_rotate(x: np.ndarray, positions: np.ndarray, base: float = BASE) -> np.ndarray:
    """Rotary position embedding (Su et al. 2021): rotate pair (2i, 2i+1) of row n by the angle positions[n] * w_i.

    x (N, d) with even d, positions (N,) -> (N, d). As complex numbers: z_i <- z_i * exp(j pos w_i).
    """
    x = np.asarray(x, dtype=np.float64)
    d = x.shape[-1]
    if d % 2:
        raise InputError("positions.rope_odd", f"rotary embeddings need an even width; got {d}", d_model=d)
    angle = np.asarray(positions, dtype=np.float64)[:, None] * angular_frequencies(d, base)  # (N, d/2)
    c, s = np.cos(angle), np.sin(angle)
    even, odd = x[:, 0::2], x[:, 1::2]  # (N, d/2) each
    out = np.empty_like(x)
    out[:, 0::2] = even * c - odd * s
    out[:, 1::2] = even * s + odd * c
    return out  # (N, d)


def rope_table(n_positions: int, d_model: int, seed: int = 0, base: float = BASE) -> np.ndarray:
    """The same unit vector x rotated to every position: row p = R_p x, shape (n_positions, d_model)."""
    n_positions, d_model = _check_sizes(n_positions, d_model)
    x = np.random.default_rng(seed).standard_normal(d_model)
    x = x / np.linalg.norm(x)
    return rope_rotate(np.tile(x, (n_positions, 1)), np.arange(n_positions), base)  # (N, d)


def cosine_similarity(x: np.ndarray) -> np.ndarray:
    """Cosine similarity between every pair of rows, (N, d) -> (N, N)."""
    return similarity(x, cosine=True)


# ---------------------------------------------------------------- order matters
PERMUTATIONS = ("reverse", "swap", "rotate", "shuffle")


@dataclass
class OrderExperiment:
    tokens: list[str]           # the sentence as typed, N tokens
    perm: np.ndarray            # (N,) the permuted sentence is tokens[perm]
    use_pe: bool                # whether PE(0..N-1) was added after permuting
    weights: np.ndarray         # (N, N) attention weights of the original sentence
    weights_perm: np.ndarray    # (N, N) attention weights of the permuted sentence
    out: np.ndarray             # (N, d) attention output of the original sentence
    out_perm: np.ndarray        # (N, d) attention output of the permuted sentence
    max_diff: float             # max |out_perm - out[perm]|: ~1e-7 without PE, clearly > 0 with PE

    @property
    def permuted_tokens(self) -> list[str]:
        """The permuted sentence, tokens[perm]."""
        return [self.tokens[i] for i in self.perm]

    @property
    def expected(self) -> np.ndarray:
        """out[perm], (N, d): what equivariance predicts for the permuted sentence."""
        return self.out[self.perm]

    @property
    def difference(self) -> np.ndarray:
        """out_perm - out[perm], (N, d): zero (up to rounding) without PE."""
        return self.out_perm - self.expected

    @property
    def row_difference(self) -> np.ndarray:
        """||out_perm[n] - out[perm[n]]|| per row of the permuted sentence, (N,)."""
        return np.linalg.norm(self.difference, axis=1)


def parse_tokens(text: str, max_tokens: int = MAX_TOKENS) -> list[str]:
    """Whitespace-separated tokens, 2 .. max_tokens of them. Raises InputError."""
    tokens = str(text).split()
    if not 2 <= len(tokens) <= max_tokens:
        raise InputError("positions.bad_tokens", f"type 2 to {max_tokens} words separated by spaces "
                         f"(got {len(tokens)})", n=len(tokens), limit=max_tokens)
    return tokens


def permutation(n: int, kind: str, seed: int = 0) -> np.ndarray:
    """A permutation of range(n): 'reverse', 'swap' (first two), 'rotate' (by one) or 'shuffle' (seeded)."""
    if kind == "reverse":
        return np.arange(n)[::-1].copy()
    if kind == "swap":
        return np.r_[[1, 0], np.arange(2, n)] if n >= 2 else np.arange(n)
    if kind == "rotate":
        return np.roll(np.arange(n), -1)
    if kind == "shuffle":
        return np.random.default_rng(seed).permutation(n)
    raise InputError("positions.bad_permutation", f"unknown permutation {kind!r}; use one of {PERMUTATIONS}",
                     kind=kind)


def token_embeddings(tokens: list[str], d_model: int, seed: int = 0) -> np.ndarray:
    """A made-up embedding per word, N(0, 1) entries, the same vector whenever the word repeats: (N, d_model)."""
    rows = [np.random.default_rng([seed, zlib.crc32(t.encode("utf-8"))]).standard_normal(d_model) for t in tokens]
    return np.stack(rows)  # (N, d)


def order_experiment(tokens: list[str], perm: np.ndarray, d_model: int = 8, use_pe: bool = True,
                     seed: int = 0) -> OrderExperiment:
    """One self-attention layer, softmax((X W_q)(X W_k)^T / sqrt(d)) (X W_v), on a sentence and on its permutation.

    X = embeddings (+ PE(0..N-1) when use_pe). Without PE attention is permutation-equivariant: the permuted
    sentence's output is exactly the original output with its rows permuted. With PE it is not.
    """
    import torch

    from ..attention import scaled_dot_product_attention

    perm = np.asarray(perm, dtype=np.int64)
    emb = token_embeddings(tokens, d_model, seed)  # (N, d)
    pe = sinusoidal_encoding(len(tokens), d_model) if use_pe else np.zeros_like(emb)  # (N, d)
    g = torch.Generator().manual_seed(seed)
    w_q, w_k, w_v = (torch.randn(d_model, d_model, generator=g, dtype=torch.float64) / math.sqrt(d_model)
                     for _ in range(3))

    def attend(x: np.ndarray):
        xt = torch.from_numpy(x)  # (N, d)
        out, w = scaled_dot_product_attention(xt @ w_q, xt @ w_k, xt @ w_v)  # (N, d), (N, N)
        return out.numpy(), w.numpy()

    out, w = attend(emb + pe)
    out_p, w_p = attend(emb[perm] + pe)
    return OrderExperiment(list(tokens), perm, use_pe, w, w_p, out, out_p, float(np.abs(out_p - out[perm]).max()))
