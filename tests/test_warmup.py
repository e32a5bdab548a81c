"""The warm-up (app_pages/_ui/warmup.py) pays Streamlit's once-per-process shell check, so that no visitor's run does:
the check walks the stack of the first script run with inspect.stack() (0.27 s of a cold start's first run). It also
compiles every page once and keeps them compiled when no file watcher can change them."""
from __future__ import annotations

import builtins

from streamlit import delta_generator, env_util
from streamlit.runtime.scriptrunner.script_cache import ScriptCache
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


PAGES = [warmup.APP_ROOT / "app.py", *sorted((warmup.APP_ROOT / "app_pages").glob("*.py"))]


def _count_compiles(monkeypatch) -> list[str]:
    compiled: list[str] = []
    real = builtins.compile
    monkeypatch.setattr(builtins, "compile",
                        lambda src, name, *a, **k: compiled.append(name) or real(src, name, *a, **k))
    return compiled


def test_streamlit_compiles_a_page_again_after_the_last_session_left(monkeypatch):
    """What keep_compiled takes away: Streamlit empties its script cache when the last session leaves, and the next
    visit compiles the page again (if Streamlit stops doing that, this fails and keep_compiled can go)."""
    cache, page = ScriptCache(), str(warmup.APP_ROOT / "app_pages" / "optimizers.py")
    compiled = _count_compiles(monkeypatch)
    cache.get_bytecode(page)
    cache.clear()  # what WebsocketSessionManager does when no session is left
    cache.get_bytecode(page)
    assert compiled == [page, page]


def test_kept_pages_are_compiled_once_and_stay(monkeypatch):
    cache = ScriptCache()
    compiled = _count_compiles(monkeypatch)
    assert warmup.keep_compiled(cache, PAGES, watched=False)
    assert sorted(compiled) == sorted(str(p) for p in PAGES) and len(PAGES) > 10
    cache.clear()
    for page in PAGES:  # every visit after it: from the cache, whatever left
        cache.get_bytecode(str(page))
    assert len(compiled) == len(PAGES)
    assert type(ScriptCache().clear) is not type(cache.clear)  # (only this cache: the class is untouched)


def test_a_watched_checkout_keeps_streamlit_s_behaviour(monkeypatch):
    """With a file watcher (a developer editing the pages) an edited page must be compiled again: nothing is kept."""
    cache = ScriptCache()
    compiled = _count_compiles(monkeypatch)
    assert not warmup.keep_compiled(cache, PAGES, watched=True)
    assert compiled == []
    cache.get_bytecode(str(PAGES[0]))
    cache.clear()
    cache.get_bytecode(str(PAGES[0]))
    assert len(compiled) == 2
