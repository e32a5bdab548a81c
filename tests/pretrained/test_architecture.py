"""viz_core.pretrained.architecture: attention variant, positions, norm and its place from tiny transformers configs
(and, where a model is given, its module classes)."""
from __future__ import annotations

import subprocess
import sys

import pytest
from transformers import (BertConfig, FalconConfig, GPT2Config, GPTBigCodeConfig, LlamaConfig, MBartConfig,
                          OPTConfig, Qwen2Config, T5Config)

from viz_core.pretrained.architecture import MINILM, Architecture, of_config


def _llama(kv: int) -> LlamaConfig:
    return LlamaConfig(vocab_size=50, hidden_size=24, intermediate_size=32, num_hidden_layers=1,
                       num_attention_heads=6, num_key_value_heads=kv)


@pytest.mark.parametrize("config, expected", [
    (GPT2Config(n_embd=32, n_layer=1, n_head=4), ("gpt2", 4, 4, "mha", "learned", "layernorm", "pre")),
    (_llama(2), ("llama", 6, 2, "gqa", "rope", "rmsnorm", "pre")),
    (_llama(1), ("llama", 6, 1, "mqa", "rope", "rmsnorm", "pre")),
    (_llama(6), ("llama", 6, 6, "mha", "rope", "rmsnorm", "pre")),
    (Qwen2Config(hidden_size=32, num_attention_heads=4, num_key_value_heads=2),
     ("qwen2", 4, 2, "gqa", "rope", "rmsnorm", "pre")),
    (BertConfig(hidden_size=32, num_attention_heads=4), ("bert", 4, 4, "mha", "learned", "layernorm", "post")),
    (T5Config(d_model=32, num_heads=4), ("t5", 4, 4, "mha", "relative", "rmsnorm", "pre")),
    (GPTBigCodeConfig(n_embd=32, n_head=4), ("gpt_bigcode", 4, 1, "mqa", "learned", "layernorm", "pre")),
    (FalconConfig(hidden_size=32, num_attention_heads=4, multi_query=True), ("falcon", 4, 1, "mqa", "rope",
                                                                             "layernorm", "pre")),
    (FalconConfig(hidden_size=32, num_attention_heads=4, multi_query=False, alibi=True),
     ("falcon", 4, 4, "mha", "alibi", "layernorm", "pre")),
    (OPTConfig(hidden_size=32, num_attention_heads=4, do_layer_norm_before=False),
     ("opt", 4, 4, "mha", "learned", "layernorm", "post")),
    (MBartConfig(d_model=32, encoder_attention_heads=4, decoder_attention_heads=4),
     ("mbart", 4, 4, "mha", "learned", "layernorm", "pre")),
])
def test_of_config(config, expected):
    a = of_config(config)
    assert (a.family, a.n_heads, a.n_kv_heads, a.variant, a.positions, a.norm, a.norm_place) == expected


class Plain:
    """A config of a family nobody knows."""
    model_type = "mystery"
    num_attention_heads = 8


def test_module_classes_decide_the_norm():
    from transformers import GPT2Model, LlamaModel, T5Model
    llama = _llama(2)
    assert of_config(llama, LlamaModel(llama)).norm == "rmsnorm"  # LlamaRMSNorm
    gpt2 = GPT2Config(n_embd=32, n_layer=1, n_head=4, vocab_size=50)
    assert of_config(gpt2, GPT2Model(gpt2)).norm == "layernorm"  # torch.nn.LayerNorm
    t5 = T5Config(d_model=32, d_kv=8, d_ff=32, num_heads=4, num_layers=1, vocab_size=50)
    assert of_config(t5, T5Model(t5)).norm == "rmsnorm"  # T5LayerNorm: no mean subtracted
    says_rms = Plain()
    says_rms.rms_norm_eps = 1e-6
    assert of_config(says_rms).norm == "rmsnorm" and of_config(says_rms, GPT2Model(gpt2)).norm == "layernorm"
    assert of_config(Plain()).norm == "unknown" and of_config(Plain(), LlamaModel(llama)).norm == "rmsnorm"


def test_unknown_family():
    a = of_config(Plain())
    assert (a.family, a.n_heads, a.n_kv_heads, a.positions, a.norm, a.norm_place) == ("mystery", 8, 8, "unknown",
                                                                                      "unknown", "unknown")


def test_groups_and_kv_head_of():
    a = Architecture("llama", 9, 3, "rope", "rmsnorm", "pre")
    assert a.variant == "gqa" and a.groups() == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert [a.kv_head_of(i) for i in range(9)] == [0, 0, 0, 1, 1, 1, 2, 2, 2]  # floor(i / (H / H_kv))
    mqa = Architecture("x", 4, 1, "rope", "rmsnorm", "pre")
    assert mqa.variant == "mqa" and mqa.groups() == [[0, 1, 2, 3]] and mqa.kv_head_of(3) == 0
    assert MINILM.variant == "mha" and MINILM.groups() == [[i] for i in range(12)] and MINILM.kv_head_of(7) == 7
    assert Architecture("x", 1, 1, "rope", "rmsnorm", "pre").variant == "mha"  # one head: H_kv = H
    with pytest.raises(ValueError):
        a.kv_head_of(9)
    with pytest.raises(ValueError):
        Architecture("x", 6, 4, "rope", "rmsnorm", "pre")  # 6 query heads cannot share 4 key/value heads evenly


def test_numpy_bert_states_its_architecture_without_torch():
    code = ("import sys; from viz_core.pretrained import bert_numpy; a = bert_numpy.load_default().info.architecture; "
            "print(a == bert_numpy.MINILM, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "False"]
