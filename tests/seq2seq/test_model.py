"""The encoder-decoder: masks inside the model, capture points, equivalence of the fused and explicit attention
paths, positional table, parameter sharing, options."""
import math

import pytest
import torch

from viz_core.seq2seq.model import ModelConfig, Seq2SeqTransformer, capture_names, count_parameters, sinusoidal_table

PAD = 0


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # small models: one torch thread


def make(**kw) -> Seq2SeqTransformer:
    torch.manual_seed(0)
    cfg = ModelConfig(src_vocab=13, tgt_vocab=13, d_model=32, n_heads=4, d_ff=64, max_len=16, **kw)
    return Seq2SeqTransformer(cfg).eval()


def batch():
    src = torch.tensor([[5, 6, 7, 8, 0, 0], [9, 4, 3, 5, 6, 7]])   # row 0 padded at the end
    tgt = torch.tensor([[1, 8, 7, 6, 5, 0, 0], [1, 7, 6, 5, 3, 4, 9]])
    return src, tgt


@pytest.mark.parametrize("norm", ["pre", "post"])
@pytest.mark.parametrize("kv", [None, 2, 1])
def test_shapes_and_every_capture_point(norm, kv):
    model = make(norm=norm, n_kv_heads=kv)
    src, tgt = batch()
    logits, maps = model(src, tgt, capture=True)
    assert logits.shape == (2, 7, 13)
    assert list(maps) == capture_names(model.cfg)
    assert maps["enc.0.self_attn"].shape == (2, 4, 6, 6)
    assert maps["dec.1.self_attn"].shape == (2, 4, 7, 7)
    assert maps["dec.1.cross_attn"].shape == (2, 4, 7, 6)
    for w in maps.values():
        torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:-1]))
    _, none = model(src, tgt)
    assert none == {}


def test_capture_does_not_change_the_output():
    """The fused kernel (capture off) and the explicit softmax path (capture on) give the same logits."""
    model = make()
    src, tgt = batch()
    fused, _ = model(src, tgt)
    explicit, _ = model(src, tgt, capture=True)
    torch.testing.assert_close(fused, explicit, atol=1e-5, rtol=1e-5)


def test_padded_keys_get_zero_weight_and_change_nothing():
    model = make()
    src, tgt = batch()
    _, maps = model(src, tgt, capture=True)
    assert torch.all(maps["enc.0.self_attn"][0, :, :, 4:] == 0)
    assert torch.all(maps["dec.0.cross_attn"][0, :, :, 4:] == 0)
    longer = torch.cat([src, torch.zeros(2, 3, dtype=torch.long)], 1)
    a, _ = model(src[:1], tgt[:1])
    b, _ = model(longer[:1], tgt[:1])
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_padding_anywhere_is_masked_by_its_flag():
    """A pad in the middle of the source is masked too (no assumption that pads sit at the end)."""
    model = make()
    src = torch.tensor([[5, 0, 7, 8]])
    tgt = torch.tensor([[1, 8, 7]])
    _, maps = model(src, tgt, capture=True)
    assert torch.all(maps["dec.1.cross_attn"][..., 1] == 0)
    assert torch.all(maps["enc.1.self_attn"][..., 1] == 0)


def test_future_target_tokens_change_nothing_before_them():
    model = make()
    src, tgt = batch()
    changed = tgt.clone()
    changed[:, 4:] = torch.tensor([3, 3, 3])
    a, maps = model(src, tgt, capture=True)
    b, _ = model(src, changed)
    torch.testing.assert_close(a[:, :4], b[:, :4], atol=1e-5, rtol=1e-5)
    assert not torch.allclose(a[1, 4:], b[1, 4:])
    causal = torch.ones(7, 7, dtype=torch.bool).triu(1)
    assert torch.all(maps["dec.0.self_attn"][..., causal] == 0)


def test_padded_target_positions_do_not_leak_into_real_ones():
    model = make()
    src, tgt = batch()
    changed = tgt.clone()
    changed[0, 5:] = torch.tensor([4, 4])  # row 0 positions 5, 6 were pads: the real positions 0..4 must not care
    a, _ = model(src, tgt)
    b, _ = model(src, changed)
    torch.testing.assert_close(a[0, :5], b[0, :5], atol=1e-5, rtol=1e-5)


def test_gradients_are_finite_even_with_a_fully_padded_source_row():
    """A source made only of pads blocks every key of that row: the fused path must give zeros, never NaN."""
    model = make()
    model.train()
    src = torch.tensor([[0, 0, 0], [4, 5, 6]])
    tgt = torch.tensor([[1, 4, 5], [1, 6, 5]])
    logits, _ = model(src, tgt)
    logits.sum().backward()
    assert torch.isfinite(logits).all()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_sinusoidal_table_matches_the_formula():
    table = sinusoidal_table(10, 6)
    for pos in (0, 4, 9):
        for i in range(3):
            angle = pos / 10000 ** (2 * i / 6)
            assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)
    # the notes' worked example: position 4, d_model 4
    assert sinusoidal_table(5, 4)[4].tolist() == pytest.approx(
        [math.sin(4), math.cos(4), math.sin(0.04), math.cos(0.04)], abs=1e-6)
    assert sinusoidal_table(3, 5).shape == (3, 5)  # odd d_model works


def test_embedding_is_scaled_by_sqrt_d_model():
    model = make(positions="learned")
    ids = torch.tensor([[3, 4]])
    with torch.no_grad():
        model.src_embed.pos.weight.zero_()
    expected = model.src_embed.tok(ids) * math.sqrt(32)
    torch.testing.assert_close(model.src_embed(ids), expected)


def test_weight_tying_shares_one_tensor():
    tied, free = make(tie_weights=True), make()
    assert tied.out.weight is tied.tgt_embed.tok.weight
    assert count_parameters(free) - count_parameters(tied) == 13 * 32


def test_gqa_and_mqa_have_fewer_key_value_parameters():
    mha, gqa, mqa = make(), make(n_kv_heads=2), make(n_kv_heads=1)
    assert count_parameters(mha) > count_parameters(gqa) > count_parameters(mqa)
    assert mqa.encoder[0].self_attn.k_proj.weight.shape == (8, 32)  # one head of d_k = 8


def test_unscaled_attention_is_sharper():
    src, tgt = batch()
    scaled, unscaled = make(), make(scale=False)
    unscaled.load_state_dict(scaled.state_dict())
    _, a = scaled(src, tgt, capture=True)
    _, b = unscaled(src, tgt, capture=True)
    assert b["enc.0.self_attn"].max() > a["enc.0.self_attn"].max()


def test_post_norm_ends_each_sublayer_with_layernorm():
    model = make(norm="post")
    assert isinstance(model.enc_norm, torch.nn.Identity)
    x = torch.randn(1, 3, 32)
    out = model.encoder[0].sub1(x, lambda h: h * 0)
    torch.testing.assert_close(out, model.encoder[0].sub1.norm(x))


def test_dropout_is_active_only_in_training():
    model = make(emb_dropout=0.5, attn_dropout=0.5, resid_dropout=0.5)
    src, tgt = batch()
    a, _ = model(src, tgt)
    b, _ = model(src, tgt)
    torch.testing.assert_close(a, b)
    model.train()
    c, _ = model(src, tgt)
    assert not torch.allclose(a, c)


@pytest.mark.parametrize("bad", [dict(d_model=30, n_heads=4), dict(n_heads=4, n_kv_heads=3), dict(norm="middle"),
                                 dict(positions="rotary"), dict(n_enc_layers=0)])
def test_invalid_configs_are_refused(bad):
    with pytest.raises(ValueError):
        ModelConfig(**bad)


def test_too_long_input_is_refused():
    model = make()
    with pytest.raises(ValueError, match="max_len"):
        model(torch.ones(1, 17, dtype=torch.long), torch.ones(1, 2, dtype=torch.long))
