"""Checkpoints of the small Transformer: writing them (safetensors + JSON, never pickle) and reading them back, with
every check an uploaded checkpoint must pass before anything is built from it.

    files = checkpoint_files(translator)          # {"model.safetensors": ..., "config.json": ..., ...}
    t = load_checkpoint_files(read_upload([("model.zip", data)]))   # InputError saying what is wrong, if anything
    t = load_checkpoint(DIR)                      # also importable from viz_core.seq2seq.training (public API)

viz_core.seq2seq.training imports this module (Translator.save, accuracy_by_length, the public load_checkpoint), so
what this one needs of it (Translator, TrainConfig, Snapshot, estimate_memory) is imported where it is used.
"""
from __future__ import annotations

import json
import logging
import math
import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from ..errors import InputError
from ..io.export import write_files, zip_bytes
from ..io.uploads import parse_json, safetensors_header, zip_members
from ..runtime import budget
from ..runtime.device import CPU_RUN_BYTES
from ..runtime.seeding import unseeded
from ..runtime.training_loop import STOP_REASONS
from .model import ModelConfig, Seq2SeqTransformer, capture_names
from .tasks import Task, make_task

if TYPE_CHECKING:
    from .training import Snapshot, TrainConfig, Translator

MEMORY_LIMIT_BYTES = CPU_RUN_BYTES  # the bound of a checkpoint's model when it is loaded: what a training run on the
                                   # CPU may use
LENGTH_KEY = "exact_len_"  # info["exact_len_<n>"]: held-out exact accuracy at input length n


# ---------------------------------------------------------------- checkpoints (safetensors + JSON, never pickle)
CHECKPOINT_FORMAT = "attention-explorer/train-checkpoint/1"
WEIGHTS, CONFIG, SNAPSHOTS = "model.safetensors", "config.json", "snapshots.safetensors"
MAX_CHECKPOINT_BYTES = 50 * 2 ** 20
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def _state_tensors(t: Translator, dtype: str) -> dict[str, torch.Tensor]:
    tied = t.config.tie_weights
    return {k: v.detach().to("cpu", DTYPES[dtype]).contiguous() for k, v in t.model.state_dict().items()
            if not (tied and k == "out.weight")}


def checkpoint_files(t: Translator, dtype: str = "float32") -> dict[str, bytes]:
    """The checkpoint as {file name: bytes}: weights, JSON config, and the attention snapshots if any."""
    from safetensors.torch import save
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {sorted(DTYPES)}")
    config = {"format": CHECKPOINT_FORMAT, "dtype": dtype,
              "task": {"name": t.task.name, **t.task.params()},
              "vocab": {"src": t.task.src_vocab.itos, "tgt": t.task.tgt_vocab.itos},
              "model": t.config.to_dict(), "train": t.train_cfg.to_dict(), "info": t.info, "history": t.history}
    files = {WEIGHTS: save(_state_tensors(t, dtype), metadata={"format": CHECKPOINT_FORMAT}),
             CONFIG: json.dumps(config, indent=1).encode()}
    if t.snapshots:
        snaps = {f"{s.step}/{k}": torch.from_numpy(np.asarray(v, dtype=np.float16)) for s in t.snapshots
                 for k, v in s.maps.items()}
        files[SNAPSHOTS] = save(snaps)
    return files


def save_checkpoint(t: Translator, out_dir: str | Path, dtype: str = "float32") -> Path:
    return write_files(checkpoint_files(t, dtype), out_dir)


def checkpoint_zip(t: Translator, dtype: str = "float32") -> bytes:
    """The checkpoint files in one zip archive (for a download button)."""
    return zip_bytes(checkpoint_files(t, dtype))


def load_checkpoint(path: str | Path) -> Translator:
    """A checkpoint directory (model.safetensors + config.json) or a .zip of it -> Translator. The server's own
    files (the shipped models, loaded once per server): outside the memory budget, as the pages' code is."""
    path = Path(path)
    if path.is_dir():
        files = {p.name: p.read_bytes() for p in path.iterdir() if p.name in (WEIGHTS, CONFIG, SNAPSHOTS)}
    elif path.is_file():
        files = read_upload([(path.name, path.read_bytes())])
    else:
        raise InputError("train.ckpt_missing", f"no checkpoint at {path}", names=f"{CONFIG}, {WEIGHTS}")
    return load_checkpoint_files(files, budgeted=False)


MAX_UPLOADS = 4  # files in one upload: a zip, or config.json + model.safetensors (+ snapshots.safetensors)

# What a checkpoint may ask the app to build: the ranges the Train page offers (its custom size and training
# controls), a little wider. Checked, with each value's type, before anything is built or read.
MODEL_LIMITS = {"d_model": (1, 1024), "n_heads": (1, 16), "n_kv_heads": (1, 16), "n_enc_layers": (1, 8),
                "n_dec_layers": (1, 8), "d_ff": (1, 4096), "max_len": (1, 256), "src_vocab": (1, 1000),
                "tgt_vocab": (1, 1000), "emb_dropout": (0.0, 0.9), "attn_dropout": (0.0, 0.9),
                "resid_dropout": (0.0, 0.9), "pad_id": (0, 0)}
TRAIN_LIMITS = {"batch_size": (1, 4096), "max_seconds": (0.0, 10.0**7), "max_steps": (1, 10**9),
                "target_accuracy": (0.0, 1.0), "target_patience": (1, 100), "lr_factor": (0.0, 100.0),
                "warmup": (1, 10**6), "beta1": (0.0, 1.0), "beta2": (0.0, 1.0), "eps": (0.0, 1.0),
                "label_smoothing": (0.0, 1.0), "clip_norm": (0.0, 10**6), "eval_every": (1, 10**6),
                "check_every": (0, 10**6), "eval_per_length": (1, 10_000), "log_every": (1, 10**6),
                "max_snapshots": (0, 200), "seed": (0, 2**32 - 1), "threads": (1, 64)}
TASK_PARAMS = ("min_len", "max_len")  # whole numbers, whose range the task itself checks
MAX_HISTORY, MAX_INFO = 10_000, 64  # entries of a checkpoint's training history and of its info table


def read_upload(uploads) -> dict[str, bytes]:
    """Uploaded (name, bytes) pairs -> checkpoint files: either one .zip, or the loose files themselves. At most
    MAX_UPLOADS files and MAX_CHECKPOINT_BYTES in all, a zip's members counted as they inflate."""
    uploads = list(uploads)
    if len(uploads) > MAX_UPLOADS:
        raise InputError("train.ckpt_too_many", f"{len(uploads)} files; upload at most {MAX_UPLOADS}",
                         n=len(uploads), limit=MAX_UPLOADS)
    files: dict[str, bytes] = {}
    left = MAX_CHECKPOINT_BYTES
    for name, data in uploads:
        if len(data) > left:
            raise InputError("train.ckpt_too_large", f"{name} is larger than 50 MiB", name=name)
        if name.lower().endswith(".zip"):
            members = zip_members(name, data, (WEIGHTS, CONFIG, SNAPSHOTS), left)
            left -= sum(map(len, members.values()))
            files.update(members)
        elif Path(name).name in (WEIGHTS, CONFIG, SNAPSHOTS):
            files[Path(name).name] = data
            left -= len(data)
    return files


def load_checkpoint_files(files: dict[str, bytes], budgeted: bool = True) -> Translator:
    """Validate and load {file name: bytes}. Every problem raises InputError saying what is wrong. budgeted: the
    model must fit in the server-wide memory budget too (viz_core.runtime.budget; ServerBusy), as a visitor's upload must.

    Nothing is built before the config has been checked (types, ranges, the memory a model of its size needs,
    the same budget as the Train tab), and no weight is read before the safetensors header has been compared
    with the shapes that config needs. Every value the page shows (info, history, snapshots) is typed and ranged
    like what the trainer writes there."""
    from .training import Translator, estimate_memory
    missing = [n for n in (CONFIG, WEIGHTS) if n not in files]
    if missing:
        raise InputError("train.ckpt_missing", f"the checkpoint needs {CONFIG} and {WEIGHTS}; missing: "
                         f"{', '.join(missing)}", names=", ".join(missing))
    config = _parse_config(files[CONFIG])
    task, model_cfg, train_cfg = _task_and_model(config)
    info, history = checked_info(config["info"], task), checked_history(config["history"], task)
    # the memory to hold the model and decode one input: a model trained on a GPU, with batches no CPU run could
    # hold, still loads on a CPU server when the model itself fits
    need = estimate_memory(model_cfg, 1, task.max_src_len, task.max_tgt_len + 1)
    if need > MEMORY_LIMIT_BYTES:
        raise InputError("train.ckpt_too_big", f"its model needs about {need / 2**20:.0f} MiB",
                         need=f"{need / 2**20:.0f}", limit=f"{MEMORY_LIMIT_BYTES / 2**20:.0f}")
    if budgeted:
        budget.admit(need, "an uploaded model")
    expected = _expected_shapes(model_cfg)
    _check_header(safetensors_header(files[WEIGHTS], WEIGHTS), expected)
    with unseeded():  # initial weights that the checkpoint's replace
        model = Seq2SeqTransformer(model_cfg)
    _load_weights(model, files[WEIGHTS])
    snapshots = _load_snapshots(files.get(SNAPSHOTS), model_cfg, task)
    return Translator(model, task, train_cfg, history, snapshots, info)


def _bad_config(detail: str) -> InputError:
    return InputError("train.ckpt_bad_config", f"{CONFIG} is not a valid checkpoint config: {detail}",
                      detail=detail)


def _parse_config(raw: bytes) -> dict:
    """config.json -> a dict whose sections have the types the loader reads (values are checked later: model and
    train by typed_values, info and history by checked_info / checked_history once the task is known)."""
    config = parse_json(raw, CONFIG)
    if not isinstance(config, dict) or config.get("format") != CHECKPOINT_FORMAT:
        raise _bad_config(f"'format' must be {CHECKPOINT_FORMAT!r}")
    for key in ("task", "model", "vocab"):
        if not isinstance(config.get(key), dict):
            raise _field_error(key, "table")
    for key, kind, default in (("train", dict, {}), ("info", dict, {}), ("history", list, [])):
        config[key] = default if config.get(key) is None else config[key]
        if not isinstance(config[key], kind):
            raise _field_error(key, "table" if kind is dict else "list")
    return config


FIELD_KINDS = {  # what a config value must be, in the visitor's words (English, Chinese)
    "int": ("a whole number", "整数"), "float": ("a finite number", "有限的数字"),
    "bool": ("true or false", "true 或 false"),
    "str": ("a short text", "一段短文本"), "table": ("a table ({...})", "表（{...}）"), "list": ("a list ([...])", "列表（[...]）"),
    "setting": ("a setting this app knows", "本应用认识的设置"), "task": ("a task name", "任务名称"),
    "history": (f"a list of at most {MAX_HISTORY:,} training records (tables)",
                f"最多 {MAX_HISTORY:,} 条训练记录（表）的列表"),
    "info": (f"a table of at most {MAX_INFO} values", f"最多含 {MAX_INFO} 个值的表"),
}


def _field_error(name: str, kind: str) -> InputError:
    en, zh = FIELD_KINDS[kind]
    return InputError("train.ckpt_field", f"{CONFIG}: '{name}' must be {en}", field=name[:60], kind={"en": en, "zh": zh})


def is_number(v) -> bool:
    """A finite int or float, not a bool."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


# ---------------------------------------------------------------- the values the page shows: info and history
# A checkpoint's info and history hold what the trainer wrote (Translator.from_trainer, length_info, Trainer._record),
# and the page computes with them and shows them: each value must have the kind and range the trainer writes (a text
# where the page computes a percentage, or an integer beyond 64 bits in a chart, would break it) and a text must be
# one of the few the trainer writes (never markup). Keys the trainer never writes are dropped: nothing reads them.
MAX_STEPS = TRAIN_LIMITS["max_steps"][1]  # the largest step budget a checkpoint's train config may state
MAX_SECONDS = 10 * TRAIN_LIMITS["max_seconds"][1]  # a run passes its time budget by its last step only
MAX_PER_LENGTH = 10**6  # held-out sequences per input length behind info's accuracies (the CLI's table: 1000)
MAX_LR = TRAIN_LIMITS["lr_factor"][1]  # noam_lr <= factor * d_model^-0.5 * warmup^-0.5 <= factor (both >= 1)


@dataclass(frozen=True)
class Spec:
    """One value of info or of a history record: kind "int", "float" (a whole number is a float too, a bool is
    neither) or "text" (one of `choices`, a regular expression, listed to the visitor as `shown`); a number lies in
    lo..hi; None only where nullable."""
    kind: str
    lo: float = 0
    hi: float = math.inf
    nullable: bool = False
    choices: str = ""
    shown: str = ""


SHARE = Spec("float", 0.0, 1.0)  # an accuracy
SHARE_OR_NONE = Spec("float", 0.0, 1.0, nullable=True)  # an accuracy, None before the first evaluation
STEP = Spec("int", 0, MAX_STEPS)
SECONDS = Spec("float", 0.0, MAX_SECONDS)
FLAG = Spec("bool")
REASON = Spec("text", nullable=True, choices="|".join(STOP_REASONS), shown=", ".join(STOP_REASONS))
DEVICE = Spec("text", choices=r"(cpu|mps|cuda)(:[0-9]{1,2})?", shown="cpu, cuda, cuda:N, mps")  # str(torch.device)
PRECISION = Spec("text", choices="bf16|float32", shown="bf16, float32")  # viz_core.runtime.device.precision


def info_specs(task: Task) -> dict[str, Spec]:
    """{key: Spec} of what Translator.from_trainer and length_info write into info for a model of `task`: lengths
    are the task's input lengths."""
    length = Spec("int", task.lengths[0], task.lengths[-1])
    return {"steps": STEP, "seconds": SECONDS, "reason": REASON, "device": DEVICE, "precision": PRECISION,
            "val_exact": SHARE_OR_NONE, "seed": Spec("int", *TRAIN_LIMITS["seed"]),
            "by_length_n": Spec("int", 1, MAX_PER_LENGTH), "worst_len": length, "worst_exact": SHARE,
            "by_length_step": STEP, **{f"{LENGTH_KEY}{n}": SHARE for n in task.lengths}}


def history_specs(task: Task) -> dict[str, Spec]:
    """{key: Spec} of one history record as Trainer._record writes it (Metrics.to_dict) for a model of `task`:
    a label-smoothed cross-entropy and a throughput are finite and >= 0."""
    return {"step": Spec("int", 1, MAX_STEPS), "seconds": SECONDS, "loss": Spec("float", 0.0),
            "token_acc": SHARE, "lr": Spec("float", 0.0, MAX_LR), "tokens_per_s": Spec("float", 0.0),
            "val_exact": SHARE_OR_NONE, "val_token_acc": SHARE_OR_NONE, "val_worst": SHARE_OR_NONE,
            "val_worst_len": Spec("int", task.lengths[0], task.lengths[-1], nullable=True),
            "evaluated": FLAG, "done": FLAG, "reason": REASON}


def checked_info(info: dict, task: Task) -> dict:
    """info with each value the trainer writes checked against info_specs (other keys dropped). At most MAX_INFO
    entries. Raises InputError naming the first bad value ("info.steps")."""
    if len(info) > MAX_INFO:
        raise _field_error("info", "info")
    return _checked_table(info, info_specs(task), "info")


def checked_history(history: list, task: Task) -> list[dict]:
    """The training history: at most MAX_HISTORY records, each a table of at most MAX_INFO values checked against
    history_specs (other keys dropped), with a step, the steps increasing (the trainer records a step once, in
    order). Raises InputError naming the first bad value ("history[3].loss")."""
    if len(history) > MAX_HISTORY:
        raise _field_error("history", "history")
    specs, out, before = history_specs(task), [], 0
    for i, record in enumerate(history):
        where = f"history[{i}]"
        if not isinstance(record, dict) or len(record) > MAX_INFO:
            raise _field_error(where, "info")
        if "step" not in record:
            raise _field_error(f"{where}.step", "int")
        out.append(_checked_table(record, specs, where))
        if out[-1]["step"] <= before:
            raise InputError("train.ckpt_order", f"{where}.step = {out[-1]['step']} does not follow step {before}",
                             field=f"{where}.step", value=out[-1]["step"], before=before)
        before = out[-1]["step"]
    return out


def _checked_table(table: dict, specs: dict[str, Spec], where: str) -> dict:
    """The entries of `table` that specs name, each checked (_checked_value), in the table's order."""
    return {key: _checked_value(value, specs[key], f"{where}.{key}") for key, value in table.items() if key in specs}


def _checked_value(value, spec: Spec, name: str):
    """value when it is of spec's kind and within its range (a float field's value as a float), else InputError
    naming `name`: train.ckpt_field for the wrong kind (NaN and infinities are not finite numbers), train.ckpt_range
    for a number outside lo..hi."""
    if value is None and spec.nullable:
        return None
    if spec.kind == "text":
        if not (isinstance(value, str) and re.fullmatch(spec.choices, value)):
            raise _choice_error(name, spec.shown)
        return value
    if not _has_type(value, spec.kind):
        raise _field_error(name, spec.kind)
    if not spec.lo <= value <= spec.hi:
        raise _range_error(name, value, spec.lo, spec.hi)
    return float(value) if spec.kind == "float" else value


def _choice_error(name: str, shown: str) -> InputError:
    return InputError("train.ckpt_field", f"{CONFIG}: '{name}' must be one of {shown}", field=name[:60],
                      kind={"en": f"one of: {shown}", "zh": f"以下之一：{shown}"})


def typed_values(cls, data: dict, where: str, limits: dict, unknown_ok: bool) -> dict:
    """The values of `data` for dataclass `cls`, each checked against its field's type (int, float, bool, str,
    or those | None) and the (low, high) of `limits`. Raises InputError(train.ckpt_field / train.ckpt_range)."""
    kinds = {f.name: str(f.type) for f in fields(cls)}
    out = {}
    for key, value in data.items():
        if key not in kinds:
            if unknown_ok:
                continue
            raise _field_error(f"{where}.{key}", "setting")
        kind = kinds[key]
        if value is None and "None" in kind:
            out[key] = None
            continue
        if not _has_type(value, kind.split(" | ")[0]):
            raise _field_error(f"{where}.{key}", kind.split(" | ")[0])
        low, high = limits.get(key, (None, None))
        if low is not None and not low <= value <= high:
            raise _range_error(f"{where}.{key}", value, low, high)
        out[key] = value
    return out


def _range_error(name: str, value, low, high) -> InputError:
    high = "∞" if high == math.inf else high
    return InputError("train.ckpt_range", f"{name} = {_shown(value)} is outside {low}..{high}", field=name[:60],
                      value=_shown(value), lo=low, hi=high)


def _shown(value) -> str:
    """A number for a message, at most 20 characters: a whole number of more digits in scientific notation."""
    text = str(value)
    digits = text.lstrip("-")
    if isinstance(value, int) and len(digits) > 15:
        text = f"{text[: len(text) - len(digits)]}{digits[0]}.{digits[1:4]}e+{len(digits) - 1}"
    return text[:20]


def _has_type(value, kind: str) -> bool:
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "float":
        return is_number(value)
    if kind == "str":
        return isinstance(value, str) and len(value) <= 40
    return False


def _task_and_model(config: dict) -> tuple[Task, ModelConfig, TrainConfig]:
    from .training import TrainConfig
    params = dict(config["task"])
    name = params.pop("name", None)
    if not isinstance(name, str) or len(name) > 40:
        raise _field_error("task.name", "task")
    for key, value in params.items():  # min_len / max_len of the toy tasks
        if key not in TASK_PARAMS or not _has_type(value, "int"):
            raise _field_error(f"task.{key}", "setting" if key not in TASK_PARAMS else "int")
    task = make_task(name, **params)
    model_cfg = typed_values(ModelConfig, config["model"], "model", MODEL_LIMITS, unknown_ok=False)
    train_cfg = TrainConfig(**typed_values(TrainConfig, config["train"], "train", TRAIN_LIMITS, unknown_ok=True))
    try:
        model_cfg = ModelConfig(**model_cfg)
    except (TypeError, ValueError) as exc:  # heads that do not divide d_model, an unknown norm, ...
        logging.getLogger(__name__).info("checkpoint config refused: %s", exc)
        raise _bad_config("'model' holds settings that do not fit together") from None
    vocab = config["vocab"]
    if vocab.get("src") != task.src_vocab.itos or vocab.get("tgt") != task.tgt_vocab.itos:
        raise _mismatch(f"its vocabulary is not the one of task {task.name!r}")
    if (model_cfg.src_vocab, model_cfg.tgt_vocab) != (len(task.src_vocab), len(task.tgt_vocab)):
        raise _mismatch("the model's vocabulary sizes do not match the task")
    return task, model_cfg, train_cfg


def _mismatch(detail: str) -> InputError:
    return InputError("train.ckpt_mismatch", f"the weights do not match the config: {detail}", detail=detail)


def _expected_shapes(cfg: ModelConfig) -> dict[str, tuple[int, ...]]:
    """{tensor name: shape} of the weights a checkpoint of this config holds (built on the meta device: no memory)."""
    with torch.device("meta"):
        state = Seq2SeqTransformer(cfg).state_dict()
    return {k: tuple(v.shape) for k, v in state.items() if not (cfg.tie_weights and k == "out.weight")}


def _check_header(header: dict[str, tuple[str, tuple[int, ...]]], expected: dict[str, tuple[int, ...]]) -> None:
    if set(header) != set(expected):
        diff = sorted(set(header) ^ set(expected))[:3]
        raise InputError("train.ckpt_tensors", f"{WEIGHTS} holds other tensors than the config needs",
                         names=", ".join(str(d)[:40] for d in diff))
    for key, (dtype, shape) in header.items():
        if dtype not in ("F32", "F16", "BF16") or shape != expected[key]:
            raise InputError("train.ckpt_shape", f"{key} is {dtype} {shape}, expected {expected[key]}",
                             tensor=key[:60], got=f"{dtype} {shape}", expected=str(expected[key]))


def _read_safetensors(raw: bytes, name: str) -> dict[str, torch.Tensor]:
    from safetensors.torch import load
    try:
        return load(raw)
    except Exception as exc:  # noqa: BLE001 - safetensors raises several error types for a damaged file
        raise InputError("train.ckpt_corrupt", f"{name} is damaged or not a safetensors file ({exc})"[:300],
                         name=name) from None


def _load_weights(model: Seq2SeqTransformer, raw: bytes) -> None:
    tensors = _read_safetensors(raw, WEIGHTS)
    for k, v in tensors.items():
        if not torch.isfinite(v).all():
            raise InputError("train.ckpt_corrupt", f"{k} holds NaN or infinite values", name=WEIGHTS)
    model.load_state_dict({k: v.float() for k, v in tensors.items()}, strict=False)
    model.eval()


MAX_SNAPSHOT_ENTRIES = 2000  # snapshots x attention maps (30 snapshots of a 2 + 2 layer model: 180)
SNAPSHOT_KEY = re.compile(r"([0-9]{1,10})/(.+)")  # '<step>/<capture name>', the step in ASCII digits


def snapshot_shapes(cfg: ModelConfig, task: Task) -> dict[str, tuple[int, int, int]]:
    """{capture name: (H, Nq, Nk)} of one snapshot as Trainer._snapshot takes it: every attention map of the task's
    probe example, teacher-forced on its target (the maps the Snapshots tab draws against those tokens)."""
    src = task.tokenize(task.example)
    n_src, n_tgt = len(src), len(task.solve(src) or []) + 1  # the decoder reads <bos> + target
    sizes = {"enc": (n_src, n_src), "self_attn": (n_tgt, n_tgt), "cross_attn": (n_tgt, n_src)}
    return {name: (cfg.n_heads, *sizes["enc" if name.startswith("enc.") else name.rsplit(".", 1)[1]])
            for name in capture_names(cfg)}


def _load_snapshots(raw: bytes | None, cfg: ModelConfig, task: Task) -> list[Snapshot]:
    """snapshots.safetensors -> snapshots. Every entry '<step>/<capture name>' is one attention map of the shape
    snapshot_shapes gives, in float, at a step of 0..MAX_STEPS, and every step holds every map: checked in the
    header before anything is read. The weights read are finite shares (0..1), as attention weights are."""
    from .training import Snapshot
    if raw is None:
        return []
    header = safetensors_header(raw, SNAPSHOTS)
    if len(header) > MAX_SNAPSHOT_ENTRIES:
        raise _bad_snapshots(f"{SNAPSHOTS} holds {len(header)} entries")
    expected = snapshot_shapes(cfg, task)
    names_at: dict[int, set] = {}
    for key, (dtype, shape) in header.items():
        found = SNAPSHOT_KEY.fullmatch(key)
        if not (found and int(found[1]) <= MAX_STEPS and expected.get(found[2]) == shape
                and dtype in ("F32", "F16", "BF16")):
            raise _bad_snapshots(f"{SNAPSHOTS} has an unexpected entry {key[:60]!r}")
        names_at.setdefault(int(found[1]), set()).add(found[2])
    if any(names != set(expected) for names in names_at.values()):
        raise _bad_snapshots(f"{SNAPSHOTS} has a step without every attention map")
    by_step: dict[int, dict] = {}
    for key, value in _read_safetensors(raw, SNAPSHOTS).items():
        if not (torch.isfinite(value).all() and (value >= 0).all() and (value <= 1).all()):
            raise _bad_snapshots(f"{SNAPSHOTS}: {key[:60]!r} holds values outside 0..1")
        step, name = SNAPSHOT_KEY.fullmatch(key).groups()
        by_step.setdefault(int(step), {})[name] = value.float().numpy()
    return [Snapshot(s, by_step[s]) for s in sorted(by_step)]


def _bad_snapshots(detail: str) -> InputError:
    return InputError("train.ckpt_corrupt", detail, name=SNAPSHOTS)
