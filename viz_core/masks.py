"""Attention masks. Convention everywhere in viz_core: a bool mask, True = blocked (the key may not be attended to).

Masks broadcast against attention scores of shape (B, H, Nq, Nk).
"""
from __future__ import annotations

import torch


def causal_mask(n: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Look-ahead mask: bool (n, n), True above the diagonal, so query i sees keys 0..i only."""
    if n < 0:
        raise ValueError(f"sequence length must be >= 0, got {n}")
    return torch.ones(n, n, dtype=torch.bool, device=device).triu(diagonal=1)  # (n, n)


def sliding_window_mask(n: int, window: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Sliding-window causal mask: bool (n, n), True = blocked; query i sees key j iff 0 <= i - j < window.

    The window counts the query itself: each query sees itself and the window - 1 keys before it, the rule of
    transformers' sliding_window_causal_mask_function (kv_idx <= q_idx and kv_idx > q_idx - window; Mistral,
    Gemma 2 / 3). window >= n is the causal mask; the diagonal is never blocked, so no row is fully blocked.
    """
    if n < 0:
        raise ValueError(f"sequence length must be >= 0, got {n}")
    if window < 1:
        raise ValueError(f"the window must hold at least one key, got {window}")
    i = torch.arange(n, device=device)[:, None]  # (n, 1) query positions
    j = torch.arange(n, device=device)[None, :]  # (1, n) key positions
    return (i - j < 0) | (i - j >= window)  # (n, n): in the future, or window or more keys back


def padding_mask(is_pad: torch.Tensor) -> torch.Tensor:
    """Key padding mask: is_pad bool (B, Nk) -> bool (B, 1, 1, Nk).

    Pads may sit anywhere (start, middle or end); only the flags matter, never an assumed length.
    """
    if is_pad.dim() != 2:
        raise ValueError(f"is_pad must have shape (B, Nk), got {tuple(is_pad.shape)}")
    return is_pad.bool()[:, None, None, :]  # (B, 1, 1, Nk)


def causal_padding_mask(is_pad: torch.Tensor) -> torch.Tensor:
    """Decoder self-attention mask: causal OR key padding, bool (B, 1, N, N)."""
    n = is_pad.shape[-1]
    return causal_mask(n, is_pad.device)[None, None] | padding_mask(is_pad)  # (B, 1, N, N)


def cross_padding_mask(n_q: int, is_pad_kv: torch.Tensor) -> torch.Tensor:
    """Cross-attention mask: queries of length n_q over padded keys is_pad_kv (B, Nk) -> bool (B, 1, Nq, Nk)."""
    return padding_mask(is_pad_kv).expand(-1, -1, n_q, -1)  # (B, 1, Nq, Nk)


def fully_blocked_rows(mask: torch.Tensor) -> torch.Tensor:
    """True for query rows whose keys are all blocked, shape (..., Nq, 1). Softmax of such a row is NaN with -inf."""
    return mask.all(dim=-1, keepdim=True)


def combine_masks(*masks: torch.Tensor | None) -> torch.Tensor | None:
    """OR of broadcastable bool masks (True = blocked): a key is blocked if any mask blocks it; None entries skipped.

    e.g. combine_masks(causal_mask(N), padding_mask(is_pad)) -> (B, 1, N, N), the decoder's self-attention mask.
    """
    present = [m.bool() for m in masks if m is not None]
    if not present:
        return None
    out = present[0]
    for m in present[1:]:
        out = out | m  # broadcasts, e.g. (N, N) | (B, 1, 1, N) -> (B, 1, N, N)
    return out


def padded_query_rows(is_pad_q: torch.Tensor) -> torch.Tensor:
    """Query rows that do not matter: is_pad_q bool (B, Nq) -> (B, 1, Nq, 1), True where the query itself is a pad.

    Their outputs are never used (the loss ignores them), so their weights may be anything; they are not masked.
    """
    return is_pad_q.bool()[:, None, :, None]  # (B, 1, Nq, 1)
