"""The decoder-only LM: causal attention (against torch's reference), the KV cache (exact for MHA / GQA / MQA),
sampling filters, training and checkpoints."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import viz_core
from viz_core.errors import InputError
from viz_core.lm import DecoderLM, LMConfig, cache_bytes
from viz_core.lm.generate import cache_difference, generate, sampling_probs, time_per_token
from viz_core.lm.training import LMTrainConfig, LMTrainer, Tokenizer, load_lm, load_lm_files, lm_checkpoint_files


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # small models: one torch thread


def tiny(n_kv_heads=None, d_ff=32, vocab=20, max_len=32, seed=0) -> DecoderLM:
    torch.manual_seed(seed)
    return DecoderLM(LMConfig(vocab=vocab, d_model=32, n_heads=4, n_kv_heads=n_kv_heads, n_layers=2, d_ff=d_ff,
                              max_len=max_len)).eval()


# ---------------------------------------------------------------- causal attention
def test_causal_weights_rows_sum_to_one_and_the_future_is_zero():
    model = tiny()
    _, maps = model(torch.randint(0, 20, (3, 12)), capture=True)
    for w in maps.values():  # (B, H, N, N)
        assert w.shape == (3, 4, 12, 12)
        torch.testing.assert_close(w.sum(-1), torch.ones(3, 4, 12))
        assert torch.all(w.triu(diagonal=1) == 0)


@pytest.mark.parametrize("kv", [None, 2, 1])
def test_our_attention_equals_torch_sdpa_is_causal(kv):
    model = tiny(n_kv_heads=kv)
    attn = model.blocks[0].attn
    x = torch.randn(2, 10, 32)
    ours = attn(x, 0, capture={})  # explicit softmax(QK^T/sqrt(d_k) + M) V path
    m = attn.mha
    q = m._split(m.q_proj(x), m.n_heads)
    k = m._expand_kv(m._split(m.k_proj(x), m.n_kv_heads))
    v = m._expand_kv(m._split(m.v_proj(x), m.n_kv_heads))
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(2, 10, 32)
    torch.testing.assert_close(ours, m.o_proj(ref), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(attn(x, 0), ours, atol=1e-5, rtol=1e-5)  # the fused training path agrees


# ---------------------------------------------------------------- KV cache
@pytest.mark.parametrize("kv", [None, 2, 1])
def test_kv_cache_logits_equal_full_recomputation(kv):
    model = tiny(n_kv_heads=kv)
    ids = torch.randint(0, 20, (1, 24), generator=torch.Generator().manual_seed(1)).tolist()[0]
    assert cache_difference(model, ids) < 1e-5
    full, _ = model(torch.tensor([ids]))
    cache = model.new_cache()
    first, _ = model(torch.tensor([ids[:10]]), cache=cache)  # a prompt in one go, then token by token
    rest = [model(torch.tensor([[t]]), cache=cache)[0] for t in ids[10:]]
    torch.testing.assert_close(torch.cat([first] + rest, 1), full, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kv, heads_kept", [(None, 4), (2, 2), (1, 1)])
def test_cache_shapes_and_bytes_follow_the_formula(kv, heads_kept):
    model = tiny(n_kv_heads=kv)
    cache = model.new_cache()
    model(torch.randint(0, 20, (1, 7)), cache=cache)
    assert cache.length == 7 and cache.shapes() == [(1, heads_kept, 7, 8)] * 2
    assert cache.nbytes() == cache_bytes(model.cfg, 7) == 2 * 2 * heads_kept * 7 * 8 * 4


@pytest.mark.parametrize("d_model, heads, kv, layers, batch, length, nbytes", [
    (64, 4, None, 2, 1, 48, 4), (64, 4, 2, 3, 2, 10, 4), (128, 8, 1, 1, 3, 7, 2), (32, 2, 2, 4, 1, 1, 8)])
def test_cache_bytes_equals_the_formula_and_is_the_sum_of_its_layers(d_model, heads, kv, layers, batch, length,
                                                                      nbytes):
    cfg = LMConfig(d_model=d_model, n_heads=heads, n_kv_heads=kv, n_layers=layers)
    h_kv, d_k = kv or heads, d_model // heads
    assert cfg.d_k == d_k
    total = cache_bytes(cfg, length, batch, nbytes)
    assert total == 2 * layers * batch * h_kv * length * d_k * nbytes  # 2 * L * B * H_kv * T * d_k * bytes
    one = cache_bytes(cfg, length, batch, nbytes, n_layers=1)
    assert one == 2 * batch * h_kv * length * d_k * nbytes and layers * one == total


def test_one_layers_cache_bytes_are_what_its_keys_and_values_hold():
    model = tiny(n_kv_heads=2)
    cache = model.new_cache()
    model(torch.randint(0, 20, (3, 5)), cache=cache)
    b, _, t_len, _ = cache.shapes()[0]
    held = cache.k[0].numel() * cache.k[0].element_size() + cache.v[0].numel() * cache.v[0].element_size()
    assert cache_bytes(model.cfg, t_len, batch=b, n_layers=1) == held


def test_generation_with_and_without_cache_is_identical():
    model = tiny(n_kv_heads=2)
    a = generate(model, [1, 2, 3], 12, temperature=0.9, top_k=5, top_p=0.9, seed=3, use_cache=True)
    b = generate(model, [1, 2, 3], 12, temperature=0.9, top_k=5, top_p=0.9, seed=3, use_cache=False)
    assert a.ids == b.ids and len(a.steps) == 12
    for sa, sb in zip(a.steps, b.steps):
        np.testing.assert_allclose(sa.probs, sb.probs, atol=1e-5)
        assert sa.attention.shape == (2, 4, len(sa.attention[0, 0]))
        np.testing.assert_allclose(sa.attention.sum(-1), 1.0, atol=1e-5)
    assert [s[0][2] for s in a.cache_shapes] == list(range(3, 15))  # one more cached token per step


def test_generation_stops_at_the_context_length():
    model = tiny(max_len=8)
    assert len(generate(model, [1, 2, 3], 50).ids) == 8


def test_time_per_token_returns_one_figure_per_length():
    model = tiny(max_len=64)
    for use_cache in (True, False):
        times = time_per_token(model, [4, 16, 63], use_cache, repeats=1)
        assert len(times) == 3 and all(t > 0 for t in times)


# ---------------------------------------------------------------- sampling
def test_sampling_filters():
    z = torch.tensor([3.0, 2.0, 1.0, 0.0])
    assert sampling_probs(z, 0.0).tolist() == [1.0, 0.0, 0.0, 0.0]  # greedy
    torch.testing.assert_close(sampling_probs(z, 1.0), torch.softmax(z, 0))
    k2 = sampling_probs(z, 1.0, top_k=2)
    assert (k2[2:] == 0).all() and abs(float(k2.sum()) - 1) < 1e-6
    p = torch.softmax(z, 0)  # 0.644, 0.237, ...: top-p 0.7 keeps the first two, top-p 0.5 the first only
    assert (sampling_probs(z, 1.0, top_p=0.7) > 0).tolist() == [True, True, False, False]
    assert (sampling_probs(z, 1.0, top_p=0.5) > 0).tolist() == [True, False, False, False]
    assert float(p[0]) > 0.5


# ---------------------------------------------------------------- training and checkpoints
def quick_trainer(task="induction", steps=60):
    cfg = LMTrainConfig(task=task, max_steps=steps, max_seconds=1e9, eval_every=20, force_cpu=True, seq_len=16,
                        min_repeat=4, context=32, batch_size=16)
    return LMTrainer(cfg)


@pytest.mark.parametrize("task", ["induction", "chars"])
def test_a_short_run_reduces_the_loss(task):
    trainer = quick_trainer(task, 80)
    records = list(trainer.run())
    assert records[-1].done and trainer.reason == "steps" and trainer.step == 80
    assert records[-1].loss < records[0].loss
    evals = [r for r in records if r.evaluated]
    if task == "induction":
        assert evals[-1].first_loss is not None and 0 <= evals[-1].induction <= 1
        assert trainer.snapshots and trainer.snapshots[-1].maps.shape == (2, 4, 16, 16)
        assert "ind_map" in trainer.history[-1]
    else:
        assert evals[-1].val_loss < np.log(trainer.tokenizer.size)


def test_stop_request_ends_the_run():
    trainer = quick_trainer(steps=10_000)
    for m in trainer.run():
        trainer.request_stop()
    assert trainer.reason == "stopped" and m.done and trainer.step < 100


def test_checkpoint_round_trip(tmp_path):
    trainer = quick_trainer(steps=40)
    list(trainer.run())
    lm = trainer.language_model()
    lm.save(tmp_path)
    back = load_lm(tmp_path)
    assert back.config == lm.config and back.tokenizer == lm.tokenizer and back.info == lm.info
    assert [s.step for s in back.snapshots] == [s.step for s in lm.snapshots]
    for a, b in zip(lm.model.state_dict().values(), back.model.state_dict().values()):
        assert torch.equal(a, b)
    text = "1 2 3 1 2 3"
    np.testing.assert_array_equal(lm.attention(text).weights, back.attention(text).weights)
    assert not list(tmp_path.glob("*.pt")) and not list(tmp_path.glob("*.pkl"))  # never pickle


def test_damaged_checkpoint_is_an_input_error(tmp_path):
    trainer = quick_trainer(steps=5)
    list(trainer.run())
    files = lm_checkpoint_files(trainer.language_model())
    with pytest.raises(InputError) as err:
        load_lm_files(files | {"model.safetensors": b"junk"})
    assert err.value.code == "lm.ckpt_corrupt"
    with pytest.raises(InputError):
        load_lm(tmp_path / "nothing")


def test_attention_of_text_and_bad_input():
    trainer = quick_trainer(steps=5)
    list(trainer.run())
    lm = trainer.language_model()
    res = lm.attention("3 1 4 1 5")
    assert res.tokens == ["3", "1", "4", "1", "5"] and res.weights.shape == (2, 4, 5, 5)
    for text, code in (("", "lm.empty_text"), (" ".join(["1"] * 17), "lm.too_long"),
                       (" ".join(f"w{i}" for i in range(70)), "lm.too_many_words")):
        with pytest.raises(InputError) as err:
            lm.attention(text)
        assert err.value.code == code
    chars = Tokenizer.for_task(LMTrainConfig(task="chars"))
    assert chars.decode(chars.encode("The cat 小猫")) == "The cat 小猫"


def test_shipped_induction_checkpoint_tells_the_story():
    lm = load_lm(viz_core.CHECKPOINTS_DIR / "lm_induction")
    last = [h for h in lm.history if h.get("evaluated")][-1]
    assert last["induction"] > 0.5 and last["repeat_loss"] < 0.5 * last["first_loss"]
    assert lm.snapshots[0].induction.max() < 0.2 < 0.5 < lm.snapshots[-1].induction.max()
    assert lm.config.d_ff == 0 and lm.config.n_layers == 2  # attention-only, two layers


def test_the_context_window_keeps_the_prompts_end_and_room_for_the_new_tokens():
    from viz_core.lm.generate import context_window
    prompt = list(range(300))
    assert context_window(prompt, 128, 40) == list(range(212, 300))  # 88 read + 40 new = 128 positions
    assert context_window(prompt[:50], 128, 40) == list(range(50))    # a short prompt is read whole
    assert context_window(prompt, 128, 200) == [299]                  # at least the last token


def test_a_run_with_an_induction_target_stops_at_the_evaluation_that_reaches_it():
    reached = LMTrainer(LMTrainConfig(max_steps=200, eval_every=20, target_induction=0.0))
    records = list(reached.run())
    assert reached.reason == "target" and reached.step == 20  # the first evaluation after step 0 reaches 0.0
    assert records[-1].done and records[-1].reason == "target"
    unreachable = LMTrainer(LMTrainConfig(max_steps=40, eval_every=20, target_induction=1.01))
    list(unreachable.run())
    assert unreachable.reason == "steps" and unreachable.step == 40
