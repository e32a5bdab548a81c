"""Work for a visitor who left stops: cooperative cancellation, per thread.

A page's script runs in a thread of its own. When its visitor has gone (the tab closed or the connection dropped),
the server marks that thread (`request(thread_id)`, app_pages/_ui/leaving.py) and the computation it is in stops at
its next check point with `Cancelled`, instead of running to the end for nobody:

- every torch module's forward (one global pre-hook, `watch_torch()`, installed once torch is in use): model passes,
  head ablation, integrated gradients, generation;
- every layer of the numpy forward and backward passes (pretrained/bert_numpy.py, attribution_numpy.py);
- a wait for a turn at the server's compute gate.

Other threads (trainings, other visitors) are never marked, and a check there costs one dictionary lookup. A new run
of the page clears its thread's mark (`clear()`). No torch and no streamlit here.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

_marked: set[int] = set()  # thread ids whose visitor has gone
_lock = threading.Lock()
_local = threading.local()  # .owner: the thread a pool worker computes for (acting_for)
_torch_hook = []  # the global forward pre-hook's handle, once installed


class Cancelled(Exception):
    """The visitor this computation was for has gone: nothing of it will be shown."""


def request(thread_id: int) -> None:
    """Mark a thread: its computation stops at its next check point."""
    with _lock:
        _marked.add(thread_id)


def clear(thread_id: int | None = None) -> None:
    """Unmark a thread (default: this one), e.g. when it starts a new run."""
    with _lock:
        _marked.discard(threading.get_ident() if thread_id is None else thread_id)


def owner() -> int:
    """The thread whose mark this thread's checks read: its own, or the one it computes for (acting_for)."""
    return getattr(_local, "owner", None) or threading.get_ident()


@contextmanager
def thread_value(local: threading.local, name: str, value) -> Iterator[None]:
    """In the block, `local.<name>` is `value` for this thread; after it, what it was before (None if unset)."""
    before = getattr(local, name, None)
    setattr(local, name, value)
    try:
        yield
    finally:
        setattr(local, name, before)


def acting_for(thread_id: int):
    """In a pool worker: check `thread_id`'s mark (the page thread that handed it the work) instead of its own."""
    return thread_value(_local, "owner", thread_id)


def requested() -> bool:
    return owner() in _marked


def check() -> None:
    """Raise Cancelled if this thread (or the one it computes for) has been marked."""
    if _marked and owner() in _marked:
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
