"""Helpers of the Train page: shipped checkpoints (a shared, read-only cache) and the page's training job
(app_pages/_ui/training_job.py: its own thread; the user's models and comparisons live in st.session_state, never in a
shared cache). The page supplies what its job differs in: the trainers it builds and the model object it keeps."""
from __future__ import annotations

import streamlit as st

from viz_core.seq2seq.model import ModelConfig
from viz_core.seq2seq.tasks import Task
from viz_core.seq2seq.training import Trainer, TrainConfig, Translator, check_fits, load_checkpoint

from . import safe
from .training_job import Run, TrainingJob, shipped_path


@st.cache_resource(show_spinner=False)
def shipped(task_name: str) -> Translator | None:
    """The shipped checkpoint of a task (read-only, shared by every session), or None when there is none."""
    path = shipped_path(task_name)
    return None if path is None else load_checkpoint(path)


def _accuracy(trainer: Trainer) -> float | None:
    """Held-out exact-sequence accuracy at the trainer's last record."""
    return trainer.history[-1].val_exact if trainer.history else None


# this session's training job, its models (task -> (Translator, "trained" | "uploaded")) and comparisons
training = TrainingJob("train", shipped, model_of=Trainer.translator, accuracy=_accuracy, details=Trainer.outcome)


def build_run(kind: str, task: Task, runs: list[tuple[str, ModelConfig, TrainConfig]]) -> Run | None:
    """The trainers of a run ("train", or "compare:<what>" for several), built with the settings of the click;
    None when one of them would not fit the server's budget (the page shows why; never run it)."""
    if any(safe(check_fits, task, m, c)[1] is not None for _, m, c in runs):
        return None
    return Run(task.name, [(label, Trainer(task, m, c)) for label, m, c in runs], kind)


def read_uploads(uploaded) -> list[tuple[str, bytes]]:
    return [(f.name, f.getvalue()) for f in uploaded or []]
