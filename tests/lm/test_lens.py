"""viz_core.lm.lens: the logit lens of our own decoder against its own logits and a readout computed by hand (tiny
untrained models and the shipped checkpoints), the induction model's word labels, and architecture_of."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import viz_core
from viz_core.errors import InputError
from viz_core.lm import DecoderLM, LMConfig
from viz_core.lm.lens import architecture_of, logit_lens, residual_stream
from viz_core.lm.training import LanguageModel, LMTrainConfig, Tokenizer, load_lm

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # small models: one torch thread

REPEAT = "The cat sat on the mat and then the cat sat on the mat again ."


def tiny_lm(task: str, n_kv_heads=None, d_ff=32, seed=0) -> LanguageModel:
    """An untrained 3-block decoder: induction over 20 symbols, or chars over "abc ", with random LayerNorms."""
    torch.manual_seed(seed)
    itos = [str(i) for i in range(20)] if task == "induction" else list("abc ")
    model = DecoderLM(LMConfig(vocab=len(itos), d_model=32, n_heads=4, n_kv_heads=n_kv_heads, n_layers=3,
                               d_ff=d_ff, max_len=16))
    with torch.no_grad():  # LayerNorms away from their identity start, so a missing ln_f shows
        for name, p in model.named_parameters():
            if "ln" in name:
                p.uniform_(0.5, 1.5) if name.endswith("weight") else p.uniform_(-0.5, 0.5)
    return LanguageModel(model, Tokenizer("ids" if task == "induction" else "chars", itos), LMTrainConfig(task=task))


def _softmax(logits: np.ndarray) -> np.ndarray:
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _assert_row_is(lens, row: int, logits: np.ndarray, atol: float = 1e-6) -> None:
    """Row `row` of the lens equals softmax(logits) (N, V): top-k, the actual next token's probability and rank."""
    probs = _softmax(logits.astype(np.float64))
    n, k = logits.shape[0], lens.k
    top = np.argsort(-logits, axis=-1, kind="stable")[:, :k]  # (N, k)
    np.testing.assert_array_equal(lens.top_ids[row], top)
    np.testing.assert_allclose(lens.top_probs[row], np.take_along_axis(probs, top, -1), atol=atol)
    nxt = lens.ids[1:]
    np.testing.assert_allclose(lens.next_prob[row], probs[np.arange(n - 1), nxt], atol=atol)
    chosen = logits[np.arange(n - 1), nxt]
    np.testing.assert_array_equal(lens.next_rank[row], (logits[:-1] > chosen[:, None]).sum(-1))
    np.testing.assert_allclose(lens.entropy[row], -(probs * np.log2(probs)).sum(-1), atol=1e-4)


@pytest.mark.parametrize("task, text, kv", [("chars", "abc cab ba", None), ("induction", "3 1 4 1 5 9 2 6 5 3", 2),
                                            ("induction", "3 1 4 1 5 9 2 6 5 3", 1)])
def test_rows_of_a_tiny_model(task, text, kv):
    lm = tiny_lm(task, n_kv_heads=kv)
    lens = logit_lens(lm, text, k=3)
    ids, labels = lm.tokenize(text)
    assert lens.n_rows == 4 and lens.n_blocks == 3 and lens.top_ids.shape == (4, len(ids), 3)
    assert lens.tokens == labels and lens.ids.tolist() == ids and not lens.truncated
    _assert_row_is(lens, 3, lm.logits(text))  # the last row is the model's own output
    model = lm.model
    with torch.no_grad():  # row 0 and row 2 by hand: the embeddings, and block 1's output caught by a hook
        x0 = model.tok(torch.tensor(ids)) + model.pos(torch.arange(len(ids)))  # (N, d_model)
        _assert_row_is(lens, 0, model.out(model.ln_f(x0)).numpy())
        caught = []
        hook = model.blocks[1].register_forward_hook(lambda _m, _i, out: caught.append(out[0]))
        try:
            model(torch.tensor([ids]))
        finally:
            hook.remove()
        _assert_row_is(lens, 2, model.out(model.ln_f(caught[0])).numpy())
    assert lens.top_tokens[1].ravel().tolist() == lm.tokenizer.labels(lens.top_ids[1].ravel())


def test_residual_stream_ends_where_the_model_does():
    lm = tiny_lm("chars")
    ids = lm.encode("abba c")
    rows = residual_stream(lm, ids)
    assert len(rows) == 4 and all(r.shape == (6, 32) for r in rows)
    with torch.no_grad():
        np.testing.assert_allclose(lm.model.out(lm.model.ln_f(rows[-1])).numpy(), lm.logits("abba c"), atol=0)


def test_too_long_text_is_refused():
    with pytest.raises(InputError) as err:
        logit_lens(tiny_lm("chars"), "ab" * 9)  # 18 tokens, max_len 16
    assert err.value.code == "lm.too_long"


def test_induction_words_label_the_predictions():
    """Typed words: a predicted symbol reads as the word it stood for in this text (its first spelling), any other
    symbol as its number."""
    lm = tiny_lm("induction")
    text = "The dog saw the cat and the dog ran"
    lens = logit_lens(lm, text, k=20)  # every symbol is in the top 20
    ids, labels = lm.tokenize(text)
    word_of = {}
    for i, w in zip(ids, labels):
        word_of.setdefault(i, w)
    expected = [word_of.get(int(i), str(int(i))) for i in lens.top_ids.ravel()]
    assert lens.top_tokens.ravel().tolist() == expected
    assert set(word_of.values()) <= set(lens.top_tokens[0, 0]) and "the" not in lens.top_tokens  # "The" first
    assert lens.next_tokens() == ["dog", "saw", "The", "cat", "and", "The", "dog", "ran"]
    numbers = logit_lens(lm, "3 1 4 1 5", k=20)
    assert sorted(numbers.top_tokens[0, 0].tolist(), key=int) == [str(i) for i in range(20)]


def test_architecture_of():
    gqa = architecture_of(LMConfig(vocab=10, d_model=32, n_heads=4, n_kv_heads=2))
    assert (gqa.family, gqa.variant, gqa.groups(), gqa.positions, gqa.norm, gqa.norm_place) == (
        "lm", "gqa", [[0, 1], [2, 3]], "learned", "layernorm", "pre")
    assert architecture_of(LMConfig()).variant == "mha" and architecture_of(LMConfig(n_kv_heads=1)).variant == "mqa"


# ---------------------------------------------------------------- the shipped checkpoints
@pytest.fixture(scope="module")
def induction():
    return load_lm(viz_core.CHECKPOINTS_DIR / "lm_induction")


@pytest.fixture(scope="module")
def chars():
    return load_lm(viz_core.CHECKPOINTS_DIR / "lm_chars")


def test_shipped_induction_model_copies_the_next_word(induction):
    lens = logit_lens(induction, REPEAT)
    assert lens.n_rows == 3
    _assert_row_is(lens, 2, induction.logits(REPEAT), atol=1e-5)
    # in the second copy ("the cat sat on the mat") the model reads the next word off the first copy
    assert lens.top_tokens[-1, 9:13, 0].tolist() == ["sat", "on", "The", "mat"]
    assert lens.next_rank[-1, 9:13].tolist() == [0, 0, 0, 0]
    assert np.all(lens.next_prob[-1, 9:13] > np.maximum(lens.next_prob[:2, 9:13].max(0), 1 / 64))  # after block 1
    assert np.all(lens.first_top1[9:13] == 2)


def test_shipped_character_model(chars):
    text = "The cat sat on the mat."
    lens = logit_lens(chars, text)
    assert lens.n_rows == 5
    _assert_row_is(lens, 4, chars.logits(text), atol=1e-5)
    assert lens.tokens[3] == "␣" and lens.top_tokens[-1, 1, 0] == "e"  # "Th" -> "e"
    assert lens.top_tokens[-1].ravel().tolist() == chars.tokenizer.labels(lens.top_ids[-1].ravel())
    assert lens.next_prob[-1].mean() > 0.4 > lens.next_prob[0].mean()  # the blocks make the prediction
