"""The house table element: a small static table of our own labels and numbers, drawn straight into the page.

A markdown table (st.markdown) is parsed by Streamlit's markdown pipeline into a syntax tree and then into one React
element per cell on every page switch: a dear part of a first view (docs/benchmarks.md measures Optimizers' results
tables both ways). This element gets the cells as data (strings) and makes the table's nodes itself:
- every cell and header is text (textContent): nothing in one is read as markup or HTML, whatever it holds;
- a table looks as Streamlit's markdown tables look (the same spacing, borders in the theme's table border colour,
  the theme's font), by the page's CSS (style.PAGE_CSS: `.ae-tables`), which also gives it the markdown tables' rules
  for phones; a title goes above its table in bold, as ui.table writes it;
- a real table (header cells in <thead>, scope="col"), read by screen readers as one.

A table with markup in a cell (an Md cell: inline code, bold colour) stays markdown (ui.table decides), and so does
every table where the element is switched off (ATTN_TABLE_ELEMENT=0).
"""
from __future__ import annotations

import os
from functools import lru_cache

import streamlit as st

from .elements import draw_by_data

NAME = "attention_explorer_table"  # the component's name (AppTest: an UnknownElement "bidi_component")
BOX = "ae-tables"  # the class of the element's box (style.PAGE_CSS; browser tests find the tables by it)
_OFF = "ATTN_TABLE_ELEMENT"  # "0": every table through st.markdown

JS = r"""
function table({ title, columns, rows }) {
  const out = [];
  if (title) { const p = document.createElement("p"), b = document.createElement("strong"); b.textContent = title;
               p.appendChild(b); out.push(p); }
  const t = document.createElement("table"), head = t.createTHead().insertRow(), body = t.createTBody();
  for (const c of columns) { const th = document.createElement("th"); th.scope = "col"; th.textContent = c;
                             head.appendChild(th); }
  for (const r of rows) { const tr = body.insertRow(); for (const c of r) tr.insertCell().textContent = c; }
  out.push(t);
  return out;
}
export default function ({ data, parentElement }) {
  let box = parentElement.querySelector(".__BOX__");
  if (!box) { box = document.createElement("div"); box.className = "__BOX__"; parentElement.appendChild(box); }
  const key = JSON.stringify((data && data.tables) || []);
  if (box.__key === key) return;  // (a rerun that sends the same tables)
  box.__key = key;
  box.replaceChildren(...((data && data.tables) || []).flatMap(table));
}
""".replace("__BOX__", BOX)


def available() -> bool:
    """Whether plain tables are drawn by this element (it is not switched off)."""
    return os.environ.get(_OFF, "1") != "0"


@lru_cache(maxsize=1)
def _element():
    return st.components.v2.component(NAME, js=JS, isolate_styles=False)


def draw(tables: list[dict]) -> None:
    """Tables, one under the other, in one element: each {"title": str | None, "columns": [str], "rows": [[str]]}
    (the same tables twice in one run: two elements, elements.draw_by_data)."""
    draw_by_data(_element(), {"tables": tables}, "table")
