"""The model catalog (picker entries, which models read a text) and the unknown-token share, checked on tiny random
models built from configs: a BERT with a Chinese vocabulary, Llama and Qwen2 decoders with grouped-query attention
(no downloads)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import LlamaConfig, LlamaModel, Qwen2Config, Qwen2Model

from viz_core.pretrained import catalog
from viz_core.pretrained import load as pretrained
from viz_core.pretrained.policy import DEFAULT_ALLOWED, DEFAULT_MAX_MB, ModelPolicy

from . import tiny_models
from .tiny_models import SENTENCE

LOCAL = ModelPolicy(allow_local=True)


def _save(model, tokenizer, folder):
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    return pretrained.load_model(str(folder), policy=LOCAL)


@pytest.fixture(scope="module")
def chinese_bert(tmp_path_factory):
    """Tiny random BERT whose vocabulary holds every character of SENTENCE but 老师."""
    folder = tiny_models.chinese_bert_folder(tmp_path_factory.mktemp("zh_bert"),
                                             chars=SENTENCE.replace("老", "").replace("师", ""))
    return pretrained.load_model(str(folder), policy=LOCAL)


def _decoder(kind: str, folder):
    """Tiny random Llama / Qwen2 with grouped-query attention: 4 query heads share 2 key/value heads."""
    tok = tiny_models.chinese_tokenizer(folder, SENTENCE)
    torch.manual_seed(0)
    common = dict(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    model = LlamaModel(LlamaConfig(**common)) if kind == "llama" else Qwen2Model(Qwen2Config(**common))
    return _save(model, tok, folder)


@pytest.fixture(scope="module", params=["llama", "qwen2"])
def gqa_decoder(request, tmp_path_factory):
    return _decoder(request.param, tmp_path_factory.mktemp(request.param))


# ---------------------------------------------------------------- the catalog
def test_catalog_entries_are_described_and_the_default_comes_first():
    assert catalog.CATALOG[0].packaged and catalog.CATALOG[0].id == "" and catalog.entry("") is catalog.PACKAGED
    for e in catalog.CATALOG:
        assert e.kind in ("encoder", "decoder", "encoder-decoder") and e.family and e.safetensors
        assert e.languages and set(e.languages) <= set(catalog.LANGUAGES) and 0 < e.size_mb < 2000
    assert len({e.id for e in catalog.CATALOG}) == len(catalog.CATALOG)


def test_every_default_allowed_model_is_in_the_catalog_and_fits_the_cap():
    for model_id in DEFAULT_ALLOWED:
        e = catalog.entry(model_id)
        assert e is not None, model_id
        assert e.size_mb <= DEFAULT_MAX_MB
    ids = catalog.picker_ids(ModelPolicy())
    offline = [e.id for e in catalog.PACKAGED_DECODERS if catalog.installed(e)]
    assert ids[0] == "" and ids[1:1 + len(offline)] == offline and len(ids) == len(DEFAULT_ALLOWED) + 1 + len(offline)
    assert "Qwen/Qwen2.5-0.5B" not in ids  # ~1 GB: above the default size limit, even if allowlisted
    assert "Qwen/Qwen2.5-0.5B" not in catalog.picker_ids(ModelPolicy(allowlist=("Qwen/Qwen2.5-0.5B",)))
    assert "Qwen/Qwen2.5-0.5B" in catalog.picker_ids(ModelPolicy(allowlist=("Qwen/Qwen2.5-0.5B",), max_model_mb=1200))


def test_entry_accepts_the_hub_spellings():
    assert catalog.entry("google-bert/bert-base-chinese").id == "bert-base-chinese"
    assert catalog.entry("BERT-BASE-CHINESE").id == "bert-base-chinese"
    assert catalog.entry("sentence-transformers/all-MiniLM-L6-v2").packaged
    assert catalog.entry("no-such/model") is None


def test_picker_follows_the_operator_allowlist():
    policy = ModelPolicy(allowlist=("gpt2", "my-org/my-model"))
    offline = [e.id for e in catalog.PACKAGED_DECODERS if catalog.installed(e)]  # always offered: no download
    assert catalog.picker_ids(policy) == ["", *offline, "gpt2", "my-org/my-model"]  # unknown ids after the catalog's
    assert not catalog.free_ids(policy)
    assert catalog.free_ids(ModelPolicy(allow_any_hub=True)) and catalog.free_ids(ModelPolicy(allow_local=True))


@pytest.mark.parametrize("text, lang", [(SENTENCE, "zh"), ("The cat sat.", "en"), ("مرحبا بالعالم", "other"),
                                        ("attention 注意力", "zh"), ("", "en")])
def test_text_language(text, lang):
    assert catalog.text_language(text) == lang


def test_models_for_chinese_text_offer_the_offline_model_then_chinese_then_multilingual_models():
    found = catalog.models_for(SENTENCE, ModelPolicy())
    ids = [e.id for e in found]
    assert ids[0] == "gemma3-270m"  # packaged, reads Chinese: works offline, offered first
    assert ids[1] == "bert-base-chinese"
    assert "sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2" in ids
    assert all(e.reads("zh") for e in found) and "gpt2" not in ids and "" not in ids and "smollm2-135m" not in ids
    assert [e.id for e in catalog.models_for(SENTENCE, ModelPolicy(allowlist=("gpt2",)))] == ["gemma3-270m"]
    arabic = [e.id for e in catalog.models_for("مرحبا", ModelPolicy())]
    assert arabic and all("multi" in catalog.entry(i).languages for i in arabic)


@pytest.mark.parametrize("n, total, many", [(17, 23, True), (0, 23, False), (1, 23, False), (3, 100, True),
                                            (2, 10, True), (1, 10, False), (0, 0, False)])
def test_unknown_share_threshold(n, total, many):
    assert catalog.many_unknown(n, total) is many
    assert catalog.unknown_share(n, total) == (n / total if total else 0.0)


def test_fake_cache_entry_loads_offline(tmp_path, monkeypatch):
    """A model in the hub cache loads with the network off (the path the page's 'Use bert-base-chinese' takes)."""
    from huggingface_hub import constants
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tiny_models.fake_hub_cache(tmp_path)))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert catalog.is_cached("bert-base-chinese")
    m = pretrained.load_model("bert-base-chinese", policy=ModelPolicy())
    r = pretrained.attention_for(m, SENTENCE)
    assert (m.name, r.n_unknown, r.n_text_tokens) == ("bert-base-chinese", 0, 23)


def test_cache_lookup(tmp_path, monkeypatch):
    from huggingface_hub import constants
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    assert catalog.is_cached("") and not catalog.is_cached("bert-base-chinese")
    snap = tmp_path / "models--google-bert--bert-base-chinese" / "snapshots" / "abc"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text("{}")
    assert catalog.is_cached("bert-base-chinese") and catalog.is_cached("google-bert/bert-base-chinese")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert catalog.hub_offline_forced()
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    assert not catalog.hub_offline_forced()


# ---------------------------------------------------------------- unknown tokens on real tokenizers
def test_default_model_cannot_read_the_chinese_sentence(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    r = pretrained.attention_for(pretrained.load_model(), SENTENCE)
    assert (r.n_unknown, r.n_text_tokens) == (17, 23)
    assert catalog.many_unknown(r.n_unknown, r.n_text_tokens)


def test_chinese_vocabulary_reads_the_sentence(chinese_bert):
    r = pretrained.attention_for(chinese_bert, SENTENCE)
    assert r.tokens[1:-1] == [c if c not in "老师" else "[UNK]" for c in SENTENCE]
    assert (r.n_unknown, r.n_text_tokens) == (2, 23) and not catalog.many_unknown(2, 23)
    assert r.weights.shape == (2, 4, 25, 25)
    np.testing.assert_allclose(r.weights.sum(-1), 1.0, atol=1e-5)


# ---------------------------------------------------------------- modern decoders: grouped-query attention
def test_gqa_decoder_attention_is_causal_per_query_head(gqa_decoder):
    m = gqa_decoder
    assert m.kind == "decoder" and not m.supports_pair and (m.n_layers, m.n_heads) == (2, 4)
    assert m.model.config.num_key_value_heads == 2 and m.model.config._attn_implementation == "eager"
    r = pretrained.attention_for(m, SENTENCE)
    n = len(r.tokens)
    assert r.weights.shape == (2, 4, n, n) and r.weights.dtype == np.float32   # one map per QUERY head
    np.testing.assert_allclose(r.weights.sum(-1), 1.0, atol=1e-5)
    assert np.all(np.triu(r.weights, 1) == 0)                                 # no query sees a later key
    assert not np.allclose(r.weights[0, 0], r.weights[0, 1])                  # heads sharing K still differ (own Q)
    assert r.n_unknown == 0


def test_gqa_streaming_equals_output_attentions(gqa_decoder):
    m = gqa_decoder
    enc = m.tokenizer(SENTENCE, return_tensors="pt")
    streamed = pretrained._forward_streaming(m, enc)
    assert streamed is not None, "the hook path should handle this architecture"
    with torch.no_grad():
        own = torch.cat(m.model(**enc, output_attentions=True).attentions).numpy()
    np.testing.assert_array_equal(streamed, own)


def test_gqa_layer0_equals_manual_attention_with_shared_keys(gqa_decoder):
    """Layer 0 by hand: q_h = x W_q, k and v from 2 kv heads repeated to 4 query heads, RoPE, causal softmax."""
    m = gqa_decoder
    ids = m.tokenizer("the cat sat", return_tensors="pt")["input_ids"]
    r = pretrained.attention_for(m, "the cat sat")
    layer = m.model.layers[0]
    with torch.no_grad():
        x = layer.input_layernorm(m.model.embed_tokens(ids))                  # (1, N, d_model)
        n, d_k = ids.shape[1], 8
        q = layer.self_attn.q_proj(x).view(1, n, 4, d_k).transpose(1, 2)      # (1, 4, N, d_k)
        k = layer.self_attn.k_proj(x).view(1, n, 2, d_k).transpose(1, 2)      # (1, 2, N, d_k)
        cos, sin = m.model.rotary_emb(x, torch.arange(n)[None])
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        k = k.repeat_interleave(2, dim=1)                                     # (1, 4, N, d_k): kv head j serves 2j, 2j+1
        s = q @ k.transpose(-1, -2) / d_k ** 0.5
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
        manual = torch.softmax(s, dim=-1)[0]                                  # (4, N, N)
    np.testing.assert_allclose(r.weights[0], manual.numpy(), atol=1e-5)
