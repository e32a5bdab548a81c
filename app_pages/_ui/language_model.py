"""Helpers of the Language-model page: shipped checkpoints and untrained variant models (shared, read-only caches),
the session's own trained models, and its training job (app_pages/_ui/jobs.py: its own thread, never a script run).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import streamlit as st
import torch

from viz_core.errors import InputError, report_unexpected
from viz_core.lm import DecoderLM, LMConfig
from viz_core.lm.generate import time_per_token
from viz_core.lm.training import LanguageModel, LMTrainConfig, LMTrainer, load_lm, probe_ids
from viz_core.plots import lm as plots
from viz_core.threads import thread_budget

from . import SharedFigures, jobs, npz_bytes

CHECKPOINTS = Path(__file__).resolve().parents[2] / "viz_core" / "checkpoints"
JOB = "lm"                        # this session's training job
MODELS_KEY, RESULT_KEY = "lm.models", "lm.result"
TIMING_LENGTHS = [8, 32, 64, 128, 192, 256, 384, 511]


@st.cache_resource(show_spinner=False)
def shipped(task: str) -> LanguageModel | None:
    """The checkpoint shipped for a task (read-only, shared by every session), or None."""
    path = CHECKPOINTS / f"lm_{task}"
    return load_lm(path) if (path / "config.json").exists() else None


@st.cache_resource(show_spinner=False)
def variant_model(n_kv_heads: int, vocab: int, max_len: int) -> DecoderLM:
    """An untrained decoder (seed 0) with n_kv_heads key/value heads, for the KV-cache demonstrations."""
    torch.manual_seed(0)
    cfg = LMConfig(vocab=vocab, d_ff=256, max_len=max_len, n_kv_heads=n_kv_heads)
    return DecoderLM(cfg).eval()


@st.cache_data(show_spinner=False, max_entries=8)
def timings(n_kv_heads: int) -> dict[str, list[float]]:
    """Seconds per new token with and without the cache at TIMING_LENGTHS (measured once per server)."""
    model = variant_model(n_kv_heads, 128, TIMING_LENGTHS[-1] + 1)
    with torch.inference_mode(), thread_budget(1):  # one thread: steadier on a shared server
        return {"cache": time_per_token(model, TIMING_LENGTHS, True, repeats=5),
                "full": time_per_token(model, TIMING_LENGTHS, False, repeats=5)}


# ---------------------------------------------------------------- the session's models
def user_models() -> dict:
    """task -> LanguageModel trained in this session."""
    return st.session_state.setdefault(MODELS_KEY, {})


def current(task: str) -> tuple[LanguageModel | None, str]:
    """The model the page shows for a task: the session's own ("trained"), else the shipped one."""
    own = user_models().get(task)
    return (own, "trained") if own is not None else (shipped(task), "shipped")


def forget(task: str) -> None:
    user_models().pop(task, None)


# ---------------------------------------------------------------- the training job
def running() -> bool:
    return jobs.running(JOB)


def start(settings: dict, kv_heads: int | None = None) -> None:
    """Button callback: build the trainer from the settings frozen now and start it as this session's job."""
    if running():
        return
    cfg = LMTrainConfig.from_dict(settings)
    trainer = LMTrainer(cfg)
    if kv_heads is not None and kv_heads != trainer.model_cfg.kv_heads:
        trainer = LMTrainer(cfg, LMConfig.from_dict(trainer.model_cfg.to_dict() | {"n_kv_heads": kv_heads}))
    st.session_state.pop(RESULT_KEY, None)
    jobs.start(JOB, trainer.run(), on_stop=trainer.request_stop, trainer=trainer, task=cfg.task)


def stop() -> None:
    jobs.stop(JOB)


def collect_finished() -> None:
    """Take a finished job out of the session: keep its model and say why it stopped."""
    job = jobs.pop(JOB)
    if job is None:
        return
    trainer, task = job.info["trainer"], job.info["task"]
    if job.status == "error":
        st.session_state[RESULT_KEY] = ("failed", report_unexpected(job.error, "lm job"), task, trainer.step)
    elif trainer.reason == "nan":
        st.session_state[RESULT_KEY] = ("error", "nan", task, trainer.step)
    elif trainer.step > 0:
        user_models()[task] = trainer.language_model()
        st.session_state[RESULT_KEY] = ("ok", trainer.reason or job.status, task, trainer.step)


# ---------------------------------------------------------------- what the page draws of a model
@st.cache_resource(show_spinner=False, max_entries=32)
def _shipped_analysis(task: str, text: str):
    lm = shipped(task)
    return lm.attention(text), lm.head_scores(text)


def analyse(lm: LanguageModel, task: str, text: str):
    """(lm.attention(text), lm.head_scores(text)): cached across sessions for the shipped model (shared, read-only;
    callers must not modify the arrays), computed afresh for a model trained in this session. InputError for bad
    text."""
    if lm is shipped(task):
        return _shipped_analysis(task, text)
    return lm.attention(text), lm.head_scores(text)


@st.cache_resource(show_spinner=False, max_entries=64)
def _shipped_phase_panels(task: str, labels: tuple) -> tuple:
    return tuple(plots.phase_panels(shipped(task).history, **dict(labels)))


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


# Figures cached by their inputs (see SharedFigures): figures.score_map(...) as in viz_core.plots.lm
figures = SharedFigures(plots)


def safe(fn, *args, **kw):
    """fn(*args, **kw), or (None, error) for bad input: the page shows the error and keeps working."""
    try:
        return fn(*args, **kw), None
    except InputError as exc:
        return None, exc
