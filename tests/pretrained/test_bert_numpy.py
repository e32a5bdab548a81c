"""The packaged MiniLM run in numpy (viz_core.pretrained.bert_numpy) gives what transformers gives: the same tokens, special
and segment masks, truncation and [UNK] counts, and attention weights equal within float32 rounding."""
import threading

import numpy as np
import pytest
import torch

from viz_core import pretrained
from viz_core.pretrained import bert_numpy
from viz_core.errors import InputError

CASES = [
    ("The cat sat on the mat because it was tired.", None),
    ("Hello [SEP] world [CLS] ok", "a second one, here"),     # typed special tokens stay text
    ("猫坐在垫子上。 emoji 🙂 ünïcödé", None),                 # [UNK] counted
    ("word " * 700, None),                                    # truncated at 512
    ("short", "pair " * 600),                                 # longest-first truncation of a pair
]


@pytest.fixture(scope="module")
def models():
    return bert_numpy.load_default(), pretrained.load_model("")


@pytest.mark.parametrize("text, pair", CASES)
def test_same_result_as_transformers(models, text, pair):
    nb, hf = models
    a, b = nb.attention(text, pair), pretrained.attention_for(hf, text, pair)
    assert a.tokens == b.tokens
    np.testing.assert_array_equal(a.special, b.special)
    np.testing.assert_array_equal(a.segments, b.segments)
    for field in ("kind", "n_input_tokens", "truncated", "n_unknown", "n_text_tokens", "unk_token"):
        assert getattr(a, field) == getattr(b, field), field
    assert a.weights.dtype == np.float32 and a.weights.shape == b.weights.shape
    np.testing.assert_allclose(a.weights, b.weights, atol=1e-5, rtol=0)
    np.testing.assert_allclose(a.weights.sum(-1), 1.0, atol=1e-5)


def test_info_matches_the_loaded_model(models):
    nb, hf = models
    for field in ("name", "kind", "n_layers", "n_heads", "max_tokens", "supports_pair"):
        assert getattr(nb.info, field) == getattr(hf, field), field


def test_gelu_and_layer_norm_match_torch():
    x = np.linspace(-6, 6, 2001, dtype=np.float32)
    ref = torch.nn.functional.gelu(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(bert_numpy.gelu(x), ref, rtol=0, atol=1e-6)  # erf to 1.5e-7, then float32
    rng = np.random.default_rng(0)
    h, g, b = rng.normal(size=(5, 8)).astype(np.float32), rng.normal(size=8).astype(np.float32), \
        rng.normal(size=8).astype(np.float32)
    ref = torch.nn.functional.layer_norm(torch.from_numpy(h), (8,), torch.from_numpy(g), torch.from_numpy(b), 1e-12)
    np.testing.assert_allclose(bert_numpy.layer_norm(h, g, b, 1e-12), ref.numpy(), atol=2e-6)


def test_gelu_in_blocks_is_the_same_numbers_and_matches_torch():
    """A batch larger than one block (and not a multiple of it, not contiguous) gives exactly what one pass over the
    whole array gives, and what torch gives."""
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((3, 40, 2 * bert_numpy.ELEMENTWISE_BLOCK // 100 + 7)) * 3).astype(np.float32)
    x = x.transpose(1, 0, 2)  # not contiguous
    assert x.size > 2 * bert_numpy.ELEMENTWISE_BLOCK and x.size % bert_numpy.ELEMENTWISE_BLOCK
    y = bert_numpy.gelu(x)
    assert y.shape == x.shape and y.dtype == np.float32
    np.testing.assert_array_equal(y, bert_numpy._gelu(np.ascontiguousarray(x)))
    ref = torch.nn.functional.gelu(torch.from_numpy(np.ascontiguousarray(x))).numpy()
    np.testing.assert_allclose(y, ref, rtol=0, atol=2e-6)
    pair = bert_numpy.in_blocks(lambda a, b: a * b + 1, x, x[::-1])  # several arrays, block by block
    np.testing.assert_array_equal(pair, x * x[::-1] + 1)


def test_adopted_weights_give_the_same_result(models):
    """After transformers has loaded the model, the numpy path reads its parameters (one copy in memory)."""
    nb = bert_numpy.load_default()
    before = nb.attention("a small test sentence").weights
    arrays = {k: v.detach().numpy() for k, v in models[1].model.state_dict().items()}
    assert nb.adopt(arrays) > 0
    used = [k for k in nb.w if k.endswith((".weight", ".bias")) and not k.startswith("pooler.")]
    assert len(used) == 6 * 16 + 5 and all(nb.w[k] is arrays[k] for k in used)  # every weight of the forward pass
    np.testing.assert_array_equal(nb.attention("a small test sentence").weights, before)


def test_empty_text_is_an_input_error(models):
    with pytest.raises(InputError):
        models[0].attention("   ")


def test_the_page_cache_holds_the_packaged_weights_once():
    """Whichever of the two forms the server makes second, the numpy one then reads the transformers parameters."""
    from app_pages._ui import models as page_models

    nb, hf = page_models.numpy_default(), page_models.default_model()
    name = "encoder.layer.3.attention.self.query.weight"
    assert np.shares_memory(nb.w[name], dict(hf.model.named_parameters())[name].detach().numpy())
    assert page_models.loaded("")


# ---------------------------------------------------------------- head ablation in numpy
ABLATION_CASES = [
    ("The cat sat on the mat.", "A dog lay on the rug."),    # pair: cosine of the two embeddings
    ("The cat sat on the mat because it was tired.", None),  # one text: the turn of its own embedding
    ("猫坐在垫子上。", "The cat sits on the mat."),              # [UNK]s and a pair of different lengths
]


@pytest.mark.parametrize("method", ["zero", "mean"])
@pytest.mark.parametrize("text, pair", ABLATION_CASES)
def test_numpy_ablation_equals_the_torch_ablation(models, text, pair, method):
    """The same growing batch and the same f as viz_core.pretrained.ablation.head_importance, in numpy."""
    from viz_core.pretrained.ablation import head_importance

    nb, hf = models
    got = bert_numpy.NumpyAblation(nb).head_importance(text, pair, method=method)
    ref = head_importance(hf, text, pair, method=method)
    assert (got.metric, got.method, got.part, got.shape) == (ref.metric, ref.method, ref.part, (6, 12))
    assert got.effect.dtype == np.float32 and np.abs(ref.effect).max() > 1e-3  # the reference moves: a real check
    np.testing.assert_allclose(got.baseline, ref.baseline, atol=1e-6)
    np.testing.assert_allclose(got.ablated, ref.ablated, atol=2e-6, rtol=0)
    np.testing.assert_allclose(got.effect, got.ablated - np.float32(got.baseline), atol=1e-7)


def test_numpy_ablation_by_hand_for_one_head(models):
    """Zero-ablating head (2, 5) equals running the numpy model with that head's output set to zero by hand."""
    nb = models[0]
    ab = bert_numpy.NumpyAblation(nb)
    ids = ab.encode("The cat sat on the mat.")
    pooled = ab.pooled(ids, "zero")                          # (1 + 72, d)
    original = nb.w["encoder.layer.2.attention.output.dense.weight"]
    edited = original.copy()
    edited[:, 5 * 32:6 * 32] = 0.0                           # W_O's columns that read head 5: its output times 0
    by_hand = bert_numpy.NumpyAblation(bert_numpy.load_default())
    by_hand.bert.w = {**nb.w, "encoder.layer.2.attention.output.dense.weight": edited}
    np.testing.assert_allclose(pooled[1 + 2 * 12 + 5], by_hand.pooled(ids, "zero")[0], atol=2e-6)
    np.testing.assert_allclose(pooled[0], ab.pooled(ids, "zero")[0], atol=0)  # the intact row is intact


@pytest.mark.parametrize("slots", [2, 5])
def test_heads_split_over_parallel_batches_land_in_the_same_rows(models, monkeypatch, slots):
    """With free cores (ablation_threads) the heads are split into groups whose batches grow in parallel threads: every
    row comes back where the single batch puts it (intact, then layer-major, head-minor), for both methods."""
    ab = bert_numpy.NumpyAblation(models[0])
    ids = ab.encode("The cat sat on the mat because it was tired.")
    monkeypatch.setattr(bert_numpy, "ablation_threads", lambda: 1)
    single = {m: ab.pooled(ids, m) for m in ("zero", "mean")}
    monkeypatch.setattr(bert_numpy, "ablation_threads", lambda: slots)
    for method, want in single.items():
        got = ab.pooled(ids, method)
        assert got.shape == want.shape == (1 + 6 * 12, 384)
        assert np.abs(want[1:] - want[0]).max() > 1e-3  # the rows differ: a row in the wrong place would show
        np.testing.assert_allclose(got, want, atol=2e-6, rtol=0)


def test_ablation_threads_follow_the_cores_blas_leaves_free(monkeypatch):
    monkeypatch.setattr(bert_numpy.os, "cpu_count", lambda: 4)
    for env, want in (("1", 4), ("2", 2), ("8", 1), ("", 1), ("many", 1)):
        monkeypatch.setenv("OPENBLAS_NUM_THREADS", env)
        assert bert_numpy.ablation_threads() == want, env
    monkeypatch.delenv("OPENBLAS_NUM_THREADS")
    assert bert_numpy.ablation_threads() == 1  # unset: OpenBLAS takes every core for one product


def test_long_text_ablates_in_chunks_with_the_same_numbers(models):
    """A text too long for one growing batch runs layer by layer in small batches: equal to the growing batch on a
    short text (both strategies), and to torch on a text over the limit (about 180 tokens)."""
    from viz_core.pretrained.ablation import head_importance

    nb, hf = models
    ab = bert_numpy.NumpyAblation(nb)
    ids = ab.encode("The cat sat on the mat because it was tired.")
    for method in ("zero", "mean"):
        np.testing.assert_allclose(ab._pooled_in_chunks(ids, method), ab.pooled(ids, method), atol=2e-6)
    words = "the quick brown fox jumps over a lazy dog while seven curious cats watch it".split()
    long = " ".join(words[i % len(words)] for i in range(178))
    assert ab.fits(24) and ab.fits(128) and not ab.fits(len(ab.encode(long))) and not ab.fits(512)
    got, ref = ab.head_importance(long, method="mean"), head_importance(hf, long, method="mean")
    assert np.abs(ref.effect).max() > 1e-3
    np.testing.assert_allclose(got.ablated, ref.ablated, atol=2e-6, rtol=0)


def test_numpy_ablation_refuses_bad_input(models):
    ab = bert_numpy.NumpyAblation(models[0])
    with pytest.raises(InputError):
        ab.head_importance("   ")
    with pytest.raises(InputError):
        ab.head_importance("a text", method="halve")


# ---------------------------------------------------------------- Q, K, V and positions in numpy
@pytest.mark.parametrize("text", ["The cat sat on the mat.", "猫坐在垫子上 🙂 [SEP] x", "word " * 600])
def test_qkv_equals_transformers(models, text):
    nb, hf = models
    for layer in (0, 5):
        a, b = nb.qkv(text, layer), pretrained.qkv_for(hf, text, layer)
        assert a.tokens == b.tokens and (a.layer, a.n_layers, a.n_heads) == (b.layer, b.n_layers, b.n_heads)
        for field in ("q", "k", "v", "weights"):
            x, y = getattr(a, field), getattr(b, field)
            assert x.dtype == np.float32 and x.shape == y.shape, field
            # q, k, v of layer 5 grow to |x| ~ 3 after five layers summed in another order (OpenBLAS vs torch's
            # kernels): a 1e-5 relative part on top (one of 196,608 values at 512 tokens was 1.03e-5 off on one CPU)
            rtol = 0 if field == "weights" else 1e-5
            np.testing.assert_allclose(x, y, atol=1e-5, rtol=rtol, err_msg=field)


def test_qkv_refuses_a_layer_it_does_not_have(models):
    with pytest.raises(InputError):
        models[0].qkv("a text", 6)
    with pytest.raises(InputError):
        models[0].qkv("  ", 0)


def test_position_embeddings_equal_transformers(models):
    nb, hf = models
    got = nb.position_embeddings()
    np.testing.assert_array_equal(got, pretrained.position_embeddings(hf))
    got[0, 0] += 1.0  # a copy: the model's weights stay as they are
    assert nb.w["embeddings.position_embeddings.weight"][0, 0] != got[0, 0]


LONG_WORDS = "the quick brown fox jumps over a lazy dog while seven curious cats watch it".split()


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_long_text_batches_side_by_side_land_in_the_same_rows(models, monkeypatch, threads):
    """A long text's knocked batches run ablation_threads() at a time: every row where the single batch puts it,
    for both methods, whatever the number of threads (3 does not divide the batches evenly)."""
    ab = bert_numpy.NumpyAblation(models[0])
    ids = ab.encode("The cat sat on the mat because it was tired.")
    monkeypatch.setattr(bert_numpy.NumpyAblation, "MAX_BYTES", 1)  # one knocked row per thread and batch
    monkeypatch.setattr(bert_numpy, "ablation_threads", lambda: threads)
    for method in ("zero", "mean"):
        want = ab._grown(ab.bert.embed(ids, [0] * len(ids)), np.arange(12), method)  # the single growing batch
        got = ab._pooled_in_chunks(ids, method)
        assert np.abs(want[1:] - want[0]).max() > 1e-3  # the rows differ: a row in the wrong place would show
        np.testing.assert_allclose(got, want, atol=2e-6, rtol=0)


def test_long_text_reports_progress_between_rounds_with_the_model_free(models, monkeypatch):
    """progress(share) comes after each round, rising to 1, while the model's lock is free (another visitor's
    pass can take its turn there); a pair's two texts share the scale (A 0..1/2, B 1/2..1)."""
    ab = bert_numpy.NumpyAblation(models[0])
    long = " ".join(LONG_WORDS[i % len(LONG_WORDS)] for i in range(198))
    monkeypatch.setattr(bert_numpy, "ablation_threads", lambda: 2)
    seen = []

    def progress(share):
        assert not ab.bert._lock.locked()
        seen.append(share)

    ab.head_importance(long, "A short text B.", progress=progress)
    assert len(seen) > 6 and seen == sorted(seen) and seen[-1] == 1.0
    assert 0.5 in seen and sum(s < 0.5 for s in seen) > 4  # A's rounds, then B (one growing batch)


def test_long_text_stops_between_rounds_when_the_visitor_left(models, monkeypatch):
    from viz_core.runtime import cancel

    ab = bert_numpy.NumpyAblation(models[0])
    long = " ".join(LONG_WORDS[i % len(LONG_WORDS)] for i in range(198))
    seen = []

    def leave(share):
        seen.append(share)
        cancel.request(threading.get_ident())

    try:
        with pytest.raises(cancel.Cancelled):
            ab.head_importance(long, progress=leave)
    finally:
        cancel.clear()
    assert len(seen) == 1  # the worker threads checked the page thread's mark
