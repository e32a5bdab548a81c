"""Work for a visitor who left stops (viz_core/runtime/cancel.py, app_pages/_ui/leaving.py): a marked thread's computation
ends at its next check point with Cancelled (torch modules, numpy layers, a pool worker computing for it), other
threads never notice, and the watcher abandons a session's run only after it has had no connection for the grace."""
from __future__ import annotations

import threading

import pytest

from app_pages._ui import leaving
from viz_core.runtime import cancel
from viz_core.runtime.cancel import Cancelled


def in_thread(fn, marked: bool):
    """fn() in a new thread, marked first or not: ("ok", value) or ("cancelled", None)."""
    out = {}

    def run():
        if marked:
            cancel.request(threading.get_ident())
        try:
            out["r"] = ("ok", fn())
        except Cancelled:
            out["r"] = ("cancelled", None)
        finally:
            cancel.clear()
    t = threading.Thread(target=run)
    t.start()
    t.join(120)
    return out["r"]


def test_only_the_marked_thread_is_stopped():
    assert in_thread(lambda: cancel.check() or 1, marked=False) == ("ok", 1)
    assert in_thread(lambda: cancel.check() or 1, marked=True) == ("cancelled", None)
    cancel.check()  # this thread was never marked


def test_a_pool_worker_stops_for_the_thread_it_computes_for():
    owner = []

    def work():
        owner.append(threading.get_ident())
        result = {}
        worker = threading.Thread(target=lambda: result.setdefault("r", _acting(owner[0])))
        worker.start()
        worker.join()
        return result["r"]
    assert in_thread(work, marked=True) == ("ok", "cancelled")
    assert in_thread(work, marked=False) == ("ok", "ran")


def _acting(owner: int) -> str:
    with cancel.acting_for(owner):
        try:
            cancel.check()
            return "ran"
        except Cancelled:
            return "cancelled"


def test_a_torch_model_pass_stops_between_modules_in_a_marked_thread_only():
    import torch
    cancel.watch_torch()
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    x = torch.ones(1, 4)
    kind, y = in_thread(lambda: model(x), marked=False)
    assert kind == "ok" and torch.equal(y, model(x))
    assert in_thread(lambda: model(x), marked=True) == ("cancelled", None)


def test_the_numpy_model_stops_between_layers_in_a_marked_thread_only():
    from viz_core.pretrained.bert_numpy import load_default
    bert = load_default()
    kind, result = in_thread(lambda: bert.attention("The cat sat on the mat."), marked=False)
    assert kind == "ok" and result.weights.shape[0] == bert.n_layers
    assert in_thread(lambda: bert.attention("The cat sat on the mat."), marked=True) == ("cancelled", None)
    from viz_core.pretrained.bert_numpy import NumpyAblation
    assert in_thread(lambda: NumpyAblation(bert).head_importance("The cat sat on the mat."),
                     marked=True) == ("cancelled", None)


def test_a_run_is_abandoned_only_after_its_session_has_been_gone_for_the_grace(monkeypatch):
    stopped, resumed = [], []
    active = {"s": True}
    me = threading.get_ident()
    with leaving.running("s"):
        look = lambda now: leaving.abandon_gone(now, is_active=lambda sid: active[sid], stop=stopped.append,  # noqa: E731
                                                resume=resumed.append)
        assert look(100.0) == [] and not cancel.requested()
        active["s"] = False
        assert look(100.5) == [] and not cancel.requested()          # gone for 0 s: a network blip may come back
        active["s"] = True
        assert look(101.0) == []                                      # it came back: the clock starts again
        active["s"] = False
        assert look(101.5) == []
        assert look(101.5 + leaving.GRACE_S) == ["s"] and stopped == ["s"]
        assert cancel.requested() and pytest.raises(Cancelled, cancel.check)
    assert not cancel.requested() and me not in leaving._runs.values()  # the run's end clears the mark
    assert look(110.0) == [] and resumed == []       # still gone: nothing to rerun for
    active["s"] = True
    assert look(110.5) == [] and resumed == ["s"]    # its browser is back: the abandoned run is run again
    assert look(111.0) == [] and resumed == ["s"]    # once


def test_a_run_without_a_session_is_not_watched():
    with leaving.running(None):
        assert threading.get_ident() not in leaving._runs.values()
