"""State that holds, page by page, done the way a person does it in Chromium: set some controls by clicking and
typing, then switch the language both ways, leave the page and come back through the sidebar, press Back (one press
undoes one change; Back twice returns through a page switch), and open the copied address in a fresh browser. After
every step the page must show the same view, with no exception box. (The Train page's run-time flows are in
test_train.py.)"""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.browser.conftest import (assert_no_exception, choose, chosen, go_to, open_tab, pick, picked, pill, pilled,
                                    screenshot, switch_language, the_open_tab, tick, ticked, type_text, typed,
                                    wait_done)
from viz_core.i18n import t

pytestmark = pytest.mark.browser


@dataclass(frozen=True)
class Step:
    """One control set by a person: kind, the i18n key of its label, the value (an i18n key unless literal)."""
    kind: str            # select | radio | text | tab | tick | pill (the label is the pill's own text)
    label: str
    value: str = ""
    literal: bool = False

    def shown(self, lang: str) -> str:
        return self.value if self.literal else t(self.value, lang)

    def do(self, page, lang: str) -> None:
        label = t(self.label, lang) if self.label else ""
        {"select": lambda: choose(page, label, self.shown(lang)),
         "radio": lambda: pick(page, label, self.shown(lang)),
         "text": lambda: type_text(page, label, self.shown(lang)),
         "tab": lambda: open_tab(page, self.shown(lang)),
         "tick": lambda: tick(page, label),
         "pill": lambda: pill(page, label)}[self.kind]()

    def holds(self, page, lang: str) -> bool:
        label = t(self.label, lang) if self.label else ""
        if self.kind in ("tick", "pill"):
            return (ticked if self.kind == "tick" else pilled)(page, label)
        read = {"select": chosen, "radio": picked, "text": typed, "tab": lambda p, _: the_open_tab(p)}[self.kind]
        return read(page, label) == self.shown(lang)


@dataclass(frozen=True)
class Spec:
    path: str
    steps: tuple[Step, ...]
    extra: Step          # one more change, undone by one press of Back
    away: str            # another page to visit


SPECS = {
    "attention": Spec("/", (Step("text", "attention.text_a_pair", "The dog chased the red ball.", literal=True),
                            Step("select", "attention.layer", "4", literal=True),
                            Step("select", "attention.head", "7", literal=True),
                            Step("radio", "attention.view", "attention.view_lines")),
                      Step("select", "attention.layer", "2", literal=True), "positions"),
    "mechanics": Spec("/mechanics", (Step("radio", "mechanics.section", "mechanics.sec_masks"),
                                     Step("radio", "mechanics.pad_side", "mechanics.side_start"),
                                     Step("select", "mechanics.mask_kind", "mechanics.mask_padding")),
                      Step("radio", "mechanics.pad_side", "mechanics.side_end"), "anatomy"),
    "scaling": Spec("/scaling", (Step("radio", "scaling.part_label", "scaling.part_softmax"),),
                    Step("radio", "scaling.part_label", "scaling.part_train"), "positions"),
    "positions": Spec("/positions", (Step("radio", "positions.part", "positions.part_similarity"),
                                     Step("radio", "positions.measure", "positions.measure_cosine")),
                      Step("radio", "positions.measure", "positions.measure_dot"), "scaling"),
    "optimizers": Spec("/optimizers", (Step("select", "optimizers.surface", "optimizers.surface_beale"),
                                       Step("pill", "optimizers.name_adamw"),
                                       Step("tab", "", "optimizers.tab_inside")),
                       Step("tab", "", "optimizers.tab_schedules"), "mechanics"),
    "anatomy": Spec("/anatomy", (Step("radio", "anatomy.section", "anatomy.sec_ffn"),
                                 Step("radio", "anatomy.activation", "GELU", literal=True)),
                    Step("radio", "anatomy.activation", "ReLU", literal=True), "mechanics"),
    "train": Spec("/train", (Step("select", "train.task", "train.task_sort"),
                             Step("tab", "", "train.tab_snapshots")),
                  Step("tab", "", "train.tab_decode"), "anatomy"),
    "language_model": Spec("/language_model", (Step("tab", "", "lm.tab_cache"),
                                               Step("radio", "lm.kv_kind", "lm.kv_gqa")),
                           Step("radio", "lm.kv_kind", "lm.kv_mqa"), "positions"),
}


def _same_view(page, spec: Spec, lang: str, where: str) -> None:
    assert_no_exception(page)
    wrong = [s for s in spec.steps if not s.holds(page, lang)]
    assert not wrong, f"{where}: lost {[(s.label, s.value) for s in wrong]} at {page.url}"


def _title(page) -> str:
    return page.locator("h1").first.inner_text()


@pytest.mark.parametrize("name", list(SPECS))
def test_the_view_holds(open_page, browser, server_url, name):
    spec = SPECS[name]
    page = open_page(spec.path)
    for step in spec.steps:
        step.do(page, "en")
    _same_view(page, spec, "en", "after setting the controls")
    address = page.url

    spec.extra.do(page, "en")                      # Back undoes exactly one change
    page.go_back()
    wait_done(page)
    assert page.url == address
    _same_view(page, spec, "en", "after Back")

    switch_language(page, "zh")
    _same_view(page, spec, "zh", "after switching to Chinese")
    switch_language(page, "en")
    _same_view(page, spec, "en", "after switching back to English")

    title = _title(page)
    go_to(page, t(f"common.nav_{spec.away}", "en"))
    assert _title(page) == t(f"{spec.away}.title", "en")
    go_to(page, t(f"common.nav_{name}", "en"))
    _same_view(page, spec, "en", "after leaving the page and coming back")

    page.go_back()                                  # Back: the other page, then this one again
    wait_done(page)
    assert _title(page) == t(f"{spec.away}.title", "en")
    page.go_back()
    wait_done(page)
    assert _title(page) == title
    _same_view(page, spec, "en", "after Back through a page switch")

    switch_language(page, "zh")                     # the copied address, opened in a fresh browser
    shared = browser.new_context(viewport={"width": 1400, "height": 1600})
    try:
        other = shared.new_page()
        other.goto(page.url, wait_until="domcontentloaded")
        wait_done(other)
        _same_view(other, spec, "zh", "in a fresh browser from the copied address")
        screenshot(other, f"state-{name}-shared-zh")
    finally:
        shared.close()


def test_one_history_entry_per_change(open_page):
    """Opening a page adds no history entry of its own; a change adds one; a page switch adds one."""
    page = open_page("/")
    start = page.evaluate("history.length")
    choose(page, "Layer", "3")
    assert page.evaluate("history.length") == start + 1
    go_to(page, "Positions")
    assert page.evaluate("history.length") == start + 2
    page.go_back()
    wait_done(page)
    assert chosen(page, "Layer") == "3" and "layer=3" in page.url
