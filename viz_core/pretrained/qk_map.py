"""The query-key space of one head: the queries and keys of many sentences in one 2-D map (after AttentionViz,
Yeh et al. 2023). Plain numpy in, numpy out; the sentences are bundled (map_sentences.json, written by this project).

A head scores a key by a dot product, s_ij = q_i . k_j / sqrt(d_k), and softmax only cares about the differences of
the scores in a row. Two changes that keep every attention weight make queries and keys comparable in one picture:

    k -> k - mean(k) + mean(q)      adds q_i . c to every score of row i (the same c for all keys): weights unchanged
    q -> a q,  k -> k / a,  a = sqrt(mean|k| / mean|q|)    every dot product unchanged, mean norms now equal

Then |q - k|^2 = |q|^2 + |k|^2 - 2 q . k: among keys of similar length, the nearer a key is to a query, the larger its
score, so a query lands near the keys it attends to. The map is the PCA of the queries and keys together (the top two
right singular vectors of the centred stack); `kept` says how much of the variance the two axes keep.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

SENTENCES = Path(__file__).with_name("map_sentences.json")
MAX_UNKNOWN_SHARE = 0.25  # a bundled sentence whose tokens are more than this share unknown ([UNK]) is left out


@lru_cache(maxsize=1)
def bundled_sentences() -> dict[str, tuple[str, ...]]:
    """{"en": 50 sentences, "zh": 50 sentences}, written by this project for the map."""
    data = json.loads(SENTENCES.read_text(encoding="utf-8"))
    return {lang: tuple(data[lang]) for lang in ("en", "zh")}


def unknown_share(tokens: list[str], unk: str) -> float:
    """The share of a sentence's tokens (special tokens included) that the model reads as its unknown token."""
    return sum(tok == unk for tok in tokens) / max(len(tokens), 1)


@dataclass(frozen=True)
class QKSet:
    """Queries and keys of every layer and head for several sentences, stacked along the tokens."""
    q: np.ndarray          # float32 (L, H, N, d_k): N = the tokens of all sentences
    k: np.ndarray          # float32 (L, H, N, d_k)
    sentence: np.ndarray   # int (N,): which sentence each token belongs to (0 = the first)
    position: np.ndarray   # int (N,): the token's position in its sentence
    tokens: tuple[str, ...]     # (N,)
    texts: tuple[str, ...]      # (S,): the sentences

    def rows(self, s: int) -> np.ndarray:
        """The token indices (into N) of sentence s."""
        return np.flatnonzero(self.sentence == s)


def stack(per_sentence: list[tuple[str, list[str], np.ndarray, np.ndarray]]) -> QKSet:
    """[(text, tokens (N_s,), q (L, H, N_s, d_k), k (L, H, N_s, d_k)), ...] -> one QKSet (N = sum of N_s)."""
    texts, tokens, qs, ks, sentence, position = [], [], [], [], [], []
    for s, (text, toks, q, k) in enumerate(per_sentence):
        texts.append(text)
        tokens += list(toks)
        qs.append(q)
        ks.append(k)
        sentence.append(np.full(len(toks), s))
        position.append(np.arange(len(toks)))
    return QKSet(np.concatenate(qs, axis=-2).astype(np.float32), np.concatenate(ks, axis=-2).astype(np.float32),
                 np.concatenate(sentence), np.concatenate(position), tuple(tokens), tuple(texts))


def balance(q: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The two weight-keeping changes of the module's docstring: (N, d_k) twice -> (N, d_k) twice."""
    k = k - k.mean(0) + q.mean(0)  # shift every key by the same vector: each row's scores move by one constant
    nq, nk = np.linalg.norm(q, axis=1).mean(), np.linalg.norm(k, axis=1).mean()
    a = np.sqrt(nk / nq) if nq > 0 and nk > 0 else 1.0
    return q * a, k / a


@dataclass(frozen=True)
class Projection:
    """2-D coordinates of the queries and keys of one head, and the share of variance the two axes keep."""
    q: np.ndarray      # float32 (N, 2)
    k: np.ndarray      # float32 (N, 2)
    kept: np.ndarray   # float (2,): variance share of axis 1 and axis 2 (sum <= 1)


def project(q: np.ndarray, k: np.ndarray) -> Projection:
    """PCA of the balanced queries and keys together: X = [q; k] (2N, d_k), centred; X = U S V^T; coordinates X V_2.

    The sign of each axis is fixed (the largest coordinate positive), so the map does not flip between runs."""
    qb, kb = balance(q.astype(np.float64), k.astype(np.float64))
    x = np.concatenate([qb, kb])  # (2N, d_k)
    x -= x.mean(0)
    _, s, vt = np.linalg.svd(x, full_matrices=False)  # vt (r, d_k), s (r,) descending
    axes = vt[:2]  # (2, d_k)
    xy = x @ axes.T  # (2N, 2)
    flip = np.sign(xy[np.abs(xy).argmax(0), np.arange(2)])  # (2,)
    xy *= np.where(flip == 0, 1.0, flip)
    var = s ** 2
    kept = var[:2] / var.sum() if var.sum() > 0 else np.zeros(2)
    n = len(q)
    return Projection(xy[:n].astype(np.float32), xy[n:].astype(np.float32), kept)


@dataclass(frozen=True)
class Closeness:
    """How far "near in the map" means "much weight" for one head, in the balanced space (every d_k dimension, the
    map's two axes aside), each query against the keys of its own sentence."""
    hit: float        # share of queries whose nearest key is their heaviest key (argmin |q_i - k_j| = argmax q_i . k_j)
    chance: float     # the same share for a key drawn at random: the mean over queries of 1 / N_s
    rank_corr: float  # mean over queries of Spearman's rank correlation of -|q_i - k_j| with the weight
    n: int            # queries counted (sentences of two tokens or more)


def closeness(q: np.ndarray, k: np.ndarray, sentence: np.ndarray) -> Closeness:
    """Closeness of one head: q, k (N, d_k), sentence (N,). |q - k|^2 = |q|^2 + |k|^2 - 2 q . k, so the nearest key
    is the heaviest only when the keys' lengths do not decide it: a longer key can win the dot product from farther
    away. Balanced first (balance: every weight unchanged), as the map is."""
    qb, kb = balance(q.astype(np.float64), k.astype(np.float64))
    hits, chance, corr = [], [], []
    for s in np.unique(sentence):
        rows = np.flatnonzero(sentence == s)
        if len(rows) < 2:
            continue
        qs, ks = qb[rows], kb[rows]  # (N_s, d_k)
        dots = qs @ ks.T  # (N_s, N_s): the weight's order in each row
        dist = np.linalg.norm(qs[:, None, :] - ks[None, :, :], axis=-1)  # (N_s, N_s)
        hits += list(dist.argmin(1) == dots.argmax(1))
        chance += [1.0 / len(rows)] * len(rows)
        r_near, r_weight = (np.argsort(np.argsort(a, axis=1), axis=1).astype(np.float64) for a in (-dist, dots))
        r_near -= r_near.mean(1, keepdims=True)
        r_weight -= r_weight.mean(1, keepdims=True)
        corr += list((r_near * r_weight).sum(1) / np.sqrt((r_near ** 2).sum(1) * (r_weight ** 2).sum(1)))
    if not hits:
        return Closeness(0.0, 0.0, 0.0, 0)
    return Closeness(float(np.mean(hits)), float(np.mean(chance)), float(np.mean(corr)), len(hits))


def attention_row(q_i: np.ndarray, k: np.ndarray) -> np.ndarray:
    """softmax_j(q_i . k_j / sqrt(d_k)): q_i (d_k,), k (N_s, d_k) -> (N_s,), the head's weights of that query."""
    scores = k.astype(np.float64) @ q_i.astype(np.float64) / np.sqrt(q_i.shape[-1])
    e = np.exp(scores - scores.max())
    return (e / e.sum()).astype(np.float32)
