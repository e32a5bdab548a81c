"""ui.latex and the formula element (app_pages/_ui/formula.py) seen from the script: which element each formula
becomes, what it is sent, and Streamlit's KaTeX module it relies on. (In Chromium: tests/browser/test_formula.py.)"""
from __future__ import annotations

import json
from pathlib import Path

import streamlit as st
from streamlit.testing.v1 import AppTest

from app_pages._ui import chart, formula
from tests.conftest import assert_clean


def _elements(at) -> list:
    """The page's custom elements (the formula elements), in page order."""
    return [e for e in at.main if e.type == "bidi_component"]


def _formulas_app():
    from app_pages import _ui as ui
    ui.latex(r"\frac{a}{b}")
    ui.latex("x^2   +\n    y")  # (a line break, as a formula written over two source lines has)
    ui.latex(r"\frac{a}{b}")  # the same formula again, and a third time: each an element of its own
    ui.latex(r"\frac{a}{b}")
    ui.latex(r"a = b,\qquad c = d")  # two equations of one display


def test_each_formula_is_one_element_sent_its_tex_and_label():
    at = AppTest.from_function(_formulas_app, default_timeout=30).run()
    assert_clean(at)
    assert not at.markdown and [e.proto.component_name for e in _elements(at)] == [formula.NAME] * 5
    data = [json.loads(e.proto.json) for e in _elements(at)]
    assert data[1] == {"tex": "x^2 + y", "label": "x^2 + y"}  # one line, as the markdown path writes it
    # the repeats are told apart by their place among the same formula's repeats, the first by none
    assert data[0] == {"tex": r"\frac{a}{b}", "label": r"\frac{a}{b}"}
    assert data[2] == data[0] | {"n": 1} and data[3] == data[0] | {"n": 2}
    # a display of two equations is sent them apart, to be drawn side by side or one under the other
    assert data[4] == {"tex": r"a = b,\qquad c = d", "label": r"a = b,\qquad c = d", "parts": ["a = b,", "c = d"]}
    ids = [e.proto.id for e in _elements(at)]
    assert len(set(ids)) == 5
    at.run()
    assert [e.proto.id for e in _elements(at)] == ids  # each keeps its identity on the next run


def test_switched_off_the_formulas_are_markdown(monkeypatch):
    monkeypatch.setenv("ATTN_FORMULA_ELEMENT", "0")
    at = AppTest.from_function(_formulas_app, default_timeout=30).run()
    assert_clean(at)
    assert len(at.markdown) == 5 and not _elements(at)
    assert all(m.value.startswith('<div class="formula"') and "$$" in m.value for m in at.markdown)


def test_a_display_is_cut_into_its_equations_at_its_top_level_qquads():
    assert formula.parts(r"a = b,\qquad c = d,\qquad e") == ["a = b,", "c = d,", "e"]
    assert formula.parts(r"\frac{a}{b}") == [r"\frac{a}{b}"]  # none: the formula whole
    assert formula.parts(r"a \quad b") == [r"a \quad b"]  # only \qquad separates equations
    # inside braces, an environment or a \left ... \right pair it is only a space
    inside = (r"\text{a \qquad b}", r"\begin{gathered} a,\qquad b \\ c \end{gathered}",
              r"\left( a \qquad b \right)", r"x_{a \qquad b}")
    for tex in inside:
        assert formula.parts(tex) == [tex]
    assert formula.parts(r"\left( a \right),\qquad b") == [r"\left( a \right),", "b"]
    # a command that starts like one of them is not one: \leftarrow opens nothing, \qquadx is no separator
    assert formula.parts(r"a \leftarrow b,\qquad c") == [r"a \leftarrow b,", "c"]
    assert formula.parts(r"a \qquadx b") == [r"a \qquadx b"]
    assert formula.parts(r"\qquad a \qquad") == ["a"]  # no empty equation


def test_streamlits_katex_module_is_the_one_the_element_imports():
    """The file the element imports is Streamlit's rehype-katex module: it exports the plugin (default), which
    replaces an element of class "math-display" by KaTeX's output; it is also fetched while the tab is idle."""
    name = formula.plugin_chunk()
    assert name and name.startswith("rehype-katex.") and formula.available()
    source = (Path(st.__file__).parent / "static" / "static" / "js" / name).read_text(encoding="utf-8")
    assert "`math-display`" in source and "renderToString" in source and "as default}" in source
    assert name in chart.lazy_chunks()
