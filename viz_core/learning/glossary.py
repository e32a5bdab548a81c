"""The glossary: the terms a student meets on the way through the app, in the order of learning, and for each the
page (and the state of that page) where the app shows it best.

Names, one-line definitions and link labels are UI strings (locales/glossary.json: "<id>_name", "<id>_def",
"<id>_where", English and Chinese). Our own texts mark a term's first use as [[softmax]] or [[softmax|shown text]];
app_pages/_ui turns a mark into a link to that entry (ui.glossed).

    term("softmax").page          # "mechanics"
    term("softmax").link_params   # {"section": "steps"}: the query parameters that open it there
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Term:
    id: str                                 # stable id: the [[mark]], ?term= and the locale keys use it
    page: str                               # app page stem (app_pages/<page>.py) that shows the term
    params: tuple[tuple[str, str], ...]     # that page's query parameters (as text) that open it where it shows it

    @property
    def link_params(self) -> dict[str, str]:
        """The params as a dict, for ui.link / st.page_link."""
        return dict(self.params)


def _t(id_: str, page: str, **params: str) -> Term:
    return Term(id_, page, tuple(params.items()))


TERMS: tuple[Term, ...] = (  # the order of learning: from text to tokens, through attention, to whole models
    _t("token", "attention", view="head"),
    _t("embedding", "anatomy", section="path"),
    _t("query", "mechanics", section="steps"),
    _t("key", "mechanics", section="steps"),
    _t("value", "mechanics", section="steps"),
    _t("logit", "language_model", tab="generate"),
    _t("softmax", "mechanics", section="steps"),
    _t("attention_weight", "attention", view="head"),
    _t("scaling", "scaling", part="dist"),
    _t("mask", "mechanics", section="masks"),
    _t("causal_mask", "mechanics", section="masks", kind="causal"),
    _t("padding_mask", "mechanics", section="masks", kind="padding"),
    _t("cross_attention", "mechanics", section="cross"),
    _t("head", "attention", view="grid"),
    _t("gqa", "mechanics", section="variants"),
    _t("positional_encoding", "positions", part="heatmap"),
    _t("residual", "anatomy", section="placement"),
    _t("layer_norm", "anatomy", section="norms"),
    _t("ffn", "anatomy", section="ffn"),
    _t("dropout", "anatomy", section="dropout"),
    _t("cross_entropy", "anatomy", section="smoothing"),
    _t("label_smoothing", "anatomy", section="smoothing"),
    _t("optimizer", "optimizers", tab="race"),
    _t("learning_rate", "optimizers", tab="schedules"),
    _t("kv_cache", "language_model", tab="cache"),
    _t("induction_head", "language_model", tab="induction"),
    _t("attention_sink", "attention", view="sinks"),
    _t("logit_lens", "language_model", tab="decoder", dec_view="lens"),
)

_BY_ID = {t.id: t for t in TERMS}


def term(id_: str) -> Term:
    """The term with this id; KeyError for an id the glossary does not have."""
    try:
        return _BY_ID[id_]
    except KeyError:
        raise KeyError(f"no glossary term {id_!r}; add it to viz_core/learning/glossary.py") from None


def ids() -> tuple[str, ...]:
    """Every term's id, in the order of learning."""
    return tuple(_BY_ID)
