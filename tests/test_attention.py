"""viz_core.attention and viz_core.masks against torch.nn.functional.scaled_dot_product_attention."""
import math

import pytest
import torch
import torch.nn.functional as F

from viz_core.attention import MultiHeadAttention, scaled_dot_product_attention
from viz_core.masks import causal_mask, causal_padding_mask, cross_padding_mask, padding_mask

torch.manual_seed(0)


def _qkv(b=2, h=3, nq=5, nk=7, d=8):
    return torch.randn(b, h, nq, d), torch.randn(b, h, nk, d), torch.randn(b, h, nk, d)


@pytest.mark.parametrize("scale", [True, False])
def test_matches_torch_cross_lengths(scale):
    q, k, v = _qkv()
    out, w = scaled_dot_product_attention(q, k, v, scale=scale)
    ref = F.scaled_dot_product_attention(q, k, v, scale=None if scale else 1.0)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    assert w.shape == (2, 3, 5, 7)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 3, 5))


def test_causal_mask_matches_torch_is_causal():
    q, k, v = _qkv(nq=6, nk=6)
    m = causal_mask(6)
    assert m.dtype == torch.bool and m[0, 1] and not m[1, 0] and not m.diagonal().any()
    out, w = scaled_dot_product_attention(q, k, v, mask=m)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True), atol=1e-5, rtol=1e-5)
    assert torch.all(w[..., m] == 0)


def test_padding_anywhere_and_fully_blocked_rows():
    is_pad = torch.tensor([[True, False, False, True, False], [False, False, True, True, True]])
    m = causal_padding_mask(is_pad)  # first query of batch 0 sees only a pad -> fully blocked
    q, k, v = _qkv(b=2, h=2, nq=5, nk=5)
    out, w = scaled_dot_product_attention(q, k, v, mask=m)
    assert not torch.isnan(w).any() and not torch.isnan(out).any()
    assert torch.all(w[0, :, 0] == 0)
    assert torch.all(w.masked_select(m.expand_as(w)) == 0)
    ok = ~m.all(-1).expand(2, 2, 5)
    torch.testing.assert_close(w.sum(-1)[ok], torch.ones(int(ok.sum())))
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=~m)
    torch.testing.assert_close(out[ok], ref[ok], atol=1e-5, rtol=1e-5)
    assert padding_mask(is_pad).shape == (2, 1, 1, 5)
    assert cross_padding_mask(3, is_pad).shape == (2, 1, 3, 5)


@pytest.mark.parametrize("n_kv", [None, 4, 2, 1])
def test_mha_gqa_mqa_matches_torch(n_kv):
    torch.manual_seed(1)
    mha = MultiHeadAttention(16, 4, n_kv_heads=n_kv).eval()
    x, mem = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    out, w = mha(x, mem)
    assert w.shape == (2, 4, 5, 7)
    q = mha.q_proj(x).view(2, 5, 4, 4).transpose(1, 2)
    kv_heads = n_kv or 4
    k = mha.k_proj(mem).view(2, 7, kv_heads, 4).transpose(1, 2)
    v = mha.v_proj(mem).view(2, 7, kv_heads, 4).transpose(1, 2)
    ref = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    ref = mha.o_proj(ref.transpose(1, 2).reshape(2, 5, 16))
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    fast, none = mha(x, mem, need_weights=False)
    assert none is None
    torch.testing.assert_close(fast, out, atol=1e-5, rtol=1e-5)


def test_mha_rejects_bad_sizes():
    with pytest.raises(ValueError, match="divisible"):
        MultiHeadAttention(10, 4)
    with pytest.raises(ValueError, match="n_kv_heads"):
        MultiHeadAttention(16, 4, n_kv_heads=3)


def test_dropout_on_weights_rescales():
    torch.manual_seed(0)
    q, k, v = _qkv(nq=64, nk=64)
    _, w = scaled_dot_product_attention(q, k, v, dropout=0.5)
    kept = w[w > 0]
    assert 0.3 < kept.numel() / w.numel() < 0.7
    assert math.isclose(float(w.sum(-1).mean()), 1.0, rel_tol=0.1)
