"""The glossary in Chromium, as a person uses it: on a page, click the first glossary link of its explanation (it opens
in a new tab), read that term first in the glossary, follow the entry's link to the page that shows it, in the
promised state; in English from Mechanics and in Chinese from Scaling. Screenshots in
artifacts/screenshots/glossary_*.png (English 1400 px light, Chinese 390 px dark)."""
from __future__ import annotations

from urllib.parse import parse_qsl, urlparse

import pytest

from tests.browser.conftest import assert_no_exception, picked, screenshot, wait_done
from viz_core import i18n
from viz_core.learning import glossary

pytestmark = pytest.mark.browser

INTRO_LINKS = "[data-testid='stMain'] :is([data-testid='stMarkdownContainer'], .ae-prose) a[href*='part=glossary']"
CHOSEN = ".st-key-glossary_chosen"
WHERE = f"{CHOSEN} [data-testid='stPageLink-NavLink']"


def query(url: str) -> dict[str, str]:
    return dict(parse_qsl(urlparse(url).query))


def follow_first_glossary_link(page):
    """Click the first glossary link in the page's explanations; return (term, the new tab, finished)."""
    link = page.locator(INTRO_LINKS).first
    term = glossary.term(query(link.get_attribute("href"))["term"])
    with page.context.expect_page() as info:
        link.click()
    tab = info.value
    tab.wait_for_load_state("domcontentloaded")
    wait_done(tab)
    return term, tab


def check_glossary_opened_at(tab, term: glossary.Term, lang: str) -> None:
    """The Start page's glossary, that term first (highlighted), its address holding the term."""
    assert_no_exception(tab)
    assert urlparse(tab.url).path.endswith("/start")
    assert query(tab.url) | {"lang": lang} == {"part": "glossary", "term": term.id, "lang": lang}
    tab.locator(CHOSEN).wait_for()
    chosen = tab.locator(CHOSEN).inner_text()
    assert chosen.startswith(i18n.t(f"glossary.{term.id}_name", lang)), chosen
    other = "zh" if lang == "en" else "en"
    assert i18n.t(f"glossary.{term.id}_name", other) in chosen  # a bilingual glossary
    assert tab.locator(WHERE).inner_text().strip().endswith(i18n.t(f"glossary.{term.id}_where", lang))


def follow_where_link(tab, term: glossary.Term, lang: str) -> None:
    """Click the entry's link: the target page opens (same tab) in the state the glossary promised."""
    tab.locator(WHERE).click()
    tab.wait_for_url(f"**/{term.page}?*")
    wait_done(tab)
    assert_no_exception(tab)
    asked = query(tab.url)
    assert {k: asked.get(k) for k, _ in term.params} == term.link_params, tab.url
    assert asked.get("lang", "en") == lang
    assert tab.locator("h1").first.inner_text().strip() == i18n.t(f"{term.page}.title", lang)


def test_english_link_from_mechanics_to_the_glossary_and_on(open_page):
    page = open_page("/mechanics?lang=en")
    assert_no_exception(page)
    term, tab = follow_first_glossary_link(page)
    assert term.id == "embedding"  # "Each token's embedding row in X ..."
    assert "/mechanics" in page.url  # the page itself stays where it was
    check_glossary_opened_at(tab, term, "en")
    tab.reload()  # the address holds the chosen term
    wait_done(tab)
    check_glossary_opened_at(tab, term, "en")
    follow_where_link(tab, term, "en")
    assert picked(tab, "Section") == "Tokens → next token"  # Anatomy's path: the token's embedding row


def test_chinese_link_from_scaling_to_the_glossary_and_on(open_page):
    page = open_page("/scaling?lang=zh")
    assert_no_exception(page)
    term, tab = follow_first_glossary_link(page)
    assert term.id == "query"  # "从 N(0, 1) 中独立抽取 d_k 个分量，组成查询 q ..."
    check_glossary_opened_at(tab, term, "zh")
    follow_where_link(tab, term, "zh")
    assert picked(tab, "内容") == "逐步计算"  # Mechanics, step by step


@pytest.mark.parametrize("lang, width, dark", [("en", 1400, False), ("zh", 390, True)])
def test_glossary_reads_well_wide_and_on_a_phone(open_page, lang, width, dark):
    page = open_page(f"/start?lang={lang}&part=glossary&term=softmax", width=width, height=2400, dark=dark)
    assert_no_exception(page)
    check_glossary_opened_at(page, glossary.term("softmax"), lang)
    entries = page.locator("[data-testid='stMain'] [class*='st-key-glossary_']")
    assert entries.count() == len(glossary.TERMS) + 1  # the chosen term, then every term
    assert page.locator("[data-testid='stMain'] .katex").count() >= len(glossary.TERMS)  # the formulas render
    assert page.evaluate("document.documentElement.scrollWidth") <= width  # nothing runs off the screen
    screenshot(page, f"glossary_{lang}_{width}{'_dark' if dark else ''}")
