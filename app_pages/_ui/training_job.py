"""One training-job widget for the Train and Language-model pages: a run started by a button callback (refused while
one runs), its place in the queue while it waits, its live progress (a fragment, app_pages/_ui/jobs.py), Stop, the
finished job collected into one RunResult, and the model it trained kept in the session, one per task.

Each page makes one TrainingJob in its _ui module and supplies only what differs: how to build its Run (the
trainers, with the settings frozen at the click), how to draw its progress, and which object of a trainer to keep.

    training = TrainingJob("lm", shipped, model_of=lambda trainer: trainer.language_model())
    training.buttons(t("lm.train"), "lm.go_chars", build_run, (settings,))  # build_run -> Run
    training.collect(); training.show_result(text)      # top of the page: keep a finished job's model, say why
    training.live(draw)                                  # draw(job, run) while it runs, every jobs.REFRESH_S

While a job waits or runs, the page's address names it (MARKER=<8 hex digits, random per run>), so that a browser
whose session is gone (the server restarted, the visitor's connection moved to another server, the session expired)
still says a run was in progress: the new session, which does not know the marker, tells the visitor the run is lost
instead of showing the page as if nothing had been running. collect() keeps the marker in step (see mark).

A Run is one or more trainers run one after the other; several make a comparison ("compare:<what>"), which keeps
their curves instead of a model. A trainer is what viz_core trains with: run() yields metrics, request_stop(), and
the counters step, seconds, reason (None until it stops) and history that the page reads while it runs.
"""
from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import streamlit as st

from viz_core import CHECKPOINTS_DIR
from viz_core.errors import report_unexpected
from viz_core.runtime.jobs import BackgroundJob

from . import jobs, state, t

CHECKPOINTS = CHECKPOINTS_DIR       # the shipped checkpoints: <task>/ for the Train page, lm_<task>/ for the LM page
FAILURES = ("nan", "diverged")      # a trainer's reasons that mean the run failed: nothing is kept
MARKER = "training"                 # the address parameter that names this session's waiting or running job
MARKER_FORMAT = re.compile(r"[0-9a-f]{8}")  # its value: new_marker()'s


def new_marker() -> str:
    """A job's marker in the address: 8 random hex digits (unguessable enough to tell one run from another)."""
    return secrets.token_hex(4)


def shipped_path(name: str) -> Path | None:
    """The folder of a shipped checkpoint, or None when there is none."""
    path = CHECKPOINTS / name
    return path if (path / "config.json").exists() else None


@dataclass(frozen=True)
class RunResult:
    """How this session's last run ended, kept until the next one starts."""
    status: str                     # "ok"; "error": the loss went NaN or diverged; "failed": an unexpected error
    reason: str                     # the trainer's ("target", "time", "steps", "stopped", "nan", ...), "unstarted"
    #                                 (stopped while it waited in line) or "error" (with "failed")
    task: str                       # the task it trained
    step: int                       # steps done
    accuracy: float | None = None   # held-out accuracy at its last evaluation, where the page measures one
    error_ref: str | None = None    # with "failed": the error id (the traceback is in the server's log)
    details: dict | None = None     # what the page's details(trainer) says of how it ended (the Train page:
    #                                 Trainer.outcome(): target, worst length, evaluations); None where it says nothing


@dataclass
class Run:
    """The trainers of one job, run one after the other. Only the job's thread touches them until the job is done;
    the page reads their counters to draw."""
    task: str
    trainers: list[tuple[str, Any]]     # (label, trainer)
    kind: str = "train"                 # "train" (keeps the model) or "compare:<what>" (keeps the curves)
    stopped: bool = False

    def work(self) -> Iterator:
        for _, trainer in self.trainers:
            if self.stopped:
                trainer.reason = trainer.reason or "stopped"  # never started: abandoned
                continue
            yield from trainer.run()

    def stop(self) -> None:
        self.stopped = True
        for _, trainer in self.trainers:
            trainer.request_stop()

    def active(self) -> int:
        """Index of the trainer in progress (the last one once all are done)."""
        return next((i for i, (_, tr) in enumerate(self.trainers) if not tr.done), len(self.trainers) - 1)

    @property
    def trainer(self):
        return self.trainers[self.active()][1]

    @property
    def comparison(self) -> str | None:
        """What a comparison compares ("heads", "norm", ...), None for a plain run."""
        return self.kind.split(":", 1)[1] if self.kind.startswith("compare:") else None

    def curves(self) -> list[tuple[str, list[dict]]]:
        """(label, history as dicts) of every trainer that has trained."""
        return [(label, [_as_dict(m) for m in list(tr.history)]) for label, tr in self.trainers if tr.history]


def _as_dict(record) -> dict:
    return record if isinstance(record, dict) else record.to_dict()


def run_result(job: BackgroundJob, run: Run, accuracy: Callable[[Any], float | None] = lambda trainer: None,
               details: Callable[[Any], dict | None] = lambda trainer: None) -> RunResult:
    """How a finished job ended. A comparison ends as its last trainer did; a plain run fails when its loss went
    NaN or diverged, and counts as unstarted when it was stopped before its first step."""
    trainer = run.trainers[-1][1]
    if job.status == "error":
        error_id = report_unexpected(job.error, f"{job.name} job")
        return RunResult("failed", "error", run.task, trainer.step, error_ref=error_id)
    if run.comparison is not None:  # a trainer stopped while it waited in line never started: no reason of its own
        return RunResult("ok", trainer.reason or "unstarted", run.task, trainer.step)
    if trainer.reason in FAILURES:
        return RunResult("error", trainer.reason, run.task, trainer.step, accuracy(trainer), details=details(trainer))
    if trainer.step == 0:  # stopped before its first step (in line for a slot, or at once)
        return RunResult("ok", "unstarted", run.task, 0)
    return RunResult("ok", trainer.reason or "stopped", run.task, trainer.step, accuracy(trainer),
                     details=details(trainer))


class TrainingJob:
    """This session's training job of one page and the models it trained (see the module doc).

    name ("train", "lm") names the job and prefixes its session keys ("<name>.models", "<name>.result"), its widget
    keys ("<name>.queue_stop") and its texts ("<name>.queued", "<name>.stop", "<name>.lost")."""

    def __init__(self, name: str, shipped: Callable[[str], Any], model_of: Callable[[Any], Any],
                 accuracy: Callable[[Any], float | None] = lambda trainer: None,
                 details: Callable[[Any], dict | None] = lambda trainer: None):
        self.name = name
        self._shipped, self._model_of, self._accuracy, self._details = shipped, model_of, accuracy, details

    # ------------------------------------------------------------ the session's models
    def models(self) -> dict:
        """task -> (model, origin) of this session: origin is "trained" or "uploaded"."""
        return st.session_state.setdefault(f"{self.name}.models", {})

    def current(self, task: str) -> tuple[Any | None, str]:
        """The model the page shows for a task: the session's own, else the shipped one (None when there is none)."""
        own = self.models().get(task)
        return own if own is not None else (self._shipped(task), "shipped")

    def keep(self, task: str, model, origin: str = "trained") -> None:
        self.models()[task] = (model, origin)

    def forget(self, task: str) -> None:
        self.models().pop(task, None)

    def comparisons(self) -> dict:
        """(task, what) -> list of (label, history) of this session's comparisons."""
        return st.session_state.setdefault(f"{self.name}.compare_runs", {})

    # ------------------------------------------------------------ the job
    def running(self) -> bool:
        return jobs.running(self.name)

    def start(self, build: Callable[..., Run | None], *args) -> None:
        """Button callback: build(*args) makes the run with the settings of this moment (frozen for the run) and it
        starts in its own thread. Does nothing while a job runs, or when build refuses (None: the page says why)."""
        if self.running():
            return
        run = build(*args)
        if run is None:
            return
        st.session_state.pop(f"{self.name}.result", None)
        st.session_state.pop(f"{self.name}.lost", None)
        marker = new_marker()
        self._markers().add(marker)
        jobs.start(self.name, run.work(), on_stop=run.stop, run=run, marker=marker)

    def stop(self) -> None:
        jobs.stop(self.name)

    def buttons(self, label: str, go_key: str, build: Callable[..., Run | None], args: tuple = (),
                refused: bool = False, primary: bool = True) -> None:
        """Start (label; off while a job runs or when refused). Stop sits in the live panel of the running job
        (one Stop, seen from every tab)."""
        st.button(label, key=go_key, type="primary" if primary else "secondary", disabled=self.running() or refused,
                  on_click=self.start, args=(build, *args))

    def live(self, draw: Callable[[BackgroundJob, Run], None]) -> None:
        """The running job: its place in the queue while it waits, then draw(job, run), redrawn by a fragment. In its
        place, a run lost with a session that is gone (mark) is said, until the next run starts."""
        if self.lost():
            st.warning(t(f"{self.name}.lost"), icon=":material/sync_problem:")
        jobs.live(self.name, partial(self._draw, draw))

    def _draw(self, draw: Callable[[BackgroundJob, Run], None], job: BackgroundJob) -> None:
        """The running job in a bordered panel under a red "Training now" badge, so that it never reads as the
        model the page shows below (which carries its own "the model you are looking at" line), with its Stop."""
        with st.container(border=True, key=f"{self.name}-live"):
            st.badge(t("common.live_badge"), icon=":material/radio_button_checked:", color="red")
            if job.status == "queued":
                st.info(t(f"{self.name}.queued", n=job.queue_position))
                st.button(t(f"{self.name}.stop"), key=f"{self.name}.queue_stop", on_click=self.stop)
                return
            draw(job, job.info["run"])
            if not job.done:
                st.button(t(f"{self.name}.stop"), key=f"{self.name}.live_stop", on_click=self.stop)

    # ------------------------------------------------------------ the result
    def collect(self) -> RunResult | None:
        """Top of the page, every full run: take a finished job out of the session, keep what it made (the model, or
        a comparison's curves) and its RunResult (returned; None when no job has finished); then the address's
        marker follows the job (mark)."""
        result = self._take()
        self.mark()
        return result

    def _take(self) -> RunResult | None:
        job = jobs.pop(self.name)
        if job is None:
            return None
        run: Run = job.info["run"]
        result = run_result(job, run, self._accuracy, self._details)
        if result.status == "ok" and run.comparison is not None:
            self.comparisons()[(run.task, run.comparison)] = run.curves()
        elif result.status == "ok" and result.reason != "unstarted":
            self.keep(run.task, self._model_of(run.trainers[0][1]))
        st.session_state[f"{self.name}.result"] = result
        return result

    def result(self) -> RunResult | None:
        return st.session_state.get(f"{self.name}.result")

    # ------------------------------------------------------------ the address's marker of the job
    def _markers(self) -> set[str]:
        """The markers this session gave its jobs: one of them may come back with Back / Forward."""
        return st.session_state.setdefault(f"{self.name}.markers", set())

    def mark(self) -> None:
        """The address names this session's job (its marker) from its start until it is collected, and nothing
        otherwise. A well-formed marker this session never gave named a job of a session that is gone (a restarted
        server, another server, an expired session): that run is lost, and the page says so (lost(), until the
        next run starts). Any other marker the address holds just goes."""
        asked = state.address_text(MARKER)
        if asked is not None and MARKER_FORMAT.fullmatch(asked) and asked not in self._markers():
            st.session_state[f"{self.name}.lost"] = True
        job = jobs.get(self.name)
        state.set_value(MARKER, job.info.get("marker", "") if job is not None else "", "")

    def lost(self) -> bool:
        """Whether this session opened on the marker of a run it does not have (see mark)."""
        return bool(st.session_state.get(f"{self.name}.lost"))

    def show_result(self, text: Callable[[RunResult], str | None],
                    good: Callable[[RunResult], bool] = lambda result: True) -> None:
        """Why the last run ended: an unexpected error by its id; else text(result) (None: nothing to say), as an
        error for a failed run, a success when good(result), else a note."""
        result = self.result()
        if result is None:
            return
        if result.status == "failed":  # the traceback is in the server's log, under this id
            st.error(t("common.unexpected_error", error_id=result.error_ref))
            return
        words = text(result)
        if words is not None:
            (st.error if result.status == "error" else st.success if good(result) else st.info)(words)
