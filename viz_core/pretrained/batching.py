"""Group commit: requests that arrive while a forward pass runs share the next pass.

A decoder's forward pass on one short sentence is mostly fixed cost: every weight matrix is read once whatever the
number of rows, and Python walks every module once. When a class types sentences at the same moment, each visitor
waited for a slot and then paid that fixed cost alone. Here the first request becomes the leader and runs a pass for
itself and for every request that is waiting by then; requests that arrive during that pass wait, and the first of
them leads the next pass with all the others. Nobody waits for a timer: alone, a request runs at once, as a batch of
one.

Right padding keeps a causal decoder's numbers those of the request alone: query i attends to keys 0..i, so the
padding after the last real token is never attended to by a real token (checked against single passes in
tests/pretrained/test_batching.py).
"""
from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field
from typing import Callable, ContextManager, Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


@dataclass
class BatchLimits:
    """Which requests may share one pass."""
    max_batch: int = 8             # requests in one pass
    max_padded_tokens: int = 1024  # batch size x longest request (the pass's rows, padding included)
    max_tokens_each: int = 128     # a longer request runs alone (long inputs fill the cores by themselves)


@dataclass(eq=False)  # compared by identity: items may be tensors
class _Request(Generic[T]):
    item: T
    size: int                                      # tokens
    done: threading.Event = field(default_factory=threading.Event)
    lead: bool = False                             # woken to lead the next pass (else: woken with the answer)
    result: object = None
    error: BaseException | None = None


class GroupCommit(Generic[T, R]):
    """run(items) -> results, one per item in order, for the items of one pass; size(item) -> its tokens."""

    def __init__(self, run: Callable[[list[T]], list[R]], size: Callable[[T], int],
                 limits: BatchLimits | None = None):
        self._run, self._size, self.limits = run, size, limits or BatchLimits()
        self._lock = threading.Lock()
        self._pending: list[_Request[T]] = []
        self._leading = False
        self.passes = 0         # passes run (for tests and benchmarks)
        self.batched = 0        # requests that shared a pass with another

    def submit(self, item: T, gate: Callable[[], ContextManager] = contextlib.nullcontext) -> R:
        """The result of run([item, ...])[0] for this item; the pass runs inside gate() (e.g. a limit on
        concurrent computations, entered by the leader only: waiting requests hold nothing)."""
        req = _Request(item, self._size(item))
        with self._lock:
            self._pending.append(req)
            leader = not self._leading
            self._leading = True
        if not leader:
            req.done.wait()
            if not req.lead:
                return self._answer(req)
        try:
            with gate():
                batch = self._take(req)
                self._serve(batch)
        finally:
            self._hand_over(req)
        return self._answer(req)

    def _take(self, first: _Request[T]) -> list[_Request[T]]:
        """The leader's own request, then every waiting request that fits beside it (in arrival order)."""
        lim = self.limits
        with self._lock:
            self._pending.remove(first)
            batch = [first]
            if first.size <= lim.max_tokens_each:
                longest = first.size
                for req in list(self._pending):
                    if len(batch) >= lim.max_batch:
                        break
                    wider = max(longest, req.size)
                    if req.size <= lim.max_tokens_each and wider * (len(batch) + 1) <= lim.max_padded_tokens:
                        batch.append(req)
                        longest = wider
                        self._pending.remove(req)
        return batch

    def _serve(self, batch: list[_Request[T]]) -> None:
        """Run the pass and hand each request its answer; a failed shared pass is retried one request at a time, so
        one request's failure is its own."""
        self.passes += 1
        if len(batch) > 1:
            self.batched += len(batch)
        try:
            results = self._run([r.item for r in batch])
            for req, res in zip(batch, results, strict=True):
                req.result = res
        except Exception as exc:  # noqa: BLE001 - delivered to the request(s) it belongs to
            if len(batch) == 1:
                batch[0].error = exc
            else:
                for req in batch:
                    try:
                        req.result = self._run([req.item])[0]
                    except Exception as own:  # noqa: BLE001
                        req.error = own
        except BaseException as exc:  # the leader's thread is being stopped: nobody waits forever
            for req in batch[1:]:
                req.error = RuntimeError(f"the shared forward pass was interrupted ({type(exc).__name__})")
            raise
        finally:
            for req in batch[1:]:
                req.done.set()

    def _hand_over(self, mine: _Request[T]) -> None:
        """The first waiting request leads the next pass; with none waiting, the next arrival leads. (The leader's
        own request is still waiting only if the gate failed: it leaves the line.)"""
        with self._lock:
            if mine in self._pending:
                self._pending.remove(mine)
            if self._pending:
                nxt = self._pending[0]
                nxt.lead = True
                nxt.done.set()
            else:
                self._leading = False

    @staticmethod
    def _answer(req: _Request) -> object:
        if req.error is not None:
            raise req.error
        return req.result
