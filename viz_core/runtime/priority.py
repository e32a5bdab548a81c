"""Visitors first: background work (a training) steps aside while a visitor's model computation runs.

A training thread at a low CPU priority (jobs.lower_priority) still gets its time slices. On a machine with few
cores that is enough to stall a visitor's forward pass: the pass's OpenMP threads meet at a barrier after every
operation, and one of them waiting for a core while a training step has it holds up the whole pass. So a visitor's
computation marks itself as foreground work, and a training waits before its next step until none is running, for
at most MAX_WAIT_S (it always makes progress, one step per MAX_WAIT_S under a continuous load). A step already under
way stands aside within itself too (viz_core.runtime.step_aside, which calls wait_for_foreground).

    with foreground():               # a visitor's computation (app_pages/_ui/models.heavy)
        ...
    wait_for_foreground()            # a training loop, before each step

FairGate: a limit on computations at once that serves them in order of arrival (app_pages/_ui/models.heavy).

No torch here: the page's first paint imports this module.
"""
from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager
from typing import Iterator

from .settings import env_float

MAX_WAIT_S = env_float("ATTN_TRAINING_YIELD_S", 1.0)  # longest a training step waits for visitors (0: never waits)
FOREGROUND_SWITCH_S = env_float("ATTN_FOREGROUND_SWITCH_S", 0.001)  # the GIL's switch interval while a visitor's
#   computation runs (Python's default, 0.005, elsewhere; 0 or at least the default: leave it alone)

_running = 0
_idle = threading.Condition()
_switch_before: list[float] = []  # the interval to restore once no visitor's computation runs
stats = {"waits": 0, "waited_s": 0.0}  # what training steps gave up (for tests and benchmarks)


@contextmanager
def foreground() -> Iterator[None]:
    """Mark the block as a visitor's computation: background work waits while any such block runs, and threads
    hand the GIL on after FOREGROUND_SWITCH_S instead of Python's 5 ms.

    A model's forward pass gives the GIL up at every torch operation (hundreds per pass) and must take it back
    before the next one. While other sessions' scripts run Python, each take-back can wait out a whole switch
    interval: Gemma 3 270M's pass on 24 tokens, 0.08 s alone, took 0.73 s beside three threads running Python half
    the time, and 0.34 s with a 1 ms interval (bench/bench_gil.py)."""
    global _running
    with _idle:
        _running += 1
        if _running == 1:
            _shorten_switch()
    try:
        yield
    finally:
        with _idle:
            _running -= 1
            if _running == 0:
                _restore_switch()
                _idle.notify_all()


def _shorten_switch() -> None:
    before = sys.getswitchinterval()
    if 0 < FOREGROUND_SWITCH_S < before:
        _switch_before.append(before)
        sys.setswitchinterval(FOREGROUND_SWITCH_S)


def _restore_switch() -> None:
    if _switch_before:
        sys.setswitchinterval(_switch_before.pop())


def busy() -> bool:
    return _running > 0


def wait_for_foreground(max_wait_s: float | None = None) -> float:
    """Block while a visitor's computation runs, for at most max_wait_s (default MAX_WAIT_S); returns the seconds
    waited (0.0 at once when nothing runs)."""
    limit = MAX_WAIT_S if max_wait_s is None else max_wait_s
    if _running == 0 or limit <= 0:
        return 0.0
    start = time.monotonic()
    with _idle:
        _idle.wait_for(lambda: _running == 0, timeout=limit)
    waited = time.monotonic() - start
    stats["waits"] += 1
    stats["waited_s"] += waited
    return waited


class FairGate:
    """At most `slots` holders at once, served in order of arrival: the first in line takes the next free slot, and
    nobody passes it. (A semaphore polled with a timeout, as a wait that can be cancelled needs, lets whoever polls
    at the right moment in first: under a class, some visitors waited minutes while newcomers went ahead.)

        gate = FairGate(2)
        with gate.turn(check=cancel.check):   # check() runs every `poll` s while waiting; it may raise to leave
            compute()
    """

    def __init__(self, slots: int, poll: float = 0.25):
        self.slots, self.poll = max(1, int(slots)), poll
        self._cond = threading.Condition()
        self._line: list[object] = []  # waiting tickets, oldest first
        self._busy = 0

    @contextmanager
    def turn(self, check=lambda: None) -> Iterator[None]:
        ticket = object()
        with self._cond:
            self._line.append(ticket)
            try:
                while self._line[0] is not ticket or self._busy >= self.slots:
                    self._cond.wait(self.poll)
                    check()
            except BaseException:
                self._line.remove(ticket)
                self._cond.notify_all()  # the next in line may be first now
                raise
            self._line.pop(0)
            self._busy += 1
            self._cond.notify_all()  # the next in line may take another free slot
        try:
            yield
        finally:
            with self._cond:
                self._busy -= 1
                self._cond.notify_all()

    @property
    def waiting(self) -> int:
        return len(self._line)
