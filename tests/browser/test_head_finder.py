"""Head finder in Chromium, as a person uses it: pick a score, open a head from the layer x head map (a click, a
finger's tap on a phone) or from a row of the table of every head, share the address (a fresh browser shows the same
head card, Back returns to the previous head), read a pasted text instead of the bundled sentences, and follow the
card's link to the Attention page with the same layer, head and sentence.

The first visit of a server waits for its corpus pass (a background thread: a progress bar, then the page reruns).
The order of the table is checked against the same pass run here, in a child process (one BLAS thread, as app.py
sets for the server), while the browser works."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.browser.conftest import (ROOT, assert_no_exception, choose, chosen, open_tab, pick, picked, screenshot,
                                    switch_language, type_text, typed, wait_done)
from tests.browser.test_taps import _tile
from viz_core.i18n import t

pytestmark = pytest.mark.browser

MODEL = "sentence-transformers/all-MiniLM-L6-v2"  # the packaged default model's name, as the card's title says it
N_LAYERS, N_HEADS = 6, 12
PASS_MS = 180_000  # the first visit waits for the server's corpus pass (seconds on a quiet machine, more on a busy one)
LAYER = {"en": "Layer", "zh": "层"}
HEAD = {"en": "Head", "zh": "头"}

# The bundled corpus's scores of every head, computed as the page computes them (the same modules, the same corpus)
_EXPECTED = r"""
import json, math
from viz_core.pretrained import bert_numpy, finder_sources, head_finder
src = finder_sources.of_numpy_bert(bert_numpy.load_default())
out = []
for _ in head_finder.run_pass(finder_sources.bundled_corpus(src), src.n_layers, src.n_heads, src.attend_text,
                              src.attend_ids, out.append, src.unk):
    pass
print(json.dumps({s: [[None if math.isnan(float(x)) else float(x) for x in row] for row in v]
                  for s, v in out[0].scores.items()}))
"""

# JS: the visible rows of an st.dataframe (a canvas grid) as glide-data-grid's accessible table lists them:
# [{row: its 0-based row index, <column header>: <cell text>, ...}]
_GRID_ROWS = """(el) => {
  const table = el.querySelector("table");
  if (!table) return [];
  const cols = [...table.querySelectorAll("thead th")].map((th) => [th.getAttribute("aria-colindex"), th.innerText]);
  return [...table.querySelectorAll("tbody tr")].map((tr) => {
    const row = { row: parseInt(tr.getAttribute("aria-rowindex"), 10) - 2 };
    for (const [i, name] of cols) {
      const td = tr.querySelector(`td[aria-colindex='${i}']`);
      row[name] = td ? td.innerText : null;
    }
    return row;
  }).sort((a, b) => a.row - b.row);
}"""


class Expected:
    """The scores of every head on the bundled corpus, from a child process started at once and read when needed."""

    def __init__(self):
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", PYTHONPATH=str(ROOT))
        self._proc = subprocess.Popen([sys.executable, "-c", _EXPECTED], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True)
        self._scores: dict | None = None

    def scores(self, score: str) -> list[list[float | None]]:
        if self._scores is None:
            out, err = self._proc.communicate(timeout=300)
            assert self._proc.returncode == 0, err[-3000:]
            self._scores = json.loads(out)
        return self._scores[score]

    def ranking(self, score: str, ascending: bool) -> list[tuple[int, int]]:
        """(layer, head) of every head sorted by a score, as the table promises: highest (or lowest) first, no value
        last, ties in layer-then-head order."""
        v = self.scores(score)
        heads = [(layer, head) for layer in range(N_LAYERS) for head in range(N_HEADS)]
        with_value = [lh for lh in heads if v[lh[0]][lh[1]] is not None]
        with_value.sort(key=lambda lh: (v[lh[0]][lh[1]] if ascending else -v[lh[0]][lh[1]], lh))
        return with_value + [lh for lh in heads if v[lh[0]][lh[1]] is None]

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(timeout=10)


@pytest.fixture(scope="module")
def expected():
    exp = Expected()
    yield exp
    exp.close()


# ---------------------------------------------------------------- acting on the page
def score_label(lang: str) -> str:
    return t("head_finder.sort_by", lang)


def finder(open_page, query: str = "lang=en", **kw):
    """The Head finder page, once its corpus pass is done and the page has rerun with the scores."""
    page = open_page(f"/head_finder?{query}", **kw)
    lang = parse_qs(query).get("lang", ["en"])[0]
    page.get_by_role("combobox", name=score_label(lang), exact=True).wait_for(timeout=PASS_MS)
    wait_done(page)
    assert_no_exception(page)
    return page


def params(page) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlparse(page.url).query).items()}


def opened(page, lang: str = "en") -> tuple[int, int]:
    """The head the page shows: its Layer and Head dropdowns."""
    return int(chosen(page, LAYER[lang])), int(chosen(page, HEAD[lang]))


def card_title(lang: str, layer: int, head: int) -> str:
    return t("head_finder.card_title", lang, layer=layer, head=head, model=MODEL)


def assert_card(page, lang: str, layer: int, head: int) -> None:
    """The dropdowns and the head card's title name the same head."""
    assert opened(page, lang) == (layer, head), page.url
    title = card_title(lang, layer, head)
    titles = page.locator("[data-testid='stMain'] h3").all_inner_texts()
    assert any(title in text for text in titles), (title, titles)


def after_change(page, act, what: str) -> None:
    """Do `act` (a click, a tap), then wait for the page to take it: its address changes (every head opened, every
    score picked is in it), then the run ends."""
    before = page.url
    act()
    try:
        page.wait_for_function("(u) => location.href !== u", arg=before, timeout=30_000)
    except PlaywrightTimeout:
        shot = screenshot(page, "head_finder-nothing-happened")
        pytest.fail(f"{what}: the page did not change (still {before}); see {shot}")
    wait_done(page)
    assert_no_exception(page)


def choose_in_view(page, label: str, option: str) -> None:
    """choose(), on a dropdown scrolled into view first, as a person scrolls to it before clicking: Playwright's own
    scroll, made as it clicks, can land after the menu has opened, and a scroll closes the menu (seen for the Layer
    dropdown right after typing in the sentence box further down: 4 clicks in 8)."""
    page.get_by_role("combobox", name=label, exact=True).scroll_into_view_if_needed()
    page.evaluate("() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")
    choose(page, label, option)


def hit_tile(page, layer: int, head: int, touch: bool = False) -> None:
    """Click (or tap, on a phone) the centre of the map's tile of layer / head, computed from plotly's calcdata."""
    tile = _tile(page, layer, head, 0.5, 0.5)

    def act():
        if touch:
            page.touchscreen.tap(tile["x"], tile["y"])
        else:
            page.mouse.move(tile["x"], tile["y"], steps=3)
            page.mouse.click(tile["x"], tile["y"])
    after_change(page, act, f"{'tap' if touch else 'click'} on layer {layer} head {head}")


def head_table(page):
    """The table of every head: the first st.dataframe of the page."""
    return page.locator("[data-testid='stMain'] [data-testid='stDataFrame']").first


def grid_rows(grid) -> list[dict]:
    return grid.evaluate(_GRID_ROWS)


def first_rows_are(page, grid, heads: list[tuple[int, int]], lang: str = "en") -> None:
    """Wait until the table's first rows show these heads (the grid redraws after the run), then check them."""
    want = [[str(layer), str(head)] for layer, head in heads]
    try:
        page.wait_for_function(
            """([el, want, l, h]) => { const t = el.querySelector("table"); if (!t) return false;
                 const rows = [...t.querySelectorAll("tbody tr")].slice(0, want.length);
                 const cols = Object.fromEntries([...t.querySelectorAll("thead th")]
                   .map((th) => [th.innerText, th.getAttribute("aria-colindex")]));
                 return rows.length === want.length && rows.every((tr, i) =>
                   tr.querySelector(`td[aria-colindex='${cols[l]}']`)?.innerText === want[i][0] &&
                   tr.querySelector(`td[aria-colindex='${cols[h]}']`)?.innerText === want[i][1]); }""",
            arg=[grid.element_handle(), want, LAYER[lang], HEAD[lang]], timeout=15_000)
    except PlaywrightTimeout:
        pass  # the assertion below says what the table shows instead
    rows = grid_rows(grid)[:len(heads)]
    assert [r["row"] for r in rows] == list(range(len(heads))), rows  # the grid shows its first rows
    assert [[r[LAYER[lang]], r[HEAD[lang]]] for r in rows] == want, rows


def select_row(page, grid, row: int) -> None:
    """Click the selection box at the left of a data row (the grid is a canvas: header and rows are 35 px high)."""
    grid.scroll_into_view_if_needed()
    box = grid.bounding_box()
    after_change(page, lambda: page.mouse.click(box["x"] + 16, box["y"] + 35 * (row + 1) + 17),
                 f"selecting row {row} of the table")


# ---------------------------------------------------------------- tests
def test_pick_a_score_then_click_a_tile_of_the_map(open_page, expected):
    """Induction is picked: its top head opens; a click on layer 3 head 5 of the map opens that head, in the
    dropdowns, the card and the address."""
    page = finder(open_page)
    assert chosen(page, score_label("en")) == t("head_finder.score_previous", "en")
    top = expected.ranking("previous", ascending=False)[0]
    assert_card(page, "en", *top)  # a first visit opens the top head of the default score

    after_change(page, lambda: choose_in_view(page, score_label("en"), t("head_finder.score_induction", "en")),
                 "picking the induction score")
    assert params(page).get("score") == "induction"
    assert_card(page, "en", *expected.ranking("induction", ascending=False)[0])

    hit_tile(page, 3, 5)
    assert_card(page, "en", 3, 5)
    q = params(page)
    assert (q.get("layer"), q.get("head"), q.get("score")) == ("3", "5", "induction"), page.url
    assert chosen(page, score_label("en")) == t("head_finder.score_induction", "en")
    screenshot(page, "head_finder-en-1400")


def test_a_row_of_the_table_opens_its_head_and_the_order_sorts_it(open_page, expected):
    page = finder(open_page)
    open_tab(page, t("head_finder.tab_table", "en"))
    grid = head_table(page)
    grid.wait_for()
    desc = expected.ranking("previous", ascending=False)
    first_rows_are(page, grid, desc[:3])  # previous token, highest first: the top heads of the pass run here

    select_row(page, grid, 2)
    assert_card(page, "en", *desc[2])
    assert (params(page).get("layer"), params(page).get("head")) == tuple(map(str, desc[2])), page.url

    asc = expected.ranking("previous", ascending=True)
    pick(page, t("head_finder.order", "en"), t("head_finder.order_asc", "en"))
    assert picked(page, t("head_finder.order", "en")) == t("head_finder.order_asc", "en")
    assert params(page).get("order") == "asc"
    first_rows_are(page, grid, asc[:3])  # the lowest head first
    assert asc[0] == desc[-1]
    select_row(page, grid, 0)
    assert_card(page, "en", *asc[0])
    assert_no_exception(page)


def test_a_shared_address_opens_the_same_head_and_back_returns(open_page, browser):
    """In Chinese: pick a score, open a head on the map; its address opened in a fresh browser shows the same score
    and head card; Back in the first browser returns to the head opened before."""
    page = finder(open_page)
    switch_language(page, "zh")
    page.get_by_role("combobox", name=score_label("zh"), exact=True).wait_for()
    first_zh = t("head_finder.score_first", "zh")
    after_change(page, lambda: choose_in_view(page, score_label("zh"), first_zh), "picking the first-token score")
    before = opened(page, "zh")
    target = (2, 7) if before != (2, 7) else (2, 8)
    hit_tile(page, *target)
    assert_card(page, "zh", *target)
    address = page.url
    q = params(page)
    assert (q.get("lang"), q.get("score")) == ("zh", "first"), address

    shared = browser.new_context(viewport={"width": 1400, "height": 2000})
    try:
        other = shared.new_page()
        other.goto(address, wait_until="domcontentloaded")
        other.get_by_role("combobox", name=score_label("zh"), exact=True).wait_for(timeout=PASS_MS)
        wait_done(other)
        assert_no_exception(other)
        assert chosen(other, score_label("zh")) == first_zh
        assert_card(other, "zh", *target)
        assert other.url == address
    finally:
        shared.close()

    page.go_back()
    wait_done(page)
    assert_no_exception(page)
    assert chosen(page, score_label("zh")) == first_zh
    assert_card(page, "zh", *before)


def test_phone_tap_on_a_tile_opens_that_head(open_page):
    """390 x 844, a finger, in Chinese: a tap at the centre of layer 4 head 9 opens exactly that head."""
    page = finder(open_page, "lang=zh", width=390, height=844, touch=True)
    assert opened(page, "zh") != (4, 9)
    hit_tile(page, 4, 9, touch=True)
    assert_card(page, "zh", 4, 9)
    assert (params(page).get("layer"), params(page).get("head")) == ("4", "9"), page.url
    hit_tile(page, 1, 0, touch=True)  # a second tap, on another tile, after the page has redrawn the map
    assert_card(page, "zh", 1, 0)
    screenshot(page, "head_finder-zh-390")


OWN = ("The quick brown fox jumps over the lazy dog. A small bird sang in the old oak tree.\n"
       "The river runs down to the sea! Does my sister read books every night?")


def test_own_text_is_read_instead_of_the_bundled_sentences(open_page):
    page = finder(open_page)
    pick(page, t("head_finder.corpus", "en"), t("head_finder.corpus_own", "en"))
    label = t("head_finder.own_text", "en")
    page.get_by_label(label, exact=True).wait_for()
    type_text(page, label, OWN)
    read = t("head_finder.source_own", "en", n=4, tokens=0).split(" (")[0]  # "sentences of your text: 4"
    page.get_by_text(read, exact=False).first.wait_for(timeout=PASS_MS)  # the pass over the text has ended
    page.get_by_role("combobox", name=score_label("en"), exact=True).wait_for(timeout=PASS_MS)
    wait_done(page)
    assert_no_exception(page)
    assert typed(page, label) == OWN
    assert params(page).get("corpus") == "own" and params(page).get("own") == OWN, page.url
    main = page.locator("[data-testid='stMain']").inner_text()
    assert "English sentences" not in main and "Chinese sentences" not in main, main[:3000]

    assert chosen(page, score_label("en")) == t("head_finder.score_previous", "en")  # a score read on the text
    examples = page.locator("[data-testid='stMain'] [data-testid='stDataFrame']").last
    examples.scroll_into_view_if_needed()
    rows = grid_rows(examples)
    corpus, context = t("head_finder.col_source", "en"), t("head_finder.col_context", "en")
    assert rows and {r[corpus] for r in rows} == {t("head_finder.src_own", "en")}, rows
    words = {"quick", "brown", "fox", "jumps", "lazy", "dog", "bird", "oak", "tree", "river", "sea", "sister", "books"}
    assert all(any(w in r[context] for w in words) for r in rows), rows
    screenshot(page, "head_finder-own-text-en")


def test_the_link_opens_the_head_with_the_sentence_on_the_attention_page(open_page):
    page = finder(open_page)
    sentence = "The dog chased the red ball because the dog was happy."
    box = page.get_by_label(t("head_finder.probe_text", "en"), exact=True)
    box.fill(sentence)
    after_change(page, lambda: box.press("Enter"), "typing a sentence")  # (a one-line box: Enter commits it)
    assert typed(page, t("head_finder.probe_text", "en")) == sentence and params(page).get("probe") == sentence
    choose_in_view(page, LAYER["en"], "2")
    choose_in_view(page, HEAD["en"], "7")
    assert_card(page, "en", 2, 7)
    link = page.get_by_role("link", name=t("head_finder.open_attention", "en", layer=2, head=7))
    link.scroll_into_view_if_needed()
    href = link.get_attribute("href") or ""
    assert "model=" not in href, href  # the default model: no empty model= in the link
    link.click()
    # (Attention is the app's default page: its address is the root, /)
    page.wait_for_function("() => !location.pathname.endsWith('/head_finder')", timeout=30_000)
    wait_done(page)
    assert_no_exception(page)
    assert opened(page) == (2, 7)
    q = params(page)
    assert (q.get("layer"), q.get("head"), q.get("text")) == ("2", "7", sentence), page.url
    assert typed(page, t("attention.text_a_pair", "en")) == sentence
    assert page.locator("h1").first.inner_text() == t("attention.title", "en")
