"""The house chart element (app_pages/_ui/chart.py): plotly.min.js of the installed plotly is put in the static
folder once, the element is switched off where that cannot be done, and what a chart is sent is the figure's JSON with
the house config. What the browser draws from it (theme colours, width, a theme switch) is checked in Chromium
(tests/browser/test_chart.py)."""
import json
import os
from pathlib import Path

import plotly
import plotly.graph_objects as go
import pytest

from app_pages._ui import chart
from viz_core.plots.common import PLOTLY_CONFIG

SOURCE = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


@pytest.fixture
def static(tmp_path, monkeypatch):
    monkeypatch.setattr(chart, "STATIC_DIR", tmp_path / "static")
    monkeypatch.delenv("ATTN_PLOTLY_ELEMENT", raising=False)
    chart.available.cache_clear()
    yield tmp_path / "static"
    chart.available.cache_clear()


def test_the_pinned_plotly_js_is_copied_once_whole(static):
    assert chart.available()
    copy = static / chart.PLOTLY_JS
    assert copy.read_bytes() == SOURCE.read_bytes()
    assert [p.name for p in static.iterdir()] == [chart.PLOTLY_JS]  # no partial file left
    os.utime(copy, (0, 0))
    chart.available.cache_clear()
    assert chart.available() and copy.stat().st_mtime == 0  # a whole copy is kept


def test_a_copy_of_another_size_is_replaced(static):
    static.mkdir()
    (static / chart.PLOTLY_JS).write_text("half a file")
    assert chart.available()
    assert (static / chart.PLOTLY_JS).stat().st_size == SOURCE.stat().st_size


def test_a_folder_that_cannot_be_written_switches_the_element_off(static):
    static.write_text("a file where the folder should be")  # mkdir and the copy fail as on a read-only checkout
    assert chart.available() is False


def test_the_variable_switches_the_element_off(static, monkeypatch):
    monkeypatch.setenv("ATTN_PLOTLY_ELEMENT", "0")
    assert chart.available() is False
    assert not static.exists()


def test_a_chart_is_sent_its_figure_and_the_house_config():
    fig = go.Figure(go.Heatmap(z=[[1, 2], [3, 4]], x=["<b>a</b>", "猫"]))
    sent = json.loads(chart.to_bytes(fig.to_dict()))
    assert sent["config"] == chart.CONFIG and PLOTLY_CONFIG.items() <= chart.CONFIG.items()
    assert chart.CONFIG["showSendToCloud"] is False  # plotly.js would offer to send the figure to Chart Studio
    assert sent["data"] == json.loads(fig.to_json())["data"]
    assert sent["layout"] == json.loads(fig.to_json())["layout"]


def test_the_browser_side_replaces_every_placeholder_of_streamlits_template():
    """The JS maps #000001-#000040 (the colours Streamlit's plotly template leaves to the browser); the template must
    not use others (a new Streamlit with more placeholders would show them as near-black)."""
    import re

    import plotly.io as pio
    used = set(re.findall(r"#0000[0-4]\d", json.dumps(pio.templates["streamlit"].to_plotly_json())))
    mapped = {f"#{n:06d}" for n in [*range(1, 31), *range(32, 41)]}
    assert used and used <= mapped, sorted(used - mapped)
    for first in ("put(1,", "put(11,", "put(21,", "put(32,"):
        assert first in chart.JS


def test_a_selectable_payload_is_the_same_figure_with_clicks_reported():
    fig = go.Figure(go.Scatter(x=[1, 2], y=[3, 4], text=["}", '"}']))  # braces and quotes inside the figure
    payload = chart.to_bytes(fig.to_dict())
    assert json.loads(chart.selectable(payload)) == {**json.loads(payload), "select": True}
    assert "select" not in json.loads(payload)


# ---------------------------------------------------------------- plotly.js sent gzipped once (PlotlyAsset)
def test_the_gzipped_copy_is_written_once_and_reads_back_as_plotly_js(static):
    import gzip
    target = chart.compress()
    assert target == static / chart.GZ_NAME and plotly.__version__ in target.name
    assert gzip.decompress(target.read_bytes()) == SOURCE.read_bytes()
    assert sorted(p.name for p in static.iterdir()) == sorted([chart.PLOTLY_JS, chart.GZ_NAME])  # no partial file
    os.utime(target, (0, 0))
    assert chart.compress() == target and target.stat().st_mtime == 0  # written once per plotly version


def test_no_gzipped_copy_where_the_folder_cannot_be_written(static):
    static.write_text("a file where the folder should be")
    assert chart.compress() is None


def _asgi(path: str, headers=(), method: str = "GET", answer=None):
    """Run PlotlyAsset on one request: (the response's status, headers, body, whether the app behind was called).
    answer: what the app behind sends, (status, headers, body chunks); by default a 200 with one chunk."""
    from tests.conftest import run_async
    sent, behind = [], []
    status, app_headers, chunks = answer or (200, [(b"x-from", b"app")], [b"served by the app"])

    async def app(scope, receive, send):
        behind.append(scope["path"])
        await send({"type": "http.response.start", "status": status, "headers": list(app_headers)})
        for i, chunk in enumerate(chunks):
            await send({"type": "http.response.body", "body": chunk if method == "GET" else b"",
                        "more_body": i < len(chunks) - 1})

    async def send(message):
        sent.append(message)

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    scope = {"type": "http", "method": method, "path": path, "query_string": b"v=" + plotly.__version__.encode(),
             "headers": list(headers)}
    run_async(chart.PlotlyAsset(app)(scope, receive, send))  # (a browser test may have left a loop on this thread)
    start, body = sent[0], b"".join(m.get("body", b"") for m in sent[1:])
    return start["status"], dict(start["headers"]), body, bool(behind)


GZIP = [(b"accept-encoding", b"gzip, deflate, br")]


def test_plotly_js_goes_out_gzipped_and_cached_for_a_year(static):
    import gzip
    chart.compress()
    status, headers, body, behind = _asgi("/app/static/plotly.min.js", GZIP)
    assert status == 200 and not behind
    assert headers[b"content-encoding"] == b"gzip" and headers[b"content-type"] == b"application/javascript"
    assert b"immutable" in headers[b"cache-control"] and headers[b"vary"] == b"Accept-Encoding"
    assert int(headers[b"content-length"]) == len(body) and gzip.decompress(body) == SOURCE.read_bytes()
    assert f'plotly.min.js?v={plotly.__version__}"' in chart.JS  # the address the browser asks for names the version
    head = _asgi("/base/app/static/plotly.min.js", GZIP, method="HEAD")  # (a server.baseUrlPath in front)
    assert head[0] == 200 and head[2] == b"" and not head[3]
    (static / chart.GZ_NAME).unlink()  # read once: later requests do not go back to the disk
    assert _asgi("/app/static/plotly.min.js", GZIP)[2] == body


@pytest.mark.parametrize("path, headers, written", [
    ("/app/static/plotly.min.js", [], True),                      # a client that does not take gzip
    ("/app/static/plotly.min.js", GZIP, False),                   # the copy not written yet
    ("/app/static/other.js", GZIP, True),                         # any other file
    ("/_stcore/health", GZIP, True),
])
def test_everything_else_is_served_as_before(static, path, headers, written):
    if written:
        chart.compress()
    status, got, body, behind = _asgi(path, headers)
    assert behind and body == b"served by the app" and got == {b"x-from": b"app"}


PAGE = b"<!DOCTYPE html><html><head><title>Streamlit</title></head><body><div id='root'></div></body></html>"


def _html(status: int = 200, extra=(), chunks=(PAGE[:40], PAGE[40:])):
    length = str(len(b"".join(chunks))).encode()
    headers = [(b"content-type", b"text/html; charset=utf-8"), (b"content-length", length), *extra]
    return status, headers, list(chunks)


def test_the_page_starts_fetching_plotly_js_with_its_own_scripts(static):
    """A cold start fetches plotly.js early: the page's HTML (sent in two chunks here) gets a rel=preload of
    plotly.js and a script that runs it at the load event through the chart element's own promise; its content-length
    follows, and a HEAD's content-length is the GET's."""
    status, headers, body, behind = _asgi("/mechanics", answer=_html())
    tags = chart.head_tags()
    src = f"./app/static/plotly.min.js?v={plotly.__version__}"
    assert status == 200 and behind and body == PAGE.replace(b"<head>", b"<head>" + tags)
    assert int(headers[b"content-length"]) == len(body) and body.count(tags) == 1
    assert f'<link rel="preload" as="script" href="{src}" onload="window.__aeRunPlotly()">'.encode() in tags
    assert chart.with_head_tags(b"<html><head lang='x'></head></html>") == (
        b"<html><head lang='x'>" + tags + b"</head></html>")  # no bare <head>: before </head>
    assert b"window.__aePlotly" in tags and "window.__aePlotly" in chart.JS  # one promise: fetched and run once
    assert f"app/static/plotly.min.js?v={plotly.__version__}" in chart.JS  # the same address as the element's
    head = _asgi("/mechanics", method="HEAD", answer=_html())
    assert head[2] == b"" and int(head[1][b"content-length"]) == len(body)


def test_a_gzipped_page_gets_them_too(static):
    """Streamlit's gzip middleware compresses the page for a browser (Accept-Encoding: gzip): it is opened, given the
    tags and compressed again, with its new content-length. A HEAD of it passes as it is."""
    import gzip
    packed = gzip.compress(PAGE)
    answer = _html(extra=[(b"content-encoding", b"gzip")], chunks=(packed[:10], packed[10:]))
    status, headers, body, behind = _asgi("/", GZIP, answer=answer)
    assert status == 200 and headers[b"content-encoding"] == b"gzip" and int(headers[b"content-length"]) == len(body)
    assert gzip.decompress(body) == chart.with_head_tags(PAGE) != PAGE
    head = _asgi("/", GZIP, method="HEAD", answer=answer)
    assert head[1] == dict(answer[1]) and head[2] == b""


@pytest.mark.parametrize("answer", [
    _html(status=304),                                           # the browser's copy is still good
    _html(extra=[(b"content-encoding", b"br")]),                 # compressed some other way: not rewritten
    (200, [(b"content-type", b"application/javascript")], [b"var x = '</head>';"]),  # not a page
    _html(chunks=(b"<html><body>no head</body></html>",)),       # no head: nowhere to put them
])
def test_any_other_answer_passes_unchanged(static, answer):
    status, headers, body, behind = _asgi("/", answer=answer)
    assert behind and status == answer[0] and body == b"".join(answer[2])
    assert list(headers.items()) == [(k, v) for k, v in answer[1]]


def test_no_tags_when_charts_are_drawn_by_streamlit(static, monkeypatch):
    monkeypatch.setenv("ATTN_PLOTLY_ELEMENT", "0")
    chart.available.cache_clear()
    assert _asgi("/", answer=_html())[2] == PAGE and chart.with_head_tags(PAGE) == PAGE


def test_the_server_puts_it_in_front_of_streamlit():
    from app_pages._ui import serving
    # (after NoDelay only, which touches websockets alone and must meet the server's own send)
    assert [m.cls for m in serving.middleware()][:2] == [serving.NoDelay, chart.PlotlyAsset]


def test_a_sessions_first_run_starts_loading_plotly_js_and_later_runs_do_not():
    """chart.preload: the first element of the sidebar in a session's first run (hidden by the page's CSS); it is
    not one of the page's charts."""
    from tests.conftest import charts, run_page
    at = run_page("mechanics", {"lang": "en"})
    preload = [e for e in at.sidebar if e.type == "bidi_component"]
    assert [e.proto.component_name for e in preload] == [chart.NAME + "_preload"]
    assert at.sidebar.children[0].type == "bidi_component"  # before the page links
    n = len(charts(at))
    assert n > 0 and all(e.proto.component_name == chart.NAME for e in charts(at) if e.type == "bidi_component")
    at.run()
    assert not [e for e in at.sidebar if e.type == "bidi_component"] and len(charts(at)) == n
    from app_pages._ui import PAGE_CSS
    assert f".st-key-{chart.PRELOAD_KEY} {{ display: none; }}" in PAGE_CSS


def test_the_page_names_the_widget_code_to_fetch_early():
    """chart.LAZY_ELEMENTS are chunks of the installed Streamlit (one file each: their names carry a hash of the
    build), and the page's head gives their names to the script that imports them once the tab has drawn a chart."""
    names = chart.lazy_chunks()
    assert sorted(n.split(".")[0] for n in names) == sorted(chart.LAZY_ELEMENTS)
    tags = chart.head_tags().decode()
    assert "window.__aeChunks" in tags and all(f'"{n}"' in tags for n in names)
    assert "window.__aeChunks" in chart.JS  # the element calls it after drawing
