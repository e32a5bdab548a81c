"""Background work steps aside inside its step, not only between steps.

A training waits before each step while a visitor's model computation runs (viz_core.runtime.priority). Were that
all, a step already under way when a visitor's pass starts would run to its end: its forward, backward and
optimiser update (about 50 ms for the Train page's default model on one thread) would compete with the pass for
the cores, and the pass's threads, which meet after every operation, would wait for the slowest of them each time.
Beside the Train page's training, a Gemma pass on 24 tokens took 0.130 s (median) that way and 0.086 s with the
training standing aside within its steps (bench/bench_step_aside.py).

step_aside() makes the calling thread wait, while a visitor's computation runs, whenever autograd saves a tensor
for the backward pass or reads one back (saved-tensor hooks: about 360 points in one training step of the Train
page's model, at no measurable cost). Work without gradients (an evaluation, a greedy decoding) saves nothing:
every_op=True waits before each torch operation instead (a torch-function mode: about 2,000 points per training
step, 8 % slower, so it is kept to the evaluations). A block waits at most `budget_s` in all, so a training under
a continuous load still makes progress. Both hooks belong to the calling thread: a visitor's pass in another
thread never sees them.

    with step_aside(priority.MAX_WAIT_S) as aside:
        loss = train_step()
    seconds_training -= aside.waited           # time spent standing aside is not training time
    with step_aside(priority.MAX_WAIT_S, every_op=True):
        evaluate()
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext

import torch
from torch.overrides import TorchFunctionMode

from . import priority


class Aside:
    """The waiting itself: what is left of the block's budget, and the seconds waited so far."""

    def __init__(self, budget_s: float):
        self.left = budget_s
        self.waited = 0.0

    def __call__(self) -> None:
        if self.left > 0 and priority.busy():
            waited = priority.wait_for_foreground(self.left)
            self.left -= waited
            self.waited += waited


class _OperationMode(TorchFunctionMode):
    """Call `aside` before every torch function this thread calls."""

    def __init__(self, aside: Aside):
        super().__init__()
        self.aside = aside

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.aside()
        return func(*args, **(kwargs or {}))


@contextmanager
def step_aside(budget_s: float, every_op: bool = False) -> Iterator[Aside]:
    """Inside the block, this thread waits while a visitor's computation runs, at every tensor autograd saves or
    reads back (and before every torch operation with every_op), for at most budget_s in all (0: never waits, no
    hook is installed). Yields the Aside, whose `waited` says how long the block stood aside."""
    aside = Aside(budget_s)
    if budget_s <= 0:
        yield aside
        return

    def saved(tensor: torch.Tensor) -> torch.Tensor:
        aside()
        return tensor

    with _OperationMode(aside) if every_op else nullcontext(), torch.autograd.graph.saved_tensors_hooks(saved, saved):
        yield aside
