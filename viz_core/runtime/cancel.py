"""Work for a visitor who left stops: cooperative cancellation, per visitor.

Every computation runs for an owner: a key that is marked when the visitor it serves has gone. A thread's owner is
itself (its ident) unless it acts for another key (`acting_for`): a page's script run acts for its session (app_pages/
_ui/leaving.py), and so do the threads it hands work to (flights, pool workers), which may outlive that run. When the
visitor has gone (the tab closed or the connection dropped), the server marks the session (`request(key)`) and the
computations acting for it stop at their next check point with `Cancelled`, instead of running to the end for nobody:

- every torch module's forward (one global pre-hook, `watch_torch()`, installed once torch is in use): model passes,
  head ablation, integrated gradients, generation;
- every layer of the numpy forward and backward passes (pretrained/bert_numpy.py, attribution_numpy.py);
- a wait for a turn at the server's compute gate.

Other owners (trainings, other visitors) are never marked, and a check there costs one set lookup. A mark stays
until its owner is cleared (`clear(key)`: the session runs again, or it has ended and no thread acts for it any more),
so work that a run handed to another thread stops even when that run has already ended. Work that several visitors
wait for (a flight that another session found again: a reload, a classmate's same input) acts for a `Shared` owner,
which counts as marked once all of them are. No torch and no streamlit here.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Hashable, Iterator

Owner = Hashable  # a thread's ident, the key of the visitor it acts for (a session id), or a Shared one

_marked: set[Owner] = set()  # owners whose visitor has gone
_lock = threading.Lock()
_local = threading.local()  # .owner: the owner this thread computes for (acting_for)
_acting: dict[Owner, int] = {}  # owner -> how many threads compute for it now (acting_for blocks open)
_torch_hook = []  # the global forward pre-hook's handle, once installed


class Cancelled(Exception):
    """The visitor this computation was for has gone: nothing of it will be shown."""


class Shared:
    """The owner of work that several visitors may wait for (a flight found again by another session): it counts as
    marked once every one of them is."""

    def __init__(self, first: Owner):
        self._members = {first}

    def add(self, key: Owner) -> None:
        """One more visitor waits for this work (a session that reloaded its page, a classmate with the same input)."""
        with _lock:
            self._members.add(key)

    def has(self, key: Owner) -> bool:
        with _lock:
            return key in self._members

    def gone(self) -> bool:
        with _lock:
            return all(m in _marked for m in self._members)


def request(key: Owner) -> None:
    """Mark an owner: every computation acting for it stops at its next check point."""
    with _lock:
        _marked.add(key)


def clear(key: Owner | None = None) -> None:
    """Unmark an owner (default: this thread's), e.g. when its session runs again."""
    with _lock:
        _marked.discard(owner() if key is None else key)


def owner() -> Owner:
    """The owner whose mark this thread's checks read: the one it acts for (acting_for), else the thread itself."""
    key = getattr(_local, "owner", None)
    return threading.get_ident() if key is None else key


@contextmanager
def thread_value(local: threading.local, name: str, value) -> Iterator[None]:
    """In the block, `local.<name>` is `value` for this thread; after it, what it was before (None if unset)."""
    before = getattr(local, name, None)
    setattr(local, name, value)
    try:
        yield
    finally:
        setattr(local, name, before)


@contextmanager
def acting_for(key: Owner) -> Iterator[None]:
    """In the block, this thread's checks read `key`'s mark (the visitor whose work it does) instead of its own;
    meanwhile `acting(key)` is true."""
    with _lock:
        _acting[key] = _acting.get(key, 0) + 1
    try:
        with thread_value(_local, "owner", key):
            yield
    finally:
        with _lock:
            _acting[key] -= 1
            if not _acting[key]:
                del _acting[key]


def acting(key: Owner) -> bool:
    """Whether some thread is computing for `key` now, alone or shared with others (its mark must stay until none
    is)."""
    with _lock:
        keys = list(_acting)
    return key in keys or any(isinstance(k, Shared) and k.has(key) for k in keys)


def requested(key: Owner | None = None) -> bool:
    """Whether an owner (default: this thread's) has been marked (a Shared one: all its visitors)."""
    key = owner() if key is None else key
    return key in _marked or (isinstance(key, Shared) and key.gone())


def check() -> None:
    """Raise Cancelled if this thread (or the one it computes for) has been marked."""
    if _marked and requested():
        raise Cancelled("the visitor has gone")


def watch_torch() -> None:
    """Install (once) a forward pre-hook on every torch module that checks this thread's mark: a model pass stops
    between two modules. The caller has imported torch already."""
    if _torch_hook:
        return
    import torch
    with _lock:
        if not _torch_hook:
            _torch_hook.append(torch.nn.modules.module.register_module_forward_pre_hook(_pre_hook))


def _pre_hook(_module, _args):
    check()
