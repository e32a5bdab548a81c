"""Training the decoder-only LM: a trainer that yields metrics and knows nothing of a UI (its loop and stop rules:
viz_core.runtime.training_loop), the trained LanguageModel with its tokenizer, and checkpoints (safetensors + JSON,
never pickle).

Two tasks:
    induction   random tokens in which a segment repeats at random places (viz_core.lm.induction); Olsson et al. 2022
    chars       next character of our own bilingual corpus (viz_core.lm.corpus: the app's explanations and
                generated sentences); any typed character is accepted (viz_core.lm.charset: unknown ones -> UNK)

    trainer = LMTrainer(LMTrainConfig(task="induction", max_seconds=60))
    for m in trainer.run():               # an LMMetrics every few steps; the caller draws them
        print(m.step, m.first_loss, m.repeat_loss, m.induction)
    lm = trainer.language_model()
    lm.attention("3 14 15 9 3 14 15 9").weights      # (layers, heads, N, N)
"""
from __future__ import annotations

import functools
import json
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from ..runtime.device import DeviceBatches, autocast, memory_budget, pick_device, precision
from ..runtime import budget
from ..errors import InputError
from ..io.export import write_files
from .induction import half_losses, head_scores, repeated_tokens, scattered_repeats, typed_symbols
from .model import DecoderLM, LMConfig, count_parameters
from .charset import unknown_chars, vocabulary
from .corpus import LANGS, char_corpus
from ..runtime.seeding import RandomStream, unseeded
from ..runtime.training_loop import Hooks, LoopConfig, diverge_limit, training_loop

TASKS = ("induction", "chars")
PROBE_LENGTH = 16  # induction: the snapshots' example is a 16-token segment repeated once


# ---------------------------------------------------------------- configuration
@dataclass
class LMTrainConfig:
    """Loop and optimiser settings. Defaults: the induction run that forms its heads within a minute on one core."""
    task: str = "induction"          # "induction" or "chars"
    batch_size: int = 32             # sequences per step
    lr: float = 1e-3                 # AdamW learning rate (constant)
    weight_decay: float = 0.01       # AdamW decoupled weight decay
    max_seconds: float = 60.0        # training-time budget (evaluation excluded)
    max_steps: int | None = None     # optional step budget
    target_induction: float | None = None  # stop once the best induction score reaches this (None: never)
    seq_len: int = 64                # induction: tokens per training sequence (also the longest typed sequence)
    min_repeat: int = 2              # induction: the repeated segment is min_repeat..seq_len // 2 tokens long
    max_copies: int = 3              # induction: the segment occurs 2..max_copies times, at random places
    context: int = 128               # chars: tokens per training window (and the model's max_len)
    eval_every: int = 50             # steps between evaluations (scores, held-out loss, snapshot)
    eval_size: int = 32              # sequences per evaluation
    log_every: int = 10              # steps between yielded metrics
    max_snapshots: int = 30          # attention snapshots kept (the least changing ones are dropped)
    seed: int = 0                    # seeds data and initialisation
    size: str = "base"               # chars: the model's size (SIZES); the larger ones are offered on a GPU only
    force_cpu: bool = False          # train on the CPU even when a GPU is present
    threads: int | None = 1          # torch CPU threads while training (None: torch's default)

    def __post_init__(self):
        if self.task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}")
        if self.size not in SIZES:
            raise ValueError(f"size must be one of {tuple(SIZES)}")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "LMTrainConfig":
        return cls(**{k: v for k, v in data.items() if k in {f.name for f in fields(cls)}})


# the character model's sizes: d_model, heads, layers, MLP width. "base" is the shipped model (about 0.9 M
# parameters: 1.8 MB in float16; 1600 steps take ~8 minutes on one core); the others, 2x and 4x as wide and 1.5x
# and 2x as deep (about 5.3 M and 26 M parameters), make sense only on a GPU
SIZES = {"base": (128, 4, 4, 384), "large": (256, 8, 6, 1024), "xl": (512, 8, 8, 2048)}


def default_model_config(train_cfg: LMTrainConfig, vocab: int) -> LMConfig:
    """Induction: 2 layers x 4 heads, attention-only (the two-head circuit needs no MLP). Chars: the model of
    train_cfg.size (SIZES)."""
    if train_cfg.task == "induction":
        return LMConfig(vocab=vocab, max_len=train_cfg.seq_len)
    d, heads, layers, ff = SIZES[train_cfg.size]
    return LMConfig(vocab=vocab, d_model=d, n_heads=heads, n_layers=layers, d_ff=ff, max_len=train_cfg.context)


def estimate_memory(model_cfg: LMConfig, batch_size: int, n: int) -> int:
    """Rough training memory in bytes: float32 weights, gradients and AdamW's two moments (4 copies), activations
    kept for the backward pass (about 16 d_model + 2 d_ff floats per token and layer), attention maps (3 B H N^2
    per layer) and logits with their softmax and gradient (3 B N V)."""
    params = _parameter_count(tuple(sorted(model_cfg.to_dict().items())))
    tokens = batch_size * n * model_cfg.n_layers
    attn = 3 * batch_size * model_cfg.n_heads * n * n * model_cfg.n_layers
    logits = 3 * batch_size * n * model_cfg.vocab
    return 4 * (4 * params + tokens * (16 * model_cfg.d_model + 2 * model_cfg.d_ff) + attn + logits)


@functools.lru_cache(maxsize=64)
def _parameter_count(config_items: tuple) -> int:
    """The parameter count of the LMConfig whose sorted to_dict() items these are."""
    with torch.device("meta"):  # shapes only, no memory
        return count_parameters(DecoderLM(LMConfig.from_dict(dict(config_items))))


@functools.lru_cache(maxsize=len(TASKS))
def _vocab_size(task: str) -> int:
    """The vocabulary of a task's default tokenizer (the character one reads the whole corpus: once per process)."""
    return Tokenizer.for_task(LMTrainConfig(task=task)).size


def sequence_length(train_cfg: LMTrainConfig) -> int:
    """Tokens per training sequence: seq_len (induction) or context (chars)."""
    return train_cfg.seq_len if train_cfg.task == "induction" else train_cfg.context


def check_fits(train_cfg: LMTrainConfig, model_cfg: LMConfig | None = None, limit: int | None = None
               ) -> tuple[int, int]:
    """(parameters, estimated bytes) of a run; InputError saying why when it needs more than `limit` bytes
    (default: what one run may use on the device it would train on, viz_core.runtime.device.memory_budget)."""
    if model_cfg is None:
        model_cfg = default_model_config(train_cfg, _vocab_size(train_cfg.task))
    device = pick_device(train_cfg.force_cpu)
    if limit is None:
        limit = memory_budget(device)
    need = estimate_memory(model_cfg, train_cfg.batch_size, sequence_length(train_cfg))
    if need > limit:
        raise InputError("lm.too_big", f"this run needs about {need / 2**20:.0f} MiB, more than the "
                         f"{limit / 2**20:.0f} MiB a run may use here; choose a smaller size or batch",
                         need=f"{need / 2**20:.0f}", limit=f"{limit / 2**20:.0f}")
    if device.type == "cpu":  # a run on the CPU takes the server's memory: the server-wide budget must hold it
        budget.admit(need, "a training")
    return _parameter_count(tuple(sorted(model_cfg.to_dict().items()))), need


# ---------------------------------------------------------------- tokenizer
SPACE_SHOWN = "␣"


@dataclass
class Tokenizer:
    """kind "ids": text is space-separated token numbers "3 14 15"; kind "chars": one token per character, unknown
    characters refused (the first character model); kind "chars_unk": one token per character, unknown characters
    read as the last token, UNK (viz_core.lm.charset)."""
    kind: str
    itos: list[str]

    @classmethod
    def for_task(cls, train_cfg: LMTrainConfig, vocab: int = 64) -> "Tokenizer":
        if train_cfg.task == "induction":
            return cls("ids", [str(i) for i in range(vocab)])
        return cls("chars_unk", vocabulary(char_corpus().train))

    @property
    def size(self) -> int:
        return len(self.itos)

    def encode(self, text: str) -> list[int]:
        """Token ids of a text; InputError for an empty text or a token outside the vocabulary."""
        if not text.strip():
            raise InputError("lm.empty_text", "type some text first")
        parts = text.split() if self.kind == "ids" else list(text)
        index = {s: i for i, s in enumerate(self.itos)}
        if self.kind == "chars_unk":
            return [index.get(p, self.size - 1) for p in parts]  # unknown -> UNK, the last token
        for p in parts:
            if p not in index:
                raise InputError("lm.unknown_token", f"the model does not know {p!r}", token=p,
                                 hint=self._hint())
        return [index[p] for p in parts]

    def unknown(self, text: str) -> list[str]:
        """The distinct characters of text that a "chars_unk" tokenizer reads as UNK (none for other kinds, which
        refuse them)."""
        if self.kind != "chars_unk":
            return []
        return unknown_chars(text, set(self.itos[:-1]))

    def decode(self, ids) -> str:
        sep = " " if self.kind == "ids" else ""
        return sep.join(self.itos[i] for i in ids)

    def labels(self, ids) -> list[str]:
        """Display strings of tokens (a space shows as ␣, a newline as ⏎)."""
        return [self.itos[i].replace(" ", SPACE_SHOWN).replace("\n", "⏎") for i in ids]

    def _hint(self) -> str:
        if self.kind == "ids":
            return f"0–{self.size - 1}"
        shown = "".join(self.itos[:40]).replace("\n", "")
        return shown + (f"… ({self.size - 40} more)" if self.size > 40 else "")


# ---------------------------------------------------------------- records
@dataclass
class LMMetrics:
    """One progress record. first/repeat losses and scores come from the last evaluation (None before it)."""
    step: int
    seconds: float
    loss: float                          # training loss, mean over the steps since the last record
    tokens_per_s: float
    first_loss: float | None = None      # induction: loss on the unpredictable tokens
    repeat_loss: float | None = None     # induction: loss on the repeated tokens (in-context)
    prev_token: float | None = None      # induction: best previous-token score over heads
    induction: float | None = None       # induction: best induction score over heads
    val_loss: float | None = None        # chars: held-out loss
    evaluated: bool = False
    done: bool = False
    reason: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class LMSnapshot:
    """State of the heads at one step: scores (L, H) and the probe's attention maps (L, H, N, N)."""
    step: int
    prev: np.ndarray
    induction: np.ndarray
    maps: np.ndarray


# ---------------------------------------------------------------- trainer
class LMTrainer:
    """Trains a DecoderLM; run() yields LMMetrics until a budget is spent or a stop is requested."""

    def __init__(self, train_cfg: LMTrainConfig | None = None, model_cfg: LMConfig | None = None,
                 device: torch.device | str | None = None):
        self.train_cfg = cfg = train_cfg or LMTrainConfig()
        vocab = model_cfg.vocab if model_cfg is not None else 64
        self.tokenizer = Tokenizer.for_task(cfg, vocab)
        self.model_cfg = model_cfg or default_model_config(cfg, self.tokenizer.size)
        self.device = torch.device(device) if device is not None else pick_device(cfg.force_cpu)
        # initial weights (and any dropout) come from this training's own random stream (viz_core.runtime.seeding)
        self.random_stream = RandomStream(cfg.seed, self.device)
        with self.random_stream.active():
            self.model = DecoderLM(self.model_cfg).to(self.device)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        self.gen = torch.Generator().manual_seed(cfg.seed)
        self.data = _CharData(self.tokenizer, cfg.context, self.device) if cfg.task == "chars" else None
        # induction batches are made on the host and reach the device a block at a time (the same batches in the
        # same order); the character data lives on the device and is cut there
        self._batches = (DeviceBatches(lambda: self._batch(cfg.batch_size, self.gen)[:1], self.device)
                         if self.data is None else None)
        self.probe = probe_ids(cfg, self.tokenizer)
        self.step, self.seconds, self.tokens = 0, 0.0, 0
        self.history: list[dict] = []
        self.snapshots: list[LMSnapshot] = []
        self.reason: str | None = None
        self._stop = False
        self._window: list[float] = []  # training losses since the last record
        self._last_eval: dict = {}

    @property
    def done(self) -> bool:
        return self.reason is not None

    @property
    def n_params(self) -> int:
        return count_parameters(self.model)

    def request_stop(self) -> None:
        """Ask run() to stop after the current step (safe from another thread)."""
        self._stop = True

    def run(self) -> Iterator[LMMetrics]:
        """Train (viz_core.runtime.training_loop: its stop rules, with divergence above 2 ln V + 1); yield a record
        every log_every steps and after each evaluation; the last one has done=True."""
        cfg = self.train_cfg
        loop = LoopConfig(max_seconds=cfg.max_seconds, max_steps=cfg.max_steps, eval_every=cfg.eval_every,
                          log_every=cfg.log_every, evaluate_first=True,
                          diverge_above=diverge_limit(self.model_cfg.vocab), on_cpu=self.device.type == "cpu",
                          threads=cfg.threads)
        # a snapshot pairs the probe's maps with an evaluation's head scores: on Stop (no evaluation) none is taken
        hooks = Hooks(train_step=self._logged_step, evaluate=self._evaluate, snapshot=lambda: None,
                      record=self._record, stop_requested=lambda: self._stop, reached_target=self._reached_target)
        yield from training_loop(self, hooks, loop)

    def language_model(self) -> "LanguageModel":
        """The trained model (a CPU copy in eval mode) with tokenizer, curves, snapshots and run info."""
        with unseeded():  # initial weights that the trained ones replace
            model = DecoderLM(self.model_cfg)
        model.load_state_dict({k: v.detach().cpu() for k, v in self.model.state_dict().items()})
        info = {"steps": self.step, "seconds": round(self.seconds, 1), "device": self.device.type,
                "precision": precision(self.device), "reason": self.reason, "params": self.n_params}
        if self.data is not None:  # what the character model read, and the lines it never trained on
            info |= {"corpus": char_corpus().stats, "heldout": char_corpus().heldout}
        return LanguageModel(model.eval(), self.tokenizer, self.train_cfg, list(self.history),
                             list(self.snapshots), info)

    # -- internals
    def _batch(self, size: int, generator: torch.Generator):
        if self.data is not None:
            return self.data.batch(size, generator), None
        cfg = self.train_cfg
        return scattered_repeats(size, cfg.seq_len, self.model_cfg.vocab, generator, cfg.min_repeat,
                                 max_copies=cfg.max_copies)

    def _logged_step(self) -> float:
        """One training step whose loss the next record averages; returns the loss."""
        self._window.append(self._train_step())
        return self._window[-1]

    def _train_step(self) -> float:
        t0 = time.perf_counter()
        self.model.train()
        if self.data is not None:
            ids = self.data.batch(self.train_cfg.batch_size, self.gen)  # (B, N) on the device
        else:
            ids, = self._batches.next()  # (B, N)
        with self.random_stream.active(), autocast(self.device):  # bf16 products on CUDA
            logits, _ = self.model(ids)  # (B, N, V)
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.opt.step()
        self.step += 1
        self.tokens += ids.numel()
        self.seconds += time.perf_counter() - t0
        return loss.item()

    def _reached_target(self) -> bool:
        """The best head's induction score of the latest evaluation reached target_induction (when set)."""
        target = self.train_cfg.target_induction
        return target is not None and (self._last_eval.get("induction") or 0.0) >= target

    @torch.no_grad()
    def _evaluate(self) -> None:
        self.model.eval()
        if self.data is not None:
            ids = self.data.heldout(self.train_cfg.eval_size)  # (B, N) on the device
            logits, _ = self.model(ids)
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
            self._last_eval = {"val_loss": loss.item()}
        else:
            self._last_eval = self._evaluate_induction()
        self._snapshot()

    def _evaluate_induction(self) -> dict:
        """The standard test at several segment lengths: x = s s with |s| in eval_lengths (eval_size sequences in
        all, never seen in training); losses and head scores are the means over the lengths."""
        cfg = self.train_cfg
        gen = torch.Generator().manual_seed(10_000 + cfg.seed)
        lengths = eval_lengths(cfg.seq_len)
        rows = []
        for length in lengths:
            ids, repeated = repeated_tokens(max(2, cfg.eval_size // len(lengths)), length, self.model_cfg.vocab, gen)
            logits, maps = self.model(ids.to(self.device), capture=True)  # ids (B, 2L)
            first, rep = half_losses(logits.cpu(), ids, repeated)
            weights = stack_maps(maps, self.model_cfg.n_layers).transpose(1, 0, 2, 3, 4)  # (B, L, H, N, N)
            rows.append((first.item(), rep.item(), *head_scores(weights, ids.tolist())))  # scores (L, H) each
        first, rep = np.mean([r[0] for r in rows]), np.mean([r[1] for r in rows])
        prev, ind = np.mean([r[2] for r in rows], axis=0), np.mean([r[3] for r in rows], axis=0)  # (L, H)
        self._scores = (prev, ind)
        return {"first_loss": float(first), "repeat_loss": float(rep), "prev_token": float(prev.max()),
                "induction": float(ind.max()), "prev_map": prev.round(4).tolist(), "ind_map": ind.round(4).tolist()}

    def _snapshot(self) -> None:
        """Induction: scores and the probe's attention at this step. Beyond max_snapshots, the snapshot that differs
        least from the one before it goes, so the phase change stays densely sampled and the plateaus thin out."""
        if self.data is not None:
            return  # the character model keeps no snapshots
        _, maps = self.model(torch.tensor([self.probe], device=self.device), capture=True)
        weights = stack_maps(maps, self.model_cfg.n_layers)[:, 0].astype(np.float16)  # (L, H, N, N)
        prev, ind = getattr(self, "_scores", (np.zeros(weights.shape[:2]),) * 2)
        self.snapshots.append(LMSnapshot(self.step, np.asarray(prev), np.asarray(ind), weights))
        if len(self.snapshots) > self.train_cfg.max_snapshots:
            del self.snapshots[least_change(self.snapshots, self.train_cfg.eval_every)]

    def _record(self, evaluated: bool) -> LMMetrics:
        """The record of this step: the mean training loss since the last record and the last evaluation's figures."""
        loss = float(np.mean(self._window)) if self._window else float("nan")
        self._window = []
        scalars = {k: v for k, v in self._last_eval.items() if not k.endswith("_map")}
        m = LMMetrics(self.step, self.seconds, loss, self.tokens / max(self.seconds, 1e-9), **scalars,
                      evaluated=evaluated, done=self.done, reason=self.reason)
        row = m.to_dict()
        if evaluated:
            row |= {k: v for k, v in self._last_eval.items() if k.endswith("_map")}
        self.history.append(row)
        return m


def least_change(snaps: list[LMSnapshot], eval_every: int) -> int:
    """Index (never the first or the last) of the snapshot whose head scores moved least since the one before;
    a small cost for the step gap its removal would leave keeps the plateaus from emptying out entirely."""
    def cost(i: int) -> float:
        a, b = snaps[i - 1], snaps[i]
        moved = np.abs(b.prev - a.prev).sum() + np.abs(b.induction - a.induction).sum()
        return float(moved) + 0.01 * (snaps[i + 1].step - snaps[i - 1].step) / eval_every
    return min(range(1, len(snaps) - 1), key=cost)


def stack_maps(maps: dict, n_layers: int) -> np.ndarray:
    """Captured {"blocks.i.attn": (B, H, N, N)} -> numpy (L, B, H, N, N)."""
    return torch.stack([maps[f"blocks.{i}.attn"] for i in range(n_layers)]).float().cpu().numpy()


def eval_lengths(seq_len: int) -> tuple[int, ...]:
    """Segment lengths of the induction evaluation: short to as long as the context allows (x = s s fits)."""
    return tuple(sorted({min(n, seq_len // 2) for n in (4, 8, 15, 30)}))


def probe_ids(train_cfg: LMTrainConfig, tokenizer: Tokenizer) -> list[int]:
    """The example whose attention the snapshots keep: a random segment of PROBE_LENGTH tokens then the same
    segment again (the standard test), or a corpus line."""
    if train_cfg.task == "induction":
        length = min(PROBE_LENGTH, train_cfg.seq_len // 2)
        ids, _ = repeated_tokens(1, length, tokenizer.size, torch.Generator().manual_seed(7))
        return ids[0].tolist()
    return tokenizer.encode(char_corpus().train.splitlines()[0][: train_cfg.context])


class _CharData:
    """Random windows of the corpus's training text; held-out windows from its held-out lines (both languages)."""

    def __init__(self, tokenizer: Tokenizer, context: int, device: torch.device | str = "cpu"):
        corpus = char_corpus()
        # moved to the device once; each batch is cut there
        self.train = torch.tensor(tokenizer.encode(corpus.train), device=device)  # (T,)
        self.test = torch.tensor(tokenizer.encode("".join(corpus.heldout[lang] for lang in LANGS)),
                                 device=device)  # (T_held,)
        self.context = context

    def batch(self, size: int, generator: torch.Generator, source: torch.Tensor | None = None) -> torch.Tensor:
        """size windows of `context` tokens at random starts (drawn with the host generator): (B, context), on
        the data's device."""
        source = self.train if source is None else source
        starts = torch.randint(0, len(source) - self.context, (size,), generator=generator)  # (B,)
        window = torch.arange(self.context)  # (context,)
        return source[(starts[:, None] + window).to(source.device)]  # (B, context)

    def heldout(self, size: int) -> torch.Tensor:
        return self.batch(size, torch.Generator().manual_seed(1234), self.test)


# ---------------------------------------------------------------- the trained model
@dataclass
class LMAttention:
    tokens: list[str]        # display labels of the tokens
    weights: np.ndarray      # float32 (layers, heads, N, N), causal: rows sum to 1, zeros above the diagonal
    ids: list[int] = field(default_factory=list)  # the token ids (equal ids = the same token, e.g. "The"/"the")


class LanguageModel:
    """A trained DecoderLM with its tokenizer, training curves, snapshots and run info (eval mode, CPU)."""

    def __init__(self, model: DecoderLM, tokenizer: Tokenizer, train_cfg: LMTrainConfig,
                 history: list[dict] | None = None, snapshots: list[LMSnapshot] | None = None,
                 info: dict | None = None):
        self.model, self.tokenizer, self.train_cfg = model.eval(), tokenizer, train_cfg
        self.history, self.snapshots, self.info = history or [], snapshots or [], info or {}

    @property
    def config(self) -> LMConfig:
        return self.model.cfg

    @property
    def task(self) -> str:
        return self.train_cfg.task

    def tokenize(self, text: str) -> tuple[list[int], list[str]]:
        """(token ids, display labels) of a text, checked against the context length (InputError otherwise).
        The induction model reads numbers or words (induction.typed_symbols: each distinct word its own symbol);
        the character model reads characters."""
        if self.task == "induction":
            typed = typed_symbols(text, self.config.vocab)
            ids, labels = typed.ids, typed.labels
        else:
            ids = self.tokenizer.encode(text)
            labels = self.tokenizer.labels(ids)
        if len(ids) > self.config.max_len:
            raise InputError("lm.too_long", f"{len(ids)} tokens; at most {self.config.max_len}",
                             n=len(ids), max=self.config.max_len)
        return ids, labels

    def encode(self, text: str) -> list[int]:
        """Token ids of a text (tokenize)."""
        return self.tokenize(text)[0]

    @torch.inference_mode()
    def attention(self, text: str) -> LMAttention:
        """Causal attention weights of every layer and head for a text: (layers, heads, N, N)."""
        ids, labels = self.tokenize(text)
        _, maps = self.model(torch.tensor([ids]), capture=True)
        return LMAttention(labels, stack_maps(maps, self.config.n_layers)[:, 0], ids)

    def head_scores(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """(previous-token, induction) score of every head on a text: two (layers, heads) arrays."""
        return self.scores_of(self.attention(text))

    @staticmethod
    def scores_of(result: LMAttention) -> tuple[np.ndarray, np.ndarray]:
        """head_scores of an attention result already computed (no second forward pass)."""
        return head_scores(result.weights, result.ids)

    @torch.inference_mode()
    def logits(self, text: str) -> np.ndarray:
        """Next-token logits at every position: (N, V)."""
        logits, _ = self.model(torch.tensor([self.encode(text)]))
        return logits[0].numpy()

    def save(self, out_dir: str | Path, dtype: str = "float32") -> Path:
        return save_lm(self, out_dir, dtype)


# ---------------------------------------------------------------- checkpoints (safetensors + JSON, never pickle)
LM_FORMAT = "attention-explorer/lm-checkpoint/1"
WEIGHTS, CONFIG, SNAPSHOTS = "model.safetensors", "config.json", "snapshots.safetensors"
DTYPES = {"float32": torch.float32, "float16": torch.float16}


def lm_checkpoint_files(lm: LanguageModel, dtype: str = "float32") -> dict[str, bytes]:
    """{file name: bytes}: weights, JSON config (tokenizer, configs, curves, info) and snapshots."""
    from safetensors.torch import save
    config = {"format": LM_FORMAT, "dtype": dtype, "model": lm.config.to_dict(), "train": lm.train_cfg.to_dict(),
              "tokenizer": {"kind": lm.tokenizer.kind, "itos": lm.tokenizer.itos}, "info": lm.info,
              "history": lm.history, "snapshot_steps": [s.step for s in lm.snapshots]}
    weights = {k: v.detach().to("cpu", DTYPES[dtype]).contiguous() for k, v in lm.model.state_dict().items()}
    files = {WEIGHTS: save(weights, metadata={"format": LM_FORMAT}), CONFIG: json.dumps(config).encode()}
    if lm.snapshots:
        snaps = {}
        for s in lm.snapshots:
            maps = np.round(np.asarray(s.maps, np.float32) * 255).astype(np.uint8)  # (L, H, N, N) in 1/255
            snaps |= {f"{s.step}/maps": torch.from_numpy(maps),
                      f"{s.step}/prev": torch.from_numpy(np.asarray(s.prev, np.float32)),
                      f"{s.step}/induction": torch.from_numpy(np.asarray(s.induction, np.float32))}
        files[SNAPSHOTS] = save(snaps)
    return files


def save_lm(lm: LanguageModel, out_dir: str | Path, dtype: str = "float32") -> Path:
    return write_files(lm_checkpoint_files(lm, dtype), out_dir)


def load_lm(path: str | Path) -> LanguageModel:
    """A checkpoint directory (model.safetensors + config.json [+ snapshots.safetensors]) -> LanguageModel."""
    path = Path(path)
    files = {p.name: p.read_bytes() for p in path.iterdir()} if path.is_dir() else {}
    if CONFIG not in files or WEIGHTS not in files:
        raise InputError("lm.ckpt_missing", f"no checkpoint at {path}", names=f"{CONFIG}, {WEIGHTS}")
    return load_lm_files(files)


def load_lm_files(files: dict[str, bytes]) -> LanguageModel:
    from safetensors.torch import load
    try:
        config = json.loads(files[CONFIG])
        if config.get("format") != LM_FORMAT:
            raise ValueError("format")
        with unseeded():  # initial weights that the checkpoint's replace
            model = DecoderLM(LMConfig.from_dict(config["model"]))
        weights = {k: v.float() for k, v in load(files[WEIGHTS]).items()}
        if not all(torch.isfinite(v).all() for v in weights.values()):
            raise ValueError("weights hold NaN or infinite values")
        model.load_state_dict(weights)
        snaps = _snapshots(load(files[SNAPSHOTS])) if SNAPSHOTS in files else []
        tok = Tokenizer(config["tokenizer"]["kind"], list(config["tokenizer"]["itos"]))
    except Exception as exc:  # noqa: BLE001 - JSON, safetensors and torch raise many kinds for a damaged file
        raise InputError("lm.ckpt_corrupt", f"not a language-model checkpoint ({type(exc).__name__})") from None
    return LanguageModel(model, tok, LMTrainConfig.from_dict(config["train"]), config.get("history", []), snaps,
                         config.get("info", {}))


def _snapshots(tensors: dict[str, torch.Tensor]) -> list[LMSnapshot]:
    steps = sorted({int(k.split("/")[0]) for k in tensors})
    return [LMSnapshot(s, tensors[f"{s}/prev"].numpy(), tensors[f"{s}/induction"].numpy(),
                       _maps(tensors[f"{s}/maps"])) for s in steps]


def _maps(t: torch.Tensor) -> np.ndarray:
    """Snapshot attention as stored: uint8 in 1/255 steps (enough for a picture, a quarter of float32)."""
    return (t.float() / 255).numpy() if t.dtype == torch.uint8 else t.float().numpy()
