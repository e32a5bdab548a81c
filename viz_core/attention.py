"""Scaled dot-product attention and multi-head attention (MHA / GQA / MQA).

Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k) + mask) V      (Vaswani et al. 2017, eq. 1)
"""
from __future__ import annotations

import math
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from .masks import fully_blocked_rows


def _apply_dropout(weights: torch.Tensor, dropout: float | Callable | None) -> torch.Tensor:
    if dropout is None:
        return weights
    if callable(dropout):
        return dropout(weights)
    return F.dropout(weights, p=float(dropout), training=float(dropout) > 0)


def attention_scores(q: torch.Tensor, k: torch.Tensor, scale: bool = True) -> torch.Tensor:
    """Q K^T, divided by sqrt(d_k) when scale: (..., Nq, d_k) x (..., Nk, d_k) -> (..., Nq, Nk)."""
    scores = q @ k.transpose(-2, -1)  # (..., Nq, Nk)
    return scores / math.sqrt(q.size(-1)) if scale else scores


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Row softmax with blocked keys at -inf; a row whose keys are all blocked gets zeros instead of NaN."""
    if mask is None:
        return torch.softmax(scores, dim=-1)
    weights = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)  # (..., Nq, Nk)
    return weights.masked_fill(fully_blocked_rows(mask), 0.0)


def scaled_dot_product_attention(q, k, v, mask=None, dropout=None, scale=True):
    """softmax(Q K^T / sqrt(d_k)) V.

    q (..., Nq, d_k), k (..., Nk, d_k), v (..., Nk, d_v); mask bool, True = blocked, broadcastable to (..., Nq, Nk).
    dropout: None, a probability, or a module/callable applied to the weights.
    Returns (out (..., Nq, d_v), weights (..., Nq, Nk)).
    """
    weights = masked_softmax(attention_scores(q, k, scale), mask)  # (..., Nq, Nk)
    weights = _apply_dropout(weights, dropout)
    return weights @ v, weights  # (..., Nq, d_v)


class MultiHeadAttention(nn.Module):
    """Multi-head attention with n_kv_heads key/value heads: None -> MHA, 1 -> MQA, otherwise GQA.

    MultiHead(Q, K, V) = Concat(head_1..head_H) W_o, head_i = Attention(X_q W_q^i, X_kv W_k^g(i), X_kv W_v^g(i)),
    where query head i shares the key/value head g(i) = i // (H / H_kv).
    """

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int | None = None,
                 dropout: float = 0.0, bias: bool = False, scale: bool = True):
        super().__init__()
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        if n_heads < 1 or d_model % n_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
        if n_kv_heads < 1 or n_heads % n_kv_heads:
            raise ValueError(f"n_heads ({n_heads}) must be divisible by n_kv_heads ({n_kv_heads})")
        self.d_model, self.n_heads, self.n_kv_heads = d_model, n_heads, n_kv_heads
        self.d_k = d_model // n_heads
        self.scale = scale
        self.q_proj = nn.Linear(d_model, n_heads * self.d_k, bias=bias)
        self.k_proj = nn.Linear(d_model, n_kv_heads * self.d_k, bias=bias)
        self.v_proj = nn.Linear(d_model, n_kv_heads * self.d_k, bias=bias)
        self.o_proj = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def _split(self, x: torch.Tensor, n_heads: int) -> torch.Tensor:
        b, n, _ = x.shape
        return x.view(b, n, n_heads, self.d_k).transpose(1, 2)  # (B, heads, N, d_k)

    def _expand_kv(self, x: torch.Tensor) -> torch.Tensor:
        groups = self.n_heads // self.n_kv_heads
        return x if groups == 1 else x.repeat_interleave(groups, dim=1)  # (B, H, Nk, d_k)

    def forward(self, x_q: torch.Tensor, x_kv: torch.Tensor | None = None, mask: torch.Tensor | None = None,
                need_weights: bool = True):
        """x_q (B, Nq, d_model), x_kv (B, Nk, d_model) or None for self-attention; mask True = blocked,
        broadcastable to (B, H, Nq, Nk). Returns (out (B, Nq, d_model), weights (B, H, Nq, Nk) or None).

        need_weights=False takes torch's fused kernel (same result, weights not materialised) for fast training.
        """
        x_kv = x_q if x_kv is None else x_kv
        b, n_q, _ = x_q.shape
        q = self._split(self.q_proj(x_q), self.n_heads)  # (B, H, Nq, d_k)
        k = self._expand_kv(self._split(self.k_proj(x_kv), self.n_kv_heads))  # (B, H, Nk, d_k)
        v = self._expand_kv(self._split(self.v_proj(x_kv), self.n_kv_heads))  # (B, H, Nk, d_k)
        if need_weights:
            out, weights = scaled_dot_product_attention(q, k, v, mask, self.dropout, self.scale)
        else:
            out, weights = self._fused(q, k, v, mask), None
        out = out.transpose(1, 2).contiguous().view(b, n_q, self.d_model)  # (B, Nq, d_model)
        return self.o_proj(out), weights

    def _fused(self, q, k, v, mask):
        p = self.dropout.p if self.training else 0.0
        scale = None if self.scale else 1.0
        allowed = None if mask is None else ~mask  # torch's bool mask means True = may attend
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, dropout_p=p, scale=scale)
        if mask is not None:  # rows with every key blocked: zeros, as in the explicit path
            out = out.masked_fill(fully_blocked_rows(mask), 0.0)
        return out  # (B, H, Nq, d_k)


# ---------------------------------------------------------------- additive (Bahdanau) attention
def additive_scores(q: torch.Tensor, k: torch.Tensor, w_q: torch.Tensor, w_k: torch.Tensor,
                    v_a: torch.Tensor) -> torch.Tensor:
    """Additive compatibility (Bahdanau et al. 2015): e_ij = v_a^T tanh(W_q q_i + W_k k_j).

    q (..., Nq, d_q), k (..., Nk, d_k), w_q (d_h, d_q), w_k (d_h, d_k), v_a (d_h,) -> scores (..., Nq, Nk).
    Builds the (..., Nq, Nk, d_h) hidden tensor that makes it slower and hungrier than a dot product.
    """
    hq = q @ w_q.T  # (..., Nq, d_h)
    hk = k @ w_k.T  # (..., Nk, d_h)
    hidden = torch.tanh(hq.unsqueeze(-2) + hk.unsqueeze(-3))  # (..., Nq, Nk, d_h)
    return hidden @ v_a  # (..., Nq, Nk)


class AdditiveAttention(nn.Module):
    """Additive attention: softmax_j(v_a^T tanh(W_q q_i + W_k k_j)) V, a one-hidden-layer network as the
    compatibility function (the alternative to the dot product named in Vaswani et al. 2017, section 3.2.1)."""

    def __init__(self, d_q: int, d_k: int, d_hidden: int):
        super().__init__()
        self.w_q = nn.Linear(d_q, d_hidden, bias=False)
        self.w_k = nn.Linear(d_k, d_hidden, bias=False)
        self.v_a = nn.Linear(d_hidden, 1, bias=False)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None):
        """q (..., Nq, d_q), k (..., Nk, d_k), v (..., Nk, d_v); mask True = blocked.
        Returns (out (..., Nq, d_v), weights (..., Nq, Nk))."""
        scores = additive_scores(q, k, self.w_q.weight, self.w_k.weight, self.v_a.weight[0])  # (..., Nq, Nk)
        weights = masked_softmax(scores, mask)
        return weights @ v, weights
