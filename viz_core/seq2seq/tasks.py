"""Toy sequence-to-sequence tasks and their tokenizers: copy, reverse, sort, addition, date reformatting.

Every task turns a random source (a list of token strings) into its target with `solve`. Sequences have variable
lengths and are padded per batch, so the padding mask matters. A fixed hash of the source splits examples into
training and held-out sets: held-out sources are never drawn for training.
"""
from __future__ import annotations

import calendar
import random
import re
import unicodedata
import zlib
from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError

SPECIALS = ("<pad>", "<bos>", "<eos>")
PAD, BOS, EOS = 0, 1, 2
DIGITS = tuple("0123456789")
MONTHS = tuple(calendar.month_abbr[1:])  # Jan .. Dec
HELDOUT_MOD = 10  # one source in HELDOUT_MOD is held out
SEPARATORS = re.compile(r"[,;、]")  # also read as spaces between tokens ("9, 3, 7" and "9，3，7" after NFKC)


def normalise(text: str | None) -> str:
    """What a person types -> plain text: NFKC folds full-width digits and punctuation (a Chinese keyboard's
    "９，３") into ASCII."""
    return unicodedata.normalize("NFKC", text or "")


class Vocab:
    """Token <-> id table; ids 0, 1, 2 are <pad>, <bos>, <eos>."""

    def __init__(self, tokens):
        self.itos = list(SPECIALS) + [t for t in tokens if t not in SPECIALS]
        self.stoi = {t: i for i, t in enumerate(self.itos)}

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, tokens) -> list[int]:
        return [self.stoi[t] for t in tokens]

    def decode(self, ids) -> list[str]:
        """Ids -> tokens, stopping at the first <eos> and skipping <pad>/<bos>."""
        out = []
        for i in ids:
            i = int(i)
            if i == EOS:
                break
            if i not in (PAD, BOS):
                out.append(self.itos[i])
        return out


def days_in_month(year: int, month: int) -> int:
    """Days of a month in the proleptic Gregorian calendar (leap years: divisible by 4, centuries only by 400)."""
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    return (31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)[month - 1]


def is_heldout(src) -> bool:
    """Stable train / held-out split on the source: crc32 of its tokens, one in HELDOUT_MOD is held out."""
    return zlib.crc32(" ".join(src).encode()) % HELDOUT_MOD == 0


@dataclass(frozen=True)
class RangeNote:
    """Well-formed input outside what a model was trained on: it is answered, and the page says so.

    what: "length" (tokens), "digits" (of a number), "year" or "leading_zero"; value is the input's, lo..hi the
    trained range (from the task parameters stored in the checkpoint). The i18n key is f"train.outside_{what}".
    """
    what: str
    value: int
    lo: int
    hi: int

    def params(self) -> dict:
        return {"value": self.value, "lo": self.lo, "hi": self.hi}


@dataclass
class Task:
    """Base class. Subclasses define the vocabularies, `random_source`, `solve` and how text is (de)tokenized."""
    name: str = ""
    min_len: int = 3               # shortest source (tokens)
    max_len: int = 10              # longest source (tokens)
    src_tokens: tuple = field(default=DIGITS, repr=False)
    tgt_tokens: tuple = field(default=DIGITS, repr=False)

    def __post_init__(self):
        if not 1 <= self.min_len <= self.max_len <= 24:
            raise InputError("train.bad_lengths", f"lengths must satisfy 1 <= min_len <= max_len <= 24, got "
                             f"{self.min_len}..{self.max_len}", lo=self.min_len, hi=self.max_len)
        self.src_vocab, self.tgt_vocab = Vocab(self.src_tokens), Vocab(self.tgt_tokens)

    # ---- data
    def random_source(self, rng: random.Random) -> list[str]:
        n = rng.randint(self.min_len, self.max_len)
        return [rng.choice(DIGITS) for _ in range(n)]

    def solve(self, src: list[str]) -> list[str] | None:
        raise NotImplementedError

    def sample(self, rng: random.Random, heldout: bool = False) -> tuple[list[str], list[str]]:
        """One (source, target) pair from the training split (or the held-out split)."""
        while True:
            src = self.random_source(rng)
            if is_heldout(src) == heldout:
                return src, self.solve(src)

    # ---- input lengths (accuracy is reported per length: the longest inputs are the hardest)
    @property
    def lengths(self) -> range:
        """The input lengths of the trained range, counted as length_of counts them."""
        return range(self.min_len, self.max_len + 1)

    def length_of(self, src: list[str]) -> int:
        """The input length a source counts as (here: its tokens)."""
        return len(src)

    def source_of_length(self, rng: random.Random, n: int) -> list[str]:
        """A random source of input length n, drawn as in training with its length fixed."""
        return [rng.choice(DIGITS) for _ in range(n)]

    # ---- limits
    @property
    def max_src_len(self) -> int:
        return self.max_len

    @property
    def max_tgt_len(self) -> int:
        return self.max_len

    # ---- text
    def tokenize(self, text: str) -> list[str]:
        """User text -> source tokens: tokens separated by spaces or commas, or one character per token when there
        is no separator ("3 1 4", "3, 1, 4" and "314" are the same input)."""
        text = SEPARATORS.sub(" ", normalise(text)).strip()
        tokens = text.split() if any(c.isspace() for c in text) else list(text)
        several = next((tok for tok in tokens if len(tok) > 1 and tok.isdigit()), None)
        if several is not None:
            raise InputError("train.one_digit", f"{several!r} is not one digit: this task works on single digits "
                             f"0-9, e.g. 3 1 4 or 314", token=several)
        return self.check_source(tokens)

    def check_source(self, tokens: list[str]) -> list[str]:
        if not tokens:
            raise InputError("train.empty_input", "type a source sequence, e.g. 3 1 4 1 5")
        bad = [t for t in tokens if t not in self.src_vocab.stoi or t in SPECIALS]
        if bad:
            raise InputError("train.unknown_token", f"unknown token {bad[0]!r}; this task accepts: "
                             f"{' '.join(self.src_tokens)}", token=bad[0], allowed=" ".join(self.src_tokens))
        return tokens

    def range_note(self, tokens: list[str]) -> RangeNote | None:
        """A note when well-formed tokens lie outside the trained range (here: the length), else None."""
        if not self.min_len <= len(tokens) <= self.max_len:
            return RangeNote("length", len(tokens), self.min_len, self.max_len)
        return None

    def detokenize(self, tokens: list[str]) -> str:
        return " ".join(tokens)

    @property
    def example(self) -> str:
        return "3 1 4 1 5 9 2 6 5 3"[: 2 * self.max_len - 1]

    def params(self) -> dict:
        return {"min_len": self.min_len, "max_len": self.max_len}


@dataclass
class Copy(Task):
    name: str = "copy"

    def solve(self, src):
        return list(src)


@dataclass
class Reverse(Task):
    name: str = "reverse"

    def solve(self, src):
        return list(reversed(src))


@dataclass
class Sort(Task):
    name: str = "sort"

    def solve(self, src):
        return sorted(src)


@dataclass
class Addition(Task):
    """'12+34' -> '46': two numbers of 1..max_len digits (max_len is the number of digits here)."""
    name: str = "addition"
    min_len: int = 1
    max_len: int = 2
    src_tokens: tuple = field(default=DIGITS + ("+",), repr=False)

    def __post_init__(self):
        if self.max_len > 6:
            raise InputError("train.bad_lengths", "addition takes at most 6 digits", lo=self.min_len,
                             hi=self.max_len)
        super().__post_init__()

    def random_source(self, rng):
        a, b = (str(rng.randint(0, 10 ** rng.randint(self.min_len, self.max_len) - 1)) for _ in range(2))
        return list(a) + ["+"] + list(b)

    def solve(self, src):
        text = "".join(src)
        parts = text.split("+")
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            return None
        return list(str(int(parts[0]) + int(parts[1])))

    @property
    def max_src_len(self):
        return 2 * self.max_len + 1

    @property
    def max_tgt_len(self):
        return self.max_len + 1

    def tokenize(self, text):
        """'12 + 34' -> ['1', '2', '+', '3', '4']: exactly two non-negative whole numbers joined by one '+'."""
        text = "".join(normalise(text).split())
        if text and not re.fullmatch(r"\d+\+\d+", text):
            raise InputError("train.add_format", f"type two non-negative whole numbers joined by one '+', e.g. "
                             f"{self.example}", example=self.example)
        return self.check_source(list(text))

    @property
    def lengths(self) -> range:
        """Digits of the longer number: 1..max_len (training draws numbers below 10^k, so short ones occur too)."""
        return range(1, self.max_len + 1)

    def length_of(self, src):
        return max(len(n) for n in "".join(src).split("+"))

    def source_of_length(self, rng, n):
        """A training-style source whose longer number has n digits (rejection sampling)."""
        return _draw_until(lambda: self.random_source(rng), lambda src: self.length_of(src) == n)

    def range_note(self, tokens):
        """More digits than trained (1..max_len per number), or a leading zero, which training never shows."""
        a, b = "".join(tokens).split("+")
        digits = max(len(a), len(b))
        if digits > self.max_len:
            return RangeNote("digits", digits, self.min_len, self.max_len)
        if any(len(n) > 1 and n[0] == "0" for n in (a, b)):
            return RangeNote("leading_zero", digits, self.min_len, self.max_len)
        return None

    def detokenize(self, tokens):
        return "".join(tokens)

    @property
    def example(self):
        return "12+34" if self.max_len >= 2 else "3+4"


@dataclass
class Date(Task):
    """'2024-03-15' -> '15 Mar 2024': day, month and year swap places, so the alignment is not monotonic."""
    name: str = "date"
    min_len: int = 10
    max_len: int = 10
    src_tokens: tuple = field(default=DIGITS + ("-",), repr=False)
    tgt_tokens: tuple = field(default=DIGITS + MONTHS, repr=False)
    first_year: int = 1900
    last_year: int = 2099

    def source_of_length(self, rng, n):
        return self.random_source(rng)  # every date has 10 characters

    def random_source(self, rng):
        y, m = rng.randint(self.first_year, self.last_year), rng.randint(1, 12)
        d = rng.randint(1, calendar.monthrange(y, m)[1])
        return list(f"{y:04d}-{m:02d}-{d:02d}")

    def solve(self, src):
        text = "".join(src)
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
            return None
        y, m, d = (int(p) for p in text.split("-"))
        if not 1 <= m <= 12 or not 1 <= d <= days_in_month(y, m):
            return None
        return list(str(d)) + [MONTHS[m - 1]] + list(f"{y:04d}")

    @property
    def max_tgt_len(self):
        return 7

    def tokenize(self, text):
        """'2024-03-15' -> its 10 characters; anything but a real calendar date in YYYY-MM-DD is refused."""
        text = "".join(normalise(text).split())
        if text and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
            raise InputError("train.date_format", f"type a date as YYYY-MM-DD, e.g. {self.example}",
                             example=self.example)
        tokens = self.check_source(list(text))
        y, m, d = (int(p) for p in text.split("-"))
        if not 1 <= m <= 12:
            raise InputError("train.date_bad_month", f"{text} is not a date: months run from 01 to 12",
                             date=text, month=f"{m:02d}")
        if not 1 <= d <= days_in_month(y, m):
            raise InputError("train.date_bad_day", f"{text} is not a date: {MONTHS[m - 1]} {y:04d} has "
                             f"{days_in_month(y, m)} days", date=text, days=days_in_month(y, m), month=m, year=y)
        return tokens

    def range_note(self, tokens):
        """Years outside first_year..last_year never appeared in training."""
        year = int("".join(tokens[:4]))
        if not self.first_year <= year <= self.last_year:
            return RangeNote("year", year, self.first_year, self.last_year)
        return None

    def detokenize(self, tokens):
        """Runs of digits are joined, words stand alone: ['1', '5', 'Mar', '2', ...] -> '15 Mar 2024'."""
        groups: list[str] = []
        for tok in tokens:
            if groups and tok.isdigit() and groups[-1][-1].isdigit():
                groups[-1] += tok
            else:
                groups.append(tok)
        return " ".join(groups)

    @property
    def example(self):
        return "2024-03-15"

    def params(self):
        return {}


TASKS = {"copy": Copy, "reverse": Reverse, "sort": Sort, "addition": Addition, "date": Date}


def make_task(name: str, **params) -> Task:
    """A task by name with optional parameters (min_len / max_len)."""
    if name not in TASKS:
        raise InputError("train.unknown_task", f"unknown task {name!r}; choose one of {', '.join(TASKS)}",
                         name=name, choices=", ".join(TASKS))
    return TASKS[name](**params)


def encode_batch(task: Task, pairs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(source, target) pairs -> padded id arrays src (B, N_src), tgt_in (B, N_tgt+1), tgt_out (B, N_tgt+1).

    tgt_in = <bos> y_1 .. y_n (teacher forcing), tgt_out = y_1 .. y_n <eos>; pads (id 0) fill each row.
    """
    n_src = max(len(s) for s, _ in pairs)
    n_tgt = max(len(t) for _, t in pairs) + 1
    src = np.zeros((len(pairs), n_src), dtype=np.int64)  # (B, N_src)
    tgt_in = np.zeros((len(pairs), n_tgt), dtype=np.int64)  # (B, N_tgt)
    tgt_out = np.zeros((len(pairs), n_tgt), dtype=np.int64)  # (B, N_tgt)
    for row, (s, t) in enumerate(pairs):
        ids = task.tgt_vocab.encode(t)
        src[row, : len(s)] = task.src_vocab.encode(s)
        tgt_in[row, : len(ids) + 1] = [BOS] + ids
        tgt_out[row, : len(ids) + 1] = ids + [EOS]
    return src, tgt_in, tgt_out


def _draw_until(draw, ok, tries: int = 10_000):
    """draw() until ok(result); after `tries` draws the last one is returned as it is."""
    for _ in range(tries - 1):
        src = draw()
        if ok(src):
            return src
    return draw()


def sample_of_length(task: Task, rng: random.Random, n: int, heldout: bool = True) -> tuple[list[str], list[str]]:
    """One (source, target) pair of input length n from one split. Short lengths have few sources (length 1: ten,
    one of them held out); should a split hold none of length n, a source of the other split is returned."""
    src = _draw_until(lambda: task.source_of_length(rng, n), lambda s: is_heldout(s) == heldout, tries=2_000)
    return src, task.solve(src)


def pairs_by_length(task: Task, n_per_length: int, rng: random.Random, heldout: bool = True
                    ) -> dict[int, list[tuple[list[str], list[str]]]]:
    """{length: n_per_length (source, target) pairs of that input length} for every length of the trained range."""
    return {n: [sample_of_length(task, rng, n, heldout) for _ in range(n_per_length)] for n in task.lengths}


def sample_batch(task: Task, rng: random.Random, n: int, heldout: bool = False):
    """n random pairs from one split, encoded with encode_batch."""
    return encode_batch(task, [task.sample(rng, heldout) for _ in range(n)])
