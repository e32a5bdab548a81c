"""Long computations that outlive the script run that asked for them, shared by key ("single flight").

A page that waits for a computation of seconds inside its script run loses it to the visitor's next click: Streamlit
stops the run, and the rerun starts the computation again from nothing. A `Flight` runs the computation in a thread
of its own instead. The page waits for it and draws its progress; a click stops only the waiting, and the rerun finds
the same flight by its key and waits on. Two visitors who ask for the same key share one computation.

`Flights` keeps the last `keep` finished results by key (they are small: a head map, one score per token); a
computation that failed is forgotten once its error has been read, so asking again starts it anew. No streamlit here.
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

from . import cancel

Progress = Callable[[float], None]  # called with the share of the work done, 0..1


class Flight:
    """One computation fn(progress) in a thread of its own, computing for `owner` (cancel.owner() of the run that
    asked: its session) and for every visitor who asks for it while it runs (`wait_for`): its checks stop it with
    cancel.Cancelled once all of them have gone, even when the runs that asked have ended."""

    def __init__(self, fn: Callable[[Progress], Any], owner: cancel.Owner):
        self.progress = 0.0  # the share done, as fn last reported it
        self.started = time.monotonic()
        self._fn, self._owner = fn, cancel.Shared(owner)
        self._done = threading.Event()
        self._result: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="flight", daemon=True)

    def start(self) -> "Flight":
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            with cancel.acting_for(self._owner):
                self._result = self._fn(self._report)
            self.progress = 1.0
        except BaseException as exc:  # noqa: BLE001 - handed to whoever waits (InputError, Cancelled, a bug)
            self._error = exc.with_traceback(None)  # the frames would keep the computation's arrays alive
        finally:
            self._fn = None  # the closure (its inputs) is not needed any more
            self._done.set()

    def _report(self, share: float) -> None:
        self.progress = min(1.0, max(self.progress, float(share)))

    @property
    def done(self) -> bool:
        return self._done.is_set()

    @property
    def failed(self) -> bool:
        return self.done and self._error is not None

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self.started

    def wait_for(self, owner: cancel.Owner) -> "Flight":
        """One more visitor waits for this computation: it goes on while any of them is here."""
        if not self.done:
            self._owner.add(owner)
        return self

    def wait(self, timeout: float | None = None) -> bool:
        """Wait up to timeout seconds; True once the computation has ended."""
        return self._done.wait(timeout)

    def value(self) -> Any:
        """The result, or the computation's error raised again. Call once done."""
        if self._error is not None:
            raise self._error
        return self._result


class Flights:
    """Flights by key: `get` returns the running or finished flight of a key, or starts one. Thread-safe."""

    def __init__(self, keep: int = 32):
        self.keep = keep  # finished results kept, the most recently asked for
        self._flights: OrderedDict[Hashable, Flight] = OrderedDict()
        self._lock = threading.Lock()

    def lookup(self, key: Hashable) -> Flight | None:
        """The running or finished flight of key, if any (one that failed does not count)."""
        with self._lock:
            flight = self._flights.get(key)
            if flight is None or flight.failed:
                return None
            self._flights.move_to_end(key)
            return flight.wait_for(cancel.owner())

    def get(self, key: Hashable, fn: Callable[[Progress], Any]) -> Flight:
        """The flight of key; a new one running fn (for this thread's visitor) when there is none, or when the last
        one failed (an error is an answer once: asking again tries again)."""
        with self._lock:
            flight = self._flights.get(key)
            if flight is not None and not flight.failed:
                self._flights.move_to_end(key)
                return flight.wait_for(cancel.owner())
            flight = self._flights[key] = Flight(fn, cancel.owner()).start()
            finished = [k for k, f in self._flights.items() if f.done]
            for k in finished[:max(0, len(finished) - self.keep)]:  # the oldest finished ones beyond keep
                del self._flights[k]
            return flight

    def clear(self) -> None:
        with self._lock:
            self._flights.clear()

    def __len__(self) -> int:
        return len(self._flights)
