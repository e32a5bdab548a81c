"""Background jobs of this session (training runs): started by a button, drawn by a fragment, never in a script run.

A job lives in st.session_state under a name of the page's choosing, so it survives reruns, page switches and
language switches; its thread checks that the visitor's session still exists and stops within a few seconds of a
closed tab (viz_core.runtime.jobs.ALIVE_GRACE_S). Progress is drawn by `live(...)`, an st.fragment that reruns itself every
REFRESH_S while the job runs and reruns the whole page once when it ends (so the page picks up the result).
The training pages use it through one widget, training_job.TrainingJob (start, queue, progress, Stop, result).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import streamlit as st
from streamlit.runtime import Runtime
from streamlit.runtime.scriptrunner import get_script_run_ctx

from viz_core.runtime.jobs import BackgroundJob, default_slots, default_threads

REFRESH_S = 0.5  # progress redraw interval while a job runs
START_WAIT_S = 0.3  # Start waits this long for a free slot, so its own rerun already draws the job as running


def _session_alive_check() -> Callable[[], bool]:
    """A thread-safe callable: is this visitor's session still open? (Always true outside a server, e.g. AppTest.)"""
    ctx = get_script_run_ctx()
    if ctx is None or not Runtime.exists():
        return lambda: True
    runtime, session_id = Runtime.instance(), ctx.session_id
    return lambda: runtime.is_active_session(session_id)


def start(name: str, work: Iterator[Any], on_stop: Callable[[], None] | None = None, **info) -> BackgroundJob:
    """Start `work` in its own thread as this session's job `name` (a server slot and a CPU thread budget apply).
    `info` is kept on the job (job.info) for the page: what it trains, its settings, frozen for the run."""
    job = BackgroundJob(work, on_stop=on_stop, alive=_session_alive_check(), slots=default_slots(),
                        threads=default_threads(), name=name)
    job.info = info
    st.session_state[_key(name)] = job
    job.start()
    end = time.monotonic() + START_WAIT_S
    while job.status == "queued" and job.queue_position == 0 and time.monotonic() < end:  # not yet in line
        time.sleep(0.005)
    return job


def get(name: str) -> BackgroundJob | None:
    return st.session_state.get(_key(name))


def running(name: str) -> bool:
    job = get(name)
    return job is not None and not job.done


def stop(name: str, wait_s: float = 1.0) -> None:
    """Ask the job to stop and wait up to wait_s for it to wind down, so the rerun this click starts shows the
    result at once (not one fragment refresh later)."""
    job = get(name)
    if job is not None:
        job.stop()
        job.join(wait_s)


def pop(name: str) -> BackgroundJob | None:
    """Take a finished job out of the session (the page keeps its result), or None."""
    job = get(name)
    if job is not None and job.done:
        return st.session_state.pop(_key(name))
    return None


def live(name: str, draw: Callable[[BackgroundJob], None]) -> None:
    """Draw a job's progress now and every REFRESH_S while it runs (a fragment: the rest of the page stays as it
    is); when the job ends, rerun the whole page once."""
    job = get(name)
    if job is None:
        return
    st.fragment(_live_fragment, run_every=REFRESH_S if not job.done else None, key=f"live.{name}")(name, draw)


def _live_fragment(name: str, draw: Callable[[BackgroundJob], None]) -> None:
    job = get(name)
    if job is None:
        return
    draw(job)
    if job.done and _in_fragment_rerun():
        st.rerun(scope="app")


def _in_fragment_rerun() -> bool:
    ctx = get_script_run_ctx()
    return bool(ctx is not None and ctx.fragment_ids_this_run)


def _key(name: str) -> str:
    return f"_jobs.{name}"
