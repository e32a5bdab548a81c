"""viz_core.pretrained.generate on the real packaged decoders (Gemma 3 270M, SmolLM2 135M when installed): generation
with the KV cache gives the same tokens as full recomputation for the same seed, a seed reproduces, the filtered
distribution sums to 1 and keeps what top-k / top-p allow, the real cache's tensor shapes equal the bytes formula
(Gemma's sliding-window layers included), a Chinese prompt is read and continued, and the shared model is left as it
was. The formula itself is checked without a model. Each real model is loaded once per module; generations are short.
"""
from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from viz_core.errors import InputError
from viz_core.lm.generate import sampling_probs
from viz_core.pretrained.generate import (MAX_PROMPT_TOKENS, encode_prompt, TOP_SHOWN, KVShape, RealGenSettings, cache_nbytes,
                                          cache_shapes, eos_ids, filtered_distribution, generate_real, kv_shape_of,
                                          next_logits)

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_torch_thread")]

CJK = re.compile(r"[\u4e00-\u9fff]")
SAMPLED = RealGenSettings(n_new=10, temperature=0.9, top_k=0, top_p=0.9, seed=3)




@pytest.fixture(params=["gemma", "smollm2"])
def real(request):
    return request.getfixturevalue(request.param)


def _our_hooks(m) -> int:
    """Hooks on the model other than transformers' own output recorders (installed by the library itself, once, on
    the first output_attentions=True call, and inert unless that call's thread collects outputs)."""
    hooks = [h for mod in m.model.modules() for h in (*mod._forward_hooks.values(), *mod._forward_pre_hooks.values())]
    return sum(getattr(h, "__name__", "") != "output_capturing_hook" for h in hooks)


def _state(m) -> dict:
    """What must not change: hooks, the attention implementation, the config's output switches, eval mode."""
    return {"hooks": _our_hooks(m),
            "attn": m.model.config._attn_implementation, "output_attentions": m.model.config.output_attentions,
            "use_cache": m.model.config.use_cache, "training": any(mod.training for mod in m.model.modules()),
            "head": type(m.lm_head).__name__, "head_dtype": m.lm_head.weight.dtype}


# ---------------------------------------------------------------- cache == recomputation, seeds
def test_cached_and_recomputed_generation_draw_the_same_tokens(real):
    before = _state(real)
    cached = generate_real(real, "The little robot opened the door and", SAMPLED, use_cache=True)
    full = generate_real(real, "The little robot opened the door and", SAMPLED, use_cache=False)
    assert [s.token for s in cached.steps] == [s.token for s in full.steps]
    assert len(cached.steps) == SAMPLED.n_new or cached.stop == "eos"
    for a, b in zip(cached.steps, full.steps):
        np.testing.assert_allclose(a.attention, b.attention, atol=2e-4)  # (L, H, T) the same rows
        np.testing.assert_allclose(a.top_probs, b.top_probs, atol=2e-4)
        assert a.top_ids.tolist()[:3] == b.top_ids.tolist()[:3]
    assert cached.cache_shapes and not full.cache_shapes and full.cache_bytes == 0
    assert _state(real) == before  # the shared model is only read


def test_a_seed_reproduces_and_another_seed_differs(smollm2):
    settings = RealGenSettings(n_new=12, temperature=1.2, top_p=1.0, seed=7)
    one, two = (generate_real(smollm2, "My favourite food is", settings) for _ in range(2))
    assert one.text == two.text and [s.token for s in one.steps] == [s.token for s in two.steps]
    others = {generate_real(smollm2, "My favourite food is", RealGenSettings(n_new=12, temperature=1.2, top_p=1.0,
                                                                            seed=s)).text for s in (8, 9)}
    assert others - {one.text}, "three seeds at T = 1.2 gave one text"


def test_greedy_follows_the_most_likely_token(smollm2):
    trace = generate_real(smollm2, "The capital of France is", RealGenSettings(n_new=4, temperature=0.0))
    for s in trace.steps:
        assert s.token == s.top_ids[0] and s.p_sampled == 1.0 and s.top_sampled[0] == 1.0


# ---------------------------------------------------------------- the distribution
@pytest.mark.parametrize("top_k, top_p", [(5, 1.0), (0, 0.5), (8, 0.8), (0, 1.0)])
def test_filtered_probabilities_sum_to_one_and_keep_what_the_filters_allow(real, top_k, top_p):
    enc = real.tokenize("I opened the window and saw", return_tensors="pt")
    with torch.inference_mode():
        z = next_logits(real, real.model(**enc).last_hidden_state[0, -1])  # (V,)
    p = sampling_probs(z, 0.8, top_k, top_p)
    assert z.dtype == torch.float32 and p.shape == (real.lm_head.weight.shape[0],)
    assert float(p.sum()) == pytest.approx(1.0, abs=1e-5) and float(p.min()) >= 0
    kept = int((p > 0).sum())
    if top_k:
        assert kept <= top_k
    full = torch.softmax(z / 0.8, -1)
    if top_p < 1:  # the smallest prefix of the sorted p whose mass reaches top_p
        mass = full.sort(descending=True).values.cumsum(0)
        assert float(mass[kept - 1]) >= top_p - 1e-6 or (top_k and kept == top_k)
        assert kept == 1 or float(mass[kept - 2]) < top_p
    trace = generate_real(real, "I opened the window and saw", RealGenSettings(n_new=3, top_k=top_k, top_p=top_p))
    for s in trace.steps:
        assert s.p_sampled > 0 and s.top_ids.shape == (TOP_SHOWN,) and len(s.top_labels) == TOP_SHOWN
        assert np.all(np.diff(s.top_probs) <= 1e-7) and 0 < s.top_probs.sum() <= 1 + 1e-5
        if 0 < top_k <= TOP_SHOWN:  # everything the filter kept is among the shown tokens
            assert float(s.top_sampled.sum()) == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize("temperature, top_k, top_p", [(0.8, 0, 0.95), (1.0, 40, 1.0), (0.7, 5, 0.5), (2.0, 0, 0.99),
                                                     (1.0, 0, 1.0), (0.3, 2000, 0.9)])
def test_the_filtered_distribution_on_candidates_equals_the_rule_on_all_tokens(real, temperature, top_k, top_p):
    """filtered_distribution computes on the 1024 most likely tokens only where that changes nothing."""
    enc = real.tokenize("Yesterday my neighbour told me that", return_tensors="pt")
    with torch.inference_mode():
        z = next_logits(real, real.model(**enc).last_hidden_state[0, -1])  # (V,)
    s = RealGenSettings(temperature=temperature, top_k=top_k, top_p=top_p)
    probs = torch.softmax((z - z.max()) / temperature, -1)
    fast, rule = filtered_distribution(z, probs, s), sampling_probs(z, temperature, top_k, top_p)
    assert torch.equal(fast > 0, rule > 0)
    torch.testing.assert_close(fast, rule, atol=1e-6, rtol=1e-4)


def test_next_logits_are_the_float32_logits_where_it_matters(real):
    enc = real.tokenize("Attention is all you", return_tensors="pt")
    with torch.inference_mode():
        h = real.model(**enc).last_hidden_state[0, -1]
        exact = real.lm_head(h[None])[0].float()  # (V,) float32 over slices: the reference
        z = next_logits(real, h)
    top = exact.topk(200).indices
    assert torch.equal(z.topk(10).indices, exact.topk(10).indices)
    assert float((z[top] - exact[top]).abs().max()) < 1e-3
    assert float((z - exact).abs().max()) < 0.05  # the tail: one 16-bit rounding of z


def test_attention_rows_are_distributions_over_the_tokens_so_far(gemma):
    trace = generate_real(gemma, "One, two, three, four,", RealGenSettings(n_new=5, temperature=0.0))
    n_prompt = len(trace.prompt_ids)
    for k, s in enumerate(trace.steps):
        assert s.attention.shape == (18, 4, n_prompt + k) and s.attention.dtype == np.float32  # (L, H, T)
        np.testing.assert_allclose(s.attention.sum(-1), 1.0, atol=1e-4)
    assert trace.keys == trace.prompt_labels + [s.label for s in trace.steps[:-1]]


# ---------------------------------------------------------------- the cache of the real shape
def test_cache_tensors_have_the_shapes_of_the_bytes_formula(real):
    shape = kv_shape_of(real.model.config)
    trace = generate_real(real, "A short story about a cat:", RealGenSettings(n_new=6, seed=1))
    tokens = len(trace.ids) - 1  # the last chosen token is not fed yet
    assert trace.cache_shapes == [(1, shape.n_kv_heads, tokens, shape.head_dim)] * shape.n_layers
    assert trace.cache_bytes == shape.cache_bytes(tokens) == shape.bytes_per_token() * tokens
    assert shape.bytes_per_token() == 2 * shape.n_layers * shape.n_kv_heads * shape.head_dim * 4


def test_the_two_models_have_their_real_shapes(gemma, smollm2):
    g, s = kv_shape_of(gemma.model.config), kv_shape_of(smollm2.model.config)
    assert (g.n_layers, g.n_heads, g.n_kv_heads, g.head_dim, g.variant) == (18, 4, 1, 256, "mqa")
    assert (g.n_sliding, g.window) == (15, 512)
    assert (s.n_layers, s.n_heads, s.n_kv_heads, s.head_dim, s.variant) == (30, 9, 3, 64, "gqa")
    assert g.bytes_per_token() == 36_864 and g.mha_bytes_per_token() == 4 * 36_864
    assert s.bytes_per_token() == 46_080 and s.mha_bytes_per_token() == 3 * 46_080


def test_gemmas_sliding_layers_keep_their_window_in_the_real_cache(gemma):
    shape = kv_shape_of(gemma.model.config)
    ids = torch.tensor([[2] + [(i % 500) + 1000 for i in range(599)]])  # (1, 600): past the 512-token window
    with torch.inference_mode():
        cache = gemma.model(input_ids=ids, use_cache=True).past_key_values
    kept = [s[2] for s in cache_shapes(cache)]
    types = gemma.model.config.layer_types
    assert kept == [511 if kind == "sliding_attention" else 600 for kind in types]
    assert cache_nbytes(cache) == shape.cache_bytes(600) < shape.bytes_per_token() * 600


def test_the_formula_without_a_model():
    mha = KVShape(n_layers=2, n_heads=4, n_kv_heads=4, head_dim=16)
    assert mha.variant == "mha" and mha.bytes_per_token() == 2 * 2 * 4 * 16 * 4 == mha.mha_bytes_per_token()
    gemma_like = KVShape(18, 4, 1, 256, bytes_per_value=2, n_sliding=15, window=512)
    assert gemma_like.cache_bytes(100) == 2 * 18 * 256 * 2 * 100
    assert gemma_like.cache_bytes(1000) == 2 * 256 * 2 * (3 * 1000 + 15 * 511)
    shape = kv_shape_of({"num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3,
                         "hidden_size": 576})
    assert (shape.head_dim, shape.variant, shape.n_sliding, shape.window) == (64, "gqa", 0, None)


# ---------------------------------------------------------------- prompts
def test_a_chinese_prompt_is_read_and_continued(gemma):
    prompt = "我今天在图书馆学习"
    trace = generate_real(gemma, prompt, RealGenSettings(n_new=8, temperature=0.0))
    assert trace.text.startswith(prompt) and trace.continuation and trace.text == prompt + trace.continuation
    assert "".join(trace.prompt_labels).replace("▁", "").endswith("图书馆学习")
    assert CJK.search(trace.continuation), trace.continuation  # it writes on in Chinese
    assert not any("Ã" in x or "æ" in x for x in trace.prompt_labels)  # readable labels, no mojibake


def test_a_chinese_prompt_on_the_english_model_is_read_byte_by_byte(smollm2):
    trace = generate_real(smollm2, "你好，世界", RealGenSettings(n_new=3, temperature=0.0))
    assert trace.text.startswith("你好") and len(trace.steps) == 3
    assert any(x.startswith("⟨") for x in trace.prompt_labels) or "你" in trace.prompt_labels


def test_a_long_prompt_is_cut_and_the_new_tokens_bounded(smollm2):
    trace = generate_real(smollm2, "word " * 300, RealGenSettings(n_new=500, temperature=0.0))
    assert trace.cut and len(trace.prompt_ids) == MAX_PROMPT_TOKENS and trace.n_prompt_typed > MAX_PROMPT_TOKENS
    assert len(trace.steps) <= 64


@pytest.mark.parametrize("name", ["gemma", "smollm2"])
def test_a_long_prompt_keeps_its_end_and_its_start_of_text_token(request, name):
    """The model continues the text from where it stops: a paragraph's last tokens are read, not its first."""
    m = request.getfixturevalue(name)
    prompt = " ".join(f"line {i} of the story." for i in range(60)) + " And then the robot"
    ids, n_typed = encode_prompt(m, prompt, max_tokens=40)
    whole = list(m.tokenize(prompt, add_special_tokens=True)["input_ids"])
    assert n_typed == len(whole) > 40 and len(ids) == 40
    bos = m.tokenizer.bos_token_id
    head = [bos] if bos is not None and whole[0] == bos else []
    assert ids == head + whole[-(40 - len(head)):]
    assert m.tokenizer.decode(ids[len(head):]).endswith("And then the robot")
    assert (name == "gemma") == bool(head)  # Gemma's text starts with <bos>; SmolLM2 adds none


def test_bad_input_is_an_input_error(smollm2):
    with pytest.raises(InputError) as empty:
        generate_real(smollm2, "   ")
    assert empty.value.code == "lm.real_empty"
    with pytest.raises(InputError) as bad:
        generate_real(smollm2, "Hello", RealGenSettings(top_p=0.0))
    assert bad.value.code == "lm.real_bad_settings"


def test_the_end_of_text_tokens(gemma, smollm2):
    assert gemma.tokenizer.eos_token_id in eos_ids(gemma) and 106 in eos_ids(gemma)  # <eos>, <end_of_turn>
    assert smollm2.tokenizer.eos_token_id in eos_ids(smollm2)


# ---------------------------------------------------------------- the step figure (no model)
def test_the_step_figure_shows_token_labels_as_typed_and_pads_later_keys():
    from tests.conftest import plotly_array
    from viz_core.plots.lm import generation_steps
    hostile = ["<b>x</b>", "a&b", "▁的"]
    rows = [np.full((2, 3 + k), 1 / (3 + k), dtype=np.float32) for k in range(2)]  # K = 2 steps, R = 2 rows
    fig = generation_steps(np.array([[0.6, 0.3, 0.1], [0.5, 0.4, 0.1]]), np.array([[0.7, 0.3, 0], [1, 0, 0]]),
                           [hostile, hostile[::-1]], [1, -1], rows, ["L0", "L1"], hostile + ["<i>y</i>"], 1,
                           titles=["s1", "s2"], bars_title="step {step}", x_prob="p", y_token="token", model_name="m",
                           sampled_name="s", x_key="key", y_head="layer", value_name="w")
    spec = fig.to_plotly_json()
    assert spec["layout"]["yaxis"]["ticktext"] == ["▁的", "a&amp;b", "&lt;b&gt;x&lt;/b&gt;"]  # step 2: none chosen
    assert spec["frames"][0]["layout"]["yaxis"]["ticktext"][1] == "[a&amp;b]"  # step 1 chose its second token
    assert "&lt;i&gt;y&lt;/i&gt;" in spec["layout"]["xaxis2"]["ticktext"]
    first = plotly_array(spec["frames"][0]["data"][2]["z"])
    assert first.shape == (2, 4) and np.isnan(first[:, 3]).all() and np.allclose(first[:, :3], 1 / 3)
