"""The server's limits (app_pages/_ui/serving.py, memory.py, state.py; issue #19), each on its own: the unread-bytes
limit and the upload limit as ASGI middleware around fake apps, the memory release, and the widget metadata that a
session keeps over many reruns of a page (AppTest)."""
from __future__ import annotations

import asyncio
import gc

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
