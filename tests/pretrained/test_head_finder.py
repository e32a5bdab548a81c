"""viz_core.pretrained.head_finder (with finder_sources and finder_runs) against independent computations.

Every score is recomputed here with plain Python loops over the raw attention tensors (A[l][h][i][j] as lists of
floats; token sameness read from the token ids where there are ids), never with the module's helpers: on random
row-stochastic arrays with hand-made token lists, on tiny random transformers models (fixtures of test_load.py), on
the packaged MiniLM in numpy and on a packaged real decoder (Gemma 3 270M). The induction and duplicate scores on
[start] r r are checked against TransformerLens's formulas, written out below (transformer_lens is not installed):
the tutorial's induction stripe and the head detector's "mul" measure with its detection patterns. Then: the scores,
ranks and examples do not depend on the corpus order, a head card's examples are a brute force's top k, and the
corpus helpers and the shared background runs do what they say.
"""
from __future__ import annotations

import math
import random
import re
import threading

import numpy as np
import pytest
import torch

from tests.pretrained.test_load import tiny_bert, tiny_gpt2, tokenizer_dir  # noqa: F401 - shared fixtures
from tests.pretrained.tiny_models import SENTENCE
from viz_core.errors import InputError
from viz_core.pretrained import finder_sources
from viz_core.pretrained.finder_runs import FinderRuns
from viz_core.pretrained.head_finder import (BINS, LOWER_IS_ACTIVE, REPEAT_SCORES, SCORES, Corpus, CorpusPass,
                                             HeadFinder, Progress, repeated_ids, run_pass, split_sentences,
                                             unreadable)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TEXT_SCORES = ("previous", "self", "first", "entropy", "distance", "max")
SENTENCES = ("The cat sat on the mat.", "Attention is all you need, they said.", "Paris is the capital of France.")
ZH_UNREADABLE = SENTENCE  # 17 of its 23 tokens are [UNK] for MiniLM


# ---------------------------------------------------------------- the independent reference
def ref_value(row: list[float], i: int, same: list[bool], score: str):
    """One head's value at query i, from the row A[i, :] (a list) and same[j] = (token j is token i).
    Returns (value, the keys an example may show) or None where the score is not defined."""
    n = len(row)
    if score == "previous":
        return row[i - 1], {i - 1}
    if score == "self":
        return row[i], {i}
    if score == "first":
        return row[0], {0}
    top = max(row)
    heaviest = {j for j in range(n) if row[j] == top}
    if score == "max":
        return top, heaviest
    if score == "entropy":
        h = 0.0
        for p in row:
            if p > 0:
                h -= p * math.log2(p)
        return h, heaviest
    if score == "distance":
        d = 0.0
        for j in range(n):
            d += row[j] * abs(i - j)
        return d, heaviest
    if score == "duplicate":    # earlier copies of the query's token
        keys = [j for j in range(i) if same[j]]
    elif score == "induction":  # the token right after each earlier copy (so the key is at most i)
        keys = [j + 1 for j in range(i) if same[j]]
    else:
        raise AssertionError(score)
    if not keys:
        return None
    total = 0.0
    for k in keys:
        total += row[k]
    best = max(row[k] for k in keys)
    return total, {k for k in keys if row[k] == best}


def reference(items: list[tuple[np.ndarray, list, str]]) -> dict:
    """items: (A (L, H, N, N), token ids or labels (N,), source) in the order the finder kept them.
    Returns {score: {(l, h): [(sentence, query, value, keys), ...]}} over every defined query 1 .. N-1."""
    L, H = items[0][0].shape[:2]
    per = {s: {(l, h): [] for l in range(L) for h in range(H)} for s in SCORES}
    for si, (a, toks, source) in enumerate(items):
        n = len(toks)
        rows = np.asarray(a, dtype=np.float64).tolist()
        scores = REPEAT_SCORES if source == "repeat" else TEXT_SCORES
        same = [[toks[j] == toks[i] for j in range(n)] for i in range(n)]
        for l in range(L):
            for h in range(H):
                for i in range(1, n):
                    for s in scores:
                        v = ref_value(rows[l][h][i], i, same[i], s)
                        if v is not None:
                            per[s][l, h].append((si, i) + v)
    return per


def ref_scores(per: dict, L: int, H: int) -> dict[str, np.ndarray]:
    out = {}
    for s in SCORES:
        out[s] = np.full((L, H), np.nan)
        for l in range(L):
            for h in range(H):
                vals = [e[2] for e in per[s][l, h]]
                if vals:
                    out[s][l, h] = sum(vals) / len(vals)
    return out


def ref_hist(items, L, H) -> np.ndarray:
    hist = np.zeros((L, H, BINS), dtype=np.int64)
    for a, toks, source in items:
        if source == "repeat":
            continue
        rows = np.asarray(a, dtype=np.float64).tolist()
        for l in range(L):
            for h in range(H):
                for i in range(1, len(toks)):
                    hist[l, h, min(int(max(rows[l][h][i]) * BINS), BINS - 1)] += 1
    return hist


def check_examples(f: HeadFinder, per: dict, score: str, l: int, h: int, atol: float = 1e-9) -> None:
    """The head card's examples are the brute force's top k (entropy: the lowest), each at its own query's value
    with a key that shows it."""
    k = f.top_value[score].shape[-1]
    entries = [e for e in per[score][l, h] if score != "previous" or e[1] >= 2]  # previous: from query 2
    want = sorted((e[2] for e in entries), reverse=score not in LOWER_IS_ACTIVE)[:k]
    got = f.examples(score, l, h)
    assert len(got) == len(want), (score, l, h)
    assert score != "previous" or all(e.query >= 2 and e.key == e.query - 1 for e in got)
    np.testing.assert_allclose([e.value for e in got], want, rtol=1e-9, atol=atol, err_msg=f"{score} {l} {h}")
    at = {(e[0], e[1]): e for e in entries}
    assert len({(e.sentence, e.query) for e in got}) == len(got)  # no place twice
    for e in got:
        _, _, value, keys = at[e.sentence, e.query]
        assert abs(e.value - value) <= atol + 1e-9 * abs(value)
        assert e.key in keys, (score, l, h, e, keys)


def check_finder(f: HeadFinder, items, atol: float = 2e-6, examples: bool = True) -> dict:
    """Every score, read count, the histogram and (optionally) every head's examples against the reference."""
    L, H = f.n_layers, f.n_heads
    assert len(f.sentences) == len(items)
    per = reference(items)
    want = ref_scores(per, L, H)
    for s in SCORES:
        assert f.scores[s].shape == (L, H) and f.scores[s].dtype == np.float32
        np.testing.assert_allclose(f.scores[s], want[s], rtol=1e-5, atol=atol, equal_nan=True, err_msg=s)
        entries = per[s][0, 0]
        assert f.read[s].queries == len(entries), s
        assert f.read[s].sentences == len({e[0] for e in entries}), s
        assert f.read[s].corpus == ("repeat" if s in REPEAT_SCORES else "text")
        if examples:
            for l in range(L):
                for h in range(H):
                    check_examples(f, per, s, l, h)
    np.testing.assert_array_equal(f.hist, ref_hist(items, L, H))
    return per


# ---------------------------------------------------------------- (1a) random row-stochastic arrays
def random_weights(rng, L, H, n, causal=False, zeros=False) -> np.ndarray:
    a = rng.dirichlet(np.full(n, 0.7), size=(L, H, n))  # (L, H, N, N), rows sum to 1
    if zeros:  # exact zeros in every row (the entropy's 0 log 0)
        a[..., rng.random((L, H, n, n)) < 0.3] = 0.0
        a[..., 0] += 1e-3
    if causal:
        a = np.tril(a)
        a[..., np.arange(n), np.arange(n)] += 1e-3
    a /= a.sum(-1, keepdims=True)
    return a.astype(np.float32)


TEXTS = [["the", "cat", "sat", "on", "the", "mat", "."], ["a", "b", "a", "b", "a"], ["x", "y"],
         ["我", "的", "猫", "的", "我", "。"], ["one", "two", "three", "four", "five", "six", "seven", "eight"]]
REPEATS = [["<s>", "p", "q", "r", "p", "q", "r"], ["a", "b", "c", "a", "a", "c", "b", "a"],
           ["u", "v", "w", "x"], ["z", "z", "z"]]


def random_corpus(seed=0, L=3, H=4, causal=False):
    rng = np.random.default_rng(seed)
    items = [(random_weights(rng, L, H, len(t), causal, zeros=k % 2 == 0), t, "en") for k, t in enumerate(TEXTS)]
    items += [(random_weights(rng, L, H, len(t), causal), t, "repeat") for t in REPEATS]
    return items


@pytest.mark.parametrize("causal", [False, True])
def test_every_score_equals_loops_on_random_arrays(causal):
    items = random_corpus(seed=1 if causal else 2, causal=causal)
    acc = CorpusPass(3, 4)
    for a, toks, source in items:
        acc.add(a, toks, source)
    acc.add(np.ones((3, 4, 1, 1), np.float32), ["alone"], "en")  # one token: no query, nothing read
    f = acc.result()
    assert [s.tokens for s in f.sentences] == [t for _, t, _ in items]
    assert [s.source for s in f.sentences] == [s for _, _, s in items]
    per = check_finder(f, items)
    # hand-checked counts: duplicate is defined at the queries with an earlier copy of their token
    assert f.read["duplicate"].queries == 3 + 5 + 0 + 2 == len(per["duplicate"][2, 3])
    assert f.read["previous"].queries == sum(len(t) - 1 for t in TEXTS)
    assert f.read_by_source() == {"en": (len(TEXTS), sum(map(len, TEXTS))),
                                  "repeat": (len(REPEATS), sum(map(len, REPEATS)))}
    table = f.table()
    assert len(table) == 12 and table[5]["layer"] == 1 and table[5]["head"] == 1
    assert table[5]["entropy"] == pytest.approx(float(f.scores["entropy"][1, 1]))
    with pytest.raises(ValueError):
        acc.add(np.ones((3, 4, 5, 5), np.float32), ["a"] * 4, "en")  # 5 columns, 4 tokens


def test_scores_read_by_nothing_are_nan():
    acc = CorpusPass(1, 2)
    rng = np.random.default_rng(3)
    acc.add(random_weights(rng, 1, 2, 4), ["a", "b", "c", "d"], "own")
    f = acc.result()
    assert np.isnan(f.scores["induction"]).all() and np.isnan(f.scores["duplicate"]).all()
    assert f.read["induction"].queries == 0 and f.examples("induction", 0, 1) == []
    assert np.isfinite(f.scores["previous"]).all()


def test_hand_made_heads():
    """Exact heads on r r (no start): previous, self, first, an induction head and a duplicate head."""
    T = 4
    toks = ["a", "b", "c", "d"] * 2
    n = 2 * T
    heads = np.zeros((5, n, n))
    heads[0, 0, 0] = 1
    heads[0, np.arange(1, n), np.arange(n - 1)] = 1              # previous
    heads[1] = np.eye(n)                                         # self
    heads[2, :, 0] = 1                                           # first
    heads[3] = np.eye(n)
    heads[3, T:] = 0
    heads[3, np.arange(T, n), np.arange(T, n) - T + 1] = 1       # induction: A[i, i - T + 1] on the second copy
    heads[4] = np.eye(n)
    heads[4, T:] = 0
    heads[4, np.arange(T, n), np.arange(T, n) - T] = 1           # duplicate: A[i, i - T]
    a = heads[None].astype(np.float32)
    acc = CorpusPass(1, 5)
    acc.add(a, toks, "en")
    acc.add(a, toks, "repeat")
    f = acc.result()
    # queries 1 .. 7; heads 3 and 4 copy themselves on the first copy (queries 1 .. 3)
    np.testing.assert_allclose(f.scores["previous"][0], [1, 0, 1 / 7, 0, 0], atol=1e-6)
    np.testing.assert_allclose(f.scores["self"][0], [0, 1, 0, 3 / 7, 3 / 7], atol=1e-6)
    np.testing.assert_allclose(f.scores["first"][0], [1 / 7, 0, 1, 0, 1 / 7], atol=1e-6)
    np.testing.assert_allclose(f.scores["max"][0], 1, atol=1e-6)
    np.testing.assert_allclose(f.scores["entropy"][0], 0, atol=1e-6)
    np.testing.assert_allclose(f.scores["induction"][0], [0, 0, 0, 1, 0], atol=1e-6)
    np.testing.assert_allclose(f.scores["duplicate"][0], [0, 0, 1 / 4, 0, 1], atol=1e-6)  # A[4, 0]: "a" again
    assert f.rank("induction")[0, 3] == 1 and f.rank("duplicate")[0, 4] == 1
    assert f.rank("previous")[0].tolist() == [1, 3, 2, 3, 3]  # ties share the better rank
    ex = f.examples("induction", 0, 3)
    assert sorted((e.query, e.key) for e in ex) == [(i, i - T + 1) for i in range(T, n)]
    ex = f.examples("duplicate", 0, 4)
    assert sorted((e.query, e.key) for e in ex) == [(i, i - T) for i in range(T, n)]
    shown = f.context(f.examples("previous", 0, 0)[0], width=1)
    assert "[" in shown and "«" in shown


# ---------------------------------------------------------------- helpers for models
def drive(corpus: Corpus, src) -> HeadFinder:
    """run_pass over a corpus, every progress step checked; the HeadFinder it hands over."""
    box = []
    steps = list(run_pass(corpus, src.n_layers, src.n_heads, src.attend_text, src.attend_ids, box.append, unk=src.unk))
    total = len(corpus.sentences) + (0 if corpus.repeats is None or src.attend_ids is None else len(corpus.repeats))
    assert [(p.done, p.total) for p in steps] == [(k, total) for k in range(1, total + 1)]
    assert len(box) == 1
    return box[0]


def torch_attention(m, **inputs) -> np.ndarray:
    """The model's own attention tensors for one input (transformers, output_attentions): float64 (L, H, N, N)."""
    with torch.inference_mode():
        out = m.model(**inputs, output_attentions=True, return_dict=True)
    return torch.stack([a[0] for a in out.attentions]).double().numpy()


def transformers_items(m, texts, repeats):
    """Reference items for a transformers model: its tokenizer's encoding of each text, the repeat rows as ids."""
    from viz_core.pretrained.token_text import token_labels
    items, labels = [], []
    for text in texts:
        enc = m.tokenizer(text, return_tensors="pt")
        ids = enc["input_ids"][0].tolist()
        items.append((torch_attention(m, **enc), ids, "en"))
        labels.append(token_labels(m.tokenizer, ids))
    for row in repeats:
        ids = [int(i) for i in row]
        items.append((torch_attention(m, input_ids=torch.tensor([ids])), ids, "repeat"))
        labels.append(token_labels(m.tokenizer, ids))
    return items, labels


def stripe_and_tl(a: np.ndarray, ids: list[int], T: int, start: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """On one [start] r r (start: r's first position) the per-head (L, H) induction stripe, TransformerLens's "mul"
    induction measure on the second copy's rows, and the duplicate stripe."""
    n = len(ids)
    second = np.arange(start + T, start + 2 * T)                   # the second copy's queries
    # (i) the tutorial: pattern.diagonal(offset=1 - seq_len), here restricted to the second copy: A[i, i - T + 1]
    diag = np.diagonal(a, offset=1 - T, axis1=-2, axis2=-1)        # (L, H, n - T + 1): entry d = A[d + T - 1, d]
    stripe = diag[..., second - (T - 1)].mean(-1)
    # (ii) the head detector: duplicate pattern (same token, key before query), induction pattern = that rolled one
    # column right with the first column zeroed, lower triangle; score = sum(A * P) / sum(A) over the rows read
    tokens = np.asarray(ids)
    eq = (tokens[None, :] == tokens[:, None]).astype(float)
    np.fill_diagonal(eq, 0)
    duplicate_pattern = np.tril(eq)
    shifted = np.roll(duplicate_pattern, 1, axis=1)
    induction_pattern = np.tril(np.concatenate([np.zeros((n, 1)), shifted[:, 1:]], axis=1))
    rows = a[..., second, :]
    tl = (rows * induction_pattern[second]).sum((-1, -2)) / rows.sum((-1, -2))
    dup = np.diagonal(a, offset=-T, axis1=-2, axis2=-1)[..., second - T].mean(-1)  # A[i, i - T]
    return stripe, tl, dup


def check_tl(f: HeadFinder, items, T: int, start: int, atol=2e-6) -> None:
    """The finder's induction and duplicate scores are TransformerLens's on the repeats (equal lengths: a mean)."""
    parts = [stripe_and_tl(a, ids, T, start) for a, ids, source in items if source == "repeat"]
    assert parts
    stripe, tl, dup = (np.mean([p[k] for p in parts], axis=0) for k in range(3))
    np.testing.assert_allclose(f.scores["induction"], stripe, rtol=1e-5, atol=atol)
    np.testing.assert_allclose(f.scores["induction"], tl, rtol=1e-5, atol=atol)
    np.testing.assert_allclose(f.scores["duplicate"], dup, rtol=1e-5, atol=atol)
    assert f.read["induction"].queries == f.read["duplicate"].queries == T * len(parts)


# ---------------------------------------------------------------- (1b) tiny random transformers models
@pytest.mark.parametrize("name", ["tiny_gpt2", "tiny_bert"])
def test_every_score_equals_loops_on_a_tiny_model(name, request):
    m = request.getfixturevalue(name)
    src = finder_sources.of_loaded(m)
    assert (src.n_layers, src.n_heads, src.kind) == (m.n_layers, m.n_heads, m.kind)
    assert src.attend_ids is not None and src.unk == "[UNK]"
    special = set(m.tokenizer.all_special_ids)
    assert not special & set(src.pool.tolist())
    cls = m.tokenizer.cls_token_id
    T = 6
    repeats = repeated_ids(src.pool, seq_len=T, n_seqs=2, seed=4, start=cls)  # [CLS] r r
    f = drive(Corpus([("en", s) for s in SENTENCES], repeats), src)
    items, labels = transformers_items(m, SENTENCES, repeats)
    assert [s.tokens for s in f.sentences] == labels
    check_finder(f, items)
    check_tl(f, items, T, start=1)


# ---------------------------------------------------------------- (1c) the packaged MiniLM (numpy) and a real decoder
@pytest.fixture(scope="module")
def minilm():
    from viz_core.pretrained import bert_numpy
    return bert_numpy.load_default()


def numpy_items(nb, texts, repeats):
    items = []
    for text in texts:
        ids = nb._tok.encode(text).ids
        items.append((nb.attention_weights(ids, [0] * len(ids)), ids, "en"))
    for row in repeats:
        ids = [int(i) for i in row]
        items.append((nb.attention_weights(ids, [0] * len(ids)), ids, "repeat"))
    return items


def test_every_score_equals_loops_on_packaged_minilm(minilm):
    nb = minilm
    src = finder_sources.of_numpy_bert(nb)
    vocab = nb._tok.get_vocab()
    assert (src.start, src.end, src.unk, src.kind) == (vocab["[CLS]"], vocab["[SEP]"], "[UNK]", "encoder")
    assert not any(re.fullmatch(r"\[.*\]", nb._tok.id_to_token(int(i))) for i in src.pool)
    T = 8
    repeats = repeated_ids(src.pool, seq_len=T, n_seqs=1, seed=5, start=src.start, end=src.end)  # [CLS] r r [SEP]
    corpus = Corpus([("en", SENTENCES[0]), ("zh", ZH_UNREADABLE), ("en", SENTENCES[1]), ("en", SENTENCES[2])],
                    repeats)
    f = drive(corpus, src)
    assert f.skipped == {"zh": 1}  # most of its tokens are [UNK]: left out
    items = numpy_items(nb, SENTENCES, repeats)
    assert [s.tokens for s in f.sentences] == [[nb._tok.id_to_token(i) for i in ids] for _, ids, _ in items]
    assert f.sentences[0].tokens[0] == "[CLS]" and f.sentences[-1].tokens[-1] == "[SEP]"
    check_finder(f, items, atol=2e-6)
    check_tl(f, items, T, start=1)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gemma", "smollm2"])
def test_every_score_equals_loops_on_a_packaged_decoder(name, request):
    m = request.getfixturevalue(name)
    src = finder_sources.of_loaded(m)
    tok = m.tokenizer
    assert src.kind == "decoder" and src.start == tok.bos_token_id and src.end is None
    assert not set(tok.all_special_ids) & set(src.pool.tolist())
    T = 10
    repeats = repeated_ids(src.pool, seq_len=T, n_seqs=1, seed=6, start=src.start)  # <bos> r r
    f = drive(Corpus([("en", s) for s in SENTENCES], repeats), src)
    items, labels = transformers_items(m, SENTENCES, repeats)
    assert [s.tokens for s in f.sentences] == labels
    assert all(ids[0] == tok.bos_token_id for _, ids, _ in items[-1:])
    check_finder(f, items, atol=1e-5)
    check_tl(f, items, T, start=1, atol=1e-5)
    assert np.nanmax(f.scores["induction"]) > 0.3  # a real model has induction heads, even on 10 tokens


# ---------------------------------------------------------------- (2) TransformerLens's formulas on random arrays
def test_induction_and_duplicate_equal_transformer_lens_on_random_arrays():
    rng = np.random.default_rng(7)
    L, H, T, B = 2, 3, 5, 3
    pool = np.arange(100, 160)
    ids = repeated_ids(pool, seq_len=T, n_seqs=B, seed=8, start=1)  # [start] r r
    acc = CorpusPass(L, H)
    items = []
    for row in ids:
        a = random_weights(rng, L, H, len(row), causal=True)
        acc.add(a, [str(i) for i in row], "repeat")
        items.append((a.astype(np.float64), row.tolist(), "repeat"))
    f = acc.result()
    check_tl(f, items, T, start=1)
    # a planted induction head: A[i, i - T + 1] = 0.9 on the second copy
    a = random_weights(rng, L, H, 2 * T + 1, causal=True).astype(np.float64)
    q = np.arange(T + 1, 2 * T + 1)
    a[1, 2, q] *= 0.1
    a[1, 2, q, q - T + 1] += 0.9
    stripe, tl, _ = stripe_and_tl(a, ids[0].tolist(), T, start=1)
    assert stripe[1, 2] == pytest.approx(tl[1, 2]) and stripe[1, 2] > 0.9
    acc = CorpusPass(L, H)
    acc.add(a.astype(np.float32), [str(i) for i in ids[0]], "repeat")
    assert acc.result().rank("induction")[1, 2] == 1


# ---------------------------------------------------------------- (3) the corpus order changes nothing
def example_list(f: HeadFinder, score: str, l: int, h: int) -> list:
    return [(tuple(f.sentences[e.sentence].tokens), e.query, e.key, e.value) for e in f.examples(score, l, h)]


def assert_same_finder(f1: HeadFinder, f2: HeadFinder) -> None:
    for s in SCORES:
        np.testing.assert_allclose(f1.scores[s], f2.scores[s], rtol=1e-6, atol=1e-7, equal_nan=True)
        np.testing.assert_array_equal(f1.rank(s), f2.rank(s))
        for l in range(f1.n_layers):
            for h in range(f1.n_heads):
                a, b = example_list(f1, s, l, h), example_list(f2, s, l, h)
                assert a == b, (s, l, h)
    np.testing.assert_array_equal(f1.hist, f2.hist)


def test_shuffled_random_corpus_gives_the_same_scores_ranks_and_examples():
    rng = np.random.default_rng(9)
    L, H = 2, 3
    items = []
    for k in range(30):  # more queries than TOP_K, and exact ties: head (0, 0) is a perfect previous-token head
        toks = [f"w{k}_{j}" for j in range(int(rng.integers(3, 9)))]
        a = random_weights(rng, L, H, len(toks))
        a[0, 0] = 0
        a[0, 0, 0, 0] = 1
        a[0, 0, np.arange(1, len(toks)), np.arange(len(toks) - 1)] = 1
        items.append((a, toks, "en"))
    for k in range(15):
        toks = [f"r{k}_{j}" for j in range(4)] * 2
        items.append((random_weights(rng, L, H, 8, causal=True), toks, "repeat"))
    results = []
    for seed in (None, 1, 2):
        order = list(items)
        if seed is not None:
            random.Random(seed).shuffle(order)
        acc = CorpusPass(L, H)
        for a, toks, source in order:
            acc.add(a, toks, source)
        results.append(acc.result())
    assert_same_finder(results[0], results[1])
    assert_same_finder(results[0], results[2])
    assert results[0].examples("previous", 0, 0)[0].value == 1.0  # the tie was real


def test_shuffled_corpus_on_minilm_gives_the_same_result(minilm):
    from viz_core.pretrained.qk_map import bundled_sentences
    src = finder_sources.of_numpy_bert(minilm)
    bundled = bundled_sentences()
    sentences = [("en", s) for s in bundled["en"][:10]] + [("zh", s) for s in bundled["zh"][:2]]
    repeats = repeated_ids(src.pool, seq_len=6, n_seqs=3, seed=2, start=src.start, end=src.end)
    f1 = drive(Corpus(sentences, repeats), src)
    shuffled = list(sentences)
    random.Random(3).shuffle(shuffled)
    f2 = drive(Corpus(shuffled, repeats[::-1].copy()), src)
    assert f1.skipped == f2.skipped
    assert f1.read_by_source() == f2.read_by_source()
    assert_same_finder(f1, f2)
    assert {tuple(s.tokens) for s in f1.sentences} == {tuple(s.tokens) for s in f2.sentences}


# ---------------------------------------------------------------- (4) a head card's examples are the top k
def test_examples_are_the_brute_force_top_k():
    rng = np.random.default_rng(11)
    L, H = 2, 2
    items = []
    for k in range(12):
        toks = [f"t{j % 5}" for j in range(int(rng.integers(4, 12)))]  # repeats in the text too
        items.append((random_weights(rng, L, H, len(toks), causal=k % 2 == 1, zeros=k % 3 == 0), toks,
                      "repeat" if k % 4 == 3 else "en"))
    acc = CorpusPass(L, H, k=5)
    for a, toks, source in items:
        acc.add(a, toks, source)
    f = acc.result()
    assert f.top_value["max"].shape == (L, H, 5)
    per = check_finder(f, items)  # every score and head: check_examples
    # entropy is "lower is active": the lowest entropies first, the other scores the highest first
    for l in range(L):
        for h in range(H):
            ent = [e.value for e in f.examples("entropy", l, h)]
            assert ent == sorted(ent) and ent[0] == pytest.approx(min(e[2] for e in per["entropy"][l, h]))
            mx = [e.value for e in f.examples("max", l, h)]
            assert mx == sorted(mx, reverse=True)
            assert mx[0] == pytest.approx(max(e[2] for e in per["max"][l, h]))


# ---------------------------------------------------------------- (5) corpus helpers
def test_split_sentences():
    assert split_sentences("Hello world. How are you?\nFine!  Pi is 3.14 today") == [
        "Hello world.", "How are you?", "Fine!", "Pi is 3.14 today"]
    assert split_sentences("我很好。你呢？今天下雨；明天晴，对吧") == ["我很好。", "你呢？", "今天下雨；", "明天晴，对吧"]
    assert split_sentences("one; two\n\n\nthree\r\nfour") == ["one;", "two", "three", "four"]
    assert split_sentences("") == [] and split_sentences(None) == [] and split_sentences(" \n \n") == []
    long = " ".join(f"word{k}" for k in range(100))
    pieces = split_sentences(long, max_chars=50)
    assert all(0 < len(p) <= 50 for p in pieces) and " ".join(pieces) == long  # cut at spaces, nothing lost
    assert all(not p.startswith(" ") and not p.endswith(" ") for p in pieces)
    assert split_sentences("x" * 130, max_chars=50) == ["x" * 50, "x" * 50, "x" * 30]  # no spaces: every 50
    assert split_sentences("汉" * 120, max_chars=50) == ["汉" * 50, "汉" * 50, "汉" * 20]
    assert split_sentences("A. " * 1000, max_sentences=7) == ["A."] * 7
    assert len(split_sentences("word " * 5000, max_sentences=3, max_chars=20)) == 3


def test_repeated_ids():
    pool = np.arange(1000, 1100)
    r = repeated_ids(pool, seq_len=12, n_seqs=5, seed=3)
    assert r.shape == (5, 24) and r.dtype == np.int64
    for row in r:
        assert len(set(row[:12].tolist())) == 12  # distinct within r: the second copy is the only repeat
        assert (row[:12] == row[12:]).all() and set(row.tolist()) <= set(pool.tolist())
    np.testing.assert_array_equal(r, repeated_ids(pool, seq_len=12, n_seqs=5, seed=3))
    assert not np.array_equal(r, repeated_ids(pool, seq_len=12, n_seqs=5, seed=4))
    se = repeated_ids(pool, seq_len=12, n_seqs=5, seed=3, start=1, end=2)
    assert se.shape == (5, 26) and (se[:, 0] == 1).all() and (se[:, -1] == 2).all()
    np.testing.assert_array_equal(se[:, 1:-1], r)
    assert repeated_ids(pool, seq_len=3, n_seqs=2, start=7).shape == (2, 7)
    assert repeated_ids(np.arange(5), seq_len=5, n_seqs=1).shape == (1, 10)  # the whole pool, once each
    for kwargs in (dict(seq_len=1), dict(n_seqs=0), dict(seq_len=101)):
        with pytest.raises(ValueError):
            repeated_ids(pool, **kwargs)


def test_unreadable_sentences_are_skipped():
    assert not unreadable(["[UNK]", "[UNK]", "a", "b", "c", "d", "e", "f"], "[UNK]")  # 2 / 8 = the limit
    assert unreadable(["[UNK]", "[UNK]", "[UNK]", "b", "c", "d", "e", "f"], "[UNK]")
    assert not unreadable(["[UNK]"] * 4, None) and not unreadable([], "[UNK]")
    rng = np.random.default_rng(12)

    def attend_text(text):
        if text == "refused":
            raise InputError("attention.empty_text", "refused")
        tokens = text.split()
        return tokens, random_weights(rng, 1, 2, len(tokens))

    corpus = Corpus([("en", "a b c"), ("zh", "[UNK] [UNK] x"), ("own", "refused"), ("en", "d e f g"),
                     ("zh", "单")], np.array([[5, 6, 5, 6]]))
    box = []
    steps = list(run_pass(corpus, 1, 2, attend_text, None, box.append, unk="[UNK]"))
    assert steps[-1] == Progress(5, 5)  # no attend_ids: the repeats are not read
    f = box[0]
    assert f.skipped == {"zh": 1, "own": 1}
    assert [s.tokens for s in f.sentences] == [["a", "b", "c"], ["d", "e", "f", "g"]]  # "单": one token, no query
    assert np.isnan(f.scores["induction"]).all()


def test_sources_give_the_bundled_and_own_corpora(minilm, tiny_gpt2):
    src = finder_sources.of_numpy_bert(minilm)
    c = finder_sources.own_corpus(src, "First one. Second one!\n第三句。")
    assert c.sentences == [("own", "First one."), ("own", "Second one!"), ("own", "第三句。")]
    assert c.repeats.shape == (4, 82) and (c.repeats[:, 0] == src.start).all() and (c.repeats[:, -1] == src.end).all()
    np.testing.assert_array_equal(c.repeats, src.repeats())  # seeded: every visitor reads the same sequences
    b = finder_sources.bundled_corpus(src)
    assert {lang for lang, _ in b.sentences} == {"en", "zh"} and len(b.sentences) >= 20
    d = finder_sources.of_loaded(tiny_gpt2)
    assert d.start is None and d.end is None  # the MiniLM tokenizer has no bos/eos: r r
    assert d.repeats().shape == (4, 80)


# ---------------------------------------------------------------- FinderRuns
def fake_work(total=3, release: threading.Event | None = None, fail=False, finish=True):
    def work(finished):
        for k in range(1, total + 1):
            if release is not None:
                release.wait(10)
            if fail and k == 2:
                raise RuntimeError("boom")
            yield Progress(k, total)
        if finish:
            acc = CorpusPass(1, 1)
            acc.add(np.array([[[[1, 0], [0.5, 0.5]]]], np.float32), ["a", "b"], "en")
            finished(acc.result())
    return work


def test_finder_runs_share_a_run_and_finish():
    runs = FinderRuns(max_running=1, max_results=4)
    release = threading.Event()
    r1 = runs.start("m|bundled", fake_work(release=release))
    assert runs.start("m|bundled", fake_work()) is r1  # the same key: the same run, finished or not
    assert runs.get("m|bundled") is r1 and runs.get("other") is None
    assert r1.state in ("waiting", "running") and r1.result is None
    release.set()
    assert runs.wait("m|bundled", timeout=10) is r1
    assert r1.state == "done" and (r1.done, r1.total) == (3, 3) and r1.fraction == 1.0
    assert isinstance(r1.result, HeadFinder) and r1.result.scores["previous"][0, 0] == pytest.approx(0.5)
    assert runs.start("m|bundled", fake_work()) is r1  # done: kept, not run again
    r2 = runs.start("m|own", fake_work())
    assert r2 is not r1 and runs.wait("m|own", 10).state == "done"


def test_finder_runs_refuse_a_pass_past_the_waiting_line():
    from viz_core.errors import InputError
    runs = FinderRuns(max_running=1, max_waiting=1)
    release = threading.Event()
    running = runs.start("a", fake_work(release=release))
    waiting = runs.start("b", fake_work())
    with pytest.raises(InputError) as refused:
        runs.start("c", fake_work())
    assert refused.value.code == "head_finder.busy" and refused.value.params == {"n": 2}
    assert runs.get("c") is None
    assert runs.start("a", fake_work()) is running  # asking for a pass already under way is never refused
    release.set()
    assert runs.wait("a", 10).state == "done" and runs.wait("b", 10).state == "done"
    assert runs.wait("c", 0) is None and runs.start("c", fake_work()) is not None  # room again
    assert runs.wait("c", 10).state == "done" and waiting.state == "done"


def test_finder_runs_keep_at_most_max_results():
    runs = FinderRuns(max_results=2)
    for key in ("a", "b"):
        runs.start(key, fake_work())
        runs.wait(key, 10)
    runs.start("c", fake_work())
    runs.wait("c", 10)
    assert runs.get("a") is None  # the least recently asked for went first
    assert runs.get("b") is not None and runs.get("c") is not None
    runs.get("b")  # now "c" is the least recently asked for
    runs.start("d", fake_work())
    runs.wait("d", 10)
    kept = [k for k in "abcd" if runs._runs.get(k) is not None]
    assert kept == ["b", "d"] and len(runs._runs) <= 2


def test_a_failing_run_says_so_and_can_start_again(caplog):
    runs = FinderRuns()
    r = runs.start("bad", fake_work(fail=True))
    runs.wait("bad", 10)
    assert r.state == "failed" and re.fullmatch(r"[0-9a-f]{8}", r.error_id) and r.result is None
    assert r.error_id in caplog.text and "boom" in caplog.text
    again = runs.start("bad", fake_work())  # a failed run is replaced
    assert again is not r and runs.wait("bad", 10).state == "done" and again.error_id == ""
    r3 = runs.start("no result", fake_work(finish=False))  # ended without handing over a result
    runs.wait("no result", 10)
    assert r3.state == "failed"


def test_an_examples_key_is_one_the_score_reads_even_at_zero_weight():
    """A head that puts no weight on the earlier copy: its example's key is still that copy (not key 0)."""
    a = np.zeros((1, 1, 4, 4), np.float32)
    a[0, 0, :, 0] = 1.0  # everything on the first token, which is no copy of "b"
    acc = CorpusPass(1, 1)
    acc.add(a, ["a", "b", "c", "b"], "repeat")
    f = acc.result()
    (dup,), (ind,) = f.examples("duplicate", 0, 0), f.examples("induction", 0, 0)
    assert (dup.query, dup.key, dup.value) == (3, 1, 0.0)
    assert (ind.query, ind.key, ind.value) == (3, 2, 0.0)


def test_repeat_copies_are_found_by_id_not_by_label():
    """Two token ids with the same label (a tokenizer's byte pieces can share one) are different tokens: with ids the
    only copies of [s] a b a b are the second a and b; by labels alone, b would also copy a."""
    rng = np.random.default_rng(4)
    a = random_weights(rng, 1, 1, 5, causal=True)
    labels = ["<s>", "x", "x", "x", "x"]
    by_id = CorpusPass(1, 1)
    by_id.add(a, labels, "repeat", ids=[1, 7, 8, 7, 8])
    by_label = CorpusPass(1, 1)
    by_label.add(a, labels, "repeat")
    f = by_id.result()
    assert f.read["duplicate"].queries == 2  # queries 3 and 4
    assert by_label.result().read["duplicate"].queries == 3  # queries 2, 3, 4: the labels collide
    w = a[0, 0].astype(np.float64)
    assert f.scores["duplicate"][0, 0] == pytest.approx((w[3, 1] + w[4, 2]) / 2, rel=1e-6)
    assert f.scores["induction"][0, 0] == pytest.approx((w[3, 2] + w[4, 3]) / 2, rel=1e-6)


def test_previous_token_examples_start_at_query_two():
    """A head that puts everything on the first token has A[1, 0] = 1, which is also its previous token: that is a
    sink, not a previous-token example, so the card's previous-token examples start at query 2."""
    n = 6
    a = np.zeros((1, 1, n, n))
    a[0, 0, :, 0] = 1.0  # a pure sink head
    acc = CorpusPass(1, 1)
    acc.add(a, [f"w{i}" for i in range(n)], "en")
    f = acc.result()
    got = f.examples("previous", 0, 0)
    assert len(got) == n - 2 and all(e.query >= 2 for e in got)
    assert all(e.value == 0.0 for e in got)
    assert f.scores["previous"][0, 0] == pytest.approx(1 / (n - 1))  # the score itself still reads query 1
