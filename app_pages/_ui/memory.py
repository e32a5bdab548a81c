"""Memory that goes back when it is no longer used: the server's RSS follows what sessions hold, not what they held.

Two facts of a Streamlit server make freed memory linger:
- A page script is executed in a fresh module every run, and its functions reference the module's globals, which
  reference the functions: a cycle. Once the run is over, its page data (a 75 MB attention result at 512 tokens)
  is garbage that only a full garbage collection frees. Streamlit's own collection after every run is switched off
  (runner.postScriptGC = false in .streamlit/config.toml: it cost 0.1-0.15 s per run under load), and Python's
  generational collector rarely reaches the oldest generation, so one visitor typing long sentences grew the server
  by about 47 MB per sentence.
- glibc keeps freed heap memory for reuse instead of giving it back to the system.

Once the class has left (no session left on the server, ended or past its reconnection time), `idle_release()` empties
the shared result caches (every ByteBoundedCache and st.cache_data; models and tokenizers stay loaded) and gives the
memory back: the server returns to about its warmed-up size instead of keeping the last class's sentences. It logs
where the memory is then (`report()`): the caches it emptied, glibc's heap (in use, free but kept), Python objects and
modules.

Under the server-wide memory budget (viz_core.runtime.budget), the same steps relieve the pressure before a request is
refused: a collection and trim, then the older half of every shared cache, then the rest (registered below).

glibc tuned for a server (`tune_malloc()`, at server start): few arenas, and every block of 1 MB or more in a mapping
of its own, so a freed array goes back to the system. Before, the worst class (bench/bench_worst_class.py) left the
server 450 MB above its warmed-up size after everyone had gone, held as free memory in glibc's arenas. While long
model computations run (`computing()`), blocks up to 64 MB are reused from the arenas instead, and trimmed back when
the last one ends.

`settle()`, after every completed run, collects and gives memory back when the process has grown by GROWTH_BYTES since
the last time (one read of /proc/self/statm per run). A watcher thread releases every WATCH_SECONDS whatever the
growth, so the memory of a closed tab's session goes back once Streamlit ends the session (its
server.disconnectedSessionTTL, 120 s). A collection walks only the objects made since the warm-up (the rest is
frozen, see warmup.py): under a millisecond on an idle server, milliseconds with a class connected.
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
import os
import sys
import threading
import time

from streamlit.logger import get_logger

from viz_core.runtime import budget
from viz_core.runtime.budget import rss_bytes
from viz_core.runtime.settings import env_int

_log = get_logger(__name__)  # Streamlit's: its handler and level (logger.level, "info" by default)

GROWTH_BYTES = 48 * 2**20  # collect once the process has grown this much since the last collection
WATCH_SECONDS = 15.0       # the watcher's period (memory of ended sessions, with no run to trigger a check)

_lock = threading.Lock()
_baseline = 0              # RSS after the last collection
_warm = 0                  # RSS when the warm-up ended (arm())
_runs = 0                  # completed runs since the last collection (where the RSS cannot be read)
_FALLBACK_RUNS = 20        # without /proc: collect every this many runs
_watching = threading.Event()
_armed = threading.Event()  # set once the warm-up has frozen what lives as long as the server (see arm())
ARM_AFTER_S = 60.0         # ... or this long after the watcher started, should the warm-up never finish


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


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                     "fsmblks", "uordblks", "fordblks", "keepcost")]


def heap() -> dict[str, int]:
    """glibc's heap in bytes (mallinfo2): `in_use` (allocated by the program: Python's arenas, numpy and torch
    buffers), `free` (freed but kept in the arenas), `mapped` (large blocks in their own mappings); {} elsewhere."""
    try:
        fn = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallinfo2
    except (OSError, AttributeError):
        return {}
    fn.restype = _MallInfo2
    info = fn()
    return {"in_use": info.uordblks, "free": info.fordblks, "mapped": info.hblkhd}


def resident() -> dict[str, int]:
    """This process's resident memory by kind of mapping (/proc/self/smaps, bytes): `files` (libraries and model
    files), `main_heap` (glibc's main arena), `anonymous` (the other arenas, Python's object arenas, large buffers,
    thread stacks); {} where /proc is not available."""
    out = {"files": 0, "main_heap": 0, "anonymous": 0}
    kind = "anonymous"
    try:
        with open("/proc/self/smaps") as f:
            for line in f:
                fields = line.split()
                if fields and fields[0] == "Rss:":
                    out[kind] += int(fields[1]) * 1024
                elif fields and "-" in fields[0] and not fields[0].endswith(":"):  # a mapping's first line
                    name = fields[5] if len(fields) > 5 else ""
                    kind = "main_heap" if name == "[heap]" else "files" if name.startswith("/") else "anonymous"
    except (OSError, ValueError, IndexError):
        return {}
    return out


def report(freed: dict[str, int] | None = None) -> dict[str, int]:
    """Where the server's memory is (bytes): rss, the warmed-up baseline (`warm`, 0 before arm()), heap figures,
    Python's tracked objects (a count), and the bytes of each emptied cache if `freed` is given."""
    out = {"rss": rss_bytes(), "warm": _warm, **{f"heap_{k}": v for k, v in heap().items()},
           **{f"resident_{k}": v for k, v in resident().items()},
           "python_objects": len(gc.get_objects()), "modules": len(sys.modules),
           "budget": budget.limit_bytes(), "refused": budget.refusals[0]}
    return out | {f"emptied_{k}": v for k, v in (freed or {}).items()}


def describe(r: dict[str, int]) -> str:
    """report() as one line of megabytes."""
    mb = lambda key: f"{r.get(key, 0) / 2**20:.0f} MB"  # noqa: E731
    emptied = ", ".join(f"{k.removeprefix('emptied_')} {mb(k)}" for k in r if k.startswith("emptied_"))
    return (f"RSS {mb('rss')} (warmed up: {mb('warm')}): files {mb('resident_files')}, main heap "
            f"{mb('resident_main_heap')}, anonymous {mb('resident_anonymous')}; heap: in use {mb('heap_in_use')}, "
            f"free but kept {mb('heap_free')}, own mappings {mb('heap_mapped')}; "
            f"{r['python_objects']:,} Python objects, {r['modules']:,} modules; budget {mb('budget')}, "
            f"{r.get('refused', 0):,} requests refused"
            + (f"; caches emptied: {emptied}" if emptied else ""))


def _shared_caches():
    from .caches import ByteBoundedCache
    return list(ByteBoundedCache.every)


def shed_older_half() -> int:
    """Drop the least recently used half (by bytes) of every shared result cache, then release(); returns the RSS."""
    for cache in _shared_caches():
        cache.shrink(0.5)
    return release()


def _empty_caches() -> int:
    """Empty every shared result cache and st.cache_data; returns the bytes the result caches were counted as."""
    import streamlit as st
    freed = sum(cache.clear() for cache in _shared_caches())
    st.cache_data.clear()
    return freed


def shed_all() -> int:
    """Empty every shared cache (_empty_caches), then release(); returns the RSS."""
    _empty_caches()
    return release()


def idle_release() -> dict[str, int]:
    """Empty the shared caches (every ByteBoundedCache: results and figures; st.cache_data), collect, give the heap
    back; returns report() with the bytes the caches were counted as. For when no session is left: nobody shares
    them then, and the next visitor computes what they ask for, as the first visitor of a day does."""
    freed = {"results and figures": _empty_caches()}
    with _lock:
        global _baseline
        _baseline = release()
    r = report(freed)
    _log.info("memory once the last session ended: %s", describe(r))
    return r


ARENAS = 2           # glibc malloc arenas the threads share (ATTN_MALLOC_ARENAS)
MMAP_KB = 1024       # a block of at least this many KB gets a mapping of its own (ATTN_MALLOC_MMAP_KB)
_M_MMAP_THRESHOLD, _M_ARENA_MAX = -3, -8  # mallopt's parameter numbers (malloc.h)


def tune_malloc() -> dict[str, bool]:
    """Few arenas, and large blocks always in mappings of their own; call it before the threads that allocate start.

    - glibc gives each thread that allocates while another does an arena of its own (up to 8 per core), and what is
      freed in an arena is reused only there: every session's thread kept its own free memory.
    - glibc's threshold for giving a block its own mapping grows with the largest block freed (up to 32 MB), and the
      arenas then keep up to twice that free at their top, which malloc_trim does not return. A fixed threshold
      keeps it at MMAP_KB: a large array (an attention result, a layer's scores) goes back to the system when freed.

    Returns which of the two were set (False where it is not glibc, or where the operator's MALLOC_ARENA_MAX /
    MALLOC_MMAP_THRESHOLD_ is set: that stays)."""
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):
        return {"arenas": False, "mmap_threshold": False}
    wanted = {"arenas": ("MALLOC_ARENA_MAX", _M_ARENA_MAX, env_int("ATTN_MALLOC_ARENAS", ARENAS)),
              "mmap_threshold": ("MALLOC_MMAP_THRESHOLD_", _M_MMAP_THRESHOLD,
                                 env_int("ATTN_MALLOC_MMAP_KB", MMAP_KB) * 1024)}
    done = {name: not os.environ.get(var) and bool(mallopt(param, int(value)))
            for name, (var, param, value) in wanted.items()}
    _mallopt[:] = [mallopt] if done["mmap_threshold"] else []
    return done


BUSY_MMAP_KB = 64 * 1024  # while a model computation runs, blocks under this size come from the arenas
#                           (ATTN_MALLOC_BUSY_MMAP_KB; 0 keeps MMAP_KB then too)
_mallopt: list = []       # glibc's mallopt, once tune_malloc() has set the threshold (never where the operator has)
_computing = [0]
_computing_lock = threading.Lock()


@contextlib.contextmanager
def computing():
    """While any long computation runs (models.heavy(long=True)), blocks up to BUSY_MMAP_KB come from the arenas: a
    layer's arrays reuse the memory the layer before freed, instead of each getting a new mapping whose pages the
    kernel zeroes on first touch (the numpy head ablation of a 400-token text: 5.5 -> 3.7 s; its integrated gradients
    12.3 -> 9.9 s). When the last one ends, the threshold goes back to MMAP_KB and the free heap back to the system
    (malloc_trim), so what the computations freed does not stay in the arenas. Short passes do not raise it: under a
    class, the threshold would go up and down, and the heap be trimmed, after nearly every pass (a new text's rerun
    p50 11 -> 16 s, bench/bench_worst_class.py). Nothing where tune_malloc() did not set the threshold."""
    off = os.environ.get("ATTN_MALLOC_BUSY_MMAP_KB", "").strip() == "0"  # blocks of MMAP_KB always get mappings
    busy_kb = env_int("ATTN_MALLOC_BUSY_MMAP_KB", BUSY_MMAP_KB)
    if not _mallopt or off:
        yield
        return
    with _computing_lock:
        _computing[0] += 1
        if _computing[0] == 1:
            _mallopt[0](_M_MMAP_THRESHOLD, busy_kb * 1024)
    try:
        yield
    finally:
        with _computing_lock:
            _computing[0] -= 1
            if _computing[0] == 0:
                _mallopt[0](_M_MMAP_THRESHOLD, env_int("ATTN_MALLOC_MMAP_KB", MMAP_KB) * 1024)
                if _trim is not None:
                    _trim(0)


def arm() -> None:
    """From now on settle() may collect. Called by the warm-up once it has frozen the long-lived objects: before,
    a collection walks torch's 400,000 objects (0.1-0.2 s) and the RSS grows anyway while torch loads."""
    global _baseline, _warm
    _baseline = _warm = rss_bytes()
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


budget.on_pressure(release)           # cheapest first: what is garbage already
budget.on_pressure(shed_older_half)   # then what the class has not asked for lately
budget.on_pressure(shed_all)
