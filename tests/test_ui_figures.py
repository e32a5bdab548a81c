"""ui.plot and the figures shared by every session: a shared figure is serialised once and sent as that, exactly what
would have been sent for the figure itself, by the house chart element or by st.plotly_chart; every figure carries the
house settings while plotly's global templates stay as they are; and the pages need no Streamlit "magic" (it is off in
.streamlit/config.toml)."""
import ast
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
from streamlit.testing.v1 import AppTest

from app_pages import _ui as ui
from app_pages._ui import caches, chart
from app_pages._ui import figures as ui_figures
from tests.conftest import charts
from viz_core.plots import positions as position_plots

ROOT = Path(__file__).resolve().parents[1]


def _figure():
    fig = go.Figure(go.Heatmap(z=[[0.25, 0.75], [1.0, 0.0]], x=["a", "<b>b</b>"], y=["q1", "q2"]))
    fig.update_layout(title="shared", height=300)
    return fig


def _plot_both():
    from app_pages import _ui
    from tests.test_ui_figures import _figure
    _ui.plot(_figure(), key="plain")
    _ui.plot(_ui.share(_figure()), key="shared")


def test_a_shared_figure_is_sent_exactly_as_the_figure_itself():
    at = AppTest.from_function(_plot_both, default_timeout=30).run()
    assert not at.exception
    plain, shared = (el.proto.bytes for el in charts(at))
    assert [el.type for el in charts(at)] == ["bidi_component"] * 2
    assert json.loads(plain)["data"][0]["x"] == ["a", "<b>b</b>"]
    assert json.loads(plain)["config"] == chart.CONFIG  # the PNG button's settings travel with the figure
    assert shared == plain


def test_without_the_chart_element_a_shared_figure_goes_to_plotly_chart_as_itself(monkeypatch):
    monkeypatch.setattr(chart, "available", lambda: False)  # (AppTest runs the script in this process)
    at = AppTest.from_function(_plot_both, default_timeout=30).run()
    assert not at.exception
    plain, shared = (el.proto.spec for el in at.get("plotly_chart"))
    assert json.loads(plain)["data"][0]["x"] == ["a", "<b>b</b>"]
    assert shared == plain


def test_share_serialises_once_and_plot_hands_it_over_without_a_copy(monkeypatch):
    fig = ui.share(_figure())
    payload = getattr(fig, ui_figures._JSON)
    assert json.loads(payload) == json.loads(chart.to_bytes(ui_figures.spec(_figure())))
    monkeypatch.setattr(chart, "available", lambda: False)
    fig = ui.share(_figure())
    spec = getattr(fig, ui_figures._SPEC)
    assert spec == ui_figures.spec(_figure()) and not hasattr(fig, ui_figures._JSON)
    assert ui_figures._Serialised(spec).to_dict() is spec
    import plotly.tools
    assert plotly.tools.return_figure_from_figure_or_data(ui_figures._Serialised(spec), validate_figure=True) is spec


def test_shared_figures_come_back_serialised_and_counted_twice(monkeypatch):
    cache = caches.ByteBoundedCache(10 * 2**20, size=ui_figures._figure_bytes)
    monkeypatch.setattr(ui_figures, "_figure_cache", lambda: cache)
    figures = ui.SharedFigures(position_plots)
    values = [[0.0, 1.0], [1.0, 0.0]]
    kw = dict(title="PE", x_title="dimension", y_title="position", value_name="value")
    first = figures.encoding_heatmap(np.array(values), [0, 1], [0, 1], **kw)
    again = figures.encoding_heatmap(np.array(values), [0, 1], [0, 1], **kw)
    assert again is first
    assert json.loads(getattr(first, ui_figures._JSON))["data"] == json.loads(first.to_json())["data"]
    assert cache.used == 2 * len(getattr(first, ui_figures._JSON))


def test_every_drawn_figure_carries_the_house_settings():
    """Tick labels may overflow their axes and colour bars (no measuring of every label in the browser): set on the
    figure's own template where it is drawn, shared or not, by the chart element and by st.plotly_chart alike."""
    at = AppTest.from_function(_plot_both, default_timeout=30).run()
    assert not at.exception
    for payload in (el.proto.bytes for el in charts(at)):
        template = json.loads(payload)["layout"]["template"]
        assert template["layout"]["xaxis"]["ticklabeloverflow"] == "allow"
        assert template["layout"]["yaxis"]["ticklabeloverflow"] == "allow"
        assert template["data"]["heatmap"][0]["colorbar"]["ticklabeloverflow"] == "allow"
    assert "ticklabeloverflow" not in json.dumps(_figure().to_dict())  # the figure itself is left as it was built


def test_a_chinese_label_in_a_hover_takes_the_chinese_colon():
    """The builders write "<label>: <value>" whatever the language; drawn, a Chinese label reads "权重：0.5", an
    English one "weight: 0.5" (and text in the data, such as a typed token, is left as it is)."""
    from viz_core.plots import attention as attention_plots
    for value_name, colon in (("权重", "："), ("weight", ": ")):
        fig = attention_plots.stats_map(np.zeros((2, 3)), title="t", value_name=value_name, layer_label="L",
                                        head_label="H")
        hovers = [tr["hovertemplate"] for tr in ui_figures.spec(fig)["data"] if tr.get("hovertemplate")]
        assert hovers and all(f"<br>{value_name}{colon}%{{" in h for h in hovers), hovers
    spec = ui_figures.spec(go.Figure(go.Scatter(x=[0], y=[0], text=["猫: 1"], hovertemplate="位置: %{x}<br>猫 %{text}")))
    assert spec["data"][0]["hovertemplate"] == "位置：%{x}<br>猫 %{text}" and spec["data"][0]["text"] == ["猫: 1"]


IMPORT_CHECK = """
import json, pkgutil, importlib
import streamlit  # sets plotly's "streamlit" template as the default (Streamlit's own doing, before ours)
import plotly.io as pio
def snapshot():
    return pio.templates.default, {name: json.dumps(pio.templates[name].to_plotly_json(), sort_keys=True)
                                   for name in sorted(pio.templates)}
before = snapshot()
import app_pages._ui
for module in pkgutil.iter_modules(app_pages._ui.__path__):
    importlib.import_module("app_pages._ui." + module.name)
after = snapshot()
assert after[0] == before[0], (before[0], after[0])
changed = sorted(name for name in before[1] if before[1][name] != after[1].get(name))
assert not changed and after[1].keys() == before[1].keys(), changed
"""


def test_importing_the_page_helpers_leaves_plotlys_templates_as_they_are():
    """No import-time side effect on plotly: the default template and every template are unchanged by importing
    app_pages._ui and each of its modules (in a fresh interpreter: this one may have imported them already)."""
    done = subprocess.run([sys.executable, "-c", IMPORT_CHECK], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def test_magic_is_off_and_no_page_has_a_line_it_would_have_written():
    """Magic writes a bare expression (not a call, not a docstring) to the page. It is off, which saves a syntax
    tree rewrite of every page; this guards that no page has such a line (which would silently stop showing)."""
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["runner"]["magicEnabled"] is False
    written = []
    for path in [ROOT / "app.py", *sorted((ROOT / "app_pages").rglob("*.py"))]:
        tree = ast.parse(path.read_text())
        docstrings = {id(n.body[0]) for n in ast.walk(tree)
                      if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)) and n.body}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Expr) and id(node) not in docstrings
                    and not isinstance(node.value, (ast.Call, ast.Await, ast.Yield, ast.YieldFrom))):
                written.append(f"{path.name}:{node.lineno} {ast.unparse(node)[:40]}")
    assert written == []


def _typed_table():
    import pandas as pd

    from app_pages import _ui as ui
    ui.table(pd.DataFrame({"name | kind": ["<b>bold</b>", "*x* | y", "1. first"], "value": ["1.5e-03", "—", "`z`"]}))


def test_a_static_table_is_the_table_elements_data_as_written():
    """ui.table of plain cells goes to the table element (app_pages/_ui/static_table.py: no Arrow table to decode,
    no markdown to parse in the browser) as the cells' text, which the browser shows as text."""
    from app_pages._ui.static_table import NAME
    from tests.conftest import md_tables
    at = AppTest.from_function(_typed_table, default_timeout=30).run()
    assert not at.exception and not at.markdown
    [element] = [e for e in at._tree if e.type == "bidi_component" and e.proto.component_name == NAME]
    assert json.loads(element.proto.json) == {"tables": [{"title": None, "columns": ["name | kind", "value"],
                                                          "rows": [["<b>bold</b>", "1.5e-03"], ["*x* | y", "—"],
                                                                   ["1. first", "`z`"]]}]}
    [frame] = md_tables(at)
    assert frame["name | kind"].tolist() == ["<b>bold</b>", "*x* | y", "1. first"]


def test_a_static_table_in_markdown_has_its_cells_as_written(monkeypatch):
    """Without the table element, ui.table writes a markdown table and escapes every cell: a '|' stays in its
    cell, nothing turns bold, into a tag, a list or code."""
    from tests.conftest import md_tables
    monkeypatch.setenv("ATTN_TABLE_ELEMENT", "0")
    at = AppTest.from_function(_typed_table, default_timeout=30).run()
    assert not at.exception
    body = at.markdown[0].value
    assert "<b>" not in body and "\\<b\\>" in body and "\\*x\\*" in body
    [frame] = md_tables(at)
    assert list(frame.columns) == ["name | kind", "value"]
    assert frame["name | kind"].tolist() == ["<b>bold</b>", "*x* | y", "1. first"]
    assert frame["value"].tolist() == ["1.5e-03", "—", "`z`"]


def _marked_table():
    from app_pages import _ui as ui
    ui.table([{"code": ui.Md(ui.code_md("x.view(2, 5) | y `q`")), "note": ui.Md(ui.plain_md("*fails*") + " "
                                                                               + ui.code_md("Use .reshape()")),
               "value": ui.Md("**:red[85.0]**")},
              {"code": ui.Md(ui.code_md("a_b")), "note": "<i>ok</i>", "value": "99.1"}], title="Accuracy *by* length")


def test_a_tables_own_markup_cells_and_title():
    """Md cells are written as they are (code spans, a red mark), any other cell is escaped; code_md's fence is
    longer than any backtick run inside and a '|' in code stays in its cell; the title is bold plain text."""
    from app_pages import _ui as ui
    from tests.conftest import md_tables
    assert ui.code_md("a `b` c") == "`` a `b` c ``" and ui.code_md("p|q") == r"` p\|q `"
    at = AppTest.from_function(_marked_table, default_timeout=30).run()
    assert not at.exception
    body = at.markdown[0].value
    assert body.startswith("**Accuracy \\*by\\* length**\n\n| code | note | value |")
    assert "**:red[85.0]**" in body and "\\<i\\>ok\\</i\\>" in body and "`` x.view(2, 5) \\| y `q` ``" in body
    [frame] = md_tables(at)
    assert frame["code"].tolist() == ["x.view(2, 5) | y `q`", "a_b"]
    assert frame["note"].tolist() == ["*fails* Use .reshape()", "<i>ok</i>"]
    assert frame["value"].tolist() == ["85.0", "99.1"]
