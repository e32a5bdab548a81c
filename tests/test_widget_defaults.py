"""Every control is drawn with its held value as its default (app_pages/_ui): a browser that lost a widget's state
takes the default of the element it got last, so a default other than the value sent a different value back (the
Train page's task menu once jumped from Date to Copy on the next click in Chromium). Each page is opened at an
address that moves its controls off their defaults, then run a second time (a run that does not seed the values)."""
from __future__ import annotations

import json

import pytest

from tests.conftest import assert_clean, run_page

ADDRESSES = [
    ("train", {"task": "date", "tab": "decode", "src_date": "2023-02-28", "lang": "zh"}),
    ("attention", {"view": "lines", "layer": "3", "head": "5"}),
    ("mechanics", {"section": "mha", "vdm": "4"}),
    ("optimizers", {"lr_adam": "0.02", "hyper": "1"}),
    ("scaling", {"part": "train"}),
    ("scaling", {"part": "dist", "d_k": "256"}),
    ("positions", {"d_model": "64"}),
    ("anatomy", {"tab": "ffn"}),
    ("language_model", {"lang": "zh"}),
    ("start", {"step": "3", "lang": "zh"}),
]


def _options(element) -> list[str]:
    return list(element.proto.options)


def held_and_default(element) -> tuple[object, object] | None:
    """(what the widget holds, the default its element carries) in the element's own terms; None for a kind that
    has no default to compare."""
    kind, proto = element.type, element.proto
    if kind in ("selectbox", "radio"):
        return element.index, (proto.default if proto.HasField("default") else None)
    if kind in ("slider", "select_slider"):
        held = element.value if isinstance(element.value, tuple) else (element.value,)
        if kind == "select_slider":
            held = tuple(_options(element).index(element.format_func(v)) for v in held)
        return [float(v) for v in held], list(proto.default)
    if kind in ("checkbox", "toggle", "text_input", "text_area"):
        return element.value, proto.default
    if kind == "number_input":
        return float(element.value), proto.default
    if kind == "button_group":  # a segmented control
        return list(element.indices), list(proto.default)
    if kind == "multiselect":
        return sorted(_options(element).index(element.format_func(v)) for v in element.value), sorted(proto.default)
    return None


KINDS = ("selectbox", "radio", "slider", "select_slider", "checkbox", "toggle", "text_input", "text_area",
         "number_input", "multiselect", "button_group")


def drawn(at, kind: str) -> list:
    """Every element of `kind` on the page, sidebar included (AppTest has no finder for segmented controls)."""
    found, todo = [], [at._tree]
    while todo:
        node = todo.pop()
        todo.extend(getattr(node, "children", {}).values())
        found += [node] if getattr(node, "type", None) == kind else []
    return found


@pytest.mark.parametrize("page, query", ADDRESSES, ids=[f"{a[0]}-{i}" for i, a in enumerate(ADDRESSES)])
def test_every_control_defaults_to_what_it_holds(page, query):
    at = run_page(page, query)
    at.run()  # the second run: nothing seeded, the values come from the widgets
    assert_clean(at)
    checked = []
    for kind in KINDS:
        for element in drawn(at, kind):
            pair = held_and_default(element)
            if pair is None:
                continue
            held, default = pair
            assert held == default, f"{page}: {kind} {element.proto.label!r} holds {held!r}, default {default!r}"
            checked.append(kind)
    assert len(checked) >= 2, (page, checked)  # the page drew controls and they were read


def test_the_moved_task_is_the_menus_default():
    """The case seen in Chromium, read from the element the browser gets."""
    at = run_page("train", {"task": "date", "tab": "decode"})
    at.run()
    menu = next(s for s in at.selectbox if s.proto.label == "Task")
    assert menu.value == "date" and menu.proto.options[menu.proto.default] == "Date reformatting"
    tabs = json.loads(json.dumps([t.proto.label for t in at.get("tab")]))
    assert "Decode" in tabs


# ---------------------------------------------------------------- one read verb, one write verb (state.py)
def _verbs_app():
    import streamlit as st

    from app_pages import _ui as ui
    ui.state.begin("verbs")
    st.button("seven", key="verbs.seven", on_click=ui.set_value, args=("n", 7))  # a callback sets a control
    before = ui.value("n", 3, int)  # before the slider is drawn: its fresh value, the store's, the address's
    n = ui.slider("n", 0, 10, "n", 3)
    marked = ui.value("m", 0, int, lambda v: isinstance(v, int) and v >= 0)  # a value no widget shows
    if st.button("mark", key="verbs.mark"):
        ui.set_value("m", marked + 1, 0)
    st.markdown(f"before={before} n={n} m={ui.value('m', 0)} address_n={ui.state.address_text('n')} "
                f"address_m={ui.state.address_text('m')}")


def _said(at) -> dict:
    return dict(part.split("=") for part in at.markdown[-1].value.split())


def test_one_read_verb_and_one_write_verb():
    """ui.value reads a control (also before it is drawn) and a value no widget shows (from the address on a first
    visit); ui.set_value writes either: from a callback the control shows the new value when drawn again, and given
    the default the address is written at once."""
    from streamlit.testing.v1 import AppTest

    from app_pages import _ui as ui
    assert ui.value is ui.state.value and ui.set_value is ui.state.set_value
    assert not hasattr(ui, "set_state") and not hasattr(ui, "stored") and not hasattr(ui.state, "stored")
    at = AppTest.from_function(_verbs_app, default_timeout=30)
    at.query_params["n"], at.query_params["m"] = "5", "2"
    at.run()
    assert _said(at) == {"before": "5", "n": "5", "m": "2", "address_n": "5", "address_m": "2"}
    at.slider(key="verbs.n").set_value(4).run()
    assert _said(at)["before"] == "4"  # the browser's new value, read before the slider is drawn again
    at.button(key="verbs.seven").click().run()
    assert at.slider(key="verbs.n").value == 7 and _said(at)["n"] == "7" and _said(at)["address_n"] == "7"
    at.button(key="verbs.mark").click().run()
    assert _said(at)["m"] == "3" and _said(at)["address_m"] == "3"


def test_no_module_reads_the_state_modules_private_names():
    """Everything outside state.py goes through its verbs: no `state._name` anywhere else in the app."""
    import re
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    found = [f"{path.relative_to(root)}:{i}" for path in [root / "app.py", *sorted((root / "app_pages").rglob("*.py"))]
             if path.name != "state.py"
             for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(r"\bstate\._[a-z]", line)]
    assert found == []
