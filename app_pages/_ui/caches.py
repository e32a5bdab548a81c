"""Caches shared by every session, bounded by bytes, not by count: one 512-token attention result weighs
75 MB and a short sentence's a few hundred KB, so a count bounds nothing. Plain Python: the pages' st.cache_resource
singletons hold the instances (models.py, SharedFigures in figures.py)."""
from __future__ import annotations

import dataclasses
import enum
import hashlib
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable

import numpy as np

from viz_core.runtime import budget


def nbytes(value) -> int:
    """The bytes of the numpy arrays (and torch tensors) a value holds: through dataclasses, tuples, lists, dicts."""
    if isinstance(value, np.ndarray):
        return value.nbytes
    if hasattr(value, "element_size") and hasattr(value, "nelement"):  # a torch tensor, without importing torch
        return value.element_size() * value.nelement()
    if isinstance(value, dict):
        return sum(nbytes(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(nbytes(v) for v in value) if value and not isinstance(value[0], str) else 0
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return sum(nbytes(getattr(value, f.name)) for f in dataclasses.fields(value))
    return 0


class ByteBoundedCache:
    """A least-recently-used cache bounded by the bytes of its values (size(value), nbytes by default). Values are
    shared read-only; the newest value always stays, even alone over the budget. Two threads missing the same key
    at once both compute it (the second result is dropped): simpler than a lock held while computing."""

    every: "weakref.WeakSet[ByteBoundedCache]" = weakref.WeakSet()  # live instances (memory.idle_release empties them)

    def __init__(self, budget_bytes: int, size: Callable[[object], int] = nbytes):
        self.budget, self.size = budget_bytes, size
        self.items: OrderedDict = OrderedDict()  # key -> (value, bytes)
        self.lock = threading.Lock()
        self.used = 0
        ByteBoundedCache.every.add(self)

    def clear(self) -> int:
        """Drop every entry; returns the bytes they were counted as."""
        with self.lock:
            freed, self.used = self.used, 0
            self.items.clear()
        return freed

    def shrink(self, keep: float) -> int:
        """Drop the least recently used entries until at most `keep` (a fraction) of the bytes are left; returns
        the bytes dropped."""
        with self.lock:
            before = self.used
            while self.items and self.used > keep * before:
                self.used -= self.items.popitem(last=False)[1][1]
            return before - self.used

    def get(self, key, compute: Callable[[], object]):
        with self.lock:
            if key in self.items:
                self.items.move_to_end(key)
                return self.items[key][0]
        value = compute()
        size = self.size(value)
        with self.lock:
            if key in self.items:
                return self.items[key][0]
            self.items[key] = (value, size)
            self.used += size
            over = budget.excess()  # the server's memory budget: past it, older entries make room for this one
            while len(self.items) > 1 and (self.used > self.budget or over > 0):
                dropped = self.items.popitem(last=False)[1][1]
                self.used -= dropped
                over -= dropped
        return value


def arg_key(value):
    """A hashable key for function arguments: texts, numbers, arrays (by their bytes), tuples, lists, dicts and
    dataclasses of those. TypeError for anything else (the caller then computes without caching)."""
    if value is None or isinstance(value, (str, int, float, bool, bytes, enum.Enum)):
        return (type(value).__name__, value)
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype.str, value.shape, hashlib.blake2b(np.ascontiguousarray(value).data,
                                                                         digest_size=16).digest())
    if isinstance(value, np.generic):
        return ("np", value.dtype.str, value.item())
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(arg_key(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((str(k), arg_key(v)) for k, v in value.items())))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value).__qualname__, tuple((f.name, arg_key(getattr(value, f.name)))
                                                for f in dataclasses.fields(value)))
    raise TypeError(f"cannot key a {type(value).__name__}")
