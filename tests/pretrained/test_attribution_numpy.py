"""Integrated gradients of the packaged MiniLM in numpy (viz_core.pretrained.attribution_numpy) give what the torch
path gives (viz_core.pretrained.attribution.token_attribution, autograd through transformers), and its hand-written
backward pass is the derivative of its forward pass (central differences in float64, no torch involved)."""
import numpy as np
import pytest
import torch

from viz_core import pretrained
from viz_core.errors import InputError
from viz_core.pretrained import attribution_numpy, bert_numpy
from viz_core.pretrained.attribution import token_attribution

CASES = [
    ("The cat sat on the mat because it was tired.", None),    # one text: projection on its own direction
    ("A dog lay on the rug.", "The cat sat on the mat."),       # pair: cosine of the two embeddings
    ("猫坐在垫子上 🙂 typed [SEP] stays text", "short"),         # [UNK] kept in the baseline, pair of other lengths
]


@pytest.fixture(scope="module")
def models():
    nb = bert_numpy.load_default()
    return attribution_numpy.NumpyAttribution(nb), pretrained.load_model("")


@pytest.mark.parametrize("text, pair", CASES)
def test_same_attribution_as_torch(models, text, pair):
    na, hf = models
    got, ref = na.token_attribution(text, pair, steps=8), token_attribution(hf, text, pair, steps=8)
    assert got.tokens == ref.tokens and got.lengths == ref.lengths
    assert (got.metric, got.method, got.steps, got.target_token) == (ref.metric, ref.method, 8, "")
    np.testing.assert_array_equal(got.special, ref.special)
    np.testing.assert_array_equal(got.segments, ref.segments)
    assert got.scores.dtype == np.float32 and np.abs(ref.scores).max() > 1e-2  # the reference moves: a real check
    np.testing.assert_allclose(got.scores, ref.scores, atol=2e-6 * max(1.0, np.abs(ref.scores).max()), rtol=0)
    np.testing.assert_allclose([got.value, got.baseline_value], [ref.value, ref.baseline_value], atol=2e-6)
    np.testing.assert_allclose(got.attention, ref.attention, atol=1e-6)
    np.testing.assert_allclose(got.rollout, ref.rollout, atol=1e-6)
    assert got.completeness_gap == pytest.approx(ref.completeness_gap, abs=1e-5)


def test_unknown_token_is_kept_in_the_baseline(models):
    """As the torch path (the tokenizer's special ids), [UNK] counts as special: x' = x there."""
    na, _ = models
    a = na.token_attribution("🙂 ok", steps=4)
    assert "[UNK]" in a.tokens
    assert a.special[a.tokens.index("[UNK]")] and a.scores[a.tokens.index("[UNK]")] == 0.0


def test_chunks_add_up_to_one_batch(models, monkeypatch):
    """Path points run in chunks under CHUNK_BYTES: one point per chunk gives the numbers of one batch."""
    na, _ = models
    whole = na.token_attribution("The cat sat on the mat.", "A dog.", steps=6)
    monkeypatch.setattr(attribution_numpy, "CHUNK_BYTES", 1)
    assert na._chunks(8) == (1, attribution_numpy.KEEP_INPUTS)  # one point at a time, each layer run again
    one_by_one = na.token_attribution("The cat sat on the mat.", "A dog.", steps=6)
    np.testing.assert_allclose(one_by_one.scores, whole.scores, atol=1e-6)  # float32 sums of other batch sizes
    assert one_by_one.value == pytest.approx(whole.value, abs=1e-6)


def test_chunk_size_bounds_long_inputs(models):
    na, _ = models
    rows, keep = zip(*(na._chunks(n) for n in (8, 24, 128, 300, 512)))
    assert rows == tuple(sorted(rows, reverse=True)) and rows[-2:] == (1, 1) and rows[1] >= 17  # a sentence: 2 batches
    assert keep == ("all", "all", "all", "no weights", "inputs")  # long inputs keep less, the longest their inputs


@pytest.mark.parametrize("pair", [None, "Another, longer sentence here."])
def test_backward_is_the_derivative_of_forward(pair):
    """df/dx from _backward equals central differences of f in float64 at random coordinates of the input."""
    nb = bert_numpy.load_default()
    nb.w = {k: v.astype(np.float64) for k, v in nb.w.items()}
    na = attribution_numpy.NumpyAttribution(nb)
    texts = ["The cat sat."] + ([pair] if pair else [])
    words = [nb.w["embeddings.word_embeddings.weight"][nb.encode_alone(t).ids] for t in texts]  # each (N, d)
    reference = None
    if pair is None:
        e0 = na._forward(words[0][None])[0].mean(1)[0]
        reference = e0 / np.linalg.norm(e0)

    def f(xs):
        return attribution_numpy._score([na._forward(x[None]) for x in xs], reference)[0][0]

    outs = [na._forward(x[None]) for x in words]
    _, grads_out = attribution_numpy._score(outs, reference)
    grads = [na._backward(cache, g.astype(np.float64))[0] for (_, cache), g in zip(outs, grads_out)]
    rng = np.random.default_rng(0)
    eps = 1e-5
    for t, x in enumerate(words):
        for i, j in zip(rng.integers(0, x.shape[0], 4), rng.integers(0, x.shape[1], 4)):
            up = [w.copy() for w in words]
            down = [w.copy() for w in words]
            up[t][i, j] += eps
            down[t][i, j] -= eps
            numeric = (f(up) - f(down)) / (2 * eps)
            assert grads[t][i, j] == pytest.approx(numeric, rel=1e-4, abs=1e-8), (t, i, j)


def test_layer_norm_backward_matches_autograd():
    rng = np.random.default_rng(1)
    x, g, gamma = (rng.normal(size=s) for s in ((3, 5, 8), (3, 5, 8), (8,)))
    y, saved = attribution_numpy._layer_norm(x, gamma, np.zeros(8), 1e-12)
    xt = torch.tensor(x, requires_grad=True)
    yt = torch.nn.functional.layer_norm(xt, (8,), torch.tensor(gamma), None, 1e-12)
    yt.backward(torch.tensor(g))
    np.testing.assert_allclose(y, yt.detach().numpy(), atol=1e-12)
    np.testing.assert_allclose(attribution_numpy._layer_norm_backward(g, saved, gamma), xt.grad.numpy(), atol=1e-10)


@pytest.mark.parametrize("kwargs", [{"steps": 0}, {"steps": 257}, {"steps": True}, {"method": "saliency"}])
def test_bad_settings_are_input_errors(models, kwargs):
    with pytest.raises(InputError):
        models[0].token_attribution("a text", **kwargs)


def test_empty_text_is_an_input_error(models):
    with pytest.raises(InputError):
        models[0].token_attribution("   ")
    with pytest.raises(InputError):
        models[0].token_attribution(" ", "a second text")
    assert models[0].token_attribution("ok", "\t", steps=2).lengths == (3,)  # a blank text B is no pair


@pytest.mark.parametrize("threads", [2, 3])
def test_path_points_side_by_side_add_up_to_one_thread(models, monkeypatch, threads):
    """Chunks of path points run ablation_threads() at a time under the model's lock; the sums, f(x) and f(x') are
    those of one thread, and progress rises to 1 after each round with the lock free."""
    na, _ = models
    monkeypatch.setattr(attribution_numpy, "CHUNK_BYTES", 1)  # one point per chunk: 8 chunks
    monkeypatch.setattr(attribution_numpy, "ablation_threads", lambda: 1)
    one = na.token_attribution("The cat sat on the mat.", "A dog.", steps=8)
    monkeypatch.setattr(attribution_numpy, "ablation_threads", lambda: threads)
    seen = []

    def progress(share):
        assert not na.bert._lock.locked()
        seen.append(share)

    many = na.token_attribution("The cat sat on the mat.", "A dog.", steps=8, progress=progress)
    np.testing.assert_allclose(many.scores, one.scores, atol=1e-7, rtol=0)
    assert (many.value, many.baseline_value) == (one.value, one.baseline_value)
    assert len(seen) == -(-8 // threads) and seen == sorted(seen) and seen[-1] == 1.0


@pytest.mark.parametrize("keep", [attribution_numpy.KEEP_NO_WEIGHTS, attribution_numpy.KEEP_INPUTS])
def test_what_a_long_input_keeps_does_not_change_the_numbers(models, monkeypatch, keep):
    """Without the attention weights (computed again from q and k) or with only each layer's input (the layer run
    again), the gradients are those of a pass that kept everything."""
    na, _ = models
    monkeypatch.setattr(attribution_numpy, "ablation_threads", lambda: 1)
    whole = na.token_attribution("The cat sat on the mat.", "A dog.", steps=6)
    monkeypatch.setattr(na, "_chunks", lambda n: (1, keep))
    kept_less = na.token_attribution("The cat sat on the mat.", "A dog.", steps=6)
    assert np.abs(whole.scores).max() > 1e-2
    np.testing.assert_allclose(kept_less.scores, whole.scores, atol=1e-6, rtol=0)


def test_a_round_takes_only_the_cores_free_now(models, monkeypatch):
    """bert_numpy.cores_share: the cores a computation may use are asked again before each round. Two cores, one
    taken by another visitor's pass after the first round: the other 6 chunks run one at a time (7 rounds, not 4),
    with the same numbers."""
    na, _ = models
    monkeypatch.setattr(attribution_numpy, "CHUNK_BYTES", 1)  # 8 chunks of one point
    monkeypatch.setattr(bert_numpy.os, "cpu_count", lambda: 2)
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    free, seen = [2], []

    def progress(share):
        seen.append(share)
        free[0] = 1

    with bert_numpy.cores_share(lambda: free[0]):
        assert attribution_numpy.ablation_threads() == 2
        got = na.token_attribution("The cat sat on the mat.", "A dog.", steps=8, progress=progress)
    assert len(seen) == 7 and seen[0] == 2 / 8 and seen[-1] == 1.0
    assert attribution_numpy.ablation_threads() == 2  # the share ends with the block
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")
    want = na.token_attribution("The cat sat on the mat.", "A dog.", steps=8)  # one thread
    np.testing.assert_allclose(got.scores, want.scores, atol=1e-7, rtol=0)
