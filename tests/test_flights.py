"""viz_core.runtime.flights: a long computation in a thread of its own, found again by key, shared, its error read once."""
import threading

import pytest

from viz_core.runtime import cancel
from viz_core.errors import InputError
from viz_core.runtime.flights import Flights


def _gated(calls: list, release: threading.Event, result="done"):
    """work(progress) that reports a half, waits for release, and counts its calls."""
    def work(progress):
        calls.append(1)
        progress(0.5)
        assert release.wait(10)
        return result
    return work


def test_same_key_is_one_computation_found_again_while_it_runs():
    flights, calls, release = Flights(), [], threading.Event()
    first = flights.get("k", _gated(calls, release))
    assert not first.wait(0.05) and not first.done
    assert flights.lookup("k") is first  # a rerun of the page finds it
    assert flights.get("k", _gated(calls, release)) is first  # a second visitor shares it
    release.set()
    assert first.wait(5) and first.value() == "done" and first.progress == 1.0
    assert calls == [1] and flights.lookup("k") is first  # kept once finished


def test_progress_is_the_share_reported_and_never_goes_back():
    flights, release, seen = Flights(), threading.Event(), []

    def work(progress):
        progress(0.4)
        progress(0.2)  # an out-of-order report does not move the bar back
        assert release.wait(10)
        seen.append(flight.progress)
        progress(7)

    flight = flights.get("p", work)
    release.set()
    assert flight.wait(5) and seen == [0.4] and flight.progress == 1.0


def test_an_error_is_raised_to_the_waiter_then_forgotten():
    flights, runs = Flights(), []

    def bad(progress):
        runs.append(1)
        raise InputError("attention.no_tokens", "no tokens")

    flight = flights.get("e", bad)
    assert flight.wait(5) and flight.failed
    assert flight._error.__traceback__ is None  # the computation's frames (and their arrays) are not kept
    with pytest.raises(InputError):
        flight.value()
    assert flights.lookup("e") is None
    again = flights.get("e", bad)
    assert again is not flight and again.wait(5) and runs == [1, 1]  # asking again tries again


def test_only_the_last_finished_results_are_kept():
    flights = Flights(keep=3)
    for i in range(6):
        assert flights.get(i, lambda progress, i=i: i * i).wait(5)
    flights.get(6, lambda progress: 36).wait(5)
    assert len(flights) <= 4 and flights.lookup(0) is None and flights.lookup(6).value() == 36
    flights.clear()
    assert len(flights) == 0


def test_a_flight_stops_when_the_visitor_it_computes_for_has_left():
    """The flight's thread checks the mark of the page thread that started it (viz_core.runtime.cancel)."""
    flights, started, release = Flights(), threading.Event(), threading.Event()

    def work(progress):
        started.set()
        assert release.wait(10)
        cancel.check()
        return "for nobody"

    flight = flights.get("c", work)
    assert started.wait(5)
    cancel.request(threading.get_ident())
    try:
        release.set()
        assert flight.wait(5) and flight.failed
        with pytest.raises(cancel.Cancelled):
            flight.value()
    finally:
        cancel.clear()
