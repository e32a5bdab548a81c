"""A model shared by every session stays read-only under concurrency: one thread's hooks never see
another thread's forward pass, and the shared tokenizer never gives one thread another's truncation setting.

Tiny random BERT (from a config, the packaged MiniLM tokenizer) with a 64-position limit, so that long and short
texts mix truncated and untruncated encodings; 8 threads at once, each result compared with the same call made
alone."""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer, BertConfig, BertModel

from viz_core import pretrained
from viz_core.runtime.hooks import thread_hooks
from viz_core.pretrained.policy import ModelPolicy

WORDS = "the cat sat on a mat while seven dogs ran past an old red barn near the river".split()


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    path = tmp_path_factory.mktemp("bert")
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=64)
    BertModel(cfg).save_pretrained(path, safe_serialization=True)
    AutoTokenizer.from_pretrained(pretrained.default_model_path()).save_pretrained(path)
    return pretrained.load_model(str(path), policy=ModelPolicy(allow_local=True))


def texts() -> list[str]:
    rng = np.random.default_rng(0)
    out = []
    for i in range(48):
        n = 3000 if i % 3 == 0 else int(rng.integers(3, 40))  # a third far over the 64-token limit
        out.append(" ".join(rng.choice(WORDS, n)))
    return out


def test_concurrent_extractions_equal_the_same_calls_made_alone(tiny_bert):
    alone = {t: pretrained.attention_for(tiny_bert, t) for t in texts()}
    with ThreadPoolExecutor(8) as pool:
        together = list(pool.map(lambda t: (t, pretrained.attention_for(tiny_bert, t)), texts() * 2))
    for text, r in together:
        ref = alone[text]
        assert r.tokens == ref.tokens and r.n_input_tokens == ref.n_input_tokens and r.truncated == ref.truncated
        assert len(r.tokens) <= 64
        np.testing.assert_array_equal(r.weights, ref.weights)  # no other thread's weights copied in


def test_concurrent_qkv_equal_the_same_calls_made_alone(tiny_bert):
    cases = [(t, layer) for t in texts()[:12] for layer in (0, 1)]
    alone = {c: pretrained.qkv_for(tiny_bert, *c) for c in cases}
    with ThreadPoolExecutor(8) as pool:
        together = list(pool.map(lambda c: (c, pretrained.qkv_for(tiny_bert, *c)), cases * 2))
    for case, q in together:
        np.testing.assert_array_equal(q.q, alone[case].q)
        np.testing.assert_array_equal(q.k, alone[case].k)


def test_concurrent_tokenizer_calls_keep_their_own_truncation(tiny_bert):
    long_text, short_text = " ".join(["cat"] * 3000), "the cat sat"
    lengths = {True: [], False: []}

    def encode(truncate: bool) -> None:
        enc = tiny_bert.tokenize(long_text, truncation=truncate, max_length=64 if truncate else None,
                                 verbose=False)
        lengths[truncate].append(len(enc["input_ids"]))
        tiny_bert.tokenize(short_text, truncation=not truncate)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(encode, [i % 2 == 0 for i in range(400)]))
    assert set(lengths[True]) == {64} and set(lengths[False]) == {3002}


def test_thread_hooks_see_only_their_own_thread():
    lin = torch.nn.Linear(2, 2)
    seen: dict[str, list] = {"a": [], "b": []}
    start = threading.Barrier(2)

    def run(name: str, value: float) -> None:
        with thread_hooks(forward=[(lin, lambda _m, args, _out: seen[name].append(float(args[0][0, 0])))]):
            start.wait()
            for _ in range(50):
                lin(torch.full((1, 2), value))

    threads = [threading.Thread(target=run, args=("a", 1.0)), threading.Thread(target=run, args=("b", 2.0))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert seen["a"] == [1.0] * 50 and seen["b"] == [2.0] * 50
    lin(torch.zeros(1, 2))  # outside any block: no hook of anybody's runs
    assert len(seen["a"]) == 50 and len(seen["b"]) == 50


def test_thread_hooks_change_inputs_and_outputs_like_torch_hooks():
    lin = torch.nn.Linear(2, 2, bias=False)
    torch.nn.init.eye_(lin.weight)
    x = torch.tensor([[1.0, 2.0]])
    with thread_hooks(pre=[(lin, lambda _m, args: (args[0] * 10,))],
                      forward=[(lin, lambda _m, _a, out: out + 1)]):
        assert torch.equal(lin(x), torch.tensor([[11.0, 21.0]]))
    with thread_hooks(pre=[(lin, lambda _m, args, kwargs: ((args[0] * 0,), kwargs), True)]):
        assert torch.equal(lin(x), torch.zeros(1, 2))
    assert torch.equal(lin(x), x)  # the blocks are over: the module is as it was
