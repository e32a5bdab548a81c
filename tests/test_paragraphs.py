"""The prose element's parse (app_pages/_ui/paragraphs.py) against CommonMark: every locale text it accepts, in both
languages, becomes the HTML markdown-it's CommonMark renderer makes of it; and what it must leave to st.markdown."""
import json
import re
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from app_pages._ui import paragraphs as prose

LOCALES = Path(__file__).resolve().parents[1] / "viz_core" / "locales"
COMMONMARK = MarkdownIt("commonmark")


def html(blocks: list) -> str:
    """The blocks of a parse as CommonMark's HTML renderer writes them."""
    def esc(s: str) -> str:
        return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")

    def one(n) -> str:
        if isinstance(n, str):
            return esc(n)
        if n[0] == "code":
            return f"<code>{esc(n[1])}</code>"
        if n[0] == "a":
            return f'<a href="{esc(n[1])}">{"".join(map(one, n[2]))}</a>'
        return f"<{n[0]}>{''.join(map(one, n[1]))}</{n[0]}>"

    def block(b) -> str:
        if b[0] == "p":
            return f"<p>{''.join(map(one, b[1]))}</p>\n"
        return "<ul>\n" + "".join(f"<li>{''.join(map(one, item))}</li>\n" for item in b[1]) + "</ul>\n"
    return "".join(map(block, blocks))


def _texts() -> list[tuple[str, str]]:
    """(key / language, text) for every locale string, its {placeholders} filled with a plain sample value."""
    out = []
    for f in sorted(LOCALES.glob("*.json")):
        for key, langs in json.loads(f.read_text(encoding="utf-8")).items():
            for lang, text in langs.items():
                out.append((f"{f.stem}.{key}/{lang}", re.sub(r"\{[^{}]*\}", "7", text)))
    return out


TEXTS = _texts()


def test_every_accepted_locale_text_is_what_commonmark_makes_of_it():
    accepted = 0
    for name, text in TEXTS:
        paragraphs = prose.parse(text)
        if paragraphs is None:
            continue
        accepted += 1
        assert html(paragraphs) == COMMONMARK.render(text), name
    assert accepted > len(TEXTS) // 2  # the subset is what our texts use: most of them are in it


@pytest.mark.parametrize("text", [
    "Hello **world**, *it* and `code` with [a link](start?part=glossary&term=softmax&lang=en).",
    "**[Induction heads](start?part=glossary&term=induction_head)** (Olsson et al. 2022)",
    "two\n\nparagraphs\nwith a soft break", "[CLS] and [SEP] are tokens", "d_model and n_heads", "`` a `b` ``",
    "*a **b** c*", "**a *b* c**", "\\*not emphasis\\*", "[**bold** link](start?x=1)", "在 **注意力** 中",
    "A (**bold**) word", "ends with `code`", "**x**y", "x**y**", "- one\n- **two** = `2` — a list",
    "A text:\n\n- a\n- b\n\nand after it", "the `<bos>` token, then `<eos>`", "`` a `<b>` c ``",
    "**`<i>`** and [`<a>`](start?x=1)",
])
def test_the_subset_is_read_as_commonmark_reads_it(text):
    paragraphs = prose.parse(text)
    assert paragraphs is not None, text
    assert html(paragraphs) == COMMONMARK.render(text)


@pytest.mark.parametrize("text", [
    "1. a list", "* a list", "+ a list", "- a\n\n- b", "text\n- a list under it", "- a\n  more", "-  x",
    "- # x", "- - x", "# a heading", "> a quote", "$x^2$ math", "a <b>tag</b>", "an :red[colour]",
    ":material/star: icon", "an :smile: emoji", "https://example.org bare", "a | table", "~~struck~~",
    "a  \nhard break", "  indented", "[x](javascript:alert(1))", "[x](data:text/html,hi)", "![img](a.png)",
    "x * y", "**unclosed", "closed**", "_under_", "***both***", "**“引号”**中", "&amp; entity", "a [b](c d) link",
    "mail me@example.org", "[a] ]", "", "`a\n<div>` b", "a <b>`x`</b>", "\\`<b>`", "`<b>", "``<b>`",
    "`x` <b> `y`", "`a`\n\n<b>`c`",
])
def test_anything_else_is_left_to_streamlits_markdown(text):
    assert prose.parse(text) is None


def test_no_text_reaches_html():
    """Every text and address of a parse is data: the element makes text nodes and sets attributes."""
    assert "innerHTML" not in prose.JS and "insertAdjacentHTML" not in prose.JS and "outerHTML" not in prose.JS
    paragraphs = prose.parse("**&lt;b&gt;** `<i>`")
    assert paragraphs is None  # (a character reference: st.markdown decodes it)
    assert prose.parse("a <script> b") is None  # (< outside a code span: left to st.markdown)
    # inside a code span it is the span's text, and the element writes that as a text node
    assert prose.parse("a `<script>` b") == [["p", ["a ", ["code", "<script>"], " b"]]]
