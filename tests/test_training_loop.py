"""The one training loop (viz_core.runtime.training_loop): each stop rule ends a run with its reason, the evaluation
rule, the records in order; then both real trainers (the encoder-decoder's Trainer and the LM's LMTrainer) through it:
Stop, divergence and a NaN loss end them alike."""
from __future__ import annotations

import itertools
import math

import pytest
import torch

from viz_core.lm.training import LMTrainConfig, LMTrainer
from viz_core.runtime.training_loop import (DIVERGE_WARMUP, STOP_REASONS, Hooks, LoopConfig, diverge_limit,
                                            training_loop)
from viz_core.seq2seq.tasks import make_task
from viz_core.seq2seq.training import TrainConfig, Trainer

from .seq2seq.test_training import TINY

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # small models: one torch thread


class Scripted:
    """A trainer whose losses, step times and target are scripted; it logs every call the loop makes."""

    def __init__(self, losses=itertools.repeat(1.0), step_seconds: float = 0.0, target_at: set[int] = frozenset(),
                 stop_at: int | None = None):
        self.step, self.seconds, self.reason = 0, 0.0, None
        self.losses, self.step_seconds, self.target_at, self.stop_at = iter(losses), step_seconds, target_at, stop_at
        self.calls: list[tuple[str, int]] = []

    def train_step(self) -> float:
        self.step += 1
        self.seconds += self.step_seconds
        return next(self.losses)

    def hooks(self, due=lambda: False) -> Hooks:
        return Hooks(train_step=self.train_step, evaluate=lambda: self.calls.append(("evaluate", self.step)),
                     snapshot=lambda: self.calls.append(("snapshot", self.step)),
                     record=lambda evaluated: (self.step, evaluated, self.reason),
                     stop_requested=lambda: self.stop_at is not None and self.step >= self.stop_at,
                     reached_target=lambda: self.step in self.target_at, evaluation_due=due)

    def run(self, **cfg) -> list[tuple[int, bool, str | None]]:
        loop = LoopConfig(**{"max_seconds": 1e9, "eval_every": 5, "log_every": 2, "on_cpu": False} | cfg)
        return list(training_loop(self, self.hooks(), loop))


def test_the_step_budget_stops_with_steps_after_a_last_evaluation():
    t = Scripted()
    records = t.run(max_steps=7)
    assert t.reason == "steps" and t.step == 7
    assert records == [(2, False, None), (4, False, None), (5, True, None), (6, False, None), (7, True, "steps")]
    assert t.calls == [("snapshot", 0), ("evaluate", 5), ("evaluate", 7)]


def test_the_time_budget_stops_with_time():
    t = Scripted(step_seconds=1.0)
    records = t.run(max_seconds=3.0, max_steps=100)
    assert t.reason == "time" and t.step == 3 and records[-1] == (3, True, "time")


def test_the_target_stops_at_the_evaluation_that_reaches_it_and_replaces_a_spent_budget():
    t = Scripted(target_at={10})
    assert t.run(max_steps=100)[-1] == (10, True, "target") and t.reason == "target"
    t = Scripted(target_at={7})  # the step budget ends on the evaluation that reaches the target
    assert t.run(max_steps=7)[-1] == (7, True, "target")
    t = Scripted(target_at={6})  # no evaluation at step 6: the target is never asked there
    assert t.run(max_steps=8)[-1] == (8, True, "steps")


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_loss_that_is_not_finite_stops_with_nan_without_evaluation_or_snapshot(bad):
    t = Scripted(losses=[1.0, 1.0, 1.0, bad, 1.0], stop_at=4)
    records = t.run(max_steps=100)  # NaN comes first, even with Stop pressed on the same step
    assert t.reason == "nan" and t.step == 4 and records[-1] == (4, False, "nan")
    assert t.calls == [("snapshot", 0)]


def test_a_loss_far_above_a_uniform_guess_stops_with_diverged_after_the_warmup():
    limit = diverge_limit(14)
    assert limit == pytest.approx(2 * math.log(14) + 1)
    t = Scripted(losses=itertools.repeat(limit + 1))
    records = t.run(max_steps=100, diverge_above=limit)
    assert t.reason == "diverged" and t.step == DIVERGE_WARMUP + 1 and records[-1] == (21, False, "diverged")
    assert ("evaluate", 21) not in t.calls and ("snapshot", 21) not in t.calls
    t = Scripted(losses=itertools.repeat(limit - 0.1))  # below the limit: the budget ends the run
    t.run(max_steps=40, diverge_above=limit)
    assert t.reason == "steps"


def test_one_high_loss_is_a_running_mean_away_from_divergence():
    """The rule reads the loss's running mean (0.9 old + 0.1 new): one spike of 3x the limit does not stop a run."""
    losses = [1.0] * 30 + [30.0] + [1.0] * 100
    t = Scripted(losses=losses)
    t.run(max_steps=60, diverge_above=10.0)
    assert t.reason == "steps"


def test_stop_is_answered_after_the_step_in_progress_without_an_evaluation():
    t = Scripted(stop_at=5)  # step 5 would evaluate (eval_every 5)
    records = t.run(max_steps=100)
    assert t.reason == "stopped" and t.step == 5 and records[-1] == (5, False, "stopped")
    assert t.calls == [("snapshot", 0), ("snapshot", 5)]  # the model as it is, no held-out evaluation
    t = Scripted(stop_at=7)  # Stop on the step that spends the budget: Stop wins, no last evaluation either
    t.run(max_steps=7)
    assert t.reason == "stopped" and ("evaluate", 7) not in t.calls


def test_a_trainer_may_ask_for_an_evaluation_and_for_one_before_the_first_step():
    t = Scripted()
    loop = LoopConfig(max_seconds=1e9, max_steps=6, eval_every=100, log_every=100, evaluate_first=True, on_cpu=False)
    records = list(training_loop(t, t.hooks(due=lambda: t.step == 3), loop))
    assert t.calls == [("evaluate", 0), ("evaluate", 3), ("evaluate", 6)]
    assert records == [(3, True, None), (6, True, "steps")]


def test_records_come_in_step_order_and_a_finished_run_yields_nothing_more():
    t = Scripted()
    records = t.run(max_steps=23)
    steps = [r[0] for r in records]
    assert steps == sorted(set(steps)) and steps[-1] == 23
    assert set(steps) == {s for s in range(1, 24) if s % 2 == 0 or s % 5 == 0} | {23}
    assert [r for r in records if r[2] is not None] == [records[-1]]  # only the last one has a reason
    assert t.run(max_steps=50) == [] and t.step == 23


def test_every_reason_the_loop_gives_is_a_known_one():
    assert set(STOP_REASONS) == {"target", "time", "steps", "stopped", "nan", "diverged"}


# ---------------------------------------------------------------- both real trainers through the loop
def _seq2seq(**cfg) -> Trainer:
    return Trainer(make_task("copy", min_len=3, max_len=5), TINY,
                   TrainConfig(**{"batch_size": 8, "eval_per_length": 2, "max_seconds": 1e9, "target_accuracy": None,
                                  "force_cpu": True} | cfg))


def _lm(**cfg) -> LMTrainer:
    return LMTrainer(LMTrainConfig(**{"task": "induction", "seq_len": 16, "batch_size": 8, "max_seconds": 1e9,
                                      "force_cpu": True} | cfg))


TRAINERS = {"seq2seq": _seq2seq, "lm": _lm}


def _count_evaluations(trainer) -> list[int]:
    """The steps at which the trainer evaluates (its _evaluate wrapped before run() reads it)."""
    steps, evaluate = [], trainer._evaluate

    def counted():
        steps.append(trainer.step)
        evaluate()
    trainer._evaluate = counted
    return steps


@pytest.mark.parametrize("kind", sorted(TRAINERS))
def test_stop_ends_both_trainers_at_once_without_an_evaluation(kind):
    """eval_every=1 would evaluate every step: after Stop the next step is the last, and it is not evaluated."""
    trainer = TRAINERS[kind](eval_every=1, log_every=1, max_steps=1000)
    evaluated = _count_evaluations(trainer)
    records = []
    for m in trainer.run():
        records.append(m)
        if len(records) == 3:
            trainer.request_stop()
    assert trainer.reason == "stopped" and trainer.done and trainer.step == 4
    assert [m.step for m in records] == [1, 2, 3, 4] and records[-1].done and not records[-1].evaluated
    assert evaluated[-1] == 3 and 4 not in evaluated


def _scripted_steps(trainer, loss: float) -> None:
    """Replace the trainer's training step by one that only counts and returns `loss` (the trainer's own form)."""
    def step():
        trainer.step += 1
        return (loss, 0.0) if isinstance(trainer, Trainer) else loss
    trainer._train_step = step


@pytest.mark.parametrize("kind", sorted(TRAINERS))
def test_divergence_stops_both_trainers(kind):
    trainer = TRAINERS[kind](eval_every=1000, max_steps=1000)
    _scripted_steps(trainer, 50.0)  # above 2 ln V + 1 of both vocabularies
    evaluated = _count_evaluations(trainer)
    records = list(trainer.run())
    assert trainer.reason == "diverged" and trainer.step == DIVERGE_WARMUP + 1
    assert records[-1].reason == "diverged" and not records[-1].evaluated and evaluated in ([], [0])


@pytest.mark.parametrize("kind", sorted(TRAINERS))
def test_a_nan_loss_stops_both_trainers(kind):
    trainer = TRAINERS[kind](eval_every=1000, max_steps=1000)
    with torch.no_grad():
        head = trainer.model.out.weight if isinstance(trainer, Trainer) else next(trainer.model.parameters())
        head.fill_(float("nan"))
    records = list(trainer.run())
    assert trainer.reason == "nan" and trainer.step == 1 and records[-1].reason == "nan"
