"""Memory that goes back when it is no longer used: the server's RSS follows what sessions hold, not what they held.

Two facts of a Streamlit server make freed memory linger (issue #19):
- A page script is executed in a fresh module every run, and its functions reference the module's globals, which
  reference the functions: a cycle. Once the run is over, its page data (a 75 MB attention result at 512 tokens)
  is garbage that only a full garbage collection frees. Streamlit's own collection after every run is switched off
  (runner.postScriptGC = false in .streamlit/config.toml: it cost 0.1-0.15 s per run under load), and Python's
  generational collector rarely reaches the oldest generation, so one visitor typing long sentences grew the server
  by about 47 MB per sentence.
- glibc keeps freed heap memory for reuse instead of giving it back to the system.

`settle()`, after every completed run, collects and gives memory back when the process has grown by GROWTH_BYTES since
the last time (one read of /proc/self/statm per run). A watcher thread releases every WATCH_SECONDS whatever the
growth, so the memory of a closed tab's session goes back once Streamlit ends the session (its
server.disconnectedSessionTTL, 120 s). A collection walks only the objects made since the warm-up (the rest is
frozen, see warmup.py): under a millisecond on an idle server, milliseconds with a class connected.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import gc
import os
import threading
import time

GROWTH_BYTES = 48 * 2**20  # collect once the process has grown this much since the last collection
WATCH_SECONDS = 15.0       # the watcher's period (memory of ended sessions, with no run to trigger a check)

_lock = threading.Lock()
_baseline = 0              # RSS after the last collection
_runs = 0                  # completed runs since the last collection (where the RSS cannot be read)
_FALLBACK_RUNS = 20        # without /proc: collect every this many runs
_watching = threading.Event()
_armed = threading.Event()  # set once the warm-up has frozen what lives as long as the server (see arm())
ARM_AFTER_S = 60.0         # ... or this long after the watcher started, should the warm-up never finish


def rss_bytes() -> int:
    """This process's resident set size in bytes, or 0 where /proc is not available (not Linux)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _malloc_trim():
    """glibc's malloc_trim, which hands free heap pages back to the system; None elsewhere (musl, macOS)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc.malloc_trim
    except (OSError, AttributeError):
        return None


_trim = _malloc_trim()


def release() -> int:
    """Collect all garbage and hand free heap memory back to the system; returns the RSS after (bytes)."""
    gc.collect()
    if _trim is not None:
        _trim(0)
    return rss_bytes()


def arm() -> None:
    """From now on settle() may collect. Called by the warm-up once it has frozen the long-lived objects: before,
    a collection walks torch's 400,000 objects (0.1-0.2 s) and the RSS grows anyway while torch loads."""
    global _baseline
    _baseline = rss_bytes()
    _armed.set()


def settle() -> bool:
    """release() if the process grew by GROWTH_BYTES since the last release (else nothing); True if it released.
    Never waits: if another thread is releasing, this call returns at once; does nothing before arm()."""
    global _baseline, _runs
    if not _armed.is_set() or not _lock.acquire(blocking=False):
        return False
    try:
        now = rss_bytes()
        _runs += 1
        due = now - _baseline >= GROWTH_BYTES if now else _runs >= _FALLBACK_RUNS
        if not due:
            return False
        _baseline, _runs = release(), 0
        return True
    finally:
        _lock.release()


def watch() -> None:
    """Start the watcher thread (once per process): settle() every WATCH_SECONDS."""
    if _watching.is_set():
        return
    _watching.set()
    threading.Thread(target=_watch, name="memory-settle", daemon=True).start()


def _watch() -> None:
    global _baseline
    started = time.monotonic()
    while True:
        time.sleep(WATCH_SECONDS)
        if not _armed.is_set():
            if time.monotonic() - started < ARM_AFTER_S:
                continue
            arm()
        with _lock:
            _baseline = release()
