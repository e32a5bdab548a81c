"""Training the small Transformer: device choice, the paper's optimiser recipe, a training loop that yields metrics,
greedy decoding, and checkpoints (safetensors + JSON, never pickle).

    trainer = Trainer(make_task("reverse"), ModelConfig(), TrainConfig(max_seconds=30))
    for m in trainer.run():          # one Metrics record every few steps; the caller draws them
        print(m.step, m.loss, m.val_exact)
    trainer.translator().translate("3 1 4 1 5")      # -> "5 1 4 1 3"
"""
from __future__ import annotations

import math
import random
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields

import copy
import io
import json
import zipfile
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from .errors import InputError
from .model import ModelConfig, Seq2SeqTransformer, count_parameters
from .tasks import BOS, EOS, PAD, Task, encode_batch, make_task, sample_batch

MEMORY_LIMIT_BYTES = 1 << 30  # a training run may use at most about 1 GiB (the app is shared by many visitors)
STOP_REASONS = ("target", "time", "steps", "stopped", "nan", "diverged")


# ---------------------------------------------------------------- device
def pick_device(force_cpu: bool = False) -> torch.device:
    """cuda if available, else Apple's mps, else cpu; force_cpu skips the accelerators."""
    if not force_cpu and torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if not force_cpu and mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


# ---------------------------------------------------------------- configuration
@dataclass
class TrainConfig:
    """Optimiser and loop settings. Defaults: the paper's Adam + warmup recipe, scaled for toy tasks."""
    batch_size: int = 128            # sequences per step
    max_seconds: float = 30.0        # training-time budget (evaluation excluded)
    max_steps: int | None = None     # optional step budget
    target_accuracy: float | None = 0.99  # stop once held-out exact-sequence accuracy reaches this (None: never)
    lr_factor: float = 1.0           # multiplies the paper's schedule
    warmup: int = 200                # warmup steps of the schedule
    beta1: float = 0.9               # Adam beta_1 (paper: 0.9)
    beta2: float = 0.98              # Adam beta_2 (paper: 0.98)
    eps: float = 1e-9                # Adam epsilon (paper: 1e-9)
    label_smoothing: float = 0.1     # epsilon_ls (paper: 0.1)
    clip_norm: float | None = 1.0    # gradient clipping by global norm (None: off)
    eval_every: int = 50             # steps between held-out evaluations (greedy decoding)
    eval_size: int = 400             # held-out sequences per evaluation
    log_every: int = 10              # steps between yielded metrics
    max_snapshots: int = 40          # attention snapshots kept (older ones thinned out)
    seed: int = 0                    # seeds data, initialisation and dropout
    force_cpu: bool = False          # train on the CPU even when a GPU is present
    threads: int | None = None       # torch CPU threads (None: leave torch's default)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "TrainConfig":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def noam_lr(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """lrate = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)   (section 5.3), step counted from 1."""
    step = max(step, 1)
    return factor * d_model ** -0.5 * min(step ** -0.5, step * max(warmup, 1) ** -1.5)


def fit_config(task: Task, cfg: ModelConfig) -> ModelConfig:
    """The model config with vocabulary sizes and max_len fitted to the task."""
    data = cfg.to_dict() | {"src_vocab": len(task.src_vocab), "tgt_vocab": len(task.tgt_vocab), "pad_id": PAD}
    data["max_len"] = max(cfg.max_len, task.max_src_len, task.max_tgt_len + 1)
    return ModelConfig.from_dict(data)


def estimate_memory(cfg: ModelConfig, batch_size: int, n_src: int, n_tgt: int) -> int:
    """Rough training memory in bytes: fp32 weights + grads + two Adam moments (4 copies), plus activations kept
    for the backward pass (about 16 d_model + 2 d_ff floats per token per layer, attention maps H N^2)."""
    params = _parameter_count(cfg)
    per_token = 16 * cfg.d_model + 2 * cfg.d_ff
    tokens = batch_size * (n_src * cfg.n_enc_layers + 2 * n_tgt * cfg.n_dec_layers)
    attn = batch_size * cfg.n_heads * (n_src ** 2 * cfg.n_enc_layers + (n_tgt ** 2 + n_tgt * n_src) * cfg.n_dec_layers)
    logits = batch_size * n_tgt * cfg.tgt_vocab * 3
    return 4 * (4 * params + tokens * per_token + 3 * attn + logits)


def _parameter_count(cfg: ModelConfig) -> int:
    with torch.device("meta"):
        return count_parameters(Seq2SeqTransformer(cfg))


def check_fits(task: Task, model_cfg: ModelConfig, train_cfg: TrainConfig,
               limit: int = MEMORY_LIMIT_BYTES) -> tuple[int, int]:
    """(parameters, estimated bytes) of a run; raises InputError with the reason when it would not fit."""
    cfg = fit_config(task, model_cfg)
    need = estimate_memory(cfg, train_cfg.batch_size, task.max_src_len, task.max_tgt_len + 1)
    if need > limit:
        raise InputError("train.too_big", f"this configuration needs about {need / 2**20:.0f} MiB, more than the "
                         f"{limit / 2**20:.0f} MiB a run may use; make the model or the batch smaller",
                         need=f"{need / 2**20:.0f}", limit=f"{limit / 2**20:.0f}")
    return _parameter_count(cfg), need


# ---------------------------------------------------------------- metrics
@dataclass
class Metrics:
    """One record of the training curve."""
    step: int
    seconds: float            # training time so far (evaluation excluded)
    loss: float               # label-smoothed cross-entropy of the last steps (mean)
    token_acc: float          # teacher-forced token accuracy on the last training batches
    lr: float
    tokens_per_s: float       # source + target tokens (pads excluded) per second of training
    val_exact: float | None = None      # held-out exact-sequence accuracy, greedy decoding (latest evaluation)
    val_token_acc: float | None = None  # held-out token accuracy, greedy decoding (latest evaluation)
    evaluated: bool = False   # True when this record carries a fresh evaluation
    done: bool = False
    reason: str | None = None  # why training stopped (see STOP_REASONS)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Snapshot:
    """Attention of the probe example at one training step: capture name -> (H, Nq, Nk) float array."""
    step: int
    maps: dict = field(repr=False)


# ---------------------------------------------------------------- decoding
@torch.no_grad()
def greedy_decode(model: Seq2SeqTransformer, src: torch.Tensor, max_out: int, return_probs: bool = False):
    """Greedy decoding: y_t = argmax p(y | y_<t, x), starting from <bos>, until every row has emitted <eos>.

    src (B, N_src) -> ids (B, T) without <bos> (and probs (B, T, V) of each step when return_probs).
    """
    memory = model.encode(src)  # (B, N_src, d_model)
    ys = torch.full((src.shape[0], 1), BOS, dtype=torch.long, device=src.device)  # (B, 1)
    finished = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    probs = []
    for _ in range(max_out):
        logits = model.decode(ys, memory, src)[:, -1]  # (B, V)
        nxt = logits.argmax(-1).masked_fill(finished, PAD)  # (B,)
        if return_probs:
            probs.append(torch.softmax(logits.float(), -1))
        ys = torch.cat([ys, nxt[:, None]], dim=1)  # (B, t+1)
        finished |= nxt == EOS
        if finished.all():
            break
    out = ys[:, 1:]
    return (out, torch.stack(probs, 1)) if return_probs else out


def sequence_scores(pred: torch.Tensor, tgt_out: torch.Tensor) -> tuple[float, float]:
    """Exact-sequence accuracy and token accuracy of greedy predictions pred (B, T) against tgt_out (B, T'), both
    ending in <eos>; whatever a prediction emits after its first <eos> is ignored."""
    n = max(pred.shape[1], tgt_out.shape[1])
    pred = F.pad(pred, (0, n - pred.shape[1]), value=PAD)  # (B, n)
    tgt = F.pad(tgt_out, (0, n - tgt_out.shape[1]), value=PAD)  # (B, n)
    is_eos = (pred == EOS).long()
    pred = pred.masked_fill(is_eos.cumsum(1) - is_eos > 0, PAD)  # drop tokens after the first <eos>
    real = tgt != PAD
    exact = (pred == tgt).all(1).float().mean().item()
    tok = ((pred == tgt) & real).sum().item() / max(real.sum().item(), 1)
    return exact, tok


# ---------------------------------------------------------------- trainer
class Trainer:
    """Trains a Seq2SeqTransformer on a task; `run()` yields Metrics until a stop condition holds.

    Resumable: call run() again after a stop request was not made, and it continues within the same budgets.
    """

    def __init__(self, task: Task, model_cfg: ModelConfig | None = None, train_cfg: TrainConfig | None = None,
                 device: torch.device | str | None = None):
        self.task, self.train_cfg = task, train_cfg or TrainConfig()
        self.model_cfg = fit_config(task, model_cfg or ModelConfig())
        self.device = torch.device(device) if device is not None else pick_device(self.train_cfg.force_cpu)
        if self.train_cfg.threads:
            torch.set_num_threads(self.train_cfg.threads)
        torch.manual_seed(self.train_cfg.seed)
        self.model = Seq2SeqTransformer(self.model_cfg).to(self.device)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=0.0, betas=(self.train_cfg.beta1, self.train_cfg.beta2),
                                    eps=self.train_cfg.eps)
        self.rng = random.Random(self.train_cfg.seed)
        self._eval = self._tensors(sample_batch(task, random.Random(10_000 + self.train_cfg.seed),
                                                self.train_cfg.eval_size, heldout=True))
        self.probe = task.tokenize(task.example)
        self.step, self.seconds, self.tokens = 0, 0.0, 0
        self.history: list[Metrics] = []
        self.snapshots: list[Snapshot] = []
        self.reason: str | None = None
        self._stop = False
        self._loss_ema: float | None = None
        self._last_eval: tuple[float | None, float | None] = (None, None)

    # -- public
    @property
    def n_params(self) -> int:
        return count_parameters(self.model)

    @property
    def done(self) -> bool:
        return self.reason is not None

    def request_stop(self) -> None:
        """Ask run() to stop after the current step (safe to call from a button callback)."""
        self._stop = True

    def run(self) -> Iterator[Metrics]:
        """Train; yield a Metrics record every log_every steps and after every evaluation; the last has done=True."""
        if self.step == 0:
            self._snapshot()
        window: list[tuple[float, float]] = []
        while not self.done:
            loss, acc = self._train_step()
            window.append((loss, acc))
            self.reason = self._check_stop(loss)
            evaluated = self.step % self.train_cfg.eval_every == 0 or self.done
            if evaluated and self.reason not in ("nan", "diverged"):
                self._evaluate()
                if self._reached_target() and self.reason is None:
                    self.reason = "target"
            if evaluated or self.step % self.train_cfg.log_every == 0 or self.done:
                yield self._record(window, evaluated)
                window = []

    def translator(self) -> "Translator":
        """The trained model (a copy in eval mode, on the CPU) with its task, curves and snapshots."""
        return Translator.from_trainer(self)

    # -- internals
    def _tensors(self, arrays):
        return tuple(torch.from_numpy(a).to(self.device) for a in arrays)

    def _train_step(self) -> tuple[float, float]:
        t0 = time.perf_counter()
        self.model.train()
        src, tgt_in, tgt_out = self._tensors(sample_batch(self.task, self.rng, self.train_cfg.batch_size))
        self.step += 1
        lr = noam_lr(self.step, self.model_cfg.d_model, self.train_cfg.warmup, self.train_cfg.lr_factor)
        for group in self.opt.param_groups:
            group["lr"] = lr
        logits, _ = self.model(src, tgt_in)  # (B, N_tgt, V)
        loss = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=PAD,
                               label_smoothing=self.train_cfg.label_smoothing)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        if self.train_cfg.clip_norm:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.train_cfg.clip_norm)
        self.opt.step()
        real = tgt_out != PAD
        acc = ((logits.argmax(-1) == tgt_out) & real).sum() / real.sum()
        loss_value, acc_value = loss.item(), acc.item()
        self.tokens += int(real.sum().item() + (src != PAD).sum().item())
        self.seconds += time.perf_counter() - t0
        return loss_value, acc_value

    def _check_stop(self, loss: float) -> str | None:
        cfg = self.train_cfg
        if not math.isfinite(loss):
            return "nan"
        self._loss_ema = loss if self._loss_ema is None else 0.9 * self._loss_ema + 0.1 * loss
        if self.step > 20 and self._loss_ema > 2 * math.log(self.model_cfg.tgt_vocab) + 1:
            return "diverged"
        if self._stop:
            return "stopped"
        if cfg.max_steps is not None and self.step >= cfg.max_steps:
            return "steps"
        if self.seconds >= cfg.max_seconds:
            return "time"
        return None

    def _reached_target(self) -> bool:
        target = self.train_cfg.target_accuracy
        return target is not None and self._last_eval[0] is not None and self._last_eval[0] >= target

    @torch.no_grad()
    def _evaluate(self) -> None:
        self.model.eval()
        src, _, tgt_out = self._eval
        pred = greedy_decode(self.model, src, tgt_out.shape[1])
        self._last_eval = sequence_scores(pred, tgt_out)
        self._snapshot()

    @torch.no_grad()
    def _snapshot(self) -> None:
        """Attention maps of the probe example (teacher-forced on its correct target) at this step."""
        self.model.eval()
        target = self.task.solve(self.probe) or []
        src, tgt_in, _ = self._tensors(encode_batch(self.task, [(self.probe, target)]))
        _, maps = self.model(src, tgt_in, capture=True)
        self.snapshots.append(Snapshot(self.step, {k: v[0].float().cpu().numpy().astype(np.float16)
                                                   for k, v in maps.items()}))
        if len(self.snapshots) > self.train_cfg.max_snapshots:  # thin out: every other one, keep the latest
            self.snapshots = self.snapshots[:-1][::2] + self.snapshots[-1:]

    def _record(self, window, evaluated: bool) -> Metrics:
        loss = float(np.mean([w[0] for w in window])) if window else float("nan")
        acc = float(np.mean([w[1] for w in window])) if window else float("nan")
        lr = self.opt.param_groups[0]["lr"]
        m = Metrics(self.step, self.seconds, loss, acc, lr, self.tokens / max(self.seconds, 1e-9),
                    *self._last_eval, evaluated=evaluated, done=self.done, reason=self.reason)
        self.history.append(m)
        return m


def train(task: str | Task = "reverse", model_cfg: ModelConfig | None = None, train_cfg: TrainConfig | None = None,
          **task_params) -> Trainer:
    """Train to completion (no UI) and return the Trainer."""
    task = make_task(task, **task_params) if isinstance(task, str) else task
    trainer = Trainer(task, model_cfg, train_cfg)
    for _ in trainer.run():
        pass
    return trainer
