"""What a page tells a person about the work they asked for: bad input as a message that says what to fix
(show_error, safe), a long computation's progress (wait_for), and its results to take away (download).

Errors and downloads sit together because both are the page's answer to a request; neither draws a control that
holds state (widgets.py) nor a figure (figures.py)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st

from viz_core.errors import InputError, report_unexpected
from viz_core.runtime.cancel import Cancelled, requested as cancel_requested
from viz_core.runtime.flights import Flight

from . import state
from .language import t
from .markdown import plain_md


def show_error(exc: Exception) -> None:
    """A translated, friendly message for bad input. Anything else (or an InputError without a translation) shows
    a generic translated message with a short error id; the traceback goes to the server's log under that id.
    Never str(exc): it can hold server paths and library messages. The error's values (a typed word, a file
    name) are shown as typed, never as markdown (a "__class__" stays "__class__", not a bold "class")."""
    if isinstance(exc, InputError):
        try:
            params = {k: plain_md(v) if isinstance(v, str) else v for k, v in exc.params.items()}
            st.error(t(exc.code, **params))
            return
        except (KeyError, IndexError, ValueError):  # no such key, or its placeholders do not match the params
            pass
    st.error(t("common.unexpected_error", error_id=report_unexpected(exc, state.page())))


def safe(fn, *args, **kw):
    """(fn(*args, **kw), None), or (None, error) for bad input (InputError): the page shows the error with
    show_error and keeps working."""
    try:
        return fn(*args, **kw), None
    except InputError as exc:
        # a page may keep the error in its state: without these links it would keep every frame it was raised
        # through, and their locals (an upload's bytes) with them
        exc.__traceback__ = exc.__context__ = exc.__cause__ = None
        return None, exc


WAIT_REFRESH_S = 0.25  # how often a progress bar is redrawn while a flight runs
WAIT_RETRIES = 3  # a flight started for a visitor who has since left is started again for this one


def wait_for(flight: Callable[[], Flight], label: Callable[[int, int], str]) -> Any:
    """The result of a computation that runs as a flight (viz_core.runtime.flights), with a progress bar while it runs:
    label(percent done, seconds so far). A click meanwhile stops only this wait (the rerun finds the same flight and
    waits on). Raises the computation's error (InputError for bad input); a flight cancelled because the visitor it
    was started for left is started again.

    Before the bar is first drawn, the address is written with what the visitor asked for (state.sync_address; the
    end of the run would write the same): a reload or a shared link during a long wait comes back to their input,
    not to the page before it. A short computation writes nothing early."""
    for attempt in range(WAIT_RETRIES):
        running = flight()
        if not running.wait(WAIT_REFRESH_S):  # a short computation never shows a bar
            state.sync_address()
            bar = st.empty()
            while not running.wait(WAIT_REFRESH_S):
                bar.progress(running.progress, text=label(round(100 * running.progress), round(running.elapsed_s)))
            bar.empty()
        try:
            return running.value()
        except Cancelled:
            if cancel_requested() or attempt == WAIT_RETRIES - 1:
                raise


def download(label: str, data: bytes | str | Callable[[], bytes | str], file_name: str, mime: str,
             key: str | None = None) -> None:
    """A download button that leaves the page as it is. `data` may be a function that writes the file: it is then
    called when the button is clicked (in a thread of its own), not on every run."""
    st.download_button(label, data=data, file_name=file_name, mime=mime, key=key, on_click="ignore")
