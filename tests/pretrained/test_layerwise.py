"""viz_core.pretrained.layerwise: the gradient taken one layer at a time equals autograd's through the whole model,
on tiny random decoders (GPT-2: tuple outputs and position embeddings; Llama: GQA; Gemma 3: sliding-window and full
layers with their own masks and rotary tables, embeddings scaled by sqrt(d)) built from configs."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from viz_core.pretrained.layerwise import layer_blocks, value_and_grad

N, BATCH = 9, 3


def _tiny(name: str):
    from transformers import (Gemma3TextConfig, Gemma3TextModel, GPT2Config, GPT2Model, LlamaConfig, LlamaModel)
    torch.manual_seed(0)
    if name == "gpt2":
        return GPT2Model(GPT2Config(vocab_size=50, n_embd=32, n_layer=3, n_head=4, n_positions=32))
    if name == "llama":
        return LlamaModel(LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=48, num_hidden_layers=3,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32))
    return Gemma3TextModel(Gemma3TextConfig(
        vocab_size=50, hidden_size=32, intermediate_size=48, num_hidden_layers=3, num_attention_heads=2,
        num_key_value_heads=1, head_dim=16, sliding_window=4, max_position_embeddings=32,
        layer_types=["sliding_attention", "sliding_attention", "full_attention"]))


@pytest.mark.parametrize("name", ["gpt2", "llama", "gemma3"])
def test_layer_by_layer_equals_the_whole_backward_pass(name):
    base = _tiny(name).eval().requires_grad_(False)
    base.config._attn_implementation = "eager"
    m = SimpleNamespace(kind="decoder", model=base, name=name, n_heads=base.config.num_attention_heads)
    blocks = layer_blocks(m)
    assert blocks is not None and len(blocks) == 3
    probe = torch.randn(base.config.hidden_size, generator=torch.Generator().manual_seed(1))

    def score_of(outputs):  # f per row: a fixed direction of the last position's normed state, squared
        return (outputs[0].last_hidden_state[:, -1] @ probe) ** 2  # (B,)

    embeds = torch.randn(BATCH, N, base.config.hidden_size, generator=torch.Generator().manual_seed(2))
    inputs = {"attention_mask": torch.ones(BATCH, N, dtype=torch.long)}
    f, grad = value_and_grad(m, blocks, inputs, embeds, score_of)

    x = embeds.clone().requires_grad_(True)
    with torch.enable_grad():
        full = score_of([base(inputs_embeds=x, **inputs, use_cache=False)])
        (expected,) = torch.autograd.grad(full.sum(), x)
    torch.testing.assert_close(f, full.detach(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(grad, expected, rtol=1e-4, atol=1e-6)
    assert grad.abs().sum() > 0


def test_encoders_take_the_whole_backward_pass():
    from transformers import BertConfig, BertModel
    base = BertModel(BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                intermediate_size=48))
    assert layer_blocks(SimpleNamespace(kind="encoder", model=base, name="bert", n_heads=4)) is None
