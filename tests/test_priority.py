"""Visitors first (viz_core.runtime.priority): a training step waits while a visitor's computation runs, within a bound."""
from __future__ import annotations

import threading
import time

import pytest

from viz_core.runtime import priority
from viz_core.lm.training import LMTrainConfig, LMTrainer
from viz_core.seq2seq.tasks import make_task
from viz_core.seq2seq.training import TrainConfig, Trainer
from viz_core.runtime.settings import env_float

from .seq2seq.test_training import TINY


def test_nothing_running_means_no_wait():
    assert not priority.busy() and priority.wait_for_foreground(5.0) == 0.0


def _visitor() -> tuple[threading.Thread, threading.Event, threading.Event]:
    """(thread, inside, leave): a thread that, once started, computes in the foreground (inside is set) until leave
    is set (or 5 s)."""
    inside, leave = threading.Event(), threading.Event()

    def visitor():
        with priority.foreground():
            inside.set()
            leave.wait(5)

    return threading.Thread(target=visitor), inside, leave


def test_a_step_waits_until_the_visitors_computation_ends():
    th, inside, leave = _visitor()
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


def test_a_visitors_computation_shortens_the_gil_switch_interval_and_the_last_one_out_restores_it(monkeypatch):
    import sys
    monkeypatch.setattr(priority, "FOREGROUND_SWITCH_S", 0.001)
    before = sys.getswitchinterval()
    try:
        sys.setswitchinterval(0.004)  # whatever the server had is what comes back
        th, inside, leave = _visitor()
        with priority.foreground():
            assert sys.getswitchinterval() == pytest.approx(0.001)
            th.start()
            assert inside.wait(5)
        assert sys.getswitchinterval() == pytest.approx(0.001)  # the other visitor's computation still runs
        leave.set()
        th.join(5)
        assert sys.getswitchinterval() == pytest.approx(0.004) and not priority.busy()
    finally:
        sys.setswitchinterval(before)


@pytest.mark.parametrize("setting", [0.0, 0.01])
def test_a_switch_setting_of_0_or_not_shorter_leaves_the_interval_alone(monkeypatch, setting):
    import sys
    monkeypatch.setattr(priority, "FOREGROUND_SWITCH_S", setting)
    before = sys.getswitchinterval()
    with priority.foreground():
        assert sys.getswitchinterval() == before
    assert sys.getswitchinterval() == before


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


# ---------------------------------------------------------------- FairGate
def test_a_fair_gate_serves_in_order_of_arrival_and_never_more_than_its_slots():
    import threading
    import time

    from viz_core.runtime.priority import FairGate
    gate, order, inside, most = FairGate(2, poll=0.01), [], [0], [0]
    lock, hold = threading.Lock(), threading.Event()

    def visitor(i: int):
        with gate.turn():
            with lock:
                order.append(i)
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            hold.wait(5)
            with lock:
                inside[0] -= 1

    threads = []
    for i in range(8):  # each one waits in line before the next arrives
        threads.append(threading.Thread(target=visitor, args=(i,)))
        threads[-1].start()
        deadline = time.monotonic() + 5
        while gate.waiting + inside[0] < i + 1 and time.monotonic() < deadline:
            time.sleep(0.005)
    hold.set()
    for th in threads:
        th.join(10)
    assert order == list(range(8)) and most[0] == 2


def test_a_wait_at_the_fair_gate_can_be_left_and_the_next_one_goes_on():
    import threading

    import pytest

    from viz_core.runtime.priority import FairGate
    gate, release, got = FairGate(1, poll=0.01), threading.Event(), []

    class Left(Exception):
        pass

    def holder():
        with gate.turn():
            release.wait(5)

    def leaver():
        with pytest.raises(Left):
            with gate.turn(check=lambda: (_ for _ in ()).throw(Left())):
                got.append("leaver")  # never: it leaves while waiting

    def patient():
        with gate.turn():
            got.append("patient")

    h = threading.Thread(target=holder)
    h.start()
    while gate._busy == 0:
        pass
    threads = [threading.Thread(target=leaver), threading.Thread(target=patient)]
    for th in threads:
        th.start()
    threads[0].join(5)            # the leaver was first in line and left
    release.set()
    for th in [h, threads[1]]:
        th.join(5)
    assert got == ["patient"] and gate.waiting == 0 and gate._busy == 0
