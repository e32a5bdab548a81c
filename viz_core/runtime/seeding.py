"""Seeded results that no other visitor can change.

torch's default generator is one per process (one per device), and every session of the server is a thread of that
process. `torch.manual_seed(s)` followed by a build is only reproducible if no other thread draws between the seed and
the last draw of the build: building an nn.Linear draws its initial weights, a training step draws its dropout masks.
Measured before this module: building TinyLM(seed 0) while another thread ran shape_walkthrough(seed=5) gave other
weights in most builds.

The rule this module implements: every draw from the default generator happens while RNG_LOCK is held.
- `seeded(seed)`: a short seeded computation (a demo's random layer and input). It holds the lock, works on a fork
  of the generator's state (the process's state is unchanged afterwards) and seeds that fork.
- `RandomStream`: a long seeded computation made of short steps (a training). It keeps its own generator state
  between steps; each step runs with that state under the lock, so one training's dropout masks do not depend on
  what other trainings and visitors drew in between.
- `unseeded()`: code that draws without a seed of its own (building a model a checkpoint then fills) holds the lock
  too, so that it cannot draw in the middle of someone else's seeded computation.
A torch.Generator passed explicitly (generator=...) needs none of this: prefer it where the API takes one.
"""
from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import torch

# Re-entrant: a seeded computation may call another one (a demo that builds a seeded module inside its own seed).
RNG_LOCK = threading.RLock()


def _cuda_index(device: torch.device | str | None) -> int | None:
    """The CUDA device whose generator a computation on `device` draws from, or None (the CPU; on Apple's MPS only
    the CPU generator is kept apart)."""
    if device is None:
        return None
    device = torch.device(device)
    if device.type != "cuda":
        return None
    return device.index if device.index is not None else torch.cuda.current_device()


@contextlib.contextmanager
def _forked(cuda: int | None) -> Iterator[None]:
    """Hold the lock and restore the CPU generator's state (and `cuda`'s) on exit."""
    with RNG_LOCK, torch.random.fork_rng(devices=[] if cuda is None else [cuda]):
        yield


@contextlib.contextmanager
def seeded(seed: int, device: torch.device | str | None = None) -> Iterator[None]:
    """Run a block on the default generator seeded with `seed`, alone: the same seed gives the same draws whatever
    other threads do, and the process's generator state is unchanged after the block."""
    cuda = _cuda_index(device)
    with _forked(cuda):
        torch.default_generator.manual_seed(int(seed))
        if cuda is not None:
            with torch.cuda.device(cuda):
                torch.cuda.manual_seed(int(seed))
        yield


@contextlib.contextmanager
def unseeded() -> Iterator[None]:
    """Draw from the default generator without a seed of one's own, without disturbing a seeded computation."""
    with RNG_LOCK:
        yield


class RandomStream:
    """A private state of the default generator for a computation made of many short steps (a training).

    `with stream.active():` runs one step on the stream's state and keeps the state it leaves, so the steps of one
    stream draw exactly what they would draw alone, in order, however other streams' steps interleave with them."""

    def __init__(self, seed: int, device: torch.device | str | None = None):
        self._cuda = _cuda_index(device)
        with seeded(seed, device):
            self._cpu_state = torch.get_rng_state()
            self._cuda_state = None if self._cuda is None else torch.cuda.get_rng_state(self._cuda)

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        with _forked(self._cuda):
            torch.set_rng_state(self._cpu_state)
            if self._cuda is not None:
                torch.cuda.set_rng_state(self._cuda_state, self._cuda)
            try:
                yield
            finally:
                self._cpu_state = torch.get_rng_state()
                if self._cuda is not None:
                    self._cuda_state = torch.cuda.get_rng_state(self._cuda)
