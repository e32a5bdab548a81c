"""The house formula element: a display formula drawn by KaTeX straight into the page, without React.

st.markdown("$$...$$") draws a formula through Streamlit's markdown pipeline: KaTeX writes an HTML string, which is
parsed into a syntax tree, turned into one React element per node and then into the page (a formula of two lines is
250-500 nodes). On a page switch that was measured as the dearest part of a first view: Anatomy's two formula
displays cost its switch 60-90 ms (docs/benchmarks.md). This element gives the same KaTeX the same formula:
- Streamlit's own rehype-katex module (the KaTeX of its markdown, whose CSS and fonts every page already has) is
  imported once per browser tab, by its file name in the installed Streamlit (plugin_chunk);
- its output tree becomes page nodes directly (document.createElement), in a box that scrolls sideways on a narrow
  screen, can take keyboard focus and reads out as the LaTeX source (role="math", aria-label): the box of ui.latex;
- the visible HTML only (KaTeX's output "html"): the MathML copy KaTeX adds for screen readers repeats what the box's
  label already says;
- a display of several equations, written with \\qquad between them (parts()), has each drawn as a display of its
  own, side by side where the column has room and one under the other where it has not (a phone): the box scrolls
  only when one equation alone is wider than the screen.

Nothing in a formula reaches HTML: the formula is data, KaTeX reads it as TeX (without \\href or \\html*: KaTeX's
`trust` is off), and the page nodes are made one by one from KaTeX's output. Where the installed Streamlit has no
such module, or the element is switched off (ATTN_FORMULA_ELEMENT=0), ui.latex draws the formula in markdown.
"""
from __future__ import annotations

import json
import os
import re
from functools import lru_cache

import streamlit as st

from .chart import STREAMLIT_JS
from .elements import draw_by_data

NAME = "attention_explorer_formula"  # the component's name (AppTest: an UnknownElement "bidi_component")
SEPARATOR = r"\qquad"  # between two equations of one display (at the top level: not inside braces or environments)
_OFF = "ATTN_FORMULA_ELEMENT"  # "0": every formula through st.markdown (tests of that path, benchmarks)

JS = r"""
const PLUGIN = __PLUGIN__;  // Streamlit's rehype-katex module: its KaTeX, whose CSS the page already has
function katex() {
  if (!window.__aeTex) {
    const main = document.querySelector('script[type="module"][src*="/static/js/index."]');
    window.__aeTex = main ? import(new URL(PLUGIN, main.src).href).then((m) => m.default({ output: "html" }))
                          : Promise.reject(new Error("Streamlit's script is not in the page"));
    window.__aeTex.catch(() => { window.__aeTex = null; });  // (a later formula tries again)
  }
  return window.__aeTex;
}
// KaTeX's output tree (hast) as page nodes: hast names attributes in camelCase (ariaHidden, strokeWidth) except
// these, and marks an SVG's children by the svg element they stand in
const SVG = "http://www.w3.org/2000/svg", NAMES = { className: "class", viewBox: "viewBox",
                                                   preserveAspectRatio: "preserveAspectRatio" };
function node(h, svg) {
  if (h.type === "text") return document.createTextNode(h.value);
  if (h.type !== "element") return null;
  const inSvg = svg || h.tagName === "svg";
  const el = inSvg ? document.createElementNS(SVG, h.tagName) : document.createElement(h.tagName);
  for (const [k, v] of Object.entries(h.properties || {})) {
    if (v === null || v === undefined || v === false || /^xmlns/i.test(k)) continue;  // (set by createElementNS)
    el.setAttribute(NAMES[k] || k.replace(/[A-Z]/g, (c) => "-" + c.toLowerCase()),
                    Array.isArray(v) ? v.join(" ") : v === true ? "" : String(v));
  }
  for (const c of h.children || []) { const d = node(c, inSvg); if (d) el.appendChild(d); }
  return el;
}
export default function ({ data, parentElement }) {
  const { tex, label } = data || {};
  const parts = (data && data.parts) || [tex];  // the display's equations, each a display of its own
  let box = parentElement.querySelector(".formula");
  if (!box) {
    box = document.createElement("div");
    box.className = "formula ae-formula"; box.tabIndex = 0; box.setAttribute("role", "math");
    parentElement.appendChild(box);
  }
  box.setAttribute("aria-label", label || "");
  box.classList.toggle("ae-parts", parts.length > 1);
  if (box.__tex === tex) return;  // (a rerun that sends the same formula)
  box.__tex = tex;
  const show = (nodes) => { if (box.__tex === tex) box.replaceChildren(...nodes); };
  katex().then((render) => {  // the plugin replaces each .math-display element by KaTeX's output, in its parent
    const parent = { type: "element", tagName: "div", properties: {}, children: parts.map((p) => ({ type: "element",
      tagName: "span", properties: { className: ["math-display"] }, children: [{ type: "text", value: p }] })) };
    render({ type: "root", children: [parent] }, { message() {} });
    show(parent.children.map((h) => node(h)).filter(Boolean));
  }).catch(() => show([document.createTextNode(tex)]));  // no KaTeX: the formula's source, readable
}
"""


@lru_cache(maxsize=1)
def plugin_chunk() -> str | None:
    """The file name of Streamlit's rehype-katex module in the installed Streamlit (it carries a hash of each build);
    None unless there is exactly one."""
    found = sorted(p.name for p in STREAMLIT_JS.glob("rehype-katex.*.js"))
    return found[0] if len(found) == 1 else None


def available() -> bool:
    """Whether ui.latex draws through this element (the module is there and the element is not switched off)."""
    return os.environ.get(_OFF, "1") != "0" and plugin_chunk() is not None


@lru_cache(maxsize=1)
def _element():
    return st.components.v2.component(NAME, js=JS.replace("__PLUGIN__", json.dumps(plugin_chunk())),
                                      isolate_styles=False)


# a TeX token: a command (a backslash and its letters, or one other character), a brace, or a run of anything else
_TOKEN = re.compile(r"\\(?:[A-Za-z]+|.)|[{}]|[^\\{}]+", re.S)


def parts(tex: str) -> list[str]:
    """The equations of a display: tex cut at each \\qquad at its top level, that is outside braces, \\begin ... \\end
    environments and \\left ... \\right pairs (inside them \\qquad is only a space). One part when there is none."""
    out, start, depth = [], 0, 0
    for m in _TOKEN.finditer(tex):
        token = m[0]
        if token in ("{", r"\begin", r"\left"):
            depth += 1
        elif token in ("}", r"\end", r"\right"):
            depth -= 1
        elif token == SEPARATOR and depth == 0:
            out.append(tex[start:m.start()])
            start = m.end()
    out.append(tex[start:])
    found = [p.strip() for p in out if p.strip()]
    return found or [tex]


def draw(tex: str, label: str) -> None:
    """One formula element: `tex` for KaTeX (display mode), `label` what a screen reader says for it (the same
    formula twice in one run: two elements, elements.draw_by_data)."""
    split = parts(tex)
    draw_by_data(_element(), {"tex": tex, "label": label, **({"parts": split} if len(split) > 1 else {})}, "formula")
