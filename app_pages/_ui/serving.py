"""What the server does to stay up with a whole class on it: limits on what one connection can make it
hold, applied as ASGI middleware on the st.App that `streamlit run app.py` serves (app.py).

- **Unread messages.** Streamlit queues every message for a browser tab until the tab reads it (up to 500
  messages, of up to 1.4 MB each here). A client that keeps asking for reruns and never reads made the server
  hold gigabytes (10 such clients: 6.7 GB). `UnreadLimit` moves each outgoing websocket message into its own
  queue at once, counts the bytes that the client has not taken yet, and closes the connection when they pass
  UNREAD_LIMIT_BYTES (the largest run of any page is 1.5 MB; a browser that reads never comes close). The tab's
  session stays for server.disconnectedSessionTTL, so a real browser reconnects to it as after a network drop.
- **Uploads.** Streamlit stores an uploaded file in memory until its session ends, and its upload endpoint takes
  any number of files per session (only each file's size is bounded, by server.maxUploadSize). `UploadLimit`
  refuses an upload (HTTP 413) that would give a session more than ATTN_MAX_UPLOAD_FILES files or
  ATTN_MAX_UPLOAD_MB megabytes, or the whole server more than ATTN_MAX_UPLOADS_TOTAL_MB, before any of its body
  is read. The server-wide budget is shared fairly in time: a body that stops arriving for UPLOAD_STALL_SECONDS
  is cut (HTTP 408) and its share given back, a page drops a file from the store as soon as it has read it
  (`forget_uploads`), and the reaper drops any file held longer than ATTN_UPLOAD_HOLD_S, so an idle visitor, or
  one who uploads and never lets a page read it, cannot keep others' uploads out. An upload that would take the
  server past its memory budget (viz_core.runtime.budget) is refused with HTTP 503 before its body is read.

- **Messages held back by TCP.** Streamlit binds its listening socket as `socket.socket(family)`, whose protocol
  number is 0, and asyncio only turns Nagle's algorithm off (TCP_NODELAY) on sockets whose protocol is TCP's. So every
  websocket ran with Nagle on: the last small message of a run (script_finished, or a small element after a large
  one) waited until the browser acknowledged the data before it, and Linux delays that acknowledgement by up to
  40 ms. `NoDelay` sets TCP_NODELAY on each websocket's socket when it connects: a page switch's messages reached
  the client up to 40 ms sooner (bench/bench_switch_server.py measures it).
- **Ended sessions.** A closed tab's session is kept for server.disconnectedSessionTTL (120 s) so that a browser
  can reconnect to it. Streamlit then only forgets it the next time another session is stored, and never shuts it
  down: its uploaded files, download data and page data stayed in memory. `reap_sessions` shuts down every session
  whose time is up and drops uploads that belong to no session, every REAP_SECONDS (`lifespan`).

The middleware reads nothing of Streamlit's but its public parts (the ASGI messages, Runtime.uploaded_file_mgr), and of
the ASGI server only the transport of its websocket protocol (tests/test_serving.py runs uvicorn to check it);
the reaper reads the session storage of Streamlit 1.67 (tests/test_serving.py checks that it still can).
"""
from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import re
import socket
import threading
import time

from viz_core.runtime import budget
from viz_core.runtime.settings import env_float, env_int

_log = logging.getLogger(__name__)

UNREAD_LIMIT_BYTES = 8 * 2**20   # a websocket client may leave this much of its messages unread, then it is closed
REAP_SECONDS = 15.0              # how often ended sessions are shut down
UPLOAD_STALL_SECONDS = 20.0      # an upload body that sends nothing for this long is cut (a slow phone sends KBs/s)
WS_SEND = "websocket.send"


# ---------------------------------------------------------------- Nagle's algorithm off
class NoDelay:
    """ASGI middleware: a websocket's TCP socket sends each message at once (TCP_NODELAY), instead of holding a small
    one until the client has acknowledged the last (Nagle's algorithm, on for Streamlit's sockets: module docstring).

    The socket is the transport's of the ASGI server's protocol object, whose `send` the middleware is given (uvicorn's
    websocket protocols keep it as `.transport`). Where there is none (another server, a Unix socket) nothing is
    changed."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "websocket":
            no_delay(send)
        return await self.app(scope, receive, send)


def no_delay(send) -> bool:
    """Set TCP_NODELAY on the TCP socket behind an ASGI `send` (a bound method of the server's protocol object, which
    holds an asyncio transport); True if it is set now."""
    transport = getattr(getattr(send, "__self__", None), "transport", None)
    sock = transport.get_extra_info("socket") if hasattr(transport, "get_extra_info") else None
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6) or sock.type != socket.SOCK_STREAM:
        return False
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    except OSError:  # (a socket closing under us: nothing to speed up)
        return False


# ---------------------------------------------------------------- unread websocket messages
class UnreadLimit:
    """ASGI middleware: a websocket client that leaves more than `limit` bytes of messages unread is disconnected."""

    def __init__(self, app, limit: int = UNREAD_LIMIT_BYTES):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "websocket":
            return await self.app(scope, receive, send)
        outbox = _Outbox(send, self.limit)
        try:
            await self.app(scope, outbox.receive(receive), outbox.send)
        finally:
            await outbox.close()


class _Outbox:
    """The messages of one connection on their way out: `send` queues them at once (the app never waits on a
    slow client), a task writes them to the client one by one, and `receive` reports a disconnect to the app as
    soon as the unread bytes pass the limit."""

    def __init__(self, send, limit: int):
        self._send, self.limit = send, limit
        self.queue: collections.deque = collections.deque()
        self.unread = 0                     # bytes queued here and not yet taken by the client
        self.ready = asyncio.Event()        # the queue has something to write
        self.gone = asyncio.Event()         # over the limit, or the client went away: the connection ends
        self._writer: asyncio.Task | None = None

    async def send(self, message) -> None:
        if message["type"] == "websocket.accept" and not self.queue:
            return await self._send(message)  # the handshake goes out first, nothing is queued before it
        if self.gone.is_set():
            return  # the connection is ending: what the app still sends is dropped
        size = len(message.get("bytes") or b"") + len(message.get("text") or "") if message["type"] == WS_SEND else 0
        if self.unread + size > self.limit:
            _log.warning("closing a websocket whose client left more than %d MB unread", self.limit // 2**20)
            self.queue.clear()
            self.unread = 0
            self.gone.set()
            return
        self.queue.append((message, size))
        self.unread += size
        self.ready.set()
        if self._writer is None:
            self._writer = asyncio.create_task(self._write(), name="unread-limit-writer")
        await asyncio.sleep(0)  # let the writer hand it on before the app queues the next one

    async def _write(self) -> None:
        try:
            while not self.gone.is_set():
                if not self.queue:
                    self.ready.clear()
                    await self.ready.wait()
                    continue
                message, size = self.queue[0]
                await self._send(message)
                if self.queue and self.queue[0][0] is message:
                    self.queue.popleft()
                    self.unread -= size
        except Exception:  # noqa: BLE001 - the client went away: the app learns it from receive()
            self.gone.set()

    def receive(self, receive):
        async def wrapped():
            if self.gone.is_set():
                return {"type": "websocket.disconnect", "code": 1008}
            incoming = asyncio.ensure_future(receive())
            ended = asyncio.ensure_future(self.gone.wait())
            await asyncio.wait({incoming, ended}, return_when=asyncio.FIRST_COMPLETED)
            if incoming.done():
                ended.cancel()
                return incoming.result()
            incoming.cancel()
            return {"type": "websocket.disconnect", "code": 1008}
        return wrapped

    async def close(self) -> None:
        """After the app has finished: let what is queued go out while the client reads, else drop it."""
        if self._writer is not None and not self.gone.is_set() and self.queue:
            try:
                await asyncio.wait_for(asyncio.shield(self._drained()), timeout=2.0)
            except asyncio.TimeoutError:
                pass
        self.gone.set()
        self.queue.clear()
        self.unread = 0
        if self._writer is not None:
            self._writer.cancel()

    async def _drained(self) -> None:
        while self.queue and not self.gone.is_set():
            await asyncio.sleep(0.05)


# ---------------------------------------------------------------- uploads
UPLOAD_PATH = re.compile(r"/_stcore/upload_file/([^/]+)/([^/]+)/?$")


class UploadLimit:
    """ASGI middleware: refuse an upload that would give one session too many files or bytes, or the server too
    many bytes, before its body is read (HTTP 413). Limits from ATTN_MAX_UPLOAD_FILES (default 4 per session),
    ATTN_MAX_UPLOAD_MB (64 per session) and ATTN_MAX_UPLOADS_TOTAL_MB (128 for the server: two of the largest
    checkpoints at once; uploads are held for seconds, see forget_uploads)."""

    def __init__(self, app, files: int | None = None, session_mb: int | None = None, total_mb: int | None = None):
        self.app = app
        self.max_files = files or env_int("ATTN_MAX_UPLOAD_FILES", 4)
        self.max_session = (session_mb or env_int("ATTN_MAX_UPLOAD_MB", 64)) * 2**20
        self.max_total = (total_mb or env_int("ATTN_MAX_UPLOADS_TOTAL_MB", 128)) * 2**20
        self._lock = threading.Lock()
        self._in_flight: dict[str, list[int]] = collections.defaultdict(list)  # session -> sizes being received

    async def __call__(self, scope, receive, send):
        match = UPLOAD_PATH.search(scope.get("path", "")) if scope["type"] == "http" else None
        if match is None or scope.get("method") != "PUT":
            return await self.app(scope, receive, send)
        session_id = match.group(1)
        size = _content_length(scope) or self._max_file()
        try:  # the server-wide memory budget (it may collect first: not on the event loop)
            await asyncio.to_thread(budget.admit, size, "an upload")
        except budget.ServerBusy:
            await _discard_body(receive, self._max_file() + 2**20)
            return await _refuse(send, BUSY, status=503)
        refusal = self._admit(session_id, match.group(2), size)
        if refusal:
            await _discard_body(receive, self._max_file() + 2**20)  # so the client reads a clean 413, not a reset
            return await _refuse(send, refusal)
        stall = _Stall(receive, send, env_float("ATTN_UPLOAD_STALL_S", UPLOAD_STALL_SECONDS))
        try:
            await self.app(scope, stall.receive, stall.send)
            if stall.status == 204:
                _held_since(session_id, match.group(2))
        except Exception:
            if not stall.stalled:
                raise
            await stall.refuse()
        finally:
            with self._lock:
                flights = self._in_flight[session_id]
                flights.remove(size)
                if not flights:
                    del self._in_flight[session_id]

    def _admit(self, session_id: str, file_id: str, size: int) -> str:
        """'' if the upload may go on (and it is then counted as in flight), else why not."""
        stored = _stored_files()
        with self._lock:
            mine = {fid: n for fid, n in stored.get(session_id, {}).items() if fid != file_id}  # a re-upload replaces
            flights = self._in_flight[session_id]
            total = sum(sum(files.values()) for files in stored.values()) + sum(map(sum, self._in_flight.values()))
            if len(mine) + len(flights) + 1 > self.max_files:
                why = f"at most {self.max_files} files per visitor"
            elif sum(mine.values()) + sum(flights) + size > self.max_session:
                why = f"at most {self.max_session // 2**20} MB of files per visitor"
            elif total + size > self.max_total:
                why = "the server holds as many uploaded files as it can: try again in a few minutes"
            else:
                flights.append(size)
                return ""
            if not flights:
                del self._in_flight[session_id]
            return why

    @staticmethod
    def _max_file() -> int:
        from streamlit import config
        return int(config.get_option("server.maxUploadSize")) * 2**20


class _Stall:
    """An upload's ASGI channel with a deadline between body chunks: past it, the app is told that the client has
    gone (it stops reading), and the client gets HTTP 408 if nothing was answered yet."""

    def __init__(self, receive, send, seconds: float):
        self._receive, self._send, self.seconds = receive, send, seconds
        self.stalled, self.status = False, None

    async def receive(self):
        try:
            return await asyncio.wait_for(self._receive(), self.seconds)
        except asyncio.TimeoutError:
            self.stalled = True
            return {"type": "http.disconnect"}

    async def send(self, message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
        await self._send(message)

    async def refuse(self) -> None:
        if self.status is None:
            self.status = 408
            body = b"Upload cut: no data arrived for a while; upload the file again."
            await self._send({"type": "http.response.start", "status": 408,
                              "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                          (b"content-length", str(len(body)).encode()), (b"connection", b"close")]})
            await self._send({"type": "http.response.body", "body": body})


_HELD: dict[tuple[str, str], float] = {}  # (session id, file id) -> when its upload was stored (time.monotonic)
_HELD_LOCK = threading.Lock()


def _held_since(session_id: str, file_id: str) -> None:
    with _HELD_LOCK:
        _HELD[(session_id, file_id)] = time.monotonic()


def forget_uploads(files) -> None:
    """Drop these UploadedFiles of the running session from Streamlit's store: the page has read them and keeps
    what it needs, so their bytes go back to the server's upload budget and to the system now, not when the session
    ends. Each file is emptied (this session's own object, not shared). The uploader still lists them in the
    browser; a later run gets no file from it and no change is reported."""
    from streamlit.runtime import Runtime
    from streamlit.runtime.scriptrunner import get_script_run_ctx
    ctx = get_script_run_ctx()
    if ctx is None or not Runtime.exists():
        return
    manager = Runtime.instance().uploaded_file_mgr
    for f in files or []:
        manager.remove_file(ctx.session_id, f.file_id)
        f.truncate(0)  # the widget's value keeps this object until the next run: let go of its bytes now
        with _HELD_LOCK:
            _HELD.pop((ctx.session_id, f.file_id), None)


def drop_held_uploads(hold_s: float | None = None, now: float | None = None) -> int:
    """Drop every stored upload held longer than hold_s (ATTN_UPLOAD_HOLD_S, default 60 s): a page reads a file in
    the run its upload starts, so a file still there a minute later is one nobody reads. Returns how many."""
    from streamlit.runtime import Runtime
    if not Runtime.exists():
        return 0
    hold_s = env_float("ATTN_UPLOAD_HOLD_S", 60.0) if hold_s is None else hold_s
    now = time.monotonic() if now is None else now
    manager = Runtime.instance().uploaded_file_mgr
    stored = {(sid, fid) for sid, files in list(getattr(manager, "file_storage", {}).items()) for fid in list(files)}
    dropped = 0
    with _HELD_LOCK:
        for key in list(_HELD):
            if key not in stored:
                del _HELD[key]  # read and forgotten, or its session ended
        for key in stored:
            since = _HELD.setdefault(key, now)  # a file stored past the middleware counts from now
            if now - since > hold_s:
                manager.remove_file(*key)
                del _HELD[key]
                dropped += 1
    return dropped


def _content_length(scope) -> int:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return max(0, int(value))
            except ValueError:
                return 0
    return 0


def _stored_files() -> dict[str, dict[str, int]]:
    """session id -> {file id: bytes} of the files Streamlit holds now ({} outside a running server)."""
    from streamlit.runtime import Runtime
    if not Runtime.exists():
        return {}
    storage = getattr(Runtime.instance().uploaded_file_mgr, "file_storage", None) or {}
    return {sid: {fid: len(rec.data) for fid, rec in list(files.items())} for sid, files in list(storage.items())}


async def _discard_body(receive, limit: int) -> None:
    """Read and drop a request's body, at most `limit` bytes (nothing of it is kept)."""
    seen = 0
    while seen <= limit:
        message = await receive()
        if message["type"] != "http.request":
            return
        seen += len(message.get("body") or b"")
        if not message.get("more_body"):
            return


BUSY = "the server is busy (its memory budget is spent): try again in a minute"


async def _refuse(send, why: str, status: int = 413) -> None:
    body = f"Upload refused: {why}.".encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def middleware() -> list:
    """The middleware of the st.App (outermost first)."""
    from starlette.middleware import Middleware

    from .chart import PlotlyAsset
    # (NoDelay first: it needs the server's own `send`, before another middleware wraps it)
    return [Middleware(NoDelay), Middleware(PlotlyAsset), Middleware(UnreadLimit), Middleware(UploadLimit)]


# ---------------------------------------------------------------- ended sessions
def reap_sessions() -> int:
    """Shut down the sessions whose reconnection time is up, and drop uploads of sessions that no longer exist;
    returns how many sessions were shut down. Runs on the server's event loop (Streamlit's own session calls do)."""
    from streamlit.runtime import Runtime
    if not Runtime.exists():
        return 0
    runtime = Runtime.instance()
    cache = getattr(getattr(getattr(runtime, "_session_mgr", None), "_session_storage", None), "_cache", None)
    expired = cache.expire() if hasattr(cache, "expire") else []
    for _, info in expired:
        info.session.shutdown()  # its uploads, download data and script runner go with it
    uploads = runtime.uploaded_file_mgr
    for session_id in list(getattr(uploads, "file_storage", {})):
        if not runtime.is_active_session(session_id) and runtime.get_app_session(session_id) is None:
            uploads.remove_session_files(session_id)
    return len(expired)


def newly_empty(emptied: list[bool]) -> bool:
    """True the first time the server is found with no session left (ended, or past its reconnection time) since a
    session was there; emptied[0] remembers it until a session comes. Runs on the event loop, as Streamlit's session
    calls do."""
    from streamlit.runtime import Runtime

    mgr = getattr(Runtime.instance(), "_session_mgr", None) if Runtime.exists() else None
    if mgr is None or not hasattr(mgr, "num_sessions"):
        return False
    if mgr.num_sessions() > 0:
        emptied[0] = False
        return False
    if emptied[0]:
        return False
    emptied[0] = True
    return True


async def _reaper() -> None:
    emptied = [True]  # nothing to empty before the first visitor
    while True:
        await asyncio.sleep(env_float("ATTN_REAP_S", REAP_SECONDS))
        try:
            reap_sessions()
            drop_held_uploads()
            if newly_empty(emptied):  # the class has left: nobody shares the caches, the memory goes back
                from . import memory
                await asyncio.to_thread(memory.idle_release)
        except Exception:  # noqa: BLE001 - the next round tries again; the server goes on
            _log.exception("reaping ended sessions failed")


@contextlib.asynccontextmanager
async def lifespan(_app):
    """st.App lifespan: at server start, malloc tuned for a server, the model warm-up (warmup.py), the memory watcher
    (memory.py), the watcher of visitors who left (leaving.py) and the session reaper; the reaper stops with the
    server. `kill -USR1 <server pid>` writes every thread's stack to the server's log (what is it busy with?)."""
    from . import leaving, memory, warmup

    _stacks_on_signal()
    memory.tune_malloc()  # before the warm-up's and the sessions' threads allocate
    warmup.start()
    memory.watch()
    leaving.watch(asyncio.get_running_loop())
    reaper = asyncio.create_task(_reaper(), name="session-reaper")
    try:
        yield
    finally:
        reaper.cancel()


def _stacks_on_signal() -> None:
    """SIGUSR1 -> every Python thread's stack on stderr (the server's log), written by the interpreter's own
    handler (faulthandler), so it answers even while every thread computes. POSIX only."""
    import faulthandler
    import signal
    if hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, all_threads=True, chain=False)
