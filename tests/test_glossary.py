"""The glossary (Start page, ?part=glossary): every term named and defined in both languages, every [[mark]] in our
texts names a known term (the same ones in English and Chinese), the marks become links to the glossary, and each
entry's link opens the page where the app shows the term, in the promised state."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from app_pages import _ui as ui
from app_pages._ui.nav import PAGES
from app_pages._ui.state import STORE
from tests.conftest import assert_clean, assert_opens_in_state, markdowns, page_links, run_page, widget
from viz_core import i18n
from viz_core.learning import glossary
from viz_core.lm.corpus import clean

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ROOT = Path(__file__).resolve().parents[1]
LOCALES = ROOT / "viz_core" / "locales"
OTHER_ENGINEER_NS = {"start"}  # the Start page's own texts: its path view draws them (app_pages/_ui/path.py)


def _marks(text: str) -> set[str]:
    return {m[1] for m in i18n.GLOSSARY_MARK.finditer(text)}


def _marked_strings() -> dict[str, dict[str, set[str]]]:
    """{"ns.key": {"en": ids, "zh": ids}} of every locale string that carries a glossary mark."""
    out = {}
    for path in sorted(LOCALES.glob("*.json")):
        for key, entry in json.loads(path.read_text(encoding="utf-8")).items():
            marks = {lang: _marks(entry[lang]) for lang in i18n.LANGUAGES}
            if any(marks.values()):
                out[f"{path.stem}.{key}"] = marks
    return out


# ---------------------------------------------------------------- the terms and their strings
def test_terms_are_unique_known_and_in_order():
    ids = glossary.ids()
    assert ids == tuple(t.id for t in glossary.TERMS) and len(set(ids)) == len(ids) >= 26
    for needed in ("token", "query", "key", "value", "head", "logit", "softmax", "mask", "embedding", "residual",
                   "layer_norm", "kv_cache", "induction_head"):
        assert needed in ids
    assert ids.index("query") < ids.index("softmax") < ids.index("head") < ids.index("induction_head")
    assert glossary.term("softmax").link_params == {"section": "steps"}
    with pytest.raises(KeyError, match="glossary"):
        glossary.term("xyz")
    with pytest.raises(AttributeError):
        glossary.term("softmax").page = "scaling"  # frozen
    stems = {stem for stem, _ in PAGES}
    for t in glossary.TERMS:
        assert t.page in stems and t.page != "start"
        assert all(isinstance(k, str) and isinstance(v, str) and v for k, v in t.params)


@pytest.mark.parametrize("lang", i18n.LANGUAGES)
def test_every_term_has_a_name_a_one_line_definition_and_a_link_label(lang):
    for t in glossary.TERMS:
        name, define, where = (i18n.t(f"glossary.{t.id}_{part}", lang) for part in ("name", "def", "where"))
        assert name.strip() and define.strip() and where.strip(), t.id
        assert "\n" not in define and len(define) < 400, t.id  # one line
        assert define.count("$") % 2 == 0, t.id  # formulas open and close
    assert "$p_i = e^{z_i} / \\sum_j e^{z_j}$" in i18n.t("glossary.softmax_def", lang)


def test_definitions_say_the_same_formulas_in_both_languages():
    for t in glossary.TERMS:
        en, zh = (sorted(re.findall(r"\$[^$]+\$", i18n.t(f"glossary.{t.id}_def", lang)))
                  for lang in i18n.LANGUAGES)  # (the word order may differ)
        assert en == zh, t.id


# ---------------------------------------------------------------- the marks in our texts
def test_every_mark_names_a_known_term_and_both_languages_mark_the_same_terms():
    marked = _marked_strings()
    assert len(marked) >= 20, "the pages' texts link their first use of a term"
    for key, marks in marked.items():
        assert marks["en"] == marks["zh"], f"{key}: English marks {marks['en']}, Chinese {marks['zh']}"
        unknown = marks["en"] - set(glossary.ids())
        assert not unknown, f"{key}: no glossary term {unknown}"


def test_every_term_is_linked_from_some_page():
    linked = set().union(*(m["en"] for k, m in _marked_strings().items() if not k.startswith("glossary.")))
    assert linked == set(glossary.ids()), f"never linked: {set(glossary.ids()) - linked}"


def test_every_marked_string_is_drawn_through_glossed():
    """A mark drawn without ui.glossed would show as [[softmax]]: every marked string of a content page goes
    through glossed(t(...)) in the page code."""
    code = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "app_pages").rglob("*.py"))
    for key in _marked_strings():
        if key.split(".")[0] in OTHER_ENGINEER_NS | {"glossary"}:
            continue
        assert re.search(r"glossed\((?:ui\.)?t\(\s*\"" + re.escape(key) + '"', code), f"{key} is not drawn glossed"


def test_the_language_model_corpus_reads_the_words_not_the_marks():
    assert clean("the [[scaling|scores are scaled]], [[kv_cache]] and **[[induction_head|归纳头]]**") == \
        ["the scores are scaled, kv cache and 归纳头"]


@pytest.mark.parametrize("lang, name, suffix", [("en", "Softmax", ""), ("zh", "softmax（归一化指数函数）", "&lang=zh")])
def test_glossed_turns_marks_into_links_to_the_entry(monkeypatch, lang, name, suffix):
    monkeypatch.setattr(ui.language, "_last_lang", lang)  # the language outside a script run
    assert ui.glossed("[[softmax]] then [[kv_cache|the cache]].") == \
        f"[{name}](start?part=glossary&term=softmax{suffix}) then " \
        f"[the cache](start?part=glossary&term=kv_cache{suffix})."
    assert ui.glossed("no marks, [a link](x) and [PAD]") == "no marks, [a link](x) and [PAD]"
    assert "(start?" not in ui.glossed(ui.plain_md("[[softmax]] typed by a visitor"))  # typed text stays text
    with pytest.raises(KeyError):
        ui.glossed("[[no_such_term]]")


@pytest.mark.parametrize("lang", i18n.LANGUAGES)
def test_a_page_links_its_first_use_of_a_term(lang):
    at = run_page("mechanics", {"lang": lang})
    assert_clean(at)
    intro = next(m for m in markdowns(at) if "term=softmax" in m)
    suffix = "&lang=zh" if lang == "zh" else ""
    for term in ("embedding", "query", "key", "value", "scaling", "mask", "softmax"):
        assert f"](start?part=glossary&term={term}{suffix})" in intro
    assert "[[" not in intro


# ---------------------------------------------------------------- each entry's link keeps its promise
def _query(lang: str, term: glossary.Term) -> dict[str, str]:
    return ({"lang": lang} if lang != "en" else {}) | term.link_params


@pytest.mark.parametrize("term", glossary.TERMS, ids=lambda t: t.id)
def test_each_terms_link_opens_its_page_in_the_promised_state(term):
    """From the glossary (a visited Start page), the entry's link opens the target page with its parameters: the
    page runs cleanly, holds every parameter in its state, and its own texts show no raw mark."""
    at = assert_opens_in_state(term.page, term.link_params)
    assert not [m for m in markdowns(at) if "[[" in m]


# ---------------------------------------------------------------- the glossary view itself
def _entries(at) -> list[str]:
    """The names of the entries shown, in order (each entry starts with its bold name)."""
    return [m.value.split("**")[1] for m in at.main.markdown if m.value.startswith("**") and " · :small[" in m.value]


_links = page_links


def _expected_link(term: glossary.Term, lang: str) -> tuple[str, dict, str]:
    return term.page, _query(lang, term), i18n.t(f"glossary.{term.id}_where", lang)


@pytest.mark.parametrize("lang", i18n.LANGUAGES)
def test_glossary_shows_the_chosen_term_first_then_every_term_with_its_link(lang):
    at = run_page("start", {"lang": lang, "part": "glossary", "term": "softmax"})
    assert_clean(at)
    names = [i18n.t(f"glossary.{t.id}_name", lang) for t in glossary.TERMS]
    assert _entries(at) == [i18n.t("glossary.softmax_name", lang)] + names
    other = "zh" if lang == "en" else "en"
    first = next(m.value for m in at.main.markdown if m.value.startswith("**"))
    assert first.endswith(f":small[{i18n.t('glossary.softmax_name', other)}]")  # the other language's name beside it
    assert any(i18n.t("glossary.softmax_def", lang) == m.value for m in at.main.markdown)
    assert _links(at) == [_expected_link(glossary.term("softmax"), lang)] + \
        [_expected_link(t, lang) for t in glossary.TERMS]
    assert at.session_state[STORE]["start"]["term"] == "softmax"
    assert widget(at, "selectbox", "start.term").value == "softmax"


def test_an_unknown_term_shows_the_plain_list():
    at = run_page("start", {"part": "glossary", "term": "xyz"})
    assert_clean(at)
    assert _entries(at) == [i18n.t(f"glossary.{t.id}_name") for t in glossary.TERMS]
    assert at.session_state[STORE]["start"]["term"] == ""
    assert not at.error


def test_jumping_to_a_term_puts_it_first_and_in_the_address():
    at = run_page("start", {"part": "glossary"})
    assert_clean(at)
    assert _entries(at)[0] == "Token"
    widget(at, "selectbox", "start.term").set_value("kv_cache").run()
    assert_clean(at)
    assert _entries(at)[:2] == ["KV cache", "Token"]
    assert at.query_params["term"] in ("kv_cache", ["kv_cache"])
    assert _links(at)[0] == _expected_link(glossary.term("kv_cache"), "en")
    at.sidebar.radio[0].set_value("zh").run()  # the chosen term holds through a language switch
    assert_clean(at)
    assert _entries(at)[:2] == ["KV 缓存（KV cache）", "词元（token）"]
    assert _links(at)[0] == _expected_link(glossary.term("kv_cache"), "zh")
