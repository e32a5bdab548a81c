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
import functools
import json
import logging
import re
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from ..device import CPU_RUN_BYTES, DeviceBatches, autocast, memory_budget, pick_device, precision
from .. import budget
from ..errors import InputError
from ..export import write_files, zip_bytes
from .model import ModelConfig, Seq2SeqTransformer, capture_names, count_parameters
from .. import priority
from ..seeding import RandomStream, unseeded
from ..threads import thread_budget
from ..uploads import parse_json, safetensors_header, zip_members
from .tasks import BOS, EOS, PAD, RangeNote, Task, encode_batch, make_task, pairs_by_length, sample_batch

MEMORY_LIMIT_BYTES = CPU_RUN_BYTES  # what a training run on the CPU may use (on a GPU: device.memory_budget); also
                                   # the bound of a checkpoint's model when it is loaded
STOP_REASONS = ("target", "time", "steps", "stopped", "nan", "diverged")


# ---------------------------------------------------------------- configuration
@dataclass
class TrainConfig:
    """Optimiser and loop settings. Defaults: the paper's Adam + warmup recipe, scaled for toy tasks."""
    batch_size: int = 128            # sequences per step (256 before issue #15: as many steps to the target,
                                     # each twice the cost)
    max_seconds: float = 30.0        # training-time budget (evaluation excluded)
    max_steps: int | None = None     # optional step budget
    target_accuracy: float | None = 0.99  # stop once held-out exact-sequence accuracy at the WORST input length
                                     # of the trained range reaches this (None: never)
    target_patience: int = 2         # evaluations in a row that must reach the target (guards against a lucky one)
    lr_factor: float = 0.2           # multiplies the paper's schedule (peak 3.5e-3 for d_model 64; was 0.3)
    warmup: int = 50                 # warmup steps of the schedule (was 100)
    beta1: float = 0.9               # Adam beta_1 (paper: 0.9)
    beta2: float = 0.98              # Adam beta_2 (paper: 0.98)
    eps: float = 1e-9                # Adam epsilon (paper: 1e-9)
    label_smoothing: float = 0.1     # epsilon_ls (paper: 0.1)
    clip_norm: float | None = 1.0    # gradient clipping by global norm (None: off)
    eval_every: int = 50             # steps between held-out evaluations (greedy decoding)
    check_every: int = 10            # steps between target checks (0: off): when the training batch's
                                     # teacher-forced exact-sequence accuracy reaches the target, or the last
                                     # held-out evaluation did, the held-out evaluation runs at once instead of
                                     # waiting for the next eval_every step (only with a target)
    eval_per_length: int = 100       # held-out sequences of every input length per evaluation (the same ones
                                     # each time; 100 resolves about 1 %: the target 99 % allows one miss)
    log_every: int = 10              # steps between yielded metrics
    max_snapshots: int = 30          # attention snapshots kept (older ones thinned out)
    seed: int = 0                    # seeds data, initialisation and dropout
    force_cpu: bool = False          # train on the CPU even when a GPU is present
    threads: int | None = 1          # torch CPU threads while training (None: torch's default). One thread is
                                     # about as fast for these small models and far faster on a busy machine

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


def label_smoothed_loss(logits: torch.Tensor, target: torch.Tensor, eps: float) -> torch.Tensor:
    """Cross-entropy against the smoothed target q = (1 - eps) one_hot(y) + eps / V (section 5.4), averaged over
    the non-pad positions. logits (B, N, V), target (B, N)."""
    return F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=PAD, label_smoothing=eps)


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
    """The model's parameter count (the Train page asks for it on every run: building the model, even on the meta
    device, took 0.1 s of each page switch)."""
    return _parameter_count_of(tuple(sorted(cfg.to_dict().items())))


@functools.lru_cache(maxsize=64)
def _parameter_count_of(config_items: tuple) -> int:
    with torch.device("meta"):
        return count_parameters(Seq2SeqTransformer(ModelConfig.from_dict(dict(config_items))))


def check_fits(task: Task, model_cfg: ModelConfig, train_cfg: TrainConfig,
               limit: int | None = None) -> tuple[int, int]:
    """(parameters, estimated bytes) of a run; raises InputError with the reason when it would not fit in `limit`
    bytes (default: what one run may use on the device it would train on, viz_core.device.memory_budget)."""
    device = pick_device(train_cfg.force_cpu)
    if limit is None:
        limit = memory_budget(device)
    cfg = fit_config(task, model_cfg)
    need = estimate_memory(cfg, train_cfg.batch_size, task.max_src_len, task.max_tgt_len + 1)
    if need > limit:
        raise InputError("train.too_big", f"this configuration needs about {need / 2**20:.0f} MiB, more than the "
                         f"{limit / 2**20:.0f} MiB a run may use; make the model or the batch smaller",
                         need=f"{need / 2**20:.0f}", limit=f"{limit / 2**20:.0f}")
    if device.type == "cpu":  # a run on the CPU takes the server's memory: the server-wide budget must hold it
        budget.admit(need, "a training")
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
    val_worst: float | None = None      # exact-sequence accuracy at the worst input length (latest evaluation)
    val_worst_len: int | None = None    # that length
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
        logits = model.decode(ys, memory, src)[:, -1].float()  # (B, V)
        logits[:, [PAD, BOS]] = float("-inf")  # never targets: <pad> is ignored by the loss, <bos> only starts
        nxt = logits.argmax(-1).masked_fill(finished, PAD)  # (B,)
        if return_probs:
            probs.append(torch.softmax(logits, -1))
        ys = torch.cat([ys, nxt[:, None]], dim=1)  # (B, t+1)
        finished |= nxt == EOS
        if finished.all():
            break
    out = ys[:, 1:]
    return (out, torch.stack(probs, 1)) if return_probs else out


def _aligned(pred: torch.Tensor, tgt_out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """pred (B, T) and tgt_out (B, T') padded to one width n, pred cut after its first <eos>: (B, n), (B, n)."""
    n = max(pred.shape[1], tgt_out.shape[1])
    pred = F.pad(pred, (0, n - pred.shape[1]), value=PAD)  # (B, n)
    tgt = F.pad(tgt_out, (0, n - tgt_out.shape[1]), value=PAD)  # (B, n)
    is_eos = (pred == EOS).long()
    return pred.masked_fill(is_eos.cumsum(1) - is_eos > 0, PAD), tgt  # tokens after the first <eos> dropped


def exact_rows(pred: torch.Tensor, tgt_out: torch.Tensor) -> torch.Tensor:
    """Which rows of greedy predictions pred (B, T) equal their target tgt_out (B, T') up to its <eos>: bool (B,)."""
    pred, tgt = _aligned(pred, tgt_out)
    return (pred == tgt).all(1)


def sequence_scores(pred: torch.Tensor, tgt_out: torch.Tensor) -> tuple[float, float]:
    """Exact-sequence accuracy and token accuracy of greedy predictions pred (B, T) against tgt_out (B, T'), both
    ending in <eos>; whatever a prediction emits after its first <eos> is ignored."""
    pred, tgt = _aligned(pred, tgt_out)
    real = tgt != PAD
    exact = (pred == tgt).all(1).float().mean().item()
    tok = ((pred == tgt) & real).sum().item() / max(real.sum().item(), 1)
    return exact, tok


# ---------------------------------------------------------------- accuracy per input length
@dataclass
class HeldOut:
    """Held-out pairs of every input length of a task, encoded as one padded batch."""
    src: torch.Tensor         # (B, N_src)
    tgt_out: torch.Tensor     # (B, N_tgt + 1), ending in <eos>
    lengths: np.ndarray       # (B,) the input length of each row
    n_per_length: int

    @classmethod
    def of(cls, task: Task, n_per_length: int, seed: int, device="cpu") -> "HeldOut":
        pairs = pairs_by_length(task, n_per_length, random.Random(seed), heldout=True)
        flat = [p for n in sorted(pairs) for p in pairs[n]]
        src, _, tgt_out = encode_batch(task, flat)
        lengths = np.array([n for n in sorted(pairs) for _ in pairs[n]])
        return cls(torch.from_numpy(src).to(device), torch.from_numpy(tgt_out).to(device), lengths, n_per_length)


@torch.no_grad()
def score_by_length(model: Seq2SeqTransformer, held: HeldOut, max_out: int, chunk: int = 1000
                    ) -> tuple[dict[int, float], float]:
    """({length: exact-sequence accuracy of greedy decoding}, token accuracy over all rows) on a held-out set, in
    chunks of at most `chunk` rows. Exact accuracy at length n = (rows of length n decoded exactly right) / (rows of
    length n).

    One teacher-forced pass first: a row whose every argmax equals its gold token under teacher forcing is exactly
    a row greedy decoding reproduces (each greedy step then sees the gold prefix), every token right. Only the other
    rows are decoded greedily, for their exactness and tokens: the same numbers, and once the model is good, one
    decoder pass instead of one per output token."""
    model.eval()
    exact, right, real = [], 0, 0
    for i in range(0, len(held.lengths), chunk):
        src, tgt = held.src[i: i + chunk], held.tgt_out[i: i + chunk]  # (b, N_src), (b, T')
        tgt_in = torch.cat([torch.full_like(tgt[:, :1], BOS), tgt[:, :-1].masked_fill(tgt[:, :-1] == EOS, PAD)], 1)
        logits, _ = model(src, tgt_in)  # (b, T', V)
        ok = forced_exact_rows(logits, tgt)  # (b,)
        gold = tgt != PAD
        right += (gold & ok[:, None]).sum().item()
        real += gold.sum().item()
        rest = (~ok).nonzero()[:, 0]  # (r,) rows greedy decoding must settle
        if rest.numel():
            pred = greedy_decode(model, src[rest], max_out)  # (r, T)
            ok[rest] = exact_rows(pred, tgt[rest])
            p, g = _aligned(pred, tgt[rest])
            right += ((p == g) & (g != PAD)).sum().item()
        exact.append(ok.cpu())
    ok = torch.cat(exact).numpy()  # (B,)
    per_length = {int(n): float(ok[held.lengths == n].mean()) for n in np.unique(held.lengths)}
    return per_length, right / max(real, 1)


def worst_length(by_length: dict[int, float]) -> tuple[int, float]:
    """(length, accuracy) of the worst length; ties go to the longest."""
    n = min(by_length, key=lambda k: (by_length[k], -k))
    return n, by_length[n]


def accuracy_by_length(model, task: Task | str | None = None, n_per_length: int = 300, seed: int = 12345
                       ) -> dict[int, float]:
    """Held-out exact-sequence accuracy of greedy decoding per input length: {length: share of n_per_length
    held-out sources of that length whose whole output is right}, for every length of the trained range.

    model: a Translator, a checkpoint directory or .zip, or a Seq2SeqTransformer (then task is required).
    task: the task to measure on (default: the model's own; a name or a Task, e.g. with other lengths)."""
    if isinstance(model, (str, Path)):
        model = load_checkpoint(model)
    if isinstance(model, Translator):
        model, task, max_out = model.model, task or model.task, model._max_out()
    else:
        max_out = model.cfg.max_len - 1
    if task is None:
        raise ValueError("accuracy_by_length needs the task of a bare model")
    task = make_task(task) if isinstance(task, str) else task
    held = HeldOut.of(task, n_per_length, seed, next(model.parameters()).device)
    return score_by_length(model, held, max_out)[0]


def teacher_forced_exact(logits: torch.Tensor, tgt_out: torch.Tensor) -> float:
    """Share of rows whose every real position has argmax_y p(y | y*_<t, x) = y*_t under teacher forcing, with
    <pad> and <bos> excluded from the argmax as in greedy_decode. logits (B, N, V), tgt_out (B, N).

    A row passes exactly when greedy decoding reproduces it: each greedy step then sees the gold prefix."""
    return forced_exact_rows(logits, tgt_out).float().mean().item()


def forced_exact_rows(logits: torch.Tensor, tgt_out: torch.Tensor) -> torch.Tensor:
    """Which rows pass teacher_forced_exact: bool (B,). logits (B, N, V), tgt_out (B, N)."""
    scores = logits.detach().clone()
    scores[..., [PAD, BOS]] = float("-inf")
    ok = (scores.argmax(-1) == tgt_out) | (tgt_out == PAD)  # (B, N)
    return ok.all(1)


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
        # initial weights and dropout masks come from this training's own random stream (viz_core.seeding)
        self.random_stream = RandomStream(self.train_cfg.seed, self.device)
        with self.random_stream.active():
            self.model = Seq2SeqTransformer(self.model_cfg).to(self.device)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=0.0, betas=(self.train_cfg.beta1, self.train_cfg.beta2),
                                    eps=self.train_cfg.eps)
        self.rng = random.Random(self.train_cfg.seed)
        # training batches reach the device a block at a time (the same batches, in the same order)
        self._batches = DeviceBatches(lambda: sample_batch(self.task, self.rng, self.train_cfg.batch_size),
                                      self.device)
        self._eval = HeldOut.of(task, self.train_cfg.eval_per_length, 10_000 + self.train_cfg.seed, self.device)
        self.probe = task.tokenize(task.example)
        self.step, self.seconds, self.tokens = 0, 0.0, 0
        self.history: list[Metrics] = []
        self.snapshots: list[Snapshot] = []
        self.reason: str | None = None
        self._stop = False
        self._loss_ema: float | None = None
        self._last_eval: tuple[float | None, float | None] = (None, None)
        self.by_length: dict[int, float] = {}  # held-out exact accuracy per input length (latest evaluation)
        self.best_worst: tuple[int, float] | None = None  # (length, accuracy): the best worst length so far
        self.evaluations, self._eval_step = 0, None
        self._hits = 0  # evaluations in a row whose worst length reached the target
        self._batch_exact = 0.0  # teacher-forced exact-sequence accuracy of the last training batch

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
            if self.device.type == "cpu":
                priority.wait_for_foreground()  # a visitor's pass on the same cores goes first
            with thread_budget(self.train_cfg.threads if self.device.type == "cpu" else None):
                loss, acc = self._train_step()
            window.append((loss, acc))
            self.reason = self._check_stop(loss)
            # a stop request is answered at once: no held-out evaluation (seconds of greedy decoding), only the
            # attention snapshot of the model as it is (one forward pass)
            evaluated = (self.step % self.train_cfg.eval_every == 0 or (self.done and self.reason != "stopped")
                         or self._target_in_sight())
            if evaluated and self.reason not in ("nan", "diverged"):
                with thread_budget(self.train_cfg.threads if self.device.type == "cpu" else None):
                    self._evaluate()
                if self._reached_target() and self.reason in (None, "time", "steps"):
                    self.reason = "target"  # also when the budget ran out on the evaluation that reached it
            elif self.reason == "stopped":
                self._snapshot()
            if evaluated or self.step % self.train_cfg.log_every == 0 or self.done:
                yield self._record(window, evaluated)
                window = []

    def translator(self) -> "Translator":
        """The trained model (a copy in eval mode, on the CPU) with its task, curves and snapshots."""
        return Translator.from_trainer(self)

    def outcome(self) -> dict:
        """Why and where training ended, in numbers: reason, step, target, patience (evaluations in a row the
        target needs), hits (in a row at the end), evaluations, eval_step (of the latest), worst_len / worst and
        overall (mean over lengths) of the latest evaluation, best_worst_len / best_worst (the best worst-length
        accuracy of any evaluation); None where unmeasured."""
        worst = worst_length(self.by_length) if self.by_length else (None, None)
        best = self.best_worst or (None, None)
        return {"reason": self.reason, "step": self.step, "target": self.train_cfg.target_accuracy,
                "patience": max(1, self.train_cfg.target_patience), "hits": self._hits,
                "evaluations": self.evaluations, "eval_step": self._eval_step, "overall": self._last_eval[0],
                "worst_len": worst[0], "worst": worst[1],
                "best_worst_len": best[0], "best_worst": best[1]}

    # -- internals
    def _tensors(self, arrays):
        return tuple(torch.from_numpy(a).to(self.device) for a in arrays)

    def _train_step(self) -> tuple[float, float]:
        t0 = time.perf_counter()
        self.model.train()
        src, tgt_in, tgt_out = self._batches.next()  # (B, N_src), (B, N_tgt), (B, N_tgt)
        self.step += 1
        lr = noam_lr(self.step, self.model_cfg.d_model, self.train_cfg.warmup, self.train_cfg.lr_factor)
        for group in self.opt.param_groups:
            group["lr"] = lr
        with self.random_stream.active(), autocast(self.device):  # dropout; bf16 products on CUDA
            logits, _ = self.model(src, tgt_in)  # (B, N_tgt, V)
            loss = label_smoothed_loss(logits, tgt_out, self.train_cfg.label_smoothing)  # float32 under autocast
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        if self.train_cfg.clip_norm:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.train_cfg.clip_norm)
        self.opt.step()
        real = tgt_out != PAD
        acc = ((logits.argmax(-1) == tgt_out) & real).sum() / real.sum()
        # the step's figures reach the host in one copy: each .item() would wait for the GPU on its own
        stats = torch.stack([loss.detach().float(), acc.float(), forced_exact_rows(logits, tgt_out).float().mean(),
                             real.sum().float() + (src != PAD).sum().float()]).tolist()
        loss_value, acc_value, self._batch_exact, tokens = stats
        self.tokens += int(tokens)
        self.seconds += time.perf_counter() - t0
        return loss_value, acc_value

    def _target_in_sight(self) -> bool:
        """True on a check_every step when the last held-out evaluation reached the target (the next one of the
        target_patience in a row comes check_every steps later, not eval_every), or when the last training batch's
        teacher-forced exact-sequence accuracy reaches it. That figure is free (the batch's logits are there) and
        equals greedy exact accuracy on those sequences, so it says when the held-out evaluation is worth its cost."""
        cfg = self.train_cfg
        return (cfg.target_accuracy is not None and cfg.check_every > 0 and self.step % cfg.check_every == 0
                and (self._hits > 0 or self._batch_exact >= cfg.target_accuracy))

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
        """The stop rule: the WORST input length reached the target on target_patience evaluations in a row."""
        target = self.train_cfg.target_accuracy
        hit = target is not None and bool(self.by_length) and worst_length(self.by_length)[1] >= target
        self._hits = self._hits + 1 if hit else 0
        return self._hits >= max(1, self.train_cfg.target_patience)

    @torch.no_grad()
    def _evaluate(self) -> None:
        """Greedy decoding of the held-out set: accuracy per input length, overall (the mean over lengths: every
        length has eval_per_length rows) and token accuracy."""
        # float32 even on CUDA: held-out accuracy must not depend on the device's rounding
        self.by_length, token_acc = score_by_length(self.model, self._eval, self._eval.tgt_out.shape[1])
        self._last_eval = (float(np.mean(list(self.by_length.values()))), token_acc)
        self.evaluations, self._eval_step = self.evaluations + 1, self.step
        worst = worst_length(self.by_length)
        if self.best_worst is None or worst[1] >= self.best_worst[1]:
            self.best_worst = worst
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
        worst = worst_length(self.by_length) if self.by_length else (None, None)
        m = Metrics(self.step, self.seconds, loss, acc, lr, self.tokens / max(self.seconds, 1e-9),
                    *self._last_eval, val_worst=worst[1], val_worst_len=worst[0], evaluated=evaluated,
                    done=self.done, reason=self.reason)
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


# ---------------------------------------------------------------- the trained model
@dataclass
class DecodeTrace:
    """Greedy decoding of one input, step by step."""
    src: list[str]           # source tokens
    out: list[str]           # emitted tokens, <eos> included when emitted
    probs: np.ndarray        # (T, V) next-token distribution at each step
    vocab: list[str]         # target vocabulary (column labels of probs)
    outside: RangeNote | None = None  # set when the input is well-formed but outside the trained range


@dataclass
class AttentionMaps:
    """Attention of one input: capture name -> (H, Nq, Nk), with the token labels of each axis."""
    src: list[str]           # encoder tokens (keys of enc self and cross attention)
    tgt_in: list[str]        # decoder input tokens (<bos> + output), queries of the decoder
    maps: dict


LENGTH_KEY = "exact_len_"  # info["exact_len_<n>"]: held-out exact accuracy at input length n


def length_info(by_length: dict[int, float], n_per_length: int) -> dict:
    """Per-length accuracy as flat info entries (a checkpoint's info is a table of short values)."""
    if not by_length:
        return {}
    n, worst = worst_length(by_length)
    return {"by_length_n": n_per_length, "worst_len": n, "worst_exact": worst,
            **{f"{LENGTH_KEY}{k}": v for k, v in by_length.items()}}


class Translator:
    """A trained model with its task: translate text, trace greedy decoding, read attention, save checkpoints."""

    def __init__(self, model: Seq2SeqTransformer, task: Task, train_cfg: TrainConfig | None = None,
                 history: list[dict] | None = None, snapshots: list[Snapshot] | None = None,
                 info: dict | None = None):
        self.model, self.task = model.eval(), task
        self.train_cfg = train_cfg or TrainConfig()
        self.history, self.snapshots, self.info = history or [], snapshots or [], info or {}

    @classmethod
    def from_trainer(cls, trainer: Trainer) -> "Translator":
        model = copy.deepcopy(trainer.model).to("cpu").eval()
        info = {"steps": trainer.step, "seconds": round(trainer.seconds, 2), "reason": trainer.reason,
                "device": str(trainer.device), "precision": precision(trainer.device),
                "val_exact": trainer._last_eval[0], "seed": trainer.train_cfg.seed}
        info |= length_info(trainer.by_length, trainer.train_cfg.eval_per_length)
        if trainer.by_length:
            info["by_length_step"] = trainer._eval_step
        return cls(model, trainer.task, trainer.train_cfg, [m.to_dict() for m in trainer.history],
                   list(trainer.snapshots), info)

    @property
    def by_length(self) -> tuple[dict[int, float], int] | None:
        """({length: held-out exact accuracy}, sequences per length) stored with the model, None if unmeasured."""
        found = {int(k[len(LENGTH_KEY):]): v for k, v in self.info.items()
                 if k.startswith(LENGTH_KEY) and k[len(LENGTH_KEY):].isdigit() and _is_number(v)}
        n = self.info.get("by_length_n")
        return (dict(sorted(found.items())), int(n)) if found and _is_number(n) else None

    def measure_by_length(self, n_per_length: int = 1000, seed: int = 12345) -> dict[int, float]:
        """accuracy_by_length on fresh held-out data, stored in info (saved with the checkpoint)."""
        by_length = accuracy_by_length(self, n_per_length=n_per_length, seed=seed)
        self.info = {k: v for k, v in self.info.items() if not k.startswith(LENGTH_KEY) and k != "by_length_step"}
        self.info |= length_info(by_length, n_per_length)
        return by_length

    @property
    def config(self) -> ModelConfig:
        return self.model.cfg

    def _src_tensor(self, tokens: list[str]) -> torch.Tensor:
        if len(tokens) > self.config.max_len:
            raise InputError("train.too_long", f"the input has {len(tokens)} tokens; this model takes at most "
                             f"{self.config.max_len}", n=len(tokens), limit=self.config.max_len)
        return torch.tensor([self.task.src_vocab.encode(tokens)])  # (1, N_src)

    def _max_out(self) -> int:
        return self.config.max_len - 1

    @torch.inference_mode()
    def translate(self, text: str) -> str:
        """Greedy output for a source text such as "3 1 4 1 5" (or "31415", "12+34", "2024-03-15")."""
        ids = greedy_decode(self.model, self._src_tensor(self.task.tokenize(text)), self._max_out())[0]
        return self.task.detokenize(self.task.tgt_vocab.decode(ids.tolist()))

    @torch.inference_mode()
    def decode_trace(self, text: str) -> DecodeTrace:
        """Greedy decoding of text with the next-token probabilities p(y_t | y_<t, x) of every step.

        Malformed input raises InputError; well-formed input outside the trained range (longer than max_len,
        more digits, another century) is decoded and flagged in trace.outside: length generalisation is a lesson
        to show, not to hide."""
        src = self.task.tokenize(text)
        ids, probs = greedy_decode(self.model, self._src_tensor(src), self._max_out(), return_probs=True)
        out = [self.task.tgt_vocab.itos[i] for i in ids[0].tolist()]
        if "<eos>" in out:
            out = out[: out.index("<eos>") + 1]
        return DecodeTrace(src, out, probs[0, : len(out)].numpy(), list(self.task.tgt_vocab.itos),
                           self.task.range_note(src))

    @torch.inference_mode()
    def attention(self, text: str, output: list[str] | None = None) -> AttentionMaps:
        """Every attention map for text, with the decoder fed <bos> + output (default: the greedy output)."""
        src = self.task.tokenize(text)
        if output is None:
            output = [t for t in self.decode_trace(text).out if t != "<eos>"]
        tgt_ids = torch.tensor([[BOS] + self.task.tgt_vocab.encode(output)])  # (1, N_tgt)
        _, maps = self.model(self._src_tensor(src), tgt_ids, capture=True)
        return AttentionMaps(src, ["<bos>"] + list(output), {k: v[0].numpy() for k, v in maps.items()})

    @torch.inference_mode()
    def evaluate(self, n: int = 500, task: Task | None = None, seed: int = 12345) -> float:
        """Exact-sequence accuracy of greedy decoding on n held-out examples of task (default: own task)."""
        task = task or self.task
        src, _, tgt_out = (torch.from_numpy(a) for a in sample_batch(task, random.Random(seed), n, heldout=True))
        return sequence_scores(greedy_decode(self.model, src, self._max_out()), tgt_out)[0]

    def save(self, out_dir: str | Path, dtype: str = "float32") -> Path:
        """Write model.safetensors + config.json (+ snapshots.safetensors) into out_dir."""
        return save_checkpoint(self, out_dir, dtype)


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
# controls), a little wider. Checked, with each value's type, before anything is built or read (issue #19).
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
    model must fit in the server-wide memory budget too (viz_core.budget; ServerBusy), as a visitor's upload must.

    Nothing is built before the config has been checked (types, ranges, the memory a model of its size needs,
    the same budget as the Train tab), and no weight is read before the safetensors header has been compared
    with the shapes that config needs. Every value the page shows (info, history, snapshots) is typed and ranged
    like what the trainer writes there."""
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


def _is_number(v) -> bool:
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
PRECISION = Spec("text", choices="bf16|float32", shown="bf16, float32")  # viz_core.device.precision


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
        return _is_number(value)
    if kind == "str":
        return isinstance(value, str) and len(value) <= 40
    return False


def _task_and_model(config: dict) -> tuple[Task, ModelConfig, TrainConfig]:
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
