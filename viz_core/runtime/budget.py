"""A server-wide memory budget: one figure (ATTN_MEMORY_BUDGET_MB) that every large allocation checks first.

Per-visitor limits (an upload's size, a run's memory, a text's tokens) do not add up to a bound for the server:
thirty visitors, each within their limits, can together hold more than the machine has. So before a large
allocation (an upload and its decompression, a model computation, a shared cache entry, loading a model, a
training) the code asks `admit(need)`: the process's resident memory now plus `need` bytes must stay within the
budget. When it would not, the server first frees what it can without taking anything from anyone: the relievers
registered with `on_pressure` run in order (garbage collection and the allocator's trim, then the older half of the
shared result caches, then the rest of them), each followed by a new reading. If the request still does not fit,
`admit` raises ServerBusy, which a page shows as "the server is busy, try again in a minute". Work already admitted
is never stopped: the budget refuses new heavy work, it does not take memory back from running work.

The default is three quarters of the memory the server may use (`machine_bytes`: its container's limit, else the
machine's): 1,536 MB on a 2 GB machine, where the rest is the system's and the transient peaks of work already
admitted. ATTN_MEMORY_BUDGET_MB sets it in MB; 0 switches the budget off. Where neither can be read (not Linux) the
default is DEFAULT_MB, and the resident size reads as 0, so everything fits.
"""
from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections.abc import Callable

from ..errors import InputError

log = logging.getLogger(__name__)

SHARE = 0.75               # the default budget's share of the memory the server may use (machine_bytes)
DEFAULT_MB = 1536          # the default where that memory cannot be read: a 2 GB machine's share
COMPUTATION_BYTES = 96 * 2**20  # what a model computation may need while it runs (MiniLM at 512 tokens: ~100 MB
#                                 at its peak, of which the result stays; Gemma at 200 tokens: ~60 MB)
LONG_COMPUTATION_BYTES = 2 * COMPUTATION_BYTES  # a long one (every head's ablation, integrated gradients) runs its
#                                 batches on every core side by side, each with a short pass's memory
RELIEF_EVERY_S = 1.0       # relievers run at most this often: a crowd of refused requests does not collect 30 times

_relievers: list[Callable[[], object]] = []
_lock = threading.Lock()
_last_relief = [-1e9]      # time.monotonic() of the last relief
refusals = [0]             # requests refused since the server started (the memory report says it)


class ServerBusy(InputError):
    """The server has no memory left for this request now; try again later. `need` and `limit` in MB (text)."""

    def __init__(self, what: str, need: int, rss: int, limit: int):
        super().__init__("common.server_busy",
                         f"the server is busy: {what} needs about {need / 2**20:.0f} MB and the server holds "
                         f"{rss / 2**20:.0f} of its {limit / 2**20:.0f} MB; try again in a minute",
                         need=f"{need / 2**20:.0f}", rss=f"{rss / 2**20:.0f}",
                         limit=f"{limit / 2**20:.0f}")


def limit_bytes() -> int:
    """The budget in bytes: ATTN_MEMORY_BUDGET_MB (0 = off), else SHARE of machine_bytes() (DEFAULT_MB where it
    cannot be read)."""
    raw = os.environ.get("ATTN_MEMORY_BUDGET_MB", "").strip()
    if raw:
        try:
            return max(0, int(raw)) * 2**20
        except ValueError:
            log.warning("ATTN_MEMORY_BUDGET_MB=%r is not a whole number; using the default", raw)
    machine = machine_bytes()
    return int(SHARE * machine) if machine else DEFAULT_MB * 2**20


@functools.lru_cache(maxsize=1)
def machine_bytes() -> int:
    """The memory this server may use: its cgroup's limit (v2 memory.max, v1 memory.limit_in_bytes) where one is set
    below the machine's, else the machine's (MemTotal); 0 where none can be read."""
    total = 0
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    total = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                raw = f.read().strip()
        except OSError:
            continue
        if raw.isdigit() and (not total or int(raw) < total):  # "max", or v1's "no limit" (2^63 - a page)
            return int(raw)
    return total


def rss_bytes() -> int:
    """This process's resident set size in bytes (one read of /proc/self/statm), or 0 where it cannot be read."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def excess(need: int = 0) -> int:
    """How many bytes the resident memory plus `need` is over the budget now (0 when it fits, or with no budget)."""
    limit = limit_bytes()
    return max(0, rss_bytes() + need - limit) if limit else 0


def on_pressure(reliever: Callable[[], object]) -> None:
    """Register a function that frees shared memory nobody is using (once per function; they run in the order
    registered, cheapest first)."""
    if reliever not in _relievers:
        _relievers.append(reliever)


def fits(need: int) -> bool:
    """Whether `need` more bytes fit in the budget, after relieving the pressure if they do not at first."""
    if not excess(need):
        return True
    with _lock:  # one thread relieves; the others then read the memory it freed
        if not excess(need):
            return True
        if time.monotonic() - _last_relief[0] < RELIEF_EVERY_S:
            return False
        _last_relief[0] = time.monotonic()
        before, relieve = rss_bytes(), None
        for relieve in _relievers:
            try:
                relieve()
            except Exception:  # noqa: BLE001 - a reliever that fails frees nothing; the check still answers
                log.exception("memory reliever %r failed", relieve)
            if not excess(need):
                break
        log.info("memory budget: relieved %.0f -> %.0f MB (%s) for %.0f MB more", before / 2**20,
                 rss_bytes() / 2**20, getattr(relieve, "__name__", "?"), need / 2**20)
        return not excess(need)


def admit(need: int, what: str) -> None:
    """Return if `need` more bytes fit in the budget (relieving the pressure first if needed), else ServerBusy."""
    if fits(need):
        return
    refusals[0] += 1
    rss, limit = rss_bytes(), limit_bytes()
    log.warning("memory budget: refused %s (%.0f MB) at %.0f of %.0f MB", what, need / 2**20, rss / 2**20,
                limit / 2**20)
    raise ServerBusy(what, need, rss, limit)
