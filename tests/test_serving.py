"""The server's limits (app_pages/_ui/serving.py, memory.py, state.py), each on its own: the unread-bytes
limit and the upload limit as ASGI middleware around fake apps, the memory release, and the widget metadata that a
session keeps over many reruns of a page (AppTest)."""
from __future__ import annotations

import asyncio
import gc
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from app_pages._ui import memory, serving
from tests.conftest import assert_clean, chart_spec, charts, run_async, run_page

MB = 2**20


# ---------------------------------------------------------------- unread websocket messages
def run_ws(client_reads: bool, limit: int = 8 * MB, n_messages: int = 20, size: int = MB):
    """An app that answers one request with n_messages of `size` bytes, behind UnreadLimit, with a client that
    reads them (or never reads); returns (what reached the client's transport, what the app's receive() got)."""
    async def main():
        delivered, unblock, inbox = [], asyncio.Event(), asyncio.Queue()
        if client_reads:
            unblock.set()

        async def send(message):
            if message["type"] == "websocket.send":
                await unblock.wait()  # a client that does not read: the transport never drains
            delivered.append(message)

        async def receive():
            return await inbox.get()

        got = {}
        await inbox.put({"type": "websocket.receive", "bytes": b"rerun"})

        async def the_app(scope, receive, send):
            await send({"type": "websocket.accept"})
            got["first"] = await receive()
            for i in range(n_messages):
                await send({"type": "websocket.send", "bytes": bytes([i % 256]) * size})
            if client_reads:
                await inbox.put({"type": "websocket.disconnect", "code": 1000})
            got["last"] = await receive()

        await asyncio.wait_for(serving.UnreadLimit(the_app, limit=limit)({"type": "websocket"}, receive, send), 10)
        return delivered, got
    return run_async(main())


def test_a_client_that_never_reads_is_disconnected_at_the_limit():
    delivered, got = run_ws(client_reads=False)
    assert got["first"]["type"] == "websocket.receive"
    assert got["last"] == {"type": "websocket.disconnect", "code": 1008}  # the app learns it and ends the session
    assert [m["type"] for m in delivered] == ["websocket.accept"]       # nothing more reached the transport


def test_a_client_that_reads_gets_every_message_in_order():
    delivered, got = run_ws(client_reads=True, n_messages=40)
    sends = [m for m in delivered if m["type"] == "websocket.send"]
    assert len(sends) == 40 and [m["bytes"][0] for m in sends] == list(range(40))
    assert got["last"]["code"] == 1000


def test_http_requests_pass_through_untouched():
    seen = []

    async def app(scope, receive, send):
        seen.append(scope["path"])

    run_async(serving.UnreadLimit(app)({"type": "http", "path": "/_stcore/health"}, None, None))
    assert seen == ["/_stcore/health"]


# ---------------------------------------------------------------- Nagle's algorithm off
STREAMLIT_WS = "websockets-sansio"  # the websocket implementation Streamlit 1.67 asks uvicorn (>= 0.44) for


def one_websocket(app) -> str:
    """Serve `app` with uvicorn on a socket bound as Streamlit binds it (`socket.socket(family)`: protocol 0), open
    one websocket to it, send "hello" and return the app's answer."""
    import uvicorn
    from websockets.sync.client import connect

    listener = socket.socket(socket.AF_INET)  # (as streamlit.web.server.starlette binds it)
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    server = uvicorn.Server(uvicorn.Config(app, ws=STREAMLIT_WS, lifespan="off", log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    try:
        for _ in range(500):
            if server.started:
                break
            time.sleep(0.02)
        with connect(f"ws://127.0.0.1:{listener.getsockname()[1]}/", open_timeout=10) as client:
            client.send("hello")
            return client.recv(timeout=10)
    finally:
        server.should_exit = True
        thread.join(10)
        listener.close()


async def nodelay_app(scope, receive, send):
    """Answers a websocket's first message with TCP_NODELAY of the connection's socket."""
    if scope["type"] != "websocket":
        return
    await receive()
    await send({"type": "websocket.accept"})
    await receive()
    sock = send.__self__.transport.get_extra_info("socket")
    await send({"type": "websocket.send", "text": str(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))})
    await receive()


def test_a_websocket_of_the_server_sends_without_delay():
    assert one_websocket(nodelay_app) == "0"                   # Streamlit's socket as it is: Nagle's algorithm on
    assert one_websocket(serving.NoDelay(nodelay_app)) != "0"  # NoDelay turns it off for the connection


def test_the_apps_middleware_turns_it_off(monkeypatch):
    """The whole stack of app.py's middleware (serving.middleware()): NoDelay meets the server's own send."""
    done = []
    real = serving.no_delay
    monkeypatch.setattr(serving, "no_delay", lambda send: done.append(real(send)) or done[-1])

    async def echo(scope, receive, send):
        if scope["type"] != "websocket":
            return
        await receive()
        await send({"type": "websocket.accept"})
        message = await receive()
        await send({"type": "websocket.send", "text": message.get("text") or ""})
        await receive()

    app = echo
    for layer in reversed(serving.middleware()):
        app = layer.cls(app, *layer.args, **layer.kwargs)
    assert one_websocket(app) == "hello"
    assert done == [True]


def test_no_delay_leaves_a_send_without_a_tcp_socket_alone():
    class Transport:
        def __init__(self, sock):
            self.sock = sock

        def get_extra_info(self, name):
            return self.sock if name == "socket" else None

    class Protocol:
        def __init__(self, sock):
            self.transport = Transport(sock)

        async def send(self, message):
            pass

    with socket.socket(socket.AF_UNIX) as unix:
        assert not serving.no_delay(Protocol(unix).send)     # a Unix socket: nothing to do
    assert not serving.no_delay(lambda message: None)       # no server object behind the send
    seen = []

    async def app(scope, receive, send):
        seen.append(scope["type"])

    run_async(serving.NoDelay(app)({"type": "http", "path": "/"}, None, None))
    assert seen == ["http"]


# ---------------------------------------------------------------- uploads
def put(limit: serving.UploadLimit, session: str, file_id: str, size: int) -> int:
    """One upload PUT through the middleware; returns the HTTP status (204 when it reached the app)."""
    status = {}

    async def send(message):
        if message["type"] == "http.response.start":
            status["code"] = message["status"]

    scope = {"type": "http", "method": "PUT", "path": f"/_stcore/upload_file/{session}/{file_id}",
             "headers": [(b"content-length", str(size).encode())]}
    async def receive():
        return {"type": "http.request", "body": b"x" * 1000, "more_body": False}

    run_async(limit(scope, receive, send))
    return status["code"]


async def _accept(scope, receive, send):
    """Streamlit's upload route, as far as the middleware can tell: the file was taken."""
    await send({"type": "http.response.start", "status": 204, "headers": []})


@pytest.fixture
def stored(monkeypatch):
    """The files Streamlit holds, as the middleware sees them: {session: {file id: bytes}}."""
    files: dict[str, dict[str, int]] = {}
    monkeypatch.setattr(serving, "_stored_files", lambda: files)
    return files


def test_uploads_are_bounded_per_session_and_per_server(stored):
    limit = serving.UploadLimit(_accept, files=4, session_mb=64, total_mb=128)
    for i in range(4):
        assert put(limit, "s1", f"f{i}", MB) == 204
        stored.setdefault("s1", {})[f"f{i}"] = MB
    assert put(limit, "s1", "f4", MB) == 413           # a fifth file
    assert put(limit, "s1", "f0", MB) == 204           # a file uploaded again replaces itself
    assert put(limit, "s2", "big", 65 * MB) == 413     # more than a session may hold
    stored["s3"] = {"a": 60 * MB}
    stored["s4"] = {"a": 60 * MB}
    assert put(limit, "s5", "x", 10 * MB) == 413       # the server is full
    stored.pop("s3")
    assert put(limit, "s5", "x", 10 * MB) == 204       # room again once a session's files are gone


def test_uploads_in_flight_count_too(stored):
    limit = serving.UploadLimit(_accept, files=2, session_mb=64, total_mb=256)
    assert limit._admit("s", "a", MB) == "" and limit._admit("s", "b", MB) == ""  # both still being received
    assert "at most 2 files" in limit._admit("s", "c", MB)


def test_other_requests_are_not_counted(stored):
    reached = []

    async def app(scope, receive, send):
        reached.append((scope["method"], scope["path"]))

    limit = serving.UploadLimit(app, files=1)
    stored["s"] = {"a": 1}
    for method, path in (("GET", "/_stcore/upload_file/s/b"), ("PUT", "/_stcore/health")):
        run_async(limit({"type": "http", "method": method, "path": path, "headers": []}, None, None))
    assert len(reached) == 2


def test_a_stalled_upload_is_cut_with_408_and_its_share_given_back(stored, monkeypatch):
    """A client that declares a large body and stops sending must not hold the server's upload budget."""
    monkeypatch.setenv("ATTN_UPLOAD_STALL_S", "0.2")
    messages = []

    async def reading_app(scope, receive, send):  # Streamlit's route reads the body, then answers
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise ConnectionResetError("client gone")  # what starlette raises as ClientDisconnect
            if not message.get("more_body"):
                break
        await send({"type": "http.response.start", "status": 204, "headers": []})

    async def send(message):
        messages.append(message)

    async def stalled():
        await asyncio.sleep(3600)

    limit = serving.UploadLimit(reading_app, files=4, session_mb=64, total_mb=10)
    scope = {"type": "http", "method": "PUT", "path": "/_stcore/upload_file/s/f",
             "headers": [(b"content-length", str(8 * MB).encode())]}

    async def main():
        task = asyncio.ensure_future(limit(scope, stalled, send))
        await asyncio.sleep(0.05)
        held = limit._admit("other", "g", 4 * MB)  # 8 MB of the 10 are promised to the stalled upload
        await asyncio.wait_for(task, 5)
        return held
    held = run_async(main())
    assert "the server holds" in held
    assert messages[0]["status"] == 408
    assert limit._in_flight == {}
    assert put(limit, "other", "g", 4 * MB) == 204


def test_an_upload_nobody_reads_is_dropped_after_the_hold(monkeypatch):
    removed = []

    class Manager:
        file_storage = {"s": {"a": object(), "b": object()}}

        def remove_file(self, session_id, file_id):
            removed.append((session_id, file_id))
            self.file_storage[session_id].pop(file_id)

    class Runtime:
        manager = Manager()

        @staticmethod
        def exists():
            return True

        @classmethod
        def instance(cls):
            return type("R", (), {"uploaded_file_mgr": cls.manager})()

    import streamlit.runtime
    monkeypatch.setattr(streamlit.runtime, "Runtime", Runtime)
    monkeypatch.setattr(serving, "_HELD", {("s", "a"): 100.0})
    assert serving.drop_held_uploads(hold_s=60, now=130) == 0      # a: 30 s old; b: first seen now
    assert serving.drop_held_uploads(hold_s=60, now=170) == 1      # a: 70 s old
    assert removed == [("s", "a")]
    assert serving.drop_held_uploads(hold_s=60, now=200) == 1      # b: 70 s after it was first seen
    assert removed == [("s", "a"), ("s", "b")] and serving._HELD == {}


def test_a_kept_input_error_keeps_no_frame_of_where_it_was_raised():
    """A page keeps a refusal in its state; the frames it was raised through held the upload's bytes."""
    from app_pages import _ui as ui
    from viz_core.errors import InputError

    def read(data: bytes):
        try:
            raise ValueError("inner")
        except ValueError:
            raise InputError("upload.bad_zip", "bad", name="x.zip") from None

    _, err = ui.safe(read, b"x" * MB)
    assert err.code == "upload.bad_zip"
    assert err.__traceback__ is None and err.__context__ is None and err.__cause__ is None


# ---------------------------------------------------------------- memory
def test_release_frees_cycles_and_settle_waits_for_growth(monkeypatch):
    class Cycle:
        pass

    a, b = Cycle(), Cycle()
    a.other, b.other = b, a
    gc.disable()
    try:
        del a, b
        assert any(type(o) is Cycle for o in gc.get_objects())
        memory.release()
        assert not any(type(o) is Cycle for o in gc.get_objects())
    finally:
        gc.enable()
    sizes = iter([100 * MB, 120 * MB, 200 * MB, 150 * MB])
    monkeypatch.setattr(memory, "rss_bytes", lambda: next(sizes))
    monkeypatch.setattr(memory, "release", lambda: 150 * MB)
    monkeypatch.setattr(memory, "_armed", __import__("threading").Event())
    assert memory.settle() is False   # not armed yet (the warm-up has not frozen torch's objects): nothing
    memory.arm()                      # measures 100 MB
    assert memory.settle() is False   # 20 MB more: not yet
    assert memory.settle() is True    # 100 MB more: collected
    assert memory._baseline == 150 * MB


def test_rss_is_read_from_proc():
    assert memory.rss_bytes() > 10 * MB


def test_the_heap_report_follows_what_is_allocated():
    import numpy as np
    before = memory.heap()
    if not before:
        pytest.skip("glibc's mallinfo2 is not available here")
    block = np.ones(5 * MB // 8)  # 5 MB from malloc: its own mapping (above glibc's mmap threshold) or the heap
    during = memory.heap()
    grew = (during["in_use"] + during["mapped"]) - (before["in_use"] + before["mapped"])
    del block
    assert 4 * MB <= grew <= 8 * MB, grew
    line = memory.describe(memory.report({"results and figures": 3 * MB}))
    assert "heap: in use" in line and "caches emptied: results and figures 3 MB" in line and "modules" in line


def test_once_the_last_session_has_ended_the_shared_caches_are_emptied(monkeypatch):
    import numpy as np

    from app_pages._ui.caches import ByteBoundedCache
    cache = ByteBoundedCache(10 * MB)
    cache.get("a", lambda: np.zeros(MB // 8))
    sessions = [3]

    class Runtime:
        @staticmethod
        def exists():
            return True

        @staticmethod
        def instance():
            return type("R", (), {"_session_mgr": type("M", (), {"num_sessions": lambda self: sessions[0]})()})()

    import streamlit.runtime
    with monkeypatch.context() as m:
        m.setattr(streamlit.runtime, "Runtime", Runtime)
        emptied = [True]                              # the server starts with nothing to empty
        assert serving.newly_empty(emptied) is False  # a class is there
        sessions[0] = 0
        assert serving.newly_empty(emptied) is True   # the last one has ended: empty now ...
        assert serving.newly_empty(emptied) is False  # ... once per quiet spell
        sessions[0] = 1
        assert serving.newly_empty(emptied) is False
        sessions[0] = 0
        assert serving.newly_empty(emptied) is True   # the next class has left

    assert cache in ByteBoundedCache.every and cache.used == MB
    r = memory.idle_release()
    assert cache.used == 0 and not cache.items
    assert r["emptied_results and figures"] >= MB and r["rss"] > 0


# ---------------------------------------------------------------- what a session keeps of its widgets
def widget_metadata(at) -> dict:
    return at._session_state._state._new_widget_state.widget_metadata


@pytest.mark.parametrize("view", ["grid", "stats", "head"])
def test_new_sentences_leave_no_widget_metadata_behind(view):
    at = run_page("attention", {"lang": "en", "view": view})
    sizes = []
    for i in range(5):
        at.text_area(key="attention.text").set_value(f"Sentence number {i} is about the {i}th cat.").run()
        assert_clean(at)
        sizes.append(len(widget_metadata(at)))
    assert len(set(sizes)) == 1, sizes  # the selectable chart's id changes with its figure every time
    selectable = {c.proto.id for c in charts(at) if chart_spec(c).get("select")}
    assert bool(selectable) == (view != "head")  # the map of all heads and the statistics report clicks
    assert selectable <= set(widget_metadata(at))  # the chart drawn now keeps its callback
    from streamlit.components.v2.bidi_component.main import _make_trigger_id
    # ... and the widget its clicks go through (a trigger aggregator: without it a click reran the page and did nothing)
    assert {_make_trigger_id(i, "events") for i in selectable} <= set(widget_metadata(at))




MALLOC_PROBE = """
import ctypes, sys, threading
sys.path.insert(0, {root!r})
from app_pages._ui import memory
print(memory.tune_malloc() if {tune} else "untuned")
gate = threading.Barrier(8)
def work():
    gate.wait()  # all eight allocate at the same moment: glibc hands contending threads arenas of their own
    blocks = [bytearray(4096) for _ in range(2000)]
    gate.wait()
threads = [threading.Thread(target=work) for _ in range(8)]
[t.start() for t in threads]; [t.join() for t in threads]
big = bytearray(30 * 2**20); del big  # glibc's own threshold for a mapping of its own grows to 30 MB here
before = memory.rss_bytes()
blocks = [bytearray(20 * 2**20) for _ in range(2)]  # written (zeroed): resident
del blocks
print("kept MB", (memory.rss_bytes() - before) // 2**20)
ctypes.CDLL("libc.so.6").malloc_stats()  # one "Arena i:" section per arena, on stderr
"""


def malloc_probe(tune: bool, env_extra: dict | None = None) -> tuple[str, int, int]:
    """(what tune_malloc said, MB still resident after 40 MB of arrays were freed, arenas) in a fresh process."""
    env = {k: v for k, v in os.environ.items() if k not in ("MALLOC_ARENA_MAX", "MALLOC_MMAP_THRESHOLD_")}
    code = MALLOC_PROBE.format(root=str(Path(__file__).resolve().parents[1]), tune=tune)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env=env | (env_extra or {}))
    assert out.returncode == 0, out.stderr[-2000:]
    said, kept = out.stdout.splitlines()[0], int(out.stdout.split("kept MB")[1].split()[0])
    return said, kept, out.stderr.count("Arena ")


def test_the_server_tunes_malloc_so_freed_arrays_go_back():
    """tune_malloc(): eight threads allocating at once share 2 arenas, and 40 MB of arrays freed after a 30 MB one
    go back to the system. Untuned, glibc gives the threads more arenas and keeps the 40 MB (its threshold for a
    mapping of its own has grown to 30 MB, and an arena keeps up to twice that free at its top)."""
    if not memory.heap():
        pytest.skip("not glibc")
    said, kept, arenas = malloc_probe(tune=True)
    assert said == "{'arenas': True, 'mmap_threshold': True}" and arenas <= 2 and kept < 10, (said, kept, arenas)
    said, kept, arenas = malloc_probe(tune=False)
    assert arenas > 2 and kept >= 30, (said, kept, arenas)


def test_the_operators_malloc_settings_stay():
    if not memory.heap():
        pytest.skip("not glibc")
    said, _, arenas = malloc_probe(tune=True, env_extra={"MALLOC_ARENA_MAX": "8"})
    assert said == "{'arenas': False, 'mmap_threshold': True}" and arenas > 2, (said, arenas)


COMPUTING_PROBE = """
import sys, threading
sys.path.insert(0, {root!r})
import numpy as np
from app_pages._ui import memory
memory.tune_malloc()
def mapped_while_held():
    a = np.ones(20 * 2**20 // 8)  # 20 MB, written
    return memory.heap()["mapped"] >= 20 * 2**20
before = memory.rss_bytes()
outside = mapped_while_held()
inner_done, outer_may_end = threading.Event(), threading.Event()
def other():  # a second computation that ends first: the threshold stays raised for the one still running
    with memory.computing():
        inner_done.set()
        outer_may_end.wait()
with memory.computing():
    t = threading.Thread(target=other); t.start()
    inner_done.wait()
    inside = mapped_while_held()
    outer_may_end.set(); t.join()
    still = mapped_while_held()
    blocks = [np.ones(20 * 2**20 // 8) for _ in range(3)]; del blocks  # 60 MB freed into the arenas
after = mapped_while_held()
print(outside, inside, still, after, (memory.rss_bytes() - before) // 2**20)
"""


def test_computations_reuse_the_arenas_and_give_the_memory_back():
    """memory.computing(): while any computation runs, a 20 MB array comes from the arenas (no mapping of its own);
    once the last one ends, large arrays get mappings again and what the computations freed is back with the system."""
    if not memory.heap():
        pytest.skip("not glibc")
    code = COMPUTING_PROBE.format(root=str(Path(__file__).resolve().parents[1]))
    env = {k: v for k, v in os.environ.items() if k not in ("MALLOC_ARENA_MAX", "MALLOC_MMAP_THRESHOLD_")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    outside, inside, still, after, kept = out.stdout.split()
    assert (outside, inside, still, after) == ("True", "False", "False", "True"), out.stdout
    assert int(kept) < 10, out.stdout
