"""Raw HTML in the app: where it is written, what reaches it, and that typed text never does.

Streamlit escapes HTML everywhere unless a call says unsafe_allow_html=True (or uses st.html). The app has exactly two
such places: ui.latex (a formula in a scrolling box, where the formula element is not available: its formulas are data
that KaTeX reads as TeX) and ui.page_style (the app's CSS). These tests read the code
(every raw-HTML call and every formula passed to ui.latex), attack ui.latex itself, and type hostile text into the
pages' text boxes to check that it never arrives in a markdown element that allows HTML.
"""
import ast
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import APP_TIMEOUT_S, assert_clean, run_page

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [ROOT / "app.py", *sorted((ROOT / "app_pages").rglob("*.py")), *sorted((ROOT / "viz_core").rglob("*.py"))]

# (file, enclosing function) of every call that writes raw HTML
RAW_HTML_PLACES = {("app_pages/_ui/markdown.py", "latex"), ("app_pages/_ui/style.py", "page_style")}
# formulas that are not written at the call itself: each is a constant of this code (checked below)
FORMULA_SOURCES = {("app_pages/anatomy.py", "formula"),          # _formulas(*tex): its callers pass literals
                   ("app_pages/optimizers.py", "surface.latex"),  # viz_core.lessons.surfaces.SURFACES
                   ("app_pages/optimizers.py", "opt.LATEX[n]"),   # viz_core.lessons.optimizers.LATEX
                   ("app_pages/_ui/path.py", "step.formula"),     # viz_core.learning.path.STEPS
                   ("app_pages/head_finder.py", "FORMULAS[score]")}  # the page's own table of literals
HOSTILE = '</div><img src=x onerror="alert(1)"> $$\n\n![t](http://example.invalid/t.png)\n\n$$ <b>bold</b> " x'


def _calls(path: Path):
    """(innermost enclosing function's name, call node) of every call in a file ("<module>" outside functions)."""
    def visit(node: ast.AST, func: str):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Call):
                yield func, child
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else func
            yield from visit(child, inner)
    yield from visit(ast.parse(path.read_text(encoding="utf-8")), "<module>")


def _name(call: ast.Call) -> str:
    return call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")


def _raw_html_calls() -> set[tuple[str, str]]:
    found = set()
    for path in SOURCES:
        for func, call in _calls(path):
            unsafe = any(k.arg == "unsafe_allow_html" and not (isinstance(k.value, ast.Constant) and
                                                                k.value.value is False) for k in call.keywords)
            raw = _name(call) == "html" and ast.unparse(call.func) in ("st.html", "components.html",
                                                                       "st.components.v1.html")
            if unsafe or raw:
                found.add((path.relative_to(ROOT).as_posix(), func))
    return found


def test_raw_html_is_written_in_two_places_only():
    """A new unsafe_allow_html / st.html anywhere fails here: review it (no typed text may reach it) and list it."""
    assert _raw_html_calls() == RAW_HTML_PLACES


def test_every_formula_is_written_in_this_code():
    """ui.latex (and anatomy's _formulas, which calls it) only ever gets a string literal or one of the constant
    tables named in FORMULA_SOURCES: never a name that could hold what a visitor typed, never an f-string."""
    seen = set()
    for path in SOURCES:
        rel = path.relative_to(ROOT).as_posix()
        for func, call in _calls(path):
            if _name(call) not in ("latex", "_formulas") or func == "latex":
                continue
            for arg in call.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    continue
                where = (rel, ast.unparse(arg))
                assert where in FORMULA_SOURCES, f"{rel}:{call.lineno}: formula {ast.unparse(arg)} is not a constant"
                seen.add(where)
    assert seen == FORMULA_SOURCES  # each listed source is still used (a stale entry would hide nothing, but mislead)


def test_the_formula_tables_are_plain_strings_of_this_code():
    from viz_core.lessons import optimizers, surfaces
    from viz_core.learning import path
    tables = [s.latex for s in surfaces.SURFACES.values()] + list(optimizers.LATEX.values()) + \
        [s.formula for s in path.STEPS if s.formula]
    assert len(tables) > 15 and all(isinstance(x, str) and x for x in tables)
    assert not any(c in x for x in tables for c in "$\n")  # ("<" / ">" become \\lt / \\gt: the same symbols)


def _hostile_formula_app():
    from app_pages import _ui as ui
    ui.latex('</div><img src=x onerror="alert(1)"> $$\n\n![t](http://example.invalid/t.png)\n\n$$ <b>bold</b> " x')


def test_no_formula_can_leave_its_math_block(monkeypatch):
    """Drawn in markdown (where the formula element is not available), whatever ui.latex is given, its HTML is the
    one wrapper div: no tag opens, no "$$" ends the math block (after which markdown such as an image would render),
    no blank line ends the HTML block, no quote ends the label."""
    monkeypatch.setenv("ATTN_FORMULA_ELEMENT", "0")
    at = AppTest.from_function(_hostile_formula_app, default_timeout=30).run()
    assert_clean(at)
    body = at.markdown[0].value
    assert at.markdown[0].proto.allow_html
    head, math, tail = body.split("\n\n$$\n")[0], body.split("\n$$\n")[1], body.rsplit("\n$$\n", 1)[1]
    assert head.startswith('<div class="formula"') and head.endswith('">') and head.count("<") == 1
    assert head.count('"') == 8  # class, tabindex, role, aria-label: four quoted attributes, no quote of the formula
    assert "<" not in math and ">" not in math and "\n" not in math and "$" not in math.replace(r"\$", "")
    assert r"\lt /div\gt \lt img" in math and r"\$\$" in math
    assert tail == "\n</div>" and len(body.split("\n$$\n")) == 3  # one math block: its own two fences


def _elements(at) -> list:
    return [e for e in at.main if e.type == "bidi_component"]


def test_a_formula_of_the_formula_element_is_data_not_html():
    """Drawn by the formula element, the same hostile formula writes no markdown and no HTML at all: it is the
    element's data (the formula on one line, as KaTeX gets it, and the same text as the label), which the browser
    gives KaTeX as TeX (tests/browser/test_formula.py: nothing of it becomes a tag)."""
    import json
    from app_pages._ui import formula
    at = AppTest.from_function(_hostile_formula_app, default_timeout=30).run()
    assert_clean(at)
    assert not at.markdown and [e.proto.component_name for e in _elements(at)] == [formula.NAME]
    data = json.loads(_elements(at)[0].proto.json)
    assert data == {"tex": " ".join(HOSTILE.split()), "label": " ".join(HOSTILE.split())}


@pytest.mark.slow
@pytest.mark.parametrize("page, query", [
    ("attention", {"text": HOSTILE, "pair": HOSTILE}),
    ("attention", {"text": HOSTILE, "view": "compare", "text2": HOSTILE}),
    ("mechanics", {"section": "steps", "src": "real", "rtext": HOSTILE}),
    ("mechanics", {"section": "masks", "batch": HOSTILE}),
    ("mechanics", {"section": "cross", "cq": HOSTILE, "ck": HOSTILE}),
    ("scaling", {"part": "model", "text": HOSTILE}),
    ("anatomy", {"section": "path", "prompt": HOSTILE}),
    ("language_model", {"tab": "generate", "prompt": HOSTILE[:80]}),
    ("language_model", {"tab": "sequence", "seq": HOSTILE}),
    ("positions", {"part": "example", "vec": HOSTILE}),
])
def test_typed_text_never_reaches_raw_html(page, query):
    """Hostile text in a page's text boxes (through the address, as a shared link would bring it): the page answers
    without a traceback, and no markdown element that allows HTML carries any of it."""
    at = run_page(page, {"lang": "en", **query}, timeout=max(APP_TIMEOUT_S, 120))
    assert_clean(at)
    typed = [w.value for kind in ("text_input", "text_area") for w in at.get(kind)]
    assert any("alert(1)" in v for v in typed)  # the text did reach the page's box (this test tests something)
    for element in at.markdown:
        if element.proto.allow_html:
            assert "example.invalid" not in element.value and "onerror" not in element.value
            assert "<b>" not in element.value and "alert(1)" not in element.value
