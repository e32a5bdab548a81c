"""The house chart element: a plotly figure drawn by plotly.js in the page itself, once.

st.plotly_chart mounts a React chart that lays the figure out twice (once before and once after it knows its width) and
loads Streamlit's own plotly bundle on the first chart of every tab. Measured in Chromium on the figures of our pages
(docs/benchmarks.md): Optimizers' three charts 0.97 -> 0.70 s, Language model's 0.89 -> 0.48 s with this element.

How it works:
- plotly.min.js of the pinned plotly package is copied once into the app's static folder (`static/`, Streamlit's
  static serving) and loaded once per browser tab, at an address that names plotly's version. The server's warm-up
  gzips it once (compress) and PlotlyAsset sends that copy with a year's caching, instead of Streamlit compressing
  4.6 MB again for every visitor. PlotlyAsset also puts head_tags() first in the page's HTML: plotly.js is fetched
  with the page's first requests and run as soon as it is in, while the browser still waits for Streamlit's own
  scripts (cold start). Should the HTML not carry them, a session's first run starts the load before anything else
  (preload: a hidden element first in the sidebar);
- each chart is a `st.components.v2` element without an iframe or shadow root: its data is the figure's JSON as bytes
  (no second encoding), parsed once in the browser and drawn with one `Plotly.newPlot`;
- Streamlit's plotly theme is applied as st.plotly_chart applies it: the figure carries plotly's "streamlit" template
  (set by Streamlit at import) whose colours are placeholders (#000001...); the element replaces them with the
  theme's colours (read from the CSS variables Streamlit gives every component) and sets the same layout defaults.
  A theme switch calls the element again, which redraws it in the new colours;
- the width follows the column (a ResizeObserver), the modebar has the PNG button of PLOTLY_CONFIG;
- a played history's slider, play buttons and frames come just after its chart is painted (controls()), and so do
  the legend and colour bars of a figure that names them in layout.meta.after_paint (its margins keep their room);
  a chart drawn with all its parts carries data-drawn="whole";
- once a tab has drawn its first chart, the code of the widgets other pages show is imported while the tab is idle
  (LAZY_ELEMENTS, through head_tags()): a page's first visit does not wait for it;
- a chart drawn with `on_select` reports a click on a point as st.plotly_chart's selection does
  (`st.session_state[key].selection["points"]`, each with curve_number, point_index, x, y), as a trigger: every click
  reruns the page once, the same point clicked twice included. A map of tiles (a trace whose `meta` is
  viz_core.plots.common.tiles(): the layer x head maps, the ranking's bars) reports the point whose tile is under the
  pointer or finger, found from the axes where it was pressed (pointer events: mouse, pen and touch alike), not by
  plotly's hit test on its invisible px-sized markers, which overlapped on a phone.

Where the static folder cannot be written (a read-only checkout) every chart is drawn by st.plotly_chart: `available()`
says which.
"""
from __future__ import annotations

import gzip
import json
import os
import shutil
from functools import lru_cache
from pathlib import Path

import plotly
import plotly.io as pio
import streamlit as st

from viz_core.plots.common import PLOTLY_CONFIG

NAME = "attention_explorer_chart"  # the component's name (AppTest: UnknownElement "bidi_component" with this name)
STATIC_DIR = Path(__file__).resolve().parents[2] / "static"  # Streamlit serves <app root>/static at ./app/static/
PLOTLY_JS = "plotly.min.js"
_OFF = "ATTN_PLOTLY_ELEMENT"  # "0": every chart through st.plotly_chart (benchmarks compare both)

# The browser side. Kept small: Streamlit sends it inline with every chart element.
JS = r"""
const SRC = "app/static/plotly.min.js?v=__PLOTLY_VERSION__";
function plotly() {
  if (!window.__aePlotly) {
    window.__aePlotly = new Promise((ok, fail) => {
      const s = document.createElement("script");
      s.src = new URL(SRC, document.baseURI).href;
      s.onload = () => ok(window.Plotly);
      s.onerror = () => { window.__aePlotly = null; fail(new Error("plotly.js could not be loaded")); };
      document.head.appendChild(s);
    });
  }
  return window.__aePlotly;
}
const HEX = /^#([0-9a-f]{6})$/i;
function rgb(c) { const m = HEX.exec(c.trim()); const n = m ? parseInt(m[1], 16) : 0xffffff;
  return [(n >> 16) & 255, (n >> 8) & 255, n & 255]; }
function isLight(c) { const [r, g, b] = rgb(c); return 0.299 * r + 0.587 * g + 0.114 * b > 127; }
function alpha(c, a) { const [r, g, b] = rgb(c); return `rgba(${r},${g},${b},${a})`; }
function theme(el) {
  const css = getComputedStyle(el), v = (n, d) => (css.getPropertyValue("--st-" + n) || d).trim();
  const bg = v("background-color", "#ffffff"), text = v("text-color", "#31333f"), light = isLight(bg);
  const list = (n) => v(n, "").split(",").map((s) => s.trim()).filter(Boolean);
  return { bg, text, light, font: v("font", "sans-serif"), headingFont: v("heading-font", v("font", "sans-serif")),
    heading: v("heading-color", text), border: v("border-color", alpha(text, 0.2)),
    secondary: v("secondary-background-color", bg), cat: list("chart-categorical-colors"),
    seq: list("chart-sequential-colors"), div: list("chart-diverging-colors"),
    grid: light ? "#e6eaf1" : "#31333F", tick: light ? "#808495" : "#e6eaf1", legend: light ? "#262730" : "#fafafa" };
}
function colours(json, t) {
  // Streamlit's plotly template writes placeholders #000001...#000040 (streamlit/elements/lib/
  // streamlit_plotly_theme.py): each replaced by the theme's colour, in one pass over the figure's JSON (40 passes
  // were 6 ms of Optimizers' switch)
  const by = {};
  const put = (from, list) => list.forEach((c, i) => { by["#" + String(from + i).padStart(6, "0")] = c; });
  put(1, t.cat); put(11, t.seq); put(21, t.div);
  put(32, [t.light ? "#29b09d" : "#7defa1", t.light ? "#ff2b2b" : "#ffabab", t.light ? "#0068c9" : "#83c9ff",
           t.grid, t.tick, t.legend, t.bg, alpha(t.text, 0.1), t.secondary]);
  return json.replace(/#0000[0-4][0-9](?![0-9a-f])/gi, (m) => by[m] || m);
}
function merge(into, from) {
  for (const [k, v] of Object.entries(from)) {
    if (v && typeof v === "object" && !Array.isArray(v)) {
      if (!into[k] || typeof into[k] !== "object") into[k] = {};
      merge(into[k], v);
    } else into[k] = v;
  }
  return into;
}
function defaults(t) {  // the layout defaults st.plotly_chart's theme sets (sizes in px)
  const font = { color: t.tick, family: t.font, size: 12 };
  const axis = { zerolinecolor: t.grid, gridcolor: t.grid, tickcolor: t.grid, minor: { gridcolor: t.grid },
    tickfont: { color: t.tick, size: 12 }, automargin: true };
  return { font, paper_bgcolor: t.bg, plot_bgcolor: t.bg,
    title: { font: { family: t.headingFont, size: 16, color: t.heading }, pad: { l: 2 }, xanchor: "left", x: 0 },
    legend: { title: { font: { size: 12, color: t.tick }, side: "top" }, valign: "top", bordercolor: "rgba(0,0,0,0)",
      borderwidth: 0, font: { size: 12, color: t.legend } },
    xaxis: merge({ showgrid: false, zeroline: false, title: { font: { color: t.tick, size: 14 }, standoff: 20 },
      rangeselector: { bgcolor: t.bg, bordercolor: t.grid, borderwidth: 1, x: 0 } }, axis),
    yaxis: merge({ ticklabelposition: "outside", title: { font: { color: t.tick, size: 14 }, standoff: 24 } }, axis),
    margin: { pad: 8, r: 0, l: 0 },
    hoverlabel: { bgcolor: t.bg, bordercolor: t.border, font: { color: t.tick, family: t.font, size: 12 } },
    coloraxis: { colorbar: { thickness: 16, xpad: 24, ticklabelposition: "outside", outlinecolor: "rgba(0,0,0,0)",
      outlinewidth: 8, len: 0.75, y: 0.5745, title: { font: { color: t.tick, size: 14 } },
      tickfont: { color: t.tick, size: 12 } } } };
}
// A chart drawn with every part it has (its after-paint parts too) carries data-drawn="whole" (tests wait for it).
// A played history's controls (plotly's slider and play buttons) and its frames are added just after the chart is
// painted, as a job of their own: plotly lays out every step's label of a slider, forcing a layout of the whole page
// for each, and Optimizers' race chart was drawn in 100 ms with them, 60 ms without. The figure keeps their room
// (its bottom margin), so nothing moves when they come. So do the parts a figure names in layout.meta.after_paint
// ("legend", "colorbars": the colour bars of its traces' markers), whose room its margins keep too: each is text
// that plotly measures one label at a time. Takes them out of `fig`; null where it has none.
function controls(fig) {
  const layout = fig.layout, meta = layout.meta || {}, recipe = meta.trail_frames, data = fig.data || [];
  const parts = meta.after_paint || [];
  if (!fig.frames && !recipe && !layout.sliders && !layout.updatemenus && !parts.length) return null;
  const given = fig.frames, n = data.length, per = meta.frame_bytes;
  const later = { frames: () => (given ? frameFloats(given, per) : recipe ? trailFrames(recipe, data, n) : []),
                  layout: { sliders: layout.sliders || [], updatemenus: layout.updatemenus || [] }, bars: [] };
  delete fig.frames; delete layout.sliders; delete layout.updatemenus;
  if (parts.includes("legend") && layout.showlegend !== false) {
    later.layout.showlegend = layout.showlegend === undefined ? null : true;  // (null: plotly's own default again)
    layout.showlegend = false;
  }
  if (parts.includes("colorbars")) data.forEach((d, i) => {
    if (d.marker && d.marker.showscale) { d.marker.showscale = false; later.bars.push(i); }
  });
  return later;
}
// The after-paint parts of `later` (controls()) put back on the chart, in one redraw.
function addLater(Plotly, gd, later) {
  return Plotly.addFrames(gd, later.frames()).then(() => (later.bars.length
    ? Plotly.update(gd, { "marker.showscale": true }, later.layout, later.bars)
    : Plotly.relayout(gd, later.layout)));
}
// A played history whose matrices were stored in 1/255 steps (training snapshots) comes with each frame's z as its
// bytes k (layout.meta.frame_bytes = 255: viz_core.plots.common.animated, a quarter of float32's bytes): each becomes
// k / 255 in a Float32Array, the float32 the server held, in rows as plotly reads a 2-D typed array.
function frameFloats(frames, per) {
  if (!per) return frames;
  for (const f of frames) for (const d of f.data || []) {
    const z = d.z;
    if (!z || z.dtype !== "u1" || !z.bdata) continue;
    const k = values(z), out = new Float32Array(k.length);
    for (let i = 0; i < k.length; i++) out[i] = k[i] / per;
    const shape = String(z.shape || k.length).split(",").map(Number);
    d.z = shape.length === 2 ? Array.from({ length: shape[0] }, (_, r) => out.subarray(r * shape[1], (r + 1) * shape[1]))
      : out;
  }
  return frames;
}
// A race whose frames follow from its own faint full paths comes without them (layout.meta.trail_frames, written by
// viz_core.plots.optimizers.trail_frames, which says the rule): they are made here when the controls are added,
// after the first paint. Frame s: the first static traces unchanged, each racer's trail (path[:e + 1], e = min(s,
// n - 1), thinned to k points at indices round(i e / (k - 1)), halves up), its head path[e], and on the line-fit
// surface its line y = w x + b through line_x, with (w, b) the head.
const TYPED = { f8: Float64Array, f4: Float32Array, i4: Int32Array, u4: Uint32Array, i2: Int16Array,
                u2: Uint16Array, i1: Int8Array, u1: Uint8Array };
function values(v) {  // a trace's array: a list, a typed array, or plotly's typed-array spec {dtype, bdata}
  if (!v || !v.bdata) return v || [];
  const raw = atob(v.bdata), bytes = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  return new TYPED[v.dtype](bytes.buffer);
}
function trailFrames(r, data, n) {
  const paths = r.paths.map((i) => [values(data[i].x), values(data[i].y)]);
  const traces = Array.from({ length: n }, (_, i) => i);
  return r.steps.map((s, f) => {
    const points = f === r.steps.length - 1 ? r.last_points : r.points;
    const out = Array.from({ length: r.first }, () => ({})), heads = [];
    for (const [x, y] of paths) {
      const e = Math.min(s, x.length - 1), k = Math.min(e + 1, points), tx = [], ty = [];
      for (let i = 0; i < k; i++) {
        const j = k < 2 ? 0 : Math.floor((2 * i * e + k - 1) / (2 * (k - 1)));
        tx.push(x[j]); ty.push(y[j]);
      }
      out.push({ type: "scatter", x: tx, y: ty });
      heads.push([x[e], y[e]]);
    }
    for (const [hx, hy] of heads) out.push({ type: "scatter", x: [hx], y: [hy] });
    if (r.line_x) for (const [w, b] of heads) out.push({ type: "scatter", x: r.line_x, y: r.line_x.map((v) => w * v + b) });
    return { data: out, traces, name: String(s) };
  });
}
// A figure whose legend stands in rows above the plot (layout.meta.legend_row_px: the room one more row takes) gets the
// room of the rows it wraps into at this chart's width in its top margin before it is drawn: otherwise plotly widens
// the margin itself and draws the whole figure a second time (Optimizers' race on a phone: 4 rows, and 2 rows in a
// window 1000 px wide); a resize counts them again. Rows as plotly's legend lays them out in the plot's width, each
// entry its symbol and gap (40 px) and its name in the legend's 12 px font (measured here, plus a pixel), 5 px to the
// next: a legend of groups of one entry each packs them in turn (a new row when the next does not fit); any other fits
// as many of the widest entry as there is room for (viz_core.plots.common.legend_rows). Heatmaps and the like list no
// entry unless asked to.
const UNLISTED = new Set(["heatmap", "contour", "histogram2d", "histogram2dcontour", "image", "surface"]);
function legendRows(data, margin, width, font) {
  const shown = data.filter((d) => d.name && d.visible !== false
    && (d.showlegend === true || (d.showlegend === undefined && !UNLISTED.has(d.type || "scatter"))));
  const plot = width - (margin.l ?? 80) - (margin.r ?? 80);
  if (shown.length < 2 || plot <= 0) return 1;
  const pen = legendRows.pen || (legendRows.pen = document.createElement("canvas").getContext("2d"));
  pen.font = `12px ${font}`;
  const widths = shown.map((d) => 40 + Math.ceil(pen.measureText(String(d.name)).width) + 1);
  const groups = shown.map((d) => d.legendgroup).filter(Boolean);
  if (!groups.length || new Set(groups).size < groups.length) {  // (a group of several: the widest entry's rule)
    if (widths.reduce((a, b) => a + b + 5, -5) <= plot) return 1;
    return Math.ceil(widths.length / Math.max(1, Math.floor(plot / Math.max(...widths))));
  }
  let rows = 1, x = 0;
  for (const w of widths) {
    if (x > 0 && x + w + 5 > plot) { rows += 1; x = 0; }
    x += w + 5;
  }
  return rows;
}
// The top margin a figure opted in (meta.legend_row_px) takes at this width: its own (`top`, room for one row of
// legend) and the room of every further row. null for any other figure.
function legendTop(data, layout, top, width, font) {
  const perRow = layout.meta && layout.meta.legend_row_px;
  if (!perRow || !width || layout.showlegend === false) return null;
  return top + (legendRows(data, layout.margin || {}, width, font) - 1) * perRow;
}
function figure(bytes, t) {
  const fig = JSON.parse(colours(new TextDecoder().decode(bytes), t));
  const layout = fig.layout = fig.layout || {};
  const template = layout.template = layout.template || {};
  template.layout = merge(template.layout || {}, defaults(t));
  const title = layout.title;
  if (title && (typeof title === "string" || typeof title.text === "string")) {
    const o = typeof title === "string" ? { text: title } : title;
    if (o.text) layout.title = Object.assign({}, o, { text: `<b>${o.text}</b>` });
  }
  return fig;
}
// Every draw lists each trace's attributes that hold an array (plotly's PlotSchema.findArrayAttributes, called for
// every trace by supplyDefaults, on every draw and every frame played) by crawling the whole attribute tree of the
// trace's type, allocating two arrays per attribute: a large part of each draw of a figure of many traces.
// Which attributes may hold one is a property of the type, so the crawl is done once per type (plan) and each trace
// only visits those paths, as plotly's own walk does: the same list in the same order. The first trace of each type
// is listed both ways, and any difference puts plotly's own function back for good.
function quick(Plotly) {
  const PS = Plotly.PlotSchema, theirs = PS && PS.findArrayAttributes, crawl = PS && PS.crawl;
  if (!theirs || !crawl || theirs.__ae) return Plotly;
  let base = null;  // the attributes of every trace: the first crawled for a trace of no type
  PS.crawl = function (attrs, cb, level) {
    if (base === null && level === undefined) base = attrs;
    return crawl.apply(this, arguments);
  };
  try { theirs({}); } finally { PS.crawl = crawl; }
  if (!base) return Plotly;
  const plans = new Map();
  const plan = (attrs) => {
    let p = plans.get(attrs);
    if (p) return p;
    p = [];
    let path = [], linked = [];
    crawl(attrs, (a, name, _, level) => {
      path = path.slice(0, level).concat([name]);
      linked = linked.slice(0, level).concat([a && a._isLinkedToArray]);
      if (a && (a.valType === "data_array" || a.arrayOk === true)
          && !(path[level - 1] === "colorbar" && (name === "ticktext" || name === "tickvals"))) p.push([path, linked]);
    });
    plans.set(attrs, p);
    return p;
  };
  const isArray = (v) => Array.isArray(v) || (ArrayBuffer.isView(v) && !(v instanceof DataView));
  const isPlain = (o) => Object.prototype.toString.call(o) === "[object Object]"
    && Object.getPrototypeOf(o).hasOwnProperty("hasOwnProperty");
  const visit = (out, path, linked, box, u, at) => {
    const v = box[path[u]], here = at + path[u];
    if (u === path.length - 1) { if (isArray(v)) out.push(here); }
    else if (linked[u]) {
      if (!Array.isArray(v)) return;
      for (let d = 0; d < v.length; d++) {
        if (isPlain(v[d])) visit(out, path, linked, v[d], u + 1, here + "[" + d + "].");
      }
    } else if (isPlain(v)) visit(out, path, linked, v, u + 1, here + ".");
  };
  const fast = function (trace) {
    const mine = trace._module && trace._module.attributes, fresh = !!mine && !plans.has(mine), out = [];
    for (const [p, l] of plan(base)) visit(out, p, l, trace, 0, "");
    if (mine) for (const [p, l] of plan(mine)) visit(out, p, l, trace, 0, "");
    if (fresh) {
      const listed = theirs.apply(this, arguments);
      if (listed.join("\n") !== out.join("\n")) { PS.findArrayAttributes = theirs; return listed; }
    }
    return out;
  };
  fast.__ae = true;
  fast.theirs = theirs;  // (tests compare the two on every trace drawn)
  PS.findArrayAttributes = fast;
  return Plotly;
}
// One chart drawn per browser task, the ones on screen first: the first chart a person sees is painted before the
// others are laid out, and a page of many charts never blocks the tab for all of them at once.
const queue = window.__aeQueue || (window.__aeQueue = { jobs: [], busy: false });
// A chart of the page being left stays in the page, marked stale, until the new page's script has run (then it is
// removed, or kept if the rerun sent it again): it waits, up to a second, while the new page's charts go first.
// A chart off screen waits too, up to a second, while the page's script still runs: the rest of the page (its text
// and controls, and the end of the run) comes first, instead of waiting behind charts nobody sees yet.
const WAIT = 3;
function running() {
  const app = document.querySelector("[data-testid='stApp']");
  return !!app && app.getAttribute("data-test-script-state") === "running";
}
function rank(job) {
  const el = job.el;
  if (!el.isConnected) return -1;  // removed: dropped at once
  const waited = performance.now() - job.since > 1000;
  if (el.closest("[data-stale='true']")) return waited ? 2 : WAIT;
  const r = el.getBoundingClientRect();
  if (r.bottom > 0 && r.top < window.innerHeight) return 0;
  return running() && !waited ? WAIT : 1;
}
function later() {  // nothing to draw yet: again as soon as the page's run ends (or in 50 ms when none runs)
  const app = document.querySelector("[data-testid='stApp']");
  if (!app || !running()) { setTimeout(pump, 50); return; }
  let timer = 0;
  const obs = new MutationObserver(() => {
    if (!running()) { obs.disconnect(); clearTimeout(timer); setTimeout(pump, 0); }
  });
  obs.observe(app, { attributes: true, attributeFilter: ["data-test-script-state"] });
  timer = setTimeout(() => { obs.disconnect(); pump(); }, 250);  // (a chart waits a second at most)
}
function pump() {
  queue.jobs = queue.jobs.filter((j) => rank(j) >= 0);
  if (!queue.jobs.length) { queue.busy = false; return; }
  let best = 0;
  const ranks = queue.jobs.map(rank);
  ranks.forEach((r, i) => { if (r < ranks[best]) best = i; });
  if (ranks[best] === WAIT) { later(); return; }
  const job = queue.jobs.splice(best, 1)[0];
  Promise.resolve().then(job.run).catch(() => {}).then(afterPaint);
}
function afterPaint() {  // the next job once this chart is on screen (a hidden tab paints no frames: 100 ms at most)
  let next = () => { next = () => {}; setTimeout(pump, 0); };
  requestAnimationFrame(() => next());
  setTimeout(() => next(), 100);
}
function schedule(job) { queue.jobs.push(job); if (!queue.busy) { queue.busy = true; setTimeout(pump, 0); } }
function point(p) {  // a clicked point as st.plotly_chart reports it (the fields the pages read)
  const out = { curve_number: p.curveNumber, point_number: p.pointNumber, point_index: p.pointIndex, x: p.x, y: p.y };
  if (p.z !== undefined) out.z = p.z;
  if (p.customdata !== undefined) out.customdata = p.customdata;
  return out;
}
// A map whose points own tiles (a trace with meta.tiles, viz_core.plots.common.tiles): a click or tap reports the
// point whose tile holds it, found here from the axes (each point owns the cell up to halfway to its neighbours along
// meta.tiles, "xy" or "y": the nearest centre; a heatmap reports its cell, [row, column]). Exact at any width;
// plotly's hit test on px-sized invisible markers was not (they overlapped on a phone).
const plain = (v) => (ArrayBuffer.isView(v) ? Array.from(v) : v);
function tiled(gd) { return (gd.data || []).some((t) => t.meta && t.meta.tiles); }
function tileAt(gd, e) {
  const L = gd._fullLayout, svg = gd.querySelector(".main-svg");
  if (!L || !svg) return null;
  const box = svg.getBoundingClientRect();
  for (let i = 0; i < gd.data.length; i++) {
    const how = gd.data[i].meta && gd.data[i].meta.tiles, t = gd._fullData[i];
    if (!how || !t || t.visible !== true) continue;
    const xa = L["xaxis" + t.xaxis.slice(1)], ya = L["yaxis" + t.yaxis.slice(1)];
    const px = e.clientX - box.left - xa._offset, py = e.clientY - box.top - ya._offset;
    if (px < 0 || px > xa._length || py < 0 || py > ya._length) continue;  // off the plot: no tile
    const xs = t.x || [], ys = t.y || [], n = Math.max(xs.length, ys.length);
    if (t.type === "heatmap") {  // a grid of cells: the nearest column centre and the nearest row centre
      const near = (vals, ax, p) => {
        let best = -1, bestD = Infinity;
        for (let j = 0; j < vals.length; j++) {
          const d = Math.abs(ax.c2p(ax.d2c(vals[j])) - p);
          if (d < bestD) { bestD = d; best = j; }
        }
        return best;
      };
      const col = near(xs, xa, px), row = near(ys, ya, py);
      if (col < 0 || row < 0) continue;
      return { curve_number: i, point_number: [row, col], point_index: [row, col], x: plain(xs[col]),
               y: plain(ys[row]) };
    }
    const X = how.includes("x"), Y = how.includes("y");
    let best = -1, bestD = Infinity;
    for (let j = 0; j < n; j++) {
      const dx = X ? xa.c2p(xa.d2c(xs[j])) - px : 0, dy = Y ? ya.c2p(ya.d2c(ys[j])) - py : 0;
      const d = dx * dx + dy * dy;
      if (d < bestD) { bestD = d; best = j; }
    }
    if (best < 0) continue;
    const out = { curve_number: i, point_number: best, point_index: best, x: plain(xs[best]), y: plain(ys[best]) };
    if (t.customdata && t.customdata[best] !== undefined) out.customdata = plain(t.customdata[best]);
    return out;
  }
  return null;
}
function listenTaps(gd) {  // once per chart: a press and a release in place (mouse, pen or finger) on the plot
  if (gd.__aeTaps) return;
  gd.__aeTaps = true;
  gd.addEventListener("pointerdown", (e) => {
    if (!e.isPrimary || e.button !== 0) return;
    if (e.target.closest && e.target.closest(".modebar-container, .legend, .colorbar")) return;
    const d = { id: e.pointerId, x: e.clientX, y: e.clientY };
    // the release is heard on the window: plotly lays a cover over the page while a mouse button is down
    const up = (u) => {
      if (u.pointerId !== d.id) return;
      removeEventListener("pointerup", up, true);
      removeEventListener("pointercancel", up, true);  // (the finger scrolled the page: no tap)
      if (u.type !== "pointerup" || Math.hypot(u.clientX - d.x, u.clientY - d.y) > 10 || !gd.__aeReport) return;
      const p = tileAt(gd, { clientX: d.x, clientY: d.y });  // where the finger landed
      if (p) gd.__aeReport(p);
    };
    addEventListener("pointerup", up, true);
    addEventListener("pointercancel", up, true);
  });
}
export default function ({ data, parentElement, setTriggerValue }) {
  const el = parentElement;
  let gd = el.querySelector(".ae-chart");
  if (!gd) { gd = document.createElement("div"); gd.className = "ae-chart"; el.appendChild(gd); }
  let width = 0, observer = null, gone = false;
  const job = { el, since: performance.now(), run: () => plotly().then(quick).then((Plotly) => {
    if (gone || !data) return;
    const look = theme(el);
    const fig = figure(data, look);
    const top = ((fig.layout.margin || {}).t ?? 100);
    const fitTop = (w) => legendTop(fig.data || [], fig.layout, top, w, look.font);
    const first = fitTop(el.clientWidth);
    if (first !== null) fig.layout.margin = Object.assign({}, fig.layout.margin, { t: first });
    // a map of tiles: no selection of plotly's (it would mark the point plotly's hit test found, not the tile's)
    if (fig.select && (fig.data || []).some((t) => t.meta && t.meta.tiles)) fig.layout.clickmode = "none";
    const later = controls(fig);
    const draw = gd.classList.contains("js-plotly-plot") && !later ? Plotly.react : Plotly.newPlot;
    const drawn = gd.__aeDrawn = {};
    gd.removeAttribute("data-drawn");
    const whole = () => { if (gd.__aeDrawn === drawn) gd.setAttribute("data-drawn", "whole"); };
    return draw(gd, { data: fig.data || [], layout: fig.layout,
                      config: Object.assign({}, fig.config, { responsive: false }) }).then(() => {
      if (!later) whole();
      else schedule({ el, since: performance.now(), run: () => {  // the controls, once this chart is painted
        if (gone || gd.__aeDrawn !== drawn) return;  // (a newer draw has its own)
        return addLater(Plotly, gd, later).then(whole);
      } });
      // (Plotly.newPlot drops a chart's listeners, Plotly.react keeps them: one, set anew)
      gd.removeAllListeners("plotly_click");
      gd.__aeReport = null;
      if (fig.select && tiled(gd)) {  // the tile under the pointer (plotly's own click is not used)
        gd.__aeReport = (p) => setTriggerValue("selection", { points: [p] });
        listenTaps(gd);
      } else if (fig.select) {
        gd.on("plotly_click", (ev) => setTriggerValue("selection", { points: (ev.points || []).map(point) }));
      }
      if (window.__aeChunks) window.__aeChunks();  // (head_tags: once per tab)
      width = el.clientWidth;
      observer = new ResizeObserver(() => {
        if (!el.clientWidth || el.clientWidth === width) return;
        width = el.clientWidth;
        const t = fitTop(width);  // (a legend above the plot may take more or fewer rows now)
        if (t !== null && gd.layout.margin) gd.layout.margin.t = t;
        Plotly.Plots.resize(gd);
      });
      observer.observe(el);
    });
  }).catch((e) => { gd.textContent = String(e && e.message || e); }) };
  schedule(job);
  return () => { gone = true; if (observer) observer.disconnect(); };
}
"""


JS = JS.replace("__PLOTLY_VERSION__", plotly.__version__)  # a new plotly is a new address: no stale copy in a browser
# The preloader: the same loader, started by an element that comes before every other in the first run of a session
PRELOAD_JS = JS[:JS.index("const HEX")] + "export default function () { plotly().catch(() => {}); }\n"
PRELOAD_KEY = "ae_plotly_preload"  # hidden by the page's CSS (PAGE_CSS): no room taken in the sidebar


@lru_cache(maxsize=1)
def available() -> bool:
    """Whether charts go through the house element: plotly.min.js of the installed plotly is in the static folder
    (copied there once, the first time; a same-size copy is kept), and the element is not switched off."""
    if os.environ.get(_OFF, "1") == "0":
        return False
    source = Path(plotly.__file__).parent / "package_data" / PLOTLY_JS
    target = STATIC_DIR / PLOTLY_JS
    try:
        if not target.is_file() or target.stat().st_size != source.stat().st_size:
            STATIC_DIR.mkdir(exist_ok=True)
            partial = target.with_suffix(f".{os.getpid()}.part")
            shutil.copyfile(source, partial)
            os.replace(partial, target)  # atomic: a browser never gets half a file
        return True
    except OSError:
        return False


@lru_cache(maxsize=1)
def _element():
    return st.components.v2.component(NAME, js=JS, isolate_styles=False)


@lru_cache(maxsize=1)
def _preloader():
    return st.components.v2.component(NAME + "_preload", js=PRELOAD_JS, isolate_styles=False)


def preload() -> None:
    """Start loading plotly.js in the browser now, before the page's first chart is sent (so on a cold start
    the 4.6 MB script is fetched while the page's other elements are drawn and its script runs). Called first in a
    session's first run; later runs find it loaded (once per browser tab)."""
    if available():
        _preloader()(key=PRELOAD_KEY, width="stretch", height="content")


# ---------------------------------------------------------------- plotly.js, gzipped once
GZ_NAME = f"plotly-{plotly.__version__}.min.js.gz"  # next to plotly.min.js in static/; named by plotly's version


def compress() -> Path | None:
    """Write static/GZ_NAME once per plotly version (gzip -9: 4.6 -> 1.4 MB, done by the warm-up thread, never in a
    visitor's run): the file PlotlyAsset sends. None where it cannot be written."""
    target = STATIC_DIR / GZ_NAME
    if not available():
        return None
    if target.is_file():
        return target
    try:
        partial = target.with_suffix(f".{os.getpid()}.part")
        with open(STATIC_DIR / PLOTLY_JS, "rb") as src, gzip.open(partial, "wb", compresslevel=9) as out:
            shutil.copyfileobj(src, out)
        os.replace(partial, target)
        return target
    except OSError:
        return None


_GZIPPED: dict[Path, bytes] = {}  # the gzipped copy, read once per path (1.4 MB, never read again per request)


def _gzipped(path: Path) -> bytes | None:
    """The gzipped copy's bytes, read from disk the first time it exists; None until compress() has written it."""
    if path not in _GZIPPED:
        try:
            _GZIPPED[path] = path.read_bytes()
        except OSError:
            return None
    return _GZIPPED[path]


# Streamlit's browser code comes in chunks, and the chunk of each kind of widget is fetched and run the first time a
# page of the tab shows one: Optimizers' number boxes and Scaling's sliders waited for theirs and their dependencies.
# So once the tab has drawn its first chart, these are imported in the background, one at a time while the tab is
# idle (the same modules Streamlit imports later: it then finds them loaded). Not with the page's own scripts: the
# first page would wait for them.
STREAMLIT_JS = Path(st.__file__).parent / "static" / "static" / "js"  # the installed Streamlit's browser modules
LAZY_ELEMENTS = ("Button", "ButtonGroup", "Checkbox", "DownloadButton", "Metric", "NumberInput", "Selectbox", "Slider",
                 "Spinner", "rehype-katex")  # (and the KaTeX module the formula element imports: formula.py)
CHUNKS_JS = r"""
window.__aeChunks = function () {
  var main = document.querySelector('script[type="module"][src*="/static/js/index."]');
  if (window.__aeChunked || !main) return;
  window.__aeChunked = true;
  var names = __CHUNKS__.slice();
  var idle = window.requestIdleCallback || function (f) { return setTimeout(f, 50); };
  var next = function () {  // one at a time, each when the tab is idle: a click on the first page is not kept waiting
    var name = names.shift();
    if (name) import(new URL(name, main.src).href).catch(function () {}).then(function () { idle(next); });
  };
  idle(next);
};
"""


@lru_cache(maxsize=1)
def lazy_chunks() -> list[str]:
    """The file names of LAZY_ELEMENTS' chunks in the installed Streamlit (their names carry a hash of each build)."""
    return sorted(p.name for p in STREAMLIT_JS.glob("*.js") if p.name.split(".")[0] in LAZY_ELEMENTS)


@lru_cache(maxsize=1)
def head_tags() -> bytes:
    """What the page's HTML gets first in its <head> (PlotlyAsset): plotly.js is fetched before the page's ~60 scripts
    of Streamlit take the browser's six connections (rel=preload: fetched, not run), and run as soon as it is in (the
    link's load event; the page's load event at the latest). That is while the browser still waits for Streamlit's
    scripts, not after the page's first elements are drawn, so the script's parsing does not delay the first
    heatmap (bench/bench_browser.py's cold row measures it). It goes through the chart element's own promise (window.__aePlotly): fetched and
    run once, whichever asks first."""
    src = f"./app/static/{PLOTLY_JS}?v={plotly.__version__}"
    run = ('<script>(function () { var src = new URL("' + src + '", document.baseURI).href;'
           ' window.__aeRunPlotly = function () { if (window.__aePlotly) return;'
           ' window.__aePlotly = new Promise(function (ok, fail) { var s = document.createElement("script");'
           ' s.src = src; s.onload = function () { ok(window.Plotly); };'
           ' s.onerror = function () { window.__aePlotly = null; fail(new Error("plotly.js could not be loaded")); };'
           ' document.head.appendChild(s); }); window.__aePlotly.catch(function () {}); };'
           ' addEventListener("load", window.__aeRunPlotly); })();'
           + CHUNKS_JS.replace("__CHUNKS__", json.dumps(lazy_chunks())) + '</script>')
    return (run + f'<link rel="preload" as="script" href="{src}" onload="window.__aeRunPlotly()">').encode()


def with_head_tags(html: bytes) -> bytes:
    """The page's HTML with head_tags() first in its <head> (or before its </head>); unchanged without either, or
    when charts are drawn by st.plotly_chart (no plotly.min.js of ours to load)."""
    if not available():
        return html
    if b"<head>" in html:
        return html.replace(b"<head>", b"<head>" + head_tags(), 1)
    if b"</head>" in html:
        return html.replace(b"</head>", head_tags() + b"</head>", 1)
    return html


class PlotlyAsset:
    """ASGI middleware: plotly.min.js sent from its gzipped copy (compress()), with a year's caching (its address
    carries plotly's version). Without it Streamlit's gzip middleware compresses the 4.6 MB file again for every
    visitor, on the first chart's way (bench/bench_browser.py's cold row measures it). Any other request, a client that
    does not take gzip, or a copy not written yet: served as before. The page's HTML (a 200 text/html answer to a
    GET, not compressed) gets head_tags()."""

    SUFFIX = "/app/static/" + PLOTLY_JS

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] not in ("GET", "HEAD"):
            return await self.app(scope, receive, send)
        if not scope["path"].endswith(self.SUFFIX):
            return await self.app(scope, receive, _HtmlHead(send, head_only=scope["method"] == "HEAD"))
        accepts = b"gzip" in dict(scope.get("headers") or []).get(b"accept-encoding", b"")
        body = _gzipped(STATIC_DIR / GZ_NAME) if accepts else None
        if body is None:
            return await self.app(scope, receive, send)
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", b"application/javascript"), (b"content-encoding", b"gzip"),
            (b"content-length", str(len(body)).encode()), (b"vary", b"Accept-Encoding"),
            (b"cache-control", b"public, max-age=31536000, immutable")]})
        await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body})


class _HtmlHead:
    """The `send` of one GET: a 200 text/html answer, plain or gzipped (Streamlit's gzip middleware compresses the
    page for a browser), is held until its last chunk, then sent with_head_tags() (compressed again where it was) and
    its new content-length; any other answer passes as it comes. For a HEAD (head_only), a plain page's
    content-length is the one the GET's would have."""

    def __init__(self, send, head_only: bool = False):
        self.send, self.head_only, self.start, self.chunks, self.gzipped = send, head_only, None, [], False

    async def __call__(self, message):
        if message["type"] == "http.response.start":
            headers = {k.lower(): v for k, v in message.get("headers") or []}
            encoding = headers.get(b"content-encoding")
            if (message.get("status") == 200 and headers.get(b"content-type", b"").startswith(b"text/html")
                    and encoding in (None, b"gzip") and not (self.head_only and encoding)):
                if not self.head_only:
                    self.start, self.gzipped = message, encoding == b"gzip"
                    return None
                if available() and headers.get(b"content-length", b"").isdigit():
                    length = int(headers[b"content-length"]) + len(head_tags())
                    message = {**message, "headers": [(k, v) for k, v in message["headers"]
                                                      if k.lower() != b"content-length"]
                               + [(b"content-length", str(length).encode())]}
            return await self.send(message)
        if message["type"] != "http.response.body" or self.start is None:
            return await self.send(message)
        self.chunks.append(message.get("body", b""))
        if message.get("more_body"):
            return None
        body = b"".join(self.chunks)
        if self.gzipped:
            try:
                body = gzip.compress(with_head_tags(gzip.decompress(body)), compresslevel=6, mtime=0)
            except (OSError, EOFError):  # not gzip after all: sent as it came
                pass
        else:
            body = with_head_tags(body)
        headers = [(k, v) for k, v in self.start.get("headers") or [] if k.lower() != b"content-length"]
        await self.send({**self.start, "headers": [*headers, (b"content-length", str(len(body)).encode())]})
        return await self.send({"type": "http.response.body", "body": body})


# The house config (the PNG button's settings) and the modebar st.plotly_chart shows: no "Share chart" (plotly.js
# shows it by default, and it would send the figure to Chart Studio), no box or lasso selection (nothing reads it).
CONFIG = {**PLOTLY_CONFIG, "showSendToCloud": False, "modeBarButtonsToRemove": ["select2d", "lasso2d"]}


def to_bytes(spec: dict) -> bytes:
    """The figure's JSON as st.plotly_chart writes it (plotly.io.to_json, orjson when installed), with the config
    (CONFIG) beside data / layout / frames, as bytes: what the element is sent. A figure whose frames follow from
    its own traces (layout.meta.trail_frames: the optimizer race) goes without them; the element makes them."""
    meta = (spec.get("layout") or {}).get("meta")
    if isinstance(meta, dict) and meta.get("trail_frames") and spec.get("frames"):
        spec = {k: v for k, v in spec.items() if k != "frames"}
    return pio.to_json({**spec, "config": CONFIG}, validate=False).encode()


def selectable(payload: bytes) -> bytes:
    """A to_bytes() payload whose clicks are reported: the same JSON object with "select": true as its last member.
    A shared figure's payload (share) thus serves a chart with on_select too, without converting the figure again
    on every run (Optimizers' race figure: 0.1-0.2 s)."""
    return payload[:-1] + b',"select":true}'  # (to_bytes writes one JSON object, so the payload ends with "}")


def _rerun() -> None:
    """on_select="rerun": the click's own rerun is all there is to do (the page reads the selection)."""


def draw(payload: bytes, key: str | None = None, on_select=None) -> None:
    """One chart element: `payload` is a figure's to_bytes() (made selectable() where on_select is given: a
    callable, or "rerun"). Sent as raw bytes: no second JSON encoding."""
    callbacks = {} if on_select is None else {"on_selection_change": _rerun if on_select == "rerun" else on_select}
    _element()(data=payload, key=key, width="stretch", height="content", **callbacks)
