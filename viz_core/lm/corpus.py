"""The bilingual (English / Chinese) corpus of the character-level language model, built on every machine the same
way (fixed seed, no download) from two sources that are ours to use:

    explanations   every English and Chinese string of the app itself (viz_core/locales/*.json: the explanations
                   of attention, softmax, positions, training ...), cleaned of markdown, LaTeX and {placeholders}
    generated      simple sentences written from this project's word lists and templates (viz_core.lm.sentences)

One line per sentence or paragraph, each in one language. Duplicates are dropped, then every 10th line of each
language is held out (never trained on), so that a held-out loss can be measured per language.

    c = char_corpus()
    c.train            # the training text (both languages, lines shuffled with the seed)
    c.heldout["zh"]    # the held-out Chinese lines
    c.stats            # what it read: lines and characters per source and language
"""
from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from viz_core.i18n import GLOSSARY_MARK

from .sentences import sentence_pairs

LANGS = ("en", "zh")
LOCALES = Path(__file__).resolve().parents[1] / "locales"
HELDOUT_EVERY = 10          # every 10th line of a language is held out
N_PAIRS = 12000             # generated sentence pairs drawn (one English and one Chinese line each; ~4,800 unique)
MIN_CHARS = {"en": 24, "zh": 8}  # shorter strings are UI labels ("Seed", "种子"), not explanations
CJK = re.compile(r"[\u4e00-\u9fff]")  # a "Chinese" line without a Chinese character is a formula or a name


# ---------------------------------------------------------------- the app's own explanations
MATH = re.compile(r"\$\$.*?\$\$|\$[^$\n]*\$", re.S)
LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
PLACEHOLDER = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*(?::[^}]*)?\}")
STREAMLIT = re.compile(r":[a-z]+\[([^\]]*)\]")  # :blue[text] -> text
MARKUP = re.compile(r"\*\*|__|`|(?<! )\*|\*(?! )|^#+\s*|^>\s*|^\s*[-+]\s+", re.M)  # " * " (times) stays


def _plain_math(match: re.Match) -> str:
    """$d_k$ -> d_k; a formula with commands ($\\sqrt{d_k}$) is dropped: its words are not text."""
    body = match.group(0).strip("$").strip()
    return body if re.fullmatch(r"[A-Za-z0-9_ =.,+\-()]{1,12}", body) else ""


def clean(text: str) -> list[str]:
    """A UI string -> lines of plain text: no markdown, LaTeX, links, glossary marks or {placeholders} (those become
    a small number, so "at step {step}" still reads as a sentence). Brackets and "<" / ">" stay: [PAD], T < 1, <bos>."""
    text = MATH.sub(_plain_math, text)
    text = GLOSSARY_MARK.sub(lambda m: m[2] or m[1].replace("_", " "), text)  # the words shown (the id for a bare mark)
    text = LINK.sub(r"\1", text)
    text = STREAMLIT.sub(r"\1", text)
    text = PLACEHOLDER.sub("3", text)
    text = MARKUP.sub("", text)
    lines = (re.sub(r"[ \t]+", " ", line).strip() for line in text.split("\n"))
    return [re.sub(r" ([,.;:)])", r"\1", line) for line in lines if line]


def _strings(node, lang: str):
    """Every string of one language in a locale file's tree ({"key": {"en": ..., "zh": ...}}, possibly nested)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == lang and isinstance(value, str):
                yield value
            else:
                yield from _strings(value, lang)
    elif isinstance(node, list):
        for value in node:
            yield from _strings(value, lang)


@lru_cache(maxsize=2)
def explanation_lines(lang: str) -> tuple[str, ...]:
    """The app's own text in one language, cleaned, one line per paragraph (files in name order). A Chinese string
    may hold a line that is not Chinese ("Δ cos(A, B)", an English example sentence): such lines are left out."""
    lines = []
    for path in sorted(LOCALES.glob("*.json")):
        for text in _strings(json.loads(path.read_text(encoding="utf-8")), lang):
            lines += [line for line in clean(text) if len(line) >= MIN_CHARS[lang]
                      and (lang != "zh" or CJK.search(line))]
    return tuple(lines)


# ---------------------------------------------------------------- assembly
@dataclass(frozen=True)
class Corpus:
    train: str                                   # training text, one line per sentence or paragraph
    heldout: dict[str, str]                      # language -> held-out text (lines never trained on)
    stats: dict = field(default_factory=dict)    # what it read (see corpus_stats)


def _unique(lines, seen: set) -> list[str]:
    """The lines not seen before (in this source or an earlier one: a string may be the same in English and
    Chinese), in order; adds them to seen."""
    fresh = [line for line in dict.fromkeys(lines) if line not in seen]
    seen.update(fresh)
    return fresh


def _split(lines: list[str]) -> tuple[list[str], list[str]]:
    """(training lines, held-out lines): every HELDOUT_EVERY-th line is held out."""
    held = lines[HELDOUT_EVERY - 1::HELDOUT_EVERY]
    return [x for i, x in enumerate(lines) if (i + 1) % HELDOUT_EVERY], held


@lru_cache(maxsize=4)
def char_corpus(n_pairs: int = N_PAIRS, seed: int = 0) -> Corpus:
    """The corpus: the app's explanations plus n_pairs generated sentence pairs, split per language."""
    pairs, seen = sentence_pairs(n_pairs, seed), set()
    sources = {(lang, "explanations"): _unique(explanation_lines(lang), seen) for lang in LANGS}
    sources |= {(lang, "generated"): _unique((p[i] for p in pairs), seen) for i, lang in enumerate(LANGS)}
    train, held = [], {lang: [] for lang in LANGS}
    for (lang, _), lines in sources.items():
        tr, he = _split(lines)
        train += tr
        held[lang] += he
    random.Random(seed).shuffle(train)
    stats = corpus_stats(sources, held, n_pairs, seed)
    return Corpus("\n".join(train) + "\n", {k: "\n".join(v) + "\n" for k, v in held.items()}, stats)


def corpus_stats(sources: dict, held: dict, n_pairs: int, seed: int) -> dict:
    """Lines, characters and UTF-8 kilobytes per (language, source), the held-out share, and the totals."""
    def size(lines):
        text = "\n".join(lines)
        return {"lines": len(lines), "chars": len(text), "kb": round(len(text.encode()) / 1024, 1)}
    parts = {f"{lang}_{src}": size(lines) for (lang, src), lines in sources.items()}
    every = [line for lines in sources.values() for line in lines]
    return {"sources": ["viz_core/locales/*.json (the app's own explanations)",
                        f"viz_core/lm/sentences.py ({n_pairs} generated sentence pairs, seed {seed})"],
            "parts": parts, "heldout": {lang: size(held[lang]) for lang in LANGS},
            "heldout_every": HELDOUT_EVERY, "total": size(every)}


def bilingual_corpus(n_pairs: int = N_PAIRS, seed: int = 0) -> str:
    """The training text (kept for callers of the first corpus)."""
    return char_corpus(n_pairs, seed).train


# ---------------------------------------------------------------- prompts people type
EN_PROMPTS = ["Hello", "Hello, ", "Hi", "I like", "I like cats", "The attention", "The cat", "Good morning",
              "My name is", "Today", "What is attention?", "A Transformer", "The model", "We", "Thank you",
              "In 2017, ", "Softmax", "The query", "Beijing is", "How are you?", "I have 3", "Self-attention",
              "The teacher", "Tom and Lily", "Once upon a time"]
ZH_PROMPTS = ["你好", "你好，", "注意力", "我喜欢", "我喜欢猫", "今天", "今天天气", "谢谢", "早上好", "我的朋友",
              "老师", "模型", "注意力机制", "自注意力", "我叫", "北京", "中国", "学生", "你好吗？", "我有3个",
              "这个模型", "查询和键", "Transformer 是", "小猫", "我们"]


def bilingual_prompts() -> list[tuple[str, str]]:
    """50 prompts of the kinds students type, as (language, prompt): 25 English then 25 Chinese (greetings,
    words, phrases with capitals, digits and punctuation; no emoji)."""
    return [("en", p) for p in EN_PROMPTS] + [("zh", p) for p in ZH_PROMPTS]
