"""A visitor who left gets no more of the server's time: their work is abandoned within about 2 s.

Streamlit keeps a session whose browser has gone (tab closed, connection dropped) for server.disconnectedSessionTTL,
so that the browser can come back to it. It stops the session's script run when the connection drops, but a long
computation runs in a thread of its own that outlives the run (a flight, viz_core.runtime.flights, so that a click
does not start it again): "Which heads matter" on a long text went on for a minute for nobody, and ten visitors who
asked for it and left kept two cores busy for ten minutes. Here:

- each run says which session it serves (`running()`, around the page in app.py): its thread acts for that session
  (viz_core.runtime.cancel.acting_for), and so does every thread it hands work to (flights, pool workers);
- a watcher (`watch()`, started with the server) looks every POLL_S at the sessions with a run in progress or a
  computation acting for them; a session that has had no connection for GRACE_S (a phone switching networks
  reconnects within it), or that Streamlit has ended, gets its script stopped (Streamlit's own stop: the next st
  call ends the run) and is marked (viz_core.runtime.cancel: the model pass, ablation or attribution in progress
  stops at its next layer or module, and a wait for the compute gate ends);
- a run then ends with viz_core.runtime.cancel.Cancelled, which app.py swallows: nobody is there to read a message.
  The mark outlives the run, for the flights it started. It is cleared when the session runs again, or once
  Streamlit has ended it and no thread computes for it.

A browser that comes back (within server.disconnectedSessionTTL) would wait for the end of a run that was abandoned:
the watcher reruns that session's page with the state of its last run, as Streamlit's run-on-save does. Streamlit's
calls used: Runtime.is_active_session, the session manager's get_session_info (a disconnected session is not an
active one; an ended one has no info), AppSession.request_script_stop and request_rerun with the session's last
client state.
"""
from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Iterator

from viz_core.runtime import cancel

_log = logging.getLogger(__name__)

POLL_S = 0.5    # how often the watcher looks
GRACE_S = 1.0   # how long a session may be without a connection before its work is abandoned

_runs: dict[str, int] = {}          # session id -> the thread running its script now
_served: set[str] = set()           # sessions that have run here: watched while a run or a computation acts for
                                    # them, forgotten once Streamlit has ended them and nothing computes for them
_gone_since: dict[str, float] = {}  # session id -> when the watcher first saw it without a connection
_lock = threading.Lock()
_abandoned: set[str] = set()       # sessions whose work was abandoned: rerun when their browser comes back
_watcher: list[threading.Thread] = []
_loop: list = []                    # the server's event loop (AppSession's calls belong on it)
stats = {"abandoned": 0}  # sessions whose work was abandoned so far (tests, benchmarks)


@contextlib.contextmanager
def running(session_id: str | None) -> Iterator[None]:
    """Around one script run of `session_id` in this thread: the watcher may abandon it, and the computations it
    hands to other threads, while they last."""
    me = threading.get_ident()
    cancel.clear(me)  # a mark left on this thread by other code is not this run's
    if session_id is None:  # not served by a runtime (AppTest): nothing to watch
        yield
        return
    cancel.clear(session_id)  # the session runs again: its visitor is here
    with _lock:
        _runs[session_id] = me
        _served.add(session_id)
    try:
        with cancel.acting_for(session_id):
            yield
    finally:
        with _lock:
            if _runs.get(session_id) == me:
                del _runs[session_id]


def abandon_gone(now: float | None = None, is_active=None, stop=None, resume=None, exists=None) -> list[str]:
    """One look: abandon the work of sessions without a connection for GRACE_S, or ended (returns their ids): their
    script run and whatever computes for them after it (Streamlit itself stops a session's script as soon as its
    connection drops, while a flight the run waited for goes on). Rerun the page of an abandoned session whose
    browser has come back (it would otherwise wait for a run that ended), and forget a session that Streamlit has
    ended once nothing computes for it. is_active(sid), stop(sid), resume(sid) and exists(sid) default to the
    runtime's (tests pass their own)."""
    now = time.monotonic() if now is None else now
    is_active, stop, resume = is_active or _is_active, stop or _stop_script, resume or _resume
    exists = exists or (lambda sid: _session(sid) is not None)
    with _lock:
        runs, served, abandoned = dict(_runs), set(_served), set(_abandoned)
    gone = []
    for sid in served:
        busy = sid in runs or cancel.acting(sid)
        if not busy or cancel.requested(sid) or is_active(sid):
            with _lock:
                _gone_since.pop(sid, None)
            if sid in abandoned and is_active(sid):  # its browser is back: the run it waited for runs again
                with _lock:
                    _abandoned.discard(sid)
                resume(sid)
            elif not busy and not exists(sid):  # ended (server.disconnectedSessionTTL), and nothing computes for it
                _forget(sid)
            continue
        with _lock:
            since = _gone_since.setdefault(sid, now)
        if now - since >= GRACE_S or not exists(sid):
            cancel.request(sid)
            if sid in runs:
                stop(sid)
            gone.append(sid)
            with _lock:
                _runs.pop(sid, None)
                _gone_since.pop(sid, None)
                _abandoned.add(sid)
    stats["abandoned"] += len(gone)
    return gone


def _forget(sid: str) -> None:
    with _lock:
        _served.discard(sid)
        _abandoned.discard(sid)
        _gone_since.pop(sid, None)
    cancel.clear(sid)


def watch(loop=None) -> None:
    """Start the watcher thread (once per process). loop: the server's event loop."""
    with _lock:
        if loop is not None and not _loop:
            _loop.append(loop)
        if _watcher:
            return
        thread = threading.Thread(target=_watch, name="abandon-gone-visitors", daemon=True)
        _watcher.append(thread)
    thread.start()


def _watch() -> None:
    while True:
        time.sleep(POLL_S)
        try:
            abandon_gone()
        except Exception:  # noqa: BLE001 - the next look tries again; the server goes on
            _log.exception("looking for visitors who left failed")


def _is_active(session_id: str) -> bool:
    from streamlit.runtime import Runtime
    return not Runtime.exists() or Runtime.instance().is_active_session(session_id)


def _stop_script(session_id: str) -> None:
    """Streamlit's own stop of the session's script (its next st call ends the run)."""
    session = _session(session_id)
    if session is not None:
        session.request_script_stop()  # (thread-safe: it queues a request for the script runner)


def _session(session_id: str):
    """The AppSession of a session, connected or not (the session manager of Streamlit 1.67), or None."""
    from streamlit.runtime import Runtime
    if not Runtime.exists():
        return None
    manager = getattr(Runtime.instance(), "_session_mgr", None)
    info = manager.get_session_info(session_id) if hasattr(manager, "get_session_info") else None
    return None if info is None else info.session


def _resume(session_id: str) -> None:
    """Rerun a session with the client state of its last run (what Streamlit's run-on-save does), on the server's
    event loop. A session that has ended meanwhile is left alone."""
    session = _session(session_id)
    if session is None or not _loop:
        return
    _loop[0].call_soon_threadsafe(lambda: session.request_rerun(getattr(session, "_client_state", None)))
