"""The warm-up (app_pages/_ui/warmup.py) pays Streamlit's once-per-process shell check, so that no visitor's run does:
the check walks the stack of the first script run with inspect.stack() (0.27 s of a cold start's first run)."""
from __future__ import annotations

from streamlit import delta_generator, env_util
from streamlit.testing.v1 import AppTest

from app_pages._ui import warmup


def _count_shell_checks(monkeypatch) -> list[int]:
    calls: list[int] = []
    monkeypatch.setattr(delta_generator, "_use_warning_has_been_displayed", False)  # as in a fresh process
    monkeypatch.setattr(env_util, "is_repl", lambda: calls.append(1) or False)
    return calls


def _script() -> None:
    import streamlit as st
    st.write("a first element")


def test_a_script_run_makes_the_shell_check_when_nobody_made_it(monkeypatch):
    calls = _count_shell_checks(monkeypatch)
    at = AppTest.from_function(_script, default_timeout=30).run()
    assert not at.exception and at.markdown[0].value == "a first element"
    assert calls == [1]  # what the warm-up takes off a visitor's run: if Streamlit stops checking, this fails


def test_after_the_warm_up_no_script_run_makes_it(monkeypatch):
    calls = _count_shell_checks(monkeypatch)
    warmup._shell_check()
    assert calls == [1] and delta_generator._use_warning_has_been_displayed
    at = AppTest.from_function(_script, default_timeout=30).run()
    assert not at.exception and at.markdown[0].value == "a first element"
    assert calls == [1]
