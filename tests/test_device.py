"""viz_core.runtime.device and the device-dependent parts of training, checked on the CPU: device choice, autocast off on
the CPU, memory budgets per device, batches moved in blocks (the same batches as step by step), the larger sizes,
and checkpoints that say they were trained on a GPU loading and decoding on a CPU."""
import json
import random
import types
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from viz_core.runtime import device as dev
from viz_core.lm import training as lm_training
from viz_core.lm.training import LMTrainConfig, LMTrainer, load_lm_files, lm_checkpoint_files
from viz_core.seq2seq.model import ModelConfig, Seq2SeqTransformer
from viz_core.seq2seq.tasks import make_task, sample_batch
from viz_core.seq2seq.checkpoint import MEMORY_LIMIT_BYTES, checkpoint_files, load_checkpoint_files
from viz_core.seq2seq.training import TrainConfig, Trainer, Translator, check_fits, fit_config

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture
def fake_cuda(monkeypatch):
    """A machine that reports one CUDA device of 80 GiB with bf16 (nothing is run on it)."""
    props = types.SimpleNamespace(name="Fake GPU", total_memory=80 * 2 ** 30)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda *a: props)
    return props


# ---------------------------------------------------------------- device choice
def test_the_cpu_is_chosen_without_a_gpu_and_when_forced(monkeypatch, fake_cuda):
    assert dev.pick_device().type == "cuda"
    assert dev.pick_device(force_cpu=True).type == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    mps = types.SimpleNamespace(is_available=lambda: True)
    monkeypatch.setattr(torch.backends, "mps", mps)
    assert dev.pick_device().type == "mps" and dev.pick_device(True).type == "cpu"
    mps.is_available = lambda: False
    assert dev.pick_device().type == "cpu" and not dev.has_gpu()


def test_describe_says_which_device_why_and_what_a_run_may_use(fake_cuda):
    gpu = dev.describe("cuda")
    assert (gpu.kind, gpu.name, gpu.why, gpu.mixed) == ("cuda", "Fake GPU", "gpu", True)
    assert gpu.budget == int(dev.GPU_SHARE * 80 * 2 ** 30) and gpu.total == 80 * 2 ** 30
    forced = dev.describe("cpu", forced=True)
    assert (forced.why, forced.mixed, forced.budget) == ("forced", False, dev.CPU_RUN_BYTES)


def test_a_cpu_only_machine_says_there_is_no_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends, "mps", types.SimpleNamespace(is_available=lambda: False))
    info = dev.describe(dev.pick_device(True), forced=True)
    assert (info.kind, info.why, info.budget, info.mixed) == ("cpu", "no_gpu", dev.CPU_RUN_BYTES, False)


# ---------------------------------------------------------------- precision
def test_autocast_is_off_on_the_cpu_and_bf16_on_cuda(fake_cuda):
    layer = torch.nn.Linear(8, 8)
    with dev.autocast("cpu"):
        assert layer(torch.ones(2, 8)).dtype == torch.float32
    assert not torch.is_autocast_enabled("cpu")
    assert dev.precision("cpu") == "float32" and dev.precision("mps") == "float32"
    assert dev.precision("cuda") == "bf16"
    ctx = dev.autocast("cuda")
    assert isinstance(ctx, torch.autocast) and ctx.fast_dtype == torch.bfloat16 and ctx.device == "cuda"


def test_a_training_step_on_the_cpu_runs_in_float32():
    seen = []
    trainer = Trainer(make_task("reverse"), ModelConfig(d_model=16, n_heads=2, n_enc_layers=1, n_dec_layers=1,
                                                        d_ff=32), TrainConfig(max_steps=2, eval_every=1000), "cpu")
    trainer.model.out.register_forward_hook(lambda m, i, out: seen.append(out.dtype))
    trainer._train_step()
    assert seen == [torch.float32]
    assert trainer.translator().info["precision"] == "float32"


# ---------------------------------------------------------------- batches in blocks
def _batches(seed: int):
    rng = np.random.default_rng(seed)
    return lambda: (rng.integers(0, 9, (3, int(rng.integers(2, 6)))), rng.random((2, 2)).astype(np.float32),
                    torch.arange(int(rng.integers(1, 4))))


@pytest.mark.parametrize("block", [1, 3, 32])
def test_batches_in_blocks_are_the_batches_step_by_step(block):
    expected, make = _batches(0), _batches(0)
    batches = dev.DeviceBatches(make, "cpu", block=block)
    for _ in range(70):
        got, want = batches.next(), expected()
        assert len(got) == 3
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.numpy(), np.asarray(w))


def test_pack_and_unpack_give_back_every_array_of_a_block():
    """The path a GPU takes: one flat buffer per dtype, copied once, then views in each array's shape."""
    make = _batches(1)
    block = [tuple(np.asarray(a) for a in make()) for _ in range(5)]
    flat = dev.pack(block)
    assert sorted(map(str, flat)) == ["float32", "int64"]  # one buffer per dtype
    views = dev.unpack({k: torch.from_numpy(v) for k, v in flat.items()}, block)
    for batch, got in zip(block, views):
        for a, g in zip(batch, got):
            assert g.shape == a.shape and g.dtype == torch.from_numpy(a).dtype
            np.testing.assert_array_equal(g.numpy(), a)


def test_the_trainer_trains_on_the_batches_of_its_seed_in_order():
    task = make_task("reverse")
    trainer = Trainer(task, ModelConfig(d_model=16, n_heads=2, n_enc_layers=1, n_dec_layers=1, d_ff=32),
                      TrainConfig(batch_size=8, seed=3), "cpu")
    rng = random.Random(3)
    for _ in range(40):
        got = trainer._batches.next()
        for g, w in zip(got, sample_batch(task, rng, 8)):
            np.testing.assert_array_equal(g.numpy(), w)


def test_character_batches_are_cut_on_the_data_device_as_windows_of_the_corpus():
    trainer = LMTrainer(LMTrainConfig(task="chars", batch_size=4, seed=5), device="cpu")
    data, gen = trainer.data, torch.Generator().manual_seed(11)
    ids = data.batch(4, gen)
    starts = torch.randint(0, len(data.train) - data.context, (4,), generator=torch.Generator().manual_seed(11))
    assert ids.shape == (4, data.context) and ids.device == data.train.device
    for row, s in zip(ids, starts.tolist()):
        assert torch.equal(row, data.train[s: s + data.context])


# ---------------------------------------------------------------- sizes and budgets
def test_memory_budget_follows_the_device(fake_cuda):
    assert dev.memory_budget("cpu") == dev.CPU_RUN_BYTES == MEMORY_LIMIT_BYTES
    assert dev.memory_budget("cuda") == int(dev.GPU_SHARE * fake_cuda.total_memory)
    task, big = make_task("reverse"), ModelConfig(d_model=512, n_heads=8, n_enc_layers=6, n_dec_layers=6,
                                                  d_ff=2048)
    with pytest.raises(Exception) as err:  # too much for a CPU run...
        check_fits(task, big, TrainConfig(batch_size=512, force_cpu=True))
    assert err.value.code == "train.too_big"
    params, need = check_fits(task, big, TrainConfig(batch_size=512))  # ...and it fits on the GPU
    assert need > MEMORY_LIMIT_BYTES and params > 30_000_000


def test_the_character_model_sizes_grow_and_are_checked_against_the_budget(fake_cuda):
    counts = {}
    for size in lm_training.SIZES:
        cfg = LMTrainConfig(task="chars", size=size, force_cpu=True)
        counts[size] = lm_training.check_fits(cfg, limit=1 << 40)[0]
    shipped = json.loads((Path(lm_training.__file__).parents[1] / "checkpoints/lm_chars/config.json").read_text())
    d, heads, layers, ff = lm_training.SIZES["base"]
    assert {k: shipped["model"][k] for k in ("d_model", "n_heads", "n_layers", "d_ff")} == dict(
        d_model=d, n_heads=heads, n_layers=layers, d_ff=ff)  # "base" is the shipped model's size
    assert counts["large"] > 4 * counts["base"] and counts["xl"] > 4 * counts["large"]
    with pytest.raises(Exception) as err:
        lm_training.check_fits(LMTrainConfig(task="chars", size="xl", batch_size=256, force_cpu=True))
    assert err.value.code == "lm.too_big"
    assert lm_training.check_fits(LMTrainConfig(task="chars", size="xl", batch_size=256))[1] > dev.CPU_RUN_BYTES
    with pytest.raises(ValueError):
        LMTrainConfig(task="chars", size="huge")


def test_the_memory_estimate_of_a_character_model_is_not_below_what_a_step_allocates():
    """The estimate is an upper bound of what a training step really holds (measured on the CPU by torch's
    allocator profile would be fragile; the parameter part is exact)."""
    cfg = LMTrainConfig(task="chars", batch_size=8, force_cpu=True)
    trainer = LMTrainer(cfg, device="cpu")
    params, need = lm_training.check_fits(cfg)
    assert params == trainer.n_params
    assert need >= 4 * 4 * params


# ---------------------------------------------------------------- checkpoints across devices
def _tiny_trainer():
    trainer = Trainer(make_task("reverse"), ModelConfig(d_model=16, n_heads=2, n_enc_layers=1, n_dec_layers=1,
                                                        d_ff=32), TrainConfig(max_steps=20, eval_every=10), "cpu")
    for _ in trainer.run():
        pass
    return trainer


def as_if_trained_on_cuda(files: dict[str, bytes]) -> dict[str, bytes]:
    """Checkpoint files whose info says a CUDA run in bf16 wrote them (all a CUDA run's files differ in)."""
    config = json.loads(files["config.json"])
    config["info"] |= {"device": "cuda:0", "precision": "bf16"}
    return files | {"config.json": json.dumps(config).encode()}


def test_a_checkpoint_trained_on_a_gpu_loads_and_decodes_on_the_cpu():
    """What a CUDA run writes differs from a CPU run's only in its info (device, precision): its weights are saved
    from CPU copies, and safetensors stores no device. Loading reads them onto the CPU and decodes there."""
    translator = _tiny_trainer().translator()
    loaded = load_checkpoint_files(as_if_trained_on_cuda(checkpoint_files(translator)))
    assert {p.device.type for p in loaded.model.parameters()} == {"cpu"}
    assert loaded.info["device"] == "cuda:0"
    text = translator.task.example
    assert loaded.translate(text) == translator.translate(text)


def test_a_model_too_large_to_train_on_the_cpu_still_loads_there():
    """A checkpoint is checked for the memory of holding its model and decoding one input, not for the batch it
    was trained with: the GPU preset "large" at batch 512 would not fit a CPU run, and its model loads there."""
    task = make_task("reverse")
    cfg = fit_config(task, ModelConfig(d_model=256, n_heads=8, n_enc_layers=4, n_dec_layers=4, d_ff=1024))
    train_cfg = TrainConfig(batch_size=512)
    with pytest.raises(Exception):
        check_fits(task, cfg, replace(train_cfg, force_cpu=True))
    translator = Translator(Seq2SeqTransformer(cfg), task, train_cfg, info={"device": "cuda", "precision": "bf16"})
    loaded = load_checkpoint_files(checkpoint_files(translator, "float16"))
    assert loaded.train_cfg.batch_size == 512 and loaded.config.d_model == 256
    assert {p.device.type for p in loaded.model.parameters()} == {"cpu"}
    assert isinstance(loaded.translate("1 2 3"), str)


def test_a_language_model_trained_elsewhere_loads_on_the_cpu():
    trainer = LMTrainer(LMTrainConfig(max_steps=3, eval_every=2), device="cpu")
    for _ in trainer.run():
        pass
    lm = trainer.language_model()
    loaded = load_lm_files(as_if_trained_on_cuda(lm_checkpoint_files(lm)))
    assert {p.device.type for p in loaded.model.parameters()} == {"cpu"}
    np.testing.assert_array_equal(loaded.logits("1 2 3"), lm.logits("1 2 3"))
