"""A server a class can share (issue #19), on a server of its own: one visitor's long sentences, clients that never
read what the server sends, and the uploads of a session that has ended. Sessions speak Streamlit's websocket
protocol (bench/st_protocol.py, what a browser tab sends) so that a test can be a hostile client; the server's RSS
is sampled with psutil. Every wait polls the server's state up to a deadline."""
from __future__ import annotations

import asyncio
import os
import random
import sys
import threading
import time
import urllib.request
import uuid

import psutil
import pytest

from tests.browser.conftest import ROOT, streamlit_server
from tests.conftest import run_async

sys.path.insert(0, str(ROOT / "bench"))
from st_protocol import Session  # noqa: E402

pytestmark = pytest.mark.browser
MB = 2**20
WORDS = ("the quick brown fox jumps over a lazy dog while seven curious cats watch it from an old red barn near the "
         "river bank and three small birds sing loud songs in tall green trees every warm summer day").split()
TTL_S = 2  # server.disconnectedSessionTTL of this server: a closed tab's session ends 2 s later


@pytest.fixture(scope="module")
def server():
    env = {"STREAMLIT_SERVER_DISCONNECTED_SESSION_TTL": str(TTL_S), "ATTN_MAX_UPLOADS_TOTAL_MB": "3"}
    with streamlit_server(env) as (url, proc):
        yield url, proc


def rss(proc) -> int:
    p = psutil.Process(proc.pid)
    return sum(x.memory_info().rss for x in [p] + p.children(recursive=True))


class Peak(threading.Thread):
    def __init__(self, proc):
        super().__init__(daemon=True)
        self.proc, self.peak, self.halt = proc, 0, threading.Event()

    def run(self):
        while not self.halt.wait(0.2):
            self.peak = max(self.peak, rss(self.proc))


def sentence(rng: random.Random, n: int = 400) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


async def settled(proc, seconds: float = 60) -> int:
    """The server's RSS once the warm-up is over (two readings 3 s apart within 8 MB)."""
    end, last = time.monotonic() + seconds, rss(proc)
    while time.monotonic() < end:
        await asyncio.sleep(3)
        now = rss(proc)
        if abs(now - last) < 8 * MB:
            return now
        last = now
    return last


async def first_page(url: str, query: str = "lang=en") -> Session:
    s = Session(url, timeout=120)
    await s.connect()
    await s.open("/", query)
    return s


def test_many_long_sentences_keep_one_visitor_bounded(server):
    url, proc = server

    async def main():
        s = await first_page(url, "lang=en&view=grid")
        base = await settled(proc)
        peak = Peak(proc)
        peak.start()
        rng = random.Random(0)
        for _ in range(12):
            run = await s.set_widget(s.widget("attention.text", "text_area").id, string_value=sentence(rng))
            assert run.status == "FINISHED_SUCCESSFULLY" and s.charts()
        peak.halt.set()
        peak.join()
        await s.close()
        return base, peak.peak
    base, top = run_async(main())
    assert top - base <= 250 * MB, f"{(top - base) / MB:.0f} MB more for 12 sentences of 400 words"


def test_clients_that_never_read_are_cut_off_and_others_are_served(server):
    url, proc = server

    async def hostile(i: int) -> Session:
        s = await first_page(url)
        box = s.widget("attention.text", "text_area").id
        s._reader.cancel()  # from now on nothing is read: the socket fills up, then the server's queue
        rng = random.Random(i)
        for _ in range(15):
            s._set(box, string_value=sentence(rng))
            try:
                await s.rerun(wait=False)
            except Exception:  # noqa: BLE001 - the server has closed this connection: that is the point
                break
            await asyncio.sleep(0.2)
        return s

    async def main():
        base = await settled(proc)
        peak = Peak(proc)
        peak.start()
        slow = await asyncio.gather(*(hostile(i) for i in range(4)))
        t0 = time.perf_counter()
        visitor = await first_page(url)  # a student who reads, meanwhile
        opened = time.perf_counter() - t0
        assert visitor.charts() and not visitor.find("exception")
        await visitor.close()
        for s in slow:
            await s.close()
        peak.halt.set()
        peak.join()
        return base, peak.peak, opened
    base, top, opened = run_async(main())
    assert opened < 30, f"a reading visitor waited {opened:.0f} s"
    assert top - base <= 700 * MB, f"{(top - base) / MB:.0f} MB more with 4 clients that never read"


def upload(url: str, session_id: str, size: int) -> int:
    """PUT one file to the session's upload URL, as the browser's uploader does (XSRF cookie + header)."""
    cookie = urllib.request.urlopen(url + "/_stcore/health").headers["Set-Cookie"].split(";")[0]
    token = cookie.split("=", 1)[1]
    boundary = uuid.uuid4().hex
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"x.bin\"\r\n"
            f"Content-Type: application/octet-stream\r\n\r\n").encode() + os.urandom(size) + f"\r\n--{boundary}--\r\n".encode()
    req = urllib.request.Request(f"{url}/_stcore/upload_file/{session_id}/{uuid.uuid4()}", data=body, method="PUT",
                                 headers={"Content-Type": f"multipart/form-data; boundary={boundary}",
                                          "Cookie": cookie, "X-Xsrftoken": token})
    try:
        return urllib.request.urlopen(req, timeout=30).status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_uploads_are_bounded_and_an_ended_sessions_files_are_given_back(server):
    url, _ = server

    async def main():
        a = await first_page(url)
        b = await first_page(url)
        statuses = [upload(url, a.session_id, MB // 2) for _ in range(5)]
        assert statuses == [204] * 4 + [413], statuses  # at most 4 files per session
        assert upload(url, b.session_id, 2 * MB) == 413  # a holds 2 of the server's 3 MB
        await a.close()  # a's tab closes: its session ends TTL_S later, and its files go with it
        end = time.monotonic() + 60
        status = 413
        while status == 413 and time.monotonic() < end:
            await asyncio.sleep(1)
            status = upload(url, b.session_id, 2 * MB)
        await b.close()
        return status
    assert run_async(main()) == 204
