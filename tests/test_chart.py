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
