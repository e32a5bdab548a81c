"""Work for a visitor who left stops (viz_core/runtime/cancel.py, app_pages/_ui/leaving.py): a marked thread's computation
ends at its next check point with Cancelled (torch modules, numpy layers, a pool worker computing for it), other
threads never notice, and the watcher abandons a session's run only after it has had no connection for the grace."""
from __future__ import annotations

import threading

import pytest

from app_pages._ui import leaving
from viz_core.runtime import cancel
from viz_core.runtime.cancel import Cancelled


@pytest.fixture(autouse=True)
def fresh_watcher():
    """Each test starts with a watcher that has seen no session (its state is the server process's)."""
    def reset():
        with leaving._lock:
            for sid in leaving._served | leaving._abandoned:
                cancel.clear(sid)
            leaving._served.clear(), leaving._abandoned.clear(), leaving._runs.clear(), leaving._gone_since.clear()
    reset()
    yield
    reset()


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
    active, alive = {"s": True}, {"s": True}
    me = threading.get_ident()
    look = lambda now: leaving.abandon_gone(now, is_active=lambda sid: active[sid], stop=stopped.append,  # noqa: E731
                                            resume=resumed.append, exists=lambda sid: alive[sid])
    with leaving.running("s"):
        assert cancel.owner() == "s"                                  # the run acts for its session
        assert look(100.0) == [] and not cancel.requested()
        active["s"] = False
        assert look(100.5) == [] and not cancel.requested()          # gone for 0 s: a network blip may come back
        active["s"] = True
        assert look(101.0) == []                                      # it came back: the clock starts again
        active["s"] = False
        assert look(101.5) == []
        assert look(101.5 + leaving.GRACE_S) == ["s"] and stopped == ["s"]
        assert cancel.requested() and pytest.raises(Cancelled, cancel.check)
    assert cancel.owner() == me and me not in leaving._runs.values()
    assert cancel.requested("s")  # the mark outlives the run: work it handed to other threads stops all the same
    assert look(110.0) == [] and resumed == []       # still gone: nothing to rerun for
    active["s"] = True
    assert look(110.5) == [] and resumed == ["s"]    # its browser is back: the abandoned run is run again
    assert look(111.0) == [] and resumed == ["s"]    # once
    with leaving.running("s"):                       # ... and that run is not cancelled
        assert not cancel.requested()
        cancel.check()


def test_a_session_that_streamlit_has_ended_is_forgotten_with_its_mark():
    alive = {"t": True}
    look = lambda now: leaving.abandon_gone(now, is_active=lambda sid: False, stop=lambda sid: None,  # noqa: E731
                                            resume=lambda sid: None, exists=lambda sid: alive[sid])
    with leaving.running("t"):
        look(200.0)
        assert look(200.0 + leaving.GRACE_S) == ["t"]
    assert look(205.0) == [] and cancel.requested("t") and "t" in leaving._abandoned   # it may still come back
    alive["t"] = False
    with cancel.acting_for("t"):  # a flight of its last run has not reached its next check point yet
        assert look(300.0) == [] and cancel.requested("t") and "t" in leaving._abandoned
    assert look(300.5) == [] and not cancel.requested("t") and "t" not in leaving._abandoned


def test_a_flight_stops_when_its_visitor_leaves_after_the_run_that_started_it_has_ended():
    """The run waiting on a flight ends at its next Streamlit call once stopped; the flight may reach its next check
    point only later, and must stop all the same."""
    from viz_core.runtime.flights import Flights
    started, go_on = threading.Event(), threading.Event()

    def work(progress):
        started.set()
        go_on.wait(10)
        cancel.check()  # the next layer
        return "computed for nobody"
    look = lambda now: leaving.abandon_gone(now, is_active=lambda sid: False, stop=lambda sid: None,  # noqa: E731
                                            resume=lambda sid: None, exists=lambda sid: True)
    with leaving.running("u"):
        flight = Flights().get("key", work)
        assert started.wait(10)
        look(300.0)
        assert look(300.0 + leaving.GRACE_S) == ["u"]
    go_on.set()  # the run has ended before the flight's next check
    assert flight.wait(10) and flight.failed
    with pytest.raises(Cancelled):
        flight.value()
    with leaving.running("u"):  # the visitor came back: its session's next run clears the mark
        assert not cancel.requested()
    leaving._abandoned.discard("u")


def test_a_run_without_a_session_is_not_watched():
    with leaving.running(None):
        assert threading.get_ident() not in leaving._runs.values()


def _flight_for(sid: str):
    """A flight started by a run of `sid` that has ended since (Streamlit stops a session's script as soon as its
    connection drops): (the flight, the event that lets it reach its next check point)."""
    from viz_core.runtime.flights import Flights
    started, go_on = threading.Event(), threading.Event()

    def work(progress):
        started.set()
        while not go_on.wait(0.01):
            cancel.check()  # the next layer
        return "computed"
    with leaving.running(sid):
        flight = Flights().get("key", work)
    assert started.wait(10)
    return flight, go_on


def test_a_flight_whose_visitor_left_is_stopped_after_the_grace_though_no_run_is_left():
    active, stopped, resumed = {"v": True}, [], []
    look = lambda now: leaving.abandon_gone(now, is_active=lambda sid: active[sid], stop=stopped.append,  # noqa: E731
                                            resume=resumed.append, exists=lambda sid: True)
    flight, go_on = _flight_for("v")
    try:
        assert look(400.0) == [] and not flight.done            # its visitor is here: it computes on
        active["v"] = False                                     # the tab closes; Streamlit ends the run at once
        assert look(400.5) == [] and not flight.done            # a network blip may come back
        assert look(400.5 + leaving.GRACE_S) == ["v"] and stopped == []  # no script to stop, the flight is marked
        assert flight.wait(10) and pytest.raises(Cancelled, flight.value)
        assert look(410.0) == [] and resumed == []
        active["v"] = True
        assert look(410.5) == [] and resumed == ["v"]            # its browser is back: the page runs again
    finally:
        go_on.set()


def test_a_flight_of_a_session_that_streamlit_has_ended_stops_at_once_and_the_session_is_forgotten():
    alive = {"w": True}
    look = lambda now: leaving.abandon_gone(now, is_active=lambda sid: False, stop=lambda sid: None,  # noqa: E731
                                            resume=lambda sid: None, exists=lambda sid: alive[sid])
    flight, go_on = _flight_for("w")
    try:
        alive["w"] = False                                      # ended within the grace (a short TTL)
        assert look(500.0) == ["w"]
        assert flight.wait(10) and flight.failed
        assert look(500.5) == [] and "w" not in leaving._served and not cancel.requested("w")
    finally:
        go_on.set()


def test_a_flight_of_a_connected_visitor_is_never_stopped():
    look = lambda now: leaving.abandon_gone(now, is_active=lambda sid: True, stop=lambda sid: None,  # noqa: E731
                                            resume=lambda sid: None, exists=lambda sid: True)
    flight, go_on = _flight_for("x")
    assert [look(600.0 + i) for i in range(5)] == [[]] * 5 and not flight.done
    go_on.set()
    assert flight.wait(10) and flight.value() == "computed"


def test_a_flight_another_visitor_waits_for_goes_on_until_both_have_left():
    """A reload (a new session) or a classmate with the same input finds the flight running and waits on it: the
    first visitor leaving does not stop it; the last one does."""
    from viz_core.runtime.flights import Flights
    flights, started, go_on = Flights(), threading.Event(), threading.Event()

    def work(progress):
        started.set()
        while not go_on.wait(0.01):
            cancel.check()
        return "computed"
    active = {"a": True, "b": True}
    look = lambda now: leaving.abandon_gone(now, is_active=lambda sid: active[sid], stop=lambda sid: None,  # noqa: E731
                                            resume=lambda sid: None, exists=lambda sid: True)
    try:
        with leaving.running("a"):
            flight = flights.get("key", work)
        assert started.wait(10)
        with leaving.running("b"):
            assert flights.lookup("key") is flight and cancel.acting("b")
        active["a"] = False
        look(700.0)
        assert look(700.0 + leaving.GRACE_S) == ["a"] and cancel.requested("a")
        assert not flight.wait(0.2)                   # b still waits for it
        active["b"] = False
        look(702.0)
        assert look(702.0 + leaving.GRACE_S) == ["b"]
        assert flight.wait(10) and pytest.raises(Cancelled, flight.value)
    finally:
        go_on.set()


def test_a_shared_owner_counts_as_marked_once_all_its_visitors_are():
    shared = cancel.Shared("p")
    shared.add("q")
    cancel.request("p")
    assert not cancel.requested(shared) and cancel.acting("q") is False
    with cancel.acting_for(shared):
        assert cancel.acting("p") and cancel.acting("q") and not cancel.acting("r")
        cancel.check()
        cancel.request("q")
        with pytest.raises(Cancelled):
            cancel.check()
    cancel.clear("p"), cancel.clear("q")
