"""The house prose element: our own explanatory paragraphs, drawn straight into the page without Streamlit's markdown.

st.markdown sends its text through Streamlit's markdown pipeline in the browser on every page switch: a parser that
reads the text character by character, a syntax tree, plugins (math, emoji, colours) and one React element per node.
For the long explanations of a first view that is a large part of a switch (docs/benchmarks.md measures it).
This element gets the paragraphs already parsed (parse(), in Python, once per text) and makes their nodes itself:
- the markdown our texts use: paragraphs, lists of "- " items one line each, **strong**, *emphasis*, `code` and
  [links](address), nested as they are written; a text that uses anything else (lists, headings, math, HTML outside
  a code span, Streamlit's :colour[...] and :icon: marks, an address outside http(s) or the app, an emphasis the
  rules below cannot settle) is drawn by st.markdown as before (ui.prose decides), and so is every text where the
  element is switched off (ATTN_PROSE_ELEMENT=0);
- parse() follows CommonMark's rules for what it accepts (tests/test_paragraphs.py checks every locale text, in both
  languages, against markdown-it's CommonMark renderer): a delimiter run of * opens where it is left-flanking and
  closes where it is right-flanking, code spans bind before emphasis, link text is parsed on its own;
- every text goes in as a text node and every address through setAttribute: nothing in a text is read as HTML;
- it looks as Streamlit's markdown looks (the same fonts, spacing, link and code colours of the theme), by the page's
  CSS (style.PAGE_CSS: `.ae-prose`); a link opens in a new tab, as Streamlit's markdown links do.
"""
from __future__ import annotations

import os
import re
import unicodedata
from functools import lru_cache

import streamlit as st

from .elements import draw_by_data

NAME = "attention_explorer_prose"  # the component's name (AppTest: an UnknownElement "bidi_component")
BOX = "ae-prose"  # the class of the element's box (style.PAGE_CSS; browser tests find the texts by it)
_OFF = "ATTN_PROSE_ELEMENT"  # "0": every text through st.markdown

JS = r"""
function nodes(list) {  // [text | ["strong"|"em", children] | ["code", text] | ["a", address, children]] -> nodes
  return list.map((n) => {
    if (typeof n === "string") return document.createTextNode(n);
    const el = document.createElement(n[0]);
    if (n[0] === "code") el.textContent = n[1];
    else if (n[0] === "a") {
      el.setAttribute("href", n[1]); el.target = "_blank"; el.rel = "noopener noreferrer";
      el.append(...nodes(n[2]));
    } else el.append(...nodes(n[1]));
    return el;
  });
}
export default function ({ data, parentElement }) {
  let box = parentElement.querySelector(".__BOX__");
  if (!box) { box = document.createElement("div"); box.className = "__BOX__"; parentElement.appendChild(box); }
  const blocks = (data && data.b) || [];
  const key = JSON.stringify(blocks);
  if (box.__key === key) return;  // (a rerun that sends the same text)
  box.__key = key;
  box.replaceChildren(...blocks.map(([kind, content]) => {  // ["p", nodes] or ["ul", [nodes, ...]]
    const el = document.createElement(kind === "ul" ? "ul" : "p");
    if (kind === "ul") for (const item of content) { const li = document.createElement("li"); li.append(...nodes(item));
                                                      el.appendChild(li); }
    else el.append(...nodes(content));
    return el;
  }));
}
""".replace("__BOX__", BOX)

# ---------------------------------------------------------------- parse: the subset of markdown the element draws
# anything in a text that Streamlit's markdown would read as more than paragraphs, lists of "- " items, emphasis,
# code and links
_OTHER = re.compile(
    r"[$<~|]"                                  # math, HTML and autolinks, strikethrough, tables
    r"|&[#A-Za-z0-9]+;"                        # character references
    r"|:[a-z][a-z0-9_+-]*[:\[/]"               # Streamlit's :colour[...], :material/icon: and emoji :shortcodes:
    r"|https?://|www\.|[\w.+-]+@[\w-]+\.\w"    # addresses GFM turns into links by themselves
    r"|!\[|\[\^"                               # images, footnotes
    r"|^(?:#|>|[+*](?:[ \t]|$)|-(?:$| $|  )|\d{1,9}[.)](?:[ \t]|$)|=+[ \t]*$|-+[ \t]*$|\[[^\]]*\]:|```)"  # blocks
    r"|^[ \t]|[ \t]$|\t"                        # indented lines, trailing spaces (a hard break), tabs
    r"|\\$"                                    # a backslash ending a line (a hard break)
    r"|(?<![^\W_])_|_(?![^\W_])",               # _ at a word's edge (it could open or close an emphasis)
    re.M)
_ESCAPABLE = set("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_ADDRESS = re.compile(r"(?:https?:)?[A-Za-z0-9\-._~/?#@!&'*+,;=%:]*")  # http(s) or the app's own (no scheme)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


class _Other(Exception):
    """The text uses markdown beyond the subset: st.markdown draws it."""


def _kind(c: str) -> str:
    """' ' for whitespace or the text's edge, 'p' for punctuation (CommonMark: Unicode P and S), 'a' otherwise."""
    if not c or c.isspace():
        return " "
    return "p" if unicodedata.category(c)[0] in "PS" else "a"


def _code(s: str, i: int) -> tuple[list, int]:
    """A code span opening at s[i] (a run of backticks): (["code", text], end). No run of the same length after it
    (the run would be literal text) is not in the subset: _Other."""
    n = len(s) - len(s[i:].lstrip("`")) - i
    j = i + n
    while True:
        k = s.find("`" * n, j)
        if k < 0:
            raise _Other("an unclosed code span")
        m = len(s) - len(s[k:].lstrip("`")) - k
        if m == n:
            text = s[i + n:k].replace("\n", " ")
            if len(text) > 2 and text[0] == " " and text[-1] == " " and text.strip():
                text = text[1:-1]
            return ["code", text], k + n
        j = k + m


def _link(s: str, i: int) -> tuple[list, int] | None:
    """An inline link [text](address) opening at s[i] == '[': (["a", address, children], end), or None when the
    brackets are plain text (no "(" right after "]")."""
    depth, j = 0, i
    while j < len(s):
        c = s[j]
        if c == "\\":
            j += 2
            continue
        if c == "`":
            _, j = _code(s, j)
            continue
        if c == "[":
            depth += 1
        elif c == "]":
            depth -= 1
            if depth == 0:
                break
        j += 1
    else:
        raise _Other("an unclosed [")
    if s[j + 1:j + 2] != "(":
        if depth == 0 and "[" not in s[i + 1:j]:
            return None  # [text] alone is text
        raise _Other("nested brackets")
    if "[" in s[i + 1:j]:
        raise _Other("a link inside a link's text")
    end = s.find(")", j + 2)
    address = s[j + 2:end] if end >= 0 else ""
    if end < 0 or not address or _ADDRESS.fullmatch(address) is None \
            or (_SCHEME.match(address) and not address.lower().startswith(("http:", "https:"))):
        raise _Other("an address outside the subset")
    return ["a", address, _inline(s[i + 1:j])], end + 1


def _inline(s: str) -> list:
    """The inline nodes of a paragraph (or of a link's text): texts, code spans, links, and * emphasis matched by
    CommonMark's flanking rules; raises _Other for anything those rules would settle otherwise than plainly."""
    out: list = [[]]  # a stack of open emphases' children; out[0] the result
    opened: list[int] = []  # the lengths (1 or 2) of the open emphases
    text: list[str] = []
    loose = 0  # [ read as text (no address after its ]): its ] is text too

    def flush() -> None:
        if text:
            out[-1].append("".join(text))
            text.clear()

    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s) and s[i + 1] in _ESCAPABLE:
            text.append(s[i + 1])
            i += 2
        elif c == "`":
            flush()
            node, i = _code(s, i)
            out[-1].append(node)
        elif c == "[":
            found = _link(s, i)
            if found is None:
                text.append(c)
                loose += 1
                i += 1
            else:
                flush()
                out[-1].append(found[0])
                i = found[1]
        elif c == "*":
            n = len(s) - len(s[i:].lstrip("*")) - i
            before, after = _kind(s[i - 1] if i else ""), _kind(s[i + n] if i + n < len(s) else "")
            left = after != " " and (after != "p" or before in " p")
            right = before != " " and (before != "p" or after in " p")
            if n > 2 or not (left or right):
                raise _Other("a run of three or a * that is text")
            flush()
            # a run that may do both closes the open emphasis of its length, else opens one (equal lengths only:
            # CommonMark's rule of three never forbids those)
            if right and opened and opened[-1] == n:
                opened.pop()
                children = out.pop()
                out[-1].append(["strong" if n == 2 else "em", children])
            elif left:
                opened.append(n)
                out.append([])
            else:
                raise _Other("a closer without its opener")
            i += n
        elif c == "]":
            if not loose:
                raise _Other("a ] without its [")
            loose -= 1
            text.append(c)
            i += 1
        else:
            text.append(c)
            i += 1
    if opened:
        raise _Other("an opener without its closer")
    flush()
    return _merge(out[0])


def _merge(nodes: list) -> list:
    """Adjacent texts as one."""
    merged: list = []
    for n in nodes:
        if isinstance(n, str) and merged and isinstance(merged[-1], str):
            merged[-1] += n
        else:
            merged.append(n)
    return merged


_ITEM = re.compile(r"- (?![ \t]|#|>|[-+*](?:\s|$)|\d{1,9}[.)](?:\s|$))")  # a "- " item of inline text only


def _block(block: str) -> list:
    """["p", nodes] for a paragraph, ["ul", [nodes, ...]] for a list whose every line is an item (a tight list)."""
    lines = block.split("\n")
    items = [bool(_ITEM.match(line)) for line in lines]
    if all(items):
        return ["ul", [_inline(line[2:]) for line in lines]]
    if any(items) or any(line.startswith("-") for line in lines):
        raise _Other("a list and a paragraph in one block")
    return ["p", _inline(block)]


_RUN = re.compile(r"\\[!-/:-@\[-`{-~]|`+")  # a backslash escape, or a run of backticks


def _html_visible(md: str) -> str:
    """md with each '<' that stands inside a code span made a space: CommonMark reads the spans from left to right,
    each from a run of backticks to the next run of the same length in its block, and nothing inside one is HTML
    (`<bos>` is text, drawn as text by the element too). A '<' that begins a line of a span stays: there it could
    open an HTML block, which is read before any span."""
    chars = list(md)
    start = 0
    for block in re.split(r"\n\n+", md):
        start = md.index(block, start)
        i = 0
        while (run := _RUN.search(block, i)) is not None:
            i = run.end()
            if run[0][0] == "\\":
                continue
            close = re.compile(r"(?<!`)" + run[0] + r"(?!`)").search(block, i)
            if close is None:
                continue  # (no closing run: these backticks are text, the next run may open a span)
            for j in range(i, close.start()):
                if block[j] == "<" and (j == 0 or block[j - 1] != "\n"):
                    chars[start + j] = " "
            i = close.end()
        start += len(block)
    return "".join(chars)


@lru_cache(maxsize=4096)
def _parse(md: str) -> tuple | None:
    if not md.strip() or _OTHER.search(_html_visible(md)):
        return None
    try:
        blocks = [_block(b) for b in re.split(r"\n\n+", md.strip("\n"))]
    except _Other:
        return None
    if any(a[0] == b[0] == "ul" for a, b in zip(blocks, blocks[1:])):
        return None  # (two lists apart by a blank line are one loose list: its items' text in paragraphs)
    return tuple(blocks)


def parse(md: str) -> list | None:
    """A text's blocks as the element draws them: ["p", nodes] or ["ul", [nodes, ...]], where nodes are a list of
    strings, ["strong", nodes], ["em", nodes], ["code", text] and ["a", address, nodes]; None when the text is not
    in the subset."""
    found = _parse(md)
    return None if found is None else [list(b) for b in found]


# ---------------------------------------------------------------- draw
def available() -> bool:
    """Whether our texts are drawn by this element (it is not switched off)."""
    return os.environ.get(_OFF, "1") != "0"


@lru_cache(maxsize=1)
def _element():
    return st.components.v2.component(NAME, js=JS, isolate_styles=False)


def prose(md: str) -> None:
    """Our own text (a locale string, glossed): drawn by the element where it is in the subset, else by st.markdown.
    Not for text a visitor typed (that goes through markdown.plain_md)."""
    blocks = parse(md) if available() else None
    if blocks is None:
        st.markdown(md)
    else:
        # (its markdown as written goes with it: AppTest shows the element as its data, and the page tests read it)
        draw_by_data(_element(), {"b": blocks, "md": md}, "text")
