"""viz_core.lessons.mechanics (and what it added to viz_core.attention / viz_core.masks) against torch references, the study
notes' printed numbers and the formulas; plus the invariants: rows sum to 1, blocked weights 0, no NaN."""
import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from viz_core import i18n
from viz_core.lessons import mechanics as mech
from viz_core.attention import AdditiveAttention, MultiHeadAttention, additive_scores, scaled_dot_product_attention
from viz_core.errors import InputError
from viz_core.masks import (causal_mask, causal_padding_mask, combine_masks, padded_query_rows, padding_mask,
                            sliding_window_mask)

ROOT = Path(__file__).resolve().parents[1]


def _worked(cfg=None):
    return mech.worked_steps(mech.WORKED_X, mech.WORKED_WQ, mech.WORKED_WK, mech.WORKED_WV, cfg=cfg)


# ---------------------------------------------------------------- step by step
def test_worked_example_reproduces_the_notes():
    s = _worked()
    np.testing.assert_allclose(s.scores, [[2.136, -0.803, -0.882], [-0.902, 0.312, 0.369],
                                          [-1.038, 0.385, 0.428]], atol=6e-4)
    np.testing.assert_allclose(s.scaled, s.scores / math.sqrt(2))
    np.testing.assert_allclose(s.weights, [[0.804, 0.101, 0.095], [0.172, 0.406, 0.422],
                                           [0.153, 0.417, 0.430]], atol=6e-4)
    np.testing.assert_allclose(s.out[0], [0.937, -0.113, 1.331, -0.732], atol=6e-4)
    np.testing.assert_allclose(s.v, mech.WORKED_X)  # W_v is the identity
    assert s.tokens == list(mech.WORKED_TOKENS) and s.dropped is None and s.mask is None


@pytest.mark.parametrize("scale,causal", [(True, False), (False, False), (True, True), (False, True)])
def test_steps_match_torch_sdpa(scale, causal):
    x, wq, wk, wv = mech.random_inputs(6, 8, 4, 5, seed=3)
    s = mech.worked_steps(x, wq, wk, wv, [f"t{i}" for i in range(6)], mech.StepConfig(scale=scale, causal=causal))
    q, k, v = (torch.as_tensor(a) for a in (x @ wq, x @ wk, x @ wv))
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=None if scale else 1.0)
    np.testing.assert_allclose(s.out, ref.numpy(), atol=1e-10)
    np.testing.assert_allclose(s.weights.sum(-1), 1.0)
    np.testing.assert_allclose(s.scores, (x @ wq) @ (x @ wk).T)
    assert s.divisor == (2.0 if scale else 1.0)
    if causal:
        assert np.all(s.weights[s.mask] == 0) and np.all(np.isneginf(s.masked[s.mask]))
        assert s.mask[0, 1] and not s.mask[1, 0]


def test_cross_lengths_and_zero_length():
    rng = np.random.default_rng(0)
    q, k, v = rng.standard_normal((3, 4)), rng.standard_normal((7, 4)), rng.standard_normal((7, 2))
    s = mech.attention_steps(q, k, v, ["a", "b", "c"])
    assert s.weights.shape == (3, 7) and s.out.shape == (3, 2)
    ref = F.scaled_dot_product_attention(*(torch.as_tensor(a) for a in (q, k, v)))
    np.testing.assert_allclose(s.out, ref.numpy(), atol=1e-10)
    with pytest.raises(InputError) as e:
        mech.attention_steps(np.zeros((0, 4)), k, v, [])
    assert e.value.code == "mechanics.zero_length"
    with pytest.raises(InputError, match="causal"):
        mech.attention_steps(q, k, v, ["a", "b", "c"], mech.StepConfig(causal=True))


def test_dropout_on_weights_is_inverted_dropout_and_reproducible():
    cfg = mech.StepConfig(dropout=0.5, seed=7)
    x, wq, wk, wv = mech.random_inputs(10, 8, 4, 4, seed=1)
    a, b = mech.worked_steps(x, wq, wk, wv, list("abcdefghij"), cfg), mech.worked_steps(x, wq, wk, wv,
                                                                                        list("abcdefghij"), cfg)
    np.testing.assert_array_equal(a.dropped, b.dropped)
    kept = a.dropped > 0
    assert 0.2 < kept.mean() < 0.8
    np.testing.assert_allclose(a.dropped[kept], a.weights[kept] / 0.5)
    np.testing.assert_allclose(a.out, a.dropped @ a.v)
    other = mech.worked_steps(x, wq, wk, wv, list("abcdefghij"), mech.StepConfig(dropout=0.5, seed=8))
    assert not np.array_equal(other.dropped, a.dropped)
    with pytest.raises(InputError):
        mech.attention_steps(a.q, a.k, a.v, a.tokens, mech.StepConfig(dropout=1.0))


def test_matrix_cells_parse_and_report_the_bad_cell():
    text = mech.format_matrix(mech.WORKED_WQ)
    assert text.startswith("0.2,0.1;0.3,0.5")
    np.testing.assert_allclose(mech.parse_cells(mech.split_matrix(text, (4, 2)), "W_q"), mech.WORKED_WQ)
    cells = mech.split_matrix("0.2,abc;0.3,0.5;0.4,0.6;0.1,0.2", (4, 2))
    with pytest.raises(InputError) as e:
        mech.parse_cells(cells, "W_q")
    assert e.value.code == "mechanics.bad_cell" and e.value.params == {"name": "W_q", "row": 1, "col": 2,
                                                                       "value": "abc"}
    with pytest.raises(InputError) as e:  # missing row -> empty cell
        mech.parse_cells(mech.split_matrix("1,2;3,4", (3, 2)), "W_k")
    assert e.value.code == "mechanics.empty_cell" and e.value.params["row"] == 3
    for bad in ("inf", "nan", "1e9"):
        with pytest.raises(InputError) as e:
            mech.parse_cells([[bad]], "X")
        assert e.value.code == "mechanics.big_cell"
    with pytest.raises(InputError, match="rows"):
        mech.project(np.ones((3, 4)), np.ones((3, 2)), np.ones((4, 2)), np.ones((4, 4)))
    with pytest.raises(InputError) as e:
        mech.project(np.ones((3, 4)), np.ones((4, 2)), np.ones((4, 3)), np.ones((4, 4)))
    assert e.value.code == "mechanics.dk_mismatch"


def test_shape_walkthrough_runs_real_tensors():
    steps = mech.shape_walkthrough(2, 5, 12, 3)
    shapes = {s.note: s.shape for s in steps}
    assert shapes["input"] == (2, 5, 12) and shapes["view_split"] == (2, 5, 3, 4)
    assert shapes["transpose_heads"] == (2, 3, 5, 4) and shapes["scores"] == (2, 3, 5, 5)
    assert shapes["transpose_back"] == (2, 5, 3, 4) and shapes["merge"] == (2, 5, 12)
    contiguous = {s.note: s.contiguous for s in steps}
    assert contiguous["transpose_heads"] is False and contiguous["contiguous"] is True
    fail = next(s for s in steps if s.note == "view_fails")
    assert "view" in fail.error and fail.shape is None
    with pytest.raises(InputError) as e:
        mech.shape_walkthrough(1, 2, 10, 4)
    assert e.value.code == "mechanics.heads_not_divisor"


# ---------------------------------------------------------------- masks
def test_parse_batch_pads_at_either_side_and_anywhere():
    b = mech.parse_batch("a b c\nd\ne [pad] f", "end")
    assert b.tokens[1] == ["d", mech.PAD, mech.PAD] and b.tokens[2] == ["e", mech.PAD, "f"]
    np.testing.assert_array_equal(b.is_pad, [[0, 0, 0], [0, 1, 1], [0, 1, 0]])
    left = mech.parse_batch("a b c\nd", "start")
    assert left.tokens[1] == [mech.PAD, mech.PAD, "d"]
    for bad, code in (("  \n ", "empty_batch"), ("\n".join(["a"] * 7), "batch_too_big"),
                      (" ".join(["a"] * 13), "batch_too_big")):
        with pytest.raises(InputError) as e:
            mech.parse_batch(bad)
        assert e.value.code == f"mechanics.{code}"


def test_combine_masks_and_padded_rows():
    is_pad = torch.tensor([[True, False, False, True], [False, False, False, False]])
    combined = combine_masks(causal_mask(4), None, padding_mask(is_pad))
    assert combined.shape == (2, 1, 4, 4)
    torch.testing.assert_close(combined, causal_padding_mask(is_pad))
    assert combine_masks(None, None) is None
    rows = padded_query_rows(is_pad)
    assert rows.shape == (2, 1, 4, 1) and rows[0, 0, 0, 0] and not rows[1].any()


@pytest.mark.parametrize("kind", mech.MASK_KINDS)
def test_mask_views_against_references(kind):
    batch = mech.parse_batch("x a b\ny c\n[PAD] [PAD]", "start")
    for item in range(3):
        view = mech.mask_view(batch, item, kind, "q1 q2", seed=1)
        n_q, n_k = len(view.q_tokens), len(view.k_tokens)
        expected = {"causal": causal_mask(n_k).numpy(),
                    "sliding": sliding_window_mask(n_k, mech.DEFAULT_WINDOW).numpy(),
                    "padding": np.broadcast_to(batch.is_pad[item], (n_k, n_k)),
                    "causal_padding": causal_mask(n_k).numpy() | batch.is_pad[item][None, :],
                    "cross": np.broadcast_to(batch.is_pad[item], (n_q, n_k))}[kind]
        np.testing.assert_array_equal(view.mask, expected)
        safe = view.weights["safe"]
        assert not np.isnan(safe).any() and np.all(safe[view.mask] == 0)
        ok = ~view.fully_blocked
        np.testing.assert_allclose(safe[ok].sum(-1), 1.0)
        assert np.all(safe[view.fully_blocked] == 0)
        scores = torch.as_tensor(view.scores)
        ref = F.softmax(scores.masked_fill(torch.as_tensor(view.mask), float("-inf")), -1).numpy()
        np.testing.assert_allclose(safe[ok], ref[ok], atol=1e-12)
        assert view.fully_blocked.tolist() == view.mask.all(-1).tolist()
        assert view.query_is_pad.tolist() == ([False] * n_q if kind == "cross" else batch.is_pad[item].tolist())


# ---------------------------------------------------------------- sliding window
@pytest.mark.parametrize("n", [0, 1, 2, 5, 9])
@pytest.mark.parametrize("window", [1, 2, 3, 8, 12])
def test_sliding_window_mask_is_the_loop_rule(n, window):
    """Query i sees key j iff 0 <= i - j < W: itself and the W - 1 keys before it."""
    mask = sliding_window_mask(n, window)
    assert mask.shape == (n, n) and mask.dtype == torch.bool
    loop = [[not (0 <= i - j < window) for j in range(n)] for i in range(n)]
    assert mask.tolist() == loop
    if n:
        assert not mask.all(-1).any() and not mask.diagonal().any()  # every row keeps at least itself
        assert ((~mask).sum(-1) == torch.clamp(torch.arange(n) + 1, max=window)).all()  # min(i + 1, W) keys per row
    if window >= n:
        torch.testing.assert_close(mask, causal_mask(n))  # a window as long as the sentence blocks only the future
    with pytest.raises(ValueError):
        sliding_window_mask(n, 0)


@pytest.mark.parametrize("n,window", [(1, 1), (7, 1), (9, 3), (16, 5), (12, 12), (6, 512)])
def test_sliding_window_mask_equals_transformers(n, window):
    """The same cells as transformers' own sliding-window causal mask (True there = may attend, here = blocked):
    the mask function alone, its sdpa expansion, and the mask a Gemma 3 config with sliding_window = W builds."""
    from transformers import Gemma3TextConfig
    from transformers import masking_utils as mu

    ours = sliding_window_mask(n, window)  # (n, n)
    fn = mu.sliding_window_causal_mask_function(window)
    q, kv = torch.arange(n)[:, None], torch.arange(n)[None, :]
    torch.testing.assert_close(~ours, fn(0, 0, q, kv).expand(n, n))
    sdpa = mu.sdpa_mask(batch_size=1, q_length=n, kv_length=n, mask_function=fn, allow_is_causal_skip=False)
    torch.testing.assert_close(~ours, sdpa[0, 0])
    cfg = Gemma3TextConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                           num_attention_heads=2, num_key_value_heads=1, head_dim=8, sliding_window=window)
    cfg._attn_implementation = "sdpa"
    model_mask = mu.create_sliding_window_causal_mask(
        config=cfg, inputs_embeds=torch.zeros(1, n, 16), attention_mask=torch.ones(1, n, dtype=torch.long),
        past_key_values=None, position_ids=torch.arange(n)[None], allow_is_causal_skip=False)  # (1, 1, n, n)
    torch.testing.assert_close(~ours, model_mask[0, 0])


@pytest.mark.parametrize("window", [1, 2, 3, 12])
def test_sliding_window_view_gives_zero_weight_outside_the_window(window):
    batch = mech.parse_batch("a b c d e f g\nh [PAD] i", "end")
    view = mech.mask_view(batch, 0, "sliding", seed=2, window=window)
    n = len(view.k_tokens)
    assert view.batch_mask_shape == (n, n)
    np.testing.assert_array_equal(view.mask, sliding_window_mask(n, window).numpy())
    i, j = np.indices((n, n))
    outside = (i - j < 0) | (i - j >= window)
    for name in ("safe", "fill_inf", "fill_1e9"):  # no row is fully blocked: every way of masking agrees here
        w = view.weights[name]
        assert np.all(w[outside] == 0) and not np.isnan(w).any(), name
        np.testing.assert_allclose(w.sum(-1), 1.0)
    ref = F.softmax(torch.as_tensor(view.scores).masked_fill(torch.as_tensor(outside), float("-inf")), -1)
    np.testing.assert_allclose(view.weights["safe"], ref.numpy(), atol=1e-12)
    assert not view.fully_blocked.any()
    with pytest.raises(InputError) as e:
        mech.mask_view(batch, 0, "sliding", window=0)
    assert e.value.code == "mechanics.bad_window"


def test_sliding_reach_grows_by_w_minus_1_per_layer():
    """After l sliding layers a token can draw on positions up to l (W - 1) back: compose the visibility."""
    n, window = 20, 4
    visible = (~sliding_window_mask(n, window)).to(torch.int64)  # (n, n) 1 = may attend
    reach = torch.eye(n, dtype=torch.int64)
    for layers in range(1, 5):
        reach = (visible @ reach).clamp(max=1)  # (n, n): j reaches i through `layers` layers
        farthest = int((torch.arange(n) - reach[-1].nonzero().min()).max())
        assert farthest == mech.sliding_reach(window, layers) == layers * (window - 1)
    assert mech.sliding_reach(512, 5) == 2555


def test_masking_methods_show_nan_and_uniform_rows():
    batch = mech.parse_batch("[PAD] a b", "end")
    view = mech.mask_view(batch, 0, "causal_padding", seed=0)
    assert view.fully_blocked.tolist() == [True, False, False]
    w = view.weights
    assert np.isnan(w["add_inf"]).all()  # 0 * -inf = NaN in every cell
    assert np.isnan(w["fill_inf"][0]).all() and not np.isnan(w["fill_inf"][1:]).any()
    np.testing.assert_allclose(w["fill_1e9"][0], 1 / 3)  # a blocked row spreads evenly over the pads
    assert np.all(w["safe"][0] == 0)
    np.testing.assert_allclose(w["fill_1e9"][1:], w["safe"][1:], atol=1e-12)
    summary = {r["method"]: r for r in mech.method_summary(view)}
    assert summary["add_inf"]["nan_cells"] == 9 and summary["fill_inf"]["nan_cells"] == 3
    assert summary["fill_1e9"]["blocked_row_sum"] == pytest.approx(1.0)
    assert summary["safe"]["blocked_row_sum"] == 0.0 and summary["safe"]["max_blocked_weight"] == 0.0
    fp16 = mech.fp16_fill_check()
    assert "overflow" in fp16["fill_1e9"] and fp16["finfo_min"] == "-65504"


def test_mask_view_errors():
    batch = mech.parse_batch("a b")
    with pytest.raises(InputError) as e:
        mech.mask_view(batch, 0, "cross", "   ")
    assert e.value.code == "mechanics.empty_sentence"
    with pytest.raises(InputError):
        mech.mask_view(batch, 3, "causal")
    with pytest.raises(InputError):
        mech.mask_view(batch, 0, "diagonal")


# ---------------------------------------------------------------- MHA / GQA / MQA
def test_divisors_groups_and_names():
    assert mech.divisors(12) == [1, 2, 3, 4, 6, 12] and mech.divisors(71) == [1, 71]
    assert mech.head_groups(8, 2) == [0, 0, 0, 0, 1, 1, 1, 1]
    assert [mech.variant_name(8, k) for k in (8, 2, 1)] == ["MHA", "GQA", "MQA"]
    with pytest.raises(InputError) as e:
        mech.head_groups(8, 3)
    assert e.value.code == "mechanics.kv_not_divisor"


@pytest.mark.parametrize("n_kv", [4, 2, 1])
def test_pooled_variant_matches_torch_gqa(n_kv):
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4).eval()
    gqa = mech.pooled_variant(mha, n_kv)
    torch.testing.assert_close(gqa.k_proj.weight, mha.k_proj.weight.view(n_kv, 4 // n_kv, 4, 16).mean(1)
                               .reshape(-1, 16))
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        out, w = gqa(x, mask=causal_mask(5))
        q = gqa.q_proj(x).view(2, 5, 4, 4).transpose(1, 2)
        k = gqa.k_proj(x).view(2, 5, n_kv, 4).transpose(1, 2)
        v = gqa.v_proj(x).view(2, 5, n_kv, 4).transpose(1, 2)
        ref = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        ref = gqa.o_proj(ref.transpose(1, 2).reshape(2, 5, 16))
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    if n_kv == 4:
        torch.testing.assert_close(out, mha(x, mask=causal_mask(5))[0].detach())


def test_compare_variants_and_equivalence():
    res = mech.compare_variants(16, 4, 2, 6, seed=0)
    assert res.names == ["MHA", "GQA", "MQA"] and res.kv_heads == [4, 2, 1]
    assert res.outputs.shape == (3, 6, 16) and res.weights.shape == (3, 4, 6, 6)
    assert res.rel_diff[0] == 0.0 and res.rel_diff[1] > 0 and res.rel_diff[2] > 0
    np.testing.assert_allclose(res.weights.sum(-1), 1.0, atol=1e-6)
    assert np.all(res.weights[:, :, np.triu_indices(6, 1)[0], np.triu_indices(6, 1)[1]] == 0)
    assert res.params == [mech.attention_params(16, 4, kv, 4) for kv in (4, 2, 1)]
    eq = mech.equivalence_check(24, 6)
    assert max(eq.values()) < 1e-5


def test_param_count_formula_matches_modules():
    for d_model, h, kv, bias in ((32, 8, 2, False), (32, 8, 8, True), (12, 3, 1, True)):
        m = MultiHeadAttention(d_model, h, kv, bias=bias)
        assert sum(p.numel() for p in m.parameters()) == mech.attention_params(d_model, h, kv, d_model // h, bias)


def test_kv_cache_arithmetic_of_known_models():
    llama7 = mech.PRESETS["llama2_7b"]
    assert mech.kv_cache_bytes(llama7, 32) == 512 * 1024  # 0.5 MiB per token in fp16
    assert mech.kv_cache_bytes(llama7, 32, 4096, 1) == 2 * 2**30
    assert mech.kv_cache_bytes(mech.PRESETS["llama2_70b"], 8) == 320 * 1024
    assert mech.PRESETS["falcon_7b"].head_dim == 64
    rows = mech.kv_table(llama7, 100, 3)
    assert [r["kv_heads"] for r in rows] == [1, 2, 4, 8, 16, 32]
    assert rows[-1]["variant"] == "MHA" and rows[0]["variant"] == "MQA" and rows[0]["group"] == 32
    assert rows[-1]["bytes_total"] == 32 * rows[0]["bytes_total"] == 300 * rows[-1]["bytes_per_token"]
    assert rows[-1]["params"] == 32 * 4 * 4096 * 4096
    with pytest.raises(InputError) as e:
        mech.custom_shape(100, 3, 2, 2)
    assert e.value.code == "mechanics.heads_not_divisor"
    with pytest.raises(InputError):
        mech.kv_table(llama7, 0, 1)
    assert mech.format_bytes(512 * 1024) == "512 KiB" and mech.format_bytes(2 * 2**30) == "2 GiB"
    assert mech.format_count(2_147_483_648) == "2.15 B" and mech.format_count(640) == "640"


def test_real_decoder_shapes_against_the_formula():
    """Gemma 3 270M (MQA 4 : 1, d_head 256, 18 layers, W 512 in 5 of 6) and SmolLM2-135M (GQA 9 : 3, d_head 64,
    30 layers): KV cache per token = 2 L H_kv d_head bytes, attention parameters = 2 L d_model d_head (H + H_kv)."""
    gemma, smol = mech.PRESETS["gemma3_270m"], mech.PRESETS["smollm2_135m"]
    assert (gemma.d_model, gemma.n_heads, gemma.n_kv_heads, gemma.head_dim, gemma.n_layers) == (640, 4, 1, 256, 18)
    assert (smol.d_model, smol.n_heads, smol.n_kv_heads, smol.head_dim, smol.n_layers) == (576, 9, 3, 64, 30)
    assert mech.variant_name(4, gemma.n_kv_heads) == "MQA" and mech.variant_name(9, smol.n_kv_heads) == "GQA"
    for shape in (gemma, smol):
        per_token = 2 * shape.n_layers * shape.n_kv_heads * shape.head_dim * 2
        assert mech.kv_cache_bytes(shape, shape.n_kv_heads) == per_token
        assert mech.kv_cache_bytes(shape, shape.n_heads) == per_token * shape.n_heads // shape.n_kv_heads  # MHA
        rows = {r["kv_heads"]: r for r in mech.kv_table(shape, 1, 1)}
        assert rows[shape.n_kv_heads]["params"] == 2 * shape.n_layers * shape.d_model * shape.head_dim * (
            shape.n_heads + shape.n_kv_heads)
    assert mech.kv_cache_bytes(gemma, 1) == 18 * 1024 and mech.kv_cache_bytes(gemma, 4) == 72 * 1024
    assert mech.kv_cache_bytes(smol, 3) == 23_040 and mech.kv_cache_bytes(smol, 9) == 69_120
    assert sorted(mech.kv_table(smol, 1, 1), key=lambda r: r["kv_heads"])[1]["params"] == 30 * 2 * 576 * 64 * 12


def test_gemma_sliding_layers_cap_the_cache_at_w():
    """Layers 5, 11, 17 full, the other 15 sliding: at 4096 tokens full layers hold 4096, sliding ones 512."""
    gemma = mech.GEMMA3_270M
    kinds = gemma.layer_kinds()
    assert [i for i, k in enumerate(kinds) if k == "full"] == [5, 11, 17] and kinds.count("sliding") == 15
    tokens = mech.cached_tokens(gemma, 4096)
    assert tokens == [4096 if i in (5, 11, 17) else 512 for i in range(18)]
    per_layer_token = 2 * 1 * 256 * 2  # K and V of one token in one layer: 1 KiB
    assert mech.windowed_cache_bytes(gemma, 1, 4096) == per_layer_token * (3 * 4096 + 15 * 512) == 19.5 * 2**20
    assert mech.kv_cache_bytes(gemma, 1, 4096) == 72 * 2**20  # as if every layer kept every token
    assert mech.windowed_cache_bytes(gemma, 1, 300, 2) == mech.kv_cache_bytes(gemma, 1, 300, 2)  # N <= W: no cap
    row = {r["kv_heads"]: r for r in mech.kv_table(gemma, 4096, 2)}[1]
    assert row["bytes_total"] == 2 * 19.5 * 2**20 and row["bytes_no_window"] == 2 * 72 * 2**20
    smol = mech.SMOLLM2_135M
    assert smol.layer_kinds() == ["full"] * 30 and mech.cached_tokens(smol, 4096) == [4096] * 30
    assert mech.windowed_cache_bytes(smol, 3, 4096, 3) == mech.kv_cache_bytes(smol, 3, 4096, 3)


@pytest.mark.parametrize("name", ["gemma3_270m", "smollm2_135m"])
def test_real_decoder_shapes_match_transformers_modules(name):
    """The attention projections of the transformers model built from the published config (on the meta device: no
    weights) hold exactly attention_params per layer; its config states the same window and layer pattern."""
    from transformers import Gemma3TextConfig, Gemma3TextModel, LlamaConfig, LlamaModel

    shape = mech.PRESETS[name]
    common = dict(vocab_size=64, hidden_size=shape.d_model, intermediate_size=64, num_hidden_layers=shape.n_layers,
                  num_attention_heads=shape.n_heads, num_key_value_heads=shape.n_kv_heads, head_dim=shape.head_dim)
    if name == "gemma3_270m":
        cfg = Gemma3TextConfig(**common, sliding_window=512, query_pre_attn_scalar=256,
                               layer_types=["full_attention" if (i + 1) % 6 == 0 else "sliding_attention"
                                            for i in range(18)])
        assert [t.split("_")[0] for t in cfg.layer_types] == shape.layer_kinds() and cfg.sliding_window == shape.window
        build = Gemma3TextModel
    else:
        cfg, build = LlamaConfig(**common, attention_bias=False), LlamaModel
    with torch.device("meta"):
        model = build(cfg)
    attn = [p.numel() for n, p in model.named_parameters() if n.split(".")[-2] in ("q_proj", "k_proj", "v_proj",
                                                                                    "o_proj")]
    assert len(attn) == 4 * shape.n_layers
    assert sum(attn) == shape.n_layers * mech.attention_params(shape.d_model, shape.n_heads, shape.n_kv_heads,
                                                               shape.head_dim)


@pytest.mark.parametrize("name", ["gemma3_270m", "smollm2_135m"])
def test_real_decoder_shapes_match_the_packaged_config(name):
    """The converted packaged model's own config.json (when this machine has converted it) states the same shape."""
    import json

    from viz_core.pretrained import packaged
    decoder = {"gemma3_270m": packaged.GEMMA, "smollm2_135m": packaged.SMOLLM2}[name]
    path = packaged.cache_dir(decoder) / "config.json"
    if not path.exists():
        pytest.skip(f"{decoder.title} is not converted on this machine")
    cfg = json.loads(path.read_text(encoding="utf-8"))
    shape = mech.PRESETS[name]
    assert (cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"],
            cfg["num_hidden_layers"]) == (shape.d_model, shape.n_heads, shape.n_kv_heads, shape.head_dim,
                                          shape.n_layers)
    assert (cfg.get("sliding_window") or 0) == shape.window
    if cfg.get("layer_types"):
        assert [t.split("_")[0] for t in cfg["layer_types"]] == shape.layer_kinds()


def test_kv_cache_view_is_what_the_bars_show():
    """Mistral-7B (L 32, H 32, d_head 128, fp16) with H_kv = 8 at 4096 tokens: 2 L H_kv d_head bytes N B = 512 MiB."""
    mistral = mech.PRESETS["mistral_7b"]
    view = mech.kv_cache_view(mistral, 4096, 1, 8)
    kv = [1, 2, 4, 8, 16, 32]
    assert [r["kv_heads"] for r in view.rows] == kv and view.chosen == 3
    assert view.labels == ["1 (MQA)", "2 (GQA)", "4 (GQA)", "8 (GQA)", "16 (GQA)", "32 (MHA)"]
    np.testing.assert_allclose(view.total_gib, [2 * 32 * h * 128 * 2 * 4096 / 2**30 for h in kv], rtol=1e-15)
    assert view.total_gib[3] == 0.5 and view.total_text[3] == "512 MiB" and view.total_text[-1] == "2 GiB"
    params = [2 * 32 * 4096 * 128 * (32 + h) for h in kv]  # 2 L d_model d_head (H + H_kv): W_q and W_o, W_k and W_v
    np.testing.assert_allclose(view.params_millions, [p / 1e6 for p in params], rtol=1e-15)
    assert view.params_text[-1] == "2.15 B" and view.params_text[3] == "1.34 B"
    assert view.groups == [i // 4 for i in range(32)]  # g(i) = i // (H / H_kv)
    three = mech.kv_cache_view(mistral, 100, 3, 1)
    assert three.chosen == 0 and three.groups == [0] * 32
    assert three.total_gib[0] * 2**30 == 2 * 32 * 1 * 128 * 2 * 100 * 3
    with pytest.raises(InputError) as e:
        mech.kv_cache_view(mistral, 4096, 1, 3)
    assert e.value.code == "mechanics.kv_not_divisor"
    with pytest.raises(InputError):
        mech.kv_cache_view(mistral, 0, 1, 8)


def test_cost_sweep_against_the_formulas():
    d_k, d_h = 64, 32
    sweep = mech.cost_sweep(d_k, d_h)
    n = [8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192]
    assert sweep.n.tolist() == n
    assert sweep.dot_macs.tolist() == [x * x * d_k for x in n]  # Q K^T: N^2 d_k
    assert sweep.dot_memory.tolist() == [x * x for x in n]  # the (N, N) scores
    assert sweep.additive_macs.tolist() == [2 * x * d_k * d_h + 2 * x * x * d_h for x in n]  # projections + pairs
    assert sweep.additive_memory.tolist() == [x * x * d_h for x in n]  # the (N, N, d_h) hidden layer
    assert sweep.additive_macs.dtype == np.int64 and sweep.additive_macs[-1] == 2 * 8192 * 64 * 32 + 2 * 8192**2 * 32
    assert set(sweep.arrays()) == {"n", "dot_macs", "additive_macs", "dot_memory", "additive_memory"}
    small = mech.cost_sweep(2, 8, ns=(3,))
    assert (small.dot_macs[0], small.additive_macs[0]) == (18, 2 * 3 * 2 * 8 + 2 * 9 * 8)


def test_cross_result_masks_the_pad_keys_for_every_query():
    res = mech.cross_attention(["le", "chat", "dort"], ["the", mech.PAD, "cat", mech.PAD], 8, 2, seed=0,
                               k_is_pad=[False, True, False, True])
    np.testing.assert_array_equal(res.pad_mask, [[False, True, False, True]] * 3)
    np.testing.assert_array_equal(res.weights[:, res.pad_mask], 0.0)  # what the hatching marks has no weight


# ---------------------------------------------------------------- cross and additive attention
def test_cross_attention_shapes_and_padding():
    res = mech.cross_attention(["le", "chat"], ["the", "cat", "sat", mech.PAD], 8, 2, seed=0,
                               k_is_pad=[False, False, False, True])
    assert res.weights.shape == (2, 2, 4) and res.out.shape == (2, 8)
    assert res.shapes["Q"] == (1, 2, 2, 4) and res.shapes["K"] == (1, 2, 4, 4)
    assert np.all(res.weights[..., 3] == 0)
    np.testing.assert_allclose(res.weights.sum(-1), 1.0, atol=1e-6)
    np.testing.assert_array_equal(mech.embed_tokens(["cat", "dog", "cat"], 4)[0],
                                  mech.embed_tokens(["cat"], 4)[0])
    with pytest.raises(InputError):
        mech.cross_attention([], ["a"])


def test_additive_scores_match_the_formula():
    torch.manual_seed(0)
    q, k = torch.randn(3, 4), torch.randn(5, 6)
    w_q, w_k, v_a = torch.randn(7, 4), torch.randn(7, 6), torch.randn(7)
    scores = additive_scores(q, k, w_q, w_k, v_a)
    loop = torch.tensor([[float(v_a @ torch.tanh(w_q @ q[i] + w_k @ k[j])) for j in range(5)] for i in range(3)])
    torch.testing.assert_close(scores, loop, atol=1e-5, rtol=1e-5)
    att = AdditiveAttention(4, 6, 7)
    v = torch.randn(2, 5, 3)
    mask = torch.tensor([[False, True, False, False, True]] * 3)
    mask[1] = True  # one fully blocked row
    out, w = att(q.expand(2, 3, 4), k.expand(2, 5, 6), v, mask=mask)
    assert out.shape == (2, 3, 3) and w.shape == (2, 3, 5) and not torch.isnan(w).any()
    assert torch.all(w[:, 1] == 0) and torch.all(w[mask.expand(2, 3, 5)] == 0)
    torch.testing.assert_close(w[:, [0, 2]].sum(-1), torch.ones(2, 2))


def test_additive_vs_dot_and_cost():
    s = _worked()
    res = mech.additive_vs_dot(s.q, s.k, s.v, d_hidden=8, seed=0)
    np.testing.assert_allclose(res.dot_scores, s.scaled)
    np.testing.assert_allclose(res.dot_weights, s.weights)
    assert res.add_scores.shape == (3, 3)
    np.testing.assert_allclose(res.add_weights.sum(-1), 1.0)
    ref, _ = scaled_dot_product_attention(torch.as_tensor(s.q), torch.as_tensor(s.k), torch.as_tensor(s.v))
    np.testing.assert_allclose(res.dot_weights @ s.v, ref.numpy())
    cost = mech.attention_cost(100, 50, 64, 32)
    assert cost["dot"] == {"macs": 100 * 50 * 64, "memory": 5000}
    assert cost["additive"]["memory"] == 5000 * 32 and cost["additive"]["tanh"] == 5000 * 32
    assert cost["additive"]["macs"] == 150 * 64 * 32 + 2 * 5000 * 32


# ---------------------------------------------------------------- every message the page can show exists
def test_error_codes_and_dynamic_keys_are_translated():
    strings = i18n.namespace("mechanics")
    codes = set(re.findall(r'InputError\("mechanics\.([a-z_0-9]+)"', (ROOT / "viz_core/lessons/mechanics.py").read_text()))
    assert len(codes) >= 15
    dynamic = ({f"sec_{s}" for s in ("steps", "masks", "variants", "cross", "additive")}
               | {f"src_{s}" for s in ("worked", "random", "real")}
               | {f"mask_{k}" for k in mech.MASK_KINDS} | {f"kind_{k}_text" for k in mech.MASK_KINDS}
               | {f"method_{m}" for m in mech.MASK_METHODS} | {"side_end", "side_start"}
               | {f"shape_{s.note}" for s in mech.shape_walkthrough(1, 1, 4, 2)} | {"shape_view_lucky"})
    missing = sorted((codes | dynamic) - set(strings))
    assert not missing, missing
