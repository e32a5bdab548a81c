"""Training the small Transformer: device choice, the paper's optimiser recipe, a trainer that yields metrics (its loop:
viz_core.runtime.training_loop), greedy decoding and the trained model (its checkpoints: viz_core.seq2seq.checkpoint).

    trainer = Trainer(make_task("reverse"), ModelConfig(), TrainConfig(max_seconds=30))
    for m in trainer.run():          # one Metrics record every few steps; the caller draws them
        print(m.step, m.loss, m.val_exact)
    trainer.translator().translate("3 1 4 1 5")      # -> "5 1 4 1 3"
"""
from __future__ import annotations

import copy
import functools
import random
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from ..errors import InputError
from ..runtime import budget
from ..runtime.device import DeviceBatches, autocast, memory_budget, pick_device, precision
from ..runtime.seeding import RandomStream
from ..runtime.training_loop import Hooks, LoopConfig, diverge_limit, training_loop
from .checkpoint import LENGTH_KEY, is_number, load_checkpoint, save_checkpoint
from .model import ModelConfig, Seq2SeqTransformer, count_parameters
from .tasks import BOS, EOS, PAD, RangeNote, Task, encode_batch, make_task, pairs_by_length, sample_batch


# ---------------------------------------------------------------- configuration
@dataclass
class TrainConfig:
    """Optimiser and loop settings. Defaults: the paper's Adam + warmup recipe, scaled for toy tasks."""
    batch_size: int = 128            # sequences per step (not 256: as many steps to the target,
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
    """The model's parameter count (the Train page asks for it on every run, and building the model, even on the
    meta device, is too slow to repeat on every page switch: the count is cached)."""
    return _parameter_count_of(tuple(sorted(cfg.to_dict().items())))


@functools.lru_cache(maxsize=64)
def _parameter_count_of(config_items: tuple) -> int:
    with torch.device("meta"):
        return count_parameters(Seq2SeqTransformer(ModelConfig.from_dict(dict(config_items))))


def check_fits(task: Task, model_cfg: ModelConfig, train_cfg: TrainConfig,
               limit: int | None = None) -> tuple[int, int]:
    """(parameters, estimated bytes) of a run; raises InputError with the reason when it would not fit in `limit`
    bytes (default: what one run may use on the device it would train on, viz_core.runtime.device.memory_budget)."""
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

    Resumable: a run() left before its end (its generator closed) goes on from its step when run() is called again,
    within the same budgets.
    """

    def __init__(self, task: Task, model_cfg: ModelConfig | None = None, train_cfg: TrainConfig | None = None,
                 device: torch.device | str | None = None):
        self.task, self.train_cfg = task, train_cfg or TrainConfig()
        self.model_cfg = fit_config(task, model_cfg or ModelConfig())
        self.device = torch.device(device) if device is not None else pick_device(self.train_cfg.force_cpu)
        # initial weights and dropout masks come from this training's own random stream (viz_core.runtime.seeding)
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
        self._window: list[tuple[float, float]] = []  # (loss, token accuracy) of the steps since the last record
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
        """Train (viz_core.runtime.training_loop: its stop rules, with divergence above 2 ln V + 1); yield a Metrics
        record every log_every steps and after every evaluation; the last has done=True."""
        cfg = self.train_cfg
        loop = LoopConfig(max_seconds=cfg.max_seconds, max_steps=cfg.max_steps, eval_every=cfg.eval_every,
                          log_every=cfg.log_every, diverge_above=diverge_limit(self.model_cfg.tgt_vocab),
                          on_cpu=self.device.type == "cpu", threads=cfg.threads)
        hooks = Hooks(train_step=self._logged_step, evaluate=self._evaluate, snapshot=self._snapshot,
                      record=self._record, stop_requested=lambda: self._stop, reached_target=self._reached_target,
                      evaluation_due=self._target_in_sight)
        yield from training_loop(self, hooks, loop)

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

    def _logged_step(self) -> float:
        """One training step whose loss and accuracy the next record averages; returns the loss."""
        self._window.append(self._train_step())
        return self._window[-1][0]

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

    def _record(self, evaluated: bool) -> Metrics:
        """The record of this step: means over the steps since the last record, the last evaluation's figures."""
        window, self._window = self._window, []
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
                 if k.startswith(LENGTH_KEY) and k[len(LENGTH_KEY):].isdigit() and is_number(v)}
        n = self.info.get("by_length_n")
        return (dict(sorted(found.items())), int(n)) if found and is_number(n) else None

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
