"""viz_core.pretrained.heads on the real packaged decoders (Gemma 3 270M, SmolLM2 135M when installed): induction
heads exist and score high, the scores equal an independent computation from the model's own attention tensors, the
logit lens puts " Paris" in the top 5; and on a tiny random Llama built from a config (shape, range, no download).
Each real model is loaded once per module; the checks are few and short."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from viz_core.pretrained import heads

pytestmark = pytest.mark.slow

SEQ, N_SEQS = 24, 2  # enough for the best heads to stand out, short on 2 cores




@pytest.fixture(scope="module")
def gemma_scores(gemma):
    return heads.head_scores(gemma, SEQ, N_SEQS, seed=0)


def _state(m) -> dict:
    """What must not change: every parameter's values and the model's attributes that a careless call might set."""
    return {"params": {k: v.clone() for k, v in m.model.state_dict().items() if v.numel() < 2_000_000},
            "hooks": sum(len(mod._forward_hooks) + len(mod._forward_pre_hooks) for mod in m.model.modules()),
            "attn": m.model.config._attn_implementation, "output_attentions": m.model.config.output_attentions}


def test_gemma_has_a_strong_induction_head_and_the_model_is_untouched(gemma, gemma_scores):
    s = gemma_scores
    L, H = gemma.n_layers, gemma.n_heads
    assert s.induction.shape == s.previous.shape == (L, H) and s.sink.shape == (L,)
    assert s.induction.dtype == np.float32 and s.n_seqs == N_SEQS and s.n_tokens == N_SEQS * (2 * SEQ + 1)
    assert s.induction.max() > 0.5 and s.previous.max() > 0.5
    assert 0 <= s.induction.min() and s.induction.max() <= 1 and 0 <= s.sink.min() and s.sink.max() <= 1
    (layer, _, _), = heads.top_heads(s.induction, 1)
    assert layer > 0  # an induction head needs a previous-token head in an earlier layer
    before = _state(gemma)
    heads.head_scores(gemma, 4, 1, seed=1)
    after = _state(gemma)
    assert before["hooks"] == after["hooks"] and before["attn"] == after["attn"]
    assert before["output_attentions"] == after["output_attentions"]
    assert all(torch.equal(v, after["params"][k]) for k, v in before["params"].items())


def test_induction_score_equals_the_raw_attention_tensors(gemma, gemma_scores):
    """One sequence through the model directly (output_attentions=True), the diagonal read by hand."""
    ids = heads.repeated_random_ids(gemma, SEQ, N_SEQS, seed=0)  # the same sequences head_scores read
    assert ids[0, 0] == gemma.tokenizer.bos_token_id and (ids[:, 1:SEQ + 1] == ids[:, SEQ + 1:]).all()
    special = set(gemma.tokenizer.all_special_ids) | set(gemma.tokenizer.added_tokens_decoder)
    assert not special & set(ids[:, 1:].ravel().tolist())
    per_seq = []
    for row in ids:
        with torch.inference_mode():
            att = gemma.model(input_ids=torch.tensor(row[None]), output_attentions=True).attentions
        a = torch.stack(att)[:, 0].double()  # (L, H, N, N)
        q = torch.arange(SEQ + 1, 2 * SEQ + 1)  # second copy
        per_seq.append(a[..., q, q - SEQ + 1].mean(-1).numpy())  # (L, H)
        prev = a[..., torch.arange(1, 2 * SEQ + 1), torch.arange(0, 2 * SEQ)].mean(-1).numpy()
        sink = a[..., 1:, 0].mean(-1).mean(-1).numpy()  # (L,)
    np.testing.assert_allclose(gemma_scores.induction, np.mean(per_seq, 0), atol=2e-5)
    last = heads.head_scores(gemma, SEQ, 1, seed=0)  # the first sequence alone is the same first row
    np.testing.assert_allclose(last.induction, per_seq[0], atol=2e-5)
    single = heads.attention_of_ids(gemma, ids[-1:])[0]  # the last row alone
    np.testing.assert_allclose(heads.previous_from_weights(single[None]), prev, atol=2e-5)
    np.testing.assert_allclose(heads.sink_from_weights(single[None]), sink, atol=2e-5)


def test_previous_token_score_of_a_text_is_the_mean_subdiagonal(gemma):
    from viz_core.pretrained import attention_for
    text = "The cat sat on the mat, and the cat sat on the mat again."
    w = attention_for(gemma, text).weights  # (L, H, N, N)
    expected = np.stack([[np.mean([w[layer, h, i, i - 1] for i in range(1, w.shape[-1])])
                          for h in range(w.shape[1])] for layer in range(w.shape[0])])
    np.testing.assert_allclose(heads.previous_token_scores(gemma, text), expected, atol=1e-6)


def test_paris_is_in_the_top5_of_the_last_row(gemma):
    s = heads.answer_settling(gemma)
    assert s.answer.strip("▁Ġ ") == "Paris" and s.rank.shape == (gemma.n_layers + 1,)
    assert s.rank[-1] < 5 and s.top5_from is not None and s.top5_from <= gemma.n_layers
    assert s.top5_from > 0 and s.rank[0] > 100  # the embeddings alone do not know it
    assert (s.rank[s.top5_from:] < 5).all() and s.prob[-1] > 0.01


def test_smollm2_has_a_strong_induction_head(smollm2):
    ind = heads.induction_scores(smollm2, SEQ, 1, seed=0)
    assert ind.shape == (smollm2.n_layers, smollm2.n_heads) and ind.max() > 0.5


# ---------------------------------------------------------------- a tiny random Llama (no download)
@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from transformers import LlamaConfig, LlamaForCausalLM

    from tests.pretrained.tiny_models import save_with_default_tokenizer
    from viz_core.pretrained import load_model
    from viz_core.pretrained.policy import ModelPolicy
    torch.manual_seed(0)
    causal = LlamaForCausalLM(LlamaConfig(vocab_size=30522, hidden_size=32, intermediate_size=48, num_hidden_layers=3,
                                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128))
    folder = save_with_default_tokenizer({"llama": causal}, tmp_path_factory.mktemp)["llama"]
    return load_model(folder, policy=ModelPolicy(allow_local=True))


@pytest.mark.usefixtures("one_torch_thread")
def test_tiny_llama_scores_have_the_model_shape_and_lie_in_0_1(tiny):
    s = heads.head_scores(tiny, seq_len=6, n_seqs=3, seed=2)
    assert s.induction.shape == s.previous.shape == (3, 4) and s.sink.shape == (3,)
    for a in (s.induction, s.previous, s.sink):
        assert a.dtype == np.float32 and np.all(a >= 0) and np.all(a <= 1)
    np.testing.assert_array_equal(heads.induction_scores(tiny, 6, 3, seed=2), s.induction)  # seeded: repeatable
    ids = heads.repeated_random_ids(tiny, 6, 3, seed=2)
    assert heads.start_id(tiny.tokenizer) is None  # MiniLM's WordPiece has no bos / eos: r + r alone (2T)
    assert ids.shape == (3, 12) and not set(tiny.tokenizer.all_special_ids) & set(ids.ravel().tolist())
    assert [(ly, h) for ly, h, _ in heads.top_heads(s.induction, 12)] != []
    with pytest.raises(ValueError):
        heads.repeated_random_ids(tiny, 1, 1)


def test_scores_from_made_up_weights():
    """A perfect induction head, a perfect previous-token head and a pure sink, written by hand."""
    T = 5
    n = 2 * T + 1
    ind = np.zeros((n, n))
    ind[:, 0] = 1.0
    for i in range(T + 1, 2 * T + 1):
        ind[i] = 0
        ind[i, i - T + 1] = 1.0
    prev = np.eye(n, k=-1)
    prev[0, 0] = 1.0
    sink = np.zeros((n, n))
    sink[:, 0] = 1.0
    w = np.stack([ind, prev, sink])[None, None]  # (B 1, L 1, H 3, N, N)
    np.testing.assert_allclose(heads.induction_from_weights(w, T)[0], [1, 0, 0])
    # previous (queries 1..2T): the induction head's only A[i, i-1] is A[1, 0]; the sink's too
    np.testing.assert_allclose(heads.previous_from_weights(w)[0], [1 / (2 * T), 1, 1 / (2 * T)], atol=1e-6)
    # first-token share (queries 1..2T): the induction head's first copy (T of 2T), A[1, 0] of the previous-token head
    np.testing.assert_allclose(heads.sink_from_weights(w), [(0.5 + 1 / (2 * T) + 1) / 3], atol=1e-6)
