"""viz_core.pretrained.lens: the logit lens against the models' own logits and a softmax computed by hand, on tiny
random causal LMs (GPT-2, Llama with GQA, Qwen2) built from configs and loaded through load_model (no downloads)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from viz_core.errors import InputError
from viz_core.pretrained import load as pretrained
from viz_core.pretrained.lens import (LENS_MAX_TOKENS, LogitLens, final_norm, finish_logits, lens_from_readout,
                                     logit_lens_for)
from viz_core.pretrained.policy import ModelPolicy

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # small models: one torch thread

LOCAL = ModelPolicy(allow_local=True)  # tiny models saved to temporary folders
CORPUS = ["the cat sat on the mat", "a dog ran in the park", "attention is all you need",
          "我 今天 学习 注意力"] * 5
TEXT = "the cat sat on the mat and the dog ran"


# ---------------------------------------------------------------- tiny models
@pytest.fixture(scope="module")
def bpe(tmp_path_factory):
    """A byte-level BPE tokenizer (GPT-2's kind) of about 300 tokens, trained on a few sentences in milliseconds."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>"],
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", bos_token="<|endoftext|>")


def _save(model, bpe, folder):
    with torch.no_grad():  # norms away from their identity start, so a missing or doubled norm_f shows
        for name, p in model.named_parameters():
            if "norm" in name or "ln_" in name:
                p.uniform_(0.5, 1.5) if name.endswith("weight") else p.uniform_(-0.5, 0.5)
    model.eval()
    model.save_pretrained(folder, safe_serialization=True)
    bpe.save_pretrained(folder)
    return pretrained.load_model(str(folder), policy=LOCAL)


def _llama_config(vocab: int, tied: bool, kv: int = 2):
    from transformers import LlamaConfig
    return LlamaConfig(vocab_size=vocab, hidden_size=48, intermediate_size=64, num_hidden_layers=2,
                       num_attention_heads=6, num_key_value_heads=kv, max_position_embeddings=128,
                       tie_word_embeddings=tied)


@pytest.fixture(scope="module")
def models(bpe, tmp_path_factory):
    """{name: (LoadedModel, the causal LM it was saved from)}: GPT-2 (tied head, 3 blocks), Llama (GQA 6/2, untied
    head), Qwen2 (GQA 4/2, tied)."""
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM
    v = len(bpe)
    torch.manual_seed(0)
    built = {"gpt2": GPT2LMHeadModel(GPT2Config(vocab_size=v, n_embd=32, n_layer=3, n_head=4, n_positions=128,
                                                bos_token_id=0, eos_token_id=0)),
             "llama": LlamaForCausalLM(_llama_config(v, tied=False)),
             "qwen2": Qwen2ForCausalLM(Qwen2Config(vocab_size=v, hidden_size=32, intermediate_size=64,
                                                   num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                                   max_position_embeddings=128, tie_word_embeddings=True))}
    return {name: (_save(model, bpe, tmp_path_factory.mktemp(name)), model) for name, model in built.items()}


def _own_probs(causal, ids) -> np.ndarray:
    with torch.no_grad():
        return torch.softmax(causal(input_ids=torch.tensor([ids])).logits[0].float(), -1).numpy()  # (N, V)


# ---------------------------------------------------------------- the Hugging Face adapter
@pytest.mark.parametrize("name", ["gpt2", "llama", "qwen2"])
def test_last_row_is_the_models_own_prediction(models, name):
    m, causal = models[name]
    lens = logit_lens_for(m, TEXT, k=4)
    n = len(lens.tokens)
    assert lens.n_rows == m.n_layers + 1 and lens.n_blocks == m.n_layers and lens.k == 4
    assert lens.top_ids.shape == lens.top_probs.shape == lens.top_tokens.shape == (m.n_layers + 1, n, 4)
    assert lens.next_prob.shape == lens.next_rank.shape == (m.n_layers + 1, n - 1)
    assert lens.entropy.shape == (m.n_layers + 1, n) and not lens.truncated
    assert lens.top_ids.dtype == np.int64 and lens.top_probs.dtype == np.float32
    assert lens.ids.tolist() == bpe_ids(m, TEXT) and lens.tokens == pretrained.token_labels(m.tokenizer, lens.ids)
    probs = _own_probs(causal, lens.ids.tolist())  # (N, V)
    top = np.argsort(-probs, axis=-1)[:, :4]  # (N, 4)
    np.testing.assert_array_equal(lens.top_ids[-1], top)
    np.testing.assert_allclose(lens.top_probs[-1], np.take_along_axis(probs, top, -1), atol=1e-5)
    np.testing.assert_allclose(lens.next_prob[-1], probs[np.arange(n - 1), lens.ids[1:]], atol=1e-5)
    np.testing.assert_allclose(lens.entropy[-1], -(probs * np.log2(probs)).sum(-1), atol=1e-4)
    assert np.all(np.diff(lens.top_probs, axis=-1) <= 0)  # most likely first


def bpe_ids(m, text: str) -> list[int]:
    return m.tokenizer(text)["input_ids"]


def _middle_row_by_hand(m, ids: list[int], row: int) -> np.ndarray:
    """W_U · norm_f(h_row) computed without the lens: LayerNorm (GPT-2) or RMSNorm (Llama) written out."""
    with torch.no_grad():
        h = m.model(input_ids=torch.tensor([ids]), output_hidden_states=True).hidden_states[row][0].double()
        norm = final_norm(m.model)
        if m.architecture.norm == "layernorm":
            h = F.layer_norm(h, h.shape[-1:], norm.weight.double(), norm.bias.double(), norm.eps)
        else:
            h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + norm.variance_epsilon) * norm.weight.double()
        return (h @ m.lm_head.weight.double().T).numpy()  # (N, V)


@pytest.mark.parametrize("name, row", [("gpt2", 1), ("gpt2", 2), ("llama", 1)])
def test_middle_row_equals_a_full_softmax_by_hand(models, name, row):
    m, _ = models[name]
    lens = logit_lens_for(m, TEXT, k=5)
    ids = lens.ids.tolist()
    logits = _middle_row_by_hand(m, ids, row)  # (N, V)
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    n = len(ids)
    chosen = logits[np.arange(n - 1), ids[1:]]  # (N-1,)
    np.testing.assert_array_equal(lens.next_rank[row], (logits[:-1] > chosen[:, None]).sum(-1))
    np.testing.assert_allclose(lens.next_prob[row], probs[np.arange(n - 1), ids[1:]], rtol=1e-4, atol=1e-7)
    np.testing.assert_array_equal(lens.top_ids[row], np.argsort(-logits, axis=-1)[:, :5])
    np.testing.assert_allclose(lens.top_probs[row], np.sort(probs, -1)[:, ::-1][:, :5], rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(lens.entropy[row], -(probs * np.log2(probs)).sum(-1), atol=1e-4)
    labels = pretrained.token_labels(m.tokenizer, lens.top_ids[row].ravel())
    assert lens.top_tokens[row].ravel().tolist() == labels
    assert lens.next_tokens() == lens.tokens[1:]


def test_first_top1_on_a_model(models):
    lens = logit_lens_for(models["gpt2"][0], TEXT)
    top1 = lens.top_ids[:, :, 0]  # (R, N)
    first = lens.first_top1
    assert first.dtype == np.int64 and first.shape == (len(lens.tokens),) and np.all(first <= lens.n_rows - 1)
    for i, r in enumerate(first):
        assert np.all(top1[r:, i] == top1[-1, i])
        assert r == 0 or top1[r - 1, i] != top1[-1, i]


def test_truncation_reads_the_first_tokens_only(models):
    m, causal = models["llama"]
    long_text = " ".join([TEXT] * 20)
    full = logit_lens_for(m, long_text)
    assert full.truncated and len(full.tokens) == LENS_MAX_TOKENS == full.top_ids.shape[1]
    cut = logit_lens_for(m, long_text, max_tokens=7)
    assert cut.truncated and len(cut.tokens) == 7 and cut.next_prob.shape == (m.n_layers + 1, 6)
    np.testing.assert_array_equal(cut.ids, full.ids[:7])
    np.testing.assert_allclose(cut.top_probs, full.top_probs[:, :7], atol=1e-5)  # causal: later tokens change nothing
    np.testing.assert_allclose(cut.top_probs[-1], np.sort(_own_probs(causal, cut.ids.tolist()), -1)[:, ::-1][:, :5],
                               atol=1e-5)


def test_architecture_and_head_at_load(models):
    gpt2, llama, qwen2 = (models[n][0] for n in ("gpt2", "llama", "qwen2"))
    assert gpt2.lm_head.weight.data_ptr() == gpt2.model.wte.weight.data_ptr()  # tied to the input embeddings
    assert llama.lm_head.weight.data_ptr() != llama.model.embed_tokens.weight.data_ptr()
    torch.testing.assert_close(llama.lm_head.weight, models["llama"][1].lm_head.weight)
    assert (gpt2.architecture.family, gpt2.architecture.variant, gpt2.architecture.positions) == ("gpt2", "mha",
                                                                                                   "learned")
    assert (llama.architecture.variant, llama.architecture.groups()) == ("gqa", [[0, 1, 2], [3, 4, 5]])
    assert (llama.architecture.norm, llama.architecture.norm_place, llama.architecture.positions) == (
        "rmsnorm", "pre", "rope")
    assert (qwen2.architecture.family, qwen2.architecture.n_kv_heads) == ("qwen2", 2)
    assert type(llama.model).__name__ == "LlamaModel"  # the base model, as AutoModel gives it


# ---------------------------------------------------------------- what the lens refuses
def test_base_checkpoint_of_a_tied_model_keeps_its_head(bpe, tmp_path):
    """A GPT2Model checkpoint (no lm_head weights) into GPT2LMHeadModel: the head is the tied input embedding."""
    from transformers import GPT2Config, GPT2LMHeadModel, GPT2Model
    torch.manual_seed(1)
    base = GPT2Model(GPT2Config(vocab_size=len(bpe), n_embd=32, n_layer=2, n_head=4, n_positions=64,
                                bos_token_id=0, eos_token_id=0))
    m = _save(base, bpe, tmp_path)
    assert m.kind == "decoder" and m.lm_head is not None
    causal = GPT2LMHeadModel(base.config).eval()
    causal.transformer.load_state_dict(base.state_dict())
    lens = logit_lens_for(m, TEXT)
    probs = _own_probs(causal, lens.ids.tolist())
    np.testing.assert_allclose(lens.top_probs[-1], np.sort(probs, -1)[:, ::-1][:, :5], atol=1e-5)


def test_untied_base_checkpoint_has_no_head(bpe, tmp_path):
    from transformers import LlamaModel
    torch.manual_seed(2)
    m = _save(LlamaModel(_llama_config(len(bpe), tied=False)), bpe, tmp_path)
    assert m.kind == "decoder" and m.lm_head is None and type(m.model).__name__ == "LlamaModel"
    assert pretrained.attention_for(m, TEXT).weights.shape[:2] == (2, 6)  # attention still works
    with pytest.raises(InputError) as err:
        logit_lens_for(m, TEXT)
    assert err.value.code == "attention.lens_no_head" and err.value.params == {"name": m.name}


def test_encoder_is_refused(bpe, tmp_path):
    from transformers import BertConfig, BertModel
    torch.manual_seed(3)
    m = _save(BertModel(BertConfig(vocab_size=len(bpe), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                   intermediate_size=64, max_position_embeddings=64)), bpe, tmp_path)
    assert m.kind == "encoder" and m.lm_head is None
    assert (m.architecture.family, m.architecture.norm_place) == ("bert", "post")
    with pytest.raises(InputError) as err:
        logit_lens_for(m, TEXT)
    assert err.value.code == "attention.lens_decoder_only" and err.value.params == {"name": m.name}


# ---------------------------------------------------------------- the model-agnostic core
def _lens_of(logits: np.ndarray, ids: list[int], k: int = 2) -> LogitLens:
    """lens_from_readout over fixed logits (R, N, V); labels "t<id>"."""
    return lens_from_readout(lambda r: torch.tensor(logits[r]), len(logits), ids, [f"in{i}" for i in ids],
                             lambda some: [f"t{i}" for i in some], k=k)


def test_core_by_hand():
    logits = np.array([[[2.0, 1.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0], [1.0, 3.0, 2.0, 0.0]]], np.float32)  # (1, 3, 4)
    lens = _lens_of(logits, [3, 1, 2])
    p0 = np.exp([2.0, 1, 1, 0]) / np.exp([2.0, 1, 1, 0]).sum()
    np.testing.assert_allclose(lens.top_probs[0, 0], [p0[0], p0[1]], rtol=1e-6)
    assert lens.top_ids[0, 0, 0] == 0 and lens.top_tokens[0, 0, 0] == "t0"
    np.testing.assert_allclose(lens.next_prob[0], [p0[1], 0.25], rtol=1e-6)
    assert lens.next_rank[0].tolist() == [1, 0]  # a tie shares the better rank: nothing is strictly greater
    np.testing.assert_allclose(lens.entropy[0, 1], 2.0, rtol=1e-6)  # uniform over 4 tokens: 2 bits
    np.testing.assert_allclose(lens.entropy[0, 0], -(p0 * np.log2(p0)).sum(), rtol=1e-6)
    assert lens.tokens == ["in3", "in1", "in2"] and lens.next_tokens() == ["t1", "t2"]
    assert lens.top_tokens.dtype.kind == "U" and lens.ids.dtype == np.int64


def test_core_first_top1_and_one_token():
    winners = [[0, 0, 1], [1, 0, 2], [0, 0, 1], [0, 0, 2]]  # (R=4, N=3): the top-1 id per row and position
    logits = np.zeros((4, 3, 3), np.float32)
    for r, row in enumerate(winners):
        for i, w in enumerate(row):
            logits[r, i, w] = 5.0
    lens = _lens_of(logits, [0, 1, 2])
    assert lens.first_top1.tolist() == [2, 0, 3]  # position 0 settles after a detour; 2 changes at the last row
    one = _lens_of(logits[:, :1], [0])
    assert one.next_prob.shape == one.next_rank.shape == (4, 0) and one.first_top1.tolist() == [2]
    with pytest.raises(ValueError):
        _lens_of(logits, [0, 1, 2], k=0)


@pytest.mark.parametrize("slice_rows", [3, 16, 1000])
def test_slices_give_the_full_softmax(monkeypatch, slice_rows):
    """lens_from_states reads the vocabulary a slice at a time (running max, sums, top k and rank); over any slice
    size it equals lens_from_readout on the whole (N, V) logits, also for rows whose logits span hundreds of nats
    (exponents below EXP_FLOOR) and for a vocabulary that is not a multiple of the slice."""
    from viz_core.pretrained import lens as lens_module
    monkeypatch.setattr(lens_module, "VOCAB_SLICE", slice_rows)
    gen = torch.Generator().manual_seed(3)
    states = torch.randn(3, 5, 8, generator=gen)  # (R, N, d)
    states[1] *= 40  # logits of hundreds: most exponentials far below e^-80
    weight = torch.randn(197, 8, generator=gen).half()  # (V, d), 16 bits as the packaged models hold it
    ids = [5, 17, 196, 0, 42]
    labels = lambda some: [f"t{i}" for i in some]  # noqa: E731
    ours = lens_module.lens_from_states(states, weight, ids, ["x"] * 5, labels, k=4)
    logits = states @ weight.float().T  # (R, N, V)
    full = lens_from_readout(lambda r: logits[r], 3, ids, ["x"] * 5, labels, k=4)
    # ranked by logit (the readout ranks by probability, which underflows to a tie of zeros 100 nats down)
    np.testing.assert_array_equal(ours.top_ids, torch.argsort(logits, -1, descending=True)[..., :4].numpy())
    np.testing.assert_array_equal(ours.next_rank, full.next_rank)
    # Each side computes the logits in its own float32 products (by slices, and whole): a logit of a few hundred nats
    # is exact to about 300 x 2^-24 = 2e-5 nats, and a probability's relative error is its exponent's absolute error.
    np.testing.assert_allclose(ours.top_probs, full.top_probs, rtol=1e-4, atol=1e-30)
    np.testing.assert_allclose(ours.next_prob, full.next_prob, rtol=1e-4, atol=1e-30)
    np.testing.assert_allclose(ours.entropy, full.entropy, rtol=1e-5, atol=1e-5)


def test_finish_logits_as_the_models_do():
    """Gemma 2's soft cap c tanh(x / c), Granite's x / s, Cohere's x * s; other configs leave the logits alone."""
    from types import SimpleNamespace as Config
    x = torch.tensor([[-60.0, -1.0, 0.0, 2.0, 90.0]])
    np.testing.assert_allclose(finish_logits(Config(model_type="gemma2", final_logit_softcapping=30.0), x),
                               30 * np.tanh(x.numpy() / 30), rtol=1e-6)
    np.testing.assert_allclose(finish_logits(Config(model_type="granite", logits_scaling=4.0), x), x / 4)
    np.testing.assert_allclose(finish_logits(Config(model_type="cohere", logit_scale=0.5), x), x * 0.5)
    assert torch.equal(finish_logits(Config(model_type="llama", final_logit_softcapping=None), x), x)
    assert torch.equal(finish_logits(Config(model_type="clip", logit_scale=2.0), x), x)  # not a causal-LM scale


def test_final_norm_is_found_by_name_outside_the_blocks():
    from transformers import GPT2Config, GPT2Model, OPTConfig, OPTModel
    opt = OPTModel(OPTConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, ffn_dim=32, num_attention_heads=2,
                             word_embed_proj_dim=16))
    assert final_norm(opt) is opt.decoder.final_layer_norm  # nested one level down
    gpt2 = GPT2Model(GPT2Config(vocab_size=50, n_embd=16, n_layer=2, n_head=2, bos_token_id=0, eos_token_id=0))
    assert final_norm(gpt2) is gpt2.ln_f  # not h.0.ln_1
    assert final_norm(torch.nn.Sequential(torch.nn.Linear(2, 2))) is None
