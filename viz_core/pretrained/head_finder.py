"""Which head does what: every head of a model scored over a corpus, with the examples that show it.

Plain numpy: a corpus pass reads one attention tensor A (L, H, N, N) per sentence (row = query i, column = key j) and
the sentence's tokens, and pools each head's per-query values over every sentence. Every score reads the queries
i = 1 .. N-1 (query 0 of a causal model sees only itself, so its weights say nothing about the head):

    previous   p_i = A[i, i-1]                                   (the previous token)
    self       s_i = A[i, i]                                     (the token itself)
    first      f_i = A[i, 0]                                     (the first token: the attention sink)
    entropy    e_i = -sum_j A[i, j] log2 A[i, j]                 (bits: 0 = all weight on one key)
    distance   d_i = sum_j A[i, j] |i - j|                       (tokens)
    max        m_i = max_j A[i, j]                               (the largest weight of the row)
    duplicate  u_i = sum_{j < i, x_j = x_i} A[i, j]              (earlier copies of the same token)
    induction  n_i = sum_{k <= i, k >= 1, x_{k-1} = x_i, k-1 < i} A[i, k]   (the token after an earlier copy)

    score(l, h) = (1 / |Q|) sum_{(s, i) in Q} v_i^{s, l, h}       Q: every (sentence, query) where v_i is defined

duplicate and induction are defined only at queries that have an earlier copy of their token. Their masks are those of
TransformerLens's head detector (duplicate: same token, key before query; induction: that mask shifted one key to the
right, lower triangle), so on [start] r r (r: T distinct random tokens) the induction score is the mean of the
stripe A[i, i - T + 1] over the second copy, exactly TransformerLens's induction score, and duplicate the mean of
A[i, i - T]. Both are read on repeated random tokens (nothing but the repeat predicts the second copy), whose copies
are found by token id (two ids may share a label); the other scores on natural sentences. Sums are pooled in float64
and every example is ranked by its value, then by its sentence's text: reordering the corpus changes neither. A
previous-token example starts at query 2: at query 1 the previous token is the first one, where a sink head would look
like a previous-token head.
"""
from __future__ import annotations

import re
import zlib
from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence

import numpy as np

SCORES = ("previous", "induction", "duplicate", "self", "first", "entropy", "distance", "max")
REPEAT_SCORES = ("induction", "duplicate")   # read on repeated random tokens (the standard test input)
LOWER_IS_ACTIVE = ("entropy",)               # a head "does its thing" where this score is low (a sharp row)
BINS = 10                                    # histogram of each head's largest weight per query: [0, 0.1) .. [0.9, 1]
TOP_K = 12                                   # examples kept per head and score
MAX_SENTENCES = 400                          # a pasted text is read up to this many sentences ...
MAX_SENTENCE_CHARS = 300                     # ... each cut into pieces of at most this many characters
REPEAT_LEN = 40                              # T: each half of a repeated random sequence
REPEAT_SEQS = 4                              # repeated sequences read
MAX_UNKNOWN_SHARE = 0.25                     # a sentence with more unknown tokens than this is left out
CONTEXT = 6                                  # tokens shown on each side of an example's query and key
_SENTENCE_END = re.compile(r"(?<=[.!?。！？；;])\s+|(?<=[。！？；])|\n+")


# ---------------------------------------------------------------- per-query values of one sentence
def copy_masks(tokens: Sequence) -> tuple[np.ndarray, np.ndarray]:
    """TransformerLens's detection masks for a token sequence (N,): (duplicate, induction), bool (N, N) each.

    duplicate[i, j] = x_i == x_j and j < i;  induction[i, k] = duplicate[i, k - 1] for k >= 1, kept where k <= i."""
    x = np.asarray([str(t) for t in tokens], dtype=object)
    n = len(x)
    same = x[:, None] == x[None, :]  # (N, N)
    duplicate = same & np.tri(n, k=-1, dtype=bool)
    induction = np.zeros_like(duplicate)
    induction[:, 1:] = duplicate[:, :-1]
    return duplicate, induction & np.tri(n, dtype=bool)


@dataclass
class QueryValues:
    """One score's value at every query of one sentence, for every head."""
    values: np.ndarray    # float64 (L, H, Q): Q = N - 1 queries (i = 1 .. N-1)
    keys: np.ndarray      # int64 (L, H, Q): the key that shows it (the heaviest key the score reads)
    defined: np.ndarray   # bool (Q,): where the score is defined (duplicate, induction: an earlier copy)


def _masked(a: np.ndarray, mask: np.ndarray) -> QueryValues:
    """sum_j A[i, j] over a mask's keys, its heaviest key, and the rows where the mask has any key."""
    inside = a * mask  # (L, H, Q, N)
    heaviest = np.where(mask, a, -np.inf).argmax(-1)  # a key inside the mask even where its weights are all 0
    return QueryValues(inside.sum(-1), heaviest, mask.any(-1))


def query_values(weights: np.ndarray, tokens: Sequence, scores: Sequence[str] = SCORES,
                 ids: Sequence[int] | None = None) -> dict[str, QueryValues]:
    """The per-query values of the module docstring for queries 1 .. N-1: weights (L, H, N, N) -> {score:
    QueryValues with (L, H, N-1) arrays}. Copies are found by ids where given (else by the token labels). A sentence
    of one token has no query to read (empty arrays)."""
    a_all = np.asarray(weights, dtype=np.float64)
    n = a_all.shape[-1]
    a = a_all[..., 1:, :]  # (L, H, Q, N): the queries read
    rows = np.arange(1, n)
    shape = a.shape[:-1]
    argmax = a.argmax(-1) if n > 1 else np.zeros(shape, dtype=np.int64)
    everywhere = np.ones(n - 1, dtype=bool)
    out: dict[str, QueryValues] = {}
    for score in scores:
        if score in ("previous", "self"):
            keys = rows - 1 if score == "previous" else rows  # (Q,)
            out[score] = QueryValues(a[..., np.arange(n - 1), keys], np.broadcast_to(keys, shape).copy(), everywhere)
        elif score == "first":
            out[score] = QueryValues(a[..., 0], np.zeros(shape, dtype=np.int64), everywhere)
        elif score == "entropy":
            out[score] = QueryValues(-(a * np.log2(np.maximum(a, 1e-12))).sum(-1), argmax, everywhere)
        elif score == "distance":
            dist = np.abs(rows[:, None] - np.arange(n)[None, :])  # (Q, N)
            out[score] = QueryValues((a * dist).sum(-1), argmax, everywhere)
        elif score == "max":
            out[score] = QueryValues(a.max(-1), argmax, everywhere)
        elif score in REPEAT_SCORES:
            duplicate, induction = copy_masks(tokens if ids is None else ids)
            out[score] = _masked(a, (duplicate if score == "duplicate" else induction)[1:])
        else:
            raise ValueError(f"score must be one of {SCORES}, got {score!r}")
    return out


# ---------------------------------------------------------------- the pooled pass
@dataclass
class Read:
    """What one score read: sentences that had a defined query, and those queries."""
    corpus: str           # "text" (natural sentences) or "repeat" (repeated random tokens)
    sentences: int = 0
    queries: int = 0
    tokens: int = 0       # tokens of those sentences


@dataclass
class Example:
    """One place where a head does its thing: query -> key in a sentence, and the score's value there."""
    value: float
    sentence: int         # index into HeadFinder.sentences
    query: int            # token position of the query
    key: int              # token position of the key


@dataclass
class CorpusSentence:
    tokens: list[str]
    source: str           # "en", "zh", "own" or "repeat"


@dataclass
class HeadFinder:
    """Every head scored over a corpus (module docstring)."""
    scores: dict[str, np.ndarray]      # score -> float32 (L, H); NaN where nothing was read
    read: dict[str, Read]              # score -> what it read
    hist: np.ndarray                   # int64 (L, H, BINS): queries per bin of the row's largest weight
    top_value: dict[str, np.ndarray]   # score -> float64 (L, H, K), the most active first (entropy: lowest first)
    top_ref: dict[str, np.ndarray]     # score -> int64 (L, H, K, 3): (sentence, query, key); sentence -1 = none
    sentences: list[CorpusSentence]
    n_layers: int
    n_heads: int
    skipped: dict[str, int] = field(default_factory=dict)  # source -> sentences left out

    def read_by_source(self) -> dict[str, tuple[int, int]]:
        """source -> (sentences, tokens) read."""
        out: dict[str, tuple[int, int]] = {}
        for s in self.sentences:
            n, t = out.get(s.source, (0, 0))
            out[s.source] = (n + 1, t + len(s.tokens))
        return out

    def rank(self, score: str) -> np.ndarray:
        """int64 (L, H): 1 for the head with the highest score, ... (ties share the better rank; NaN last)."""
        v = self.scores[score].astype(np.float64)
        flat = np.where(np.isnan(v), -np.inf, v).ravel()
        return (1 + (flat[None, :] > flat[:, None]).sum(1)).reshape(v.shape)

    def examples(self, score: str, layer: int, head: int) -> list[Example]:
        """The head's most active places for a score, the most active first."""
        sign = -1.0 if score in LOWER_IS_ACTIVE else 1.0
        values, refs = self.top_value[score][layer, head], self.top_ref[score][layer, head]
        return [Example(float(sign * v), int(s), int(q), int(k)) for v, (s, q, k) in zip(values, refs) if s >= 0]

    def context(self, ex: Example, width: int = CONTEXT) -> str:
        """The tokens within `width` of an example's key or query (a gap between them as "…"): the query in [ ],
        the key in « » (the same token: both)."""
        tokens = self.sentences[ex.sentence].tokens
        near = sorted({p for c in (ex.key, ex.query) for p in range(max(0, c - width), min(len(tokens), c + width + 1))})
        shown, last = [], None
        for p in near:
            if last is not None and p > last + 1:
                shown.append("…")
            tok = f"«{tokens[p]}»" if p == ex.key else tokens[p]
            shown.append(f"[{tok}]" if p == ex.query else tok)
            last = p
        return ("… " if near[0] else "") + " ".join(shown) + (" …" if near[-1] < len(tokens) - 1 else "")

    def table(self) -> list[dict]:
        """One row per head: layer, head, every score (float), in layer-then-head order."""
        return [{"layer": layer, "head": head, **{s: float(self.scores[s][layer, head]) for s in SCORES}}
                for layer in range(self.n_layers) for head in range(self.n_heads)]


def _tie_keys(tokens: Sequence[str], n_queries: int) -> np.ndarray:
    """An order of a sentence's queries that does not depend on where the sentence sits in the corpus: (Q,) int64."""
    text = zlib.crc32("\x1f".join(map(str, tokens)).encode("utf-8"))
    return (np.int64(text) << np.int64(20)) + np.arange(1, n_queries + 1, dtype=np.int64)


class CorpusPass:
    """Pools the per-query values of sentences added one at a time (add), then gives a HeadFinder (result)."""

    def __init__(self, n_layers: int, n_heads: int, k: int = TOP_K):
        self.n_layers, self.n_heads, self.k = n_layers, n_heads, k
        shape = (n_layers, n_heads)
        self.sums = {s: np.zeros(shape) for s in SCORES}
        self.read = {s: Read("repeat" if s in REPEAT_SCORES else "text") for s in SCORES}
        self.hist = np.zeros(shape + (BINS,), dtype=np.int64)
        self.top_value = {s: np.full(shape + (k,), -np.inf) for s in SCORES}
        self.top_tie = {s: np.full(shape + (k,), np.iinfo(np.int64).max, dtype=np.int64) for s in SCORES}
        self.top_ref = {s: np.full(shape + (k, 3), -1, dtype=np.int64) for s in SCORES}
        self.sentences: list[CorpusSentence] = []
        self.skipped: dict[str, int] = {}  # source -> sentences left out (refused, or mostly unknown tokens)

    def add(self, weights: np.ndarray, tokens: Sequence[str], source: str, ids: Sequence[int] | None = None) -> None:
        """One sentence: weights (L, H, N, N), its N tokens (and their ids, which find the copies where given), and
        where it comes from ("repeat" feeds the repeat scores and nothing else; any other source feeds the others)."""
        if weights.shape[:2] != (self.n_layers, self.n_heads) or weights.shape[-1] != len(tokens):
            raise ValueError(f"weights {weights.shape} do not match {self.n_layers} layers, {self.n_heads} heads "
                             f"and {len(tokens)} tokens")
        if len(tokens) < 2:
            return
        scores = REPEAT_SCORES if source == "repeat" else tuple(s for s in SCORES if s not in REPEAT_SCORES)
        index = len(self.sentences)
        self.sentences.append(CorpusSentence([str(t) for t in tokens], source))
        ties = _tie_keys(tokens, len(tokens) - 1)  # (Q,)
        for score, qv in query_values(weights, tokens, scores, ids).items():
            if not qv.defined.any():
                continue
            read = self.read[score]
            read.sentences += 1
            read.queries += int(qv.defined.sum())
            read.tokens += len(tokens)
            self.sums[score] += qv.values[..., qv.defined].sum(-1)
            self._keep_top(score, qv, ties, index)
        if source != "repeat":
            largest = np.asarray(weights, dtype=np.float64)[..., 1:, :].max(-1)  # (L, H, Q)
            bins = np.minimum((largest * BINS).astype(np.int64), BINS - 1)
            self.hist += (bins[..., None] == np.arange(BINS)).sum(-2)

    def _keep_top(self, score: str, qv: QueryValues, ties: np.ndarray, index: int) -> None:
        """Merge this sentence's queries into the score's k best of every head: by value, then tie key."""
        sign = -1.0 if score in LOWER_IS_ACTIVE else 1.0
        shape = qv.values.shape  # (L, H, Q)
        new_v = np.where(qv.defined, sign * qv.values, -np.inf)
        if score == "previous":
            new_v[..., :1] = -np.inf  # query 1: its previous token is the first one (a sink's place)
        queries = np.broadcast_to(np.arange(1, shape[-1] + 1), shape)
        new_ref = np.stack([np.full(shape, index), queries, qv.keys], -1)  # (L, H, Q, 3)
        v = np.concatenate([self.top_value[score], new_v], -1)  # (L, H, K + Q)
        tie = np.concatenate([self.top_tie[score], np.broadcast_to(ties, shape)], -1)
        ref = np.concatenate([self.top_ref[score], new_ref], -2)  # (L, H, K + Q, 3)
        order = np.argsort(tie, axis=-1, kind="stable")
        v, tie, ref = (np.take_along_axis(v, order, -1), np.take_along_axis(tie, order, -1),
                       np.take_along_axis(ref, order[..., None], -2))
        order = np.argsort(-v, axis=-1, kind="stable")[..., :self.k]
        self.top_value[score] = np.take_along_axis(v, order, -1)
        self.top_tie[score] = np.take_along_axis(tie, order, -1)
        self.top_ref[score] = np.take_along_axis(ref, order[..., None], -2)
        undefined = ~np.isfinite(self.top_value[score])
        self.top_ref[score][undefined] = -1

    def result(self) -> HeadFinder:
        scores = {}
        for s in SCORES:
            n = self.read[s].queries
            scores[s] = (self.sums[s] / n).astype(np.float32) if n else np.full(self.sums[s].shape, np.nan,
                                                                                   dtype=np.float32)
        return HeadFinder(scores=scores, read={s: Read(**vars(r)) for s, r in self.read.items()},
                          hist=self.hist.copy(), top_value={s: v.copy() for s, v in self.top_value.items()},
                          top_ref={s: r.copy() for s, r in self.top_ref.items()}, sentences=list(self.sentences),
                          n_layers=self.n_layers, n_heads=self.n_heads, skipped=dict(self.skipped))


# ---------------------------------------------------------------- corpora
def split_sentences(text: str, max_sentences: int = MAX_SENTENCES, max_chars: int = MAX_SENTENCE_CHARS) -> list[str]:
    """A pasted text as sentences: split after . ! ? ; (and their Chinese forms) and at line breaks; a longer
    piece is cut at spaces (or, without spaces, every max_chars characters). At most max_sentences come back."""
    out: list[str] = []
    for piece in _SENTENCE_END.split(str(text or "")):
        piece = piece.strip()
        while piece and len(out) < max_sentences:
            if len(piece) <= max_chars:
                out.append(piece)
                break
            cut = piece.rfind(" ", 0, max_chars + 1)
            cut = cut if cut > max_chars // 2 else max_chars
            out.append(piece[:cut].strip())
            piece = piece[cut:].strip()
    return [s for s in out if s][:max_sentences]


def repeated_ids(pool: np.ndarray, seq_len: int = REPEAT_LEN, n_seqs: int = REPEAT_SEQS, seed: int = 0,
                 start: int | None = None, end: int | None = None) -> np.ndarray:
    """[start] r r [end] for n_seqs sequences r of seq_len distinct tokens drawn from pool (no token twice in r, so
    the second copy is the only repeat): int64 (B, 2T + extras). The same seed gives the same sequences."""
    if seq_len < 2 or n_seqs < 1 or len(pool) < seq_len:
        raise ValueError(f"need seq_len >= 2, n_seqs >= 1 and at least seq_len tokens to draw from")
    rng = np.random.default_rng(seed)
    r = np.stack([rng.choice(pool, size=seq_len, replace=False) for _ in range(n_seqs)])  # (B, T)
    parts = ([np.full((n_seqs, 1), start)] if start is not None else []) + [r, r] + (
        [np.full((n_seqs, 1), end)] if end is not None else [])
    return np.concatenate(parts, axis=1).astype(np.int64)


@dataclass
class Corpus:
    """What a pass reads: natural sentences with their source ("en", "zh", "own") and repeated token ids."""
    sentences: list[tuple[str, str]] = field(default_factory=list)   # (source, text)
    repeats: np.ndarray | None = None                                # int64 (B, N) token ids, or None


@dataclass
class Progress:
    done: int
    total: int


def unreadable(tokens: Sequence[str], unk: str | None) -> bool:
    """Whether more than MAX_UNKNOWN_SHARE of a sentence's tokens are the unknown token (a language the model's
    vocabulary lacks): such a sentence says nothing about what the heads do with words."""
    return bool(unk) and sum(t == unk for t in tokens) > MAX_UNKNOWN_SHARE * max(len(tokens), 1)


def run_pass(corpus: Corpus, n_layers: int, n_heads: int,
             attend_text: Callable[[str], tuple[list[str], np.ndarray]],
             attend_ids: Callable[[np.ndarray], tuple[list[str], np.ndarray]] | None,
             finished: Callable[[HeadFinder], None], unk: str | None = None) -> Iterator[Progress]:
    """Read a corpus sentence by sentence (a generator of Progress, for a background job), then hand the HeadFinder
    to `finished`. attend_text(text) -> (tokens (N,), weights (L, H, N, N)); attend_ids(ids (N,)) -> the same for a
    token id row (None: the model cannot take raw ids, so no repeat scores). A text the model refuses is skipped."""
    from ..errors import InputError

    repeats = [] if corpus.repeats is None or attend_ids is None else list(corpus.repeats)
    total = len(corpus.sentences) + len(repeats)
    acc = CorpusPass(n_layers, n_heads)
    done = 0
    for source, text in corpus.sentences:
        try:
            tokens, weights = attend_text(text)
        except InputError:
            tokens, weights = None, None
        if tokens is None or unreadable(tokens, unk):
            acc.skipped[source] = acc.skipped.get(source, 0) + 1
        else:
            acc.add(weights, tokens, source)
        done += 1
        yield Progress(done, total)
    for ids in repeats:
        tokens, weights = attend_ids(ids)
        acc.add(weights, tokens, "repeat", ids=[int(i) for i in ids])
        done += 1
        yield Progress(done, total)
    finished(acc.result())
