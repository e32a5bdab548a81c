"""viz_core.pretrained on tiny random models built from configs (no downloads) and on the packaged MiniLM."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer, BertConfig, BertModel, GPT2Config, GPT2Model, T5Config, T5Model

from viz_core.pretrained import load as pretrained
from viz_core.errors import InputError
from viz_core.pretrained.policy import ModelPolicy

LOCAL = ModelPolicy(allow_local=True)  # tiny models saved to temporary folders


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    """The packaged MiniLM tokenizer (a BERT WordPiece tokenizer), reused by every tiny model."""
    path = tmp_path_factory.mktemp("tok")
    AutoTokenizer.from_pretrained(pretrained.default_model_path()).save_pretrained(path)
    return path


def _save(model, tokenizer_dir, tmp_path):
    torch.manual_seed(0)
    model.save_pretrained(tmp_path, safe_serialization=True)
    AutoTokenizer.from_pretrained(tokenizer_dir).save_pretrained(tmp_path)
    return pretrained.load_model(str(tmp_path), policy=LOCAL)


@pytest.fixture(scope="module")
def tiny_bert(tokenizer_dir, tmp_path_factory):
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=64)
    return _save(BertModel(cfg), tokenizer_dir, tmp_path_factory.mktemp("bert"))


@pytest.fixture(scope="module")
def tiny_gpt2(tokenizer_dir, tmp_path_factory):
    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=30522, n_embd=32, n_layer=2, n_head=4, n_positions=64)
    return _save(GPT2Model(cfg), tokenizer_dir, tmp_path_factory.mktemp("gpt2"))


@pytest.fixture(scope="module")
def tiny_t5(tokenizer_dir, tmp_path_factory):
    torch.manual_seed(0)
    cfg = T5Config(vocab_size=30522, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=3, num_heads=4,
                   decoder_start_token_id=0, pad_token_id=0)
    return _save(T5Model(cfg), tokenizer_dir, tmp_path_factory.mktemp("t5"))


def test_bert_extraction_equals_model_and_manual_layer0(tiny_bert):
    m = tiny_bert
    assert (m.kind, m.n_layers, m.n_heads, m.max_tokens, m.supports_pair) == ("encoder", 3, 4, 64, True)
    r = pretrained.attention_for(m, "The cat sat on the mat.")
    assert r.weights.dtype == np.float32 and r.weights.shape == (3, 4, len(r.tokens), len(r.tokens))
    assert r.tokens[0] == "[CLS]" and r.tokens[-1] == "[SEP]" and r.special[0] and r.special[-1]
    np.testing.assert_allclose(r.weights.sum(-1), 1.0, atol=1e-5)
    ids = torch.tensor([m.tokenizer.convert_tokens_to_ids(r.tokens)])
    with torch.no_grad():
        own = m.model(input_ids=ids, output_attentions=True).attentions
        h = m.model.embeddings(input_ids=ids)[0]                                   # (N, d_model)
    np.testing.assert_allclose(r.weights, torch.cat(own).numpy(), atol=1e-6)
    attn = m.model.encoder.layer[0].attention.self
    split = lambda x: x.view(len(r.tokens), 4, 8).transpose(0, 1)  # noqa: E731  (N, 32) -> (H, N, d_k)
    q, k = split(h @ attn.query.weight.T + attn.query.bias), split(h @ attn.key.weight.T + attn.key.bias)
    manual = torch.softmax(q @ k.transpose(-1, -2) / 8 ** 0.5, dim=-1)           # (H, N, N)
    np.testing.assert_allclose(r.weights[0], manual.numpy(), atol=1e-5)


def test_queries_keys_of_every_layer_reproduce_the_weights(tiny_bert, tiny_gpt2):
    texts = ["attention is all you need", "the cat sat"]
    for text, (tokens, q, k) in zip(texts, pretrained.queries_keys_for(tiny_bert, texts)):
        r = pretrained.attention_for(tiny_bert, text)
        assert tokens == r.tokens and q.shape == k.shape == (3, 4, len(tokens), 8)
        s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(8)  # (L, H, N, N)
        w = np.exp(s - s.max(-1, keepdims=True))
        np.testing.assert_allclose(w / w.sum(-1, keepdims=True), r.weights, atol=1e-5)
        np.testing.assert_allclose(q[1], pretrained.qkv_for(tiny_bert, text, layer=1).q, atol=1e-6)
    with pytest.raises(InputError):
        pretrained.queries_keys_for(tiny_gpt2, texts)


def test_qkv_reproduces_weights(tiny_bert):
    qkv = pretrained.qkv_for(tiny_bert, "attention is all you need", layer=1)
    assert qkv.q.shape == qkv.k.shape == qkv.v.shape == (4, len(qkv.tokens), 8)
    s = qkv.q @ qkv.k.transpose(0, 2, 1) / np.sqrt(8)
    w = np.exp(s - s.max(-1, keepdims=True))
    np.testing.assert_allclose(w / w.sum(-1, keepdims=True), qkv.weights, atol=1e-5)
    with pytest.raises(InputError):
        pretrained.qkv_for(tiny_bert, "x", layer=7)


def test_sentence_pair_segments(tiny_bert):
    r = pretrained.attention_for(tiny_bert, "a cat", "a dog")
    assert r.tokens == ["[CLS]", "a", "cat", "[SEP]", "a", "dog", "[SEP]"]
    assert r.segments.tolist() == [-1, 0, 0, -1, 1, 1, -1]


def test_gpt2_is_causal(tiny_gpt2):
    m = tiny_gpt2
    assert m.kind == "decoder" and not m.supports_pair
    r = pretrained.attention_for(m, "one two three four five")
    n = len(r.tokens)
    assert r.weights.shape == (2, 4, n, n)
    assert np.all(r.weights[..., np.triu_indices(n, 1)[0], np.triu_indices(n, 1)[1]] == 0)
    np.testing.assert_allclose(r.weights.sum(-1), 1.0, atol=1e-5)


def test_t5_encoder_decoder_maps(tiny_t5):
    m = tiny_t5
    assert m.kind == "encoder-decoder"
    r = pretrained.attention_for(m, "translate this please", target_text="das hier")
    n, t = len(r.tokens), len(r.decoder_tokens)
    assert r.parts() == ("encoder", "decoder", "cross")
    assert r.weights.shape == (2, 4, n, n)
    assert r.decoder_weights.shape == (3, 4, t, t) and r.cross_weights.shape == (3, 4, t, n)
    assert np.all(np.triu(r.decoder_weights[..., :, :], 1) == 0)
    for w in (r.weights, r.decoder_weights, r.cross_weights):
        np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-5)
    w, q_tok, k_tok, _, _ = r.part("cross")
    assert (len(q_tok), len(k_tok)) == (t, n)


def test_truncation_is_reported(tiny_bert):
    r = pretrained.attention_for(tiny_bert, " ".join(["word"] * 300))
    assert r.truncated and r.n_input_tokens == 302 and len(r.tokens) == 64


@pytest.mark.parametrize("text", ["", "   ", "\x00\x01\x02", None])
def test_empty_text_is_an_input_error(tiny_bert, text):
    with pytest.raises(InputError) as err:
        pretrained.attention_for(tiny_bert, text)
    assert err.value.code == "attention.empty_text"


@pytest.mark.parametrize("text", ["🙂🙂 emoji", "注意力机制", "مرحبا بالعالم", "<script>alert(1)</script>",
                                  "tab\tand\nnewline\x07bell", "[CLS] [SEP] [MASK] [PAD]"])
def test_odd_text_gives_weights(tiny_bert, text):
    r = pretrained.attention_for(tiny_bert, text)
    np.testing.assert_allclose(r.weights.sum(-1), 1.0, atol=1e-5)
    assert r.special.sum() == 2, "typed special-token strings must stay plain text"


def test_unknown_model_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(InputError) as err:
        pretrained.load_model("no-such-org/no-such-model")
    assert err.value.code == "attention.model_not_allowed"
    with pytest.raises(InputError) as err:
        pretrained.load_model("no-such-org/no-such-model", policy=ModelPolicy(allow_any_hub=True))
    assert err.value.code == "attention.model_offline"
    with pytest.raises(InputError) as err:
        pretrained.load_model("bad name; rm -rf /")
    assert err.value.code == "attention.bad_model_name"


def test_default_model_is_packaged_and_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    m = pretrained.load_model()
    assert (m.name, m.kind, m.n_layers, m.n_heads, m.max_tokens) == (pretrained.DEFAULT_MODEL, "encoder", 6, 12, 512)
    assert not m.model.training and not any(p.requires_grad for p in m.model.parameters())
    r = pretrained.attention_for(m, "The cat sat on the mat.")
    assert r.weights.shape[:2] == (6, 12)
    pe = pretrained.position_embeddings(m)
    assert pe.shape == (512, 384)


def test_unknown_tokens_are_counted(monkeypatch, tiny_bert):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    r = pretrained.attention_for(pretrained.load_model(), "我爱自然语言处理，注意力机制很有趣。")
    assert r.unk_token == "[UNK]"
    assert r.n_unknown == r.tokens.count("[UNK]") == 13 and r.n_text_tokens == len(r.tokens) - 2 == 18
    english = pretrained.attention_for(tiny_bert, "The cat sat on the mat.")
    assert english.n_unknown == 0 and english.n_text_tokens == len(english.tokens) - 2
    typed = pretrained.attention_for(tiny_bert, "[UNK] is typed here")  # typed text is split, not the unk token
    assert typed.n_unknown == 0


@pytest.mark.parametrize("fixture", ["tiny_bert", "tiny_gpt2"])
def test_streaming_extraction_equals_output_attentions(fixture, request):
    """The memory-saving hook path copies exactly what output_attentions=True returns."""
    m = request.getfixturevalue(fixture)
    enc = m.tokenizer("a b c d e f g", return_tensors="pt")
    streamed = pretrained._forward_streaming(m, enc)
    assert streamed is not None, "the hook path should handle this architecture"
    with torch.no_grad():
        own = torch.cat(m.model(**enc, output_attentions=True).attentions).numpy()
    np.testing.assert_array_equal(streamed, own)


@pytest.mark.parametrize("fixture", ["tiny_bert", "tiny_gpt2"])
def test_streaming_extraction_ends_the_pass_after_the_last_attention(fixture, request):
    """Nothing after the last layer's attention changes a weight: its feed-forward block never runs."""
    m = request.getfixturevalue(fixture)
    ffns = [mod for name, mod in m.model.named_modules() if name.endswith(("mlp", "intermediate"))]
    assert len(ffns) == m.n_layers
    ran: list[int] = []
    handles = [f.register_forward_hook(lambda *_a, i=i: ran.append(i)) for i, f in enumerate(ffns)]
    try:
        streamed = pretrained._forward_streaming(m, m.tokenizer("a b c d e f g", return_tensors="pt"))
    finally:
        for h in handles:
            h.remove()
    assert streamed is not None and sorted(ran) == list(range(m.n_layers - 1))
