"""Head finder: every head of a model scored over a corpus (table and layer x head map), and one head's card.

Read top to bottom: helpers that take what they draw as arguments, then the script (at the end) calls them in order.
"""
from functools import partial

import numpy as np
import pandas as pd
import streamlit as st

from app_pages import _ui as ui
from app_pages._ui import head_finder as finder
from app_pages._ui import model_picker, models
from viz_core.io import export
from viz_core.errors import InputError
from viz_core.plots import attention as attention_plots
from viz_core.plots import head_finder as plots
from viz_core.pretrained.head_finder import REPEAT_SCORES, SCORES, HeadFinder, split_sentences
from viz_core.pretrained.result import MAX_CHARS

CORPORA = ("bundled", "own")
FORMATS = {"entropy": ".2f", "distance": ".2f"}  # the others are shares of attention (0..1)
FORMULAS = {
    "previous": r"\mathrm{prev} = \operatorname{mean}_{i \ge 1} A_{i,\,i-1}",
    "induction": r"\mathrm{ind} = \operatorname{mean}_{i:\,\exists j<i,\,x_j = x_i}\;\sum_{k \le i,\; x_{k-1} = x_i,"
                 r"\; k-1 < i} A_{i,k}",
    "duplicate": r"\mathrm{dup} = \operatorname{mean}_{i:\,\exists j<i,\,x_j = x_i}\;\sum_{j < i,\; x_j = x_i} A_{i,j}",
    "self": r"\mathrm{self} = \operatorname{mean}_{i \ge 1} A_{i,i}",
    "first": r"\mathrm{first} = \operatorname{mean}_{i \ge 1} A_{i,0}",
    "entropy": r"H = \operatorname{mean}_{i \ge 1}\Big(-\sum_j A_{i,j}\log_2 A_{i,j}\Big)",
    "distance": r"D = \operatorname{mean}_{i \ge 1}\sum_j A_{i,j}\,|i-j|",
    "max": r"M = \operatorname{mean}_{i \ge 1}\max_j A_{i,j}",
}
t = ui.t


def fmt(score: str, value: float) -> str:
    """A score's value: a share of attention to 3 decimals, or, below 0.001, in scientific notation (not "0.000")."""
    if not np.isfinite(value):
        return "—"
    small = score not in FORMATS and value != 0 and abs(value) < 1e-3
    return format(value, ".1e" if small else FORMATS.get(score, ".3f"))


# ---------------------------------------------------------------- model and corpus
def model_info(name: str):
    """(name, info) of the chosen model; one that cannot be loaded says why, and the packaged one is used."""
    try:
        return name, models.info(name)
    except InputError as exc:
        ui.show_error(exc)
        st.caption(t("attention.fallback"))
        return "", models.info("")


def corpus_box() -> str | None:
    """The corpus: None for the bundled sentences, else the pasted text (stops the page while it is empty)."""
    corpus = ui.segmented(t("head_finder.corpus"), CORPORA, "corpus", format_func=lambda c: t(f"head_finder.corpus_{c}"))
    if corpus == "bundled":
        return None
    own = ui.text(t("head_finder.own_text"), "own", t("head_finder.own_default"), area=True, max_chars=MAX_CHARS, height=140,
                  help=t("head_finder.own_help", sentences=400, chars=MAX_CHARS))
    if not split_sentences(own):
        st.info(t("head_finder.own_empty"))
        st.stop()
    return own


def wait_for(name: str, own: str | None) -> HeadFinder:
    """The finished pass; until then its progress (the page reruns when it ends) and nothing else."""
    try:
        run = finder.run(name, own)
    except InputError as exc:
        ui.show_error(exc)
        st.stop()
    if run.state == "failed":
        st.error(t("common.unexpected_error", error_id=run.error_id or "-"))
        st.stop()
    if run.state != "done":
        finder.progress(run.key, lambda r: t("head_finder.reading", done=r.done, total=r.total or "?") if
                        r.state == "running" else t("head_finder.waiting"))
        st.caption(t("head_finder.once"))
        st.stop()
    return run.result


def read_note(res: HeadFinder, kind: str) -> None:
    """How many sentences and tokens each score read, and what was left out."""
    by_source = res.read_by_source()
    parts = [t(f"head_finder.source_{s}", n=n, tokens=k) for s, (n, k) in by_source.items() if s != "repeat"]
    text_read, repeat_read = res.read["previous"], res.read["induction"]
    st.caption(ui.sentences(
        t("head_finder.read_text", parts=t("attention.list_sep").join(parts) or t("head_finder.read_none"),
          queries=text_read.queries),
        t("head_finder.read_repeat", n=repeat_read.sentences, tokens=repeat_read.tokens, queries=repeat_read.queries)
        if repeat_read.sentences else t("head_finder.no_repeat")))
    left = {s: n for s, n in res.skipped.items() if n}
    if left:
        st.caption(t("head_finder.skipped", parts=t("attention.list_sep").join(
            t(f"head_finder.skipped_{s}", n=n) for s, n in left.items())))
    if kind != "decoder":
        st.info(t("head_finder.encoder_note"))


# ---------------------------------------------------------------- every head
def open_head(layer: int, head: int) -> None:
    ui.set_value("layer", layer)
    ui.set_value("head", head)


def map_clicked(key: str, n_heads: int) -> None:
    points = st.session_state[key].selection.get("points", [])
    if points and "point_index" in points[0] and points[0].get("curve_number", 1) == 1:
        idx = int(points[0]["point_index"])
        open_head(idx // n_heads, idx % n_heads)


def table_clicked(key: str, order: np.ndarray, n_heads: int) -> None:
    rows = st.session_state[key].selection.get("rows", [])
    if rows:
        idx = int(order[rows[0]])
        open_head(idx // n_heads, idx % n_heads)


def head_order(res: HeadFinder, score: str, ascending: bool) -> np.ndarray:
    """Flat head indices (layer * H + head) sorted by a score (NaN last), ties in layer-then-head order."""
    v = res.scores[score].astype(np.float64).ravel()
    v = np.where(np.isnan(v), np.inf if ascending else -np.inf, v)
    return np.argsort(v if ascending else -v, kind="stable")


def natural_order(score: str) -> str:
    """Where a score's heads of interest are: the top for every score but entropy (a sharp head is a low one)."""
    return "asc" if score == "entropy" else "desc"


def new_score(res: HeadFinder) -> None:
    """Callback: another score shows its heads of interest first and opens the first of them."""
    score = ui.value("score", "previous")
    ui.set_value("order", natural_order(score))
    top = int(head_order(res, score, natural_order(score) == "asc")[0])
    open_head(top // res.n_heads, top % res.n_heads)


def score_table(res: HeadFinder, score: str, ascending: bool, layer: int, head: int) -> None:
    """Every head, sorted by the chosen score; a click on a row opens that head."""
    order = head_order(res, score, ascending)
    rows = res.table()
    frame = pd.DataFrame([rows[i] for i in order])
    frame.columns = [t("attention.layer"), t("attention.head"), *(t(f"head_finder.score_{s}") for s in SCORES)]
    fmt_cols = {t(f"head_finder.score_{s}"): st.column_config.NumberColumn(format="%.4g" if s not in FORMATS else "%.2f")
                for s in SCORES}
    st.dataframe(frame, key="finder_table", on_select=partial(table_clicked, "finder_table", order, res.n_heads),
                 selection_mode="single-row", hide_index=True, height=min(36 + 35 * len(frame), 420),
                 column_config=fmt_cols, width="stretch")
    st.caption(t("head_finder.table_hint"))


def score_map(res: HeadFinder, score: str, layer: int, head: int) -> None:
    values = res.scores[score]
    if not np.isfinite(values).any():
        st.info(t("head_finder.no_values"))
        return
    fig = attention_plots.stats_map(values, title=t(f"head_finder.score_{score}"), value_name=t(f"head_finder.score_{score}"),
                                    layer_label=t("attention.layer"), head_label=t("attention.head"),
                                    selected=(layer, head), value_format=FORMATS.get(score, ".3f"))
    ui.plot(fig, key="finder_map", on_select=partial(map_clicked, "finder_map", res.n_heads))
    st.caption(t("head_finder.map_hint"))


# ---------------------------------------------------------------- one head
def standing(res: HeadFinder, layer: int, head: int) -> None:
    """The head's value, rank and percentile for every score, against the model's other heads."""
    n = res.n_layers * res.n_heads
    labels, values, ranks, pct, rows = [], [], [], [], []
    for s in SCORES:
        all_v = res.scores[s].ravel()
        v = float(res.scores[s][layer, head])
        finite = all_v[np.isfinite(all_v)]
        share = float((finite <= v).mean() * 100) if finite.size and np.isfinite(v) else 0.0
        rank = int(res.rank(s)[layer, head])
        labels.append(t(f"head_finder.score_{s}"))
        values.append(fmt(s, v))
        ranks.append(f'{t("head_finder.col_rank")}{t("common.colon")}{t("head_finder.rank_of", rank=rank, n=n)}')
        pct.append(share)
        rows.append({t("head_finder.col_score"): t(f"head_finder.score_{s}"), t("head_finder.col_value"): fmt(s, v),
                     t("head_finder.col_rank"): t("head_finder.rank_of", rank=rank, n=n),
                     t("head_finder.col_median"): fmt(s, float(np.median(finite)) if finite.size else float("nan"))})
    ui.table(rows)
    ui.plot(plots.standing_bars(pct, labels, values, ranks, title=t("head_finder.standing_title"),
                                x_title=t("head_finder.percentile")), key="finder_standing")
    st.caption(t("head_finder.standing_explain"))


def examples(res: HeadFinder, score: str, layer: int, head: int, name: str) -> None:
    """The head's most active places in the corpus for the chosen score, with their context."""
    found = res.examples(score, layer, head)
    st.markdown(f"**{t('head_finder.examples_title', score=t(f'head_finder.score_{score}'))}**")
    if not found:
        st.info(t("head_finder.no_examples"))
        return
    records = [{"rank": i + 1, "source": res.sentences[e.sentence].source, "query_position": e.query,
                "query_token": res.sentences[e.sentence].tokens[e.query], "key_position": e.key,
                "key_token": res.sentences[e.sentence].tokens[e.key], "value": e.value, "context": res.context(e)}
               for i, e in enumerate(found)]
    shown = pd.DataFrame([{t("head_finder.col_example"): r["rank"], t("head_finder.col_source"): t(f"head_finder.src_{r['source']}"),
                           t("attention.query"): r["query_token"], t("attention.key"): r["key_token"],
                           t("head_finder.col_value"): fmt(score, r["value"]), t("head_finder.col_context"): r["context"]}
                          for r in records])
    st.dataframe(shown, hide_index=True, width="stretch", key="finder_examples")
    st.caption(t("head_finder.examples_explain"))
    if score in REPEAT_SCORES:
        st.caption(t("head_finder.examples_repeat"))
    ui.download(t("head_finder.download_examples"), export.records_csv(records),
                f"head_l{layer}_h{head}_{score}.csv", "text/csv", key="finder_dl_examples")


def probe(res: HeadFinder, name: str, layer: int, head: int) -> None:
    """What one token of the visitor's own text attends to, and what attends to it, in this head."""
    st.markdown(f"**{t('head_finder.probe_title')}**")
    text = ui.text(t("head_finder.probe_text"), "probe", t("head_finder.probe_default"), max_chars=2000)
    try:
        r = models.attention(name, text)
    except InputError as exc:
        ui.show_error(exc)
        return
    w = r.weights[layer, head]  # (N, N): the encoder's self-attention for an encoder-decoder model
    tokens = r.tokens
    options = list(range(len(tokens)))
    pos = ui.selectbox(t("head_finder.probe_token"), options, "token", min(1, len(tokens) - 1),
                       format_func=lambda i: f"{i} · {tokens[i]}")
    c1, c2 = st.columns(2)
    with c1:
        ui.plot(plots.token_bars(tokens, w[pos], pos, title=t("head_finder.attends_to", token=tokens[pos]),
                                 x_title=t("attention.key"), value_name=t("attention.weight")), key="finder_to")
    with c2:
        ui.plot(plots.token_bars(tokens, w[:, pos], pos, title=t("head_finder.attended_by", token=tokens[pos]),
                                 x_title=t("attention.query"), value_name=t("attention.weight")), key="finder_by")
    st.caption(t("head_finder.probe_explain"))
    ui.link("attention", t("head_finder.open_attention", layer=layer, head=head),
            {**({"model": name} if name else {}), "text": text, "layer": layer, "head": head, "view": "head"},
            icon=":material/grid_on:")


def head_card(res: HeadFinder, score: str, name: str, model_name: str, layer: int, head: int) -> None:
    st.subheader(t("head_finder.card_title", layer=layer, head=head, model=model_name))
    standing(res, layer, head)
    st.caption(t("head_finder.share_head"))
    examples(res, score, layer, head, name)
    ui.plot(plots.max_weight_histogram(res.hist[layer, head], title=t("head_finder.hist_title"),
                                       x_title=t("head_finder.hist_x"), y_title=t("head_finder.hist_y")), key="finder_hist")
    st.caption(t("head_finder.hist_explain"))
    probe(res, name, layer, head)


# ---------------------------------------------------------------- page
ui.setup("head_finder")
st.markdown(ui.glossed(t("head_finder.intro")))
name, m = model_info(model_picker.picker("head_finder.model_other"))
if not models.packaged_gate(name):  # a packaged decoder converting in the background: its progress, nothing else
    st.stop()
own = corpus_box()
res = wait_for(name, own)
read_note(res, m.kind)
c_score, c_order = st.columns([2, 1])
score = ui.selectbox(t("head_finder.sort_by"), SCORES, "score", "previous", container=c_score,
                     format_func=lambda s: t(f"head_finder.score_{s}"), on_change=partial(new_score, res))
ascending = ui.segmented(t("head_finder.order"), ("desc", "asc"), "order", natural_order(score), container=c_order,
                         format_func=lambda o: t(f"head_finder.order_{o}")) == "asc"
st.markdown(t(f"head_finder.explain_{score}"))
ui.latex(FORMULAS[score])
top = int(head_order(res, score, ascending)[0])
c_layer, c_head = st.columns(2)
layer = ui.selectbox(t("attention.layer"), range(res.n_layers), "layer", top // res.n_heads, container=c_layer)
head = ui.selectbox(t("attention.head"), range(res.n_heads), "head", top % res.n_heads, container=c_head)
tab_map, tab_table = st.tabs([t("head_finder.tab_map"), t("head_finder.tab_table")])
with tab_map:
    score_map(res, score, layer, head)
with tab_table:
    score_table(res, score, ascending, layer, head)
    ui.download(t("head_finder.download_table"), export.records_csv(res.table()), "head_scores.csv", "text/csv",
                key="finder_dl_table")
head_card(res, score, name, m.name, layer, head)
