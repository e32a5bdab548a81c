"""Helpers of the Train page: shipped checkpoints (shared, read-only cache), the user's own models and training jobs
(st.session_state, never a shared cache), and training jobs, which run in their own thread (viz_core.jobs) so that no click can interrupt or corrupt them."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from viz_core.errors import InputError
from viz_core.seq2seq.model import ModelConfig
from viz_core.seq2seq.tasks import Task
from viz_core.seq2seq.training import Trainer, TrainConfig, Translator, check_fits, load_checkpoint

from . import jobs

CHECKPOINTS = Path(__file__).resolve().parents[2] / "viz_core" / "checkpoints"
MODELS_KEY, COMPARE_KEY, RESULT_KEY = "train.models", "train.compare_runs", "train.result"
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


# ---------------------------------------------------------------- training jobs (viz_core.jobs, in their own thread)
JOB = "train"  # this session's training job (app_pages/_ui/jobs.py)


@dataclass
class TrainRuns:
    """One or more training runs done one after the other (one for 'train', several for 'compare').

    Only the job's thread touches the trainers until the job is done; the page reads their counters to draw."""
    kind: str                               # "train" or "compare:<what>"
    task_name: str
    runs: list[tuple[str, Trainer]]         # (label, trainer)
    stopped: bool = False

    def work(self) -> Iterator:
        for _, trainer in self.runs:
            if self.stopped:
                trainer.reason = trainer.reason or "stopped"  # never started: abandoned
                continue
            yield from trainer.run()

    def stop(self) -> None:
        self.stopped = True
        for _, trainer in self.runs:
            trainer.request_stop()

    def active(self) -> int:
        """Index of the run in progress (the last one once all are done)."""
        return next((i for i, (_, tr) in enumerate(self.runs) if not tr.done), len(self.runs) - 1)


def train_runs(job) -> TrainRuns:
    return job.info["runs"]


def job():
    """This session's training job (running or finished but not yet collected), or None."""
    return jobs.get(JOB)


def running() -> bool:
    return jobs.running(JOB)


def start_job(kind: str, task: Task, runs: list[tuple[str, ModelConfig, TrainConfig]]) -> None:
    """Button callback: create the trainers with the settings of this moment (frozen for the run) and start the
    job in its own thread. A second press while a job runs does nothing."""
    if running():
        return
    if any(safe(check_fits, task, m, c)[1] is not None for _, m, c in runs):  # the page shows why; never run it
        return
    st.session_state.pop(RESULT_KEY, None)
    tr = TrainRuns(kind, task.name, [(label, Trainer(task, m, t)) for label, m, t in runs])
    jobs.start(JOB, tr.work(), on_stop=tr.stop, runs=tr)


def stop_job() -> None:
    jobs.stop(JOB)


def collect_finished():
    """The finished job, taken out of the session (its result is then kept by the page), or None."""
    return jobs.pop(JOB)


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
