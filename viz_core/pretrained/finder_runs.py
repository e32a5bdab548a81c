"""Head-finder corpus passes shared by every visitor of a server: one per (model, corpus), each in a thread of its
own, never inside a visitor's script run. A page asks for a run (start or find it) and draws its progress; whoever
asks next for the same model and corpus gets the same run, finished or not.

Bounded: at most max_running passes read at once, at most max_waiting more wait their turn (one more is refused with a
message, so visitors who paste text after text cannot queue work and memory without end), and at most max_results
finished results are kept, the least recently asked for dropped first (a result is well under a megabyte for the packaged
models: scores, histograms and a dozen examples per head and score).
"""
from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable, Hashable, Iterator

from ..errors import InputError
from .head_finder import HeadFinder, Progress

log = logging.getLogger(__name__)
Work = Callable[[Callable[[HeadFinder], None]], Iterator[Progress]]  # finished callback -> progress iterator


@dataclass
class FinderRun:
    """One corpus pass: its state, progress and, once done, its result."""
    key: Hashable
    state: str = "waiting"        # "waiting" -> "running" -> "done" | "failed"
    done: int = 0
    total: int = 0
    result: HeadFinder | None = None
    error_id: str = ""            # a failed pass's log id (the traceback is in the server's log)
    _thread: threading.Thread | None = field(default=None, repr=False)

    @property
    def fraction(self) -> float:
        return self.done / self.total if self.total else 0.0


class FinderRuns:
    """The server's corpus passes (module docstring)."""

    def __init__(self, max_running: int = 1, max_results: int = 8, max_waiting: int = 4):
        self.max_results = max_results
        self.max_pending = max_running + max_waiting
        self._runs: OrderedDict[Hashable, FinderRun] = OrderedDict()
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(max_running)

    def get(self, key: Hashable) -> FinderRun | None:
        with self._lock:
            run = self._runs.get(key)
            if run is not None:
                self._runs.move_to_end(key)
            return run

    def start(self, key: Hashable, work: Work) -> FinderRun:
        """The run for key: the existing one (unless it failed), or a new one started on work(finished). Raises
        InputError when max_running + max_waiting passes are already running or waiting."""
        with self._lock:
            run = self._runs.get(key)
            if run is not None and run.state != "failed":
                self._runs.move_to_end(key)
                return run
            pending = sum(r.state in ("waiting", "running") for r in self._runs.values())
            if pending >= self.max_pending:
                raise InputError("head_finder.busy", f"the server is already reading {pending} corpora; try again "
                                                     f"in a minute", n=pending)
            run = FinderRun(key)
            self._runs[key] = run
            self._runs.move_to_end(key)
            self._evict()
        run._thread = threading.Thread(target=self._run, args=(run, work), name=f"head-finder-{len(self._runs)}",
                                       daemon=True)
        run._thread.start()
        return run

    def _evict(self) -> None:
        finished = [k for k, r in self._runs.items() if r.state in ("done", "failed")]
        while len(self._runs) > self.max_results and finished:
            self._runs.pop(finished.pop(0))

    def _run(self, run: FinderRun, work: Work) -> None:
        def finished(result: HeadFinder) -> None:
            run.result = result

        with self._slots:
            run.state = "running"
            try:
                for progress in work(finished):
                    run.done, run.total = progress.done, progress.total
                run.state = "done" if run.result is not None else "failed"
            except Exception:  # noqa: BLE001 - a pass that fails says so on the page; the traceback goes to the log
                import uuid
                run.error_id = uuid.uuid4().hex[:8]
                log.exception("head finder pass %s failed (error id %s)", run.key, run.error_id)
                run.state = "failed"

    def wait(self, key: Hashable, timeout: float | None = None) -> FinderRun | None:
        """Block until the run for key ends (tests and benchmarks)."""
        run = self.get(key)
        if run is not None and run._thread is not None:
            run._thread.join(timeout)
        return run
