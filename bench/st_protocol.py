"""A Streamlit session without a browser: the websocket protocol a browser tab speaks, for load tests (bench_load.py).

A browser tab is one websocket to ws://HOST:PORT/_stcore/stream (subprotocol "streamlit"). The tab sends protobuf
BackMsg messages (streamlit.proto.BackMsg_pb2): a `rerun_script` ClientState for the first run (the address's query
string and page) and for every widget change or page switch; the server answers with ForwardMsg messages
(streamlit.proto.ForwardMsg_pb2): new_session at the start of a full run, navigation (the pages), one delta per
element, page_info_changed when the script writes the address, auto_rerun for a fragment with run_every, and
script_finished at the end. This module keeps what a browser keeps between runs and nothing more:

- the elements of the last run, by delta path (so a widget's id can be found by its key and its proto read);
- the widget states to send back: like the frontend, every rerun carries the values this session has set, minus
  the widgets the last full run did not draw; a button press is a trigger sent once;
- the query string the script last wrote (page_info_changed) and the page shown (new_session's page_script_hash);
- the forward-message cache: hashes of cacheable messages of the last `CACHE_RUNS` full runs are sent with each
  rerun (as the browser does), the server answers those with references, resolved here from the cache;
- fragments that asked for auto reruns (the browser's timer): `auto_reruns=True` sends them every interval.

Only streamlit.proto classes are used (public protobuf definitions of the installed version), no private API.
Loopback only: `Session` refuses any host but 127.0.0.1 / localhost / ::1.
"""
from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState

FINISHED = ForwardMsg.ScriptFinishedStatus
CACHE_RUNS = 2  # the frontend forgets cached messages not used for this many runs (server maxCachedMessageAge = 2)
LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}


class ProtocolError(RuntimeError):
    """The page is not what the caller expected (no such widget, link or page)."""


class SessionLost(ConnectionError):
    """The connection closed, or the server sent something this session cannot follow."""


@dataclass
class Run:
    """One script run as this session saw it."""
    kind: str                       # "full" or "fragment"
    sent: float                     # perf_counter when the BackMsg went out (or the first message, for server reruns)
    finished: float | None = None
    status: str | None = None       # FINISHED_SUCCESSFULLY, FINISHED_FRAGMENT_RUN_SUCCESSFULLY, ...
    n_msgs: int = 0
    n_bytes: int = 0
    largest: int = 0                # bytes of the largest message of the run (one websocket frame)
    n_refs: int = 0                 # messages the server sent as references to this session's cache
    started: bool = False           # its new_session arrived
    fragment_ids: tuple = ()        # the fragments a fragment run redraws
    charts_at: list = field(default_factory=list)  # perf_counter when each chart arrived, in order (the plotly.js
    #                                                preloader of a session's first run is not a chart)

    @property
    def latency(self) -> float | None:
        return None if self.finished is None else self.finished - self.sent


@dataclass
class Element:
    type: str                       # the Element oneof field: "selectbox", "plotly_chart", "markdown", ...
    proto: object                   # that field's message
    fragment_id: str = ""           # the fragment that drew it ("" for the page itself)
    run: object = None              # the Run that drew it

    @property
    def id(self) -> str:
        return getattr(self.proto, "id", "") or ""

    @property
    def figure(self) -> dict:
        """A chart's plotly figure as the browser gets it (a chart element: CHART_TYPES)."""
        return json.loads(self.proto.spec if self.type == "plotly_chart" else self.proto.bytes)


# the elements that draw a chart: st.plotly_chart and the app's own chart element (app_pages/_ui/chart.py, by name:
# its plotly.js preloader is a bidi_component too)
CHART_TYPES = ("plotly_chart", "bidi_component")
CHART_COMPONENT = "attention_explorer_chart"
PRELOAD_KEY = "ae_plotly_preload"  # app_pages/_ui/chart.py: the hidden element that starts loading plotly.js


@dataclass
class Session:
    """One browser tab's worth of protocol. Use `async with Session(url) as s: await s.open('/', 'lang=en')`."""
    url: str                                        # http://127.0.0.1:PORT
    auto_reruns: bool = False                       # answer the server's auto_rerun requests like a browser timer
    timeout: float = 60.0                           # seconds one run may take
    headers: dict = field(default_factory=dict)     # HTTP headers of the websocket's upgrade request (a load
    #                                                 balancer's affinity cookie: {"Cookie": "AE_REPLICA=r1"})
    elements: dict[tuple, Element] = field(default_factory=dict)   # delta path -> element, of the last full run
    pages: dict[str, str] = field(default_factory=dict)            # url_pathname -> page_script_hash
    page_hash: str = ""
    session_id: str = ""                            # the server's id of this session (upload URLs name it)
    query: str = ""
    runs: list[Run] = field(default_factory=list)

    def __post_init__(self):
        parts = urlsplit(self.url)
        if parts.hostname not in LOOPBACK:
            raise ValueError(f"loopback only: {self.url}")
        self._ws_url = f"ws://{parts.netloc}/_stcore/stream"
        self._ws = None
        self._reader: asyncio.Task | None = None
        self._widgets: dict[str, WidgetState] = {}
        self._run: Run | None = None              # the run in progress (full or fragment)
        self._finished = asyncio.Event()
        self._cache: dict[str, tuple[int, ForwardMsg]] = {}  # hash -> (full run index, message)
        self._offered: set[str] = set()           # the hashes sent with the last rerun: the server may refer to them
        self._full_runs = 0
        self._fresh: dict[tuple, Element] = {}    # elements of the full run in progress
        self._auto: dict[str, asyncio.Task] = {}  # fragment id -> its timer
        self._closed = False
        self.error: BaseException | None = None

    # ------------------------------------------------------------ connection
    async def __aenter__(self) -> "Session":
        await self.connect()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def connect(self) -> None:
        self._ws = await websockets.connect(self._ws_url, subprotocols=["streamlit"], max_size=None,
                                            open_timeout=self.timeout, ping_interval=None, compression=None,
                                            additional_headers=self.headers or None)
        self._reader = asyncio.create_task(self._read(), name="st-session-reader")

    async def close(self) -> None:
        self._closed = True
        for task in self._auto.values():
            task.cancel()
        if self._ws is not None:
            await self._ws.close()
        if self._reader is not None:
            self._reader.cancel()
            try:
                await self._reader
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - closing anyway
                pass

    # ------------------------------------------------------------ what a person does
    async def open(self, path: str = "/", query: str = "") -> Run:
        """The first run of a tab opened at http://HOST/path?query (the browser's first rerun_script)."""
        self.query = query.lstrip("?")
        return await self.rerun(page_name=path.strip("/"))

    async def switch_page(self, url_pathname: str, query: str | None = None) -> Run:
        """A sidebar link (st.page_link): a rerun with the target page's hash and the link's query string."""
        if url_pathname not in self.pages:
            raise ProtocolError(f"no page {url_pathname!r} (pages: {sorted(self.pages)})")
        if query is not None:
            self.query = query.lstrip("?")
        return await self.rerun(page_script_hash=self.pages[url_pathname])

    async def set_widget(self, widget_id: str, **value) -> Run:
        """Change one widget (e.g. string_value="3") and wait for the rerun it starts."""
        self._set(widget_id, **value)
        return await self.rerun()

    async def click(self, widget_id: str) -> Run:
        """Press a button: a trigger, sent with this rerun only."""
        return await self.rerun(triggers=[widget_id])

    async def rerun(self, page_script_hash: str | None = None, page_name: str = "", triggers=(),
                    fragment_id: str = "", is_auto_rerun: bool = False, wait: bool = True) -> Run:
        """Send a rerun_script BackMsg as the frontend does and (wait=True) wait for its script_finished. A fragment
        rerun sent while another run is in flight gets its own Run once its messages start (wait=False there)."""
        msg = BackMsg()
        cs = msg.rerun_script
        cs.query_string = self.query
        cs.page_script_hash = self.page_hash if page_script_hash is None else page_script_hash
        cs.page_name = page_name if not cs.page_script_hash else ""
        cs.fragment_id = fragment_id
        cs.is_auto_rerun = is_auto_rerun
        cs.widget_states.widgets.extend(self._widgets.values())
        for wid in triggers:
            cs.widget_states.widgets.add(id=wid, trigger_value=True)
        self._offered = set(self._cache)
        cs.cached_message_hashes.extend(self._offered)
        cs.context_info.timezone = "UTC"
        cs.context_info.locale = "en-US"
        cs.context_info.url = f"{self.url}/{page_name}" + (f"?{self.query}" if self.query else "")
        cs.context_info.color_scheme = "light"
        if self._run is not None and self._run.kind == "fragment" and not fragment_id:
            self._run = None  # a full rerun supersedes a fragment run in flight
        run = Run("fragment" if fragment_id else "full", time.perf_counter())
        if not fragment_id or self._run is None:  # (a fragment rerun behind a run in flight is timed from its start)
            self._run = run
            self._finished.clear()
        await self._send(msg)
        if wait:
            await self.wait(run)
        return run

    async def wait(self, run: Run) -> Run:
        end = time.monotonic() + self.timeout
        while run.finished is None:
            if self.error is not None:
                raise SessionLost(f"connection lost: {self.error!r}")
            left = end - time.monotonic()
            if left <= 0:
                raise asyncio.TimeoutError(f"no script_finished within {self.timeout:.0f} s")
            self._finished.clear()
            try:
                await asyncio.wait_for(self._finished.wait(), min(left, 1.0))
            except asyncio.TimeoutError:
                pass
        return run

    # ------------------------------------------------------------ what the page shows
    def widget(self, key: str, kind: str | None = None) -> Element:
        """The element of the last full run whose widget key is `key` (ids end in '-<key>')."""
        for el in self.elements.values():
            if el.id.endswith("-" + key) and (kind is None or el.type == kind):
                return el
        raise ProtocolError(f"no widget with key {key!r} on page {self.page_hash[:8]}")

    def links(self) -> dict[str, tuple[str, str]]:
        """The page links drawn (st.page_link): label -> (page_script_hash, query string)."""
        return {el.proto.label: (el.proto.page_script_hash, el.proto.query_string) for el in self.find("page_link")}

    async def follow(self, label: str) -> Run:
        """Click a page link: a rerun with its page's hash and its query string, as the frontend's onPageChange."""
        links = self.links()
        if label not in links:
            raise ProtocolError(f"no link {label!r} (links: {sorted(links)})")
        page_hash, query = links[label]
        for fid in list(self._auto):
            self._stop_auto(fid)
        self.query = query.lstrip("?")
        return await self.rerun(page_script_hash=page_hash)

    def find(self, kind: str) -> list[Element]:
        return [el for el in self.elements.values() if el.type == kind]

    def charts(self) -> list[Element]:
        """The charts of the last full run, whichever element draws them (CHART_TYPES)."""
        return [el for el in self.elements.values() if el.type == "plotly_chart"
                or (el.type == "bidi_component" and el.proto.component_name == CHART_COMPONENT)]

    def text(self) -> str:
        """Markdown, headings, alerts, captions and progress labels of the last full run, joined (to check what the
        page says)."""
        return _text(self.elements.values())

    def text_so_far(self) -> str:
        """The same of the full run in progress: what the page says while it computes (a progress bar's label)."""
        return _text(self._fresh.values())

    # ------------------------------------------------------------ internals
    def _set(self, widget_id: str, **value) -> None:
        (name, v), = value.items()
        state = WidgetState(id=widget_id)
        setattr(state, name, v)
        self._widgets[widget_id] = state

    async def _send(self, msg: BackMsg) -> None:
        if self._ws is None:
            raise ProtocolError("not connected")
        await self._ws.send(msg.SerializeToString())

    async def _read(self) -> None:
        try:
            async for data in self._ws:
                msg = ForwardMsg()
                msg.ParseFromString(data)
                self._handle(msg, len(data))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - reported to the waiter
            self.error = exc
        else:
            if not self._closed:
                self.error = SessionLost("the server closed the connection")
        finally:
            self._finished.set()

    def _handle(self, msg: ForwardMsg, size: int) -> None:
        kind = msg.WhichOneof("type")
        if kind == "ref_hash":  # a message this session has cached: the server sent its hash only
            cached = self._cache.get(msg.ref_hash)
            if cached is None:
                self.error = SessionLost(f"reference to a message never received: {msg.ref_hash}")
                return
            self._cache[msg.ref_hash] = (self._full_runs, cached[1])
            delta_path = list(msg.metadata.delta_path)
            resolved = ForwardMsg()
            resolved.CopyFrom(cached[1])
            resolved.metadata.delta_path[:] = delta_path
            if self._run is not None:
                self._run.n_refs += 1
            msg, kind = resolved, resolved.WhichOneof("type")
        elif msg.metadata.cacheable and msg.hash:
            self._cache[msg.hash] = (self._full_runs, msg)
        run = self._run
        if kind == "new_session" and msg.metadata.run.fragment_ids:  # a fragment run starts: the page stays
            if run is None or (run.kind == "fragment" and run.started):
                run = self._run = Run("fragment", time.perf_counter())
            if run.kind == "fragment":  # (a full run we asked for may be waiting behind it: that one stays ours)
                run.started, run.fragment_ids = True, tuple(msg.metadata.run.fragment_ids)
        elif kind == "new_session":
            self.page_hash = msg.new_session.page_script_hash
            self.session_id = msg.new_session.initialize.session_id or self.session_id
            self._fresh = {}
            for fid in list(self._auto):  # the frontend clears its timers on every full run
                self._stop_auto(fid)
            self._full_runs += 1
            self._cache = {h: v for h, v in self._cache.items()
                           if v[0] >= self._full_runs - CACHE_RUNS or h in self._offered}
            if run is None or run.kind != "full" or run.started:  # a rerun the server started (st.rerun in a fragment)
                run = self._run = Run("full", time.perf_counter())
            run.started = True
        elif run is None:  # a fragment run (auto rerun) or a server-side rerun
            run = self._run = Run("fragment", time.perf_counter())
        run.n_msgs += 1
        run.n_bytes += size
        run.largest = max(run.largest, size)
        if kind == "navigation":
            self.pages = {p.url_pathname: p.page_script_hash for p in msg.navigation.app_pages}
            self.page_hash = msg.navigation.page_script_hash or self.page_hash
        elif kind == "page_info_changed":
            self.query = msg.page_info_changed.query_string
        elif kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
            el = msg.delta.new_element
            etype = el.WhichOneof("type")
            if etype:
                path = tuple(msg.metadata.delta_path)
                element = Element(etype, getattr(el, etype), msg.delta.fragment_id, run)
                if etype in CHART_TYPES and not element.id.endswith(PRELOAD_KEY):
                    run.charts_at.append(time.perf_counter())
                if run.kind == "full":
                    self._fresh[path] = element  # `elements` stays the last whole page until this run ends
                else:
                    self.elements[path] = element
        elif kind == "auto_rerun":
            self._start_auto(msg.auto_rerun.fragment_id, msg.auto_rerun.interval)
        elif kind == "stop_auto_rerun":
            for fid in msg.stop_auto_rerun.fragment_ids:
                self._stop_auto(fid)
        elif kind == "script_finished":
            status = FINISHED.Name(msg.script_finished)
            if run.kind == "full" and status not in ("FINISHED_SUCCESSFULLY", "FINISHED_WITH_COMPILE_ERROR"):
                return  # a fragment run or a run cut short by ours: the full run we wait for goes on
            run.finished, run.status = time.perf_counter(), status
            self.runs.append(run)
            self._run = None
            if status == "FINISHED_FRAGMENT_RUN_SUCCESSFULLY":  # what the fragment no longer draws goes away
                self.elements = {p: el for p, el in self.elements.items()
                                 if el.run is run or el.fragment_id not in run.fragment_ids}
            if run.kind == "full":
                self.elements = self._fresh
                drawn = {el.id for el in self._fresh.values() if el.id}
                self._widgets = {k: v for k, v in self._widgets.items() if k in drawn}  # the frontend's removeInactive
            self._finished.set()

    def _stop_auto(self, fragment_id: str) -> None:
        task = self._auto.pop(fragment_id, None)
        if task is not None:
            task.cancel()

    def _start_auto(self, fragment_id: str, interval: float) -> None:
        if fragment_id in self._auto:
            return  # the frontend keeps a timer whose interval did not change
        self._stop_auto(fragment_id)
        if self.auto_reruns and interval > 0:
            self._auto[fragment_id] = asyncio.create_task(self._auto_loop(fragment_id, interval))

    async def _auto_loop(self, fragment_id: str, interval: float) -> None:
        """The browser's timer (setInterval): a fragment rerun every `interval` seconds."""
        while not self._closed:
            await asyncio.sleep(interval)
            try:
                await self.rerun(fragment_id=fragment_id, is_auto_rerun=True, wait=False)
            except Exception:  # noqa: BLE001 - the connection is gone; the reader reports it
                return


def _text(elements) -> str:
    out = []
    for el in elements:
        body = getattr(el.proto, "body", None)
        if isinstance(body, str):
            out.append(body)
        elif el.type == "progress":
            out.append(el.proto.text)
    return "\n".join(out)
