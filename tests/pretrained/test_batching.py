"""Group commit (viz_core.pretrained.batching): who runs which pass, and a shared pass's maps against passes alone."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import torch

from viz_core.pretrained import attention_for, load
from viz_core.pretrained.batching import BatchLimits, GroupCommit

from .test_lens import bpe, models  # noqa: F401 - the tiny decoders (GPT-2, Llama with GQA, Qwen2)

SENTENCES = ["the cat sat on the mat", "a dog ran", "attention is all you need and the dog ran in the park",
             "我 今天 学习 注意力"]


# ---------------------------------------------------------------- the protocol, with a fake pass
class Recorder:
    """run(items) -> [item * 10]; the first pass waits for `release` so that others queue behind it."""

    def __init__(self, fail_on=None):
        self.batches: list[list[int]] = []
        self.release = threading.Event()
        self.started = threading.Event()
        self.fail_on = fail_on

    def __call__(self, items: list[int]) -> list[int]:
        self.batches.append(list(items))
        self.started.set()
        self.release.wait(5)
        if self.fail_on in items:
            raise ValueError(f"bad item {self.fail_on}")
        return [i * 10 for i in items]


def _submit_all(gc: GroupCommit, items: list[int], gate=None) -> dict:
    """Submit items[0] first; once its pass has started, the others together; returns item -> answer or error."""
    answers: dict = {}

    def one(i):
        try:
            answers[i] = gc.submit(i, gate) if gate else gc.submit(i)
        except ValueError as exc:
            answers[i] = exc

    first = threading.Thread(target=one, args=(items[0],))
    first.start()
    assert gc._run.started.wait(5)
    rest = [threading.Thread(target=one, args=(i,)) for i in items[1:]]
    for th in rest:
        th.start()
    deadline = time.monotonic() + 5
    while len(gc._pending) < len(rest) and time.monotonic() < deadline:  # every late request is in line
        time.sleep(0.005)
    gc._run.release.set()
    for th in [first, *rest]:
        th.join(5)
    return answers


def test_alone_a_request_runs_at_once_as_a_batch_of_one():
    rec = Recorder()
    rec.release.set()
    gc = GroupCommit(rec, size=lambda i: 1)
    assert gc.submit(3) == 30 and rec.batches == [[3]] and gc.passes == 1 and gc.batched == 0


def test_requests_that_arrive_during_a_pass_share_the_next_one():
    rec = Recorder()
    gc = GroupCommit(rec, size=lambda i: 1)
    answers = _submit_all(gc, [1, 2, 3, 4, 5])
    assert answers == {i: i * 10 for i in range(1, 6)}
    assert rec.batches[0] == [1] and sorted(rec.batches[1]) == [2, 3, 4, 5] and len(rec.batches) == 2
    assert gc.batched == 4 and not gc._pending and not gc._leading


def test_only_a_pass_holds_the_gate():
    rec, entered = Recorder(), []

    class Gate:
        def __enter__(self):
            entered.append(1)

        def __exit__(self, *exc):
            return False

    gc = GroupCommit(rec, size=lambda i: 1)
    _submit_all(gc, [1, 2, 3, 4], gate=Gate)
    assert len(entered) == len(rec.batches) == 2  # waiting requests enter nothing


def test_limits_keep_long_requests_alone_and_bound_the_padded_rows():
    rec = Recorder()
    gc = GroupCommit(rec, size=lambda i: i, limits=BatchLimits(max_batch=3, max_padded_tokens=40,
                                                              max_tokens_each=20))
    answers = _submit_all(gc, [1, 30, 5, 6, 7, 12, 2])
    assert answers == {i: i * 10 for i in (1, 30, 5, 6, 7, 12, 2)}
    for batch in rec.batches:
        assert len(batch) <= 3 and (batch == [30] or 30 not in batch)
        assert max(batch) * len(batch) <= 40 or len(batch) == 1
    assert sorted(sum(rec.batches, [])) == [1, 2, 5, 6, 7, 12, 30]


def test_a_failing_request_fails_alone():
    rec = Recorder(fail_on=3)
    gc = GroupCommit(rec, size=lambda i: 1)
    answers = _submit_all(gc, [1, 2, 3, 4])
    assert answers[1] == 10 and answers[2] == 20 and answers[4] == 40
    assert isinstance(answers[3], ValueError) and "bad item 3" in str(answers[3])
    assert not gc._pending and not gc._leading  # the next arrival leads


def test_a_gate_that_fails_passes_the_lead_on():
    rec = Recorder()
    rec.release.set()
    gc = GroupCommit(rec, size=lambda i: 1)

    class Broken:
        def __enter__(self):
            raise RuntimeError("no slot")

        def __exit__(self, *exc):
            return False

    with pytest.raises(RuntimeError, match="no slot"):
        gc.submit(1, Broken)
    assert not gc._pending and not gc._leading and gc.submit(2) == 20


# ---------------------------------------------------------------- a shared pass's maps
def _alone(m, text):
    return attention_for(m, text).weights


@pytest.mark.parametrize("name", ["gpt2", "llama", "qwen2"])
def test_a_shared_pass_gives_each_sentence_its_own_maps(models, name):  # noqa: F811
    m = models[name][0]
    ids = [m.tokenize(s, return_tensors="pt")["input_ids"][0] for s in SENTENCES]
    assert len({len(x) for x in ids}) > 1  # padding is exercised
    shared = load._decoder_pass(m, ids)
    for text, got, x in zip(SENTENCES, shared, ids):
        want = _alone(m, text)
        assert got.shape == want.shape == (m.n_layers, m.n_heads, len(x), len(x))
        np.testing.assert_allclose(got, want, atol=1e-6)


def test_concurrent_visitors_get_their_own_maps(models):  # noqa: F811
    """Eight threads asking at once through a gate: each answer equals its sentence's pass alone, and some passes
    were shared."""
    m = models["llama"][0]
    want = {s: _alone(m, s) for s in SENTENCES}
    gate_lock = threading.Semaphore(1)

    class Gate:
        def __enter__(self):
            gate_lock.acquire()
            time.sleep(0.02)  # a slow pass, so that the others arrive while it runs

        def __exit__(self, *exc):
            gate_lock.release()

    got: dict[int, tuple] = {}
    start = threading.Barrier(8)

    def visitor(i):
        text = SENTENCES[i % len(SENTENCES)]
        start.wait()
        got[i] = (text, attention_for(m, text, gate=Gate).weights)

    threads = [threading.Thread(target=visitor, args=(i,)) for i in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(30)
    assert len(got) == 8
    for text, w in got.values():
        np.testing.assert_allclose(w, want[text], atol=1e-6)
    assert m._batcher.batched >= 2


@pytest.mark.slow
@pytest.mark.parametrize("which", ["gemma", "smollm2"])
def test_a_shared_pass_on_the_packaged_decoders(request, which):
    """The real decoders: Gemma's sliding-window layers and QK-norm, SmolLM2's GQA, right-padded in one pass."""
    m = request.getfixturevalue(which)
    texts = ["The capital of France is", "我今天在图书馆学习注意力机制。", "The cat sat on the mat. The cat sat on the"]
    ids = [m.tokenize(s, return_tensors="pt")["input_ids"][0] for s in texts]
    with torch.inference_mode():
        shared = load._decoder_pass(m, ids)
    for text, got in zip(texts, shared):
        np.testing.assert_allclose(got, _alone(m, text), atol=2e-5)
