"""Repeated random tokens and the two head scores of the induction-head story (Olsson et al. 2022).

A sequence is `half` random tokens followed by the same `half` tokens again. The first half cannot be predicted
(loss ~ log V); the second half can, by a two-head circuit: a previous-token head writes "the token before me" into
each position, and an induction head at position i looks for the earlier position whose previous token equals the
current token, attends there, and copies what it finds.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F


def repeated_tokens(batch: int, half: int, vocab: int, generator: torch.Generator | None = None,
                    min_repeat: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Sequences of N = 2 * half random tokens in [0, vocab) whose last 2L tokens are a segment of length L
    followed by the same segment again; L is drawn per sequence from [min_repeat, half] (min_repeat = half gives
    exactly "first half, then the first half again"). Varying L keeps the copy distance from being a fixed
    position offset, so the model must find the earlier occurrence by content: an induction head.

    Returns (ids (B, N) int64, repeated (B, N) bool): repeated[b, t] is True where token t is a copy that can be
    predicted from context (inside the second copy, after its first token).
    """
    n = 2 * half
    lo = half if min_repeat is None else max(1, min(min_repeat, half))
    ids = torch.randint(0, vocab, (batch, n), generator=generator)  # (B, N)
    length = torch.randint(lo, half + 1, (batch, 1), generator=generator)  # (B, 1) segment length L
    t = torch.arange(n)[None, :]  # (1, N)
    second = t >= n - length  # (B, N) inside the second copy
    ids = ids.gather(1, torch.where(second, t - length, t))  # (B, N) copy the first segment
    repeated = second & (t > n - length)  # (B, N) the copy after its first token
    return ids, repeated


def half_losses(logits: torch.Tensor, ids: torch.Tensor, repeated: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean next-token cross-entropy on the unpredictable tokens and on the repeated (in-context) tokens.

    logits (B, N, V) predict ids[:, 1:]. "First half": targets before the second copy starts (nothing to copy
    yet, loss ~ log V at best); "repeated": targets inside the second copy after its first token.
    """
    per_token = F.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")  # (B, N-1)
    rep = repeated[:, 1:]  # (B, N-1)
    started = torch.cumsum(rep.int(), dim=1) > 0  # (B, N-1)
    first = ~started & ~rep
    first = first & ~torch.roll(rep, -1, dims=1)  # the first copied token is unpredictable too: neither group
    return per_token[first].mean(), per_token[rep].mean()


def induction_targets(tokens) -> np.ndarray:
    """For each query i: j + 1 where j < i is the latest earlier position holding the same token as i, else -1.

    This is where an induction head attends: "the token after the previous occurrence of my token"."""
    tokens = list(tokens)
    last: dict = {}
    target = np.full(len(tokens), -1, dtype=int)
    for i, tok in enumerate(tokens):
        if tok in last:
            target[i] = last[tok] + 1
        last[tok] = i
    return target


def induction_score(weights: np.ndarray, tokens) -> np.ndarray:
    """Induction score of every head: mean over queries i with an earlier occurrence of their token of
    A[i, j(i) + 1], j(i) = latest earlier position of token i.   weights (..., N, N) -> (...)."""
    w = np.asarray(weights, dtype=np.float64)
    target = induction_targets(tokens)
    rows = np.nonzero(target >= 0)[0]
    if rows.size == 0:
        return np.zeros(w.shape[:-2])
    return w[..., rows, target[rows]].mean(axis=-1)  # (...)


def previous_token_score(weights: np.ndarray) -> np.ndarray:
    """Previous-token score of every head: mean over i >= 1 of A[i, i - 1].   weights (..., N, N) -> (...)."""
    w = np.asarray(weights, dtype=np.float64)
    n = w.shape[-1]
    if n < 2:
        return np.zeros(w.shape[:-2])
    i = np.arange(1, n)
    return w[..., i, i - 1].mean(axis=-1)  # (...)


def head_scores(weights: np.ndarray, tokens_batch) -> tuple[np.ndarray, np.ndarray]:
    """(previous-token, induction) scores averaged over a batch: weights (B, L, H, N, N) or (L, H, N, N) with
    tokens_batch the matching (B, N) or (N,) tokens -> two (L, H) arrays."""
    w = np.asarray(weights)
    if w.ndim == 4:
        w, tokens_batch = w[None], [list(tokens_batch)]
    prev = np.mean([previous_token_score(w[b]) for b in range(w.shape[0])], axis=0)  # (L, H)
    ind = np.mean([induction_score(w[b], tokens_batch[b]) for b in range(w.shape[0])], axis=0)  # (L, H)
    return prev, ind
