"""Repeated random tokens and the two head scores of the induction-head story (Olsson et al. 2022).

Training data: random tokens in which a segment of L tokens occurs two or three times, with L, the positions and
the count drawn afresh for every sequence. Nothing but the content tells the model where the earlier copy is, so
it must learn the two-head circuit that works for any length and place: a previous-token head writes "the token
before me" into each position, and an induction head at position i looks for the earlier position whose previous
token equals the current token, attends there, and copies what it finds.

The induction score of a head (what the page shows and circles):
    repeated sequence  x = s s (a segment s of L tokens, then s again; the standard test of Olsson et al. and
                       TransformerLens): the mean of the diagonal at offset -(L - 1) over the second copy,
                       ind = 1/L sum_{i=L}^{2L-1} A[i, i - L + 1]
    any other text     for each query i whose token occurred before, the attention on the tokens right after
                       ALL its earlier occurrences, averaged over those queries:
                       ind = 1/|S| sum_{i in S} sum_{j in T(i)} A[i, j],  T(i) = {j + 1 : j < i, x_j = x_i}
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from ..errors import InputError

# a word, a single CJK character (Chinese is written without spaces), or one punctuation mark
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
WORD_PATTERN = re.compile(rf"[{_CJK}]|[^\W{_CJK}]+|[^\w\s]")


# ---------------------------------------------------------------- data
def repeated_tokens(batch: int, half: int, vocab: int, generator: torch.Generator | None = None,
                    min_repeat: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The evaluation sequences: N = 2 * half random tokens whose last 2L tokens are a segment of length L followed
    by the same segment again; L is drawn per sequence from [min_repeat, half] (min_repeat = None gives exactly
    "first half, then the first half again", the standard test).

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


def scattered_repeats(batch: int, n: int, vocab: int, generator: torch.Generator | None = None,
                      min_len: int = 2, max_len: int | None = None, max_copies: int = 3
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    """The training sequences: N random tokens in which one segment occurs 2..max_copies times. Per sequence the
    segment length L (min_len..max_len, default N // 2), the number of copies and the gaps before, between and
    after the copies are drawn at random, so the copy distance and place differ every time.

    Returns (ids (B, N) int64, repeated (B, N) bool) as repeated_tokens: True inside a later copy after its first
    token.
    """
    max_len = min(max_len or n // 2, n // 2)
    ids = torch.randint(0, vocab, (batch, n), generator=generator)  # (B, N)
    repeated = torch.zeros(batch, n, dtype=torch.bool)  # (B, N)
    draw = lambda lo, hi: int(torch.randint(lo, hi + 1, (1,), generator=generator))  # noqa: E731
    for b in range(batch):
        length = draw(min_len, max_len)
        copies = draw(2, max(2, min(max_copies, n // length)))
        starts = _copy_starts(n, length, copies, generator)
        for start in starts[1:]:
            ids[b, start: start + length] = ids[b, starts[0]: starts[0] + length]
            repeated[b, start + 1: start + length] = True
    return ids, repeated


def _copy_starts(n: int, length: int, copies: int, generator: torch.Generator | None) -> list[int]:
    """Start positions of `copies` non-overlapping segments of `length` in N tokens, with random gaps: the
    free N - copies * L tokens are cut at sorted random points into copies + 1 gaps."""
    free = n - copies * length
    cuts = sorted(torch.randint(0, free + 1, (copies,), generator=generator).tolist())
    return [cut + k * length for k, cut in enumerate(cuts)]


@dataclass(frozen=True)
class TypedSymbols:
    ids: list[int]        # token ids fed to the model
    labels: list[str]     # what the person typed, one entry per token
    as_words: bool        # True: words got symbols; False: the numbers were token ids


def typed_symbols(text: str, vocab: int) -> TypedSymbols:
    """A typed text as the induction model's token ids and their display labels.

    Numbers 0..vocab-1 separated by spaces are used as they are. Any other text is split into words (a Chinese
    character, a word, a punctuation mark) and each distinct word (case folded: "The" = "the") gets its own
    symbol, in a fixed shuffled order: the model learned to copy *any* symbols, so which id a word gets does not
    matter, only that the same word gets the same id. InputError for an empty text or more distinct words than
    symbols.
    """
    parts = text.split()
    if not parts:
        raise InputError("lm.empty_text", "type some text first")
    if all(p.isdigit() and int(p) < vocab for p in parts):
        return TypedSymbols([int(p) for p in parts], parts, False)
    words = WORD_PATTERN.findall(text)
    distinct = list(dict.fromkeys(w.casefold() for w in words))
    if len(distinct) > vocab:
        raise InputError("lm.too_many_words", f"{len(distinct)} different words; the model has {vocab} symbols",
                         n=len(distinct), max=vocab)
    order = list(range(vocab))
    random.Random(0).shuffle(order)
    symbol = {w: order[k] for k, w in enumerate(distinct)}
    return TypedSymbols([symbol[w.casefold()] for w in words], words, True)


def repeated_text(length: int, vocab: int, seed: int | None = None) -> str:
    """A random segment of `length` token numbers followed by the same segment: "5 9 2 5 9 2" (the standard test)."""
    segment = np.random.default_rng(seed).integers(0, vocab, length)
    return " ".join(str(int(v)) for v in np.concatenate([segment, segment]))


PHASE_GAP = 1.0  # nats: the in-context loss this far below the unpredictable-token loss marks the phase change


def phase_change_step(history) -> int | None:
    """The phase change: the first evaluated step at which the loss on the repeated (in-context) tokens is PHASE_GAP
    nats below the loss on the unpredictable ones, i.e. the right next token gets e = 2.7 times the probability it
    gets without context (geometric mean); None while that has not happened."""
    for h in history:
        first, rep = h.get("first_loss"), h.get("repeat_loss")
        if h.get("evaluated") and first is not None and rep is not None and first - rep >= PHASE_GAP:
            return h["step"]
    return None


def half_losses(logits: torch.Tensor, ids: torch.Tensor, repeated: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean next-token cross-entropy on the unpredictable tokens and on the repeated (in-context) tokens.

    logits (B, N, V) predict ids[:, 1:]. "Unpredictable": every target that is not a copy predictable from
    context (loss ~ log V at best); "repeated": targets inside a later copy after its first token.
    """
    per_token = F.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")  # (B, N-1)
    rep = repeated[:, 1:]  # (B, N-1)
    return per_token[~rep].mean(), per_token[rep].mean()


# ---------------------------------------------------------------- the induction score
def repeat_length(tokens) -> int:
    """L when the tokens are a segment of L >= 2 tokens followed by the same segment again (x = s s), else 0."""
    tokens = list(tokens)
    n = len(tokens)
    if n >= 4 and n % 2 == 0 and tokens[: n // 2] == tokens[n // 2:]:
        return n // 2
    return 0


def induction_targets(tokens, rule: str = "auto") -> list[list[int]]:
    """The cells the induction score reads: for each query i, the key positions it counts (empty: not counted).

    x = s s (repeat_length L > 0) and rule "auto": row i >= L counts the one cell i - L + 1 (the standard diagonal).
    Otherwise (or rule "free"): row i counts j + 1 for EVERY earlier j with x_j = x_i (the tokens after all earlier
    occurrences).
    """
    tokens = list(tokens)
    n, length = len(tokens), repeat_length(tokens) if rule == "auto" else 0
    if length:
        return [[i - length + 1] if i >= length else [] for i in range(n)]
    seen: dict = {}
    targets: list[list[int]] = []
    for i, tok in enumerate(tokens):
        targets.append([j + 1 for j in seen.get(tok, [])])
        seen.setdefault(tok, []).append(i)
    return targets


def target_cells(tokens) -> list[tuple[int, int]]:
    """(query, key) of every cell the induction score reads, for circling them on a heat map."""
    return [(i, j) for i, keys in enumerate(induction_targets(tokens)) for j in keys]


def induction_score(weights: np.ndarray, tokens, rule: str = "auto") -> np.ndarray:
    """Induction score of every head (module docstring): the mean over counted queries of the attention on their
    target cells (induction_targets(tokens, rule)).   weights (..., N, N) -> (...)."""
    w = np.asarray(weights, dtype=np.float64)
    targets = induction_targets(tokens, rule)
    rows = [i for i, keys in enumerate(targets) if keys]
    if not rows:
        return np.zeros(w.shape[:-2])
    per_row = [w[..., i, targets[i]].sum(axis=-1) for i in rows]  # each (...)
    return np.mean(per_row, axis=0)  # (...)


def transformer_lens_induction(weights: np.ndarray, tokens) -> np.ndarray:
    """TransformerLens's `detect_head(..., "induction_head")` score ("mul" measure, BOS and the current token kept,
    its defaults): the attention on the cells of the "free" rule, summed over ALL rows and divided by the pattern's
    total weight, N (every row sums to 1). So it equals induction_score(weights, tokens, "free") x C / N, with C
    the counted queries: about half of this app's score on x = s s.   weights (..., N, N) -> (...)."""
    w = np.asarray(weights, dtype=np.float64)
    cells = [(i, j) for i, keys in enumerate(induction_targets(tokens, "free")) for j in keys]
    if not cells:
        return np.zeros(w.shape[:-2])
    q, k = (np.array(a) for a in zip(*cells))
    return w[..., q, k].sum(axis=-1) / w.sum(axis=(-2, -1))  # (...)


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
