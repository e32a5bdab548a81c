"""Helpers of the Train page: shipped checkpoints (shared, read-only cache), the user's own models and training jobs
(st.session_state, never a shared cache), and the loop that trains while drawing live progress."""
from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import streamlit as st

from viz_core.errors import InputError
from viz_core.model import ModelConfig
from viz_core.tasks import Task
from viz_core.training import Trainer, TrainConfig, Translator, load_checkpoint

CHECKPOINTS = Path(__file__).resolve().parents[2] / "viz_core" / "checkpoints"
MODELS_KEY, JOB_KEY, COMPARE_KEY = "train.models", "train.job", "train.compare_runs"
DRAW_EVERY_S = 0.5  # redraw live progress at most this often
_LIVE_KEYS = itertools.count()


def live_key() -> str:
    """A fresh element key for a chart redrawn in the same placeholder during one script run."""
    return f"train.live_{next(_LIVE_KEYS)}"


@st.cache_resource(show_spinner=False)
def shipped(task_name: str) -> Translator | None:
    """The shipped checkpoint of a task (read-only, shared by every session), or None when there is none."""
    path = CHECKPOINTS / task_name
    if not (path / "config.json").exists():
        return None
    return load_checkpoint(path)


# ---------------------------------------------------------------- the user's models
def user_models() -> dict:
    """task name -> (Translator, origin) of this session: origin is 'trained' or 'uploaded'."""
    return st.session_state.setdefault(MODELS_KEY, {})


def current_model(task_name: str) -> tuple[Translator | None, str]:
    """The model the page shows for a task: the session's own, else the shipped one."""
    own = user_models().get(task_name)
    if own is not None:
        return own
    model = shipped(task_name)
    return model, "shipped"


def keep_model(task_name: str, model: Translator, origin: str) -> None:
    user_models()[task_name] = (model, origin)


def forget_model(task_name: str) -> None:
    user_models().pop(task_name, None)


# ---------------------------------------------------------------- training jobs
@dataclass
class Job:
    """One or more training runs done one after the other (one for 'train', several for 'compare')."""
    kind: str                               # "train" or "compare"
    task_name: str
    runs: list[tuple[str, Trainer]]         # (label, trainer)
    started: float = field(default_factory=time.time)

    @property
    def done(self) -> bool:
        return all(t.done for _, t in self.runs)

    def active(self) -> tuple[int, Trainer] | None:
        for i, (_, t) in enumerate(self.runs):
            if not t.done:
                return i, t
        return None

    def stop(self) -> None:
        for _, t in self.runs:
            t.request_stop()
        for _, t in self.runs:
            if t.step == 0:  # runs never started are abandoned
                t.reason = "stopped"


def job() -> Job | None:
    return st.session_state.get(JOB_KEY)


def start_job(kind: str, task: Task, runs: list[tuple[str, ModelConfig, TrainConfig]]) -> None:
    """Create the trainers (fast) and store the job; the page's end-of-script loop does the training."""
    st.session_state[JOB_KEY] = Job(kind, task.name, [(label, Trainer(task, m, t)) for label, m, t in runs])


def stop_job() -> None:
    j = job()
    if j is not None:
        j.stop()


def clear_job() -> None:
    st.session_state.pop(JOB_KEY, None)


def run_job(j: Job, draw: Callable[[Job, bool], None]) -> None:
    """Train the job's runs, calling draw(job, final) at most every DRAW_EVERY_S. A rerun (any click) interrupts
    this loop between two steps; the job stays in session_state and the next script run continues it."""
    last = 0.0
    while (current := j.active()) is not None:
        _, trainer = current
        for _ in trainer.run():
            if time.perf_counter() - last > DRAW_EVERY_S:
                draw(j, False)
                last = time.perf_counter()
    draw(j, True)


def compare_runs() -> dict:
    """comparison name -> list of (label, history) of this session."""
    return st.session_state.setdefault(COMPARE_KEY, {})


def read_uploads(uploaded) -> list[tuple[str, bytes]]:
    return [(f.name, f.getvalue()) for f in uploaded or []]


def safe(fn, *args, **kw):
    """fn(*args, **kw), or (None, error) for bad input: the page shows the error and keeps working."""
    try:
        return fn(*args, **kw), None
    except InputError as exc:
        return None, exc
