"""Shared fixtures: AppTest runner for pages."""
from __future__ import annotations

import asyncio
import base64
import json
import threading
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[1] / "app.py")
APP_TIMEOUT_S = 120  # AppTest's default of 3 s is far too short for a first model load on a 2-core machine


def run_page(page: str, query: dict | None = None, timeout: float = APP_TIMEOUT_S) -> AppTest:
    """Run app.py straight on app_pages/<page>.py with the given query parameters; return the finished AppTest."""
    at = AppTest.from_file(APP, default_timeout=timeout)
    for k, v in (query or {}).items():
        at.query_params[k] = v
    if page != "attention":  # the default page; switching first avoids loading the model for other pages
        at.switch_page(f"app_pages/{page}.py")
    at.run()
    return at


def run_async(coro):
    """asyncio.run(coro) on a thread of its own. Playwright's sync API leaves an event loop running on the main
    thread once a browser test has started, and asyncio.run refuses to start a second loop on that thread."""
    box = {}

    def target():
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as e:  # noqa: BLE001 - re-raised on the caller's thread
            box["error"] = e
    thread = threading.Thread(target=target, name="run_async")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def charts(at) -> list:
    """The page's charts in page order: the house chart elements (app_pages/_ui/chart.py) and st.plotly_chart (the
    charts that report clicks). `at` is an AppTest or a block of one (a tab, a column)."""
    from app_pages._ui.chart import NAME
    root = at._tree if isinstance(at, AppTest) else at
    return [e for e in root if e.type == "plotly_chart"
            or (e.type == "bidi_component" and e.proto.component_name == NAME)]


def markdowns(at) -> list[str]:
    """The page's markdown texts in page order: st.markdown's and the prose element's (app_pages/_ui/paragraphs.py,
    its markdown as written). `at` is an AppTest or a block of one."""
    from app_pages._ui.paragraphs import NAME
    root = at._tree if isinstance(at, AppTest) else at
    return [json.loads(e.proto.json)["md"] if e.type == "bidi_component" else e.value for e in root
            if e.type == "markdown" or (e.type == "bidi_component" and e.proto.component_name == NAME)]


def md_tables(at) -> list:
    """The tables of the page (ui.table, ui.tables) as DataFrames of strings, in page order: those of the table
    element (app_pages/_ui/static_table.py) as its data has them, and markdown ones with each cell unescaped
    (ui.table escapes every cell with plain_md)."""
    import re

    import pandas as pd

    def plain(cell: str) -> str:
        """A cell's text as shown: our own markup (bold, :red[...], a code span) dropped, escapes undone."""
        code = re.fullmatch(r"(`+) (.*) \1", cell)
        if code:
            return code[2].replace(r"\|", "|")
        cell = re.sub(r"(?<!\\)\*\*", "", cell)
        cell = re.sub(r"(?<!\\):[a-z]+\[(.*?)(?<!\\)\]", r"\1", cell)
        cell = re.sub(r" (`+) (.*?) \1", lambda m: " " + m[2].replace(r"\|", "|"), cell)
        return re.sub(r"\\(.)", r"\1", cell)

    def cells(line: str) -> list[str]:
        parts = re.split(r"(?<!\\)\|", line.strip())[1:-1]   # split on unescaped pipes; drop the outer ones
        return [plain(p.strip()) for p in parts]

    from app_pages._ui.static_table import NAME

    out = []
    root = at._tree if isinstance(at, AppTest) else at
    for md in root:
        if md.type == "bidi_component" and md.proto.component_name == NAME:
            out += [pd.DataFrame(t["rows"], columns=t["columns"]) for t in json.loads(md.proto.json)["tables"]]
            continue
        if md.type != "markdown":
            continue
        first, *more = str(md.value).split("\n\n| ")  # ui.tables: several tables in one element, a blank line apart
        for part in [first, *("| " + m for m in more)]:
            lines = part.split("\n")
            if lines[0].startswith("**") and len(lines) > 2 and not lines[1]:
                lines = lines[2:]  # a table's title (ui.table(..., title=))
            if len(lines) >= 2 and lines[0].startswith("| ") and set(lines[1].replace(" ", "")) <= {"|", "-"}:
                out.append(pd.DataFrame([cells(x) for x in lines[2:]], columns=cells(lines[0])))
    return out


def chart_spec(element) -> dict:
    """One chart's figure as data (what plotly.js receives), whichever JSON engine wrote it: plotly uses orjson when
    it is importable (non-ASCII as is, no spaces) and json otherwise (\\u escapes, spaces)."""
    return json.loads(element.proto.spec if element.type == "plotly_chart" else element.proto.bytes)


def figures(at) -> list[dict]:
    """The page's plotly figures as data, in page order (charts, chart_spec)."""
    return [chart_spec(chart) for chart in charts(at)]


def plotly_array(value) -> np.ndarray:
    """A figure array as plotly.js receives it: a list, or a typed array {dtype, bdata (base64), shape}."""
    if isinstance(value, dict):
        shape = [int(n) for n in str(value.get("shape", "-1")).split(",")]
        return np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"])).reshape(shape)
    return np.array(value, dtype=float)


def figure_text(at: AppTest) -> str:
    """Every figure's data as one canonical JSON text (compact, non-ASCII as is), to look for a label in."""
    return " ".join(json.dumps(fig, ensure_ascii=False, separators=(",", ":")) for fig in figures(at))


def assert_clean(at: AppTest) -> None:
    """No exception element and no uncaught error on the page."""
    assert not at.exception, [e.value for e in at.exception]


@pytest.fixture(scope="module")
def one_torch_thread():
    """Small models: one torch thread is as fast, and far faster on a shared, busy 2-core machine. Use it with
    `pytestmark = pytest.mark.usefixtures("one_torch_thread")`."""
    import torch
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def page_runner():
    return run_page


def widget(at: AppTest, kind: str, key: str):
    """The widget of a ui.* control by its '<page>.<param>' key. Option widgets (selectbox, radio, multiselect...)
    are keyed per language ('<page>.<param>.<lang>', see app_pages/_ui/state.py): whichever language is shown."""
    finder = getattr(at, kind)
    for k in (key, f"{key}.en", f"{key}.zh"):
        try:
            return finder(key=k)
        except KeyError:
            continue
    raise KeyError(key)


def page_links(at: AppTest) -> list[tuple[str, dict[str, str], str]]:
    """(page stem, query parameters, label) of every page link in the page's main area. The default page
    (Attention) is served at the root address: its links name no page."""
    from urllib.parse import parse_qsl

    from app_pages._ui.nav import DEFAULT_PAGE
    return [(el.proto.page.rsplit("/", 1)[-1].removesuffix(".py") or DEFAULT_PAGE,
             dict(parse_qsl(el.proto.query_string)), el.proto.label) for el in at.main.get("page_link")]


def page_store(at: AppTest, page: str) -> dict[str, str]:
    """The values a page's controls hold (app_pages/_ui/state.py's store), as their address text."""
    from app_pages._ui.state import STORE, to_text
    return {k: to_text(v) for k, v in at.session_state[STORE].get(page, {}).items()}


def assert_opens_in_state(page: str, params: dict[str, str], lang: str = "en", from_page: str = "start") -> AppTest:
    """Follow a link the way a visitor does (from_page open first, then the link's parameters in the address and a
    switch to `page`), and check that every control the link names holds the link's value: a parameter the page
    does not know, or a value it refuses (it falls back to its default), fails here."""
    extra = {"lang": lang} if lang != "en" else {}
    at = run_page(from_page, extra)
    assert_clean(at)
    at.query_params.clear()
    for k, v in (params | extra).items():
        at.query_params[k] = v
    at.switch_page(f"app_pages/{page}.py").run()
    assert_clean(at)
    held = page_store(at, page)
    for k, v in params.items():
        assert held.get(k) == v, f"{page}: {k}={v} was asked, the page holds {held.get(k)!r}"
    return at


@pytest.fixture(scope="session")
def real_decoders():
    """The packaged real decoders, converted into their cache (once per machine: about 2 minutes for Gemma, 1 for
    SmolLM2 on 2 cores; a later session finds the cache). Returns the ids of those installed."""
    from viz_core.pretrained import packaged
    ready = []
    for d in packaged.DECODERS:
        if packaged.installed(d):
            packaged.ensure(d)
            ready.append(d.id)
    return ready


@pytest.fixture
def fake_gpu(monkeypatch):
    """The pages as a server with a CUDA GPU would draw them (nothing runs on it)."""
    from app_pages._ui import device as devices
    from viz_core.runtime.device import DeviceInfo
    monkeypatch.setattr(devices, "has_gpu", lambda: True)
    monkeypatch.setattr(devices, "describe", lambda device, forced=False: DeviceInfo(
        "cpu" if forced else "cuda", "CPU" if forced else "Fake GPU", "forced" if forced else "gpu",
        2 ** 30 if forced else 40 * 2 ** 30, None if forced else 80 * 2 ** 30, not forced))
    devices.gpu_present.clear(), devices.info.clear()
    yield
    devices.gpu_present.clear(), devices.info.clear()
