"""A CPU thread budget for the calling thread only.

torch.set_num_threads changes the intra-op thread count of the whole process: in a server where every visitor's
session runs in its own thread, one session's "use 1 thread" would slow down (or speed up) everyone else's work,
and worker threads created afterwards inherit it. With torch's OpenMP backend the thread count is an OpenMP
internal control variable (ICV) of each thread: omp_set_num_threads, called on the libgomp that torch itself
loaded, changes only the calling thread. thread_budget does exactly that and restores it afterwards.

    with thread_budget(1):      # this thread's torch ops use one thread; other sessions keep theirs
        run_small_experiment()
"""
from __future__ import annotations

import ctypes
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

import torch

log = logging.getLogger(__name__)


@lru_cache(maxsize=1)
def _openmp():
    """torch's own libgomp (torch/lib/libgomp*.so*) as a ctypes library, or None where it cannot be found."""
    if "OpenMP" not in torch.__config__.parallel_info().split("ATen parallel backend:")[-1]:
        log.info("thread_budget: torch does not use OpenMP here; thread budgets are a no-op")
        return None
    candidates = sorted((Path(torch.__file__).parent / "lib").glob("libgomp*.so*"))
    for path in candidates:
        try:
            lib = ctypes.CDLL(str(path))  # already loaded by torch: dlopen returns the same library
            lib.omp_set_num_threads.argtypes, lib.omp_set_num_threads.restype = [ctypes.c_int], None
            lib.omp_get_max_threads.argtypes, lib.omp_get_max_threads.restype = [], ctypes.c_int
            return lib
        except (OSError, AttributeError):
            continue
    log.info("thread_budget: torch's libgomp was not found in %s; thread budgets are a no-op",
             Path(torch.__file__).parent.name + "/lib")
    return None


@contextmanager
def thread_budget(n: int | None) -> Iterator[None]:
    """Run the block with at most n intra-op CPU threads in the CALLING thread only; restore afterwards.

    n=None leaves the setting unchanged. Never raises the count above the thread's current one. Works as a
    decorator too (`@thread_budget(1)`). A no-op (logged once) where torch's OpenMP library cannot be found.
    """
    lib = _openmp() if n else None
    if lib is None:
        yield
        return
    before = torch.get_num_threads()  # also runs torch's per-thread lazy init, which would otherwise reset ours
    lib.omp_set_num_threads(max(1, min(int(n), before)))
    try:
        yield
    finally:
        lib.omp_set_num_threads(before)
