"""The prose element in Chromium (app_pages/_ui/paragraphs.py): each text it draws is, node for node and pixel box for
pixel box, what Streamlit's markdown draws for it (a second server with the element switched off), in both
languages and themes, and every text in it is plain text."""
from __future__ import annotations

import pytest

from app_pages._ui.paragraphs import BOX
from tests.browser.conftest import read_page, streamlit_server

pytestmark = pytest.mark.browser

# pages whose first view has texts of the element, and the tags they have among them (links, strong, emphasis, code
# spans, a list; Train's a code span that holds "<", which is text there)
LINKED = {"P", "STRONG", "A"}
PAGES = (("/anatomy?lang=en", False, LINKED), ("/language_model?lang=zh&scores=1", True, LINKED),
         ("/mechanics?lang=en", True, LINKED), ("/train?lang=en", False, {"P", "A", "CODE"}))
STYLE = ("fontFamily", "fontSize", "fontWeight", "fontStyle", "lineHeight", "color", "backgroundColor", "marginTop",
         "marginBottom", "marginLeft", "paddingTop", "paddingLeft", "paddingRight", "borderRadius",
         "textDecorationLine", "whiteSpace", "wordBreak", "overflowWrap", "listStyleType", "display")

# JS: per box (the element's, or a markdown container), its nodes as [tag, attributes, text] in document order (the
# whitespace between markdown's blocks left out), each element's computed look, and the box's height
_READ = """([selector, style]) => [...document.querySelectorAll(selector)].map(box => {
  const nodes = [], looks = [];
  const walk = (n) => {
    for (const c of n.childNodes) {
      if (c.nodeType === 3) { if (c.textContent.trim() || (c.parentElement !== box && c.parentElement.tagName !== 'UL')) nodes.push(['#text', c.textContent]); }
      else if (c.nodeType === 1) {
        const attrs = ['href', 'target', 'rel'].filter(a => c.hasAttribute(a)).map(a => a + '=' + c.getAttribute(a));
        nodes.push([c.tagName, attrs.join(' ')]);
        const cs = getComputedStyle(c); looks.push([c.tagName, ...style.map(k => cs[k])]);
        walk(c);
      }
    }
  };
  walk(box);
  const holder = box.closest("[data-testid='stElementContainer']");  // (what the page lays out: its height)
  return { text: box.innerText, nodes, looks, height: (holder || box).getBoundingClientRect().height,
           element: box.classList.contains('__BOX__') };
})""".replace("__BOX__", BOX)


def _read(browser, url: str, path: str, dark: bool, selector: str) -> list[dict]:
    return read_page(browser, url + path, _READ, [selector, list(STYLE)], dark=dark)


@pytest.fixture(scope="module")
def markdown_server():
    """A second server whose texts are all drawn by Streamlit's markdown (the prose element switched off)."""
    with streamlit_server({"ATTN_PROSE_ELEMENT": "0"}) as (url, _proc):
        yield url


@pytest.mark.parametrize("path,dark,has", PAGES)
def test_each_text_is_what_streamlits_markdown_draws(browser, server_url, markdown_server, path, dark, has):
    ours = _read(browser, server_url, path, dark, f"[data-testid='stMain'] .{BOX}")
    theirs = {box["text"]: box for box in _read(browser, markdown_server, path, dark,
                                                "[data-testid='stMain'] [data-testid='stMarkdownContainer']")}
    assert ours and all(box["element"] for box in ours)
    tags = set()
    for box in ours:
        reference = theirs[box["text"]]  # (KeyError: a text the element draws that markdown does not)
        assert box["nodes"] == reference["nodes"], box["text"][:60]
        assert box["looks"] == reference["looks"], box["text"][:60]
        assert abs(box["height"] - reference["height"]) < 0.5  # the same box: nothing below moves
        tags |= {tag for tag, *_ in box["nodes"]}
    assert has <= tags and tags <= {"#text", "P", "STRONG", "EM", "CODE", "A", "UL", "LI"}
    links = [attrs for tag, attrs in (n for box in ours for n in box["nodes"]) if tag == "A"]
    assert all("target=_blank" in a and "rel=noopener noreferrer" in a for a in links)
