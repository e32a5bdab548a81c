"""Helpers of the Language-model page: shipped checkpoints and untrained variant models (shared, read-only caches),
cached analyses and figures, and the page's training job (app_pages/_ui/training_job.py: its own thread, never a
script run; the models it trains live in st.session_state). The page supplies what its job differs in: the trainer
it builds and the model object it keeps."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace

import numpy as np
import streamlit as st
import torch

from viz_core.io.export import npz_bytes
from viz_core.lm import DecoderLM, LMConfig
from viz_core.runtime import priority
from viz_core.lm.generate import cache_difference, generate, time_per_token
from viz_core.lm.training import LanguageModel, LMTrainConfig, LMTrainer, load_lm, probe_ids
from viz_core.plots import lm as plots
from viz_core.runtime.seeding import seeded
from viz_core.runtime.threads import thread_budget

from . import SharedFigures, models, share
from .training_job import Run, TrainingJob, shipped_path

TIMING_LENGTHS = [8, 32, 64, 128, 192, 256, 384, 511]


@st.cache_resource(show_spinner=False)
def shipped(task: str) -> LanguageModel | None:
    """The checkpoint shipped for a task (read-only, shared by every session), or None."""
    path = shipped_path(f"lm_{task}")
    return None if path is None else load_lm(path)


@st.cache_resource(show_spinner=False)
def variant_model(n_kv_heads: int, vocab: int, max_len: int) -> DecoderLM:
    """An untrained decoder (seed 0) with n_kv_heads key/value heads, for the KV-cache demonstrations."""
    cfg = LMConfig(vocab=vocab, d_ff=256, max_len=max_len, n_kv_heads=n_kv_heads)
    with seeded(0):
        return DecoderLM(cfg).eval()


@st.cache_data(show_spinner=False, max_entries=32)
def cache_run(n_kv_heads: int, vocab: int, max_len: int, length: int) -> tuple[list, list[int], float]:
    """The variant model's real cache after `length` steps (each layer's K shape, bytes after each step) and the
    largest |logits with the cache - full recomputation| on `length` seeded tokens: the same for every visitor, so
    computed once per server and setting (a switch between MHA, GQA and MQA redraws without running the model)."""
    model = variant_model(n_kv_heads, vocab, max_len)
    ids = [int(i) for i in np.random.default_rng(0).integers(0, vocab, length)]
    with torch.inference_mode(), thread_budget(1):  # one thread: a tiny model gains nothing from two
        trace = generate(model, [0], length, temperature=0.0)  # step j feeds token j: after T steps the cache holds T
        return trace.cache_shapes[-1], trace.cache_bytes, cache_difference(model, ids)


# ---------------------------------------------------------------- time per new token, measured on this server
TIMING_REPEATS = 7  # best of: the least disturbed run of each length


@dataclass
class Timings:
    """Seconds per new token with and without the cache at TIMING_LENGTHS for each key/value-head count, measured
    on this server in a thread of its own (never in a visitor's script run: it took 0.6-2.7 s of CPU per variant),
    the variants one after the other and each step after any visitor's model computation (viz_core.runtime.priority)."""
    results: dict[int, dict[str, list[float]]] = field(default_factory=dict)
    measured_at: float | None = None  # time.time() when the last measurement ended
    running: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self, kv_counts: tuple[int, ...]) -> None:
        """Measure (again) in the background; a measurement already running is not started twice."""
        with self.lock:
            if self.running:
                return
            self.running = True
        threading.Thread(target=self._measure, args=(kv_counts,), name="lm-kv-timings", daemon=True).start()

    def _measure(self, kv_counts: tuple[int, ...]) -> None:
        try:
            fresh = {}
            for kv in kv_counts:
                model = variant_model(kv, 128, TIMING_LENGTHS[-1] + 1)
                with torch.inference_mode(), thread_budget(1):
                    fresh[kv] = {"cache": self._lengths(model, True), "full": self._lengths(model, False)}
            self.results, self.measured_at = fresh, time.time()
        finally:
            self.running = False

    @staticmethod
    def _lengths(model, use_cache: bool) -> list[float]:
        out = []
        for n in TIMING_LENGTHS:
            priority.wait_for_foreground()  # a visitor's computation first
            out += time_per_token(model, [n], use_cache, repeats=TIMING_REPEATS)
        return out


@st.cache_resource(show_spinner=False)
def timings() -> Timings:
    """The server's one Timings (shared by every session)."""
    return Timings()


# ---------------------------------------------------------------- the training job
# this session's training job and its models (task -> (LanguageModel, "trained"))
training = TrainingJob("lm", shipped, model_of=LMTrainer.language_model)


KV_SHARING = {"mha": lambda heads: heads, "gqa": lambda heads: max(1, heads // 2), "mqa": lambda heads: 1}


def build_run(settings: dict, kv: str = "mha") -> Run:
    """The trainer of a run, built with the settings of the click (LMTrainConfig.to_dict()) and its key/value
    heads: one per query head (mha), one per two (gqa) or one for all (mqa)."""
    cfg = LMTrainConfig.from_dict(settings)
    trainer = LMTrainer(cfg)
    kv_heads = KV_SHARING[kv](trainer.model_cfg.n_heads)
    if kv_heads != trainer.model_cfg.kv_heads:
        trainer = LMTrainer(cfg, replace(trainer.model_cfg, n_kv_heads=kv_heads))
    return Run(cfg.task, [("run", trainer)])


# ---------------------------------------------------------------- what the page draws of a model
@st.cache_resource(show_spinner=False, max_entries=32)
def _shipped_analysis(task: str, text: str):
    return _attention_and_scores(shipped(task), text)


def analyse(lm: LanguageModel, task: str, text: str):
    """(lm.attention(text), lm.head_scores(text)): cached across sessions for the shipped model (shared, read-only;
    callers must not modify the arrays), computed afresh for a model trained in this session. InputError for bad
    text."""
    if lm is shipped(task):
        return _shipped_analysis(task, text)
    return _attention_and_scores(lm, text)


def _attention_and_scores(lm: LanguageModel, text: str):
    """One forward pass: the attention of a text and the head scores read from it."""
    result = lm.attention(text)
    return result, lm.scores_of(result)


@st.cache_resource(show_spinner=False, max_entries=64)
def _shipped_phase_panels(task: str, labels: tuple) -> tuple:
    return tuple(share(fig) for fig in plots.phase_panels(shipped(task).history, **dict(labels)))


def phase_panels(history, task: str | None = None, **labels) -> tuple:
    """plots.phase_panels(history, **labels); cached (shared, read-only) when history is the shipped model's of
    task: hashing a long history costs about as much as drawing it."""
    model = shipped(task) if task else None
    if model is not None and history is model.history:
        return _shipped_phase_panels(task, tuple(sorted(labels.items())))
    return tuple(plots.phase_panels(history, **labels))


def snapshots_npz(lm: LanguageModel, task: str) -> bytes:
    """The training snapshots as an NPZ download (steps, both scores, attention maps, probe tokens); cached for the
    shipped model of task (compressing them is slow), built afresh for a model trained in this session."""
    return _shipped_snapshots_npz(task) if lm is shipped(task) else _snapshots_npz(lm)


@st.cache_data(show_spinner=False, max_entries=4)
def _shipped_snapshots_npz(task: str) -> bytes:
    return _snapshots_npz(shipped(task))


def _snapshots_npz(lm: LanguageModel) -> bytes:
    snaps = lm.snapshots
    return npz_bytes(
        steps=[s.step for s in snaps], prev=np.stack([s.prev for s in snaps]),
        induction=np.stack([s.induction for s in snaps]), maps=np.stack([s.maps for s in snaps]).astype(np.float32),
        tokens=lm.tokenizer.labels(probe_ids(lm.train_cfg, lm.tokenizer)))


@st.cache_resource(show_spinner=False, max_entries=32)
def _shipped_lens(task: str, text: str):
    from viz_core.lm.lens import logit_lens
    return logit_lens(shipped(task), text)


def lens(lm: LanguageModel, task: str, text: str):
    """The logit lens of a text (viz_core.lm.lens): cached across sessions for the shipped model (shared, read-only),
    computed afresh for a model trained in this session. InputError for bad text."""
    if lm is shipped(task):
        return _shipped_lens(task, text)
    from viz_core.lm.lens import logit_lens
    return logit_lens(lm, text)


# ---------------------------------------------------------------- the packaged real decoders
REAL_THREADS = 1  # torch threads of one generation: steadier (and on a busy 2-core server faster) than two


def real_decoders() -> list:
    """The packaged real decoders whose weights are installed (viz_core.pretrained.packaged), in the picker's order."""
    from viz_core.pretrained import packaged
    return [d for d in packaged.DECODERS if packaged.installed(d)]


@st.cache_data(show_spinner=False, max_entries=16)
def real_generation(model_id: str, prompt: str, n_new: int, temperature: float, top_k: int, top_p: float,
                    seed: int):
    """generate_real on the shared packaged decoder (read-only), cached by (model, prompt, settings, seed): the same
    request is computed once per server. One generation at a time per core (models.heavy). InputError for a bad
    prompt or settings; call only after models.packaged_gate(model_id) returned True."""
    from viz_core.pretrained.generate import RealGenSettings, generate_real
    m = models.model(model_id)
    settings = RealGenSettings(n_new=int(n_new), temperature=float(temperature), top_k=int(top_k),
                               top_p=float(top_p), seed=int(seed))
    with models.heavy(long=True), thread_budget(REAL_THREADS):
        return generate_real(m, prompt, settings)


def real_kv_shape(model_id: str):
    """The KVShape (viz_core.pretrained.generate) of a packaged decoder from its converted config.json, without
    loading the model; None while it is not converted (or not installed)."""
    import json

    from viz_core.pretrained import packaged
    from viz_core.pretrained.generate import kv_shape_of
    d = packaged.by_id(model_id)
    if d is None or packaged.cache_problem(d) is not None:
        return None
    try:
        return kv_shape_of(json.loads((packaged.cache_dir(d) / "config.json").read_text("utf-8")))
    except (OSError, ValueError, TypeError, KeyError):
        return None


# Figures cached by their inputs (see SharedFigures): figures.score_map(...) as in viz_core.plots.lm
figures = SharedFigures(plots)

