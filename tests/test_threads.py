"""viz_core.runtime.threads.thread_budget limits the calling thread only: not a thread running beside it, not a thread
created while it holds the budget (torch.set_num_threads would leak to both)."""
from __future__ import annotations

import threading

import pytest
import torch

from viz_core.runtime import threads
from viz_core.runtime.threads import thread_budget

pytestmark = pytest.mark.skipif(threads._openmp() is None, reason="torch here does not use a bundled libgomp")


@pytest.fixture
def three_threads():
    """A process-wide default of 3 threads, so that a budget of 1 is visible whatever the machine's core count."""
    before = torch.get_num_threads()
    torch.set_num_threads(3)
    yield 3
    torch.set_num_threads(before)


def _in_thread(fn):
    out = {}
    th = threading.Thread(target=lambda: out.setdefault("value", fn()))
    th.start()
    th.join(timeout=60)
    return out["value"]


def test_only_the_calling_thread_is_limited(three_threads):
    seen = {}
    other_started, budget_held, measured, release = (threading.Event() for _ in range(4))

    def other():  # already running when the budget is taken, and still running while it is held
        torch.get_num_threads()
        other_started.set()
        budget_held.wait(30)
        seen["other"] = torch.get_num_threads()
        measured.set()
        release.wait(30)

    def worker():
        with thread_budget(1):
            seen["inside"] = torch.get_num_threads()
            a = torch.randn(200, 200)
            seen["matmul_ok"] = bool(torch.allclose(a @ a, (a.double() @ a.double()).float(), atol=1e-3))
            budget_held.set()
            measured.wait(30)
            seen["new"] = _in_thread(torch.get_num_threads)  # a thread created while the budget is held
        seen["after"] = torch.get_num_threads()
        release.set()

    o = threading.Thread(target=other)
    o.start()
    other_started.wait(30)
    w = threading.Thread(target=worker)
    w.start()
    w.join(60)
    o.join(60)
    assert seen == {"inside": 1, "matmul_ok": True, "other": three_threads, "new": three_threads,
                    "after": three_threads}
    assert torch.get_num_threads() == three_threads  # the main thread never changed


def test_set_num_threads_would_leak(three_threads):
    """Why the helper exists: torch.set_num_threads in a worker changes threads created after it."""
    def worker():
        torch.set_num_threads(1)
        try:
            return _in_thread(torch.get_num_threads)
        finally:
            torch.set_num_threads(three_threads)
    assert _in_thread(worker) == 1


def test_budget_restores_and_never_raises_the_count(three_threads):
    with thread_budget(2):
        assert torch.get_num_threads() == 2
        with thread_budget(8):  # a budget is a ceiling: it never adds threads
            assert torch.get_num_threads() == 2
        assert torch.get_num_threads() == 2
    assert torch.get_num_threads() == three_threads
    with thread_budget(None):
        assert torch.get_num_threads() == three_threads


def test_decorator_form(three_threads):
    @thread_budget(1)
    def inside():
        return torch.get_num_threads()
    assert (inside(), inside(), torch.get_num_threads()) == (1, 1, three_threads)


def test_restored_after_an_exception(three_threads):
    with pytest.raises(RuntimeError):
        with thread_budget(1):
            raise RuntimeError("boom")
    assert torch.get_num_threads() == three_threads


def test_missing_library_is_a_logged_no_op(monkeypatch, caplog, three_threads):
    threads._openmp.cache_clear()
    monkeypatch.setattr(threads.Path, "glob", lambda self, pattern: iter(()))
    try:
        with caplog.at_level("INFO", logger="viz_core.runtime.threads"):
            with thread_budget(1):
                assert torch.get_num_threads() == three_threads
        assert "no-op" in caplog.text
    finally:
        monkeypatch.undo()
        threads._openmp.cache_clear()


def test_model_computations_share_the_cores(three_threads, monkeypatch):
    """app_pages/_ui/models.heavy: a computation alone takes the server's cores; one that starts while another runs
    takes its share (two passes with two threads each would put four threads on two cores)."""
    from app_pages._ui import models
    monkeypatch.setattr(models, "_CORES", 2)
    seen, first_in, second_done = {}, threading.Event(), threading.Event()

    def first():
        with models.heavy():
            seen["first"] = torch.get_num_threads()
            first_in.set()
            second_done.wait(30)

    def second():
        first_in.wait(30)
        with models.heavy():
            seen["second"] = torch.get_num_threads()
        second_done.set()

    runners = [threading.Thread(target=f) for f in (first, second)]
    for r in runners:
        r.start()
    for r in runners:
        r.join(60)
    assert seen == {"first": 2, "second": 1}
    with models.heavy():
        assert torch.get_num_threads() == 2  # alone again


def test_a_model_computation_holds_background_work_back():
    """app_pages/_ui/models.heavy marks a visitor's computation as foreground work (viz_core.runtime.priority), and only
    while it runs."""
    from app_pages._ui import models
    from viz_core.runtime import priority
    assert not priority.busy()
    with models.heavy():
        assert priority.busy()
    assert not priority.busy()


def test_long_computations_leave_one_place_to_short_ones(monkeypatch):
    """app_pages/_ui/models.heavy(long=True): with two places, a long run holds one and a second long run waits for
    it, while a short pass still gets the other place at once."""
    from app_pages._ui import models
    from viz_core.runtime import priority
    monkeypatch.setattr(models, "_gate", priority.FairGate(2, poll=0.01))
    monkeypatch.setattr(models, "_long_gate", priority.FairGate(1, poll=0.01))
    first_in, release, seen = threading.Event(), threading.Event(), []

    def long_run(name: str):
        with models.heavy(long=True):
            seen.append(name)
            first_in.set()
            release.wait(10)

    runners = [threading.Thread(target=long_run, args=("long 1",))]
    runners[0].start()
    first_in.wait(10)
    runners.append(threading.Thread(target=long_run, args=("long 2",)))
    runners[1].start()
    while models._long_gate.waiting == 0:
        threading.Event().wait(0.005)
    with models.heavy():          # a short pass: the second place is free
        seen.append("short")
    release.set()
    for r in runners:
        r.join(10)
    assert seen == ["long 1", "short", "long 2"]
