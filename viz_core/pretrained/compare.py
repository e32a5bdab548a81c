"""Two texts side by side: align their tokens, take the difference of a head's attention, rank heads by how much
their attention moved. Plain numpy in, numpy out (the Attention page's "Compare" view).

Alignment. Tokens are matched as a diff does (difflib's longest matching blocks: the same token in the same order);
where one run of tokens was replaced by a run of the same length ("cat" -> "dog", or two swapped words), the runs are
paired position by position and marked as changed. What is left appears in one text only (a word added or removed).

Difference map, over the queries present in both texts (rows) and the union of the keys (columns):

    D_ij = w'_{i' j'} - w_{ij}            (a key missing from one text counts as weight 0 there)

Distance of a head: the total variation distance between the two rows of each aligned query, averaged:

    d(l, h) = (1 / M) * sum_i  1/2 * sum_j |D_ij|          in [0, 1]: 0 = the same attention, 1 = disjoint keys

Because a missing key counts as 0, the weight a query puts on an added word is part of the distance.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Alignment:
    """Pairs of token positions: a[i] in text A and b[i] in text A', -1 where the token is in one text only."""
    a: np.ndarray        # int (P,)
    b: np.ndarray        # int (P,)
    changed: np.ndarray  # bool (P,): paired, but the tokens differ (a replaced run of the same length)

    @property
    def both(self) -> np.ndarray:
        """bool (P,): the pair has a token in each text."""
        return (self.a >= 0) & (self.b >= 0)

    def labels(self, a_tokens: list[str], b_tokens: list[str]) -> list[str]:
        """One label per pair: "cat" (same), "cat→dog" (changed), "−cat" (only in A), "+dog" (only in A')."""
        out = []
        for i, j, ch in zip(self.a.tolist(), self.b.tolist(), self.changed.tolist()):
            if i >= 0 and j >= 0:
                out.append(f"{a_tokens[i]}→{b_tokens[j]}" if ch else a_tokens[i])
            else:
                out.append(f"−{a_tokens[i]}" if i >= 0 else f"+{b_tokens[j]}")
        return out


def align(a_tokens: list[str], b_tokens: list[str]) -> Alignment:
    """Pair the tokens of two texts in reading order (see the module's docstring)."""
    pairs: list[tuple[int, int, bool]] = []
    matcher = difflib.SequenceMatcher(None, a_tokens, b_tokens, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            pairs += [(i, j, False) for i, j in zip(range(i1, i2), range(j1, j2))]
        elif op == "replace" and i2 - i1 == j2 - j1:
            pairs += [(i, j, True) for i, j in zip(range(i1, i2), range(j1, j2))]
        else:  # delete, insert, or a replace of runs of different lengths: first A's tokens, then A''s
            pairs += [(i, -1, False) for i in range(i1, i2)] + [(-1, j, False) for j in range(j1, j2)]
    a, b, changed = zip(*pairs) if pairs else ((), (), ())
    return Alignment(np.array(a, dtype=np.int64), np.array(b, dtype=np.int64), np.array(changed, dtype=bool))


def _take(weights: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """weights (..., Nq, Nk) -> (..., len(rows), len(cols)); index -1 reads 0 (a token the text does not have)."""
    padded = np.concatenate([weights, np.zeros(weights.shape[:-1] + (1,), weights.dtype)], axis=-1)  # (..., Nq, Nk+1)
    return padded[..., rows, :][..., cols]


def on_grid(w: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """One text's (Nq, Nk) map on the shared grid of both texts: rows = q.a (text A) or q.b (A'), cols = k.a or k.b
    -> (Pq, Pk), NaN where the row or the column is a token this text does not have (drawn empty)."""
    padded = np.full((w.shape[0] + 1, w.shape[1] + 1), np.nan, dtype=np.float32)  # index -1: the NaN row / column
    padded[:-1, :-1] = w
    return padded[rows][:, cols]


def difference(wa: np.ndarray, wb: np.ndarray, q: Alignment, k: Alignment) -> np.ndarray:
    """D = w' - w over the queries in both texts and every key of either: (..., Nq, Nk) twice -> (..., M, P_k).

    wa, wb: attention of text A and of A' with the same leading axes (one head (Nq, Nk), or every head (L, H, Nq, Nk)).
    q: the alignment of the query tokens, k: of the key tokens (the same alignment for self-attention)."""
    rows = q.both
    return (_take(wb, q.b[rows], k.b) - _take(wa, q.a[rows], k.a)).astype(np.float32)


def head_distances(wa: np.ndarray, wb: np.ndarray, q: Alignment, k: Alignment) -> np.ndarray:
    """d(l, h) = mean over aligned queries of 1/2 sum_j |D_ij|: (L, H, Nq, Nk) twice -> (L, H) in [0, 1].

    No query in both texts (nothing aligned) gives NaN for every head."""
    d = difference(wa, wb, q, k)  # (L, H, M, P_k)
    if d.shape[-2] == 0:
        return np.full(d.shape[:-2], np.nan, dtype=np.float32)
    return (0.5 * np.abs(d).sum(-1)).mean(-1).astype(np.float32)


@dataclass(frozen=True)
class Ranked:
    """Heads ordered from the largest distance to the smallest (ties: lower layer, then lower head first)."""
    layer: np.ndarray     # int (L*H,)
    head: np.ndarray      # int (L*H,)
    distance: np.ndarray  # float (L*H,)


def rank_heads(distances: np.ndarray) -> Ranked:
    """Sort the (L, H) distances, largest first; NaN (nothing to compare) last."""
    n_layers, n_heads = distances.shape
    flat = distances.reshape(-1)
    order = np.lexsort((np.arange(flat.size), -np.nan_to_num(flat, nan=-np.inf)))  # stable: layer, then head
    return Ranked(order // n_heads, order % n_heads, flat[order])
