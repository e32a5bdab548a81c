"""An uploaded checkpoint's info, history and snapshots: every value the Train page shows is typed and ranged like what
the trainer writes there, a bad one is refused with a message (English and Chinese) that names it, keys the trainer
never writes are dropped, and a checkpoint the trainer wrote loads back as it was."""
from __future__ import annotations

import json

import pytest
import torch

from viz_core import i18n
from viz_core.errors import InputError
from viz_core.seq2seq.model import ModelConfig
from viz_core.seq2seq.tasks import make_task
from viz_core.seq2seq.checkpoint import (MAX_HISTORY, MAX_STEPS, checkpoint_files, checkpoint_zip, load_checkpoint_files,
                                         read_upload, snapshot_shapes)
from viz_core.seq2seq.training import TrainConfig, Trainer

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # small models: one torch thread

TINY = ModelConfig(d_model=16, n_heads=2, n_enc_layers=1, n_dec_layers=1, d_ff=32)
MARKDOWN = ["**pwnbold**", "[pwnlink](https://evil.example/)", "`code`", "<b>x</b>"]


@pytest.fixture(scope="module")
def trainer() -> Trainer:
    """A short run of the app's own trainer on reverse 3..6: its checkpoint has info, history and snapshots."""
    cfg = TrainConfig(batch_size=16, max_steps=12, target_accuracy=None, eval_every=5, eval_per_length=3)
    t = Trainer(make_task("reverse", min_len=3, max_len=6), TINY, cfg)
    list(t.run())
    return t


@pytest.fixture(scope="module")
def files(trainer) -> dict[str, bytes]:
    return checkpoint_files(trainer.translator())


def edited(files: dict, edit) -> dict:
    config = json.loads(files["config.json"])
    edit(config)
    return dict(files, **{"config.json": json.dumps(config).encode()})  # NaN and Infinity written as JSON allows


def refused(files: dict, field: str) -> InputError:
    """Load files; it must be refused with an InputError whose message names `field`, in English and Chinese."""
    with pytest.raises(InputError) as info:
        load_checkpoint_files(files)
    err = info.value
    assert field in str(err), str(err)
    for lang in i18n.LANGUAGES:
        assert field in i18n.t(err.code, lang, **err.params)
    return err


def info_set(key, value):
    return lambda c: c["info"].update({key: value})


def record_set(i, key, value):
    return lambda c: c["history"][i].update({key: value})


# ---------------------------------------------------------------- the values, one kind of bad at a time
@pytest.mark.parametrize("key,value,code", [
    ("steps", "400", "train.ckpt_field"),              # a text for a number
    ("steps", True, "train.ckpt_field"),               # a bool is not a number
    ("steps", 400.0, "train.ckpt_field"),              # a float for a whole number
    ("steps", None, "train.ckpt_field"),
    ("steps", 10**300, "train.ckpt_range"),
    ("steps", -1, "train.ckpt_range"),
    ("steps", MAX_STEPS + 1, "train.ckpt_range"),
    ("seconds", float("nan"), "train.ckpt_field"),
    ("seconds", float("inf"), "train.ckpt_field"),
    ("seconds", -0.5, "train.ckpt_range"),
    ("seconds", [1.0], "train.ckpt_field"),            # a container for a number
    ("val_exact", "high", "train.ckpt_field"),
    ("val_exact", False, "train.ckpt_field"),
    ("val_exact", 1.5, "train.ckpt_range"),
    ("worst_exact", -0.1, "train.ckpt_range"),
    ("exact_len_4", "x", "train.ckpt_field"),
    ("exact_len_4", {"a": 1}, "train.ckpt_field"),
    ("worst_len", 99, "train.ckpt_range"),             # reverse 3..6 has no input length 99
    ("by_length_n", 0, "train.ckpt_range"),
    ("by_length_step", 2.5, "train.ckpt_field"),
    ("seed", -1, "train.ckpt_range"),
    ("reason", "bored", "train.ckpt_field"),
    ("reason", 3, "train.ckpt_field"),
    ("precision", "fp64", "train.ckpt_field"),
    ("device", "gpu of doom", "train.ckpt_field"),
    ("device", None, "train.ckpt_field"),
    *(("device", text, "train.ckpt_field") for text in MARKDOWN),
    *(("reason", text, "train.ckpt_field") for text in MARKDOWN),
])
def test_a_bad_info_value_is_refused_by_name(files, key, value, code):
    assert refused(edited(files, info_set(key, value)), f"info.{key}").code == code


@pytest.mark.parametrize("key,value,code", [
    ("step", "10", "train.ckpt_field"),
    ("step", True, "train.ckpt_field"),
    ("step", 5.0, "train.ckpt_field"),
    ("step", None, "train.ckpt_field"),
    ("step", 10**300, "train.ckpt_range"),
    ("step", 0, "train.ckpt_range"),
    ("step", -3, "train.ckpt_range"),
    ("loss", float("nan"), "train.ckpt_field"),
    ("loss", float("-inf"), "train.ckpt_field"),
    ("loss", -1.0, "train.ckpt_range"),
    ("loss", "low", "train.ckpt_field"),
    ("loss", [1, 2], "train.ckpt_field"),
    ("token_acc", 1.5, "train.ckpt_range"),
    ("lr", 1e6, "train.ckpt_range"),
    ("tokens_per_s", -1.0, "train.ckpt_range"),
    ("val_exact", "x", "train.ckpt_field"),
    ("val_worst_len", 99, "train.ckpt_range"),
    ("evaluated", "yes", "train.ckpt_field"),
    ("done", 1, "train.ckpt_field"),                   # a number is not a bool
    ("reason", "**stopped**", "train.ckpt_field"),
])
def test_a_bad_history_value_is_refused_by_name(files, key, value, code):
    assert refused(edited(files, record_set(1, key, value)), f"history[1].{key}").code == code


def test_history_steps_must_increase(files):
    def repeat(c):
        c["history"][2]["step"] = c["history"][1]["step"]
    err = refused(edited(files, repeat), "history[2].step")
    assert err.code == "train.ckpt_order"
    err = refused(edited(files, lambda c: c["history"].reverse()), "history[1].step")
    assert err.code == "train.ckpt_order"


@pytest.mark.parametrize("edit,field", [
    (lambda c: c.update(history=c["history"] + [{"step": MAX_STEPS}] * MAX_HISTORY), "history"),  # too many
    (lambda c: c.update(history={"step": 1}), "history"),
    (lambda c: c.update(history="[]"), "history"),
    (lambda c: c["history"].__setitem__(0, [1, 2]), "history[0]"),
    (lambda c: c["history"].__setitem__(0, {str(i): 1 for i in range(100)}), "history[0]"),
    (lambda c: c["history"][0].pop("step"), "history[0].step"),
    (lambda c: c.update(info=[1, 2]), "info"),
    (lambda c: c.update(info="steps"), "info"),
    (lambda c: c.update(info={f"k{i}": 1 for i in range(100)}), "info"),   # too many
])
def test_wrong_containers_and_sizes_are_refused_by_name(files, edit, field):
    assert refused(edited(files, edit), field).code == "train.ckpt_field"


def test_every_message_fills_its_placeholders_in_both_languages(files):
    err = refused(edited(files, record_set(0, "step", 10**300)), "history[0].step")
    assert err.params["value"] == "1.000e+300"  # a huge number is written short, never as 300 digits
    for lang in i18n.LANGUAGES:
        text = i18n.t(err.code, lang, **err.params)
        assert "{" not in text and "1.000e+300" in text and "1000000000" in text


# ---------------------------------------------------------------- what loads
def test_a_checkpoint_the_trainer_wrote_loads_back_as_it_was(trainer, files):
    model = trainer.translator()
    for back in (load_checkpoint_files(files), load_checkpoint_files(read_upload([("c.zip", checkpoint_zip(model))]))):
        assert back.info == model.info and back.history == model.history
        assert [s.step for s in back.snapshots] == [s.step for s in model.snapshots]
        for a, b in zip(model.snapshots, back.snapshots):
            assert a.maps.keys() == b.maps.keys() and all((a.maps[k] == b.maps[k]).all() for k in a.maps)
    assert {"steps", "seconds", "reason", "device", "precision", "val_exact", "seed", "by_length_n", "worst_len",
            "worst_exact", "by_length_step", "exact_len_3", "exact_len_6"} <= set(model.info)


def test_a_run_stopped_before_it_evaluated_loads_with_its_empty_values():
    """None where the trainer had nothing yet (no evaluation: val_exact, val_* of every record), a GQA model."""
    cfg = ModelConfig(d_model=16, n_heads=4, n_kv_heads=2, n_enc_layers=1, n_dec_layers=2, d_ff=32)
    t = Trainer(make_task("addition"), cfg, TrainConfig(batch_size=8, eval_per_length=2, log_every=1))
    run = t.run()
    next(run)
    t.request_stop()
    list(run)
    model = t.translator()
    assert model.info["val_exact"] is None and model.history[0]["val_worst_len"] is None
    back = load_checkpoint_files(checkpoint_files(model))
    assert back.info == model.info and back.history == model.history and len(back.snapshots) == 2


def test_unknown_keys_are_dropped_and_whole_numbers_are_floats_where_floats_belong(files):
    def edit(c):
        c["info"].update(notes="**pwnbold** [pwnlink](https://evil.example/)", seconds=5)
        c["history"][0].update(comment="[pwnlink](https://evil.example/)", loss=2)
    back = load_checkpoint_files(edited(files, edit))
    assert "notes" not in back.info and "comment" not in back.history[0]
    assert back.info["seconds"] == 5.0 and isinstance(back.info["seconds"], float)
    assert isinstance(back.history[0]["loss"], float)


@pytest.mark.parametrize("device", ["cpu", "cuda", "cuda:1", "mps"])
def test_the_devices_the_trainer_names_load(files, device):
    assert load_checkpoint_files(edited(files, info_set("device", device))).info["device"] == device


# ---------------------------------------------------------------- snapshots
def snapshot_file(trainer, change) -> dict[str, torch.Tensor]:
    """The trainer's snapshots as safetensors entries '<step>/<map>', changed by change(entries)."""
    entries = {f"{s.step}/{k}": torch.from_numpy(v).to(torch.float16).contiguous()
               for s in trainer.snapshots for k, v in s.maps.items()}
    change(entries)
    return entries


def first(entries) -> str:
    return next(iter(entries))


@pytest.mark.parametrize("change", [
    lambda e: e.__setitem__("²/" + first(e).split("/", 1)[1], e[first(e)].clone()),    # a digit int() refuses
    lambda e: e.__setitem__("9" * 30 + "/" + first(e).split("/", 1)[1], e[first(e)].clone()),  # beyond any run
    lambda e: e.__setitem__("5/enc.0.self_attn.scores", e[first(e)].clone()),         # a map the model has not
    lambda e: e.pop(first(e)),                                                         # a step without one map
    lambda e: e.__setitem__(first(e), e[first(e)][:, :2, :2].contiguous()),           # a map of another shape
    lambda e: e.__setitem__(first(e), e[first(e)].to(torch.int32)),                    # integers
    lambda e: e.__setitem__(first(e), e[first(e)] * 3 + 1),                           # weights above 1
    lambda e: e.__setitem__(first(e), e[first(e)] * float("nan")),
])
def test_bad_snapshots_are_refused(trainer, files, change):
    from safetensors.torch import save
    bad = dict(files, **{"snapshots.safetensors": save(snapshot_file(trainer, change))})
    err = refused(bad, "snapshots.safetensors")
    assert err.code == "train.ckpt_corrupt"


def test_snapshot_shapes_are_the_probe_examples_attention(trainer):
    shapes = snapshot_shapes(trainer.model_cfg, trainer.task)
    assert {k: v.shape for k, v in trainer.snapshots[-1].maps.items()} == shapes
    assert all(0 <= v.min() and v.max() <= 1 for s in trainer.snapshots for v in s.maps.values())
