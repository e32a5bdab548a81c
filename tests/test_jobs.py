"""Background jobs (viz_core.runtime.jobs): work runs in its own thread, stops on request or when its session is gone, and
waits for a server-wide slot in arrival order. The training-job widget's runs (app_pages/_ui/training_job.py): their
trainers one after the other, and one RunResult for every way a run ends."""
import os
import threading
import time
from dataclasses import replace

import pytest

from app_pages._ui.training_job import Run, RunResult, run_result
from viz_core.runtime import jobs
from viz_core.runtime.jobs import BackgroundJob, JobSlots
from viz_core.runtime.settings import env_int


def counter(n: int, delay: float = 0.0, stop: threading.Event | None = None):
    for i in range(n):
        if stop is not None and stop.is_set():
            return
        time.sleep(delay)
        yield i


def test_a_job_consumes_its_work_in_another_thread():
    seen = []

    def work():
        for i in range(5):
            seen.append(threading.current_thread().name)
            yield i

    job = BackgroundJob(work(), name="count").start()
    assert job.join(5)
    assert job.status == "done" and job.latest == 4 and job.items == 5
    assert set(seen) == {f"count-{job.id}"} and threading.current_thread().name not in seen


def test_stop_lets_the_work_wind_down_through_on_stop():
    flag = threading.Event()
    job = BackgroundJob(counter(10_000, 0.001, flag), on_stop=flag.set).start()
    time.sleep(0.05)
    job.stop()
    assert job.join(2)
    assert job.status == "stopped" and 0 < job.items < 10_000


def test_stop_without_on_stop_cuts_the_work_and_closes_it():
    closed = threading.Event()

    def work():
        try:
            while True:
                time.sleep(0.001)
                yield 1
        finally:
            closed.set()

    job = BackgroundJob(work()).start()
    time.sleep(0.05)
    job.stop()
    assert job.join(2) and job.status == "stopped" and closed.is_set()


def test_a_session_gone_for_the_grace_period_abandons_its_job(monkeypatch):
    monkeypatch.setattr(jobs, "ALIVE_GRACE_S", 0.2)
    monkeypatch.setattr(jobs, "ALIVE_CHECK_S", 0.01)
    alive = {"open": True}
    job = BackgroundJob(counter(100_000, 0.001), alive=lambda: alive["open"]).start()
    time.sleep(0.1)
    assert job.status == "running"
    alive["open"] = False
    t0 = time.monotonic()
    assert job.join(3)
    assert job.status == "abandoned" and 0.2 <= time.monotonic() - t0 < 2


def test_a_brief_disconnect_does_not_abandon(monkeypatch):
    monkeypatch.setattr(jobs, "ALIVE_GRACE_S", 0.5)
    monkeypatch.setattr(jobs, "ALIVE_CHECK_S", 0.01)
    answers = iter([True] * 5 + [False] * 5 + [True] * 10_000)
    job = BackgroundJob(counter(300, 0.002), alive=lambda: next(answers)).start()
    assert job.join(5) and job.status == "done"


def test_an_error_is_kept_not_raised():
    def work():
        yield 1
        raise RuntimeError("boom")

    job = BackgroundJob(work()).start()
    assert job.join(2)
    assert job.status == "error" and isinstance(job.error, RuntimeError) and job.latest == 1


def test_slots_run_jobs_in_arrival_order_and_report_queue_positions():
    slots = JobSlots(1)
    gates = [threading.Event() for _ in range(3)]

    def gated(i):
        gates[i].wait(5)
        yield i

    a, b, c = (BackgroundJob(gated(i), slots=slots) for i in range(3))
    a.start()
    time.sleep(0.1)
    b.start()
    time.sleep(0.1)
    c.start()
    time.sleep(0.2)
    assert (a.status, b.status, c.status) == ("running", "queued", "queued")
    assert (a.queue_position, b.queue_position, c.queue_position) == (0, 1, 2)
    assert slots.running == 1 and slots.waiting == 2
    gates[0].set()
    assert a.join(2)
    time.sleep(0.3)
    assert (b.status, c.status) == ("running", "queued") and c.queue_position == 1
    c.stop()  # a queued job can be cancelled
    assert c.join(2) and c.status == "stopped" and c.items == 0
    gates[1].set()
    assert b.join(2) and slots.running == 0 and slots.waiting == 0


def test_a_queued_job_of_a_closed_session_leaves_the_queue(monkeypatch):
    monkeypatch.setattr(jobs, "ALIVE_GRACE_S", 0.1)
    monkeypatch.setattr(jobs, "ALIVE_CHECK_S", 0.01)
    slots = JobSlots(1)
    gate = threading.Event()
    first = BackgroundJob((gate.wait(5) for _ in range(1)), slots=slots).start()
    time.sleep(0.05)
    second = BackgroundJob(counter(3), slots=slots, alive=lambda: False).start()
    assert second.join(3) and second.status == "abandoned" and slots.waiting == 0
    gate.set()
    assert first.join(2) and first.status == "done"


@pytest.mark.parametrize("raw, expected", [("3", 3), ("0", 1), ("-2", 1), ("x", 7), ("", 7), (" 5 ", 5)])
def test_env_settings_are_read_safely(monkeypatch, raw, expected):
    monkeypatch.setenv("ATTN_TEST_INT", raw)
    assert env_int("ATTN_TEST_INT", 7) == expected


# ---------------------------------------------------------------- the training-job widget's runs and results
class FakeTrainer:
    """What a Run needs of a trainer: run() yields until reason is set; request_stop(); step, history."""

    def __init__(self, steps: int, end: str = "steps", delay: float = 0.0):
        self.steps, self.end, self.delay = steps, end, delay
        self.step, self.reason, self.history, self._stop = 0, None, [], False

    @property
    def done(self) -> bool:
        return self.reason is not None

    def request_stop(self) -> None:
        self._stop = True

    def run(self):
        while self.reason is None:
            time.sleep(self.delay)
            self.step += 1
            self.history.append({"step": self.step, "val_exact": self.step / self.steps})
            self.reason = "stopped" if self._stop else self.end if self.step >= self.steps else None
            yield self.step


def run_job(run: Run, slots: JobSlots | None = None) -> BackgroundJob:
    return BackgroundJob(run.work(), on_stop=run.stop, slots=slots, name="train").start()


def accuracy(trainer) -> float | None:
    return trainer.history[-1]["val_exact"] if trainer.history else None


def test_a_run_trains_its_trainers_one_after_the_other_and_a_comparison_keeps_their_curves():
    run = Run("reverse", [("a", FakeTrainer(3)), ("b", FakeTrainer(5, end="time"))], kind="compare:norm")
    job = run_job(run)
    assert job.join(5) and job.items == 8
    assert run.comparison == "norm" and run.active() == 1 and run.trainer is run.trainers[1][1]
    assert [(label, len(h)) for label, h in run.curves()] == [("a", 3), ("b", 5)]
    assert run_result(job, run) == RunResult("ok", "time", "reverse", 5)


def test_a_stopped_run_abandons_the_trainers_it_has_not_started():
    run = Run("reverse", [("a", FakeTrainer(10_000, delay=0.001)), ("b", FakeTrainer(3))], kind="compare:heads")
    job = run_job(run)
    time.sleep(0.05)
    job.stop()
    assert job.join(2)
    first, second = (tr for _, tr in run.trainers)
    assert first.reason == "stopped" and 0 < first.step < 10_000
    assert second.reason == "stopped" and second.step == 0
    assert run_result(job, run) == RunResult("ok", "stopped", "reverse", 0)


@pytest.mark.parametrize("steps, end, expected", [
    (4, "target", RunResult("ok", "target", "sort", 4, 1.0)),
    (2, "nan", RunResult("error", "nan", "sort", 2, 1.0)),
    (3, "diverged", RunResult("error", "diverged", "sort", 3, 1.0)),
])
def test_a_plain_runs_result_says_why_it_ended(steps, end, expected):
    run = Run("sort", [("run", FakeTrainer(steps, end=end))])
    job = run_job(run)
    assert job.join(5) and run.comparison is None
    assert run_result(job, run, accuracy) == expected
    assert run_result(job, run) == replace(expected, accuracy=None)  # a page that measures no accuracy


def test_a_plain_runs_result_carries_the_pages_details_of_how_it_ended():
    """The Train page passes Trainer.outcome (worst length, hits, ...); a comparison and a run that never started
    carry none, and a page that asks for none (the Language-model page) gets None."""
    def details(trainer):
        return {"hits": trainer.step, "last": trainer.history[-1]["val_exact"]}

    run = Run("sort", [("run", FakeTrainer(4, end="time"))])
    job = run_job(run)
    assert job.join(5)
    assert run_result(job, run, accuracy, details) == RunResult("ok", "time", "sort", 4, 1.0,
                                                                details={"hits": 4, "last": 1.0})
    assert run_result(job, run).details is None
    run = Run("sort", [("a", FakeTrainer(2)), ("b", FakeTrainer(2))], kind="compare:heads")
    job = run_job(run)
    assert job.join(5) and run_result(job, run, accuracy, details).details is None


@pytest.mark.parametrize("kind", ["train", "compare:scale"])
def test_a_run_stopped_while_it_waits_in_line_is_unstarted(kind):
    slots = JobSlots(1)
    assert slots.acquire(-1, lambda: False)  # the only slot is busy elsewhere
    try:
        run = Run("copy", [("run", FakeTrainer(3))], kind=kind)
        job = run_job(run, slots)
        time.sleep(0.1)
        assert job.status == "queued" and job.queue_position == 1
        job.stop()
        assert job.join(2) and job.status == "stopped"
        assert run_result(job, run, accuracy) == RunResult("ok", "unstarted", "copy", 0)
    finally:
        slots.release(-1)


def test_an_unexpected_error_is_a_failed_result_with_an_error_id():
    class Broken(FakeTrainer):
        def run(self):
            yield from super().run()
            raise RuntimeError("boom")

    run = Run("date", [("run", Broken(2))])
    job = run_job(run)
    assert job.join(2) and job.status == "error"
    result = run_result(job, run, accuracy)
    assert (result.status, result.reason, result.task, result.step, result.accuracy) == ("failed", "error", "date", 2,
                                                                                         None)
    assert result.error_ref and len(result.error_ref) == 8


@pytest.mark.skipif(not hasattr(os, "setpriority"), reason="thread priorities are Linux's")
def test_a_job_runs_below_the_visitors_priority():
    """A job's thread (and what it starts) has niceness JOB_NICE, the thread that started it keeps its own."""
    import torch
    seen, mine = {}, os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    def work():
        tid = threading.get_native_id()
        seen["job"] = os.getpriority(os.PRIO_PROCESS, tid)
        torch.ones(64, 64) @ torch.ones(64, 64)  # an op on this thread's OpenMP team
        yield 0

    job = BackgroundJob(work()).start()
    assert job.join(10) and job.status == "done"
    assert seen["job"] == max(mine, jobs.JOB_NICE) and jobs.JOB_NICE > 0
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == mine
