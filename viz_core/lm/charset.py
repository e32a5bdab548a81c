"""The character model's vocabulary: every character a person types is accepted.

    printable ASCII (95) + newline + every other character that the corpus uses at least twice (Chinese
    characters and punctuation, Greek letters, arrows ...) + one unknown token, UNK = "\ufffd" (�)

A character outside the vocabulary (an emoji, a rare Chinese character) is read as UNK: the model still runs, and
the page says which characters were replaced. Corpus characters seen only once are UNK in the training text too,
so the model has learnt what an unknown character looks like in context.
"""
from __future__ import annotations

import string
from collections import Counter

UNK = "\ufffd"                       # the replacement character, shown as �
ASCII = [c for c in string.printable if c.isprintable()]  # the 95 printable ASCII characters, space included
MIN_COUNT = 2                         # a non-ASCII character needs this many uses in the corpus


def vocabulary(text: str, min_count: int = MIN_COUNT) -> list[str]:
    """itos: newline, printable ASCII, the corpus's other characters used at least min_count times (in code-point
    order), and UNK last."""
    counts = Counter(text)
    extra = sorted(c for c, n in counts.items() if n >= min_count and c not in ASCII and c not in "\n" + UNK)
    return ["\n"] + sorted(ASCII) + extra + [UNK]


def unknown_chars(text: str, known) -> list[str]:
    """The distinct characters of text outside the vocabulary `known` (a set or dict), in order of appearance."""
    return list(dict.fromkeys(c for c in text if c not in known))


def never_generated(tokenizer) -> tuple[int, ...]:
    """Token ids a model should never write: UNK (the last token) of a "chars_unk" tokenizer, none otherwise."""
    return (tokenizer.size - 1,) if tokenizer.kind == "chars_unk" else ()
