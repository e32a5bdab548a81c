"""viz_core.lessons.blocks and viz_core.lessons.anatomy against torch references (nn.LayerNorm, nn.RMSNorm, nn.BatchNorm1d,
nn.Dropout, F.cross_entropy, nn.TransformerEncoderLayer, nn.Transformer), Hugging Face's sampling warpers, the
paper's formulas, and invariants."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from viz_core.lessons import anatomy as A
from viz_core.lessons import blocks as B
from viz_core.errors import InputError
from viz_core.masks import causal_mask


def _x(*shape, seed=0, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype) * 3 + 1


# ================================================================ norms
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_layer_norm_equals_torch(dtype):
    x = _x(2, 5, 7, dtype=dtype)
    ref = nn.LayerNorm(7, eps=1e-5, dtype=dtype)
    with torch.no_grad():
        ref.weight.copy_(torch.linspace(-1, 2, 7))
        ref.bias.copy_(torch.linspace(0.5, -0.5, 7))
        ours = B.layer_norm(x, ref.weight, ref.bias)
        mod = B.LayerNorm(7)
        mod.load_state_dict(ref.state_dict())
        torch.testing.assert_close(ours, ref(x))
        torch.testing.assert_close(mod(x), ref(x))


@pytest.mark.parametrize("eps", [None, 1e-6])
def test_rms_norm_equals_torch(eps):
    x = _x(3, 4, 8)
    ref = nn.RMSNorm(8, eps=eps, dtype=torch.float64)
    with torch.no_grad():
        ref.weight.copy_(torch.linspace(0.5, 1.5, 8))
        torch.testing.assert_close(B.rms_norm(x, ref.weight, eps), ref(x))
    y = B.rms_norm(x)
    torch.testing.assert_close(y.pow(2).mean(-1), torch.ones(3, 4, dtype=torch.float64))  # RMS fixed, not the mean
    assert y.mean(-1).abs().max() > 0.05


def test_batch_norm_equals_torch_and_masking_equals_dropping_pads():
    x = _x(3, 4, 5)
    ref = nn.BatchNorm1d(5, dtype=torch.float64).train()
    with torch.no_grad():
        ref.weight.copy_(torch.linspace(1, 2, 5))
        ref.bias.copy_(torch.linspace(-1, 1, 5))
        expected = ref(x.transpose(1, 2)).transpose(1, 2)  # (B, D, N) is BatchNorm1d's layout
        torch.testing.assert_close(B.batch_norm(x, ref.weight, ref.bias), expected)
        valid = torch.tensor([[1, 1, 1, 1], [0, 1, 1, 1], [1, 1, 0, 0]], dtype=torch.bool)  # pads anywhere
        masked = B.batch_norm(x, ref.weight, ref.bias, valid=valid)
        only_real = ref(x[valid])  # (T, D): BatchNorm over the real tokens alone
        torch.testing.assert_close(masked[valid], only_real)


def test_std_variant_differs_by_sqrt_d_minus_1_over_d():
    x = _x(4, 6, 4)
    ln, var = B.layer_norm(x, eps=0.0), B.std_layer_norm(x, eps=0.0)
    torch.testing.assert_close(var, ln * math.sqrt(3 / 4))
    assert (B.layer_norm(x) - B.std_layer_norm(x)).abs().max() > 0.05  # visible at D = 4
    flat = torch.full((1, 4), 2.0, dtype=torch.float64)  # constant row: neither gives NaN
    assert torch.isfinite(B.layer_norm(flat)).all() and torch.isfinite(B.std_layer_norm(flat)).all()


def test_eps_placement_curve():
    c = B.eps_placement_curve(4, np.array([1e-9, 1.0, 10.0]))
    np.testing.assert_allclose(c["layer"][1:], 1.0, atol=1e-4)
    np.testing.assert_allclose(c["std_variant"][1:], math.sqrt(3 / 4), atol=1e-4)
    assert c["layer"][0] < 1e-3 and c["std_variant"][0] < 1e-2


def test_compare_norms_checks():
    res = B.compare_norms(B.NormBatch(batch=3, seq_len=4, d_model=6, n_pad=2, pad_side="start"), gamma=2.0, beta=0.5)
    c = res["checks"]
    assert c["torch_max_diff"] < 1e-12 and c["ln_batch_shift"] == 0.0
    assert c["bn_pad_shift"] > 1e-3 and c["bn_batch_shift"] > 1e-3 and c["std_max_diff"] > 0.1
    assert res["valid"][0].all() and not res["valid"][1, :2].any() and res["valid"][1, 2:].all()
    assert np.all(res["x"][~res["valid"]] == 0)
    stats = B.norm_statistics(res["out"]["layer"], res["valid"])
    np.testing.assert_allclose(stats["token_mean"], 0.5, atol=1e-9)
    np.testing.assert_allclose(stats["token_std"], 2.0, atol=1e-4)
    stats = B.norm_statistics(res["out"]["batch_masked"], res["valid"])
    np.testing.assert_allclose(stats["feature_mean"], 0.5, atol=1e-9)


def test_single_token_batch_norm_collapses_to_beta():
    res = B.compare_norms(B.NormBatch(batch=1, seq_len=1, d_model=4, n_pad=0), gamma=1.0, beta=0.7)
    assert res["checks"]["single_token"]
    np.testing.assert_allclose(res["out"]["batch"], 0.7)
    with pytest.raises(ValueError):
        nn.BatchNorm1d(4).train()(torch.randn(1, 4, 1))  # torch refuses, as the page says


@pytest.mark.parametrize("cfg", [B.NormBatch(d_model=1), B.NormBatch(seq_len=3, n_pad=3), B.NormBatch(pad_side="mid")])
def test_norm_batch_bad_input(cfg):
    with pytest.raises(InputError):
        B.compare_norms(cfg)


# ================================================================ blocks, residuals, FFN
def _copy_into_torch(block: B.EncoderBlock, ref: nn.TransformerEncoderLayer) -> None:
    a = block.attn
    with torch.no_grad():
        ref.self_attn.in_proj_weight.copy_(torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight]))
        ref.self_attn.in_proj_bias.copy_(torch.cat([a.q_proj.bias, a.k_proj.bias, a.v_proj.bias]))
        ref.self_attn.out_proj.load_state_dict(a.o_proj.state_dict())
        ref.linear1.load_state_dict(block.ffn.w1.state_dict())
        ref.linear2.load_state_dict(block.ffn.w2.state_dict())


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_encoder_block_equals_torch(norm_first, causal):
    torch.manual_seed(0)
    block = B.EncoderBlock(16, 4, norm_first=norm_first).eval()
    ref = nn.TransformerEncoderLayer(16, 4, 64, dropout=0.0, batch_first=True, norm_first=norm_first).eval()
    _copy_into_torch(block, ref)
    x = torch.randn(2, 5, 16)
    mask = causal_mask(5) if causal else None
    with torch.no_grad():
        torch.testing.assert_close(block(x, mask), ref(x, src_mask=mask), atol=1e-5, rtol=1e-5)


def test_post_norm_output_is_normalised_pre_norm_is_not():
    torch.manual_seed(0)
    x = torch.randn(2, 6, 8) * 5
    with torch.no_grad():
        post = B.Residual(8, norm_first=False)(x, lambda h: 2 * h)
        pre = B.Residual(8, norm_first=True)(x, lambda h: 2 * h)
    torch.testing.assert_close(post.mean(-1), torch.zeros(2, 6), atol=1e-5, rtol=0)
    torch.testing.assert_close(pre, x + 2 * B.layer_norm(x))


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_ffn_is_position_wise_with_4x_width(activation):
    demo = B.ffn_demo(8, 4, activation)
    assert demo["hidden"].shape == (6, 32) and demo["positionwise_diff"] < 1e-6
    if activation == "relu":
        assert 0.2 < demo["zero_share"] < 0.8 and demo["hidden"].min() == 0
    else:
        assert demo["zero_share"] == 0 and demo["hidden"].min() < 0
    ffn = B.FeedForward(6)
    assert ffn.d_ff == 24 and sum(p.numel() for p in ffn.parameters()) == B.block_parameter_split(6, 24)["ffn"]
    with pytest.raises(ValueError):
        B.FeedForward(4, activation="tanh")


def test_block_parameter_split_matches_torch_layer():
    split = B.block_parameter_split(512, 2048)
    ref = nn.TransformerEncoderLayer(512, 8, 2048, device="meta")
    assert sum(split.values()) == sum(p.numel() for p in ref.parameters())
    assert split["ffn"] / (split["ffn"] + split["attention"]) == pytest.approx(2 / 3, abs=1e-3)
    dec = B.block_parameter_split(512, 2048, decoder=True)
    ref_dec = nn.TransformerDecoderLayer(512, 8, 2048, device="meta")
    assert sum(dec.values()) == sum(p.numel() for p in ref_dec.parameters())


def test_norm_placement_at_init():
    shallow, deep = B.norm_placement_at_init(4), B.norm_placement_at_init(16)
    assert deep["pre_grad"].shape == (16,) and list(deep["layer"]) == list(range(1, 17))
    np.testing.assert_allclose(deep["post_act"], 1.0, atol=1e-3)          # post-norm re-normalises every layer
    assert deep["pre_act"][-1] > 2 * deep["pre_act"][0]                   # pre-norm's stream grows with depth
    assert deep["pre_grad"][-1] < 0.7 * shallow["pre_grad"][-1]           # its top gradient shrinks with depth
    assert deep["post_grad"][-1] > 0.5 * shallow["post_grad"][-1]         # post-norm's does not
    with pytest.raises(InputError):
        B.norm_placement_at_init(0)


# ================================================================ dropout
def test_dropout_inverted_scaling_and_eval():
    x = torch.rand(200, 200, generator=torch.Generator().manual_seed(1)) + 0.5  # seeded: the 1 % bounds hold
    y, keep = B.dropout(x, 0.3, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(y[keep], x[keep] / 0.7)
    assert torch.all(y[~keep] == 0)
    assert abs(keep.double().mean() - 0.7) < 0.01
    assert abs(float(y.mean() / x.mean()) - 1) < 0.01
    y_eval, keep_eval = B.dropout(x, 0.3, training=False)
    assert torch.equal(y_eval, x) and keep_eval.all()
    assert torch.all(B.dropout(x, 1.0)[0] == 0)
    with pytest.raises(InputError):
        B.dropout(x, 1.5)


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_dropout_statistics_match_torch(p):
    s = B.dropout_statistics(p, n_draws=500)
    assert abs(s["ours_keep"].mean() - (1 - p)) < 0.01 and abs(s["torch_keep"].mean() - (1 - p)) < 0.01
    assert abs(s["ours_mean"].mean() - 1) < 0.02 and abs(s["torch_mean"].mean() - 1) < 0.02
    assert abs(s["ours_keep"].std() - s["torch_keep"].std()) < 0.01  # same binomial spread as nn.Dropout


def test_dropout_places():
    d = B.dropout_places_demo(0.5, True, n_tokens=4, d_model=6)
    assert d["attention"]["before"].shape == (4, 4) and d["sublayer"]["after"].shape == (4, 6)
    np.testing.assert_allclose(d["attention"]["before"].sum(1), 1.0, atol=1e-6)
    for place in B.dropout_places_demo(0.5, False).values():
        np.testing.assert_array_equal(place["before"], place["after"])


# ================================================================ label smoothing
@pytest.mark.parametrize("eps", [0.0, 0.1, 0.4, 1.0])
@pytest.mark.parametrize("k", [2, 10])
def test_label_smoothing_equals_torch(eps, k):
    logits, targets = _x(6, k, seed=1), torch.arange(6) % k
    torch.testing.assert_close(B.label_smoothing_loss(logits, targets, eps),
                               F.cross_entropy(logits, targets, label_smoothing=eps))
    q = B.smoothed_targets(targets, k, eps)
    torch.testing.assert_close(q.sum(-1), torch.ones(6, dtype=torch.float64))
    assert q[0, 0] == pytest.approx(1 - eps + eps / k)
    ours, ref = B.smoothing_check(k, eps)
    assert ours == pytest.approx(ref, abs=1e-12)


def test_optimal_confidence_minimises_loss():
    c = np.linspace(0.1, 0.9999, 20001)
    loss = B.loss_vs_confidence(10, 0.1, c)
    assert c[np.argmin(loss)] == pytest.approx(B.optimal_confidence(10, 0.1), abs=1e-3) == 0.91
    q = B.target_distribution(10, 0.1)
    assert loss.min() == pytest.approx(-(q * np.log(q)).sum(), abs=1e-6)  # the minimum is the entropy of q
    ends = B.loss_vs_confidence(10, 0.1, np.array([1.0]))[0], B.loss_vs_confidence(10, 0.0, np.array([1.0]))[0]
    assert np.isinf(ends[0]) and ends[1] == 0.0


def test_safe_loss_never_inf():
    res = B.loss_vs_margin(5, 0.1, np.array([0.0, 50.0, 120.0, 500.0]))
    assert np.isfinite(res["safe"]).all() and not np.isfinite(res["naive"][2:]).any()
    logits = torch.zeros(4, 5, dtype=torch.float64)
    logits[:, 0] = torch.tensor([0.0, 50.0, 120.0, 500.0], dtype=torch.float64)
    ref = F.cross_entropy(logits, torch.zeros(4, dtype=torch.long), label_smoothing=0.1, reduction="none")
    np.testing.assert_allclose(res["safe"], ref.numpy(), rtol=1e-5)
    assert math.isnan(B.loss_vs_margin(5, 0.0, np.array([500.0]))["naive"][0])  # 0 * log 0
    big = torch.tensor([[300.0, 0.0, 0.0]])
    assert torch.isinf(B.naive_smoothing_loss(big, torch.tensor([0]), 0.1))
    assert torch.isfinite(B.label_smoothing_loss(big, torch.tensor([0]), 0.1))


@pytest.mark.parametrize("k,eps", [(1, 0.1), (5, -0.1), (5, 1.5)])
def test_smoothing_bad_input(k, eps):
    with pytest.raises(InputError):
        B.optimal_confidence(k, eps)


# ================================================================ tokens to the next token
def test_toy_tokenizer():
    tok = A.ToyTokenizer(1000)
    assert tok.encode("哈基咪南北绿豆") == (["哈基咪", "南北", "绿豆"], [133, 23, 58])  # the notes' ids, no spaces
    assert tok.encode("The cat sat") == (["the", "cat", "sat"], [tok.ids["the"], tok.ids["cat"], tok.ids["sat"]])
    assert tok.tokenize("xyz cat qq哈基咪") == ["<unk>", "cat", "<unk>", "哈基咪"]
    assert A.build_vocab(1000) == A.build_vocab(1000) and len(A.build_vocab(200)) == 200
    for bad in ("", "   "):
        with pytest.raises(InputError, match="word"):
            tok.encode(bad)
    with pytest.raises(InputError):
        tok.encode("cat " * 40)
    with pytest.raises(InputError):
        A.ToyTokenizer(10)


def test_trace_shapes_and_tied_output():
    cfg = A.TinyLMConfig(vocab_size=1000, d_model=4, n_heads=2, n_layers=2)
    model = A.TinyLM(cfg)
    steps = dict(model.trace([133, 23]))
    assert steps["logits"].shape == (2, 1000) and steps["last"].shape == (1000,)
    assert steps["embedding"].shape == (2, 4) and steps["block2"].shape == (2, 4)
    torch.testing.assert_close(steps["embedding"], model.embed.weight[[133, 23]].detach())
    torch.testing.assert_close(steps["scaled"], 2 * steps["embedding"])  # sqrt(4)
    torch.testing.assert_close(steps["sum"], steps["scaled"] + steps["positions"])
    torch.testing.assert_close(steps["logits"], steps["block2"] @ model.embed.weight.detach().T)
    torch.testing.assert_close(steps["softmax"].sum(-1), torch.ones(2))
    pos, i = np.arange(5)[:, None], np.arange(0, 6, 2)[None]
    pe = np.zeros((5, 6))
    pe[:, 0::2], pe[:, 1::2] = np.sin(pos / 10000 ** (i / 6)), np.cos(pos / 10000 ** (i / 6))
    np.testing.assert_allclose(A.sinusoid(5, 6).numpy(), pe, atol=1e-6)
    assert sum(p.numel() for p in model.parameters()) == 1000 * 4 + 2 * sum(B.block_parameter_split(4, 16).values())


def _hf_probs(logits, t, k, p):
    from transformers.generation.logits_process import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper
    z = logits[None].clone()
    ids = torch.zeros(1, 1, dtype=torch.long)
    z = TemperatureLogitsWarper(t)(ids, z)
    if k:
        z = TopKLogitsWarper(k)(ids, z)
    if p < 1:
        z = TopPLogitsWarper(p)(ids, z)
    return torch.softmax(z, -1)[0].numpy()


@pytest.mark.parametrize("t,k,p", [(1.0, 0, 1.0), (0.7, 50, 1.0), (1.3, 0, 0.9), (0.5, 20, 0.5), (2.0, 5, 0.3)])
def test_sampling_matches_hugging_face(t, k, p):
    logits = _x(1000, seed=3)
    ours = A.next_token_distribution(logits, A.Sampling(t, k, p))
    np.testing.assert_allclose(ours, _hf_probs(logits, t, k, p), atol=1e-9)
    if k:
        assert (ours > 0).sum() <= k


def test_greedy_and_seeded_sampling():
    logits = _x(50, seed=4)
    greedy = A.next_token_distribution(logits, A.Sampling(0.0))
    assert greedy[int(logits.argmax())] == 1.0 and greedy.sum() == 1.0
    probs = A.next_token_distribution(logits, A.Sampling(1.0, 3))
    draws = {A.sample(probs, s) for s in range(30)}
    assert draws <= set(np.flatnonzero(probs)) and A.sample(probs, 7) == A.sample(probs, 7)
    for bad in (A.Sampling(-1.0), A.Sampling(1.0, 51), A.Sampling(1.0, 0, 0.0)):
        with pytest.raises(InputError):
            A.next_token_distribution(logits, bad)


def test_next_token_path():
    r = A.next_token_path("哈基咪 南北", A.TinyLMConfig(), A.Sampling(1.0, 10, 1.0), 0)
    shapes = {name: shape for name, shape, _ in r.steps}
    assert shapes["ids"] == (2,) and shapes["logits"] == (2, 1000) and r.filtered.shape == (1000,)
    assert r.filtered[r.next_id] > 0 and (r.filtered > 0).sum() == 10 and r.tokens == ["哈基咪", "南北"]
    with pytest.raises(InputError):
        A.next_token_path("cat", A.TinyLMConfig(d_model=6, n_heads=4), A.Sampling(), 0)


# ================================================================ parameter counting
def test_base_model_count_is_exact():
    parts = A.count_parameters(A.TransformerSizes())
    assert parts["embeddings"] == 37000 * 512 and parts["output"] == 0
    assert parts["enc_ffn"] == 6 * (2 * 512 * 2048 + 2048 + 512)
    assert sum(parts.values()) == 63_084_544 == A.reference_parameter_count(A.TransformerSizes())


@pytest.mark.parametrize("cfg", [A.TransformerSizes(sharing="none"), A.TransformerSizes(sharing="decoder"),
                                 A.TransformerSizes(d_model=1024, n_heads=16, d_ff=4096),
                                 A.TransformerSizes(vocab=1000, d_model=4, n_heads=2, d_ff=16, n_enc=1, n_dec=2)])
def test_counts_match_torch_modules(cfg):
    assert sum(A.count_parameters(cfg).values()) == A.reference_parameter_count(cfg)


def test_count_bad_input():
    with pytest.raises(InputError):
        A.count_parameters(A.TransformerSizes(n_heads=7))
    with pytest.raises(InputError):
        A.count_parameters(A.TransformerSizes(sharing="some"))
    assert A.readable_count(63_084_544) == "63.08M"
