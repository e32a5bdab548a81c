"""Long work (training, experiments) in its own thread, never inside a page's script run.

A page script is rerun by every click; a loop inside it is interrupted by the next click, and a model it trains can
be touched by the rerun while a backward pass is in flight. A BackgroundJob instead consumes an iterator of progress
items in a thread of its own: the page only starts it, reads `job.latest` / `job.status` to draw progress, and asks
it to stop. Nothing but the job's thread touches the work's objects until the job is done.

A server shared by a classroom must not run every session's training at once on its few cores: jobs take a slot
from a server-wide JobSlots (first come, first served; a waiting job knows its place in the queue), and each job
runs with a CPU thread budget for its own thread only (viz_core.runtime.threads), at a lower CPU priority than the
visitors' reruns (lower_priority).

    job = BackgroundJob(trainer.run(), on_stop=trainer.request_stop, alive=lambda: session_is_open(sid))
    job.start()
    ...                     # job.status: "queued" -> "running" -> "done" | "stopped" | "abandoned" | "error"
    job.stop()              # asks the work to stop (on_stop), which then winds down and finishes its iterator

This module never imports streamlit: "alive" is a plain callable (the page passes one that asks Streamlit whether
the visitor's session still exists, so a closed tab ends its training within ALIVE_GRACE_S).
"""
from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from .settings import env_int
from .threads import thread_budget

log = logging.getLogger(__name__)

ALIVE_GRACE_S = 3.0   # a session gone for this long (closed tab, ended session) abandons its job
ALIVE_CHECK_S = 0.5   # how often the job asks whether its session is still there
STATUSES = ("queued", "running", "done", "stopped", "abandoned", "error")


class JobSlots:
    """A server-wide limit on jobs running at once; the others wait in arrival order."""

    def __init__(self, limit: int):
        self.limit = max(1, int(limit))
        self._lock = threading.Condition()
        self._running: list[int] = []
        self._waiting: list[int] = []

    def position(self, job_id: int) -> int:
        """0 while running (or not waiting), else 1 for the first in line, 2 for the next..."""
        with self._lock:
            return self._waiting.index(job_id) + 1 if job_id in self._waiting else 0

    @property
    def running(self) -> int:
        with self._lock:
            return len(self._running)

    @property
    def waiting(self) -> int:
        with self._lock:
            return len(self._waiting)

    def acquire(self, job_id: int, give_up: Callable[[], bool], poll_s: float = 0.2) -> bool:
        """Wait for a slot in arrival order; False (and out of the queue) as soon as give_up() is true."""
        with self._lock:
            self._waiting.append(job_id)
            try:
                while not (len(self._running) < self.limit and self._waiting[0] == job_id):
                    if give_up():
                        return False
                    self._lock.wait(poll_s)
                self._running.append(job_id)
                return True
            finally:
                self._waiting.remove(job_id)
                self._lock.notify_all()

    def release(self, job_id: int) -> None:
        with self._lock:
            if job_id in self._running:
                self._running.remove(job_id)
            self._lock.notify_all()


def default_slots() -> JobSlots:
    """The process-wide slots: ATTN_MAX_TRAINING_JOBS, else one job per two cores (at least one)."""
    return _DEFAULT_SLOTS


_DEFAULT_SLOTS = JobSlots(env_int("ATTN_MAX_TRAINING_JOBS", max(1, (os.cpu_count() or 2) // 2)))


def default_threads() -> int:
    """CPU threads one job may use: ATTN_THREADS_PER_JOB, else the cores shared among the job slots."""
    return env_int("ATTN_THREADS_PER_JOB", max(1, (os.cpu_count() or 2) // _DEFAULT_SLOTS.limit))


class BackgroundJob:
    """Consume `work` (an iterator of progress items) in a daemon thread; see the module doc."""

    _ids = iter(range(1, 1 << 62))

    def __init__(self, work: Iterator[Any], *, on_stop: Callable[[], None] | None = None,
                 alive: Callable[[], bool] = lambda: True, slots: JobSlots | None = None,
                 threads: int | None = None, name: str = "job"):
        self.id = next(self._ids)
        self.name = name
        self._work, self._on_stop, self._alive = work, on_stop, alive
        self._slots, self._threads = slots, threads
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"{name}-{self.id}", daemon=True)
        self.status = "queued"
        self.latest: Any = None       # the last item the work yielded
        self.items = 0                # how many it yielded
        self.error: BaseException | None = None
        self.created = time.time()
        self.started: float | None = None    # when it got a slot
        self.finished: float | None = None
        self._gone_since: float | None = None
        self._last_check = 0.0

    # ------------------------------------------------------------ control
    def start(self) -> "BackgroundJob":
        self._thread.start()
        return self

    def stop(self) -> None:
        """Ask the work to stop: on_stop() lets it wind down and end its iterator; without on_stop it is cut."""
        if not self._stop.is_set():
            self._stop.set()
            if self._on_stop is not None and self.status == "running":
                self._on_stop()

    def join(self, timeout: float | None = None) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()

    # ------------------------------------------------------------ state
    @property
    def done(self) -> bool:
        return self.status in ("done", "stopped", "abandoned", "error")

    @property
    def queue_position(self) -> int:
        return self._slots.position(self.id) if self._slots is not None and self.status == "queued" else 0

    @property
    def thread_alive(self) -> bool:
        return self._thread.is_alive()

    # ------------------------------------------------------------ the thread
    def _session_gone(self) -> bool:
        """True once alive() has been false for ALIVE_GRACE_S (a reconnecting tab gets its job back)."""
        now = time.monotonic()
        if now - self._last_check < ALIVE_CHECK_S:
            return False
        self._last_check = now
        try:
            alive = self._alive()
        except Exception:  # noqa: BLE001 - a failing check must not kill the job; treat it as alive
            log.exception("job %s: alive() failed", self.name)
            alive = True
        if alive:
            self._gone_since = None
            return False
        self._gone_since = self._gone_since or now
        return now - self._gone_since >= ALIVE_GRACE_S

    def _run(self) -> None:
        got_slot = False
        lower_priority()
        try:
            if self._slots is not None:
                got_slot = self._slots.acquire(self.id, lambda: self._stop.is_set() or self._session_gone())
                if not got_slot:
                    self.status = "stopped" if self._stop.is_set() else "abandoned"
                    return
            self.started, self.status = time.time(), "running"
            if self._stop.is_set() and self._on_stop is not None:  # stopped while it waited
                self._on_stop()
            self._consume()
        except Exception as exc:  # noqa: BLE001 - the page reports it; the traceback goes to the log
            self.error, self.status = exc, "error"
            log.exception("job %s failed", self.name)
        finally:
            if got_slot:
                self._slots.release(self.id)
            self.finished = time.time()
            _close(self._work)

    def _consume(self) -> None:
        with thread_budget(self._threads):
            for item in self._work:
                self.latest, self.items = item, self.items + 1
                if self._session_gone():
                    self.status = "abandoned"
                    return
                if self._stop.is_set() and self._on_stop is None:
                    self.status = "stopped"
                    return
        self.status = "stopped" if self._stop.is_set() else "done"


JOB_NICE = env_int("ATTN_JOB_NICE", 10)  # the niceness of job threads: a visitor's rerun comes before a training step


def lower_priority(nice: int = JOB_NICE) -> None:
    """Give the calling thread (and the OpenMP workers it starts later, which inherit it) a lower CPU priority.

    A training on a shared server must not slow down everyone's reruns: with niceness 10 the scheduler gives a
    rerun about nine times the CPU share of a training thread while both want it, and the training all the CPU
    nobody else asks for. Linux schedules threads one by one (setpriority on the thread's own id); elsewhere this
    is a no-op."""
    if nice <= 0 or not hasattr(os, "setpriority"):
        return
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, max(os.getpriority(os.PRIO_PROCESS, tid), nice))
    except OSError:
        log.info("could not lower the priority of job thread %s", threading.current_thread().name)


def _close(work: Iterator[Any]) -> None:
    close = getattr(work, "close", None)
    if close is not None:
        try:
            close()
        except Exception:  # noqa: BLE001
            log.exception("closing a job's work failed")
