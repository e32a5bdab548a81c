"""viz_core.pretrained.attribution: integrated gradients against a plain per-step loop, completeness, and the attention
comparisons against head_analysis on attention_for's weights. Tiny random models (fixtures of tests/pretrained/test_load.py)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.pretrained.test_load import tiny_bert, tiny_gpt2, tiny_t5, tokenizer_dir  # noqa: F401 - shared fixtures
from viz_core.pretrained import head_analysis
from viz_core.pretrained.attribution import token_attribution
from viz_core.errors import InputError
from viz_core.pretrained import attention_for

A, B = "The cat sat on the mat.", "A dog lay on the rug."


def _reference_ig(m, text: str, target_id: int, steps: int) -> np.ndarray:
    """IG of log p(next = target_id) for GPT-2, one forward + backward per step (no batching, no shared code)."""
    enc = m.tokenizer(text, return_tensors="pt")
    emb = m.model.get_input_embeddings()
    x = emb(enc["input_ids"])[0].detach()                         # (N, d)
    special = torch.tensor([i in m.tokenizer.all_special_ids for i in enc["input_ids"][0].tolist()])
    pad = emb.weight[m.tokenizer.pad_token_id].detach() if m.tokenizer.pad_token_id is not None else 0 * x[0]
    base = torch.where(special[:, None], x, pad.expand_as(x))    # [PAD] everywhere but the special tokens
    total = torch.zeros_like(x)
    for k in range(steps):
        point = (base + (k + 0.5) / steps * (x - base)).requires_grad_(True)
        rest = {k: v for k, v in enc.items() if k != "input_ids"}  # the tiny model's BERT tokenizer adds token types
        h = m.model(inputs_embeds=point[None], **rest).last_hidden_state[0, -1]
        f = torch.log_softmax(h @ emb.weight.T, -1)[target_id]
        total += torch.autograd.grad(f, point)[0]
    return ((x - base) * total / steps).sum(-1).numpy()


def test_ig_equals_per_step_reference(tiny_gpt2):
    a = token_attribution(tiny_gpt2, A, steps=8)
    ref = _reference_ig(tiny_gpt2, A, tiny_gpt2.tokenizer.convert_tokens_to_ids(a.target_token), 8)
    np.testing.assert_allclose(a.scores, ref, atol=1e-4, rtol=1e-3)


@pytest.mark.parametrize("fixture, pair, target", [("tiny_bert", B, None), ("tiny_gpt2", None, None),
                                                   ("tiny_t5", None, B)])
def test_chunks_of_path_points_add_up_to_one_batch(fixture, pair, target, request, monkeypatch):
    """Long inputs run the path points in chunks (attribution.CHUNK_BYTES: one batch of 34 points of 500 tokens held
    5.5 GB); one point per chunk gives the batch's numbers."""
    from viz_core.pretrained import attribution
    m = request.getfixturevalue(fixture)
    whole = token_attribution(m, A, pair, steps=8, target=target)
    assert attribution._chunk_points(m, [attribution._embed_inputs(m, e) for e in
                                         attribution.objective(m, A, pair, target).inputs]) >= 10  # one batch here
    monkeypatch.setattr(attribution, "CHUNK_BYTES", 1)           # one path point per forward + backward
    chunked = token_attribution(m, A, pair, steps=8, target=target)
    np.testing.assert_allclose(chunked.scores, whole.scores, atol=1e-5, rtol=1e-4)
    assert chunked.value == pytest.approx(whole.value, abs=1e-5)
    assert chunked.baseline_value == pytest.approx(whole.baseline_value, abs=1e-5)


@pytest.mark.parametrize("fixture, pair, target", [("tiny_bert", B, None), ("tiny_bert", None, None),
                                                   ("tiny_gpt2", None, None), ("tiny_t5", None, B)])
def test_completeness(fixture, pair, target, request):
    """sum_i IG_i = f(x) - f(x') up to the Riemann sum's error, which shrinks as the steps grow."""
    m = request.getfixturevalue(fixture)
    coarse = token_attribution(m, A, pair, steps=4, target=target)
    fine = token_attribution(m, A, pair, steps=128, target=target)
    diff = fine.value - fine.baseline_value
    assert abs(diff) > 1e-6
    assert abs(fine.completeness_gap) <= 0.02 * abs(diff) + 1e-5
    assert abs(fine.completeness_gap) <= abs(coarse.completeness_gap) + 1e-6
    assert fine.value == pytest.approx(coarse.value, abs=1e-5)


def test_pair_tokens_segments_and_specials(tiny_bert):
    a = token_attribution(tiny_bert, A, B, steps=8)
    n_a = len(tiny_bert.tokenizer(A)["input_ids"])
    assert a.metric == "pair_cosine" and len(a.tokens) == len(a.scores) == len(a.attention) == len(a.rollout)
    assert a.tokens[0] == a.tokens[n_a] == "[CLS]" and (a.segments[1:n_a - 1] == 0).all()
    assert (a.segments[n_a + 1:-1] == 1).all() and (a.segments[a.special] == -1).all()
    assert np.all(a.scores[a.special] == 0)  # the baseline keeps special tokens: nothing to attribute to them
    assert a.baseline_value == pytest.approx(1.0, abs=1e-5)  # same length: without their words, A and B are one input


@pytest.mark.parametrize("fixture, rows", [("tiny_bert", "all"), ("tiny_gpt2", "last")])
def test_attention_and_rollout_match_head_analysis(fixture, rows, request):
    m = request.getfixturevalue(fixture)
    a = token_attribution(m, A, steps=4)
    w = attention_for(m, A).weights                               # (L, H, N, N)
    pick = slice(None) if rows == "all" else slice(-1, None)
    np.testing.assert_allclose(a.attention, w[-1].mean(0)[pick].mean(0), atol=1e-5)
    np.testing.assert_allclose(a.rollout, head_analysis.rollout(w)[-1][pick].mean(0), atol=1e-5)
    assert a.attention.sum() == pytest.approx(1, abs=1e-4) and a.rollout.sum() == pytest.approx(1, abs=1e-4)


@pytest.mark.parametrize("kwargs, code", [(dict(steps=0), "importance.bad_steps"),
                                          (dict(steps=10_000), "importance.bad_steps"),
                                          (dict(method="saliency"), "importance.bad_attr_method")])
def test_bad_arguments(tiny_bert, kwargs, code):
    with pytest.raises(InputError) as exc:
        token_attribution(tiny_bert, A, **kwargs)
    assert exc.value.code == code


def test_minilm_pair_completeness():
    from viz_core.pretrained import load_model
    a = token_attribution(load_model(), A, B, steps=32)
    assert abs(a.completeness_gap) < 0.01 * abs(a.value - a.baseline_value)
