"""A training run lost with its session is said, never silently gone (app_pages/_ui/training_job.py: MARKER).

While a run waits or runs, the Train page's address names it; a browser that lands in a new session with that address
(its server restarted, the load balancer moved it to another replica, its session expired) is told the run was lost,
and the address drops the marker so that a reload does not say it again. Here the new session is a fresh browser
context on the same server, opened on the address of a page that is training: to the server, exactly a visitor
arriving from a dead replica. Every wait is on the page's state, never a fixed sleep."""
from __future__ import annotations

import re
from urllib.parse import parse_qs, urlparse

import pytest

from app_pages._ui.training_job import MARKER
from tests.browser.conftest import assert_no_exception, screenshot, wait_done
from viz_core.i18n import t

pytestmark = pytest.mark.browser


def marker_of(page) -> str | None:
    return parse_qs(urlparse(page.url).query).get(MARKER, [None])[0]


def wait_marker(page, present: bool, timeout_s: float = 60) -> None:
    """Wait until the address has (present) or has not the marker."""
    page.wait_for_function("([name, present]) => new URLSearchParams(location.search).has(name) === present",
                           arg=[MARKER, present], timeout=timeout_s * 1000)


def lost_words(lang: str) -> str:
    """The lost-run warning's first clause (the rest of the text follows it in the same box)."""
    return re.split("[:：]", t("train.lost", lang))[0]


def main_text(page) -> str:
    return page.locator("[data-testid='stMain']").inner_text()


def test_a_visitor_from_a_dead_replica_is_told_the_run_was_lost(open_page):
    lang = "zh"  # the visitor's language reaches the new session through the address too
    training = open_page(f"/train?lang={lang}&task=sort&preset=tiny&seconds=60")
    assert marker_of(training) is None
    training.locator(".st-key-train-go button").click()
    wait_marker(training, True)  # the running job, named in the address
    address = training.url
    assert re.fullmatch(r"[0-9a-f]{8}", marker_of(training) or "")

    arrived = open_page(address[address.index("/train"):])  # a new session on the training page's address
    arrived.wait_for_function("w => document.querySelector(\"[data-testid='stMain']\").innerText.includes(w)",
                              arg=lost_words(lang), timeout=60_000)
    wait_marker(arrived, False)  # dropped: a reload must not say it again
    wait_done(arrived)
    assert_no_exception(arrived)
    assert parse_qs(urlparse(arrived.url).query).get("task") == ["sort"]  # the rest of the page's state stays
    screenshot(arrived, f"train-lost-run-{lang}")
    arrived.reload()
    wait_done(arrived)
    assert_no_exception(arrived)
    assert lost_words(lang) not in main_text(arrived) and marker_of(arrived) is None

    assert lost_words(lang) not in main_text(training)  # the session that trains says nothing of the kind
    training.locator(".st-key-train-live_stop button").click()
    wait_marker(training, False, 30)  # stopped and collected: the address no longer names it
    wait_done(training)
    assert_no_exception(training)
    assert lost_words(lang) not in main_text(training)
