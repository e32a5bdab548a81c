"""Visitors first (viz_core.priority): a training step waits while a visitor's computation runs, within a bound."""
from __future__ import annotations

import threading
import time

import pytest

from viz_core import priority
from viz_core.lm.training import LMTrainConfig, LMTrainer
from viz_core.seq2seq.tasks import make_task
from viz_core.seq2seq.training import TrainConfig, Trainer
from viz_core.settings import env_float

from .seq2seq.test_training import TINY


def test_nothing_running_means_no_wait():
    assert not priority.busy() and priority.wait_for_foreground(5.0) == 0.0


def test_a_step_waits_until_the_visitors_computation_ends():
    inside, leave = threading.Event(), threading.Event()

    def visitor():
        with priority.foreground():
            inside.set()
            leave.wait(5)

    th = threading.Thread(target=visitor)
    th.start()
    assert inside.wait(5) and priority.busy()
    threading.Timer(0.2, leave.set).start()
    waited = priority.wait_for_foreground(5.0)
    th.join(5)
    assert 0.15 <= waited < 4.0 and not priority.busy()


def test_a_step_never_waits_longer_than_the_bound():
    with priority.foreground(), priority.foreground():  # nested and concurrent computations count up and down
        t0 = time.monotonic()
        waited = priority.wait_for_foreground(0.1)
        assert 0.09 <= waited and time.monotonic() - t0 < 2.0
        assert priority.wait_for_foreground(0.0) == 0.0  # a bound of 0: never waits
    assert not priority.busy()


def _counting(monkeypatch) -> list:
    calls = []
    monkeypatch.setattr(priority, "wait_for_foreground", lambda *a, **k: calls.append(1) or 0.0)
    return calls


def test_both_trainers_give_way_before_every_step_on_the_cpu(monkeypatch):
    calls = _counting(monkeypatch)
    trainer = Trainer(make_task("copy", min_len=3, max_len=5), TINY,
                      TrainConfig(batch_size=8, max_steps=5, max_seconds=60, target_accuracy=None, eval_every=5,
                                  eval_per_length=2, force_cpu=True))
    list(trainer.run())
    assert trainer.step == 5 and len(calls) == 5
    calls.clear()
    lm = LMTrainer(LMTrainConfig(task="induction", max_steps=4, max_seconds=1e9, eval_every=4, force_cpu=True,
                                 seq_len=16))
    list(lm.run())
    assert lm.step == 4 and len(calls) == 4


@pytest.mark.parametrize("raw, expected", [("1.5", 1.5), ("0", 0.0), ("-2", 0.0), ("x", 0.7), ("", 0.7),
                                           ("nan", 0.7)])
def test_env_float_reads_safely(monkeypatch, raw, expected):
    monkeypatch.setenv("ATTN_TEST_FLOAT", raw)
    assert env_float("ATTN_TEST_FLOAT", 0.7) == expected
