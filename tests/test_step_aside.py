"""Visitors first within a step (viz_core.runtime.step_aside): a training step already under way when a visitor's
computation starts waits for it at its next saved tensor (forward and backward) or, in an evaluation, at its next
torch operation; its time budget does not count the wait; the hooks are the training thread's own."""
from __future__ import annotations

import threading
import time

import pytest
import torch

from viz_core.runtime import priority
from viz_core.runtime.step_aside import step_aside
from viz_core.runtime.training_loop import Hooks, LoopConfig, training_loop

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # small models: one torch thread

HOLD_S = 0.4  # how long the visitor's computation runs once the step is under way


class HalfwayTrainer:
    """One training step (or evaluation) of a small network that stops halfway, says so (`halfway`) and goes on once
    `go` is set; `order` records when the step and the visitor ended."""

    def __init__(self):
        self.step, self.seconds, self.reason = 0, 0.0, None
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
        self.x = torch.randn(4, 8)
        self.halfway, self.go = threading.Event(), threading.Event()
        self.order: list[str] = []

    def _pause(self) -> None:
        self.halfway.set()
        assert self.go.wait(5)

    def train_step(self) -> float:
        t0 = time.perf_counter()
        self.step += 1
        h = self.net[0](self.x)                                # (4, 16)
        self._pause()                                          # the visitor's computation starts here
        loss = self.net[2](self.net[1](h)).pow(2).mean()       # saves tensors: stands aside
        loss.backward()
        self.order.append("step")
        self.seconds += time.perf_counter() - t0
        return loss.item()

    def evaluate(self) -> None:
        with torch.no_grad():
            h = self.net[0](self.x)
            self._pause()
            self.net[2](self.net[1](h))                        # no saved tensors: stands aside at each operation
        self.order.append("evaluation")

    def hooks(self, evaluate: bool) -> Hooks:
        return Hooks(train_step=self._plain_step if evaluate else self.train_step,
                     evaluate=self.evaluate if evaluate else lambda: None, snapshot=lambda: None,
                     record=lambda evaluated: self.step, stop_requested=lambda: False)

    def _plain_step(self) -> float:
        self.step += 1
        return 1.0

    def run(self, evaluate: bool = False) -> threading.Thread:
        loop = LoopConfig(max_steps=1, max_seconds=1e9, eval_every=1 if evaluate else 50, on_cpu=True, threads=1)
        th = threading.Thread(target=lambda: list(training_loop(self, self.hooks(evaluate), loop)))
        th.start()
        return th


def _visitor_while(trainer: HalfwayTrainer, hold_s: float = HOLD_S) -> None:
    """Once the trainer is halfway, compute in the foreground for hold_s, then record the end."""
    assert trainer.halfway.wait(5)
    with priority.foreground():
        trainer.go.set()
        time.sleep(hold_s)  # the visitor's computation (the window in which the step must not end)
        trainer.order.append("visitor")


def test_a_step_under_way_waits_for_a_visitors_computation_at_its_next_saved_tensor():
    trainer = HalfwayTrainer()
    th = trainer.run()
    _visitor_while(trainer)
    th.join(10)
    assert trainer.order == ["visitor", "step"] and trainer.step == 1 and trainer.reason == "steps"
    assert trainer.seconds < HOLD_S / 2  # the time it stood aside is not training time (nor a budget's)


def test_an_evaluation_under_way_waits_at_its_next_operation():
    trainer = HalfwayTrainer()
    th = trainer.run(evaluate=True)
    _visitor_while(trainer)
    th.join(10)
    assert trainer.order == ["visitor", "evaluation"]


def test_a_step_stands_aside_for_at_most_its_budget(monkeypatch):
    monkeypatch.setattr(priority, "MAX_WAIT_S", 0.1)
    trainer = HalfwayTrainer()
    th = trainer.run()
    _visitor_while(trainer, hold_s=1.5)  # a visitor's computation longer than the budget
    th.join(10)
    assert trainer.order == ["step", "visitor"]


def test_the_hooks_belong_to_the_training_thread(monkeypatch):
    """A visitor's own pass (with gradients: integrated gradients) while a training thread is inside step_aside
    never waits: it would wait for itself."""
    waiters = []
    wait = priority.wait_for_foreground
    monkeypatch.setattr(priority, "wait_for_foreground",
                        lambda *a, **k: waiters.append(threading.get_ident()) or wait(*a, **k))
    inside, leave = threading.Event(), threading.Event()

    def training():
        with step_aside(5.0):
            inside.set()
            leave.wait(5)

    th = threading.Thread(target=training)
    th.start()
    assert inside.wait(5)
    x = torch.randn(3, 4, requires_grad=True)
    with priority.foreground():
        (x.tanh() * x).sum().backward()   # saves tensors, reads them back
        with torch.no_grad():
            x.tanh().sum()
    leave.set()
    th.join(5)
    assert x.grad is not None and threading.get_ident() not in waiters


def test_a_budget_of_zero_installs_nothing():
    x = torch.randn(3, requires_grad=True)
    with priority.foreground(), step_aside(0.0) as aside:
        (x * x).sum().backward()
    assert aside.waited == 0.0 and torch.equal(x.grad, 2 * x.detach())
