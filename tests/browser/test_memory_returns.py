"""Memory comes back once a class has left: on a server of its own, a scripted class of readers types long texts
through the Attention views, leaves, and once its sessions have ended the server's RSS is back within 150 MB of the
warmed-up server. When it is not, the message says where the memory is (the server's own report: the caches it
emptied, glibc's heap in use and kept, Python objects, modules). Sessions speak Streamlit's websocket protocol
(bench/st_protocol.py); every wait polls the server's log or RSS up to a deadline."""
from __future__ import annotations

import asyncio
import random
import sys
import time

import psutil
import pytest

from tests.browser.conftest import ROOT, SERVER_LOG, streamlit_server
from tests.conftest import run_async

sys.path.insert(0, str(ROOT / "bench"))
from st_protocol import Session  # noqa: E402
from viz_core.i18n import t  # noqa: E402

# measures its server's memory while a class works and after it left: in the serial pass, so that the class's
# requests are served at the pace of a machine with nothing else to do (pytest.ini)
pytestmark = [pytest.mark.browser, pytest.mark.alone]
MB = 2**20
MEMORY_LINE = "memory once the last session ended"  # what app_pages/_ui/memory.idle_release logs
VIEWS = ("head", "grid", "lines", "aggregate", "stats", "sinks")  # the views a reader moves through
WORDS = ("the quick brown fox jumps over a lazy dog while seven curious cats watch it from an old red barn near the "
         "river bank and three small birds sing loud songs in tall green trees every warm summer day").split()


@pytest.fixture(scope="module")
def server():
    # a closed tab's session ends 2 s later, and the reaper looks every second
    env = {"STREAMLIT_SERVER_DISCONNECTED_SESSION_TTL": "2", "ATTN_REAP_S": "1"}
    with streamlit_server(env) as (url, proc):
        yield url, proc


def rss(proc) -> int:
    p = psutil.Process(proc.pid)
    return sum(x.memory_info().rss for x in [p] + p.children(recursive=True))


def said_since(offset: int) -> list[str]:
    """The server's memory reports logged after `offset` bytes of the shared server log."""
    with open(SERVER_LOG, "rb") as f:
        f.seek(offset)
        text = f.read().decode(errors="replace")
    return [line.split(MEMORY_LINE, 1)[1].strip(": ") for line in text.splitlines() if MEMORY_LINE in line]


async def report_after(offset: int, seconds: float = 60) -> str:
    """The server's report once every session has ended (it logs one when it empties its caches)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        said = said_since(offset)
        if said:
            return said[-1]
        await asyncio.sleep(0.5)
    raise AssertionError(f"the server did not report its memory within {seconds:.0f} s of the last session ending")


async def reader(url: str, seed: int, texts: int) -> None:
    """One visitor: a view, then a long text, `texts` times; every run must finish with a chart and no error."""
    rng = random.Random(seed)
    async with Session(url, timeout=120) as s:
        await s.open("/", "lang=en")
        for i in range(texts):
            view = VIEWS[(seed + i) % len(VIEWS)]
            await s.set_widget(s.widget("attention.view.en", "radio").id, string_value=_label(s, view))
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(150, 350)))
            run = await s.set_widget(s.widget("attention.text", "text_area").id, string_value=text)
            assert run.status == "FINISHED_SUCCESSFULLY" and not s.find("exception"), f"{view}: {s.text()[-200:]}"


def _label(s: Session, view: str) -> str:
    """The view menu's English label of `view` (it must be one of the menu's options)."""
    label = t(f"attention.view_{view}", "en")
    assert label in s.widget("attention.view.en", "radio").proto.options
    return label


def test_the_server_returns_to_its_warm_size_once_a_class_has_left(server):
    url, proc = server

    async def main():
        offset = SERVER_LOG.stat().st_size
        # warm-up: one visitor opens every view the class will use (their code loads), then leaves
        await reader(url, 0, len(VIEWS))
        first = await report_after(offset)
        warm = rss(proc)
        offset = SERVER_LOG.stat().st_size
        await asyncio.gather(*(reader(url, seed, 4) for seed in range(1, 7)))  # the class: 6 readers at once
        during = rss(proc)
        return first, warm, during, await report_after(offset)

    first, warm, during, report = run_async(main())
    after = rss(proc)
    assert "caches emptied: results and figures" in report, report
    assert during > warm, "the class should have used memory (nothing was measured otherwise)"
    assert after - warm <= 150 * MB, (
        f"{(after - warm) / MB:.0f} MB above the warmed-up server once the class left ({warm / MB:.0f} -> "
        f"{after / MB:.0f} MB; {during / MB:.0f} MB as it left). Where it is, as the server says: {report}. "
        f"After the warm-up it said: {first}")
