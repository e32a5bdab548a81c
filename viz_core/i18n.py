"""UI strings in English and Chinese.

Strings live in viz_core/locales/<namespace>.json, one file per page (plus "common"), as
{"key": {"en": "...", "zh": "..."}}. A key is looked up as "<namespace>.<key>", e.g. t("attention.title", "zh").
Placeholders use str.format: t("attention.truncated", "en", n=512).
"""
from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

LANGUAGES = ("en", "zh")
LANGUAGE_NAMES = {"en": "English", "zh": "中文"}
LOCALES_DIR = Path(__file__).parent / "locales"
# a glossary mark in our own texts: [[softmax]] or [[softmax|the softmax]] (the pages draw it as a link to that term
# of the glossary, app_pages/_ui.glossed; the language model's corpus keeps the words shown, viz_core.lm.corpus)
# between two sentences: a space in English; none in Chinese, whose full stop (。！？) carries its own room
SENTENCE_GAP = {"en": " ", "zh": ""}
GLOSSARY_MARK = re.compile(r"\[\[([a-z_]+)(?:\|([^\]]+))?\]\]")


@lru_cache(maxsize=None)
def namespace(name: str) -> dict[str, dict[str, str]]:
    """All strings of one namespace (file locales/<name>.json)."""
    path = LOCALES_DIR / f"{name}.json"
    if not path.exists():
        raise KeyError(f"no locale file {path.name}; add it to viz_core/locales/")
    return json.loads(path.read_text(encoding="utf-8"))


def namespaces() -> list[str]:
    return sorted(p.stem for p in LOCALES_DIR.glob("*.json"))


def normalise_lang(lang: str | None) -> str:
    """'zh', 'zh-CN', 'ZH' -> 'zh'; anything unknown -> 'en'."""
    lang = (lang or "en").lower()
    return "zh" if lang.startswith("zh") else "en"


def t(key: str, lang: str = "en", **kwargs) -> str:
    """Translate 'namespace.key' into lang, filling {placeholders} from kwargs. A value may itself be bilingual,
    {"en": ..., "zh": ...}: the one of lang is used (e.g. an error's wording of what a value must be)."""
    ns, _, name = key.partition(".")
    lang = normalise_lang(lang)
    try:
        text = namespace(ns)[name][lang]
    except KeyError:
        raise KeyError(f"missing UI string {key!r} ({lang}); add it to viz_core/locales/{ns}.json") from None
    if not kwargs:
        return text
    values = {k: v[lang] if isinstance(v, dict) and set(v) == set(LANGUAGES) else v for k, v in kwargs.items()}
    return text.format(**values)


def sentences(parts, lang: str = "en") -> str:
    """Sentences written one after another as the language writes them: "One. Two." in English, "一。二。" in Chinese
    (no space after a Chinese full stop). Empty parts are left out."""
    return SENTENCE_GAP[normalise_lang(lang)].join(p for p in parts if p)
